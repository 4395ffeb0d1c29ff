//! Benchmark of the live SYN gate (`bench/gate/README.md`):
//!
//! 1. **Verdict throughput**: a raw-socket SYN flood (one core) against the
//!    gate (verdict loop on the other core, pinned), each filter with every
//!    SYN queued (`shortcut = false`) and with the kernel-side shortcut,
//!    measured as decisions per second of wall time (the shortcut's
//!    included) and per second of the verdict thread's CPU time (kernel
//!    work done on its behalf included), beside the packets per second the
//!    kernel pushes through iptables `limit` alone with the same flood
//!    (then `DROP`, or `REJECT` with a RST), in the same run. The flood's
//!    source is routed out of a tun device nobody reads, so a RST or
//!    SYN-ACK leaves the host as it would towards a remote client.
//! 2. **Added connect latency**: sequential `connect(2)`s to a listener,
//!    without rules, with an iptables `limit` rule that passes every SYN,
//!    and through the gate with a filter that accepts every SYN; the
//!    difference of medians (and of 99th percentiles) is what each adds.
//!
//! Everything runs in a network namespace private to this process
//! (`unshare(CLONE_NEWNET)` before any thread starts), so the rules and the
//! traffic vanish with it. Needs root.
//!
//! ```sh
//! cargo run --release -p vantage-live --example gate_bench -- [--seconds 3] [--connects 3000] [--json]
//! ```

use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use vantage_live::gate::{
    queue_config, Gate, GateConfig, GateCounts, GateRules, QueueWorker, ShortcutMode, WorkerReport,
};
use vantage_live::synflood::SynFlood;
use vantage_sys::command::{run_command, CommandError};
use vantage_sys::nfqueue::{Message, Queue, Received, Verdict, VerdictBatch};

type Error = Box<dyn std::error::Error>;

const FLOOD_PORT: u16 = 80;
/// The flood's target: an address of a tun interface of this namespace.
const FLOOD_TARGET: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
/// The flood's source: routed out of the tun interface, so that the
/// answers to it (a reject's RST, a SYN-ACK) leave the host as they would
/// towards a remote client, instead of being received again on loopback.
const FLOOD_SOURCE: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 2);
const CONNECT_PORT: u16 = 8080;
/// The flood's pacing asks for more than one core can send.
const FLOOD_RATE: u64 = 5_000_000;

struct Options {
    seconds: f64,
    connects: usize,
    rounds: usize,
    json: bool,
}

fn parse_options() -> Result<Options, Error> {
    let mut options = Options {
        seconds: 3.0,
        connects: 3000,
        rounds: 6,
        json: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--seconds" => options.seconds = value("--seconds")?.parse()?,
            "--connects" => options.connects = value("--connects")?.parse()?,
            "--rounds" => options.rounds = value("--rounds")?.parse()?,
            "--json" => options.json = true,
            other => {
                return Err(format!(
                    "unknown option {other} (known: --seconds S, --connects N, --rounds R, --json)"
                )
                .into())
            }
        }
    }
    if !(options.seconds > 0.0 && options.seconds <= 60.0) {
        return Err("--seconds must be in (0, 60]".into());
    }
    if !(100..=9_000).contains(&options.connects) {
        // iptables `limit` tops out at 10,000/s with a burst of 10,000:
        // more connects than the burst would meet its rate limit.
        return Err("--connects must be in [100, 9000]".into());
    }
    if !(1..=50).contains(&options.rounds) || options.connects / options.rounds < 20 {
        return Err("--rounds must be in [1, 50] with at least 20 connects per round".into());
    }
    Ok(options)
}

fn run(program: &str, args: &[&str]) -> Result<String, Error> {
    match run_command(program, args) {
        Ok(output) => Ok(String::from_utf8_lossy(&output.stdout).into_owned()),
        Err(CommandError::Spawn { source, .. }) => Err(source.into()),
        Err(CommandError::Failed { stderr, .. }) => {
            Err(format!("{program} {}: {stderr}", args.join(" ")).into())
        }
    }
}

fn iptables(args: &[&str]) -> Result<String, Error> {
    Ok(vantage_sys::iptables::run(Path::new("iptables"), args)?)
}

fn pin_to_cpu(cpu: usize) {
    if let Err(e) = vantage_live::gate::pin_current_thread(&[cpu]) {
        eprintln!("gate_bench: cannot pin to CPU {cpu}: {e}; numbers will be noisier");
    }
}

/// CPU time of the calling thread.
fn thread_cpu_time() -> Duration {
    // SAFETY: timespec is plain data, written by the call.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn gate_config(
    kind_and_parameters: &str,
    address: Ipv4Addr,
    port: u16,
) -> Result<GateConfig, Error> {
    let text = format!(
        "[gate]\nqueue = 11\nqueue_maxlen = 65536\n\n[[listeners]]\naddress = \"{address}\"\nport = {port}\n\n[filter]\n{kind_and_parameters}\n"
    );
    Ok(GateConfig::from_toml(&text, "gate_bench")?)
}

/// The gate's verdict loop on its own pinned thread until `stop`.
struct GateThread {
    gate: Arc<Gate>,
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Result<(WorkerReport, Duration, Duration), String>>,
    _rules: GateRules,
}

impl GateThread {
    fn start(config: &GateConfig, cpu: usize) -> Result<GateThread, Error> {
        let filter = config.filter.build()?;
        let gate = Arc::new(Gate::new(
            filter,
            config.listeners.clone(),
            false,
            config.reject_mark,
        ));
        let mut worker = QueueWorker::open(config.queue, config.queue_maxlen, Arc::clone(&gate))?
            .with_busy_poll(config.busy_poll);
        let rules = GateRules::install(config)?;
        gate.attach_shortcut(rules.shortcut());
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let handle = std::thread::spawn(move || {
            pin_to_cpu(cpu);
            let cpu_start = thread_cpu_time();
            let wall_start = Instant::now();
            let report = worker.run(&flag, None).map_err(|e| e.to_string())?;
            Ok((report, thread_cpu_time() - cpu_start, wall_start.elapsed()))
        });
        Ok(GateThread {
            gate,
            stop,
            handle,
            _rules: rules,
        })
    }

    /// Waits until the verdict count (the shortcut's included) has not
    /// moved for 100 ms (at most 60 s); returns when it last moved.
    fn wait_until_idle(&self) -> Instant {
        let count = || {
            self.gate.sync_shortcut();
            self.gate.counters().totals().syns()
        };
        let mut last = count();
        let mut moved = Instant::now();
        let give_up = Instant::now() + Duration::from_secs(60);
        while moved.elapsed() < Duration::from_millis(100) && Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(1));
            let now = count();
            if now != last {
                last = now;
                moved = Instant::now();
            }
        }
        moved
    }

    /// Stops the thread; its report, CPU and wall time, and the gate's
    /// totals (the SYNs of the kernel-side shortcut included) with the
    /// shortcut's share.
    fn stop(self) -> Result<(WorkerReport, Duration, Duration, GateCounts, u64), Error> {
        self.stop.store(true, Ordering::Relaxed);
        let (report, cpu, wall) = self
            .handle
            .join()
            .map_err(|_| "the verdict thread panicked")??;
        self.gate.sync_shortcut();
        let counters = self.gate.counters();
        let by_shortcut = counters.shortcut_dropped.get() + counters.shortcut_rejected.get();
        Ok((report, cpu, wall, counters.totals(), by_shortcut))
    }
}

/// Floods `FLOOD_TARGET`:`FLOOD_PORT` from `FLOOD_SOURCE` as fast as one thread pinned to `cpu`
/// can for `seconds`; returns the SYNs sent and how long it took.
fn flood(seconds: f64, cpu: usize) -> Result<(u64, Duration), Error> {
    let handle = std::thread::spawn(move || {
        pin_to_cpu(cpu);
        let mut flood = SynFlood::open(
            FLOOD_SOURCE,
            1024..=65000,
            SocketAddrV4::new(FLOOD_TARGET, FLOOD_PORT),
        )
        .map_err(|e| e.to_string())?;
        let never = AtomicBool::new(false);
        let start = Instant::now();
        let report = flood.run(FLOOD_RATE, Duration::from_secs_f64(seconds), &never);
        Ok::<_, String>((report.sent, start.elapsed()))
    });
    Ok(handle.join().map_err(|_| "the flood thread panicked")??)
}

/// Packets matched by the rules of `chain` whose text contains `needle`.
fn rule_packets(chain: &str, needle: &str) -> Result<u64, Error> {
    let listing = iptables(&["-w", "-nvxL", chain])?;
    Ok(listing
        .lines()
        .filter(|line| line.contains(needle))
        .filter_map(|line| line.split_whitespace().next()?.parse::<u64>().ok())
        .sum())
}

/// Appends `-p tcp --syn --dport PORT -m limit --limit RATE/second
/// --limit-burst RATE -j ACCEPT` to INPUT.
fn accept_under_limit(port: u16, rate: u32) -> Result<(), Error> {
    let port = port.to_string();
    let limit = format!("{rate}/second");
    let burst = rate.to_string();
    iptables(&[
        "-w",
        "-A",
        "INPUT",
        "-p",
        "tcp",
        "--syn",
        "--dport",
        &port,
        "-m",
        "limit",
        "--limit",
        &limit,
        "--limit-burst",
        &burst,
        "-j",
        "ACCEPT",
    ])?;
    Ok(())
}

struct Throughput {
    name: String,
    sent: u64,
    processed: u64,
    /// Of `processed`, decided by the gate's kernel-side shortcut.
    by_shortcut: Option<u64>,
    wall: Duration,
    cpu: Option<Duration>,
    overruns: u64,
    accepted: u64,
    dropped: u64,
    rejected: u64,
}

impl Throughput {
    fn per_wall_second(&self) -> f64 {
        self.processed as f64 / self.wall.as_secs_f64()
    }
    fn per_cpu_second(&self) -> Option<f64> {
        self.cpu
            .map(|cpu| self.processed as f64 / cpu.as_secs_f64())
    }
}

fn gate_throughput(
    name: String,
    filter: &str,
    shortcut: bool,
    seconds: f64,
) -> Result<Throughput, Error> {
    let mut config = gate_config(filter, FLOOD_TARGET, FLOOD_PORT)?;
    config.shortcut = if shortcut {
        ShortcutMode::On
    } else {
        ShortcutMode::Off
    };
    let gate = GateThread::start(&config, 0)?;
    let flood_start = Instant::now();
    let (sent, _) = flood(seconds, 1)?;
    let last_verdict = gate.wait_until_idle();
    let (_, cpu, _, totals, by_shortcut) = gate.stop()?;
    Ok(Throughput {
        name,
        sent,
        processed: totals.syns(),
        by_shortcut: Some(by_shortcut),
        wall: last_verdict - flood_start,
        cpu: Some(cpu),
        overruns: totals.overruns,
        accepted: totals.accepted,
        dropped: totals.dropped,
        rejected: totals.rejected,
    })
}

/// iptables `limit` alone: SYNs over the limit meet `target` (`DROP`, or
/// `REJECT` with a RST: what a reject costs the kernel, gate or not).
fn iptables_limit_throughput(seconds: f64, target: &[&str]) -> Result<Throughput, Error> {
    accept_under_limit(FLOOD_PORT, 120)?;
    let port = FLOOD_PORT.to_string();
    let mut rule = vec![
        "-w", "-A", "INPUT", "-p", "tcp", "--syn", "--dport", &port, "-j",
    ];
    rule.extend_from_slice(target);
    iptables(&rule)?;
    let sent = flood(seconds, 1);
    let accepted = rule_packets("INPUT", "limit:");
    let refused = rule_packets("INPUT", target[0]);
    iptables(&["-w", "-F", "INPUT"])?;
    let ((sent, wall), accepted, refused) = (sent?, accepted?, refused?);
    let rejecting = target[0] == "REJECT";
    Ok(Throughput {
        name: if rejecting {
            "iptables limit + REJECT (tcp-reset)"
        } else {
            "iptables limit + DROP"
        }
        .to_string(),
        sent,
        processed: accepted + refused,
        by_shortcut: None,
        wall,
        cpu: None,
        overruns: 0,
        accepted,
        dropped: if rejecting { 0 } else { refused },
        rejected: if rejecting { refused } else { 0 },
    })
}

/// Connect latency of one path, pooled over every round.
struct Latency {
    name: &'static str,
    median_us: f64,
    p90_us: f64,
    p99_us: f64,
    /// The median of each round, to show the spread between rounds.
    round_medians_us: Vec<f64>,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// `connects` sequential connects to the listener (socket, connect, close;
/// the connect alone is timed), after a few unmeasured ones that warm
/// caches and routes.
fn connect_samples(connects: usize) -> Result<Vec<f64>, Error> {
    let target = SocketAddrV4::new(Ipv4Addr::LOCALHOST, CONNECT_PORT);
    let mut samples = Vec::with_capacity(connects);
    for i in 0..connects + 10 {
        let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
        let start = Instant::now();
        socket.connect(&target.into())?;
        let elapsed = start.elapsed();
        drop(socket);
        if i >= 10 {
            samples.push(elapsed.as_secs_f64() * 1e6);
        }
    }
    Ok(samples)
}

/// What stands between the client's SYN and the listener.
#[derive(Clone, Copy)]
enum ConnectPath {
    NoRules,
    /// iptables `limit` that passes every SYN.
    IptablesLimit,
    /// The gate's NFQUEUE rule with the least possible reader: a loop on
    /// `cpu` that accepts every packet as soon as it arrives, no filter.
    BareQueue {
        cpu: usize,
    },
    /// The gate's verdict loop with a filter that accepts every SYN.
    Gate {
        cpu: usize,
        busy_poll_us: u64,
    },
    /// The same on the client's core without the shortcut's rule.
    GateQueueOnly,
}

impl ConnectPath {
    fn name(self) -> &'static str {
        match self {
            ConnectPath::NoRules => "no rules",
            ConnectPath::IptablesLimit => "iptables limit (passes all)",
            ConnectPath::BareQueue { .. } => {
                "bare NFQUEUE loop, same core (accept all, no filter: the floor)"
            }
            ConnectPath::GateQueueOnly => {
                "gate, tbf accepting all, same core, shortcut = false (no bpf rule)"
            }
            ConnectPath::Gate { cpu: 0, .. } => {
                "gate, tbf accepting all, same core (as with cpu_fanout)"
            }
            ConnectPath::Gate {
                busy_poll_us: 0, ..
            } => "gate, tbf accepting all, other core",
            ConnectPath::Gate { .. } => "gate, tbf accepting all, other core, busy_poll_us = 500",
        }
    }
}

/// A path set up for measuring; torn down by `finish`.
enum Installed {
    Nothing,
    Iptables,
    Bare(BareQueue),
    Gate(GateThread),
}

fn install(path: ConnectPath) -> Result<Installed, Error> {
    Ok(match path {
        ConnectPath::NoRules => Installed::Nothing,
        ConnectPath::IptablesLimit => {
            // 10,000/s with a burst of 10,000: every connect passes.
            accept_under_limit(CONNECT_PORT, 10_000)?;
            Installed::Iptables
        }
        ConnectPath::BareQueue { cpu } => Installed::Bare(BareQueue::start(cpu)?),
        ConnectPath::GateQueueOnly => {
            let mut config = gate_config(
                "kind = \"tbf\"\nbucket_size = 1000000\nrefill_rate = 1000000",
                Ipv4Addr::LOCALHOST,
                CONNECT_PORT,
            )?;
            config.shortcut = ShortcutMode::Off;
            Installed::Gate(GateThread::start(&config, 0)?)
        }
        ConnectPath::Gate { cpu, busy_poll_us } => {
            let mut config = gate_config(
                "kind = \"tbf\"\nbucket_size = 1000000\nrefill_rate = 1000000",
                Ipv4Addr::LOCALHOST,
                CONNECT_PORT,
            )?;
            config.busy_poll = Duration::from_micros(busy_poll_us);
            Installed::Gate(GateThread::start(&config, cpu)?)
        }
    })
}

impl Installed {
    /// Removes the path; `connects` is how many SYNs it should have seen.
    fn finish(self, connects: usize) -> Result<(), Error> {
        match self {
            Installed::Nothing => Ok(()),
            Installed::Iptables => {
                iptables(&["-w", "-F", "INPUT"])?;
                Ok(())
            }
            Installed::Bare(bare) => {
                let accepted = bare.stop()?;
                if accepted < connects as u64 {
                    return Err(format!(
                        "the bare loop saw {accepted} packets for {connects} connects"
                    )
                    .into());
                }
                Ok(())
            }
            Installed::Gate(gate) => {
                let (report, _, _, _, _) = gate.stop()?;
                if report.counts.accepted < connects as u64 {
                    return Err(format!(
                        "the gate saw {} SYNs for {connects} connects",
                        report.counts.accepted
                    )
                    .into());
                }
                Ok(())
            }
        }
    }
}

/// The least an NFQUEUE reader can do: receive, accept, send, on a pinned
/// thread, with the gate's own queue settings and rule.
struct BareQueue {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Result<u64, String>>,
    _rules: GateRules,
}

impl BareQueue {
    fn start(cpu: usize) -> Result<BareQueue, Error> {
        let config = gate_config(
            "kind = \"tbf\"\nbucket_size = 1\nrefill_rate = 1",
            Ipv4Addr::LOCALHOST,
            CONNECT_PORT,
        )?;
        let mut queue = Queue::open(&queue_config(config.queue, config.queue_maxlen))?;
        let rules = GateRules::install(&config)?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let handle = std::thread::spawn(move || {
            pin_to_cpu(cpu);
            let mut verdicts = VerdictBatch::new(queue.queue_num());
            let mut accepted = 0u64;
            while !flag.load(Ordering::Relaxed) {
                let received = queue
                    .recv_wait(Duration::from_millis(50))
                    .map_err(|e| e.to_string())?;
                if let Some(Received::Messages(messages)) = received {
                    for message in messages.flatten() {
                        if let Message::Packet(packet) = message {
                            verdicts.push(packet.packet_id, Verdict::Accept);
                            accepted += 1;
                        }
                    }
                }
                if !verdicts.is_empty() {
                    queue
                        .send_verdicts(&mut verdicts)
                        .map_err(|e| e.to_string())?;
                }
            }
            Ok(accepted)
        });
        Ok(BareQueue {
            stop,
            handle,
            _rules: rules,
        })
    }

    fn stop(self) -> Result<u64, Error> {
        self.stop.store(true, Ordering::Relaxed);
        Ok(self.handle.join().map_err(|_| "the bare loop panicked")??)
    }
}

/// Every path in turn, `rounds` times, `connects / rounds` connects each
/// time: slow drifts of a shared machine hit every path alike.
fn connect_latencies(
    paths: &[ConnectPath],
    connects: usize,
    rounds: usize,
) -> Result<Vec<Latency>, Error> {
    let per_round = connects / rounds;
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); paths.len()];
    let mut round_medians: Vec<Vec<f64>> = vec![Vec::new(); paths.len()];
    for _ in 0..rounds {
        for (i, &path) in paths.iter().enumerate() {
            let installed = install(path)?;
            let measured = connect_samples(per_round);
            installed.finish(per_round)?;
            let mut round = measured?;
            round.sort_by(f64::total_cmp);
            round_medians[i].push(percentile(&round, 50.0));
            samples[i].extend(round);
        }
    }
    Ok(paths
        .iter()
        .zip(samples)
        .zip(round_medians)
        .map(|((path, mut all), medians)| {
            all.sort_by(f64::total_cmp);
            Latency {
                name: path.name(),
                median_us: percentile(&all, 50.0),
                p90_us: percentile(&all, 90.0),
                p99_us: percentile(&all, 99.0),
                round_medians_us: medians,
            }
        })
        .collect())
}

fn main() -> Result<(), Error> {
    let options = parse_options()?;
    if !vantage_sys::privilege::is_root() {
        return Err("gate_bench needs root (network namespace, iptables, NFQUEUE)".into());
    }
    // SAFETY: called before any thread is started; affects this process.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        return Err(format!("unshare(CLONE_NEWNET): {}", std::io::Error::last_os_error()).into());
    }
    run("ip", &["link", "set", "lo", "up"])?;
    // The flood's target and the way out for the answers to its source.
    // A tun device nobody reads: what the kernel sends through it is
    // counted and freed, as a NIC would send it away.
    run("ip", &["tuntap", "add", "bench0", "mode", "tun"])?;
    run("ip", &["link", "set", "bench0", "up"])?;
    run(
        "ip",
        &[
            "addr",
            "add",
            &format!("{FLOOD_TARGET}/24"),
            "dev",
            "bench0",
        ],
    )?;
    let [a, b, c, _] = FLOOD_SOURCE.octets();
    run(
        "ip",
        &[
            "route",
            "add",
            &format!("{a}.{b}.{c}.0/24"),
            "dev",
            "bench0",
        ],
    )?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        return Err("gate_bench needs two CPUs (flood on one, verdicts on the other)".into());
    }

    // A listener that accepts and closes, for the latency part (and so
    // that accepted flood SYNs to another port meet a closed port's RST).
    let listener = TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, CONNECT_PORT))?;
    std::thread::spawn(move || {
        pin_to_cpu(1);
        for stream in listener.incoming() {
            drop(stream);
        }
    });

    let seconds = options.seconds;
    let (baseline_sent, baseline_wall) = flood(seconds, 1)?;
    let mut throughputs = vec![
        iptables_limit_throughput(seconds, &["DROP"])?,
        iptables_limit_throughput(seconds, &["REJECT", "--reject-with", "tcp-reset"])?,
    ];
    let filters = [
        (
            "tbf (W = 120, r_t = 120/s)",
            "kind = \"tbf\"\nbucket_size = 120\nrefill_rate = 120",
        ),
        (
            "tbf-reject (W = 120, r_t = 120/s)",
            "kind = \"tbf-reject\"\nbucket_size = 120\nrefill_rate = 120",
        ),
        (
            "abacus (W = 120, r_t = 120/s, S = 50 s, linux-6.5)",
            "kind = \"abacus\"\nbucket_size = 120\nrefill_rate = 120\nwindow_s = 50\npopulation = \"linux-6.5\"",
        ),
        (
            "greedy (W = 120, r_t = 120/s, linux-6.5)",
            "kind = \"greedy\"\nbucket_size = 120\nrefill_rate = 120\npopulation = \"linux-6.5\"",
        ),
    ];
    // Each filter with every SYN queued (as before the shortcut), then
    // with the shortcut.
    for (name, filter) in filters {
        for shortcut in [false, true] {
            let name = if shortcut {
                format!("gate, {name}")
            } else {
                format!("gate, {name}, shortcut = false")
            };
            throughputs.push(gate_throughput(name, filter, shortcut, seconds)?);
        }
    }

    // The client runs on CPU 0, the listener on CPU 1; the verdict loop
    // on the client's core (where `cpu_fanout` puts the thread of the
    // queue that gets the client's SYNs) or on the other one (sleeping,
    // or busy-polling).
    pin_to_cpu(0);
    let latencies = connect_latencies(
        &[
            ConnectPath::NoRules,
            ConnectPath::IptablesLimit,
            ConnectPath::BareQueue { cpu: 0 },
            ConnectPath::GateQueueOnly,
            ConnectPath::Gate {
                cpu: 0,
                busy_poll_us: 0,
            },
            ConnectPath::Gate {
                cpu: 1,
                busy_poll_us: 0,
            },
            ConnectPath::Gate {
                cpu: 1,
                busy_poll_us: 500,
            },
        ],
        options.connects,
        options.rounds,
    )?;

    let iptables_rate = throughputs[0].per_wall_second();
    let none = &latencies[0];
    if options.json {
        let doc = serde_json::json!({
            "seconds": seconds,
            "flood_syns_per_s_no_rules": baseline_sent as f64 / baseline_wall.as_secs_f64(),
            "throughput": throughputs.iter().map(|t| serde_json::json!({
                "name": t.name,
                "sent": t.sent,
                "processed": t.processed,
                "by_shortcut": t.by_shortcut,
                "per_wall_second": t.per_wall_second(),
                "per_cpu_second": t.per_cpu_second(),
                "ratio_to_iptables_limit": t.per_wall_second() / iptables_rate,
                "overruns": t.overruns,
                "accepted": t.accepted,
                "dropped": t.dropped,
                "rejected": t.rejected,
            })).collect::<Vec<_>>(),
            "connect_latency": latencies.iter().map(|l| serde_json::json!({
                "name": l.name,
                "median_us": l.median_us,
                "p90_us": l.p90_us,
                "p99_us": l.p99_us,
                "added_median_us": l.median_us - none.median_us,
                "added_p99_us": l.p99_us - none.p99_us,
                "round_medians_us": l.round_medians_us,
            })).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }
    println!(
        "flood alone (no rules): {:.0} SYNs/s from one core for {seconds} s",
        baseline_sent as f64 / baseline_wall.as_secs_f64()
    );
    println!();
    println!("| SYN path | SYNs sent | SYNs decided | of them by the shortcut | per wall s | per CPU s of the verdict thread | ratio to iptables limit | overruns (fail-open) | accept / drop / reject |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---|");
    for t in &throughputs {
        println!(
            "| {} | {} | {} | {} | {:.0} | {} | {:.2} | {} | {} / {} / {} |",
            t.name,
            t.sent,
            t.processed,
            t.by_shortcut.map_or("–".to_string(), |n| n.to_string()),
            t.per_wall_second(),
            t.per_cpu_second()
                .map_or("–".to_string(), |r| format!("{r:.0}")),
            t.per_wall_second() / iptables_rate,
            t.overruns,
            t.accepted,
            t.dropped,
            t.rejected,
        );
    }
    println!();
    println!(
        "{} connects per path in {} interleaved rounds",
        options.connects / options.rounds * options.rounds,
        options.rounds
    );
    println!();
    println!("| connect path | median µs | p90 µs | p99 µs | added median µs | added p99 µs | round medians µs |");
    println!("|---|---:|---:|---:|---:|---:|---|");
    for l in &latencies {
        let rounds: Vec<String> = l
            .round_medians_us
            .iter()
            .map(|m| format!("{m:.1}"))
            .collect();
        println!(
            "| {} | {:.1} | {:.1} | {:.1} | {:+.1} | {:+.1} | {} |",
            l.name,
            l.median_us,
            l.p90_us,
            l.p99_us,
            l.median_us - none.median_us,
            l.p99_us - none.p99_us,
            rounds.join(" "),
        );
    }
    Ok(())
}
