//! The Abacus paper's Section 6 statements about the Abacus Filter against
//! TBF — p99 delay well below, mean delay well below, comparable success,
//! far fewer time-outs — judged on an experiment's rows with the file's
//! thresholds (`[experiment.checks]`).

use crate::Check;
use vantage_sim::syn::metrics::Summary;

use super::plan::{Checks, Experiment};
use super::results::ResultRow;

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
pub fn statements_hold(c: &Checks, af: &Summary, tbf: &Summary) -> [bool; 4] {
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
pub fn checks(x: &Experiment, rows: &[ResultRow], source: &str) -> Vec<Check> {
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
                out.push(
                    Check::statement(
                        figure.as_str(),
                        profile.as_str(),
                        format!(
                            "{} bounds p99 connection delay well below {}",
                            label(candidate),
                            label(baseline)
                        ),
                        format!("AF p99 ≤ {:.0} % of TBF's", 100.0 * c.well_below_ratio),
                        format!("{:.2} s vs {:.2} s", af.delay_p99_s, tbf.delay_p99_s),
                    )
                    .unit("s")
                    .difference(Some(af.delay_p99_s - tbf.delay_p99_s))
                    .relation(
                        format!(
                            "AF's p99 delay ≤ {} × TBF's",
                            crate::study::number(c.well_below_ratio)
                        ),
                        holds[0],
                    ),
                );
                out.push(
                    Check::statement(
                        figure.as_str(),
                        profile.as_str(),
                        format!(
                            "… and mean connection delay, the paper's Figure 8 metric, well below {}'s",
                            label(baseline)
                        ),
                        format!("AF mean ≤ {:.0} % of TBF's", 100.0 * c.well_below_ratio),
                        format!("{:.2} s vs {:.2} s", af.delay_mean_s, tbf.delay_mean_s),
                    )
                    .unit("s")
                    .difference(Some(af.delay_mean_s - tbf.delay_mean_s))
                    .relation(
                        format!(
                            "AF's mean delay ≤ {} × TBF's",
                            crate::study::number(c.well_below_ratio)
                        ),
                        holds[1],
                    ),
                );
                out.push(
                    Check::statement(
                        figure.as_str(),
                        profile.as_str(),
                        format!("… at a success rate comparable to {}'s", label(baseline)),
                        format!("within {} points", c.comparable_success_points),
                        format!("{:.1} % vs {:.1} %", af.throughput_pct, tbf.throughput_pct),
                    )
                    .unit("points")
                    .difference(Some(af.throughput_pct - tbf.throughput_pct))
                    .relation(
                        format!(
                            "|AF's success − TBF's| ≤ {} points",
                            crate::study::number(c.comparable_success_points)
                        ),
                        holds[2],
                    ),
                );
                out.push(
                    Check::statement(
                        figure.as_str(),
                        profile.as_str(),
                        format!("… with far fewer client time-outs than {}", label(baseline)),
                        format!(
                            "≤ {:.0} % of TBF's (paper: 0.04 % vs 5.5 %)",
                            100.0 * c.far_fewer_ratio
                        ),
                        format!("{:.2} % vs {:.2} %", af.timeouts_pct, tbf.timeouts_pct),
                    )
                    .unit("%")
                    .difference(Some(af.timeouts_pct - tbf.timeouts_pct))
                    .relation(
                        format!(
                            "TBF timed some clients out and AF's time-outs ≤ {} × TBF's",
                            crate::study::number(c.far_fewer_ratio)
                        ),
                        holds[3],
                    ),
                );
            }
        }
    }
    out
}
