//! Runs the plan: the topology (server, a monitored client and a
//! cross-traffic sink behind each path, a cross-traffic source), the WAN
//! emulator, nginx under its CPU cap, the captures; then for each server
//! load the SURGE users, and for each network load and file size one test
//! on a fixed schedule; at the end one analysis per path.

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use vantage_core::traffic::surge::{Surge, SurgeParams};
use vantage_testbed::cgroup::{CgroupError, CpuCap};
use vantage_testbed::recorders::capture::{Capture, CaptureReport};
use vantage_testbed::server::nginx::{Nginx, NginxConfig, NginxError, StaticFile};
use vantage_testbed::topology::{
    self, Topology, TopologyError, TopologySpec, HOST_IFACE, SERVER_ADDR,
};
use vantage_testbed::wan::{ClientPrefix, LinkConfig, LinkRule, RouterEmulator, WanConfig};

use super::plan::{Mode, TcpevalPlan, MAX_TOTAL_DOCUMENT_BYTES};
use super::report::{self, CaptureSummary, PathAnalysis, TcpevalReport, TestRecord, WanSummary};
use super::traffic::{fetch_loop, CrossTraffic, FetchPlan, FetchRecord};
use crate::thesis_live::users::{self, RequestRecord, UsersPlan};

/// The client namespaces: the monitored client and the cross-traffic sink
/// of the long path, the same for the short path, the cross-traffic
/// source.
const LONG_CLIENT: usize = 0;
const LONG_SINK: usize = 1;
const SHORT_CLIENT: usize = 2;
const SHORT_SINK: usize = 3;
const CROSS_SOURCE: usize = 4;
const SERVER_PORT: u16 = 80;
const CROSS_PORT: u16 = 9000;
/// Bytes of each packet captured: headers and the HTTP request line.
const SNAP_LEN: u32 = 160;
/// After a test's fetches, this long for the last fetch to end before it is
/// cut (the schedule stays fixed, the background users run on it).
const TAIL: Duration = Duration::from_secs(2);
/// Between tests: starting and stopping the cross traffic.
const BETWEEN: Duration = Duration::from_millis(500);

#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("the Section 4 experiment needs root (network namespaces, iptables, cgroups)")]
    NotRoot,
    #[error("`{0}` is not installed (scripts/test installs it)")]
    Missing(&'static str),
    #[error(transparent)]
    Topology(#[from] TopologyError),
    #[error(transparent)]
    Nginx(#[from] NginxError),
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
    #[error("capture: {0}")]
    Capture(String),
    #[error("WAN emulator: {0}")]
    Wan(String),
    #[error("namespace: {0}")]
    Netns(String),
    #[error("background users: {0}")]
    Users(String),
    #[error("documents: {0}")]
    Documents(String),
    #[error("analysis of {path}: {message}")]
    Analysis { path: String, message: String },
    #[error("{0}")]
    Io(String),
}

/// Checks root, nginx and tcpdump; `Err` says what is missing.
pub fn preflight() -> Result<(), LiveError> {
    if !vantage_sys::privilege::is_root() {
        return Err(LiveError::NotRoot);
    }
    for program in ["nginx", "tcpdump"] {
        if vantage_sys::command::find_program(program).is_none() {
            return Err(LiveError::Missing(program));
        }
    }
    Ok(())
}

/// The tag of this process's testbed namespaces (`vtb-<tag>-…`) and of
/// its cgroup (`vantage-<tag>`).
pub fn tag() -> String {
    format!("te{:x}", std::process::id())
}

/// A path of the experiment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PathName {
    Long,
    Short,
}

impl PathName {
    pub const BOTH: [PathName; 2] = [PathName::Long, PathName::Short];

    pub fn name(self) -> &'static str {
        match self {
            PathName::Long => "long",
            PathName::Short => "short",
        }
    }

    fn client(self) -> usize {
        match self {
            PathName::Long => LONG_CLIENT,
            PathName::Short => SHORT_CLIENT,
        }
    }

    fn sink(self) -> usize {
        match self {
            PathName::Long => LONG_SINK,
            PathName::Short => SHORT_SINK,
        }
    }
}

/// Low or high, for the server's and the network's load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Level {
    Low,
    High,
}

impl Level {
    pub const BOTH: [Level; 2] = [Level::Low, Level::High];

    pub fn letter(self) -> char {
        match self {
            Level::Low => 'L',
            Level::High => 'H',
        }
    }
}

/// Runs the whole experiment; captures and logs go under `dir`, the
/// server's files under a temporary directory removed at the end.
pub fn run(
    plan: &TcpevalPlan,
    quick: bool,
    dir: &Path,
    progress: &dyn Fn(&str),
) -> Result<TcpevalReport, LiveError> {
    preflight()?;
    let started = Instant::now();
    let mode = plan.mode(quick);
    std::fs::create_dir_all(dir).map_err(|e| LiveError::Io(format!("{}: {e}", dir.display())))?;
    let documents_dir =
        std::env::temp_dir().join(format!("vantage-tcpeval-server-{}", std::process::id()));
    let mut topology = Topology::build(&TopologySpec {
        clients: CROSS_SOURCE + 1,
        tag: tag(),
    })?;
    let result = run_on(plan, &mode, dir, &documents_dir, &topology, progress);
    let _ = topology.teardown();
    let _ = std::fs::remove_dir_all(&documents_dir);
    let mut report = result?;
    report.duration_s = started.elapsed().as_secs_f64();
    Ok(report)
}

fn link_rule(client: usize, one_way_ms: f64, plan: &TcpevalPlan) -> LinkRule {
    // A /23 holds the path's monitored client and its cross-traffic sink:
    // one bottleneck queue for both.
    LinkRule::symmetric(
        ClientPrefix::new(topology::client_addr(client), 23).expect("a /23 prefix is valid"),
        LinkConfig {
            delay_ms: one_way_ms,
            rate_mbit: plan.paths.rate_mbit,
            queue_packets: plan.paths.queue_packets,
            ..LinkConfig::default()
        },
    )
}

fn wan_config(plan: &TcpevalPlan) -> WanConfig {
    let links = vec![
        link_rule(LONG_CLIENT, plan.paths.long_one_way_ms, plan),
        link_rule(SHORT_CLIENT, plan.paths.short_one_way_ms, plan),
    ];
    let mut config = WanConfig::new(0, links);
    // Sleep to each release: a spin would take a core of two.
    config.spin_us = 0;
    config
}

fn surge(plan: &TcpevalPlan) -> Result<Surge, LiveError> {
    Surge::new(SurgeParams {
        max_file_bytes: plan.server.max_document_bytes,
        ..SurgeParams::default()
    })
    .map_err(|e| LiveError::Documents(e.to_string()))
}

/// The SURGE documents' sizes, seeded.
pub fn document_sizes(plan: &TcpevalPlan, documents: u32) -> Result<Vec<u64>, LiveError> {
    let surge = surge(plan)?;
    let mut rng = ChaCha8Rng::seed_from_u64(plan.experiment.seed);
    let sizes: Vec<u64> = (0..documents).map(|_| surge.file_bytes(&mut rng)).collect();
    let total: u64 = sizes.iter().sum();
    if total > MAX_TOTAL_DOCUMENT_BYTES {
        return Err(LiveError::Documents(format!(
            "the drawn documents add up to {total} bytes, more than {MAX_TOTAL_DOCUMENT_BYTES}"
        )));
    }
    Ok(sizes)
}

/// The monitored file of `bytes`.
pub fn monitored_uri(bytes: u64) -> String {
    format!("/f{bytes}")
}

fn epoch_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn io<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> LiveError + '_ {
    move |e| LiveError::Io(format!("{what}: {e}"))
}

/// The captures of one path: at the server (this client only) and at the
/// client.
struct PathCaptures {
    server: Capture,
    client: Capture,
}

fn start_captures(topology: &Topology, dir: &Path) -> Result<Vec<PathCaptures>, LiveError> {
    let mut all = Vec::new();
    for path in PathName::BOTH {
        let client_addr = topology::client_addr(path.client());
        let server = Capture::start_filtered(
            &topology.server,
            HOST_IFACE,
            &dir.join(format!("server-{}.pcap", path.name())),
            SNAP_LEN,
            &format!("tcp and host {client_addr}"),
        )
        .map_err(|e| LiveError::Capture(e.to_string()))?;
        let client = Capture::start(
            &topology.clients[path.client()],
            HOST_IFACE,
            &dir.join(format!("client-{}.pcap", path.name())),
            SNAP_LEN,
        )
        .map_err(|e| LiveError::Capture(e.to_string()))?;
        all.push(PathCaptures { server, client });
    }
    Ok(all)
}

fn run_on(
    plan: &TcpevalPlan,
    mode: &Mode,
    dir: &Path,
    documents_dir: &Path,
    topology: &Topology,
    progress: &dyn Fn(&str),
) -> Result<TcpevalReport, LiveError> {
    let sizes = document_sizes(plan, mode.documents)?;
    let surge = surge(plan)?;
    progress(&format!(
        "writing {} SURGE documents ({:.1} MiB) and the monitored files",
        sizes.len(),
        sizes.iter().sum::<u64>() as f64 / 1048576.0
    ));
    let mut files: Vec<StaticFile> = sizes
        .iter()
        .enumerate()
        .map(|(i, &bytes)| StaticFile {
            path: format!("/d{i}"),
            bytes,
        })
        .collect();
    for &bytes in &plan.server.monitored_bytes {
        files.push(StaticFile {
            path: monitored_uri(bytes),
            bytes,
        });
    }
    let config = NginxConfig {
        workers: 1,
        worker_connections: 4096,
        keepalive_timeout_s: 15,
        keepalive_requests: 1_000_000,
        files,
        ..NginxConfig::default()
    };
    let mut nginx = Nginx::start(
        &topology.server,
        &config,
        SocketAddr::from((Ipv4Addr::UNSPECIFIED, SERVER_PORT)),
        documents_dir,
    )?;
    let cap = CpuCap::create(&format!("vantage-{}", tag()), plan.server.cpu_cores)?;
    cap.add_with_children(nginx.pid())?;
    progress("starting the WAN emulator and the captures");
    let wan = RouterEmulator::start(&topology.router, wan_config(plan), plan.experiment.seed)
        .map_err(LiveError::Wan)?;
    let listener: TcpListener = topology.clients[CROSS_SOURCE]
        .run(|| TcpListener::bind((topology::client_addr(CROSS_SOURCE), CROSS_PORT)))
        .map_err(|e| LiveError::Netns(e.to_string()))?
        .map_err(io("cross-traffic listener"))?;
    // Any capture already started when a later one fails is killed with
    // its namespace.
    let captures = start_captures(topology, dir)?;

    let tests = run_tests(plan, mode, topology, &cap, &listener, &surge, progress);

    drop(listener);
    // Let the last FINs cross the WAN before the captures stop.
    std::thread::sleep(Duration::from_millis(300));
    let mut capture_reports = Vec::new();
    for c in captures {
        capture_reports.push((c.server.stop(), c.client.stop()));
    }
    let wan_stats = wan.finish().map_err(LiveError::Wan);
    nginx.stop();
    drop(cap);
    let tests = tests?;
    let wan_stats = wan_stats?;

    let mut analyses = Vec::new();
    for (path, (server, client)) in PathName::BOTH.into_iter().zip(&capture_reports) {
        progress(&format!("analysing the {} path's captures", path.name()));
        analyses.push(analyse(path, server, client)?);
    }
    let captures: Vec<CaptureSummary> = capture_reports
        .iter()
        .flat_map(|(s, c)| [s, c])
        .map(CaptureSummary::from_report)
        .collect();
    Ok(report::build(
        plan,
        mode,
        tests,
        analyses,
        captures,
        WanSummary::from_stats(&wan_stats),
    ))
}

/// One path's captures analysed with `vantage_cpa`, one clock (offset 0).
fn analyse(
    path: PathName,
    server: &CaptureReport,
    client: &CaptureReport,
) -> Result<PathAnalysis, LiveError> {
    let inputs = vantage_cpa::Inputs {
        server: Some(server.path.clone()),
        client: Some(client.path.clone()),
    };
    let options = vantage_cpa::Options {
        // One machine, one clock: one-way delays are exact.
        clock_offset: Some(0),
        ..vantage_cpa::Options::default()
    };
    let analysis = vantage_cpa::analyze(&inputs, &options).map_err(|e| LiveError::Analysis {
        path: server.path.display().to_string(),
        message: e.to_string(),
    })?;
    Ok(PathAnalysis::new(path, analysis))
}

#[allow(clippy::too_many_arguments)]
fn run_tests(
    plan: &TcpevalPlan,
    mode: &Mode,
    topology: &Topology,
    cap: &CpuCap,
    listener: &TcpListener,
    surge: &Surge,
    progress: &dyn Fn(&str),
) -> Result<Vec<TestRecord>, LiveError> {
    let sizes = &plan.server.monitored_bytes;
    let test = Duration::from_secs_f64(mode.test_s);
    let settle = Duration::from_secs_f64(mode.settle_s);
    let ramp = Duration::from_secs_f64(mode.ramp_s);
    let slot = settle + test + TAIL + BETWEEN;
    let per_block = 2 * sizes.len();
    let total = 2 * per_block;
    let mut records = Vec::new();
    let mut index = 0;
    for server_load in Level::BOTH {
        let users = match server_load {
            Level::Low => plan.server_load.low_users,
            Level::High => plan.server_load.high_users,
        };
        let block_start = Instant::now() + Duration::from_millis(200);
        let first_test = block_start + ramp;
        let block_end = first_test + slot * per_block as u32;
        progress(&format!(
            "server load {}: {users} SURGE users for {:.0} s",
            if server_load == Level::Low {
                "low"
            } else {
                "high"
            },
            (block_end - block_start).as_secs_f64()
        ));
        let users_thread = if users > 0 {
            let users_plan = UsersPlan {
                path: 0,
                first_user: 0,
                users,
                target: SocketAddr::from((Ipv4Addr::LOCALHOST, SERVER_PORT)),
                first_start: block_start,
                ramp,
                end: block_end,
                stall: Duration::from_secs_f64(plan.server_load.stall_s),
                max_retries: 0,
                seed: plan.experiment.seed ^ u64::from(users),
                documents: mode.documents,
                surge: surge.clone(),
            };
            Some(
                topology
                    .server
                    .spawn("surge-users", move || users::run(users_plan))
                    .map_err(io("users thread"))?,
            )
        } else {
            None
        };
        let mut block = Vec::new();
        let mut failure = None;
        'block: for (k, (network_load, &bytes)) in Level::BOTH
            .into_iter()
            .flat_map(|n| sizes.iter().map(move |b| (n, b)))
            .enumerate()
        {
            index += 1;
            let start = first_test + slot * k as u32;
            if let Some(wait) = start.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            progress(&format!(
                "[{index}/{total}] {} KB · {}N{}S · {:.0} s",
                bytes as f64 / 1024.0,
                network_load.letter(),
                server_load.letter(),
                mode.test_s
            ));
            match run_test(
                plan,
                topology,
                cap,
                listener,
                (bytes, server_load, network_load),
                start,
                settle,
                test,
            ) {
                Ok(record) => {
                    progress(&format!(
                        "    server CPU {:.0} % of its cap; fetches long {} / short {} completed of {} / {}; cross traffic {:.2} / {:.2} Mbit/s",
                        record.server_utilisation * 100.0,
                        record.completed(PathName::Long),
                        record.completed(PathName::Short),
                        record.fetches[0].len(),
                        record.fetches[1].len(),
                        record.cross_mbps(PathName::Long),
                        record.cross_mbps(PathName::Short),
                    ));
                    block.push(record);
                }
                Err(e) => {
                    failure = Some(e);
                    break 'block;
                }
            }
        }
        let background: Vec<RequestRecord> = match users_thread {
            None => Vec::new(),
            Some(thread) => match thread.join() {
                Ok(Ok(Ok(list))) => list,
                Ok(Ok(Err(e))) => return Err(LiveError::Users(e.to_string())),
                Ok(Err(e)) => return Err(LiveError::Netns(e.to_string())),
                Err(_) => return Err(LiveError::Users("the users' thread panicked".into())),
            },
        };
        if let Some(e) = failure {
            return Err(e);
        }
        let summary = report::BackgroundSummary::from_records(users, &background);
        progress(&format!(
            "    background: {} requests, {} completed, {} failed, {} cut",
            summary.requests, summary.completed, summary.failed, summary.cut
        ));
        for record in &mut block {
            record.background = summary.clone();
        }
        records.extend(block);
    }
    Ok(records)
}

#[allow(clippy::too_many_arguments)]
fn run_test(
    plan: &TcpevalPlan,
    topology: &Topology,
    cap: &CpuCap,
    listener: &TcpListener,
    (bytes, server_load, network_load): (u64, Level, Level),
    start: Instant,
    settle: Duration,
    test: Duration,
) -> Result<TestRecord, LiveError> {
    let (flows, rate) = match network_load {
        Level::Low => (plan.network_load.low_flows, plan.network_load.low_rate_mbit),
        Level::High => (
            plan.network_load.high_flows,
            plan.network_load.high_rate_mbit,
        ),
    };
    let fetch_start = start + settle;
    let fetch_end = fetch_start + test;
    let cross_end = fetch_end + TAIL;
    let cross_started = Instant::now();
    let mut cross = Vec::new();
    for path in PathName::BOTH {
        let sink = topology.clients[path.sink()].clone();
        let source = SocketAddr::from((topology::client_addr(CROSS_SOURCE), CROSS_PORT));
        let connect = move || -> std::io::Result<TcpStream> {
            sink.run(move || TcpStream::connect_timeout(&source, Duration::from_secs(3)))
                .map_err(std::io::Error::other)?
        };
        cross.push(CrossTraffic::start(
            listener, connect, flows, rate, cross_end,
        ));
    }
    if let Some(wait) = fetch_start.checked_duration_since(Instant::now()) {
        std::thread::sleep(wait);
    }
    let cpu_before = cap.usage_us()?;
    let from_ns = epoch_ns();
    let measured = Instant::now();
    let mut threads = Vec::new();
    for path in PathName::BOTH {
        let fetch = FetchPlan {
            target: SocketAddr::from((SERVER_ADDR, SERVER_PORT)),
            uri: monitored_uri(bytes),
            bytes,
            end: fetch_end,
            cut: fetch_end + TAIL,
            gap: Duration::from_millis(plan.monitored.gap_ms),
            timeout: Duration::from_secs_f64(plan.monitored.timeout_s),
            max_fetches: plan.monitored.max_fetches,
        };
        threads.push(
            topology.clients[path.client()]
                .spawn(&format!("fetch-{}", path.name()), move || {
                    fetch_loop(&fetch)
                })
                .map_err(io("fetch thread")),
        );
    }
    let mut fetches: Vec<Vec<FetchRecord>> = Vec::new();
    let mut failure = None;
    for thread in threads {
        match thread.map(|t| t.join()) {
            Ok(Ok(Ok(list))) => fetches.push(list),
            Ok(Ok(Err(e))) => {
                failure.get_or_insert(LiveError::Netns(e.to_string()));
            }
            Ok(Err(_)) => {
                failure.get_or_insert(LiveError::Io("a fetch thread panicked".into()));
            }
            Err(e) => {
                failure.get_or_insert(e);
            }
        }
    }
    let seconds = measured.elapsed().as_secs_f64();
    let to_ns = epoch_ns();
    let cpu_after = cap.usage_us();
    let cross: Vec<_> = cross.into_iter().map(CrossTraffic::finish).collect();
    let cross_s = cross_started.elapsed().as_secs_f64();
    if let Some(e) = failure {
        return Err(e);
    }
    let cpu_s = (cpu_after? - cpu_before) as f64 / 1e6;
    Ok(TestRecord {
        bytes,
        server_load,
        network_load,
        from_ns,
        to_ns,
        server_utilisation: cpu_s / seconds / cap.cores(),
        fetches: [fetches[0].clone(), fetches[1].clone()],
        cross: [cross[0], cross[1]],
        cross_s,
        background: report::BackgroundSummary::default(),
    })
}

/// Where a run's files go (`runs/` under the results folder).
pub fn runs_dir(dir: &Path) -> PathBuf {
    dir.join("runs")
}
