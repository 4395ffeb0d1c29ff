//! The upstreams: round robin with passive failure detection. An upstream
//! whose connect failed or whose response timed out is skipped for
//! `timeouts.upstream_down_ms`; when every upstream is down, the one whose
//! skip ends first is tried (a proxy never refuses everything because of a
//! stale mark).
//!
//! [`Pool`]: keep-alive HTTP/1.1 connections to the upstreams, hyper's own
//! `client::conn::http1` with a pool written here (at most
//! `limits.upstream_idle_connections` idle per upstream, each idle at most
//! [`IDLE_TIMEOUT`]). Written by hand because no crate at hand pools in
//! the shape needed: hyper-util's legacy client keys its pool by scheme
//! and authority, spawns a task per request to return the connection and
//! owns the connect, while the proxy picks the upstream itself (round
//! robin, down marks), connects through the socket-buffer manager and
//! wants a connection back in the pool the moment its response body ends.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Limited;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::client::conn::http1::SendRequest;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

use super::resources::Resources;

/// The request body sent upstream: the client's, cut at the body limit,
/// or none (a retried request, which had none).
pub enum UpstreamBody {
    Client(Limited<Incoming>),
    Empty,
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = super::server::BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match self.get_mut() {
            UpstreamBody::Client(body) => Pin::new(body).poll_frame(cx),
            UpstreamBody::Empty => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            UpstreamBody::Client(body) => body.is_end_stream(),
            UpstreamBody::Empty => true,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            UpstreamBody::Client(body) => body.size_hint(),
            UpstreamBody::Empty => SizeHint::with_exact(0),
        }
    }
}

/// How long a connection may stay idle in the pool (as hyper-util's
/// client did).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// The upstream set and each one's state.
#[derive(Debug)]
pub struct Upstreams {
    addresses: Vec<SocketAddr>,
    down_until: Mutex<Vec<Option<Instant>>>,
    next: AtomicUsize,
    down_for: Duration,
}

impl Upstreams {
    pub fn new(addresses: Vec<SocketAddr>, down_for: Duration) -> Upstreams {
        let n = addresses.len();
        Upstreams {
            addresses,
            down_until: Mutex::new(vec![None; n]),
            next: AtomicUsize::new(0),
            down_for,
        }
    }

    pub fn len(&self) -> usize {
        self.addresses.len()
    }

    pub fn is_empty(&self) -> bool {
        self.addresses.is_empty()
    }

    pub fn address(&self, index: usize) -> SocketAddr {
        self.addresses[index]
    }

    /// The next upstream in turn that is not marked down (`exclude`: ones
    /// already tried for this request); `None` only when `exclude` covers
    /// them all. `now`: the caller's clock reading.
    pub fn pick(&self, exclude: &[usize], now: Instant) -> Option<usize> {
        let n = self.addresses.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let down = self.down_until.lock().ok()?;
        let candidates = (0..n)
            .map(|i| (start + i) % n)
            .filter(|i| !exclude.contains(i));
        let mut fallback: Option<(usize, Instant)> = None;
        for i in candidates {
            match down[i] {
                Some(until) if until > now => {
                    if fallback.is_none_or(|(_, t)| until < t) {
                        fallback = Some((i, until));
                    }
                }
                _ => return Some(i),
            }
        }
        fallback.map(|(i, _)| i)
    }

    /// The upstream refused, could not be reached or timed out.
    pub fn mark_down(&self, index: usize) {
        if let Ok(mut down) = self.down_until.lock() {
            if let Some(slot) = down.get_mut(index) {
                *slot = Some(Instant::now() + self.down_for);
            }
        }
    }

    /// The upstream answered.
    pub fn mark_up(&self, index: usize) {
        if let Ok(mut down) = self.down_until.lock() {
            if let Some(slot) = down.get_mut(index) {
                *slot = None;
            }
        }
    }
}

/// Why a request got no response from an upstream.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// No connection: refused, unreachable or timed out connecting.
    #[error("connect: {0}")]
    Connect(#[source] std::io::Error),
    /// The connection failed while sending the request or reading the
    /// response head (the request body's own errors included).
    #[error(transparent)]
    Request(#[from] hyper::Error),
}

/// Idle keep-alive connections to each upstream.
pub struct Pool {
    idle: Vec<Mutex<VecDeque<Idle>>>,
    max_idle: usize,
    connect_timeout: Duration,
    resources: Arc<Resources>,
}

/// A connection's sender and its id in the resource manager.
type Connection = (SendRequest<UpstreamBody>, Option<u64>);

struct Idle {
    sender: SendRequest<UpstreamBody>,
    since: Instant,
    /// The connection's id in the resource manager.
    id: Option<u64>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("upstreams", &self.idle.len())
            .field("max_idle", &self.max_idle)
            .finish()
    }
}

impl Pool {
    pub fn new(
        upstreams: usize,
        max_idle: usize,
        connect_timeout: Duration,
        resources: Arc<Resources>,
    ) -> Pool {
        Pool {
            idle: (0..upstreams)
                .map(|_| Mutex::new(VecDeque::new()))
                .collect(),
            max_idle,
            connect_timeout,
            resources,
        }
    }

    /// Sends `request` (origin-form target) to upstream `index` at
    /// `address` on an idle connection, else on a new one. A request the
    /// idle connection closed before taking (nothing was written) goes on
    /// a new connection. `now`: the caller's clock reading as it sends.
    pub async fn send(
        self: &Arc<Self>,
        index: usize,
        address: SocketAddr,
        mut request: Request<UpstreamBody>,
        now: Instant,
    ) -> Result<Response<PooledBody>, SendError> {
        if let Some((mut sender, id)) = self.checkout(index, now) {
            match sender.try_send_request(request).await {
                Ok(response) => return Ok(self.wrap(index, (sender, id), response)),
                Err(mut error) => match error.take_message() {
                    Some(unsent) => request = unsent,
                    None => return Err(SendError::Request(error.into_error())),
                },
            }
        }
        let (mut sender, id) = self.connect(address).await?;
        let response = sender.send_request(request).await?;
        Ok(self.wrap(index, (sender, id), response))
    }

    /// The most recently used idle connection that can take a request;
    /// closed and expired ones are dropped on the way.
    fn checkout(&self, index: usize, now: Instant) -> Option<Connection> {
        let mut idle = self.idle.get(index)?.lock().ok()?;
        while idle
            .front()
            .is_some_and(|oldest| now.duration_since(oldest.since) >= IDLE_TIMEOUT)
        {
            idle.pop_front();
        }
        while let Some(entry) = idle.pop_back() {
            if entry.sender.is_ready() {
                self.resources.upstream_reused(entry.id);
                return Some((entry.sender, entry.id));
            }
        }
        None
    }

    fn checkin(&self, index: usize, (sender, id): Connection) {
        if sender.is_closed() {
            return;
        }
        let Some(Ok(mut idle)) = self.idle.get(index).map(Mutex::lock) else {
            return;
        };
        if idle.len() >= self.max_idle {
            return;
        }
        idle.push_back(Idle {
            sender,
            since: Instant::now(),
            id,
        });
        self.resources.upstream_idle(id);
    }

    async fn connect(&self, address: SocketAddr) -> Result<Connection, SendError> {
        // Counted among the proxy's descriptors until it is registered.
        let connecting = self.resources.connecting();
        let stream = tokio::time::timeout(
            self.connect_timeout,
            tokio::net::TcpStream::connect(address),
        )
        .await
        .map_err(|_| SendError::Connect(std::io::ErrorKind::TimedOut.into()))?
        .map_err(SendError::Connect)?;
        stream.set_nodelay(true).map_err(SendError::Connect)?;
        let stream = self.resources.track_upstream(stream);
        drop(connecting);
        let id = stream.id();
        let io = TokioIo::new(stream);
        let (sender, connection) = hyper::client::conn::http1::handshake(io).await?;
        tokio::spawn(async move {
            // Its errors reach the request that was on it.
            let _ = connection.await;
        });
        Ok((sender, id))
    }

    fn wrap(
        self: &Arc<Self>,
        index: usize,
        sender: Connection,
        response: Response<Incoming>,
    ) -> Response<PooledBody> {
        response.map(|inner| PooledBody {
            inner,
            give_back: Some((Arc::clone(self), index, sender)),
        })
    }
}

/// A response body from the pool: when it has been read to its end, its
/// connection goes back to the pool (once it can take the next request).
pub struct PooledBody {
    inner: Incoming,
    give_back: Option<(Arc<Pool>, usize, Connection)>,
}

impl PooledBody {
    fn release(&mut self) {
        let Some((pool, index, (mut sender, id))) = self.give_back.take() else {
            return;
        };
        if sender.is_ready() {
            pool.checkin(index, (sender, id));
        } else if !sender.is_closed() {
            // The connection has not yet taken in the end of the exchange
            // (e.g. the request body is still being sent).
            tokio::spawn(async move {
                if sender.ready().await.is_ok() {
                    pool.checkin(index, (sender, id));
                }
            });
        }
    }
}

impl Body for PooledBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(None) => self.release(),
            Poll::Ready(Some(Err(_))) => {
                self.give_back.take();
            }
            Poll::Ready(Some(Ok(_))) if self.inner.is_end_stream() => self.release(),
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

impl Drop for PooledBody {
    /// Dropped before its end: the connection is not reused.
    fn drop(&mut self) {
        if self.inner.is_end_stream() {
            self.release();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn three() -> Upstreams {
        let a = |p| SocketAddr::from(([127, 0, 0, 1], p));
        Upstreams::new(vec![a(1), a(2), a(3)], Duration::from_secs(60))
    }

    #[test]
    fn round_robin_skips_the_down_ones() {
        let u = three();
        let picks: Vec<_> = (0..6)
            .map(|_| u.pick(&[], Instant::now()).unwrap())
            .collect();
        assert_eq!(picks, [0, 1, 2, 0, 1, 2]);
        u.mark_down(1);
        let picks: Vec<_> = (0..4)
            .map(|_| u.pick(&[], Instant::now()).unwrap())
            .collect();
        assert!(!picks.contains(&1), "{picks:?}");
        assert_eq!(
            u.pick(&[0, 2], Instant::now()),
            Some(1),
            "down, but the only one left"
        );
        assert_eq!(u.pick(&[0, 1, 2], Instant::now()), None);
        u.mark_up(1);
        let picks: Vec<_> = (0..3)
            .map(|_| u.pick(&[], Instant::now()).unwrap())
            .collect();
        assert!(picks.contains(&1), "{picks:?}");
        // All down: the one back first is tried.
        u.mark_down(2);
        u.mark_down(0);
        u.mark_down(1);
        assert_eq!(u.pick(&[], Instant::now()), Some(2));
    }
}
