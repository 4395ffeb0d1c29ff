//! Root tests: real HTTP clients through `vantage proxy` — curl, wrk,
//! httperf, h2load and headless Chromium — over HTTP/1.1, h2c (prior
//! knowledge) and HTTP/2 over TLS (ALPN). Each test builds its own testbed
//! topology: the client runs in a client namespace; the proxy (one plain
//! listener, one TLS listener, SBAC on) and a small hyper backend run in the
//! server namespace. The backend counts what reaches it: the proxy's `Via`
//! header names the protocol the client spoke, and the `Cookie` header
//! shows that a client carried its session.
//!
//! Every client runs under `timeout(1)`; the topology, the proxy and the
//! backend are torn down when the test ends, also when it fails.

mod common;

use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use vantage_live::proxy::{Proxy, ProxyConfig};
use vantage_testbed::netns::Netns;
use vantage_testbed::topology::{Topology, TopologySpec, SERVER_ADDR};

/// Text only the backend's page holds.
const MARKER: &str = "vantage-backend-page-3f9c";
const COOKIE: &str = "vantage_session";
const KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
const PLAIN_PORT: u16 = 8080;
const TLS_PORT: u16 = 8443;

fn page() -> String {
    format!(
        "<!doctype html><html><head><title>backend</title></head>\
         <body><p id=\"marker\">{MARKER}</p></body></html>\n"
    )
}

/// What reached the backend, by the protocol the client spoke to the proxy.
#[derive(Debug, Default)]
struct Seen {
    http1: AtomicU64,
    http2: AtomicU64,
    other: AtomicU64,
    with_cookie: AtomicU64,
}

impl Seen {
    fn http1(&self) -> u64 {
        self.http1.load(Ordering::Relaxed)
    }
    fn http2(&self) -> u64 {
        self.http2.load(Ordering::Relaxed)
    }
    fn other(&self) -> u64 {
        self.other.load(Ordering::Relaxed)
    }
    fn with_cookie(&self) -> u64 {
        self.with_cookie.load(Ordering::Relaxed)
    }
}

async fn answer(seen: Arc<Seen>, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let via = request
        .headers()
        .get(hyper::header::VIA)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let counter = match via {
        "1.1 vantage" => &seen.http1,
        "2 vantage" => &seen.http2,
        _ => &seen.other,
    };
    counter.fetch_add(1, Ordering::Relaxed);
    let has_session = request
        .headers()
        .get_all(hyper::header::COOKIE)
        .iter()
        .any(|v| v.to_str().is_ok_and(|v| v.contains(&format!("{COOKIE}="))));
    if has_session {
        seen.with_cookie.fetch_add(1, Ordering::Relaxed);
    }
    let mut response = Response::new(Full::new(Bytes::from(page())));
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/html; charset=utf-8"),
    );
    response
}

/// A hyper HTTP/1.1 server on 127.0.0.1 inside a namespace, on a thread of
/// its own; stopped on drop.
struct Backend {
    address: SocketAddr,
    seen: Arc<Seen>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<Result<(), vantage_testbed::netns::NetnsError>>>,
}

impl Backend {
    fn start(ns: &Netns) -> Backend {
        let seen = Arc::new(Seen::default());
        let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
        let (address_tx, address_rx) = std::sync::mpsc::channel();
        let serve_seen = Arc::clone(&seen);
        let thread = ns
            .spawn("backend", move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("backend runtime");
                runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                        .await
                        .expect("backend binds");
                    address_tx
                        .send(listener.local_addr().expect("backend address"))
                        .expect("test waits for the address");
                    loop {
                        tokio::select! {
                            _ = &mut stop_rx => break,
                            accepted = listener.accept() => {
                                let Ok((stream, _)) = accepted else { continue };
                                let seen = Arc::clone(&serve_seen);
                                tokio::spawn(async move {
                                    let service = hyper::service::service_fn(move |r| {
                                        let seen = Arc::clone(&seen);
                                        async move { Ok::<_, Infallible>(answer(seen, r).await) }
                                    });
                                    let _ = hyper::server::conn::http1::Builder::new()
                                        .serve_connection(TokioIo::new(stream), service)
                                        .await;
                                });
                            }
                        }
                    }
                });
            })
            .expect("backend thread");
        let address = address_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("backend listening");
        Backend {
            address,
            seen,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// One client namespace, and the proxy and its backend in the server
/// namespace. Fields drop in order: the proxies, the backend, the files,
/// then the namespaces.
struct Bed {
    _proxies: Vec<Proxy>,
    backend: Backend,
    dir: TempDir,
    topology: Topology,
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Bed {
    fn build(letter: char) -> Bed {
        let topology = Topology::build(&TopologySpec {
            clients: 1,
            tag: common::tag(&format!("x{letter}")),
        })
        .expect("topology");
        let dir = TempDir(common::result_dir(&format!("proxy-clients-{letter}")));
        let _ = std::fs::remove_dir_all(&dir.0);
        std::fs::create_dir_all(&dir.0).expect("result directory");
        let (cert, key) = self_signed_certificate(&dir.0);
        let backend = Backend::start(&topology.server);
        let sbac = format!(
            "[utilization]\nsource = \"occupancy\"\nconcurrency = 100000\n\
             [sbac]\nstrategy = \"stable\"\ninterval_s = 0.5\ntarget_utilization = 0.95\n\
             cookie = \"{COOKIE}\"\nkeys = [\"{KEY}\"]\n"
        );
        let configs = [
            format!(
                "listen = \"{SERVER_ADDR}:{PLAIN_PORT}\"\nupstreams = [\"{}\"]\n{sbac}",
                backend.address
            ),
            format!(
                "listen = \"{SERVER_ADDR}:{TLS_PORT}\"\nupstreams = [\"{}\"]\n\
                 [tls]\ncert = \"{}\"\nkey = \"{}\"\n{sbac}",
                backend.address,
                cert.display(),
                key.display()
            ),
        ];
        let mut proxies = Vec::new();
        for text in configs {
            let config = ProxyConfig::from_toml(&text, "proxy.toml").expect("proxy config");
            // Started from a thread inside the server namespace: the
            // listener and every upstream socket belong to it.
            let proxy = topology
                .server
                .run(move || Proxy::start(config))
                .expect("enter the server namespace")
                .expect("proxy starts");
            proxies.push(proxy);
        }
        Bed {
            _proxies: proxies,
            backend,
            dir,
            topology,
        }
    }

    fn client(&self) -> &Netns {
        &self.topology.clients[0]
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.0.join(name)
    }

    /// Runs `program args…` in the client namespace, killed after `limit`.
    fn run(&self, limit: Duration, program: &str, args: &[&str]) -> Output {
        let seconds = limit.as_secs().to_string();
        let output = self
            .client()
            .command("timeout")
            .args(["-k", "5", seconds.as_str(), program])
            .args(args)
            .env("HOME", &self.dir.0)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
        eprintln!(
            "$ {program} {}\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        output
    }
}

/// A P-256 certificate for the proxy's address, made by `openssl req`.
fn self_signed_certificate(dir: &Path) -> (PathBuf, PathBuf) {
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    let status = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .arg("ec_paramgen_curve:prime256v1")
        .args(["-nodes", "-days", "2", "-subj", "/CN=vantage-proxy-test"])
        .arg("-addext")
        .arg(format!("subjectAltName=IP:{SERVER_ADDR}"))
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl is installed");
    assert!(
        status.status.success(),
        "openssl req failed: {}",
        String::from_utf8_lossy(&status.stderr)
    );
    (cert, key)
}

fn require(program: &str, package: &str) {
    let found = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
        .unwrap_or(false);
    assert!(
        found,
        "{program} is not installed: `bash scripts/test` installs it (apt package {package})"
    );
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn plain_url() -> String {
    format!("http://{SERVER_ADDR}:{PLAIN_PORT}/")
}

fn tls_url() -> String {
    format!("https://{SERVER_ADDR}:{TLS_PORT}/")
}

/// The first number after `label` in `text`.
fn number_after(text: &str, label: &str) -> Option<f64> {
    let rest = &text[text.find(label)? + label.len()..];
    rest.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .find(|s| !s.is_empty())
        .and_then(|s| s.parse().ok())
}

#[test]
fn curl_gets_the_page_and_a_session_over_http1_h2c_and_h2_over_tls() {
    if common::skip() {
        return;
    }
    require("curl", "curl");
    let _turn = common::serial();
    let bed = Bed::build('c');
    let cert = bed.path("cert.pem");
    let cert = cert.to_str().unwrap();
    let cases: [(&str, String, &[&str], &str); 3] = [
        ("http1", plain_url(), &["--http1.1"], "1.1"),
        ("h2c", plain_url(), &["--http2-prior-knowledge"], "2"),
        ("h2-tls", tls_url(), &["--http2", "--cacert", cert], "2"),
    ];
    for (name, url, protocol, version) in cases {
        let body = bed.path(&format!("{name}.body"));
        let headers = bed.path(&format!("{name}.headers"));
        let jar = bed.path(&format!("{name}.jar"));
        let (h1, h2, cookies) = (
            bed.backend.seen.http1(),
            bed.backend.seen.http2(),
            bed.backend.seen.with_cookie(),
        );
        // First request: a new session, admitted, with a cookie.
        let mut args: Vec<&str> = vec!["-sS", "--max-time", "20"];
        args.extend_from_slice(protocol);
        args.extend_from_slice(&[
            "-o",
            body.to_str().unwrap(),
            "-D",
            headers.to_str().unwrap(),
            "-c",
            jar.to_str().unwrap(),
            "-w",
            "%{http_code} %{size_download} %{http_version}",
            &url,
        ]);
        let output = bed.run(Duration::from_secs(30), "curl", &args);
        assert!(output.status.success(), "{name}: {}", text(&output));
        let written = String::from_utf8_lossy(&output.stdout).to_string();
        assert_eq!(
            written,
            format!("200 {} {version}", page().len()),
            "{name}: status, body bytes, protocol"
        );
        assert_eq!(
            std::fs::read_to_string(&body).unwrap(),
            page(),
            "{name}: body"
        );
        let head = std::fs::read_to_string(&headers).unwrap();
        let set_cookie = head
            .lines()
            .find(|l| {
                l.to_ascii_lowercase()
                    .starts_with(&format!("set-cookie: {COOKIE}="))
            })
            .unwrap_or_else(|| panic!("{name}: no session cookie in\n{head}"));
        assert!(set_cookie.contains("HttpOnly"), "{name}: {set_cookie}");
        // Second request carries the cookie.
        let mut again: Vec<&str> = vec!["-sS", "--max-time", "20"];
        again.extend_from_slice(protocol);
        again.extend_from_slice(&[
            "-o",
            "/dev/null",
            "-b",
            jar.to_str().unwrap(),
            "-w",
            "%{http_code} %{http_version}",
            &url,
        ]);
        let output = bed.run(Duration::from_secs(30), "curl", &again);
        assert!(output.status.success(), "{name}: {}", text(&output));
        assert_eq!(
            String::from_utf8_lossy(&output.stdout),
            format!("200 {version}"),
            "{name}: with the cookie"
        );
        let seen = &bed.backend.seen;
        let (new_h1, new_h2) = (seen.http1() - h1, seen.http2() - h2);
        if version == "2" {
            assert_eq!((new_h1, new_h2), (0, 2), "{name}: protocol at the proxy");
        } else {
            assert_eq!((new_h1, new_h2), (2, 0), "{name}: protocol at the proxy");
        }
        assert_eq!(
            seen.with_cookie() - cookies,
            1,
            "{name}: the second request reached the backend with its session"
        );
    }
    assert_eq!(bed.backend.seen.other(), 0);
}

#[test]
fn wrk_keep_alive_run_has_no_errors() {
    if common::skip() {
        return;
    }
    require("wrk", "wrk");
    let _turn = common::serial();
    let bed = Bed::build('w');
    let url = plain_url();
    let output = bed.run(
        Duration::from_secs(30),
        "wrk",
        &["-t1", "-c8", "-d2s", "--timeout", "5s", &url],
    );
    let out = text(&output);
    assert!(output.status.success(), "{out}");
    let requests = out
        .lines()
        .find(|l| l.contains("requests in"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no request count in\n{out}"));
    assert!(requests > 0, "{out}");
    // wrk prints these lines only when there is something to count.
    assert!(!out.contains("Socket errors"), "socket errors:\n{out}");
    assert!(!out.contains("Non-2xx"), "non-2xx responses:\n{out}");
    let seen = &bed.backend.seen;
    assert!(
        seen.http1() >= requests,
        "the backend saw {} requests, wrk counted {requests}",
        seen.http1()
    );
    assert_eq!((seen.http2(), seen.other()), (0, 0));
}

#[test]
fn httperf_sessions_complete_and_carry_their_cookie() {
    if common::skip() {
        return;
    }
    require("httperf", "httperf");
    let _turn = common::serial();
    let bed = Bed::build('p');
    const SESSIONS: u64 = 20;
    const CALLS: u64 = 5;
    let wsess = format!("--wsess={SESSIONS},{CALLS},0.05");
    let server = SERVER_ADDR.to_string();
    let port = PLAIN_PORT.to_string();
    let output = bed.run(
        Duration::from_secs(60),
        "httperf",
        &[
            "--hog",
            "--server",
            &server,
            "--port",
            &port,
            "--uri",
            "/",
            &wsess,
            "--rate",
            "10",
            "--session-cookies",
            "--timeout",
            "10",
        ],
    );
    let out = text(&output);
    assert!(output.status.success(), "{out}");
    let completed = out
        .lines()
        .find(|l| l.starts_with("Session rate"))
        .and_then(|l| l.rsplit('(').next())
        .and_then(|l| l.trim_end_matches(')').split_once('/'))
        .map(|(done, all)| (done.trim().to_string(), all.trim().to_string()))
        .unwrap_or_else(|| panic!("no session count in\n{out}"));
    assert_eq!(
        completed,
        (SESSIONS.to_string(), SESSIONS.to_string()),
        "{out}"
    );
    assert_eq!(number_after(&out, "Errors: total"), Some(0.0), "{out}");
    assert_eq!(
        number_after(&out, "2xx="),
        Some((SESSIONS * CALLS) as f64),
        "{out}"
    );
    let seen = &bed.backend.seen;
    assert_eq!(seen.http1(), SESSIONS * CALLS);
    // Every call after a session's first carried the cookie it was given.
    assert_eq!(seen.with_cookie(), SESSIONS * (CALLS - 1));
}

#[test]
fn h2load_over_h2c_and_tls_all_succeed() {
    if common::skip() {
        return;
    }
    require("h2load", "nghttp2-client");
    let _turn = common::serial();
    let bed = Bed::build('h');
    for (name, url, extra, protocol) in [
        ("h2c", plain_url(), None, "h2c"),
        ("h2-tls", tls_url(), Some("--npn-list=h2"), "h2"),
    ] {
        let before = bed.backend.seen.http2();
        let mut args = vec!["-n", "200", "-c", "4", "-m", "4"];
        args.extend(extra);
        args.push(&url);
        let output = bed.run(Duration::from_secs(60), "h2load", &args);
        let out = text(&output);
        assert!(output.status.success(), "{name}: {out}");
        assert!(
            out.contains(
                "requests: 200 total, 200 started, 200 done, 200 succeeded, 0 failed, 0 errored, 0 timeout"
            ),
            "{name}: {out}"
        );
        assert!(out.contains("status codes: 200 2xx"), "{name}: {out}");
        assert!(
            out.contains(&format!("Application protocol: {protocol}\n")),
            "{name}: {out}"
        );
        assert_eq!(bed.backend.seen.http2() - before, 200, "{name}");
    }
    assert_eq!((bed.backend.seen.http1(), bed.backend.seen.other()), (0, 0));
}

#[test]
fn headless_chromium_renders_the_page_over_http1_and_h2_over_tls() {
    if common::skip() {
        return;
    }
    require("chromium", "chromium");
    let _turn = common::serial();
    let bed = Bed::build('b');
    for (name, url, http2) in [("http1", plain_url(), false), ("h2-tls", tls_url(), true)] {
        let (h1, h2) = (bed.backend.seen.http1(), bed.backend.seen.http2());
        // Headless Chromium on a loaded machine now and then exits 0 having
        // printed no document at all (seen once in many CI runs, with the
        // proxy serving). An empty print is retried once, in a fresh
        // profile, and said; a wrong page, a failed exit or a second empty
        // print fails the test.
        let mut attempt = 0;
        let (output, dom) = loop {
            attempt += 1;
            let profile = bed.path(&format!("chromium-{name}-{attempt}"));
            let profile_arg = format!("--user-data-dir={}", profile.display());
            let output = bed.run(
                Duration::from_secs(90),
                "chromium",
                &[
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--no-first-run",
                    "--log-level=2",
                    "--ignore-certificate-errors",
                    &profile_arg,
                    "--dump-dom",
                    &url,
                ],
            );
            let dom = String::from_utf8_lossy(&output.stdout).to_string();
            if dom.trim().is_empty() && output.status.success() && attempt == 1 {
                eprintln!(
                    "{name}: chromium printed no document (backend so far: h1 {}, h2 {}); once more",
                    bed.backend.seen.http1() - h1,
                    bed.backend.seen.http2() - h2
                );
                continue;
            }
            break (output, dom);
        };
        assert!(output.status.success(), "{name}: {}", text(&output));
        assert!(
            dom.contains(&format!("<p id=\"marker\">{MARKER}</p>")),
            "{name}: the backend's page is not in the DOM:\n{dom}"
        );
        let seen = &bed.backend.seen;
        let (new_h1, new_h2) = (seen.http1() - h1, seen.http2() - h2);
        if http2 {
            assert!(
                new_h2 >= 1 && new_h1 == 0,
                "{name}: h1 {new_h1}, h2 {new_h2}"
            );
        } else {
            assert!(
                new_h1 >= 1 && new_h2 == 0,
                "{name}: h1 {new_h1}, h2 {new_h2}"
            );
        }
    }
    assert_eq!(bed.backend.seen.other(), 0);
}
