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

fn single_vantage(ex: &Exchange, name: &str, side: vantage_cpa::Side) -> Analysis {
    let (client, server) = ex.write(name);
    let inputs = match side {
        vantage_cpa::Side::Server => Inputs {
            server: Some(server.path.clone()),
            client: None,
        },
        vantage_cpa::Side::Client => Inputs {
            client: Some(client.path.clone()),
            server: None,
        },
    };
    let analysis = analyze(&inputs, &Options::default()).expect("analysis");
    for t in &analysis.transactions {
        assert!(conserves(t), "transaction {} does not conserve", t.number);
    }
    analysis
}

fn both(ex: &Exchange, name: &str) -> Analysis {
    let (client, server) = ex.write(name);
    let analysis = analyze(
        &Inputs {
            client: Some(client.path.clone()),
            server: Some(server.path.clone()),
        },
        &Options::default(),
    )
    .expect("analysis");
    for t in &analysis.transactions {
        assert!(conserves(t), "transaction {} does not conserve", t.number);
    }
    analysis
}

/// A 10-segment response whose third segment is lost; the client sends
/// the ACKs in `acks` (segment numbers received, in order) and the server
/// re-sends the lost segment at `retransmit_at` ms.
fn one_loss(acks: &[u32], retransmit_at: f64) -> Exchange {
    let mut ex = Exchange::new(10.0, 10.0);
    ex.client(0.0, 0, 0, SYN, 0)
        .server(10.0, 0, 1, SYN | ACK, 0)
        .client(20.0, 1, 1, ACK | PSH, 100);
    for k in 1..=10u32 {
        let at = 30.0 + f64::from(k - 1) * 0.1;
        let seq = 1 + (k - 1) * 1000;
        if k == 3 {
            ex.server_lost(at, seq, 101, ACK, 1000);
        } else {
            ex.server(at, seq, 101, ACK, 1000);
        }
    }
    for (i, &k) in acks.iter().enumerate() {
        let ack = if k <= 2 { 1 + k * 1000 } else { 2001 };
        ex.client(40.0 + i as f64 * 0.1, 101, ack, ACK, 0);
    }
    ex.server(retransmit_at, 2001, 101, ACK, 1000).client(
        retransmit_at + 10.0,
        101,
        10_001,
        ACK,
        0,
    );
    ex
}

#[test]
fn an_early_retransmission_without_evidence_is_a_loss_of_unknown_kind() {
    // One duplicate ACK (it reaches the server at 50.2 ms), no SACK, and
    // the re-send at 51 ms, 20.8 ms after the original: sooner than any
    // timer, but nothing shows a fast retransmit (three duplicates, SACK,
    // or a RACK window of 1.25 RTT = 25 ms).
    let analysis = both(&one_loss(&[1, 2, 4], 51.0), "unknown-kind");
    let t = &analysis.transactions[0];
    assert_eq!(t.losses.unknown, 1, "{t:#?}");
    assert_eq!(t.losses.fast_retransmit, 0);
    assert_eq!(t.losses.timeout, 0);
    assert_eq!(t.profile.loss_unknown, vantage_core::Nanos(ms(20.8)));
    let line = vantage_cpa::report::json_lines(&analysis);
    assert!(line.contains("\"loss_unknown_s\":"), "{line}");
    // With three duplicate ACKs the same re-send is a fast retransmit.
    let analysis = both(&one_loss(&[1, 2, 4, 5, 6], 51.0), "three-duplicates");
    let t = &analysis.transactions[0];
    assert_eq!(t.losses.fast_retransmit, 1);
    assert_eq!(t.losses.unknown, 0);
    let line = vantage_cpa::report::json_lines(&analysis);
    assert!(!line.contains("loss_unknown"), "{line}");
}

#[test]
fn zero_window_probes_are_the_closed_windows_side_not_loss() {
    let mut ex = Exchange::new(10.0, 10.0);
    ex.client(0.0, 0, 0, SYN, 0)
        .server(10.0, 0, 1, SYN | ACK, 0)
        .client(20.0, 1, 1, ACK | PSH, 100)
        .server(30.0, 1, 101, ACK, 1000)
        .window(0)
        .client(40.0, 101, 1001, ACK, 0)
        // Persist timer: one-byte probes, each answered by a zero window.
        .server(240.0, 1001, 101, ACK, 1)
        .window(0)
        .client(250.0, 101, 1001, ACK, 0)
        .server(640.0, 1001, 101, ACK, 1)
        .window(0)
        .client(650.0, 101, 1001, ACK, 0)
        // The client's application reads: the window opens.
        .client(1000.0, 101, 1001, ACK, 0)
        .server(1010.0, 1001, 101, ACK, 1000)
        .client(1020.0, 101, 2001, ACK, 0);
    for side in [vantage_cpa::Side::Server, vantage_cpa::Side::Client] {
        let analysis = single_vantage(&ex, &format!("zero-window-{side:?}"), side);
        let t = &analysis.transactions[0];
        assert_eq!(t.losses.total(), 0, "{side:?}: {t:#?}");
        assert_eq!(t.profile.loss_timeout.0, 0, "{side:?}");
        assert!(
            t.profile.client.as_secs_f64() > 0.9,
            "{side:?}: the client's closed window is the client's time: {:?}",
            t.profile
        );
    }
}

#[test]
fn a_response_re_sent_after_both_fins_is_analysed() {
    // The last response segment is lost; both sides close; the server
    // re-sends it 3 s later (beyond the 2 s close linger).
    let mut ex = Exchange::new(10.0, 10.0);
    ex.client(0.0, 0, 0, SYN, 0)
        .server(10.0, 0, 1, SYN | ACK, 0)
        .client(20.0, 1, 1, ACK | PSH, 100)
        .server(30.0, 1, 101, ACK, 1000)
        .server_lost(30.1, 1001, 101, ACK | PSH, 418)
        .server(30.2, 1419, 101, ACK | FIN, 0)
        .client(40.0, 101, 1001, ACK, 0)
        .client(41.0, 101, 1001, ACK | FIN, 0)
        .server(51.0, 1420, 102, ACK, 0)
        .server(3030.1, 1001, 102, ACK | PSH, 418)
        .client(3040.1, 102, 1420, ACK, 0);
    let analysis = single_vantage(&ex, "after-fins", vantage_cpa::Side::Server);
    assert_eq!(analysis.stats.inputs[0].late_segments, 0);
    let t = &analysis.transactions[0];
    assert_eq!(t.response_bytes, 1418, "{t:#?}");
    assert_eq!(t.losses.timeout, 1);
    assert!(
        t.profile.loss_timeout.as_secs_f64() > 2.9,
        "{:?}",
        t.profile
    );
}

#[test]
fn a_retransmission_whose_original_was_not_captured_is_a_time_out() {
    // The request's first segment is lost before the server's capture;
    // its second arrives; the client re-sends the whole request 2.27 s
    // later. The server's capture never saw the original.
    let mut ex = Exchange::new(10.0, 10.0);
    ex.client(0.0, 0, 0, SYN, 0)
        .server(10.0, 0, 1, SYN | ACK, 0)
        .starting(b"GET / HTTP/1.1\r\n")
        .client_lost(20.0, 1, 1, ACK, 100)
        .client(20.1, 101, 1, ACK | PSH, 51)
        .client(30.1, 1, 1, ACK, 0)
        .starting(b"GET / HTTP/1.1\r\n")
        .client(2290.0, 1, 1, ACK | PSH, 151)
        .starting(b"HTTP/1.1 200 OK\r\n")
        .server(2310.0, 1, 152, ACK | PSH, 1000)
        .client(2320.0, 152, 1001, ACK, 0);
    let analysis = single_vantage(&ex, "original-unseen", vantage_cpa::Side::Server);
    let t = &analysis.transactions[0];
    assert_eq!(t.losses.timeout, 1, "{t:#?}");
    assert!(
        t.profile.loss_timeout.as_secs_f64() > 2.2,
        "{:?}",
        t.profile
    );
    assert!(t.profile.client.as_secs_f64() < 0.1, "{:?}", t.profile);
}

#[test]
fn back_to_back_time_outs_are_loss_not_endpoint_time() {
    // The client uploads three segments, all lost; each is re-sent by the
    // retransmission timer with back-off, one after another's ACK.
    let mut ex = Exchange::new(10.0, 10.0);
    ex.client(0.0, 0, 0, SYN, 0)
        .server(10.0, 0, 1, SYN | ACK, 0)
        .client(20.0, 1, 1, ACK, 0)
        .client_lost(20.1, 1, 1, ACK, 1000)
        .client_lost(20.2, 1001, 1, ACK, 1000)
        .client_lost(20.3, 2001, 1, ACK | PSH, 1000)
        .client(1020.1, 1, 1, ACK, 1000)
        .server(1030.1, 1, 1001, ACK, 0)
        .client(3040.1, 1001, 1, ACK, 1000)
        .server(3050.1, 1, 2001, ACK, 0)
        .client(7060.1, 2001, 1, ACK | PSH, 1000)
        .server(7070.1, 1, 3001, ACK, 0)
        .server(7070.2, 1, 3001, ACK | PSH, 100)
        .client(7080.2, 3001, 101, ACK, 0);
    let analysis = single_vantage(&ex, "back-off", vantage_cpa::Side::Client);
    let t = &analysis.transactions[0];
    let profile = t.profile;
    assert!(profile.loss_timeout.as_secs_f64() > 7.0, "{profile:?}");
    assert!(profile.client.as_secs_f64() < 0.1, "{profile:?}");
    assert!(profile.server.as_secs_f64() < 0.1, "{profile:?}");
    assert!(profile.network_variation.as_secs_f64() < 0.1, "{profile:?}");
}

#[test]
fn out_of_order_timestamps_are_sorted_not_clamped() {
    let packets = http_exchange();
    let clean = analyze_server("in-order.pcap", &pcap(&packets)).unwrap();
    // Two interfaces merged without sorting: the file holds each run of
    // six packets last first, so every ACK precedes the data it answers.
    let mut shuffled = Vec::new();
    for chunk in packets.chunks(6) {
        shuffled.extend(chunk.iter().rev().cloned());
    }
    let analysis = analyze_server("merged.pcap", &pcap(&shuffled)).unwrap();
    let input = &analysis.stats.inputs[0];
    assert!(input.reordering.reordered > 0);
    assert_eq!(input.reordering.overflow, 0);
    assert_eq!(analysis.stats.artefacts.timestamps_clamped, 0);
    let round_trip = analysis.paths[0].round_trip.expect("a round-trip sample");
    assert_eq!(Some(round_trip), clean.paths[0].round_trip);
    assert!(round_trip.0 > 0);
    assert_eq!(
        analysis.transactions[0].profile,
        clean.transactions[0].profile
    );
}
