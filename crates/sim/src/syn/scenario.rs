//! Scenario files: one TOML file per figure or table.
//!
//! A scenario names its study and figure, the client populations to run it
//! under (`populations`, one run each; a population is a built-in profile
//! or mixture, `vantage profiles`, or a `[[mixture]]` of the file), the filters, the workload, the filter parameters, and up to two
//! swept parameters (`[sweep]` for the x-axis, `[series]` for one line per
//! value). Every key is checked: an unknown key, a value out of range or an
//! unknown profile is an error that names the file, the line and the key.
//! `[filter]` is [`FilterSpec`], the live gate's table, without `kind` and
//! `population` (the scenario lists those) and without `"measure"`.
//!
//! `scenario.populations` was named `scenario.clients`; the old name is read,
//! with a warning in [`Scenario::warnings`], until vantage
//! [`vantage_core::config::OLD_NAMES_REFUSED_FROM`].
//!
//! ```toml
//! [scenario]
//! study = "abacus"
//! figure = "fig8"
//! title = "Effects of burstiness"
//! kind = "sweep"                  # sweep | resync | convergence
//! populations = ["windows-9x-nt", "linux-6.5", "mix-2026"]
//! filters = ["tbf", "tbf-reject", "abacus", "greedy"]
//! repetitions = 30
//! horizon_s = 600
//! seed = 1
//!
//! [workload]
//! kind = "mwm"                    # mwm | constant-with-burst | burst
//! mean = 100
//! std_dev = 40
//! hurst = 0.8
//! scales = 10
//!
//! [filter]
//! bucket_size = 120
//! refill_rate = 120
//! window_s = 50                   # or "cost-optimal"
//!
//! [sweep]
//! parameter = "workload.std_dev"
//! values = [10, 40, 70, 100]
//! ```
//!
//! An axis lists at most [`MAX_AXIS_VALUES`] values (each is a run).

use crate::syn::filters::{AbacusWindow, FilterKind, FilterParams};
use crate::syn::network::Network;
use crate::syn::workload::mwm::MwmParams;
use crate::syn::workload::Workload;
use serde::Deserialize;
use std::collections::BTreeMap;
use vantage_core::admission::syn::{FilterSpec, Refill};
use vantage_core::config::{self, ConfigError};
use vantage_core::tcp::{ClientMix, SynProfile};
use vantage_core::Nanos;

/// A scenario that cannot be used, with where.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("{origin}: {message}")]
    Parse { origin: String, message: String },
    #[error("{origin}: `{key}` {problem}")]
    Invalid {
        origin: String,
        key: String,
        problem: String,
    },
    /// A file's syntax or value, with its line.
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// What a scenario measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Section 6 metrics per filter and parameter value.
    Sweep,
    /// Figure 4: how a dropped burst's retransmissions spread.
    Resync,
    /// Figure 5: how long a token bucket takes to stop dropping after a burst.
    Convergence,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    scenario: Meta,
    #[serde(default)]
    network: NetworkSection,
    workload: WorkloadSection,
    filter: FilterSpec,
    sweep: Option<Axis>,
    series: Option<Axis>,
    #[serde(default)]
    mixture: Vec<MixtureSection>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Meta {
    study: String,
    figure: String,
    title: String,
    kind: Kind,
    populations: Option<Vec<String>>,
    /// `populations`' old name.
    #[serde(rename = "clients")]
    old_clients: Option<Vec<String>>,
    filters: Vec<FilterKind>,
    repetitions: u32,
    horizon_s: f64,
    #[serde(default = "default_seed")]
    seed: u64,
    /// Repetitions and horizon under `--quick`.
    quick_repetitions: Option<u32>,
    quick_horizon_s: Option<f64>,
    /// Width of timeline bins recorded for plots (resync, convergence).
    timeline_bin_ms: Option<f64>,
}

fn default_seed() -> u64 {
    1
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NetworkSection {
    #[serde(default = "five")]
    base_delay_ms: f64,
    #[serde(default = "five")]
    jitter_ms: f64,
}

fn five() -> f64 {
    5.0
}

impl Default for NetworkSection {
    fn default() -> Self {
        NetworkSection {
            base_delay_ms: 5.0,
            jitter_ms: 5.0,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
enum WorkloadSection {
    Mwm {
        mean: f64,
        std_dev: f64,
        hurst: f64,
        scales: u32,
        #[serde(default = "one")]
        point_s: f64,
    },
    ConstantWithBurst {
        rate: f64,
        burst_size: f64,
        burst_length_s: f64,
    },
    Burst {
        size: f64,
        spread_ms: f64,
    },
}

fn one() -> f64 {
    1.0
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Axis {
    parameter: String,
    values: Vec<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MixtureSection {
    name: String,
    weights: BTreeMap<String, f64>,
}

/// A swept parameter and its values.
#[derive(Clone, Debug, PartialEq)]
pub struct Sweep {
    pub parameter: String,
    pub values: Vec<f64>,
}

/// The parameters of one point of a scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    pub workload: Workload,
    pub filter: FilterParams,
    pub network: Network,
    /// `bucket_refill_s`, when W follows r_t.
    bucket_refill_secs: Option<f64>,
}

/// A validated scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub origin: String,
    /// The file's text, for the lines of errors found at a point.
    text: String,
    pub study: String,
    pub figure: String,
    pub title: String,
    pub kind: Kind,
    /// The client populations, one run each.
    pub populations: Vec<ClientMix>,
    pub filters: Vec<FilterKind>,
    pub repetitions: u32,
    pub horizon: Nanos,
    pub seed: u64,
    pub quick_repetitions: u32,
    pub quick_horizon: Nanos,
    pub timeline_bin: Nanos,
    pub base: Point,
    pub sweep: Option<Sweep>,
    pub series: Option<Sweep>,
    /// Old key names the file uses, one line each (file, line, old and new
    /// key): the caller shows them.
    pub warnings: Vec<String>,
}

/// Most new requests one repetition may create (memory: about 100 bytes each).
const MAX_REQUESTS_PER_RUN: f64 = 5e7;
/// Most MWM points one repetition may draw.
const MAX_SERIES_POINTS: u64 = 10_000_000;
/// Most timeline bins one repetition may record.
const MAX_TIMELINE_BINS: u64 = 5_000_000;

/// Parameters a `[sweep]` or `[series]` may vary.
pub const SWEEPABLE: &[&str] = &[
    "workload.mean",
    "workload.std_dev",
    "workload.hurst",
    "workload.rate",
    "workload.burst_size",
    "workload.spread_ms",
    "filter.bucket_size",
    "filter.refill_rate",
    "filter.interval_s",
    "filter.window_s",
    "filter.greedy_window_s",
    "filter.delay_cost",
    "filter.reject_cost",
    "network.jitter_ms",
];

/// Validation of one scenario file's values: errors name the file, the
/// line and the key. Shared by every study's scenario format.
pub type Checker<'a> = config::Checker<'a, ScenarioError>;

impl Scenario {
    /// Parses and validates a scenario; `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<Scenario, ScenarioError> {
        let c = Checker::new(origin, text);
        let file: File = c.deserialize()?;
        let meta = &file.scenario;
        let mut warnings = Vec::new();
        let populations = populations(&c, &file, &mut warnings)?;
        if meta.filters.is_empty() {
            return Err(c.fail("scenario.filters", "must name at least one filter".into()));
        }
        let repetitions = c.whole(
            "scenario.repetitions",
            meta.repetitions as f64,
            1.0,
            10_000.0,
        )? as u32;
        let horizon = c.range("scenario.horizon_s", meta.horizon_s, 0.001, 1e7)?;
        let quick_repetitions = match meta.quick_repetitions {
            Some(r) => c.whole("scenario.quick_repetitions", r as f64, 1.0, 10_000.0)? as u32,
            None => repetitions.min(3),
        };
        let quick_horizon = match meta.quick_horizon_s {
            Some(h) => c.range("scenario.quick_horizon_s", h, 0.001, 1e7)?,
            None => horizon.min(120.0),
        };
        let timeline_bin = match meta.timeline_bin_ms {
            Some(ms) => c.range("scenario.timeline_bin_ms", ms, 0.001, 1e6)?,
            None => 100.0,
        };

        let network = network(&c, &file.network)?;
        let workload = workload(&c, &file.workload)?;
        let (filter, bucket_refill_secs) = filter(&c, &file.filter)?;
        let scenario = Scenario {
            origin: origin.to_string(),
            text: text.to_string(),
            study: meta.study.clone(),
            figure: meta.figure.clone(),
            title: meta.title.clone(),
            kind: meta.kind,
            populations,
            filters: meta.filters.clone(),
            repetitions,
            horizon: Nanos::from_secs_f64(horizon),
            seed: meta.seed,
            quick_repetitions,
            quick_horizon: Nanos::from_secs_f64(quick_horizon),
            timeline_bin: Nanos::from_secs_f64(timeline_bin / 1e3),
            base: Point {
                workload,
                filter,
                network,
                bucket_refill_secs,
            },
            sweep: axis(&c, &file.sweep, "sweep")?,
            series: axis(&c, &file.series, "series")?,
            warnings,
        };
        scenario.check_every_point(&c)?;
        Ok(scenario)
    }

    /// Validates every point the scenario will run, so that a bad swept
    /// value fails before any work starts, and bounds the work and memory
    /// one repetition may take.
    fn check_every_point(&self, c: &Checker) -> Result<(), ScenarioError> {
        let longest = self.horizon.max(self.quick_horizon);
        let slowest_give_up = self
            .populations
            .iter()
            .flat_map(|m| m.entries().iter().map(|(p, _)| p.give_up))
            .max()
            .unwrap_or(Nanos::ZERO);
        let bins = (longest + slowest_give_up).0 / self.timeline_bin.0.max(1);
        if self.kind != Kind::Sweep && bins > MAX_TIMELINE_BINS {
            return Err(c.fail(
                "self.timeline_bin_ms",
                format!(
                    "gives {bins} bins over the horizon and the clients' give-up time; at most {MAX_TIMELINE_BINS}"
                ),
            ));
        }
        for series in self.series_values() {
            for value in self.sweep_values() {
                let point = self.point(series, value)?;
                if let Workload::Mwm { point: length, .. } = &point.workload {
                    let points = longest.0 / length.0.max(1);
                    if points > MAX_SERIES_POINTS {
                        return Err(c.fail(
                            "workload.point_s",
                            format!(
                                "gives {points} points over the horizon; at most {MAX_SERIES_POINTS}"
                            ),
                        ));
                    }
                }
                let requests = point.workload.expected_requests(longest);
                if requests > MAX_REQUESTS_PER_RUN {
                    return Err(c.fail(
                        "workload",
                        format!(
                            "would create about {requests:.0} requests per repetition; at most {MAX_REQUESTS_PER_RUN:.0}"
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The `[sweep]` values, or one point without a sweep.
    pub fn sweep_values(&self) -> Vec<Option<f64>> {
        match &self.sweep {
            Some(s) => s.values.iter().map(|v| Some(*v)).collect(),
            None => vec![None],
        }
    }

    /// The `[series]` values, or one series.
    pub fn series_values(&self) -> Vec<Option<f64>> {
        match &self.series {
            Some(s) => s.values.iter().map(|v| Some(*v)).collect(),
            None => vec![None],
        }
    }

    /// The parameters of the point at `series` and `sweep` values, checked.
    pub fn point(&self, series: Option<f64>, sweep: Option<f64>) -> Result<Point, ScenarioError> {
        let c = Checker::new(&self.origin, &self.text);
        let mut point = self.base.clone();
        if let (Some(axis), Some(v)) = (&self.series, series) {
            set(&mut point, &axis.parameter, v, &c)?;
        }
        if let (Some(axis), Some(v)) = (&self.sweep, sweep) {
            set(&mut point, &axis.parameter, v, &c)?;
        }
        if let Some(secs) = point.bucket_refill_secs {
            point.filter.bucket_size = (point.filter.refill_rate * secs).round() as u64;
        }
        let f = &point.filter;
        c.range("filter.refill_rate", f.refill_rate, 0.0, 1e9)?;
        c.range("filter.delay_cost", f.delay_cost, 0.0, 1e9)?;
        c.range("filter.reject_cost", f.reject_cost, 0.0, 1e9)?;
        c.range("filter.arrival_smoothing", f.arrival_smoothing, 1e-6, 1.0)?;
        point
            .workload
            .validate()
            .map_err(|e| c.fail("workload", e.to_string()))?;
        for population in &self.populations {
            for kind in &self.filters {
                point
                    .filter
                    .build(*kind, population)
                    .map_err(|e| c.fail("filter", e.to_string()))?;
            }
        }
        Ok(point)
    }
}

/// The client populations: built-in names, or `[[mixture]]` tables.
fn populations(
    c: &Checker,
    file: &File,
    warnings: &mut Vec<String>,
) -> Result<Vec<ClientMix>, ScenarioError> {
    let meta = &file.scenario;
    let mut mixtures: BTreeMap<String, ClientMix> = BTreeMap::new();
    for (i, m) in file.mixture.iter().enumerate() {
        let mut entries = Vec::new();
        for (profile, weight) in &m.weights {
            let key = format!("mixture[{i}].weights.{profile}");
            let p = SynProfile::builtin(profile).map_err(|e| c.fail(&key, e.to_string()))?;
            entries.push((p, *weight));
        }
        let mix = ClientMix::new(&m.name, entries)
            .map_err(|e| c.fail(&format!("mixture[{i}]"), e.to_string()))?;
        mixtures.insert(m.name.clone(), mix);
    }
    let key = "scenario.populations";
    let names = c
        .renamed(
            key,
            meta.populations.as_ref(),
            "scenario.clients",
            meta.old_clients.as_ref(),
            warnings,
        )?
        .ok_or_else(|| {
            c.fail(
                key,
                "is missing: the client populations, one run each".into(),
            )
        })?;
    if names.is_empty() {
        return Err(c.fail(key, "must name at least one population".into()));
    }
    let mut populations = Vec::new();
    for name in names {
        let mix = match mixtures.get(name) {
            Some(m) => m.clone(),
            None => ClientMix::builtin(name).map_err(|e| c.fail(key, e.to_string()))?,
        };
        populations.push(mix);
    }
    Ok(populations)
}

fn network(c: &Checker, section: &NetworkSection) -> Result<Network, ScenarioError> {
    Ok(Network {
        base_delay: Nanos::from_secs_f64(
            c.range("network.base_delay_ms", section.base_delay_ms, 0.0, 1e5)? / 1e3,
        ),
        jitter: Nanos::from_secs_f64(
            c.range("network.jitter_ms", section.jitter_ms, 0.0, 1e5)? / 1e3,
        ),
    })
}

fn workload(c: &Checker, section: &WorkloadSection) -> Result<Workload, ScenarioError> {
    Ok(match *section {
        WorkloadSection::Mwm {
            mean,
            std_dev,
            hurst,
            scales,
            point_s,
        } => Workload::Mwm {
            params: MwmParams {
                mean,
                std_dev,
                hurst,
                scales,
            },
            point: Nanos::from_secs_f64(c.range("workload.point_s", point_s, 1e-6, 1e6)?),
        },
        WorkloadSection::ConstantWithBurst {
            rate,
            burst_size,
            burst_length_s,
        } => Workload::ConstantWithBurst {
            rate,
            burst_size: c.whole("workload.burst_size", burst_size, 0.0, 1e8)?,
            burst_length: Nanos::from_secs_f64(c.range(
                "workload.burst_length_s",
                burst_length_s,
                0.0,
                1e6,
            )?),
        },
        WorkloadSection::Burst { size, spread_ms } => Workload::Burst {
            size: c.whole("workload.size", size, 0.0, 1e8)?,
            spread: Nanos::from_secs_f64(c.range("workload.spread_ms", spread_ms, 0.0, 1e9)? / 1e3),
        },
    })
}

/// The `[filter]` table without the gate's keys; W's refill seconds when
/// W follows r_t.
fn filter(c: &Checker, f: &FilterSpec) -> Result<(FilterParams, Option<f64>), ScenarioError> {
    if f.kind.is_some() {
        return Err(c.fail(
            "filter.kind",
            "is the gate's; a scenario lists its filters in scenario.filters".into(),
        ));
    }
    for (key, given) in [
        ("filter.population", f.population.is_some()),
        ("filter.clients", f.old_clients.is_some()),
    ] {
        if given {
            return Err(c.fail(
                key,
                "is the gate's; a scenario lists its populations in scenario.populations".into(),
            ));
        }
    }
    let valid = f.validate(c, "filter")?;
    if valid.refill == Refill::Measure {
        return Err(c.fail(
            "filter.refill_rate",
            "\"measure\" is the live gate's; the simulator needs tokens per second".into(),
        ));
    }
    Ok((valid.params, valid.bucket_refill_secs))
}

/// Most values a `[sweep]` or `[series]` may list.
pub const MAX_AXIS_VALUES: usize = 1_000;

/// A `[sweep]` or `[series]` table.
fn axis(c: &Checker, a: &Option<Axis>, name: &str) -> Result<Option<Sweep>, ScenarioError> {
    match a {
        None => Ok(None),
        Some(a) => {
            if !SWEEPABLE.contains(&a.parameter.as_str()) {
                return Err(c.fail(
                    &format!("{name}.parameter"),
                    format!(
                        "names unknown parameter \"{}\" (one of: {})",
                        a.parameter,
                        SWEEPABLE.join(", ")
                    ),
                ));
            }
            if a.values.is_empty() {
                return Err(c.fail(&format!("{name}.values"), "is empty".into()));
            }
            if a.values.len() > MAX_AXIS_VALUES {
                return Err(c.fail(
                    &format!("{name}.values"),
                    format!(
                        "has {} values, more than the {MAX_AXIS_VALUES} one axis may have (each is a run of the simulator)",
                        a.values.len()
                    ),
                ));
            }
            Ok(Some(Sweep {
                parameter: a.parameter.clone(),
                values: a.values.clone(),
            }))
        }
    }
}

fn set(point: &mut Point, parameter: &str, value: f64, c: &Checker) -> Result<(), ScenarioError> {
    let secs = |v: f64| Nanos::from_secs_f64(v);
    let f = &mut point.filter;
    match (parameter, &mut point.workload) {
        ("workload.mean", Workload::Mwm { params, .. }) => params.mean = value,
        ("workload.std_dev", Workload::Mwm { params, .. }) => params.std_dev = value,
        ("workload.hurst", Workload::Mwm { params, .. }) => params.hurst = value,
        ("workload.rate", Workload::ConstantWithBurst { rate, .. }) => *rate = value,
        ("workload.burst_size", Workload::ConstantWithBurst { burst_size, .. }) => {
            *burst_size = c.whole(parameter, value, 0.0, 1e8)?
        }
        ("workload.spread_ms", Workload::Burst { spread, .. }) => {
            *spread = secs(c.range(parameter, value, 0.0, 1e9)? / 1e3)
        }
        ("filter.bucket_size", _) => {
            f.bucket_size = c.whole(parameter, value, 0.0, 1e9)?;
            point.bucket_refill_secs = None;
        }
        ("filter.refill_rate", _) => f.refill_rate = value,
        ("network.jitter_ms", _) => {
            point.network.jitter = secs(c.range(parameter, value, 0.0, 1e5)? / 1e3)
        }
        ("filter.interval_s", _) => f.interval = secs(c.range(parameter, value, 1e-6, 1e5)?),
        ("filter.window_s", _) => {
            f.window = AbacusWindow::Fixed(secs(c.range(parameter, value, 0.0, 1e6)?))
        }
        ("filter.greedy_window_s", _) => {
            f.greedy_window = Some(secs(c.range(parameter, value, 0.0, 1e5)?))
        }
        ("filter.delay_cost", _) => f.delay_cost = value,
        ("filter.reject_cost", _) => f.reject_cost = value,
        _ => {
            return Err(c.fail(
                parameter,
                "cannot be swept with this workload kind".to_string(),
            ))
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
[scenario]
study = "abacus"
figure = "fig8"
title = "t"
kind = "sweep"
populations = ["windows-9x-nt"]
filters = ["tbf", "abacus"]
repetitions = 2
horizon_s = 60

[workload]
kind = "mwm"
mean = 100
std_dev = 40
hurst = 0.8
scales = 10

[filter]
bucket_size = 120
refill_rate = 120
window_s = 50
greedy_window_s = 50
reject_cost = 75

[sweep]
parameter = "workload.std_dev"
values = [10, 40]
"#;

    #[test]
    fn minimal_scenario_loads() {
        let s = Scenario::from_toml(MINIMAL, "min.toml").unwrap();
        assert_eq!(s.sweep_values(), vec![Some(10.0), Some(40.0)]);
        let p = s.point(None, Some(10.0)).unwrap();
        match p.workload {
            Workload::Mwm { params, .. } => assert_eq!(params.std_dev, 10.0),
            other => panic!("{other:?}"),
        }
        assert_eq!(p.filter.bucket_size, 120);
    }

    #[test]
    fn unknown_key_names_file_and_key() {
        let text = MINIMAL.replace("reject_cost = 75", "reject_cost = 75\nrejet_cost = 1");
        let err = Scenario::from_toml(&text, "bad.toml")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("bad.toml:"), "{err}");
        assert!(err.contains("rejet_cost"), "{err}");
    }

    #[test]
    fn out_of_range_value_names_key_and_range() {
        let text = MINIMAL.replace("horizon_s = 60", "horizon_s = -5");
        let err = Scenario::from_toml(&text, "bad.toml")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("scenario.horizon_s") && err.contains("between"),
            "{err}"
        );
    }

    #[test]
    fn a_sweep_longer_than_the_cap_is_refused() {
        let values: Vec<String> = (0..=MAX_AXIS_VALUES)
            .map(|v| (v % 90 + 10).to_string())
            .collect();
        let text = MINIMAL.replace(
            "values = [10, 40]",
            &format!("values = [{}]", values.join(", ")),
        );
        let err = Scenario::from_toml(&text, "long.toml")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`sweep.values` has 1001 values, more than the 1000"),
            "{err}"
        );
    }

    #[test]
    fn bad_swept_value_fails_at_load() {
        let text = MINIMAL.replace("values = [10, 40]", "values = [10, 1e9]");
        let err = Scenario::from_toml(&text, "bad.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("too large"), "{err}");
    }

    #[test]
    fn unknown_profile_and_parameter_are_named() {
        let text = MINIMAL.replace("[\"windows-9x-nt\"]", "[\"os2-warp\"]");
        let err = Scenario::from_toml(&text, "b.toml")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("os2-warp") && err.contains("scenario.populations"),
            "{err}"
        );
        let text = MINIMAL.replace("\"workload.std_dev\"", "\"workload.colour\"");
        let err = Scenario::from_toml(&text, "b.toml")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("sweep.parameter") && err.contains("colour"),
            "{err}"
        );
    }

    #[test]
    fn custom_mixture_is_a_client_population() {
        let text = MINIMAL.replace("[\"windows-9x-nt\"]", "[\"half\"]")
            + "\n[[mixture]]\nname = \"half\"\nweights = { \"linux-6.5\" = 1, windows-7 = 1 }\n";
        let s = Scenario::from_toml(&text, "m.toml").unwrap();
        assert_eq!(s.populations[0].entries().len(), 2);
        assert_eq!(s.populations[0].entries()[0].1, 0.5);
    }

    #[test]
    fn malformed_toml_is_an_error_not_a_panic() {
        let err = Scenario::from_toml("[scenario\nstudy=", "x.toml").unwrap_err();
        assert!(err.to_string().starts_with("x.toml:"));
    }

    #[test]
    fn runaway_workload_is_refused() {
        let text = MINIMAL.replace("horizon_s = 60", "horizon_s = 9000000");
        let err = Scenario::from_toml(&text, "big.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("requests per repetition"), "{err}");
    }

    #[test]
    fn every_scenario_file_of_the_abacus_study_loads() {
        let folder = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/abacus");
        let mut loaded = 0;
        for entry in std::fs::read_dir(folder).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let origin = path.display().to_string();
            match Scenario::from_toml(&text, &origin) {
                Ok(s) => assert!(s.warnings.is_empty(), "{:?}", s.warnings),
                Err(e) => panic!("{e}"),
            }
            loaded += 1;
        }
        assert!(loaded >= 6, "{loaded} files");
    }

    #[test]
    fn the_old_name_scenario_clients_loads_with_a_warning() {
        use vantage_core::config::OLD_NAMES_REFUSED_FROM;
        let s = Scenario::from_toml(MINIMAL, "min.toml").unwrap();
        assert!(s.warnings.is_empty(), "{:?}", s.warnings);
        let old = MINIMAL.replace("populations = ", "clients = ");
        let s = Scenario::from_toml(&old, "old.toml").unwrap();
        assert_eq!(s.populations[0].name, "windows-9x-nt");
        assert_eq!(
            s.warnings,
            [format!("old.toml:7: `scenario.clients` is the old name of `scenario.populations`; it is read until vantage {OLD_NAMES_REFUSED_FROM}, rename it")]
        );
    }

    #[test]
    fn old_and_new_population_keys_together_are_an_error() {
        let both = MINIMAL.replace(
            "populations = [\"windows-9x-nt\"]",
            "populations = [\"windows-9x-nt\"]\nclients = [\"linux-6.5\"]",
        );
        let err = Scenario::from_toml(&both, "both.toml")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(
                "both.toml:8: `scenario.clients` and `scenario.populations` are the same setting"
            ),
            "{err}"
        );
        let none = MINIMAL.replace("populations = [\"windows-9x-nt\"]\n", "");
        let err = Scenario::from_toml(&none, "none.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("`scenario.populations` is missing"), "{err}");
        let typo = MINIMAL.replace("populations = ", "population = ");
        let err = Scenario::from_toml(&typo, "typo.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `population`"), "{err}");
    }

    #[test]
    fn the_gates_population_key_is_refused_in_a_scenario() {
        for key in ["population", "clients"] {
            let text = MINIMAL.replace(
                "reject_cost = 75",
                &format!("reject_cost = 75\n{key} = \"linux-6.5\""),
            );
            let err = Scenario::from_toml(&text, "g.toml")
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(&format!("`filter.{key}` is the gate's")),
                "{err}"
            );
        }
    }
}
