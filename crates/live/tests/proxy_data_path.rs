//! The proxy's data path over loopback: forwarding, streaming, keep-alive,
//! round robin, failure detection, timeouts, hostile framing and limits.

mod proxy_common;

use std::io::Write;
use std::time::Duration;

use proxy_common::*;
use vantage_live::metrics::Format;
use vantage_live::proxy::Proxy;

fn metric(proxy: &Proxy, sample: &str) -> f64 {
    let text = proxy.metrics_text(Format::Text);
    text.lines()
        .find_map(|l| l.strip_prefix(sample).and_then(|v| v.trim().parse().ok()))
        .unwrap_or(0.0)
}

#[test]
fn get_post_streaming_keep_alive_and_round_robin() {
    let a = Backend::start("a");
    let b = Backend::start("b");
    let proxy = Proxy::start(config(
        &[a.address, b.address],
        "[utilization]\nconcurrency = 4\n",
    ))
    .unwrap();
    let mut client = connect(proxy.address());
    let mut names = Vec::new();
    for _ in 0..4 {
        let reply = exchange(
            &mut client,
            b"GET /hello?x=1 HTTP/1.1\r\nHost: site\r\nConnection: keep-alive, x-private\r\nX-Private: secret\r\n\r\n",
        )
        .expect("a reply on the same connection");
        assert_eq!(reply.status, 200);
        assert_eq!(reply.header("via"), Some("1.1 vantage"));
        assert_eq!(reply.header("connection"), None, "hop-by-hop removed");
        names.push(reply.header("x-backend").unwrap().to_string());
    }
    names.sort();
    assert_eq!(names, ["a", "a", "b", "b"], "round robin");
    for backend in [&a, &b] {
        let requests = backend.seen.requests.lock().unwrap();
        for (method, target, headers, _) in requests.iter() {
            assert_eq!((method.as_str(), target.as_str()), ("GET", "/hello?x=1"));
            assert_eq!(headers["host"], "site");
            assert_eq!(headers["x-forwarded-for"], "127.0.0.1");
            assert_eq!(headers["via"], "1.1 vantage");
            assert!(!headers.contains_key("x-private"), "named in Connection");
        }
        // Pooled: the second request to each reused the first connection.
        assert_eq!(
            backend
                .seen
                .connections
                .load(std::sync::atomic::Ordering::Relaxed),
            1
        );
    }

    // POST with a chunked body, echoed back.
    let payload: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let mut request =
        b"POST /echo HTTP/1.1\r\nHost: site\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for chunk in payload.chunks(70_000) {
        request.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        request.extend_from_slice(chunk);
        request.extend_from_slice(b"\r\n");
    }
    request.extend_from_slice(b"0\r\n\r\n");
    let reply = exchange(&mut client, &request).unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body, payload);

    // A streamed (chunked) response of 1 MiB.
    let reply = exchange(&mut client, b"GET /stream HTTP/1.1\r\nHost: site\r\n\r\n").unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body.len(), 64 << 14);
    assert!(reply.body[(64 << 14) - 1] == 63);
    assert_eq!(
        metric(&proxy, "vantage_proxy_requests_total{class=\"2xx\"}"),
        6.0
    );
}

#[test]
fn a_dead_upstream_is_skipped_and_counted() {
    let live = Backend::start("live");
    let proxy = Proxy::start(config(
        &[dead_address(), live.address],
        "[utilization]\nconcurrency = 4\n[timeouts]\nupstream_down_ms = 60000\n",
    ))
    .unwrap();
    for _ in 0..6 {
        let reply = get(proxy.address(), "/", None);
        assert_eq!(reply.status, 200, "retried on the live upstream");
    }
    assert_eq!(live.seen.count(), 6);
    // Tried once, then skipped while marked down.
    assert_eq!(
        metric(&proxy, "vantage_proxy_failures_total{kind=\"connect\"}"),
        1.0
    );
    // A request with a body is not retried: 502 when it meets the dead one.
    let proxy = Proxy::start(config(
        &[dead_address()],
        "[utilization]\nconcurrency = 4\n",
    ))
    .unwrap();
    let mut s = connect(proxy.address());
    let reply = exchange(
        &mut s,
        b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
    )
    .unwrap();
    assert_eq!(reply.status, 502);
}

#[test]
fn an_upstream_timeout_is_a_504_and_a_failure() {
    let slow = Backend::start("slow");
    let proxy = Proxy::start(config(
        &[slow.address],
        "[utilization]\nconcurrency = 4\n[timeouts]\nupstream_response_ms = 200\n",
    ))
    .unwrap();
    let reply = get(proxy.address(), "/slow", None);
    assert_eq!(reply.status, 504);
    assert_eq!(
        metric(&proxy, "vantage_proxy_failures_total{kind=\"timeout\"}"),
        1.0
    );
    assert_eq!(
        metric(&proxy, "vantage_proxy_requests_total{class=\"5xx\"}"),
        1.0
    );
    // An upstream 5xx is forwarded and counted as a failure.
    let reply = get(proxy.address(), "/error", None);
    assert_eq!(reply.status, 500);
    assert_eq!(
        metric(
            &proxy,
            "vantage_proxy_failures_total{kind=\"upstream_5xx\"}"
        ),
        1.0
    );
}

#[test]
fn the_upstream_timeout_runs_from_each_request_sent() {
    // The time-out is one timer per client connection, re-armed for each
    // request: on one keep-alive connection, answers that each come
    // within it pass however long the connection has been in use (three
    // of 400 ms exceed 600 ms together), a slow one is a 504 no earlier
    // than 600 ms after it was sent, and after the timer fired the next
    // request is bounded afresh.
    let backend = Backend::start("b");
    let proxy = Proxy::start(config(
        &[backend.address],
        "[utilization]\nconcurrency = 4\n[timeouts]\nupstream_response_ms = 600\n",
    ))
    .unwrap();
    let mut client = connect(proxy.address());
    let request = |path: &str| format!("GET {path} HTTP/1.1\r\nHost: site\r\n\r\n");
    for _ in 0..3 {
        let reply = exchange(&mut client, request("/delay?ms=400").as_bytes()).unwrap();
        assert_eq!(reply.status, 200, "an answer within the time-out passes");
        assert_eq!(reply.body, b"in time");
    }
    let sent = std::time::Instant::now();
    let reply = exchange(&mut client, request("/slow").as_bytes()).unwrap();
    let waited = sent.elapsed();
    assert_eq!(reply.status, 504);
    assert!(
        waited >= Duration::from_millis(600),
        "a 504 before the time-out: {waited:?}"
    );
    assert!(
        waited < Duration::from_millis(2900),
        "not the backend's answer"
    );
    let reply = exchange(&mut client, request("/delay?ms=400").as_bytes()).unwrap();
    assert_eq!(reply.status, 200, "re-armed after it fired");
    assert_eq!(
        metric(&proxy, "vantage_proxy_failures_total{kind=\"timeout\"}"),
        1.0
    );
}

/// Sends `request` raw; the proxy must answer 400 (or close) and the
/// backend must see nothing.
fn refused_and_not_forwarded(request: &[u8], statuses: &[u16]) {
    let backend = Backend::start("b");
    let proxy = Proxy::start(config(
        &[backend.address],
        "[utilization]\nconcurrency = 4\n",
    ))
    .unwrap();
    let mut s = connect(proxy.address());
    // No reply at all (closed) is a refusal too.
    if let Some(reply) = exchange(&mut s, request) {
        assert!(
            statuses.contains(&reply.status),
            "{:?}: got {}",
            String::from_utf8_lossy(request),
            reply.status
        );
    }
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        backend.seen.count(),
        0,
        "{:?} reached the backend",
        String::from_utf8_lossy(request)
    );
    // The proxy keeps serving.
    assert_eq!(get(proxy.address(), "/", None).status, 200);
}

#[test]
fn smuggling_attempts_are_refused() {
    // Two different Content-Lengths.
    refused_and_not_forwarded(
        b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 8\r\n\r\nabcdefgh",
        &[400],
    );
    // A list of Content-Lengths that differ.
    refused_and_not_forwarded(
        b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 8\r\n\r\nabcdefgh",
        &[400],
    );
    // obs-fold (a header continued on the next line).
    refused_and_not_forwarded(
        b"GET / HTTP/1.1\r\nHost: x\r\nX-Long: a\r\n b\r\n\r\n",
        &[400],
    );
    // A tunnel request.
    refused_and_not_forwarded(
        b"CONNECT example.org:443 HTTP/1.1\r\nHost: example.org:443\r\n\r\n",
        &[405, 400],
    );
    // Transfer-Encoding whose last coding is not chunked.
    refused_and_not_forwarded(
        b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n",
        &[400, 501],
    );
    // A space before the colon.
    refused_and_not_forwarded(
        b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length : 3\r\n\r\nabc",
        &[400],
    );
}

#[test]
fn content_length_and_transfer_encoding_are_read_as_chunked_and_the_connection_closed() {
    // RFC 9112 §6.1: the chunked framing alone counts and the connection
    // closes after the response, so the bytes after the chunked body (a
    // smuggled request) are never read as a request.
    let backend = Backend::start("b");
    let proxy = Proxy::start(config(
        &[backend.address],
        "[utilization]\nconcurrency = 4\n",
    ))
    .unwrap();
    let mut s = connect(proxy.address());
    let reply = exchange(
        &mut s,
        b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    if let Some(reply) = &reply {
        assert!([200, 400].contains(&reply.status), "{}", reply.status);
    }
    assert!(
        closed(&mut s),
        "the connection is closed after the response"
    );
    std::thread::sleep(Duration::from_millis(100));
    let requests = backend.seen.requests.lock().unwrap();
    assert!(requests.len() <= 1, "{requests:?}");
    for (method, target, headers, body) in requests.iter() {
        assert_eq!((method.as_str(), target.as_str()), ("POST", "/echo"));
        assert_eq!(body, b"abc");
        assert!(
            headers.get("content-length").is_none_or(|v| v == "3"),
            "{headers:?}"
        );
    }
}

#[test]
fn a_bare_lf_request_is_forwarded_only_normalised() {
    // hyper's parser accepts LF line ends; what it forwards is its own
    // CRLF-framed request, so the backend reads exactly what the proxy
    // read: one GET of `/lf`, no body.
    let backend = Backend::start("b");
    let proxy = Proxy::start(config(
        &[backend.address],
        "[utilization]\nconcurrency = 4\n",
    ))
    .unwrap();
    let mut s = connect(proxy.address());
    let reply = exchange(&mut s, b"GET /lf HTTP/1.1\nHost: x\nX-A: 1\n\n");
    if let Some(reply) = reply {
        assert!([200, 400].contains(&reply.status), "{}", reply.status);
    }
    std::thread::sleep(Duration::from_millis(100));
    let requests = backend.seen.requests.lock().unwrap();
    assert!(requests.len() <= 1);
    for (method, target, headers, body) in requests.iter() {
        assert_eq!((method.as_str(), target.as_str()), ("GET", "/lf"));
        assert_eq!(headers["x-a"], "1");
        assert!(body.is_empty());
    }
}

#[test]
fn oversized_headers_and_bodies_are_refused() {
    let backend = Backend::start("b");
    let proxy = Proxy::start(config(
        &[backend.address],
        "[utilization]\nconcurrency = 4\n[limits]\nmax_header_bytes = 8192\nmax_body_bytes = 1000\n",
    ))
    .unwrap();
    let mut s = connect(proxy.address());
    let big = format!(
        "GET / HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "a".repeat(20_000)
    );
    if let Some(reply) = exchange(&mut s, big.as_bytes()) {
        assert_eq!(reply.status, 431);
    }
    let mut s = connect(proxy.address());
    let long_line = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "p".repeat(20_000));
    if let Some(reply) = exchange(&mut s, long_line.as_bytes()) {
        assert!([414, 431, 400].contains(&reply.status), "{}", reply.status);
    }
    // A declared body over the limit: 413 before anything is sent.
    let mut s = connect(proxy.address());
    let reply = exchange(
        &mut s,
        b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n",
    )
    .unwrap();
    assert_eq!(reply.status, 413);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(backend.seen.count(), 0);
    // A chunked body that grows past the limit is cut while streaming.
    let mut s = connect(proxy.address());
    let mut request =
        b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..4 {
        request.extend_from_slice(b"1f4\r\n");
        request.extend_from_slice(&[b'z'; 500]);
        request.extend_from_slice(b"\r\n");
    }
    request.extend_from_slice(b"0\r\n\r\n");
    if let Some(reply) = exchange(&mut s, &request) {
        assert!([413, 502].contains(&reply.status), "{}", reply.status);
    }
    std::thread::sleep(Duration::from_millis(100));
    for (_, _, _, body) in backend.seen.requests.lock().unwrap().iter() {
        assert!(
            body.len() <= 1000,
            "a body past the limit was delivered whole"
        );
    }
    assert_eq!(get(proxy.address(), "/", None).status, 200);
}

#[test]
fn slowloris_is_closed_by_the_header_timeout() {
    let backend = Backend::start("b");
    let proxy = Proxy::start(config(
        &[backend.address],
        "[utilization]\nconcurrency = 4\n[timeouts]\nrequest_headers_ms = 300\n",
    ))
    .unwrap();
    let mut s = connect(proxy.address());
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n").unwrap();
    // One byte every 100 ms: never a whole head.
    let mut closed_early = false;
    for _ in 0..40 {
        std::thread::sleep(Duration::from_millis(100));
        if s.write_all(b"X").is_err() {
            closed_early = true;
            break;
        }
    }
    assert!(
        closed_early || closed(&mut s),
        "the trickling connection stays open"
    );
    assert_eq!(backend.seen.count(), 0);
    assert_eq!(get(proxy.address(), "/", None).status, 200);
}

#[test]
fn a_keep_alive_connection_outlives_the_header_timeout_until_its_idle_timeout() {
    let backend = Backend::start("b");
    let proxy = Proxy::start(config(
        &[backend.address],
        "[utilization]\nconcurrency = 4\n[timeouts]\nrequest_headers_ms = 300\nidle_ms = 3000\n",
    ))
    .unwrap();
    let mut s = connect(proxy.address());
    let request = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_eq!(exchange(&mut s, request).unwrap().status, 200);
    // Idle for three header timeouts, well under the idle timeout: the
    // connection is still there for the next request.
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(
        exchange(&mut s, request).map(|r| r.status),
        Some(200),
        "an idle keep-alive connection was closed by the header timeout"
    );
    // Idle past the idle timeout: closed.
    std::thread::sleep(Duration::from_millis(4500));
    assert!(closed(&mut s), "the idle timeout did not close it");
}

#[test]
fn the_connection_cap_evicts_idle_connections_then_refuses() {
    let backend = Backend::start("b");
    let proxy = Proxy::start(config(
        &[backend.address],
        "[utilization]\nconcurrency = 4\n[limits]\nmax_connections = 2\n",
    ))
    .unwrap();
    // Two connections with a request in progress (the backend answers
    // /slow after 3 s): neither can be evicted.
    let mut held: Vec<_> = (0..2).map(|_| connect(proxy.address())).collect();
    for s in held.iter_mut() {
        s.write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
    }
    assert!(eventually(|| backend.seen.count() == 2));
    let mut third = connect(proxy.address());
    let _ = third.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(closed(&mut third), "the third connection is closed at once");
    assert_eq!(
        metric(&proxy, "vantage_proxy_connections_refused_total"),
        1.0
    );
    // Once answered, both are idle keep-alive connections: a new client
    // takes the slot of one of them.
    for s in held.iter_mut() {
        assert_eq!(read_reply(s).unwrap().status, 200);
    }
    let reply = get(proxy.address(), "/", None);
    assert_eq!(reply.status, 200);
    assert_eq!(
        metric(&proxy, "vantage_proxy_connections_evicted_total"),
        1.0
    );
    let still_open = held
        .iter_mut()
        .filter_map(|s| exchange(s, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
        .count();
    assert_eq!(still_open, 1, "exactly one idle connection was closed");
    drop(held);
    assert!(eventually(|| metric(
        &proxy,
        "vantage_proxy_connections_open"
    ) == 0.0));
}

#[test]
fn the_metrics_pass_promtool() {
    let backend = Backend::start("b");
    let mut c = config(
        &[backend.address],
        &format!(
            "metrics_listen = \"127.0.0.1:0\"\n[utilization]\nconcurrency = 4\n[sbac]\nstrategy = \"predictive\"\ninterval_s = 0.1\nkeys = [\"{KEY}\"]\n"
        ),
    );
    c.access_log = None;
    let proxy = Proxy::start(c).unwrap();
    assert_eq!(get(proxy.address(), "/", None).status, 200);
    assert_eq!(get(proxy.address(), "/error", None).status, 500);
    std::thread::sleep(Duration::from_millis(300));
    let address = proxy.metrics_address().unwrap();
    let reply = get(address, "/metrics", None);
    assert_eq!(reply.status, 200);
    let text = String::from_utf8(reply.body).unwrap();
    for family in [
        "vantage_proxy_sessions_admitted_total 2",
        "vantage_proxy_controller_quota",
        "vantage_proxy_upstream_latency_seconds_bucket",
        "vantage_proxy_failures_total{kind=\"upstream_5xx\"} 1",
    ] {
        assert!(text.contains(family), "missing {family} in\n{text}");
    }
    let promtool = std::path::Path::new("/usr/bin/promtool");
    if !promtool.exists() {
        eprintln!("skipping the promtool check: /usr/bin/promtool is not installed");
        return;
    }
    let mut child = std::process::Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn curl_gets_answers_over_http_1_1_and_h2c() {
    if std::process::Command::new("curl")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped curl_gets_answers_over_http_1_1_and_h2c: curl is not installed");
        return;
    }
    let backend = Backend::start("b");
    let proxy = Proxy::start(config(
        &[backend.address],
        "[utilization]\nconcurrency = 4\n",
    ))
    .unwrap();
    let url = format!("http://{}/hello", proxy.address());
    let echo = format!("http://{}/echo", proxy.address());
    for (flag, version) in [("--http1.1", "1.1"), ("--http2-prior-knowledge", "2")] {
        let out = std::process::Command::new("curl")
            .args([
                "-sS",
                "--max-time",
                "10",
                flag,
                "-w",
                "\n%{http_version} %{http_code}",
            ])
            .arg(&url)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            text,
            format!("hello from b\n{version} 200"),
            "{flag}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let out = std::process::Command::new("curl")
            .args([
                "-sS",
                "--max-time",
                "10",
                flag,
                "--data-binary",
                "a streamed body",
            ])
            .arg(&echo)
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "a streamed body",
            "{flag}"
        );
    }
    let requests = backend.seen.requests.lock().unwrap();
    // The HTTP/2 requests reached the backend with a Host from :authority.
    let host = proxy.address().to_string();
    assert!(requests
        .iter()
        .all(|(_, _, h, _)| h["host"] == host.as_str()));
    assert!(requests.iter().any(|(_, _, h, _)| h["via"] == "2 vantage"));
}

#[test]
fn a_client_gone_before_the_response_is_counted_and_leaves_nothing_in_flight() {
    let slow = Backend::start("slow");
    let proxy = Proxy::start(config(&[slow.address], "[utilization]\nconcurrency = 4\n")).unwrap();
    let mut s = connect(proxy.address());
    s.write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    assert!(eventually(|| slow.seen.count() == 1));
    drop(s);
    assert!(eventually(|| metric(
        &proxy,
        "vantage_proxy_failures_total{kind=\"client_gone\"}"
    ) == 1.0));
    // Nothing stays in flight: the occupancy falls back to zero.
    std::thread::sleep(Duration::from_millis(1100));
    assert!(eventually(
        || metric(&proxy, "vantage_proxy_utilization") == 0.0
    ));
}

/// A self-signed certificate for `localhost` (openssl), in `dir`.
fn self_signed(
    dir: &std::path::Path,
    name: &str,
) -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    let cert = dir.join(format!("{name}.crt"));
    let key = dir.join(format!("{name}.key"));
    let ok = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .ok()?
        .status
        .success();
    ok.then_some((cert, key))
}

fn curl_tls(port: u16, ca: &std::path::Path, flag: &str) -> (String, String) {
    let out = std::process::Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "10",
            flag,
            "-w",
            "\n%{http_version} %{http_code}",
        ])
        .arg("--cacert")
        .arg(ca)
        .arg("--resolve")
        .arg(format!("localhost:{port}:127.0.0.1"))
        .arg(format!("https://localhost:{port}/hello"))
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn https_with_alpn_and_certificates_reloaded() {
    let have = |tool: &str| {
        std::process::Command::new(tool)
            .arg("version")
            .output()
            .is_ok()
    };
    if !have("openssl")
        || std::process::Command::new("curl")
            .arg("--version")
            .output()
            .is_err()
    {
        eprintln!("skipped https_with_alpn_and_certificates_reloaded: needs openssl and curl");
        return;
    }
    let dir = std::env::temp_dir().join(format!("vantage-proxy-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key) = self_signed(&dir, "first").expect("openssl makes a certificate");
    let (cert2, key2) = self_signed(&dir, "second").expect("openssl makes a certificate");
    let backend = Backend::start("b");
    let text = |cert: &std::path::Path, key: &std::path::Path| {
        format!(
            "[tls]\ncert = \"{}\"\nkey = \"{}\"\n[utilization]\nconcurrency = 4\n[sbac]\nstrategy = \"stable\"\nkeys = [\"{KEY}\"]\n",
            cert.display(),
            key.display()
        )
    };
    let proxy = Proxy::start(config(&[backend.address], &text(&cert, &key))).unwrap();
    let port = proxy.address().port();
    for (flag, version) in [("--http1.1", "1.1"), ("--http2", "2")] {
        let (out, err) = curl_tls(port, &cert, flag);
        assert_eq!(out, format!("hello from b\n{version} 200"), "{flag}: {err}");
    }
    // The session cookie is Secure over TLS.
    let out = std::process::Command::new("curl")
        .args(["-sS", "-D", "-", "-o", "/dev/null", "--cacert"])
        .arg(&cert)
        .arg("--resolve")
        .arg(format!("localhost:{port}:127.0.0.1"))
        .arg(format!("https://localhost:{port}/"))
        .output()
        .unwrap();
    let headers = String::from_utf8_lossy(&out.stdout).to_lowercase();
    assert!(
        headers.contains("set-cookie: vantage_session=") && headers.contains("; secure"),
        "{headers}"
    );
    // Plain HTTP to the TLS port: a failed handshake, counted; still serving.
    let reply = exchange(
        &mut connect(proxy.address()),
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    assert!(reply.is_none());
    assert!(eventually(|| metric(
        &proxy,
        "vantage_proxy_tls_handshakes_failed_total"
    ) == 1.0));
    // A reload naming a missing key is refused: the first certificate stays.
    let mut broken = config(&[backend.address], &text(&cert2, &dir.join("missing.key")));
    broken.listen = proxy.address();
    assert!(proxy.reload(broken).is_err());
    assert_eq!(curl_tls(port, &cert, "--http2").0, "hello from b\n2 200");
    // A renewed certificate is served after a reload.
    proxy
        .reload(config(&[backend.address], &text(&cert2, &key2)))
        .unwrap();
    assert_eq!(curl_tls(port, &cert2, "--http2").0, "hello from b\n2 200");
    let (out, _) = curl_tls(port, &cert, "--http2");
    assert!(
        !out.ends_with(" 200"),
        "the old certificate is still served"
    );
    drop(proxy);
    std::fs::remove_dir_all(&dir).unwrap();
}
