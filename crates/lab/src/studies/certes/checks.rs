//! The paper's stated results beside ours, per scenario and population.

use super::results::CertesRow;
use super::results::TrackPoint;
use super::run::CertesResult;
use super::{
    APPLICATION_PAPER_MIN_ERROR, CERTES_BOUND, INTERVAL_SWEEP_PREFIX, PAPER_ALL_TESTS_BOUND,
    PAPER_INTERVAL_MS, RECOVERY_TOLERANCE, SYN_TO_END_PAPER_MIN_ERROR, WARM_UP,
};
use crate::{Check, Criterion, Statement};
use std::collections::BTreeMap;

// ─────────────────────────────── checks ───────────────────────────────

/// Section 5.2: "the error being less than 2.5 % in all cases except Tests
/// L, N and P, which were less than 7.4 %".
const TESTS_WITHIN_PAPER_ALL_TESTS_BOUND: [&str; 3] = ["L", "N", "P"];

/// The bound the paper states for the Table II test `test` (empty: none).
fn paper_bound(test: &str) -> f64 {
    if TESTS_WITHIN_PAPER_ALL_TESTS_BOUND.contains(&test) {
        PAPER_ALL_TESTS_BOUND
    } else {
        CERTES_BOUND
    }
}

/// The population under which Test O's told model errs most; the model
/// with the learned clients must meet 2.5 % and do better.
const LEARNED_MUST_BEAT_TOLD_UNDER: &str = "mix-2026";

/// |ours| ≤ `bound`, both in per cent (`bound` a fraction).
fn within(bound: f64) -> Criterion {
    Criterion::Within {
        target: 0.0,
        tolerance: 100.0 * bound,
    }
}

fn pct(v: f64) -> String {
    format!("{:+.2} %", 100.0 * v)
}

/// The paper's statements beside our results.
pub fn checks(results: &[CertesResult]) -> Vec<Check> {
    let mut out = Vec::new();
    // The interval sweep's runs are judged against each other only: the
    // paper's figures were measured at 250 ms, and its 250-ms run repeats
    // Test C's.
    let paper_runs: Vec<&CertesResult> = results
        .iter()
        .filter(|r| !r.row.scenario.starts_with(INTERVAL_SWEEP_PREFIX))
        .collect();
    for r in paper_runs.iter().copied() {
        let row = &r.row;
        let figure = format!("{} ({})", row.scenario, row.figure);
        let statement = |claim: String, paper: String, ours: String| -> Statement {
            Check::statement(figure.as_str(), row.profile.as_str(), claim, paper, ours)
        };
        let mut add = |check: Check| out.push(check);
        let err = row.certes_rel_err;
        let test = r.paper.as_ref().map_or("", |p| p.test.as_str());
        let paper_bound = paper_bound(test);
        add(statement(
            format!(
                "Fig. 16: Certes' mean within {} % of the client-perceived mean",
                crate::study::number(100.0 * paper_bound)
            ),
            match (
                r.paper.as_ref().and_then(|p| p.certes_error_pct),
                paper_bound > CERTES_BOUND,
            ) {
                (_, true) => "≤ 7.4 % (Tests L, N, P; the other 13 within 2.5 %)".into(),
                (Some(e), false) => format!("≤ 2.5 % (Test {test}: {e} %)"),
                (None, false) => "≤ 2.5 % (13 of 16 tests)".into(),
            },
            pct(err),
        )
        .unit("%")
        .difference(Some(100.0 * (err.abs() - paper_bound)))
        .judge(100.0 * err, within(paper_bound)));
        if row.certes_bound > CERTES_BOUND {
            add(statement(
                format!(
                    "documented bound for this scenario: {}",
                    r.bound_reason.as_deref().unwrap_or("")
                ),
                format!("≤ {:.1} % (≤ 7.4 % in all tests)", 100.0 * row.certes_bound),
                pct(err),
            )
            .unit("%")
            .difference(Some(100.0 * (err.abs() - row.certes_bound)))
            .judge(100.0 * err, within(row.certes_bound)));
        }
        if let (Some(l), true) = (&row.learned, row.profile == LEARNED_MUST_BEAT_TOLD_UNDER) {
            add(statement(
                "beyond the paper: the model with the clients learned from the server's SYNs \
                 (give-ups at cell midpoints) meets 2.5 % and errs less than the model told \
                 21 s (Test O's misinformed case)"
                    .into(),
                "|learned| ≤ 2.5 % and < |told|".into(),
                format!(
                    "told {} s: {}; told the mixture: {}; learned: {}",
                    row.model_frustration_timeout_s,
                    pct(l.told_rel_err),
                    pct(l.told_mixture_rel_err),
                    pct(l.learned_rel_err)
                ),
            )
            .unit("%")
            .difference(Some(100.0 * (l.learned_rel_err.abs() - CERTES_BOUND)))
            .relation(
                "|learned model's error| ≤ 2.5 % and < |told model's error|",
                l.learned_rel_err.abs() <= CERTES_BOUND
                    && l.learned_rel_err.abs() < l.told_rel_err.abs(),
            ));
        }
        if let (Some(full_err), Some(full_mean)) = (row.full_rel_err, row.full_mean_s) {
            for check in full_model_checks(row, paper_bound, full_err, full_mean) {
                add(check);
            }
        }
        add(statement(
            "Fig. 16: SYN-to-END underestimates by 5 % to more than 80 %".into(),
            "−5 % … < −80 %".into(),
            pct(row.syn_to_end_rel_err),
        )
        .unit("%")
        .judge(
            100.0 * row.syn_to_end_rel_err,
            Criterion::AtMost(-100.0 * SYN_TO_END_PAPER_MIN_ERROR),
        ));
        add(statement(
            "Fig. 16: the application-level (Apache) time errs by at least 80 %".into(),
            "≤ −80 %".into(),
            pct(row.application_rel_err),
        )
        .unit("%")
        .judge(
            100.0 * row.application_rel_err,
            Criterion::AtMost(-100.0 * APPLICATION_PAPER_MIN_ERROR),
        ));
        add(statement(
            format!(
                "Figs. 18–19: Certes tracks the per-second mean (mean |error| ≤ {:.0} %)",
                100.0 * row.tracking_bound
            ),
            "close overlap".into(),
            format!(
                "{:.2} % over {} bins (p90 {:.1} %; 250 ms intervals {:.1} %)",
                100.0 * row.certes_tracking_err,
                row.tracking_bins,
                100.0 * row.certes_tracking_err_p90,
                100.0 * row.certes_interval_err
            ),
        )
        .unit("%")
        .relation(
            format!(
                "at least one bin, and mean |error| over the bins ≤ {} %",
                crate::study::number(100.0 * row.tracking_bound)
            ),
            row.tracking_bins > 0 && row.certes_tracking_err <= row.tracking_bound,
        ));
        add(statement(
            format!(
                "Figs. 18–19: … and the ten-second mean (mean |error| ≤ {:.0} %)",
                100.0 * row.tracking_bound_10s
            ),
            "close overlap".into(),
            format!("{:.2} %", 100.0 * row.certes_tracking_err_10s),
        )
        .unit("%")
        .relation(
            format!(
                "at least one bin, and mean |error| over the ten-second bins ≤ {} %",
                crate::study::number(100.0 * row.tracking_bound_10s)
            ),
            row.tracking_bins > 0 && row.certes_tracking_err_10s <= row.tracking_bound_10s,
        ));
        if let Some(mm1) = row.mm1_tracking_err {
            add(statement(
                "App. A, Eq. 32: the M/M/1 estimate tracks worse than Certes".into(),
                "Certes < M/M/1".into(),
                format!(
                    "Certes {:.2} %, M/M/1 {:.2} %",
                    100.0 * row.certes_tracking_err,
                    100.0 * mm1
                ),
            )
            .relation(
                "Certes' mean per-second |error| < M/M/1's",
                row.certes_tracking_err < mm1,
            ));
        }
        // Figures 23–24 compare the baselines on Test J's on/off load.
        if r.on_off && row.profile == "windows-9x-nt" {
            if let Some(sw) = row.sliding_window_tracking_err {
                add(statement(
                    "Figs. 23–24 (on/off load): the sliding window of Eq. 33 tracks worse than Certes".into(),
                    "Certes < window".into(),
                    format!(
                        "Certes {:.2} %, window {:.2} %",
                        100.0 * row.certes_tracking_err,
                        100.0 * sw
                    ),
                )
                .relation(
                    "Certes' mean per-second |error| < the sliding window's",
                    row.certes_tracking_err < sw,
                ));
            }
        }
        for (q, truth, certes, e, cdf) in [
            (
                "p90",
                row.truth_p90_s,
                row.certes_p90_s,
                row.p90_rel_err,
                row.p90_cdf_err,
            ),
            (
                "p99",
                row.truth_p99_s,
                row.certes_p99_s,
                row.p99_rel_err,
                row.p99_cdf_err,
            ),
        ] {
            if let (Some(t), Some(c), Some(e), Some(f)) = (truth, certes, e, cdf) {
                add(statement(
                    format!(
                        "Fig. 17: the estimated distribution at the true {q} within {:.0} points",
                        100.0 * row.percentile_bound
                    ),
                    "approximates the client's".into(),
                    format!(
                        "F̂ off by {:+.2} points ({q} {c:.3} s vs {t:.3} s, {})",
                        100.0 * f,
                        pct(e)
                    ),
                )
                .unit("points")
                .difference(Some(100.0 * f))
                .judge(100.0 * f, within(row.percentile_bound)));
            }
        }
        if let Some(start) = row.midstream_start_s {
            let fto = row.model_frustration_timeout_s;
            let recovered = row.midstream_recovered_after_s;
            let limit = row.midstream_recovery_limit_s.unwrap_or(fto);
            let recovery = statement(
                format!(
                    "App. B: started at {start:.2} s, Certes converges within one FTO (every later {:.0} s bin within {:.0} % of the estimator started at 0)",
                    row.tracking_bin_s,
                    100.0 * RECOVERY_TOLERANCE
                ),
                format!("after {fto:.0} s (≤ {limit:.2} s: the bin the FTO ends in)"),
                recovered.map_or("never".into(), |r| format!("after {r:.2} s")),
            )
            .unit("s")
            .difference(recovered.map(|r| r - fto));
            add(match recovered {
                Some(r) => recovery.judge(r, Criterion::AtMost(limit)),
                None => recovery.relation(
                    format!(
                        "recovered, after at most {} s (it never did)",
                        crate::study::number(limit)
                    ),
                    false,
                ),
            });
            if let Some(e) = row.midstream_after_fto_rel_err {
                add(statement(
                    "App. B: after one FTO, the mid-stream estimator's mean within 2.5 %".into(),
                    "≤ 2.5 %".into(),
                    pct(e),
                )
                .unit("%")
                .judge(100.0 * e, within(row.certes_bound)));
            }
        }
        let phases = queue_phases(&r.track);
        if let (Some(short), Some(long)) = (phases.first(), phases.last()) {
            if short.limit < long.limit {
                let describe = |p: &QueuePhase| {
                    format!(
                        "limit {}: client {:.3} s, Certes {:.3} s, SYN-to-END {:.3} s, {:.0} transactions/s, SYN drops {:.1} %",
                        p.limit,
                        p.truth_s,
                        p.certes_s,
                        p.syn_to_end_s,
                        p.transactions_per_s,
                        100.0 * p.syn_drop_rate
                    )
                };
                let ours = format!("{}; {}", describe(short), describe(long));
                add(statement(
                    format!(
                        "Fig. 21: the client-perceived mean is higher while the accept queue is short ({}) than while it is long ({})",
                        short.limit, long.limit
                    ),
                    "response time at the clients is high due to failed connection attempts".into(),
                    ours.clone(),
                )
                .unit("s")
                .difference(Some(short.truth_s - long.truth_s))
                .relation(
                    "client mean over the short-queue seconds > over the long-queue seconds",
                    short.truth_s > long.truth_s,
                ));
                add(statement(
                    format!(
                        "Fig. 21: SYN-to-END is lower while the accept queue is short ({}) than while it is long ({})",
                        short.limit, long.limit
                    ),
                    "the SYN-to-END time is small due to short queue lengths".into(),
                    ours.clone(),
                )
                .unit("s")
                .difference(Some(short.syn_to_end_s - long.syn_to_end_s))
                .relation(
                    "SYN-to-END mean over the short-queue seconds < over the long-queue seconds",
                    short.syn_to_end_s < long.syn_to_end_s,
                ));
                add(statement(
                    "Fig. 21: Certes sees the change the clients see (its short-queue mean minus its long-queue mean has the truth's sign, and each phase's mean within 2.5 %)".into(),
                    "Certes captures the effect of SYN drops".into(),
                    ours,
                )
                .relation(
                    "sign(Certes short − long) = sign(client short − long), and |Certes/client − 1| ≤ 2.5 % in both phases",
                    (short.certes_s - long.certes_s).signum() == (short.truth_s - long.truth_s).signum()
                        && [short, long]
                            .iter()
                            .all(|p| (p.certes_s / p.truth_s - 1.0).abs() <= CERTES_BOUND),
                ));
            }
        }
        if row.profile == "windows-9x-nt" {
            if let Some(paper) = &r.paper {
                if let Some([lo, hi]) = paper.syn_drop_pct {
                    let (ours_lo, ours_hi) = (row.syn_drop_pct_p5, row.syn_drop_pct_p95);
                    add(statement(
                        format!(
                            "Table II, Test {}: SYN drop rate (per-second p5–p95)",
                            paper.test
                        ),
                        format!("{lo}–{hi} %"),
                        format!("{ours_lo:.1}–{ours_hi:.1} %"),
                    )
                    .unit("%")
                    .relation(
                        "our p5–p95 range overlaps the paper's range",
                        ours_lo <= hi && ours_hi >= lo,
                    ));
                }
                if let Some([lo, hi]) = paper.connections_per_s {
                    let (ours_lo, ours_hi) = (row.connections_per_s_p5, row.connections_per_s_p95);
                    add(statement(
                        format!(
                            "Table II, Test {}: connections per second (per-second p5–p95)",
                            paper.test
                        ),
                        format!("{lo}–{hi}"),
                        format!("{ours_lo:.0}–{ours_hi:.0}"),
                    )
                    .unit("connections/s")
                    .relation(
                        "our p5–p95 range overlaps the paper's range",
                        ours_lo <= hi && ours_hi >= lo,
                    ));
                }
            }
        }
    }
    out.extend(interval_sweep_checks(results));
    // Over the study: how many scenarios are within 2.5 % and within 7.4 %.
    if !paper_runs.is_empty() {
        let n = paper_runs.len();
        let within = paper_runs
            .iter()
            .filter(|r| r.row.certes_rel_err.abs() <= CERTES_BOUND)
            .count();
        let within_all = paper_runs
            .iter()
            .filter(|r| r.row.certes_rel_err.abs() <= PAPER_ALL_TESTS_BOUND)
            .count();
        let worst = paper_runs
            .iter()
            .map(|r| r.row.certes_rel_err.abs())
            .fold(0.0, f64::max);
        out.push(
            Check::statement(
                "all (Fig. 16)",
                "all",
                "Certes within 2.5 % / within 7.4 % of the truth, over all runs",
                "13 of 16 / 16 of 16",
                format!(
                    "{within} of {n} / {within_all} of {n} (worst {:.2} %)",
                    100.0 * worst
                ),
            )
            .relation(
                "every run within 7.4 % (the count within 2.5 % is not checked)",
                within_all == n,
            ),
        );
    }
    // (|fast error|, |full error|, the paper's bound for the test).
    let full_runs: Vec<(f64, f64, f64)> = paper_runs
        .iter()
        .filter_map(|r| {
            let test = r.paper.as_ref().map_or("", |p| p.test.as_str());
            Some((
                r.row.certes_rel_err.abs(),
                r.row.full_rel_err?.abs(),
                paper_bound(test),
            ))
        })
        .collect();
    if !full_runs.is_empty() {
        let n = full_runs.len();
        let fast_within = full_runs.iter().filter(|(f, _, b)| f <= b).count();
        let full_within = full_runs.iter().filter(|(_, e, b)| e <= b).count();
        let both = full_runs
            .iter()
            .filter(|(f, e, b)| f <= b && e <= b)
            .count();
        out.push(
            Check::statement(
                "all (Sec. 3.1 vs 3.2)",
                "all",
                "Sec. 3.2: the fast model is sufficiently accurate to bypass the full model of Sec. 3.1 \
                 — over all runs, wherever the full model meets the paper's bound the fast one does, \
                 and the other way round",
                "\"near optimal results\"; \"sufficiently accurate to allow us to bypass\" the full model",
                format!(
                    "fast within the bound in {fast_within} of {n}, full in {full_within} of {n}, both in {both}"
                ),
            )
            .relation(
                "the runs where the fast model is within the paper's bound are those where the full one is",
                both == fast_within && both == full_within,
            ),
        );
    }
    out
}

/// The full model of Section 3.1 beside the fast one on one run. Fixed
/// from the paper's words before any result was seen: Section 3.2 calls the
/// fast model's results "near optimal", and (Section 3.2, Step 3) "the
/// results obtained by using these heuristics were sufficiently accurate to
/// allow us to bypass the use of the costlier optimization approach defined
/// in Section 3.1". Read as: (1) the two whole-run means agree within the
/// paper's own 2.5 %; (2) where the full model meets the paper's bound for
/// the test, so does the fast one; (3) the reverse, the full model as the
/// reference: wherever the fast one meets the bound, so does the full one.
fn full_model_checks(
    row: &CertesRow,
    paper_bound: f64,
    full_err: f64,
    full_mean: f64,
) -> Vec<Check> {
    let figure = format!("{} ({})", row.scenario, row.figure);
    let statement = |claim: String, paper: String, ours: String| -> Statement {
        Check::statement(figure.as_str(), row.profile.as_str(), claim, paper, ours)
    };
    let both = format!(
        "fast {} s ({}), full {} s ({}); truth {:.3} s",
        crate::study::number(row.certes_mean_s),
        pct(row.certes_rel_err),
        crate::study::number(full_mean),
        pct(full_err),
        row.truth_mean_s
    );
    let gap = if full_mean > 0.0 {
        row.certes_mean_s / full_mean - 1.0
    } else {
        0.0
    };
    let bound = crate::study::number(100.0 * paper_bound);
    let mut out = vec![statement(
        "Sec. 3.2: the fast model's results are near optimal (its whole-run mean within 2.5 % of \
         the full model's of Sec. 3.1)"
            .into(),
        "\"near optimal results\"".into(),
        format!("fast/full − 1 = {}; {both}", pct(gap)),
    )
    .unit("%")
    .judge(100.0 * gap, within(CERTES_BOUND))];
    if full_err.abs() <= paper_bound {
        out.push(
            statement(
                format!(
                    "Sec. 3.2: where the full model is within {bound} % of the truth, the fast \
                     model is too (\"sufficiently accurate to allow us to bypass\" it)"
                ),
                format!("≤ {bound} %"),
                both.clone(),
            )
            .unit("%")
            .difference(Some(100.0 * (row.certes_rel_err.abs() - paper_bound)))
            .judge(100.0 * row.certes_rel_err, within(paper_bound)),
        );
    }
    if row.certes_rel_err.abs() <= paper_bound {
        out.push(
            statement(
                format!(
                    "the full model of Sec. 3.1 is within the paper's {bound} % of the truth \
                     where the fast model is"
                ),
                format!("≤ {bound} %"),
                both,
            )
            .unit("%")
            .difference(Some(100.0 * (full_err.abs() - paper_bound)))
            .judge(100.0 * full_err, within(paper_bound)),
        );
    }
    out
}

/// Rows of every result, by scenario name, for lookups in tests.
pub fn rows_by_scenario(results: &[CertesResult]) -> BTreeMap<String, Vec<&CertesRow>> {
    let mut map: BTreeMap<String, Vec<&CertesRow>> = BTreeMap::new();
    for r in results {
        map.entry(r.row.scenario.clone()).or_default().push(&r.row);
    }
    map
}

/// One accept-queue limit's seconds of a run whose limit is switched
/// (Figures 20–21), after the warm-up.
struct QueuePhase {
    limit: u32,
    /// Transaction-weighted client-perceived mean (s).
    truth_s: f64,
    /// Transaction-weighted mean of Certes' estimate (s).
    certes_s: f64,
    /// Completed-connection-weighted SYN-to-END mean (s).
    syn_to_end_s: f64,
    transactions_per_s: f64,
    /// Mean of the per-second SYN drop rates.
    syn_drop_rate: f64,
}

/// The phases of a switched accept queue, by limit, smallest first; empty
/// unless the limit takes at least two values.
fn queue_phases(track: &[TrackPoint]) -> Vec<QueuePhase> {
    #[derive(Default)]
    struct Sums {
        truth: f64,
        truth_n: f64,
        certes: f64,
        certes_n: f64,
        syn_to_end: f64,
        completed: f64,
        drop_rate: f64,
        bins: f64,
    }
    let mut by_limit: BTreeMap<u32, Sums> = BTreeMap::new();
    let warm_up = WARM_UP.as_secs_f64();
    let bin_s = match track {
        [a, b, ..] => b.time_s - a.time_s,
        _ => return Vec::new(),
    };
    for p in track.iter().filter(|p| p.time_s >= warm_up) {
        let s = by_limit.entry(p.accept_queue_limit).or_default();
        if let Some(t) = p.truth_s {
            s.truth += t * p.truth_transactions as f64;
            s.truth_n += p.truth_transactions as f64;
        }
        if let Some(c) = p.certes_s {
            s.certes += c * p.certes_transactions;
            s.certes_n += p.certes_transactions;
        }
        if let Some(e) = p.syn_to_end_s {
            s.syn_to_end += e * p.completed as f64;
            s.completed += p.completed as f64;
        }
        s.drop_rate += p.syn_drop_rate;
        s.bins += 1.0;
    }
    if by_limit.len() < 2
        || by_limit
            .values()
            .any(|s| s.truth_n == 0.0 || s.completed == 0.0 || s.certes_n == 0.0)
    {
        return Vec::new();
    }
    by_limit
        .into_iter()
        .map(|(limit, s)| QueuePhase {
            limit,
            truth_s: s.truth / s.truth_n,
            certes_s: s.certes / s.certes_n,
            syn_to_end_s: s.syn_to_end / s.completed,
            transactions_per_s: s.truth_n / (s.bins * bin_s),
            syn_drop_rate: s.drop_rate / s.bins,
        })
        .collect()
}

/// Figure 9: the runs of the interval sweep (scenarios named
/// [`INTERVAL_SWEEP_PREFIX`]…), per population, against the paper's 250 ms.
/// Accuracy is the mean |error| per one-second bin, the measure of Figures
/// 18–19, which every interval up to one second shares (the whole-run error
/// is printed beside it).
fn interval_sweep_checks(results: &[CertesResult]) -> Vec<Check> {
    let mut by_profile: BTreeMap<&str, Vec<&CertesRow>> = BTreeMap::new();
    for r in results
        .iter()
        .filter(|r| r.row.scenario.starts_with(INTERVAL_SWEEP_PREFIX))
    {
        by_profile.entry(&r.row.profile).or_default().push(&r.row);
    }
    let mut out = Vec::new();
    for (profile, mut rows) in by_profile {
        rows.sort_by(|a, b| a.interval_ms.total_cmp(&b.interval_ms));
        let Some(reference) = rows
            .iter()
            .find(|r| (r.interval_ms - PAPER_INTERVAL_MS).abs() < 1e-6)
        else {
            continue;
        };
        let describe = |r: &CertesRow| {
            format!(
                "{} ms: {:.2} % per second (whole run {})",
                crate::study::number(r.interval_ms),
                100.0 * r.certes_tracking_err,
                pct(r.certes_rel_err)
            )
        };
        for row in rows.iter().filter(|r| r.interval_ms < PAPER_INTERVAL_MS) {
            out.push(
                Check::statement(
                    "interval sweep (Fig. 9)",
                    profile,
                    format!(
                        "Fig. 9: {} ms intervals are not more accurate than the paper's 250 ms",
                        crate::study::number(row.interval_ms)
                    ),
                    "shorter intervals: \"just the opposite\" of better results",
                    format!("{}; {}", describe(row), describe(reference)),
                )
                .unit("%")
                .difference(Some(
                    100.0 * (row.certes_tracking_err - reference.certes_tracking_err),
                ))
                .relation(
                    "mean per-second |error| at this interval ≥ at 250 ms",
                    row.certes_tracking_err >= reference.certes_tracking_err,
                ),
            );
        }
        let best = rows
            .iter()
            .min_by(|a, b| a.certes_tracking_err.total_cmp(&b.certes_tracking_err));
        if let (Some(shortest), Some(best)) = (rows.first(), best) {
            out.push(
                Check::statement(
                    "interval sweep (Fig. 9)",
                    profile,
                    "Fig. 9: below some interval length, shorter intervals are less accurate (the shortest of the sweep is not the most accurate)",
                    "as the interval is reduced below a certain point, events happen when expected less often",
                    rows.iter()
                        .map(|r| describe(r))
                        .collect::<Vec<_>>()
                        .join("; "),
                )
                .relation(
                    format!(
                        "mean per-second |error| at the shortest interval ({} ms) > at the most accurate ({} ms)",
                        crate::study::number(shortest.interval_ms),
                        crate::study::number(best.interval_ms)
                    ),
                    shortest.certes_tracking_err > best.certes_tracking_err,
                ),
            );
        }
    }
    out
}
