//! Certes live on the testbed (issue 23, "Validation on the testbed"):
//! every configuration of a file is one testbed run — real Linux clients
//! with their SYN schedules, the test server or nginx, drops by the accept
//! queue or by the Abacus gate, steady or on/off load, with or without WAN
//! loss — with `vantage certes watch` running beside the server in its
//! namespace and a real Prometheus scraping it. The daemon's whole-run
//! mean (its JSON Lines combined as `certes::summary` combines intervals)
//! is judged against the clients' own record within the Certes paper's
//! 2.5 % (Table II), with the 10-second tracking, p90/p99 from the
//! Prometheus histogram and SYN-to-END beside it; mixtures also run a
//! learning daemon. With `front = "proxy"` the server sits behind `vantage
//! proxy`, and a third daemon estimates from the proxy's `[certes]` stream
//! alone (with the gate's log when a gate drops), judged against the same
//! clients' record. See `docs/certes-live.md`.

pub mod plan;
mod report;
mod run;

pub use plan::{CertesLivePlan, Configuration};
pub use report::{plot, render, CertesLiveReport, Row};
pub use run::{preflight, LiveError, PROMETHEUS};

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use crate::live_experiment::{read_plan_file, ExperimentError, PlanFile};
use crate::provenance::{results_root, RunRecord};
use crate::studies::certes::CERTES_BOUND;
use crate::{LabError, ScenarioFile};

/// Why `vantage testbed certes-live` failed.
pub type CertesLiveError = ExperimentError<plan::PlanError, LiveError>;

/// Reads the plan `file`, runs its configurations (`quick`: the shorter
/// runs of its `quick` list) with `vantage` as the daemon's binary, and
/// writes the results folder (`OUT` or `OUT/quick`): `report.json`,
/// `table.md`, `tracking.svg`, `manifest.json` and each run's folder under
/// `runs/`. A configuration that fails is reported and the others go on.
pub fn run_file(
    file: &Path,
    quick: bool,
    out: &Path,
    vantage: &Path,
    command_line: Vec<String>,
    progress: &dyn Fn(&str),
) -> Result<(CertesLiveReport, PathBuf), CertesLiveError> {
    let PlanFile { origin, text } = read_plan_file(file)?;
    let plan = CertesLivePlan::from_toml(&text, &origin).map_err(CertesLiveError::Plan)?;
    for warning in &plan.warnings {
        eprintln!("vantage: warning: {warning}");
    }
    preflight().map_err(CertesLiveError::Live)?;
    let record = RunRecord::start(command_line, quick, Some(file));
    let dir = results_root(out, quick);
    let runs = dir.join("runs");
    if runs.exists() {
        std::fs::remove_dir_all(&runs).map_err(LabError::Io)?;
    }
    let started = Instant::now();
    let mut report = CertesLiveReport {
        name: plan.experiment.name.clone(),
        quick,
        started: chrono::Utc::now().format("%Y-%m-%d %H:%M UTC").to_string(),
        load_average: std::fs::read_to_string("/proc/loadavg")
            .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
            .unwrap_or_default(),
        seconds: 0.0,
        bound: CERTES_BOUND,
        rows: Vec::new(),
        failed: Vec::new(),
    };
    let selected = plan.selected(quick);
    let stop = Arc::new(AtomicBool::new(false));
    for (i, configuration) in selected.iter().enumerate() {
        progress(&format!(
            "[{}/{}] {} ({:.0} s so far)",
            i + 1,
            selected.len(),
            configuration.name,
            started.elapsed().as_secs_f64()
        ));
        let index = plan
            .configuration
            .iter()
            .position(|c| c.name == configuration.name)
            .unwrap_or(i);
        let run_dir = runs.join(&configuration.name);
        match run::run_configuration(
            &plan.experiment,
            configuration,
            index,
            quick,
            vantage,
            &run_dir,
            stop.clone(),
        ) {
            Ok(result) => {
                let row = report::row(configuration, &result)?;
                progress(&format!(
                    "  truth {} s, estimate {} s, error {}, {:.0} s",
                    row.truth_mean_s.map_or("–".into(), |x| format!("{x:.3}")),
                    row.daemon
                        .estimate_mean_s
                        .map_or("–".into(), |x| format!("{x:.3}")),
                    row.relative_error
                        .map_or("–".into(), |x| format!("{:+.1} %", x * 100.0)),
                    row.seconds
                ));
                report.rows.push(row);
            }
            Err(e) => {
                progress(&format!("  failed: {e}"));
                report
                    .failed
                    .push((configuration.name.clone(), e.to_string()));
            }
        }
    }
    report.seconds = started.elapsed().as_secs_f64();
    crate::error::create_dir(&dir)?;
    let write = |name: &str, text: String| crate::error::write_file(&dir, name, text);
    write(
        "report.json",
        serde_json::to_string_pretty(&report).map_err(LabError::Json)? + "\n",
    )?;
    write("table.md", render(&report))?;
    plot(&report, &dir.join("tracking.svg"))?;
    record
        .manifest(&[(
            "certes-live",
            std::slice::from_ref(&ScenarioFile {
                origin: &origin,
                text: &text,
            }),
        )])
        .write(&dir)?;
    Ok((report, dir))
}
