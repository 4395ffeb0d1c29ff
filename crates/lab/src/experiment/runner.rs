//! `vantage testbed experiment FILE`: every run of an experiment live on
//! the testbed, one after the other, beside the simulator; the rows sorted,
//! the paper's statements judged, and the files written.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::checks::checks;
use super::error::ExperimentRunError;
use super::live::{finished_run, live_row};
use super::plan::Experiment;
use super::progress::Progress;
use super::report::write_outputs;
use super::results::{ExperimentReport, ResultRow};
use super::simulate::simulator_rows;
use super::workload::{workload_stats, WorkloadStats};
use vantage_testbed::run::RunError;

/// How the live runs go; without them only the simulator runs.
pub struct LiveOptions<'a> {
    /// Read back runs an earlier invocation finished in the same output
    /// directory (see [`finished_run`]) instead of running them again.
    pub resume: bool,
    /// Suffix of the runs' directory names (`NAME-STAMP` under `runs/`).
    pub stamp: String,
    /// Set (by a signal handler) to stop after tearing the current run down.
    pub stop: Arc<AtomicBool>,
    /// Called once the live runs begin, before the first; an error ends
    /// the experiment (e.g. a signal handler that cannot be installed).
    pub on_begin: &'a dyn Fn() -> std::io::Result<()>,
    pub progress: &'a dyn Progress,
}

/// An experiment's report, and how its live runs ended.
pub struct ExperimentOutcome {
    pub report: ExperimentReport,
    /// Stopped before every run was done.
    pub interrupted: bool,
    /// Live runs that failed (each has a row with its error).
    pub failures: usize,
}

/// Runs experiment `x` and writes its files into `out`.
pub fn run_experiment(
    x: &Experiment,
    out: &Path,
    live: Option<LiveOptions>,
) -> Result<ExperimentOutcome, ExperimentRunError> {
    std::fs::create_dir_all(out).map_err(|source| ExperimentRunError::CreateDir {
        path: out.to_path_buf(),
        source,
    })?;
    let mut workload = Vec::new();
    for profile in &x.profiles {
        if let Some(first) = x.runs.iter().find(|r| &r.profile == profile) {
            let schedule = first
                .spec
                .load
                .arrivals
                .schedule(first.spec.seed)
                .map_err(|e| ExperimentRunError::Arrivals(e.to_string()))?;
            let stats = workload_stats(&first.spec, &schedule);
            if workload
                .iter()
                .all(|w: &WorkloadStats| w.seed != stats.seed)
            {
                workload.push(stats);
            }
        }
    }
    let mut rows = simulator_rows(x)?;
    let mut interrupted = false;
    let mut failures = 0;
    if let Some(live) = live {
        if !vantage_sys::privilege::is_root() {
            return Err(ExperimentRunError::NotRoot);
        }
        (live.on_begin)().map_err(ExperimentRunError::Begin)?;
        let progress = live.progress;
        let runs_dir = out.join("runs");
        progress.live_runs_begin(x.runs.len() as u64);
        progress.say(format!(
            "{}: {} runs, at most {:.0} min of load",
            x.file,
            x.runs.len(),
            x.load_seconds() / 60.0
        ));
        for run in &x.runs {
            if live.stop.load(Ordering::Relaxed) {
                interrupted = true;
                break;
            }
            if live.resume {
                if let Some(row) = finished_run(run, &runs_dir, x.delay_cost, x.reject_cost)? {
                    progress.say(format!(
                        "variant {} · {}: finished earlier, read from {}",
                        run.variant.id,
                        run.profile,
                        row.dir
                            .as_deref()
                            .map(Path::display)
                            .map(|d| d.to_string())
                            .unwrap_or_default()
                    ));
                    rows.push(row);
                    progress.run_done();
                    continue;
                }
            }
            let row = match live_row(
                run,
                &runs_dir,
                &live.stamp,
                &live.stop,
                progress,
                x.delay_cost,
                x.reject_cost,
            ) {
                Ok(row) => row,
                Err(RunError::Interrupted(dir)) => {
                    interrupted = true;
                    progress.say(format!("interrupted; partial results in {}", dir.display()));
                    break;
                }
                Err(e) => {
                    failures += 1;
                    progress.say(format!(
                        "variant {} · {}: failed: {e}",
                        run.variant.id, run.profile
                    ));
                    ResultRow {
                        profile: run.profile.clone(),
                        variant: run.variant.id.clone(),
                        label: run.variant.label.clone(),
                        source: "live".into(),
                        model: None,
                        summary: None,
                        outcomes: None,
                        dir: None,
                        gate: None,
                        gate_log: None,
                        problems: Vec::new(),
                        error: Some(e.to_string()),
                    }
                }
            };
            rows.push(row);
            progress.run_done();
        }
        progress.live_runs_end();
    }
    // Live first, then the simulator on the same arrivals, then the long run.
    let order = |row: &ResultRow| {
        let p = x
            .profiles
            .iter()
            .position(|p| p == &row.profile)
            .unwrap_or(0);
        let v = x
            .variants
            .iter()
            .position(|v| v.id == row.variant)
            .unwrap_or(0);
        let s = match row.source.as_str() {
            "live" => 0,
            "sim-same-arrivals" => 1,
            _ => 2,
        };
        (p, v, s)
    };
    rows.sort_by_key(order);
    let checks = checks(x, &rows, "live");
    let report = ExperimentReport {
        file: x.file.clone(),
        title: x.title.clone(),
        quick: x.quick,
        delay_cost: x.delay_cost,
        reject_cost: x.reject_cost,
        sim_repetitions: x.sim_repetitions,
        sim_horizon_s: x.sim_horizon.as_secs_f64(),
        workload,
        rows,
        checks,
        notes: x.notes.clone(),
    };
    write_outputs(&report, x, out)?;
    Ok(ExperimentOutcome {
        report,
        interrupted,
        failures,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scenario_file_loads_and_every_variant_is_modelled() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/gate/section6.toml");
        for quick in [false, true] {
            let x = Experiment::load(&path, quick).unwrap();
            assert!(!x.runs.is_empty());
            for run in &x.runs {
                assert!(
                    run.model.is_some(),
                    "variant {} has no model",
                    run.variant.id
                );
            }
        }
        let x = Experiment::load(&path, false).unwrap();
        let ids: Vec<&str> = x.variants.iter().map(|v| v.id.as_str()).collect();
        assert_eq!(ids, ["a", "b", "c", "d", "e", "f"]);
        assert_eq!(x.runs.len(), 12);
        // The Abacus window fits inside the clients' patience.
        assert!(x.notes.is_empty(), "{:?}", x.notes);
    }
}
