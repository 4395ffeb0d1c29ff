//! The paper's stated results beside ours, per scenario and population.

use super::results::CertesRow;
use super::run::CertesResult;
use super::{
    APPLICATION_PAPER_MIN_ERROR, CERTES_BOUND, PAPER_ALL_TESTS_BOUND, RECOVERY_TOLERANCE,
    SYN_TO_END_PAPER_MIN_ERROR,
};
use crate::{Check, Criterion, Statement};
use std::collections::BTreeMap;

// ─────────────────────────────── checks ───────────────────────────────

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
    for r in results {
        let row = &r.row;
        let figure = format!("{} ({})", row.scenario, row.figure);
        let statement = |claim: String, paper: String, ours: String| -> Statement {
            Check::statement(figure.as_str(), row.profile.as_str(), claim, paper, ours)
        };
        let mut add = |check: Check| out.push(check);
        let err = row.certes_rel_err;
        add(statement(
            "Fig. 16: Certes' mean within 2.5 % of the client-perceived mean".into(),
            match r.paper.as_ref().and_then(|p| p.certes_error_pct) {
                Some(e) => format!(
                    "≤ 2.5 % (Test {}: {e} %)",
                    r.paper.as_ref().map_or("", |p| &p.test)
                ),
                None => "≤ 2.5 % (13 of 16 tests)".into(),
            },
            pct(err),
        )
        .unit("%")
        .difference(Some(100.0 * (err.abs() - CERTES_BOUND)))
        .judge(100.0 * err, within(CERTES_BOUND)));
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
    // Over the study: how many scenarios are within 2.5 % and within 7.4 %.
    if !results.is_empty() {
        let n = results.len();
        let within = results
            .iter()
            .filter(|r| r.row.certes_rel_err.abs() <= CERTES_BOUND)
            .count();
        let within_all = results
            .iter()
            .filter(|r| r.row.certes_rel_err.abs() <= PAPER_ALL_TESTS_BOUND)
            .count();
        let worst = results
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
