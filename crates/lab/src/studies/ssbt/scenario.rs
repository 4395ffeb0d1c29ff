//! The `scenarios/ssbt/*.toml` format: one file per figure, its kind
//! saying which part of the thesis it reruns.

use serde::Deserialize;
use vantage_core::config::Checker;
use vantage_sim::syn::scenario::ScenarioError;

use super::NAME;

/// What a scenario file reruns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Figure 3: Section 2.3's analysis (Eq. 1–5 and U).
    ActiveProbability,
    /// Figure 6: E-ATBT on one path.
    SendBuffer,
    /// Figure 7: the receive-buffer tuner on one path.
    ReceiveBuffer,
    /// Figures 9–11: the proxy world.
    Proxy,
}

/// A proxy scheme as scenario files name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SchemeName {
    Fixed,
    Ssbt,
    /// SSBT with E-ATBT fed measured (p, rtt, rto), not the path's.
    SsbtEstimated,
    SsbtConn,
    Autotuning,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    scenario: Meta,
    analysis: Option<Analysis>,
    path: Option<Path>,
    proxy: Option<Proxy>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Meta {
    study: String,
    name: String,
    figure: String,
    kind: Kind,
    #[serde(default = "default_seed")]
    seed: u64,
}

fn default_seed() -> u64 {
    1
}

/// Figure 3's settings.
#[derive(Clone, Debug, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Analysis {
    /// (rtt_c seconds, p_s) per panel.
    pub panels: Vec<[f64; 2]>,
    pub client_losses: Vec<f64>,
    pub server_rtts_s: Vec<f64>,
    pub timers_s: Vec<f64>,
    pub hit_ratio: f64,
    pub document_bytes: f64,
    pub segment_bytes: f64,
    /// W_max of the throughput formula, bytes.
    pub max_window_bytes: f64,
}

/// Figures 6 and 7's settings.
#[derive(Clone, Debug, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Path {
    pub bandwidth_mbps: f64,
    pub delay_s: f64,
    pub losses: Vec<f64>,
    pub horizon_s: f64,
    pub quick_horizon_s: f64,
    /// The other end's buffer (receiver for Figure 6, sender for 7), KB.
    pub peer_buffer_kb: f64,
}

/// Figures 9–11's settings.
#[derive(Clone, Debug, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Proxy {
    pub clients: u32,
    pub servers: u32,
    pub hit_ratio: f64,
    pub persistent_timeout_s: f64,
    pub max_connections: u32,
    pub total_buffers_mb: Vec<f64>,
    pub quick_total_buffers_mb: Vec<f64>,
    /// send : receive ratios, as [send, receive].
    pub splits: Vec<[f64; 2]>,
    pub quick_splits: Vec<[f64; 2]>,
    pub fixed_kb: Vec<f64>,
    pub quick_fixed_kb: Vec<f64>,
    pub schemes: Vec<SchemeName>,
    pub horizon_s: f64,
    pub quick_horizon_s: f64,
    pub max_file_mb: f64,
    /// SSBT: an idle connection's receive buffer halves every this long
    /// (Section 3.2); 0 turns the shrinking off.
    #[serde(default = "default_idle_buffer_half_life_s")]
    pub idle_buffer_half_life_s: f64,
}

fn default_idle_buffer_half_life_s() -> f64 {
    2.0
}

/// One validated scenario file.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SsbtScenario {
    pub name: String,
    pub figure: String,
    pub kind: Kind,
    pub seed: u64,
    pub analysis: Option<Analysis>,
    pub path: Option<Path>,
    pub proxy: Option<Proxy>,
}

type C<'a> = Checker<'a, ScenarioError>;

impl SsbtScenario {
    pub fn from_toml(text: &str, origin: &str) -> Result<SsbtScenario, ScenarioError> {
        let c: C = Checker::new(origin, text);
        let file: File = c.deserialize()?;
        let m = &file.scenario;
        if m.study != NAME {
            return Err(c.fail(
                "scenario.study",
                format!("must be \"{NAME}\", got \"{}\"", m.study),
            ));
        }
        let section_needed = |present: bool, key: &str| {
            if present {
                Ok(())
            } else {
                Err(c.fail(key, format!("is required for kind {:?}", m.kind)))
            }
        };
        match m.kind {
            Kind::ActiveProbability => {
                section_needed(file.analysis.is_some(), "analysis")?;
            }
            Kind::SendBuffer | Kind::ReceiveBuffer => {
                section_needed(file.path.is_some(), "path")?;
            }
            Kind::Proxy => section_needed(file.proxy.is_some(), "proxy")?,
        }
        if let Some(a) = &file.analysis {
            for (i, [rtt, p]) in a.panels.iter().enumerate() {
                c.range(&format!("analysis.panels[{i}][0]"), *rtt, 1e-4, 60.0)?;
                c.range(&format!("analysis.panels[{i}][1]"), *p, 0.0, 1.0)?;
            }
            c.list("analysis.client_losses", &a.client_losses, 0.0, 1.0)?;
            c.list("analysis.server_rtts_s", &a.server_rtts_s, 1e-4, 60.0)?;
            c.list("analysis.timers_s", &a.timers_s, 1.0, 3600.0)?;
            c.range("analysis.hit_ratio", a.hit_ratio, 0.0, 1.0)?;
            c.range("analysis.document_bytes", a.document_bytes, 1.0, 1e9)?;
            c.range("analysis.segment_bytes", a.segment_bytes, 1.0, 65_535.0)?;
            c.range("analysis.max_window_bytes", a.max_window_bytes, 1.0, 1e10)?;
        }
        if let Some(p) = &file.path {
            c.range("path.bandwidth_mbps", p.bandwidth_mbps, 0.001, 1e5)?;
            c.range("path.delay_s", p.delay_s, 1e-4, 10.0)?;
            c.list("path.losses", &p.losses, 0.0, 0.5)?;
            c.range("path.horizon_s", p.horizon_s, 1.0, 1e5)?;
            c.range("path.quick_horizon_s", p.quick_horizon_s, 1.0, 1e5)?;
            c.range("path.peer_buffer_kb", p.peer_buffer_kb, 1.0, 1e7)?;
        }
        if let Some(p) = &file.proxy {
            c.range("proxy.clients", f64::from(p.clients), 1.0, 100_000.0)?;
            c.range("proxy.servers", f64::from(p.servers), 1.0, 100_000.0)?;
            c.range("proxy.hit_ratio", p.hit_ratio, 0.0, 1.0)?;
            c.range(
                "proxy.persistent_timeout_s",
                p.persistent_timeout_s,
                0.0,
                3600.0,
            )?;
            c.range(
                "proxy.max_connections",
                f64::from(p.max_connections),
                1.0,
                1e6,
            )?;
            c.list("proxy.total_buffers_mb", &p.total_buffers_mb, 0.01, 1e5)?;
            c.list(
                "proxy.quick_total_buffers_mb",
                &p.quick_total_buffers_mb,
                0.01,
                1e5,
            )?;
            for (key, splits) in [
                ("proxy.splits", &p.splits),
                ("proxy.quick_splits", &p.quick_splits),
            ] {
                for (i, [send, receive]) in splits.iter().enumerate() {
                    c.range(&format!("{key}[{i}][0]"), *send, 0.01, 100.0)?;
                    c.range(&format!("{key}[{i}][1]"), *receive, 0.01, 100.0)?;
                }
            }
            c.list("proxy.fixed_kb", &p.fixed_kb, 1.0, 1e6)?;
            c.list("proxy.quick_fixed_kb", &p.quick_fixed_kb, 1.0, 1e6)?;
            c.range("proxy.horizon_s", p.horizon_s, 1.0, 1e5)?;
            c.range("proxy.quick_horizon_s", p.quick_horizon_s, 1.0, 1e5)?;
            c.range("proxy.max_file_mb", p.max_file_mb, 0.001, 1e4)?;
            c.range(
                "proxy.idle_buffer_half_life_s",
                p.idle_buffer_half_life_s,
                0.0,
                1e6,
            )?;
        }
        Ok(SsbtScenario {
            name: m.name.clone(),
            figure: m.figure.clone(),
            kind: m.kind,
            seed: m.seed,
            analysis: file.analysis,
            path: file.path,
            proxy: file.proxy,
        })
    }
}
