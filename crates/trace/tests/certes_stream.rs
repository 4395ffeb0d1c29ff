//! Certes over a capture in one pass: a million connection attempts are
//! bucketed as they finish, and the observations held at any time stay
//! within the connection table's cap (the whole-capture reader held one
//! per attempt until the end).

use std::io::Read;

use vantage_core::certes::CertesConfig;
use vantage_core::tcp::ClientMix;
use vantage_core::Nanos;
use vantage_trace::certes::{CaptureStream, MAX_UNCONFIRMED_CONNECTIONS};
use vantage_trace::connection::TableConfig;
use vantage_trace::synth::{syn_options, Pcap, Record, Tcp, ACK, FIN, PSH, SYN};
use vantage_trace::TraceReader;

const ORIGIN_NS: u64 = 1_700_000_000_000_000_000;

/// A pcap made packet by packet as it is read: `attempts` connection
/// attempts 1 ms apart from distinct client ports; every tenth is
/// answered, served and closed, the others are SYNs nobody answers.
struct Attempts {
    attempts: u64,
    /// No attempt before this one is answered.
    answered_from: u64,
    next: u64,
    pcap: Pcap,
    buffer: Vec<u8>,
    position: usize,
}

impl Attempts {
    fn new(attempts: u64, answered_from: u64) -> Attempts {
        let pcap = Pcap {
            nanosecond: true,
            ..Pcap::ethernet()
        };
        let buffer = pcap.header();
        Attempts {
            attempts,
            answered_from,
            next: 0,
            pcap,
            buffer,
            position: 0,
        }
    }

    fn refill(&mut self) {
        self.buffer.clear();
        self.position = 0;
        let i = self.next;
        self.next += 1;
        let client_ip = format!("10.1.{}.{}", i / 60_000 / 250, i / 60_000 % 250 + 1);
        let client = (client_ip.as_str(), 1024 + (i % 60_000) as u16);
        let server = ("10.0.0.2", 80);
        let t = ORIGIN_NS + i * 1_000_000;
        let isn = 1000 + i as u32;
        let mut packets = vec![(
            t,
            Tcp::new(client, server, isn, 0, SYN).options(syn_options(1460, 7, 1)),
        )];
        if i.is_multiple_of(10) && i >= self.answered_from {
            packets.extend([
                (
                    t + 100_000,
                    Tcp::new(server, client, 5000, isn + 1, SYN | ACK)
                        .options(syn_options(1460, 7, 1)),
                ),
                (t + 200_000, Tcp::new(client, server, isn + 1, 5001, ACK)),
                (
                    t + 300_000,
                    Tcp::new(server, client, 5001, isn + 1, PSH | ACK).payload(100),
                ),
                (
                    t + 400_000,
                    Tcp::new(server, client, 5101, isn + 1, FIN | ACK),
                ),
                (
                    t + 500_000,
                    Tcp::new(client, server, isn + 1, 5102, FIN | ACK),
                ),
            ]);
        }
        for (time, tcp) in packets {
            self.pcap
                .record(&mut self.buffer, &Record::new(time, tcp.ethernet()));
        }
    }
}

impl Read for Attempts {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.position == self.buffer.len() {
            if self.next == self.attempts {
                return Ok(0);
            }
            self.refill();
        }
        let n = out.len().min(self.buffer.len() - self.position);
        out[..n].copy_from_slice(&self.buffer[self.position..self.position + n]);
        self.position += n;
        Ok(n)
    }
}

#[test]
fn certes_capture_of_a_million_attempts_holds_observations_within_the_cap() {
    let attempts = 1_000_000u64;
    let reader = TraceReader::from_reader("attempts", Attempts::new(attempts, 0)).unwrap();
    let model = CertesConfig::new(
        Nanos::from_secs(1),
        ClientMix::builtin("linux-6.5").unwrap(),
        Nanos::from_secs(21),
    );
    let mut capture =
        CaptureStream::from_reader("attempts".into(), reader, None, None, &model).unwrap();
    let cap = TableConfig::default().max_connections;
    let mut most_open = 0;
    while capture.read_packet().unwrap() {
        most_open = most_open.max(capture.open_connections());
    }
    let most_retained = capture.most_retained();
    let input = capture.into_input().unwrap();
    // Held at once: the table's connections (at its cap: the unanswered
    // SYNs wait for its idle timeout) and the observations waiting for the
    // clock or for their listener — far below one per attempt.
    assert!(most_open <= cap, "{most_open}");
    assert!(most_retained <= cap, "{most_retained}");
    assert!(most_retained <= MAX_UNCONFIRMED_CONNECTIONS);
    let class = &input.classes[0];
    let dropped: u64 = class.counters.iter().map(|(_, c)| c.dropped).sum();
    let completed: u64 = class.counters.iter().map(|(_, c)| c.completed).sum();
    assert_eq!(dropped, attempts * 9 / 10);
    assert_eq!(completed, attempts / 10);
    let exact = class.exact.as_ref().unwrap();
    assert_eq!(exact.completed, attempts / 10);
    // Every unanswered client gave up 21 s after its SYN, except those
    // whose 21 s had not passed when the capture stopped.
    assert_eq!(exact.gave_up + exact.unresolved, attempts * 9 / 10);
    assert!(exact.unresolved > 0 && exact.unresolved < 21_000);
    let notes = input.capture_notes.as_ref().unwrap();
    assert_eq!(notes.connections, attempts);
    assert!(notes.connections_evicted > 0);
    assert_eq!(notes.connections_not_kept, 0);
}

/// No listener named, and the listener answers nothing for its first
/// 300,000 attempts: the connections kept until it is seen answering stop
/// at their cap, and those beyond it are reported, not silently lost.
#[test]
fn certes_capture_keeps_connections_to_an_unconfirmed_responder_within_a_cap() {
    let attempts = 400_000u64;
    let reader =
        TraceReader::from_reader("late listener", Attempts::new(attempts, 300_000)).unwrap();
    let model = CertesConfig::new(
        Nanos::from_secs(1),
        ClientMix::builtin("linux-6.5").unwrap(),
        Nanos::from_secs(21),
    );
    let mut capture =
        CaptureStream::from_reader("late listener".into(), reader, None, None, &model).unwrap();
    while capture.read_packet().unwrap() {}
    assert_eq!(capture.most_retained(), MAX_UNCONFIRMED_CONNECTIONS);
    let input = capture.into_input().unwrap();
    let notes = input.capture_notes.as_ref().unwrap();
    assert!(notes.connections_not_kept > 0);
    assert_eq!(notes.connections + notes.connections_not_kept, attempts);
    assert_eq!(notes.connections_to_other_servers, 0);
    let dropped: u64 = input.classes[0]
        .counters
        .iter()
        .map(|(_, c)| c.dropped)
        .sum();
    let accepted: u64 = input.classes[0]
        .counters
        .iter()
        .map(|(_, c)| c.accepted)
        .sum();
    assert_eq!(dropped + accepted, notes.connections);
    assert_eq!(accepted, 10_000);
}
