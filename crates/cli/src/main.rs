//! `vantage`: see and control the response time clients of a TCP/HTTP
//! service really perceive.
//!
//! Subcommands:
//! * `vantage sim <scenario.toml>` — run one simulation scenario.
//! * `vantage reproduce [study]` — rerun a paper's experiments and compare
//!   with its published results.
//! * `vantage profiles` — list the client SYN retransmission profiles.
//! * `vantage testbed run <spec.toml>` / `vantage testbed clean` — the
//!   one-machine network testbed.
//! * `vantage wan` — the testbed's WAN emulator on its own.
//! * `vantage cpa` — critical-path analysis of packet traces.
//! * `vantage certes estimate` — client-perceived response time from
//!   server counters or a capture.
//! * `vantage completions SHELL`, `vantage man [DIR]` — shell completions
//!   and manual pages, generated from these definitions.
//!
//! Conventions shared by every subcommand: inputs are positional (old
//! flags kept as aliases); `--json` prints one JSON document, `--jsonl` a
//! stream of JSON Lines; times in machine output are seconds (`_s`). A
//! reader that leaves early (`| head`) ends nothing: the run finishes,
//! writes its files and exits with its own status (see `vantage_sys::stdout_relay`).

mod certes;
mod cpa;
mod gate;
mod proxy;
mod testbed;
mod wan;

/// mimalloc instead of glibc's malloc: `vantage cpa` allocates per
/// connection and frees on another thread (pipelined stages); measured in
/// bench/cpa/README.md.
#[global_allocator]
static ALLOCATOR: Allocator = Allocator;

/// mimalloc, called without an alignment where none beyond its own is
/// asked. `mimalloc::MiMalloc` passes every request to `mi_malloc_aligned`,
/// whose fast path covers blocks up to 1 KiB only: a larger one (hyper's
/// 8 KiB read buffers, reallocated per message) takes its generic path and
/// often over-allocates to align. Every mimalloc block is a multiple of
/// the word size at a word-aligned address, so a layout aligned to at most
/// a word is served by `mi_malloc` as it is; a larger alignment still goes
/// through `MiMalloc`. Measured in bench/proxy/README.md.
struct Allocator;

/// The alignment every mimalloc block has (its size classes are whole
/// words).
const WORD: usize = std::mem::size_of::<usize>();

// SAFETY: each method keeps `GlobalAlloc`'s contract by delegating to
// mimalloc: a pointer from `mi_malloc`/`mi_zalloc`/`mi_realloc` is aligned
// to a word, so it is used only for layouts aligned to at most a word;
// `mi_free` and `mi_realloc` take any block mimalloc gave, aligned or not.
unsafe impl std::alloc::GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        if layout.align() <= WORD {
            // SAFETY: as above; `layout.size()` is not zero (the caller's
            // contract).
            unsafe { libmimalloc_sys::mi_malloc(layout.size()).cast() }
        } else {
            // SAFETY: the caller's contract, passed on.
            unsafe { mimalloc::MiMalloc.alloc(layout) }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        if layout.align() <= WORD {
            // SAFETY: as in `alloc`.
            unsafe { libmimalloc_sys::mi_zalloc(layout.size()).cast() }
        } else {
            // SAFETY: the caller's contract, passed on.
            unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: `ptr` came from this allocator, i.e. from mimalloc.
        unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        if layout.align() <= WORD {
            // SAFETY: `ptr` came from mimalloc; the new block is word-aligned,
            // which is all `layout` asks.
            unsafe { libmimalloc_sys::mi_realloc(ptr.cast(), new_size).cast() }
        } else {
            // SAFETY: the caller's contract, passed on.
            unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) }
        }
    }
}

use anyhow::{bail, Context, Result};
use clap::{CommandFactory, Parser, Subcommand};
use std::path::PathBuf;
use vantage_core::tcp::{syn_schedule, ClientMix};
use vantage_lab::provenance::{self, RunRecord};
use vantage_lab::{studies, RunOptions, ScenarioFile, Study, StudyOutcome};

#[derive(Parser)]
#[command(name = "vantage", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one simulation scenario file (any study: abacus, certes, sbac) and print its results.
    Sim {
        /// Scenario file (TOML), e.g. scenarios/abacus/fig8-burstiness.toml or scenarios/certes/test-a-steady.toml.
        scenario: PathBuf,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Rerun every study (or one) and compare with the papers' results.
    Reproduce {
        /// Study to run (default: all). Known: abacus, certes, sbac, ssbt,
        /// cpa (tcpeval's Section 4 on the testbed: needs root, nginx and
        /// tcpdump, else reported as not run).
        study: Option<String>,
        /// Do not run the testbed study (cpa): it is reported as not run.
        #[arg(long)]
        skip_testbed: bool,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// List the built-in client SYN retransmission profiles and mixtures.
    Profiles,
    /// One-machine network testbed: namespaces, WAN emulator, real servers
    /// and clients with client-side ground truth (needs root).
    Testbed {
        #[command(subcommand)]
        command: testbed::TestbedCommand,
    },
    /// Live SYN gate: the Abacus paper's SYN filters in front of a real
    /// listener, through NFQUEUE (run needs root).
    Gate {
        #[command(subcommand)]
        command: gate::GateCommand,
    },
    /// HTTP reverse proxy with session-based admission control (SBAC).
    Proxy {
        #[command(subcommand)]
        command: proxy::ProxyCommand,
    },
    /// Emulate a WAN (delay, jitter, loss, rate) on the packets this
    /// namespace forwards (needs root).
    Wan(wan::WanArgs),
    /// Critical-path analysis of the TCP/HTTP transactions in packet traces:
    /// where each transaction's time went (server, client, propagation,
    /// network variation, losses).
    Cpa(cpa::CpaArgs),
    /// Certes: client-perceived response time — SYN retries and give-ups
    /// included — estimated from server counters or a server-side capture.
    Certes(certes::CertesArgs),
    /// Print the completion script for a shell (e.g. `vantage completions
    /// bash > /etc/bash_completion.d/vantage`).
    Completions {
        /// Shell to complete for.
        shell: clap_complete::Shell,
    },
    /// Write the manual pages, one per subcommand, into DIR (e.g.
    /// `vantage man /usr/local/share/man/man1`); without DIR, print
    /// vantage(1).
    Man {
        /// Directory for the pages (created if missing).
        dir: Option<PathBuf>,
    },
}

#[derive(clap::Args)]
struct OutputArgs {
    /// Fewer repetitions and a shorter horizon (each scenario says how many).
    #[arg(long)]
    quick: bool,
    /// Print all results as one JSON document instead of tables.
    #[arg(long)]
    json: bool,
    /// Directory for CSV files, SVG plots and manifest.json; a quick run
    /// writes under OUT/quick, `sim` under OUT/sim/<scenario file name>.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Exit with status 1, after writing every file, when a statement of
    /// the papers does not hold.
    #[arg(long)]
    check: bool,
    /// Worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
}

fn main() {
    let relay = vantage_sys::stdout_relay::StdoutRelay::start();
    let status = match Cli::try_parse() {
        Ok(cli) => match run(cli) {
            Ok(()) => 0,
            Err(err) if err.is::<ExitStatus>() => {
                err.downcast_ref::<ExitStatus>().map_or(1, |s| s.0)
            }
            Err(err) => {
                eprintln!("vantage: error: {}", error_chain(&err));
                1
            }
        },
        Err(err) => {
            // --help and --version print here too (status 0).
            let _ = err.print();
            err.exit_code()
        }
    };
    drop(relay);
    std::process::exit(status);
}

/// The error and its causes, each cause added only when the message does not
/// already quote it (many library errors include their source's text).
fn error_chain(err: &anyhow::Error) -> String {
    let mut message = err.to_string();
    for cause in err.chain().skip(1) {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
    }
    message
}

/// An error already reported on standard error, that only sets the exit
/// status (e.g. `cpa` on a cut-off capture).
#[derive(Debug)]
pub struct ExitStatus(pub i32);

impl std::fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit status {}", self.0)
    }
}

impl std::error::Error for ExitStatus {}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Sim { scenario, output } => {
            threads(&output)?;
            let text = read_text(&scenario, "scenario")?;
            let origin = scenario.display().to_string();
            let study = studies::for_file(&text, &origin)?;
            let root = provenance::sim_root(&output.out, output.quick, &scenario)?;
            let record = RunRecord::start(command_line(), output.quick, Some(&scenario));
            let files = [ScenarioFile {
                origin: &origin,
                text: &text,
            }];
            let outcome = study.run(&files, &run_options(&output, &root))?;
            let manifest = record.manifest(&[(study.name(), files.as_slice())]);
            manifest.write(&root.join(study.name()))?;
            manifest.write(&root)?;
            let outcomes = [(study.name(), outcome)];
            vantage_lab::report::html::write_report(&root, &outcomes)?;
            finish(&outcomes, &output, &root)
        }
        Command::Reproduce {
            study,
            skip_testbed,
            output,
        } => {
            threads(&output)?;
            let chosen: Vec<&dyn Study> = match &study {
                None => studies::all().to_vec(),
                Some(name) => vec![studies::by_name(name)?],
            };
            let root = provenance::results_root(&output.out, output.quick);
            let record = RunRecord::start(command_line(), output.quick, None);
            let options = run_options(&output, &root);
            let mut outcomes = Vec::new();
            let mut ran: Vec<(&str, Vec<ScenarioFile>)> = Vec::new();
            for study in chosen {
                if !output.json {
                    println!("\n# Study `{}` — {}\n", study.name(), study.paper());
                }
                let outcome = if skip_testbed && study.name() == studies::cpa::NAME {
                    studies::cpa::not_run("--skip-testbed was given", &options)?
                } else {
                    study.reproduce(&options)?
                };
                outcomes.push((study.name(), outcome));
                let files: Vec<ScenarioFile> = study
                    .scenario_files()
                    .iter()
                    .map(|(origin, text)| ScenarioFile { origin, text })
                    .collect();
                record
                    .manifest(&[(study.name(), files.as_slice())])
                    .write(&root.join(study.name()))?;
                ran.push((study.name(), files));
            }
            let all: Vec<(&str, &[ScenarioFile])> = ran
                .iter()
                .map(|(name, files)| (*name, files.as_slice()))
                .collect();
            record.manifest(&all).write(&root)?;
            vantage_lab::report::html::write_report(&root, &outcomes)?;
            finish(&outcomes, &output, &root)
        }
        Command::Testbed { command } => testbed::run(command),
        Command::Gate { command } => gate::run(command),
        Command::Proxy { command } => proxy::run(command),
        Command::Wan(args) => wan::run(args),
        Command::Cpa(args) => cpa::run(args),
        Command::Certes(args) => certes::run(args),
        Command::Completions { shell } => {
            let mut command = Cli::command();
            clap_complete::generate(shell, &mut command, "vantage", &mut std::io::stdout());
            Ok(())
        }
        Command::Man { dir } => man_pages(dir.as_deref()),
        Command::Profiles => {
            for name in syn_schedule::BUILTIN_PROFILES {
                println!("{}", vantage_core::tcp::SynProfile::builtin(name)?);
            }
            for name in syn_schedule::BUILTIN_MIXES {
                let mix = ClientMix::builtin(name)?;
                let parts: Vec<String> = mix
                    .entries()
                    .iter()
                    .map(|(p, w)| format!("{} {:.0} %", p.name, 100.0 * w))
                    .collect();
                println!("{name} (mixture: {})", parts.join(", "));
            }
            Ok(())
        }
    }
}

/// Writes vantage(1) and one page per subcommand (`vantage-gate-run.1`, …)
/// into `dir`, or prints vantage(1).
fn man_pages(dir: Option<&std::path::Path>) -> Result<()> {
    let command = Cli::command().disable_help_subcommand(true);
    match dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            clap_mangen::generate_to(command, dir)
                .with_context(|| format!("cannot write the manual pages in {}", dir.display()))?;
            println!("manual pages written in {}", dir.display());
        }
        None => clap_mangen::Man::new(command)
            .render(&mut std::io::stdout())
            .context("cannot write standard output")?,
    }
    Ok(())
}

/// Reads a configuration, scenario or spec file of at most
/// `vantage_core::config::MAX_CONFIG_BYTES`; `what` names it in errors.
fn read_text(path: &std::path::Path, what: &str) -> Result<String> {
    let file = std::fs::File::open(path)
        .with_context(|| format!("cannot read {what} {}", path.display()))?;
    vantage_core::config::read_capped(file, vantage_core::config::MAX_CONFIG_BYTES)
        .with_context(|| format!("cannot read {what} {}", path.display()))
}

fn threads(output: &OutputArgs) -> Result<()> {
    if let Some(n) = output.threads {
        if n == 0 {
            bail!("--threads must be at least 1");
        }
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build_global()
            .context("cannot start worker threads")?;
    }
    Ok(())
}

/// The options of a run that writes its study folders under `root`.
fn run_options(output: &OutputArgs, root: &std::path::Path) -> RunOptions {
    RunOptions {
        quick: output.quick,
        print_tables: !output.json,
        out: root.to_path_buf(),
    }
}

/// This process's command line, as the manifest records it.
fn command_line() -> Vec<String> {
    std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

/// Prints the JSON document (one study's own, or the one for every study),
/// or the count of the papers' statements that hold and where the files are
/// (`root`). With `--check`, ends with status
/// [`provenance::STATEMENT_FAILED_STATUS`] when a statement does not hold.
fn finish(
    outcomes: &[(&str, StudyOutcome)],
    output: &OutputArgs,
    root: &std::path::Path,
) -> Result<()> {
    let checks = outcomes.iter().flat_map(|(_, o)| o.checks.iter());
    if output.json {
        match outcomes {
            [(_, outcome)] => println!("{}", outcome.document),
            _ => println!(
                "{}",
                serde_json::to_string_pretty(&vantage_lab::report::all_studies_document(outcomes))?
            ),
        }
    } else {
        let total = checks.clone().count();
        let holds = checks.clone().filter(|c| c.holds).count();
        if total > 0 {
            println!("{holds} of {total} statements of the papers hold in our runs.");
        }
        println!("CSV and SVG files are in {}", root.display());
        println!(
            "The report: {}",
            root.join(vantage_lab::report::html::REPORT_FILE).display()
        );
    }
    for (name, outcome) in outcomes {
        if let Some(reason) = outcome.not_run_reason() {
            if output.check {
                eprintln!("vantage: --check: study `{name}` was not run ({reason}); its statements are not checked");
            } else if !output.json {
                println!("Study `{name}` was not run: {reason}.");
            }
        }
    }
    let status = provenance::check_status(checks.clone());
    if output.check && status != 0 {
        let failed = checks.filter(|c| !c.holds).count();
        eprintln!("vantage: --check: {failed} statement(s) of the papers do not hold");
        return Err(ExitStatus(status).into());
    }
    Ok(())
}
