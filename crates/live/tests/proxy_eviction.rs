//! Closing idle client connections never cuts a response: a response whose
//! body the proxy has taken whole from the upstream but not yet written to
//! a slow client's socket is still in progress, for the eviction at the
//! connection cap and for the idle timers.

mod proxy_common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use proxy_common::*;
use vantage_live::metrics::Format;
use vantage_live::proxy::Proxy;

/// `/stream`'s body: 64 chunks of 16 KiB.
const STREAM_BYTES: usize = 64 << 14;

fn metric(proxy: &Proxy, sample: &str) -> f64 {
    let text = proxy.metrics_text(Format::Text);
    text.lines()
        .find_map(|l| l.strip_prefix(sample).and_then(|v| v.trim().parse().ok()))
        .unwrap_or(0.0)
}

/// A client socket whose receive buffer is small, so that the proxy's
/// writes block while the client does not read.
fn small_window_client(address: SocketAddr) -> TcpStream {
    let socket = socket2::Socket::new(
        socket2::Domain::IPV4,
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )
    .unwrap();
    socket.set_recv_buffer_size(8192).unwrap();
    socket.connect(&address.into()).unwrap();
    let stream: TcpStream = socket.into();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
}

/// Whether the access log has a line for `/stream` (written when the
/// proxy has taken the whole body from the upstream).
fn logged(log: &Path) -> bool {
    std::fs::read_to_string(log).is_ok_and(|text| text.contains("/stream"))
}

/// Asks for `/stream` and reads it slowly (the proxy's writes keep
/// blocking) until the proxy has taken the whole body from the upstream;
/// returns what was read so far.
fn read_until_the_proxy_has_the_body(client: &mut TcpStream, log: &Path) -> Vec<u8> {
    client
        .write_all(b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut received = Vec::new();
    let mut chunk = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(20);
    while !logged(log) {
        assert!(Instant::now() < deadline, "the response never completed");
        match client.read(&mut chunk) {
            Ok(0) | Err(_) => panic!("closed before the body was taken"),
            Ok(n) => received.extend_from_slice(&chunk[..n]),
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    received
}

/// Reads to the end of the connection (or 10 s without a byte).
fn read_to_close(client: &mut TcpStream, received: &mut Vec<u8>) {
    let mut chunk = [0u8; 65536];
    loop {
        match client.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => received.extend_from_slice(&chunk[..n]),
        }
        if ends_the_message(received) {
            return;
        }
    }
}

fn ends_the_message(received: &[u8]) -> bool {
    received.ends_with(b"\r\n0\r\n\r\n")
}

/// The body of a chunked response, `None` if the message is incomplete.
fn chunked_body(message: &[u8]) -> Option<Vec<u8>> {
    let head_end = message.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let mut rest = &message[head_end..];
    let mut body = Vec::new();
    loop {
        let line_end = rest.windows(2).position(|w| w == b"\r\n")?;
        let size = usize::from_str_radix(std::str::from_utf8(&rest[..line_end]).ok()?, 16).ok()?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return rest.starts_with(b"\r\n").then_some(body);
        }
        if rest.len() < size + 2 {
            return None;
        }
        body.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}

fn proxy_with_log(backend: SocketAddr, log: &Path, extra: &str) -> Proxy {
    let c = config(
        &[backend],
        &format!(
            "access_log = \"{}\"\n[utilization]\nconcurrency = 4\n{extra}",
            log.display()
        ),
    );
    Proxy::start(c).unwrap()
}

fn log_path(name: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!(
        "vantage-proxy-eviction-{name}-{}.jsonl",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&path);
    path
}

#[test]
fn a_connection_still_writing_its_response_is_not_evicted_at_the_cap() {
    let backend = Backend::start("b");
    let log = log_path("cap");
    let proxy = proxy_with_log(
        backend.address,
        &log,
        "[limits]\nmax_connections = 1\nmax_header_bytes = 65536\n\
         [resources]\nmode = \"fixed\"\nsend_bytes = 4096\n",
    );
    let mut slow = small_window_client(proxy.address());
    let mut received = read_until_the_proxy_has_the_body(&mut slow, &log);
    // The proxy has the whole body; part of it still waits for the slow
    // client's socket. A new client at the cap must not take this slot.
    let mut other = connect(proxy.address());
    let _ = other.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(closed(&mut other), "the new connection is refused");
    assert_eq!(
        metric(&proxy, "vantage_proxy_connections_evicted_total"),
        0.0,
        "a connection with a response still being written was evicted"
    );
    read_to_close(&mut slow, &mut received);
    let body = chunked_body(&received).expect("the whole response arrived");
    assert_eq!(body.len(), STREAM_BYTES);
    // Now idle: a new client takes its slot.
    assert_eq!(get(proxy.address(), "/", None).status, 200);
    assert_eq!(
        metric(&proxy, "vantage_proxy_connections_evicted_total"),
        1.0
    );
    let _ = std::fs::remove_file(&log);
}

#[test]
fn the_idle_timers_start_when_the_response_has_been_written() {
    let backend = Backend::start("b");
    let log = log_path("timers");
    let proxy = proxy_with_log(
        backend.address,
        &log,
        "[limits]\nmax_header_bytes = 65536\n[timeouts]\nrequest_headers_ms = 200\nidle_ms = 300\n\
         [resources]\nmode = \"fixed\"\nsend_bytes = 4096\n",
    );
    let mut slow = small_window_client(proxy.address());
    let mut received = read_until_the_proxy_has_the_body(&mut slow, &log);
    // The client pauses for longer than both timeouts with part of the
    // response still unwritten: the connection is not idle.
    std::thread::sleep(Duration::from_millis(1500));
    read_to_close(&mut slow, &mut received);
    let body = chunked_body(&received).expect("the whole response arrived");
    assert_eq!(body.len(), STREAM_BYTES);
    // Then idle: closed by the idle timeout.
    assert!(closed(&mut slow), "the idle timeout did not close it");
    assert!(proxy.address().port() > 0);
    let _ = std::fs::remove_file(&log);
}

#[test]
fn a_client_that_takes_nothing_is_closed_after_the_send_timeout() {
    let backend = Backend::start("b");
    let log = log_path("send");
    let proxy = proxy_with_log(
        backend.address,
        &log,
        "[timeouts]\nsend_ms = 300\n[resources]\nmode = \"fixed\"\nsend_bytes = 4096\n",
    );
    let mut stuck = small_window_client(proxy.address());
    stuck
        .write_all(b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    // The client reads nothing: the proxy's writes wait, then it gives up.
    assert!(eventually(|| metric(
        &proxy,
        "vantage_proxy_send_timeouts_total"
    ) == 1.0));
    assert!(eventually(|| metric(
        &proxy,
        "vantage_proxy_connections_open"
    ) == 0.0));
    // What reached the client is a cut response, then the end.
    let mut received = Vec::new();
    read_to_close(&mut stuck, &mut received);
    assert!(received.len() < STREAM_BYTES && chunked_body(&received).is_none());
    let _ = std::fs::remove_file(&log);
}
