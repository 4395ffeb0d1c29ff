//! `vantage testbed …`: run a testbed spec, run an experiment (a set of
//! runs, beside the simulator), or remove a crashed run's leftovers.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use vantage_lab::experiment::live::watched_run_options;
use vantage_lab::experiment::seed_sweep::{check_seed_count, render_sweep, seed_sweep};
use vantage_lab::experiment::{
    report, run_experiment, Experiment, ExperimentOutcome, LiveOptions, Progress,
};
use vantage_testbed::run::{self, RunError, RunEvent};
use vantage_testbed::spec::TestbedSpec;
use vantage_testbed::{topology, watchdog};

#[derive(clap::Subcommand)]
pub enum TestbedCommand {
    /// Build the namespaces, run the spec's workload, tear down, and write
    /// one result directory (client ground truth, server counters,
    /// captures, logs, summary).
    Run {
        /// Testbed spec (TOML), e.g. scenarios/testbed/nginx-wan.toml.
        spec: PathBuf,
        /// Parent directory of the run's result directory.
        #[arg(long, default_value = "results/testbed")]
        out: PathBuf,
        /// Print the summary as JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Run an experiment: every variant (no gate, iptables limit, the
    /// vantage gate's filters) under every client profile, one testbed run
    /// each, beside the simulator on the same arrivals; the Abacus paper's
    /// Section 6 comparison with real clients is
    /// scenarios/gate/section6.toml (docs/gate-experiment.md).
    Experiment {
        /// Experiment file (TOML), e.g. scenarios/gate/section6.toml.
        file: PathBuf,
        /// The file's [quick] settings: shorter, fewer profiles and variants.
        #[arg(long)]
        quick: bool,
        /// Print the results as one JSON document instead of tables.
        #[arg(long)]
        json: bool,
        /// Only the simulator's numbers (no live runs, no root needed).
        #[arg(long)]
        sim_only: bool,
        /// Instead of the runs: the simulator on the arrivals of seeds
        /// 1..=N, and how often the paper's statements hold on them
        /// (no live runs, no root needed; writes seed-sweep.csv).
        #[arg(long, value_name = "N", conflicts_with = "sim_only")]
        seed_sweep: Option<u64>,
        /// Keep the runs an earlier, interrupted invocation finished in the
        /// same --out directory (same spec, ran to the end) and run only
        /// the rest.
        #[arg(long, conflicts_with_all = ["sim_only", "seed_sweep"])]
        resume: bool,
        /// Directory for the results (runs/, experiment.csv, experiment.json,
        /// checks.csv, p99-vs-success.svg).
        #[arg(long, default_value = "results/gate-experiment")]
        out: PathBuf,
    },
    /// The SBAC paper's Table 2 with real clients: session clients against
    /// a CPU-capped nginx, straight, behind nginx limits, HAProxy maxconn
    /// or `vantage proxy` with each SBAC strategy, beside the simulator on
    /// the same workload (docs/sbac-live.md).
    Sbac {
        /// Plan file (TOML), e.g. scenarios/proxy/sbac-live.toml.
        file: PathBuf,
        /// The plan's [quick] settings: a step, one session length, shorter.
        #[arg(long)]
        quick: bool,
        /// Print the report as JSON instead of tables.
        #[arg(long)]
        json: bool,
        /// Directory for the results (report.json, table.md, manifest.json,
        /// runs/); --quick writes into its quick/ folder.
        #[arg(long, default_value = "results/sbac-live")]
        out: PathBuf,
    },
    /// Certes live: every configuration of the file is one testbed run
    /// with `vantage certes watch` beside the server and a real Prometheus
    /// scraping it; the daemon's estimate against the clients' own record
    /// (docs/certes-live.md).
    CertesLive {
        /// Experiment file (TOML), e.g. scenarios/certes-live/configurations.toml.
        file: PathBuf,
        /// Shorter runs of the file's `quick` configurations.
        #[arg(long)]
        quick: bool,
        /// Print the report as JSON instead of tables.
        #[arg(long)]
        json: bool,
        /// Directory for the results (report.json, table.md, tracking.svg,
        /// manifest.json, runs/); --quick writes into its quick/ folder.
        #[arg(long, default_value = "results/certes-live")]
        out: PathBuf,
    },
    /// The proxy's socket buffers against Linux autotuning, at scale:
    /// concurrent downloads over mixed WAN paths through `vantage proxy`
    /// under each `[resources]` mode, the kernel TCP memory of its sockets
    /// and the goodput at the clients, then E-ATBT's step responses
    /// (docs/resources-live.md).
    Resources {
        /// Plan file (TOML), e.g. scenarios/proxy/autotune-scale.toml.
        file: PathBuf,
        /// The plan's [quick] settings: fewer downloads, shorter.
        #[arg(long)]
        quick: bool,
        /// Print the report as JSON instead of tables.
        #[arg(long)]
        json: bool,
        /// Directory for the results (report.json, table.md, memory.svg,
        /// manifest.json, runs/); --quick writes into its quick/ folder.
        #[arg(long, default_value = "results/resources-live")]
        out: PathBuf,
    },
    /// The proxy thesis's Section 5 experiment: SURGE users behind mixed
    /// WAN paths through vantage proxy, Squid and nginx with the thesis's
    /// fixed buffers, then autotune, SSBT and SSBT+conn, at each user count;
    /// the thesis's statements beside ours (docs/thesis-live.md).
    Thesis {
        /// Plan file (TOML), e.g. scenarios/proxy/thesis-section5.toml.
        file: PathBuf,
        /// The plan's [quick] settings: short runs.
        #[arg(long)]
        quick: bool,
        /// Print the report as JSON instead of tables.
        #[arg(long)]
        json: bool,
        /// Directory for the results (report.json, table.md, figures.svg,
        /// manifest.json, runs/); --quick writes into its quick/ folder.
        #[arg(long, default_value = "results/thesis-live")]
        out: PathBuf,
    },
    /// tcpeval's Section 4 experiment: 1 KB, 20 KB and 500 KB HTTP/1.0
    /// fetches over a long and a short path under low and high server and
    /// network load, captured at both ends and profiled with the
    /// critical-path analysis; Figures 4–8 and the paper's statements
    /// beside ours (docs/tcpeval-live.md).
    Tcpeval {
        /// Plan file (TOML), e.g. scenarios/cpa/section4.toml.
        file: PathBuf,
        /// The plan's [quick] settings: short tests.
        #[arg(long)]
        quick: bool,
        /// Print the report as JSON instead of tables.
        #[arg(long)]
        json: bool,
        /// Directory for the results (report.json, table.md, figure4.svg,
        /// manifest.json, runs/); --quick writes into its quick/ folder.
        #[arg(long, default_value = "results/tcpeval-live")]
        out: PathBuf,
    },
    /// Remove the namespaces (and the processes and rules inside them) that
    /// a killed run left behind.
    Clean {
        /// Only this run's tag (default: every testbed namespace, `vtb-*`).
        #[arg(long)]
        tag: Option<String>,
        /// Wait for end-of-file on stdin first (used by a run's watchdog).
        #[arg(long, hide = true)]
        after_parent_exit: bool,
    },
}

/// Prints an experiment command's report: one JSON document, or its table
/// and where its files are.
fn print_experiment<R: serde::Serialize>(
    json: bool,
    report: &R,
    table: impl FnOnce() -> String,
    files: &str,
    dir: &Path,
) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(report)?);
    } else {
        print!("{}", table());
        println!("{files} are in {}", dir.display());
    }
    Ok(())
}

pub fn run(command: TestbedCommand) -> Result<()> {
    match command {
        TestbedCommand::Experiment {
            file,
            quick,
            json,
            sim_only,
            seed_sweep,
            resume,
            out,
        } => match seed_sweep {
            Some(seeds) => run_seed_sweep(&file, quick, seeds, json, &out),
            None => run_experiment_file(&file, quick, json, sim_only, resume, &out),
        },
        TestbedCommand::Resources {
            file,
            quick,
            json,
            out,
        } => {
            let progress = |line: &str| eprintln!("{line}");
            let (report, dir) = vantage_lab::resources_live::run_file(
                &file,
                quick,
                &out,
                std::env::args().collect(),
                &progress,
            )?;
            print_experiment(
                json,
                &report,
                || vantage_lab::resources_live::render(&report),
                "report.json, table.md, memory.svg and manifest.json",
                &dir,
            )
        }
        TestbedCommand::Thesis {
            file,
            quick,
            json,
            out,
        } => {
            let progress = |line: &str| eprintln!("{line}");
            let (report, dir) = vantage_lab::thesis_live::run_file(
                &file,
                quick,
                &out,
                std::env::args().collect(),
                &progress,
            )?;
            print_experiment(
                json,
                &report,
                || vantage_lab::thesis_live::render(&report),
                "report.json, table.md, figures.svg and manifest.json",
                &dir,
            )
        }
        TestbedCommand::Tcpeval {
            file,
            quick,
            json,
            out,
        } => {
            let progress = |line: &str| eprintln!("{line}");
            let (report, dir) = vantage_lab::tcpeval_live::run_file(
                &file,
                quick,
                &out,
                std::env::args().collect(),
                &progress,
            )?;
            print_experiment(
                json,
                &report,
                || vantage_lab::tcpeval_live::render(&report),
                "report.json, table.md, figure4.svg and manifest.json",
                &dir,
            )
        }
        TestbedCommand::Sbac {
            file,
            quick,
            json,
            out,
        } => {
            let progress = |line: &str| eprintln!("{line}");
            let (report, dir) = vantage_lab::sbac_live::run_file(
                &file,
                quick,
                &out,
                std::env::args().collect(),
                &progress,
            )?;
            print_experiment(
                json,
                &report,
                || vantage_lab::sbac_live::render(&report),
                "report.json, table.md and manifest.json",
                &dir,
            )
        }
        TestbedCommand::CertesLive {
            file,
            quick,
            json,
            out,
        } => {
            let progress = |line: &str| eprintln!("{line}");
            let vantage = std::env::current_exe()?;
            let (report, dir) = vantage_lab::certes_live::run_file(
                &file,
                quick,
                &out,
                &vantage,
                std::env::args().collect(),
                &progress,
            )?;
            print_experiment(
                json,
                &report,
                || vantage_lab::certes_live::render(&report),
                "report.json, table.md, tracking.svg and manifest.json",
                &dir,
            )
        }
        TestbedCommand::Clean {
            tag,
            after_parent_exit,
        } => {
            if after_parent_exit {
                watchdog::wait_for_parent_exit();
            }
            let removed = topology::clean(tag.as_deref())?;
            if !after_parent_exit {
                if removed.is_empty() {
                    println!("nothing to clean");
                } else {
                    println!("removed {}", removed.join(", "));
                }
            }
            Ok(())
        }
        TestbedCommand::Run { spec, out, json } => {
            let text = crate::read_text(&spec, "testbed spec")?;
            let parsed = TestbedSpec::from_toml(&text, &spec.display().to_string())?;
            let stamp = timestamp();
            let dir = out.join(format!("{}-{stamp}", parsed.name));
            if dir.exists() {
                bail!("result directory {} already exists", dir.display());
            }
            let stop = Arc::new(AtomicBool::new(false));
            for signal in [
                signal_hook::consts::SIGINT,
                signal_hook::consts::SIGTERM,
                signal_hook::consts::SIGHUP,
            ] {
                signal_hook::flag::register(signal, stop.clone())
                    .context("cannot install the Ctrl-C handler")?;
            }
            let exe = std::env::current_exe().context("cannot find the vantage binary")?;
            let options = watched_run_options(dir.clone(), exe);
            let bar = ProgressBar::new_spinner();
            bar.enable_steady_tick(Duration::from_millis(200));
            bar.set_style(
                ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
                    .expect("progress template is valid"),
            );
            let on_event = |event: RunEvent| match event {
                RunEvent::Phase(p) => bar.set_message(p.to_string()),
                RunEvent::LoadStarted(d) => bar.set_message(format!(
                    "running the load (at most {:.0} s)",
                    d.as_secs_f64()
                )),
                RunEvent::LoadFinished => bar.set_message("load finished"),
            };
            let result = run::run(&parsed, &text, &options, stop, &on_event);
            bar.finish_and_clear();
            match result {
                Ok(output) => {
                    if json {
                        println!("{}", serde_json::to_string_pretty(&output.summary)?);
                    } else {
                        print!("{}", run::render_summary(&output.summary));
                        println!("\nresults in {}", output.dir.display());
                    }
                    Ok(())
                }
                Err(RunError::Interrupted(dir)) => {
                    bail!(
                        "interrupted; everything was torn down and partial results are in {}",
                        dir.display()
                    )
                }
                Err(e) => Err(e.into()),
            }
        }
    }
}

/// Sets `stop` on SIGINT, SIGTERM and SIGHUP.
fn stop_on_signals(stop: &Arc<AtomicBool>) -> std::io::Result<()> {
    for signal in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(signal, stop.clone())?;
    }
    Ok(())
}

/// The experiment's progress bar, shown once the live runs begin.
#[derive(Default)]
struct RunsBar {
    bar: OnceLock<ProgressBar>,
}

impl Progress for RunsBar {
    fn live_runs_begin(&self, runs: u64) {
        let bar = self.bar.get_or_init(|| {
            ProgressBar::new(runs).with_style(
                ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} runs  {msg}",
                )
                .expect("progress template is valid"),
            )
        });
        bar.enable_steady_tick(Duration::from_millis(200));
    }

    /// Above the bar; on stderr as it is when the bar is hidden (stderr not
    /// a terminal, as under `nohup`), so a log still tells which run failed
    /// or was read back.
    fn say(&self, line: String) {
        match self.bar.get() {
            Some(bar) if !bar.is_hidden() => bar.println(line),
            _ => eprintln!("{line}"),
        }
    }

    fn status(&self, message: String) {
        if let Some(bar) = self.bar.get() {
            bar.set_message(message);
        }
    }

    fn run_done(&self) {
        if let Some(bar) = self.bar.get() {
            bar.inc(1);
        }
    }

    fn live_runs_end(&self) {
        if let Some(bar) = self.bar.get() {
            bar.finish_and_clear();
        }
    }
}

/// `vantage testbed experiment FILE`.
fn run_experiment_file(
    file: &Path,
    quick: bool,
    json: bool,
    sim_only: bool,
    resume: bool,
    out: &Path,
) -> Result<()> {
    let x = Experiment::load(file, quick)?;
    for warning in &x.warnings {
        eprintln!("vantage: warning: {warning}");
    }
    let bar = RunsBar::default();
    let stop = Arc::new(AtomicBool::new(false));
    let begin = || stop_on_signals(&stop);
    let live = (!sim_only).then(|| LiveOptions {
        resume,
        stamp: timestamp(),
        stop: stop.clone(),
        on_begin: &begin,
        progress: &bar,
    });
    let ExperimentOutcome {
        report,
        interrupted,
        failures,
    } = run_experiment(&x, out, live)?;
    vantage_lab::report::write_checks_csv(&out.join("checks.csv"), &report.checks)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report::render_report(&report, &x));
        vantage_lab::report::print_checks(&report.checks);
        if let Some(line) = report::statements_summary(&report) {
            println!("{line}");
        }
        println!("CSV, JSON and SVG files are in {}", out.display());
    }
    if interrupted {
        bail!(
            "interrupted; every run started was torn down, and the results so far are in {}",
            out.display()
        );
    }
    if failures > 0 {
        bail!(
            "{failures} of {} live runs failed (see above)",
            x.runs.len()
        );
    }
    Ok(())
}

/// `vantage testbed experiment FILE --seed-sweep N`.
fn run_seed_sweep(file: &Path, quick: bool, seeds: u64, json: bool, out: &Path) -> Result<()> {
    check_seed_count(seeds)?;
    let x = Experiment::load(file, quick)?;
    for warning in &x.warnings {
        eprintln!("vantage: warning: {warning}");
    }
    let bar = ProgressBar::new(seeds).with_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} seeds")
            .expect("progress template is valid"),
    );
    if json {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    bar.enable_steady_tick(Duration::from_millis(200));
    let result = seed_sweep(&x, seeds, out, &|| bar.inc(1));
    bar.finish_and_clear();
    let report = result?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render_sweep(&report));
        println!("CSV: {}", out.join("seed-sweep.csv").display());
    }
    Ok(())
}

/// `YYYYMMDD-HHMMSS` in UTC.
fn timestamp() -> String {
    chrono::Utc::now().format("%Y%m%d-%H%M%S").to_string()
}
