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

mod certes;
mod cpa;
mod gate;
mod testbed;
mod wan;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use vantage_core::tcp::{syn_schedule, ClientMix};
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
        /// Study to run (default: all). Known: abacus, certes, sbac.
        study: Option<String>,
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
}

#[derive(clap::Args)]
struct OutputArgs {
    /// Fewer repetitions and a shorter horizon (each scenario says how many).
    #[arg(long)]
    quick: bool,
    /// Print all results as one JSON document instead of tables.
    #[arg(long)]
    json: bool,
    /// Directory for CSV files and SVG plots.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
}

fn main() {
    let cli = Cli::parse();
    if let Err(err) = run(cli) {
        eprintln!("vantage: error: {}", error_chain(&err));
        std::process::exit(1);
    }
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

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Sim { scenario, output } => {
            threads(&output)?;
            let text = read_text(&scenario, "scenario")?;
            let origin = scenario.display().to_string();
            let study = studies::for_file(&text, &origin)?;
            let file = ScenarioFile {
                origin: &origin,
                text: &text,
            };
            let outcome = study.run(&[file], &run_options(&output))?;
            finish(&[(study.name(), outcome)], &output)
        }
        Command::Reproduce { study, output } => {
            threads(&output)?;
            let chosen: Vec<&dyn Study> = match &study {
                None => studies::all().to_vec(),
                Some(name) => vec![studies::by_name(name)?],
            };
            let options = run_options(&output);
            let mut outcomes = Vec::new();
            for study in chosen {
                if !output.json {
                    println!("\n# Study `{}` — {}\n", study.name(), study.paper());
                }
                outcomes.push((study.name(), study.reproduce(&options)?));
            }
            finish(&outcomes, &output)
        }
        Command::Testbed { command } => testbed::run(command),
        Command::Gate { command } => gate::run(command),
        Command::Wan(args) => wan::run(args),
        Command::Cpa(args) => cpa::run(args),
        Command::Certes(args) => certes::run(args),
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

fn run_options(output: &OutputArgs) -> RunOptions {
    RunOptions {
        quick: output.quick,
        print_tables: !output.json,
        out: output.out.clone(),
    }
}

/// Prints the JSON document (one study's own, or the one for every study),
/// or the count of the papers' statements that hold and where the files are.
fn finish(outcomes: &[(&str, StudyOutcome)], output: &OutputArgs) -> Result<()> {
    if output.json {
        match outcomes {
            [(_, outcome)] => println!("{}", outcome.document),
            _ => println!(
                "{}",
                serde_json::to_string_pretty(&vantage_lab::report::all_studies_document(outcomes))?
            ),
        }
        return Ok(());
    }
    let checks = outcomes.iter().flat_map(|(_, o)| o.checks.iter());
    let total = checks.clone().count();
    let holds = checks.filter(|c| c.holds).count();
    if total > 0 {
        println!("{holds} of {total} statements of the papers hold in our runs.");
    }
    println!("CSV and SVG files are in {}", output.out.display());
    Ok(())
}
