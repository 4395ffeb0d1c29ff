//! Runs the plan: testbed with one client namespace per path (and one for
//! the step), the WAN emulator, nginx serving the objects, every variant of
//! `vantage proxy`, then the step run.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use vantage_live::proxy::{Proxy, ProxyConfig};
use vantage_sys::proc_net;
use vantage_testbed::server::nginx::{Nginx, NginxConfig, NginxError, StaticFile};
use vantage_testbed::topology::{self, Topology, TopologyError, TopologySpec, SERVER_ADDR};
use vantage_testbed::wan::{ClientPrefix, LinkConfig, LinkRule, RouterEmulator, WanConfig};

use super::client::{self, DownloadPlan, DownloadRecord};
use super::plan::{queue_packets, Mode, ResourcesLivePlan, VariantPlan};
use super::report::{self, ResourcesReport, RunRow, StepReport, WanSummary};
use super::sampler::{self, ProxySockets};
use crate::live_experiment::{join_lists, JoinFailure};

const BACKEND_PORT: u16 = 8081;
const FRONT_PORT: u16 = 8080;
const OBJECT: &str = "/object";
const STEP_OBJECT: &str = "/step-object";
/// The downloads start this long after the proxy is up.
const START_DELAY: Duration = Duration::from_millis(500);
/// The step run's buffer sampling period.
const STEP_SAMPLE: Duration = Duration::from_millis(100);
/// `SO_SNDBUF` of nginx's connections (to the proxy, over loopback).
const BACKEND_SNDBUF: u32 = 64 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("the live socket-buffer experiment needs root (network namespaces, iptables)")]
    NotRoot,
    #[error("`{0}` is not installed (scripts/test installs it)")]
    Missing(&'static str),
    #[error(transparent)]
    Topology(#[from] TopologyError),
    #[error(transparent)]
    Nginx(#[from] NginxError),
    #[error("WAN emulator: {0}")]
    Wan(String),
    #[error("proxy: {0}")]
    Proxy(String),
    #[error("namespace: {0}")]
    Netns(String),
    #[error("clients: {0}")]
    Clients(String),
    #[error("{0}")]
    Io(String),
}

/// Checks root and nginx; `Err` says what is missing.
pub fn preflight() -> Result<(), LiveError> {
    if !vantage_sys::privilege::is_root() {
        return Err(LiveError::NotRoot);
    }
    if vantage_sys::command::find_program("nginx").is_none() {
        return Err(LiveError::Missing("nginx"));
    }
    Ok(())
}

/// The tag of this process's testbed namespaces (`vtb-<tag>-…`).
pub fn tag() -> String {
    format!("rl{:x}", std::process::id())
}

/// Runs the whole experiment; logs go under `dir`.
pub fn run(
    plan: &ResourcesLivePlan,
    quick: bool,
    dir: &Path,
    progress: &dyn Fn(&str),
) -> Result<ResourcesReport, LiveError> {
    preflight()?;
    let started = Instant::now();
    let mode = plan.mode(quick);
    std::fs::create_dir_all(dir).map_err(|e| LiveError::Io(format!("{}: {e}", dir.display())))?;
    let mut topology = Topology::build(&TopologySpec {
        clients: mode.paths.len() + 1,
        tag: tag(),
    })?;
    let result = run_on(plan, &mode, dir, &topology, progress);
    let _ = topology.teardown();
    let mut report = result?;
    report.duration_s = started.elapsed().as_secs_f64();
    Ok(report)
}

fn link(rtt_ms: f64, loss_pct: f64, rate_mbit: f64) -> LinkConfig {
    LinkConfig {
        delay_ms: rtt_ms / 2.0,
        loss_pct,
        rate_mbit,
        queue_packets: queue_packets(rate_mbit),
        ..LinkConfig::default()
    }
}

fn wan_config(mode: &Mode) -> WanConfig {
    let mut links: Vec<LinkRule> = mode
        .paths
        .iter()
        .enumerate()
        .map(|(i, p)| {
            LinkRule::symmetric(
                ClientPrefix::new(topology::client_addr(i), 32).expect("a /32 prefix is valid"),
                link(p.rtt_ms, p.loss_pct, p.rate_mbit),
            )
        })
        .collect();
    let s = &mode.step;
    links.push(LinkRule::symmetric(
        ClientPrefix::new(topology::client_addr(mode.paths.len()), 32)
            .expect("a /32 prefix is valid"),
        link(s.rtt_ms, s.loss_before_pct, s.rate_mbit),
    ));
    let mut config = WanConfig::new(0, links);
    // Sleep to each release: at these packet rates a spin would take a core.
    config.spin_us = 0;
    config
}

/// The proxy's configuration for one variant (`pool` resolved). The
/// connection limit is twice the downloads, so `ssbt+conn`'s default
/// connection marks (95 %, 90 % of it) stay above the load.
/// `request_headers_ms` is as long as `idle_ms`, so that a request head
/// slowed by retransmissions on a lossy, congested path is not cut.
fn proxy_text(
    variant: &VariantPlan,
    pool: Option<u64>,
    plan: &ResourcesLivePlan,
    clients: u32,
) -> String {
    let front = SocketAddr::from((SERVER_ADDR, FRONT_PORT));
    let upstream = SocketAddr::from((Ipv4Addr::LOCALHOST, BACKEND_PORT));
    let mut text = format!(
        "listen = \"{front}\"\nupstreams = [\"{upstream}\"]\nworkers = 2\n\
         [timeouts]\nidle_ms = 300000\nrequest_headers_ms = 300000\nupstream_response_ms = 60000\n\
         [limits]\nmax_connections = {max}\nupstream_idle_connections = {max}\n\
         [utilization]\nsource = \"occupancy\"\nconcurrency = {max}\n\
         [resources]\nmode = \"{mode}\"\ninterval_ms = {interval}\n",
        max = 2 * clients + 64,
        mode = variant.mode,
        interval = plan.run.interval_ms,
    );
    if let (Some(send), Some(receive)) = (variant.send_bytes, variant.receive_bytes) {
        text.push_str(&format!("send_bytes = {send}\nreceive_bytes = {receive}\n"));
    }
    if let Some(pool) = pool {
        text.push_str(&format!(
            "pool_bytes = {pool}\nidle_buffer_half_life_ms = {}\n",
            plan.run.idle_buffer_half_life_ms
        ));
    }
    text
}

fn start_proxy(topology: &Topology, text: &str, dir: &Path) -> Result<Proxy, LiveError> {
    std::fs::write(dir.join("proxy.toml"), text)
        .map_err(|e| LiveError::Proxy(format!("write proxy.toml: {e}")))?;
    let config =
        ProxyConfig::from_toml(text, "proxy.toml").map_err(|e| LiveError::Proxy(e.to_string()))?;
    topology
        .server
        .run(move || Proxy::start(config))
        .map_err(|e| LiveError::Netns(e.to_string()))?
        .map_err(|e| LiveError::Proxy(e.to_string()))
}

fn sockets() -> ProxySockets {
    ProxySockets {
        front: SocketAddr::from((SERVER_ADDR, FRONT_PORT)),
        backend: SocketAddr::from((Ipv4Addr::LOCALHOST, BACKEND_PORT)),
    }
}

/// Starts every path's downloads in its namespace; joins them all.
fn download_all(
    topology: &Topology,
    plans: Vec<(usize, DownloadPlan)>,
    bytes: &Arc<AtomicU64>,
) -> Result<Vec<DownloadRecord>, LiveError> {
    let mut threads = Vec::new();
    for (namespace, plan) in plans {
        let bytes = bytes.clone();
        threads.push(
            topology.clients[namespace]
                .spawn(&format!("downloads-{namespace}"), move || {
                    client::run(plan, bytes)
                })
                .map_err(|e| LiveError::Clients(e.to_string()))?,
        );
    }
    join_lists(threads).map_err(|failure| match failure {
        JoinFailure::Work(e) => LiveError::Clients(e.to_string()),
        JoinFailure::Netns(e) => LiveError::Netns(e.to_string()),
        JoinFailure::Panicked => LiveError::Clients("a client thread panicked".into()),
    })
}

fn run_on(
    plan: &ResourcesLivePlan,
    mode: &Mode,
    dir: &Path,
    topology: &Topology,
    progress: &dyn Fn(&str),
) -> Result<ResourcesReport, LiveError> {
    let total: u32 = mode.paths.iter().map(|p| p.downloads).sum();
    let backend_config = NginxConfig {
        keepalive_timeout_s: 300,
        keepalive_requests: 1_000_000,
        worker_connections: (2 * total + 256).max(1024),
        // Autotuned, nginx's send buffers grow to `tcp_wmem`'s maximum
        // behind a proxy that reads more slowly than loopback delivers:
        // thousands of them would exhaust the host's `tcp_mem`.
        sndbuf: Some(BACKEND_SNDBUF),
        files: vec![
            StaticFile {
                path: OBJECT.into(),
                bytes: mode.object_bytes,
            },
            StaticFile {
                path: STEP_OBJECT.into(),
                bytes: mode.step.object_bytes,
            },
        ],
        ..NginxConfig::default()
    };
    let backend = Nginx::start(
        &topology.server,
        &backend_config,
        SocketAddr::from((Ipv4Addr::LOCALHOST, BACKEND_PORT)),
        &dir.join("backend"),
    )?;
    progress("starting the WAN emulator");
    let wan = RouterEmulator::start(&topology.router, wan_config(mode), plan.experiment.seed)
        .map_err(LiveError::Wan)?;

    let guard_bytes = sampler::host_guard_bytes();
    let mut rows: Vec<RunRow> = Vec::new();
    let mut autotune_peak: Option<u64> = None;
    for (index, variant) in plan.variant.iter().enumerate() {
        let pool = match (variant.pool_bytes, variant.pool_fraction_of_autotune) {
            (Some(p), _) => Some(p),
            (None, Some(f)) => {
                let peak = autotune_peak.ok_or_else(|| {
                    LiveError::Proxy(format!(
                        "{}: no autotune peak to take a fraction of",
                        variant.name
                    ))
                })?;
                Some(((peak as f64 * f) as u64).max(65536))
            }
            (None, None) => None,
        };
        progress(&format!(
            "[{}/{}] {} · {total} downloads for {:.0} s{}",
            index + 1,
            plan.variant.len(),
            variant.name,
            mode.ramp_s + mode.duration_s,
            pool.map_or(String::new(), |p| format!(
                " · pool {:.1} MiB",
                p as f64 / 1048576.0
            )),
        ));
        let run_dir = dir.join(format!("{index}-{}", slug(&variant.name)));
        std::fs::create_dir_all(&run_dir)
            .map_err(|e| LiveError::Io(format!("{}: {e}", run_dir.display())))?;
        fresh_tcp_metrics(topology, &run_dir)?;
        let counters_before = server_counters(topology)?;
        let proxy = start_proxy(topology, &proxy_text(variant, pool, plan, total), &run_dir)?;
        let first = Instant::now() + START_DELAY;
        let end = first + Duration::from_secs_f64(mode.ramp_s + mode.duration_s);
        let bytes = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let guard = Arc::new(AtomicBool::new(false));
        let sampler = {
            let stop = stop.clone();
            let bytes = bytes.clone();
            let guard = guard.clone();
            let period = Duration::from_millis(plan.run.sample_ms);
            std::thread::Builder::new()
                .name("memory".into())
                .spawn(move || {
                    sampler::sample_memory(
                        sockets(),
                        period,
                        first,
                        &stop,
                        &bytes,
                        guard_bytes,
                        &guard,
                    )
                })
                .map_err(|e| LiveError::Io(e.to_string()))?
        };
        let plans = mode
            .paths
            .iter()
            .enumerate()
            .map(|(i, p)| {
                (
                    i,
                    DownloadPlan {
                        path: i,
                        target: SocketAddr::from((SERVER_ADDR, FRONT_PORT)),
                        uri: OBJECT.into(),
                        downloads: p.downloads,
                        first_start: first,
                        ramp: Duration::from_secs_f64(mode.ramp_s),
                        windows: vec![(first, end)],
                        stall: Duration::from_secs_f64(plan.run.stall_s),
                        stop_early: guard.clone(),
                    },
                )
            })
            .collect();
        let downloads = download_all(topology, plans, &bytes);
        stop.store(true, Ordering::Relaxed);
        let sampled = sampler.join().unwrap_or_default();
        proxy.shutdown(Duration::from_millis(200));
        let downloads = downloads?;
        let stopped_early = guard.load(Ordering::Relaxed);
        let ran_s = if stopped_early {
            sampled.memory.last().map_or(0.0, |s| s.t_s)
        } else {
            (end - first).as_secs_f64()
        };
        let mut row = report::summarize(variant, pool, mode, &downloads, sampled, ran_s);
        row.stopped_at_host_guard = stopped_early;
        row.kernel_counters =
            report::kernel_counter_deltas(&counters_before, &server_counters(topology)?);
        progress(&format!(
            "    peak {:.1} MiB (proxy sockets), {:.1} Mbit/s, {} of {} failed",
            row.peak_proxy_bytes as f64 / 1048576.0,
            row.goodput_mbps,
            row.failed,
            row.started
        ));
        if variant.mode == "autotune" && autotune_peak.is_none() {
            autotune_peak = Some(row.peak_proxy_bytes);
        }
        rows.push(row);
    }

    progress("step responses");
    let step = run_step(plan, mode, dir, topology, &wan, progress)?;
    let wan_stats = wan.finish().map_err(LiveError::Wan)?;
    drop(backend);
    Ok(report::build(
        plan,
        mode,
        rows,
        step,
        WanSummary::from_stats(&wan_stats),
    ))
}

/// Empties the server namespace's TCP metrics cache before a variant,
/// keeping what it held in `tcp_metrics-before.txt` in the variant's
/// folder. The kernel caches each destination's RTT when a connection
/// ends and starts the next connection to it with an RTO of three times
/// that RTT, not capped at `TCP_RTO_MAX`; the client addresses are the
/// same in every variant, so without this a variant starts from the state
/// the ones before it left (docs/resources-live.md, 2026-11-26: a 62-s RTT
/// cached during `ssbt` gave the next variant's connections to that client
/// 187-s RTOs).
fn fresh_tcp_metrics(topology: &Topology, run_dir: &Path) -> Result<(), LiveError> {
    let shown = topology
        .server
        .ip(&["tcp_metrics", "show"])
        .map_err(|e| LiveError::Netns(format!("ip tcp_metrics show: {e}")))?;
    let file = run_dir.join("tcp_metrics-before.txt");
    std::fs::write(&file, &shown.stdout)
        .map_err(|e| LiveError::Io(format!("{}: {e}", file.display())))?;
    topology
        .server
        .ip(&["tcp_metrics", "flush", "all"])
        .map_err(|e| LiveError::Netns(format!("ip tcp_metrics flush all: {e}")))?;
    Ok(())
}

/// The server namespace's `/proc/net/netstat` and `/proc/net/snmp`.
fn server_counters(topology: &Topology) -> Result<proc_net::Counters, LiveError> {
    topology
        .server
        .run(proc_net::read_thread_namespace_counters)
        .map_err(|e| LiveError::Netns(format!("the server namespace's counters: {e}")))?
        .map_err(|e| LiveError::Io(e.to_string()))
}

fn slug(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect()
}

/// The step responses: downloads on the step path at `loss_before_pct`,
/// the loss changed to `loss_after_pct`, then idle, then reused.
fn run_step(
    plan: &ResourcesLivePlan,
    mode: &Mode,
    dir: &Path,
    topology: &Topology,
    wan: &RouterEmulator,
    progress: &dyn Fn(&str),
) -> Result<StepReport, LiveError> {
    let s = &mode.step;
    let namespace = mode.paths.len();
    let run_dir = dir.join("step");
    std::fs::create_dir_all(&run_dir)
        .map_err(|e| LiveError::Io(format!("{}: {e}", run_dir.display())))?;
    let variant = VariantPlan {
        name: "step".into(),
        mode: "ssbt".into(),
        send_bytes: None,
        receive_bytes: None,
        pool_bytes: Some(s.pool_bytes),
        pool_fraction_of_autotune: None,
    };
    set_loss(wan, namespace, s.loss_before_pct)?;
    let proxy = start_proxy(
        topology,
        &proxy_text(&variant, Some(s.pool_bytes), plan, s.downloads),
        &run_dir,
    )?;
    let first = Instant::now() + START_DELAY;
    let secs = Duration::from_secs_f64;
    let change = first + secs(s.before_s);
    let pause = change + secs(s.after_s);
    let resume = pause + secs(s.idle_s);
    let end = resume + secs(s.reuse_s);
    let stop = Arc::new(AtomicBool::new(false));
    let client_ip = IpAddr::V4(topology::client_addr(namespace));
    let sampler = {
        let stop = stop.clone();
        std::thread::Builder::new()
            .name("buffers".into())
            .spawn(move || sampler::sample_buffers(sockets(), client_ip, STEP_SAMPLE, first, &stop))
            .map_err(|e| LiveError::Io(e.to_string()))?
    };
    let changer = {
        let loss = wan.loss_control().clone();
        let after = s.loss_after_pct;
        std::thread::Builder::new()
            .name("loss-step".into())
            .spawn(move || {
                std::thread::sleep(change.saturating_duration_since(Instant::now()));
                loss.set_loss_pct(namespace, after)
            })
            .map_err(|e| LiveError::Io(e.to_string()))?
    };
    progress(&format!(
        "    loss {} % → {} % after {:.0} s, idle {:.0} s, reuse {:.0} s",
        s.loss_before_pct, s.loss_after_pct, s.before_s, s.idle_s, s.reuse_s
    ));
    let bytes = Arc::new(AtomicU64::new(0));
    let downloads = download_all(
        topology,
        vec![(
            namespace,
            DownloadPlan {
                path: namespace,
                target: SocketAddr::from((SERVER_ADDR, FRONT_PORT)),
                uri: STEP_OBJECT.into(),
                downloads: s.downloads,
                first_start: first,
                ramp: Duration::ZERO,
                windows: vec![(first, pause), (resume, end)],
                stall: Duration::from_secs_f64(plan.run.stall_s),
                stop_early: Arc::new(AtomicBool::new(false)),
            },
        )],
        &bytes,
    );
    stop.store(true, Ordering::Relaxed);
    let samples = sampler.join().unwrap_or_default();
    let changed = changer.join();
    proxy.shutdown(Duration::from_millis(200));
    // Back to the configured loss for whatever runs next.
    let _ = set_loss(wan, namespace, s.loss_before_pct);
    let downloads = downloads?;
    match changed {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(LiveError::Wan(e.to_string())),
        Err(_) => return Err(LiveError::Wan("the loss change panicked".into())),
    }
    let since = |at: Instant| (at - first).as_secs_f64();
    Ok(report::step_report(
        s,
        plan.run.interval_ms,
        since(change),
        since(pause),
        since(resume),
        &downloads,
        samples,
    ))
}

/// Changes the loss of client namespace `rule`'s link while the emulator
/// runs.
fn set_loss(wan: &RouterEmulator, rule: usize, loss_pct: f64) -> Result<(), LiveError> {
    wan.loss_control()
        .set_loss_pct(rule, loss_pct)
        .map_err(|e| LiveError::Wan(e.to_string()))
}
