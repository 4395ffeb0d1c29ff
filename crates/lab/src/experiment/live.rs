//! One live run of an experiment on the testbed, or one read back from an
//! earlier invocation, as a result row: its client records as a tally, its
//! gate's report and log totals, and whatever in them casts doubt on the
//! numbers.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use serde::Deserialize;
use vantage_testbed::load::record::{read_csv, ConnectionRecord};
use vantage_testbed::run::{self, RunError, RunEvent, RunOptions};
use vantage_testbed::syn_admission::SynAdmissionReport;

use super::error::ExperimentRunError;
use super::gate_log::gate_log_totals;
use super::plan::PlannedRun;
use super::progress::Progress;
use super::results::ResultRow;
use super::tally::tally_records;

/// This program, for the runs' watchdogs and gates. A binary rebuilt while
/// it runs shows as `… (deleted)`: the new one at the same path is used.
fn vantage_binary() -> std::io::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let text = exe.to_string_lossy();
    Ok(match text.strip_suffix(" (deleted)") {
        Some(path) => PathBuf::from(path),
        None => exe,
    })
}

/// The options of a testbed run writing into `dir`, with a watchdog that
/// runs `vantage testbed clean` for the run's tag once this process is gone
/// (`vantage` is the binary to run).
pub fn watched_run_options(dir: PathBuf, vantage: PathBuf) -> RunOptions {
    RunOptions {
        dir,
        tag: None,
        watchdog: Some((
            vantage,
            ["testbed", "clean", "--tag", "{tag}", "--after-parent-exit"]
                .map(String::from)
                .to_vec(),
        )),
    }
}

/// One live run: the testbed run, then its records as a tally.
pub fn live_row(
    run: &PlannedRun,
    runs_dir: &Path,
    stamp: &str,
    stop: &Arc<AtomicBool>,
    progress: &dyn Progress,
    h: f64,
    r: f64,
) -> Result<ResultRow, RunError> {
    let dir = runs_dir.join(format!("{}-{stamp}", run.spec.name));
    let exe = vantage_binary().map_err(|e| RunError::Step {
        what: "finding the vantage binary",
        message: e.to_string(),
    })?;
    let options = watched_run_options(dir.clone(), exe);
    let what = format!("{} {} · {}", run.variant.id, run.variant.label, run.profile);
    let on_event = |event: RunEvent| match event {
        RunEvent::Phase(p) => progress.status(format!("{what}: {p}")),
        RunEvent::LoadStarted(d) => {
            progress.status(format!("{what}: load (at most {:.0} s)", d.as_secs_f64()))
        }
        RunEvent::LoadFinished => progress.status(format!("{what}: load finished")),
    };
    let output = run::run(&run.spec, &run.text, &options, stop.clone(), &on_event)?;
    Ok(row_from_records(
        run,
        output.dir,
        &output.records,
        output.summary.gate,
        h,
        r,
    ))
}

/// A finished run of `run` under `runs_dir`, from an earlier, interrupted
/// invocation: the newest `NAME-STAMP` directory whose `spec.toml` is this
/// run's spec to the byte and whose `summary.json` says it ran to the end.
/// Its row is built from its files exactly as a fresh run's is.
pub fn finished_run(
    run: &PlannedRun,
    runs_dir: &Path,
    h: f64,
    r: f64,
) -> Result<Option<ResultRow>, ExperimentRunError> {
    /// The part of `summary.json` a row needs.
    #[derive(Deserialize)]
    struct SavedSummary {
        interrupted: bool,
        gate: Option<SynAdmissionReport>,
    }
    let Ok(entries) = std::fs::read_dir(runs_dir) else {
        return Ok(None);
    };
    let prefix = format!("{}-", run.spec.name);
    let mut candidates: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix(&prefix))
                .is_some_and(|stamp| stamp.bytes().all(|b| b.is_ascii_digit() || b == b'-'))
        })
        .collect();
    candidates.sort();
    for dir in candidates.into_iter().rev() {
        let same_spec = std::fs::read_to_string(dir.join("spec.toml")).is_ok_and(|t| t == run.text);
        if !same_spec {
            continue;
        }
        let Ok(summary) = std::fs::read(dir.join("summary.json")) else {
            continue;
        };
        let saved: SavedSummary =
            serde_json::from_slice(&summary).map_err(|source| ExperimentRunError::Summary {
                path: dir.join("summary.json"),
                source,
            })?;
        if saved.interrupted {
            continue;
        }
        let clients = dir.join("clients.csv");
        let file =
            std::fs::File::open(&clients).map_err(|source| ExperimentRunError::OpenClients {
                path: clients.clone(),
                source,
            })?;
        let records = read_csv(std::io::BufReader::new(file)).map_err(|source| {
            ExperimentRunError::ReadClients {
                path: clients.clone(),
                source,
            }
        })?;
        return Ok(Some(row_from_records(run, dir, &records, saved.gate, h, r)));
    }
    Ok(None)
}

/// A run's row: its client records as a tally, its gate's report and log
/// totals, and whatever in them casts doubt on the numbers.
pub fn row_from_records(
    run: &PlannedRun,
    dir: PathBuf,
    records: &[ConnectionRecord],
    gate: Option<SynAdmissionReport>,
    h: f64,
    r: f64,
) -> ResultRow {
    let (tally, outcomes) = tally_records(records);
    let mut problems = Vec::new();
    if outcomes.other > 0 {
        problems.push(format!(
            "{} connections failed, were aborted or never started (left out of the metrics)",
            outcomes.other
        ));
    }
    let mut gate_log = None;
    if let Some(g) = &gate {
        problems.extend(g.problems.iter().cloned());
        if !g.rules_left_behind.is_empty() {
            problems.push(format!(
                "the gate left {} rules behind",
                g.rules_left_behind.len()
            ));
        }
        if let Some(log) = &g.log {
            match gate_log_totals(log) {
                Ok(t) => {
                    if t.counts.syns() != t.arrivals {
                        problems.push(format!(
                            "gate log: {} SYNs but {} verdicts",
                            t.arrivals,
                            t.counts.syns()
                        ));
                    }
                    if t.counts.overruns > 0 || t.counts.errors > 0 {
                        problems.push(format!(
                            "gate log: {} packets passed the gate unseen (queue overruns), {} verdict errors",
                            t.counts.overruns, t.counts.errors
                        ));
                    }
                    gate_log = Some(t);
                }
                Err(e) => problems.push(format!("gate log: {e}")),
            }
        }
    }
    ResultRow {
        profile: run.profile.clone(),
        variant: run.variant.id.clone(),
        label: run.variant.label.clone(),
        source: "live".into(),
        model: None,
        summary: Some(tally.summary(h, r)),
        outcomes: Some(outcomes),
        dir: Some(dir),
        gate,
        gate_log,
        problems,
        error: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::plan::Experiment;
    use crate::experiment::tally::tests::{record, S};
    use vantage_testbed::load::record::Outcome;

    #[test]
    fn resume_reads_back_only_finished_runs_of_the_same_spec() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/gate/section6.toml");
        let x = Experiment::load(&path, true).unwrap();
        let run = &x.runs[0];
        let runs = std::env::temp_dir().join(format!("vantage-gx-resume-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&runs);
        let write_run =
            |stamp: &str, spec: &str, interrupted: bool, records: &[ConnectionRecord]| {
                let dir = runs.join(format!("{}-{stamp}", run.spec.name));
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(dir.join("spec.toml"), spec).unwrap();
                std::fs::write(
                    dir.join("summary.json"),
                    format!("{{\"name\":\"x\",\"interrupted\":{interrupted},\"gate\":null}}"),
                )
                .unwrap();
                let mut csv = Vec::new();
                vantage_testbed::load::record::write_csv(records, &mut csv).unwrap();
                std::fs::write(dir.join("clients.csv"), csv).unwrap();
                dir
            };
        // Nothing there yet.
        assert!(finished_run(run, &runs, 1.0, 21.0).unwrap().is_none());
        let two = [
            record(Outcome::Ok, 0, Some(S), 2 * S, 1),
            record(Outcome::Refused, 0, None, S / 2, 0),
        ];
        let good = write_run("20261124-090000", &run.text, false, &two);
        // Newer, but of another spec, interrupted, or without a summary.
        write_run("20261124-100000", "name = \"other\"\n", false, &two[..1]);
        write_run("20261124-110000", &run.text, true, &two[..1]);
        let bare = runs.join(format!("{}-20261124-120000", run.spec.name));
        std::fs::create_dir_all(&bare).unwrap();
        std::fs::write(bare.join("spec.toml"), &run.text).unwrap();
        // Another run whose name only begins like this one's.
        write_run("x-20261124-130000", &run.text, false, &two[..1]);

        let row = finished_run(run, &runs, 1.0, 21.0).unwrap().unwrap();
        assert_eq!(row.dir.as_deref(), Some(good.as_path()));
        assert_eq!(row.source, "live");
        let s = row.summary.unwrap();
        assert_eq!(s.requests, 2);
        assert_eq!(s.throughput_pct, 50.0);
        assert_eq!(s.rejects_pct, 50.0);

        // A summary that is not one is an error that names the file.
        std::fs::write(good.join("summary.json"), "[").unwrap();
        let error = finished_run(run, &runs, 1.0, 21.0).unwrap_err();
        assert!(format!("{error:#}").contains("summary.json"), "{error:#}");
        std::fs::remove_dir_all(&runs).unwrap();
    }
}
