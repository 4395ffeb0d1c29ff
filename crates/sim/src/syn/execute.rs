//! Runs a scenario: every client population × series value × sweep value ×
//! repetition, every filter on the same traffic, repetitions in parallel.
//!
//! Seeds: repetition k of a point uses traffic drawn from a seed made of the
//! scenario seed, the client population, k, and the workload parameters
//! only. Every filter, and every value of a filter parameter, therefore
//! sees the very same arrivals and client draws (common random numbers),
//! so differences between rows come from the filters alone. Results are
//! pooled over repetitions in repetition order, so a run is reproducible
//! bit for bit whatever the number of threads. Each row also keeps every
//! repetition's own metrics ([`Repetition`]), from which a report measures
//! the spread over seeds; the pooled metrics do not depend on them.

use crate::seed::mix_seed;
use crate::syn::filters::FilterKind;
use crate::syn::metrics::{Summary, Tally};
use crate::syn::run::{simulate, Bin, Recording, RunResult};
use crate::syn::scenario::{Kind, Scenario, ScenarioError};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::Serialize;
use std::collections::BTreeMap;
use vantage_core::Nanos;

/// One line of results: one filter at one point under one client population.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub study: String,
    pub figure: String,
    pub profile: String,
    pub filter: &'static str,
    pub parameter: Option<String>,
    pub value: Option<f64>,
    pub series_parameter: Option<String>,
    pub series_value: Option<f64>,
    #[serde(flatten)]
    pub summary: Summary,
    /// Figure-specific measurements (wave widths, settling time, window used).
    pub extras: BTreeMap<String, f64>,
    /// Each repetition's own metrics, in repetition order (not serialized:
    /// a report states their spread).
    #[serde(skip)]
    pub per_repetition: Vec<Repetition>,
}

/// What one repetition (one seed) of one row measured on its own.
#[derive(Clone, Debug, PartialEq)]
pub struct Repetition {
    /// The Section 6 metrics over this repetition's requests alone.
    pub summary: Summary,
    /// Time of the repetition's last drop, seconds (0 without drops): the
    /// settling time the `settle_*` extras of Figure 5 are made of.
    pub settle_s: f64,
}

/// Arrivals and verdicts over time for one filter at one point (first
/// repetition), for plots.
#[derive(Clone, Debug, Serialize)]
pub struct Timeline {
    pub profile: String,
    pub filter: &'static str,
    pub value: Option<f64>,
    pub series_value: Option<f64>,
    pub bin_s: f64,
    #[serde(skip)]
    pub bins: Vec<Bin>,
}

/// Everything one scenario produced.
#[derive(Clone, Debug, Default)]
pub struct ScenarioResult {
    pub rows: Vec<Row>,
    pub timelines: Vec<Timeline>,
    /// SYN arrivals simulated.
    pub events: u64,
    /// Virtual time simulated, summed over runs.
    pub simulated: Nanos,
}

/// How much of a scenario to run.
#[derive(Clone, Copy, Debug, Default)]
pub struct Effort {
    /// Fewer repetitions and a shorter horizon.
    pub quick: bool,
}

impl Effort {
    pub fn repetitions(&self, s: &Scenario) -> u32 {
        if self.quick {
            s.quick_repetitions
        } else {
            s.repetitions
        }
    }

    pub fn horizon(&self, s: &Scenario) -> Nanos {
        if self.quick {
            s.quick_horizon
        } else {
            s.horizon
        }
    }
}

/// Number of progress steps [`execute`] reports (one per repetition of a point).
pub fn steps(s: &Scenario, effort: Effort) -> u64 {
    (s.populations.len() * s.series_values().len() * s.sweep_values().len()) as u64
        * u64::from(effort.repetitions(s))
}

/// What one repetition of one filter leaves for pooling.
struct RepResult {
    tally: Tally,
    events: u64,
    end: Nanos,
    last_drop: Option<Nanos>,
    timeline: Vec<Bin>,
    /// Width (max − min arrival) of each transmission's wave, seconds.
    wave_widths: Vec<f64>,
}

/// Runs every point of `s`, calling `progress` once per finished repetition.
pub fn execute(
    s: &Scenario,
    effort: Effort,
    progress: &(dyn Fn() + Sync),
) -> Result<ScenarioResult, ScenarioError> {
    let repetitions = effort.repetitions(s);
    let horizon = effort.horizon(s);
    let recording = Recording {
        timeline_bin: match s.kind {
            Kind::Sweep => None,
            Kind::Resync | Kind::Convergence => Some(s.timeline_bin),
        },
        arrivals_by_attempt: s.kind == Kind::Resync,
    };
    let workload_axis = |axis: &Option<crate::syn::scenario::Sweep>| {
        axis.as_ref()
            .is_some_and(|a| a.parameter.starts_with("workload."))
    };
    let sweep_moves_workload = workload_axis(&s.sweep);
    let series_moves_workload = workload_axis(&s.series);
    let mut out = ScenarioResult::default();
    for (ci, clients) in s.populations.iter().enumerate() {
        for (si, series) in s.series_values().into_iter().enumerate() {
            for (vi, value) in s.sweep_values().into_iter().enumerate() {
                let point = s.point(series, value)?;
                let mut traffic_key = mix_seed(mix_seed(s.seed, ci as u64), 0xA11CE);
                if series_moves_workload {
                    traffic_key = mix_seed(traffic_key, si as u64 + 1);
                }
                if sweep_moves_workload {
                    traffic_key = mix_seed(traffic_key, (vi as u64 + 1) << 20);
                }
                let reps: Vec<Result<Vec<RepResult>, ScenarioError>> = (0..repetitions)
                    .into_par_iter()
                    .map(|rep| {
                        let seed = mix_seed(traffic_key, u64::from(rep));
                        let mut rng = ChaCha8Rng::seed_from_u64(seed);
                        let first_syns =
                            point.workload.first_syns(horizon, &mut rng).map_err(|e| {
                                ScenarioError::Invalid {
                                    origin: s.origin.clone(),
                                    key: "workload".into(),
                                    problem: e.to_string(),
                                }
                            })?;
                        let mut per_filter = Vec::with_capacity(s.filters.len());
                        for kind in &s.filters {
                            let mut filter = point.filter.build(*kind, clients).map_err(|e| {
                                ScenarioError::Invalid {
                                    origin: s.origin.clone(),
                                    key: "filter".into(),
                                    problem: e.to_string(),
                                }
                            })?;
                            let mut client_rng = ChaCha8Rng::seed_from_u64(mix_seed(seed, 0xC11E));
                            let r: RunResult = simulate(
                                filter.as_mut(),
                                clients,
                                point.network,
                                &first_syns,
                                recording,
                                &mut client_rng,
                            );
                            let wave_widths = r
                                .arrivals_by_attempt
                                .iter()
                                .map(|wave| match (wave.iter().min(), wave.iter().max()) {
                                    (Some(lo), Some(hi)) => (*hi - *lo).as_secs_f64(),
                                    _ => 0.0,
                                })
                                .collect();
                            per_filter.push(RepResult {
                                tally: r.tally,
                                events: r.events,
                                end: r.end.max(horizon),
                                last_drop: r.last_drop,
                                timeline: if rep == 0 { r.timeline } else { Vec::new() },
                                wave_widths,
                            });
                        }
                        progress();
                        Ok(per_filter)
                    })
                    .collect();
                let reps: Vec<Vec<RepResult>> = reps.into_iter().collect::<Result<_, _>>()?;
                for (fi, kind) in s.filters.iter().enumerate() {
                    let mut tally = Tally::default();
                    let mut extras = BTreeMap::new();
                    let mut settle = Vec::new();
                    let mut per_repetition = Vec::with_capacity(reps.len());
                    for rep in &reps {
                        let r = &rep[fi];
                        tally.merge(&r.tally);
                        out.events += r.events;
                        out.simulated += r.end;
                        let settle_s = r.last_drop.map_or(0.0, |t| t.as_secs_f64());
                        settle.push(settle_s);
                        per_repetition.push(Repetition {
                            summary: r
                                .tally
                                .summary(point.filter.delay_cost, point.filter.reject_cost),
                            settle_s,
                        });
                    }
                    match s.kind {
                        Kind::Sweep => {}
                        Kind::Convergence => {
                            extras.insert("settle_mean_s".into(), mean(&settle));
                            extras.insert("settle_max_s".into(), max(&settle));
                        }
                        // Waves of a mixture's profiles leave at different
                        // times; their width says nothing about R1.
                        Kind::Resync if clients.entries().len() == 1 => {
                            resync_extras(&reps, fi, &mut extras)
                        }
                        Kind::Resync => {}
                    }
                    if *kind == FilterKind::Abacus {
                        extras.insert(
                            "window_s".into(),
                            point.filter.abacus_window(clients).as_secs_f64(),
                        );
                    }
                    let first = &reps[0][fi];
                    if !first.timeline.is_empty() {
                        out.timelines.push(Timeline {
                            profile: clients.name.clone(),
                            filter: kind.name(),
                            value,
                            series_value: series,
                            bin_s: s.timeline_bin.as_secs_f64(),
                            bins: first.timeline.clone(),
                        });
                    }
                    out.rows.push(Row {
                        study: s.study.clone(),
                        figure: s.figure.clone(),
                        profile: clients.name.clone(),
                        filter: kind.name(),
                        parameter: s.sweep.as_ref().map(|a| a.parameter.clone()),
                        value,
                        series_parameter: s.series.as_ref().map(|a| a.parameter.clone()),
                        series_value: series,
                        summary: tally.summary(point.filter.delay_cost, point.filter.reject_cost),
                        extras,
                        per_repetition,
                    });
                }
            }
        }
    }
    Ok(out)
}

/// Figure 4 measurements: each wave's width (ms, mean over repetitions),
/// how much the first retransmission widened the burst, and the largest
/// widening of any later retransmission (max over repetitions, R1).
fn resync_extras(reps: &[Vec<RepResult>], fi: usize, extras: &mut BTreeMap<String, f64>) {
    let waves = reps
        .iter()
        .map(|r| r[fi].wave_widths.len())
        .max()
        .unwrap_or(0);
    for k in 0..waves {
        let widths: Vec<f64> = reps
            .iter()
            .filter_map(|r| r[fi].wave_widths.get(k).copied())
            .collect();
        extras.insert(format!("wave{k}_width_ms"), 1e3 * mean(&widths));
    }
    let first: Vec<f64> = reps
        .iter()
        .filter_map(|r| {
            let w = &r[fi].wave_widths;
            (w.len() > 1).then(|| w[1] - w[0])
        })
        .collect();
    let later: Vec<f64> = reps
        .iter()
        .flat_map(|r| {
            let w = &r[fi].wave_widths;
            w.windows(2)
                .skip(1)
                .map(|p| p[1] - p[0])
                .collect::<Vec<_>>()
        })
        .collect();
    if !first.is_empty() {
        extras.insert("first_widening_max_ms".into(), 1e3 * max(&first));
    }
    if !later.is_empty() {
        extras.insert("later_widening_max_ms".into(), 1e3 * max(&later));
    }
}

fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        0.0
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

fn max(xs: &[f64]) -> f64 {
    xs.iter()
        .copied()
        .fold(f64::NEG_INFINITY, f64::max)
        .max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = r#"
[scenario]
study = "abacus"
figure = "fig8"
title = "t"
kind = "sweep"
populations = ["windows-9x-nt"]
filters = ["tbf", "abacus"]
repetitions = 3
horizon_s = 30

[workload]
kind = "mwm"
mean = 100
std_dev = 55
hurst = 0.8
scales = 6

[filter]
bucket_size = 60
refill_rate = 90
window_s = 50
greedy_window_s = 50
reject_cost = 75

[sweep]
parameter = "workload.std_dev"
values = [10, 55]
"#;

    /// Every row keeps one set of metrics per repetition, and those sets
    /// are the pooled row's requests split by seed: the counts add up to
    /// the pooled ones.
    #[test]
    fn rows_keep_each_repetitions_metrics_beside_the_pooled_ones() {
        let s = Scenario::from_toml(SMALL, "small.toml").unwrap();
        let r = execute(&s, Effort::default(), &|| {}).unwrap();
        assert_eq!(r.rows.len(), 4);
        for row in &r.rows {
            assert_eq!(row.per_repetition.len(), 3);
            let reps = &row.per_repetition;
            let requests: u64 = reps.iter().map(|x| x.summary.requests).sum();
            assert_eq!(requests, row.summary.requests);
            let share = |f: fn(&Summary) -> f64| -> f64 {
                reps.iter()
                    .map(|x| f(&x.summary) * x.summary.requests as f64)
                    .sum::<f64>()
                    / requests as f64
            };
            for (pooled, f) in [
                (
                    row.summary.throughput_pct,
                    (|m: &Summary| m.throughput_pct) as fn(&Summary) -> f64,
                ),
                (row.summary.timeouts_pct, |m| m.timeouts_pct),
                (row.summary.delay_mean_s, |m| m.delay_mean_s),
                (row.summary.cost_mean, |m| m.cost_mean),
            ] {
                assert!((share(f) - pooled).abs() < 1e-9, "{} vs {pooled}", share(f));
            }
            // The seeds differ: not every repetition measured the same.
            assert!(reps.iter().any(|x| x.summary != reps[0].summary));
        }
    }
}
