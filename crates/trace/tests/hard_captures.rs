//! Captures that fooled the table before: forwarding duplicates seen at
//! two points of the path, and floods of unanswered SYNs.

mod common;

use common::*;
use vantage_core::Nanos;
use vantage_trace::{
    decode_frame, summarize_reader, ConnectionTable, FinishCause, LinkType, TableConfig,
    TraceReader,
};

const CLIENT: (&str, u16) = ("10.0.0.1", 40_000);
const SERVER: (&str, u16) = ("10.0.0.2", 80);

/// A 300-segment response seen twice by one capture — before and after a
/// router, 1 to 20 ms apart (the copies keep IP ID, checksum and payload;
/// the TTL is what the router changes) — with every ACK seen twice too.
/// With `resend`, the server also re-sends its 10th segment 400 ms after
/// the transfer, under a new IP ID.
fn forwarded_transfer(resend: bool) -> Vec<(u64, Tcp)> {
    let (c, s) = (1_000u32, 5_000u32);
    let mut packets: Vec<(u64, Tcp)> = vec![
        (0, Tcp::new(CLIENT, SERVER, c, 0, SYN).ip_id(1)),
        (
            10_000,
            Tcp::new(SERVER, CLIENT, s, c + 1, SYN | ACK).ip_id(7),
        ),
        (20_000, Tcp::new(CLIENT, SERVER, c + 1, s + 1, ACK).ip_id(2)),
    ];
    let mut next_seq = s + 1;
    let mut when = 30_000u64;
    for i in 0..300u32 {
        let data = Tcp::new(SERVER, CLIENT, next_seq, c + 1, ACK)
            .payload(1000)
            .ip_id(100 + i as u16);
        next_seq += 1000;
        packets.push((when, data));
        if i % 2 == 1 {
            let ack = Tcp::new(CLIENT, SERVER, c + 1, next_seq, ACK).ip_id(3 + i as u16);
            packets.push((when + 500, ack));
        }
        when += 1_000;
    }
    if resend {
        let again = Tcp::new(SERVER, CLIENT, s + 1 + 9_000, c + 1, ACK)
            .payload(1000)
            .ip_id(999);
        packets.push((when + 400_000, again));
    }
    // Every packet again, after the router: 1 to 20 ms later, TTL one less.
    let copies: Vec<(u64, Tcp)> = packets
        .iter()
        .enumerate()
        .map(|(i, (at, tcp))| (at + 1_000 * (1 + (i as u64 % 20)), tcp.clone()))
        .collect();
    let mut all: Vec<(u64, bool, Tcp)> = packets
        .into_iter()
        .map(|(at, tcp)| (at, false, tcp))
        .chain(copies.into_iter().map(|(at, tcp)| (at, true, tcp)))
        .collect();
    all.sort_by_key(|(at, copy, _)| (*at, *copy));
    all.into_iter().map(|(at, _, tcp)| (at, tcp)).collect()
}

fn pcap_of(packets: &[(u64, Tcp)], copies_lose_ttl: bool) -> Vec<u8> {
    let mut seen = std::collections::HashSet::new();
    let records: Vec<Record> = packets
        .iter()
        .map(|(micros, tcp)| {
            let mut frame = tcp.ethernet();
            let key = (tcp.source, tcp.seq, tcp.ack, tcp.ip_id, tcp.payload_len);
            if copies_lose_ttl && !seen.insert(key) {
                frame[14 + 8] -= 1; // TTL
                frame[0] ^= 0x02; // another destination MAC
            }
            Record::new(1_700_000_000_000_000_000 + micros * 1_000, frame)
        })
        .collect();
    Pcap::ethernet().file(&records)
}

#[test]
fn forwarding_duplicates_up_to_20_ms_apart_are_not_retransmissions() {
    let bytes = pcap_of(&forwarded_transfer(false), true);
    let file = TempFile::new("forwarded.pcap", &bytes);
    let summary = summarize_reader(
        TraceReader::open(&file.path).unwrap(),
        TableConfig::default(),
    )
    .unwrap();
    assert_eq!(summary.retransmissions, 0, "{summary:?}");
    // 3 handshake packets, 300 data segments and 150 ACKs, each seen twice.
    assert_eq!(summary.artefacts.duplicates, 453, "{summary:?}");
    assert_eq!(summary.artefacts.capture_drops, 0);
}

#[test]
fn a_resend_with_a_new_ip_id_among_forwarding_duplicates_is_a_retransmission() {
    let bytes = pcap_of(&forwarded_transfer(true), true);
    let file = TempFile::new("forwarded-resend.pcap", &bytes);
    let summary = summarize_reader(
        TraceReader::open(&file.path).unwrap(),
        TableConfig::default(),
    )
    .unwrap();
    assert_eq!(summary.retransmissions, 1, "{summary:?}");
}

#[test]
fn without_ip_ids_copies_further_apart_than_the_window_stay_retransmissions() {
    // IPv6 has no IP ID: the 1 ms rule is all that is left.
    let client = ("2001:db8::1", 40_000);
    let server = ("2001:db8::2", 80);
    let data = Tcp::new(server, client, 5_001, 1_001, ACK).payload(500);
    let script = [
        (0, Tcp::new(client, server, 1_000, 0, SYN)),
        (100, Tcp::new(server, client, 5_000, 1_001, SYN | ACK)),
        (200, Tcp::new(client, server, 1_001, 5_001, ACK)),
        (1_000, data.clone()),
        (1_500, data.clone()), // 0.5 ms later: a capture duplicate
        (6_000, data.clone()), // 5 ms later: cannot be told from a re-send
    ];
    let mut table = ConnectionTable::new(TableConfig::default());
    for (micros, tcp) in &script {
        let frame = tcp.ip_bytes();
        let segment = decode_frame(
            LinkType::RAW,
            Nanos::from_micros(*micros),
            &frame,
            frame.len() as u32,
        )
        .unwrap();
        table.observe(&segment);
    }
    table.finish_all();
    let connection = table.pop_finished().unwrap();
    assert_eq!(connection.from_responder.artefacts.duplicates, 1);
    assert_eq!(connection.from_responder.retransmissions, 1);
}

#[test]
fn a_flood_of_unanswered_syns_stays_within_the_connection_cap() {
    let config = TableConfig {
        max_connections: 1_000,
        record_segments: false,
        ..TableConfig::default()
    };
    let mut table = ConnectionTable::new(config);
    // One established connection, opened first: evicted only after every
    // half-open one has gone, which never happens here.
    let established = [
        (0, Tcp::new(CLIENT, SERVER, 1, 0, SYN)),
        (10, Tcp::new(SERVER, CLIENT, 9, 2, SYN | ACK)),
        (20, Tcp::new(CLIENT, SERVER, 2, 10, ACK)),
    ];
    let mut finished = 0u64;
    let mut observe = |table: &mut ConnectionTable, micros: u64, tcp: &Tcp| {
        let frame = tcp.ip_bytes();
        let segment = decode_frame(
            LinkType::RAW,
            Nanos::from_micros(micros),
            &frame,
            frame.len() as u32,
        )
        .unwrap();
        table.observe(&segment);
        while let Some(connection) = table.pop_finished() {
            assert_eq!(connection.finish, FinishCause::Evicted);
            assert_eq!(connection.from_responder.syns, 0);
            finished += 1;
        }
    };
    for (micros, tcp) in &established {
        observe(&mut table, *micros, tcp);
    }
    let floods = 200_000u32;
    for i in 0..floods {
        let source = format!("10.{}.{}.{}", 1 + i / 65_536, (i / 256) % 256, i % 256);
        let mut tcp = Tcp::new(("10.9.9.9", 1), SERVER, i, 0, SYN);
        tcp.source = (source.parse().unwrap(), 1024 + (i % 60_000) as u16);
        observe(&mut table, 100 + u64::from(i), &tcp);
        assert!(table.active_len() <= 1_000);
    }
    assert_eq!(table.stats().peak_active, 1_000);
    assert_eq!(table.stats().evicted, u64::from(floods) + 1 - 1_000);
    assert_eq!(table.stats().evicted_half_open, table.stats().evicted);
    assert_eq!(finished, table.stats().evicted);
    table.finish_all();
    let mut left = Vec::new();
    while let Some(connection) = table.pop_finished() {
        left.push(connection);
    }
    assert_eq!(left.len(), 1_000);
    assert!(left.iter().any(|c| c.handshake_seen()));
}

#[test]
fn a_capture_of_only_unanswered_syns_does_not_say_no_syn_was_captured() {
    use vantage_core::certes::CertesConfig;
    use vantage_core::tcp::ClientMix;
    let records: Vec<Record> = (0..1_000u32)
        .map(|i| {
            let mut tcp = Tcp::new(CLIENT, SERVER, i, 0, SYN).ip_id(i as u16 + 1);
            tcp.source.1 = 10_000 + i as u16;
            Record::new(
                1_700_000_000_000_000_000 + u64::from(i) * 1_000,
                tcp.ethernet(),
            )
        })
        .collect();
    let file = TempFile::new("syn-flood.pcap", &Pcap::ethernet().file(&records));
    let model = CertesConfig::new(
        Nanos::from_secs(1),
        ClientMix::builtin("windows-9x-nt").unwrap(),
        Nanos::from_secs(21),
    );
    let error = vantage_trace::certes::capture_input(&file.path, None, None, &model)
        .expect_err("no listener answered");
    let message = error.to_string();
    assert!(!message.contains("no SYN captured"), "{message}");
    assert!(
        message.contains("1000 connections opened by a SYN"),
        "{message}"
    );
}
