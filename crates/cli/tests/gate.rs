//! `vantage gate` end to end.
//!
//! Without root: `gate check` names bad keys, `gate run` refuses a
//! non-root user, and `certes estimate` reads a gate log.
//!
//! As root, each test makes a network namespace `vgt-<pid>-<n>` of its
//! own, runs the gate in it (`ip netns exec NS vantage gate run`), and a
//! server and clients in it from threads that entered it (`setns`);
//! connections to 127.0.0.1 pass the INPUT hook on `lo`, where the gate's
//! rule queues their SYNs. A guard kills the gate and every process of the
//! namespace and deletes the namespace on every exit path, panics
//! included. Every wait is bounded.

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use vantage_live::synflood::SynFlood;
use vantage_testbed::netns::Netns;

const SERVER: &str = "127.0.0.1:8080";
const METRICS: &str = "127.0.0.1:9464";

fn vantage(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vantage"))
        .args(args)
        .output()
        .expect("the vantage binary runs")
}

/// Whether a root test can run here; says why not otherwise.
fn can_run_as_root(test: &str) -> bool {
    if !vantage_sys::privilege::is_root() {
        eprintln!("skipped {test}: needs root (network namespaces, NFQUEUE, iptables)");
        return false;
    }
    for tool in ["ip", "iptables"] {
        if Command::new(tool).arg("-V").output().is_err() {
            eprintln!("skipped {test}: `{tool}` is not installed");
            return false;
        }
    }
    true
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("vantage-gate-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

static NAMESPACES: AtomicUsize = AtomicUsize::new(0);

/// One test's namespace, gate and server; all gone when dropped.
struct Lab {
    ns: Netns,
    dir: PathBuf,
    gate: Option<Child>,
    stop: Arc<AtomicBool>,
    /// Run the gate in this process's mount namespace (`nsenter --net`)
    /// instead of `ip netns exec`'s own (which remounts /sys, so a bpffs
    /// the gate mounts there is private to it).
    host_mounts: bool,
}

impl Lab {
    fn new(name: &str) -> Lab {
        let n = NAMESPACES.fetch_add(1, Ordering::SeqCst);
        let ns_name = format!("vgt-{}-{n}", std::process::id());
        let ns = Netns::create(&ns_name).expect("create the test namespace");
        Lab {
            ns,
            dir: temp_dir(name),
            gate: None,
            stop: Arc::new(AtomicBool::new(false)),
            host_mounts: false,
        }
    }

    fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    /// Starts the gate with `config` in the namespace and waits (≤ 10 s)
    /// for its ready file; returns its pid.
    fn start_gate(&mut self, config: &str) -> u32 {
        let _ = std::fs::remove_file(self.path("ready"));
        self.start_gate_wrapped(config, &[])
    }

    /// [`Lab::start_gate`] through `wrapper` (a program that executes the
    /// rest of its arguments in its own process, e.g. `setpriv`), leaving
    /// any old ready file in place.
    fn start_gate_wrapped(&mut self, config: &str, wrapper: &[&str]) -> u32 {
        let config_path = self.path("gate.toml");
        std::fs::write(&config_path, config).unwrap();
        let ready = self.path("ready");
        let stale = std::fs::read_to_string(&ready).ok();
        let mut command = match wrapper.split_first() {
            None if self.host_mounts => {
                let mut c = Command::new("nsenter");
                c.arg(format!("--net={}", self.ns.path().display()))
                    .arg(env!("CARGO_BIN_EXE_vantage"));
                c
            }
            Some((program, args)) => {
                let mut c = self.ns.command(program);
                c.args(args).arg(env!("CARGO_BIN_EXE_vantage"));
                c
            }
            None => self.ns.command(env!("CARGO_BIN_EXE_vantage")),
        };
        let child = command
            .args(["gate", "run", "--config"])
            .arg(&config_path)
            .arg("--ready-file")
            .arg(&ready)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(self.path("gate.stderr")).unwrap())
            .spawn()
            .expect("start the gate");
        let pid = child.id();
        self.gate = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(text) = std::fs::read_to_string(&ready) {
                // `ip netns exec` (and the wrapper) exec the program: same pid.
                if Some(&text) != stale.as_ref() {
                    assert_eq!(text.trim(), pid.to_string(), "ready file holds the pid");
                    return pid;
                }
            }
            if let Some(status) = self.gate.as_mut().unwrap().try_wait().unwrap() {
                panic!(
                    "the gate exited ({status}) before it was ready: {}",
                    self.gate_stderr()
                );
            }
            assert!(
                Instant::now() < deadline,
                "gate not ready within 10 s: {}",
                self.gate_stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn gate_stderr(&self) -> String {
        std::fs::read_to_string(self.path("gate.stderr")).unwrap_or_default()
    }

    /// Waits (≤ `limit`) for the gate to exit.
    fn wait_gate(&mut self, limit: Duration) -> std::process::ExitStatus {
        let child = self.gate.as_mut().expect("a gate was started");
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the gate did not exit within {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn signal_gate(&self, signal: &str) {
        let pid = self.gate.as_ref().expect("a gate was started").id();
        let status = Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Runs `work` on a thread inside the namespace and returns its result.
    fn inside<T: Send + 'static>(&self, work: impl FnOnce() -> T + Send + 'static) -> T {
        self.ns.run(work).expect("enter the test namespace")
    }

    /// Starts a server on 127.0.0.1:8080 in the namespace: it accepts
    /// every connection and echoes what it reads, until the lab ends.
    fn start_echo_server(&self) {
        let stop = Arc::clone(&self.stop);
        let (bound_tx, bound_rx) = std::sync::mpsc::channel();
        self.ns
            .spawn("echo-server", move || {
                let listener = TcpListener::bind(SERVER).expect("bind the test server");
                listener.set_nonblocking(true).unwrap();
                bound_tx.send(()).unwrap();
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            let stop = Arc::clone(&stop);
                            std::thread::spawn(move || echo(stream, &stop));
                        }
                        Err(e) if e.kind() == ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(5))
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            })
            .unwrap();
        bound_rx
            .recv_timeout(Duration::from_secs(5))
            .expect("the test server is listening");
    }

    fn iptables_rules(&self) -> String {
        let out = self
            .ns
            .exec("iptables", &["-w", "-S"])
            .expect("iptables -S");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `GET /metrics` from inside the namespace.
    fn metrics(&self) -> String {
        self.inside(|| http_get(METRICS.parse().unwrap(), "/metrics"))
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(mut gate) = self.gate.take() {
            let _ = gate.kill();
            let _ = gate.wait();
            // bpffs is not the namespace's: a killed gate's pinned
            // shortcut programs would outlive it.
            for path in pins_of(gate.id()) {
                let _ = std::fs::remove_file(path);
            }
        }
        let _ = self.ns.destroy(Duration::from_millis(500));
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The shortcut programs gate `pid` pinned (`/sys/fs/bpf/vantage_gate_q*_pPID_*`).
fn pins_of(pid: u32) -> Vec<PathBuf> {
    let marker = format!("_p{pid}_");
    std::fs::read_dir("/sys/fs/bpf")
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("vantage_gate_q") && n.contains(&marker))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn echo(mut stream: TcpStream, stop: &AtomicBool) {
    let _ = stream.set_read_timeout(Some(Duration::from_millis(100)));
    let mut buf = [0u8; 1024];
    while !stop.load(Ordering::Relaxed) {
        match stream.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                if stream.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return,
        }
    }
}

fn http_get(address: SocketAddr, path: &str) -> String {
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(3))
        .unwrap_or_else(|e| panic!("connect to the metrics endpoint {address}: {e}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: gate\r\nAccept: application/openmetrics-text\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .expect("read the metrics");
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(
        response.contains("application/openmetrics-text; version=1.0.0; charset=utf-8"),
        "{response}"
    );
    response
}

/// The value of one sample line (`name{labels} value`) in metrics text.
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| {
            line.strip_prefix(series)?
                .strip_prefix(' ')?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no sample `{series}` in\n{text}"))
}

fn syns(text: &str, verdict: &str) -> f64 {
    sample(
        text,
        &format!("vantage_gate_syns_total{{verdict=\"{verdict}\"}}"),
    )
}

fn connect(timeout: Duration) -> std::io::Result<TcpStream> {
    TcpStream::connect_timeout(&SERVER.parse().unwrap(), timeout)
}

/// A gate configuration for 127.0.0.1:8080 with the iptables backend (the
/// tests read `iptables -S`).
fn config(filter: &str, extra_gate: &str, log: &Path) -> String {
    format!(
        "[gate]\ninterval_ms = 250\nmetrics_listen = \"{METRICS}\"\nlog = \"{}\"\nbackend = \"iptables\"\n{extra_gate}\n[[listeners]]\naddress = \"127.0.0.1\"\nport = 8080\n[filter]\n{filter}\n",
        log.display()
    )
}

fn vm_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("gate status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS in /proc/PID/status")
}

// ---------------------------------------------------------------------------
// Without root

#[test]
fn check_prints_the_effective_configuration_and_names_bad_keys() {
    let dir = temp_dir("check");
    let good = dir.join("good.toml");
    std::fs::write(
        &good,
        "[[listeners]]\nport = 80\n[filter]\nkind = \"abacus\"\nbucket_size = 120\nrefill_rate = 120\npopulation = \"windows-9x-nt\"\n",
    )
    .unwrap();
    let out = vantage(&["gate", "check", "--config", good.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // r/h = 75 s; Windows 9x/NT retransmits at 3, 9, 21 s: S = 21 s.
    assert!(text.contains("window S        21 s"), "{text}");
    assert!(text.contains("listeners         *:80"), "{text}");
    assert!(text.contains("population      windows-9x-nt"), "{text}");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("old name"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // `filter.clients`, the old name of `filter.population`: read, with a
    // warning on stderr; with the new name too, refused.
    let old = dir.join("old.toml");
    std::fs::write(
        &old,
        "[[listeners]]\nport = 80\n[filter]\nkind = \"abacus\"\nbucket_size = 120\nrefill_rate = 120\nclients = \"windows-9x-nt\"\n",
    )
    .unwrap();
    let out = vantage(&["gate", "check", old.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "vantage: warning: {}:7: `filter.clients` is the old name of `filter.population`",
            old.display()
        )),
        "{stderr}"
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("window S        21 s"),
        "{stderr}"
    );
    std::fs::write(
        &old,
        "[[listeners]]\nport = 80\n[filter]\nkind = \"abacus\"\nbucket_size = 120\nrefill_rate = 120\nclients = \"windows-9x-nt\"\npopulation = \"windows-9x-nt\"\n",
    )
    .unwrap();
    let out = vantage(&["gate", "check", old.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("`filter.clients` and `filter.population` are the same setting"),
        "{stderr}"
    );
    // The exact rules follow (FILE is positional too).
    let pinned = dir.join("pinned.toml");
    std::fs::write(
        &pinned,
        "[gate]\nbackend = \"iptables\"\nqueue = 3\n[[listeners]]\naddress = \"10.0.0.1\"\nport = 80\n[filter]\nkind = \"tbf\"\nbucket_size = 1\nrefill_rate = 1\n",
    )
    .unwrap();
    let out = vantage(&["gate", "check", pinned.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("backend           iptables"), "{text}");
    assert!(text.contains("# backend iptables (configured)"), "{text}");
    assert!(text.contains("iptables -w -N VANTAGE-GATE-q3"), "{text}");
    assert!(
        text.contains("-d 10.0.0.1 --dport 80 -j NFQUEUE --queue-num 3 --queue-bypass"),
        "{text}"
    );
    assert!(
        text.contains("iptables -w -I INPUT 1 -j VANTAGE-GATE-q3"),
        "{text}"
    );

    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        "[gate]\nreject_mark = 0\n[[listeners]]\nport = 80\n[filter]\nkind = \"tbf\"\nbucket_size = 1\nrefill_rate = 1\n",
    )
    .unwrap();
    let out = vantage(&["gate", "check", "--config", bad.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("bad.toml")
            && err.contains("`gate.reject_mark`")
            && err.contains("between 1 and 4294967295"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn run_without_the_capability_names_it() {
    let dir = temp_dir("noroot");
    let config = dir.join("gate.toml");
    std::fs::write(
        &config,
        "[[listeners]]\nport = 80\n[filter]\nkind = \"tbf\"\nbucket_size = 1\nrefill_rate = 1\n",
    )
    .unwrap();
    let out = if vantage_sys::privilege::is_root() {
        // Drop to nobody for this one run.
        let Ok(out) = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_vantage"))
            .args(["gate", "run", "--config"])
            .arg(&config)
            .output()
        else {
            eprintln!("skipped: running as root and setpriv is not installed");
            return;
        };
        out
    } else {
        vantage(&["gate", "run", "--config", config.to_str().unwrap()])
    };
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains("Permission denied") && err.contains("cannot read") {
        eprintln!("skipped: nobody cannot read {}", config.display());
        return;
    }
    assert!(!out.status.success());
    assert!(
        err.contains("permission denied") && err.contains("CAP_NET_ADMIN"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn certes_reads_a_gate_log() {
    let dir = temp_dir("certes");
    let log = dir.join("gate.jsonl");
    let record = |t: f64, accepted: u64, dropped: u64, rejected: u64, dry_run: bool| {
        format!(
            "{{\"time_s\":{t},\"interval_s\":0.25,\"elapsed_s\":0.25,\"arrivals\":{},\"accepted\":{accepted},\"dropped\":{dropped},\"rejected\":{rejected},\"passed\":3,\"overruns\":0,\"errors\":0,\"dry_run\":{dry_run},\"filter\":{{\"tokens\":0,\"bucket_size\":120,\"refill_rate\":120.0,\"arrival_rate\":90.5,\"future_tokens\":4,\"chain_borrowed\":0,\"future_buckets\":51}}}}\n",
            accepted + dropped + rejected
        )
    };
    let text = record(0.0, 30, 0, 0, false)
        + &record(0.25, 30, 10, 5, false)
        + &record(0.5, 20, 0, 0, false);
    std::fs::write(&log, &text).unwrap();
    let out = vantage(&[
        "certes",
        "estimate",
        "--counters",
        log.to_str().unwrap(),
        "--interval",
        "250ms",
        "--jsonl",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let s = &summary["summary"];
    // DROPPED = dropped; ACCEPTED = accepted; REFUSED = rejected (a RST
    // answers: in the offered SYNs, not accepted).
    assert_eq!(s["dropped"], 10, "{s}");
    assert_eq!(s["accepted"], 80, "{s}");
    assert_eq!(s["refused"], 5, "{s}");
    assert_eq!(s["offered"], 95, "{s}");
    assert_eq!(s["intervals"], 3, "{s}");

    // A dry run accepted everything, whatever the filter said.
    std::fs::write(&log, record(0.0, 30, 10, 5, true)).unwrap();
    let out = vantage(&[
        "certes",
        "estimate",
        "--counters",
        log.to_str().unwrap(),
        "--interval",
        "250ms",
        "--jsonl",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(summary["summary"]["dropped"], 0);
    assert_eq!(summary["summary"]["accepted"], 45);

    // The wrong --interval is named with the right one.
    std::fs::write(&log, &text).unwrap();
    let out = vantage(&[
        "certes",
        "estimate",
        "--counters",
        log.to_str().unwrap(),
        "--interval",
        "500ms",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("line 1, column `interval_s`") && err.contains("--interval 0.25s"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------
// As root

#[test]
fn tbf_reject_accepts_the_bucket_then_refuses_with_a_reset() {
    if !can_run_as_root("tbf_reject_accepts_the_bucket_then_refuses_with_a_reset") {
        return;
    }
    let mut lab = Lab::new("reject");
    lab.start_echo_server();
    let log = lab.path("gate.jsonl");
    lab.start_gate(&config(
        "kind = \"tbf-reject\"\nbucket_size = 2\nrefill_rate = 0.001",
        "",
        &log,
    ));
    let outcomes = lab.inside(|| {
        let mut kept = Vec::new();
        let mut outcomes = Vec::new();
        for _ in 0..3 {
            match connect(Duration::from_secs(3)) {
                Ok(stream) => {
                    kept.push(stream);
                    outcomes.push(Ok(()));
                }
                Err(e) => outcomes.push(Err(e.kind())),
            }
        }
        outcomes
    });
    assert_eq!(
        outcomes,
        vec![Ok(()), Ok(()), Err(ErrorKind::ConnectionRefused)],
        "{}",
        lab.gate_stderr()
    );
    let metrics = lab.metrics();
    assert_eq!(syns(&metrics, "accept"), 2.0, "{metrics}");
    assert!(syns(&metrics, "reject") >= 1.0, "{metrics}");
    assert_eq!(syns(&metrics, "drop"), 0.0, "{metrics}");

    // Stop it and read its log with Certes.
    lab.signal_gate("-TERM");
    assert!(
        lab.wait_gate(Duration::from_secs(5)).success(),
        "{}",
        lab.gate_stderr()
    );
    let out = vantage(&[
        "certes",
        "estimate",
        "--counters",
        log.to_str().unwrap(),
        "--interval",
        "250ms",
        "--jsonl",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    // The two served SYNs are ACCEPTED; the refused one is REFUSED (in the
    // offered SYNs, not accepted).
    let s = &summary["summary"];
    assert_eq!(s["dropped"], 0, "{summary}");
    assert_eq!(s["accepted"], 2, "{summary}");
    assert_eq!(
        s["refused"].as_f64(),
        Some(syns(&metrics, "reject")),
        "{summary}"
    );
    assert_eq!(
        s["offered"].as_u64(),
        Some(2 + s["refused"].as_u64().unwrap_or(0)),
        "{summary}"
    );
}

#[test]
fn tbf_drop_holds_the_client_in_retransmission() {
    if !can_run_as_root("tbf_drop_holds_the_client_in_retransmission") {
        return;
    }
    let mut lab = Lab::new("drop");
    lab.start_echo_server();
    // Every SYN queued: the listener split and the retransmission table
    // see only queued SYNs (the shortcut's are counted apart).
    lab.start_gate(&config(
        "kind = \"tbf\"\nbucket_size = 1\nrefill_rate = 0.001",
        "shortcut = false",
        &lab.path("gate.jsonl"),
    ));
    let (first, second, waited) = lab.inside(|| {
        let first = connect(Duration::from_secs(3))
            .map(|_| ())
            .map_err(|e| e.kind());
        let started = Instant::now();
        let second = connect(Duration::from_millis(1500))
            .map(|_| ())
            .map_err(|e| e.kind());
        (first, second, started.elapsed())
    });
    assert_eq!(first, Ok(()), "{}", lab.gate_stderr());
    // Neither completed nor refused: the SYN and its retransmission at
    // 1 s were dropped, and the client was still waiting.
    assert_eq!(second, Err(ErrorKind::TimedOut));
    assert!(waited >= Duration::from_millis(1400), "{waited:?}");
    let metrics = lab.metrics();
    assert_eq!(syns(&metrics, "accept"), 1.0, "{metrics}");
    assert!(
        syns(&metrics, "drop") >= 2.0,
        "the retransmission was dropped too: {metrics}"
    );
    assert_eq!(syns(&metrics, "reject"), 0.0, "{metrics}");
    // The same by listener; the retransmission recognised as one; every
    // batch timed.
    let by_listener = |verdict: &str| {
        sample(
            &metrics,
            &format!(
                "vantage_gate_listener_syns_total{{listener=\"127.0.0.1:8080\",verdict=\"{verdict}\"}}"
            ),
        )
    };
    assert_eq!(by_listener("accept"), 1.0, "{metrics}");
    assert_eq!(by_listener("drop"), syns(&metrics, "drop"), "{metrics}");
    assert!(
        sample(&metrics, "vantage_gate_retransmitted_syns_total") >= 1.0,
        "{metrics}"
    );
    assert!(
        sample(&metrics, "vantage_gate_verdict_latency_seconds_count") >= 3.0,
        "{metrics}"
    );
}

#[test]
fn a_killed_gate_lets_traffic_through_and_clean_removes_its_rules() {
    if !can_run_as_root("a_killed_gate_lets_traffic_through_and_clean_removes_its_rules") {
        return;
    }
    let mut lab = Lab::new("kill");
    lab.start_echo_server();
    // Busy-polling (a thread spinning on the queue) changes nothing here.
    lab.start_gate(&config(
        "kind = \"tbf\"\nbucket_size = 1000\nrefill_rate = 1000",
        "busy_poll_us = 200",
        &lab.path("gate.jsonl"),
    ));
    let (established_tx, established_rx) = std::sync::mpsc::channel::<()>();
    let (killed_tx, killed_rx) = std::sync::mpsc::channel::<()>();
    let client = lab
        .ns
        .spawn("established", move || -> Result<usize, String> {
            let exchange = |streams: &mut Vec<TcpStream>, round: u8| -> Result<(), String> {
                for (i, s) in streams.iter_mut().enumerate() {
                    let message = [round, i as u8, 0x47];
                    s.write_all(&message).map_err(|e| format!("write: {e}"))?;
                    let mut back = [0u8; 3];
                    s.read_exact(&mut back).map_err(|e| format!("read: {e}"))?;
                    if back != message {
                        return Err(format!("echo {back:?} != {message:?}"));
                    }
                }
                Ok(())
            };
            let mut streams = Vec::new();
            for _ in 0..3 {
                let s = connect(Duration::from_secs(3)).map_err(|e| format!("connect: {e}"))?;
                s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
                streams.push(s);
            }
            exchange(&mut streams, 1)?;
            established_tx.send(()).unwrap();
            killed_rx
                .recv_timeout(Duration::from_secs(15))
                .map_err(|_| "never told the gate was killed".to_string())?;
            exchange(&mut streams, 2)?;
            // New connections: the queue has no reader; --queue-bypass.
            let mut new = 0;
            for _ in 0..20 {
                connect(Duration::from_secs(2))
                    .map_err(|e| format!("new connection {new}: {e}"))?;
                new += 1;
            }
            Ok(new)
        })
        .unwrap();
    established_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("three connections established and echoed");
    lab.signal_gate("-KILL");
    let status = lab.wait_gate(Duration::from_secs(5));
    assert!(!status.success());
    killed_tx.send(()).unwrap();
    let new = client.join().unwrap().expect("enter the namespace");
    assert_eq!(new, Ok(20));

    let rules = lab.iptables_rules();
    assert!(
        rules.contains("-A INPUT -j VANTAGE-GATE-q0"),
        "the killed gate left its rules: {rules}"
    );
    let out = lab
        .ns
        .exec(env!("CARGO_BIN_EXE_vantage"), &["gate", "clean"])
        .expect("vantage gate clean");
    assert!(String::from_utf8_lossy(&out.stdout).contains("VANTAGE-GATE-q0"));
    let rules = lab.iptables_rules();
    assert!(!rules.contains("VANTAGE-GATE"), "{rules}");
}

#[test]
fn a_syn_flood_costs_the_gate_no_memory() {
    if !can_run_as_root("a_syn_flood_costs_the_gate_no_memory") {
        return;
    }
    let mut lab = Lab::new("flood");
    lab.start_echo_server();
    let pid = lab.start_gate(&config(
        "kind = \"tbf\"\nbucket_size = 100\nrefill_rate = 100",
        "",
        &lab.path("gate.jsonl"),
    ));
    // Let the gate's threads and the metrics server settle, scrape once.
    std::thread::sleep(Duration::from_millis(300));
    lab.metrics();
    let before = vm_rss_kib(pid);

    const RATE: u64 = 6000;
    let duration = Duration::from_secs(3);
    let stop = Arc::clone(&lab.stop);
    let flood = lab
        .ns
        .spawn("flood", move || {
            let mut flood = SynFlood::open(
                Ipv4Addr::new(127, 0, 0, 2),
                10_000..=60_000,
                SocketAddrV4::new(Ipv4Addr::LOCALHOST, 8080),
            )
            .expect("raw socket");
            flood.run(RATE, duration, &stop)
        })
        .unwrap();
    let started = Instant::now();
    let mut peak = before;
    let mut scrapes = 0;
    while started.elapsed() < duration {
        std::thread::sleep(Duration::from_millis(500));
        peak = peak.max(vm_rss_kib(pid));
        // The endpoint answers during the flood.
        let text = lab.metrics();
        assert!(text.contains("vantage_gate_syns_total"));
        scrapes += 1;
    }
    let report = flood.join().unwrap().expect("enter the namespace");
    std::thread::sleep(Duration::from_millis(500));
    peak = peak.max(vm_rss_kib(pid));
    assert!(scrapes >= 4);
    assert!(
        report.sent >= RATE * 3 * 9 / 10,
        "the flood sent only {} SYNs ({} send errors)",
        report.sent,
        report.send_errors
    );
    let metrics = lab.metrics();
    let counted = syns(&metrics, "accept") + syns(&metrics, "drop") + syns(&metrics, "reject");
    let overruns = sample(&metrics, "vantage_gate_queue_overruns_total");
    assert!(
        counted >= report.sent as f64 * 0.95,
        "sent {} SYNs, the gate counted {counted} (+{overruns} overruns)\n{metrics}",
        report.sent
    );
    // W = 100 plus 100/s over about 4 s, with room for timing.
    let accepted = syns(&metrics, "accept");
    assert!(accepted <= 100.0 + 100.0 * 6.0, "accepted {accepted}");
    let growth_kib = peak.saturating_sub(before);
    eprintln!(
        "flood: {} SYNs sent, {counted} counted, {accepted} accepted, {overruns} overruns; VmRSS {before} KiB → peak {peak} KiB",
        report.sent
    );
    assert!(growth_kib < 16 * 1024, "VmRSS grew by {growth_kib} KiB");
}

/// Floods 127.0.0.1:8080 in the lab's namespace at `rate` for `duration`.
fn flood_server(lab: &Lab, rate: u64, duration: Duration) -> vantage_live::synflood::FloodReport {
    let stop = Arc::clone(&lab.stop);
    lab.ns
        .spawn("flood", move || {
            let mut flood = SynFlood::open(
                Ipv4Addr::new(127, 0, 0, 2),
                10_000..=60_000,
                SocketAddrV4::new(Ipv4Addr::LOCALHOST, 8080),
            )
            .expect("raw socket");
            flood.run(rate, duration, &stop)
        })
        .unwrap()
        .join()
        .unwrap()
        .expect("enter the namespace")
}

#[test]
fn a_flood_against_a_tbf_gate_is_decided_mostly_in_the_kernel_and_counted_exactly() {
    if !can_run_as_root(
        "a_flood_against_a_tbf_gate_is_decided_mostly_in_the_kernel_and_counted_exactly",
    ) {
        return;
    }
    let mut lab = Lab::new("shortcut");
    // The pins in /sys/fs/bpf of this mount namespace, where the test and
    // `gate clean` see them.
    lab.host_mounts = true;
    let log = lab.path("gate.jsonl");
    let gate_config = config(
        "kind = \"tbf\"\nbucket_size = 20\nrefill_rate = 20",
        "queue = 7",
        &log,
    );
    let pid = lab.start_gate(&gate_config);
    let pins = |pid: u32| {
        ["drop", "reject"].map(|v| PathBuf::from(format!("/sys/fs/bpf/vantage_gate_q7_p{pid}_{v}")))
    };
    assert!(pins(pid).iter().all(|p| p.exists()), "{:?}", pins(pid));
    let rules = lab.iptables_rules();
    assert!(
        rules.contains(&format!(
            "-m bpf --object-pinned /sys/fs/bpf/vantage_gate_q7_p{pid}_drop -j DROP"
        )),
        "{rules}"
    );

    // 20,000 SYNs/s for 2 s against 20 tokens/s: all but a few dozen find
    // the bucket empty.
    let report = flood_server(&lab, 20_000, Duration::from_secs(2));
    assert!(
        report.sent >= 20_000,
        "the flood sent only {} SYNs",
        report.sent
    );
    // Nothing in flight any more: every SYN is counted, once.
    std::thread::sleep(Duration::from_millis(500));
    let metrics = lab.metrics();
    let counted = syns(&metrics, "accept") + syns(&metrics, "drop") + syns(&metrics, "reject");
    let overruns = sample(&metrics, "vantage_gate_queue_overruns_total");
    let by_shortcut = sample(
        &metrics,
        "vantage_gate_shortcut_syns_total{verdict=\"drop\"}",
    );
    let disagreed = sample(&metrics, "vantage_gate_shortcut_disagreements_total");
    eprintln!(
        "shortcut flood: {} sent, {counted} counted ({by_shortcut} by the shortcut), {overruns} overruns, {disagreed} disagreements",
        report.sent
    );
    assert_eq!(counted + overruns, report.sent as f64, "{metrics}");
    assert!(
        by_shortcut >= report.sent as f64 * 0.5,
        "the shortcut decided {by_shortcut} of {}",
        report.sent
    );
    // The listener split counts the queued SYNs; the shortcut's the rest.
    let by_listener = sample(
        &metrics,
        "vantage_gate_listener_syns_total{listener=\"127.0.0.1:8080\",verdict=\"drop\"}",
    );
    assert_eq!(
        by_listener + by_shortcut,
        syns(&metrics, "drop"),
        "{metrics}"
    );
    // W = 20 and 20/s over about 3 s, with room for timing.
    let accepted = syns(&metrics, "accept");
    assert!(
        (20.0..=20.0 + 20.0 * 5.0).contains(&accepted),
        "accepted {accepted}"
    );
    assert!(
        disagreed <= by_shortcut / 100.0,
        "{disagreed} disagreements"
    );
    // The per-interval log holds the shortcut's SYNs too.
    lab.signal_gate("-TERM");
    let status = lab.wait_gate(Duration::from_secs(5));
    assert_eq!(status.code(), Some(0), "{}", lab.gate_stderr());
    let logged: f64 = log_lines(&log)
        .iter()
        .map(|line| {
            ["accepted", "dropped", "rejected"]
                .iter()
                .map(|k| line[k].as_f64().unwrap_or(0.0))
                .sum::<f64>()
        })
        .sum();
    assert_eq!(logged, counted, "the log's counts add up to the metrics'");
    assert!(!lab.iptables_rules().contains("VANTAGE-GATE"));
    assert!(
        pins(pid).iter().all(|p| !p.exists()),
        "SIGTERM removes the pins"
    );

    // Killed, the gate leaves its rules and pins; `gate clean` removes both.
    let pid = lab.start_gate(&gate_config);
    lab.signal_gate("-KILL");
    lab.wait_gate(Duration::from_secs(5));
    assert!(pins(pid).iter().all(|p| p.exists()));
    let out = Command::new("nsenter")
        .arg(format!("--net={}", lab.ns.path().display()))
        .args([env!("CARGO_BIN_EXE_vantage"), "gate", "clean"])
        .output()
        .expect("vantage gate clean");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("VANTAGE-GATE-q7"), "{said}");
    assert!(
        said.contains(&format!("vantage_gate_q7_p{pid}_drop")),
        "{said}"
    );
    assert!(!lab.iptables_rules().contains("VANTAGE-GATE"));
    assert!(
        pins(pid).iter().all(|p| !p.exists()),
        "clean removes the pins"
    );
}

/// Floods `[::1]:port` in the lab's namespace with `rate` SYNs/s for
/// `duration`, from `[::1]` and source ports cycling through 10,000–60,000.
///
/// Hand-written with `libc` (std has no raw sockets, and `SynFlood` builds
/// IPv4 headers): a raw `IPPROTO_TCP` socket of `AF_INET6` takes the TCP
/// header only, and `IPV6_CHECKSUM` has the kernel fill in its checksum.
fn flood_server_v6(
    lab: &Lab,
    port: u16,
    rate: u64,
    duration: Duration,
) -> vantage_live::synflood::FloodReport {
    let stop = Arc::clone(&lab.stop);
    lab.ns
        .spawn("flood6", move || {
            // SAFETY: plain system calls; every result is checked.
            let fd = unsafe {
                libc::socket(
                    libc::AF_INET6,
                    libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                    libc::IPPROTO_TCP,
                )
            };
            assert!(fd >= 0, "raw socket: {}", std::io::Error::last_os_error());
            // SAFETY: `fd` is fresh and owned here from now on.
            let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
            let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
            // The TCP checksum's offset in the header.
            let offset: libc::c_int = 16;
            // SAFETY: `offset` is valid for its length.
            let set = unsafe {
                libc::setsockopt(
                    raw,
                    libc::IPPROTO_IPV6,
                    libc::IPV6_CHECKSUM,
                    (&offset as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            assert_eq!(set, 0, "IPV6_CHECKSUM: {}", std::io::Error::last_os_error());
            // SAFETY: sockaddr_in6 is plain data; all-zero is valid.
            let mut to: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
            to.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            to.sin6_addr.s6_addr = std::net::Ipv6Addr::LOCALHOST.octets();
            let mut report = vantage_live::synflood::FloodReport::default();
            let mut sequence: u32 = 0x5647_0000;
            let start = Instant::now();
            while start.elapsed() < duration && !stop.load(Ordering::Relaxed) {
                let due = (start.elapsed().as_secs_f64() * rate as f64) as u64;
                while report.sent < due {
                    let source_port = 10_000 + (report.sent % 50_001) as u16;
                    sequence = sequence.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                    let mut header = [0u8; 20];
                    header[0..2].copy_from_slice(&source_port.to_be_bytes());
                    header[2..4].copy_from_slice(&port.to_be_bytes());
                    header[4..8].copy_from_slice(&sequence.to_be_bytes());
                    header[12] = 5 << 4; // 20-byte header, no options
                    header[13] = 0x02; // SYN
                    header[14..16].copy_from_slice(&64240u16.to_be_bytes());
                    // SAFETY: the buffer and the address are valid for their lengths.
                    let n = unsafe {
                        libc::sendto(
                            raw,
                            header.as_ptr().cast(),
                            header.len(),
                            0,
                            (&to as *const libc::sockaddr_in6).cast(),
                            std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t,
                        )
                    };
                    if n < 0 {
                        report.send_errors += 1;
                        break;
                    }
                    report.sent += 1;
                }
                std::thread::sleep(Duration::from_micros(500));
            }
            report
        })
        .unwrap()
        .join()
        .unwrap()
        .expect("enter the namespace")
}

#[test]
fn a_flood_against_an_ipv6_listener_is_decided_mostly_in_the_kernel_and_counted_exactly() {
    if !can_run_as_root(
        "a_flood_against_an_ipv6_listener_is_decided_mostly_in_the_kernel_and_counted_exactly",
    ) {
        return;
    }
    let mut lab = Lab::new("shortcut6");
    lab.host_mounts = true;
    let log = lab.path("gate.jsonl");
    let gate_config = format!(
        "[gate]\nqueue = 9\ninterval_ms = 250\nmetrics_listen = \"{METRICS}\"\nlog = \"{}\"\nbackend = \"iptables\"\n[[listeners]]\naddress = \"::1\"\nport = 8080\n[filter]\nkind = \"tbf\"\nbucket_size = 20\nrefill_rate = 20\n",
        log.display()
    );
    let pid = lab.start_gate(&gate_config);
    let pin = PathBuf::from(format!("/sys/fs/bpf/vantage_gate_q9_p{pid}_drop"));
    assert!(pin.exists(), "{}", pin.display());
    let out = lab
        .ns
        .exec("ip6tables", &["-w", "-S"])
        .expect("ip6tables -S");
    let rules = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        rules.contains(&format!("-m bpf --object-pinned {} -j DROP", pin.display())),
        "{rules}"
    );
    assert!(rules.contains("-d ::1/128"), "{rules}");
    assert!(!lab.iptables_rules().contains("VANTAGE-GATE"));

    // 20,000 SYNs/s for 2 s against 20 tokens/s, as for IPv4.
    let report = flood_server_v6(&lab, 8080, 20_000, Duration::from_secs(2));
    assert!(
        report.sent >= 20_000,
        "the flood sent only {} SYNs",
        report.sent
    );
    std::thread::sleep(Duration::from_millis(500));
    let metrics = lab.metrics();
    let counted = syns(&metrics, "accept") + syns(&metrics, "drop") + syns(&metrics, "reject");
    let overruns = sample(&metrics, "vantage_gate_queue_overruns_total");
    let by_shortcut = sample(
        &metrics,
        "vantage_gate_shortcut_syns_total{verdict=\"drop\"}",
    );
    let disagreed = sample(&metrics, "vantage_gate_shortcut_disagreements_total");
    eprintln!(
        "IPv6 shortcut flood: {} sent ({} send errors), {counted} counted ({by_shortcut} by the shortcut), {overruns} overruns, {disagreed} disagreements",
        report.sent, report.send_errors
    );
    assert_eq!(counted + overruns, report.sent as f64, "{metrics}");
    assert!(
        by_shortcut >= report.sent as f64 * 0.5,
        "the shortcut decided {by_shortcut} of {}",
        report.sent
    );
    let by_listener = sample(
        &metrics,
        "vantage_gate_listener_syns_total{listener=\"[::1]:8080\",verdict=\"drop\"}",
    );
    assert_eq!(
        by_listener + by_shortcut,
        syns(&metrics, "drop"),
        "{metrics}"
    );
    let accepted = syns(&metrics, "accept");
    assert!(
        (20.0..=20.0 + 20.0 * 5.0).contains(&accepted),
        "accepted {accepted}"
    );
    assert!(
        disagreed <= by_shortcut / 100.0,
        "{disagreed} disagreements"
    );
    lab.signal_gate("-TERM");
    let status = lab.wait_gate(Duration::from_secs(5));
    assert_eq!(status.code(), Some(0), "{}", lab.gate_stderr());
    assert!(!pin.exists(), "SIGTERM removes the pins");
}

#[test]
fn sigterm_exits_cleanly_and_removes_the_chain() {
    if !can_run_as_root("sigterm_exits_cleanly_and_removes_the_chain") {
        return;
    }
    let mut lab = Lab::new("sigterm");
    lab.start_gate(&config(
        "kind = \"abacus\"\nbucket_size = 10\nrefill_rate = 10\npopulation = \"linux-6.5\"",
        "queue = 5\nqueues = 2",
        &lab.path("gate.jsonl"),
    ));
    let rules = lab.iptables_rules();
    assert!(rules.contains("-A INPUT -j VANTAGE-GATE-q5"), "{rules}");
    assert!(rules.contains("--queue-balance 5:6"), "{rules}");
    let metrics = lab.metrics();
    assert!(metrics.contains("vantage_gate_future_tokens"), "{metrics}");
    lab.signal_gate("-TERM");
    let status = lab.wait_gate(Duration::from_secs(5));
    assert_eq!(status.code(), Some(0), "{}", lab.gate_stderr());
    let rules = lab.iptables_rules();
    assert!(!rules.contains("VANTAGE-GATE"), "{rules}");
    assert!(
        !lab.path("ready").exists(),
        "the ready file is removed on exit"
    );
    let log = std::fs::read_to_string(lab.path("gate.jsonl")).unwrap();
    let last: Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
    assert_eq!(last["filter"]["bucket_size"], 10);
    // Each record's start on the wall clock: the gate's start plus
    // `time_s`, so it ran moments ago.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    for line in log.lines() {
        let record: Value = serde_json::from_str(line).unwrap();
        let start = record["t_start_unix_s"].as_f64().unwrap();
        let time = record["time_s"].as_f64().unwrap();
        assert!(start <= now && now - start < 60.0, "{line}");
        let origin = start - time;
        assert!((now - origin) < 60.0, "{line}");
    }
}

#[test]
fn a_dry_run_counts_verdicts_but_accepts_everything() {
    if !can_run_as_root("a_dry_run_counts_verdicts_but_accepts_everything") {
        return;
    }
    let mut lab = Lab::new("dry");
    lab.start_echo_server();
    lab.start_gate(&config(
        "kind = \"tbf-reject\"\nbucket_size = 1\nrefill_rate = 0.001",
        "dry_run = true",
        &lab.path("gate.jsonl"),
    ));
    let connected = lab.inside(|| {
        (0..3)
            .filter(|_| connect(Duration::from_secs(3)).is_ok())
            .count()
    });
    assert_eq!(connected, 3, "{}", lab.gate_stderr());
    let metrics = lab.metrics();
    assert_eq!(syns(&metrics, "accept"), 1.0, "{metrics}");
    assert_eq!(syns(&metrics, "reject"), 2.0, "{metrics}");
    assert_eq!(sample(&metrics, "vantage_gate_dry_run"), 1.0);
}

#[test]
fn measure_finds_the_servers_accept_rate() {
    if !can_run_as_root("measure_finds_the_servers_accept_rate") {
        return;
    }
    let mut lab = Lab::new("measure");
    // A server that accepts 20 connections per second and no faster.
    let stop = Arc::clone(&lab.stop);
    let (bound_tx, bound_rx) = std::sync::mpsc::channel();
    lab.ns
        .spawn("slow-server", move || {
            let listener = TcpListener::bind(SERVER).expect("bind the test server");
            listener.set_nonblocking(true).unwrap();
            bound_tx.send(()).unwrap();
            let mut accepted = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                if let Ok((stream, _)) = listener.accept() {
                    accepted.push(stream);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
        .unwrap();
    bound_rx.recv_timeout(Duration::from_secs(5)).unwrap();
    // r_t starts far above the server's capacity: every SYN is admitted
    // and the accept queue stays non-empty.
    lab.start_gate(&config(
        "kind = \"tbf\"\nbucket_size = 1000\nrefill_rate = \"measure\"\ninitial_refill_rate = 1000",
        "",
        &lab.path("gate.jsonl"),
    ));
    let stop = Arc::clone(&lab.stop);
    let clients = lab
        .ns
        .spawn("clients", move || {
            // 50 connections per second for 4 s, kept open.
            let mut open = Vec::new();
            let started = Instant::now();
            while started.elapsed() < Duration::from_secs(4) && !stop.load(Ordering::Relaxed) {
                if let Ok(s) = connect(Duration::from_millis(200)) {
                    open.push(s);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            open.len()
        })
        .unwrap();
    let opened = clients.join().unwrap().expect("enter the namespace");
    assert!(opened >= 100, "only {opened} connections");
    let metrics = lab.metrics();
    let rate = sample(&metrics, "vantage_gate_refill_rate");
    let queue = sample(&metrics, "vantage_gate_accept_queue_connections");
    eprintln!("measure: r_t {rate}/s, accept queue {queue}, {opened} connections");
    assert!(queue > 0.0, "{metrics}");
    assert!(
        (10.0..=30.0).contains(&rate),
        "measured r_t {rate}/s for a server accepting 20/s\n{metrics}"
    );
    let log = std::fs::read_to_string(lab.path("gate.jsonl")).unwrap();
    assert!(log.contains("\"saturated\":true"), "{log}");
}

/// The `Cpus_allowed_list` of each of `pid`'s threads named `gate-q…`.
fn verdict_thread_cpus(pid: u32) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).expect("the gate's threads") {
        let task = task.unwrap().path();
        let name = std::fs::read_to_string(task.join("comm")).unwrap_or_default();
        let name = name.trim();
        if !name.starts_with("gate-q") {
            continue;
        }
        let status = std::fs::read_to_string(task.join("status")).unwrap_or_default();
        if let Some(cpus) = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        {
            out.insert(name.to_string(), cpus.trim().to_string());
        }
    }
    out
}

#[test]
fn cpu_fanout_pins_each_queue_to_its_cpus_and_decides_every_syn() {
    if !can_run_as_root("cpu_fanout_pins_each_queue_to_its_cpus_and_decides_every_syn") {
        return;
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut lab = Lab::new("fanout");
    lab.start_echo_server();
    let pid = lab.start_gate(&config(
        "kind = \"tbf\"\nbucket_size = 1000\nrefill_rate = 1000",
        "queue = 0\nqueues = 2\ncpu_fanout = true",
        &lab.path("gate.jsonl"),
    ));
    let rules = lab.iptables_rules();
    let queued = rules
        .lines()
        .find(|l| l.contains("-j NFQUEUE"))
        .unwrap_or_default();
    // iptables-save orders the target's options its own way.
    for option in [
        "--queue-balance 0:1",
        "--queue-cpu-fanout",
        "--queue-bypass",
    ] {
        assert!(queued.contains(option), "{option} missing: {rules}");
    }
    // Thread i runs on the CPUs c with c mod 2 = i (the kernel's fan-out).
    let threads = verdict_thread_cpus(pid);
    assert_eq!(threads.len(), 2, "{threads:?}");
    let expected = |i: usize| {
        (0..cpus)
            .filter(|c| c % 2 == i)
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
    };
    for (i, name) in ["gate-q0", "gate-q1"].iter().enumerate() {
        let list = &threads[*name];
        let expected = expected(i);
        if expected.is_empty() {
            continue; // one CPU: queue 1 gets no SYNs and its thread stays unpinned
        }
        // The kernel may print a range ("0,2" or "0-2:2"); compare single
        // CPUs written out, which is how a stride-2 set of CPUs appears.
        let written: Vec<String> = list.split(',').map(|s| s.to_string()).collect();
        assert_eq!(written, expected, "{name}: {list}");
    }
    // SYNs sent from every CPU are decided, whichever queue they reach.
    let per_cpu = 5;
    let connected: usize = (0..cpus.min(2))
        .map(|cpu| {
            lab.inside(move || {
                vantage_live::gate::pin_current_thread(&[cpu]).expect("pin the client");
                (0..per_cpu)
                    .filter(|_| connect(Duration::from_secs(3)).is_ok())
                    .count()
            })
        })
        .sum();
    assert_eq!(connected, per_cpu * cpus.min(2), "{}", lab.gate_stderr());
    let metrics = lab.metrics();
    assert_eq!(
        syns(&metrics, "accept"),
        (per_cpu * cpus.min(2)) as f64,
        "{metrics}"
    );
}

// ---------------------------------------------------------------------------
// The gate as a daemon: metrics endpoint, descriptors, logs, signals,
// reload, diagnostics, least privilege, contrib files.

/// Sends `request` to the gate's metrics endpoint from inside the
/// namespace; returns what came back before the peer closed (≤ 5 s).
fn raw_metrics_exchange(lab: &Lab, request: &'static str) -> String {
    lab.inside(move || {
        let mut stream =
            TcpStream::connect_timeout(&METRICS.parse().unwrap(), Duration::from_secs(3)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut response = Vec::new();
        let _ = stream.read_to_end(&mut response);
        String::from_utf8_lossy(&response).into_owned()
    })
}

/// Connects to the server through the gate; whether the handshake ended.
fn connects(lab: &Lab) -> bool {
    lab.inside(|| connect(Duration::from_secs(2)).is_ok())
}

fn log_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: `{l}`")))
        .collect()
}

fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_request_body_is_refused_and_the_gate_keeps_deciding() {
    if !can_run_as_root("a_request_body_is_refused_and_the_gate_keeps_deciding") {
        return;
    }
    let mut lab = Lab::new("body");
    lab.start_echo_server();
    lab.start_gate(&config(
        "kind = \"tbf\"\nbucket_size = 1000\nrefill_rate = 1000",
        "",
        &lab.path("gate.jsonl"),
    ));
    let huge = raw_metrics_exchange(
        &lab,
        "GET /metrics HTTP/1.1\r\nHost: gate\r\nContent-Length: 99999999999\r\n\r\n",
    );
    assert!(huge.starts_with("HTTP/1.1 413"), "{huge}");
    let post = raw_metrics_exchange(
        &lab,
        "POST /metrics HTTP/1.1\r\nHost: gate\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    assert!(post.starts_with("HTTP/1.1 405"), "{post}");
    // A connection that declares 1 GB and sends nothing: others are served.
    let stuck = lab.inside(|| {
        let mut s = TcpStream::connect(METRICS).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: gate\r\nContent-Length: 1000000000\r\n\r\n")
            .unwrap();
        s
    });
    let started = Instant::now();
    let text = lab.metrics();
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(
        sample(&text, "vantage_metrics_requests_refused_total") >= 2.0,
        "{text}"
    );
    // The gate still decides SYNs.
    assert!(connects(&lab));
    let text = lab.metrics();
    assert!(syns(&text, "accept") >= 1.0, "{text}");
    drop(stuck);
    lab.signal_gate("-TERM");
    let status = lab.wait_gate(Duration::from_secs(10));
    assert!(status.success(), "{}", lab.gate_stderr());
    assert!(!lab.iptables_rules().contains("VANTAGE-GATE"));
}

#[test]
fn text_format_passes_promtool() {
    if !can_run_as_root("text_format_passes_promtool") {
        return;
    }
    if Command::new("promtool").arg("--version").output().is_err() {
        eprintln!(
            "skipped text_format_passes_promtool: promtool is not installed (Debian `prometheus`)"
        );
        return;
    }
    let mut lab = Lab::new("promtool");
    lab.start_echo_server();
    lab.start_gate(&config(
        "kind = \"abacus\"\nbucket_size = 10\nrefill_rate = \"measure\"\ninitial_refill_rate = 10",
        "",
        &lab.path("gate.jsonl"),
    ));
    assert!(connects(&lab));
    std::thread::sleep(Duration::from_millis(600));
    let response = raw_metrics_exchange(
        &lab,
        "GET /metrics HTTP/1.1\r\nHost: gate\r\nAccept: text/plain\r\nConnection: close\r\n\r\n",
    );
    assert!(
        response.contains("content-type: text/plain; version=0.0.4"),
        "{response}"
    );
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap();
    for line in [
        "# TYPE vantage_gate_syns_total counter",
        "vantage_build_info{version=",
        "process_resident_memory_bytes ",
        "process_open_fds ",
        "process_max_fds ",
        "process_start_time_seconds ",
        "process_cpu_seconds_total ",
    ] {
        assert!(body.contains(line), "missing `{line}` in\n{body}");
    }
    assert!(!body.contains("per_second"), "{body}");
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = promtool.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}\n{body}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn idle_connections_under_a_descriptor_limit_leave_metrics_and_shutdown_working() {
    if !can_run_as_root(
        "idle_connections_under_a_descriptor_limit_leave_metrics_and_shutdown_working",
    ) {
        return;
    }
    let mut lab = Lab::new("fds");
    lab.start_echo_server();
    lab.start_gate_wrapped(
        &config(
            "kind = \"tbf\"\nbucket_size = 1000\nrefill_rate = 1000",
            "",
            &lab.path("gate.jsonl"),
        ),
        &["prlimit", "--nofile=1024:1024", "--"],
    );
    let idle: Vec<TcpStream> = lab.inside(|| {
        (0..600)
            .filter_map(|_| {
                TcpStream::connect_timeout(&METRICS.parse().unwrap(), Duration::from_secs(2)).ok()
            })
            .collect()
    });
    assert!(idle.len() >= 500, "only {} connections opened", idle.len());
    // The verdict path needs no descriptor: SYNs are still decided.
    assert!(connects(&lab));
    drop(idle);
    // Once they are gone the endpoint serves again, refused ones counted.
    let mut text = String::new();
    wait_for(
        "metrics served again",
        Duration::from_secs(10),
        || match lab.inside(|| {
            std::panic::catch_unwind(|| http_get(METRICS.parse().unwrap(), "/metrics")).ok()
        }) {
            Some(t) => {
                text = t;
                true
            }
            None => false,
        },
    );
    assert!(
        sample(&text, "vantage_metrics_connections_refused_total") > 0.0,
        "{text}"
    );
    assert!(sample(&text, "process_max_fds") == 1024.0, "{text}");
    lab.signal_gate("-TERM");
    let status = lab.wait_gate(Duration::from_secs(10));
    assert!(status.success(), "{}", lab.gate_stderr());
    assert!(!lab.iptables_rules().contains("VANTAGE-GATE"));
}

#[test]
fn logs_survive_a_failed_start_and_a_kill_and_reopen_on_sigusr1() {
    if !can_run_as_root("logs_survive_a_failed_start_and_a_kill_and_reopen_on_sigusr1") {
        return;
    }
    let mut lab = Lab::new("logs");
    lab.start_echo_server();
    let log = lab.path("gate.jsonl");
    let gate_config = config(
        "kind = \"tbf\"\nbucket_size = 100\nrefill_rate = 100",
        "",
        &log,
    );
    lab.start_gate(&gate_config);
    wait_for("two log records", Duration::from_secs(5), || {
        log_lines(&log).len() >= 2
    });
    // A second gate on the same queue fails, says why, leaves the log.
    let before = std::fs::read(&log).unwrap();
    let second_config = lab.path("second.toml");
    std::fs::write(&second_config, gate_config.replace(METRICS, "127.0.0.1:0")).unwrap();
    let out = lab
        .ns
        .command(env!("CARGO_BIN_EXE_vantage"))
        .args(["gate", "run", "--config"])
        .arg(&second_config)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("queue 0 is bound by another process"), "{err}");
    let after = std::fs::read(&log).unwrap();
    assert!(
        after.starts_with(&before),
        "the running gate's log was rewritten"
    );
    assert!(!after.contains(&0u8));
    // logrotate: rename, SIGUSR1, a new file.
    let rotated = lab.path("gate.jsonl.1");
    std::fs::rename(&log, &rotated).unwrap();
    lab.signal_gate("-USR1");
    wait_for("a new log after SIGUSR1", Duration::from_secs(5), || {
        !log_lines(&log).is_empty()
    });
    assert!(!log_lines(&rotated).is_empty());
    // SIGKILL leaves rules and the ready file; clean, restart: appended,
    // the stale ready file replaced.
    let written = log_lines(&log).len();
    lab.signal_gate("-KILL");
    lab.wait_gate(Duration::from_secs(5));
    assert!(lab.path("ready").exists());
    let out = lab
        .ns
        .command(env!("CARGO_BIN_EXE_vantage"))
        .args(["gate", "clean"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    lab.start_gate_wrapped(&gate_config, &[]);
    wait_for("records of the new run", Duration::from_secs(5), || {
        log_lines(&log).len() > written
    });
    // The killed run's records stay; the new run's follow, from zero.
    let lines = log_lines(&log);
    assert!(lines[0]["time_s"].as_f64().unwrap() > 0.0);
    assert!(lines[written..].iter().any(|l| l["time_s"] == 0.0));
    assert!(
        lab.gate_stderr().contains("stale ready file"),
        "{}",
        lab.gate_stderr()
    );
    lab.signal_gate("-TERM");
    assert!(lab.wait_gate(Duration::from_secs(10)).success());
}

#[test]
fn a_second_ctrl_c_does_not_abort_the_clean_up() {
    if !can_run_as_root("a_second_ctrl_c_does_not_abort_the_clean_up") {
        return;
    }
    for attempt in 0..3 {
        let mut lab = Lab::new("ctrlc");
        lab.start_gate(&config(
            "kind = \"tbf\"\nbucket_size = 10\nrefill_rate = 10",
            "",
            &lab.path("gate.jsonl"),
        ));
        lab.signal_gate("-INT");
        std::thread::sleep(Duration::from_millis(10 + 5 * attempt));
        lab.signal_gate("-INT");
        let status = lab.wait_gate(Duration::from_secs(10));
        assert!(status.success(), "{}", lab.gate_stderr());
        assert!(!lab.iptables_rules().contains("VANTAGE-GATE"));
        assert!(!lab.path("ready").exists());
    }
}

#[test]
fn sighup_reloads_under_load_with_every_syn_decided_and_refuses_a_bad_file() {
    if !can_run_as_root("sighup_reloads_under_load_with_every_syn_decided_and_refuses_a_bad_file") {
        return;
    }
    let mut lab = Lab::new("reload");
    lab.start_echo_server();
    let log = lab.path("gate.jsonl");
    lab.start_gate(&config(
        "kind = \"tbf\"\nbucket_size = 50\nrefill_rate = 50",
        "",
        &log,
    ));
    const RATE: u64 = 2000;
    let duration = Duration::from_secs(3);
    let stop = Arc::clone(&lab.stop);
    let flood = lab
        .ns
        .spawn("flood", move || {
            let mut flood = SynFlood::open(
                Ipv4Addr::new(127, 0, 0, 2),
                10_000..=60_000,
                SocketAddrV4::new(Ipv4Addr::LOCALHOST, 8080),
            )
            .expect("raw socket");
            flood.run(RATE, duration, &stop)
        })
        .unwrap();
    // Reload twice during the flood: new filter parameters.
    for (i, bucket) in [200, 400].iter().enumerate() {
        std::thread::sleep(Duration::from_millis(800));
        std::fs::write(
            lab.path("gate.toml"),
            config(
                &format!("kind = \"tbf\"\nbucket_size = {bucket}\nrefill_rate = 50"),
                "",
                &log,
            ),
        )
        .unwrap();
        lab.signal_gate("-HUP");
        wait_for("the reload", Duration::from_secs(5), || {
            lab.gate_stderr().matches("configuration reloaded").count() > i
        });
    }
    let report = flood.join().unwrap().expect("enter the namespace");
    std::thread::sleep(Duration::from_millis(300));
    let text = lab.metrics();
    let decided = syns(&text, "accept") + syns(&text, "drop") + syns(&text, "reject");
    let overruns = sample(&text, "vantage_gate_queue_overruns_total");
    assert_eq!(overruns, 0.0, "{text}");
    assert_eq!(
        decided, report.sent as f64,
        "sent {} SYNs, decided {decided}\n{text}",
        report.sent
    );
    assert_eq!(
        sample(&text, "vantage_gate_bucket_size_tokens"),
        400.0,
        "{text}"
    );
    assert_eq!(
        sample(&text, "vantage_gate_reloads_total{result=\"ok\"}"),
        2.0
    );
    // A bad file and a listener change are refused; the gate goes on.
    std::fs::write(lab.path("gate.toml"), "[gate]\nqueue = \"x\"\n").unwrap();
    lab.signal_gate("-HUP");
    wait_for("the refusal", Duration::from_secs(5), || {
        lab.gate_stderr().contains("reload refused")
    });
    assert!(lab.gate.as_mut().unwrap().try_wait().unwrap().is_none());
    let text = lab.metrics();
    assert_eq!(
        sample(&text, "vantage_gate_reloads_total{result=\"refused\"}"),
        1.0
    );
    assert_eq!(
        sample(&text, "vantage_gate_bucket_size_tokens"),
        400.0,
        "{text}"
    );
    assert!(connects(&lab));
    lab.signal_gate("-TERM");
    assert!(lab.wait_gate(Duration::from_secs(10)).success());
}

#[test]
fn sighup_adds_a_listener_under_load_and_no_syn_passes_unfiltered() {
    if !can_run_as_root("sighup_adds_a_listener_under_load_and_no_syn_passes_unfiltered") {
        return;
    }
    let mut lab = Lab::new("reload-listener");
    lab.start_echo_server();
    let log = lab.path("gate.jsonl");
    let filter = "kind = \"tbf\"\nbucket_size = 50\nrefill_rate = 50";
    lab.start_gate(&config(filter, "", &log));
    const RATE: u64 = 2000;
    let flood_to = |lab: &Lab, port: u16, duration: Duration| {
        let stop = Arc::clone(&lab.stop);
        lab.ns
            .spawn("flood", move || {
                let mut flood = SynFlood::open(
                    Ipv4Addr::new(127, 0, 0, 2),
                    10_000..=60_000,
                    SocketAddrV4::new(Ipv4Addr::LOCALHOST, port),
                )
                .expect("raw socket");
                flood.run(RATE, duration, &stop)
            })
            .unwrap()
    };
    // SYNs to the running listener while the rules are replaced.
    let first = flood_to(&lab, 8080, Duration::from_secs(3));
    std::thread::sleep(Duration::from_millis(800));
    std::fs::write(
        lab.path("gate.toml"),
        format!(
            "{}[[listeners]]\naddress = \"127.0.0.1\"\nport = 8081\n",
            config(filter, "", &log)
        ),
    )
    .unwrap();
    lab.signal_gate("-HUP");
    wait_for("the reload", Duration::from_secs(5), || {
        lab.gate_stderr().contains("configuration reloaded")
    });
    // Then SYNs to the new listener: decided too.
    let second = flood_to(&lab, 8081, Duration::from_secs(1));
    let first = first.join().unwrap().expect("enter the namespace");
    let second = second.join().unwrap().expect("enter the namespace");
    std::thread::sleep(Duration::from_millis(300));
    let text = lab.metrics();
    let decided = syns(&text, "accept") + syns(&text, "drop") + syns(&text, "reject");
    let overruns = sample(&text, "vantage_gate_queue_overruns_total");
    let sent = (first.sent + second.sent) as f64;
    assert!(second.sent > 0, "{second:?}");
    assert_eq!(
        decided + overruns,
        sent,
        "sent {sent} SYNs, decided {decided}, overruns {overruns}\n{}\n{text}",
        lab.gate_stderr()
    );
    assert_eq!(
        sample(&text, "vantage_gate_packets_passed_total"),
        0.0,
        "{text}"
    );
    let rules = lab.iptables_rules();
    assert!(rules.contains("--dport 8081 "), "{rules}");
    assert!(!rules.contains("VANTAGE-GATE-q0-next"), "{rules}");
    lab.signal_gate("-TERM");
    assert!(lab.wait_gate(Duration::from_secs(10)).success());
    assert!(!lab.iptables_rules().contains("VANTAGE-GATE"));
}

#[test]
fn an_idle_gate_shows_its_tokens_refilled_at_the_next_scrape() {
    if !can_run_as_root("an_idle_gate_shows_its_tokens_refilled_at_the_next_scrape") {
        return;
    }
    let mut lab = Lab::new("idle-scrape");
    lab.start_echo_server();
    lab.start_gate(&config(
        "kind = \"tbf\"\nbucket_size = 5\nrefill_rate = 2",
        "",
        &lab.path("gate.jsonl"),
    ));
    let connected = lab.inside(|| {
        (0..5)
            .filter(|_| connect(Duration::from_secs(2)).is_ok())
            .count()
    });
    assert_eq!(connected, 5);
    let drained = sample(&lab.metrics(), "vantage_gate_tokens");
    assert!(drained <= 1.0, "{drained}");
    // No SYN since: the scrape itself advances the filter to now.
    std::thread::sleep(Duration::from_secs(2));
    let refilled = sample(&lab.metrics(), "vantage_gate_tokens");
    assert!(refilled >= drained + 3.0, "{drained} → {refilled}");
    lab.signal_gate("-TERM");
    assert!(lab.wait_gate(Duration::from_secs(10)).success());
}

#[test]
fn clean_force_under_a_running_gate_stops_it_with_its_own_exit_status() {
    if !can_run_as_root("clean_force_under_a_running_gate_stops_it_with_its_own_exit_status") {
        return;
    }
    let mut lab = Lab::new("vanish");
    lab.start_echo_server();
    lab.start_gate(&config(
        "kind = \"tbf\"\nbucket_size = 10\nrefill_rate = 10",
        "",
        &lab.path("gate.jsonl"),
    ));
    assert_eq!(sample(&lab.metrics(), "vantage_gate_rules_intact"), 1.0);
    // Without --force, clean refuses: the owner lives.
    let out = lab
        .ns
        .command(env!("CARGO_BIN_EXE_vantage"))
        .args(["gate", "clean"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("rules: ") && err.contains("--force"), "{err}");
    let out = lab
        .ns
        .exec(env!("CARGO_BIN_EXE_vantage"), &["gate", "clean", "--force"])
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("VANTAGE-GATE-q0"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let status = lab.wait_gate(Duration::from_secs(5));
    assert_eq!(status.code(), Some(3), "{}", lab.gate_stderr());
    assert!(
        lab.gate_stderr().contains("rules vanished"),
        "{}",
        lab.gate_stderr()
    );
    assert!(!std::path::Path::new(&lab.path("ready")).exists());
}

#[test]
fn a_second_gate_is_refused_unless_stacking_is_allowed() {
    if !can_run_as_root("a_second_gate_is_refused_unless_stacking_is_allowed") {
        return;
    }
    let mut lab = Lab::new("stacking");
    lab.start_gate(&config(
        "kind = \"tbf\"\nbucket_size = 10\nrefill_rate = 10",
        "",
        &lab.path("gate.jsonl"),
    ));
    let second_config = lab.path("second.toml");
    std::fs::write(
        &second_config,
        config(
            "kind = \"tbf\"\nbucket_size = 10\nrefill_rate = 10",
            "queue = 1",
            &lab.path("second.jsonl"),
        )
        .replace(METRICS, "127.0.0.1:9465"),
    )
    .unwrap();
    let config_arg = second_config.to_str().unwrap().to_string();
    let out = lab
        .ns
        .command(env!("CARGO_BIN_EXE_vantage"))
        .args(["gate", "run", "--config", &config_arg])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("other gates' rules are in this network namespace (chain VANTAGE-GATE-q0)")
            && err.contains("--allow-stacking"),
        "{err}"
    );
    // Its own rules are gone again; the first gate's stay.
    let rules = lab.iptables_rules();
    assert!(!rules.contains("VANTAGE-GATE-q1"), "{rules}");
    assert!(rules.contains("VANTAGE-GATE-q0"), "{rules}");
    let ready = lab.path("second.ready");
    let mut second = lab
        .ns
        .command(env!("CARGO_BIN_EXE_vantage"))
        .args([
            "gate",
            "run",
            "--allow-stacking",
            "--config",
            &config_arg,
            "--ready-file",
        ])
        .arg(&ready)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the second gate", Duration::from_secs(10), || {
        ready.exists()
    });
    assert!(lab.iptables_rules().contains("VANTAGE-GATE-q1"));
    let _ = Command::new("kill")
        .args(["-TERM", &second.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = second.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the second gate did not stop");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success());
    lab.signal_gate("-TERM");
    assert!(lab.wait_gate(Duration::from_secs(10)).success());
}

#[test]
fn metrics_on_port_zero_print_the_chosen_address_and_a_wildcard_warns() {
    if !can_run_as_root("metrics_on_port_zero_print_the_chosen_address_and_a_wildcard_warns") {
        return;
    }
    let mut lab = Lab::new("port0");
    lab.start_gate(
        &config(
            "kind = \"tbf\"\nbucket_size = 10\nrefill_rate = 10",
            "",
            &lab.path("gate.jsonl"),
        )
        .replace(METRICS, "0.0.0.0:0"),
    );
    let err = lab.gate_stderr();
    assert!(err.contains("metrics on http://0.0.0.0:"), "{err}");
    assert!(err.contains("warning: metrics on 0.0.0.0:"), "{err}");
    let port: u16 = err
        .split("metrics on http://0.0.0.0:")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{err}"));
    assert_ne!(port, 0);
    let text = lab.inside(move || http_get(SocketAddr::from(([127, 0, 0, 1], port)), "/metrics"));
    assert!(text.contains("vantage_gate_syns_total"));
}

#[test]
fn an_unprivileged_user_with_cap_net_admin_gates_syns() {
    if !can_run_as_root("an_unprivileged_user_with_cap_net_admin_gates_syns") {
        return;
    }
    if Command::new("setpriv").arg("--version").output().is_err() {
        eprintln!(
            "skipped an_unprivileged_user_with_cap_net_admin_gates_syns: setpriv is not installed"
        );
        return;
    }
    let mut lab = Lab::new("capability");
    // nobody writes the ready file and the log here.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&lab.dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    lab.start_echo_server();
    lab.start_gate_wrapped(
        &config(
            "kind = \"tbf-reject\"\nbucket_size = 1\nrefill_rate = 0.001",
            "",
            &lab.path("gate.jsonl"),
        ),
        &[
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=+net_admin",
            "--ambient-caps=+net_admin",
            "--bounding-set=-all,+net_admin",
        ],
    );
    assert!(connects(&lab));
    assert!(!connects(&lab), "the second SYN was not rejected");
    let text = lab.metrics();
    assert_eq!(syns(&text, "accept"), 1.0, "{text}");
    assert!(syns(&text, "reject") >= 1.0, "{text}");
    lab.signal_gate("-TERM");
    let status = lab.wait_gate(Duration::from_secs(10));
    assert!(status.success(), "{}", lab.gate_stderr());
    assert!(!lab.iptables_rules().contains("VANTAGE-GATE"));
}

#[test]
fn the_systemd_unit_verifies() {
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped the_systemd_unit_verifies: systemd-analyze is not installed");
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let unit = std::fs::read_to_string(root.join("contrib/systemd/vantage-gate.service")).unwrap();
    // Verified against this build's binary (verify checks that it exists).
    let unit = unit.replace("/usr/local/bin/vantage", env!("CARGO_BIN_EXE_vantage"));
    let dir = temp_dir("unit");
    let path = dir.join("vantage-gate.service");
    std::fs::write(&path, unit).unwrap();
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && !err.contains("vantage-gate.service:"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_alert_rules_pass_promtool() {
    if Command::new("promtool").arg("--version").output().is_err() {
        eprintln!("skipped the_alert_rules_pass_promtool: promtool is not installed (Debian `prometheus`)");
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../contrib/prometheus");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yml"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    let out = Command::new("promtool")
        .args(["check", "rules"])
        .args(&files)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let dashboard = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../contrib/grafana/vantage-gate.json"),
    )
    .unwrap();
    let dashboard: Value = serde_json::from_str(&dashboard).unwrap();
    assert!(dashboard["panels"]
        .as_array()
        .is_some_and(|p| !p.is_empty()));
}

#[test]
fn systemd_hears_ready_once_the_rules_are_in_and_stopping_on_the_way_out() {
    if !can_run_as_root("systemd_hears_ready_once_the_rules_are_in_and_stopping_on_the_way_out") {
        return;
    }
    use std::os::unix::net::UnixDatagram;
    let mut lab = Lab::new("notify");
    let socket_path = lab.path("notify.sock");
    let socket = UnixDatagram::bind(&socket_path).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let variable = format!("NOTIFY_SOCKET={}", socket_path.display());
    lab.start_gate_wrapped(
        &config(
            "kind = \"tbf\"\nbucket_size = 10\nrefill_rate = 10",
            "",
            &lab.path("gate.jsonl"),
        ),
        &["env", &variable],
    );
    let mut buffer = [0u8; 256];
    let n = socket.recv(&mut buffer).unwrap();
    assert_eq!(&buffer[..n], b"READY=1");
    // READY=1 comes after the rules.
    assert!(lab.iptables_rules().contains("VANTAGE-GATE-q0"));
    lab.signal_gate("-HUP");
    let n = socket.recv(&mut buffer).unwrap();
    assert_eq!(&buffer[..n], b"RELOADING=1");
    let n = socket.recv(&mut buffer).unwrap();
    assert_eq!(&buffer[..n], b"READY=1");
    lab.signal_gate("-TERM");
    let n = socket.recv(&mut buffer).unwrap();
    assert_eq!(&buffer[..n], b"STOPPING=1");
    assert!(lab.wait_gate(Duration::from_secs(10)).success());
}

/// A child process killed and reaped on drop.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// An instant query to Prometheus's HTTP API (from inside the namespace):
/// the first sample's value, if any.
fn prometheus_query(lab: &Lab, address: &'static str, query: &str, at: f64) -> Option<f64> {
    let path = format!("/api/v1/query?query={}&time={at:.3}", percent_encode(query));
    let body = lab.inside(move || {
        let mut stream = TcpStream::connect(address).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        write!(stream, "GET {path} HTTP/1.0\r\nHost: prometheus\r\n\r\n").ok()?;
        let mut response = String::new();
        stream.read_to_string(&mut response).ok()?;
        response.split_once("\r\n\r\n").map(|(_, b)| b.to_string())
    })?;
    let value: Value = serde_json::from_str(&body).ok()?;
    value["data"]["result"][0]["value"][1]
        .as_str()?
        .parse()
        .ok()
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

#[test]
fn prometheus_scrapes_the_gate_and_its_rate_matches_the_syns_sent() {
    if !can_run_as_root("prometheus_scrapes_the_gate_and_its_rate_matches_the_syns_sent") {
        return;
    }
    if Command::new("prometheus")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped prometheus_scrapes_the_gate_and_its_rate_matches_the_syns_sent: prometheus is not installed (Debian `prometheus`)");
        return;
    }
    const PROMETHEUS: &str = "127.0.0.1:9090";
    let mut lab = Lab::new("prometheus");
    lab.start_echo_server();
    lab.start_gate(&config(
        "kind = \"tbf\"\nbucket_size = 100\nrefill_rate = 100",
        "",
        &lab.path("gate.jsonl"),
    ));
    let prometheus_config = lab.path("prometheus.yml");
    std::fs::write(
        &prometheus_config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: vantage-gate\n    static_configs:\n      - targets: [\"{METRICS}\"]\n"
        ),
    )
    .unwrap();
    let _prometheus = KillOnDrop(
        lab.ns
            .command("prometheus")
            .arg(format!("--config.file={}", prometheus_config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                lab.path("tsdb").display()
            ))
            .arg(format!("--web.listen-address={PROMETHEUS}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(lab.path("prometheus.stderr")).unwrap())
            .spawn()
            .expect("start prometheus"),
    );
    wait_for("the gate scraped", Duration::from_secs(20), || {
        prometheus_query(&lab, PROMETHEUS, "up{job=\"vantage-gate\"}", unix_now()) == Some(1.0)
    });
    const RATE: u64 = 500;
    let duration = Duration::from_secs(6);
    let stop = Arc::clone(&lab.stop);
    let flood = lab
        .ns
        .spawn("flood", move || {
            let mut flood = SynFlood::open(
                Ipv4Addr::new(127, 0, 0, 2),
                10_000..=60_000,
                SocketAddrV4::new(Ipv4Addr::LOCALHOST, 8080),
            )
            .expect("raw socket");
            flood.run(RATE, duration, &stop)
        })
        .unwrap();
    let middle = unix_now() + 4.0;
    let report = flood.join().unwrap().expect("enter the namespace");
    // Two more scrapes after the last SYN.
    std::thread::sleep(Duration::from_millis(2500));
    let decided = "sum(vantage_gate_syns_total{job=\"vantage-gate\"})";
    let total = prometheus_query(&lab, PROMETHEUS, decided, unix_now());
    assert_eq!(total, Some(report.sent as f64), "sent {} SYNs", report.sent);
    let rate = prometheus_query(
        &lab,
        PROMETHEUS,
        "sum(rate(vantage_gate_syns_total{job=\"vantage-gate\"}[3s]))",
        middle,
    )
    .expect("a rate in the middle of the load");
    assert!(
        (rate - RATE as f64).abs() <= RATE as f64 * 0.25,
        "rate() {rate} SYN/s, sent {RATE} SYN/s"
    );
}
