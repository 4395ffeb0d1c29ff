//! The Certes study's scenario file format (`scenarios/certes/*.toml`):
//! parsed, validated, and turned into the simulator's and the estimator's
//! configurations.
//!
//! `scenario.populations` (the client populations, one run each) was named
//! `scenario.profiles`; the old name is read, with a warning in
//! [`CertesScenario::warnings`], until vantage
//! [`vantage_core::config::OLD_NAMES_REFUSED_FROM`].

use super::{
    CERTES_BOUND, NAME, PAPER_ALL_TESTS_BOUND, PERCENTILE_CDF_BOUND, SCENARIO_FILES,
    TRACKING_BOUND, TRACKING_BOUND_10S,
};
use serde::Deserialize;
use serde::Serialize;
use vantage_core::certes::Certes;
use vantage_core::certes::CertesConfig;
use vantage_core::certes::NetworkLoss;
use vantage_core::tcp::ClientMix;
use vantage_core::Nanos;
use vantage_sim::syn::scenario::Checker;
use vantage_sim::syn::scenario::ScenarioError;
use vantage_sim::syn::Effort;
use vantage_sim::webserver::AcceptQueueLimit;
use vantage_sim::webserver::ClientsConfig;
use vantage_sim::webserver::Draw;
use vantage_sim::webserver::EndOfConnection;
use vantage_sim::webserver::OnOff;
use vantage_sim::webserver::Page;
use vantage_sim::webserver::PathConfig;
use vantage_sim::webserver::ServerConfig;
use vantage_sim::webserver::ServiceTime;
use vantage_sim::webserver::WebServerConfig;

// ───────────────────────────── scenario files ─────────────────────────────

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct File {
    scenario: MetaSection,
    clients: ClientsSection,
    server: ServerSection,
    #[serde(default)]
    network: NetworkSection,
    #[serde(default)]
    certes: CertesSection,
    paper: Option<PaperSection>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MetaSection {
    study: String,
    name: String,
    figure: String,
    title: String,
    populations: Option<Vec<String>>,
    /// `populations`' old name.
    #[serde(rename = "profiles")]
    old_profiles: Option<Vec<String>>,
    horizon_s: f64,
    quick_horizon_s: Option<f64>,
    #[serde(default = "default_seed")]
    seed: u64,
    #[serde(default = "default_interval_ms")]
    interval_ms: f64,
    plot: Option<String>,
}

fn default_seed() -> u64 {
    1
}
fn default_interval_ms() -> f64 {
    250.0
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FtoEntry {
    seconds: f64,
    #[serde(default = "one")]
    weight: f64,
}

pub(super) fn one() -> f64 {
    1.0
}

fn default_ftos() -> Vec<FtoEntry> {
    vec![FtoEntry {
        seconds: 21.0,
        weight: 1.0,
    }]
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClientsSection {
    count: f64,
    #[serde(default = "one")]
    ramp_s: f64,
    #[serde(default)]
    think_time_s: f64,
    #[serde(default = "one")]
    requests_per_connection: f64,
    #[serde(default = "default_ftos")]
    frustration_timeouts: Vec<FtoEntry>,
    #[serde(default = "default_draw")]
    draw: String,
    on_s: Option<f64>,
    off_s: Option<f64>,
}

fn default_draw() -> String {
    "per-transaction".into()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerSection {
    #[serde(default = "default_workers")]
    workers: f64,
    #[serde(default = "default_cores")]
    cores: f64,
    accept_queue: Option<f64>,
    accept_queue_schedule: Option<Vec<f64>>,
    accept_queue_switch_s: Option<f64>,
    #[serde(default = "default_mss")]
    mss: f64,
    #[serde(default = "default_initial_window")]
    initial_window: f64,
    #[serde(default = "one")]
    synack_timeout_s: f64,
    #[serde(default = "default_synack_retries")]
    synack_retries: f64,
    #[serde(default = "default_syn_backlog")]
    syn_backlog: f64,
    #[serde(default = "default_end")]
    end_of_connection: String,
    #[serde(default = "yes")]
    lingering_close: bool,
    #[serde(default = "default_worker_overhead_ms")]
    worker_overhead_ms: f64,
    pages: Vec<PageSection>,
}

fn default_workers() -> f64 {
    255.0
}
fn default_cores() -> f64 {
    2.0
}
fn default_mss() -> f64 {
    1460.0
}
fn default_initial_window() -> f64 {
    10.0
}
fn default_synack_retries() -> f64 {
    5.0
}
fn default_worker_overhead_ms() -> f64 {
    0.1
}
fn yes() -> bool {
    true
}
fn default_syn_backlog() -> f64 {
    1024.0
}
fn default_end() -> String {
    "first-fin".into()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PageSection {
    #[serde(default = "one")]
    weight: f64,
    size_bytes: f64,
    service: String,
    service_ms: f64,
    service_cv: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NetworkSection {
    rtt_ms: Vec<f64>,
    #[serde(default)]
    jitter_ms: f64,
    #[serde(default)]
    loss: f64,
}

impl Default for NetworkSection {
    fn default() -> Self {
        NetworkSection {
            rtt_ms: vec![1.0, 1.0, 1.0],
            jitter_ms: 0.0,
            loss: 0.0,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum LossValue {
    Rate(f64),
    Rule(String),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CertesSection {
    #[serde(default = "default_ftos")]
    frustration_timeouts: Vec<FtoEntry>,
    network_loss: Option<LossValue>,
    start_late_s: Option<f64>,
    quick_start_late_s: Option<f64>,
    /// A wider bound on the whole-run error than [`CERTES_BOUND`], for a
    /// scenario where honest modelling exceeds it; `bound_reason` says why.
    bound: Option<f64>,
    /// Wider bounds on the tracking errors than [`TRACKING_BOUND`] and
    /// [`TRACKING_BOUND_10S`], likewise with `bound_reason`.
    tracking_bound: Option<f64>,
    tracking_bound_10s: Option<f64>,
    /// A wider bound than [`PERCENTILE_CDF_BOUND`], likewise.
    percentile_bound: Option<f64>,
    bound_reason: Option<String>,
    /// `false`: the paper's undamped recursion (Section 3.2 as published).
    #[serde(default = "default_damping")]
    damping: bool,
    /// Also run the model with the clients learned from the server's SYNs,
    /// and with the clients' true frustration timeouts.
    #[serde(default)]
    learn: bool,
}

fn default_damping() -> bool {
    true
}

impl Default for CertesSection {
    fn default() -> Self {
        CertesSection {
            frustration_timeouts: default_ftos(),
            network_loss: None,
            start_late_s: None,
            quick_start_late_s: None,
            bound: None,
            tracking_bound: None,
            tracking_bound_10s: None,
            percentile_bound: None,
            bound_reason: None,
            damping: true,
            learn: false,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PaperSection {
    test: String,
    connections_per_s: Option<Vec<f64>>,
    syn_drop_pct: Option<Vec<f64>>,
    certes_error_pct: Option<f64>,
}

/// What the paper reports for the test a scenario follows (Table II,
/// Section 5.2).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PaperRow {
    pub test: String,
    pub connections_per_s: Option<[f64; 2]>,
    pub syn_drop_pct: Option<[f64; 2]>,
    /// The paper's stated error of Certes for this test, where it gives one.
    pub certes_error_pct: Option<f64>,
}

/// A validated scenario.
#[derive(Clone, Debug)]
pub struct CertesScenario {
    pub origin: String,
    pub name: String,
    pub figure: String,
    pub title: String,
    /// The client populations, one run each.
    pub populations: Vec<ClientMix>,
    pub horizon: Nanos,
    pub quick_horizon: Nanos,
    pub seed: u64,
    pub interval: Nanos,
    /// File stem of the tracking plot, if one is drawn.
    pub plot: Option<String>,
    /// The simulated system (its population and horizon are set per run).
    pub system: WebServerConfig,
    /// What the estimator is told about frustration timeouts.
    pub model_frustration_timeouts: Vec<(Nanos, f64)>,
    pub network_loss: NetworkLoss,
    /// Whether the estimator damps its recursion above f*.
    pub damping: bool,
    pub start_late: Option<Nanos>,
    pub quick_start_late: Option<Nanos>,
    /// Bound on |Certes' whole-run error| asserted for this scenario.
    pub bound: f64,
    /// Bounds on its tracking errors (one-second bins, ten-second windows).
    pub tracking_bound: f64,
    pub tracking_bound_10s: f64,
    /// Bound on |F̂ − F| at the true p90 and p99.
    pub percentile_bound: f64,
    pub bound_reason: Option<String>,
    pub paper: Option<PaperRow>,
    /// Whether the learned and told-mixture models run beside the told one.
    pub learn: bool,
    /// Old key names the file uses, one line each (file, line, old and new
    /// key): the caller shows them.
    pub warnings: Vec<String>,
}

/// Checks of this study's scenario format, beside the shared ones.
trait CertesChecks {
    fn count(&self, key: &str, value: f64, low: f64, high: f64) -> Result<u32, ScenarioError>;
    fn secs(&self, key: &str, value: f64, low: f64, high: f64) -> Result<Nanos, ScenarioError>;
    fn millis(&self, key: &str, value: f64, low: f64, high: f64) -> Result<Nanos, ScenarioError>;
    fn pair(&self, key: &str, values: &Option<Vec<f64>>)
        -> Result<Option<[f64; 2]>, ScenarioError>;
    fn ftos(&self, key: &str, entries: &[FtoEntry]) -> Result<Vec<(Nanos, f64)>, ScenarioError>;
}

impl CertesChecks for Checker<'_> {
    /// A whole number in [low, high] that fits a u32 (every `high` here does).
    fn count(&self, key: &str, value: f64, low: f64, high: f64) -> Result<u32, ScenarioError> {
        let whole = self.whole(key, value, low, high)?;
        u32::try_from(whole)
            .map_err(|_| self.fail(key, format!("must be at most {}, got {value}", u32::MAX)))
    }

    fn secs(&self, key: &str, value: f64, low: f64, high: f64) -> Result<Nanos, ScenarioError> {
        Ok(Nanos::from_secs_f64(self.range(key, value, low, high)?))
    }

    fn millis(&self, key: &str, value: f64, low: f64, high: f64) -> Result<Nanos, ScenarioError> {
        Ok(Nanos::from_secs_f64(
            self.range(key, value, low, high)? / 1e3,
        ))
    }

    fn pair(
        &self,
        key: &str,
        values: &Option<Vec<f64>>,
    ) -> Result<Option<[f64; 2]>, ScenarioError> {
        match values {
            None => Ok(None),
            Some(v) if v.len() == 2 && v[0] <= v[1] => Ok(Some([v[0], v[1]])),
            Some(v) => Err(self.fail(key, format!("must be [low, high], got {v:?}"))),
        }
    }

    fn ftos(&self, key: &str, entries: &[FtoEntry]) -> Result<Vec<(Nanos, f64)>, ScenarioError> {
        if entries.is_empty() {
            return Err(self.fail(key, "needs at least one timeout".into()));
        }
        entries
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let seconds =
                    self.secs(&format!("{key}[{i}].seconds"), e.seconds, 0.001, 3600.0)?;
                let weight = self.range(&format!("{key}[{i}].weight"), e.weight, 1e-9, 1e9)?;
                Ok((seconds, weight))
            })
            .collect()
    }
}

/// Most simulated client-seconds one run may take (clients × horizon).
const MAX_CLIENT_SECONDS: f64 = 2e8;

impl CertesScenario {
    /// Parses and validates a scenario; `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<CertesScenario, ScenarioError> {
        let c = Checker::new(origin, text);
        let file: File = c.deserialize()?;
        let meta = &file.scenario;
        if meta.study != NAME {
            return Err(c.fail(
                "scenario.study",
                format!("must be \"{NAME}\", got \"{}\"", meta.study),
            ));
        }
        if meta.name.is_empty()
            || !meta
                .name
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || ch == '-')
        {
            return Err(c.fail(
                "scenario.name",
                format!("must be letters, digits and '-', got \"{}\"", meta.name),
            ));
        }
        let mut warnings = Vec::new();
        let key = "scenario.populations";
        let names = c
            .renamed(
                key,
                meta.populations.as_ref(),
                "scenario.profiles",
                meta.old_profiles.as_ref(),
                &mut warnings,
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
        let populations = names
            .iter()
            .map(|p| ClientMix::builtin(p).map_err(|e| c.fail(key, e.to_string())))
            .collect::<Result<Vec<_>, _>>()?;
        let horizon = c.secs("scenario.horizon_s", meta.horizon_s, 1.0, 1e6)?;
        let quick_horizon = match meta.quick_horizon_s {
            Some(h) => c.secs("scenario.quick_horizon_s", h, 1.0, 1e6)?,
            None => horizon.min(Nanos::from_secs(240)),
        };
        let interval = c.millis("scenario.interval_ms", meta.interval_ms, 1.0, 60_000.0)?;
        if let Some(plot) = &meta.plot {
            if plot.is_empty()
                || !plot
                    .chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || ch == '-')
            {
                return Err(c.fail(
                    "scenario.plot",
                    format!("must be letters, digits and '-', got \"{plot}\""),
                ));
            }
        }

        let cl = &file.clients;
        let count = c.count("clients.count", cl.count, 1.0, 1e6)?;
        let longest = horizon.max(quick_horizon).as_secs_f64();
        if f64::from(count) * longest > MAX_CLIENT_SECONDS {
            return Err(c.fail(
                "clients.count",
                format!(
                    "{count} clients over {longest} s is more than {MAX_CLIENT_SECONDS:.0} client-seconds per run"
                ),
            ));
        }
        let on_off = match (cl.on_s, cl.off_s) {
            (None, None) => None,
            (Some(on), Some(off)) => Some(OnOff {
                on: c.secs("clients.on_s", on, 0.001, 1e6)?,
                off: c.secs("clients.off_s", off, 0.001, 1e6)?,
            }),
            (Some(_), None) => {
                return Err(c.fail("clients.off_s", "is missing (on_s is given)".into()))
            }
            (None, Some(_)) => {
                return Err(c.fail("clients.on_s", "is missing (off_s is given)".into()))
            }
        };
        let draw = match cl.draw.as_str() {
            "per-transaction" => Draw::PerTransaction,
            "per-client" => Draw::PerClient,
            other => {
                return Err(c.fail(
                    "clients.draw",
                    format!("must be \"per-transaction\" or \"per-client\", got \"{other}\""),
                ))
            }
        };
        let clients = ClientsConfig {
            count,
            ramp: c.secs("clients.ramp_s", cl.ramp_s, 0.0, 3600.0)?,
            think_time: c.secs("clients.think_time_s", cl.think_time_s, 0.0, 3600.0)?,
            requests_per_connection: c.count(
                "clients.requests_per_connection",
                cl.requests_per_connection,
                1.0,
                1000.0,
            )?,
            frustration_timeouts: c
                .ftos("clients.frustration_timeouts", &cl.frustration_timeouts)?,
            draw,
            on_off,
        };

        let sv = &file.server;
        let accept_queue = match (&sv.accept_queue, &sv.accept_queue_schedule) {
            (Some(limit), None) => {
                if sv.accept_queue_switch_s.is_some() {
                    return Err(c.fail(
                        "server.accept_queue_switch_s",
                        "needs server.accept_queue_schedule".into(),
                    ));
                }
                AcceptQueueLimit::Fixed(c.count("server.accept_queue", *limit, 0.0, 1e7)?)
            }
            (None, Some(schedule)) => {
                if schedule.is_empty() {
                    return Err(c.fail("server.accept_queue_schedule", "is empty".into()));
                }
                let limits = schedule
                    .iter()
                    .enumerate()
                    .map(|(i, v)| {
                        c.count(&format!("server.accept_queue_schedule[{i}]"), *v, 0.0, 1e7)
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let Some(switch) = sv.accept_queue_switch_s else {
                    return Err(c.fail(
                        "server.accept_queue_switch_s",
                        "is missing (accept_queue_schedule is given)".into(),
                    ));
                };
                AcceptQueueLimit::Alternating {
                    limits,
                    period: c.secs("server.accept_queue_switch_s", switch, 0.001, 1e6)?,
                }
            }
            (Some(_), Some(_)) => {
                return Err(c.fail(
                    "server.accept_queue_schedule",
                    "conflicts with server.accept_queue: give one".into(),
                ))
            }
            (None, None) => return Err(c.fail("server.accept_queue", "is missing".into())),
        };
        if sv.pages.is_empty() {
            return Err(c.fail("server.pages", "needs at least one page".into()));
        }
        let mut pages = Vec::new();
        for (i, p) in sv.pages.iter().enumerate() {
            let key = |k: &str| format!("server.pages[{i}].{k}");
            let mean = c.millis(&key("service_ms"), p.service_ms, 0.000_001, 3.6e6)?;
            let service = match (p.service.as_str(), p.service_cv) {
                ("constant", None) => ServiceTime::Constant(mean),
                ("exponential", None) => ServiceTime::Exponential { mean },
                ("lognormal", Some(cv)) => ServiceTime::LogNormal {
                    mean,
                    cv: c.range(&key("service_cv"), cv, 0.01, 100.0)?,
                },
                ("lognormal", None) => {
                    return Err(c.fail(
                        &key("service_cv"),
                        "is needed by a lognormal service".into(),
                    ))
                }
                ("constant" | "exponential", Some(_)) => {
                    return Err(c.fail(
                        &key("service_cv"),
                        "applies to lognormal service only".into(),
                    ))
                }
                (other, _) => {
                    return Err(c.fail(
                        &key("service"),
                        format!(
                        "must be \"constant\", \"exponential\" or \"lognormal\", got \"{other}\""
                    ),
                    ))
                }
            };
            pages.push(Page {
                weight: c.range(&key("weight"), p.weight, 1e-9, 1e9)?,
                size_bytes: c.count(&key("size_bytes"), p.size_bytes, 1.0, 1e9)?,
                service,
            });
        }
        let end_of_connection = match sv.end_of_connection.as_str() {
            "first-fin" => EndOfConnection::FirstFin,
            "last-transmission" => EndOfConnection::LastTransmission,
            other => {
                return Err(c.fail(
                    "server.end_of_connection",
                    format!("must be \"first-fin\" or \"last-transmission\", got \"{other}\""),
                ))
            }
        };
        let server = ServerConfig {
            workers: c.count("server.workers", sv.workers, 1.0, 1e6)?,
            cores: c.count("server.cores", sv.cores, 1.0, 4096.0)?,
            accept_queue,
            pages,
            mss: c.count("server.mss", sv.mss, 64.0, 65_535.0)?,
            initial_window: c.count("server.initial_window", sv.initial_window, 1.0, 1000.0)?,
            synack_timeout: c.secs("server.synack_timeout_s", sv.synack_timeout_s, 0.001, 60.0)?,
            synack_retries: c.count("server.synack_retries", sv.synack_retries, 0.0, 20.0)?,
            syn_backlog: c.count("server.syn_backlog", sv.syn_backlog, 1.0, 1e7)?,
            end_of_connection,
            lingering_close: sv.lingering_close,
            worker_overhead: c.millis(
                "server.worker_overhead_ms",
                sv.worker_overhead_ms,
                0.0,
                60_000.0,
            )?,
        };

        let nw = &file.network;
        if nw.rtt_ms.len() != 3 {
            return Err(c.fail(
                "network.rtt_ms",
                format!("must be [min, avg, max], got {:?}", nw.rtt_ms),
            ));
        }
        let rtt = |i: usize| c.millis("network.rtt_ms", nw.rtt_ms[i], 0.0, 60_000.0);
        let (rtt_min, rtt_avg, rtt_max) = (rtt(0)?, rtt(1)?, rtt(2)?);
        if !(rtt_min <= rtt_avg && rtt_avg <= rtt_max) {
            return Err(c.fail(
                "network.rtt_ms",
                format!("must be ordered min ≤ avg ≤ max, got {:?}", nw.rtt_ms),
            ));
        }
        let path = PathConfig {
            rtt_min,
            rtt_avg,
            rtt_max,
            jitter: c.millis("network.jitter_ms", nw.jitter_ms, 0.0, 60_000.0)?,
            loss: c.range("network.loss", nw.loss, 0.0, 0.5)?,
        };

        let ce = &file.certes;
        let model_frustration_timeouts =
            c.ftos("certes.frustration_timeouts", &ce.frustration_timeouts)?;
        let network_loss = match &ce.network_loss {
            None => NetworkLoss::None,
            Some(LossValue::Rate(q)) => {
                NetworkLoss::Fixed(c.range("certes.network_loss", *q, 0.0, 0.5)?)
            }
            Some(LossValue::Rule(r)) if r == "none" => NetworkLoss::None,
            Some(LossValue::Rule(r)) if r == "from-retransmissions" => {
                NetworkLoss::FromRetransmissions
            }
            Some(LossValue::Rule(r)) => {
                return Err(c.fail(
                    "certes.network_loss",
                    format!("must be a rate, \"none\" or \"from-retransmissions\", got \"{r}\""),
                ))
            }
        };
        let late =
            |key: &str, v: Option<f64>, limit: Nanos| -> Result<Option<Nanos>, ScenarioError> {
                match v {
                    None => Ok(None),
                    Some(s) => Ok(Some(c.secs(
                        key,
                        s,
                        0.0,
                        (limit.as_secs_f64() - 1.0).max(0.0),
                    )?)),
                }
            };
        let start_late = late("certes.start_late_s", ce.start_late_s, horizon)?;
        let quick_start_late = match ce.quick_start_late_s {
            Some(_) => late(
                "certes.quick_start_late_s",
                ce.quick_start_late_s,
                quick_horizon,
            )?,
            None => start_late.filter(|s| *s < quick_horizon),
        };
        let widened = ce.bound.is_some()
            || ce.tracking_bound.is_some()
            || ce.tracking_bound_10s.is_some()
            || ce.percentile_bound.is_some();
        if widened && matches!(ce.bound_reason.as_deref(), None | Some("")) {
            return Err(c.fail(
                "certes.bound_reason",
                "must say why a bound is wider than the default".into(),
            ));
        }
        let bound = match ce.bound {
            None => CERTES_BOUND,
            Some(b) => c.range("certes.bound", b, CERTES_BOUND, PAPER_ALL_TESTS_BOUND)?,
        };
        let tracking_bound = match ce.tracking_bound {
            None => TRACKING_BOUND,
            Some(b) => c.range("certes.tracking_bound", b, TRACKING_BOUND, 1.0)?,
        };
        let percentile_bound = match ce.percentile_bound {
            None => PERCENTILE_CDF_BOUND,
            Some(b) => c.range("certes.percentile_bound", b, PERCENTILE_CDF_BOUND, 1.0)?,
        };
        let tracking_bound_10s = match ce.tracking_bound_10s {
            None => TRACKING_BOUND_10S,
            Some(b) => c.range("certes.tracking_bound_10s", b, TRACKING_BOUND_10S, 1.0)?,
        };
        let paper = match &file.paper {
            None => None,
            Some(p) => Some(PaperRow {
                test: p.test.clone(),
                connections_per_s: c.pair("paper.connections_per_s", &p.connections_per_s)?,
                syn_drop_pct: c.pair("paper.syn_drop_pct", &p.syn_drop_pct)?,
                certes_error_pct: p.certes_error_pct,
            }),
        };

        let system = WebServerConfig {
            horizon,
            interval,
            population: populations[0].clone(),
            clients,
            server,
            path,
        };
        let scenario = CertesScenario {
            origin: origin.to_string(),
            name: meta.name.clone(),
            figure: meta.figure.clone(),
            title: meta.title.clone(),
            populations,
            horizon,
            quick_horizon,
            seed: meta.seed,
            interval,
            plot: meta.plot.clone(),
            system,
            model_frustration_timeouts,
            network_loss,
            damping: ce.damping,
            start_late,
            quick_start_late,
            bound,
            tracking_bound,
            tracking_bound_10s,
            percentile_bound,
            bound_reason: ce.bound_reason.clone(),
            paper,
            learn: ce.learn,
            warnings,
        };
        // Every run must be accepted by the simulator and the estimator.
        for index in 0..scenario.populations.len() {
            for quick in [false, true] {
                let (system, model) = scenario.configs(index, Effort { quick });
                system.validate().map_err(|e| {
                    c.fail(&format!("clients/server/network ({})", e.part), e.problem)
                })?;
                Certes::new(model).map_err(|e| c.fail("scenario.interval_ms", e.to_string()))?;
            }
        }
        Ok(scenario)
    }

    /// The simulated system and the estimator's configuration for the run
    /// under population `index`.
    pub fn configs(&self, index: usize, effort: Effort) -> (WebServerConfig, CertesConfig) {
        let population = self.populations[index].clone();
        let mut system = self.system.clone();
        system.horizon = self.horizon_for(effort);
        system.population = population.clone();
        let mut model = CertesConfig::new(self.interval, population, Nanos::from_secs(21));
        model.frustration_timeouts = self.model_frustration_timeouts.clone();
        model.network_loss = self.network_loss;
        model.damping = self.damping;
        (system, model)
    }

    pub fn horizon_for(&self, effort: Effort) -> Nanos {
        if effort.quick {
            self.quick_horizon
        } else {
            self.horizon
        }
    }

    /// When the mid-stream estimator starts, if the scenario has one.
    pub fn start_late_for(&self, effort: Effort) -> Option<Nanos> {
        if effort.quick {
            self.quick_start_late
        } else {
            self.start_late
        }
    }

    /// The longest frustration timeout the estimator is told of.
    pub fn model_frustration_timeout(&self) -> Nanos {
        self.model_frustration_timeouts
            .iter()
            .map(|(t, _)| *t)
            .max()
            .unwrap_or(Nanos::from_secs(21))
    }
}

/// The embedded scenarios of `scenarios/certes/`.
pub fn scenarios() -> Result<Vec<CertesScenario>, ScenarioError> {
    SCENARIO_FILES
        .iter()
        .map(|(origin, text)| CertesScenario::from_toml(text, origin))
        .collect()
}

/// Runs (progress steps) the scenarios take: one per population.
pub fn steps(scenarios: &[CertesScenario]) -> u64 {
    scenarios.iter().map(|s| s.populations.len() as u64).sum()
}
