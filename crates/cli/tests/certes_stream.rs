//! `vantage certes estimate --trace - --jsonl` on a live pipe: each
//! interval's line comes out as soon as the capture's clock closes it,
//! before the capture ends.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;
use vantage_trace::synth::{syn_options, Pcap, Record, Tcp, ACK, FIN, PSH, SYN};

const ORIGIN_NS: u64 = 1_700_000_000_000_000_000;

/// Served connections from `first` (inclusive) to `last` (exclusive),
/// one every 100 ms, each over in 5 ms.
fn connections(pcap: &Pcap, out: &mut Vec<u8>, first: u64, last: u64) {
    for i in first..last {
        connection(pcap, out, "10.0.1.7", i, 0);
    }
}

/// Served connection `i` from `client`, opened at `i` × 100 ms plus
/// `offset_ms`, over in 5 ms.
fn connection(pcap: &Pcap, out: &mut Vec<u8>, client: &'static str, i: u64, offset_ms: u64) {
    {
        let client = (client, 20_000 + i as u16);
        let server = ("10.0.0.2", 80);
        let t = ORIGIN_NS + i * 100_000_000 + offset_ms * 1_000_000;
        let isn = 7000 + i as u32;
        let packets = [
            (
                0,
                Tcp::new(client, server, isn, 0, SYN).options(syn_options(1460, 7, 1)),
            ),
            (
                1,
                Tcp::new(server, client, 9000, isn + 1, SYN | ACK).options(syn_options(1460, 7, 1)),
            ),
            (2, Tcp::new(client, server, isn + 1, 9001, ACK)),
            (
                3,
                Tcp::new(server, client, 9001, isn + 1, PSH | ACK).payload(200),
            ),
            (4, Tcp::new(server, client, 9201, isn + 1, FIN | ACK)),
            (5, Tcp::new(client, server, isn + 1, 9202, FIN | ACK)),
        ];
        for (ms, tcp) in packets {
            pcap.record(out, &Record::new(t + ms * 1_000_000, tcp.ethernet()));
        }
    }
}

#[test]
fn certes_estimate_on_a_pipe_prints_intervals_before_the_capture_ends() {
    let pcap = Pcap {
        nanosecond: true,
        ..Pcap::ethernet()
    };
    // 6 s of connections, then 6 s more.
    let mut first_part = pcap.header();
    connections(&pcap, &mut first_part, 0, 60);
    let mut second_part = Vec::new();
    connections(&pcap, &mut second_part, 60, 120);

    let mut child = Command::new(env!("CARGO_BIN_EXE_vantage"))
        .args([
            "certes", "estimate", "--trace", "-", "--server", ":80", "--jsonl",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the vantage binary runs");
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (lines, received) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });

    stdin.write_all(&first_part).unwrap();
    stdin.flush().unwrap();
    // The first interval's line, while standard input is still open.
    let first = received.recv_timeout(Duration::from_secs(60));
    let first = match first {
        Ok(line) => line,
        Err(error) => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("no interval line before the end of the capture: {error}");
        }
    };
    let row: Value = serde_json::from_str(&first).unwrap();
    assert_eq!(row["t_start_s"], 0.0, "{first}");
    // Connections at 0, 100 and 200 ms.
    assert_eq!(row["accepted"], 3, "{first}");

    stdin.write_all(&second_part).unwrap();
    drop(stdin);
    let status = child.wait().unwrap();
    reader.join().unwrap();
    let mut rest: Vec<String> = received.try_iter().collect();
    rest.insert(0, first);
    assert!(status.success(), "{status}");
    let summary: Value = serde_json::from_str(rest.last().unwrap()).unwrap();
    let summary = &summary["summary"];
    assert_eq!(summary["accepted"], 120, "{summary}");
    assert_eq!(summary["completed"], 120, "{summary}");
    assert_eq!(summary["exact"]["completed"], 120, "{summary}");
    // One line per 250 ms interval through the last packet, then the summary.
    assert_eq!(
        rest.len() - 1,
        summary["intervals"].as_u64().unwrap() as usize
    );
    assert!(summary["trace"].get("late_counts").is_none(), "{summary}");
}

/// Split by class, class B's first connection opens 3 s in, after the
/// lines of the first twelve intervals were printed: its lines start at
/// its first interval, as the whole-capture run's rows do, and the
/// summary names that interval.
#[test]
fn a_class_that_starts_late_has_the_same_lines_streamed_and_whole() {
    let pcap = Pcap {
        nanosecond: true,
        ..Pcap::ethernet()
    };
    let mut capture = pcap.header();
    for i in 0..60 {
        connection(&pcap, &mut capture, "10.0.1.7", i, 0);
        if i >= 30 {
            connection(&pcap, &mut capture, "10.0.2.9", i, 50);
        }
    }
    let path = std::env::temp_dir().join(format!(
        "vantage-certes-late-class-{}.pcap",
        std::process::id()
    ));
    std::fs::write(&path, &capture).unwrap();
    let run = |format: &str| {
        let output = Command::new(env!("CARGO_BIN_EXE_vantage"))
            .args(["certes", "estimate", "--trace"])
            .arg(&path)
            .args(["--server", ":80", "--by", "source-prefix/24", format])
            .output()
            .expect("the vantage binary runs");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    };
    let streamed = run("--jsonl");
    let whole: Value = serde_json::from_str(&run("--json")).unwrap();
    std::fs::remove_file(&path).unwrap();

    let mut lines: Vec<Value> = streamed
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let summary = lines.pop().unwrap()["summary"].clone();
    let rows = whole["intervals"].as_array().unwrap();
    assert_eq!(&lines, rows, "streamed lines and whole-capture rows");
    let first_of = |class: &str| {
        lines
            .iter()
            .find(|row| row["class"] == class)
            .map(|row| row["t_start_s"].as_f64().unwrap())
    };
    assert_eq!(first_of("10.0.1.0/24"), Some(0.0));
    assert_eq!(first_of("10.0.2.0/24"), Some(3.0));
    // 24 intervals of A (0–6 s), 12 of B (3–6 s).
    assert_eq!(summary["intervals"], 24, "{summary}");
    assert_eq!(lines.len(), 24 + 12);
    for summary in [&summary, &whole["summary"]] {
        let classes = summary["classes"].as_array().unwrap();
        let first: Vec<(&Value, &Value, &Value)> = classes
            .iter()
            .map(|c| (&c["class"], &c["first_interval"], &c["accepted"]))
            .collect();
        assert_eq!(
            first,
            [
                (
                    &Value::from("10.0.1.0/24"),
                    &Value::from(0),
                    &Value::from(60)
                ),
                (
                    &Value::from("10.0.2.0/24"),
                    &Value::from(12),
                    &Value::from(30)
                ),
            ],
            "{summary}"
        );
    }
}
