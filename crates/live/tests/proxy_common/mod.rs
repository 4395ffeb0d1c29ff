//! What the proxy tests share: a tiny hyper backend on 127.0.0.1:0 that
//! records what reaches it, and a raw HTTP/1.1 client over `TcpStream`.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

/// One request a backend saw: method, path and query, headers, body.
pub type Received = (String, String, hyper::HeaderMap, Vec<u8>);

/// What one backend saw.
#[derive(Debug, Default)]
pub struct Seen {
    pub requests: Mutex<Vec<Received>>,
    pub connections: AtomicUsize,
}

impl Seen {
    pub fn count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }
}

pub struct Backend {
    pub address: SocketAddr,
    pub seen: Arc<Seen>,
    _runtime: tokio::runtime::Runtime,
}

type BoxBody = http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>;

async fn answer(
    name: &'static str,
    seen: Arc<Seen>,
    request: Request<Incoming>,
) -> Response<BoxBody> {
    let method = request.method().to_string();
    let target = request
        .uri()
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_default();
    let headers = request.headers().clone();
    let body = request
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes().to_vec())
        .unwrap_or_default();
    seen.requests
        .lock()
        .unwrap()
        .push((method, target.clone(), headers, body.clone()));
    let path = target.split('?').next().unwrap_or("");
    match path {
        "/echo" => Response::new(Full::new(Bytes::from(body)).boxed()),
        "/slow" => {
            tokio::time::sleep(Duration::from_secs(3)).await;
            Response::new(Full::new(Bytes::from_static(b"late")).boxed())
        }
        // `/delay?ms=N`: the answer after N milliseconds.
        "/delay" => {
            let ms = target
                .split_once("?ms=")
                .and_then(|(_, ms)| ms.parse().ok())
                .unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Response::new(Full::new(Bytes::from_static(b"in time")).boxed())
        }
        "/busy" => {
            let mut r = Response::new(Full::new(Bytes::from_static(b"busy backend")).boxed());
            r.headers_mut().insert(
                "endpoint-load-metrics",
                "TEXT cpu_utilization=1.0".parse().unwrap(),
            );
            r
        }
        "/error" => {
            let mut r = Response::new(Full::new(Bytes::from_static(b"oops")).boxed());
            *r.status_mut() = hyper::StatusCode::INTERNAL_SERVER_ERROR;
            r
        }
        "/stream" => Response::new(Chunks(0).boxed()),
        _ => {
            let mut r = Response::new(Full::new(Bytes::from(format!("hello from {name}"))).boxed());
            r.headers_mut()
                .insert("connection", "keep-alive".parse().unwrap());
            r.headers_mut().insert("x-backend", name.parse().unwrap());
            r
        }
    }
}

/// 64 chunks of 16 KiB, each its own frame, no declared length.
pub struct Chunks(u8);

impl hyper::body::Body for Chunks {
    type Data = Bytes;
    type Error = std::convert::Infallible;
    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.0 == 64 {
            return std::task::Poll::Ready(None);
        }
        let i = self.0;
        self.0 += 1;
        std::task::Poll::Ready(Some(Ok(Frame::data(Bytes::from(vec![i; 16 << 10])))))
    }
}

impl Backend {
    pub fn start(name: &'static str) -> Backend {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let seen = Arc::new(Seen::default());
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let address = listener.local_addr().unwrap();
        let accept_seen = Arc::clone(&seen);
        runtime.spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                accept_seen.connections.fetch_add(1, Ordering::Relaxed);
                let seen = Arc::clone(&accept_seen);
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |r| {
                        let seen = Arc::clone(&seen);
                        async move { Ok::<_, std::convert::Infallible>(answer(name, seen, r).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Backend {
            address,
            seen,
            _runtime: runtime,
        }
    }
}

/// A port nothing listens on (bound, then closed).
pub fn dead_address() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

/// A parsed response.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

pub fn connect(address: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(address).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

fn read_line(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<String> {
    loop {
        if let Some(at) = buffer.windows(2).position(|w| w == b"\r\n") {
            let line = String::from_utf8_lossy(&buffer[..at]).into_owned();
            buffer.drain(..at + 2);
            return Some(line);
        }
        let mut chunk = [0u8; 4096];
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
        }
    }
}

fn read_exact_buffered(stream: &mut TcpStream, buffer: &mut Vec<u8>, n: usize) -> Option<Vec<u8>> {
    while buffer.len() < n {
        let mut chunk = [0u8; 65536];
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(k) => buffer.extend_from_slice(&chunk[..k]),
        }
    }
    Some(buffer.drain(..n).collect())
}

/// Reads one response (Content-Length or chunked framing); `None` if the
/// connection closed first.
pub fn read_reply(stream: &mut TcpStream) -> Option<Reply> {
    let mut buffer = Vec::new();
    let status_line = read_line(stream, &mut buffer)?;
    let status = status_line.split(' ').nth(1)?.parse().ok()?;
    let mut headers = Vec::new();
    loop {
        let line = read_line(stream, &mut buffer)?;
        if line.is_empty() {
            break;
        }
        let (n, v) = line.split_once(':')?;
        headers.push((n.trim().to_string(), v.trim().to_string()));
    }
    let mut reply = Reply {
        status,
        headers,
        body: Vec::new(),
    };
    if let Some(len) = reply.header("content-length") {
        let len: usize = len.parse().ok()?;
        reply.body = read_exact_buffered(stream, &mut buffer, len)?;
    } else if reply
        .header("transfer-encoding")
        .is_some_and(|t| t.contains("chunked"))
    {
        loop {
            let size = usize::from_str_radix(read_line(stream, &mut buffer)?.trim(), 16).ok()?;
            let chunk = read_exact_buffered(stream, &mut buffer, size + 2)?;
            if size == 0 {
                break;
            }
            reply.body.extend_from_slice(&chunk[..size]);
        }
    }
    Some(reply)
}

/// Sends `request` bytes and reads one response.
pub fn exchange(stream: &mut TcpStream, request: &[u8]) -> Option<Reply> {
    stream.write_all(request).ok()?;
    read_reply(stream)
}

pub fn get(address: SocketAddr, path: &str, cookie: Option<&str>) -> Reply {
    let mut s = connect(address);
    let cookie = cookie.map_or(String::new(), |c| format!("Cookie: {c}\r\n"));
    exchange(
        &mut s,
        format!("GET {path} HTTP/1.1\r\nHost: test\r\n{cookie}Connection: close\r\n\r\n")
            .as_bytes(),
    )
    .expect("a response")
}

/// Whether the peer closed the connection (or reset it) within 10 s.
pub fn closed(stream: &mut TcpStream) -> bool {
    let mut b = [0u8; 1024];
    loop {
        match stream.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) => {
                return !matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                )
            }
        }
    }
}

/// Waits until `f` holds, up to 10 s.
pub fn eventually(mut f: impl FnMut() -> bool) -> bool {
    for _ in 0..500 {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

pub const KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

pub fn config(upstreams: &[SocketAddr], extra: &str) -> vantage_live::proxy::ProxyConfig {
    let list: Vec<String> = upstreams.iter().map(|a| format!("\"{a}\"")).collect();
    let text = format!(
        "listen = \"127.0.0.1:0\"\nupstreams = [{}]\n{extra}",
        list.join(", ")
    );
    vantage_live::proxy::ProxyConfig::from_toml(&text, "test.toml").unwrap()
}
