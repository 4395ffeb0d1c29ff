//! The connection table on scripted exchanges: identity (port reuse,
//! retransmitted SYN and FIN, both ends on one address, mid-stream starts,
//! reordered handshakes), negotiated options, each capture artefact of
//! tcpeval Section 3.5 and beyond, and eviction.

mod common;

use common::*;
use vantage_core::Nanos;
use vantage_trace::{
    decode_frame, Connection, ConnectionTable, Direction, FinishCause, LinkType, Observation,
    Opening, SegmentNotes, SegmentRecord, TableConfig,
};

const CLIENT: (&str, u16) = ("10.0.0.1", 40_000);
const SERVER: (&str, u16) = ("10.0.0.2", 80);

/// Feeds `(time in µs, segment)` pairs; returns the observations.
fn feed(table: &mut ConnectionTable, script: &[(u64, Tcp)]) -> Vec<Observation> {
    script
        .iter()
        .map(|(micros, tcp)| {
            let frame = tcp.ip_bytes();
            let segment = decode_frame(
                LinkType::RAW,
                Nanos::from_micros(*micros),
                &frame,
                frame.len() as u32,
            )
            .unwrap();
            table.observe(&segment)
        })
        .collect()
}

fn finish(mut table: ConnectionTable) -> (Vec<Connection>, ConnectionTable) {
    table.finish_all();
    let mut connections = Vec::new();
    while let Some(connection) = table.pop_finished() {
        connections.push(connection);
    }
    (connections, table)
}

fn c2s(seq: u32, ack: u32, flags: u16) -> Tcp {
    Tcp::new(CLIENT, SERVER, seq, ack, flags)
}

fn s2c(seq: u32, ack: u32, flags: u16) -> Tcp {
    Tcp::new(SERVER, CLIENT, seq, ack, flags)
}

/// A whole HTTP/1.0-like exchange: handshake, 100-byte request, 3000-byte
/// response in three segments, FINs. Client ISN `isn`, server ISN 5000.
fn exchange(start: u64, isn: u32) -> Vec<(u64, Tcp)> {
    let s = 5_000;
    vec![
        (start, c2s(isn, 0, SYN).options(syn_options(1460, 7, 1))),
        (
            start + 100,
            s2c(s, isn + 1, SYN | ACK).options(syn_options(1400, 8, 2)),
        ),
        (start + 200, c2s(isn + 1, s + 1, ACK)),
        (start + 210, c2s(isn + 1, s + 1, ACK | PSH).payload(100)),
        (start + 400, s2c(s + 1, isn + 101, ACK).payload(1000)),
        (start + 410, s2c(s + 1001, isn + 101, ACK).payload(1000)),
        (
            start + 420,
            s2c(s + 2001, isn + 101, ACK | FIN).payload(1000),
        ),
        (start + 600, c2s(isn + 101, s + 3002, ACK | FIN)),
        (start + 800, s2c(s + 3002, isn + 102, ACK)),
    ]
}

#[test]
fn segment_records_are_compact() {
    assert!(std::mem::size_of::<SegmentRecord>() <= 40);
}

#[test]
fn a_clean_exchange() {
    let mut table = ConnectionTable::new(TableConfig::default());
    let observations = feed(&mut table, &exchange(0, 1_000));
    assert!(observations
        .iter()
        .all(|o| matches!(o, Observation::Recorded { .. })));
    let (connections, _) = finish(table);
    assert_eq!(connections.len(), 1);
    let c = &connections[0];
    assert_eq!(c.initiator.to_string(), "10.0.0.1:40000");
    assert_eq!(c.opening, Opening::Syn);
    assert_eq!(c.finish, FinishCause::Closed);
    assert!(c.handshake_seen() && c.closed_by_fins() && !c.reset());
    assert_eq!(c.from_initiator.isn, Some(1_000));
    assert_eq!(c.from_responder.isn, Some(5_000));
    assert_eq!(c.from_initiator.payload_bytes, 100);
    assert_eq!(c.from_responder.payload_bytes, 3_000);
    assert_eq!(c.from_responder.next_seq, Some(5_000 + 3_002));
    assert_eq!(c.window_scaling(), Some((7, 8)));
    assert!(c.sack_permitted() && c.timestamps_negotiated());
    assert_eq!(c.mss_limit(Direction::FromResponder), Some(1460));
    assert_eq!(c.artefacts(), Default::default());
    assert_eq!(c.segments.len(), 9);
    assert_eq!(c.segments[1].direction(), Direction::FromResponder);
    assert!(c.segments[1].notes.contains(SegmentNotes::TIMESTAMPS));
    assert_eq!(c.segments[4].payload_len, 1000);
    assert_eq!(c.first_timestamp, Nanos::ZERO);
    assert_eq!(c.last_timestamp, Nanos::from_micros(800));
}

#[test]
fn port_reuse_with_a_new_isn_is_a_new_connection() {
    let mut table = ConnectionTable::new(TableConfig::default());
    let mut script = exchange(0, 1_000);
    // Same 4-tuple half a second later, new ISN: within the close linger,
    // so the SYN itself must split the connections.
    script.extend(exchange(500_000, 900_000_000));
    feed(&mut table, &script);
    let (connections, _) = finish(table);
    assert_eq!(connections.len(), 2);
    assert_eq!(connections[0].from_initiator.isn, Some(1_000));
    assert_eq!(connections[0].finish, FinishCause::Closed);
    assert_eq!(connections[1].from_initiator.isn, Some(900_000_000));
    assert_eq!(connections[0].segments.len(), 9);
    assert_eq!(connections[1].segments.len(), 9);
}

#[test]
fn a_new_syn_supersedes_an_unclosed_connection() {
    let mut table = ConnectionTable::new(TableConfig::default());
    let mut script = exchange(0, 1_000);
    script.truncate(6); // no FINs
    script.extend(exchange(1_000_000, 77));
    feed(&mut table, &script);
    let (connections, _) = finish(table);
    assert_eq!(connections.len(), 2);
    assert_eq!(connections[0].finish, FinishCause::Superseded);
}

#[test]
fn retransmitted_syn_and_fin_stay_in_their_connection() {
    let config = TableConfig::default();
    let mut table = ConnectionTable::new(config);
    let mut script = exchange(0, 1_000);
    // Two more copies of the SYN, 1 s and 3 s later (as an RTO would).
    let syn = script[0].1.clone();
    script.insert(1, (1_000_000, syn.clone()));
    script.insert(2, (3_000_000, syn));
    for (time, _) in script.iter_mut().skip(3) {
        *time += 3_000_000;
    }
    // The server's FIN retransmitted within the linger...
    script.push((3_900_000, s2c(7_001, 1_101, ACK | FIN).payload(1000)));
    feed(&mut table, &script);
    // ...and once more long after the connection was emitted.
    let late = feed(
        &mut table,
        &[(20_000_000, s2c(7_001, 1_101, ACK | FIN).payload(1000))],
    );
    assert_eq!(late, vec![Observation::Late]);
    let (connections, table) = finish(table);
    assert_eq!(connections.len(), 1);
    let c = &connections[0];
    assert_eq!(c.from_initiator.syns, 3);
    assert_eq!(c.from_initiator.isn, Some(1_000));
    assert_eq!(c.from_responder.retransmissions, 1);
    assert!(c.segments[1].notes.contains(SegmentNotes::RETRANSMISSION));
    assert_eq!(table.stats().late_segments, 1);
    assert_eq!(table.stats().connections_opened, 1);
}

#[test]
fn both_ends_on_one_address_keep_their_directions() {
    // tcptrace tells directions apart by address first; here the two ends
    // share 127.0.0.1, and the initiator has the higher port, so the
    // canonical "low" endpoint is the responder.
    let client = ("127.0.0.1", 50_000);
    let server = ("127.0.0.1", 8_080);
    let mut table = ConnectionTable::new(TableConfig::default());
    let script = vec![
        (0, Tcp::new(client, server, 10, 0, SYN)),
        (1, Tcp::new(server, client, 500, 11, SYN | ACK)),
        (2, Tcp::new(client, server, 11, 501, ACK | PSH).payload(40)),
        (3, Tcp::new(server, client, 501, 51, ACK | PSH).payload(700)),
        // A second connection between the same two ports, other way round
        // is impossible; a second client port is a second connection.
        (4, Tcp::new(("127.0.0.1", 50_001), server, 99, 0, SYN)),
    ];
    feed(&mut table, &script);
    let (connections, _) = finish(table);
    assert_eq!(connections.len(), 2);
    let c = &connections[0];
    assert_eq!(c.initiator.to_string(), "127.0.0.1:50000");
    assert_eq!(c.responder.to_string(), "127.0.0.1:8080");
    assert_eq!(c.from_initiator.payload_bytes, 40);
    assert_eq!(c.from_responder.payload_bytes, 700);
    assert_eq!(c.from_responder.isn, Some(500));
    assert!(c.handshake_seen());
    assert_eq!(c.artefacts(), Default::default());
}

#[test]
fn mid_stream_and_reordered_handshakes() {
    let mut table = ConnectionTable::new(TableConfig::default());
    // Mid-stream: the first segment is the server's; port 80 marks it as
    // the responder.
    feed(&mut table, &[(0, s2c(100, 200, ACK).payload(10))]);
    // SYN-ACK captured before its SYN, on another client port.
    let other = ("10.0.0.1", 40_001);
    feed(
        &mut table,
        &[
            (10, Tcp::new(SERVER, other, 7_000, 301, SYN | ACK)),
            (11, Tcp::new(other, SERVER, 300, 0, SYN)),
            (12, Tcp::new(other, SERVER, 301, 7_001, ACK)),
        ],
    );
    let (connections, _) = finish(table);
    assert_eq!(connections.len(), 2);
    assert_eq!(connections[0].opening, Opening::MidStream);
    assert_eq!(connections[0].initiator.to_string(), "10.0.0.1:40000");
    assert!(!connections[0].handshake_seen());
    let reordered = &connections[1];
    assert_eq!(reordered.opening, Opening::SynAck);
    assert_eq!(reordered.initiator.to_string(), "10.0.0.1:40001");
    assert_eq!(reordered.from_initiator.isn, Some(300));
    assert!(reordered.handshake_seen());
    // The SYN was acknowledged before it was seen: reordered, not dropped.
    assert_eq!(reordered.artefacts().seen_after_ack, 1);
    assert_eq!(reordered.artefacts().capture_drops, 0);
    assert!(reordered.segments[1]
        .notes
        .contains(SegmentNotes::SEEN_AFTER_ACK));
}

#[test]
fn tcp_fast_open_syn_ack_answers_the_data_bearing_syn() {
    let mut table = ConnectionTable::new(TableConfig::default());
    feed(
        &mut table,
        &[
            (0, c2s(1_000, 0, SYN).payload(86)),
            (1, s2c(9_000, 1_087, SYN | ACK)),
            (2, c2s(1_087, 9_001, ACK)),
        ],
    );
    let (connections, _) = finish(table);
    assert_eq!(connections.len(), 1);
    assert_eq!(connections[0].artefacts(), Default::default());
}

#[test]
fn ack_for_unseen_data_is_a_capture_drop() {
    let mut table = ConnectionTable::new(TableConfig::default());
    let mut script = exchange(0, 1_000);
    // Drop the server's second data segment from the capture: the client's
    // cumulative ACK of the third acknowledges it anyway.
    script.remove(5);
    script.insert(6, (500, c2s(1_101, 8_001, ACK)));
    feed(&mut table, &script);
    let (connections, _) = finish(table);
    let artefacts = connections[0].from_responder.artefacts;
    assert_eq!(artefacts.capture_drops, 1);
    assert_eq!(artefacts.capture_dropped_bytes, 1_000);
    assert!(connections[0]
        .segments
        .iter()
        .any(|s| s.notes.contains(SegmentNotes::ACKS_UNSEEN)));
    assert!(connections[0].segments[5]
        .notes
        .contains(SegmentNotes::AFTER_GAP));
}

#[test]
fn ack_beyond_everything_seen_and_sack_over_a_gap() {
    let mut table = ConnectionTable::new(TableConfig::default());
    let mut script = exchange(0, 1_000);
    script.truncate(5); // up to the server's first 1000 bytes
                        // Server bytes 2001..3001 seen, 1001..2001 not; the client SACKs
                        // 2001..3001 and then 1001..2001 (the receiver had it), and finally
                        // acknowledges 4001: 3001..4001 never seen either.
    script.push((500, s2c(7_001, 1_101, ACK).payload(1000)));
    script.push((
        510,
        c2s(1_101, 6_001, ACK).options(sack_options(&[(7_001, 8_001)])),
    ));
    script.push((
        520,
        c2s(1_101, 6_001, ACK).options(sack_options(&[(6_001, 8_001)])),
    ));
    script.push((530, c2s(1_101, 9_001, ACK)));
    feed(&mut table, &script);
    let (connections, _) = finish(table);
    let artefacts = connections[0].from_responder.artefacts;
    assert_eq!(artefacts.capture_dropped_bytes, 2_000);
    assert_eq!(artefacts.capture_drops, 2);
}

#[test]
fn retransmission_filling_a_gap_is_not_a_capture_drop() {
    // Network loss seen at the receiver: a gap, filled by the retransmission
    // before the cumulative ACK covers it.
    let mut table = ConnectionTable::new(TableConfig::default());
    let mut script = exchange(0, 1_000);
    script.truncate(5);
    script.push((500, s2c(7_001, 1_101, ACK).payload(1000)));
    script.push((510, c2s(1_101, 6_001, ACK)));
    script.push((900_000, s2c(6_001, 1_101, ACK).payload(1000)));
    script.push((900_100, c2s(1_101, 8_001, ACK)));
    feed(&mut table, &script);
    let (connections, _) = finish(table);
    let c = &connections[0];
    assert_eq!(c.from_responder.artefacts.capture_drops, 0);
    assert!(c.segments[7].notes.contains(SegmentNotes::FILLS_GAP));
}

#[test]
fn capture_duplicates_are_discarded_but_retransmissions_kept() {
    let mut table = ConnectionTable::new(TableConfig::default());
    let data = s2c(5_001, 1_101, ACK).payload(1000).ip_id(4242);
    let pure_ack = c2s(1_101, 6_001, ACK).ip_id(0);
    let mut script = exchange(0, 1_000);
    script.truncate(4);
    script.extend([
        (1_000, data.clone()),
        (1_002, data.clone()), // the filter's second copy
        (1_010, pure_ack.clone()),
        (1_011, pure_ack.clone()), // a genuine duplicate ACK: no IP ID to tell
        (400_000, data.clone().ip_id(4300)), // RTO retransmission
        (400_001, data.clone().ip_id(4300)), // and its capture copy
    ]);
    let observations = feed(&mut table, &script);
    let duplicates = observations
        .iter()
        .filter(|o| matches!(o, Observation::Duplicate { .. }))
        .count();
    assert_eq!(duplicates, 2);
    let (connections, table) = finish(table);
    let c = &connections[0];
    assert_eq!(c.from_responder.artefacts.duplicates, 2);
    assert_eq!(c.from_responder.retransmissions, 1);
    assert_eq!(c.from_initiator.artefacts.duplicates, 0);
    assert_eq!(c.segments.len(), 4 + 4);
    assert_eq!(table.stats().duplicates, 2);
}

/// A copy is looked for among the direction's last `DUPLICATE_MEMORY`
/// segments only: after many more segments, copies of the latest are
/// discarded, a copy of a forgotten one is kept (as a retransmission).
#[test]
fn copies_are_found_among_the_remembered_segments_only() {
    let mut table = ConnectionTable::new(TableConfig::default());
    let mut script = exchange(0, 1_000);
    script.truncate(4);
    let data = |i: u32| {
        s2c(5_001 + 1_000 * i, 1_101, ACK)
            .payload(1000)
            .ip_id(100 + i as u16)
    };
    let sent = 3 * vantage_trace::connection::DUPLICATE_MEMORY as u32;
    for i in 0..sent {
        script.push((1_000 + u64::from(i), data(i)));
    }
    let last = 1_000 + u64::from(sent);
    // Each of the last DUPLICATE_MEMORY segments, copied: all discarded.
    for i in sent - vantage_trace::connection::DUPLICATE_MEMORY as u32..sent {
        script.push((last + u64::from(i), data(i)));
    }
    // A copy of the first segment, long forgotten: kept.
    script.push((last + 2 * u64::from(sent), data(0)));
    let observations = feed(&mut table, &script);
    let duplicates = observations
        .iter()
        .filter(|o| matches!(o, Observation::Duplicate { .. }))
        .count();
    assert_eq!(duplicates, vantage_trace::connection::DUPLICATE_MEMORY);
    assert!(matches!(
        observations.last(),
        Some(Observation::Recorded { .. })
    ));
    let (connections, _) = finish(table);
    assert_eq!(connections[0].from_responder.retransmissions, 1);
}

#[test]
fn timestamps_going_backwards_are_clamped_and_counted() {
    let mut table = ConnectionTable::new(TableConfig::default());
    let mut script = exchange(0, 1_000);
    script[4].0 = 150; // stamped before the ACK at 200 µs
    feed(&mut table, &script);
    let (connections, _) = finish(table);
    let c = &connections[0];
    assert_eq!(c.from_responder.artefacts.timestamps_clamped, 1);
    assert_eq!(c.segments[4].timestamp, Nanos::from_micros(210));
    assert!(c.segments[4]
        .notes
        .contains(SegmentNotes::TIMESTAMP_CLAMPED));
    assert!(c
        .segments
        .windows(2)
        .all(|w| w[0].timestamp <= w[1].timestamp));
}

#[test]
fn snaplen_truncation_and_super_segments_are_counted() {
    let mut table = ConnectionTable::new(TableConfig::default());
    let mut script = exchange(0, 1_000);
    script.truncate(4);
    let big = s2c(5_001, 1_101, ACK).payload(4_380); // three MSS in one: offload
    script.push((500, big));
    feed(&mut table, &script);
    // A cut segment.
    let frame = s2c(9_381, 1_101, ACK).payload(1000).ip_bytes();
    let segment = decode_frame(
        LinkType::RAW,
        Nanos::from_micros(600),
        &frame[..60],
        frame.len() as u32,
    )
    .unwrap();
    table.observe(&segment);
    let (connections, _) = finish(table);
    let c = &connections[0];
    assert_eq!(c.from_responder.artefacts.super_segments, 1);
    assert_eq!(c.from_responder.artefacts.truncated_segments, 1);
    assert!(c.segments[4].notes.contains(SegmentNotes::SUPER_SEGMENT));
    assert!(c.segments[5].notes.contains(SegmentNotes::TRUNCATED));
    assert_eq!(c.from_responder.payload_bytes, 4_380 + 1_000);
}

#[test]
fn an_injected_rst_before_the_syn_ack_does_not_poison_sequence_tracking() {
    let mut table = ConnectionTable::new(TableConfig::default());
    feed(
        &mut table,
        &[
            (0, c2s(1_000, 0, SYN)),
            (1, s2c(0, 1_000, RST | ACK)),
            (2, s2c(3_000_000_000, 1_001, SYN | ACK)),
            (3, c2s(1_001, 3_000_000_001, ACK).payload(10)),
            (4, s2c(3_000_000_001, 1_011, ACK).payload(10)),
        ],
    );
    let (connections, _) = finish(table);
    assert_eq!(connections.len(), 1);
    let c = &connections[0];
    assert_eq!(c.from_responder.isn, Some(3_000_000_000));
    assert_eq!(c.artefacts().out_of_window, 0);
    assert_eq!(c.from_responder.next_seq, Some(3_000_000_011));
}

#[test]
fn finished_connections_leave_the_table() {
    // 20,000 short connections one after another, each on its own port:
    // the table never holds more than the few still lingering.
    let config = TableConfig {
        close_linger: Nanos::from_millis(10),
        ..TableConfig::default()
    };
    let mut table = ConnectionTable::new(config);
    let mut emitted = 0;
    let mut peak = 0;
    for i in 0..20_000u64 {
        let port = 1_024 + (i % 60_000) as u16;
        let client = ("10.0.0.1", port);
        let start = i * 5_000; // one connection every 5 ms
        let script: Vec<(u64, Tcp)> = exchange(start, 1_000)
            .into_iter()
            .map(|(t, mut tcp)| {
                if tcp.source.1 == 40_000 {
                    tcp.source.1 = client.1;
                } else {
                    tcp.destination.1 = client.1;
                }
                (t, tcp)
            })
            .collect();
        feed(&mut table, &script);
        while table.pop_finished().is_some() {
            emitted += 1;
        }
        peak = peak.max(table.active_len());
    }
    assert!(peak <= 10, "peak {peak}");
    let (rest, table) = finish(table);
    assert_eq!(emitted + rest.len(), 20_000);
    assert_eq!(table.stats().connections_finished, 20_000);
}

#[test]
fn idle_connections_time_out() {
    let config = TableConfig {
        idle_timeout: Nanos::from_secs(60),
        ..TableConfig::default()
    };
    let mut table = ConnectionTable::new(config);
    let mut script = exchange(0, 1_000);
    script.truncate(5);
    feed(&mut table, &script);
    // A live driver advancing time with no traffic.
    table.expire(Nanos::from_secs(59));
    assert!(table.pop_finished().is_none());
    table.expire(Nanos::from_secs(61));
    let connection = table.pop_finished().unwrap();
    assert_eq!(connection.finish, FinishCause::IdleTimeout);
    assert_eq!(table.active_len(), 0);
    // Traffic after the timeout is a new (mid-stream) connection: an idle
    // connection leaves no tombstone to swallow it.
    feed(
        &mut table,
        &[(62_000_000, s2c(6_001, 1_101, ACK).payload(5))],
    );
    let (connections, _) = finish(table);
    assert_eq!(connections.len(), 1);
    assert_eq!(connections[0].opening, Opening::MidStream);
}

#[test]
fn counts_only_mode_records_no_segments() {
    let config = TableConfig {
        record_segments: false,
        ..TableConfig::default()
    };
    let mut table = ConnectionTable::new(config);
    feed(&mut table, &exchange(0, 1_000));
    let (connections, _) = finish(table);
    assert!(connections[0].segments.is_empty());
    assert_eq!(connections[0].from_responder.segments, 5);
}

#[test]
fn buffers_reused_from_finished_connections_start_empty() {
    // The first connection's duplicate ring and (given back) segment buffer
    // go to the next one: the same SYN from another client within the
    // duplicate window is that client's own SYN, not a capture copy.
    let mut table = ConnectionTable::new(TableConfig {
        idle_timeout: Nanos::from_millis(1),
        duplicate_window: Nanos::from_secs(10),
        duplicate_horizon: Nanos::from_secs(10),
        ..TableConfig::default()
    });
    let syn = |client| Tcp::new(client, SERVER, 1_000, 0, SYN).ip_id(7);
    feed(&mut table, &[(0, syn(CLIENT))]);
    table.expire(Nanos::from_millis(5));
    let first = table.pop_finished().unwrap();
    assert_eq!(first.finish, FinishCause::IdleTimeout);
    table.recycle(first.segments);
    let observations = feed(&mut table, &[(6_000, syn(("10.0.0.3", 40_000)))]);
    assert!(matches!(observations[0], Observation::Recorded { .. }));
    let (connections, table) = finish(table);
    assert_eq!(connections.len(), 1);
    assert_eq!(connections[0].segments.len(), 1);
    assert_eq!(
        connections[0].segments[0].timestamp,
        Nanos::from_micros(6_000)
    );
    assert_eq!(table.stats().duplicates, 0);
}
