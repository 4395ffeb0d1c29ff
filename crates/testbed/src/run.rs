//! `vantage testbed run`: bring the testbed up from a spec, run the
//! workload, tear everything down, and leave one result directory.
//!
//! Order of work, each step undone in reverse on every exit path:
//!
//! 1. watchdog process (cleans up if this process is killed outright);
//! 2. namespaces and links ([`Topology`]); client SYN profile sysctls;
//! 3. WAN emulator bound in the router, then its iptables rule;
//! 4. server (nginx or the test server);
//! 5. the `[gate]` in front of it, in the server namespace (iptables rules
//!    or a `vantage gate run` process, `crate::gate`);
//! 6. counters, captures;
//! 7. one load-generator thread per client namespace — arrivals of the one
//!    schedule are dealt to the clients in turn;
//! 8. stop: gate, recorders, server, emulator; teardown; analysis.
//!
//! The result directory holds `spec.toml`, `clients.csv` (client-side ground
//! truth, one row per scheduled connection), `counters.csv` and
//! `counters.json` (server kernel counters), `server.pcap` (and
//! `client<i>.pcap`), the server's logs, `wan.json`, `syn-audit.json`
//! (server-side SYNs matched with SYN-ACKs) and `summary.json`/`summary.txt`;
//! with a gate also `gate.json` (and `iptables.txt`, or the gate's
//! `gate.toml`, `gate.jsonl`, `gate.stdout.log`, `gate.stderr.log`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;
use vantage_core::Nanos;

use crate::load::record::{summarize, write_csv, ConnectionRecord, LoadSummary};
use crate::load::{self, LoadConfig};
use crate::netns::{Netns, NetnsError};
use crate::profiles;
use crate::recorders::capture::{syn_audit, Capture, CaptureReport, SynAudit};
use crate::recorders::counters::{self, CounterRecord};
use crate::server::nginx::{parse_access_log, Nginx};
use crate::server::test_server::{self, TestServerStats};
use crate::spec::{ServerSpec, TestbedSpec};
use crate::syn_admission::{self, SynAdmissionReport, SynAdmissionSpec};
use crate::topology::{self, Topology, TopologySpec, HOST_IFACE, SERVER_ADDR};
use crate::wan::{RouterEmulator, WanStats};
use crate::watchdog::Watchdog;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("{0}")]
    Spec(String),
    #[error(transparent)]
    Topology(#[from] topology::TopologyError),
    #[error(transparent)]
    Netns(#[from] NetnsError),
    #[error("{what}: {message}")]
    Step { what: &'static str, message: String },
    #[error("cannot write {path}: {message}")]
    Output { path: PathBuf, message: String },
    #[error("{program} is not installed: {why} (`bash scripts/test` installs it, or apt-get install {package})")]
    Missing {
        program: &'static str,
        package: &'static str,
        why: &'static str,
    },
    #[error("the run was interrupted; partial results are in {0}")]
    Interrupted(PathBuf),
}

fn step<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> RunError {
    move |e| RunError::Step {
        what,
        message: e.to_string(),
    }
}

/// How to run.
pub struct RunOptions {
    /// The result directory (created; must not exist yet).
    pub dir: PathBuf,
    /// Namespace tag; default derived from the process id.
    pub tag: Option<String>,
    /// Program and arguments of the watchdog (`vantage testbed clean --tag T
    /// --after-parent-exit`), `{tag}` replaced by the tag; `None` for none.
    /// Its program is the vantage binary, which also runs a `[gate]` of
    /// `kind = "vantage"` (`<program> gate run …`).
    pub watchdog: Option<(PathBuf, Vec<String>)>,
}

impl RunOptions {
    /// The vantage binary: the watchdog's program, if there is a watchdog.
    pub fn vantage_program(&self) -> Option<&Path> {
        self.watchdog.as_ref().map(|(program, _)| program.as_path())
    }
}

/// Progress reported while running.
pub enum RunEvent<'a> {
    Phase(&'a str),
    /// The load started; it lasts about this long.
    LoadStarted(Duration),
    LoadFinished,
}

/// What one run measured, as written to `summary.json`.
#[derive(Clone, Debug, Serialize)]
pub struct RunSummary {
    pub name: String,
    pub client_profile: String,
    pub syn_retries: u32,
    pub syn_linear_timeouts: u32,
    pub clients: usize,
    pub load: LoadSummary,
    /// Server kernel counters over the run.
    pub listen_overflows: u64,
    pub listen_drops: u64,
    pub syn_queue_full_drops: u64,
    pub passive_opens: u64,
    /// Server-side retransmissions repaired by time-out and by fast
    /// retransmit (`TcpExt.TCPTimeouts`, `TcpExt.TCPFastRetrans`): the truth
    /// a critical-path analysis of the server's sending is checked against.
    pub server_timeouts: u64,
    pub server_fast_retransmits: u64,
    /// From the server capture.
    pub server_syns: Option<u64>,
    pub server_unanswered_syns: Option<u64>,
    /// Handshake ACKs and requests the server dropped in SYN-RECV (also
    /// counted by `ListenDrops`).
    pub server_handshake_segments_dropped: Option<u64>,
    /// Handshake segments the capture cannot decide about.
    pub server_handshake_segments_uncertain: Option<u64>,
    pub capture_kernel_drops: u64,
    pub wan: Option<WanStats>,
    pub test_server: Option<TestServerStats>,
    pub nginx_requests: Option<u64>,
    /// What the `[gate]` did (`None` without one).
    pub gate: Option<SynAdmissionReport>,
    pub interrupted: bool,
}

/// Everything a finished run returns.
pub struct RunOutput {
    pub dir: PathBuf,
    pub summary: RunSummary,
    pub records: Vec<ConnectionRecord>,
    pub audit: Option<SynAudit>,
    pub counters: CounterRecord,
}

/// Checks that the programs a spec needs are installed.
pub fn check_tools(spec: &TestbedSpec) -> Result<(), RunError> {
    let has = |program: &str| {
        std::process::Command::new(program)
            .arg("--version")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok()
    };
    let mut needed: Vec<(&'static str, &'static str, &'static str)> = vec![
        ("ip", "iproute2", "it creates the namespaces and links"),
        ("ethtool", "ethtool", "it turns segmentation offloads off"),
    ];
    if spec.capture.server || spec.capture.clients {
        needed.push(("tcpdump", "tcpdump", "it captures packets"));
    }
    if matches!(spec.server, ServerSpec::Nginx(_)) {
        needed.push(("nginx", "nginx", "the spec's server is nginx"));
    }
    if !spec.wan_is_transparent() {
        needed.push((
            "iptables",
            "iptables",
            "it queues forwarded packets to the WAN emulator",
        ));
    }
    if spec.gate.needs_iptables() {
        needed.push((
            "iptables",
            "iptables",
            "the spec's [gate] installs iptables rules",
        ));
    }
    for (program, package, why) in needed {
        if !has(program) {
            return Err(RunError::Missing {
                program,
                package,
                why,
            });
        }
    }
    Ok(())
}

/// The client namespace's sysctls read back, to check the profile took.
fn applied_profile(client: &Netns) -> Result<(u32, u32), RunError> {
    let read = |key: &str| -> Result<u32, RunError> {
        client
            .read_sysctl(key)?
            .parse()
            .map_err(step("reading back client sysctls"))
    };
    Ok((
        read("net.ipv4.tcp_syn_retries")?,
        read("net.ipv4.tcp_syn_linear_timeouts")?,
    ))
}

enum RunningServer {
    Nginx(Nginx),
    Test(JoinHandle<Result<Result<TestServerStats, test_server::ServerError>, NetnsError>>),
}

/// Something run beside the server for the length of the load (a monitor
/// in the server namespace, settings of the client namespaces): started
/// once the server listens, before the gate; finished once the load is
/// done, before anything stops. It stops what it started when dropped.
pub trait BesideServer {
    /// The topology is up and the server listens; `Err` fails the run.
    fn start(&mut self, topology: &Topology) -> Result<(), String>;
    /// The load is done (also on an interrupted run); nothing stopped yet.
    fn finish(&mut self, topology: &Topology);
}

/// Nothing beside the server.
struct NothingBeside;

impl BesideServer for NothingBeside {
    fn start(&mut self, _: &Topology) -> Result<(), String> {
        Ok(())
    }
    fn finish(&mut self, _: &Topology) {}
}

/// Runs a spec. `stop` ends the run early (Ctrl-C): connections in flight
/// are recorded as aborted and everything is torn down as usual.
pub fn run(
    spec: &TestbedSpec,
    spec_text: &str,
    options: &RunOptions,
    stop: Arc<AtomicBool>,
    on_event: &dyn Fn(RunEvent),
) -> Result<RunOutput, RunError> {
    run_beside(spec, spec_text, options, stop, on_event, &mut NothingBeside)
}

/// [`run`] with `beside` started once the server listens and finished
/// once the load is done.
pub fn run_beside(
    spec: &TestbedSpec,
    spec_text: &str,
    options: &RunOptions,
    stop: Arc<AtomicBool>,
    on_event: &dyn Fn(RunEvent),
    beside: &mut dyn BesideServer,
) -> Result<RunOutput, RunError> {
    spec.validate().map_err(RunError::Spec)?;
    if !vantage_sys::privilege::is_root() {
        return Err(topology::TopologyError::NotRoot.into());
    }
    check_tools(spec)?;
    // Checked before anything is built; `run_in_topology` applies them.
    spec.kernel_settings().map_err(RunError::Spec)?;
    let dir = options.dir.clone();
    std::fs::create_dir_all(&dir).map_err(|e| RunError::Output {
        path: dir.clone(),
        message: e.to_string(),
    })?;
    let write = |name: &str, bytes: &[u8]| -> Result<(), RunError> {
        std::fs::write(dir.join(name), bytes).map_err(|e| RunError::Output {
            path: dir.join(name),
            message: e.to_string(),
        })
    };
    write("spec.toml", spec_text.as_bytes())?;

    let tag = options
        .tag
        .clone()
        .unwrap_or_else(|| format!("{:x}", std::process::id()));
    let watchdog = match &options.watchdog {
        Some((program, args)) => {
            let args: Vec<String> = args.iter().map(|a| a.replace("{tag}", &tag)).collect();
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            Some(Watchdog::spawn(program, &args).map_err(step("starting the cleanup watchdog"))?)
        }
        None => None,
    };

    on_event(RunEvent::Phase("building namespaces"));
    let gate_program = options.vantage_program().map(Path::to_path_buf);
    let result = run_in_topology(
        spec,
        &tag,
        &dir,
        gate_program.as_deref(),
        &stop,
        on_event,
        beside,
    );
    // `run_in_topology` has dropped (torn down) the topology by now.
    if let Some(w) = watchdog {
        w.finish(Duration::from_secs(10));
    }
    let output = result?;
    let summary_json = serde_json::to_vec_pretty(&output.summary).map_err(step("summary"))?;
    write("summary.json", &summary_json)?;
    write("summary.txt", render_summary(&output.summary).as_bytes())?;
    if output.summary.interrupted {
        return Err(RunError::Interrupted(dir));
    }
    Ok(output)
}

fn run_in_topology(
    spec: &TestbedSpec,
    tag: &str,
    dir: &Path,
    gate_program: Option<&Path>,
    stop: &Arc<AtomicBool>,
    on_event: &dyn Fn(RunEvent),
    beside: &mut dyn BesideServer,
) -> Result<RunOutput, RunError> {
    let (_profile, settings) = spec.kernel_settings().map_err(RunError::Spec)?;
    let settings = &settings;
    let topo = Topology::build(&TopologySpec {
        clients: spec.clients,
        tag: tag.to_string(),
    })?;
    for client in &topo.clients {
        profiles::apply(client, settings)?;
        let applied = applied_profile(client)?;
        if applied != (settings.syn_retries, settings.linear_timeouts) {
            return Err(RunError::Step {
                what: "client profile",
                message: format!(
                    "{}: wanted tcp_syn_retries={} tcp_syn_linear_timeouts={}, kernel has {applied:?}",
                    client.name(),
                    settings.syn_retries,
                    settings.linear_timeouts
                ),
            });
        }
    }

    // WAN emulator: bind the queue first, then add the rule, so that no
    // packet is queued before someone listens.
    let wan = if spec.wan_is_transparent() {
        None
    } else {
        on_event(RunEvent::Phase("starting the WAN emulator"));
        Some(
            RouterEmulator::start(&topo.router, spec.wan_config(), spec.seed).map_err(
                |message| RunError::Step {
                    what: "WAN emulator",
                    message,
                },
            )?,
        )
    };

    // Server.
    on_event(RunEvent::Phase("starting the server"));
    let listen = spec.server_addr();
    let backend = spec.backend_addr();
    let server_stop = Arc::new(AtomicBool::new(false));
    let server = match &spec.server {
        ServerSpec::Nginx(config) => RunningServer::Nginx(
            Nginx::start(&topo.server, config, backend, &dir.join("nginx"))
                .map_err(step("nginx"))?,
        ),
        ServerSpec::Test(config) => {
            let config = config.clone();
            let seed = spec.seed;
            let flag = server_stop.clone();
            let (ready_tx, ready_rx) = mpsc::channel::<SocketAddr>();
            let handle = topo
                .server
                .spawn("test-server", move || {
                    test_server::run(&config, backend, seed, &flag, &ready_tx)
                })
                .map_err(step("test server thread"))?;
            if ready_rx.recv_timeout(Duration::from_secs(10)).is_err() {
                server_stop.store(true, Ordering::Relaxed);
                let message = match handle.join() {
                    Ok(Ok(Err(e))) => e.to_string(),
                    Ok(Err(e)) => e.to_string(),
                    _ => "did not start listening within 10 s".into(),
                };
                return Err(RunError::Step {
                    what: "test server",
                    message,
                });
            }
            RunningServer::Test(handle)
        }
    };

    // What runs beside the server, once it listens.
    if let Err(message) = beside.start(&topo) {
        match server {
            RunningServer::Nginx(mut nginx) => nginx.stop(),
            RunningServer::Test(handle) => {
                server_stop.store(true, Ordering::Relaxed);
                let _ = handle.join();
            }
        }
        drop(wan);
        return Err(RunError::Step {
            what: "beside the server",
            message,
        });
    }

    // The gate in front of the server, once the server listens.
    let gate = if spec.gate == SynAdmissionSpec::None {
        None
    } else {
        on_event(RunEvent::Phase("starting the gate"));
        match syn_admission::start(&spec.gate, &topo.server, listen, dir, gate_program) {
            Ok(gate) => Some(gate),
            Err(e) => {
                // Stop what runs already; the topology goes when dropped.
                match server {
                    RunningServer::Nginx(mut nginx) => nginx.stop(),
                    RunningServer::Test(handle) => {
                        server_stop.store(true, Ordering::Relaxed);
                        let _ = handle.join();
                    }
                }
                drop(wan);
                return Err(step("gate")(e));
            }
        }
    };

    // Recorders.
    let counters_stop = Arc::new(AtomicBool::new(false));
    let interval = Duration::from_millis(spec.counters.interval_ms);
    let flag = counters_stop.clone();
    let counters_thread = topo
        .server
        .spawn("counters", move || counters::sample_until(interval, &flag))
        .map_err(step("counter thread"))?;
    let mut captures: Vec<Capture> = Vec::new();
    if spec.capture.server {
        captures.push(
            Capture::start(
                &topo.server,
                HOST_IFACE,
                &dir.join("server.pcap"),
                spec.capture.snap_len,
            )
            .map_err(step("server capture"))?,
        );
    }
    if spec.capture.clients {
        for (i, client) in topo.clients.iter().enumerate() {
            captures.push(
                Capture::start(
                    client,
                    HOST_IFACE,
                    &dir.join(format!("client{i}.pcap")),
                    spec.capture.snap_len,
                )
                .map_err(step("client capture"))?,
            );
        }
    }

    // Load: one schedule, dealt to the clients in turn.
    on_event(RunEvent::Phase("running the load"));
    let schedule = spec
        .load
        .arrivals
        .schedule(spec.seed)
        .map_err(|e| RunError::Spec(format!("load.arrivals.{e}")))?;
    let mut per_client: Vec<Vec<Nanos>> = vec![Vec::new(); spec.clients];
    for (i, at) in schedule.iter().enumerate() {
        per_client[i % spec.clients].push(*at);
    }
    let mut load_config: LoadConfig = spec.load.clone();
    if let Some(timer) = settings.connection_timer {
        // macOS's connection timer ends the attempt before the kernel would.
        load_config.frustration_timeout_s =
            load_config.frustration_timeout_s.min(timer.as_secs_f64());
    }
    let expected =
        Duration::from_secs_f64(spec.load.arrivals.duration_s + load_config.frustration_timeout_s);
    on_event(RunEvent::LoadStarted(expected));
    let start = Instant::now();
    let mut load_threads = Vec::new();
    for (index, client) in topo.clients.iter().enumerate() {
        let config = load_config.clone();
        let arrivals = std::mem::take(&mut per_client[index]);
        let flag = stop.clone();
        load_threads.push(
            client
                .spawn(&format!("load-{index}"), move || {
                    load::client::run_schedule(&config, &arrivals, listen, index as u32, &flag)
                })
                .map_err(step("load thread"))?,
        );
    }
    let mut records: Vec<ConnectionRecord> = Vec::new();
    let mut load_error = None;
    for handle in load_threads {
        match handle.join() {
            Ok(Ok(Ok(mut r))) => records.append(&mut r),
            Ok(Ok(Err(e))) => {
                load_error.get_or_insert(e.to_string());
            }
            Ok(Err(e)) => {
                load_error.get_or_insert(e.to_string());
            }
            Err(_) => {
                load_error.get_or_insert("a load thread panicked".into());
            }
        }
    }
    on_event(RunEvent::LoadFinished);
    let _elapsed = start.elapsed();
    beside.finish(&topo);
    records.sort_by_key(|r| (r.scheduled_ns, r.client, r.id));
    // The gate goes first: after the load, nothing more to admit.
    let gate_report = gate.map(|gate| {
        on_event(RunEvent::Phase("stopping the gate"));
        gate.stop()
    });

    // Stop, in reverse order of start.
    on_event(RunEvent::Phase("stopping"));
    // Let the last FINs cross the WAN before the capture stops.
    std::thread::sleep(Duration::from_millis(200));
    let capture_reports: Vec<CaptureReport> = captures.into_iter().map(Capture::stop).collect();
    counters_stop.store(true, Ordering::Relaxed);
    let counter_record = match counters_thread.join() {
        Ok(Ok(Ok(record))) => record,
        Ok(Ok(Err(e))) => return Err(step("server counters")(e)),
        Ok(Err(e)) => return Err(e.into()),
        Err(_) => return Err(step("server counters")("thread panicked")),
    };
    let mut test_server_stats = None;
    let mut nginx_requests = None;
    match server {
        RunningServer::Nginx(mut nginx) => {
            nginx.stop();
            let text = std::fs::read_to_string(nginx.access_log()).unwrap_or_default();
            let (entries, bad) = parse_access_log(&text);
            if !bad.is_empty() {
                eprintln!(
                    "testbed: nginx access log: {} lines did not parse (first: line {})",
                    bad.len(),
                    bad[0]
                );
            }
            nginx_requests = Some(entries.len() as u64);
        }
        RunningServer::Test(handle) => {
            server_stop.store(true, Ordering::Relaxed);
            match handle.join() {
                Ok(Ok(Ok(stats))) => test_server_stats = Some(stats),
                Ok(Ok(Err(e))) => return Err(step("test server")(e)),
                Ok(Err(e)) => return Err(e.into()),
                Err(_) => return Err(step("test server")("thread panicked")),
            }
        }
    }
    let wan_stats = match wan {
        None => None,
        Some(wan) => Some(wan.finish().map_err(|message| RunError::Step {
            what: "WAN emulator",
            message,
        })?),
    };
    drop(topo);
    if let Some(message) = load_error {
        return Err(RunError::Step {
            what: "load generator",
            message,
        });
    }

    // Analysis and files.
    on_event(RunEvent::Phase("writing results"));
    let output_error = |path: PathBuf| move |e: String| RunError::Output { path, message: e };
    let csv_path = dir.join("clients.csv");
    let file = std::fs::File::create(&csv_path)
        .map_err(|e| output_error(csv_path.clone())(e.to_string()))?;
    write_csv(&records, std::io::BufWriter::new(file))
        .map_err(|e| output_error(csv_path.clone())(e.to_string()))?;
    let counters_csv = dir.join("counters.csv");
    counter_record
        .write_csv(&counters_csv)
        .map_err(|e| output_error(counters_csv.clone())(e.to_string()))?;
    let json = |name: &str, value: &dyn erased::Json| -> Result<(), RunError> {
        let path = dir.join(name);
        std::fs::write(&path, value.to_json())
            .map_err(|e| output_error(path.clone())(e.to_string()))
    };
    json("counters.json", &counter_record)?;
    if let Some(stats) = &wan_stats {
        json("wan.json", stats)?;
    }
    if let Some(report) = &gate_report {
        json("gate.json", report)?;
    }
    let audit = if spec.capture.server {
        let audit = syn_audit(&dir.join("server.pcap"), SERVER_ADDR)
            .map_err(step("reading the server capture"))?;
        json("syn-audit.json", &audit)?;
        Some(audit)
    } else {
        None
    };
    let summary = RunSummary {
        name: spec.name.clone(),
        client_profile: spec.client_profile.clone(),
        syn_retries: settings.syn_retries,
        syn_linear_timeouts: settings.linear_timeouts,
        clients: spec.clients,
        load: summarize(&records),
        listen_overflows: counter_record.total("TcpExt.ListenOverflows"),
        listen_drops: counter_record.total("TcpExt.ListenDrops"),
        syn_queue_full_drops: counter_record.total("TcpExt.TCPReqQFullDrop"),
        passive_opens: counter_record.total("Tcp.PassiveOpens"),
        server_timeouts: counter_record.total("TcpExt.TCPTimeouts"),
        server_fast_retransmits: counter_record.total("TcpExt.TCPFastRetrans"),
        server_syns: audit.as_ref().map(|a| a.syns),
        server_unanswered_syns: audit.as_ref().map(|a| a.unanswered_syns),
        server_handshake_segments_dropped: audit.as_ref().map(|a| a.handshake_segments_dropped),
        server_handshake_segments_uncertain: audit.as_ref().map(|a| a.handshake_segments_uncertain),
        capture_kernel_drops: capture_reports.iter().map(|r| r.dropped_by_kernel).sum(),
        wan: wan_stats,
        test_server: test_server_stats,
        nginx_requests,
        gate: gate_report,
        interrupted: stop.load(Ordering::Relaxed),
    };
    Ok(RunOutput {
        dir: dir.to_path_buf(),
        summary,
        records,
        audit,
        counters: counter_record,
    })
}

mod erased {
    /// Serializes any `Serialize` behind a `dyn` (for the result writer).
    pub trait Json {
        fn to_json(&self) -> Vec<u8>;
    }
    impl<T: serde::Serialize> Json for T {
        fn to_json(&self) -> Vec<u8> {
            serde_json::to_vec_pretty(self)
                .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}").into_bytes())
        }
    }
}

/// The summary as a table for people.
pub fn render_summary(s: &RunSummary) -> String {
    let mut out = String::new();
    out.push_str(&format!("run {}: {} client namespace(s), profile {} (tcp_syn_retries={}, tcp_syn_linear_timeouts={})\n\n",
        s.name, s.clients, s.client_profile, s.syn_retries, s.syn_linear_timeouts));
    out.push_str(&s.load.to_string());
    out.push_str("\nserver kernel counters over the run\n");
    out.push_str(&format!("  ListenOverflows   {}\n  ListenDrops       {}\n  TCPReqQFullDrop   {}\n  PassiveOpens      {}\n  TCPTimeouts       {}\n  TCPFastRetrans    {}\n",
        s.listen_overflows, s.listen_drops, s.syn_queue_full_drops, s.passive_opens, s.server_timeouts, s.server_fast_retransmits));
    if let (Some(syns), Some(unanswered), Some(handshake), Some(uncertain)) = (
        s.server_syns,
        s.server_unanswered_syns,
        s.server_handshake_segments_dropped,
        s.server_handshake_segments_uncertain,
    ) {
        let least = unanswered + handshake;
        let expected = if s.gate.as_ref().is_some_and(|g| g.kind != "none") {
            // The gate answers or drops SYNs before the kernel sees them.
            "SYNs without SYN-ACK include the gate's drops and rejects".to_string()
        } else if uncertain == 0 {
            format!("ListenDrops should equal {least}")
        } else {
            format!("ListenDrops should be {least}..={}", least + uncertain)
        };
        out.push_str(&format!(
            "server capture: {syns} client SYNs, {unanswered} without SYN-ACK, {handshake} handshake segments dropped in SYN-RECV, {uncertain} undecidable\n  ({expected}); {} packets dropped by the capture\n",
            s.capture_kernel_drops
        ));
    }
    if let Some(w) = &s.wan {
        out.push_str(&format!(
            "WAN emulator: {} packets seen, kernel queue overflows {}\n",
            w.packets_seen(),
            w.kernel_overflows
        ));
    }
    if let Some(n) = s.nginx_requests {
        out.push_str(&format!("nginx access log: {n} requests\n"));
    }
    if let Some(t) = &s.test_server {
        out.push_str(&format!(
            "test server: {} connections accepted\n",
            t.accepted
        ));
    }
    if let Some(g) = &s.gate {
        out.push_str(&render_gate(g));
    }
    out
}

/// One or two lines about the gate for `summary.txt`.
fn render_gate(g: &SynAdmissionReport) -> String {
    let mut out = format!("gate: {}", g.kind);
    if let (Some(accepted), Some(refused)) = (g.limit_accepted, g.limit_refused) {
        out.push_str(&format!(
            ": iptables accepted {accepted} SYNs within the limit, refused {refused}"
        ));
    }
    if g.kind == "vantage" {
        let ended = match (g.exit_code, g.exit_signal) {
            (Some(code), _) => format!("exit code {code}"),
            (None, Some(signal)) => format!("signal {signal}"),
            _ => "unknown exit".to_string(),
        };
        out.push_str(&format!(
            ": ready after {:.2} s, {ended}{}, {} log lines",
            g.ready_after_s.unwrap_or(0.0),
            if g.killed { " (killed)" } else { "" },
            g.log_lines.unwrap_or(0)
        ));
    }
    out.push('\n');
    if !g.rules_left_behind.is_empty() {
        out.push_str(&format!(
            "  rules left behind (removed): {}\n",
            g.rules_left_behind.join("; ")
        ));
    }
    for problem in &g.problems {
        out.push_str(&format!("  problem: {problem}\n"));
    }
    out
}
