//! Vantage's test server: an HTTP server whose behaviour is exactly known.
//!
//! Certes and the Abacus paper are about what happens *before* a server
//! sees a request: SYNs dropped because the listen queue is full, and the
//! seconds clients then spend re-sending them. To reproduce that on purpose
//! the server must be slow in a known way. Every part of this server's
//! behaviour is configuration:
//!
//! * `backlog` — the `listen(2)` backlog (the kernel caps it at
//!   `net.core.somaxconn`). With `net.ipv4.tcp_abort_on_overflow = 0`, Linux
//!   drops a SYN when the accept queue holds more than `backlog`
//!   connections, which is the overflow Certes models;
//! * `accept_rate` — a paced accept loop: `accept_rate` accepts per second
//!   (0 = as fast as possible). While connections are waiting, accepts
//!   happen on a fixed grid 1/`accept_rate` apart (timer lateness does not
//!   accumulate); an accept more than one interval late (the queue was
//!   empty) restarts the grid one interval after it. Arrivals
//!   faster than this fill the accept queue and make the kernel drop SYNs.
//!   Pacing uses tokio's millisecond timer, so rates above ~1000/s are
//!   approximate. With `accept_poisson = true` the gaps are exponential
//!   with the same mean (a Poisson departure process, like an M/M/1
//!   server's): an even grid phase-locks with clients' whole-second SYN
//!   retransmissions (a SYN dropped late in a grid period is retried 1 s
//!   later at the same phase, and is dropped again more often than a fresh
//!   SYN), which no real server's accept timing does;
//! * `workers` — requests in service at once. A request first waits
//!   `first_byte_delay_ms` (a fixed latency that uses no worker, like a
//!   backend round trip), then waits for a free worker, holds it for a
//!   `service_time` drawn from its distribution and while its response is
//!   written, then releases it. So the first response byte leaves
//!   `first_byte_delay + queueing + service_time` after the request was
//!   read, and capacity is `workers / mean service time` requests per
//!   second — the Apache-with-N-daemons model of the Certes testbed;
//! * `response_bytes` — body size; a request for `/bytes/<n>` gets `n` bytes
//!   instead (up to `max_response_bytes`).
//!
//! HTTP/1.1 connections are persistent (requests are served in order until
//! the client closes or sends `Connection: close`; `keep_alive = false`
//! turns this off); HTTP/1.0 connections close after one response.
//!
//! Requests are parsed defensively: a header block longer than
//! `max_header_bytes` gets `431`, a malformed request line or header line
//! `400`, a method other than GET/HEAD `405`, a request body `413`, an HTTP
//! version other than 1.0/1.1 `505`; each error response is followed by a
//! bounded lingering close (so the client can read it before any reset).
//! A connection that does not deliver a complete request header within
//! `idle_timeout_s` of accept or of its previous response is closed, and so
//! is one whose client stops reading for that long. Nothing in here panics
//! on input.
//!
//! The server runs in the calling thread with its own current-thread tokio
//! runtime, so the listening socket belongs to the caller's network
//! namespace. [`TestServer::bind`] returns once the socket is listening
//! (connections are queued by the kernel from then on), which is how
//! callers avoid racing it; [`run`] does the same and reports the bound
//! address on a channel.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp};
use serde::{Deserialize, Serialize};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::time::{sleep, sleep_until, timeout, Instant};
use vantage_core::config::Checker;

use crate::load::client::raise_file_limit;

/// Largest accepted service time, first-byte delay: ten minutes.
const MAX_DELAY_MS: f64 = 600_000.0;
/// How often the `stop` flag is polled.
const STOP_POLL: Duration = Duration::from_millis(10);
/// Bytes written per `write(2)` of a body.
const WRITE_CHUNK: usize = 64 * 1024;
/// After an error response: how long, and how many bytes, the server keeps
/// reading before it closes (so its response is not destroyed by a reset).
const LINGER_TIME: Duration = Duration::from_secs(2);
const LINGER_BYTES: usize = 1024 * 1024;
/// After an accept error such as `EMFILE`, wait this long before retrying.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(10);
/// File descriptors the server asks for.
const WANTED_FILES: u64 = 65_536;

/// Per-request service time: how long a worker is held (TOML table
/// `service_time`, tagged by `kind`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum ServiceTime {
    /// Always `ms` milliseconds.
    Constant { ms: f64 },
    /// Exponentially distributed with mean `mean_ms` milliseconds.
    Exponential { mean_ms: f64 },
    /// Uniform in [`min_ms`, `max_ms`] milliseconds.
    Uniform { min_ms: f64, max_ms: f64 },
}

impl ServiceTime {
    /// Mean service time in milliseconds.
    pub fn mean_ms(&self) -> f64 {
        match *self {
            ServiceTime::Constant { ms } => ms,
            ServiceTime::Exponential { mean_ms } => mean_ms,
            ServiceTime::Uniform { min_ms, max_ms } => (min_ms + max_ms) / 2.0,
        }
    }

    fn validate(&self) -> Result<(), ServerError> {
        let in_range = |value: f64| value.is_finite() && (0.0..=MAX_DELAY_MS).contains(&value);
        let allowed = "in [0, 600000] milliseconds";
        match *self {
            ServiceTime::Constant { ms } if !in_range(ms) => {
                Err(config_error("service_time.ms", allowed, ms))
            }
            ServiceTime::Exponential { mean_ms } if !in_range(mean_ms) => {
                Err(config_error("service_time.mean_ms", allowed, mean_ms))
            }
            ServiceTime::Uniform { min_ms, .. } if !in_range(min_ms) => {
                Err(config_error("service_time.min_ms", allowed, min_ms))
            }
            ServiceTime::Uniform { min_ms, max_ms } if !in_range(max_ms) || max_ms < min_ms => {
                Err(config_error(
                    "service_time.max_ms",
                    "in [min_ms, 600000] milliseconds",
                    max_ms,
                ))
            }
            _ => Ok(()),
        }
    }

    /// Draws one service time.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> Duration {
        let ms = match *self {
            ServiceTime::Constant { ms } => ms,
            ServiceTime::Exponential { mean_ms } => match Exp::new(1.0 / mean_ms) {
                Ok(exponential) if mean_ms > 0.0 => exponential.sample(rng),
                _ => 0.0,
            },
            ServiceTime::Uniform { min_ms, max_ms } => {
                if max_ms > min_ms {
                    rng.gen_range(min_ms..=max_ms)
                } else {
                    min_ms
                }
            }
        };
        Duration::from_secs_f64(ms.clamp(0.0, MAX_DELAY_MS) / 1000.0)
    }
}

/// How the test server behaves (TOML, every key optional).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TestServerConfig {
    /// `listen(2)` backlog, in [0, 65535]; default 511 (nginx's).
    pub backlog: u32,
    /// Accepts per second, in [0, 1e6]; 0 = as fast as possible (default).
    pub accept_rate: f64,
    /// Exponential gaps between paced accepts instead of an even grid;
    /// default false.
    pub accept_poisson: bool,
    /// Requests in service at once, in [1, 100000]; default 256.
    pub workers: usize,
    /// How long a worker is held per request; default constant 0 ms.
    pub service_time: ServiceTime,
    /// Fixed delay before a response's first byte, not holding a worker,
    /// in [0, 600000] ms; default 0.
    pub first_byte_delay_ms: f64,
    /// Response body size in bytes; default 1024. At most
    /// `max_response_bytes`.
    pub response_bytes: u64,
    /// Largest body `/bytes/<n>` may ask for, in [0, 2^40]; default
    /// 100 MiB.
    pub max_response_bytes: u64,
    /// Serve several HTTP/1.1 requests per connection; default true.
    pub keep_alive: bool,
    /// Seconds a connection may take to deliver a complete request header
    /// (or to take a response chunk), in (0, 3600]; default 10.
    pub idle_timeout_s: f64,
    /// Largest request header block, in [256, 1048576] bytes; default 16384.
    pub max_header_bytes: usize,
}

impl Default for TestServerConfig {
    fn default() -> Self {
        TestServerConfig {
            backlog: 511,
            accept_rate: 0.0,
            accept_poisson: false,
            workers: 256,
            service_time: ServiceTime::Constant { ms: 0.0 },
            first_byte_delay_ms: 0.0,
            response_bytes: 1024,
            max_response_bytes: 100 * 1024 * 1024,
            keep_alive: true,
            idle_timeout_s: 10.0,
            max_header_bytes: 16 * 1024,
        }
    }
}

/// Why the test server could not run; configuration errors name the key.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("{key} must be {allowed}, got {value}")]
    Config {
        key: &'static str,
        allowed: &'static str,
        value: String,
    },
    #[error("{0}")]
    File(#[from] vantage_core::config::ConfigError),
    #[error("test server cannot listen on {address}: {source}")]
    Listen {
        address: SocketAddr,
        #[source]
        source: io::Error,
    },
    #[error("test server cannot start its tokio runtime: {0}")]
    Runtime(#[source] io::Error),
}

fn config_error(key: &'static str, allowed: &'static str, value: impl ToString) -> ServerError {
    ServerError::Config {
        key,
        allowed,
        value: value.to_string(),
    }
}

impl TestServerConfig {
    /// Parses and checks TOML text; unknown keys and values out of range
    /// are errors that name the key and its line.
    pub fn from_toml(text: &str) -> Result<Self, ServerError> {
        let c: Checker<ServerError> = Checker::new("test server configuration", text);
        let config: TestServerConfig = c.deserialize()?;
        config.validate().map_err(|e| match e {
            ServerError::Config {
                key,
                allowed,
                value,
            } => c.fail(key, format!("must be {allowed}, got {value}")),
            other => other,
        })?;
        Ok(config)
    }

    /// Checks every key's range.
    pub fn validate(&self) -> Result<(), ServerError> {
        if self.backlog > 65_535 {
            return Err(config_error("backlog", "in [0, 65535]", self.backlog));
        }
        if !(self.accept_rate.is_finite() && (0.0..=1e6).contains(&self.accept_rate)) {
            return Err(config_error(
                "accept_rate",
                "in [0, 1e6] accepts per second (0 = unpaced)",
                self.accept_rate,
            ));
        }
        if !(1..=100_000).contains(&self.workers) {
            return Err(config_error("workers", "in [1, 100000]", self.workers));
        }
        self.service_time.validate()?;
        if !(self.first_byte_delay_ms.is_finite()
            && (0.0..=MAX_DELAY_MS).contains(&self.first_byte_delay_ms))
        {
            return Err(config_error(
                "first_byte_delay_ms",
                "in [0, 600000] milliseconds",
                self.first_byte_delay_ms,
            ));
        }
        if self.max_response_bytes > 1 << 40 {
            return Err(config_error(
                "max_response_bytes",
                "in [0, 1099511627776]",
                self.max_response_bytes,
            ));
        }
        if self.response_bytes > self.max_response_bytes {
            return Err(config_error(
                "response_bytes",
                "at most max_response_bytes",
                self.response_bytes,
            ));
        }
        if !(self.idle_timeout_s.is_finite()
            && self.idle_timeout_s > 0.0
            && self.idle_timeout_s <= 3600.0)
        {
            return Err(config_error(
                "idle_timeout_s",
                "in (0, 3600] seconds",
                self.idle_timeout_s,
            ));
        }
        if !(256..=1024 * 1024).contains(&self.max_header_bytes) {
            return Err(config_error(
                "max_header_bytes",
                "in [256, 1048576]",
                self.max_header_bytes,
            ));
        }
        Ok(())
    }
}

/// What the server did during a run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestServerStats {
    /// Connections accepted.
    pub accepted: u64,
    /// Requests answered with 200 and the whole response written.
    pub requests_served: u64,
    /// Response bytes written (headers and bodies, error responses too).
    pub bytes_sent: u64,
    /// Requests answered 400 (malformed request line, header or path).
    pub bad_requests: u64,
    /// Requests answered 431 (header block above `max_header_bytes`).
    pub headers_too_large: u64,
    /// Requests answered 405, 413 or 505 (well-formed but unsupported).
    pub unsupported_requests: u64,
    /// Connections closed for not sending a request, or not reading a
    /// response, within `idle_timeout_s`.
    pub idle_timeouts: u64,
    /// Accept, read and write errors (resets, broken pipes, `EMFILE` …).
    pub io_errors: u64,
}

#[derive(Default)]
struct Counters {
    accepted: AtomicU64,
    requests_served: AtomicU64,
    bytes_sent: AtomicU64,
    bad_requests: AtomicU64,
    headers_too_large: AtomicU64,
    unsupported_requests: AtomicU64,
    idle_timeouts: AtomicU64,
    io_errors: AtomicU64,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl Counters {
    fn snapshot(&self) -> TestServerStats {
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        TestServerStats {
            accepted: read(&self.accepted),
            requests_served: read(&self.requests_served),
            bytes_sent: read(&self.bytes_sent),
            bad_requests: read(&self.bad_requests),
            headers_too_large: read(&self.headers_too_large),
            unsupported_requests: read(&self.unsupported_requests),
            idle_timeouts: read(&self.idle_timeouts),
            io_errors: read(&self.io_errors),
        }
    }
}

/// A listening test server, not yet serving.
#[derive(Debug)]
pub struct TestServer {
    config: TestServerConfig,
    listener: std::net::TcpListener,
    local_addr: SocketAddr,
}

impl TestServer {
    /// Validates `config` and creates the listening socket on `listen` (port
    /// 0 = any free port) in the calling thread's network namespace. When
    /// this returns the socket is listening: the kernel completes
    /// handshakes into the accept queue even before [`serve`] starts.
    ///
    /// [`serve`]: TestServer::serve
    pub fn bind(config: &TestServerConfig, listen: SocketAddr) -> Result<TestServer, ServerError> {
        config.validate()?;
        let listen_error = |source| ServerError::Listen {
            address: listen,
            source,
        };
        let socket = Socket::new(
            Domain::for_address(listen),
            Type::STREAM,
            Some(Protocol::TCP),
        )
        .map_err(listen_error)?;
        socket.set_reuse_address(true).map_err(listen_error)?;
        socket.bind(&SockAddr::from(listen)).map_err(listen_error)?;
        socket.listen(config.backlog as i32).map_err(listen_error)?;
        socket.set_nonblocking(true).map_err(listen_error)?;
        let listener = std::net::TcpListener::from(socket);
        let local_addr = listener.local_addr().map_err(listen_error)?;
        Ok(TestServer {
            config: config.clone(),
            listener,
            local_addr,
        })
    }

    /// The address the server listens on (with the kernel's port if 0 was
    /// asked).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Serves until `stop` is set (polled every 10 ms), then closes the
    /// listener and every connection and returns what was done. Service
    /// times are drawn from `seed`, one stream per accepted connection in
    /// accept order. Blocking, with its own current-thread runtime. Raises
    /// the process's `RLIMIT_NOFILE` towards 65536 (as far as allowed),
    /// since every waiting connection holds a descriptor.
    pub fn serve(self, seed: u64, stop: &AtomicBool) -> Result<TestServerStats, ServerError> {
        let _ = raise_file_limit(WANTED_FILES);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(ServerError::Runtime)?;
        let counters = Arc::new(Counters::default());
        let shared = Arc::new(Shared {
            workers: Arc::new(Semaphore::new(self.config.workers)),
            config: self.config,
            counters: counters.clone(),
        });
        let address = self.local_addr;
        let listener = self.listener;
        runtime.block_on(async {
            let listener = TcpListener::from_std(listener)
                .map_err(|source| ServerError::Listen { address, source })?;
            let (stop_sender, stop_receiver) = watch::channel(false);
            tokio::join!(
                accept_loop(listener, shared, seed, stop_receiver),
                watch_stop_flag(stop, stop_sender)
            );
            Ok::<(), ServerError>(())
        })?;
        // Dropping the runtime drops every connection task and socket.
        drop(runtime);
        Ok(counters.snapshot())
    }
}

/// Binds, reports the bound address on `ready`, and serves until `stop` is
/// set; see [`TestServer::bind`] and [`TestServer::serve`]. A caller running
/// this on its own thread waits on the receiving end of `ready` before
/// starting clients; if binding fails nothing is sent and the error is
/// returned.
pub fn run(
    config: &TestServerConfig,
    listen: SocketAddr,
    seed: u64,
    stop: &AtomicBool,
    ready: &mpsc::Sender<SocketAddr>,
) -> Result<TestServerStats, ServerError> {
    let server = TestServer::bind(config, listen)?;
    let _ = ready.send(server.local_addr());
    server.serve(seed, stop)
}

struct Shared {
    config: TestServerConfig,
    workers: Arc<Semaphore>,
    counters: Arc<Counters>,
}

async fn watch_stop_flag(stop: &AtomicBool, stop_sender: watch::Sender<bool>) {
    let mut ticks = tokio::time::interval(STOP_POLL);
    // Ends when the flag is set; the accept loop ends with it.
    loop {
        ticks.tick().await;
        if stop.load(Ordering::Relaxed) {
            let _ = stop_sender.send(true);
            return;
        }
    }
}

async fn stopped(receiver: &mut watch::Receiver<bool>) {
    if receiver.wait_for(|stop| *stop).await.is_err() {
        std::future::pending::<()>().await;
    }
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    seed: u64,
    mut stop: watch::Receiver<bool>,
) {
    let rate = shared.config.accept_rate;
    let poisson = shared.config.accept_poisson;
    let mut pace_rng = ChaCha8Rng::seed_from_u64(seed);
    pace_rng.set_stream(u64::MAX);
    // The gap to the next paced accept: even, or exponential with the same
    // mean; `None` when accepts are not paced.
    let mut next_gap = move || -> Option<Duration> {
        if rate <= 0.0 {
            return None;
        }
        let seconds = if poisson {
            // Inverse CDF of Exp(rate); 1 − u is in (0, 1].
            -(1.0 - pace_rng.gen::<f64>()).ln() / rate
        } else {
            1.0 / rate
        };
        Some(Duration::from_secs_f64(seconds))
    };
    let paced = rate > 0.0;
    let mut next_accept = Instant::now();
    let mut connection_index: u64 = 0;
    // Runs until the stop flag is set.
    loop {
        if paced {
            tokio::select! {
                _ = sleep_until(next_accept) => {}
                _ = stopped(&mut stop) => return,
            }
        }
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stopped(&mut stop) => return,
        };
        match accepted {
            Ok((stream, _peer)) => {
                bump(&shared.counters.accepted);
                if let Some(interval) = next_gap() {
                    // On schedule: keep the exact pace. After an idle spell:
                    // restart the pace from now, without a catch-up burst.
                    let now = Instant::now();
                    let on_schedule = next_accept + interval;
                    next_accept = if now >= on_schedule {
                        now + interval
                    } else {
                        on_schedule
                    };
                }
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                rng.set_stream(connection_index);
                connection_index += 1;
                tokio::spawn(serve_connection(stream, shared.clone(), rng));
            }
            Err(_) => {
                bump(&shared.counters.io_errors);
                tokio::select! {
                    _ = sleep(ACCEPT_ERROR_PAUSE) => {}
                    _ = stopped(&mut stop) => return,
                }
            }
        }
    }
}

/// A request the server will answer 200.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Request {
    head_only: bool,
    body_bytes: u64,
    keep_alive: bool,
}

/// A request the server answers with an error, then closes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rejection {
    status: u16,
    reason: String,
}

impl Rejection {
    fn new(status: u16, reason: impl Into<String>) -> Rejection {
        Rejection {
            status,
            reason: reason.into(),
        }
    }
}

fn is_token(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Parses a request header block (without its final empty line).
fn parse_request(head: &[u8], config: &TestServerConfig) -> Result<Request, Rejection> {
    let text = std::str::from_utf8(head)
        .map_err(|_| Rejection::new(400, "request header is not UTF-8"))?;
    if text
        .bytes()
        .any(|b| b.is_ascii_control() && b != b'\r' && b != b'\n' && b != b'\t')
    {
        return Err(Rejection::new(
            400,
            "control character in the request header",
        ));
    }
    // A client may send stray CRLFs between pipelined requests (RFC 9112,
    // section 2.2): skip them.
    let mut lines = text.trim_start_matches("\r\n").split("\r\n");
    let request_line = lines.next().unwrap_or("");
    let parts: Vec<&str> = request_line.split(' ').collect();
    let [method, target, version] = parts[..] else {
        return Err(Rejection::new(
            400,
            "request line is not `METHOD target HTTP/x.y`",
        ));
    };
    if !is_token(method) {
        return Err(Rejection::new(400, "bad method"));
    }
    if !target.starts_with('/') || target.bytes().any(|b| !b.is_ascii_graphic()) {
        return Err(Rejection::new(
            400,
            "request target must be an absolute path",
        ));
    }
    let http_1_1 = match version {
        "HTTP/1.1" => true,
        "HTTP/1.0" => false,
        _ => {
            let digits = version.strip_prefix("HTTP/").unwrap_or("");
            let well_formed = match digits.as_bytes() {
                [major, b'.', minor] => major.is_ascii_digit() && minor.is_ascii_digit(),
                [major] => major.is_ascii_digit(),
                _ => false,
            };
            return Err(if well_formed {
                Rejection::new(505, "only HTTP/1.0 and HTTP/1.1 are served")
            } else {
                Rejection::new(400, "bad HTTP version")
            });
        }
    };
    let mut connection_close = false;
    let mut has_body = false;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            return Err(Rejection::new(400, "header line without a colon"));
        };
        if !is_token(name) {
            return Err(Rejection::new(400, "bad header name"));
        }
        let value = value.trim();
        if name.eq_ignore_ascii_case("connection") {
            connection_close |= value
                .split(',')
                .any(|token| token.trim().eq_ignore_ascii_case("close"));
        } else if name.eq_ignore_ascii_case("content-length") {
            let length: u64 = value
                .parse()
                .map_err(|_| Rejection::new(400, "bad Content-Length"))?;
            has_body |= length > 0;
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            has_body = true;
        }
    }
    let head_only = match method {
        "GET" => false,
        "HEAD" => true,
        _ => return Err(Rejection::new(405, "only GET and HEAD are served")),
    };
    if has_body {
        return Err(Rejection::new(413, "request bodies are not accepted"));
    }
    let path = target.split('?').next().unwrap_or(target);
    let body_bytes = match path.strip_prefix("/bytes/") {
        Some(size) => {
            let bytes: u64 = size
                .parse()
                .map_err(|_| Rejection::new(400, "/bytes/<n> needs a decimal n"))?;
            if bytes > config.max_response_bytes {
                return Err(Rejection::new(400, "/bytes/<n> above max_response_bytes"));
            }
            bytes
        }
        None => config.response_bytes,
    };
    Ok(Request {
        head_only,
        body_bytes,
        keep_alive: config.keep_alive && http_1_1 && !connection_close,
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// Why no request header could be read.
enum HeadError {
    /// The client closed before sending anything (between requests).
    Closed,
    /// The client closed in the middle of a header.
    Truncated,
    TooLarge,
    Io,
}

/// Reads until `buffer` holds a complete header block; returns its length
/// (without the final CRLF CRLF).
async fn read_head(
    stream: &mut TcpStream,
    buffer: &mut Vec<u8>,
    max_header_bytes: usize,
) -> Result<usize, HeadError> {
    let mut searched_from = 0;
    loop {
        if let Some(position) = find(&buffer[searched_from..], b"\r\n\r\n") {
            let end = searched_from + position;
            return if end + 4 > max_header_bytes {
                Err(HeadError::TooLarge)
            } else {
                Ok(end)
            };
        }
        if buffer.len() >= max_header_bytes {
            return Err(HeadError::TooLarge);
        }
        searched_from = buffer.len().saturating_sub(3);
        let old_length = buffer.len();
        let room = (max_header_bytes - old_length).clamp(1, 4096);
        buffer.resize(old_length + room, 0);
        let read = stream.read(&mut buffer[old_length..]).await;
        match read {
            Ok(0) => {
                buffer.truncate(old_length);
                return Err(if old_length == 0 {
                    HeadError::Closed
                } else {
                    HeadError::Truncated
                });
            }
            Ok(read) => buffer.truncate(old_length + read),
            Err(_) => {
                buffer.truncate(old_length);
                return Err(HeadError::Io);
            }
        }
    }
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        405 => "Method Not Allowed",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        505 => "HTTP Version Not Supported",
        _ => "Error",
    }
}

/// The bytes of the body pattern, written chunk after chunk.
static BODY_PATTERN: [u8; WRITE_CHUNK] = {
    let mut pattern = [0u8; WRITE_CHUNK];
    let mut index = 0;
    while index < WRITE_CHUNK {
        pattern[index] = b'a' + (index % 26) as u8;
        index += 1;
    }
    pattern
};

/// Writes `bytes` within the idle timeout; counts them.
async fn write_bounded(stream: &mut TcpStream, bytes: &[u8], shared: &Shared) -> bool {
    let idle = Duration::from_secs_f64(shared.config.idle_timeout_s);
    match timeout(idle, stream.write_all(bytes)).await {
        Ok(Ok(())) => {
            shared
                .counters
                .bytes_sent
                .fetch_add(bytes.len() as u64, Ordering::Relaxed);
            true
        }
        Ok(Err(_)) => {
            bump(&shared.counters.io_errors);
            false
        }
        Err(_) => {
            bump(&shared.counters.idle_timeouts);
            false
        }
    }
}

/// Sends an error response, then closes after a bounded lingering read.
async fn reject(mut stream: TcpStream, rejection: Rejection, shared: &Shared) {
    let counter = match rejection.status {
        400 => &shared.counters.bad_requests,
        431 => &shared.counters.headers_too_large,
        _ => &shared.counters.unsupported_requests,
    };
    bump(counter);
    let body = format!("{}\n", rejection.reason);
    let response = format!(
        "HTTP/1.1 {} {}\r\nServer: vantage-test-server\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        rejection.status,
        reason_phrase(rejection.status),
        body.len()
    );
    if !write_bounded(&mut stream, response.as_bytes(), shared).await {
        return;
    }
    let _ = stream.shutdown().await;
    let deadline = Instant::now() + LINGER_TIME;
    let mut sink = [0u8; 4096];
    let mut drained = 0;
    while drained < LINGER_BYTES {
        match tokio::time::timeout_at(deadline, stream.read(&mut sink)).await {
            Ok(Ok(read)) if read > 0 => drained += read,
            _ => return,
        }
    }
}

/// Serves one connection: requests in order until close, error or idle.
async fn serve_connection(mut stream: TcpStream, shared: Arc<Shared>, mut rng: ChaCha8Rng) {
    let _ = stream.set_nodelay(true);
    let config = &shared.config;
    let idle = Duration::from_secs_f64(config.idle_timeout_s);
    let first_byte_delay = Duration::from_secs_f64(config.first_byte_delay_ms / 1000.0);
    let mut buffer = Vec::with_capacity(1024);
    // Each pass serves one request; the client decides how many (bounded in
    // time by the idle timeout per request and by the run's stop).
    loop {
        let head_length = match timeout(
            idle,
            read_head(&mut stream, &mut buffer, config.max_header_bytes),
        )
        .await
        {
            Err(_) => {
                bump(&shared.counters.idle_timeouts);
                return;
            }
            Ok(Err(HeadError::Closed)) => return,
            Ok(Err(HeadError::Truncated)) | Ok(Err(HeadError::Io)) => {
                bump(&shared.counters.io_errors);
                return;
            }
            Ok(Err(HeadError::TooLarge)) => {
                let rejection = Rejection::new(
                    431,
                    format!("request header above {} bytes", config.max_header_bytes),
                );
                return reject(stream, rejection, &shared).await;
            }
            Ok(Ok(length)) => length,
        };
        let parsed = parse_request(&buffer[..head_length], config);
        buffer.drain(..head_length + 4);
        let request = match parsed {
            Ok(request) => request,
            Err(rejection) => return reject(stream, rejection, &shared).await,
        };
        if !first_byte_delay.is_zero() {
            sleep(first_byte_delay).await;
        }
        let Ok(_worker) = shared.workers.acquire().await else {
            return;
        };
        let service_time = config.service_time.sample(&mut rng);
        if !service_time.is_zero() {
            sleep(service_time).await;
        }
        let mut response = format!(
            "HTTP/1.1 200 OK\r\nServer: vantage-test-server\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\nConnection: {}\r\n\r\n",
            request.body_bytes,
            if request.keep_alive { "keep-alive" } else { "close" }
        )
        .into_bytes();
        let mut body_left = if request.head_only {
            0
        } else {
            request.body_bytes
        };
        // Headers and the start of the body in one write.
        let first_part =
            body_left.min((WRITE_CHUNK - response.len().min(WRITE_CHUNK)) as u64) as usize;
        response.extend_from_slice(&BODY_PATTERN[..first_part]);
        body_left -= first_part as u64;
        if !write_bounded(&mut stream, &response, &shared).await {
            return;
        }
        while body_left > 0 {
            let part = body_left.min(WRITE_CHUNK as u64) as usize;
            if !write_bounded(&mut stream, &BODY_PATTERN[..part], &shared).await {
                return;
            }
            body_left -= part as u64;
        }
        bump(&shared.counters.requests_served);
        if !request.keep_alive {
            let _ = stream.shutdown().await;
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Request, Rejection> {
        parse_request(text.as_bytes(), &TestServerConfig::default())
    }

    #[test]
    fn requests_parse() {
        let request = parse("GET /x HTTP/1.1\r\nHost: a").unwrap();
        assert_eq!(
            request,
            Request {
                head_only: false,
                body_bytes: 1024,
                keep_alive: true
            }
        );
        assert!(
            !parse("GET / HTTP/1.0\r\nConnection: keep-alive")
                .unwrap()
                .keep_alive
        );
        assert!(
            !parse("GET / HTTP/1.1\r\nConnection: Close")
                .unwrap()
                .keep_alive
        );
        assert_eq!(parse("HEAD /bytes/7?q=1 HTTP/1.1").unwrap().body_bytes, 7);
        assert!(parse("HEAD / HTTP/1.1").unwrap().head_only);
        assert!(parse("\r\nGET / HTTP/1.1").is_ok());
    }

    #[test]
    fn bad_requests_get_the_right_status() {
        let status = |text: &str| parse(text).unwrap_err().status;
        assert_eq!(status("garbage"), 400);
        assert_eq!(status("GET  / HTTP/1.1"), 400);
        assert_eq!(status("GET / HTTP/1.1\r\nno-colon"), 400);
        assert_eq!(status("GET / HTTP/1.1\r\nbad name: x"), 400);
        assert_eq!(status("GET / HTTP/1.1\r\nX: \u{1}"), 400);
        assert_eq!(status("GET http://a/ HTTP/1.1"), 400);
        assert_eq!(status("GET / HTTP/2.0"), 505);
        assert_eq!(status("GET / HTTP/3"), 505);
        assert_eq!(status("\r\n\r\n"), 400);
        assert_eq!(status("GET / FTP/1.0"), 400);
        assert_eq!(status("POST / HTTP/1.1"), 405);
        assert_eq!(status("GET / HTTP/1.1\r\nContent-Length: 5"), 413);
        assert_eq!(status("GET / HTTP/1.1\r\nContent-Length: x"), 400);
        assert_eq!(status("GET /bytes/abc HTTP/1.1"), 400);
        assert_eq!(status("GET /bytes/999999999999999 HTTP/1.1"), 400);
        assert!(parse_request(b"\xff\xfe", &TestServerConfig::default()).is_err());
    }

    #[test]
    fn service_times_have_their_means() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for distribution in [
            ServiceTime::Constant { ms: 5.0 },
            ServiceTime::Exponential { mean_ms: 5.0 },
            ServiceTime::Uniform {
                min_ms: 2.0,
                max_ms: 8.0,
            },
        ] {
            let total: f64 = (0..20_000)
                .map(|_| distribution.sample(&mut rng).as_secs_f64())
                .sum();
            let mean_ms = total / 20_000.0 * 1000.0;
            assert!(
                (mean_ms - distribution.mean_ms()).abs() < 0.15,
                "{distribution:?}: {mean_ms}"
            );
        }
    }

    #[test]
    fn configuration_errors_name_the_key() {
        let cases = [
            (
                "accept_rate",
                TestServerConfig {
                    accept_rate: -1.0,
                    ..TestServerConfig::default()
                },
            ),
            (
                "workers",
                TestServerConfig {
                    workers: 0,
                    ..TestServerConfig::default()
                },
            ),
            (
                "service_time.max_ms",
                TestServerConfig {
                    service_time: ServiceTime::Uniform {
                        min_ms: 5.0,
                        max_ms: 1.0,
                    },
                    ..TestServerConfig::default()
                },
            ),
            (
                "response_bytes",
                TestServerConfig {
                    response_bytes: 10,
                    max_response_bytes: 5,
                    ..TestServerConfig::default()
                },
            ),
        ];
        for (key, config) in cases {
            let error = config.validate().unwrap_err().to_string();
            assert!(error.starts_with(key), "{key}: {error}");
        }
        let config = TestServerConfig::from_toml(
            "backlog = 1\n[service_time]\nkind = \"exponential\"\nmean_ms = 5\n",
        )
        .unwrap();
        assert_eq!(config.backlog, 1);
        let error = TestServerConfig::from_toml("backlg = 1").unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("test server configuration:1: unknown field `backlg`"),
            "{error}"
        );
        let error = TestServerConfig::from_toml(
            "workers = 2
backlog = 70000
",
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "test server configuration:2: `backlog` must be in [0, 65535], got 70000"
        );
    }
}
