//! Runs the plan: one client namespace per path and one for the far
//! origin, the WAN emulator, the two nginx origins with the same SURGE
//! documents, then for every user count every scheme's proxy in the
//! server namespace under the same users (same seeds).

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use vantage_core::traffic::surge::{Surge, SurgeParams};
use vantage_live::metrics::Format;
use vantage_live::proxy::{Proxy, ProxyConfig};
use vantage_testbed::cgroup::{CgroupError, TcpMemoryCap};
use vantage_testbed::server::nginx::{Nginx, NginxConfig, NginxError, NginxFront, StaticFile};
use vantage_testbed::server::squid::{Squid, SquidConfig, SquidError};
use vantage_testbed::topology::{self, Topology, TopologyError, TopologySpec, SERVER_ADDR};
use vantage_testbed::wan::{ClientPrefix, LinkConfig, LinkRule, RouterEmulator, WanConfig};

use super::plan::{Mode, SchemePlan, ThesisPlan, MAX_TOTAL_DOCUMENT_BYTES};
use super::report::{self, ProxyCounters, RunRow, ThesisReport, WanSummary};
use super::sockets::{self, ProxyPorts};
use super::users::{self, RequestRecord, UsersPlan};
use crate::live_experiment::{join_lists, JoinFailure};

const FRONT_PORT: u16 = 8080;
const ORIGIN_PORT: u16 = 8081;
/// The users start this long after the proxy is up.
const START_DELAY: Duration = Duration::from_millis(500);
/// The origins flush their access logs this often (nginx's `flush=1s`).
const ACCESS_LOG_FLUSH: Duration = Duration::from_millis(1100);
/// Idle connections each proxy keeps to the origins (vantage: per origin).
const UPSTREAM_IDLE: u32 = 64;

#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("the thesis experiment needs root (network namespaces, iptables)")]
    NotRoot,
    #[error("`{0}` is not installed (scripts/test installs it)")]
    Missing(&'static str),
    #[error(transparent)]
    Topology(#[from] TopologyError),
    #[error(transparent)]
    Nginx(#[from] NginxError),
    #[error(transparent)]
    Squid(#[from] SquidError),
    #[error("WAN emulator: {0}")]
    Wan(String),
    #[error("proxy: {0}")]
    Proxy(String),
    #[error("namespace: {0}")]
    Netns(String),
    #[error("users: {0}")]
    Users(String),
    #[error("documents: {0}")]
    Documents(String),
    #[error("kernel TCP memory limit: {0}")]
    Cgroup(#[from] CgroupError),
    #[error("{0}")]
    Io(String),
}

/// Checks root, nginx, squid and ss; `Err` says what is missing.
pub fn preflight() -> Result<(), LiveError> {
    if !vantage_sys::privilege::is_root() {
        return Err(LiveError::NotRoot);
    }
    for program in ["nginx", "squid", "ss"] {
        if vantage_sys::command::find_program(program).is_none() {
            return Err(LiveError::Missing(program));
        }
    }
    Ok(())
}

/// The tag of this process's testbed namespaces (`vtb-<tag>-…`).
pub fn tag() -> String {
    format!("th{:x}", std::process::id())
}

/// Runs the whole experiment; logs go under `dir`, the origins' documents
/// under a temporary directory removed at the end.
pub fn run(
    plan: &ThesisPlan,
    quick: bool,
    dir: &Path,
    progress: &dyn Fn(&str),
) -> Result<ThesisReport, LiveError> {
    preflight()?;
    let started = Instant::now();
    let mode = plan.mode(quick);
    std::fs::create_dir_all(dir).map_err(|e| LiveError::Io(format!("{}: {e}", dir.display())))?;
    let documents_dir =
        std::env::temp_dir().join(format!("vantage-thesis-origins-{}", std::process::id()));
    if plan.run.proxy_tcp_memory_bytes.is_some() {
        TcpMemoryCap::remove_stale(stale_memory_cgroup)?;
    }
    let mut topology = Topology::build(&TopologySpec {
        clients: plan.path.len() + 1,
        tag: tag(),
    })?;
    let result = run_on(plan, &mode, dir, &documents_dir, &topology, progress);
    let _ = topology.teardown();
    let _ = std::fs::remove_dir_all(&documents_dir);
    let mut report = result?;
    report.duration_s = started.elapsed().as_secs_f64();
    Ok(report)
}

/// Bottleneck queue: 200 ms at the link's rate in 1500-byte packets,
/// within [16, 1000].
fn queue_packets(rate_mbit: f64) -> u32 {
    ((rate_mbit * 1e6 * 0.2 / (1500.0 * 8.0)).round() as u32).clamp(16, 1000)
}

fn link_rule(namespace: usize, rtt_ms: f64, loss_pct: f64, rate_mbit: f64) -> LinkRule {
    LinkRule::symmetric(
        ClientPrefix::new(topology::client_addr(namespace), 32).expect("a /32 prefix is valid"),
        LinkConfig {
            delay_ms: rtt_ms / 2.0,
            loss_pct,
            rate_mbit,
            queue_packets: queue_packets(rate_mbit),
            ..LinkConfig::default()
        },
    )
}

fn wan_config(plan: &ThesisPlan) -> WanConfig {
    let mut links: Vec<LinkRule> = plan
        .path
        .iter()
        .enumerate()
        .map(|(i, p)| link_rule(i, p.rtt_ms, p.loss_pct, p.rate_mbit))
        .collect();
    let o = &plan.far_origin;
    links.push(link_rule(
        plan.path.len(),
        o.rtt_ms,
        o.loss_pct,
        o.rate_mbit,
    ));
    let mut config = WanConfig::new(0, links);
    // Sleep to each release: a spin would take a core of two.
    config.spin_us = 0;
    config
}

/// The documents' sizes: SURGE's file sizes, capped.
pub fn document_sizes(plan: &ThesisPlan) -> Result<Vec<u64>, LiveError> {
    let surge = surge(plan)?;
    let mut rng = ChaCha8Rng::seed_from_u64(plan.experiment.seed);
    let sizes: Vec<u64> = (0..plan.workload.documents)
        .map(|_| surge.file_bytes(&mut rng))
        .collect();
    let total: u64 = sizes.iter().sum();
    if total > MAX_TOTAL_DOCUMENT_BYTES {
        return Err(LiveError::Documents(format!(
            "the drawn documents add up to {total} bytes, more than {MAX_TOTAL_DOCUMENT_BYTES}: \
             lower workload.documents or workload.max_document_bytes"
        )));
    }
    Ok(sizes)
}

fn surge(plan: &ThesisPlan) -> Result<Surge, LiveError> {
    Surge::new(SurgeParams {
        max_file_bytes: plan.workload.max_document_bytes,
        ..SurgeParams::default()
    })
    .map_err(|e| LiveError::Documents(e.to_string()))
}

fn origin_config(files: Vec<StaticFile>) -> NginxConfig {
    NginxConfig {
        keepalive_timeout_s: 60,
        keepalive_requests: 1_000_000,
        worker_connections: 4096,
        files,
        ..NginxConfig::default()
    }
}

fn far_origin(plan: &ThesisPlan) -> SocketAddr {
    SocketAddr::from((topology::client_addr(plan.path.len()), ORIGIN_PORT))
}

fn near_origin() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, ORIGIN_PORT))
}

fn front() -> SocketAddr {
    SocketAddr::from((SERVER_ADDR, FRONT_PORT))
}

/// The proxy of one run.
enum RunningProxy {
    Vantage(Box<Proxy>),
    Squid(Squid),
    Nginx(Nginx),
}

impl RunningProxy {
    /// Stops it; vantage proxy's own counters and buffer histograms first.
    fn stop(self) -> Option<ProxyCounters> {
        match self {
            RunningProxy::Vantage(proxy) => {
                let metrics = proxy.metrics();
                let text = proxy.metrics_text(Format::Text);
                let counters = ProxyCounters {
                    refused: metrics.connections_refused.get(),
                    evicted: metrics.connections_evicted.get(),
                    evictions_passed_on: metrics.evictions_passed_on.get(),
                    send_timeouts: metrics.send_timeouts.get(),
                    mean_send_buffer_bytes: histogram_mean(
                        &text,
                        "vantage_proxy_send_buffer_bytes",
                    ),
                    mean_receive_buffer_bytes: histogram_mean(
                        &text,
                        "vantage_proxy_receive_buffer_bytes",
                    ),
                };
                proxy.shutdown(Duration::from_millis(200));
                Some(counters)
            }
            RunningProxy::Squid(mut squid) => {
                squid.stop();
                None
            }
            RunningProxy::Nginx(mut nginx) => {
                nginx.stop();
                None
            }
        }
    }
}

/// `NAME_sum / NAME_count` of a histogram in the Prometheus text format.
pub fn histogram_mean(text: &str, name: &str) -> Option<f64> {
    let value = |suffix: &str| {
        let key = format!("{name}_{suffix}");
        text.lines()
            .filter_map(|l| l.split_once(' '))
            .find(|(k, _)| *k == key)
            .and_then(|(_, v)| v.trim().parse::<f64>().ok())
    };
    let count = value("count")?;
    (count > 0.0).then(|| value("sum").map(|sum| sum / count))?
}

/// vantage proxy's configuration for one scheme.
fn vantage_text(scheme: &SchemePlan, plan: &ThesisPlan) -> String {
    let l = &plan.limits;
    let timer_ms = u64::from(l.persistent_timer_s) * 1000;
    let mut text = format!(
        "listen = \"{front}\"\nupstreams = [\"{far}\", \"{near}\"]\nworkers = 1\n\
         [timeouts]\nidle_ms = {timer_ms}\nrequest_headers_ms = {timer_ms}\nupstream_response_ms = 60000\n\
         [limits]\nmax_connections = {max}\nupstream_idle_connections = {UPSTREAM_IDLE}\n\
         [utilization]\nsource = \"occupancy\"\nconcurrency = {max}\n\
         [resources]\nmode = \"{mode}\"\ninterval_ms = {interval}\n",
        front = front(),
        far = far_origin(plan),
        near = near_origin(),
        max = l.max_connections,
        mode = scheme.mode,
        interval = plan.run.interval_ms,
    );
    if let (Some(send), Some(receive)) = (scheme.send_bytes, scheme.receive_bytes) {
        text.push_str(&format!("send_bytes = {send}\nreceive_bytes = {receive}\n"));
    }
    if scheme.mode.starts_with("ssbt") {
        text.push_str(&format!("pool_bytes = {}\n", plan.run.pool_bytes));
    }
    if scheme.mode == "ssbt+conn" {
        text.push_str(&format!(
            "connections = [{}, {}]\n",
            l.close_persistent_from, l.close_persistent_to
        ));
    }
    text
}

/// The name of the proxy's memory cgroup (one at a time).
pub fn memory_cgroup_name() -> String {
    format!("vantage-{}-tcp", tag())
}

/// Whether `name` is a proxy memory cgroup of a process that is gone (a
/// run that was killed).
fn stale_memory_cgroup(name: &str) -> bool {
    name.strip_prefix("vantage-th")
        .and_then(|rest| rest.strip_suffix("-tcp"))
        .and_then(|hex| u32::from_str_radix(hex, 16).ok())
        .is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists())
}

/// Starts the proxy of `scheme`; with `memory`, inside that memory cgroup
/// (Squid's and nginx's processes, vantage proxy's threads: the thread
/// that starts it enters the cgroup first, and the threads it starts are
/// born there).
fn start_proxy(
    scheme: &SchemePlan,
    plan: &ThesisPlan,
    topology: &Topology,
    dir: &Path,
    memory: Option<&Arc<TcpMemoryCap>>,
) -> Result<RunningProxy, LiveError> {
    let l = &plan.limits;
    let as_u32 = |v: Option<u64>| v.map(|b| b.min(u64::from(u32::MAX)) as u32);
    match scheme.proxy.as_str() {
        "vantage" => {
            let text = vantage_text(scheme, plan);
            std::fs::write(dir.join("proxy.toml"), &text)
                .map_err(|e| LiveError::Proxy(format!("write proxy.toml: {e}")))?;
            let config = ProxyConfig::from_toml(&text, "proxy.toml")
                .map_err(|e| LiveError::Proxy(e.to_string()))?;
            let memory = memory.cloned();
            let proxy = topology
                .server
                .run(move || {
                    if let Some(memory) = &memory {
                        memory.add_current_thread()?;
                    }
                    Proxy::start(config).map_err(|e| LiveError::Proxy(e.to_string()))
                })
                .map_err(|e| LiveError::Netns(e.to_string()))??;
            Ok(RunningProxy::Vantage(Box::new(proxy)))
        }
        "squid" => {
            let squid = Squid::start(
                &topology.server,
                &SquidConfig {
                    max_connections: l.max_connections,
                    persistent_timeout_s: l.persistent_timer_s,
                    receive_bytes: as_u32(scheme.receive_bytes),
                },
                front(),
                &[far_origin(plan), near_origin()],
                &dir.join("squid"),
            )?;
            if let Some(memory) = memory {
                memory.add_with_children(squid.pid())?;
            }
            Ok(RunningProxy::Squid(squid))
        }
        "nginx" => {
            let config = NginxConfig {
                sndbuf: as_u32(scheme.send_bytes),
                workers: 1,
                // nginx's one bound: connections of every kind (client,
                // upstream, listening) at once.
                worker_connections: l.max_connections,
                keepalive_timeout_s: l.persistent_timer_s,
                keepalive_requests: 1_000_000,
                // Served by no request: the location proxies everything.
                files: vec![StaticFile {
                    path: "/unused".into(),
                    bytes: 0,
                }],
                front: Some(NginxFront {
                    upstream: far_origin(plan),
                    limit_conn: None,
                    limit_req_per_s: None,
                    limit_req_burst: 0,
                    more_upstreams: vec![near_origin()],
                    upstream_keepalive: 2 * UPSTREAM_IDLE,
                }),
                ..NginxConfig::default()
            };
            let nginx = Nginx::start(&topology.server, &config, front(), &dir.join("nginx"))?;
            if let Some(memory) = memory {
                memory.add_with_children(nginx.pid())?;
            }
            Ok(RunningProxy::Nginx(nginx))
        }
        other => Err(LiveError::Proxy(format!("unknown proxy {other:?}"))),
    }
}

/// Lines in an origin's access log: the requests it served so far.
fn served(origin: &Nginx) -> u64 {
    std::fs::read(origin.access_log())
        .map_or(0, |b| b.iter().filter(|&&c| c == b'\n').count() as u64)
}

/// Starts every path's users in its namespace; joins them all.
fn run_users(topology: &Topology, plans: Vec<UsersPlan>) -> Result<Vec<RequestRecord>, LiveError> {
    let mut threads = Vec::new();
    for plan in plans {
        let namespace = plan.path;
        threads.push(
            topology.clients[namespace]
                .spawn(&format!("users-{namespace}"), move || users::run(plan))
                .map_err(|e| LiveError::Users(e.to_string()))?,
        );
    }
    join_lists(threads).map_err(|failure| match failure {
        JoinFailure::Work(e) => LiveError::Users(e.to_string()),
        JoinFailure::Netns(e) => LiveError::Netns(e.to_string()),
        JoinFailure::Panicked => LiveError::Users("a user thread panicked".into()),
    })
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

struct Origins {
    far: Nginx,
    near: Nginx,
}

fn run_on(
    plan: &ThesisPlan,
    mode: &Mode,
    dir: &Path,
    documents_dir: &Path,
    topology: &Topology,
    progress: &dyn Fn(&str),
) -> Result<ThesisReport, LiveError> {
    let sizes = document_sizes(plan)?;
    let surge = surge(plan)?;
    progress(&format!(
        "writing {} documents ({:.1} MiB) to both origins",
        sizes.len(),
        sizes.iter().sum::<u64>() as f64 / 1048576.0
    ));
    let files: Vec<StaticFile> = sizes
        .iter()
        .enumerate()
        .map(|(i, &bytes)| StaticFile {
            path: format!("/d{i}"),
            bytes,
        })
        .collect();
    let origins = Origins {
        far: Nginx::start(
            &topology.clients[plan.path.len()],
            &origin_config(files.clone()),
            far_origin(plan),
            &documents_dir.join("far"),
        )?,
        near: Nginx::start(
            &topology.server,
            &origin_config(files),
            near_origin(),
            &documents_dir.join("near"),
        )?,
    };
    progress("starting the WAN emulator");
    let wan = RouterEmulator::start(&topology.router, wan_config(plan), plan.experiment.seed)
        .map_err(LiveError::Wan)?;

    let total_runs = plan.workload.users.len() * plan.scheme.len();
    let mut rows = Vec::new();
    let mut index = 0;
    for &users in &plan.workload.users {
        let per_path = plan.users_per_path(users);
        for scheme in &plan.scheme {
            index += 1;
            progress(&format!(
                "[{index}/{total_runs}] {} · {users} users for {:.0} s",
                scheme.name, mode.duration_s
            ));
            let run_dir = dir.join(format!("{users}-{index}-{}", slug(&scheme.name)));
            std::fs::create_dir_all(&run_dir)
                .map_err(|e| LiveError::Io(format!("{}: {e}", run_dir.display())))?;
            let row = run_one(
                plan, mode, scheme, users, &per_path, &surge, topology, &origins, &run_dir,
            )?;
            progress(&format!(
                "    {:.2} Mbit/s, transfer time mean {:.3} s, {} refusals, {} of {} requests failed, {:.0} KB assigned per connection",
                row.throughput_mbps,
                row.transfer_mean_s,
                row.refusals,
                row.failed,
                row.requests,
                row.mean_assigned_per_connection_bytes / 1024.0,
            ));
            rows.push(row);
        }
    }
    let wan_stats = wan.finish().map_err(LiveError::Wan)?;
    drop(origins);
    Ok(report::build(
        plan,
        mode,
        rows,
        WanSummary::from_stats(&wan_stats),
    ))
}

#[allow(clippy::too_many_arguments)]
fn run_one(
    plan: &ThesisPlan,
    mode: &Mode,
    scheme: &SchemePlan,
    users: u32,
    per_path: &[u32],
    surge: &Surge,
    topology: &Topology,
    origins: &Origins,
    run_dir: &Path,
) -> Result<RunRow, LiveError> {
    let far_before = served(&origins.far);
    let near_before = served(&origins.near);
    // A fresh cgroup per run, so that its peak is the run's; removed when
    // the run ends, failed or not (drop).
    let memory = plan
        .run
        .proxy_tcp_memory_bytes
        .map(|bytes| TcpMemoryCap::create(&memory_cgroup_name(), bytes).map(Arc::new))
        .transpose()?;
    let proxy = start_proxy(scheme, plan, topology, run_dir, memory.as_ref())?;
    let first = Instant::now() + START_DELAY;
    let end = first + Duration::from_secs_f64(mode.duration_s);
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let stop = stop.clone();
        let namespace = topology.server.clone();
        let period = Duration::from_millis(plan.run.sample_ms);
        std::thread::Builder::new()
            .name("sockets".into())
            .spawn(move || {
                sockets::sample(
                    &namespace,
                    ProxyPorts {
                        front: FRONT_PORT,
                        origin: ORIGIN_PORT,
                    },
                    period,
                    first,
                    &stop,
                )
            })
            .map_err(|e| LiveError::Io(e.to_string()))?
    };
    let mut first_user = 0;
    let plans: Vec<UsersPlan> = per_path
        .iter()
        .enumerate()
        .filter(|(_, &n)| n > 0)
        .map(|(path, &n)| {
            let p = UsersPlan {
                path,
                first_user,
                users: n,
                target: front(),
                first_start: first,
                ramp: Duration::from_secs_f64(mode.ramp_s),
                end,
                stall: Duration::from_secs_f64(plan.workload.stall_s),
                max_retries: plan.workload.max_retries,
                seed: plan.experiment.seed,
                documents: plan.workload.documents,
                surge: surge.clone(),
            };
            first_user += n;
            p
        })
        .collect();
    let records = run_users(topology, plans);
    stop.store(true, Ordering::Relaxed);
    let sampled = sampler.join().unwrap_or_default();
    let counters = proxy.stop();
    let cgroup_peak = memory.as_ref().and_then(|m| m.peak_bytes().ok());
    drop(memory);
    let records = records?;
    std::thread::sleep(ACCESS_LOG_FLUSH);
    let far = served(&origins.far).saturating_sub(far_before);
    let near = served(&origins.near).saturating_sub(near_before);
    let mut row = report::summarize(
        scheme,
        users,
        mode.duration_s,
        &records,
        sampled,
        counters,
        (far, near),
        per_path,
    );
    row.tcp_memory_limit_bytes = plan.run.proxy_tcp_memory_bytes;
    row.cgroup_tcp_peak_bytes = cgroup_peak;
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_memory_cgroups_of_gone_processes_are_stale() {
        assert!(!stale_memory_cgroup(&memory_cgroup_name()), "this process");
        // Above the kernel's largest pid (2^22).
        assert!(stale_memory_cgroup("vantage-th7fffffff-tcp"));
        assert!(!stale_memory_cgroup("vantage-th7fffffff"), "a CPU cap");
        assert!(!stale_memory_cgroup("process_api"));
        assert!(!stale_memory_cgroup("vantage-thzz-tcp"));
    }

    #[test]
    fn histogram_means_come_from_sum_and_count() {
        let text = "# TYPE x histogram\nx_bytes_sum 300\nx_bytes_count 3\ny_bytes_count 0\ny_bytes_sum 0\n";
        assert_eq!(histogram_mean(text, "x_bytes"), Some(100.0));
        assert_eq!(histogram_mean(text, "y_bytes"), None);
        assert_eq!(histogram_mean(text, "z_bytes"), None);
    }

    #[test]
    fn the_vantage_configuration_has_the_thesis_limits() {
        let text = include_str!("../../../../scenarios/proxy/thesis-section5.toml");
        let plan = ThesisPlan::from_toml(text, "p.toml").unwrap();
        for scheme in &plan.scheme {
            if scheme.proxy != "vantage" {
                continue;
            }
            let config = vantage_text(scheme, &plan);
            ProxyConfig::from_toml(&config, "proxy.toml")
                .unwrap_or_else(|e| panic!("{}: {e}\n{config}", scheme.name));
            assert!(config.contains("max_connections = 400"));
            assert!(config.contains("idle_ms = 15000"));
            if scheme.mode == "ssbt+conn" {
                assert!(config.contains("connections = [300, 280]"), "{config}");
            }
        }
    }

    #[test]
    fn documents_follow_surge_and_are_bounded() {
        let text = include_str!("../../../../scenarios/proxy/thesis-section5.toml");
        let plan = ThesisPlan::from_toml(text, "p.toml").unwrap();
        let sizes = document_sizes(&plan).unwrap();
        assert_eq!(sizes.len() as u32, plan.workload.documents);
        assert!(sizes
            .iter()
            .all(|&b| b >= 1 && b <= plan.workload.max_document_bytes));
        assert_eq!(sizes, document_sizes(&plan).unwrap(), "seeded");
    }
}
