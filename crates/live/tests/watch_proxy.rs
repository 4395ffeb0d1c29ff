//! The watch daemon fed only from a `vantage proxy`'s Certes stream: no
//! capture, no capability, no root. The stream is written with the
//! counters format's own writer; the daemon's estimate must be the one the
//! estimator gives for the same rows, its metrics must pass `promtool check
//! metrics` (when installed), and the bad lines must be counted.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use vantage_core::certes::ingest::{counters_jsonl_line, CountersRow};
use vantage_core::certes::summary::{ClassInterval, RunningEstimate};
use vantage_core::certes::{Certes, IntervalCounters};
use vantage_core::Nanos;
use vantage_live::daemon::Signals;
use vantage_live::watch::{self, RunOptions, WatchConfig};

/// A boundary of the 250 ms grid, UNIX seconds.
const ORIGIN_S: f64 = 1_764_000_000.0;
const ROWS: u64 = 8;

struct Dir(PathBuf);
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn counters(i: u64) -> IntervalCounters {
    IntervalCounters {
        // Two SYNs dropped in the third interval: the clients' retries
        // come back a second later (linux-6.5).
        dropped: if i == 2 { 2 } else { 0 },
        accepted: 4,
        completed: 4,
        syn_to_end_sum: Nanos::from_millis(4 * (150 + 10 * i)),
        rtt_sum: Nanos::from_micros(4 * 300),
        ..IntervalCounters::default()
    }
}

fn row(i: u64, interval_ms: u64) -> String {
    counters_jsonl_line(&CountersRow {
        t_start_s: ORIGIN_S + 0.25 * i as f64,
        interval: Nanos::from_millis(interval_ms),
        class: String::new(),
        counters: counters(i),
    }) + "\n"
}

fn scrape(address: &str) -> String {
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    let _ = stream.read_to_string(&mut text);
    text.split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default()
}

fn sample(metrics: &str, name: &str) -> Option<f64> {
    metrics.lines().find_map(|l| {
        l.strip_prefix(name)
            .filter(|rest| rest.starts_with(' '))
            .and_then(|v| v.trim().parse().ok())
    })
}

/// A daemon run on a thread from `text`, stopped when the guard drops;
/// returns once its metrics endpoint answers.
struct Running {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    daemon: Option<std::thread::JoinHandle<Result<watch::RunSummary, watch::WatchError>>>,
}

impl Running {
    fn start(text: &str, metrics_address: &str) -> Running {
        let config = WatchConfig::from_toml(text, "test.toml").unwrap();
        assert!(!config.captures());
        let signals = Signals::new();
        let stop = signals.stop.clone();
        let daemon = std::thread::spawn(move || {
            let options = RunOptions {
                ready_file: None,
                signals,
                config_path: None,
            };
            watch::run(&config, &options)
        });
        let deadline = Instant::now() + Duration::from_secs(5);
        while TcpStream::connect(metrics_address).is_err() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        Running {
            stop,
            daemon: Some(daemon),
        }
    }

    /// Stops the daemon; its summary.
    fn finish(mut self) -> watch::RunSummary {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.daemon.take().unwrap().join().unwrap().unwrap()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Scrapes until `name` reads `value` (at most 5 s); the last scrape.
fn wait_for(metrics_address: &str, name: &str, value: f64) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let metrics = scrape(metrics_address);
        if sample(&metrics, name) == Some(value) || Instant::now() >= deadline {
            return metrics;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until the daemon has looked for `path` and found no file, so that
/// a file made after this is read from its start (one that exists at the
/// first look is followed from its end, as `tail -F` does).
fn wait_until_waiting_for(metrics_address: &str, input: &str, path: &std::path::Path) {
    let name = format!(
        "vantage_certes_{input}_log_waiting{{log=\"{}\"}}",
        path.display()
    );
    let metrics = wait_for(metrics_address, &name, 1.0);
    assert_eq!(sample(&metrics, &name), Some(1.0), "{metrics}");
}

/// A free address for the daemon's metrics.
fn free_address() -> String {
    let probe = TcpListener::bind("127.0.0.1:0").unwrap();
    probe.local_addr().unwrap().to_string()
}

#[test]
fn the_proxy_stream_alone_gives_the_estimate() {
    let dir = Dir(std::env::temp_dir().join(format!("vantage-watch-proxy-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let stream = dir.0.join("proxy-certes.jsonl");
    let jsonl = dir.0.join("watch.jsonl");
    let metrics_address = free_address();
    let text = format!(
        "interval = \"250ms\"\nprofile = \"linux-6.5\"\nmetrics_listen = \"{metrics_address}\"\njsonl = \"{}\"\n[proxy]\nlog = \"{}\"\n",
        jsonl.display(),
        stream.display()
    );
    let daemon = Running::start(&text, &metrics_address);
    wait_until_waiting_for(&metrics_address, "proxy", &stream);

    // The stream appears after the daemon looked for it: read from its
    // start.
    let mut file = std::fs::File::create(&stream).unwrap();
    for i in 0..ROWS {
        file.write_all(row(i, 250).as_bytes()).unwrap();
        if i == 3 {
            // Bad lines between good ones: counted, not used.
            file.write_all(row(20, 500).as_bytes()).unwrap();
            file.write_all(b"{\"t_start_s\": 1, \"nonsense\": 2}\n")
                .unwrap();
            file.write_all(row(1, 250).as_bytes()).unwrap();
        }
    }
    file.flush().unwrap();

    let read = "vantage_certes_proxy_log_lines_total{outcome=\"read\"}";
    let mut metrics = String::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        metrics = scrape(&metrics_address);
        if sample(&metrics, read) == Some(ROWS as f64) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(sample(&metrics, read), Some(ROWS as f64), "{metrics}");
    for outcome in ["wrong_interval", "invalid", "out_of_order"] {
        let name = format!("vantage_certes_proxy_log_lines_total{{outcome=\"{outcome}\"}}");
        assert_eq!(sample(&metrics, &name), Some(1.0), "{outcome}: {metrics}");
    }
    let series = |family: &str| {
        sample(
            &metrics,
            &format!("{family}{{class=\"all\",source=\"proxy\"}}"),
        )
    };
    assert_eq!(series("vantage_certes_syns_accepted_total"), Some(32.0));
    assert_eq!(series("vantage_certes_syns_dropped_total"), Some(2.0));
    assert_eq!(series("vantage_certes_completed_total"), Some(32.0));
    assert_eq!(
        sample(&metrics, "vantage_certes_proxy_intervals_total"),
        Some(ROWS as f64)
    );
    let waiting = format!(
        "vantage_certes_proxy_log_waiting{{log=\"{}\"}}",
        stream.display()
    );
    assert_eq!(sample(&metrics, &waiting), Some(0.0), "{metrics}");

    // The same rows through the estimator `certes estimate --counters`
    // runs: the daemon's last interval is its last interval.
    let certes = Certes::new(WatchConfig::from_toml(&text, "t").unwrap().model).unwrap();
    let mut run = RunningEstimate::new(&certes, Nanos::from_secs(21), false, 0.0);
    let mut expected = Vec::new();
    for i in 0..ROWS {
        let c = counters(i);
        let given = [ClassInterval {
            class: "",
            counters: &c,
            exact: None,
        }];
        run.interval(&given, |row| {
            expected.push(row);
            Ok::<(), ()>(())
        })
        .unwrap();
    }
    let last = expected.last().unwrap();
    let mean = series("vantage_certes_interval_mean_seconds").unwrap();
    assert!(
        (mean - last.estimate_mean_s.unwrap()).abs() < 1e-9,
        "{mean} vs {last:?}"
    );
    let syn_to_end = series("vantage_certes_interval_syn_to_end_mean_seconds").unwrap();
    assert!((syn_to_end - 0.22).abs() < 1e-9, "{syn_to_end}");
    // The drops show: some interval's estimate is above its SYN-to-END
    // by the retry's second.
    assert!(expected
        .iter()
        .any(|r| r.estimate_mean_s.unwrap() > r.syn_to_end_mean_s.unwrap() + 0.1));

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

    let summary = daemon.finish();
    assert_eq!(summary.proxy_intervals, ROWS);
    assert_eq!(summary.packets, 0);

    // One JSON line per row, `source` proxy, the estimator's fields.
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&jsonl)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), ROWS as usize);
    for (i, (line, row)) in lines.iter().zip(&expected).enumerate() {
        assert_eq!(line["source"], "proxy");
        assert_eq!(line["t_start_unix_s"], ORIGIN_S + 0.25 * i as f64);
        assert_eq!(line["accepted"], 4);
        assert_eq!(
            line["estimate_mean_s"],
            serde_json::json!(row.estimate_mean_s)
        );
    }
}

/// A `vantage gate` log record of the interval `i` of the grid, its own
/// grid 100 ms after the stream's.
fn gate_record(i: u64, accepted: u64, dropped: u64, rejected: u64) -> String {
    use vantage_core::admission::syn::record::{GateCounts, IntervalRecord};
    use vantage_core::admission::syn::FilterSnapshot;
    let start = ORIGIN_S + 0.25 * i as f64 + 0.1;
    serde_json::to_string(&IntervalRecord {
        time_s: start - ORIGIN_S,
        t_start_unix_s: Some(start),
        interval_s: 0.25,
        elapsed_s: 0.25,
        arrivals: accepted + dropped + rejected,
        counts: GateCounts {
            accepted,
            dropped,
            rejected,
            ..GateCounts::default()
        },
        dry_run: false,
        filter: FilterSnapshot::default(),
        capacity: None,
    })
    .unwrap()
        + "\n"
}

/// A gate in front of the proxy: the SYNs it dropped never reach the
/// kernel, so the proxy's stream misses them; the daemon adds them (and
/// the SYNs it refused, as answered) to the proxy's rows, with no capture.
#[test]
fn a_gate_in_front_of_the_proxy_adds_its_drops_to_the_proxy_stream() {
    let dir =
        Dir(std::env::temp_dir().join(format!("vantage-watch-proxy-gate-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let stream = dir.0.join("proxy-certes.jsonl");
    let gate_log = dir.0.join("gate.jsonl");
    let jsonl = dir.0.join("watch.jsonl");
    let metrics_address = free_address();
    let text = format!(
        "interval = \"250ms\"\nprofile = \"linux-6.5\"\nmetrics_listen = \"{metrics_address}\"\njsonl = \"{}\"\n[gate]\nlog = \"{}\"\n[proxy]\nlog = \"{}\"\n",
        jsonl.display(),
        gate_log.display(),
        stream.display()
    );
    let daemon = Running::start(&text, &metrics_address);
    wait_until_waiting_for(&metrics_address, "gate", &gate_log);
    wait_until_waiting_for(&metrics_address, "proxy", &stream);
    let wait_for = |name: &str, value: f64| wait_for(&metrics_address, name, value);

    // The gate's log covers every interval but the last; it drops 3 SYNs
    // in the second and refuses 1 in the fifth. It is read first, as it
    // is written first when the gate runs in front.
    let mut gate_text = String::new();
    for i in 0..ROWS - 1 {
        let (dropped, rejected) = match i {
            1 => (3, 0),
            4 => (0, 1),
            _ => (0, 0),
        };
        gate_text += &gate_record(i, 4, dropped, rejected);
    }
    std::fs::write(&gate_log, gate_text).unwrap();
    let gate_read = "vantage_certes_gate_log_lines_total{outcome=\"read\"}";
    let metrics = wait_for(gate_read, (ROWS - 1) as f64);
    assert_eq!(
        sample(&metrics, gate_read),
        Some((ROWS - 1) as f64),
        "{metrics}"
    );
    let mut rows = String::new();
    for i in 0..ROWS {
        rows += &row(i, 250);
    }
    std::fs::write(&stream, rows).unwrap();
    let metrics = wait_for("vantage_certes_proxy_intervals_total", ROWS as f64);
    let series = |family: &str| {
        sample(
            &metrics,
            &format!("{family}{{class=\"all\",source=\"proxy\"}}"),
        )
    };
    // The proxy's own 2 drops (the kernel's) and the gate's 3; its 32
    // accepted, and the gate's 1 refusal counted apart (REFUSED).
    assert_eq!(series("vantage_certes_syns_dropped_total"), Some(5.0));
    assert_eq!(series("vantage_certes_syns_accepted_total"), Some(32.0));
    assert_eq!(series("vantage_certes_syns_refused_total"), Some(1.0));
    assert_eq!(series("vantage_certes_completed_total"), Some(32.0));
    for (coverage, count) in [("covered", ROWS - 1), ("not_covered", 1)] {
        let name = format!("vantage_certes_proxy_gate_intervals_total{{coverage=\"{coverage}\"}}");
        assert_eq!(sample(&metrics, &name), Some(count as f64), "{metrics}");
    }

    let summary = daemon.finish();
    assert_eq!(summary.proxy_intervals, ROWS);
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&jsonl)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), ROWS as usize);
    assert_eq!(lines[1]["gate"]["dropped"], 3);
    assert_eq!(lines[1]["dropped"], 3);
    assert_eq!(lines[2]["dropped"], 2);
    // The fifth interval's refusal is REFUSED, not ACCEPTED.
    assert_eq!(
        (lines[4]["accepted"].clone(), lines[4]["refused"].clone()),
        (4.into(), 1.into())
    );
    assert_eq!(lines[7]["gate"]["covered"], false);
    assert_eq!(lines[7]["gate"]["dropped"], serde_json::Value::Null);
}
