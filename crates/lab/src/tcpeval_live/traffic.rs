//! The monitored HTTP/1.0 fetches (one transaction per connection, as in
//! the paper's Section 4.1) and the bulk cross traffic that loads a path's
//! bottleneck. Written on plain blocking sockets: a fetch is one request
//! and a read to the server's close, and a cross flow is a loop of writes;
//! both end by their deadline.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// Largest response head read, bytes.
const MAX_HEAD_BYTES: usize = 16 * 1024;
/// Socket timeouts of the blocking loops: how often they look at their
/// deadline.
const POLL: Duration = Duration::from_millis(200);

/// How a monitored fetch ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum FetchOutcome {
    /// Status 200 and the whole file.
    Completed,
    /// The connection could not be opened.
    ConnectFailed,
    /// Not finished within the fetch time-out.
    TimedOut,
    /// Reset, closed early, a status other than 200, or a malformed head.
    Broken,
    /// Still running when the test ended: neither completed nor failed.
    Cut,
}

impl FetchOutcome {
    pub fn name(self) -> &'static str {
        match self {
            FetchOutcome::Completed => "completed",
            FetchOutcome::ConnectFailed => "connect-failed",
            FetchOutcome::TimedOut => "timed-out",
            FetchOutcome::Broken => "broken",
            FetchOutcome::Cut => "cut",
        }
    }
}

/// One monitored fetch as the client saw it.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct FetchRecord {
    pub outcome: FetchOutcome,
    /// When the connect started, ns since the UNIX epoch.
    pub start_ns: u64,
    /// Connect to the server's close, seconds.
    pub duration_s: f64,
    pub body_bytes: u64,
}

/// What one client fetches in one test.
#[derive(Clone, Debug)]
pub struct FetchPlan {
    pub target: SocketAddr,
    pub uri: String,
    pub bytes: u64,
    /// No fetch starts after this …
    pub end: Instant,
    /// … and one still running here is cut.
    pub cut: Instant,
    pub gap: Duration,
    pub timeout: Duration,
    pub max_fetches: u32,
}

fn epoch_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Fetches `plan.uri` again and again, one connection each, until
/// `plan.end` or `plan.max_fetches`; runs in the calling thread (which is
/// in the client's namespace).
pub fn fetch_loop(plan: &FetchPlan) -> Vec<FetchRecord> {
    let mut records = Vec::new();
    while Instant::now() < plan.end && records.len() < plan.max_fetches as usize {
        let start_ns = epoch_ns();
        let started = Instant::now();
        let timeout = started + plan.timeout;
        let (mut outcome, body_bytes) = fetch_once(plan, timeout.min(plan.cut));
        if outcome == FetchOutcome::TimedOut && plan.cut < timeout {
            outcome = FetchOutcome::Cut;
        }
        records.push(FetchRecord {
            outcome,
            start_ns,
            duration_s: started.elapsed().as_secs_f64(),
            body_bytes,
        });
        std::thread::sleep(plan.gap);
    }
    records
}

fn fetch_once(plan: &FetchPlan, deadline: Instant) -> (FetchOutcome, u64) {
    let Ok(mut stream) = TcpStream::connect_timeout(&plan.target, plan.timeout) else {
        return (FetchOutcome::ConnectFailed, 0);
    };
    let _ = stream.set_read_timeout(Some(POLL));
    let request = format!("GET {} HTTP/1.0\r\nHost: server\r\n\r\n", plan.uri);
    if stream.write_all(request.as_bytes()).is_err() {
        return (FetchOutcome::Broken, 0);
    }
    let mut head = Vec::new();
    let mut body = 0u64;
    let mut buffer = vec![0u8; 64 * 1024];
    let mut head_done = false;
    loop {
        if Instant::now() >= deadline {
            return (FetchOutcome::TimedOut, body);
        }
        let n = match stream.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(_) => return (FetchOutcome::Broken, body),
        };
        if head_done {
            body += n as u64;
            continue;
        }
        head.extend_from_slice(&buffer[..n]);
        if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            let status_ok = head.starts_with(b"HTTP/1.1 200") || head.starts_with(b"HTTP/1.0 200");
            if !status_ok {
                return (FetchOutcome::Broken, 0);
            }
            body = (head.len() - end - 4) as u64;
            head_done = true;
        } else if head.len() > MAX_HEAD_BYTES {
            return (FetchOutcome::Broken, 0);
        }
    }
    if head_done && body == plan.bytes {
        (FetchOutcome::Completed, body)
    } else {
        (FetchOutcome::Broken, body)
    }
}

/// Bytes the cross traffic carried, and its failures.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct CrossTotals {
    pub flows: u32,
    pub bytes: u64,
    /// Flows that could not be opened or broke before the end.
    pub failed_flows: u32,
}

/// Running cross-traffic flows: senders on the source side, readers on the
/// sink side; [`CrossTraffic::finish`] stops and joins them.
pub struct CrossTraffic {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<bool>>,
    received: Arc<AtomicU64>,
    flows: u32,
    failed_to_open: u32,
}

impl CrossTraffic {
    /// Connects `flows` from the sink side (`connect`, made in the sink's
    /// namespace) to `listener` (in the source's), and sends on each until
    /// `end` (or [`CrossTraffic::finish`]), paced to `rate_mbit` in all
    /// (0: as fast as TCP goes).
    pub fn start(
        listener: &TcpListener,
        connect: impl Fn() -> std::io::Result<TcpStream>,
        flows: u32,
        rate_mbit: f64,
        end: Instant,
    ) -> CrossTraffic {
        let stop = Arc::new(AtomicBool::new(false));
        let received = Arc::new(AtomicU64::new(0));
        let mut threads = Vec::new();
        let mut failed_to_open = 0;
        let per_flow_bytes_per_s =
            (rate_mbit > 0.0).then(|| rate_mbit * 1e6 / 8.0 / f64::from(flows.max(1)));
        let _ = listener.set_nonblocking(false);
        for i in 0..flows {
            let sink = match connect() {
                Ok(s) => s,
                Err(_) => {
                    failed_to_open += 1;
                    continue;
                }
            };
            let Ok((source, _)) = listener.accept() else {
                failed_to_open += 1;
                continue;
            };
            // A flow whose threads cannot start is counted as not opened;
            // a sender already started stops at `end` like the others.
            let stop_send = stop.clone();
            match std::thread::Builder::new()
                .name(format!("cross-send-{i}"))
                .spawn(move || send(source, per_flow_bytes_per_s, end, &stop_send))
            {
                Ok(thread) => threads.push(thread),
                Err(_) => {
                    failed_to_open += 1;
                    continue;
                }
            }
            let stop_read = stop.clone();
            let counter = received.clone();
            match std::thread::Builder::new()
                .name(format!("cross-read-{i}"))
                .spawn(move || read(sink, end, &stop_read, &counter))
            {
                Ok(thread) => threads.push(thread),
                Err(_) => failed_to_open += 1,
            }
        }
        CrossTraffic {
            stop,
            threads,
            received,
            flows,
            failed_to_open,
        }
    }

    /// Stops every flow and joins its threads.
    pub fn finish(self) -> CrossTotals {
        self.stop.store(true, Ordering::Relaxed);
        let mut broken = 0;
        for thread in self.threads {
            if !thread.join().unwrap_or(false) {
                broken += 1;
            }
        }
        CrossTotals {
            flows: self.flows,
            bytes: self.received.load(Ordering::Relaxed),
            failed_flows: self.failed_to_open + broken.min(self.flows),
        }
    }
}

/// Writes until `end` or `stop`; `true` unless the flow broke.
fn send(mut stream: TcpStream, bytes_per_s: Option<f64>, end: Instant, stop: &AtomicBool) -> bool {
    let _ = stream.set_write_timeout(Some(POLL));
    let chunk = vec![0x5au8; 16 * 1024];
    let started = Instant::now();
    let mut sent = 0u64;
    let mut ok = true;
    while Instant::now() < end && !stop.load(Ordering::Relaxed) {
        if let Some(rate) = bytes_per_s {
            let due = started + Duration::from_secs_f64(sent as f64 / rate);
            let now = Instant::now();
            if due > now {
                std::thread::sleep((due - now).min(POLL));
                continue;
            }
        }
        match stream.write(&chunk) {
            Ok(n) => sent += n as u64,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => {
                ok = false;
                break;
            }
        }
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
    ok
}

/// Reads until the sender closes, `end` or `stop`; `true` unless it broke.
fn read(mut stream: TcpStream, end: Instant, stop: &AtomicBool, counter: &AtomicU64) -> bool {
    let _ = stream.set_read_timeout(Some(POLL));
    let mut buffer = vec![0u8; 64 * 1024];
    while Instant::now() < end && !stop.load(Ordering::Relaxed) {
        match stream.read(&mut buffer) {
            Ok(0) => return true,
            Ok(n) => {
                counter.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return stop.load(Ordering::Relaxed),
        }
    }
    true
}
