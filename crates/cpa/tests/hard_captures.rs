//! Hard captures that gave wrong answers: forwarding duplicates, captures
//! cut off mid-record, unknown link types, pipelining in one segment,
//! requests never answered, and connections that fail before a response.

mod common;

use common::*;
use vantage_cpa::{analyze, conserves, Analysis, CpaError, Inputs, Options};

const CLIENT: (&str, u16) = ("10.0.0.1", 40_000);
const SERVER: (&str, u16) = ("10.0.0.2", 80);
const EPOCH_US: u64 = 1_700_000_000_000_000;

/// Server-side capture of one HTTP/1.0 exchange: a 200-byte GET, 50 ms of
/// think time, a 100-segment response paced 1 ms apart and ACKed every two
/// segments, FINs. 10 ms round trip. IP IDs count up per sender.
fn http_exchange() -> Vec<(u64, Tcp)> {
    let (c, s) = (1_000u32, 5_000u32);
    let mut client_id = 100u16;
    let mut server_id = 9_000u16;
    let mut out = Vec::new();
    let mut client = |at: u64, tcp: Tcp, out: &mut Vec<(u64, Tcp)>| {
        client_id += 1;
        out.push((at, tcp.ip_id(client_id)));
    };
    let mut packets_from_server = Vec::new();
    client(0, Tcp::new(CLIENT, SERVER, c, 0, SYN), &mut out);
    packets_from_server.push((100, Tcp::new(SERVER, CLIENT, s, c + 1, SYN | ACK)));
    let mut get = Tcp::new(CLIENT, SERVER, c + 1, s + 1, ACK | PSH).payload(200);
    get.prefix = b"GET / HTTP/1.0\r\n".to_vec();
    client(10_100, get, &mut out);
    let mut seq = s + 1;
    let mut at = 60_100;
    for i in 0..100u32 {
        let mut data = Tcp::new(SERVER, CLIENT, seq, c + 201, ACK).payload(1000);
        if i == 0 {
            data.prefix = b"HTTP/1.0 200 OK\r\n".to_vec();
        }
        seq += 1000;
        packets_from_server.push((at, data));
        if i % 2 == 1 {
            client(
                at + 10_000,
                Tcp::new(CLIENT, SERVER, c + 201, seq, ACK),
                &mut out,
            );
        }
        at += 1_000;
    }
    packets_from_server.push((at, Tcp::new(SERVER, CLIENT, seq, c + 201, ACK | FIN)));
    client(
        at + 10_000,
        Tcp::new(CLIENT, SERVER, c + 201, seq + 1, ACK | FIN),
        &mut out,
    );
    packets_from_server.push((at + 10_100, Tcp::new(SERVER, CLIENT, seq + 1, c + 202, ACK)));
    for (at, tcp) in packets_from_server {
        server_id += 1;
        out.push((at, tcp.ip_id(server_id)));
    }
    out.sort_by_key(|(at, _)| *at);
    out
}

fn pcap(packets: &[(u64, Tcp)]) -> Vec<u8> {
    let records: Vec<Record> = packets
        .iter()
        .map(|(micros, tcp)| Record::new((EPOCH_US + micros) * 1_000, tcp.ethernet()))
        .collect();
    Pcap::ethernet().file(&records)
}

fn analyze_server(name: &str, bytes: &[u8]) -> Result<Analysis, CpaError> {
    let file = TempFile::new(name, bytes);
    analyze(
        &Inputs {
            server: Some(file.path.clone()),
            client: None,
        },
        &Options::default(),
    )
}

#[test]
fn forwarding_duplicates_give_no_loss_and_the_same_profile() {
    let packets = http_exchange();
    let clean = analyze_server("clean.pcap", &pcap(&packets)).unwrap();
    // Every packet seen again 1 to 20 ms later (both sides of a router).
    let mut doubled: Vec<(u64, bool, Tcp)> = packets
        .iter()
        .enumerate()
        .flat_map(|(i, (at, tcp))| {
            [
                (*at, false, tcp.clone()),
                (at + 1_000 * (1 + i as u64 % 20), true, tcp.clone()),
            ]
        })
        .collect();
    doubled.sort_by_key(|(at, copy, _)| (*at, *copy));
    let doubled: Vec<(u64, Tcp)> = doubled.into_iter().map(|(at, _, t)| (at, t)).collect();
    let analysis = analyze_server("doubled.pcap", &pcap(&doubled)).unwrap();
    assert_eq!(analysis.transactions.len(), 1);
    let (t, reference) = (&analysis.transactions[0], &clean.transactions[0]);
    assert!(conserves(t));
    assert_eq!(t.losses.total(), 0, "{t:#?}");
    assert_eq!(
        t.profile.loss_timeout.0 + t.profile.loss_fast_retransmit.0,
        0
    );
    assert_eq!(t.profile, reference.profile);
    assert_eq!(
        analysis.stats.artefacts.duplicates,
        packets.len() as u64,
        "every copy is a duplicate"
    );
}

#[test]
fn a_capture_cut_off_mid_record_is_analysed_up_to_the_cut() {
    let bytes = pcap(&http_exchange());
    let whole = analyze_server("whole.pcap", &bytes).unwrap();
    let cut = &bytes[..bytes.len() - 30];
    let analysis = analyze_server("cut.pcap", cut).unwrap();
    let input = &analysis.stats.inputs[0];
    assert_eq!(input.packets, whole.stats.inputs[0].packets - 1);
    let message = input.cut_off.as_deref().expect("cut off reported");
    assert!(message.contains("cut.pcap: byte "), "{message}");
    assert!(message.contains("truncated packet record"), "{message}");
    assert_eq!(analysis.transactions.len(), 1);
    assert!(whole.stats.inputs[0].cut_off.is_none());
}

#[test]
fn an_unsupported_link_type_is_an_error_naming_it() {
    let records: Vec<Record> = http_exchange()
        .iter()
        .map(|(micros, tcp)| Record::new((EPOCH_US + micros) * 1_000, tcp.ethernet()))
        .collect();
    let bytes = Pcap {
        link_type: 147,
        ..Pcap::ethernet()
    }
    .file(&records);
    let error = analyze_server("user0.pcap", &bytes).unwrap_err();
    assert!(
        matches!(error, CpaError::UnsupportedLinkType { link_type: 147, .. }),
        "{error}"
    );
    assert!(error.to_string().contains("link type 147 is not supported"));
}

#[test]
fn several_requests_in_one_segment_are_pipelined() {
    let mut packets = http_exchange();
    let get = packets
        .iter_mut()
        .find(|(_, tcp)| tcp.payload_len == 200)
        .expect("the GET");
    get.1.prefix = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\n".to_vec();
    let analysis = analyze_server("pipelined.pcap", &pcap(&packets)).unwrap();
    assert!(analysis.transactions[0].flags.pipelined);
    let plain = analyze_server("plain.pcap", &pcap(&http_exchange())).unwrap();
    assert!(!plain.transactions[0].flags.pipelined);
}

#[test]
fn a_request_never_answered_is_incomplete() {
    let c = 1_000u32;
    let s = 5_000u32;
    let mut get = Tcp::new(CLIENT, SERVER, c + 1, s + 1, ACK | PSH).payload(200);
    get.prefix = b"GET / HTTP/1.0\r\n".to_vec();
    let packets = vec![
        (0, Tcp::new(CLIENT, SERVER, c, 0, SYN).ip_id(1)),
        (100, Tcp::new(SERVER, CLIENT, s, c + 1, SYN | ACK).ip_id(50)),
        (10_100, get.ip_id(2)),
        (
            10_200,
            Tcp::new(SERVER, CLIENT, s + 1, c + 201, ACK).ip_id(51),
        ),
    ];
    let analysis = analyze_server("unanswered.pcap", &pcap(&packets)).unwrap();
    assert_eq!(analysis.transactions.len(), 1);
    assert!(analysis.transactions[0].flags.incomplete);
}

#[test]
fn refused_abandoned_and_reset_connections_are_failures_not_transactions() {
    let c = 1_000u32;
    let s = 5_000u32;
    let port = |p: u16| ("10.0.0.1", p);
    let mut get = Tcp::new(port(3), SERVER, c + 1, s + 1, ACK | PSH).payload(200);
    get.prefix = b"GET / HTTP/1.0\r\n".to_vec();
    let packets = vec![
        // Refused: SYN, RST.
        (0, Tcp::new(port(1), SERVER, c, 0, SYN).ip_id(1)),
        (50, Tcp::new(SERVER, port(1), 0, c + 1, RST | ACK).ip_id(0)),
        // Abandoned: three SYNs, never answered.
        (100, Tcp::new(port(2), SERVER, c, 0, SYN).ip_id(2)),
        (1_000_100, Tcp::new(port(2), SERVER, c, 0, SYN).ip_id(3)),
        (3_000_100, Tcp::new(port(2), SERVER, c, 0, SYN).ip_id(4)),
        // Accepted, request sent, reset by the server without a response.
        (200, Tcp::new(port(3), SERVER, c, 0, SYN).ip_id(5)),
        (
            300,
            Tcp::new(SERVER, port(3), s, c + 1, SYN | ACK).ip_id(60),
        ),
        (10_300, get.ip_id(6)),
        (
            10_400,
            Tcp::new(SERVER, port(3), s + 1, c + 201, RST | ACK).ip_id(61),
        ),
    ];
    let mut packets = packets;
    packets.sort_by_key(|(at, _)| *at);
    let analysis = analyze_server("failures.pcap", &pcap(&packets)).unwrap();
    assert!(
        analysis.transactions.is_empty(),
        "{:#?}",
        analysis.transactions
    );
    let failures = analysis.stats.failures;
    assert_eq!(failures.refused, 1);
    assert_eq!(failures.abandoned, 1);
    assert_eq!(failures.reset_by_server, 1);
    assert_eq!(failures.aborted_by_client, 0);
    let line = vantage_cpa::report::failures_line(&analysis).unwrap();
    assert!(line.contains("1 refused"), "{line}");
}
