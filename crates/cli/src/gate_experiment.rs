//! `vantage testbed experiment FILE`: the Abacus paper's Section 6
//! comparison (`../shared/papers/abacus-filters-syn-control.txt`) rerun with
//! real Linux clients on the testbed, beside the simulator.
//!
//! The file (`scenarios/gate/section6.toml`, documented in
//! `docs/gate-experiment.md`) holds a base testbed spec, the client profiles,
//! the variants — each a `[gate]` section of the testbed spec (none,
//! iptables `limit` with DROP or REJECT, `vantage gate run` with a filter)
//! and optionally its own listen backlog — the costs h and r and the
//! `--quick` settings. Every variant runs under every profile, one normal
//! testbed run each (its result directory under `DIR/runs/`), one after the
//! other, all on the same arrivals (the same seed).
//!
//! Each run's `clients.csv` becomes a [`Tally`] of the simulator's Section 6
//! metrics: a connection that completed its handshake was *accepted*, with
//! delay `connected − start` (first SYN to SYN-ACK); one refused with a
//! reset was *rejected*, one that ran out of SYN retries or patience *timed
//! out*, both with delay `end − start`. Cost is h·delay plus r per rejected
//! or timed-out connection, as in the paper.
//!
//! The simulator runs every variant it can model (TBF for iptables DROP and
//! the gate's TBF, TBF w/ Reject for iptables REJECT, Abacus, Greedy; the
//! kernel's accept queue approximately as a TBF of the backlog refilled at
//! the accept rate) twice: on the very arrivals the live clients were given,
//! with clients that behave as the live ones (the profile's SYN schedule cut
//! at the frustration timeout), and on `sim_repetitions` × `sim_horizon_s`
//! of the same arrival model, for the long-run value the paper reports.
//!
//! Output: tables (or `--json`), `experiment.csv`, `experiment.json`,
//! `checks.csv` and `p99-vs-success.svg` in DIR.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, CellAlignment, Table};
use indicatif::{ProgressBar, ProgressStyle};
use plotters::prelude::*;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use vantage_core::tcp::ClientMix;
use vantage_core::Nanos;
use vantage_lab::Check;
use vantage_sim::syn::metrics::{Outcome as SimOutcome, Summary, Tally};
use vantage_sim::syn::network::Network;
use vantage_sim::syn::run::{simulate, Recording};
use vantage_testbed::experiment::{
    generator, workload_stats, Checks, Experiment, FilterModel, PlannedRun, WorkloadStats,
};
use vantage_testbed::gate::GateReport;
use vantage_testbed::load::arrivals::{ArrivalConfig, MAX_CONNECTIONS_LIMIT};
use vantage_testbed::load::record::{ConnectionRecord, Outcome};
use vantage_testbed::run::{self, RunError, RunEvent, RunOptions};

// ---------------------------------------------------------------------------
// Live records → the simulator's metrics.

/// Client outcomes of one run, beside the Section 6 tally.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Outcomes {
    /// Scheduled connections (records).
    pub attempts: u64,
    /// Records per client outcome.
    pub by_outcome: BTreeMap<String, u64>,
    /// Handshakes completed (accepted, in the paper's terms).
    pub connected: u64,
    /// Connected, but the response did not complete.
    pub connected_not_ok: u64,
    /// Records that say nothing about admission (failed, aborted,
    /// not-started), left out of the tally.
    pub other: u64,
    /// % of attempts with a complete HTTP response.
    pub http_ok_pct: f64,
    /// Handshakes by the SYN retransmission that got in: how many, and
    /// when (first SYN → SYN-ACK) — the clients' real retransmission times.
    pub connected_after: Vec<RetransmissionTimes>,
}

/// Connections that got in with `retransmissions` SYN retransmissions.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RetransmissionTimes {
    pub retransmissions: u32,
    pub connections: u64,
    pub min_s: f64,
    pub median_s: f64,
    pub max_s: f64,
}

/// Converts client records into the simulator's [`Tally`]: a completed
/// handshake is accepted with delay first SYN → SYN-ACK; a refusal (RST)
/// rejected and a give-up timed out, with delay first SYN → end.
pub fn tally_records(records: &[ConnectionRecord]) -> (Tally, Outcomes) {
    let mut tally = Tally::default();
    let mut outcomes = Outcomes {
        attempts: records.len() as u64,
        ..Outcomes::default()
    };
    let mut ok = 0;
    let mut by_retransmissions: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    for r in records {
        *outcomes
            .by_outcome
            .entry(r.outcome.name().to_string())
            .or_insert(0) += 1;
        if r.outcome == Outcome::Ok {
            ok += 1;
        }
        let retransmissions = r.syn_retransmissions.unwrap_or(0);
        let since_start =
            |t: Option<u64>| -> Option<Nanos> { Some(Nanos(t?.saturating_sub(r.start_ns?))) };
        if let Some(delay) = since_start(r.connected_ns) {
            outcomes.connected += 1;
            by_retransmissions
                .entry(retransmissions)
                .or_default()
                .push(delay.as_secs_f64());
            if r.outcome != Outcome::Ok {
                outcomes.connected_not_ok += 1;
            }
            tally.record(SimOutcome::Accepted, delay, retransmissions);
            continue;
        }
        let verdict = match r.outcome {
            Outcome::Refused | Outcome::Reset => Some(SimOutcome::Rejected),
            Outcome::TimedOut | Outcome::Frustrated => Some(SimOutcome::TimedOut),
            _ => None,
        };
        match (verdict, since_start(r.end_ns)) {
            (Some(verdict), Some(delay)) => tally.record(verdict, delay, retransmissions),
            _ => outcomes.other += 1,
        }
    }
    outcomes.http_ok_pct = 100.0 * ok as f64 / outcomes.attempts.max(1) as f64;
    for (retransmissions, mut delays) in by_retransmissions {
        delays.sort_by(f64::total_cmp);
        outcomes.connected_after.push(RetransmissionTimes {
            retransmissions,
            connections: delays.len() as u64,
            min_s: delays[0],
            median_s: delays[delays.len() / 2],
            max_s: delays[delays.len() - 1],
        });
    }
    (tally, outcomes)
}

// ---------------------------------------------------------------------------
// The gate's JSON-lines log.

/// Totals of a `vantage gate run` log (`crates/live/src/gate/log.rs`: one
/// JSON object per interval), summed over its lines.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct GateLogTotals {
    pub lines: u64,
    /// SYNs to the listener the gate saw.
    pub arrivals: u64,
    /// The filter's verdicts on them.
    pub accepted: u64,
    pub dropped: u64,
    pub rejected: u64,
    /// Other queued packets, let through.
    pub passed: u64,
    /// Packets the kernel let through unseen (queue full, `--queue-bypass`).
    pub overruns: u64,
    /// Refused verdicts and failed sends.
    pub errors: u64,
}

#[derive(Deserialize)]
struct GateLogLine {
    arrivals: u64,
    accepted: u64,
    dropped: u64,
    rejected: u64,
    #[serde(default)]
    passed: u64,
    #[serde(default)]
    overruns: u64,
    #[serde(default)]
    errors: u64,
}

/// Sums the interval lines of a gate log; an unreadable file or a line
/// without the counts is an error naming the line.
pub fn gate_log_totals(path: &Path) -> Result<GateLogTotals, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut totals = GateLogTotals::default();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let l: GateLogLine = serde_json::from_str(line)
            .map_err(|e| format!("{} line {}: {e}", path.display(), n + 1))?;
        totals.lines += 1;
        totals.arrivals += l.arrivals;
        totals.accepted += l.accepted;
        totals.dropped += l.dropped;
        totals.rejected += l.rejected;
        totals.passed += l.passed;
        totals.overruns += l.overruns;
        totals.errors += l.errors;
    }
    Ok(totals)
}

// ---------------------------------------------------------------------------
// Results.

/// One line of results.
#[derive(Clone, Debug, Serialize)]
pub struct ResultRow {
    pub profile: String,
    pub variant: String,
    pub label: String,
    /// `live`, `sim-same-arrivals` or `sim-long`.
    pub source: String,
    /// The simulator's filter (sim rows).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<Summary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcomes: Option<Outcomes>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dir: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gate: Option<GateReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gate_log: Option<GateLogTotals>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Runs the simulator's model of `run` on `first_syns`.
pub(crate) fn simulate_model(
    model: &FilterModel,
    clients: &ClientMix,
    first_syns: &[Nanos],
    seed: u64,
) -> Result<Tally> {
    let mut filter = model.params.build(model.kind, &model.filter_clients)?;
    let mut rng = generator(seed);
    let network = Network {
        base_delay: Nanos::ZERO,
        jitter: Nanos::ZERO,
    };
    let result = simulate(
        filter.as_mut(),
        clients,
        network,
        first_syns,
        Recording::default(),
        &mut rng,
    );
    Ok(result.tally)
}

/// Whole experiment output.
#[derive(Serialize)]
pub struct ExperimentReport {
    pub file: String,
    pub title: String,
    pub quick: bool,
    pub delay_cost: f64,
    pub reject_cost: f64,
    pub sim_repetitions: u32,
    pub sim_horizon_s: f64,
    pub workload: Vec<WorkloadStats>,
    pub rows: Vec<ResultRow>,
    pub checks: Vec<Check>,
    pub notes: Vec<String>,
}

pub(crate) fn sim_row(
    run: &PlannedRun,
    model: &FilterModel,
    source: &str,
    tally: &Tally,
    h: f64,
    r: f64,
) -> ResultRow {
    ResultRow {
        profile: run.profile.clone(),
        variant: run.variant.id.clone(),
        label: run.variant.label.clone(),
        source: source.into(),
        model: Some(model.describe.clone()),
        summary: Some(tally.summary(h, r)),
        outcomes: None,
        dir: None,
        gate: None,
        gate_log: None,
        problems: Vec::new(),
        error: None,
    }
}

/// The simulator's rows: every modelled variant on the live arrivals and
/// on the long run.
/// An arrival model (with the long run's horizon) and the run's seed.
type LongRunKey = (ArrivalConfig, u64);

fn simulator_rows(x: &Experiment) -> Result<Vec<ResultRow>> {
    // The long run's arrivals, drawn once per arrival model and seed (all
    // runs usually share one) and shared by every filter: common random
    // numbers, as in the simulator's own studies.
    let mut long_arrivals: Vec<(LongRunKey, Vec<Vec<Nanos>>)> = Vec::new();
    for run in &x.runs {
        let mut config = run.spec.load.arrivals.clone();
        config.duration_s = x.sim_horizon.as_secs_f64();
        config.max_connections = MAX_CONNECTIONS_LIMIT;
        let key = (config, run.spec.seed);
        if run.model.is_none() || long_arrivals.iter().any(|(k, _)| *k == key) {
            continue;
        }
        let schedules = (0..u64::from(x.sim_repetitions))
            .into_par_iter()
            .map(|rep| key.0.schedule(key.1.wrapping_add(1_000 + rep)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| anyhow!("{e}"))?;
        long_arrivals.push((key, schedules));
    }
    let per_run: Vec<Result<Vec<ResultRow>>> = x
        .runs
        .par_iter()
        .map(|run| -> Result<Vec<ResultRow>> {
            let Some(model) = &run.model else {
                return Ok(Vec::new());
            };
            let seed = run.spec.seed;
            let schedule = run
                .spec
                .load
                .arrivals
                .schedule(seed)
                .map_err(|e| anyhow!("{e}"))?;
            let same = simulate_model(model, &run.sim_clients, &schedule, seed ^ 0xC11E)?;
            let mut config = run.spec.load.arrivals.clone();
            config.duration_s = x.sim_horizon.as_secs_f64();
            config.max_connections = MAX_CONNECTIONS_LIMIT;
            let schedules = long_arrivals
                .iter()
                .find(|((c, s), _)| *c == config && *s == seed)
                .map(|(_, schedules)| schedules)
                .ok_or_else(|| anyhow!("no long-run arrivals for variant {}", run.variant.id))?;
            let mut long = Tally::default();
            for (rep, first_syns) in schedules.iter().enumerate() {
                let rep_seed = seed.wrapping_add(1_000 + rep as u64);
                long.merge(&simulate_model(
                    model,
                    &run.sim_clients,
                    first_syns,
                    rep_seed ^ 0xC11E,
                )?);
            }
            Ok(vec![
                sim_row(
                    run,
                    model,
                    "sim-same-arrivals",
                    &same,
                    x.delay_cost,
                    x.reject_cost,
                ),
                sim_row(run, model, "sim-long", &long, x.delay_cost, x.reject_cost),
            ])
        })
        .collect();
    let mut rows = Vec::new();
    for r in per_run {
        rows.extend(r?);
    }
    Ok(rows)
}

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

/// One live run: the testbed run, then its records as a tally.
fn live_row(
    run: &PlannedRun,
    runs_dir: &Path,
    stamp: &str,
    stop: &Arc<AtomicBool>,
    bar: &ProgressBar,
    h: f64,
    r: f64,
) -> Result<ResultRow, RunError> {
    let dir = runs_dir.join(format!("{}-{stamp}", run.spec.name));
    let exe = vantage_binary().map_err(|e| RunError::Step {
        what: "finding the vantage binary",
        message: e.to_string(),
    })?;
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
    let what = format!("{} {} · {}", run.variant.id, run.variant.label, run.profile);
    let on_event = |event: RunEvent| match event {
        RunEvent::Phase(p) => bar.set_message(format!("{what}: {p}")),
        RunEvent::LoadStarted(d) => {
            bar.set_message(format!("{what}: load (at most {:.0} s)", d.as_secs_f64()))
        }
        RunEvent::LoadFinished => bar.set_message(format!("{what}: load finished")),
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
fn finished_run(run: &PlannedRun, runs_dir: &Path, h: f64, r: f64) -> Result<Option<ResultRow>> {
    /// The part of `summary.json` a row needs.
    #[derive(Deserialize)]
    struct SavedSummary {
        interrupted: bool,
        gate: Option<GateReport>,
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
        let saved: SavedSummary = serde_json::from_slice(&summary).with_context(|| {
            format!("{}: not a run summary", dir.join("summary.json").display())
        })?;
        if saved.interrupted {
            continue;
        }
        let clients = dir.join("clients.csv");
        let file = std::fs::File::open(&clients)
            .with_context(|| format!("cannot open {}", clients.display()))?;
        let records = vantage_testbed::load::record::read_csv(std::io::BufReader::new(file))
            .with_context(|| format!("{}", clients.display()))?;
        return Ok(Some(row_from_records(run, dir, &records, saved.gate, h, r)));
    }
    Ok(None)
}

/// A run's row: its client records as a tally, its gate's report and log
/// totals, and whatever in them casts doubt on the numbers.
fn row_from_records(
    run: &PlannedRun,
    dir: PathBuf,
    records: &[ConnectionRecord],
    gate: Option<GateReport>,
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
                    if t.accepted + t.dropped + t.rejected != t.arrivals {
                        problems.push(format!(
                            "gate log: {} SYNs but {} verdicts",
                            t.arrivals,
                            t.accepted + t.dropped + t.rejected
                        ));
                    }
                    if t.overruns > 0 || t.errors > 0 {
                        problems.push(format!(
                            "gate log: {} packets passed the gate unseen (queue overruns), {} verdict errors",
                            t.overruns, t.errors
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

/// A line above the progress bar; on stderr as it is when the bar is hidden
/// (stderr not a terminal, as under `nohup`), so a log still tells which
/// run failed or was read back.
fn say(bar: &ProgressBar, line: String) {
    if bar.is_hidden() {
        eprintln!("{line}");
    } else {
        bar.println(line);
    }
}

/// `vantage testbed experiment FILE`.
/// With `resume`, runs that finished in an earlier invocation with the same
/// `--out` (see [`finished_run`]) are read back instead of run again.
pub fn run(
    file: &Path,
    quick: bool,
    json: bool,
    sim_only: bool,
    resume: bool,
    out: &Path,
) -> Result<()> {
    let x = Experiment::load(file, quick)?;
    std::fs::create_dir_all(out)
        .with_context(|| format!("cannot create output directory {}", out.display()))?;
    let mut workload = Vec::new();
    for profile in &x.profiles {
        if let Some(first) = x.runs.iter().find(|r| &r.profile == profile) {
            let schedule = first
                .spec
                .load
                .arrivals
                .schedule(first.spec.seed)
                .map_err(|e| anyhow!("{e}"))?;
            let stats = workload_stats(&first.spec, &schedule);
            if workload
                .iter()
                .all(|w: &WorkloadStats| w.seed != stats.seed)
            {
                workload.push(stats);
            }
        }
    }
    let mut rows = simulator_rows(&x)?;
    let mut interrupted = false;
    let mut failures = 0;
    if !sim_only {
        if !vantage_testbed::netns::is_root() {
            bail!("the live runs need root (they build network namespaces); `--sim-only` prints the simulator's numbers without them");
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
        let runs_dir = out.join("runs");
        let stamp = crate::testbed::timestamp();
        let bar = ProgressBar::new(x.runs.len() as u64).with_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} runs  {msg}",
            )
            .expect("progress template is valid"),
        );
        bar.enable_steady_tick(Duration::from_millis(200));
        say(
            &bar,
            format!(
                "{}: {} runs, at most {:.0} min of load",
                x.file,
                x.runs.len(),
                x.load_seconds() / 60.0
            ),
        );
        for run in &x.runs {
            if stop.load(Ordering::Relaxed) {
                interrupted = true;
                break;
            }
            if resume {
                if let Some(row) = finished_run(run, &runs_dir, x.delay_cost, x.reject_cost)? {
                    say(
                        &bar,
                        format!(
                            "variant {} · {}: finished earlier, read from {}",
                            run.variant.id,
                            run.profile,
                            row.dir
                                .as_deref()
                                .map(Path::display)
                                .map(|d| d.to_string())
                                .unwrap_or_default()
                        ),
                    );
                    rows.push(row);
                    bar.inc(1);
                    continue;
                }
            }
            let row = match live_row(
                run,
                &runs_dir,
                &stamp,
                &stop,
                &bar,
                x.delay_cost,
                x.reject_cost,
            ) {
                Ok(row) => row,
                Err(RunError::Interrupted(dir)) => {
                    interrupted = true;
                    say(
                        &bar,
                        format!("interrupted; partial results in {}", dir.display()),
                    );
                    break;
                }
                Err(e) => {
                    failures += 1;
                    say(
                        &bar,
                        format!("variant {} · {}: failed: {e}", run.variant.id, run.profile),
                    );
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
            bar.inc(1);
        }
        bar.finish_and_clear();
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
    let checks = checks(&x, &rows, "live");
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
    write_outputs(&report, &x, out)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report, &x);
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

// ---------------------------------------------------------------------------
// Checks.

fn find<'a>(
    rows: &'a [ResultRow],
    profile: &str,
    variant: &str,
    source: &str,
) -> Option<&'a Summary> {
    rows.iter()
        .find(|r| r.profile == profile && r.variant == variant && r.source == source)
        .and_then(|r| r.summary.as_ref())
}

/// Whether the Abacus Filter's numbers `af` bear out the paper's four
/// statements against TBF's `tbf`, with the file's thresholds: p99 delay
/// well below, mean delay well below, comparable success, far fewer
/// time-outs (which needs TBF to have timed some clients out).
pub(crate) fn statements_hold(c: &Checks, af: &Summary, tbf: &Summary) -> [bool; 4] {
    [
        af.delay_p99_s <= c.well_below_ratio * tbf.delay_p99_s,
        af.delay_mean_s <= c.well_below_ratio * tbf.delay_mean_s,
        (af.throughput_pct - tbf.throughput_pct).abs() <= c.comparable_success_points,
        tbf.timeouts_pct > 0.0 && af.timeouts_pct <= c.far_fewer_ratio * tbf.timeouts_pct,
    ]
}

/// The paper's statements about the Abacus Filter against TBF, with the
/// numbers of every candidate and baseline variant from `source` (`live`,
/// or `sim-same-arrivals` for the seed sweep); figure `section6-<source>`.
pub(crate) fn checks(x: &Experiment, rows: &[ResultRow], source: &str) -> Vec<Check> {
    let c = &x.checks;
    let label = |id: &str| {
        x.variants
            .iter()
            .find(|v| v.id == id)
            .map_or(id.to_string(), |v| format!("({id}) {}", v.label))
    };
    let mut out = Vec::new();
    for profile in &x.profiles {
        for candidate in &c.candidates {
            for baseline in &c.baselines {
                let (Some(af), Some(tbf)) = (
                    find(rows, profile, candidate, source),
                    find(rows, profile, baseline, source),
                ) else {
                    continue;
                };
                let figure = format!("section6-{source}");
                let holds = statements_hold(c, af, tbf);
                out.push(Check {
                    figure: figure.clone(),
                    profile: profile.clone(),
                    claim: format!(
                        "{} bounds p99 connection delay well below {}",
                        label(candidate),
                        label(baseline)
                    ),
                    paper: format!("AF p99 ≤ {:.0} % of TBF's", 100.0 * c.well_below_ratio),
                    ours: format!("{:.2} s vs {:.2} s", af.delay_p99_s, tbf.delay_p99_s),
                    difference: Some(af.delay_p99_s - tbf.delay_p99_s),
                    holds: holds[0],
                });
                out.push(Check {
                    figure: figure.clone(),
                    profile: profile.clone(),
                    claim: format!(
                        "… and mean connection delay, the paper's Figure 8 metric, well below {}'s",
                        label(baseline)
                    ),
                    paper: format!("AF mean ≤ {:.0} % of TBF's", 100.0 * c.well_below_ratio),
                    ours: format!("{:.2} s vs {:.2} s", af.delay_mean_s, tbf.delay_mean_s),
                    difference: Some(af.delay_mean_s - tbf.delay_mean_s),
                    holds: holds[1],
                });
                out.push(Check {
                    figure: figure.clone(),
                    profile: profile.clone(),
                    claim: format!("… at a success rate comparable to {}'s", label(baseline)),
                    paper: format!("within {} points", c.comparable_success_points),
                    ours: format!("{:.1} % vs {:.1} %", af.throughput_pct, tbf.throughput_pct),
                    difference: Some(af.throughput_pct - tbf.throughput_pct),
                    holds: holds[2],
                });
                out.push(Check {
                    figure,
                    profile: profile.clone(),
                    claim: format!("… with far fewer client time-outs than {}", label(baseline)),
                    paper: format!(
                        "≤ {:.0} % of TBF's (paper: 0.04 % vs 5.5 %)",
                        100.0 * c.far_fewer_ratio
                    ),
                    ours: format!("{:.2} % vs {:.2} %", af.timeouts_pct, tbf.timeouts_pct),
                    difference: Some(af.timeouts_pct - tbf.timeouts_pct),
                    holds: holds[3],
                });
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Output.

fn right(text: String) -> Cell {
    Cell::new(text).set_alignment(CellAlignment::Right)
}

fn source_name(row: &ResultRow) -> String {
    match row.source.as_str() {
        "live" => "live".into(),
        "sim-same-arrivals" => format!("sim {}", row.model.as_deref().unwrap_or("")),
        _ => format!("sim {} long", row.model.as_deref().unwrap_or("")),
    }
}

fn metrics_table(rows: &[&ResultRow]) -> Table {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    table.set_header(vec![
        "profile",
        "variant",
        "measured",
        "attempts",
        "success %",
        "delay mean s",
        "p99 s",
        "timed out %",
        "rejected %",
        "cost",
        "SYN retx",
    ]);
    for row in rows {
        let mut cells = vec![
            Cell::new(&row.profile),
            Cell::new(format!("({}) {}", row.variant, row.label)),
            Cell::new(source_name(row)),
        ];
        match (&row.summary, &row.error) {
            (Some(m), _) => {
                for v in [
                    m.requests.to_string(),
                    format!("{:.1}", m.throughput_pct),
                    format!("{:.2}", m.delay_mean_s),
                    format!("{:.2}", m.delay_p99_s),
                    format!("{:.2}", m.timeouts_pct),
                    format!("{:.1}", m.rejects_pct),
                    format!("{:.2}", m.cost_mean),
                    format!("{:.2}", m.retransmissions_mean),
                ] {
                    cells.push(right(v));
                }
            }
            (None, Some(_)) => cells.push(Cell::new("failed (see Runs)")),
            (None, None) => cells.push(Cell::new("—")),
        }
        table.add_row(cells);
    }
    table
}

/// Prints every table for people.
fn print_report(report: &ExperimentReport, x: &Experiment) {
    println!("# {} — {}\n", report.title, report.file);
    println!(
        "h = {} per second of delay, r = {} per rejected or timed-out connection{}\n",
        report.delay_cost,
        report.reject_cost,
        if report.quick { "; --quick" } else { "" }
    );
    for w in &report.workload {
        println!(
            "arrivals (seed {}): {} connections in {} s — mean {:.1}/s, σ {:.1}/s, peak {}/s, {} s above the server's capacity{}",
            w.seed,
            w.connections,
            w.duration_s,
            w.mean_per_s,
            w.std_dev_per_s,
            w.peak_per_s,
            w.seconds_above_capacity,
            w.capacity_ratio
                .map_or(String::new(), |c| format!(" (capacity / mean = {c:.2})"))
        );
    }
    println!();
    let near: Vec<&ResultRow> = report
        .rows
        .iter()
        .filter(|r| r.source != "sim-long")
        .collect();
    println!("## Live clients, and the simulator on the same arrivals\n");
    println!("{}", metrics_table(&near));
    let long: Vec<&ResultRow> = report
        .rows
        .iter()
        .filter(|r| r.source == "sim-long")
        .collect();
    if !long.is_empty() {
        println!(
            "\n## The simulator, {} × {:.0} s of the same arrival model\n",
            report.sim_repetitions, report.sim_horizon_s
        );
        println!("{}", metrics_table(&long));
    }
    // Live minus simulator on the same arrivals.
    let mut diff = Table::new();
    diff.load_preset(UTF8_FULL_CONDENSED);
    diff.set_header(vec![
        "profile",
        "variant",
        "model",
        "Δ success pts",
        "Δ delay mean s",
        "Δ p99 s",
        "Δ timed out pts",
        "Δ rejected pts",
    ]);
    let mut any = false;
    for live in report.rows.iter().filter(|r| r.source == "live") {
        let Some(sim) = report.rows.iter().find(|r| {
            r.source == "sim-same-arrivals"
                && r.profile == live.profile
                && r.variant == live.variant
        }) else {
            continue;
        };
        let (Some(a), Some(b)) = (&live.summary, &sim.summary) else {
            continue;
        };
        any = true;
        diff.add_row(vec![
            Cell::new(&live.profile),
            Cell::new(format!("({}) {}", live.variant, live.label)),
            Cell::new(sim.model.clone().unwrap_or_default()),
            right(format!("{:+.1}", a.throughput_pct - b.throughput_pct)),
            right(format!("{:+.2}", a.delay_mean_s - b.delay_mean_s)),
            right(format!("{:+.2}", a.delay_p99_s - b.delay_p99_s)),
            right(format!("{:+.2}", a.timeouts_pct - b.timeouts_pct)),
            right(format!("{:+.1}", a.rejects_pct - b.rejects_pct)),
        ]);
    }
    if any {
        println!("\n## Live minus simulator (same arrivals)\n");
        println!("{diff}");
    }
    // Run details.
    let mut details = Vec::new();
    for row in report.rows.iter().filter(|r| r.source == "live") {
        let mut parts = Vec::new();
        if let Some(o) = &row.outcomes {
            let list: Vec<String> = o
                .by_outcome
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            parts.push(format!(
                "outcomes: {}; HTTP complete {:.1} %",
                list.join(", "),
                o.http_ok_pct
            ));
            let after: Vec<String> = o
                .connected_after
                .iter()
                .map(|t| {
                    format!(
                        "{}×{} ({:.2} s)",
                        t.connections, t.retransmissions, t.median_s
                    )
                })
                .collect();
            parts.push(format!(
                "connected after N retransmissions, count×N (median delay): {}",
                after.join(" ")
            ));
        }
        if let Some(g) = &row.gate {
            if let (Some(a), Some(r)) = (g.limit_accepted, g.limit_refused) {
                parts.push(format!("iptables: {a} SYNs within the limit, {r} over"));
            }
            if g.kind == "vantage" {
                parts.push(format!(
                    "gate exit {}{}",
                    g.exit_code.map_or_else(
                        || format!("signal {}", g.exit_signal.unwrap_or(0)),
                        |c| c.to_string()
                    ),
                    if g.killed { " (killed)" } else { "" }
                ));
            }
        }
        if let Some(t) = &row.gate_log {
            parts.push(format!(
                "gate log: {} SYNs = {} accepted + {} dropped + {} rejected; {} overruns, {} errors",
                t.arrivals, t.accepted, t.dropped, t.rejected, t.overruns, t.errors
            ));
        }
        parts.extend(row.problems.iter().map(|p| format!("problem: {p}")));
        if let Some(e) = &row.error {
            parts.push(format!("failed: {e}"));
        }
        if let Some(dir) = &row.dir {
            parts.push(format!("in {}", dir.display()));
        }
        if !parts.is_empty() {
            details.push(format!(
                "  ({}) {}: {}",
                row.variant,
                row.profile,
                parts.join("; ")
            ));
        }
    }
    if !details.is_empty() {
        println!("\n## Runs\n");
        for d in details {
            println!("{d}");
        }
    }
    for note in &x.notes {
        println!("note: {note}");
    }
    println!();
    vantage_lab::report::print_checks(&report.checks);
    if !report.checks.is_empty() {
        let holds = report.checks.iter().filter(|c| c.holds).count();
        println!(
            "{holds} of {} statements of the paper hold with live clients.",
            report.checks.len()
        );
    }
}

fn write_outputs(report: &ExperimentReport, x: &Experiment, out: &Path) -> Result<()> {
    let csv_path = out.join("experiment.csv");
    let mut w = csv::Writer::from_path(&csv_path)
        .with_context(|| format!("cannot write {}", csv_path.display()))?;
    w.write_record([
        "profile",
        "variant",
        "label",
        "source",
        "model",
        "requests",
        "throughput_pct",
        "delay_mean_s",
        "delay_p50_s",
        "delay_p95_s",
        "delay_p99_s",
        "cost_mean",
        "timeouts_pct",
        "rejects_pct",
        "retransmissions_mean",
        "attempts",
        "http_ok_pct",
        "other",
        "dir",
        "error",
    ])?;
    for row in &report.rows {
        let mut record = vec![
            row.profile.clone(),
            row.variant.clone(),
            row.label.clone(),
            row.source.clone(),
            row.model.clone().unwrap_or_default(),
        ];
        match &row.summary {
            Some(m) => record.extend([
                m.requests.to_string(),
                m.throughput_pct.to_string(),
                m.delay_mean_s.to_string(),
                m.delay_p50_s.to_string(),
                m.delay_p95_s.to_string(),
                m.delay_p99_s.to_string(),
                m.cost_mean.to_string(),
                m.timeouts_pct.to_string(),
                m.rejects_pct.to_string(),
                m.retransmissions_mean.to_string(),
            ]),
            None => record.extend(std::iter::repeat_n(String::new(), 10)),
        }
        match &row.outcomes {
            Some(o) => record.extend([
                o.attempts.to_string(),
                o.http_ok_pct.to_string(),
                o.other.to_string(),
            ]),
            None => record.extend(std::iter::repeat_n(String::new(), 3)),
        }
        record.push(
            row.dir
                .as_ref()
                .map_or(String::new(), |d| d.display().to_string()),
        );
        record.push(row.error.clone().unwrap_or_default());
        w.write_record(&record)?;
    }
    w.flush()?;
    vantage_lab::report::write_checks_csv(&out.join("checks.csv"), &report.checks)?;
    let json_path = out.join("experiment.json");
    std::fs::write(&json_path, serde_json::to_vec_pretty(report)?)
        .with_context(|| format!("cannot write {}", json_path.display()))?;
    plot(report, x, &out.join("p99-vs-success.svg"))
}

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
    RGBColor(140, 86, 75),
    RGBColor(127, 127, 127),
];

fn plot_error<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("plot: {e}")
}

/// p99 connection delay against success %, one panel per profile: live
/// runs filled, the simulator on the same arrivals hollow, one colour per
/// variant.
fn plot(report: &ExperimentReport, x: &Experiment, path: &Path) -> Result<()> {
    let panels = x.profiles.len().max(1);
    let root = SVGBackend::new(path, (520 * panels as u32, 440)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let areas = root.split_evenly((1, panels));
    for (area, profile) in areas.iter().zip(&x.profiles) {
        let rows: Vec<&ResultRow> = report
            .rows
            .iter()
            .filter(|r| &r.profile == profile && r.source != "sim-long" && r.summary.is_some())
            .collect();
        let xs: Vec<f64> = rows
            .iter()
            .filter_map(|r| r.summary.as_ref().map(|m| m.throughput_pct))
            .collect();
        let ys: Vec<f64> = rows
            .iter()
            .filter_map(|r| r.summary.as_ref().map(|m| m.delay_p99_s))
            .collect();
        let x_lo = xs.iter().copied().fold(100.0, f64::min);
        let x_lo = (x_lo - 2.0).max(0.0).floor();
        let y_hi = ys.iter().copied().fold(1.0, f64::max) * 1.15;
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!("p99 connection delay vs success — {profile} (● live, ○ simulator)"),
                ("sans-serif", 16),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(x_lo..100.5, 0.0..y_hi)
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .x_desc("connection attempts that succeed (%)")
            .y_desc("p99 connection-establishment delay (s)")
            .draw()
            .map_err(plot_error)?;
        for (i, variant) in x.variants.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let point = |source: &str| {
                rows.iter()
                    .find(|r| r.variant == variant.id && r.source == source)
                    .and_then(|r| r.summary.as_ref())
                    .map(|m| (m.throughput_pct, m.delay_p99_s))
            };
            let live = point("live");
            let sim = point("sim-same-arrivals");
            if live.is_none() && sim.is_none() {
                continue;
            }
            let name = format!("({}) {}", variant.id, variant.label);
            let label_style = ("sans-serif", 13).into_font().color(&color);
            if let Some(p) = live {
                chart
                    .draw_series(std::iter::once(
                        EmptyElement::at(p)
                            + Circle::new((0, 0), 6, color.filled())
                            + Text::new(variant.id.clone(), (8, -14), label_style.clone()),
                    ))
                    .map_err(plot_error)?
                    .label(name.clone())
                    .legend(move |(px, py)| Circle::new((px + 7, py), 5, color.filled()));
            }
            if let Some(p) = sim {
                let series = chart
                    .draw_series(std::iter::once(
                        EmptyElement::at(p)
                            + Circle::new((0, 0), 6, color.stroke_width(2))
                            + Text::new(format!("{}′", variant.id), (8, 2), label_style),
                    ))
                    .map_err(plot_error)?;
                if live.is_none() {
                    series.label(name).legend(move |(px, py)| {
                        Circle::new((px + 7, py), 5, color.stroke_width(2))
                    });
                }
            }
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 12))
            .draw()
            .map_err(plot_error)?;
    }
    root.present().map_err(plot_error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(
        outcome: Outcome,
        start: u64,
        connected: Option<u64>,
        end: u64,
        retx: u32,
    ) -> ConnectionRecord {
        ConnectionRecord {
            id: 0,
            client: 0,
            scheduled_ns: start,
            start_ns: Some(start),
            connected_ns: connected,
            request_sent_ns: None,
            first_byte_ns: None,
            last_byte_ns: None,
            end_ns: Some(end),
            outcome,
            syn_retransmissions: Some(retx),
            requests_completed: 0,
            bytes_received: 0,
            local_port: None,
            error: String::new(),
        }
    }

    const S: u64 = 1_000_000_000;

    #[test]
    fn records_become_the_papers_metrics() {
        let records = vec![
            record(Outcome::Ok, 10 * S, Some(10 * S), 11 * S, 0),
            record(Outcome::Ok, 10 * S, Some(13 * S), 14 * S, 3),
            // Connected, then gave up waiting for the response: admitted.
            record(Outcome::Frustrated, 0, Some(2 * S), 21 * S, 2),
            record(Outcome::Refused, 5 * S, None, 5 * S + S / 2, 0),
            record(Outcome::Frustrated, 0, None, 21 * S, 8),
            ConnectionRecord::not_started(9, 0, 0, "max_concurrent"),
        ];
        let (tally, outcomes) = tally_records(&records);
        assert_eq!(outcomes.attempts, 6);
        assert_eq!(outcomes.connected, 3);
        assert_eq!(outcomes.connected_not_ok, 1);
        assert_eq!(outcomes.other, 1);
        assert_eq!(outcomes.by_outcome["frustrated"], 2);
        assert!((outcomes.http_ok_pct - 100.0 * 2.0 / 6.0).abs() < 1e-9);
        let s = tally.summary(1.0, 21.0);
        assert_eq!(s.requests, 5);
        assert_eq!(s.throughput_pct, 60.0);
        assert_eq!(s.rejects_pct, 20.0);
        assert_eq!(s.timeouts_pct, 20.0);
        // Delays 0, 3, 2, 0.5, 21.
        assert!((s.delay_mean_s - 26.5 / 5.0).abs() < 1e-6);
        assert!((s.cost_mean - (26.5 / 5.0 + 21.0 * 2.0 / 5.0)).abs() < 1e-6);
        assert!((s.retransmissions_mean - 13.0 / 5.0).abs() < 1e-9);
        assert_eq!(s.delay_p99_s, 21.0);
        let after: Vec<(u32, u64, f64)> = outcomes
            .connected_after
            .iter()
            .map(|t| (t.retransmissions, t.connections, t.median_s))
            .collect();
        assert_eq!(after, vec![(0, 1, 0.0), (2, 1, 2.0), (3, 1, 3.0)]);
    }

    #[test]
    fn gate_logs_add_up_their_intervals() {
        let dir = std::env::temp_dir().join(format!("vantage-gx-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("gate.jsonl");
        std::fs::write(
            &path,
            "{\"time_s\":0.0,\"interval_s\":1.0,\"elapsed_s\":1.0,\"arrivals\":10,\"accepted\":7,\"dropped\":2,\"rejected\":1,\"passed\":3,\"overruns\":0,\"errors\":0,\"dry_run\":false,\"filter\":{\"tokens\":0}}\n\n{\"time_s\":1.0,\"arrivals\":5,\"accepted\":5,\"dropped\":0,\"rejected\":0,\"overruns\":2}\n",
        )
        .unwrap();
        let totals = gate_log_totals(&path).unwrap();
        assert_eq!(
            totals,
            GateLogTotals {
                lines: 2,
                arrivals: 15,
                accepted: 12,
                dropped: 2,
                rejected: 1,
                passed: 3,
                overruns: 2,
                errors: 0,
            }
        );
        std::fs::write(&path, "{\"time_s\":1}\n").unwrap();
        let error = gate_log_totals(&path).unwrap_err();
        assert!(
            error.contains("line 1") && error.contains("arrivals"),
            "{error}"
        );
        assert!(gate_log_totals(&dir.join("missing")).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

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
