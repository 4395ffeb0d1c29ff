//! The Abacus paper's stated results beside ours. The paper gives numbers
//! only for a few results; the rest are relations (which filter is better,
//! where a minimum lies). Each check states which. Re-synchronization (R1)
//! is checked for single-profile populations only: a mixture's profiles
//! retransmit at different times. "Moderate burstiness" is the middle of
//! Figure 8's sweep (σ = 55), since the paper does not give its value.
//!
//! Where a statement compares two of our means, its `ours` text gives each
//! as pooled ± the half-width of its 95 % interval over seeds and says
//! whether the two intervals (centred on the means over seeds) overlap;
//! the verdict stays the comparison of the pooled values.

use super::spread::{metric_interval, settle_interval};
use crate::report::interval::{mean_ci95, overlap, with_interval};
use crate::{Check, Criterion, Statement};
use vantage_sim::syn::filters::FilterKind;
use vantage_sim::syn::metrics::Summary;
use vantage_sim::syn::scenario::Scenario;
use vantage_sim::syn::{Row, ScenarioResult};

/// The σ (requests/s) the statements call "moderate burstiness".
pub const MODERATE_STD_DEV: f64 = 55.0;
const PAPER_REJECT_COST: f64 = 75.0;
/// Section 6, Figure 8, moderate burstiness: TBF w/ Reject's throughput
/// is this many points below the Abacus Filter's …
pub const FIG8_REJECT_BELOW_AF_POINTS: f64 = 5.0;
/// … and this many below Greedy's …
pub const FIG8_REJECT_BELOW_GREEDY_POINTS: f64 = 8.0;
/// … and its cost this many percent above the Abacus Filter's.
pub const FIG8_REJECT_COST_ABOVE_AF_PCT: f64 = 15.0;
/// Section 6, Figure 11: mean share of requests timed out, percent, over
/// the reject costs r in [`FIG11_MEAN_OVER`].
pub const FIG11_MEAN_TIMEOUTS_PCT: [(FilterKind, f64); 4] = [
    (FilterKind::Tbf, 5.5),
    (FilterKind::Greedy, 0.01),
    (FilterKind::Abacus, 0.04),
    (FilterKind::TbfReject, 0.0),
];
/// The range of r Figure 11's mean time-outs are taken over.
pub const FIG11_MEAN_OVER: (f64, f64) = (0.0, 500.0);
/// Section 6.1: jitter has "no noticeable impact" on the metrics. We read
/// that as: over the jitter sweep a filter's throughput moves by at most
/// this many points …
pub const JITTER_THROUGHPUT_RANGE_POINTS: f64 = 1.0;
/// … and its mean cost by at most this share of its mean over the sweep, %.
pub const JITTER_COST_RANGE_PCT: f64 = 10.0;

pub fn checks(results: &[(Scenario, ScenarioResult)]) -> Vec<Check> {
    let mut out = Vec::new();
    for (scenario, result) in results {
        for clients in &scenario.populations {
            let rows: Vec<&Row> = result
                .rows
                .iter()
                .filter(|r| r.profile == clients.name)
                .collect();
            let mut add = Add {
                figure: &scenario.figure,
                profile: &clients.name,
                checks: &mut out,
            };
            match scenario.figure.as_str() {
                "fig4" => {
                    for row in &rows {
                        let spread = row.value.unwrap_or(0.0);
                        if let Some(&w) = row.extras.get("first_widening_max_ms") {
                            add.push(
                                add.statement(
                                    &format!("R1: first retransmission widens a {spread:.0} ms burst by at most ≈220 ms"),
                                    "≤ 220 ms".into(),
                                    format!("{w:.1} ms"),
                                )
                                .unit("ms")
                                .difference(Some(w - 220.0))
                                .judge(w, Criterion::AtMost(220.0)),
                            );
                        }
                        if let Some(&w) = row.extras.get("later_widening_max_ms") {
                            // 1e-6 ms: rounding of the widths, not slack.
                            add.push(
                                add.statement(
                                    &format!("R1: each later retransmission of a {spread:.0} ms burst widens it by ≈20 ms more"),
                                    "≤ 20 ms".into(),
                                    format!("{w:.1} ms"),
                                )
                                .unit("ms")
                                .difference(Some(w - 20.0))
                                .judge(w, Criterion::AtMost(20.0 + 1e-6)),
                            );
                        }
                    }
                }
                "fig5" => {
                    let settle: Vec<(f64, f64, MeanInterval)> = rows
                        .iter()
                        .filter_map(|r| {
                            Some((
                                r.value?,
                                *r.extras.get("settle_mean_s")?,
                                MeanInterval::settle(r),
                            ))
                        })
                        .collect();
                    if let (Some(first), Some(last)) = (settle.first(), settle.last()) {
                        add.push(
                            add.statement(
                                "the closer r_t is to λ, the longer drops go on after a burst",
                                "settling time falls as r_t − λ grows".into(),
                                format!(
                                    "{} s at r_t = {:.0} … {} s at r_t = {:.0}{}",
                                    pm(first.1, first.2, 1),
                                    first.0,
                                    pm(last.1, last.2, 1),
                                    last.0,
                                    overlap_note(first.2, last.2)
                                ),
                            )
                            .relation(
                                "along the r_t sweep no settling time exceeds the previous one by more than 1 s, and the last is below the first",
                                settle.windows(2).all(|w| w[1].1 <= w[0].1 + 1.0) && last.1 < first.1,
                            ),
                        );
                    }
                }
                "fig8" => fig8_checks(&rows, &mut add),
                "fig9" => {
                    for kind in FilterKind::ALL {
                        let series: Vec<&Row> = rows
                            .iter()
                            .copied()
                            .filter(|r| r.filter == kind.name())
                            .collect();
                        if let (Some(small), Some(large)) = (series.first(), series.last()) {
                            add.push(
                                add.statement(
                                    &format!(
                                        "{}: a larger bucket improves performance (cost falls)",
                                        kind.name()
                                    ),
                                    "cost at W = 512 < at W = 8".into(),
                                    {
                                        let (a, b) = (cost(small), cost(large));
                                        format!(
                                            "{} → {}{}",
                                            pm(small.summary.cost_mean, a, 2),
                                            pm(large.summary.cost_mean, b, 2),
                                            overlap_note(a, b)
                                        )
                                    },
                                )
                                .relation(
                                    "mean cost at the largest W < at the smallest W",
                                    large.summary.cost_mean < small.summary.cost_mean,
                                ),
                            );
                        }
                    }
                    reject_never_times_out(&rows, &mut add);
                }
                "fig10" => {
                    let mut costs: Vec<f64> = rows.iter().filter_map(|r| r.series_value).collect();
                    costs.dedup();
                    for r in costs {
                        let line: Vec<&Row> = rows
                            .iter()
                            .copied()
                            .filter(|row| row.series_value == Some(r))
                            .collect();
                        // The smallest S reaching the lowest cost: S values
                        // between two retransmission times often tie.
                        let lowest = line
                            .iter()
                            .map(|row| row.summary.cost_mean)
                            .fold(f64::INFINITY, f64::min);
                        let Some(best) = line
                            .iter()
                            .find(|row| row.summary.cost_mean <= lowest * (1.0 + 1e-12))
                        else {
                            continue;
                        };
                        let predicted = clients.cost_optimal_window(r).as_secs_f64();
                        let at_predicted = line
                            .iter()
                            .find(|row| row.value == Some(predicted))
                            .map(|row| row.summary.cost_mean);
                        let ours_s = best.value.unwrap_or(0.0);
                        let holds = at_predicted
                            .is_some_and(|c| c <= best.summary.cost_mean * 1.005 + 1e-9);
                        let predicted_row = line.iter().find(|row| row.value == Some(predicted));
                        add.push(
                            add.statement(
                                &format!("O2: cost is lowest at S = max{{T_i ≤ r/h}} (r = {r:.0})"),
                                format!("S = {predicted:.0} s"),
                                format!(
                                    "S = {ours_s:.0} s (cost {}; at S = {predicted:.0} s: {})",
                                    pm(best.summary.cost_mean, cost(best), 3),
                                    predicted_row.map_or("not run".to_string(), |p| format!(
                                        "{}{}",
                                        pm(p.summary.cost_mean, cost(p), 3),
                                        // The same row: nothing to compare.
                                        if std::ptr::eq(*p, *best) {
                                            String::new()
                                        } else {
                                            overlap_note(cost(p), cost(best))
                                        }
                                    ))
                                ),
                            )
                            .unit("s")
                            .difference(Some(ours_s - predicted))
                            .relation(
                                "the mean cost at the predicted S ≤ 1.005 × the lowest cost of the sweep (+1e-9); the S of the lowest cost may differ",
                                holds,
                            ),
                        );
                    }
                }
                "fig11" => fig11_checks(&rows, &mut add),
                "sec6.1-jitter" => jitter_checks(&rows, &mut add),
                _ => {}
            }
        }
    }
    out
}

/// Where one figure's statements for one population go.
struct Add<'a> {
    figure: &'a str,
    profile: &'a str,
    checks: &'a mut Vec<Check>,
}

impl Add<'_> {
    fn statement(&self, claim: &str, paper: String, ours: String) -> Statement {
        Check::statement(self.figure, self.profile, claim, paper, ours)
    }

    fn push(&mut self, check: Check) {
        self.checks.push(check);
    }
}

/// A mean over seeds and the half-width of its 95 % interval; the
/// half-width is `None` with fewer than two seeds.
#[derive(Clone, Copy, Debug, PartialEq)]
struct MeanInterval {
    mean: f64,
    half: Option<f64>,
}

impl MeanInterval {
    fn of(values: &[f64]) -> MeanInterval {
        let (mean, half) = mean_ci95(values);
        MeanInterval { mean, half }
    }

    fn metric(row: &Row, metric: fn(&Summary) -> f64) -> MeanInterval {
        let (mean, half) = metric_interval(&row.per_repetition, metric);
        MeanInterval { mean, half }
    }

    fn settle(row: &Row) -> MeanInterval {
        let (mean, half) = settle_interval(row);
        MeanInterval { mean, half }
    }

    /// The interval scaled by `factor` (a share of a mean).
    fn scaled(self, factor: f64) -> MeanInterval {
        MeanInterval {
            mean: self.mean * factor,
            half: self.half.map(|h| h * factor.abs()),
        }
    }
}

/// `value`, our pooled number, with `spread`'s half-width.
fn pm(value: f64, spread: MeanInterval, digits: usize) -> String {
    with_interval(value, spread.half, digits)
}

/// Whether the 95 % intervals of two means overlap, as the end of an
/// `ours` text; empty when either has no interval.
fn overlap_note(a: MeanInterval, b: MeanInterval) -> String {
    match (a.half, b.half) {
        (Some(ha), Some(hb)) if overlap((a.mean, ha), (b.mean, hb)) => {
            "; 95 % intervals over seeds overlap".into()
        }
        (Some(_), Some(_)) => "; 95 % intervals over seeds apart".into(),
        _ => String::new(),
    }
}

fn find<'r>(rows: &[&'r Row], filter: FilterKind, value: f64) -> Option<&'r Row> {
    rows.iter()
        .copied()
        .find(|r| r.filter == filter.name() && r.value == Some(value))
}

fn cost(row: &Row) -> MeanInterval {
    MeanInterval::metric(row, |m| m.cost_mean)
}

fn timeouts(row: &Row) -> MeanInterval {
    MeanInterval::metric(row, |m| m.timeouts_pct)
}

/// The largest swept value among `rows`.
fn highest_value(rows: &[&Row]) -> f64 {
    rows.iter()
        .filter_map(|r| r.value)
        .fold(f64::NEG_INFINITY, f64::max)
}

fn reject_never_times_out(rows: &[&Row], add: &mut Add) {
    let worst = rows
        .iter()
        .filter(|r| r.filter == FilterKind::TbfReject.name())
        .map(|r| r.summary.timeouts_pct)
        .fold(0.0, f64::max);
    add.push(
        add.statement(
            "TBF w/ Reject: no request times out",
            "0 %".into(),
            format!("{worst:.3} % (worst point)"),
        )
        .unit("%")
        .difference(Some(worst))
        .judge(worst, Criterion::AtMost(0.0)),
    );
}

fn af_cheaper_than_reject(af: &Row, reject: &Row, claim: &str, add: &mut Add) {
    add.push(
        add.statement(
            claim,
            "AF < Reject".into(),
            format!(
                "AF {}, Reject {}{}",
                pm(af.summary.cost_mean, cost(af), 2),
                pm(reject.summary.cost_mean, cost(reject), 2),
                overlap_note(cost(af), cost(reject))
            ),
        )
        .relation(
            "AF's mean cost < TBF w/ Reject's",
            af.summary.cost_mean < reject.summary.cost_mean,
        ),
    );
}

fn fig8_checks(rows: &[&Row], add: &mut Add) {
    let highest = highest_value(rows);
    if let (Some(tbf), Some(af)) = (
        find(rows, FilterKind::Tbf, highest),
        find(rows, FilterKind::Abacus, highest),
    ) {
        add.push(
            add.statement(
                &format!("highest burstiness (σ = {highest:.0}): AF's mean delay below TBF's"),
                "AF < TBF".into(),
                {
                    let delay = |r: &Row| MeanInterval::metric(r, |m| m.delay_mean_s);
                    format!(
                        "AF {} s, TBF {} s{}",
                        pm(af.summary.delay_mean_s, delay(af), 2),
                        pm(tbf.summary.delay_mean_s, delay(tbf), 2),
                        overlap_note(delay(af), delay(tbf))
                    )
                },
            )
            .relation(
                "AF's mean delay < TBF's",
                af.summary.delay_mean_s < tbf.summary.delay_mean_s,
            ),
        );
        add.push(
            add.statement(
                &format!("highest burstiness (σ = {highest:.0}): AF's time-outs far below TBF's"),
                "AF < TBF / 2".into(),
                {
                    let (a, t) = (timeouts(af), timeouts(tbf));
                    let note = match overlap_note(a, t.scaled(0.5)).as_str() {
                        "" => String::new(),
                        note => format!(" (AF's and half of TBF's{})", &note[1..]),
                    };
                    format!(
                        "AF {} %, TBF {} %{note}",
                        pm(af.summary.timeouts_pct, a, 3),
                        pm(tbf.summary.timeouts_pct, t, 3),
                    )
                },
            )
            .unit("%")
            .judge_noted(
                af.summary.timeouts_pct,
                Criterion::Below(tbf.summary.timeouts_pct / 2.0),
                "half of TBF's",
            ),
        );
    }
    let m = MODERATE_STD_DEV;
    if let (Some(reject), Some(af), Some(greedy)) = (
        find(rows, FilterKind::TbfReject, m),
        find(rows, FilterKind::Abacus, m),
        find(rows, FilterKind::Greedy, m),
    ) {
        let throughput = |r: &Row| MeanInterval::metric(r, |m| m.throughput_pct);
        let gap_af = af.summary.throughput_pct - reject.summary.throughput_pct;
        add.push(
            add.statement(
                "moderate burstiness: TBF w/ Reject's throughput below AF's (points)",
                format!("{FIG8_REJECT_BELOW_AF_POINTS:.1}"),
                format!(
                    "{gap_af:.2} (AF {} %, Reject {} %{})",
                    pm(af.summary.throughput_pct, throughput(af), 2),
                    pm(reject.summary.throughput_pct, throughput(reject), 2),
                    overlap_note(throughput(af), throughput(reject))
                ),
            )
            .unit("points")
            .difference(Some(gap_af - FIG8_REJECT_BELOW_AF_POINTS))
            .judge(gap_af, Criterion::SameDirection),
        );
        let gap_greedy = greedy.summary.throughput_pct - reject.summary.throughput_pct;
        add.push(
            add.statement(
                "moderate burstiness: TBF w/ Reject's throughput below Greedy's (points)",
                format!("{FIG8_REJECT_BELOW_GREEDY_POINTS:.1}"),
                format!(
                    "{gap_greedy:.2} (Greedy {} %, Reject {} %{})",
                    pm(greedy.summary.throughput_pct, throughput(greedy), 2),
                    pm(reject.summary.throughput_pct, throughput(reject), 2),
                    overlap_note(throughput(greedy), throughput(reject))
                ),
            )
            .unit("points")
            .difference(Some(gap_greedy - FIG8_REJECT_BELOW_GREEDY_POINTS))
            .judge(gap_greedy, Criterion::SameDirection),
        );
        let extra = 100.0 * (reject.summary.cost_mean / af.summary.cost_mean - 1.0);
        add.push(
            add.statement(
                "moderate burstiness: TBF w/ Reject's cost above AF's (%)",
                format!("{FIG8_REJECT_COST_ABOVE_AF_PCT}"),
                format!(
                    "{extra:.1} (Reject {}, AF {}{})",
                    pm(reject.summary.cost_mean, cost(reject), 2),
                    pm(af.summary.cost_mean, cost(af), 2),
                    overlap_note(cost(reject), cost(af))
                ),
            )
            .unit("%")
            .difference(Some(extra - FIG8_REJECT_COST_ABOVE_AF_PCT))
            .judge(extra, Criterion::SameDirection),
        );
        af_cheaper_than_reject(
            af,
            reject,
            "r = 75: AF's cost below TBF w/ Reject's (moderate burstiness)",
            add,
        );
    }
    reject_never_times_out(rows, add);
}

fn fig11_checks(rows: &[&Row], add: &mut Add) {
    let paper = FIG11_MEAN_TIMEOUTS_PCT;
    let (from, to) = FIG11_MEAN_OVER;
    let in_range = |kind: FilterKind| -> Vec<&Row> {
        rows.iter()
            .copied()
            .filter(|r| {
                r.filter == kind.name() && r.value.is_some_and(|x| (from..=to).contains(&x))
            })
            .collect()
    };
    let mean_timeouts = |kind: FilterKind| -> f64 {
        let v: Vec<f64> = in_range(kind)
            .iter()
            .map(|r| r.summary.timeouts_pct)
            .collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    };
    // Each seed's mean over r (every r of a seed sees the same traffic).
    let seeds_mean_timeouts = |kind: FilterKind| -> MeanInterval {
        let line = in_range(kind);
        let seeds = line
            .iter()
            .map(|r| r.per_repetition.len())
            .min()
            .unwrap_or(0);
        let per_seed: Vec<f64> = (0..seeds)
            .map(|k| {
                line.iter()
                    .map(|r| r.per_repetition[k].summary.timeouts_pct)
                    .sum::<f64>()
                    / line.len() as f64
            })
            .collect();
        MeanInterval::of(&per_seed)
    };
    let tbf = mean_timeouts(FilterKind::Tbf);
    let tbf_spread = seeds_mean_timeouts(FilterKind::Tbf);
    for (kind, stated) in paper {
        let ours = mean_timeouts(kind);
        let spread = seeds_mean_timeouts(kind);
        // The paper's values are not checked: TBF must time some clients
        // out, Reject none, and the others fewer than half of TBF's.
        let (criterion, note, versus) = match kind {
            FilterKind::Tbf => (Criterion::SameDirection, None, String::new()),
            FilterKind::TbfReject => (Criterion::AtMost(0.0), None, String::new()),
            _ => (
                Criterion::Below(tbf / 2.0),
                Some("half of TBF's; the paper's value is not checked"),
                match overlap_note(spread, tbf_spread.scaled(0.5)).as_str() {
                    "" => String::new(),
                    note => format!(" (against half of TBF's {}{note})", pm(tbf, tbf_spread, 3)),
                },
            ),
        };
        let statement = add
            .statement(
                &format!("mean % timed out over r ∈ [0, 500]: {}", kind.name()),
                format!("{stated}"),
                format!("{}{versus}", pm(ours, spread, 3)),
            )
            .unit("%")
            .difference(Some(ours - stated));
        add.push(match note {
            Some(note) => statement.judge_noted(ours, criterion, note),
            None => statement.judge(ours, criterion),
        });
    }
    if let (Some(af), Some(reject)) = (
        find(rows, FilterKind::Abacus, PAPER_REJECT_COST),
        find(rows, FilterKind::TbfReject, PAPER_REJECT_COST),
    ) {
        af_cheaper_than_reject(af, reject, "r = 75: AF's cost below TBF w/ Reject's", add);
    }
    let highest = highest_value(rows);
    if let (Some(tbf_row), Some(af)) = (
        find(rows, FilterKind::Tbf, highest),
        find(rows, FilterKind::Abacus, highest),
    ) {
        add.push(
            add.statement(
                &format!(
                    "very high r ({highest:.0}): TBF, which never rejects, has the lowest cost"
                ),
                "TBF ≤ AF".into(),
                format!(
                    "TBF {}, AF {}{}",
                    pm(tbf_row.summary.cost_mean, cost(tbf_row), 2),
                    pm(af.summary.cost_mean, cost(af), 2),
                    overlap_note(cost(tbf_row), cost(af))
                ),
            )
            .relation(
                "TBF's mean cost ≤ AF's",
                tbf_row.summary.cost_mean <= af.summary.cost_mean,
            ),
        );
    }
}

/// Section 6.1: the mean of the jitter distribution from 10 ms to 1 s has
/// no noticeable impact on any metric, for every filter.
fn jitter_checks(rows: &[&Row], add: &mut Add) {
    for kind in FilterKind::ALL {
        let line: Vec<&Row> = rows
            .iter()
            .copied()
            .filter(|r| r.filter == kind.name())
            .collect();
        if line.len() < 2 {
            continue;
        }
        let range = |f: fn(&Row) -> f64| {
            let v: Vec<f64> = line.iter().map(|r| f(r)).collect();
            let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            (lo, hi, v.iter().sum::<f64>() / v.len() as f64)
        };
        // The intervals of the lowest and the highest point.
        let extremes = |f: fn(&Summary) -> f64| -> String {
            let by = |a: &&&Row, b: &&&Row| f(&a.summary).total_cmp(&f(&b.summary));
            match (line.iter().min_by(by), line.iter().max_by(by)) {
                (Some(lo), Some(hi)) => {
                    overlap_note(MeanInterval::metric(lo, f), MeanInterval::metric(hi, f))
                }
                _ => String::new(),
            }
        };
        let (lo, hi, _) = range(|r| r.summary.throughput_pct);
        add.push(
            add.statement(
                &format!("{}: jitter of 10 ms to 1 s leaves throughput essentially constant (points between the lowest and highest)", kind.name()),
                "constant".into(),
                format!(
                    "{:.2} ({lo:.2} … {hi:.2} %{})",
                    hi - lo,
                    extremes(|m| m.throughput_pct)
                ),
            )
            .unit("points")
            .judge(hi - lo, Criterion::AtMost(JITTER_THROUGHPUT_RANGE_POINTS)),
        );
        let (lo, hi, mean) = range(|r| r.summary.cost_mean);
        let spread = if mean > 0.0 {
            100.0 * (hi - lo) / mean
        } else {
            0.0
        };
        add.push(
            add.statement(
                &format!("{}: jitter of 10 ms to 1 s leaves the mean cost essentially constant (range in % of its mean)", kind.name()),
                "constant".into(),
                format!(
                    "{spread:.1} ({lo:.3} … {hi:.3}{})",
                    extremes(|m| m.cost_mean)
                ),
            )
            .unit("%")
            .judge(spread, Criterion::AtMost(JITTER_COST_RANGE_PCT)),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use vantage_sim::syn::Repetition;

    fn summary(cost_mean: f64) -> Summary {
        Summary {
            requests: 100,
            throughput_pct: 90.0,
            delay_mean_s: 1.0,
            delay_p50_s: 0.0,
            delay_p95_s: 3.0,
            delay_p99_s: 9.0,
            cost_mean,
            timeouts_pct: 0.0,
            rejects_pct: 0.0,
            retransmissions_mean: 0.5,
        }
    }

    fn row(filter: FilterKind, pooled_cost: f64, per_seed: &[f64]) -> Row {
        Row {
            study: "abacus".into(),
            figure: "fig11".into(),
            profile: "p".into(),
            filter: filter.name(),
            parameter: Some("filter.reject_cost".into()),
            value: Some(PAPER_REJECT_COST),
            series_parameter: None,
            series_value: None,
            summary: summary(pooled_cost),
            extras: BTreeMap::new(),
            per_repetition: per_seed
                .iter()
                .map(|&c| Repetition {
                    summary: summary(c),
                    settle_s: 0.0,
                })
                .collect(),
        }
    }

    fn compared(af: &Row, reject: &Row) -> Check {
        let mut checks = Vec::new();
        let mut add = Add {
            figure: "fig11",
            profile: "p",
            checks: &mut checks,
        };
        af_cheaper_than_reject(af, reject, "claim", &mut add);
        checks.remove(0)
    }

    /// A comparison of two means says whether their intervals over seeds
    /// overlap; the verdict still compares the pooled means alone.
    #[test]
    fn two_means_compared_say_whether_their_intervals_overlap() {
        // AF 11 ± 2.48, Reject 21 ± 2.48: apart.
        let apart = compared(
            &row(FilterKind::Abacus, 11.0, &[10.0, 11.0, 12.0]),
            &row(FilterKind::TbfReject, 21.0, &[20.0, 21.0, 22.0]),
        );
        assert!(apart.holds);
        assert_eq!(
            apart.ours,
            "AF 11.00 ± 2.48, Reject 21.00 ± 2.48; 95 % intervals over seeds apart"
        );
        // AF 19.9 ± 24.8 (seeds 10, 20, 30) against Reject 20: overlap,
        // and the pooled comparison still holds.
        let overlapping = compared(
            &row(FilterKind::Abacus, 19.9, &[10.0, 20.0, 30.0]),
            &row(FilterKind::TbfReject, 20.0, &[19.0, 20.0, 21.0]),
        );
        assert!(overlapping.holds);
        assert!(
            overlapping
                .ours
                .ends_with("; 95 % intervals over seeds overlap"),
            "{}",
            overlapping.ours
        );
        // One seed each: no interval, no claim about overlap.
        let once = compared(
            &row(FilterKind::Abacus, 30.0, &[30.0]),
            &row(FilterKind::TbfReject, 20.0, &[20.0]),
        );
        assert!(!once.holds);
        assert_eq!(once.ours, "AF 30.00, Reject 20.00");
    }
}
