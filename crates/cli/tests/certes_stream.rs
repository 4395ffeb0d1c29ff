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
        let client = ("10.0.1.7", 20_000 + i as u16);
        let server = ("10.0.0.2", 80);
        let t = ORIGIN_NS + i * 100_000_000;
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
