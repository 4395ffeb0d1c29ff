//! The watch daemon against a real overloaded listener, as root: in a
//! network namespace of its own, a TCP server with an accept queue of one
//! that accepts a connection every 150 ms, and clients that open a known
//! number of connections at once. Many SYNs find the queue full and are
//! dropped; the clients re-send them (1 s, 3 s, … later) and are served.
//! The daemon, capturing the namespace's loopback, must count every
//! connection, see the re-sent SYNs, export metrics `promtool check
//! metrics` accepts, and write one JSON line per interval.
//!
//! Bounded: 16 connections, every wait capped (the whole test stops within
//! 60 s); the namespace is deleted and every thread stopped on failure too.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use vantage_live::daemon::Signals;
use vantage_live::watch::{self, RunOptions, WatchConfig};

const CONNECTIONS: usize = 16;
const PORT: u16 = 18_080;
const METRICS: &str = "127.0.0.1:19466";
/// Records of the synthetic gate log: 60 s of 250 ms intervals.
const GATE_RECORDS: u64 = 240;

/// Deletes the namespace (and so its loopback) when dropped.
struct Namespace {
    name: String,
}

impl Namespace {
    fn create(test: &str) -> Namespace {
        let name = format!("vw-{test}-{}", std::process::id());
        let _ = Command::new("ip")
            .args(["netns", "del", &name])
            .stderr(std::process::Stdio::null())
            .status();
        let ok = Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .expect("ip netns add");
        assert!(ok.success(), "ip netns add {name}");
        let namespace = Namespace { name };
        let ok = Command::new("ip")
            .args(["-n", &namespace.name, "link", "set", "lo", "up"])
            .status()
            .expect("ip link");
        assert!(ok.success());
        namespace
    }

    /// Moves the calling thread into the namespace.
    fn enter(name: &str) {
        let file = std::fs::File::open(Path::new("/var/run/netns").join(name)).expect("netns file");
        // SAFETY: setns(2) on this thread with a namespace descriptor.
        let result = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(result, 0, "setns: {}", std::io::Error::last_os_error());
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// Sets `stop` when dropped, so every thread ends on a failed assertion.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

fn scrape(address: &str) -> Option<String> {
    let address: SocketAddr = address.parse().ok()?;
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    let (_, body) = text.split_once("\r\n\r\n")?;
    Some(body.to_string())
}

/// The value of the sample whose line starts with `prefix` (name and
/// labels).
fn sample(metrics: &str, prefix: &str) -> f64 {
    metrics
        .lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

#[test]
fn watch_counts_an_overflowing_listener() {
    if !vantage_sys::privilege::is_root() {
        eprintln!("skipped: needs root (a network namespace and CAP_NET_RAW)");
        return;
    }
    if Command::new("ip").arg("-V").output().is_err() {
        eprintln!("skipped: needs `ip` (iproute2)");
        return;
    }
    let namespace = Namespace::create("count");
    let stop = Arc::new(AtomicBool::new(false));
    let _stop_guard = StopOnDrop(Arc::clone(&stop));
    let dir = std::env::temp_dir().join(format!("vantage-watch-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let jsonl = dir.join("watch.jsonl");
    let _ = std::fs::remove_file(&jsonl);
    let gate_log = dir.join("gate.jsonl");
    let _ = std::fs::remove_file(&gate_log);
    let text = format!(
        "listeners = [\"127.0.0.1:{PORT}\"]\ninterface = \"lo\"\ninterval = \"250ms\"\nprofile = \"linux-6.5\"\nlearn = true\nlearn_every = \"1s\"\nmetrics_listen = \"{}\"\njsonl = \"{}\"\nlog = \"{}\"\n[gate]\nlog = \"{}\"\n",
        METRICS,
        jsonl.display(),
        dir.join("watch.log").display(),
        gate_log.display()
    );
    let config = WatchConfig::from_toml(&text, "test.toml").unwrap();

    // The daemon, in the namespace.
    let signals = Signals::new();
    let daemon_signals = signals.clone();
    let name = namespace.name.clone();
    let daemon = std::thread::spawn(move || {
        Namespace::enter(&name);
        let options = RunOptions {
            ready_file: None,
            signals: daemon_signals,
            config_path: None,
        };
        watch::run(&config, &options)
    });
    let stop_daemon = signals.stop.clone();
    let _daemon_guard = StopOnDrop(stop_daemon);

    // The server: an accept queue of one, an accept every 150 ms.
    let name = namespace.name.clone();
    let server_stop = Arc::clone(&stop);
    let server = std::thread::spawn(move || {
        Namespace::enter(&name);
        let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
            .expect("socket");
        socket.set_reuse_address(true).unwrap();
        let address: SocketAddr = format!("127.0.0.1:{PORT}").parse().unwrap();
        socket.bind(&address.into()).unwrap();
        socket.listen(1).unwrap();
        socket.set_nonblocking(true).unwrap();
        let listener: std::net::TcpListener = socket.into();
        let mut served = 0;
        let deadline = Instant::now() + Duration::from_secs(45);
        while !server_stop.load(Ordering::Relaxed) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(150));
            if let Ok((mut stream, _)) = listener.accept() {
                stream.set_nonblocking(false).unwrap();
                stream
                    .set_read_timeout(Some(Duration::from_secs(2)))
                    .unwrap();
                let mut request = [0u8; 8];
                let _ = stream.read_exact(&mut request);
                let _ = stream.write_all(b"response");
                served += 1;
            }
        }
        served
    });

    // Give the daemon time to open its ring.
    std::thread::sleep(Duration::from_millis(800));
    assert!(!daemon.is_finished(), "the daemon stopped at once");

    // A gate's log, appearing once the daemon waits for it: a record per
    // 250 ms interval from the last one over the next 60 s (the daemon
    // keeps the ones ahead until their intervals close), 3 SYNs accepted
    // and 1 dropped each, on a grid 100 ms off the daemon's.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let first = (now / 0.25).floor() as u64 - 1;
    let mut gate_text = String::new();
    for k in 0..GATE_RECORDS {
        let start = (first + k) as f64 * 0.25 + 0.1;
        gate_text += &format!(
            "{{\"time_s\":{},\"t_start_unix_s\":{start},\"interval_s\":0.25,\"elapsed_s\":0.25,\"arrivals\":4,\"accepted\":3,\"dropped\":1,\"rejected\":0,\"dry_run\":false,\"filter\":{{\"tokens\":0,\"bucket_size\":3,\"refill_rate\":12.0}}}}\n",
            k as f64 * 0.25
        );
    }
    std::fs::write(&gate_log, gate_text).unwrap();

    // The clients: all at once, each waiting up to 30 s.
    let name = namespace.name.clone();
    let clients = std::thread::spawn(move || {
        Namespace::enter(&name);
        let threads: Vec<_> = (0..CONNECTIONS)
            .map(|_| {
                let name = name.clone();
                std::thread::spawn(move || {
                    Namespace::enter(&name);
                    let address: SocketAddr = format!("127.0.0.1:{PORT}").parse().unwrap();
                    let mut stream =
                        TcpStream::connect_timeout(&address, Duration::from_secs(30)).ok()?;
                    stream
                        .set_read_timeout(Some(Duration::from_secs(30)))
                        .ok()?;
                    stream.write_all(b"request!").ok()?;
                    let mut response = [0u8; 8];
                    stream.read_exact(&mut response).ok()?;
                    Some(())
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().ok().flatten().is_some())
            .filter(|ok| *ok)
            .count()
    });
    let served_clients = clients.join().unwrap();
    assert_eq!(served_clients, CONNECTIONS, "every client was served");

    // Wait until the daemon has closed the intervals of every connection
    // (the connection table lingers 2 s after a close), then scrape.
    let name = namespace.name.clone();
    let scraper = std::thread::spawn(move || {
        Namespace::enter(&name);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let text = scrape(METRICS).unwrap_or_default();
            let completed = sample(&text, "vantage_certes_completed_total{class=\"all\"}");
            if completed as usize >= CONNECTIONS || Instant::now() > deadline {
                return text;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    });
    let metrics = scraper.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    signals.stop.store(true, Ordering::Relaxed);
    let summary = daemon.join().unwrap().expect("the daemon ran");
    let served = server.join().unwrap();
    assert_eq!(served, CONNECTIONS);

    let accepted = sample(
        &metrics,
        "vantage_certes_syns_accepted_total{class=\"all\"}",
    );
    let dropped = sample(&metrics, "vantage_certes_syns_dropped_total{class=\"all\"}");
    let completed = sample(&metrics, "vantage_certes_completed_total{class=\"all\"}");
    let gave_up = sample(
        &metrics,
        "vantage_certes_gave_up_estimated_total{class=\"all\"}",
    );
    let exact = sample(
        &metrics,
        "vantage_certes_exact_transactions_total{class=\"all\"}",
    );
    let histogram_count = sample(
        &metrics,
        "vantage_certes_client_response_time_seconds_count{class=\"all\"}",
    );
    let overflows = sample(
        &metrics,
        "vantage_certes_kernel_total{counter=\"ListenOverflows\"}",
    );
    let ring_drops = sample(&metrics, "vantage_certes_ring_drops_total");
    let estimate_mean = sample(
        &metrics,
        "vantage_certes_client_response_time_seconds_sum{class=\"all\"}",
    ) / histogram_count;
    let exact_mean = sample(
        &metrics,
        "vantage_certes_exact_client_time_seconds_total{class=\"all\"}",
    ) / exact;
    let syn_to_end_mean = sample(
        &metrics,
        "vantage_certes_syn_to_end_seconds_total{class=\"all\"}",
    ) / completed;
    eprintln!(
        "means: Certes estimate {estimate_mean:.3} s, exact {exact_mean:.3} s, SYN-to-END {syn_to_end_mean:.3} s"
    );
    eprintln!(
        "clients {CONNECTIONS}: accepted {accepted}, dropped SYNs {dropped}, completed {completed}, model give-ups {gave_up:.3}, exact transactions {exact}, histogram count {histogram_count}, kernel ListenOverflows {overflows}, ring drops {ring_drops}; daemon {summary:?}"
    );
    // Learned from the clients' SYNs (this kernel's schedule), when the
    // run was long enough to learn: printed, not checked (how many SYNs
    // the queue drops depends on the machine's timing).
    for line in metrics.lines().filter(|l| {
        l.starts_with("vantage_certes_learned_profile_share")
            || l.starts_with("vantage_certes_learned_attempts")
            || l.starts_with("vantage_certes_model_learned")
    }) {
        eprintln!("learned: {line}");
    }
    // Every connection the clients opened, counted once.
    assert_eq!(accepted as usize, CONNECTIONS, "{metrics}");
    assert_eq!(completed as usize, CONNECTIONS, "{metrics}");
    assert_eq!(exact as usize, CONNECTIONS, "{metrics}");
    // The queue overflowed: SYNs were re-sent, and the kernel says so too.
    assert!(accepted + dropped > CONNECTIONS as f64, "no SYN re-sent");
    assert!(overflows > 0.0, "{metrics}");
    // The histogram counts the transactions the model estimated.
    assert_eq!(histogram_count, (completed + gave_up).round(), "{metrics}");
    assert_eq!(ring_drops, 0.0);
    // The gate's log: every record read, its verdicts exported as written,
    // the intervals it covered estimated from them.
    let read = sample(
        &metrics,
        "vantage_certes_gate_log_lines_total{outcome=\"read\"}",
    );
    assert_eq!(read as u64, GATE_RECORDS, "{metrics}");
    let gate_accepted = sample(
        &metrics,
        "vantage_certes_gate_syns_total{verdict=\"accepted\"}",
    );
    let gate_dropped = sample(
        &metrics,
        "vantage_certes_gate_syns_total{verdict=\"dropped\"}",
    );
    assert_eq!(gate_accepted as u64, 3 * GATE_RECORDS);
    assert_eq!(gate_dropped as u64, GATE_RECORDS);
    let covered = sample(
        &metrics,
        "vantage_certes_gate_intervals_total{coverage=\"covered\"}",
    );
    let not_covered = sample(
        &metrics,
        "vantage_certes_gate_intervals_total{coverage=\"not_covered\"}",
    );
    let closed = sample(&metrics, "vantage_certes_intervals_total");
    assert!(covered > 0.0, "{metrics}");
    assert_eq!(covered + not_covered, closed, "{metrics}");
    // 1 dropped of 4 in a covered interval.
    let gate_drop_ratio = sample(
        &metrics,
        "vantage_certes_gate_interval_syn_drop_ratio{class=\"all\"}",
    );
    eprintln!(
        "gate: {covered} intervals covered, {not_covered} not; last drop ratio {gate_drop_ratio}"
    );

    // promtool accepts the exposition, when it is installed.
    match Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
    {
        Ok(mut child) => {
            child
                .stdin
                .take()
                .unwrap()
                .write_all(metrics.as_bytes())
                .unwrap();
            let output = child.wait_with_output().unwrap();
            assert!(
                output.status.success(),
                "promtool check metrics:\n{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Err(_) => eprintln!("promtool not installed: the exposition is not checked by it"),
    }

    // One JSON line per interval, on the interval grid.
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&jsonl)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len() as u64, summary.intervals);
    for (i, line) in lines.iter().enumerate() {
        let t = line["t_start_s"].as_f64().unwrap();
        assert!((t - 0.25 * i as f64).abs() < 1e-6, "line {i}: {line}");
    }
    let jsonl_accepted: u64 = lines.iter().map(|l| l["accepted"].as_u64().unwrap()).sum();
    assert_eq!(jsonl_accepted as usize, CONNECTIONS);
    // Each line carries the gate's part; a covered one has its verdicts.
    let mut jsonl_covered = 0;
    for line in &lines {
        let gate = &line["gate"];
        if gate["covered"].as_bool().unwrap() {
            jsonl_covered += 1;
            assert_eq!(gate["accepted"], 3, "{line}");
            assert_eq!(gate["dropped"], 1, "{line}");
            assert!(
                (gate["drop_rate"].as_f64().unwrap() - 0.25).abs() < 1e-9,
                "{line}"
            );
        } else {
            assert!(gate["accepted"].is_null(), "{line}");
        }
    }
    // (The scrape came before the intervals handed over at the stop.)
    assert!(
        jsonl_covered as f64 >= covered,
        "{jsonl_covered} < {covered}"
    );
    std::fs::remove_dir_all(&dir).ok();
    drop(namespace);
}

/// SIGHUP and SIGUSR1, by their flags: a valid new file restarts the
/// capture with it, a changed `metrics_listen` and a broken file are
/// refused while the running capture goes on, and a reopen after a rename
/// writes to a new log file.
#[test]
fn watch_reloads_refuses_and_reopens() {
    if !vantage_sys::privilege::is_root() {
        eprintln!("skipped: needs root (a network namespace and CAP_NET_RAW)");
        return;
    }
    let namespace = Namespace::create("reload");
    let dir = std::env::temp_dir().join(format!("vantage-watch-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("watch.toml");
    let log = dir.join("watch.log");
    let _ = std::fs::remove_file(&log);
    let file = |interval: &str, metrics: &str| {
        format!(
            "listeners = [\":{PORT}\"]\ninterface = \"lo\"\ninterval = \"{interval}\"\nmetrics_listen = \"{metrics}\"\nlog = \"{}\"\n",
            log.display()
        )
    };
    std::fs::write(&path, file("250ms", "127.0.0.1:19467")).unwrap();
    let config = WatchConfig::load(&path).unwrap();
    let signals = Signals::new();
    let _guard = StopOnDrop(signals.stop.clone());
    let daemon_signals = signals.clone();
    let name = namespace.name.clone();
    let config_path = path.clone();
    let daemon = std::thread::spawn(move || {
        Namespace::enter(&name);
        let options = RunOptions {
            ready_file: None,
            signals: daemon_signals,
            config_path: Some(config_path),
        };
        watch::run(&config, &options)
    });
    let wait_for = |what: &str, file: &Path| {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let text = std::fs::read_to_string(file).unwrap_or_default();
            if text.contains(what) {
                return text;
            }
            assert!(
                Instant::now() < deadline,
                "no `{what}` in {}:\n{text}",
                file.display()
            );
            assert!(!daemon.is_finished(), "the daemon stopped");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    wait_for("capturing", &log);

    // A valid new file: applied.
    std::fs::write(&path, file("500ms", "127.0.0.1:19467")).unwrap();
    signals.reload.store(true, Ordering::Relaxed);
    wait_for("reloaded", &log);
    // metrics_listen changed: refused.
    std::fs::write(&path, file("500ms", "127.0.0.1:19468")).unwrap();
    signals.reload.store(true, Ordering::Relaxed);
    wait_for("metrics_listen changed", &log);
    // Not TOML: refused, naming the file.
    std::fs::write(&path, "listeners = [").unwrap();
    signals.reload.store(true, Ordering::Relaxed);
    let text = wait_for("watch.toml:1:", &log);
    assert_eq!(text.matches("reload refused").count(), 2, "{text}");

    // Reopen after a rename: the next lines go to a new file.
    let rotated = dir.join("watch.log.1");
    std::fs::rename(&log, &rotated).unwrap();
    signals.reopen.store(true, Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(300));
    signals.stop.store(true, Ordering::Relaxed);
    let summary = daemon.join().unwrap().expect("the daemon ran");
    assert_eq!(summary.reloads, 1);
    let after = std::fs::read_to_string(&log).unwrap();
    assert!(after.contains("stopped"), "{after}");
    assert!(!std::fs::read_to_string(&rotated)
        .unwrap()
        .contains("stopped"));
    std::fs::remove_dir_all(&dir).ok();
    drop(namespace);
}
