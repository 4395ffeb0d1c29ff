//! Runs the scenario files: the analysis, the single-path runs and the
//! proxy worlds (in parallel, each with its own seed).

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::Serialize;
use vantage_core::resources::ReceiveTunerParams;
use vantage_core::traffic::surge::SurgeParams;
use vantage_core::Nanos;
use vantage_sim::proxy::single_path::{self, BufferSample};
use vantage_sim::proxy::world::{self, Scheme, WorldConfig, WorldResult};
use vantage_sim::proxy::FlowPath;

use super::analytic::{self, Inputs, Side};
use super::scenario::{Kind, SchemeName, SsbtScenario};
use crate::LabError;
use vantage_sim::syn::scenario::ScenarioError;

/// Figure 3: one point of one curve.
#[derive(Clone, Debug, Serialize)]
pub struct ActiveRow {
    pub figure: String,
    pub panel: usize,
    pub client_rtt_s: f64,
    pub server_loss: f64,
    pub client_loss: f64,
    pub server_rtt_s: f64,
    pub timer_s: f64,
    pub active_probability: f64,
}

/// Figures 6 and 7: one loss's series.
#[derive(Clone, Debug, Serialize)]
pub struct SeriesRow {
    pub figure: String,
    pub scenario: String,
    pub loss: f64,
    /// Mean assigned buffer over the second half of the run, bytes.
    pub mean_assigned_bytes: f64,
    /// Mean of the per-interval peak of stored data over intervals with
    /// stored data in the second half, bytes (Figure 7).
    pub mean_peak_stored_bytes: f64,
    pub mean_throughput_bytes_per_sec: f64,
    pub samples: Vec<BufferSample>,
}

/// Figures 9–11: one proxy run.
#[derive(Clone, Debug, Serialize)]
pub struct ProxyRow {
    pub figure: String,
    pub scenario: String,
    /// "fixed (16, 64)", "SSBT", "SSBT+Conn" or "Linux autotuning".
    pub scheme: String,
    pub send_kb: Option<f64>,
    pub receive_kb: Option<f64>,
    pub total_buffer_mb: f64,
    /// The send:receive split as "1:1".
    pub split: String,
    pub max_connections: u32,
    #[serde(flatten)]
    pub result: WorldResult,
}

/// Everything a run of the study produced.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SsbtRows {
    pub active_probability: Vec<ActiveRow>,
    pub buffers: Vec<SeriesRow>,
    pub proxy: Vec<ProxyRow>,
}

const MSS: u32 = 1460;

fn path_of(bandwidth_mbps: f64, delay_s: f64, loss: f64) -> FlowPath {
    let rtt = 2.0 * delay_s;
    FlowPath {
        rtt: Nanos::from_secs_f64(rtt),
        rto: Nanos::from_secs_f64((4.0 * rtt).max(0.2)),
        loss,
        bandwidth_bits_per_sec: bandwidth_mbps * 1e6,
        mss: MSS,
    }
}

fn split_label([send, receive]: [f64; 2]) -> String {
    format!("{send}:{receive}")
}

fn invalid(s: &SsbtScenario, problem: impl std::fmt::Display) -> LabError {
    LabError::Scenario(ScenarioError::Parse {
        origin: s.name.clone(),
        message: problem.to_string(),
    })
}

struct ProxyJob {
    origin: String,
    row: ProxyRow,
    config: WorldConfig,
    seed: u64,
}

fn proxy_jobs(s: &SsbtScenario, quick: bool) -> Vec<ProxyJob> {
    let Some(p) = &s.proxy else {
        return Vec::new();
    };
    let totals = if quick {
        &p.quick_total_buffers_mb
    } else {
        &p.total_buffers_mb
    };
    let splits = if quick { &p.quick_splits } else { &p.splits };
    let fixed = if quick {
        &p.quick_fixed_kb
    } else {
        &p.fixed_kb
    };
    let horizon = if quick {
        p.quick_horizon_s
    } else {
        p.horizon_s
    };
    let mut schemes: Vec<(String, Scheme, Option<f64>, Option<f64>)> = Vec::new();
    let estimated_label = "SSBT (estimated p, rtt)";
    for name in &p.schemes {
        match name {
            SchemeName::Fixed => {
                for &send in fixed {
                    for &receive in fixed {
                        schemes.push((
                            format!("fixed ({send}, {receive})"),
                            Scheme::Fixed {
                                send_bytes: (send * 1024.0) as u64,
                                receive_bytes: (receive * 1024.0) as u64,
                            },
                            Some(send),
                            Some(receive),
                        ));
                    }
                }
            }
            SchemeName::Ssbt => schemes.push(("SSBT".into(), Scheme::Ssbt, None, None)),
            SchemeName::SsbtEstimated => {
                schemes.push((estimated_label.into(), Scheme::Ssbt, None, None))
            }
            SchemeName::SsbtConn => schemes.push((
                "SSBT+Conn".into(),
                Scheme::SsbtWithConnectionManagement,
                None,
                None,
            )),
            SchemeName::Autotuning => schemes.push((
                "Linux autotuning".into(),
                Scheme::LinuxAutotuning,
                None,
                None,
            )),
        }
    }
    let mut jobs = Vec::new();
    for &total in totals {
        for &split in splits {
            for (label, scheme, send_kb, receive_kb) in &schemes {
                let config = WorldConfig {
                    clients: p.clients as usize,
                    servers: p.servers as usize,
                    hit_ratio: p.hit_ratio,
                    persistent_timeout: Nanos::from_secs_f64(p.persistent_timeout_s),
                    idle_buffer_half_life: (p.idle_buffer_half_life_s > 0.0)
                        .then(|| Nanos::from_secs_f64(p.idle_buffer_half_life_s)),
                    max_connections: p.max_connections as usize,
                    total_buffer_bytes: (total * 1024.0 * 1024.0) as u64,
                    send_fraction: split[0] / (split[0] + split[1]),
                    scheme: *scheme,
                    estimated_paths: label == estimated_label,
                    horizon: Nanos::from_secs_f64(horizon),
                    mss: MSS,
                    remote_buffer_bytes: 4 << 20,
                    interval: Nanos::from_secs(1),
                    surge: SurgeParams {
                        max_file_bytes: (p.max_file_mb * 1024.0 * 1024.0) as u64,
                        ..SurgeParams::default()
                    },
                };
                jobs.push(ProxyJob {
                    origin: s.name.clone(),
                    row: ProxyRow {
                        figure: s.figure.clone(),
                        scenario: s.name.clone(),
                        scheme: label.clone(),
                        send_kb: *send_kb,
                        receive_kb: *receive_kb,
                        total_buffer_mb: total,
                        split: split_label(split),
                        max_connections: p.max_connections,
                        result: WorldResult::default(),
                    },
                    config,
                    // Every scheme of a cell sees the same workload draws.
                    seed: s.seed,
                });
            }
        }
    }
    jobs
}

/// How many proxy runs the scenarios ask for.
pub fn proxy_runs(scenarios: &[SsbtScenario], quick: bool) -> usize {
    scenarios.iter().map(|s| proxy_jobs(s, quick).len()).sum()
}

fn series(figure: &str, scenario: &str, loss: f64, samples: Vec<BufferSample>) -> SeriesRow {
    let tail = &samples[samples.len() / 2..];
    let count = tail.len().max(1) as f64;
    let stored: Vec<f64> = tail
        .iter()
        .filter(|s| s.peak_stored_bytes > 0)
        .map(|s| s.peak_stored_bytes as f64)
        .collect();
    SeriesRow {
        figure: figure.to_string(),
        scenario: scenario.to_string(),
        loss,
        mean_assigned_bytes: tail.iter().map(|s| s.assigned_bytes as f64).sum::<f64>() / count,
        mean_peak_stored_bytes: stored.iter().sum::<f64>() / stored.len().max(1) as f64,
        mean_throughput_bytes_per_sec: tail.iter().map(|s| s.throughput_bytes_per_sec).sum::<f64>()
            / count,
        samples,
    }
}

/// Runs every scenario; `progress` is called after each proxy run.
pub fn run(
    scenarios: &[SsbtScenario],
    quick: bool,
    progress: &(dyn Fn() + Sync),
) -> Result<SsbtRows, LabError> {
    let mut rows = SsbtRows::default();
    let mut jobs = Vec::new();
    for s in scenarios {
        match s.kind {
            Kind::ActiveProbability => {
                let Some(a) = &s.analysis else { continue };
                let inputs = Inputs {
                    hit_ratio: a.hit_ratio,
                    document_bytes: a.document_bytes,
                    segment_bytes: a.segment_bytes,
                    max_window_bytes: a.max_window_bytes,
                };
                for (panel, &[client_rtt_s, server_loss]) in a.panels.iter().enumerate() {
                    for &client_loss in &a.client_losses {
                        for &server_rtt_s in &a.server_rtts_s {
                            for &timer_s in &a.timers_s {
                                let u = analytic::active_probability(
                                    Side {
                                        rtt_s: client_rtt_s,
                                        loss: client_loss,
                                    },
                                    Side {
                                        rtt_s: server_rtt_s,
                                        loss: server_loss,
                                    },
                                    &inputs,
                                    timer_s,
                                )
                                .map_err(|e| invalid(s, e))?;
                                rows.active_probability.push(ActiveRow {
                                    figure: s.figure.clone(),
                                    panel,
                                    client_rtt_s,
                                    server_loss,
                                    client_loss,
                                    server_rtt_s,
                                    timer_s,
                                    active_probability: u,
                                });
                            }
                        }
                    }
                }
            }
            Kind::SendBuffer | Kind::ReceiveBuffer => {
                let Some(p) = &s.path else { continue };
                let horizon = Nanos::from_secs_f64(if quick {
                    p.quick_horizon_s
                } else {
                    p.horizon_s
                });
                let peer = (p.peer_buffer_kb * 1024.0) as u64;
                for (i, &loss) in p.losses.iter().enumerate() {
                    let path = path_of(p.bandwidth_mbps, p.delay_s, loss);
                    let mut rng = ChaCha8Rng::seed_from_u64(s.seed.wrapping_add(i as u64));
                    let samples = if s.kind == Kind::SendBuffer {
                        single_path::send_buffer_run(
                            path,
                            peer,
                            horizon,
                            Nanos::from_secs(1),
                            &mut rng,
                        )
                    } else {
                        single_path::receive_buffer_run(
                            path,
                            peer,
                            64 * 1024,
                            ReceiveTunerParams::default(),
                            horizon,
                            Nanos::from_secs(1),
                            &mut rng,
                        )
                    }
                    .map_err(|e| invalid(s, e))?;
                    rows.buffers.push(series(&s.figure, &s.name, loss, samples));
                }
            }
            Kind::Proxy => jobs.extend(proxy_jobs(s, quick)),
        }
    }
    let results: Vec<Result<ProxyRow, LabError>> = jobs
        .into_par_iter()
        .map(|job| {
            let mut rng = ChaCha8Rng::seed_from_u64(job.seed);
            let result = world::run(&job.config, &mut rng).map_err(|e| {
                LabError::Scenario(ScenarioError::Parse {
                    origin: job.origin.clone(),
                    message: e.to_string(),
                })
            });
            progress();
            Ok(ProxyRow {
                result: result?,
                ..job.row
            })
        })
        .collect();
    for r in results {
        rows.proxy.push(r?);
    }
    Ok(rows)
}
