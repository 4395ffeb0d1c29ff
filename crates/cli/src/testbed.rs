//! `vantage testbed …`: run a testbed spec, run an experiment (a set of
//! runs, beside the simulator), or remove a crashed run's leftovers.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use vantage_testbed::run::{self, RunError, RunEvent, RunOptions};
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
            Some(seeds) => crate::gate_seed_sweep::run(&file, quick, seeds, json, &out),
            None => crate::gate_experiment::run(&file, quick, json, sim_only, resume, &out),
        },
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
            let text = std::fs::read_to_string(&spec)
                .with_context(|| format!("cannot read testbed spec {}", spec.display()))?;
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
            let options = RunOptions {
                dir: dir.clone(),
                tag: None,
                watchdog: Some((
                    exe,
                    ["testbed", "clean", "--tag", "{tag}", "--after-parent-exit"]
                        .map(String::from)
                        .to_vec(),
                )),
            };
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

/// `YYYYMMDD-HHMMSS` in UTC.
pub(crate) fn timestamp() -> String {
    chrono::Utc::now().format("%Y%m%d-%H%M%S").to_string()
}
