//! The spread over seeds of an Abacus result row: for each Section 6
//! metric, the half-width of the 95 % interval of the mean of the
//! repetitions' own values ([`mean_ci95`], Student t). The paper pools its
//! 30 repetitions and shows no spread; the row's own numbers stay the
//! pooled ones ([`vantage_sim::syn::metrics::Tally::merge`]), so an
//! interval is centred on the mean over seeds, which can differ slightly
//! from the pooled value it is printed beside.

use crate::report::interval::mean_ci95;
use serde::Serialize;
use vantage_sim::syn::metrics::Summary;
use vantage_sim::syn::{Repetition, Row};

/// Half-widths of the 95 % intervals over a row's repetitions, `None` with
/// fewer than two; named `<metric>_ci95` after the row's keys.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Spread {
    pub repetitions: usize,
    pub throughput_pct_ci95: Option<f64>,
    pub delay_mean_s_ci95: Option<f64>,
    pub delay_p50_s_ci95: Option<f64>,
    pub delay_p95_s_ci95: Option<f64>,
    pub delay_p99_s_ci95: Option<f64>,
    pub cost_mean_ci95: Option<f64>,
    pub timeouts_pct_ci95: Option<f64>,
    pub rejects_pct_ci95: Option<f64>,
    pub retransmissions_mean_ci95: Option<f64>,
    /// Figure 5's settling time (the `settle_mean_s` extra), where the row
    /// has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settle_mean_s_ci95: Option<f64>,
}

/// The CSV columns of a [`Spread`] after a row's own, in this order; the
/// settling time's only when a row has it.
pub const SPREAD_COLUMNS: [&str; 10] = [
    "repetitions",
    "throughput_pct_ci95",
    "delay_mean_s_ci95",
    "delay_p50_s_ci95",
    "delay_p95_s_ci95",
    "delay_p99_s_ci95",
    "cost_mean_ci95",
    "timeouts_pct_ci95",
    "rejects_pct_ci95",
    "retransmissions_mean_ci95",
];

impl Spread {
    /// The spread of `row`'s repetitions.
    pub fn of(row: &Row) -> Spread {
        let reps = &row.per_repetition;
        let half = |f: fn(&Summary) -> f64| metric_interval(reps, f).1;
        Spread {
            repetitions: reps.len(),
            throughput_pct_ci95: half(|m| m.throughput_pct),
            delay_mean_s_ci95: half(|m| m.delay_mean_s),
            delay_p50_s_ci95: half(|m| m.delay_p50_s),
            delay_p95_s_ci95: half(|m| m.delay_p95_s),
            delay_p99_s_ci95: half(|m| m.delay_p99_s),
            cost_mean_ci95: half(|m| m.cost_mean),
            timeouts_pct_ci95: half(|m| m.timeouts_pct),
            rejects_pct_ci95: half(|m| m.rejects_pct),
            retransmissions_mean_ci95: half(|m| m.retransmissions_mean),
            settle_mean_s_ci95: if row.extras.contains_key("settle_mean_s") {
                settle_interval(row).1
            } else {
                None
            },
        }
    }

    /// The CSV cells under [`SPREAD_COLUMNS`] (empty without an interval).
    pub fn cells(&self) -> [String; 10] {
        let c = |h: Option<f64>| h.map_or(String::new(), |h| h.to_string());
        [
            self.repetitions.to_string(),
            c(self.throughput_pct_ci95),
            c(self.delay_mean_s_ci95),
            c(self.delay_p50_s_ci95),
            c(self.delay_p95_s_ci95),
            c(self.delay_p99_s_ci95),
            c(self.cost_mean_ci95),
            c(self.timeouts_pct_ci95),
            c(self.rejects_pct_ci95),
            c(self.retransmissions_mean_ci95),
        ]
    }
}

/// A row as `--json` prints it: every key of the row, then its spread.
#[derive(Serialize)]
pub struct RowWithSpread<'a> {
    #[serde(flatten)]
    pub row: &'a Row,
    #[serde(flatten)]
    pub spread: Spread,
}

impl<'a> RowWithSpread<'a> {
    pub fn new(row: &'a Row) -> Self {
        RowWithSpread {
            row,
            spread: Spread::of(row),
        }
    }
}

/// The mean over `reps` of one metric and its half-width.
pub fn metric_interval(reps: &[Repetition], metric: fn(&Summary) -> f64) -> (f64, Option<f64>) {
    mean_ci95(
        &reps
            .iter()
            .map(|r| metric(&r.summary))
            .collect::<Vec<f64>>(),
    )
}

/// The mean settling time over `row`'s repetitions and its half-width.
pub fn settle_interval(row: &Row) -> (f64, Option<f64>) {
    mean_ci95(
        &row.per_repetition
            .iter()
            .map(|r| r.settle_s)
            .collect::<Vec<f64>>(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn summary(throughput_pct: f64, cost_mean: f64) -> Summary {
        Summary {
            requests: 100,
            throughput_pct,
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

    fn row(per_seed: &[(f64, f64)]) -> Row {
        Row {
            study: "abacus".into(),
            figure: "fig8".into(),
            profile: "windows-9x-nt".into(),
            filter: "abacus",
            parameter: Some("workload.std_dev".into()),
            value: Some(55.0),
            series_parameter: None,
            series_value: None,
            summary: summary(80.0, 20.0),
            extras: BTreeMap::from([("window_s".to_string(), 50.0)]),
            per_repetition: per_seed
                .iter()
                .map(|&(t, c)| Repetition {
                    summary: summary(t, c),
                    settle_s: 0.0,
                })
                .collect(),
        }
    }

    /// Four seeds with throughputs 70, 75, 85, 90 %: mean 80, s = √(250/3),
    /// half-width t(0.975, 3) · s / 2 = 3.182 · 4.5644 = 14.524.
    #[test]
    fn a_cell_with_known_repetitions_has_the_student_t_half_width() {
        let r = row(&[(70.0, 20.0), (75.0, 20.0), (85.0, 20.0), (90.0, 20.0)]);
        let spread = Spread::of(&r);
        assert_eq!(spread.repetitions, 4);
        let half = spread.throughput_pct_ci95.unwrap();
        let expected = 3.182 * (250.0f64 / 3.0).sqrt() / 2.0;
        assert!((half - expected).abs() < 1e-9, "{half} vs {expected}");
        assert!((half - 14.524).abs() < 1e-3, "{half}");
        // Equal values: an interval of width zero, not none.
        assert_eq!(spread.cost_mean_ci95, Some(0.0));
        assert_eq!(
            metric_interval(&r.per_repetition, |m| m.throughput_pct).0,
            80.0
        );
        // No settling-time extra, no settling-time interval.
        assert_eq!(spread.settle_mean_s_ci95, None);
    }

    #[test]
    fn one_repetition_has_no_interval() {
        let spread = Spread::of(&row(&[(70.0, 20.0)]));
        assert_eq!(spread.repetitions, 1);
        assert_eq!(spread.throughput_pct_ci95, None);
        assert_eq!(spread.cells()[1], "");
    }

    /// The JSON keeps every key a row had before the spread was added,
    /// with the same values, and adds `repetitions` and `<metric>_ci95`.
    #[test]
    fn json_rows_keep_their_old_keys_and_add_the_intervals() {
        let r = row(&[(70.0, 20.0), (90.0, 30.0)]);
        let old = serde_json::to_value(&r).unwrap();
        let new = serde_json::to_value(RowWithSpread::new(&r)).unwrap();
        let (old, new) = (old.as_object().unwrap(), new.as_object().unwrap());
        for key in [
            "study",
            "figure",
            "profile",
            "filter",
            "parameter",
            "value",
            "series_parameter",
            "series_value",
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
            "extras",
        ] {
            assert!(old.contains_key(key), "{key}");
            assert_eq!(old[key], new[key], "{key}");
        }
        assert_eq!(new["repetitions"], 2);
        for key in SPREAD_COLUMNS.iter().skip(1) {
            assert!(new.contains_key(*key), "{key}");
        }
        assert!(new["throughput_pct_ci95"].as_f64().unwrap() > 0.0);
        assert!(!new.contains_key("per_repetition"));
        assert!(!new.contains_key("settle_mean_s_ci95"));
        assert_eq!(new.len(), old.len() + SPREAD_COLUMNS.len());
    }
}
