//! Runs the plan: testbed, capped backend, capacity, every variant, the
//! simulator on the same workload.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Instant;

use vantage_live::proxy::{Proxy, ProxyConfig};
use vantage_testbed::cgroup::{CgroupError, CpuCap};
use vantage_testbed::server::haproxy::{Haproxy, HaproxyConfig, HaproxyError};
use vantage_testbed::server::nginx::{Nginx, NginxConfig, NginxError, NginxFront, StaticFile};
use vantage_testbed::topology::{Topology, TopologyError, TopologySpec, SERVER_ADDR};

use super::client::{self, ClientPlan, ClientResult};
use super::plan::{SbacLivePlan, UtilizationInput, VariantKind, VariantPlan};
use super::report::{self, LiveReport, RunSummary};

const BACKEND_PORT: u16 = 8081;
const FRONT_PORT: u16 = 8080;
const PAGE: &str = "/page";
const COOKIE: &str = "vantage_session";

#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("the live SBAC experiment needs root (network namespaces, cgroups)")]
    NotRoot,
    #[error("`{0}` is not installed (scripts/test installs it)")]
    Missing(&'static str),
    #[error(transparent)]
    Topology(#[from] TopologyError),
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
    #[error(transparent)]
    Nginx(#[from] NginxError),
    #[error(transparent)]
    Haproxy(#[from] HaproxyError),
    #[error("proxy: {0}")]
    Proxy(String),
    #[error("namespace: {0}")]
    Netns(String),
    #[error("clients: {0}")]
    Clients(String),
    #[error("capacity measurement: {0}")]
    Capacity(String),
    #[error("simulator: {0}")]
    Simulator(String),
}

/// Checks root and the programs the plan needs; `Err` says what is missing.
pub fn preflight(plan: &SbacLivePlan) -> Result<(), LiveError> {
    if !vantage_sys::privilege::is_root() {
        return Err(LiveError::NotRoot);
    }
    if vantage_sys::command::find_program("nginx").is_none() {
        return Err(LiveError::Missing("nginx"));
    }
    if plan
        .variant
        .iter()
        .any(|v| matches!(v.kind, VariantKind::Haproxy { .. }))
        && vantage_sys::command::find_program("haproxy").is_none()
    {
        return Err(LiveError::Missing("haproxy"));
    }
    Ok(())
}

/// Whatever admits sessions in front of the backend; dropped = stopped.
enum Front {
    Direct,
    Nginx { _process: Nginx },
    Haproxy { _process: Haproxy },
    Proxy { _running: Box<Proxy> },
}

fn start_front(
    topology: &Topology,
    variant: &VariantPlan,
    plan: &SbacLivePlan,
    capacity_rps: f64,
    backend_pids: &[u32],
    backend_cap: &CpuCap,
    dir: &Path,
) -> Result<(Front, SocketAddr), LiveError> {
    let front_addr = SocketAddr::from((SERVER_ADDR, FRONT_PORT));
    let upstream = SocketAddr::from((Ipv4Addr::LOCALHOST, BACKEND_PORT));
    match &variant.kind {
        VariantKind::None => Ok((Front::Direct, SocketAddr::from((SERVER_ADDR, BACKEND_PORT)))),
        VariantKind::Nginx {
            limit_conn,
            limit_req_pct,
            limit_req_burst,
        } => {
            let config = NginxConfig {
                keepalive_timeout_s: 0,
                front: Some(NginxFront {
                    upstream,
                    limit_conn: *limit_conn,
                    limit_req_per_s: limit_req_pct
                        .map(|p| ((p / 100.0 * capacity_rps).round() as u32).max(1)),
                    limit_req_burst: *limit_req_burst,
                    more_upstreams: Vec::new(),
                    upstream_keepalive: 0,
                }),
                ..NginxConfig::default()
            };
            let nginx = Nginx::start(&topology.server, &config, front_addr, &dir.join("front"))?;
            Ok((Front::Nginx { _process: nginx }, front_addr))
        }
        VariantKind::Haproxy {
            maxconn,
            queue_timeout_ms,
        } => {
            let config = HaproxyConfig {
                server_maxconn: *maxconn,
                queue_timeout_ms: *queue_timeout_ms,
                server_timeout_ms: 30_000,
            };
            let haproxy = Haproxy::start(&topology.server, &config, front_addr, upstream, dir)?;
            Ok((Front::Haproxy { _process: haproxy }, front_addr))
        }
        VariantKind::Sbac { strategy } => {
            let pids: Vec<String> = backend_pids.iter().map(|p| p.to_string()).collect();
            let utilization = match plan.sbac.utilization {
                UtilizationInput::Occupancy => format!(
                    "source = \"occupancy\"\nconcurrency = {}",
                    plan.sbac.concurrency
                ),
                UtilizationInput::Cgroup => match backend_cap.usage_cgroup() {
                    Some(cgroup) => format!(
                        "source = \"cgroup\"\ncgroup = \"{}\"\ncores = {}",
                        cgroup.display(),
                        backend_cap.cores()
                    ),
                    None => return Err(LiveError::Proxy(
                        "sbac.utilization = \"cgroup\" needs a cgroup v2 hierarchy (cpu.stat's \
                             usage_usec), unified or hybrid; this host has none: use \"pids\" or \
                             \"occupancy\""
                            .into(),
                    )),
                },
                UtilizationInput::Pids => format!(
                    "source = \"pids\"\npids = [{}]\ncores = {}",
                    pids.join(", "),
                    plan.backend.cpu_cores
                ),
            };
            let text = format!(
                "listen = \"{front_addr}\"\nupstreams = [\"{upstream}\"]\n\
                 [utilization]\n{utilization}\n\
                 [sbac]\nstrategy = \"{strategy}\"\ninterval_s = {}\ntarget_utilization = {}\n\
                 session_timeout_s = {}\ncookie = \"{COOKIE}\"\nkeys = [\"{}\"]\n",
                plan.sbac.interval_s,
                plan.sbac.target_utilization,
                plan.sbac.session_timeout_s,
                key(plan.experiment.seed),
            );
            std::fs::write(dir.join("proxy.toml"), &text)
                .map_err(|e| LiveError::Proxy(format!("write proxy.toml: {e}")))?;
            let config = ProxyConfig::from_toml(&text, "proxy.toml")
                .map_err(|e| LiveError::Proxy(e.to_string()))?;
            let proxy = topology
                .server
                .run(move || Proxy::start(config))
                .map_err(|e| LiveError::Netns(e.to_string()))?
                .map_err(|e| LiveError::Proxy(e.to_string()))?;
            Ok((
                Front::Proxy {
                    _running: Box::new(proxy),
                },
                front_addr,
            ))
        }
    }
}

/// A 32-byte cookie key from the seed (the experiment's own, not a secret).
fn key(seed: u64) -> String {
    (0..32u64)
        .map(|i| {
            format!(
                "{:02x}",
                (seed.wrapping_mul(31).wrapping_add(i * 97) & 0xff) as u8
            )
        })
        .collect()
}

/// Runs the whole experiment; results and logs go under `dir`.
pub fn run(
    plan: &SbacLivePlan,
    quick: bool,
    dir: &Path,
    progress: &dyn Fn(&str),
) -> Result<LiveReport, LiveError> {
    preflight(plan)?;
    let started = Instant::now();
    let mode = plan.mode(quick);
    std::fs::create_dir_all(dir)
        .map_err(|e| LiveError::Clients(format!("{}: {e}", dir.display())))?;
    let tag = format!("sb{:x}", std::process::id());
    let mut topology = Topology::build(&TopologySpec {
        clients: 1,
        tag: tag.clone(),
    })?;
    let result = run_on(plan, quick, dir, &topology, &tag, progress);
    let _ = topology.teardown();
    let mut report = result?;
    report.duration_s = started.elapsed().as_secs_f64();
    report.mode = mode;
    Ok(report)
}

fn run_on(
    plan: &SbacLivePlan,
    quick: bool,
    dir: &Path,
    topology: &Topology,
    tag: &str,
    progress: &dyn Fn(&str),
) -> Result<LiveReport, LiveError> {
    let mode = plan.mode(quick);
    // The backend: nginx serving one page, its CPU capped.
    let backend_config = NginxConfig {
        keepalive_timeout_s: 0,
        files: vec![StaticFile {
            path: PAGE.into(),
            bytes: plan.backend.page_bytes,
        }],
        ..NginxConfig::default()
    };
    let backend_listen = SocketAddr::from((Ipv4Addr::UNSPECIFIED, BACKEND_PORT));
    let backend = Nginx::start(
        &topology.server,
        &backend_config,
        backend_listen,
        &dir.join("backend"),
    )?;
    let cap = CpuCap::create(&format!("vantage-{tag}"), plan.backend.cpu_cores)?;
    cap.add_with_children(backend.pid())?;
    let mut backend_pids = vec![backend.pid()];
    backend_pids.extend(vantage_testbed::cgroup::children(backend.pid()));

    // Capacity: closed-loop clients straight to the capped backend.
    progress("measuring the backend's capacity");
    let target = SocketAddr::from((SERVER_ADDR, BACKEND_PORT));
    let connections = plan.backend.capacity_connections as usize;
    let seconds = mode.capacity_s;
    let cpu_before = cap.usage_us()?;
    let (capacity_rps, capacity_failures) = topology.clients[0]
        .run(move || client::saturate(target, PAGE, connections, seconds))
        .map_err(|e| LiveError::Netns(e.to_string()))?
        .map_err(|e| LiveError::Capacity(e.to_string()))?;
    let capacity_cpu = (cap.usage_us()? - cpu_before) as f64 / 1e6 / seconds / cap.cores();
    if capacity_rps.is_nan() || capacity_rps <= 1.0 {
        return Err(LiveError::Capacity(format!(
            "{capacity_rps:.2} replies/s ({capacity_failures} failures): the backend does not answer"
        )));
    }
    progress(&format!(
        "capacity {capacity_rps:.1} requests/s at {:.0} % of the CPU cap",
        capacity_cpu * 100.0
    ));

    let mut runs = Vec::new();
    let total = mode.patterns.len() * mode.session_length_means.len() * plan.variant.len();
    let mut done = 0;
    for pattern in &mode.patterns {
        for &mean in &mode.session_length_means {
            for variant in &plan.variant {
                done += 1;
                progress(&format!(
                    "[{done}/{total}] {} · mean length {mean} · {}",
                    pattern.name, variant.name
                ));
                let run_dir: PathBuf =
                    dir.join(format!("{}-m{mean}-{}", pattern.name, variant.name));
                std::fs::create_dir_all(&run_dir)
                    .map_err(|e| LiveError::Clients(format!("{}: {e}", run_dir.display())))?;
                let (front, target) = start_front(
                    topology,
                    variant,
                    plan,
                    capacity_rps,
                    &backend_pids,
                    &cap,
                    &run_dir,
                )?;
                let schedule = mode.schedule(pattern, mean, capacity_rps);
                let client_plan = ClientPlan {
                    target,
                    uri: PAGE.into(),
                    warmup: schedule.warmup,
                    segments: schedule.segments,
                    session_length_mean: mean,
                    think_time_s: mode.think_time_s,
                    timeout_s: plan.clients.timeout_s,
                    retries: plan.clients.retries,
                    drain_s: mode.drain_s,
                    seed: plan.experiment.seed ^ (done as u64),
                    max_sessions: plan.clients.max_sessions,
                };
                let cpu_before = cap.usage_us()?;
                let result: ClientResult = topology.clients[0]
                    .run(move || client::run(client_plan))
                    .map_err(|e| LiveError::Netns(e.to_string()))?
                    .map_err(|e| LiveError::Clients(e.to_string()))?;
                let cpu_s = (cap.usage_us()? - cpu_before) as f64 / 1e6;
                drop(front);
                runs.push(report::summarize(
                    pattern,
                    mean,
                    variant,
                    capacity_rps,
                    cpu_s / cap.cores(),
                    &result,
                ));
            }
        }
    }
    drop(backend);
    drop(cap);
    let simulated = simulate(plan, &mode, capacity_rps)?;
    Ok(report::build(
        plan,
        quick,
        capacity_rps,
        capacity_cpu,
        capacity_failures,
        runs,
        simulated,
    ))
}

/// The session simulator on the same workload: the same patterns, means,
/// think time, time-out and retries, capacity = the measured one.
fn simulate(
    plan: &SbacLivePlan,
    mode: &super::plan::Mode,
    capacity_rps: f64,
) -> Result<Vec<RunSummary>, LiveError> {
    use crate::studies::sbac::run as sim_run;
    use vantage_sim::syn::Effort;
    let mut rows = Vec::new();
    for pattern in &mode.patterns {
        let scenario = simulator_scenario(plan, mode, pattern, capacity_rps)?;
        for row in sim_run(&[scenario], Effort { quick: true }, &|| {}) {
            rows.push(report::from_simulator(&row, pattern.loads_pct.len()));
        }
    }
    Ok(rows)
}

/// The simulator's scenario for one pattern of the plan.
fn simulator_scenario(
    plan: &SbacLivePlan,
    mode: &super::plan::Mode,
    pattern: &super::plan::PatternPlan,
    capacity_rps: f64,
) -> Result<crate::studies::sbac::SbacScenario, LiveError> {
    use crate::studies::sbac::SbacScenario;
    {
        // The simulator runs the whole schedule, the warm-up included: it
        // takes the warm-up from the same rule (`studies::sbac::warmup_s`)
        // and its arrivals from the same Eq. 1; its server learns that a
        // session ended after the proxy's idle timeout T, as the proxy does.
        let means: Vec<String> = mode
            .session_length_means
            .iter()
            .map(|m| format!("{m:?}"))
            .collect();
        let loads: Vec<String> = pattern.loads_pct.iter().map(|l| format!("{l:?}")).collect();
        let text = format!(
            "[scenario]\nstudy = \"sbac\"\nname = \"live-{name}\"\nfigure = \"live\"\n\
             title = \"live workload\"\nkind = \"pattern\"\nrepetitions = 3\nquick_repetitions = 3\n\
             quick_warmup_lives = {warmup:?}\n\
             [workload]\nsession_length_means = [{means}]\n\
             [clients]\nthink_time_s = [{think:?}]\ntimeout_s = {timeout:?}\nretries = [{retries}]\n\
             [server]\ncapacity_rps = {capacity:?}\n\
             [model]\nsession_end_seen_after_s = {session_timeout}\n\
             [admission]\nstrategies = [\"none\", \"stable\", \"responsive\", \"hybrid\", \"predictive\"]\n\
             threshold = {threshold:?}\ninterval_s = {interval:?}\n\
             [[pattern]]\nname = \"{name}\"\nloads_pct = [{loads}]\nsegment_s = {segment:?}\n\
             quick_segment_s = {segment:?}\n",
            name = pattern.name,
            warmup = mode.warmup_lives,
            means = means.join(", "),
            think = mode.think_time_s.max(0.001),
            timeout = plan.clients.timeout_s,
            retries = plan.clients.retries,
            capacity = capacity_rps.max(1.0),
            session_timeout = plan.sbac.session_timeout_s,
            threshold = plan.sbac.target_utilization,
            interval = plan.sbac.interval_s,
            loads = loads.join(", "),
            segment = pattern.segment_s,
        );
        SbacScenario::from_toml(&text, "sbac-live (simulator)")
            .map_err(|e| LiveError::Simulator(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::client::Segment;
    use super::*;
    use vantage_sim::syn::Effort;

    /// The live clients and the simulator offer the same sessions per
    /// second over the same stretches of time, from the same start: the
    /// simulator's whole load pattern (warm-up included) is the live
    /// schedule.
    #[test]
    fn the_simulator_runs_the_live_schedule() {
        let text = include_str!("../../../../scenarios/proxy/sbac-live-busy-day-l50.toml");
        let mut plan = SbacLivePlan::from_toml(text, "busy.toml").unwrap();
        let capacity = 412.7;
        for (quick, warmup_lives) in [(false, 2.0), (false, 0.0), (true, 0.0), (true, 1.0)] {
            plan.clients.warmup_lives = warmup_lives;
            plan.quick.warmup_lives = warmup_lives;
            let mode = plan.mode(quick);
            for pattern in &mode.patterns {
                for &mean in &mode.session_length_means {
                    let schedule = mode.schedule(pattern, mean, capacity);
                    let live: Vec<Segment> = std::iter::once(schedule.warmup)
                        .chain(schedule.segments)
                        .collect();
                    let mut scenario = simulator_scenario(&plan, &mode, pattern, capacity).unwrap();
                    scenario.session_length_means = vec![mean];
                    let jobs = scenario.jobs(Effort { quick: true });
                    let sim: Vec<(f64, f64)> = jobs[0]
                        .config
                        .pattern
                        .segments
                        .iter()
                        .filter(|s| s.duration.0 > 0)
                        .map(|s| (s.duration.as_secs_f64(), s.load * capacity / mean))
                        .collect();
                    let live: Vec<(f64, f64)> = live
                        .iter()
                        .filter(|s| s.seconds > 0.0)
                        .map(|s| (s.seconds, s.sessions_per_s))
                        .collect();
                    assert_eq!(
                        sim.len(),
                        live.len(),
                        "quick {quick}: sim {sim:?}, live {live:?}"
                    );
                    for (a, b) in sim.iter().zip(&live) {
                        assert!(
                            (a.0 - b.0).abs() < 1e-6 && (a.1 - b.1).abs() < 1e-6,
                            "quick {quick}: sim {sim:?}, live {live:?}"
                        );
                    }
                }
            }
        }
    }

    /// The simulated server learns that a session ended when the proxy
    /// does: after the proxy's idle timeout T.
    #[test]
    fn the_simulator_learns_session_ends_after_the_proxy_timeout() {
        let text = include_str!("../../../../scenarios/proxy/sbac-live-busy-day-l50.toml");
        let mut plan = SbacLivePlan::from_toml(text, "busy.toml").unwrap();
        assert_eq!(
            plan.sbac.session_timeout_s,
            vantage_live::proxy::config::DEFAULT_SESSION_TIMEOUT_S
        );
        plan.sbac.session_timeout_s = 42;
        let mode = plan.mode(true);
        let scenario = simulator_scenario(&plan, &mode, &mode.patterns[0], 412.7).unwrap();
        let jobs = scenario.jobs(Effort { quick: true });
        assert!(!jobs.is_empty());
        for job in &jobs {
            assert_eq!(
                job.config.reading.session_end_seen_after,
                Some(vantage_core::Nanos::from_secs(42))
            );
        }
    }
}
