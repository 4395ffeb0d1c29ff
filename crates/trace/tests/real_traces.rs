//! Real captures nobody here made (`../shared/traces/`, from the Zeek and
//! tcptrace test suites): every file parses without error, and facts about
//! some of them are pinned to numbers obtained independently with
//! tshark 4.0 / capinfos / tcptrace 6.6.7 — the command is given with each.
//! Without the shared folder the tests print why and pass.

mod common;

use common::*;
use vantage_trace::{
    decode, summarize, summarize_reader, ConnectionTable, TableConfig, TraceReader, TraceSummary,
};

fn summary_of(relative: &str) -> Option<TraceSummary> {
    let root = shared_traces()?;
    Some(summarize(root.join(relative)).unwrap_or_else(|error| panic!("{error}")))
}

/// Per file: packets (`capinfos -c FILE`), TCP segments (`tshark -r FILE
/// -Y tcp | wc -l`) and connections (`tshark -r FILE -T fields -e
/// tcp.stream | sort -u | wc -l`; tshark splits port reuse too).
const EXPECTED: &[(&str, u64, u64, u64)] = &[
    (
        "zeek/http_1000-requests-one-dropped-response.pcap.gz",
        4102,
        4102,
        1,
    ),
    ("zeek/http_bro.org.pcap", 751, 751, 13),
    ("zeek/http_get-without-fins.pcap", 11, 11, 1),
    ("zeek/http_get.pcap", 14, 14, 1),
    ("zeek/http_http-post-large.pcap", 38, 38, 2),
    ("zeek/http_m57-long-49600-80.pcap", 52, 52, 1),
    ("zeek/http_pipelined-requests.pcap", 49, 49, 1),
    ("zeek/tcp_fin_retransmission.pcap", 5, 5, 1),
    ("zeek/tcp_handshake-reorder.pcap", 14, 14, 1),
    ("zeek/tcp_http-on-irc-port-missing-syn.pcapng", 13, 13, 1),
    ("zeek/tcp_missing-syn.pcap", 21, 21, 1),
    ("zeek/tcp_no-handshake.pcap", 1, 1, 1),
    ("zeek/tcp_option-sack.pcap", 4, 4, 1),
    ("zeek/tcp_options.pcap", 4, 4, 1),
    ("zeek/tcp_reassembly.pcap", 117, 117, 1),
    ("zeek/tcp_retransmit-fast009.pcap", 39, 39, 1),
    ("zeek/tcp_retransmit-timeout.pcapng", 3, 3, 1),
    ("zeek/tcp_rst-inject-rae.pcap", 9, 9, 1),
    ("zeek/tcp_syn-then-rst.pcap", 2, 2, 1),
    ("zeek/tcp_tcp-fast-open.pcap", 16, 16, 2),
    ("zeek/tcp_timestamp.pcap", 878, 878, 1),
    ("zeek/tcp_truncated-header.pcap", 24, 24, 1),
    ("zeek/tcp_window-scale-range.pcap", 5, 5, 1),
    ("tcptrace/6syns.dmp.gz", 68, 68, 2),
    ("tcptrace/bad_tcp_checksum.dmp.gz", 10, 10, 1),
    ("tcptrace/badsyns.dmp.gz", 17, 17, 2),
    ("tcptrace/dsack.dmp.gz", 15712, 15710, 1),
    ("tcptrace/first_seg_ooo.dmp.gz", 243, 243, 1),
    ("tcptrace/http.dmp.gz", 1270, 1270, 61),
    ("tcptrace/long_rtt.dmp.gz", 42, 42, 1),
    ("tcptrace/single_byte_rexmit.dmp.gz", 27, 27, 1),
    ("tcptrace/zwnd.dmp.gz", 26690, 26686, 1),
];

#[test]
fn every_shared_trace_parses_and_matches_tshark_counts() {
    let mut files = trace_files("zeek");
    files.extend(trace_files("tcptrace"));
    if files.is_empty() {
        return;
    }
    for path in &files {
        let summary = summarize(path).unwrap_or_else(|error| panic!("{error}"));
        let name = path
            .strip_prefix(shared_traces().unwrap())
            .unwrap()
            .to_string_lossy()
            .to_string();
        let Some(&(_, packets, tcp, connections)) =
            EXPECTED.iter().find(|(file, ..)| *file == name)
        else {
            // A file added to the shared folder later: it must still parse.
            eprintln!("{name}: parsed, no pinned counts");
            continue;
        };
        assert_eq!(summary.packets, packets, "{name} packets");
        assert_eq!(summary.tcp_segments, tcp, "{name} TCP segments");
        assert_eq!(summary.connections, connections, "{name} connections");
        assert_eq!(summary.skipped.total(), packets - tcp, "{name} skipped");
    }
    assert!(files.len() >= EXPECTED.len());
}

#[test]
fn same_address_both_ends_and_retransmitted_syns_with_sack_blocks() {
    // tcp_option-sack.pcap: 127.0.0.1:20 -> 127.0.0.1:80, four SYNs with the
    // same ISN carrying 1, 2, 3 and 4 SACK blocks.
    //   tshark -r tcp_option-sack.pcap -T fields -e ip.src -e ip.dst \
    //     -e tcp.options.sack.count -e tcp.seq_raw
    //   -> 127.0.0.1 127.0.0.1 {1,2,3,4} 0 on every line
    //   tshark -r tcp_option-sack.pcap -Y 'tcp.flags.syn==1 && tcp.flags.ack==0' | wc -l -> 4
    let Some(root) = shared_traces() else { return };
    let path = root.join("zeek/tcp_option-sack.pcap");
    let mut reader = TraceReader::open(&path).unwrap();
    let mut sack_counts = Vec::new();
    while let Some(packet) = reader.next_packet().unwrap() {
        let segment = decode(&packet).unwrap();
        assert_eq!(segment.source.ip, segment.destination.ip);
        assert_eq!(segment.seq, 0);
        sack_counts.push(segment.options.sack_blocks().len());
    }
    assert_eq!(sack_counts, vec![1, 2, 3, 4]);
    let summary = summarize(&path).unwrap();
    assert_eq!(summary.connections, 1);
    assert_eq!(summary.syn_retransmissions, 3);
}

#[test]
fn port_reuse_and_repeated_syns_in_the_tcptrace_traces() {
    // 6syns.dmp.gz: six SYNs on one 4-tuple, two connections (the second
    // reuses the port with a new ISN).
    //   tshark -r 6syns.dmp.gz -Y 'tcp.flags.syn==1 && tcp.flags.ack==0' | wc -l -> 6
    //   tshark -r 6syns.dmp.gz -T fields -e tcp.stream | sort -u | wc -l -> 2
    //   tcptrace -n 6syns.dmp.gz -> "1: ... (a2b)" and "2: ... (c2d)"
    let Some(six) = summary_of("tcptrace/6syns.dmp.gz") else {
        return;
    };
    assert_eq!(six.connections, 2);
    assert_eq!(six.connections_with_handshake, 2);
    assert_eq!(six.syn_retransmissions, 6 - 2);
    // badsyns.dmp.gz: four SYNs never answered, then a new ISN that is.
    //   tshark ... -Y 'tcp.flags.syn==1 && tcp.flags.ack==0' | wc -l -> 5
    //   tshark ... -Y 'tcp.flags.syn==1 && tcp.flags.ack==1' | wc -l -> 1
    //   tcptrace -n badsyns.dmp.gz -> 2 connections, the first "unidirectional"
    let bad = summary_of("tcptrace/badsyns.dmp.gz").unwrap();
    assert_eq!(bad.connections, 2);
    assert_eq!(bad.connections_with_handshake, 1);
    assert_eq!(bad.syn_retransmissions, 5 - 2);
}

#[test]
fn snaplen_truncation_counts() {
    // Segments whose TCP header or payload the snap length cut:
    //   tshark -r FILE -Y 'tcp and frame.cap_len < ip.len + 14' | wc -l
    // (Ethernet, IPv4 only in these files) -> 12, 17985, 11594.
    for (file, truncated) in [
        ("zeek/tcp_truncated-header.pcap", 12),
        ("tcptrace/zwnd.dmp.gz", 17_985),
        ("tcptrace/dsack.dmp.gz", 11_594),
    ] {
        let Some(summary) = summary_of(file) else {
            return;
        };
        assert_eq!(summary.artefacts.truncated_segments, truncated, "{file}");
    }
}

#[test]
fn capture_duplicates_in_a_trace_captured_twice() {
    // http_m57-long-49600-80.pcap holds every packet twice, 1 µs apart
    // (tshark calls the copies retransmissions and dup ACKs):
    //   tshark -r http_m57-long-49600-80.pcap -T fields -e frame.time_epoch \
    //     -e ip.src -e tcp.seq_raw -e tcp.ack_raw -e tcp.len -e tcp.flags \
    //     -e ip.id -e tcp.checksum | awk '{k=$2" "$3" "$4" "$5" "$6" "$7" "$8;
    //     if (k==p && $1-t < 0.001) d++; p=k; t=$1} END {print d}'  -> 26
    let Some(summary) = summary_of("zeek/http_m57-long-49600-80.pcap") else {
        return;
    };
    assert_eq!(summary.artefacts.duplicates, 26);
    assert_eq!(summary.retransmissions, 0);
}

#[test]
fn capture_drops_acknowledged_but_never_seen() {
    // The gap before tshark's "previous segment not captured" frame, in
    // sequence numbers, per stream and direction:
    //   tshark -r FILE -T fields -E separator=, -e frame.number -e tcp.stream \
    //     -e tcp.srcport -e tcp.seq_raw -e tcp.len -e tcp.analysis.lost_segment |
    //   awk -F, '{k=$2" "$3; if ($6!="") print $4-n[k]; e=$4+$5; if (e>n[k]) n[k]=e}'
    // http_1000-requests-one-dropped-response (IPv6, ::1 to ::1, gzip) -> 238
    // http_bro.org.pcap -> 7240. Both gaps are later acknowledged.
    let Some(thousand) = summary_of("zeek/http_1000-requests-one-dropped-response.pcap.gz") else {
        return;
    };
    assert!(thousand.compressed);
    assert_eq!(thousand.artefacts.capture_drops, 1);
    assert_eq!(thousand.artefacts.capture_dropped_bytes, 238);
    let bro = summary_of("zeek/http_bro.org.pcap").unwrap();
    assert_eq!(bro.artefacts.capture_drops, 1);
    assert_eq!(bro.artefacts.capture_dropped_bytes, 7_240);
}

#[test]
fn reordered_handshake_and_missing_syn() {
    // tcp_handshake-reorder.pcap: the SYN-ACK is captured before its SYN
    //   tcpdump -nn -r tcp_handshake-reorder.pcap | head -2  -> "Flags [S.]" then "Flags [S]"
    // tcp_missing-syn.pcap: no SYN from the client at all
    //   tshark -r tcp_missing-syn.pcap -Y 'tcp.flags.syn==1 && tcp.flags.ack==0' | wc -l -> 0
    let Some(root) = shared_traces() else { return };
    let connections = |file: &str| {
        let reader = TraceReader::open(root.join(file)).unwrap();
        let mut table = ConnectionTable::new(TableConfig::default());
        let mut reader = reader;
        while let Some(packet) = reader.next_packet().unwrap() {
            if let Ok(segment) = decode(&packet) {
                table.observe(&segment);
            }
        }
        table.finish_all();
        std::iter::from_fn(|| table.pop_finished()).collect::<Vec<_>>()
    };
    let reordered = connections("zeek/tcp_handshake-reorder.pcap");
    assert_eq!(reordered.len(), 1);
    assert_eq!(reordered[0].opening, vantage_trace::Opening::SynAck);
    assert_eq!(reordered[0].initiator.port, 59_856);
    assert_eq!(reordered[0].artefacts().seen_after_ack, 1);
    assert_eq!(reordered[0].artefacts().capture_drops, 0);
    assert!(reordered[0].closed_by_fins());
    let missing = connections("zeek/tcp_missing-syn.pcap");
    assert_eq!(missing.len(), 1);
    assert_eq!(missing[0].from_initiator.syns, 0);
    // The SYN-ACK acknowledges the unseen SYN: one sequence number dropped.
    assert_eq!(missing[0].from_initiator.artefacts.capture_dropped_bytes, 1);
}

#[test]
fn recording_mode_gives_the_same_counts() {
    let Some(root) = shared_traces() else { return };
    let path = root.join("tcptrace/http.dmp.gz");
    let recorded =
        summarize_reader(TraceReader::open(&path).unwrap(), TableConfig::default()).unwrap();
    assert_eq!(recorded, summarize(&path).unwrap());
}
