//! Certes measurements from server-side captures (`vantage_trace::handshake`):
//! scripted exchanges written as pcap files pin every outcome — retried and
//! answered SYNs, never-answered connections, refusals, resets, half-closes,
//! dropped handshake ACKs, lost SYN-ACKs, port reuse — and the exact
//! client-perceived time computed from them; the real traces of
//! `../shared/traces/` are read without a panic and give consistent
//! observations.

mod common;

use common::*;
use vantage_core::certes::observed::{bucket, exact, ExactConfig, ExactOutcome, ObservedError};
use vantage_core::tcp::ClientMix;
use vantage_core::Nanos;
use vantage_trace::handshake::{read_handshakes, ClassBy, HandshakeConfig, ServerFilter};
use vantage_trace::FinishCause;

const SERVER: (&str, u16) = ("10.0.0.2", 80);
/// Capture times start here (ns since the epoch, a whole second).
const ORIGIN: u64 = 1_700_000_000_000_000_000;
const SERVER_ISN: u32 = 50_000;

fn ms(millis: f64) -> u64 {
    ORIGIN + (millis * 1e6).round() as u64
}

fn at(millis: f64) -> Nanos {
    Nanos(ms(millis))
}

/// A client on its own port.
struct Client {
    endpoint: (&'static str, u16),
    isn: u32,
}

impl Client {
    fn new(port: u16, isn: u32) -> Client {
        Client {
            endpoint: ("10.0.1.7", port),
            isn,
        }
    }

    fn syn(&self) -> Tcp {
        Tcp::new(self.endpoint, SERVER, self.isn, 0, SYN).options(syn_options(1460, 7, 1))
    }

    fn synack(&self) -> Tcp {
        Tcp::new(SERVER, self.endpoint, SERVER_ISN, self.isn + 1, SYN | ACK)
            .options(syn_options(1460, 7, 2))
    }

    /// Client segment after the handshake: `sent` request bytes before it.
    fn ack(&self, sent: u32, received: u32, flags: u16) -> Tcp {
        Tcp::new(
            self.endpoint,
            SERVER,
            self.isn + 1 + sent,
            SERVER_ISN + 1 + received,
            ACK | flags,
        )
        .ip_id(2 + sent as u16 + received as u16)
    }

    /// Server segment: `sent` response bytes before it.
    fn data(&self, sent: u32, len: usize, flags: u16) -> Tcp {
        Tcp::new(
            SERVER,
            self.endpoint,
            SERVER_ISN + 1 + sent,
            self.isn + 101,
            ACK | flags,
        )
        .payload(len)
        .ip_id(100 + sent as u16)
    }
}

/// Writes `(time in ms after ORIGIN, segment)` as a nanosecond pcap.
fn capture(name: &str, script: &[(f64, Tcp)]) -> TempFile {
    let pcap = Pcap {
        nanosecond: true,
        ..Pcap::ethernet()
    };
    let records: Vec<Record> = script
        .iter()
        .map(|(millis, tcp)| Record::new(ms(*millis), tcp.ethernet()))
        .collect();
    TempFile::new(name, &pcap.file(&records))
}

/// Handshake, 100-byte request, `response` bytes in 1000-byte segments
/// from `first_data` ms, 10 ms apart, the last with FIN; client's FIN
/// after. The SYN-ACK answers at `answered` ms; RTT 40 ms.
fn exchange(c: &Client, answered: f64, first_data: f64, response: u32) -> Vec<(f64, Tcp)> {
    let mut script = vec![
        (answered + 0.1, c.synack()),
        (answered + 40.1, c.ack(0, 0, 0)),
        (answered + 40.2, c.ack(0, 0, PSH).payload(100)),
    ];
    let segments = response.div_ceil(1000);
    for k in 0..segments {
        let flags = if k + 1 == segments { FIN } else { 0 };
        let len = (response - 1000 * k).min(1000) as usize;
        script.push((first_data + 10.0 * k as f64, c.data(1000 * k, len, flags)));
    }
    let last = first_data + 10.0 * (segments.max(1) - 1) as f64;
    script.push((last + 40.0, c.ack(100, response + 1, FIN)));
    script
}

fn linux(fto_secs: u64) -> ExactConfig {
    ExactConfig {
        clients: ClientMix::builtin("linux-6.5").unwrap(),
        frustration_timeout: Nanos::from_secs(fto_secs),
    }
}

/// Two SYNs dropped (0 s, 1 s), the third (2 s) answered; 3000 response
/// bytes at 2.100, 2.110, 2.120 s (FIN on the last).
fn retried_twice() -> (Client, Vec<(f64, Tcp)>) {
    let c = Client::new(40_000, 1_000);
    let mut script = vec![(0.0, c.syn()), (1000.0, c.syn()), (2000.0, c.syn())];
    script.extend(exchange(&c, 2000.0, 2100.0, 3000));
    (c, script)
}

#[test]
fn two_dropped_syns_then_answered() {
    let (_, script) = retried_twice();
    let file = capture("retried.pcap", &script);
    let trace = read_handshakes(&file.path, &HandshakeConfig::default()).unwrap();
    assert_eq!(trace.handshakes.len(), 1);
    let h = &trace.handshakes[0];
    assert_eq!(h.client.to_string(), "10.0.1.7:40000");
    assert_eq!(h.server.to_string(), "10.0.0.2:80");
    assert_eq!(h.syns, vec![at(0.0), at(1000.0), at(2000.0)]);
    assert_eq!(h.answered, Some(2));
    assert_eq!(h.retries(), Some(2));
    assert_eq!(h.rtt, Some(Nanos::from_millis(40)));
    assert_eq!(h.last_data, Some(at(2120.0)));
    assert_eq!(h.server_fin, Some(at(2120.0)));
    assert_eq!(h.end, Some(at(2120.0)));
    assert_eq!((h.data_segments, h.data_retransmissions), (3, 0));
    assert_eq!(h.finish, FinishCause::Closed);
    assert_eq!(trace.listeners.len(), 1);

    // The exact figure: CONN-FAIL 2 s + SYN-to-END 0.12 s + RTT 0.04 s.
    let observations = trace.observations();
    let grid = trace.grid(Nanos::from_millis(250)).unwrap();
    assert_eq!(grid.start, Nanos(ORIGIN));
    let figures = exact(&observations, grid, trace.capture_end(), &linux(21)).unwrap();
    let c = figures.connections[0];
    assert_eq!(c.outcome, ExactOutcome::Completed);
    assert_eq!(c.retries, 2);
    assert_eq!(c.client_time, Some(Nanos::from_millis(2160)));
    assert_eq!(c.interval, Some(8));
    // The counters: drops at 0 s and 1 s, the accept at 2 s, the completion
    // in the interval of 2.12 s.
    let counters = bucket(&observations, grid, trace.capture_end()).unwrap();
    let i = &counters.intervals;
    assert_eq!((i[0].dropped, i[4].dropped, i[8].accepted), (1, 1, 1));
    assert_eq!(i[8].completed, 1);
    assert_eq!(i[8].syn_to_end_sum, Nanos::from_millis(120));
    assert_eq!(i[8].rtt_sum, Nanos::from_millis(40));
    assert_eq!(i[8].segments_sent, 3);
}

#[test]
fn never_answered_client_gives_up_at_its_frustration_timeout() {
    // Linux 6.5 client: SYNs at 0,1,2,3,4,5,7,11,19 s, nothing answered.
    let lost = Client::new(40_001, 7_000);
    let mut script: Vec<(f64, Tcp)> = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 7.0, 11.0, 19.0]
        .iter()
        .map(|s| (s * 1000.0, lost.syn()))
        .collect();
    // Another client gets in at 25 s, which also makes the listener known
    // and the capture last past the give-up.
    let other = Client::new(40_002, 9_000);
    script.push((25_000.0, other.syn()));
    script.extend(exchange(&other, 25_000.0, 25_100.0, 500));
    let file = capture("never.pcap", &script);
    let trace = read_handshakes(&file.path, &HandshakeConfig::default()).unwrap();
    assert_eq!(trace.handshakes.len(), 2);
    let h = &trace.handshakes[0];
    assert_eq!(h.syns.len(), 9);
    assert_eq!((h.answered, h.end, h.refused), (None, None, false));
    let grid = trace.grid(Nanos::from_secs(1)).unwrap();
    let observations = trace.observations();
    let figures = exact(&observations, grid, trace.capture_end(), &linux(21)).unwrap();
    let c = figures.connections[0];
    assert_eq!(c.outcome, ExactOutcome::GaveUp);
    assert_eq!(c.client_time, Some(Nanos::from_secs(21)));
    assert_eq!(c.interval, Some(21));
    assert_eq!(figures.intervals[21].gave_up, 1);
    let counters = bucket(&observations, grid, trace.capture_end()).unwrap();
    assert_eq!(counters.stats.dropped, 9);
    assert_eq!(counters.stats.accepted, 1);
    // Stopped at 20 s, the capture cannot know whether the client got in.
    let cut: Vec<(f64, Tcp)> = script
        .iter()
        .filter(|(t, _)| *t < 20_000.0)
        .cloned()
        .collect();
    let file = capture("never-cut.pcap", &cut);
    let config = HandshakeConfig {
        server: Some("10.0.0.2:80".parse().unwrap()),
        ..HandshakeConfig::default()
    };
    let trace = read_handshakes(&file.path, &config).unwrap();
    let figures = exact(
        &trace.observations(),
        trace.grid(Nanos::from_secs(1)).unwrap(),
        trace.capture_end(),
        &linux(21),
    )
    .unwrap();
    assert_eq!((figures.unresolved, figures.gave_up), (1, 0));
}

#[test]
fn a_listener_that_answered_nothing_is_taken_only_when_named() {
    let lost = Client::new(40_003, 1);
    let script = vec![(0.0, lost.syn()), (1000.0, lost.syn())];
    let file = capture("unanswered.pcap", &script);
    let trace = read_handshakes(&file.path, &HandshakeConfig::default()).unwrap();
    assert!(trace.handshakes.is_empty());
    assert_eq!(trace.stats.other_servers, 1);
    for server in ["10.0.0.2:80", "10.0.0.2", ":80"] {
        let config = HandshakeConfig {
            server: Some(server.parse().unwrap()),
            ..HandshakeConfig::default()
        };
        let trace = read_handshakes(&file.path, &config).unwrap();
        assert_eq!(trace.handshakes.len(), 1, "{server}");
    }
    let config = HandshakeConfig {
        server: Some(":443".parse().unwrap()),
        ..HandshakeConfig::default()
    };
    assert!(read_handshakes(&file.path, &config)
        .unwrap()
        .handshakes
        .is_empty());
    assert!("80".parse::<ServerFilter>().is_err());
    assert!("[2001:db8::1]:443".parse::<ServerFilter>().is_ok());
}

#[test]
fn refused_connection() {
    let c = Client::new(40_004, 3_000);
    let script = vec![
        (0.0, c.syn()),
        (0.2, Tcp::new(SERVER, c.endpoint, 0, c.isn + 1, RST | ACK)),
    ];
    let file = capture("refused.pcap", &script);
    let config = HandshakeConfig {
        server: Some(":80".parse().unwrap()),
        ..HandshakeConfig::default()
    };
    let trace = read_handshakes(&file.path, &config).unwrap();
    let h = &trace.handshakes[0];
    assert!(h.refused);
    assert_eq!((h.answered, h.end), (None, None));
    let figures = exact(
        &trace.observations(),
        trace.grid(Nanos::from_millis(250)).unwrap(),
        trace.capture_end(),
        &linux(21),
    )
    .unwrap();
    assert_eq!(figures.connections[0].outcome, ExactOutcome::Refused);
    assert_eq!(figures.transactions(), 0);
}

#[test]
fn reset_ends_the_transaction() {
    let c = Client::new(40_005, 4_000);
    let script = vec![
        (0.0, c.syn()),
        (0.1, c.synack()),
        (40.1, c.ack(0, 0, 0)),
        (40.2, c.ack(0, 0, PSH).payload(100)),
        // The server resets without answering.
        (300.0, Tcp::new(SERVER, c.endpoint, SERVER_ISN + 1, 0, RST)),
    ];
    let file = capture("reset.pcap", &script);
    let trace = read_handshakes(&file.path, &HandshakeConfig::default()).unwrap();
    let h = &trace.handshakes[0];
    assert_eq!(h.reset, Some(at(300.0)));
    assert_eq!(h.end, Some(at(300.0)));
    assert_eq!(h.last_data, None);

    // A client reset after the response: END is the last data.
    let c = Client::new(40_006, 4_500);
    let mut script = vec![(0.0, c.syn())];
    script.extend(exchange(&c, 0.0, 100.0, 1500));
    script.pop();
    script.push((200.0, c.ack(100, 1501, RST)));
    let file = capture("reset-after.pcap", &script);
    let trace = read_handshakes(&file.path, &HandshakeConfig::default()).unwrap();
    let h = &trace.handshakes[0];
    assert_eq!(h.reset, Some(at(200.0)));
    assert_eq!(h.end, Some(at(110.0)));
}

#[test]
fn client_half_close_before_the_response_does_not_end_it() {
    let c = Client::new(40_007, 5_000);
    let script = vec![
        (0.0, c.syn()),
        (0.1, c.synack()),
        (40.1, c.ack(0, 0, 0)),
        // Request and FIN together: HTTP/1.0 half-close.
        (40.2, c.ack(0, 0, PSH | FIN).payload(100)),
        (200.0, c.data(0, 1000, 0)),
        (300.0, c.data(1000, 1000, 0)),
        (400.0, c.data(2000, 10, FIN)),
        (440.0, c.ack(101, 2011, 0)),
    ];
    let file = capture("half-close.pcap", &script);
    let trace = read_handshakes(&file.path, &HandshakeConfig::default()).unwrap();
    let h = &trace.handshakes[0];
    assert_eq!(h.client_fin, Some(at(40.2)));
    assert_eq!(h.end, Some(at(400.0)));
}

#[test]
fn data_retransmitted_after_the_server_fin_is_the_end() {
    // The server closes at 300 ms; its first data segment was lost and is
    // retransmitted at 700 ms: the client has its response only then.
    let c = Client::new(40_008, 6_000);
    let script = vec![
        (0.0, c.syn()),
        (0.1, c.synack()),
        (40.1, c.ack(0, 0, 0)),
        (40.2, c.ack(0, 0, PSH).payload(100)),
        (200.0, c.data(0, 1000, 0)),
        (300.0, c.data(1000, 0, FIN)),
        (700.0, c.data(0, 1000, 0).ip_id(999)),
        (740.0, c.ack(100, 1001, 0)),
    ];
    let file = capture("fin-first.pcap", &script);
    let trace = read_handshakes(&file.path, &HandshakeConfig::default()).unwrap();
    let h = &trace.handshakes[0];
    assert_eq!(h.server_fin, Some(at(300.0)));
    assert_eq!(h.last_data, Some(at(700.0)));
    assert_eq!((h.data_segments, h.data_retransmissions), (2, 1));
    assert_eq!(h.end, Some(at(700.0)));
}

#[test]
fn last_segment_with_fin_lost_on_the_way_ends_at_its_retransmission() {
    // 1500 response bytes: 1000, then 500 with FIN at 210 ms, lost on the
    // way and re-sent at 430 ms (the retransmission time-out). The client
    // ACKs the first segment, then everything with its own FIN.
    let c = Client::new(40_011, 9_700);
    let script = vec![
        (0.0, c.syn()),
        (0.1, c.synack()),
        (40.1, c.ack(0, 0, 0)),
        (40.2, c.ack(0, 0, PSH).payload(100)),
        (200.0, c.data(0, 1000, 0)),
        (210.0, c.data(1000, 500, FIN)),
        (240.0, c.ack(100, 1000, 0)),
        (430.0, c.data(1000, 500, FIN).ip_id(998)),
        (470.0, c.ack(100, 1501, FIN)),
    ];
    let file = capture("fin-segment-lost.pcap", &script);
    let trace = read_handshakes(&file.path, &HandshakeConfig::default()).unwrap();
    let h = &trace.handshakes[0];
    assert_eq!(h.server_fin, Some(at(210.0)));
    assert_eq!(h.data_retransmissions, 1);
    assert_eq!(h.end, Some(at(430.0)));
    let grid = trace.grid(Nanos::from_millis(250)).unwrap();
    let figures = exact(&trace.observations(), grid, trace.capture_end(), &linux(21)).unwrap();
    // 430 ms to END plus the 40-ms RTT: the retransmission's wait counts.
    assert_eq!(
        figures.connections[0].client_time,
        Some(Nanos::from_millis(470))
    );
}

#[test]
fn fin_resent_alone_does_not_move_the_end() {
    // The data arrived; only the bare FIN was lost and is re-sent.
    let c = Client::new(40_012, 9_900);
    let script = vec![
        (0.0, c.syn()),
        (0.1, c.synack()),
        (40.1, c.ack(0, 0, 0)),
        (40.2, c.ack(0, 0, PSH).payload(100)),
        (200.0, c.data(0, 1000, 0)),
        (201.0, c.data(1000, 0, FIN)),
        (240.0, c.ack(100, 1000, 0)),
        (420.0, c.data(1000, 0, FIN).ip_id(997)),
        (460.0, c.ack(100, 1001, FIN)),
    ];
    let file = capture("fin-alone-lost.pcap", &script);
    let trace = read_handshakes(&file.path, &HandshakeConfig::default()).unwrap();
    let h = &trace.handshakes[0];
    assert_eq!(h.last_data, Some(at(200.0)));
    assert_eq!(h.end, Some(at(200.0)));
}

#[test]
fn dropped_handshake_ack_keeps_the_first_rtt() {
    // Accept queue full when the ACK arrives: the server drops it and
    // re-sends its SYN-ACK a second later; the client ACKs again.
    let c = Client::new(40_009, 8_000);
    let mut script = vec![
        (0.0, c.syn()),
        (0.1, c.synack()),
        (40.1, c.ack(0, 0, 0)),
        (40.2, c.ack(0, 0, PSH).payload(100)),
        (1000.1, c.synack().ip_id(7)),
        (1040.1, c.ack(100, 0, 0)),
    ];
    script.push((1100.0, c.data(0, 800, FIN)));
    script.push((1140.0, c.ack(100, 801, FIN)));
    let file = capture("handshake-ack-dropped.pcap", &script);
    let trace = read_handshakes(&file.path, &HandshakeConfig::default()).unwrap();
    let h = &trace.handshakes[0];
    assert_eq!(h.synacks.len(), 2);
    // Held inline, serialized as the list of times a vector gives.
    let json = serde_json::to_value(h).unwrap();
    assert_eq!(
        json["synacks"],
        serde_json::to_value(h.synacks.to_vec()).unwrap()
    );
    assert_eq!(json["synacks"].as_array().map(Vec::len), Some(2));
    assert_eq!(h.answered, Some(0));
    assert_eq!(h.rtt, Some(Nanos::from_millis(40)));
    assert_eq!(h.end, Some(at(1100.0)));
}

#[test]
fn syn_resent_after_a_lost_synack_is_not_a_drop() {
    let c = Client::new(40_010, 9_500);
    let script = vec![
        (0.0, c.syn()),
        (0.1, c.synack()),
        // The SYN-ACK was lost: the client re-sends its SYN.
        (1000.0, c.syn()),
        (1000.1, c.synack().ip_id(8)),
        (1040.1, c.ack(0, 0, 0)),
        (1040.2, c.ack(0, 0, PSH).payload(100)),
        (1100.0, c.data(0, 100, FIN)),
        (1140.0, c.ack(100, 101, FIN)),
    ];
    let file = capture("synack-lost.pcap", &script);
    let trace = read_handshakes(&file.path, &HandshakeConfig::default()).unwrap();
    let h = &trace.handshakes[0];
    assert_eq!(h.syns.len(), 2);
    assert_eq!(h.answered, Some(0));
    // The ACK answers the SYN-ACK sent at 1000.1 ms.
    assert_eq!(h.rtt, Some(Nanos::from_millis(40)));
    let grid = trace.grid(Nanos::from_millis(250)).unwrap();
    let counters = bucket(&trace.observations(), grid, trace.capture_end()).unwrap();
    assert_eq!(counters.stats.dropped, 0);
    assert_eq!(counters.stats.syns_after_answer, 1);
    let figures = exact(&trace.observations(), grid, trace.capture_end(), &linux(21)).unwrap();
    // Client time: 1.1 s to END (the lost SYN-ACK's second is in
    // SYN-to-END, Figure 3) plus the RTT.
    assert_eq!(
        figures.connections[0].client_time,
        Some(Nanos::from_millis(1140))
    );
}

#[test]
fn open_at_the_end_of_the_capture_is_unresolved() {
    let c = Client::new(40_011, 11_000);
    let script = vec![
        (0.0, c.syn()),
        (0.1, c.synack()),
        (40.1, c.ack(0, 0, 0)),
        (40.2, c.ack(0, 0, PSH).payload(100)),
        (100.0, c.data(0, 1000, 0)),
    ];
    let file = capture("open.pcap", &script);
    let trace = read_handshakes(&file.path, &HandshakeConfig::default()).unwrap();
    let h = &trace.handshakes[0];
    assert_eq!(h.finish, FinishCause::EndOfTrace);
    assert_eq!(h.end, None);
    let grid = trace.grid(Nanos::from_millis(250)).unwrap();
    let figures = exact(&trace.observations(), grid, trace.capture_end(), &linux(21)).unwrap();
    assert_eq!(figures.unresolved, 1);
    let counters = bucket(&trace.observations(), grid, trace.capture_end()).unwrap();
    assert_eq!(counters.stats.accepted_without_end, 1);
}

#[test]
fn port_reuse_gives_two_connections_and_classes_split_them() {
    let first = Client::new(40_012, 100);
    let second = Client::new(40_012, 800_000_000);
    let other_net = Client {
        endpoint: ("10.9.0.1", 40_013),
        isn: 5,
    };
    let mut script = vec![(0.0, first.syn())];
    script.extend(exchange(&first, 0.0, 100.0, 500));
    script.push((3000.0, second.syn()));
    script.push((4000.0, second.syn()));
    script.extend(exchange(&second, 4000.0, 4100.0, 500));
    script.push((5000.0, other_net.syn()));
    script.extend(exchange(&other_net, 5000.0, 5100.0, 500));
    let file = capture("reuse.pcap", &script);
    let trace = read_handshakes(&file.path, &HandshakeConfig::default()).unwrap();
    assert_eq!(trace.handshakes.len(), 3);
    assert_eq!(trace.handshakes[0].isn, Some(100));
    assert_eq!(trace.handshakes[1].answered, Some(1));
    let by_prefix = trace.observations_by_class(ClassBy::SourcePrefix(16));
    let sizes: Vec<(&str, usize)> = by_prefix
        .iter()
        .map(|(k, v)| (k.as_str(), v.len()))
        .collect();
    assert_eq!(sizes, vec![("10.0.0.0/16", 2), ("10.9.0.0/16", 1)]);
    let by_listener = trace.observations_by_class(ClassBy::Listener);
    assert_eq!(by_listener.keys().collect::<Vec<_>>(), vec!["10.0.0.2:80"]);
    assert!("source-prefix/200".parse::<ClassBy>().is_err());
    assert_eq!("listener".parse::<ClassBy>(), Ok(ClassBy::Listener));
}

/// Every real trace parses into observations that the counters and the
/// exact figures accept, whatever odd handshakes it holds.
#[test]
fn real_traces_give_consistent_observations() {
    let mut files = trace_files("zeek");
    files.extend(trace_files("tcptrace"));
    let mut handshakes = 0;
    let mut too_long = 0;
    for path in files {
        let trace = read_handshakes(&path, &HandshakeConfig::default())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        handshakes += trace.handshakes.len();
        for h in &trace.handshakes {
            assert!(!h.syns.is_empty());
            if let (Some(end), Some(answered)) = (h.end, h.answered) {
                assert!(end >= h.syns[answered], "{}", path.display());
            }
            assert!(h.end.is_none() || h.answered.is_some());
        }
        let Ok(grid) = trace.grid(Nanos::from_millis(250)) else {
            panic!("grid");
        };
        let observations = trace.observations();
        let counters = match bucket(&observations, grid, trace.capture_end()) {
            Ok(counters) => counters,
            // tcptrace's http.dmp.gz is two captures four years apart.
            Err(ObservedError::TooManyIntervals { .. }) => {
                too_long += 1;
                continue;
            }
            Err(e) => panic!("{}: {e}", path.display()),
        };
        let figures = exact(&observations, grid, trace.capture_end(), &linux(21))
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let completed: u64 = counters.intervals.iter().map(|i| i.completed).sum();
        assert_eq!(completed, figures.completed, "{}", path.display());
        assert_eq!(
            figures.completed
                + figures.gave_up
                + figures.refused
                + figures.reset
                + figures.unresolved,
            observations.len() as u64
        );
    }
    if shared_traces().is_some() {
        assert!(handshakes > 10, "{handshakes}");
        assert_eq!(too_long, 1);
    }
}

/// The 1000-request nginx trace: one persistent connection whose SYN was
/// answered at once, and 1000 responses.
#[test]
fn nginx_trace_is_one_completed_connection() {
    let Some(root) = shared_traces() else {
        return;
    };
    let trace = read_handshakes(
        root.join("zeek/http_1000-requests-one-dropped-response.pcap.gz"),
        &HandshakeConfig::default(),
    )
    .unwrap();
    assert_eq!(trace.handshakes.len(), 1);
    let h = &trace.handshakes[0];
    assert_eq!((h.syns.len(), h.answered), (1, Some(0)));
    assert!(h.end.is_some() && h.rtt.is_some());
    assert!(h.data_segments >= 999, "{}", h.data_segments);
}

/// The one-call pipeline reads the capture in one pass (the streaming
/// path) and gives the same counters and exact figures as the whole-read
/// steps, keeps no per-connection figures, and names a configuration the
/// model refuses.
#[test]
fn estimate_capture_streams_and_agrees_with_the_whole_read_steps() {
    use vantage_core::certes::input::observe_class;
    use vantage_core::certes::observed::{compare, estimate_intervals};
    use vantage_core::certes::CertesConfig;
    use vantage_trace::handshake::{estimate_capture, CaptureEstimateError};

    // Three clients: retried twice, answered at once, never answered.
    let (_, mut script) = retried_twice();
    let prompt = Client::new(40_001, 5_000);
    script.push((500.0, prompt.syn()));
    script.extend(exchange(&prompt, 500.0, 600.0, 2000));
    let ignored = Client::new(40_002, 9_000);
    script.push((700.0, ignored.syn()));
    script.sort_by(|a, b| a.0.total_cmp(&b.0));
    let file = capture("pipeline.pcap", &script);
    let model = CertesConfig::new(
        Nanos::from_millis(250),
        ClientMix::builtin("linux-6.5").unwrap(),
        Nanos::from_secs(21),
    );
    let run = estimate_capture(&file.path, &HandshakeConfig::default(), &model).unwrap();

    let trace = read_handshakes(&file.path, &HandshakeConfig::default()).unwrap();
    let grid = trace.grid(model.interval).unwrap();
    let mut observations = trace.observations();
    let config = ExactConfig::from_model(&model).unwrap();
    let whole = observe_class(&mut observations, grid, trace.capture_end(), &config).unwrap();
    assert_eq!(run.grid, grid);
    assert_eq!(run.counters, whole.counters);
    assert_eq!(run.exact.intervals, whole.exact.intervals);
    let totals = |x: &vantage_core::certes::observed::ExactFigures| {
        (
            x.completed,
            x.gave_up,
            x.reset,
            x.unresolved,
            x.total_time,
            x.completed_by_retries.clone(),
        )
    };
    assert_eq!(totals(&run.exact), totals(&whole.exact));
    let estimates = estimate_intervals(model.clone(), &whole.counters.intervals).unwrap();
    assert_eq!(run.comparison, compare(&estimates, &whole.exact));
    assert_eq!(run.estimates.len(), run.counters.intervals.len());
    assert_eq!(run.exact.completed_by_retries, [1, 0, 1]);
    // The capture ends 2.2 s in, before the unanswered client's
    // frustration timeout.
    assert_eq!(run.exact.unresolved, 1);
    assert_eq!(run.comparison.exact_transactions, 2);
    assert!(run.comparison.estimate_mean.is_some());
    // Nothing is kept per connection.
    assert!(run.exact.connections.is_empty());
    assert_eq!(run.notes.connections, 3);

    let mut bad = model.clone();
    bad.interval = Nanos::from_secs(2);
    let err = estimate_capture(&file.path, &HandshakeConfig::default(), &bad).unwrap_err();
    assert!(matches!(err, CaptureEstimateError::Model(_)), "{err}");
    let err =
        estimate_capture("/nonexistent.pcap", &HandshakeConfig::default(), &model).unwrap_err();
    assert!(matches!(err, CaptureEstimateError::Capture(_)), "{err}");
}

/// A flood of unanswered SYNs from distinct ports through a connection
/// table capped at 16: the table evicts (counted) and every SYN is
/// still counted.
#[test]
fn estimate_capture_keeps_the_connection_table_within_its_cap() {
    use vantage_core::certes::CertesConfig;
    use vantage_trace::handshake::estimate_capture;

    let served = Client::new(30_000, 100);
    let mut script = vec![(0.0, served.syn())];
    script.extend(exchange(&served, 0.0, 100.0, 1000));
    for i in 0..2000u16 {
        let flood = Client::new(40_000 + i, 1_000 + u32::from(i));
        script.push((200.0 + f64::from(i) * 0.1, flood.syn()));
    }
    script.sort_by(|a, b| a.0.total_cmp(&b.0));
    let file = capture("flood.pcap", &script);
    let model = CertesConfig::new(
        Nanos::from_millis(250),
        ClientMix::builtin("linux-6.5").unwrap(),
        Nanos::from_secs(21),
    );
    let mut handshakes = HandshakeConfig {
        server: Some(ServerFilter {
            ip: Some(SERVER.0.parse().unwrap()),
            port: Some(SERVER.1),
        }),
        ..HandshakeConfig::default()
    };
    handshakes.table.max_connections = 16;
    let run = estimate_capture(&file.path, &handshakes, &model).unwrap();
    assert!(
        run.notes.connections_evicted >= 2000 - 16,
        "{:?}",
        run.notes
    );
    assert_eq!(run.notes.connections, 2001);
    let syns: u64 = run
        .counters
        .intervals
        .iter()
        .map(|c| c.dropped + c.accepted)
        .sum();
    assert_eq!(syns, 2001);
    assert_eq!(run.exact.completed, 1);
}
