//! Micro-benchmark: read + decode + connection table over a synthetic pcap
//! of many interleaved HTTP-like connections, reported in packets/s (no
//! timing assertion). 100,000 packets by default; for the number quoted in
//! reports run
//!
//! ```sh
//! VANTAGE_TRACE_BENCH_PACKETS=1000000 cargo test --release -p vantage-trace \
//!     --test throughput -- --nocapture
//! ```
//!
//! (`VANTAGE_TRACE_BENCH_SNAPLEN` sets the snap length, 128 by default;
//! 1600 keeps whole packets. `VANTAGE_TRACE_BENCH_KEEP=1` keeps the file,
//! to time other tools on it, e.g. `tcptrace -n -l -r`.)

mod common;

use std::io::{BufWriter, Write};
use std::time::Instant;

use common::*;
use vantage_trace::{summarize_reader, TableConfig, TraceReader};

const CONCURRENT: u64 = 1_000;

/// Packet `step` of connection `index`: handshake, a 300-byte request,
/// seven 1448-byte segments each ACKed, FINs and a last ACK (21 packets).
fn packet(index: u64, step: u64) -> Tcp {
    let client = (
        format!(
            "10.{}.{}.{}",
            (index >> 16) & 0xFF,
            (index >> 8) & 0xFF,
            index & 0xFF
        ),
        40_000 + (index % 20_000) as u16,
    );
    let client = (client.0.as_str(), client.1);
    let server = ("192.0.2.80", 80);
    let (c, s) = (1_000u32, 50_000u32);
    let request_end = c + 1 + 300;
    match step {
        0 => Tcp::new(client, server, c, 0, SYN).options(syn_options(1460, 7, 1)),
        1 => Tcp::new(server, client, s, c + 1, SYN | ACK).options(syn_options(1460, 7, 2)),
        2 => Tcp::new(client, server, c + 1, s + 1, ACK),
        3 => Tcp::new(client, server, c + 1, s + 1, ACK | PSH).payload(300),
        4..=17 => {
            let k = ((step - 4) / 2) as u32;
            if step.is_multiple_of(2) {
                Tcp::new(server, client, s + 1 + k * 1448, request_end, ACK).payload(1448)
            } else {
                Tcp::new(client, server, request_end, s + 1 + (k + 1) * 1448, ACK)
            }
        }
        18 => Tcp::new(server, client, s + 1 + 7 * 1448, request_end, ACK | FIN),
        19 => Tcp::new(client, server, request_end, s + 2 + 7 * 1448, ACK | FIN),
        _ => Tcp::new(server, client, s + 2 + 7 * 1448, request_end + 1, ACK),
    }
}

#[test]
fn read_decode_track_throughput() {
    let packets: u64 = std::env::var("VANTAGE_TRACE_BENCH_PACKETS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(100_000);
    let snap_length: usize = std::env::var("VANTAGE_TRACE_BENCH_SNAPLEN")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(128);
    let directory =
        std::env::temp_dir().join(format!("vantage-trace-bench-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    let path = directory.join("synthetic.pcap");
    let pcap = Pcap {
        snap_length: snap_length as u32,
        ..Pcap::ethernet()
    };
    {
        let mut out = BufWriter::new(std::fs::File::create(&path).unwrap());
        out.write_all(&pcap.header()).unwrap();
        let mut record = Vec::new();
        // Connections start in waves of CONCURRENT, their packets
        // interleaved round-robin, 10 µs apart.
        let mut written = 0u64;
        let mut wave = 0u64;
        'outer: loop {
            for step in 0..21 {
                for slot in 0..CONCURRENT {
                    if written == packets {
                        break 'outer;
                    }
                    let frame = packet(wave * CONCURRENT + slot, step).ethernet();
                    record.clear();
                    pcap.record(
                        &mut record,
                        &Record::new(1_600_000_000_000_000_000 + written * 10_000, frame)
                            .snapped(snap_length),
                    );
                    out.write_all(&record).unwrap();
                    written += 1;
                }
            }
            wave += 1;
        }
    }
    let bytes = std::fs::metadata(&path).unwrap().len();

    for record_segments in [true, false] {
        let config = TableConfig {
            record_segments,
            ..TableConfig::default()
        };
        let started = Instant::now();
        let summary = summarize_reader(TraceReader::open(&path).unwrap(), config).unwrap();
        let seconds = started.elapsed().as_secs_f64();
        assert_eq!(summary.packets, packets);
        assert_eq!(summary.tcp_segments, packets);
        assert_eq!(summary.artefacts.capture_drops, 0);
        eprintln!(
            "{packets} packets ({:.0} MB, snaplen {snap_length}), {} connections, \
             segments recorded: {record_segments}: {seconds:.3} s = {:.2} M packets/s, \
             peak {} connections in the table",
            bytes as f64 / 1e6,
            summary.connections,
            packets as f64 / seconds / 1e6,
            summary.peak_active_connections
        );
    }
    if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
        if let Some(line) = status.lines().find(|line| line.starts_with("VmHWM")) {
            eprintln!(
                "peak resident memory of this test process: {}",
                line[6..].trim()
            );
        }
    }
    if std::env::var_os("VANTAGE_TRACE_BENCH_KEEP").is_some() {
        eprintln!("kept {}", path.display());
    } else {
        std::fs::remove_dir_all(&directory).unwrap();
    }
}
