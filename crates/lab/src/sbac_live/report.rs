//! Summaries, the paper's orderings beside the live and simulated numbers,
//! the Markdown table and the results folder.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use super::client::{ClientResult, SessionOutcome};
use super::plan::{Mode, PatternPlan, SbacLivePlan, UtilizationInput, VariantKind, VariantPlan};
use crate::provenance::RunRecord;
use crate::studies::sbac::{SbacRow, NEGLIGIBLE_ABORTS_PCT, TABLE2};
use crate::{Check, Criterion, LabError, ScenarioFile};
use vantage_sim::sessions::SegmentTrace;

/// Sessions by outcome, over some arrivals.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Counts {
    pub attempted: u64,
    pub completed: u64,
    pub aborted: u64,
    pub rejected: u64,
    pub failed_at_start: u64,
    pub unfinished: u64,
}

impl Counts {
    /// Sessions whose first request was answered 2xx.
    pub fn admitted(&self) -> u64 {
        self.completed + self.aborted
    }

    /// Aborted over admitted, percent (0 when none was admitted).
    pub fn aborted_pct(&self) -> f64 {
        pct(self.aborted as f64, self.admitted() as f64)
    }
}

fn pct(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        100.0 * part / whole
    } else {
        0.0
    }
}

/// One load level of a run (sessions by the segment they arrived in).
#[derive(Clone, Debug, Serialize)]
pub struct LoadRow {
    pub load_pct: f64,
    #[serde(flatten)]
    pub counts: Counts,
    pub aborted_pct: f64,
    pub completed_sessions_per_s: f64,
}

/// One run: a pattern, a mean session length, a variant; live or simulated.
#[derive(Clone, Debug, Serialize)]
pub struct RunSummary {
    pub source: &'static str,
    pub pattern: String,
    pub session_length_mean: f64,
    pub variant: String,
    /// The SBAC strategy, `none` without admission, absent for the peers.
    pub strategy: Option<String>,
    #[serde(flatten)]
    pub counts: Counts,
    pub not_started: u64,
    /// Arrivals to the end of the last session (live), or the simulator's
    /// measurement window.
    pub window_s: f64,
    pub completed_sessions_per_s: f64,
    pub aborted_pct: f64,
    pub rejected_pct: f64,
    pub useful_utilization_pct: f64,
    /// Backend CPU time over (cap × run time), live only.
    pub backend_cpu_pct: Option<f64>,
    pub response_p50_ms: Option<f64>,
    pub response_p99_ms: Option<f64>,
    pub by_load: Vec<LoadRow>,
    /// The load offered in the warm-up (if any) and each segment.
    pub traffic: Vec<TrafficRow>,
}

pub type LiveRow = RunSummary;

/// What the clients offered the backend in one stretch of the schedule,
/// live (sent by the clients) or simulated (sent by the simulated clients,
/// with the simulated server's busy time).
#[derive(Clone, Debug, Serialize)]
pub struct TrafficRow {
    /// `None` for the warm-up, else the pattern's segment index.
    pub segment: Option<usize>,
    pub load_pct: f64,
    pub seconds: f64,
    pub sessions_per_s: f64,
    /// Request attempts sent per second, retries included.
    pub requests_sent_per_s: f64,
    /// Live: attempts answered 2xx per second; simulated: requests the
    /// server finished per second.
    pub replies_per_s: f64,
    /// Simulated server's busy time over the segment, percent.
    pub utilization_pct: Option<f64>,
    /// Live: arrivals the generator started more than
    /// `client::LATE_ARRIVAL_S` late, and the largest delay.
    pub late_arrivals: Option<u64>,
    pub max_lateness_s: Option<f64>,
}

fn live_traffic(
    segment: Option<usize>,
    load_pct: f64,
    t: &super::client::SegmentTraffic,
) -> TrafficRow {
    TrafficRow {
        segment,
        load_pct,
        seconds: t.seconds,
        sessions_per_s: t.sessions_per_s(),
        requests_sent_per_s: t.requests_sent_per_s(),
        replies_per_s: t.requests_ok_per_s(),
        utilization_pct: None,
        late_arrivals: Some(t.late_arrivals),
        max_lateness_s: Some(t.max_lateness_s),
    }
}

fn simulated_traffic(segment: Option<usize>, t: &SegmentTrace) -> TrafficRow {
    TrafficRow {
        segment,
        load_pct: t.load * 100.0,
        seconds: t.seconds,
        sessions_per_s: t.sessions_per_s(),
        requests_sent_per_s: t.requests_sent_per_s(),
        replies_per_s: t.requests_served_per_s(),
        utilization_pct: Some(t.utilization_pct()),
        late_arrivals: None,
        max_lateness_s: None,
    }
}

fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let index = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    Some(sorted[index])
}

fn strategy_of(variant: &VariantPlan) -> Option<String> {
    match &variant.kind {
        VariantKind::Sbac { strategy } => Some(strategy.clone()),
        VariantKind::None => Some("none".into()),
        _ => None,
    }
}

/// A live run's summary.
pub(super) fn summarize(
    pattern: &PatternPlan,
    mean: f64,
    variant: &VariantPlan,
    capacity_rps: f64,
    backend_cpu_s: f64,
    result: &ClientResult,
) -> RunSummary {
    let mut counts = Counts::default();
    let mut useful_requests = 0u64;
    let mut by_segment = vec![Counts::default(); pattern.loads_pct.len()];
    // The warm-up's sessions (no segment) loaded the backend; they are
    // not counted.
    for s in &result.sessions {
        let Some(segment) = s.segment else {
            continue;
        };
        add(&mut counts, s.outcome);
        if let Some(c) = by_segment.get_mut(segment) {
            add(c, s.outcome);
        }
        if s.outcome == SessionOutcome::Completed {
            useful_requests += s.ok_requests as u64;
        }
    }
    let mut levels: Vec<f64> = pattern.loads_pct.clone();
    levels.sort_by(f64::total_cmp);
    levels.dedup();
    let by_load = levels
        .iter()
        .map(|&load| {
            let mut c = Counts::default();
            let mut seconds = 0.0;
            for (i, l) in pattern.loads_pct.iter().enumerate() {
                if *l == load {
                    let s = &by_segment[i];
                    c.attempted += s.attempted;
                    c.completed += s.completed;
                    c.aborted += s.aborted;
                    c.rejected += s.rejected;
                    c.failed_at_start += s.failed_at_start;
                    c.unfinished += s.unfinished;
                    seconds += pattern.segment_s;
                }
            }
            LoadRow {
                load_pct: load,
                aborted_pct: c.aborted_pct(),
                completed_sessions_per_s: c.completed as f64 / seconds.max(1e-9),
                counts: c,
            }
        })
        .collect();
    let mut times = result.response_times_s.clone();
    times.sort_by(f64::total_cmp);
    RunSummary {
        source: "live",
        pattern: pattern.name.clone(),
        session_length_mean: mean,
        variant: variant.name.clone(),
        strategy: strategy_of(variant),
        aborted_pct: counts.aborted_pct(),
        rejected_pct: pct(counts.rejected as f64, counts.attempted as f64),
        // Sessions that arrived in the window finish in the drain after it:
        // rates are over the whole run, arrivals to the last session's end.
        completed_sessions_per_s: counts.completed as f64 / result.elapsed_s.max(1e-9),
        useful_utilization_pct: pct(useful_requests as f64, capacity_rps * result.elapsed_s),
        // The CPU time is the whole client run's, the warm-up included.
        backend_cpu_pct: Some(
            100.0 * backend_cpu_s / (result.elapsed_s + result.warmup_traffic.seconds).max(1e-9),
        ),
        response_p50_ms: quantile(&times, 0.5).map(|t| t * 1e3),
        response_p99_ms: quantile(&times, 0.99).map(|t| t * 1e3),
        counts,
        not_started: result.not_started,
        window_s: result.elapsed_s,
        by_load,
        traffic: (result.warmup_traffic.seconds > 0.0)
            .then(|| {
                live_traffic(
                    None,
                    pattern.loads_pct.first().copied().unwrap_or(0.0),
                    &result.warmup_traffic,
                )
            })
            .into_iter()
            .chain(
                result
                    .traffic
                    .iter()
                    .zip(&pattern.loads_pct)
                    .enumerate()
                    .map(|(i, (t, load))| live_traffic(Some(i), *load, t)),
            )
            .collect(),
    }
}

fn add(c: &mut Counts, outcome: SessionOutcome) {
    c.attempted += 1;
    match outcome {
        SessionOutcome::Completed => c.completed += 1,
        SessionOutcome::Aborted => c.aborted += 1,
        SessionOutcome::Rejected => c.rejected += 1,
        SessionOutcome::FailedAtStart => c.failed_at_start += 1,
        SessionOutcome::Unfinished => c.unfinished += 1,
    }
}

/// A simulator row in the same shape; `segments` is the number of the
/// pattern's segments (the simulator's pattern is the warm-up, the
/// segments, and a tail).
pub(super) fn from_simulator(row: &SbacRow, segments: usize) -> RunSummary {
    let o = &row.outcome;
    let counts = Counts {
        attempted: o.offered_sessions,
        completed: o.completed_sessions,
        aborted: o.aborted_sessions,
        rejected: o.rejected_sessions,
        failed_at_start: o.refused_sessions,
        unfinished: 0,
    };
    let strategy = row.meta.strategy.clone();
    RunSummary {
        source: "simulator",
        pattern: row.meta.pattern.clone(),
        session_length_mean: row.meta.session_length_mean,
        variant: if strategy == "none" {
            "none".into()
        } else {
            format!("sbac-{strategy}")
        },
        strategy: Some(strategy),
        counts,
        not_started: 0,
        window_s: o.window_s,
        completed_sessions_per_s: o.completed_sessions_per_s,
        aborted_pct: o.aborted_pct,
        rejected_pct: o.rejected_pct,
        useful_utilization_pct: o.useful_utilization_pct,
        backend_cpu_pct: Some(o.utilization_pct),
        response_p50_ms: None,
        response_p99_ms: None,
        by_load: Vec::new(),
        traffic: o
            .segments
            .iter()
            .take(segments + 1)
            .enumerate()
            .filter(|(i, t)| *i > 0 || t.seconds > 0.0)
            .map(|(i, t)| simulated_traffic(i.checked_sub(1), t))
            .collect(),
    }
}

/// One of the paper's orderings, judged on the live runs and on the
/// simulator's.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub pattern: String,
    pub session_length_mean: f64,
    pub live: Check,
    pub simulator: Option<Check>,
    /// When the verdicts differ: why, with the live cells' sampling noise.
    pub why_they_differ: Option<String>,
}

/// Everything the experiment measured.
#[derive(Clone, Debug, Serialize)]
pub struct LiveReport {
    pub experiment: String,
    pub quick: bool,
    pub mode: Mode,
    pub backend_cpu_cores: f64,
    pub capacity_connections: u32,
    pub timeout_s: f64,
    pub retries: u32,
    pub capacity_rps: f64,
    /// Backend CPU during the capacity measurement, over the cap.
    pub capacity_cpu_fraction: f64,
    pub capacity_failures: u64,
    pub live: Vec<RunSummary>,
    pub simulator: Vec<RunSummary>,
    pub comparisons: Vec<Comparison>,
    pub duration_s: f64,
}

pub(super) fn build(
    plan: &SbacLivePlan,
    quick: bool,
    capacity_rps: f64,
    capacity_cpu_fraction: f64,
    capacity_failures: u64,
    live: Vec<RunSummary>,
    simulator: Vec<RunSummary>,
) -> LiveReport {
    let comparisons = compare(&live, &simulator, plan.sbac.utilization);
    LiveReport {
        experiment: plan.experiment.name.clone(),
        quick,
        mode: plan.mode(quick),
        backend_cpu_cores: plan.backend.cpu_cores,
        capacity_connections: plan.backend.capacity_connections,
        timeout_s: plan.clients.timeout_s,
        retries: plan.clients.retries,
        capacity_rps,
        capacity_cpu_fraction,
        capacity_failures,
        live,
        simulator,
        comparisons,
        duration_s: 0.0,
    }
}

fn find<'a>(
    rows: &'a [RunSummary],
    pattern: &str,
    mean: f64,
    strategy: &str,
) -> Option<&'a RunSummary> {
    rows.iter().find(|r| {
        r.pattern == pattern
            && r.session_length_mean == mean
            && r.strategy.as_deref() == Some(strategy)
    })
}

/// The four orderings for one (pattern, mean) in one source.
fn orderings(rows: &[RunSummary], pattern: &str, mean: f64, source: &str) -> Vec<Check> {
    let get = |s: &str| find(rows, pattern, mean, s);
    let (Some(stable), Some(responsive), Some(hybrid), Some(predictive)) = (
        get("stable"),
        get("responsive"),
        get("hybrid"),
        get("predictive"),
    ) else {
        return Vec::new();
    };
    let profile = format!("{pattern}, L = {mean}, {source}");
    let figure = "Table 2 / Fig. 11";
    let ab = |r: &RunSummary| r.aborted_pct;
    let negl = NEGLIGIBLE_ABORTS_PCT;
    let mut checks = Vec::new();
    let others = [ab(stable), ab(responsive), ab(hybrid)];
    let min_other = others.iter().copied().fold(f64::INFINITY, f64::min);
    checks.push(
        Check::statement(
            figure,
            profile.clone(),
            "predictive aborts the fewest admitted sessions",
            "predictive ≤ the others",
            format!(
                "predictive {:.2} %, others {:.2}/{:.2}/{:.2} % (stable/responsive/hybrid)",
                ab(predictive),
                others[0],
                others[1],
                others[2]
            ),
        )
        .relation(
            format!("predictive's aborted % ≤ the least of the others + {negl} points"),
            ab(predictive) <= min_other + negl,
        ),
    );
    if mean <= 5.0 {
        let max_other = [ab(responsive), ab(hybrid), ab(predictive)]
            .into_iter()
            .fold(f64::NEG_INFINITY, f64::max);
        checks.push(
            Check::statement(
                figure,
                profile.clone(),
                "stable aborts the most for short sessions",
                "stable ≥ the others",
                format!(
                    "stable {:.2} %, the most of the others {:.2} %",
                    ab(stable),
                    max_other
                ),
            )
            .relation(
                format!("stable's aborted % ≥ the most of the others − {negl} points"),
                ab(stable) >= max_other - negl,
            ),
        );
    }
    let low = ab(predictive).min(ab(stable));
    checks.push(
        Check::statement(
            figure,
            profile.clone(),
            "hybrid aborts between predictive and stable",
            "predictive ≤ hybrid ≤ stable",
            format!(
                "predictive {:.2} %, hybrid {:.2} %, stable {:.2} %",
                ab(predictive),
                ab(hybrid),
                ab(stable)
            ),
        )
        .relation(
            format!("min(predictive, stable) − {negl} ≤ hybrid ≤ stable + {negl} points"),
            ab(hybrid) >= low - negl && ab(hybrid) <= ab(stable) + negl,
        ),
    );
    let ratio = if stable.completed_sessions_per_s > 0.0 {
        hybrid.completed_sessions_per_s / stable.completed_sessions_per_s
    } else {
        0.0
    };
    checks.push(
        Check::statement(
            figure,
            profile,
            "hybrid completes sessions at stable's rate",
            "hybrid ≈ stable",
            format!(
                "hybrid {:.2}/s, stable {:.2}/s (ratio {ratio:.2})",
                hybrid.completed_sessions_per_s, stable.completed_sessions_per_s
            ),
        )
        .unit("ratio")
        .judge(ratio, Criterion::AtLeast(0.9)),
    );
    checks
}

/// Binomial standard error of an aborted share, percentage points.
fn noise_pct(row: &RunSummary) -> f64 {
    let n = row.counts.admitted() as f64;
    if n <= 0.0 {
        return f64::INFINITY;
    }
    let p = row.aborted_pct / 100.0;
    100.0 * (p * (1.0 - p) / n).sqrt().max(1.0 / n)
}

fn compare(
    live: &[RunSummary],
    simulator: &[RunSummary],
    input: UtilizationInput,
) -> Vec<Comparison> {
    let proxy_input = match input {
        UtilizationInput::Occupancy => {
            "the requests in flight at the backend over its concurrency (queued ones included)"
        }
        UtilizationInput::Cgroup | UtilizationInput::Pids => {
            "the backend's CPU time per interval over its cap"
        }
    };
    let mut keys: Vec<(String, f64)> = Vec::new();
    for r in live {
        if !keys
            .iter()
            .any(|(p, m)| *p == r.pattern && *m == r.session_length_mean)
        {
            keys.push((r.pattern.clone(), r.session_length_mean));
        }
    }
    let mut out = Vec::new();
    for (pattern, mean) in keys {
        let live_checks = orderings(live, &pattern, mean, "live");
        let sim_checks = orderings(simulator, &pattern, mean, "simulator");
        let noise: Vec<String> = ["stable", "responsive", "hybrid", "predictive"]
            .iter()
            .filter_map(|s| find(live, &pattern, mean, s).map(|r| (s, r)))
            .map(|(s, r)| {
                format!(
                    "{s} {:.2} ± {:.2} ({} admitted)",
                    r.aborted_pct,
                    noise_pct(r),
                    r.counts.admitted()
                )
            })
            .collect();
        for live_check in live_checks {
            let sim = sim_checks
                .iter()
                .find(|c| c.claim == live_check.claim)
                .cloned();
            let why = match &sim {
                Some(s) if s.holds != live_check.holds => Some(format!(
                    "live aborted % with one standard error: {}; the live backend is nginx on a \
                     CFS-throttled CPU (service times not exponential, throttled in 10 ms slices) \
                     and the proxy's utilization is {proxy_input}, where the simulator models \
                     exponential service at the measured capacity and exact busy time",
                    noise.join(", ")
                )),
                _ => None,
            };
            out.push(Comparison {
                pattern: pattern.clone(),
                session_length_mean: mean,
                live: live_check,
                simulator: sim,
                why_they_differ: why,
            });
        }
    }
    out
}

fn num(x: Option<f64>, digits: usize) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{v:.digits$}"),
        _ => "–".into(),
    }
}

fn paper_table2(pattern: &str, strategy: Option<&str>, mean: f64) -> Option<f64> {
    let strategy = strategy?;
    let column = [5.0, 15.0, 50.0].iter().position(|m| *m == mean)?;
    TABLE2
        .iter()
        .find(|(p, s, _)| *p == pattern && *s == strategy)
        .map(|(_, _, values)| values[column])
}

/// The report as Markdown: the capacity, one table per pattern (live beside
/// the simulator and the paper's Table 2), the per-load table and the
/// orderings.
pub fn render(report: &LiveReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Backend: nginx, one worker, CPU capped at {} cores; measured capacity {:.1} requests/s \
         ({} closed-loop clients for {} s, backend CPU {:.0} % of the cap, {} failed requests). \
         Mode: {}; think time {} s, time-out {} s with {} retry; {:.0} s in all.\n",
        report.backend_cpu_cores,
        report.capacity_rps,
        report.capacity_connections,
        report.mode.capacity_s,
        report.capacity_cpu_fraction * 100.0,
        report.capacity_failures,
        if report.quick { "quick" } else { "full" },
        report.mode.think_time_s,
        report.timeout_s,
        report.retries,
        report.duration_s
    );
    let mut patterns: Vec<&str> = Vec::new();
    for r in &report.live {
        if !patterns.contains(&r.pattern.as_str()) {
            patterns.push(&r.pattern);
        }
    }
    for pattern in patterns {
        let loads = report
            .mode
            .patterns
            .iter()
            .find(|p| p.name == pattern)
            .map(|p| format!("{:?} % for {} s each", p.loads_pct, p.segment_s))
            .unwrap_or_default();
        let _ = writeln!(s, "### {pattern} ({loads})\n");
        let _ = writeln!(
            s,
            "| L | variant | sessions | completed/s | aborted % of admitted | rejected | failed at start | unfinished | useful util. % | backend CPU % | p50 ms | p99 ms | sim. aborted % | sim. completed/s | paper aborted % |"
        );
        let _ = writeln!(
            s,
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
        );
        for r in report.live.iter().filter(|r| r.pattern == pattern) {
            let sim = r
                .strategy
                .as_deref()
                .and_then(|st| find(&report.simulator, pattern, r.session_length_mean, st));
            let _ = writeln!(
                s,
                "| {} | {} | {} | {:.2} | {:.2} | {} | {} | {} | {:.1} | {} | {} | {} | {} | {} | {} |",
                r.session_length_mean,
                r.variant,
                r.counts.attempted,
                r.completed_sessions_per_s,
                r.aborted_pct,
                r.counts.rejected,
                r.counts.failed_at_start,
                r.counts.unfinished,
                r.useful_utilization_pct,
                num(r.backend_cpu_pct, 0),
                num(r.response_p50_ms, 1),
                num(r.response_p99_ms, 1),
                num(sim.map(|x| x.aborted_pct), 2),
                num(sim.map(|x| x.completed_sessions_per_s), 2),
                num(paper_table2(pattern, r.strategy.as_deref(), r.session_length_mean), 2),
            );
        }
        let _ = writeln!(s);
        let _ = writeln!(s, "By load (sessions by the segment they arrived in):\n");
        let _ = writeln!(s, "| L | variant | load % | sessions | completed/s | aborted % | rejected | failed at start |");
        let _ = writeln!(s, "|---|---|---|---|---|---|---|---|");
        for r in report.live.iter().filter(|r| r.pattern == pattern) {
            for l in &r.by_load {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {:.2} | {:.2} | {} | {} |",
                    r.session_length_mean,
                    r.variant,
                    l.load_pct,
                    l.counts.attempted,
                    l.completed_sessions_per_s,
                    l.aborted_pct,
                    l.counts.rejected,
                    l.counts.failed_at_start
                );
            }
        }
        let _ = writeln!(s);
        render_traffic(&mut s, report, pattern);
    }
    let _ = writeln!(s, "### The paper's orderings\n");
    let _ = writeln!(s, "| pattern | L | claim | paper | live | holds (live) | simulator | holds (sim.) | criterion | why they differ |");
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|");
    for c in &report.comparisons {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            c.pattern,
            c.session_length_mean,
            c.live.claim,
            c.live.paper,
            c.live.ours,
            if c.live.holds { "yes" } else { "no" },
            c.simulator.as_ref().map_or("–".into(), |x| x.ours.clone()),
            c.simulator
                .as_ref()
                .map_or("–", |x| if x.holds { "yes" } else { "no" }),
            c.live.criterion,
            c.why_they_differ.as_deref().unwrap_or(""),
        );
    }
    s
}

/// The offered load by segment, the live clients beside the simulator's:
/// sessions and request attempts sent per second, replies per second, the
/// simulated server's utilization, and the live generator's lateness.
fn render_traffic(s: &mut String, report: &LiveReport, pattern: &str) {
    let _ = writeln!(
        s,
        "Offered load by segment (live: sent by the clients; sim.: the simulator's clients and server; \
         w = the warm-up, not counted; late = arrivals started > {} s after their time):\n",
        super::client::LATE_ARRIVAL_S
    );
    let _ = writeln!(s, "| L | variant | segment | load % | s | sessions/s | sim. sessions/s | requests sent/s | sim. requests sent/s | 2xx/s | sim. served/s | sim. util. % | late | max late s |");
    let _ = writeln!(
        s,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for r in report.live.iter().filter(|r| r.pattern == pattern) {
        let sim = r
            .strategy
            .as_deref()
            .and_then(|st| find(&report.simulator, pattern, r.session_length_mean, st));
        for t in &r.traffic {
            let other = sim.and_then(|x| x.traffic.iter().find(|o| o.segment == t.segment));
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {:.2} | {} | {:.1} | {} | {:.1} | {} | {} | {} | {} |",
                r.session_length_mean,
                r.variant,
                t.segment.map_or("w".to_string(), |i| (i + 1).to_string()),
                t.load_pct,
                t.seconds,
                t.sessions_per_s,
                num(other.map(|o| o.sessions_per_s), 2),
                t.requests_sent_per_s,
                num(other.map(|o| o.requests_sent_per_s), 1),
                t.replies_per_s,
                num(other.map(|o| o.replies_per_s), 1),
                num(other.and_then(|o| o.utilization_pct), 1),
                t.late_arrivals.map_or("–".into(), |n| n.to_string()),
                num(t.max_lateness_s, 3),
            );
        }
    }
    let _ = writeln!(s);
}

/// Writes `report.json`, `table.md` and `manifest.json` into `dir`.
pub fn write_results(
    report: &LiveReport,
    dir: &Path,
    record: &RunRecord,
    plan: ScenarioFile<'_>,
) -> Result<(), LabError> {
    crate::error::create_dir(dir)?;
    let write = |name: &str, text: String| crate::error::write_file(dir, name, text);
    write("report.json", serde_json::to_string_pretty(report)? + "\n")?;
    write("table.md", render(report))?;
    record
        .manifest(&[("sbac-live", std::slice::from_ref(&plan))])
        .write(dir)
}
