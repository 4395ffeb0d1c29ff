//! Testbed experiments: one file that makes a set of runs — a base spec,
//! client profiles × variants (each variant a `[gate]` section and
//! optionally its own listen backlog) — and says what the simulator should
//! compare each variant with. `vantage testbed experiment FILE` runs them
//! (`docs/gate-experiment.md`; the file of the Abacus paper's Section 6
//! comparison is `scenarios/gate/section6.toml`; the file format is in
//! the docs' "The experiment file").
//!
//! Runs are named `<base name>-<variant>-<profile>`; a `vantage` gate's
//! `filter.population` is set to the run's profile unless the variant sets
//! it. A variant's `filter.clients`, the old name of `filter.population`,
//! is read until vantage [`vantage_core::config::OLD_NAMES_REFUSED_FROM`]
//! with a warning in [`Experiment::warnings`], and written to the run's spec
//! under the new name. Every run has the same seed, hence the same arrivals.
//!
//! For the simulator each variant gets a [`FilterModel`]: the `vantage-core`
//! filter that does what the variant does — iptables `limit` + DROP is a
//! TBF of W = burst, r_t = rate, + REJECT a TBF w/ Reject, a `vantage` gate
//! its own filter; no gate is approximated by a TBF of W = backlog + 1 (an
//! accept queue holds one more than its backlog) refilled at the test
//! server's accept rate. The simulated clients behave as the live ones:
//! their profile's SYN schedule cut at the frustration timeout, without
//! the paper's Windows-2000 timer spread ([`linux_client`]).

use std::path::Path;

use serde::{Deserialize, Serialize};
use vantage_core::admission::syn::{AbacusWindow, FilterKind, FilterParams, FilterSpec, Refill};
use vantage_core::config::{Checker, ConfigError};
use vantage_core::tcp::ClientMix;
use vantage_core::Nanos;

use vantage_testbed::spec::{ServerSpec, TestbedSpec};
use vantage_testbed::syn_admission::{LimitAction, SynAdmissionSpec};

use super::clients::linux_client;

/// Weight of the newest period in the filters' arrival-rate averages when
/// a gate configuration does not give one (the simulator's default).
pub use vantage_core::admission::syn::DEFAULT_ARRIVAL_SMOOTHING;

/// Why an experiment file cannot be used; the message names the key.
#[derive(Debug, thiserror::Error)]
#[error("{origin}: {message}")]
pub struct ExperimentError {
    pub origin: String,
    pub message: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExperimentFile {
    experiment: ExperimentSection,
    #[serde(default)]
    quick: QuickSection,
    base: toml::Table,
    variant: Vec<Variant>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExperimentSection {
    title: String,
    profiles: Vec<String>,
    delay_cost: f64,
    reject_cost: f64,
    #[serde(default = "default_sim_repetitions")]
    sim_repetitions: u32,
    #[serde(default = "default_sim_horizon")]
    sim_horizon_s: f64,
    #[serde(default)]
    checks: Checks,
}

fn default_sim_repetitions() -> u32 {
    30
}
fn default_sim_horizon() -> f64 {
    600.0
}

/// `[experiment.checks]`: which variants the paper's statements compare,
/// and the thresholds that decide whether they hold.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Checks {
    /// Variants expected to behave as the paper's Abacus Filter.
    pub candidates: Vec<String>,
    /// Variants expected to behave as the paper's TBF (drop).
    pub baselines: Vec<String>,
    /// "Comparable success": within this many percentage points.
    pub comparable_success_points: f64,
    /// "Well below": the candidate's p99 delay at most this fraction of the
    /// baseline's.
    pub well_below_ratio: f64,
    /// "Far fewer time-outs": at most this fraction of the baseline's.
    pub far_fewer_ratio: f64,
}

impl Default for Checks {
    fn default() -> Self {
        Checks {
            candidates: vec!["e".into()],
            baselines: vec!["d".into(), "b".into()],
            comparable_success_points: 5.0,
            well_below_ratio: 0.5,
            far_fewer_ratio: 0.25,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct QuickSection {
    duration_s: Option<f64>,
    seed: Option<u64>,
    profiles: Option<Vec<String>>,
    variants: Option<Vec<String>>,
    sim_repetitions: Option<u32>,
}

/// `[[variant]]`: one way of admitting connections.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Variant {
    /// Short name (`a`, `b`, …): 1..=8 letters or digits.
    pub id: String,
    /// What it is, for tables and plots.
    pub label: String,
    /// The test server's listen backlog for this variant.
    pub backlog: Option<u32>,
    /// The run's `[gate]`; absent = none.
    pub gate: Option<toml::Table>,
}

/// The `vantage-core` filter the simulator runs for a variant.
#[derive(Clone, Debug)]
pub struct FilterModel {
    pub kind: FilterKind,
    pub params: FilterParams,
    /// The client population the filter is told about.
    pub filter_population: ClientMix,
    /// True when the filter only approximates the variant.
    pub approximate: bool,
    /// For tables: `tbf`, `≈ tbf (W = 121, r_t = 120)`, …
    pub describe: String,
}

/// One testbed run of the experiment.
#[derive(Clone, Debug)]
pub struct PlannedRun {
    pub variant: Variant,
    pub profile: String,
    pub spec: TestbedSpec,
    /// The spec as TOML (written to the run's `spec.toml`).
    pub text: String,
    pub model: Option<FilterModel>,
    /// The clients as they behave: the profile cut at the frustration
    /// timeout (and a connection timer, if the profile has one).
    pub sim_clients: ClientMix,
    /// How long a client waits at most.
    pub patience: Nanos,
}

/// A loaded experiment file: every run, checked.
#[derive(Clone, Debug)]
pub struct Experiment {
    pub file: String,
    pub title: String,
    pub quick: bool,
    /// h.
    pub delay_cost: f64,
    /// r.
    pub reject_cost: f64,
    pub sim_repetitions: u32,
    pub sim_horizon: Nanos,
    pub checks: Checks,
    /// The profiles and variants run, in order.
    pub profiles: Vec<String>,
    pub variants: Vec<Variant>,
    /// Profile-major: every variant of the first profile, then the next.
    pub runs: Vec<PlannedRun>,
    /// Warnings about the design (e.g. an Abacus window longer than the
    /// clients wait).
    pub notes: Vec<String>,
    /// Old key names the file uses, one line each (file, line, old and new
    /// key): the caller shows them on stderr.
    pub warnings: Vec<String>,
}

fn table_mut<'a>(
    table: &'a mut toml::Table,
    key: &str,
    context: &str,
) -> Result<&'a mut toml::Table, String> {
    match table
        .entry(key)
        .or_insert_with(|| toml::Value::Table(toml::Table::new()))
    {
        toml::Value::Table(t) => Ok(t),
        _ => Err(format!("{context}.{key} must be a table")),
    }
}

/// `linux-6.5` → `linux-6_5` (run names allow letters, digits, `-`, `_`).
fn slug(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The model of a `vantage` gate's `[filter]`: the gate's own table
/// ([`FilterSpec`]) read with the gate's defaults; `key` prefixes messages.
fn gate_filter_model(filter: &toml::Table, key: &str) -> Result<FilterModel, String> {
    let spec: FilterSpec = toml::Value::Table(filter.clone())
        .try_into()
        .map_err(|e: toml::de::Error| format!("{key}: {}", e.to_string().trim()))?;
    let checker: Checker<'_, ConfigError> = Checker::new(key, "");
    let valid = spec.validate(&checker, key).map_err(|e| match e {
        ConfigError::Invalid { key, problem, .. } => format!("{key} {problem}"),
        other => other.to_string(),
    })?;
    let kind = valid.kind.ok_or_else(|| format!("{key}.kind is missing"))?;
    let filter_population = valid
        .population
        .ok_or_else(|| format!("{key}.population is missing"))?;
    // Measured live; the simulator starts, and stays, at the initial rate.
    let approximate = valid.refill == Refill::Measure;
    // Parameters the filter refuses fail here, before any run.
    valid
        .params
        .build(kind, &filter_population)
        .map_err(|e| format!("{key}: {e}"))?;
    Ok(FilterModel {
        kind,
        describe: format!("{}{}", if approximate { "≈ " } else { "" }, kind.name()),
        params: valid.params,
        filter_population,
        approximate,
    })
}

/// A token bucket's parameters (W, r_t; the rest unused).
fn token_bucket(bucket_size: u64, refill_rate: f64) -> FilterParams {
    FilterParams {
        bucket_size,
        refill_rate,
        interval: Nanos::from_secs(1),
        window: AbacusWindow::CostOptimal,
        greedy_window: None,
        delay_cost: 1.0,
        reject_cost: 0.0,
        arrival_smoothing: DEFAULT_ARRIVAL_SMOOTHING,
    }
}

/// What the simulator runs for a spec's gate (see the module doc).
pub fn filter_model(
    spec: &TestbedSpec,
    profile: &ClientMix,
) -> Result<Option<FilterModel>, String> {
    Ok(match &spec.gate {
        SynAdmissionSpec::None => match &spec.server {
            ServerSpec::Test(server) if server.accept_rate > 0.0 => {
                let w = u64::from(server.backlog) + 1;
                Some(FilterModel {
                    kind: FilterKind::Tbf,
                    params: token_bucket(w, server.accept_rate),
                    filter_population: profile.clone(),
                    approximate: true,
                    describe: format!("≈ tbf (W = {w}, r_t = {})", server.accept_rate),
                })
            }
            _ => None,
        },
        SynAdmissionSpec::IptablesLimit {
            rate_per_s,
            burst,
            action,
        } => {
            let kind = match action {
                LimitAction::Drop => FilterKind::Tbf,
                LimitAction::Reject => FilterKind::TbfReject,
            };
            Some(FilterModel {
                kind,
                params: token_bucket(u64::from(*burst), f64::from(*rate_per_s)),
                filter_population: profile.clone(),
                approximate: false,
                describe: kind.name().to_string(),
            })
        }
        SynAdmissionSpec::Vantage { config, .. } => match config.get("filter") {
            Some(toml::Value::Table(filter)) => {
                Some(gate_filter_model(filter, "gate.config.filter")?)
            }
            _ => return Err("gate.config.filter must be a table".into()),
        },
    })
}

impl Experiment {
    /// Reads an experiment file and checks it and every run's spec;
    /// `quick` applies its `[quick]` section.
    pub fn load(path: &Path, quick: bool) -> Result<Experiment, ExperimentError> {
        let file = path.display().to_string();
        let text = std::fs::File::open(path)
            .map_err(vantage_core::config::ReadCappedError::from)
            .and_then(|f| {
                vantage_core::config::read_capped(f, vantage_core::config::MAX_CONFIG_BYTES)
            })
            .map_err(|e| ExperimentError {
                origin: file.clone(),
                message: format!("cannot read: {e}"),
            })?;
        Experiment::from_toml(&text, &file, quick)
    }

    /// [`Experiment::load`] from text; `file` names it in errors.
    pub fn from_toml(text: &str, file: &str, quick: bool) -> Result<Experiment, ExperimentError> {
        let invalid = |message: String| ExperimentError {
            origin: file.to_string(),
            message,
        };
        let parsed: ExperimentFile =
            toml::from_str(text).map_err(|e| invalid(e.to_string().trim_end().to_string()))?;
        let e = &parsed.experiment;
        for (key, value) in [("delay_cost", e.delay_cost), ("reject_cost", e.reject_cost)] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(invalid(format!(
                    "experiment.{key} = {value} must be finite and ≥ 0"
                )));
            }
        }
        if !(1..=1000).contains(&e.sim_repetitions) {
            return Err(invalid(format!(
                "experiment.sim_repetitions = {} is out of range (allowed 1..=1000)",
                e.sim_repetitions
            )));
        }
        if !(e.sim_horizon_s.is_finite() && e.sim_horizon_s > 0.0 && e.sim_horizon_s <= 86_400.0) {
            return Err(invalid(format!(
                "experiment.sim_horizon_s = {} is out of range (allowed (0, 86400] seconds)",
                e.sim_horizon_s
            )));
        }
        if e.profiles.is_empty() {
            return Err(invalid("experiment.profiles is empty".into()));
        }
        let c = &e.checks;
        for (key, value, high) in [
            (
                "comparable_success_points",
                c.comparable_success_points,
                100.0,
            ),
            ("well_below_ratio", c.well_below_ratio, 1.0),
            ("far_fewer_ratio", c.far_fewer_ratio, 1.0),
        ] {
            if !(value.is_finite() && (0.0..=high).contains(&value)) {
                return Err(invalid(format!(
                    "experiment.checks.{key} = {value} is out of range (allowed [0, {high}])"
                )));
            }
        }
        if parsed.variant.is_empty() {
            return Err(invalid("there is no [[variant]]".into()));
        }
        let checker: Checker<'_, ConfigError> = Checker::new(file, text);
        let mut warnings = Vec::new();
        let mut variant_tables = parsed.variant.clone();
        for (i, v) in variant_tables.iter_mut().enumerate() {
            let filter = v
                .gate
                .as_mut()
                .and_then(|gate| gate.get_mut("config"))
                .and_then(|config| config.as_table_mut())
                .and_then(|config| config.get_mut("filter"))
                .and_then(|filter| filter.as_table_mut());
            if let Some(filter) = filter {
                let prefix = format!("variant[{i}].gate.config.filter");
                let population = checker
                    .renamed(
                        &format!("{prefix}.population"),
                        filter.remove("population"),
                        &format!("{prefix}.clients"),
                        filter.remove("clients"),
                        &mut warnings,
                    )
                    .map_err(|e| ExperimentError {
                        origin: file.to_string(),
                        message: match e {
                            ConfigError::Invalid { key, problem, .. } => format!("{key} {problem}"),
                            other => other.to_string(),
                        },
                    })?;
                if let Some(population) = population {
                    filter.insert("population".into(), population);
                }
            }
        }
        let mut ids = std::collections::BTreeSet::new();
        for (i, v) in parsed.variant.iter().enumerate() {
            let ok = !v.id.is_empty()
                && v.id.len() <= 8
                && v.id.chars().all(|c| c.is_ascii_alphanumeric());
            if !ok {
                return Err(invalid(format!(
                    "variant[{i}].id = {:?} must be 1..=8 letters or digits",
                    v.id
                )));
            }
            if !ids.insert(v.id.clone()) {
                return Err(invalid(format!(
                    "variant[{i}].id = {:?} is used twice",
                    v.id
                )));
            }
        }
        for id in c.candidates.iter().chain(&c.baselines) {
            if !ids.contains(id) {
                return Err(invalid(format!(
                    "experiment.checks names variant {id:?}, which is not defined"
                )));
            }
        }
        for key in ["client_profile", "gate"] {
            if parsed.base.contains_key(key) {
                return Err(invalid(format!(
                    "base.{key} is set per run (experiment.profiles, variant.gate); remove it"
                )));
            }
        }
        let base_name = match parsed.base.get("name") {
            Some(toml::Value::String(name)) => name.clone(),
            _ => return Err(invalid("base.name must be a string".into())),
        };

        let q = &parsed.quick;
        let profiles = match (quick, &q.profiles) {
            (true, Some(p)) => p.clone(),
            _ => e.profiles.clone(),
        };
        let variants: Vec<Variant> = match (quick, &q.variants) {
            (true, Some(chosen)) => {
                let mut out = Vec::new();
                for id in chosen {
                    let v = variant_tables.iter().find(|v| &v.id == id).ok_or_else(|| {
                        invalid(format!(
                            "quick.variants names {id:?}, which is not a variant"
                        ))
                    })?;
                    out.push(v.clone());
                }
                out
            }
            _ => variant_tables.clone(),
        };
        if profiles.is_empty() || variants.is_empty() {
            return Err(invalid(
                "quick.profiles and quick.variants must not be empty".into(),
            ));
        }
        let sim_repetitions = match (quick, q.sim_repetitions) {
            (true, Some(n)) if (1..=1000).contains(&n) => n,
            (true, Some(n)) => {
                return Err(invalid(format!(
                    "quick.sim_repetitions = {n} is out of range (allowed 1..=1000)"
                )))
            }
            _ => e.sim_repetitions,
        };

        let mut runs = Vec::new();
        let mut notes = Vec::new();
        for profile in &profiles {
            let profile_mix = ClientMix::builtin(profile)
                .map_err(|err| invalid(format!("experiment.profiles: {err}")))?;
            for variant in &variants {
                let origin = format!("{file} [variant {}, profile {profile}]", variant.id);
                let at = |message: String| ExperimentError {
                    origin: origin.clone(),
                    message,
                };
                let mut table = parsed.base.clone();
                table.insert(
                    "name".into(),
                    toml::Value::String(format!("{base_name}-{}-{}", variant.id, slug(profile))),
                );
                table.insert(
                    "client_profile".into(),
                    toml::Value::String(profile.clone()),
                );
                if let Some(backlog) = variant.backlog {
                    table_mut(&mut table, "server", "base")
                        .map_err(at)?
                        .insert("backlog".into(), toml::Value::Integer(i64::from(backlog)));
                }
                if quick {
                    if let Some(d) = q.duration_s {
                        let load = table_mut(&mut table, "load", "base").map_err(at)?;
                        table_mut(load, "arrivals", "base.load")
                            .map_err(at)?
                            .insert("duration_s".into(), toml::Value::Float(d));
                    }
                    if let Some(seed) = q.seed {
                        let seed = i64::try_from(seed)
                            .map_err(|_| at(format!("quick.seed = {seed} is too large")))?;
                        table.insert("seed".into(), toml::Value::Integer(seed));
                    }
                }
                if let Some(gate) = &variant.gate {
                    let mut gate = gate.clone();
                    if gate.get("kind").and_then(|k| k.as_str()) == Some("vantage") {
                        let config = table_mut(&mut gate, "config", "variant.gate").map_err(at)?;
                        table_mut(config, "filter", "variant.gate.config")
                            .map_err(at)?
                            .entry("population")
                            .or_insert_with(|| toml::Value::String(profile.clone()));
                    }
                    table.insert("gate".into(), toml::Value::Table(gate));
                }
                let text = toml::to_string(&table)
                    .map_err(|err| at(format!("cannot write the run's spec: {err}")))?;
                let spec = TestbedSpec::from_toml(&text, &origin).map_err(|err| match err {
                    vantage_testbed::spec::SpecError::Parse { message, .. }
                    | vantage_testbed::spec::SpecError::Invalid { message, .. } => at(message),
                })?;
                if variant.backlog.is_some() && !matches!(spec.server, ServerSpec::Test(_)) {
                    return Err(at(
                        "variant.backlog needs the test server (base.server.kind = \"test\")"
                            .into(),
                    ));
                }
                let model = filter_model(&spec, &profile_mix).map_err(at)?;
                let (client_profile, settings) = spec.kernel_settings().map_err(at)?;
                let mut patience = Nanos::from_secs_f64(spec.load.frustration_timeout_s);
                if let Some(timer) = settings.connection_timer {
                    patience = Nanos(patience.0.min(timer.0));
                }
                let sim_clients = ClientMix::single(linux_client(&client_profile, patience));
                if let Some(m) = &model {
                    if m.kind == FilterKind::Abacus {
                        let window = m.params.abacus_window(&m.filter_population);
                        if window > patience {
                            notes.push(format!(
                                "variant {} ({profile}): the Abacus window S = {} s exceeds the {} s clients wait, so it borrows tokens for retransmissions that never come",
                                variant.id,
                                window.as_secs_f64(),
                                patience.as_secs_f64()
                            ));
                        }
                    }
                    if matches!(m.kind, FilterKind::Abacus | FilterKind::Greedy) {
                        for (name, gate_value, experiment_value) in [
                            ("delay_cost", m.params.delay_cost, e.delay_cost),
                            ("reject_cost", m.params.reject_cost, e.reject_cost),
                        ] {
                            if gate_value != experiment_value {
                                notes.push(format!(
                                    "variant {}: gate.config.filter.{name} = {gate_value} differs from experiment.{name} = {experiment_value}, which the average cost uses",
                                    variant.id
                                ));
                            }
                        }
                    }
                }
                runs.push(PlannedRun {
                    variant: variant.clone(),
                    profile: profile.clone(),
                    spec,
                    text,
                    model,
                    sim_clients,
                    patience,
                });
            }
        }
        notes.dedup();
        Ok(Experiment {
            file: file.to_string(),
            title: e.title.clone(),
            quick,
            delay_cost: e.delay_cost,
            reject_cost: e.reject_cost,
            sim_repetitions,
            sim_horizon: Nanos::from_secs_f64(e.sim_horizon_s),
            checks: parsed.experiment.checks,
            profiles,
            variants,
            runs,
            notes,
            warnings,
        })
    }

    /// Seconds of load the live runs take at most (arrivals plus patience,
    /// summed over runs).
    pub fn load_seconds(&self) -> f64 {
        self.runs
            .iter()
            .map(|r| r.spec.load.arrivals.duration_s + r.spec.load.frustration_timeout_s)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::workload::workload_stats;

    const FILE: &str = r#"
[experiment]
title = "t"
profiles = ["linux-6.5", "linux-3.7"]
delay_cost = 1
reject_cost = 21
[experiment.checks]
candidates = ["e"]
baselines = ["b"]

[quick]
duration_s = 5
seed = 9
profiles = ["linux-6.5"]
variants = ["e"]

[base]
name = "x"
seed = 3
[base.server]
kind = "test"
backlog = 120
accept_rate = 120
[base.load]
frustration_timeout_s = 21
[base.load.arrivals]
duration_s = 30
pattern = { kind = "mwm", mean = 100, std_dev = 55, hurst = 0.8, scales = 10 }

[[variant]]
id = "a"
label = "none"

[[variant]]
id = "b"
label = "limit"
backlog = 1024
[variant.gate]
kind = "iptables-limit"
rate_per_s = 120
burst = 100
action = "drop"

[[variant]]
id = "e"
label = "abacus"
backlog = 1024
[variant.gate]
kind = "vantage"
[variant.gate.config.filter]
kind = "abacus"
bucket_size = 120
refill_rate = 120
delay_cost = 1
reject_cost = 21
"#;

    #[test]
    fn runs_are_profiles_times_variants_with_their_gates() {
        let x = Experiment::from_toml(FILE, "f.toml", false).unwrap();
        assert_eq!(x.runs.len(), 6);
        let names: Vec<&str> = x.runs.iter().map(|r| r.spec.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "x-a-linux-6_5",
                "x-b-linux-6_5",
                "x-e-linux-6_5",
                "x-a-linux-3_7",
                "x-b-linux-3_7",
                "x-e-linux-3_7"
            ]
        );
        let a = &x.runs[0];
        assert_eq!(a.spec.gate, SynAdmissionSpec::None);
        let ServerSpec::Test(server) = &a.spec.server else {
            panic!()
        };
        assert_eq!(server.backlog, 120);
        let model = a.model.as_ref().unwrap();
        assert!(model.approximate);
        assert_eq!(
            (model.kind, model.params.bucket_size),
            (FilterKind::Tbf, 121)
        );
        let b = &x.runs[1];
        let ServerSpec::Test(server) = &b.spec.server else {
            panic!()
        };
        assert_eq!(server.backlog, 1024);
        let model = b.model.as_ref().unwrap();
        assert_eq!(model.kind, FilterKind::Tbf);
        assert_eq!(model.params.bucket_size, 100);
        assert_eq!(model.params.refill_rate, 120.0);
        let e = &x.runs[5];
        assert_eq!(e.spec.client_profile, "linux-3.7");
        let SynAdmissionSpec::Vantage { config, .. } = &e.spec.gate else {
            panic!()
        };
        assert_eq!(config["filter"]["population"].as_str(), Some("linux-3.7"));
        assert!(x.warnings.is_empty(), "{:?}", x.warnings);
        let model = e.model.as_ref().unwrap();
        assert_eq!(model.kind, FilterKind::Abacus);
        // S = max{T_i ≤ r/h = 21} = 15 s for 1, 3, 7, 15, 31 s.
        assert_eq!(
            model.params.abacus_window(&model.filter_population),
            Nanos::from_secs(15)
        );
        assert_eq!(e.patience, Nanos::from_secs(21));
        assert!(x.notes.is_empty(), "{:?}", x.notes);
        // The spec text round-trips.
        let again = TestbedSpec::from_toml(&e.text, "again").unwrap();
        assert_eq!(again.gate, e.spec.gate);
    }

    #[test]
    fn quick_replaces_duration_seed_profiles_and_variants() {
        let x = Experiment::from_toml(FILE, "f.toml", true).unwrap();
        assert_eq!(x.runs.len(), 1);
        let run = &x.runs[0];
        assert_eq!(run.variant.id, "e");
        assert_eq!(run.spec.load.arrivals.duration_s, 5.0);
        assert_eq!(run.spec.seed, 9);
    }

    #[test]
    fn a_variants_old_filter_clients_is_read_with_a_warning_and_renamed() {
        use vantage_core::config::OLD_NAMES_REFUSED_FROM;
        let at = FILE.rfind("reject_cost = 21").unwrap() + "reject_cost = 21\n".len();
        let old = format!("{}clients = \"macos\"\n{}", &FILE[..at], &FILE[at..]);
        let line = old[..at].matches('\n').count() + 1;
        let x = Experiment::from_toml(&old, "f.toml", false).unwrap();
        assert_eq!(
            x.warnings,
            [format!("f.toml:{line}: `variant[2].gate.config.filter.clients` is the old name of `variant[2].gate.config.filter.population`; it is read until vantage {OLD_NAMES_REFUSED_FROM}, rename it")]
        );
        // Every run of the variant keeps the variant's population, under
        // the new name.
        for run in x.runs.iter().filter(|r| r.variant.id == "e") {
            let SynAdmissionSpec::Vantage { config, .. } = &run.spec.gate else {
                panic!()
            };
            assert_eq!(config["filter"]["population"].as_str(), Some("macos"));
            assert!(config["filter"].get("clients").is_none());
            assert_eq!(run.model.as_ref().unwrap().filter_population.name, "macos");
        }
        let both = format!(
            "{}clients = \"macos\"\npopulation = \"macos\"\n{}",
            &FILE[..at],
            &FILE[at..]
        );
        let error = Experiment::from_toml(&both, "f.toml", false)
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("f.toml: variant[2].gate.config.filter.clients and `variant[2].gate.config.filter.population` are the same setting"),
            "{error}"
        );
    }

    #[test]
    fn long_windows_are_noted() {
        // The gate's r (the last one in the file) up to 75: S = 67 s.
        let at = FILE.rfind("reject_cost = 21").unwrap();
        let text = format!("{}reject_cost = 75{}", &FILE[..at], &FILE[at + 16..]);
        let x = Experiment::from_toml(&text, "f.toml", false).unwrap();
        assert!(
            x.notes
                .iter()
                .any(|n| n.contains("S = 67 s exceeds the 21 s")),
            "{:?}",
            x.notes
        );
    }

    #[test]
    fn errors_name_the_key() {
        let cases = [
            (
                FILE.replace("delay_cost = 1\nreject", "delay_cost = -1\nreject"),
                "experiment.delay_cost = -1",
            ),
            (FILE.replace("id = \"b\"", "id = \"a\""), "is used twice"),
            (
                FILE.replace("baselines = [\"b\"]", "baselines = [\"z\"]"),
                "names variant \"z\"",
            ),
            (
                FILE.replace("[base]\n", "[base]\nclient_profile = \"linux-6.5\"\n"),
                "base.client_profile",
            ),
            (
                FILE.replace("burst = 100", "burst = 0"),
                "[variant b, profile linux-6.5]: gate.burst = 0",
            ),
            (
                FILE.replace(
                    "bucket_size = 120\nrefill_rate = 120\ndelay_cost",
                    "refill_rate = 120\ndelay_cost",
                ),
                "gate.config.filter.bucket_size is missing",
            ),
            (
                FILE.replace("kind = \"abacus\"", "kind = \"fifo\""),
                "gate.config.filter.kind",
            ),
            (
                FILE.replace(
                    "profiles = [\"linux-6.5\", \"linux-3.7\"]",
                    "profiles = [\"windows-7\"]",
                ),
                "client_profile",
            ),
            (
                FILE.replace("title = \"t\"", "title = \"t\"\ncolour = 1"),
                "unknown field `colour`",
            ),
        ];
        for (text, expected) in cases {
            let error = Experiment::from_toml(&text, "f.toml", false)
                .unwrap_err()
                .to_string();
            assert!(error.starts_with("f.toml"), "{error}");
            assert!(
                error.contains(expected),
                "expected {expected:?} in: {error}"
            );
        }
        let error = Experiment::from_toml(
            &FILE.replace("variants = [\"e\"]", "variants = [\"q\"]"),
            "f.toml",
            true,
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("quick.variants names \"q\""), "{error}");
    }

    #[test]
    fn workload_statistics() {
        let x = Experiment::from_toml(FILE, "f.toml", false).unwrap();
        let spec = &x.runs[0].spec;
        let schedule: Vec<Nanos> = (0..30u64)
            .flat_map(|s| {
                (0..(if s % 2 == 0 { 150 } else { 50 })).map(move |_| Nanos::from_secs(s))
            })
            .collect();
        let w = workload_stats(spec, &schedule);
        assert_eq!(w.connections, 3000);
        assert_eq!(w.mean_per_s, 100.0);
        assert_eq!(w.std_dev_per_s, 50.0);
        assert_eq!(w.peak_per_s, 150);
        assert_eq!(w.seconds_above_capacity, 15);
        assert_eq!(w.capacity_ratio, Some(1.2));
    }
}
