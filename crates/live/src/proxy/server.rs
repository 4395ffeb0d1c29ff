//! The data path: hyper 1.x on tokio; HTTP/1.1 or HTTP/2 without TLS
//! (h2c, prior knowledge; hyper-util's auto builder) to clients, HTTP/1.1
//! to upstreams.
//!
//! Client side: keep-alive; at most 128 concurrent HTTP/2 streams per
//! connection and an HTTP/2 header list of at most `limits.max_header_bytes`; the request head must arrive within
//! `timeouts.request_headers_ms` (slowloris)
//! and fit in `limits.max_header_bytes` (hyper's read buffer: the request
//! line and headers together); a connection with no request in progress for
//! `timeouts.idle_ms` is closed, and so is one that sent no request head
//! within the header timeout. Idle means no request in progress and
//! nothing left unwritten ([`Activity`]); a client that takes no byte of
//! what waits for it for `timeouts.send_ms` is closed (nginx's
//! `send_timeout`). Departure: the head of a later
//! request on a keep-alive connection is bounded by `idle_ms` from the end
//! of the previous response (hyper's header timer, which would drop a
//! response still waiting for a slow client, is off); such a trickling
//! connection counts as idle, so it is the first evicted when the
//! connection cap is reached; at most `limits.max_connections` are open
//! (lowered to what the descriptor limit allows, [`connection_budget`]):
//! when full, the connection idle longest is closed to make room, as
//! nginx drains its keep-alive connections (never one with a request
//! waiting unread in its socket: the next idlest goes instead), and only
//! when none is idle is the new one closed at once; all are counted.
//! Framing is
//! hyper's parser: differing `Content-Length`s, an obs-folded header, a
//! `Transfer-Encoding` whose last coding is not chunked are refused with
//! 400 and never forwarded. Departure from a plain refusal: a request with
//! both `Content-Length` and `Transfer-Encoding` is read by the chunked
//! framing alone, its `Content-Length` dropped, and the connection closed
//! after the response (RFC 9112 §6.1, as hyper does); a bare LF line end
//! is read as CRLF. Either way what is forwarded is hyper's own re-framed
//! request, so the backend reads exactly what the proxy read.
//!
//! Upstream side: hyper's HTTP/1.1 client connections in a pool of our own
//! ([`super::upstream::Pool`]); bodies stream both ways (the
//! request body is cut at `limits.max_body_bytes` while streaming, a
//! declared larger one is refused with 413 before anything is sent). Hop-
//! by-hop headers (RFC 9110 §7.6.1, and those named in `Connection`) are
//! removed both ways, `Via` and `X-Forwarded-For` added. A connect failure
//! or a response head later than `timeouts.upstream_response_ms` marks the
//! upstream down; a request without a body is then retried on the next
//! upstream (nothing was sent), else answered 502 (connect, other errors)
//! or 504 (timeout). Every failure is counted, by kind. Upgrades
//! (WebSocket) are not forwarded: `Upgrade` is hop-by-hop and removed.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{Full, Limited};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use serde::Serialize;

use vantage_core::admission::session::TokenMemo;

use super::config::ProxyConfig;
use super::metrics::{Failure, ProxyMetrics};
use super::resources::{ConnectionEvents, Resources};
use super::sbac::{rejection, Sbac, Verdict};
use super::tls::TlsError;
use super::upstream::{Pool, PooledBody, SendError, UpstreamBody, Upstreams};
use super::utilization::{parse_orca, InFlight, OrcaReports};
use crate::daemon::LogFile;
use vantage_sys::tcp_info;

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How long the accept loop waits after `accept` failed (e.g. `EMFILE`).
const ACCEPT_RETRY: Duration = Duration::from_millis(50);
/// How long a new connection waits for the slot of an evicted idle one.
const EVICTION_WAIT: Duration = Duration::from_millis(50);
/// Streams one HTTP/2 client may have open at once.
const MAX_STREAMS: u32 = 128;
/// Longest request target written to the access log.
const MAX_LOGGED_TARGET: usize = 512;

/// What a reload may change: everything but the listener, the workers, the
/// metrics address and whether (and which) SBAC runs.
pub struct Settings {
    pub config: ProxyConfig,
    pub upstreams: Upstreams,
    pub pool: Arc<Pool>,
    pub sbac: Option<Arc<Sbac>>,
    pub orca: OrcaReports,
    pub connections: Arc<tokio::sync::Semaphore>,
    /// TLS to clients (`[tls]`), its files read when these settings were
    /// made.
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    /// Each upstream's `Host`, for a request that has none.
    pub hosts: Vec<HeaderValue>,
    /// Each upstream's latency histogram.
    pub latency: Vec<prometheus_client::metrics::histogram::Histogram>,
}

impl Settings {
    pub fn new(
        config: ProxyConfig,
        sbac: Option<Arc<Sbac>>,
        metrics: &ProxyMetrics,
        resources: &Arc<Resources>,
    ) -> Result<Settings, TlsError> {
        let tls = config
            .tls
            .as_ref()
            .map(|t| super::tls::acceptor(&t.cert, &t.key))
            .transpose()?;
        let pool = Arc::new(Pool::new(
            config.upstreams.len(),
            config.limits.upstream_idle_connections,
            Duration::from_millis(config.timeouts.connect_ms),
            Arc::clone(resources),
        ));
        Ok(Settings {
            tls,
            hosts: config.upstreams.iter().map(|u| host_header(*u)).collect(),
            latency: config
                .upstreams
                .iter()
                .map(|u| metrics.upstream_histogram(*u))
                .collect(),
            upstreams: Upstreams::new(
                config.upstreams.clone(),
                Duration::from_millis(config.timeouts.upstream_down_ms),
            ),
            orca: OrcaReports::new(config.upstreams.len()),
            connections: Arc::new(tokio::sync::Semaphore::new(connection_budget(
                &config,
                crate::daemon::descriptor_limit().ok(),
            ))),
            pool,
            sbac,
            config,
        })
    }
}

/// The `Host` sent upstream for a request that came without one: the
/// upstream's address, its port left out when it is 80 (as hyper-util's
/// client, used before, did).
fn host_header(upstream: SocketAddr) -> HeaderValue {
    let host = match (upstream.port(), upstream) {
        (80, SocketAddr::V4(a)) => a.ip().to_string(),
        (80, SocketAddr::V6(a)) => format!("[{}]", a.ip()),
        _ => upstream.to_string(),
    };
    HeaderValue::from_str(&host).expect("a socket address is a valid header value")
}

/// Client connections served at once: `limits.max_connections`, lowered
/// to what the descriptor limit allows — each client connection may hold
/// an upstream connection too, the pool keeps idle ones, and 64 are left
/// for everything else (logs, metrics, `/proc` reads). Past it, accepting
/// would fail with `EMFILE` for everyone, upstream connects included.
pub fn connection_budget(config: &ProxyConfig, descriptor_limit: Option<u64>) -> usize {
    let configured = config.limits.max_connections;
    let Some(limit) = descriptor_limit else {
        return configured;
    };
    let pool = (config.limits.upstream_idle_connections * config.upstreams.len()) as u64;
    let budget = (limit.saturating_sub(64 + pool) / 2).max(1);
    configured.min(usize::try_from(budget).unwrap_or(usize::MAX))
}

/// What every connection shares.
pub struct Shared {
    pub settings: RwLock<Arc<Settings>>,
    pub metrics: Arc<ProxyMetrics>,
    pub in_flight: InFlight,
    pub access_log: Mutex<Option<LogFile>>,
    /// Whether `access_log` holds a file.
    pub logging: AtomicBool,
    pub sampler: Mutex<super::utilization::Sampler>,
    /// Open client connections (for eviction).
    pub open: Mutex<std::collections::HashMap<u64, Arc<Activity>>>,
    pub next_connection: AtomicU64,
    pub stop: tokio::sync::watch::Receiver<bool>,
    /// Socket buffers and idle connections (`[resources]`).
    pub resources: Arc<Resources>,
    /// `[certes]`: the listener's Certes counters per interval.
    pub certes: Option<Arc<super::certes_stream::CertesStream>>,
}

impl Shared {
    fn register(&self, activity: &Arc<Activity>) -> u64 {
        let id = self.next_connection.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut open) = self.open.lock() {
            open.insert(id, Arc::clone(activity));
        }
        id
    }

    fn unregister(&self, id: u64) {
        if let Ok(mut open) = self.open.lock() {
            open.remove(&id);
        }
    }

    /// Tells the open connection idle longest to close; whether there was
    /// one.
    fn evict_idlest(&self) -> bool {
        let Ok(open) = self.open.lock() else {
            return false;
        };
        let idlest = open
            .values()
            .filter_map(|a| a.idle_for().map(|idle| (idle, a)))
            .max_by_key(|(idle, _)| *idle);
        match idlest {
            Some((_, activity)) => {
                activity.evict.notify_one();
                true
            }
            None => false,
        }
    }

    pub fn settings(&self) -> Arc<Settings> {
        match self.settings.read() {
            Ok(s) => Arc::clone(&s),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    fn log(&self, line: &AccessLine) {
        let Ok(mut log) = self.access_log.lock() else {
            return;
        };
        let Some(log) = log.as_mut() else {
            return;
        };
        if line.client.is_empty() {
            // Made before the log was opened (a reload): nothing to write.
            return;
        }
        let written = serde_json::to_vec(line)
            .map_err(std::io::Error::other)
            .and_then(|bytes| log.write_line(&bytes));
        if written.is_err() {
            self.metrics.access_log_errors.inc();
        }
    }
}

/// One line of the access log.
#[derive(Clone, Debug, Default, Serialize)]
struct AccessLine {
    /// Seconds since the Unix epoch.
    ts: f64,
    client: String,
    method: String,
    target: String,
    status: u16,
    upstream: Option<String>,
    session: Option<String>,
    verdict: &'static str,
    outcome: &'static str,
    duration_us: u64,
}

/// The accept loop: until `stop` turns true.
pub async fn serve(listener: tokio::net::TcpListener, shared: Arc<Shared>) {
    let mut stop = shared.stop.clone();
    let mut reported_accept_error = false;
    loop {
        let accepted = tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(a) => {
                reported_accept_error = false;
                a
            }
            Err(e) => {
                if !reported_accept_error {
                    eprintln!("vantage proxy: accept: {e}; retrying");
                    reported_accept_error = true;
                }
                tokio::time::sleep(ACCEPT_RETRY).await;
                continue;
            }
        };
        let certes = shared.certes.as_ref().map(|c| c.accepted(&stream));
        let settings = shared.settings();
        let permit = match Arc::clone(&settings.connections).try_acquire_owned() {
            Ok(permit) => Some(permit),
            // Full: make room by closing the connection idle longest (none
            // of its requests in progress), as nginx reuses keep-alive
            // connections; refuse if none is idle.
            Err(_) => match shared.evict_idlest() {
                true => tokio::time::timeout(
                    EVICTION_WAIT,
                    Arc::clone(&settings.connections).acquire_owned(),
                )
                .await
                .ok()
                .and_then(Result::ok),
                false => None,
            },
        };
        let Some(permit) = permit else {
            shared.metrics.connections_refused.inc();
            if let Some(sbac) = &settings.sbac {
                sbac.counts
                    .refused_connections
                    .fetch_add(1, Ordering::Relaxed);
            }
            drop(stream);
            if let (Some(c), Some(accepted)) = (&shared.certes, &certes) {
                c.ended(accepted);
            }
            continue;
        };
        let _ = stream.set_nodelay(true);
        let reclaim = Arc::new(tokio::sync::Notify::new());
        let stream = shared.resources.track_client(stream, Arc::clone(&reclaim));
        let activity = Arc::new(Activity {
            active: AtomicUsize::new(0),
            unsent: AtomicBool::new(false),
            blocked_ms: AtomicU64::new(0),
            fd: stream.get_ref().as_raw_fd(),
            requested: AtomicBool::new(false),
            last_ms: AtomicU64::new(0),
            opened: Instant::now(),
            evict: tokio::sync::Notify::new(),
            reclaim,
            events: stream.events(),
            peer_ip: peer_header(peer),
            token_memo: std::sync::Mutex::new(TokenMemo::new()),
            upstream_timer: Mutex::new(None),
        });
        let stream = Watched {
            stream,
            activity: Arc::clone(&activity),
        };
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            shared.metrics.connections_open.inc();
            let id = shared.register(&activity);
            match settings.tls.clone() {
                None => connection(stream, peer, &shared, &settings, &activity).await,
                Some(acceptor) => {
                    let handshake =
                        Duration::from_millis(settings.config.timeouts.request_headers_ms);
                    match tokio::time::timeout(handshake, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => connection(tls, peer, &shared, &settings, &activity).await,
                        _ => {
                            shared.metrics.tls_handshakes_failed.inc();
                        }
                    }
                }
            }
            shared.unregister(id);
            if let (Some(c), Some(accepted)) = (&shared.certes, &certes) {
                c.ended(accepted);
            }
            shared.metrics.connections_open.dec();
            drop(permit);
        });
    }
}

/// A client connection's activity, for the idle timeout and eviction.
///
/// A connection is idle when no request is in progress (none whose
/// response body the upstream is still producing) *and* everything
/// written for it has reached the kernel: hyper takes a response's last
/// body frame into its own write buffer, which a slow client's full socket
/// may hold for seconds; closing the connection then would drop those
/// bytes and cut the response.
#[derive(Debug)]
pub struct Activity {
    /// Requests whose response body has not been taken whole by hyper.
    active: AtomicUsize,
    /// The last write to the socket would have blocked: hyper (or TLS)
    /// still holds bytes for it.
    unsent: AtomicBool,
    /// Since when writes have been waiting without a byte going through
    /// (ms since the connection opened; meaningful while `unsent`).
    blocked_ms: AtomicU64,
    /// The client socket, for `FIONREAD` from the connection's own task
    /// (where the socket is still open).
    fd: RawFd,
    /// Whether a request head has ever been read on it.
    requested: AtomicBool,
    /// Told to close (it was idle and a new connection needs its slot).
    evict: tokio::sync::Notify,
    /// Told to close gracefully (the connection manager reclaims it).
    reclaim: Arc<tokio::sync::Notify>,
    /// Requests and responses reported to the connection manager.
    events: Option<ConnectionEvents>,
    /// When the last request began, the last response body ended or the
    /// last blocked write went through (ms since the connection opened).
    last_ms: AtomicU64,
    opened: Instant,
    /// The client's address, as `X-Forwarded-For` carries it.
    peer_ip: HeaderValue,
    /// The last session cookie that authenticated on this connection.
    token_memo: std::sync::Mutex<TokenMemo>,
    /// The connection's upstream response timer, between requests
    /// ([`UpstreamDeadline`]); empty until the first request is sent.
    upstream_timer: Mutex<Option<Pin<Box<tokio::time::Sleep>>>>,
}

fn peer_header(peer: SocketAddr) -> HeaderValue {
    HeaderValue::from_str(&peer.ip().to_string()).expect("an IP address is a valid header value")
}

impl Activity {
    /// Whether a request has arrived that hyper has not read yet: bytes in
    /// the socket's receive queue (`FIONREAD`). Called only from the
    /// connection's own task, while the socket is open.
    fn request_waiting(&self) -> bool {
        // SAFETY: the connection's task owns the socket for as long as it
        // runs, and only that task calls this.
        let fd = unsafe { BorrowedFd::borrow_raw(self.fd) };
        tcp_info::unread_bytes(fd).is_ok_and(|n| n > 0)
    }

    fn touch(&self) {
        self.last_ms.store(self.now_ms(), Ordering::Relaxed);
    }

    /// As [`Activity::touch`], with the caller's clock reading `now`.
    fn touch_at(&self, now: Instant) {
        let ms = now.saturating_duration_since(self.opened).as_millis() as u64;
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    fn now_ms(&self) -> u64 {
        self.opened.elapsed().as_millis() as u64
    }

    /// How long writes have waited without a byte going through; `None`
    /// when nothing waits.
    fn blocked_for(&self) -> Option<Duration> {
        self.unsent.load(Ordering::Relaxed).then(|| {
            Duration::from_millis(
                self.now_ms()
                    .saturating_sub(self.blocked_ms.load(Ordering::Relaxed)),
            )
        })
    }

    /// How long the connection has been idle (no request in progress,
    /// nothing left to write); `None` when it is not.
    fn idle_for(&self) -> Option<Duration> {
        (self.active.load(Ordering::Relaxed) == 0 && !self.unsent.load(Ordering::Relaxed)).then(
            || {
                self.opened
                    .elapsed()
                    .saturating_sub(Duration::from_millis(self.last_ms.load(Ordering::Relaxed)))
            },
        )
    }
}

/// A request's upstream response time-out (`timeouts.upstream_response_ms`
/// from the moment the request is sent until its response head): the
/// connection's one timer, re-armed for the request with `Sleep::reset`
/// and put back when the request is done with it, so a request adds no
/// timer entry of its own (tokio moves a deadline later with one atomic
/// exchange, the entry staying where it is in the timer wheel). A request
/// that finds the timer taken — another HTTP/2 stream of the connection
/// waits on it — gets a timer of its own. Either way its deadline is its
/// own send time plus the time-out, as with `tokio::time::timeout`.
struct UpstreamDeadline<'a> {
    slot: &'a Mutex<Option<Pin<Box<tokio::time::Sleep>>>>,
    /// Always `Some` until dropped (then back in `slot` if it is free).
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<'a> UpstreamDeadline<'a> {
    fn arm(
        slot: &'a Mutex<Option<Pin<Box<tokio::time::Sleep>>>>,
        deadline: tokio::time::Instant,
    ) -> UpstreamDeadline<'a> {
        let sleep = match slot.try_lock().ok().and_then(|mut timer| timer.take()) {
            Some(mut sleep) => {
                sleep.as_mut().reset(deadline);
                sleep
            }
            None => Box::pin(tokio::time::sleep_until(deadline)),
        };
        UpstreamDeadline {
            slot,
            sleep: Some(sleep),
        }
    }

    /// Polls `work` bounded by the deadline: its output, or `None` once
    /// the deadline has passed first (`work` is polled first, as
    /// `tokio::time::timeout` does: an answer ready at the deadline is
    /// taken).
    fn poll_bound<F: Future>(
        &mut self,
        work: Pin<&mut F>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<F::Output>> {
        if let Poll::Ready(output) = work.poll(cx) {
            return Poll::Ready(Some(output));
        }
        match self.sleep.as_mut() {
            Some(sleep) => sleep.as_mut().poll(cx).map(|()| None),
            // Not reached: `sleep` is taken only on drop.
            None => Poll::Ready(None),
        }
    }
}

impl Drop for UpstreamDeadline<'_> {
    fn drop(&mut self) {
        if let Ok(mut slot) = self.slot.try_lock() {
            if slot.is_none() {
                *slot = self.sleep.take();
            }
        }
    }
}

/// A client socket that tells its [`Activity`] whether hyper's last write
/// would have blocked (hyper then still holds bytes for it, and keeps
/// trying until they are all written).
struct Watched<S> {
    stream: S,
    activity: Arc<Activity>,
}

impl<S> Watched<S> {
    fn wrote<T>(&self, result: Poll<std::io::Result<T>>) -> Poll<std::io::Result<T>> {
        match &result {
            Poll::Pending => {
                if !self.activity.unsent.swap(true, Ordering::Relaxed) {
                    let now = self.activity.now_ms();
                    self.activity.blocked_ms.store(now, Ordering::Relaxed);
                }
            }
            Poll::Ready(_) => {
                if self.activity.unsent.swap(false, Ordering::Relaxed) {
                    // The bytes that waited have gone: the idle time
                    // starts no earlier than now.
                    self.activity.touch();
                }
            }
        }
        result
    }
}

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let result = Pin::new(&mut self.stream).poll_write(cx, buf);
        self.wrote(result)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let result = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        self.wrote(result)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let result = Pin::new(&mut self.stream).poll_flush(cx);
        self.wrote(result)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

async fn connection<I>(
    stream: I,
    peer: SocketAddr,
    shared: &Arc<Shared>,
    settings: &Settings,
    activity: &Arc<Activity>,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let limits = settings.config.limits;
    let timeouts = settings.config.timeouts;
    let service_shared = Arc::clone(shared);
    let service_activity = Arc::clone(activity);
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let shared = Arc::clone(&service_shared);
        let activity = Arc::clone(&service_activity);
        activity.active.fetch_add(1, Ordering::Relaxed);
        if let Some(events) = &activity.events {
            events.request_started();
        }
        activity.requested.store(true, Ordering::Relaxed);
        // One clock reading for the request's arrival: the connection's
        // activity and the request's start.
        let started = Instant::now();
        activity.touch_at(started);
        async move { Ok::<_, Infallible>(handle(shared, activity, peer, request, started).await) }
    });
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        // Not hyper's header timer: it starts when a response's last bytes
        // enter hyper's write buffer, and when it fires hyper drops the
        // connection with whatever of that response a slow client has not
        // taken yet. The loop below bounds the first head by
        // `request_headers_ms` and a later one by `idle_ms` from the moment
        // the previous response was written out.
        .header_read_timeout(None)
        .max_buf_size(limits.max_header_bytes)
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(MAX_STREAMS)
        .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX))
        .keep_alive_interval(Some(Duration::from_secs(20)));
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let idle_timeout = Duration::from_millis(timeouts.idle_ms);
    let grace = Duration::from_millis(timeouts.request_headers_ms);
    let send_timeout = Duration::from_millis(timeouts.send_ms);
    let check = idle_timeout
        .min(grace)
        .min(send_timeout)
        .min(Duration::from_millis(250));
    let mut stop = shared.stop.clone();
    let mut closing: Option<Instant> = None;
    loop {
        tokio::select! {
            _ = conn.as_mut() => return,
            _ = stop.wait_for(|s| *s), if closing.is_none() => {
                conn.as_mut().graceful_shutdown();
                closing = Some(Instant::now());
            }
            _ = activity.reclaim.notified(), if closing.is_none() => {
                conn.as_mut().graceful_shutdown();
                closing = Some(Instant::now());
            }
            _ = activity.evict.notified() => {
                if activity.idle_for().is_none() {
                    // Busy since it was chosen: the eviction goes on to the
                    // next idlest.
                    shared.evict_idlest();
                } else if activity.request_waiting() {
                    // A request has arrived that hyper has not read yet:
                    // closing now would reset the connection and lose it.
                    activity.touch();
                    shared.metrics.evictions_passed_on.inc();
                    shared.evict_idlest();
                } else {
                    shared.metrics.connections_evicted.inc();
                    return;
                }
            }
            _ = tokio::time::sleep(check) => {
                // Never a request head within the header timeout (hyper's
                // timer starts only once the protocol is known).
                if !activity.requested.load(Ordering::Relaxed)
                    && activity.opened.elapsed() >= grace
                {
                    return;
                }
                // A client that takes nothing of what waits for it.
                if activity.blocked_for().is_some_and(|b| b >= send_timeout) {
                    shared.metrics.send_timeouts.inc();
                    return;
                }
                match closing {
                    // A peer that ignores the close gets dropped.
                    Some(since) => if since.elapsed() >= grace && activity.idle_for().is_some() {
                        return;
                    },
                    None => if activity.idle_for().is_some_and(|idle| idle >= idle_timeout) {
                        conn.as_mut().graceful_shutdown();
                        closing = Some(Instant::now());
                    },
                }
            }
        }
    }
}

/// Header names that belong to one connection (RFC 9110 §7.6.1), and
/// `proxy-authenticate`. A `static`: a use does not build and drop a fresh
/// array of names, as a `const` would. Positions as `hop_by_hop_index`
/// gives them.
static HOP_BY_HOP: [HeaderName; 9] = [
    hyper::header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    hyper::header::TE,
    hyper::header::TRAILER,
    hyper::header::TRANSFER_ENCODING,
    hyper::header::UPGRADE,
    hyper::header::PROXY_AUTHORIZATION,
    hyper::header::PROXY_AUTHENTICATE,
];

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
/// ORCA's load report (`utilization.rs`).
const LOAD_REPORT: HeaderName = HeaderName::from_static("endpoint-load-metrics");

/// The position of `name` in `HOP_BY_HOP`, if it is one: one match on the
/// (lower-case) name, which the compiler turns into a switch on its length
/// and a comparison, instead of nine `HeaderName` comparisons.
#[cfg(test)]
fn hop_by_hop_index(name: &HeaderName) -> Option<usize> {
    match name_kind(name) {
        NameKind::HopByHop(i) => Some(i),
        _ => None,
    }
}

/// What the proxy does with a header name: strip it (its position in
/// `HOP_BY_HOP`), look it up (one of `Names`'s fields), or forward it.
enum NameKind {
    HopByHop(usize),
    Host,
    ContentLength,
    XForwardedFor,
    LoadReport,
    Other,
}

/// One match on the (lower-case) name, which the compiler turns into a
/// switch on its length and a comparison.
fn name_kind(name: &HeaderName) -> NameKind {
    match name.as_str() {
        "connection" => NameKind::HopByHop(0),
        "keep-alive" => NameKind::HopByHop(1),
        "proxy-connection" => NameKind::HopByHop(2),
        "te" => NameKind::HopByHop(3),
        "trailer" => NameKind::HopByHop(4),
        "transfer-encoding" => NameKind::HopByHop(5),
        "upgrade" => NameKind::HopByHop(6),
        "proxy-authorization" => NameKind::HopByHop(7),
        "proxy-authenticate" => NameKind::HopByHop(8),
        "host" => NameKind::Host,
        "content-length" => NameKind::ContentLength,
        "x-forwarded-for" => NameKind::XForwardedFor,
        "endpoint-load-metrics" => NameKind::LoadReport,
        _ => NameKind::Other,
    }
}

/// The names of a message's headers that the proxy acts on, found in one
/// pass over the names: a name noted absent is not looked up (a lookup
/// hashes the name and probes the map, some hundreds of instructions).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Names {
    /// A bit per entry of `HOP_BY_HOP` present.
    hop_by_hop: u16,
    host: bool,
    content_length: bool,
    x_forwarded_for: bool,
    /// `endpoint-load-metrics` (ORCA).
    load_report: bool,
}

impl Names {
    fn of(headers: &HeaderMap) -> Names {
        let mut names = Names::default();
        for name in headers.keys() {
            names.note(name, true);
        }
        names
    }

    /// Records `name` as present or (removed) absent.
    fn note(&mut self, name: &HeaderName, present: bool) {
        match name_kind(name) {
            NameKind::HopByHop(i) if present => self.hop_by_hop |= 1 << i,
            NameKind::HopByHop(i) => self.hop_by_hop &= !(1 << i),
            NameKind::Host => self.host = present,
            NameKind::ContentLength => self.content_length = present,
            NameKind::XForwardedFor => self.x_forwarded_for = present,
            NameKind::LoadReport => self.load_report = present,
            NameKind::Other => {}
        }
    }
}

/// Removes the hop-by-hop headers `names` (from `Names::of`) found, and the
/// names `Connection` lists; `names` then says what is left.
fn strip_hop_by_hop(headers: &mut HeaderMap, names: &mut Names) {
    // Only the hop-by-hop names present, and the names `Connection` lists,
    // are removed. A typical response carries just `Connection:
    // keep-alive`, whose listed name is itself in `HOP_BY_HOP`: no
    // allocation. Other listed names are collected in a list.
    let mut present = names.hop_by_hop;
    if present == 0 {
        return;
    }
    let mut listed: Vec<HeaderName> = Vec::new();
    for token in headers
        .get_all(hyper::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
    {
        let token = token.trim();
        match HOP_BY_HOP
            .iter()
            .position(|h| h.as_str().eq_ignore_ascii_case(token))
        {
            Some(i) => present |= 1 << i,
            None => listed.extend(HeaderName::from_bytes(token.as_bytes()).ok()),
        }
    }
    for (i, name) in HOP_BY_HOP.iter().enumerate() {
        if present & (1 << i) != 0 {
            headers.remove(name);
        }
    }
    names.hop_by_hop = 0;
    for name in listed {
        headers.remove(&name);
        names.note(&name, false);
    }
}

fn add_via(headers: &mut HeaderMap, version: hyper::Version) {
    // Constants: `from_static` checks its bytes when it runs, which a
    // `const` does once at compile time.
    const VIA_10: HeaderValue = HeaderValue::from_static("1.0 vantage");
    const VIA_11: HeaderValue = HeaderValue::from_static("1.1 vantage");
    const VIA_2: HeaderValue = HeaderValue::from_static("2 vantage");
    let via = match version {
        hyper::Version::HTTP_10 => VIA_10,
        hyper::Version::HTTP_2 => VIA_2,
        _ => VIA_11,
    };
    headers.append(hyper::header::VIA, via);
}

/// What happens when a response has been sent (or abandoned).
struct Completion {
    shared: Arc<Shared>,
    settings: Arc<Settings>,
    activity: Arc<Activity>,
    /// Held while the upstream works on the request.
    in_flight: Option<InFlightGuard>,
    /// The request's session and whether its last answer was ok.
    session: Option<(u64, bool)>,
    line: AccessLine,
    started: Instant,
    /// A failure already counted (5xx, 502, …): the response is not "ok".
    failed: bool,
    done: bool,
}

impl Completion {
    fn finish(&mut self, body_failure: Option<Failure>) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        let failure = body_failure.filter(|_| !self.failed);
        if let Some(failure) = failure {
            self.shared.metrics.count_failure(failure);
            if let Some(sbac) = &self.settings.sbac {
                sbac.counts.aborted_requests.fetch_add(1, Ordering::Relaxed);
            }
            self.line.outcome = failure.name();
        }
        let ok = !self.failed && failure.is_none();
        // One clock reading for the request's end: the occupancy, the
        // logged duration and the connection's activity.
        let now = Instant::now();
        if let Some(in_flight) = self.in_flight.take() {
            in_flight.leave(now);
        }
        if let (Some(sbac), Some(session)) = (&self.settings.sbac, self.session) {
            sbac.on_response(session.0, ok, session.1);
        }
        self.line.duration_us = now.saturating_duration_since(self.started).as_micros() as u64;
        self.shared.log(&self.line);
        self.activity.active.fetch_sub(1, Ordering::Relaxed);
        self.activity.touch_at(now);
        if let Some(events) = &self.activity.events {
            events.response_completed();
        }
    }
}

impl Drop for Completion {
    /// Dropped unfinished: the client went away before its response (the
    /// connection closed while the upstream worked).
    fn drop(&mut self) {
        self.finish(Some(Failure::ClientGone));
    }
}

/// One request at the upstreams, for the occupancy; left at
/// [`InFlightGuard::leave`], or on drop.
struct InFlightGuard(Option<Arc<Shared>>);

impl InFlightGuard {
    fn enter(shared: &Arc<Shared>, now: Instant) -> InFlightGuard {
        shared.in_flight.enter(now);
        InFlightGuard(Some(Arc::clone(shared)))
    }

    /// Leaves at the caller's clock reading `now`.
    fn leave(mut self, now: Instant) {
        if let Some(shared) = self.0.take() {
            shared.in_flight.leave(now);
        }
    }
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        if let Some(shared) = self.0.take() {
            shared.in_flight.leave(Instant::now());
        }
    }
}

/// The response body to the client: streams `inner` and, when it ends or
/// is dropped, completes the request (a body dropped before its end is a
/// client gone before the response).
pub struct Tracked {
    inner: ResponseBody,
    completion: Option<Completion>,
}

impl Body for Tracked {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(None) => {
                if let Some(mut c) = self.completion.take() {
                    c.finish(None);
                }
            }
            Poll::Ready(Some(Err(_))) => {
                if let Some(mut c) = self.completion.take() {
                    c.finish(Some(Failure::UpstreamError));
                }
            }
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if let Some(mut c) = self.completion.take() {
            let gone = (!self.inner.is_end_stream()).then_some(Failure::ClientGone);
            c.finish(gone);
        }
    }
}

/// A response body: the proxy's own or an upstream's.
pub enum ResponseBody {
    Local(Full<Bytes>),
    Upstream(PooledBody),
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            ResponseBody::Local(body) => Pin::new(body)
                .poll_frame(cx)
                .map(|frame| frame.map(|f| f.map_err(|never| match never {}))),
            ResponseBody::Upstream(body) => Pin::new(body)
                .poll_frame(cx)
                .map(|frame| frame.map(|f| f.map_err(BoxError::from))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ResponseBody::Local(body) => body.is_end_stream(),
            ResponseBody::Upstream(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ResponseBody::Local(body) => body.size_hint(),
            ResponseBody::Upstream(body) => body.size_hint(),
        }
    }
}

fn full(bytes: Bytes) -> ResponseBody {
    ResponseBody::Local(Full::new(bytes))
}

fn local(status: StatusCode, text: &'static str) -> Response<ResponseBody> {
    let mut response = Response::new(full(Bytes::from_static(text.as_bytes())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

fn wall_seconds() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn is_body_limit(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if e.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = e.source();
    }
    false
}

async fn handle(
    shared: Arc<Shared>,
    activity: Arc<Activity>,
    peer: SocketAddr,
    request: Request<Incoming>,
    started: Instant,
) -> Response<Tracked> {
    let settings = shared.settings();
    let target = request
        .uri()
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    // The log line's strings are made only when there is a log.
    let logging = shared.logging.load(Ordering::Relaxed);
    let mut line = AccessLine {
        verdict: "none",
        outcome: "ok",
        ..AccessLine::default()
    };
    if logging {
        line.ts = wall_seconds();
        line.client = peer.ip().to_string();
        line.method = request.method().as_str().chars().take(32).collect();
        line.target = target.chars().take(MAX_LOGGED_TARGET).collect();
    }
    let mut completion = Completion {
        shared: Arc::clone(&shared),
        settings: Arc::clone(&settings),
        activity,
        in_flight: None,
        session: None,
        line: AccessLine::default(),
        started,
        failed: false,
        done: false,
    };

    // Admission.
    let mut set_cookie = None;
    if let Some(sbac) = &settings.sbac {
        let cookie = sbac.find_cookie(request.headers());
        // The connection's last authenticated cookie; when another request
        // of the connection holds it (HTTP/2), this one goes without.
        let verdict = match completion.activity.token_memo.try_lock() {
            Ok(mut memo) => sbac.on_request_remembering(cookie, &mut memo),
            Err(_) => sbac.on_request(cookie),
        };
        line.verdict = verdict.name();
        match verdict {
            Verdict::Pass {
                session_id,
                new_session,
                last_ok,
                set_cookie: cookie,
                refused_token,
            } => {
                if new_session {
                    shared.metrics.sessions_admitted.inc();
                }
                if let Some(why) = &refused_token {
                    shared.metrics.count_token_refused(why);
                }
                completion.session = Some((session_id, last_ok));
                if logging {
                    line.session = Some(format!("{session_id:016x}"));
                }
                let secure = if settings.tls.is_some() {
                    "; Secure"
                } else {
                    ""
                };
                set_cookie =
                    cookie.and_then(|c| HeaderValue::from_str(&format!("{c}{secure}")).ok());
            }
            Verdict::Reject { refused_token } => {
                shared.metrics.sessions_rejected.inc();
                if let Some(why) = &refused_token {
                    shared.metrics.count_token_refused(why);
                }
                let sbac_config = settings.config.sbac.as_ref();
                let response = match sbac_config {
                    Some(c) => rejection(&c.reject, c.retry_after_s).map(full),
                    None => local(StatusCode::SERVICE_UNAVAILABLE, "busy\n"),
                };
                return respond(completion, line, response);
            }
        }
    }

    // CONNECT (tunnels) is not a reverse proxy's business.
    if request.method() == hyper::Method::CONNECT {
        return respond(
            completion,
            line,
            local(StatusCode::METHOD_NOT_ALLOWED, "CONNECT is not served\n"),
        );
    }

    // A declared body over the limit: refused before anything is sent.
    let max_body = settings.config.limits.max_body_bytes;
    if request.body().size_hint().lower() > max_body {
        return respond(
            completion,
            line,
            local(StatusCode::PAYLOAD_TOO_LARGE, "request body too large\n"),
        );
    }

    let (mut parts, body) = request.into_parts();
    let mut names = Names::of(&parts.headers);
    strip_hop_by_hop(&mut parts.headers, &mut names);
    // HTTP/2 carries the host in `:authority`; HTTP/1.1 upstreams need
    // `Host`.
    if !names.host {
        if let Some(host) = parts
            .uri
            .authority()
            .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
        {
            parts.headers.insert(hyper::header::HOST, host);
            names.host = true;
        }
    }
    // The upstream request is framed by hyper from the body it streams
    // (its exact length when known, else chunked), never from a header.
    if names.content_length {
        parts.headers.remove(hyper::header::CONTENT_LENGTH);
    }
    add_via(&mut parts.headers, parts.version);
    let peer_ip = &completion.activity.peer_ip;
    let earlier = if names.x_forwarded_for {
        parts
            .headers
            .get(X_FORWARDED_FOR)
            .and_then(|v| v.to_str().ok())
    } else {
        None
    };
    let forwarded = match earlier {
        Some(earlier) => HeaderValue::from_str(&format!(
            "{earlier}, {}",
            peer_ip.to_str().unwrap_or_default()
        ))
        .ok(),
        None => Some(peer_ip.clone()),
    };
    if let Some(v) = forwarded {
        parts.headers.insert(X_FORWARDED_FOR, v);
    }
    // The origin form (`/path?query`): an HTTP/1.1 client's target as it
    // came, an HTTP/2 client's without scheme and authority.
    let target = match parts.uri.path_and_query() {
        Some(path) if parts.uri.scheme().is_some() || parts.uri.authority().is_some() => {
            hyper::Uri::from(path.clone())
        }
        Some(_) => std::mem::take(&mut parts.uri),
        None => hyper::Uri::from_static("/"),
    };
    // Only a request without a body is retried (nothing was sent), and
    // only when there is another upstream: then its headers are kept.
    let retryable = body.is_end_stream() && settings.upstreams.len() > 1;
    let mut body = Some(UpstreamBody::Client(Limited::new(body, max_body as usize)));
    let upstream_timeout = Duration::from_millis(settings.config.timeouts.upstream_response_ms);
    // The upstreams that failed this request (allocated only on a failure).
    let mut tried: Vec<usize> = Vec::new();
    loop {
        // One clock reading for sending: the down-check, the occupancy, the
        // upstream latency's start, the time-out's deadline, the pool's
        // expiry of idle connections.
        let sent = Instant::now();
        let Some(index) = settings.upstreams.pick(&tried, sent) else {
            shared.metrics.count_failure(Failure::NoUpstream);
            completion.failed = true;
            line.outcome = Failure::NoUpstream.name();
            return respond(
                completion,
                line,
                local(StatusCode::BAD_GATEWAY, "no upstream\n"),
            );
        };
        let address = settings.upstreams.address(index);
        if logging {
            line.upstream = Some(address.to_string());
        }
        let mut upstream_request = Request::new(match body.take() {
            Some(b) => b,
            None => UpstreamBody::Empty,
        });
        *upstream_request.method_mut() = parts.method.clone();
        *upstream_request.uri_mut() = target.clone();
        *upstream_request.version_mut() = hyper::Version::HTTP_11;
        *upstream_request.headers_mut() = if retryable {
            parts.headers.clone()
        } else {
            std::mem::take(&mut parts.headers)
        };
        if !names.host {
            upstream_request
                .headers_mut()
                .insert(hyper::header::HOST, settings.hosts[index].clone());
        }
        let in_flight = InFlightGuard::enter(&shared, sent);
        let result = {
            let deadline = tokio::time::Instant::from_std(sent) + upstream_timeout;
            let mut deadline = UpstreamDeadline::arm(&completion.activity.upstream_timer, deadline);
            let mut send =
                std::pin::pin!(settings.pool.send(index, address, upstream_request, sent));
            std::future::poll_fn(|cx| deadline.poll_bound(send.as_mut(), cx)).await
        };
        let failure = match result {
            Some(Ok(mut response)) => {
                settings.upstreams.mark_up(index);
                settings.latency[index].observe(sent.elapsed().as_secs_f64());
                let mut names = Names::of(response.headers());
                if names.load_report {
                    let report = response.headers().get(LOAD_REPORT);
                    match report.and_then(|r| r.to_str().ok()).and_then(parse_orca) {
                        Some(value) => settings.orca.record(index, value),
                        None => {
                            shared.metrics.orca_ignored.inc();
                        }
                    }
                }
                if response.status().is_server_error() {
                    shared.metrics.count_failure(Failure::Upstream5xx);
                    if let Some(sbac) = &settings.sbac {
                        sbac.counts.aborted_requests.fetch_add(1, Ordering::Relaxed);
                    }
                    completion.failed = true;
                    line.outcome = Failure::Upstream5xx.name();
                }
                strip_hop_by_hop(response.headers_mut(), &mut names);
                let version = response.version();
                add_via(response.headers_mut(), version);
                if let Some(cookie) = set_cookie {
                    response
                        .headers_mut()
                        .append(hyper::header::SET_COOKIE, cookie);
                }
                completion.in_flight = Some(in_flight);
                return respond(completion, line, response.map(ResponseBody::Upstream));
            }
            Some(Err(SendError::Connect(_))) => {
                settings.upstreams.mark_down(index);
                Failure::Connect
            }
            Some(Err(SendError::Request(error))) if is_body_limit(&error) => {
                drop(in_flight);
                return respond(
                    completion,
                    line,
                    local(StatusCode::PAYLOAD_TOO_LARGE, "request body too large\n"),
                );
            }
            Some(Err(_)) => Failure::UpstreamError,
            None => {
                settings.upstreams.mark_down(index);
                Failure::Timeout
            }
        };
        drop(in_flight);
        tried.push(index);
        shared.metrics.count_failure(failure);
        if let Some(sbac) = &settings.sbac {
            sbac.counts.aborted_requests.fetch_add(1, Ordering::Relaxed);
        }
        let retry =
            failure == Failure::Connect && retryable && tried.len() < settings.upstreams.len();
        if retry {
            continue;
        }
        completion.failed = true;
        line.outcome = failure.name();
        let response = match failure {
            Failure::Timeout => local(StatusCode::GATEWAY_TIMEOUT, "upstream timed out\n"),
            _ => local(StatusCode::BAD_GATEWAY, "upstream failed\n"),
        };
        return respond(completion, line, response);
    }
}

/// Counts the status, fills the log line and wraps the body so the request
/// completes when it has been sent.
fn respond(
    mut completion: Completion,
    mut line: AccessLine,
    response: Response<ResponseBody>,
) -> Response<Tracked> {
    line.status = response.status().as_u16();
    completion.shared.metrics.count_status(line.status);
    completion.line = line;
    response.map(|inner| Tracked {
        inner,
        completion: Some(completion),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    /// Strips `map` as the handler does; the names noted then must be
    /// those the map holds.
    fn strip(map: &mut HeaderMap) {
        let mut noted = Names::of(map);
        strip_hop_by_hop(map, &mut noted);
        let left = Names::of(map);
        assert_eq!(left.hop_by_hop, 0, "{map:?}");
        assert_eq!(noted, left, "{map:?}");
    }

    #[test]
    fn the_names_looked_up_are_noted_and_a_listed_one_is_stripped() {
        let mut map = headers(&[
            ("host", "site"),
            ("content-length", "3"),
            ("endpoint-load-metrics", "TEXT cpu_utilization=0.5"),
            ("x-forwarded-for", "192.0.2.1"),
        ]);
        let noted = Names::of(&map);
        assert!(noted.host && noted.content_length && noted.load_report && noted.x_forwarded_for);
        assert_eq!(noted.hop_by_hop, 0);
        strip(&mut map);
        // A client that names a header in `Connection` has it removed
        // before the proxy reads it: it is noted absent.
        map.append(
            hyper::header::CONNECTION,
            HeaderValue::from_static("X-Forwarded-For, host"),
        );
        strip(&mut map);
        assert_eq!(names(&map), ["content-length", "endpoint-load-metrics"]);
        let mut noted = Names::of(&map);
        assert!(!noted.host && !noted.x_forwarded_for);
        map.insert(hyper::header::TE, HeaderValue::from_static("trailers"));
        noted = Names::of(&map);
        assert_eq!(noted.hop_by_hop, 1 << 3);
    }

    fn names(map: &HeaderMap) -> Vec<String> {
        let mut names: Vec<String> = map.keys().map(|n| n.as_str().to_string()).collect();
        names.sort();
        names
    }

    #[test]
    fn every_hop_by_hop_header_and_those_connection_names_are_removed() {
        let mut map = headers(&[
            ("host", "site"),
            ("connection", "keep-alive, X-Private"),
            ("connection", "close"),
            ("keep-alive", "timeout=5"),
            ("proxy-connection", "keep-alive"),
            ("te", "trailers"),
            ("trailer", "x-sum"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "websocket"),
            ("proxy-authorization", "Basic eA=="),
            ("proxy-authenticate", "Basic"),
            ("x-private", "secret"),
            ("x-public", "kept"),
            ("cookie", "a=b"),
        ]);
        strip(&mut map);
        assert_eq!(names(&map), ["cookie", "host", "x-public"]);
    }

    #[test]
    fn every_hop_by_hop_name_is_found_at_its_position() {
        for (i, name) in HOP_BY_HOP.iter().enumerate() {
            assert_eq!(hop_by_hop_index(name), Some(i), "{name}");
        }
        assert_eq!(hop_by_hop_index(&hyper::header::HOST), None);
    }

    #[test]
    fn a_message_without_hop_by_hop_headers_is_unchanged() {
        let pairs = [
            ("host", "site"),
            ("x-private", "named nowhere"),
            ("via", "1.1 a"),
        ];
        let mut map = headers(&pairs);
        strip(&mut map);
        assert_eq!(map, headers(&pairs));
    }

    #[test]
    fn a_name_listed_in_connection_alone_is_removed() {
        let mut map = headers(&[
            ("connection", "x-one,  x-two ,"),
            ("x-one", "1"),
            ("x-two", "2"),
            ("x-three", "3"),
        ]);
        strip(&mut map);
        assert_eq!(names(&map), ["x-three"]);
    }
}
