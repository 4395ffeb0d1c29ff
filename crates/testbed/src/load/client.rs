//! The open-loop HTTP load generator: starts each connection at its
//! scheduled time and records client-side ground truth for it.
//!
//! Certes (Section 4) checked its server-side estimate against response
//! times measured at the clients, after fixing WebStone so that its
//! frustration timeout was "a true wall clock" one rather than a `select()`
//! timeout; the Abacus paper's client-perceived delay includes every second
//! spent re-sending dropped SYNs. This generator measures exactly that:
//!
//! * every arrival of the [`ArrivalConfig`] schedule becomes one task at its
//!   scheduled time (open loop: a slow server does not slow the arrivals);
//! * `start` is taken just before a non-blocking `connect(2)`, so SYN
//!   retransmission time is inside the measured response time;
//! * the frustration timeout is a wall-clock deadline on the whole
//!   connection from `start`, enforced whatever the connection is doing —
//!   waiting in SYN-SENT, writing, or reading;
//! * SYN retransmissions come from the kernel itself: `tcpi_total_retrans`
//!   of `TCP_INFO` (the SYN timer goes through `tcp_retransmit_skb`), read
//!   when the handshake completes, before any data, or when the connection
//!   is given up (docs/testbed.md, "SYN retransmission counts", says how it
//!   was verified);
//! * every arrival yields exactly one [`ConnectionRecord`], whatever
//!   happens: `max_concurrent` reached (not-started), the `stop` flag set
//!   (aborted or not-started), a task failing (failed). `records.len()`
//!   always equals the number of arrivals.
//!
//! HTTP: with `requests_per_connection = 1` each connection sends one
//! HTTP/1.0 `GET` with `Connection: close`; with N > 1 it sends N HTTP/1.1
//! requests one after the other on one persistent connection, the last with
//! `Connection: close`, so the server closes first and keeps the TIME-WAIT
//! state (the client's ephemeral ports stay free at 1,000 connections per
//! second). Responses are delimited by `Content-Length`, by chunked transfer
//! coding (decoded minimally: chunk sizes and trailers are skipped, chunk
//! extensions ignored), or by the end of the connection; `1xx` interim
//! responses are skipped; a status ≥ 400 ends the connection as
//! `http-error`.
//!
//! Sockets are created in the calling thread by its own current-thread
//! tokio runtime, so a caller that entered a client network namespace with
//! `setns(2)` gets every socket in that namespace.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use tokio::io::{AsyncReadExt, AsyncWriteExt, Interest};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, watch, OwnedSemaphorePermit, Semaphore};
use tokio::time::{sleep_until, timeout_at, Instant};
use vantage_core::Nanos;
use vantage_sys::socket::set_int_option;

use super::arrivals::{ArrivalConfig, ArrivalError};
use super::record::{ConnectionRecord, Outcome};

/// Largest accepted `requests_per_connection`.
pub const MAX_REQUESTS_PER_CONNECTION: u32 = 10_000;
/// Largest accepted `max_concurrent`.
pub const MAX_CONCURRENT_LIMIT: usize = 1_000_000;
/// Largest accepted `frustration_timeout_s`: one hour.
pub const MAX_FRUSTRATION_TIMEOUT_S: f64 = 3_600.0;
/// File descriptors kept free beyond `max_concurrent` for everything else.
const SPARE_FILES: u64 = 128;
/// A response header larger than this is an `http-error`.
const MAX_RESPONSE_HEAD: usize = 64 * 1024;
/// A chunk-size or trailer line longer than this is an `http-error`.
const MAX_CHUNK_LINE: usize = 4 * 1024;
/// Bytes asked of each `read(2)`.
const READ_CHUNK: usize = 16 * 1024;
/// Interim (1xx) responses skipped before the real one, at most.
const MAX_INTERIM_RESPONSES: usize = 8;
/// How often the `stop` flag is polled.
const STOP_POLL: Duration = Duration::from_millis(10);
/// After the last response of a `Connection: close` exchange, how long the
/// client waits for the server's FIN before closing itself.
const CLOSE_WAIT: Duration = Duration::from_secs(1);
/// Slack past the last deadline before a connection task still running is
/// recorded as aborted (it never should be: every task has its own
/// deadline).
const RUN_GRACE: Duration = Duration::from_secs(5);

/// What the load generator does (TOML: the keys below at top level, plus the
/// `[arrivals]` table). The target address is not part of it: the caller
/// passes it to [`run`]. For example, the target run of 1,000 connections
/// per second for a minute:
///
/// ```toml
/// path = "/file-10k"
/// requests_per_connection = 1
/// frustration_timeout_s = 21
/// max_concurrent = 10000
///
/// [arrivals]
/// duration_s = 60
/// max_connections = 60000
///
/// [arrivals.pattern]
/// kind = "constant"      # or "on-off" (rate, on_s, off_s) or "mwm"
/// rate = 1000            # (mean, std_dev, hurst, scales)
/// poisson = false
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LoadConfig {
    /// When connections start.
    pub arrivals: ArrivalConfig,
    /// 1: one HTTP/1.0 request per connection (`Connection: close`).
    /// N > 1: N HTTP/1.1 requests in sequence on one persistent connection.
    /// In [1, 10000]; default 1.
    pub requests_per_connection: u32,
    /// Request target, e.g. `/file-10k`; must start with `/`, printable
    /// ASCII without spaces, at most 8 KiB. Default `/`.
    pub path: String,
    /// `Host` header; default: the target address (`ip:port`).
    pub host: Option<String>,
    /// Seconds from `start` after which the client gives up on the whole
    /// connection (outcome `frustrated`). In (0, 3600]; default 21, the
    /// Certes experiments' default.
    pub frustration_timeout_s: f64,
    /// Most connections open at once; an arrival finding this many open is
    /// recorded as `not-started`. In [1, 1000000]; default 10000.
    pub max_concurrent: usize,
    /// Source address to bind (the port is still chosen by the kernel at
    /// `connect`); default: the kernel's choice.
    pub local_ip: Option<Ipv4Addr>,
    /// SYN retries before the kernel gives up (`TCP_SYNCNT`, per socket);
    /// default: the namespace's `net.ipv4.tcp_syn_retries`. In [1, 127].
    /// The kernel gives up once the time its exponential-backoff model
    /// allots to this many retries has passed ((2^(n+1) − 1) × the initial
    /// RTO); under `net.ipv4.tcp_syn_linear_timeouts` the first SYNs are
    /// re-sent every second meanwhile, so more retransmissions than `n` can
    /// happen (measured on Linux 6.18: `n = 1` gives two, and `timed-out`
    /// after 3 s).
    pub syn_retries: Option<u8>,
}

impl Default for LoadConfig {
    fn default() -> Self {
        LoadConfig {
            arrivals: ArrivalConfig::default(),
            requests_per_connection: 1,
            path: "/".to_string(),
            host: None,
            frustration_timeout_s: 21.0,
            max_concurrent: 10_000,
            local_ip: None,
            syn_retries: None,
        }
    }
}

/// Why a load run could not be made; configuration errors name the key.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{key} must be {allowed}, got {value}")]
    Config {
        key: &'static str,
        allowed: &'static str,
        value: String,
    },
    #[error(transparent)]
    Arrivals(#[from] ArrivalError),
    #[error("{0}")]
    File(#[from] vantage_core::config::ConfigError),
    #[error(
        "max_concurrent = {max_concurrent} needs {needed} open files, but \
         RLIMIT_NOFILE allows only {limit} and cannot be raised: raise the \
         hard limit (ulimit -Hn) or lower max_concurrent"
    )]
    FileLimit {
        max_concurrent: usize,
        needed: u64,
        limit: u64,
    },
    #[error("cannot start the load generator's tokio runtime: {0}")]
    Runtime(#[source] io::Error),
}

fn config_error(key: &'static str, allowed: &'static str, value: impl ToString) -> LoadError {
    LoadError::Config {
        key,
        allowed,
        value: value.to_string(),
    }
}

fn is_header_safe(text: &str) -> bool {
    text.bytes().all(|b| b.is_ascii_graphic())
}

impl LoadConfig {
    /// Parses TOML text; unknown keys are errors. Call [`validate`]
    /// (or [`run`], which does) before use.
    ///
    /// [`validate`]: LoadConfig::validate
    pub fn from_toml(text: &str) -> Result<Self, LoadError> {
        vantage_core::config::Checker::<LoadError>::new("load configuration", text).deserialize()
    }

    /// Checks every key's range, the arrival schedule's size, and that
    /// `local_ip` matches the target's address family.
    pub fn validate(&self, target: SocketAddr) -> Result<(), LoadError> {
        self.arrivals.validate()?;
        if !(1..=MAX_REQUESTS_PER_CONNECTION).contains(&self.requests_per_connection) {
            return Err(config_error(
                "requests_per_connection",
                "in [1, 10000]",
                self.requests_per_connection,
            ));
        }
        if !self.path.starts_with('/') || self.path.len() > 8192 || !is_header_safe(&self.path) {
            return Err(config_error(
                "path",
                "a string starting with '/', printable ASCII without spaces, at most 8192 bytes",
                format!("{:?}", self.path),
            ));
        }
        if let Some(host) = &self.host {
            if host.is_empty() || host.len() > 255 || !is_header_safe(host) {
                return Err(config_error(
                    "host",
                    "1 to 255 printable ASCII characters without spaces",
                    format!("{host:?}"),
                ));
            }
        }
        let timeout = self.frustration_timeout_s;
        if !(timeout.is_finite() && timeout > 0.0 && timeout <= MAX_FRUSTRATION_TIMEOUT_S) {
            return Err(config_error(
                "frustration_timeout_s",
                "in (0, 3600] seconds",
                timeout,
            ));
        }
        if !(1..=MAX_CONCURRENT_LIMIT).contains(&self.max_concurrent) {
            return Err(config_error(
                "max_concurrent",
                "in [1, 1000000]",
                self.max_concurrent,
            ));
        }
        if let Some(retries) = self.syn_retries {
            if !(1..=127).contains(&retries) {
                return Err(config_error("syn_retries", "in [1, 127]", retries));
            }
        }
        if self.local_ip.is_some() && !target.is_ipv4() {
            return Err(config_error(
                "local_ip",
                "absent when the target is an IPv6 address",
                target,
            ));
        }
        Ok(())
    }

    /// The frustration timeout as a duration.
    pub fn frustration_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.frustration_timeout_s)
    }

    /// The bytes of request `index` (0-based) of a connection.
    fn request(&self, target: SocketAddr, last: bool) -> Vec<u8> {
        let host = self.host.clone().unwrap_or_else(|| target.to_string());
        let (version, connection) = if self.requests_per_connection == 1 {
            ("HTTP/1.0", "Connection: close\r\n")
        } else if last {
            ("HTTP/1.1", "Connection: close\r\n")
        } else {
            ("HTTP/1.1", "")
        };
        format!(
            "GET {} {version}\r\nHost: {host}\r\nUser-Agent: vantage-load\r\nAccept: */*\r\n{connection}\r\n",
            self.path
        )
        .into_bytes()
    }
}

/// Nanoseconds since the UNIX epoch, `CLOCK_REALTIME` (the clock of packet
/// capture timestamps).
pub fn realtime_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Raises the soft (and if needed, and allowed, the hard) `RLIMIT_NOFILE`
/// to at least `needed`. Returns the resulting soft limit.
pub fn raise_file_limit(needed: u64) -> io::Result<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the valid, owned struct.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if limit.rlim_cur >= needed {
        return Ok(limit.rlim_cur);
    }
    let wanted = libc::rlimit {
        rlim_cur: needed,
        rlim_max: limit.rlim_max.max(needed),
    };
    // SAFETY: setrlimit reads the valid, owned struct.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &wanted) } == 0 {
        return Ok(needed);
    }
    // Not allowed to raise the hard limit: take as much as it allows.
    let within_hard = libc::rlimit {
        rlim_cur: limit.rlim_max,
        rlim_max: limit.rlim_max,
    };
    // SAFETY: as above.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &within_hard) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(limit.rlim_max)
}

/// `tcpi_total_retrans` of the socket: every segment the kernel
/// retransmitted on it, SYNs included. `None` if `TCP_INFO` cannot be read.
pub fn tcp_total_retransmissions(fd: RawFd) -> Option<u32> {
    // SAFETY: tcp_info is plain old data; all-zero is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut length = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `length` bytes into `info`, which is
    // that large, and stores the written length in `length`.
    let status = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut length,
        )
    };
    let needed =
        std::mem::offset_of!(libc::tcp_info, tcpi_total_retrans) + std::mem::size_of::<u32>();
    (status == 0 && length as usize >= needed).then_some(info.tcpi_total_retrans)
}

/// Runs the load described by `config` against `target` and returns one
/// record per scheduled arrival, sorted by `id`.
///
/// Blocking: builds its own current-thread tokio runtime in the calling
/// thread, so every socket lives in the caller's network namespace. The
/// arrival schedule comes from `seed` (give each client its own). Raises
/// `RLIMIT_NOFILE` to `max_concurrent` + 128 if needed. Ends at the last
/// arrival plus the frustration timeout at the latest, or soon (≤ 10 ms
/// polling) after `stop` is set: then connections in flight are recorded as
/// `aborted` and arrivals not yet due as `not-started`.
pub fn run(
    config: &LoadConfig,
    target: SocketAddr,
    client_index: u32,
    seed: u64,
    stop: &AtomicBool,
) -> Result<Vec<ConnectionRecord>, LoadError> {
    config.validate(target)?;
    let schedule = config.arrivals.schedule(seed)?;
    run_schedule(config, &schedule, target, client_index, stop)
}

/// Like [`run`], with the arrival offsets given instead of generated from
/// `config.arrivals`: the testbed deals one schedule out to several client
/// namespaces.
pub fn run_schedule(
    config: &LoadConfig,
    schedule: &[Nanos],
    target: SocketAddr,
    client_index: u32,
    stop: &AtomicBool,
) -> Result<Vec<ConnectionRecord>, LoadError> {
    config.validate(target)?;
    let needed = config.max_concurrent as u64 + SPARE_FILES;
    let limit = raise_file_limit(needed).unwrap_or(0);
    if limit < needed {
        return Err(LoadError::FileLimit {
            max_concurrent: config.max_concurrent,
            needed,
            limit,
        });
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(LoadError::Runtime)?;
    let shared = Arc::new(Shared {
        target,
        client: client_index,
        local_ip: config.local_ip,
        syn_retries: config.syn_retries,
        frustration_timeout: config.frustration_timeout(),
        requests_per_connection: config.requests_per_connection,
        request: config.request(target, false),
        last_request: config.request(target, true),
    });
    let offsets: Vec<u64> = schedule.iter().map(|t| t.as_nanos()).collect();
    Ok(runtime.block_on(drive(shared, &offsets, config.max_concurrent, stop)))
}

/// What every connection task of one run shares.
struct Shared {
    target: SocketAddr,
    client: u32,
    local_ip: Option<Ipv4Addr>,
    syn_retries: Option<u8>,
    frustration_timeout: Duration,
    requests_per_connection: u32,
    /// Every request but the last.
    request: Vec<u8>,
    /// The last request (`Connection: close`).
    last_request: Vec<u8>,
}

/// Schedules every arrival, then collects every record.
async fn drive(
    shared: Arc<Shared>,
    offsets: &[u64],
    max_concurrent: usize,
    stop: &AtomicBool,
) -> Vec<ConnectionRecord> {
    let (stop_sender, stop_receiver) = watch::channel(false);
    let (done_sender, done_receiver) = oneshot::channel::<()>();
    let watcher = watch_stop_flag(stop, stop_sender, done_receiver);
    let work = async {
        let records = schedule_and_collect(&shared, offsets, max_concurrent, stop_receiver).await;
        let _ = done_sender.send(());
        records
    };
    let ((), records) = tokio::join!(watcher, work);
    records
}

/// Copies the caller's `stop` flag into a watch channel every [`STOP_POLL`]
/// until it is set or the run is done.
async fn watch_stop_flag(
    stop: &AtomicBool,
    stop_sender: watch::Sender<bool>,
    mut done: oneshot::Receiver<()>,
) {
    let mut ticks = tokio::time::interval(STOP_POLL);
    loop {
        tokio::select! {
            _ = ticks.tick() => {
                if stop.load(Ordering::Relaxed) {
                    let _ = stop_sender.send(true);
                    return;
                }
            }
            _ = &mut done => return,
        }
    }
}

/// Resolves once the stop channel says stop; never if its sender is gone.
async fn stopped(receiver: &mut watch::Receiver<bool>) {
    if receiver.wait_for(|stop| *stop).await.is_err() {
        std::future::pending::<()>().await;
    }
}

async fn schedule_and_collect(
    shared: &Arc<Shared>,
    offsets: &[u64],
    max_concurrent: usize,
    mut stop: watch::Receiver<bool>,
) -> Vec<ConnectionRecord> {
    let origin = Instant::now();
    let origin_realtime = realtime_ns();
    let slots = Arc::new(Semaphore::new(max_concurrent));
    let mut records = Vec::with_capacity(offsets.len());
    let mut in_flight = Vec::new();
    for (index, &offset) in offsets.iter().enumerate() {
        let id = index as u64;
        let scheduled_ns = origin_realtime.saturating_add(offset);
        let due = origin + Duration::from_nanos(offset);
        if !*stop.borrow() && due > Instant::now() {
            tokio::select! {
                _ = sleep_until(due) => {}
                _ = stopped(&mut stop) => {}
            }
        }
        if *stop.borrow() {
            records.push(ConnectionRecord::not_started(
                id,
                shared.client,
                scheduled_ns,
                "run stopped before the connection's start",
            ));
            continue;
        }
        match slots.clone().try_acquire_owned() {
            Ok(slot) => {
                let task = connection(shared.clone(), id, scheduled_ns, stop.clone(), slot);
                in_flight.push((id, scheduled_ns, tokio::spawn(task)));
            }
            Err(_) => records.push(ConnectionRecord::not_started(
                id,
                shared.client,
                scheduled_ns,
                &format!("max_concurrent = {max_concurrent} connections already open"),
            )),
        }
    }
    let last_offset = offsets.last().copied().unwrap_or(0);
    let run_deadline = origin
        + Duration::from_nanos(last_offset)
        + shared.frustration_timeout
        + CLOSE_WAIT
        + RUN_GRACE;
    for (id, scheduled_ns, mut handle) in in_flight {
        let record = match timeout_at(run_deadline, &mut handle).await {
            Ok(Ok(record)) => record,
            Ok(Err(join_error)) => {
                let mut record = ConnectionRecord::not_started(id, shared.client, scheduled_ns, "");
                record.outcome = Outcome::Failed;
                record.error = format!("connection task failed: {join_error}");
                record
            }
            Err(_) => {
                handle.abort();
                let mut record = ConnectionRecord::not_started(id, shared.client, scheduled_ns, "");
                record.outcome = Outcome::Aborted;
                record.error = "still running at the run's deadline".to_string();
                record
            }
        };
        records.push(record);
    }
    records.sort_by_key(|record| record.id);
    records
}

/// How an exchange failed.
#[derive(Debug)]
struct Failure {
    outcome: Outcome,
    error: String,
}

impl Failure {
    fn io(step: &str, error: &io::Error) -> Failure {
        let outcome = match error.raw_os_error() {
            Some(libc::ECONNREFUSED) => Outcome::Refused,
            Some(libc::ECONNRESET) | Some(libc::EPIPE) => Outcome::Reset,
            Some(libc::ETIMEDOUT) => Outcome::TimedOut,
            _ => match error.kind() {
                io::ErrorKind::ConnectionRefused => Outcome::Refused,
                io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe => Outcome::Reset,
                io::ErrorKind::TimedOut => Outcome::TimedOut,
                _ => Outcome::Failed,
            },
        };
        Failure {
            outcome,
            error: format!("{step}: {error}"),
        }
    }

    fn http(error: impl Into<String>) -> Failure {
        Failure {
            outcome: Outcome::HttpError,
            error: error.into(),
        }
    }
}

/// Creates the non-blocking socket with the configured options.
fn make_socket(shared: &Shared) -> io::Result<Socket> {
    let socket = Socket::new(
        Domain::for_address(shared.target),
        Type::STREAM.nonblocking(),
        Some(Protocol::TCP),
    )?;
    socket.set_tcp_nodelay(true)?;
    if let Some(retries) = shared.syn_retries {
        set_int_option(&socket, libc::IPPROTO_TCP, libc::TCP_SYNCNT, retries.into())?;
    }
    if let Some(ip) = shared.local_ip {
        // Let connect() pick the port with the full 4-tuple in view, so
        // binding an address does not shrink the ephemeral port space.
        set_int_option(&socket, libc::IPPROTO_IP, libc::IP_BIND_ADDRESS_NO_PORT, 1)?;
        socket.bind(&SockAddr::from(SocketAddr::new(IpAddr::V4(ip), 0)))?;
    }
    Ok(socket)
}

/// One connection, from `connect(2)` to its record.
async fn connection(
    shared: Arc<Shared>,
    id: u64,
    scheduled_ns: u64,
    mut stop: watch::Receiver<bool>,
    _slot: OwnedSemaphorePermit,
) -> ConnectionRecord {
    let mut record = ConnectionRecord::not_started(id, shared.client, scheduled_ns, "");
    let socket = match make_socket(&shared) {
        Ok(socket) => socket,
        Err(error) => {
            record.error = format!("socket: {error}");
            return record;
        }
    };
    let deadline = Instant::now() + shared.frustration_timeout;
    record.start_ns = Some(realtime_ns());
    let connect_result = socket.connect(&SockAddr::from(shared.target));
    record.local_port = socket
        .local_addr()
        .ok()
        .and_then(|address| address.as_socket())
        .map(|address| address.port());
    if let Err(error) = connect_result {
        if error.raw_os_error() != Some(libc::EINPROGRESS) {
            let failure = Failure::io("connect", &error);
            record.syn_retransmissions = tcp_total_retransmissions(socket.as_raw_fd());
            record.outcome = failure.outcome;
            record.error = failure.error;
            record.end_ns = Some(realtime_ns());
            return record;
        }
    }
    let mut stream = match TcpStream::from_std(std::net::TcpStream::from(socket)) {
        Ok(stream) => stream,
        Err(error) => {
            record.outcome = Outcome::Failed;
            record.error = format!("registering the socket: {error}");
            record.end_ns = Some(realtime_ns());
            return record;
        }
    };
    let result = tokio::select! {
        result = exchange(&shared, &mut stream, &mut record) => result,
        _ = sleep_until(deadline) => Err(Failure {
            outcome: Outcome::Frustrated,
            error: format!("frustration timeout ({:.3} s)", shared.frustration_timeout.as_secs_f64()),
        }),
        _ = stopped(&mut stop) => Err(Failure {
            outcome: Outcome::Aborted,
            error: "run stopped".to_string(),
        }),
    };
    if record.connected_ns.is_none() {
        // Given up (or failed) before the handshake completed: the SYNs sent
        // so far are all the retransmissions there are.
        record.syn_retransmissions = tcp_total_retransmissions(stream.as_raw_fd());
    }
    match result {
        Ok(wait_for_close) => {
            record.outcome = Outcome::Ok;
            if wait_for_close {
                let close_deadline = deadline.min(Instant::now() + CLOSE_WAIT);
                tokio::select! {
                    _ = read_until_closed(&mut stream) => {}
                    _ = sleep_until(close_deadline) => {}
                    _ = stopped(&mut stop) => {}
                }
            }
        }
        Err(failure) => {
            record.outcome = failure.outcome;
            record.error = failure.error;
        }
    }
    record.end_ns = Some(realtime_ns());
    record
}

/// Reads and discards until the peer closes (or an error), so that the
/// server's close comes first.
async fn read_until_closed(stream: &mut TcpStream) {
    let mut sink = [0u8; 4096];
    // Bounded by the caller's deadline.
    while let Ok(read) = stream.read(&mut sink).await {
        if read == 0 {
            return;
        }
    }
}

/// Waits for the handshake, then sends every request and reads every
/// response. `Ok(true)` if the server will close the connection.
async fn exchange(
    shared: &Shared,
    stream: &mut TcpStream,
    record: &mut ConnectionRecord,
) -> Result<bool, Failure> {
    wait_connected(stream)
        .await
        .map_err(|error| Failure::io("connect", &error))?;
    record.connected_ns = Some(realtime_ns());
    record.syn_retransmissions = tcp_total_retransmissions(stream.as_raw_fd());
    let mut reader = ResponseReader {
        stream,
        pending: Vec::new(),
        record,
    };
    let mut server_closes = false;
    for index in 0..shared.requests_per_connection {
        let last = index + 1 == shared.requests_per_connection;
        let request = if last {
            &shared.last_request
        } else {
            &shared.request
        };
        reader
            .stream
            .write_all(request)
            .await
            .map_err(|error| Failure::io("sending the request", &error))?;
        if index == 0 {
            reader.record.request_sent_ns = Some(realtime_ns());
        }
        let head = reader.read_response().await?;
        if head.status >= 400 {
            return Err(Failure::http(format!("status {}", head.status)));
        }
        reader.record.requests_completed += 1;
        server_closes = head.closes;
        if server_closes && !last {
            return Err(Failure::http(format!(
                "server closed the connection after {} of {} requests",
                index + 1,
                shared.requests_per_connection
            )));
        }
    }
    Ok(server_closes || shared.requests_per_connection == 1)
}

/// Resolves when the non-blocking connect has completed: `Ok` once
/// connected, the socket error (`SO_ERROR`) if it failed.
async fn wait_connected(stream: &TcpStream) -> io::Result<()> {
    stream
        .async_io(Interest::WRITABLE, || {
            if let Some(error) = stream.take_error()? {
                return Err(error);
            }
            match stream.peer_addr() {
                Ok(_) => Ok(()),
                // Spurious wake-up: still connecting.
                Err(error) if error.raw_os_error() == Some(libc::ENOTCONN) => {
                    Err(io::ErrorKind::WouldBlock.into())
                }
                Err(error) => Err(error),
            }
        })
        .await
}

/// The parts of a response header the client needs.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ResponseHead {
    status: u16,
    content_length: Option<u64>,
    chunked: bool,
    /// The server will close the connection after this response.
    closes: bool,
}

impl ResponseHead {
    fn has_body(&self) -> bool {
        !(self.status < 200 || self.status == 204 || self.status == 304)
    }
}

/// Parses a response header block (status line and header lines, without
/// the final empty line). Errors describe what is wrong.
fn parse_response_head(head: &[u8]) -> Result<ResponseHead, String> {
    let text = std::str::from_utf8(head).map_err(|_| "response header is not UTF-8".to_string())?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or("");
    let minor_version = match version {
        "HTTP/1.1" => 1,
        "HTTP/1.0" => 0,
        _ => return Err(format!("bad status line {:?}", truncate(status_line))),
    };
    let status_text = parts.next().unwrap_or("");
    let status: u16 = match status_text.parse() {
        Ok(code) if status_text.len() == 3 && (100..=999).contains(&code) => code,
        _ => return Err(format!("bad status code in {:?}", truncate(status_line))),
    };
    let mut content_length = None;
    let mut chunked = false;
    let mut connection_close = false;
    let mut connection_keep_alive = false;
    for line in lines {
        if line.is_empty() {
            continue;
        }
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| format!("bad header line {:?}", truncate(line)))?;
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            let length: u64 = value
                .parse()
                .map_err(|_| format!("bad Content-Length {:?}", truncate(value)))?;
            if content_length.is_some_and(|previous| previous != length) {
                return Err("conflicting Content-Length headers".to_string());
            }
            content_length = Some(length);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked |= value
                .split(',')
                .any(|coding| coding.trim().eq_ignore_ascii_case("chunked"));
        } else if name.eq_ignore_ascii_case("connection") {
            for token in value.split(',').map(str::trim) {
                connection_close |= token.eq_ignore_ascii_case("close");
                connection_keep_alive |= token.eq_ignore_ascii_case("keep-alive");
            }
        }
    }
    let closes = connection_close || (minor_version == 0 && !connection_keep_alive);
    Ok(ResponseHead {
        status,
        content_length,
        chunked,
        closes,
    })
}

fn truncate(text: &str) -> String {
    text.chars().take(80).collect()
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// Reads responses from a connection, updating the record's first-byte,
/// last-byte and byte counts as bytes arrive.
struct ResponseReader<'a> {
    stream: &'a mut TcpStream,
    /// Bytes received but not yet consumed.
    pending: Vec<u8>,
    record: &'a mut ConnectionRecord,
}

impl ResponseReader<'_> {
    /// Reads once more into `pending`; `Ok(false)` at end of stream.
    async fn fill(&mut self) -> Result<bool, Failure> {
        let old_length = self.pending.len();
        self.pending.resize(old_length + READ_CHUNK, 0);
        let result = self.stream.read(&mut self.pending[old_length..]).await;
        let read = match result {
            Ok(read) => read,
            Err(error) => {
                self.pending.truncate(old_length);
                return Err(Failure::io("reading the response", &error));
            }
        };
        self.pending.truncate(old_length + read);
        if read > 0 {
            if self.record.first_byte_ns.is_none() {
                self.record.first_byte_ns = Some(realtime_ns());
            }
            self.record.bytes_received += read as u64;
        }
        Ok(read > 0)
    }

    /// Reads one complete response (skipping interim 1xx ones) and records
    /// its last byte.
    async fn read_response(&mut self) -> Result<ResponseHead, Failure> {
        for _ in 0..=MAX_INTERIM_RESPONSES {
            let head = self.read_head().await?;
            if (100..200).contains(&head.status) {
                continue;
            }
            let closes_by_end = self.read_body(&head).await?;
            self.record.last_byte_ns = Some(realtime_ns());
            return Ok(ResponseHead {
                closes: head.closes || closes_by_end,
                ..head
            });
        }
        Err(Failure::http(format!(
            "more than {MAX_INTERIM_RESPONSES} interim (1xx) responses"
        )))
    }

    async fn read_head(&mut self) -> Result<ResponseHead, Failure> {
        loop {
            if let Some(position) = find(&self.pending, b"\r\n\r\n") {
                let head = parse_response_head(&self.pending[..position]).map_err(Failure::http)?;
                self.pending.drain(..position + 4);
                return Ok(head);
            }
            if self.pending.len() > MAX_RESPONSE_HEAD {
                return Err(Failure::http("response header larger than 64 KiB"));
            }
            if !self.fill().await? {
                return Err(Failure::http(if self.pending.is_empty() {
                    "connection closed before a response"
                } else {
                    "connection closed inside the response header"
                }));
            }
        }
    }

    /// Reads the body `head` announces. `Ok(true)` when the body ran to the
    /// end of the connection.
    async fn read_body(&mut self, head: &ResponseHead) -> Result<bool, Failure> {
        if !head.has_body() {
            return Ok(false);
        }
        if head.chunked {
            self.read_chunked().await?;
            return Ok(false);
        }
        if let Some(length) = head.content_length {
            self.skip(length).await?;
            return Ok(false);
        }
        // Delimited by the end of the connection.
        self.pending.clear();
        while self.fill().await? {
            self.pending.clear();
        }
        Ok(true)
    }

    /// Consumes `remaining` body bytes.
    async fn skip(&mut self, mut remaining: u64) -> Result<(), Failure> {
        loop {
            let take = remaining.min(self.pending.len() as u64) as usize;
            self.pending.drain(..take);
            remaining -= take as u64;
            if remaining == 0 {
                return Ok(());
            }
            if !self.fill().await? {
                return Err(Failure::http(format!(
                    "connection closed {remaining} bytes before the end of the response body"
                )));
            }
        }
    }

    /// Consumes one CRLF-terminated line and returns it without the CRLF.
    async fn read_line(&mut self) -> Result<String, Failure> {
        loop {
            if let Some(position) = find(&self.pending, b"\r\n") {
                let line = String::from_utf8_lossy(&self.pending[..position]).into_owned();
                self.pending.drain(..position + 2);
                return Ok(line);
            }
            if self.pending.len() > MAX_CHUNK_LINE {
                return Err(Failure::http("chunk line longer than 4 KiB"));
            }
            if !self.fill().await? {
                return Err(Failure::http("connection closed inside a chunked body"));
            }
        }
    }

    /// Consumes a chunked body: chunks, the last (zero) chunk and trailers.
    async fn read_chunked(&mut self) -> Result<(), Failure> {
        loop {
            let line = self.read_line().await?;
            let size_text = line.split(';').next().unwrap_or("").trim();
            let size = u64::from_str_radix(size_text, 16)
                .map_err(|_| Failure::http(format!("bad chunk size {:?}", truncate(&line))))?;
            if size == 0 {
                // Trailer lines up to the empty line; each read_line consumes
                // at least two bytes, so this ends with the stream.
                while !self.read_line().await?.is_empty() {}
                return Ok(());
            }
            self.skip(size).await?;
            if !self.read_line().await?.is_empty() {
                return Err(Failure::http("chunk data longer than its size"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn response_heads_parse() {
        let head =
            parse_response_head(b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\nServer: x").unwrap();
        assert_eq!(
            head,
            ResponseHead {
                status: 200,
                content_length: Some(12),
                chunked: false,
                closes: false
            }
        );
        let head =
            parse_response_head(b"HTTP/1.0 404 Not Found\r\nTransfer-Encoding: gzip, chunked")
                .unwrap();
        assert!(head.chunked && head.closes);
        let head = parse_response_head(b"HTTP/1.1 204 No Content\r\nconnection: Close").unwrap();
        assert!(head.closes && !head.has_body());
        for bad in [
            &b"HTP/1.1 200 OK"[..],
            b"HTTP/1.1 20 OK",
            b"HTTP/1.1 200 OK\r\nno colon here",
            b"HTTP/1.1 200 OK\r\nContent-Length: -1",
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2",
            b"\xff\xfe",
            b"",
        ] {
            assert!(parse_response_head(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn requests_follow_the_configuration() {
        let target: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let mut config = LoadConfig {
            path: "/file-10k".to_string(),
            ..LoadConfig::default()
        };
        let one = String::from_utf8(config.request(target, true)).unwrap();
        assert!(
            one.starts_with("GET /file-10k HTTP/1.0\r\nHost: 127.0.0.1:8080\r\n"),
            "{one}"
        );
        assert!(one.ends_with("Connection: close\r\n\r\n"), "{one}");
        config.requests_per_connection = 3;
        config.host = Some("example".to_string());
        let middle = String::from_utf8(config.request(target, false)).unwrap();
        assert!(
            middle.starts_with("GET /file-10k HTTP/1.1\r\nHost: example\r\n"),
            "{middle}"
        );
        assert!(!middle.contains("Connection"), "{middle}");
    }

    #[test]
    fn configuration_errors_name_the_key() {
        let target: SocketAddr = "127.0.0.1:80".parse().unwrap();
        let cases: [(&str, LoadConfig); 5] = [
            (
                "requests_per_connection",
                LoadConfig {
                    requests_per_connection: 0,
                    ..LoadConfig::default()
                },
            ),
            (
                "path",
                LoadConfig {
                    path: "/a b".to_string(),
                    ..LoadConfig::default()
                },
            ),
            (
                "frustration_timeout_s",
                LoadConfig {
                    frustration_timeout_s: 0.0,
                    ..LoadConfig::default()
                },
            ),
            (
                "max_concurrent",
                LoadConfig {
                    max_concurrent: 0,
                    ..LoadConfig::default()
                },
            ),
            (
                "syn_retries",
                LoadConfig {
                    syn_retries: Some(0),
                    ..LoadConfig::default()
                },
            ),
        ];
        for (key, config) in cases {
            let error = config.validate(target).unwrap_err().to_string();
            assert!(error.starts_with(key), "{key}: {error}");
        }
        let v6: SocketAddr = "[::1]:80".parse().unwrap();
        let config = LoadConfig {
            local_ip: Some(Ipv4Addr::LOCALHOST),
            ..LoadConfig::default()
        };
        assert!(config
            .validate(v6)
            .unwrap_err()
            .to_string()
            .contains("local_ip"));
    }

    #[test]
    fn documented_example_parses() {
        let docs = include_str!("client.rs");
        let start = docs.find("/// ```toml\n").unwrap() + "/// ```toml\n".len();
        let end = start + docs[start..].find("/// ```").unwrap();
        let example: String = docs[start..end]
            .lines()
            .map(|line| format!("{}\n", line.trim_start_matches("///").trim_start()))
            .collect();
        let config = LoadConfig::from_toml(&example).unwrap();
        config.validate("127.0.0.1:80".parse().unwrap()).unwrap();
        assert_eq!(config.arrivals.expected_connections(), 60_000.0);
    }

    #[test]
    fn toml_configuration_parses_with_defaults() {
        let config = LoadConfig::from_toml(
            "path = \"/file-10k\"\nrequests_per_connection = 5\n\
             [arrivals]\nduration_s = 60\n[arrivals.pattern]\nkind = \"constant\"\nrate = 1000\n",
        )
        .unwrap();
        assert_eq!(config.requests_per_connection, 5);
        assert_eq!(config.frustration_timeout_s, 21.0);
        assert_eq!(config.arrivals.expected_connections(), 60_000.0);
        let error = LoadConfig::from_toml("pth = \"/\"")
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("load configuration:1: unknown field `pth`"),
            "{error}"
        );
    }
}
