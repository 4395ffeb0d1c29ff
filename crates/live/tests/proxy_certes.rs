//! The proxy's `[certes]` stream over loopback: the rows `certes estimate
//! --counters` reads, with the connections the test made.

mod proxy_common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use proxy_common::*;
use vantage_core::certes::ingest::{parse_counters_line, read_counters, CountersFormat};
use vantage_core::Nanos;
use vantage_live::proxy::Proxy;

fn temporary(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!(
        "vantage-proxy-certes-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&path);
    path
}

/// Σ over the rows written so far: (accepted, completed, SYN-to-END, RTT).
fn totals(path: &PathBuf) -> (u64, u64, Nanos, Nanos) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut sums = (0, 0, Nanos::ZERO, Nanos::ZERO);
    for (index, line) in text.lines().enumerate() {
        let row = parse_counters_line(
            line,
            "certes.jsonl",
            index as u64 + 1,
            Nanos::from_millis(100),
        )
        .unwrap();
        sums.0 += row.counters.accepted;
        sums.1 += row.counters.completed;
        sums.2 = Nanos(sums.2 .0 + row.counters.syn_to_end_sum.0);
        sums.3 = Nanos(sums.3 .0 + row.counters.rtt_sum.0);
    }
    sums
}

#[test]
fn the_certes_log_counts_each_connection_and_its_syn_to_end() {
    let backend = Backend::start("a");
    let log = temporary("certes.jsonl");
    let proxy = Proxy::start(config(
        &[backend.address],
        &format!(
            "[utilization]\nconcurrency = 4\n[certes]\nlog = \"{}\"\ninterval_ms = 100\n",
            log.display()
        ),
    ))
    .unwrap();

    // Three quick requests, each on a connection of its own, and one whose
    // client waits 300 ms before it sends: each measured from the moment
    // its connection was established to its response's last byte.
    let mut durations = Vec::new();
    for _ in 0..3 {
        let mut client = connect(proxy.address());
        let established = Instant::now();
        let reply = exchange(
            &mut client,
            b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        )
        .unwrap();
        assert_eq!(reply.status, 200);
        durations.push(established.elapsed());
        assert!(closed(&mut client));
    }
    let mut client = connect(proxy.address());
    let established = Instant::now();
    std::thread::sleep(Duration::from_millis(300));
    let reply = exchange(
        &mut client,
        b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    assert_eq!(reply.status, 200);
    durations.push(established.elapsed());
    assert!(closed(&mut client));
    drop(client);

    assert!(
        eventually(|| totals(&log).1 >= 4),
        "four completions written: {:?}",
        totals(&log)
    );
    let (accepted, completed, syn_to_end, rtt) = totals(&log);
    assert_eq!((accepted, completed), (4, 4));
    let measured: Duration = durations.iter().sum();
    eprintln!(
        "Σ SYN-to-END {:.6} s, Σ client durations {:.6} s, Σ RTT {:?}",
        syn_to_end.as_secs_f64(),
        measured.as_secs_f64(),
        rtt
    );
    // The slow client's 300 ms before its request lie wholly between its
    // SYN and its END.
    assert!(
        syn_to_end >= Nanos::from_millis(300),
        "SYN-to-END {} s",
        syn_to_end.as_secs_f64()
    );
    // Each connection's SYN-to-END is its client's duration within what
    // the proxy cannot see: the SYN placed up to a jiffy (≤ 10 ms) late,
    // the END (the proxy's close) before the client has read the last
    // bytes.
    assert!(
        (syn_to_end.as_secs_f64() - measured.as_secs_f64()).abs() < 4.0 * 0.010,
        "SYN-to-END {} s, the requests' {} s",
        syn_to_end.as_secs_f64(),
        measured.as_secs_f64()
    );
    // Loopback handshakes: an RTT each, well below a millisecond.
    assert!(rtt > Nanos::ZERO && rtt < Nanos::from_millis(40), "{rtt:?}");

    proxy.shutdown(Duration::from_secs(1));
    // The file `certes estimate --counters` reads: every row on the grid
    // of 100 ms intervals, the same counts.
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.lines().count() >= 4, "{text}");
    let input = read_counters(
        text.as_bytes(),
        "certes.jsonl",
        CountersFormat::Jsonl,
        false,
        Nanos::from_millis(100),
    )
    .unwrap();
    let class = &input.classes[0];
    let read: (u64, u64) = class
        .counters
        .iter()
        .fold((0, 0), |(a, c), (_, i)| (a + i.accepted, c + i.completed));
    assert_eq!(read, (4, 4));
    assert!(input.t0_s > 1e9, "UNIX time: {}", input.t0_s);
    // On the grid, as written: k × 0.1 s.
    for line in text.lines() {
        let row = parse_counters_line(line, "certes.jsonl", 1, Nanos::from_millis(100)).unwrap();
        let tenths = (row.t_start_s * 10.0).round() as u64;
        assert_eq!(
            row.t_start_s,
            Nanos(tenths * 100_000_000).as_secs_f64_exact(),
            "{line}"
        );
    }
    // Read with another interval: refused, naming both.
    let error = read_counters(
        text.as_bytes(),
        "certes.jsonl",
        CountersFormat::Jsonl,
        false,
        Nanos::from_millis(250),
    )
    .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("0.1 s intervals but the interval here is 250 ms"),
        "{error}"
    );
    let _ = std::fs::remove_file(&log);
}
