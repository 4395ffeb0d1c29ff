//! The metrics endpoint: `GET /metrics` (and `HEAD`) over HTTP/1.1, served
//! by hyper on a current-thread tokio runtime in a thread of its own.
//!
//! A scrape endpoint faces whoever reaches its port, so it is hardened:
//! only GET and HEAD (405 otherwise); a request that declares a body
//! (`Content-Length` > 0: 413, `Transfer-Encoding`: 400) is refused without
//! reading it, and nothing is ever allocated by a peer's declared length;
//! headers are limited in size ([`Limits::max_header_bytes`]) and must
//! arrive within [`Limits::header_read_timeout`] (slowloris); a connection
//! idle for [`Limits::idle_timeout`] is closed; at most
//! [`Limits::max_connections`] are served at once, excess ones are closed
//! at once and counted. When `accept` fails (descriptors exhausted) the
//! server waits a little and goes on: it never stops serving for good.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::TRANSFER_ENCODING;
use hyper::header::{HeaderValue, ACCEPT, ALLOW, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus_client::metrics::counter::Counter;

use super::Format;

/// The endpoint's limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once; more are closed as they are accepted.
    pub max_connections: usize,
    /// The request line and headers, in bytes (hyper's read buffer; it
    /// takes no less than 8 KiB).
    pub max_header_bytes: usize,
    /// The whole request head must arrive within this time.
    pub header_read_timeout: Duration,
    /// A connection with no request for this long is closed.
    pub idle_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_connections: 32,
            max_header_bytes: 8192,
            header_read_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(30),
        }
    }
}

/// What the endpoint counts about itself (registered by the caller).
#[derive(Clone, Debug, Default)]
pub struct EndpointCounters {
    /// Connections closed at once because [`Limits::max_connections`] were
    /// open.
    pub connections_refused: Counter,
    /// Requests answered with an error status (4xx).
    pub requests_refused: Counter,
}

/// Why the endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    #[error("metrics endpoint {address}: {source}")]
    Bind {
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("metrics endpoint: cannot start its thread: {0}")]
    Thread(#[source] std::io::Error),
}

/// Renders the metrics text in a format.
pub type Render = dyn Fn(Format) -> String + Send + Sync;

/// The running endpoint; stopped and joined on drop.
pub struct MetricsServer {
    address: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Binds `address` (port 0: the kernel picks one, see
    /// [`MetricsServer::address`]) and serves `render` on `/metrics`.
    pub fn start(
        address: SocketAddr,
        limits: Limits,
        counters: EndpointCounters,
        render: Arc<Render>,
    ) -> Result<MetricsServer, EndpointError> {
        let bind_error = |source| EndpointError::Bind { address, source };
        let listener = std::net::TcpListener::bind(address).map_err(bind_error)?;
        listener.set_nonblocking(true).map_err(bind_error)?;
        let bound = listener.local_addr().map_err(bind_error)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(EndpointError::Thread)?;
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("metrics-http".into())
            .spawn(move || {
                runtime.block_on(serve(listener, limits, counters, render, stop_rx));
            })
            .map_err(EndpointError::Thread)?;
        Ok(MetricsServer {
            address: bound,
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }

    /// The address it listens on (the chosen port for port 0).
    pub fn address(&self) -> SocketAddr {
        self.address
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// How long the accept loop waits after `accept` failed (e.g. `EMFILE`).
const ACCEPT_RETRY: Duration = Duration::from_millis(50);

async fn serve(
    listener: std::net::TcpListener,
    limits: Limits,
    counters: EndpointCounters,
    render: Arc<Render>,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!("metrics endpoint: {e}");
            return;
        }
    };
    let open = Arc::new(AtomicUsize::new(0));
    let mut reported_accept_error = false;
    loop {
        let accepted = tokio::select! {
            _ = &mut stop => return,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => {
                reported_accept_error = false;
                stream
            }
            Err(e) => {
                if !reported_accept_error {
                    eprintln!("metrics endpoint: accept: {e}; retrying");
                    reported_accept_error = true;
                }
                tokio::time::sleep(ACCEPT_RETRY).await;
                continue;
            }
        };
        if open.load(Ordering::Relaxed) >= limits.max_connections {
            counters.connections_refused.inc();
            drop(stream);
            continue;
        }
        let slot = Slot::take(&open);
        let render = Arc::clone(&render);
        let counters = counters.clone();
        tokio::spawn(async move {
            connection(stream, limits, counters, render).await;
            drop(slot);
        });
    }
}

/// One of the open connections; given back on drop.
struct Slot(Arc<AtomicUsize>);

impl Slot {
    fn take(open: &Arc<AtomicUsize>) -> Slot {
        open.fetch_add(1, Ordering::Relaxed);
        Slot(Arc::clone(open))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

async fn connection(
    stream: tokio::net::TcpStream,
    limits: Limits,
    counters: EndpointCounters,
    render: Arc<Render>,
) {
    let last_request = Arc::new(Mutex::new(Instant::now()));
    let service_last = Arc::clone(&last_request);
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        if let Ok(mut last) = service_last.lock() {
            *last = Instant::now();
        }
        let response = respond(&request, &*render);
        if response.status().is_client_error() {
            counters.requests_refused.inc();
        }
        async move { Ok::<_, std::convert::Infallible>(response) }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(limits.max_header_bytes.max(8192))
        .keep_alive(true);
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let check = limits.idle_timeout.min(Duration::from_secs(1));
    let mut closing = false;
    loop {
        tokio::select! {
            _ = conn.as_mut() => return,
            _ = tokio::time::sleep(check) => {
                let idle = last_request.lock().map(|t| t.elapsed()).unwrap_or_default();
                if closing {
                    // A peer that ignores the close gets dropped.
                    if idle >= limits.idle_timeout + limits.header_read_timeout {
                        return;
                    }
                } else if idle >= limits.idle_timeout {
                    conn.as_mut().graceful_shutdown();
                    closing = true;
                }
            }
        }
    }
}

/// The response to one request: the metrics for GET or HEAD of
/// `/metrics` in the negotiated format; 405 for another method, 413/400 for
/// a request that declares a body, 404 elsewhere. Pure but for `render`.
pub fn respond<B>(request: &Request<B>, render: &Render) -> Response<Full<Bytes>> {
    let headers = request.headers();
    if headers.contains_key(TRANSFER_ENCODING) {
        return refuse(StatusCode::BAD_REQUEST, "a request body is not accepted\n");
    }
    if let Some(length) = headers.get(CONTENT_LENGTH) {
        let empty = length
            .to_str()
            .ok()
            .and_then(|l| l.trim().parse::<u64>().ok())
            == Some(0);
        if !empty {
            return refuse(
                StatusCode::PAYLOAD_TOO_LARGE,
                "a request body is not accepted\n",
            );
        }
    }
    let path = request.uri().path();
    if path != "/metrics" {
        return refuse(
            StatusCode::NOT_FOUND,
            "not found: the metrics are at /metrics\n",
        );
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let mut response = refuse(StatusCode::METHOD_NOT_ALLOWED, "only GET /metrics\n");
        response
            .headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    let format = Format::negotiate(
        headers
            .get(ACCEPT)
            .and_then(|value| value.to_str().ok())
            .unwrap_or(""),
    );
    let mut response = Response::new(Full::new(Bytes::from(render(format))));
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static(format.content_type()),
    );
    response
}

fn refuse(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    // An unread body must not be taken for the next request.
    headers.insert(CONNECTION, HeaderValue::from_static("close"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;

    fn server(limits: Limits) -> (MetricsServer, EndpointCounters) {
        let counters = EndpointCounters::default();
        let render: Arc<Render> = Arc::new(|format: Format| match format {
            Format::OpenMetrics => "up 1\n# EOF\n".to_string(),
            Format::Text => "up 1\n".to_string(),
        });
        let server = MetricsServer::start(
            "127.0.0.1:0".parse().unwrap(),
            limits,
            counters.clone(),
            render,
        )
        .unwrap();
        (server, counters)
    }

    fn exchange(address: SocketAddr, request: &str) -> String {
        let mut stream = TcpStream::connect(address).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut response = Vec::new();
        let _ = stream.read_to_end(&mut response);
        String::from_utf8_lossy(&response).into_owned()
    }

    fn get(address: SocketAddr, accept: &str) -> String {
        exchange(
            address,
            &format!(
                "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: {accept}\r\nConnection: close\r\n\r\n"
            ),
        )
    }

    #[test]
    fn formats_are_negotiated() {
        let (server, _) = server(Limits::default());
        let text = get(server.address(), "text/plain");
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        assert!(
            text.contains("content-type: text/plain; version=0.0.4"),
            "{text}"
        );
        assert!(text.ends_with("up 1\n"), "{text}");
        let open = get(
            server.address(),
            "application/openmetrics-text;version=1.0.0,text/plain;q=0.5",
        );
        assert!(
            open.contains("content-type: application/openmetrics-text"),
            "{open}"
        );
        assert!(open.ends_with("# EOF\n"), "{open}");
    }

    #[test]
    fn other_methods_paths_and_bodies_are_refused() {
        let (server, counters) = server(Limits::default());
        let a = server.address();
        let post = exchange(
            a,
            "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
        );
        assert!(post.starts_with("HTTP/1.1 405"), "{post}");
        assert!(post.contains("allow: GET, HEAD"), "{post}");
        let huge = exchange(
            a,
            "GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n",
        );
        assert!(huge.starts_with("HTTP/1.1 413"), "{huge}");
        let chunked = exchange(
            a,
            "GET /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
        );
        assert!(chunked.starts_with("HTTP/1.1 400"), "{chunked}");
        let elsewhere = exchange(a, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        assert!(elsewhere.starts_with("HTTP/1.1 404"), "{elsewhere}");
        let head = exchange(
            a,
            "HEAD /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        );
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(!head.contains("up 1"), "{head}");
        assert!(counters.requests_refused.get() >= 4);
    }

    #[test]
    fn a_declared_body_never_sent_does_not_freeze_the_others() {
        let (server, _) = server(Limits::default());
        let a = server.address();
        let mut stuck = TcpStream::connect(a).unwrap();
        stuck
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n")
            .unwrap();
        let started = Instant::now();
        let ok = get(a, "text/plain");
        assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[test]
    fn headers_too_large_or_too_slow_end_the_connection() {
        let limits = Limits {
            header_read_timeout: Duration::from_millis(300),
            ..Limits::default()
        };
        let (server, _) = server(limits);
        let a = server.address();
        let big = format!(
            "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
            "a".repeat(64 * 1024)
        );
        let response = exchange(a, &big);
        assert!(
            response.is_empty() || response.starts_with("HTTP/1.1 431"),
            "{response}"
        );
        let mut slow = TcpStream::connect(a).unwrap();
        slow.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        slow.write_all(b"GET /metrics HTTP/1.1\r\nHo").unwrap();
        let started = Instant::now();
        let mut rest = Vec::new();
        let _ = slow.read_to_end(&mut rest);
        assert!(started.elapsed() < Duration::from_secs(3), "slowloris kept");
    }

    #[test]
    fn connections_beyond_the_cap_are_closed_and_counted() {
        let limits = Limits {
            max_connections: 4,
            ..Limits::default()
        };
        let (server, counters) = server(limits);
        let a = server.address();
        let idle: Vec<TcpStream> = (0..10).map(|_| TcpStream::connect(a).unwrap()).collect();
        let deadline = Instant::now() + Duration::from_secs(5);
        while counters.connections_refused.get() < 6 {
            assert!(Instant::now() < deadline, "excess connections not refused");
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(idle);
        // Slots come back as the idle connections close.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let response = get(a, "text/plain");
            if response.starts_with("HTTP/1.1 200") {
                break;
            }
            assert!(Instant::now() < deadline, "{response}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn idle_connections_are_closed() {
        let limits = Limits {
            idle_timeout: Duration::from_millis(300),
            ..Limits::default()
        };
        let (server, _) = server(limits);
        let mut idle = TcpStream::connect(server.address()).unwrap();
        idle.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let started = Instant::now();
        let mut rest = Vec::new();
        let _ = idle.read_to_end(&mut rest);
        assert!(started.elapsed() < Duration::from_secs(3));
    }
}
