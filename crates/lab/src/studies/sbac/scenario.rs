//! The SBAC study's scenario file format (`scenarios/sbac/*.toml`): parsed,
//! validated, and expanded into the runs of the session simulator.

use super::NAME;
use serde::Deserialize;
use serde::Serialize;
use vantage_core::admission::session::EwmaConfig;
use vantage_core::admission::session::HybridConfig;
use vantage_core::admission::session::PredictiveConfig;
use vantage_core::admission::session::SessionConfigError;
use vantage_core::Nanos;
use vantage_sim::seed::mix_seed;
use vantage_sim::sessions::LoadPattern;
use vantage_sim::sessions::ModelReading;
use vantage_sim::sessions::RunConfig;
use vantage_sim::sessions::Segment;
use vantage_sim::sessions::Strategy;
use vantage_sim::syn::scenario::Checker;
use vantage_sim::syn::scenario::ScenarioError;
use vantage_sim::syn::Effort;

/// What identifies a run in the results.
#[derive(Clone, Debug, Serialize)]
pub struct JobMeta {
    pub figure: String,
    pub scenario: String,
    pub strategy: String,
    /// The ac-weight k (EWMA family).
    pub weight: Option<f64>,
    /// The ac-threshold U_ac; `None` without admission control.
    pub threshold: Option<f64>,
    pub session_length_mean: f64,
    /// The steady load; for a pattern its mean; for a step the load after.
    pub load_pct: f64,
    /// `steady`, a pattern's name, or `step-<from>-<to>`.
    pub pattern: String,
    pub think_time_s: f64,
    pub retries: u32,
    pub interval_s: f64,
}

/// One run to do.
#[derive(Clone, Debug)]
pub struct Job {
    /// The cell (row) this run is a repetition of, within its scenario.
    pub cell: usize,
    pub meta: JobMeta,
    pub config: RunConfig,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    scenario: Meta,
    workload: WorkloadSection,
    #[serde(default)]
    clients: ClientsSection,
    #[serde(default)]
    server: ServerSection,
    #[serde(default)]
    admission: AdmissionSection,
    #[serde(default)]
    model: ModelSection,
    #[serde(default)]
    pattern: Vec<PatternSection>,
    step: Option<StepSection>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Meta {
    study: String,
    name: String,
    figure: String,
    title: String,
    kind: Kind,
    #[serde(default = "one_u64")]
    seed: u64,
    #[serde(default = "one_u32")]
    repetitions: u32,
    #[serde(default = "one_u32")]
    quick_repetitions: u32,
    #[serde(default = "default_measure")]
    measure_s: f64,
    #[serde(default = "default_quick_measure")]
    quick_measure_s: f64,
    #[serde(default = "default_warmup_lives")]
    warmup_lives: f64,
    #[serde(default = "default_quick_warmup_lives")]
    quick_warmup_lives: f64,
}

fn one_u64() -> u64 {
    1
}
fn one_u32() -> u32 {
    1
}
fn default_measure() -> f64 {
    1200.0
}
fn default_quick_measure() -> f64 {
    200.0
}
fn default_warmup_lives() -> f64 {
    4.0
}
fn default_quick_warmup_lives() -> f64 {
    2.0
}

/// What a scenario runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// One constant load per run, swept over `workload.loads_pct`.
    Steady,
    /// The `[[pattern]]` load patterns.
    Pattern,
    /// A step from `step.from_pct` to `step.to_pct`.
    Step,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkloadSection {
    session_length_means: Vec<f64>,
    #[serde(default)]
    loads_pct: Vec<f64>,
    quick_loads_pct: Option<Vec<f64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClientsSection {
    #[serde(default = "default_think")]
    think_time_s: Vec<f64>,
    #[serde(default = "default_timeout")]
    timeout_s: f64,
    #[serde(default = "default_retries")]
    retries: Vec<f64>,
}

fn default_think() -> Vec<f64> {
    vec![5.0]
}
fn default_timeout() -> f64 {
    1.0
}
fn default_retries() -> Vec<f64> {
    vec![1.0]
}

impl Default for ClientsSection {
    fn default() -> Self {
        ClientsSection {
            think_time_s: default_think(),
            timeout_s: default_timeout(),
            retries: default_retries(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerSection {
    #[serde(default = "default_capacity")]
    capacity_rps: f64,
    #[serde(default = "default_listen_queue")]
    listen_queue: f64,
    #[serde(default = "one_f64")]
    rejection_cost: f64,
}

fn default_capacity() -> f64 {
    1000.0
}
fn default_listen_queue() -> f64 {
    1024.0
}
fn one_f64() -> f64 {
    1.0
}

impl Default for ServerSection {
    fn default() -> Self {
        ServerSection {
            capacity_rps: default_capacity(),
            listen_queue: default_listen_queue(),
            rejection_cost: 1.0,
        }
    }
}

/// `[model]`: readings of the paper's server where its text leaves room
/// ([`ModelReading`]); every key defaults to the model of
/// `vantage_sim::sessions`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelSection {
    #[serde(default)]
    later_requests_bypass_queue_limit: bool,
    #[serde(default)]
    later_requests_first: bool,
    #[serde(default)]
    retry_joins_original: bool,
    #[serde(default)]
    skip_closed_requests: bool,
    #[serde(default)]
    refusal_cost: f64,
    #[serde(default)]
    first_request_no_retry: bool,
    #[serde(default)]
    processor_sharing: bool,
    client_limit: Option<f64>,
    session_end_seen_after_s: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AdmissionSection {
    #[serde(default = "default_strategies")]
    strategies: Vec<String>,
    /// One ac-threshold for every strategy, or `thresholds`: a sweep of
    /// them, each strategy run at each (Section 10's 93 / 95 / 97 %).
    threshold: Option<f64>,
    thresholds: Option<Vec<f64>>,
    #[serde(default = "one_f64")]
    interval_s: f64,
    #[serde(default = "default_carry")]
    carry_intervals: f64,
}

fn default_strategies() -> Vec<String> {
    vec!["none".into()]
}
fn default_threshold() -> f64 {
    0.95
}
fn default_carry() -> f64 {
    3.0
}

impl Default for AdmissionSection {
    fn default() -> Self {
        AdmissionSection {
            strategies: default_strategies(),
            threshold: None,
            thresholds: None,
            interval_s: 1.0,
            carry_intervals: default_carry(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PatternSection {
    name: String,
    loads_pct: Vec<f64>,
    segment_s: f64,
    quick_segment_s: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StepSection {
    from_pct: f64,
    to_pct: f64,
    before_s: f64,
    after_s: f64,
    quick_before_s: Option<f64>,
    quick_after_s: Option<f64>,
    /// Seconds after the step before the overload counts as steady.
    #[serde(default = "default_settle")]
    settle_s: f64,
}

fn default_settle() -> f64 {
    60.0
}

/// A named load pattern, full and quick segment lengths.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Pattern {
    pub name: String,
    pub loads_pct: Vec<f64>,
    pub segment_s: f64,
    pub quick_segment_s: f64,
}

/// A load step.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Step {
    pub from_pct: f64,
    pub to_pct: f64,
    pub before_s: f64,
    pub after_s: f64,
    pub quick_before_s: f64,
    pub quick_after_s: f64,
    pub settle_s: f64,
}

/// A validated scenario.
#[derive(Clone, Debug)]
pub struct SbacScenario {
    pub origin: String,
    pub name: String,
    pub figure: String,
    pub title: String,
    pub kind: Kind,
    pub seed: u64,
    /// Runs per cell, each with its own seed; a cell's row pools them.
    pub repetitions: u32,
    pub quick_repetitions: u32,
    pub measure_s: f64,
    pub quick_measure_s: f64,
    pub warmup_lives: f64,
    pub quick_warmup_lives: f64,
    pub session_length_means: Vec<f64>,
    pub loads_pct: Vec<f64>,
    pub quick_loads_pct: Vec<f64>,
    pub think_times_s: Vec<f64>,
    pub timeout_s: f64,
    pub retries: Vec<u32>,
    pub capacity_rps: f64,
    pub listen_queue: usize,
    pub rejection_cost: f64,
    pub strategies: Vec<Strategy>,
    /// The ac-thresholds every strategy runs at (one, or a sweep).
    pub thresholds: Vec<f64>,
    pub interval_s: f64,
    pub patterns: Vec<Pattern>,
    pub step: Option<Step>,
    /// `[model]`: the reading of the server (the default unless probing).
    pub reading: ModelReading,
}

/// Checks of this study's scenario format, beside the shared ones.
trait SbacChecks {
    fn config(&self, key: &str, r: Result<(), SessionConfigError>) -> Result<(), ScenarioError>;
}

impl SbacChecks for Checker<'_> {
    fn config(&self, key: &str, r: Result<(), SessionConfigError>) -> Result<(), ScenarioError> {
        r.map_err(|e| self.fail(key, e.to_string()))
    }
}

/// Parses a strategy name: `none`, `stable`, `responsive`, `hybrid`,
/// `predictive`, or `k=<weight>` for a member of the EWMA family.
fn strategy(
    c: &Checker<'_>,
    key: &str,
    name: &str,
    threshold: f64,
    carry: u32,
) -> Result<Strategy, ScenarioError> {
    let s = match name {
        "none" => Strategy::None,
        "stable" => Strategy::Ewma(EwmaConfig {
            threshold,
            ..EwmaConfig::stable()
        }),
        "responsive" => Strategy::Ewma(EwmaConfig {
            threshold,
            ..EwmaConfig::responsive()
        }),
        "hybrid" => Strategy::Hybrid(HybridConfig {
            threshold,
            ..HybridConfig::default()
        }),
        "predictive" => Strategy::Predictive(PredictiveConfig {
            threshold,
            carry_intervals: carry,
            ..PredictiveConfig::default()
        }),
        other => match other.strip_prefix("k=").map(str::parse::<f64>) {
            Some(Ok(weight)) => {
                c.range(key, weight, 0.01, 1.0)?;
                Strategy::Ewma(EwmaConfig { threshold, weight })
            }
            _ => {
                return Err(c.fail(
                    key,
                    format!(
                        "unknown strategy `{other}` (known: none, stable, responsive, \
                         hybrid, predictive, k=<0.01..1>)"
                    ),
                ))
            }
        },
    };
    let check = match &s {
        Strategy::None => Ok(()),
        Strategy::Ewma(e) => e.validate(),
        Strategy::Hybrid(h) => h.validate(),
        Strategy::Predictive(p) => p.validate(),
    };
    c.config(key, check)?;
    Ok(s)
}

impl SbacScenario {
    /// Parses and validates a scenario; `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<SbacScenario, ScenarioError> {
        let c = Checker::new(origin, text);
        let file: File = c.deserialize()?;
        let m = &file.scenario;
        if m.study != NAME {
            return Err(c.fail(
                "scenario.study",
                format!("must be \"{NAME}\", got \"{}\"", m.study),
            ));
        }
        let repetitions = c.range(
            "scenario.repetitions",
            f64::from(m.repetitions),
            1.0,
            1000.0,
        )? as u32;
        let quick_repetitions = c.range(
            "scenario.quick_repetitions",
            f64::from(m.quick_repetitions),
            1.0,
            1000.0,
        )? as u32;
        let measure_s = c.range("scenario.measure_s", m.measure_s, 10.0, 1e6)?;
        let quick_measure_s = c.range("scenario.quick_measure_s", m.quick_measure_s, 10.0, 1e6)?;
        let warmup_lives = c.range("scenario.warmup_lives", m.warmup_lives, 0.0, 100.0)?;
        let quick_warmup_lives = c.range(
            "scenario.quick_warmup_lives",
            m.quick_warmup_lives,
            0.0,
            100.0,
        )?;
        let w = &file.workload;
        let session_length_means = c.list(
            "workload.session_length_means",
            &w.session_length_means,
            1.0,
            1e4,
        )?;
        let (loads_pct, quick_loads_pct) = if m.kind == Kind::Steady {
            let full = c.list("workload.loads_pct", &w.loads_pct, 1.0, 10_000.0)?;
            let quick = match &w.quick_loads_pct {
                Some(q) => c.list("workload.quick_loads_pct", q, 1.0, 10_000.0)?,
                None => full.clone(),
            };
            (full, quick)
        } else {
            if !w.loads_pct.is_empty() || w.quick_loads_pct.is_some() {
                return Err(c.fail(
                    "workload.loads_pct",
                    "is for kind = \"steady\"; patterns and steps give their own loads".into(),
                ));
            }
            (Vec::new(), Vec::new())
        };
        let cl = &file.clients;
        let think_times_s = c.list("clients.think_time_s", &cl.think_time_s, 0.001, 3600.0)?;
        let timeout_s = c.range("clients.timeout_s", cl.timeout_s, 0.001, 3600.0)?;
        let retries = cl
            .retries
            .iter()
            .enumerate()
            .map(|(i, r)| {
                c.whole(&format!("clients.retries[{i}]"), *r, 0.0, 10.0)
                    .map(|v| v as u32)
            })
            .collect::<Result<Vec<_>, _>>()?;
        if retries.is_empty() {
            return Err(c.fail("clients.retries", "must list at least one value".into()));
        }
        let s = &file.server;
        let capacity_rps = c.range("server.capacity_rps", s.capacity_rps, 1.0, 1e6)?;
        let listen_queue = c.whole("server.listen_queue", s.listen_queue, 1.0, 1e6)? as usize;
        let rejection_cost = c.range("server.rejection_cost", s.rejection_cost, 0.0, 100.0)?;
        let md = &file.model;
        let reading = ModelReading {
            later_requests_bypass_queue_limit: md.later_requests_bypass_queue_limit,
            later_requests_first: md.later_requests_first,
            retry_joins_original: md.retry_joins_original,
            skip_closed_requests: md.skip_closed_requests,
            refusal_cost: c.range("model.refusal_cost", md.refusal_cost, 0.0, 100.0)?,
            first_request_no_retry: md.first_request_no_retry,
            processor_sharing: md.processor_sharing,
            client_limit: match md.client_limit {
                Some(n) => Some(c.whole("model.client_limit", n, 1.0, 1e7)?),
                None => None,
            },
            session_end_seen_after: match md.session_end_seen_after_s {
                Some(t) => Some(Nanos::from_secs_f64(c.range(
                    "model.session_end_seen_after_s",
                    t,
                    0.0,
                    86_400.0,
                )?)),
                None => None,
            },
        };
        let a = &file.admission;
        let thresholds = match (a.threshold, &a.thresholds) {
            (Some(_), Some(_)) => {
                return Err(c.fail(
                    "admission.thresholds",
                    "give either `threshold` or `thresholds`, not both".into(),
                ))
            }
            (Some(t), None) => vec![c.range("admission.threshold", t, 0.01, 1.0)?],
            (None, Some(list)) => {
                let list = c.list("admission.thresholds", list, 0.01, 1.0)?;
                if list.is_empty() {
                    return Err(c.fail(
                        "admission.thresholds",
                        "must list at least one value".into(),
                    ));
                }
                list
            }
            (None, None) => vec![default_threshold()],
        };
        let interval_s = c.range("admission.interval_s", a.interval_s, 0.001, 3600.0)?;
        let carry = c.whole("admission.carry_intervals", a.carry_intervals, 0.0, 1000.0)? as u32;
        if a.strategies.is_empty() {
            return Err(c.fail(
                "admission.strategies",
                "must name at least one strategy".into(),
            ));
        }
        let mut strategies = Vec::new();
        for &threshold in &thresholds {
            for (i, n) in a.strategies.iter().enumerate() {
                let s = strategy(
                    &c,
                    &format!("admission.strategies[{i}]"),
                    n,
                    threshold,
                    carry,
                )?;
                // Without admission control the threshold does not matter.
                if !strategies.contains(&s) {
                    strategies.push(s);
                }
            }
        }
        let mut patterns = Vec::new();
        for (i, p) in file.pattern.iter().enumerate() {
            let key = |k: &str| format!("pattern[{i}].{k}");
            let loads = c.list(&key("loads_pct"), &p.loads_pct, 0.0, 10_000.0)?;
            let segment_s = c.range(&key("segment_s"), p.segment_s, 1.0, 1e6)?;
            let quick_segment_s = match p.quick_segment_s {
                Some(q) => c.range(&key("quick_segment_s"), q, 1.0, 1e6)?,
                None => segment_s,
            };
            patterns.push(Pattern {
                name: p.name.clone(),
                loads_pct: loads,
                segment_s,
                quick_segment_s,
            });
        }
        match (m.kind, patterns.is_empty()) {
            (Kind::Pattern, true) => {
                return Err(c.fail("pattern", "kind = \"pattern\" needs a [[pattern]]".into()))
            }
            (Kind::Steady | Kind::Step, false) => {
                return Err(c.fail("pattern", "is only for kind = \"pattern\"".into()))
            }
            _ => {}
        }
        let step = match (&file.step, m.kind) {
            (Some(st), Kind::Step) => {
                let before_s = c.range("step.before_s", st.before_s, 1.0, 1e6)?;
                // The settling time leaves at least 2 s of measurement after
                // the step, so `after_s` below 2 s leaves no valid settle_s.
                let after_s = c.range("step.after_s", st.after_s, 2.0, 1e6)?;
                let settle_s = st.settle_s;
                if !(settle_s.is_finite() && (0.0..=after_s - 2.0).contains(&settle_s)) {
                    return Err(c.fail(
                        "step.settle_s",
                        format!(
                            "must be between 0 and {} (`step.after_s` {after_s} s less the 2 s measured after settling), got {settle_s}",
                            after_s - 2.0
                        ),
                    ));
                }
                let quick_after_s = match st.quick_after_s {
                    Some(q) => c.range("step.quick_after_s", q, settle_s + 2.0, 1e6)?,
                    None => after_s,
                };
                Some(Step {
                    from_pct: c.range("step.from_pct", st.from_pct, 0.0, 10_000.0)?,
                    to_pct: c.range("step.to_pct", st.to_pct, 0.0, 10_000.0)?,
                    before_s,
                    after_s,
                    quick_before_s: match st.quick_before_s {
                        Some(q) => c.range("step.quick_before_s", q, 1.0, 1e6)?,
                        None => before_s,
                    },
                    quick_after_s,
                    settle_s,
                })
            }
            (None, Kind::Step) => {
                return Err(c.fail("step", "kind = \"step\" needs a [step] section".into()))
            }
            (Some(_), _) => return Err(c.fail("step", "is only for kind = \"step\"".into())),
            (None, _) => None,
        };
        let scenario = SbacScenario {
            origin: origin.to_string(),
            name: m.name.clone(),
            figure: m.figure.clone(),
            title: m.title.clone(),
            kind: m.kind,
            seed: m.seed,
            repetitions,
            quick_repetitions,
            measure_s,
            quick_measure_s,
            warmup_lives,
            quick_warmup_lives,
            session_length_means,
            loads_pct,
            quick_loads_pct,
            think_times_s,
            timeout_s,
            retries,
            capacity_rps,
            listen_queue,
            rejection_cost,
            strategies,
            thresholds,
            interval_s,
            patterns,
            step,
            reading,
        };
        // Bound the work of one run (about 100 bytes per session).
        let longest = scenario
            .jobs(Effort { quick: false })
            .iter()
            .map(|j| j.config.pattern.end().as_secs_f64())
            .fold(0.0, f64::max);
        if longest > 2e5 {
            return Err(c.fail(
                "scenario.measure_s",
                format!("makes a run of {longest:.0} s; at most 200000 s"),
            ));
        }
        Ok(scenario)
    }

    /// The runs of this scenario.
    pub fn jobs(&self, effort: Effort) -> Vec<Job> {
        let quick = effort.quick;
        let measure = if quick {
            self.quick_measure_s
        } else {
            self.measure_s
        };
        let lives = if quick {
            self.quick_warmup_lives
        } else {
            self.warmup_lives
        };
        // (pattern name, load_pct, segments before warm-up, step info)
        let mut shapes: Vec<Shape> = Vec::new();
        match self.kind {
            Kind::Steady => {
                let loads = if quick {
                    &self.quick_loads_pct
                } else {
                    &self.loads_pct
                };
                for &l in loads {
                    shapes.push(("steady".into(), l, vec![(measure, l)], None));
                }
            }
            Kind::Pattern => {
                for p in &self.patterns {
                    let seg = if quick {
                        p.quick_segment_s
                    } else {
                        p.segment_s
                    };
                    let mean = p.loads_pct.iter().sum::<f64>() / p.loads_pct.len() as f64;
                    let segs = p.loads_pct.iter().map(|&l| (seg, l)).collect();
                    shapes.push((p.name.clone(), mean, segs, None));
                }
            }
            Kind::Step => {
                let st = self.step.as_ref().expect("validated: step kind has a step");
                let (before, after) = if quick {
                    (st.quick_before_s, st.quick_after_s)
                } else {
                    (st.before_s, st.after_s)
                };
                shapes.push((
                    format!("step-{}-{}", st.from_pct, st.to_pct),
                    st.to_pct,
                    vec![(before, st.from_pct), (after, st.to_pct)],
                    Some((before, st.settle_s)),
                ));
            }
        }
        let repetitions = if quick {
            self.quick_repetitions
        } else {
            self.repetitions
        };
        let mut jobs = Vec::new();
        let mut index = 0u64;
        let mut cell = 0usize;
        for strategy in &self.strategies {
            for &mean in &self.session_length_means {
                for &think in &self.think_times_s {
                    for &retries in &self.retries {
                        for (pattern, load_pct, segs, step) in &shapes {
                            let life = mean * think;
                            let warmup = warmup_s(lives, life);
                            let window: f64 = segs.iter().map(|s| s.0).sum();
                            // Steady runs keep their load for two lives past
                            // the window, so the cohort ends under it.
                            let tail = if self.kind == Kind::Steady {
                                2.0 * life
                            } else {
                                0.0
                            };
                            let mut segments = vec![Segment {
                                duration: Nanos::from_secs_f64(warmup),
                                load: segs[0].1 / 100.0,
                            }];
                            segments.extend(segs.iter().map(|&(d, l)| Segment {
                                duration: Nanos::from_secs_f64(d),
                                load: l / 100.0,
                            }));
                            let last = segs[segs.len() - 1].1;
                            segments.push(Segment {
                                duration: Nanos::from_secs_f64(tail),
                                load: last / 100.0,
                            });
                            let from = Nanos::from_secs_f64(warmup);
                            let to = Nanos::from_secs_f64(warmup + window);
                            let (step_at, overload_window) = match step {
                                Some((before, settle)) => {
                                    let at = Nanos::from_secs_f64(warmup + before);
                                    (Some(at), Some((at + Nanos::from_secs_f64(*settle), to)))
                                }
                                None => (None, None),
                            };
                            // The first repetition keeps the seed a single run had.
                            let first_seed = mix_seed(mix_seed(self.seed, index), mean.to_bits());
                            for repetition in 0..repetitions {
                                let seed = if repetition == 0 {
                                    first_seed
                                } else {
                                    mix_seed(first_seed, u64::from(repetition))
                                };
                                jobs.push(Job {
                                    cell,
                                    meta: JobMeta {
                                        figure: self.figure.clone(),
                                        scenario: self.name.clone(),
                                        strategy: strategy.name(),
                                        weight: strategy.weight(),
                                        threshold: strategy.threshold(),
                                        session_length_mean: mean,
                                        load_pct: *load_pct,
                                        pattern: pattern.clone(),
                                        think_time_s: think,
                                        retries,
                                        interval_s: self.interval_s,
                                    },
                                    config: RunConfig {
                                        capacity_requests_per_s: self.capacity_rps,
                                        listen_queue: self.listen_queue,
                                        session_length_mean: mean,
                                        think_time_mean: Nanos::from_secs_f64(think),
                                        timeout: Nanos::from_secs_f64(self.timeout_s),
                                        retries,
                                        rejection_cost: self.rejection_cost,
                                        strategy: strategy.clone(),
                                        interval: Nanos::from_secs_f64(self.interval_s),
                                        pattern: LoadPattern {
                                            segments: segments.clone(),
                                        },
                                        measure_from: from,
                                        measure_to: to,
                                        step_at,
                                        overload_window,
                                        seed,
                                        reading: self.reading.clone(),
                                    },
                                });
                            }
                            index += 1;
                            cell += 1;
                        }
                    }
                }
            }
        }
        jobs
    }
}

/// The warm-up before a run's measured load: `lives` session lives
/// (mean length × think time, `life_s`) at the first load, at least 30 s
/// unless there is none. Both drivers of the live SBAC experiment take it
/// from here (`sbac_live::plan`).
pub fn warmup_s(lives: f64, life_s: f64) -> f64 {
    if lives > 0.0 {
        (lives * life_s).max(30.0)
    } else {
        0.0
    }
}

/// A run's load shape: pattern name, load %, segments (seconds, load %)
/// after the warm-up, and for a step (seconds before it, settle seconds).
type Shape = (String, f64, Vec<(f64, f64)>, Option<(f64, f64)>);

#[cfg(test)]
mod tests {
    use super::*;

    const STEP: &str = include_str!("../../../../../scenarios/sbac/step-overload.toml");

    #[test]
    fn settle_time_error_names_the_bound_it_comes_from() {
        let text = STEP.replace("settle_s = 60", "settle_s = 700");
        let err = SbacScenario::from_toml(&text, "s.toml").unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains("`step.settle_s` must be between 0 and 598 (`step.after_s` 600 s"),
            "{message}"
        );
        let text = STEP.replace("after_s = 600", "after_s = 1.5");
        let err = SbacScenario::from_toml(&text, "s.toml").unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains("`step.after_s` must be between 2 and"),
            "{message}"
        );
        assert!(!message.contains("-0.5"), "{message}");
    }

    /// The probe files of `scenarios/sbac/readings/` load, each sets the
    /// reading its name says (`paper` none), and the study's own
    /// scenarios keep the default reading.
    #[test]
    fn reading_files_load_and_the_study_keeps_the_default_reading() {
        let folder = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/sbac/readings");
        let mut names = Vec::new();
        for entry in std::fs::read_dir(folder).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let s = SbacScenario::from_toml(&text, &path.display().to_string())
                .unwrap_or_else(|e| panic!("{e}"));
            let stem = path.file_stem().unwrap().to_string_lossy().to_string();
            let r = &s.reading;
            let expected = match stem.as_str() {
                "paper" => *r == ModelReading::default(),
                "bypass-queue-limit" => r.later_requests_bypass_queue_limit,
                "later-requests-first" => r.later_requests_first,
                "retry-joins-original" => r.retry_joins_original,
                "skip-closed-requests" => r.skip_closed_requests,
                "refusal-cost" => r.refusal_cost == 1.0,
                "first-request-no-retry" => r.first_request_no_retry,
                "processor-sharing" => r.processor_sharing,
                "client-limit" => r.client_limit == Some(10_000),
                "bypass-and-refusal-cost" => {
                    r.later_requests_bypass_queue_limit && r.refusal_cost == 1.0
                }
                other => panic!("unexpected reading file {other}"),
            };
            assert!(expected, "{stem}: {r:?}");
            assert!(s
                .jobs(Effort { quick: true })
                .iter()
                .all(|j| j.config.reading == *r));
            names.push(stem);
        }
        assert_eq!(names.len(), 10, "{names:?}");
        for (origin, text) in super::super::SCENARIO_FILES {
            let s = SbacScenario::from_toml(text, origin).unwrap();
            assert_eq!(s.reading, ModelReading::default(), "{origin}");
        }
        let bad = format!("{STEP}\n[model]\nrefusal_cost = -1\n");
        let err = SbacScenario::from_toml(&bad, "s.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("model.refusal_cost"), "{err}");
        let unknown = format!("{STEP}\n[model]\nqueue_discipline = \"lifo\"\n");
        assert!(SbacScenario::from_toml(&unknown, "s.toml").is_err());
    }

    const SWEEP: &str = include_str!("../../../../../scenarios/sbac/uac-sweep.toml");

    #[test]
    fn a_threshold_sweep_runs_every_strategy_at_each_threshold() {
        let s = SbacScenario::from_toml(SWEEP, "u.toml").unwrap();
        assert_eq!(s.thresholds, vec![0.93, 0.95, 0.97]);
        let jobs = s.jobs(Effort { quick: true });
        let seen: Vec<Option<f64>> = jobs.iter().map(|j| j.meta.threshold).collect();
        for t in [0.93, 0.95, 0.97] {
            assert!(seen.contains(&Some(t)), "{seen:?}");
        }
        for j in &jobs {
            assert_eq!(j.config.strategy.threshold(), j.meta.threshold);
        }
        // Without admission control the thresholds collapse into one cell.
        let none = SWEEP.replace("[\"responsive\"]", "[\"none\"]");
        let s = SbacScenario::from_toml(&none, "u.toml").unwrap();
        assert_eq!(s.strategies.len(), 1);
        let both = SWEEP.replace("interval_s = 1", "interval_s = 1\nthreshold = 0.9");
        let err = SbacScenario::from_toml(&both, "u.toml")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("admission.thresholds") && err.contains("not both"),
            "{err}"
        );
        let bad = SWEEP.replace("0.97]", "1.5]");
        let err = SbacScenario::from_toml(&bad, "u.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("admission.thresholds"), "{err}");
    }
}
