//! The decoder on hand-built frames: every link type, both IP versions,
//! VLAN stacks, IPv6 extension headers, TCP options, truncation and
//! offload lengths; and, over the real traces, agreement with etherparse.

mod common;

use common::*;
use vantage_core::Nanos;
use vantage_trace::{
    decode_frame, LinkType, OptionsParse, SackBlock, SkipReason, TcpOptions, TcpTimestamps,
    TraceReader,
};

fn v4_segment() -> Tcp {
    Tcp::new(("10.0.0.1", 40000), ("10.0.0.2", 80), 1000, 2000, ACK | PSH)
        .payload(100)
        .ip_id(77)
}

fn v6_segment() -> Tcp {
    Tcp::new(("2001:db8::1", 40000), ("2001:db8::2", 443), 5, 6, ACK).payload(10)
}

fn check_v4(link_type: LinkType, frame: &[u8]) {
    let segment = decode_frame(link_type, Nanos(9), frame, frame.len() as u32)
        .unwrap_or_else(|reason| panic!("{link_type:?}: {reason:?}"));
    assert_eq!(segment.timestamp, Nanos(9));
    assert_eq!(segment.source.to_string(), "10.0.0.1:40000");
    assert_eq!(segment.destination.to_string(), "10.0.0.2:80");
    assert_eq!((segment.seq, segment.ack), (1000, 2000));
    assert!(segment.flags.ack() && !segment.flags.syn());
    assert_eq!(segment.flags.to_string(), "P.");
    assert_eq!(segment.ip_id, 77);
    assert_eq!(segment.checksum, 0xABCD);
    assert_eq!(segment.payload_len, 100);
    assert_eq!(segment.payload.len(), 100);
    assert_eq!(segment.payload[99], 99);
    assert!(!segment.truncated);
}

fn check_v6(link_type: LinkType, frame: &[u8]) {
    let segment = decode_frame(link_type, Nanos(0), frame, frame.len() as u32)
        .unwrap_or_else(|reason| panic!("{link_type:?}: {reason:?}"));
    assert_eq!(segment.source.to_string(), "[2001:db8::1]:40000");
    assert_eq!(segment.destination.to_string(), "[2001:db8::2]:443");
    assert_eq!(segment.payload_len, 10);
    assert_eq!(segment.ip_id, 0);
}

#[test]
fn ethernet_ipv4_and_ipv6() {
    check_v4(LinkType::ETHERNET, &v4_segment().ethernet());
    check_v6(LinkType::ETHERNET, &v6_segment().ethernet());
}

#[test]
fn ethernet_padding_is_not_payload() {
    // A pure ACK is 54 bytes; Ethernet pads it to 60.
    let mut frame = Tcp::new(("10.0.0.1", 1), ("10.0.0.2", 2), 1, 1, ACK).ethernet();
    frame.extend_from_slice(&[0; 6]);
    let segment = decode_frame(LinkType::ETHERNET, Nanos(0), &frame, 60).unwrap();
    assert_eq!(segment.payload_len, 0);
    assert!(segment.payload.is_empty());
}

#[test]
fn vlan_single_and_qinq() {
    let ip = v4_segment().ip_bytes();
    // 802.1Q.
    let mut frame = ethernet_header(0x8100);
    frame.extend_from_slice(&[0x00, 0x64, 0x08, 0x00]);
    frame.extend_from_slice(&ip);
    check_v4(LinkType::ETHERNET, &frame);
    // QinQ: 802.1ad outer, 802.1Q inner, carrying IPv6.
    let mut frame = ethernet_header(0x88A8);
    frame.extend_from_slice(&[0x00, 0x0A, 0x81, 0x00]);
    frame.extend_from_slice(&[0x00, 0x14, 0x86, 0xDD]);
    frame.extend_from_slice(&v6_segment().ip_bytes());
    check_v6(LinkType::ETHERNET, &frame);
    // A tag cut short.
    let frame = [ethernet_header(0x8100), vec![0x00]].concat();
    assert_eq!(
        decode_frame(LinkType::ETHERNET, Nanos(0), &frame, 15),
        Err(SkipReason::TruncatedLinkHeader)
    );
}

#[test]
fn ieee_802_3_with_snap() {
    let ip = v4_segment().ip_bytes();
    let mut frame = ethernet_header((ip.len() + 8) as u16);
    frame.extend_from_slice(&[0xAA, 0xAA, 0x03, 0, 0, 0, 0x08, 0x00]);
    frame.extend_from_slice(&ip);
    check_v4(LinkType::ETHERNET, &frame);
    // Plain 802.2 LLC (spanning tree) is not IP.
    let mut frame = ethernet_header(38);
    frame.extend_from_slice(&[0x42, 0x42, 0x03, 0, 0, 0, 0, 0]);
    assert_eq!(
        decode_frame(LinkType::ETHERNET, Nanos(0), &frame, 60),
        Err(SkipReason::NotIp)
    );
}

#[test]
fn linux_sll_and_sll2() {
    let ip = v4_segment().ip_bytes();
    // SLL: packet type, ARPHRD, address length, 8 address bytes, protocol.
    let mut frame = vec![0, 4, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0, 0x08, 0x00];
    frame.extend_from_slice(&ip);
    check_v4(LinkType::LINUX_SLL, &frame);
    // SLL2: protocol, reserved, interface index, ARPHRD, packet type,
    // address length, 8 address bytes.
    let mut frame = vec![
        0x86, 0xDD, 0, 0, 0, 0, 0, 3, 0, 1, 4, 6, 2, 0, 0, 0, 0, 1, 0, 0,
    ];
    frame.extend_from_slice(&v6_segment().ip_bytes());
    check_v6(LinkType::LINUX_SLL2, &frame);
    // SLL carrying a VLAN tag.
    let mut frame = vec![0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0, 0x81, 0x00];
    frame.extend_from_slice(&[0, 7, 0x08, 0x00]);
    frame.extend_from_slice(&ip);
    check_v4(LinkType::LINUX_SLL, &frame);
    assert_eq!(
        decode_frame(LinkType::LINUX_SLL2, Nanos(0), &frame[..19], 19),
        Err(SkipReason::TruncatedLinkHeader)
    );
}

#[test]
fn raw_ip_all_values() {
    for link_type in [LinkType::RAW, LinkType::RAW_12, LinkType::RAW_14] {
        check_v4(link_type, &v4_segment().ip_bytes());
        check_v6(link_type, &v6_segment().ip_bytes());
    }
    check_v4(LinkType::IPV4, &v4_segment().ip_bytes());
    check_v6(LinkType::IPV6, &v6_segment().ip_bytes());
    assert_eq!(
        decode_frame(LinkType::RAW, Nanos(0), &[0x50; 40], 40),
        Err(SkipReason::NotIp)
    );
}

#[test]
fn bsd_loopback_both_byte_orders_and_loop() {
    let ip4 = v4_segment().ip_bytes();
    let ip6 = v6_segment().ip_bytes();
    // DLT_NULL in the capturing host's order: little-endian AF_INET = 2.
    check_v4(LinkType::NULL, &[&2u32.to_le_bytes()[..], &ip4].concat());
    // Big-endian host (e.g. SPARC): still AF_INET.
    check_v4(LinkType::NULL, &[&2u32.to_be_bytes()[..], &ip4].concat());
    // AF_INET6 of each BSD and Linux.
    for family in [10u32, 24, 28, 30] {
        check_v6(LinkType::NULL, &[&family.to_le_bytes()[..], &ip6].concat());
        check_v6(LinkType::NULL, &[&family.to_be_bytes()[..], &ip6].concat());
    }
    // DLT_LOOP is always network order.
    check_v4(LinkType::LOOP, &[&2u32.to_be_bytes()[..], &ip4].concat());
    check_v6(LinkType::LOOP, &[&30u32.to_be_bytes()[..], &ip6].concat());
    assert_eq!(
        decode_frame(
            LinkType::NULL,
            Nanos(0),
            &[&7u32.to_le_bytes()[..], &ip4].concat(),
            100
        ),
        Err(SkipReason::NotIp)
    );
}

#[test]
fn fddi_with_snap() {
    let mut frame = vec![0x50];
    frame.extend_from_slice(&[0; 12]);
    frame.extend_from_slice(&[0xAA, 0xAA, 0x03, 0, 0, 0, 0x08, 0x00]);
    frame.extend_from_slice(&v4_segment().ip_bytes());
    check_v4(LinkType::FDDI, &frame);
}

#[test]
fn unknown_link_type_and_non_tcp_are_skip_reasons() {
    let frame = v4_segment().ethernet();
    assert_eq!(
        decode_frame(LinkType(147), Nanos(0), &frame, 100),
        Err(SkipReason::UnsupportedLinkType)
    );
    // ARP.
    let mut arp = ethernet_header(0x0806);
    arp.extend_from_slice(&[0; 28]);
    assert_eq!(
        decode_frame(LinkType::ETHERNET, Nanos(0), &arp, 42),
        Err(SkipReason::NotIp)
    );
    // UDP over IPv4.
    let mut udp = ethernet_header(0x0800);
    udp.extend_from_slice(&ipv4_header(8, 1, 17));
    udp.extend_from_slice(&[0; 8]);
    assert_eq!(
        decode_frame(LinkType::ETHERNET, Nanos(0), &udp, 42),
        Err(SkipReason::NotTcp)
    );
    // A non-first IPv4 fragment.
    let mut fragment = v4_segment().ip_bytes();
    fragment[6..8].copy_from_slice(&0x0010u16.to_be_bytes());
    assert_eq!(
        decode_frame(LinkType::RAW, Nanos(0), &fragment, 200),
        Err(SkipReason::IpFragment)
    );
    // Bad IHL, and a data offset below 5.
    let mut bad = v4_segment().ip_bytes();
    bad[0] = 0x44;
    assert_eq!(
        decode_frame(LinkType::RAW, Nanos(0), &bad, 200),
        Err(SkipReason::MalformedIpHeader)
    );
    let mut bad = v4_segment().ip_bytes();
    bad[20 + 12] = 0x40;
    assert_eq!(
        decode_frame(LinkType::RAW, Nanos(0), &bad, 200),
        Err(SkipReason::MalformedTcpHeader)
    );
}

#[test]
fn ipv6_extension_headers_are_skipped() {
    let tcp = v6_segment().tcp_bytes();
    // Hop-by-hop (8 bytes) -> destination options (16 bytes) -> fragment
    // (atomic) -> TCP.
    let mut extensions = vec![60, 0, 1, 4, 0, 0, 0, 0];
    extensions.extend_from_slice(&[44, 1, 1, 12]);
    extensions.extend_from_slice(&[0; 12]);
    extensions.extend_from_slice(&[6, 0, 0, 0, 0, 0, 0, 1]);
    let mut packet = ipv6_header(extensions.len() + tcp.len(), 0);
    packet[8..24].copy_from_slice(
        &"2001:db8::1"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets(),
    );
    packet[24..40].copy_from_slice(
        &"2001:db8::2"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets(),
    );
    packet.extend_from_slice(&extensions);
    packet.extend_from_slice(&tcp);
    check_v6(LinkType::RAW, &packet);

    // A real fragment (offset 8) is skipped.
    let mut fragmented = packet.clone();
    fragmented[40 + 24 + 2..40 + 24 + 4].copy_from_slice(&(8u16 << 3).to_be_bytes());
    assert_eq!(
        decode_frame(LinkType::RAW, Nanos(0), &fragmented, 200),
        Err(SkipReason::IpFragment)
    );
    // Cut inside the extension headers.
    assert_eq!(
        decode_frame(LinkType::RAW, Nanos(0), &packet[..50], 200),
        Err(SkipReason::TruncatedIpHeader)
    );
    // ESP hides the transport.
    let mut esp = ipv6_header(16, 50);
    esp.extend_from_slice(&[0; 16]);
    assert_eq!(
        decode_frame(LinkType::RAW, Nanos(0), &esp, 56),
        Err(SkipReason::NotTcp)
    );
}

#[test]
fn ipv6_jumbo_payload_option() {
    let tcp = v6_segment().tcp_bytes();
    // Payload length 0 and a hop-by-hop jumbo option (RFC 2675).
    let jumbo_len = (8 + tcp.len()) as u32;
    let mut hop_by_hop = vec![6, 0, 0xC2, 4];
    hop_by_hop.extend_from_slice(&jumbo_len.to_be_bytes());
    let mut packet = ipv6_header(0, 0);
    packet.extend_from_slice(&hop_by_hop);
    packet.extend_from_slice(&tcp);
    let segment = decode_frame(LinkType::RAW, Nanos(0), &packet, packet.len() as u32).unwrap();
    assert_eq!(segment.payload_len, 10);
    assert!(!segment.length_from_frame);
}

#[test]
fn tcp_options_all_kinds() {
    let tcp = Tcp::new(("10.0.0.1", 1), ("10.0.0.2", 2), 0, 0, SYN)
        .options(syn_options(1460, 7, 123_456));
    let packet = tcp.ip_bytes();
    let options = decode_frame(LinkType::RAW, Nanos(0), &packet, 200)
        .unwrap()
        .options;
    assert_eq!(options.mss, Some(1460));
    assert_eq!(options.window_scale, Some(7));
    assert!(options.sack_permitted);
    assert_eq!(
        options.timestamps,
        Some(TcpTimestamps {
            value: 123_456,
            echo_reply: 0
        })
    );
    assert!(options.sack_blocks().is_empty());
    assert_eq!(options.parse, OptionsParse::Complete);

    // Four SACK blocks fill the 40 option bytes.
    let tcp = Tcp::new(("10.0.0.1", 1), ("10.0.0.2", 2), 0, 0, ACK).options(sack_options(&[
        (1, 2),
        (3, 4),
        (5, 6),
        (7, 8),
    ]));
    let packet = tcp.ip_bytes();
    let options = decode_frame(LinkType::RAW, Nanos(0), &packet, 200)
        .unwrap()
        .options;
    assert_eq!(
        options.sack_blocks(),
        &[
            SackBlock { left: 1, right: 2 },
            SackBlock { left: 3, right: 4 },
            SackBlock { left: 5, right: 6 },
            SackBlock { left: 7, right: 8 }
        ]
    );
    assert_eq!(options.mss, None);
    assert_eq!(options.parse, OptionsParse::Complete);
}

/// NOP, NOP, timestamps (read by a shortcut) parse as the same option
/// bytes in another order do (read by the general loop).
#[test]
fn the_usual_timestamp_layout_parses_as_any_other() {
    let usual = [1, 1, 8, 10, 0, 1, 226, 64, 0, 0, 0, 7];
    let reordered = [8, 10, 0, 1, 226, 64, 0, 0, 0, 7, 1, 1];
    for cut in [false, true] {
        let options = TcpOptions::parse(&usual, cut);
        assert_eq!(options, TcpOptions::parse(&reordered, cut));
        assert_eq!(
            options.timestamps,
            Some(TcpTimestamps {
                value: 123_456,
                echo_reply: 7
            })
        );
    }
    assert_eq!(
        TcpOptions::parse(&usual, false).parse,
        OptionsParse::Complete
    );
    assert_eq!(
        TcpOptions::parse(&usual, true).parse,
        OptionsParse::Truncated
    );
}

#[test]
fn malformed_options_keep_what_came_before() {
    // MSS, then an option with length 1 (invalid).
    let tcp = Tcp::new(("10.0.0.1", 1), ("10.0.0.2", 2), 0, 0, SYN)
        .options(vec![2, 4, 5, 180, 3, 1, 0, 0]);
    let packet = tcp.ip_bytes();
    let segment = decode_frame(LinkType::RAW, Nanos(0), &packet, 200).unwrap();
    assert_eq!(segment.options.mss, Some(1460));
    assert_eq!(segment.options.parse, OptionsParse::Malformed);
    assert_eq!(segment.options.window_scale, None);
}

#[test]
fn snaplen_truncation_keeps_lengths_from_ip() {
    // A SYN whose options are cut after the MSS (as in a snaplen-68 trace
    // with IP options), and a data segment cut inside its payload.
    let syn = Tcp::new(("10.0.0.1", 1), ("10.0.0.2", 2), 0, 0, SYN)
        .options(syn_options(1460, 2, 9))
        .ethernet();
    let cut = &syn[..14 + 20 + 20 + 6];
    let segment = decode_frame(LinkType::ETHERNET, Nanos(0), cut, syn.len() as u32).unwrap();
    assert_eq!(segment.options.mss, Some(1460));
    assert_eq!(segment.options.parse, OptionsParse::Truncated);
    assert!(segment.truncated);

    let data = v4_segment().ethernet();
    let segment =
        decode_frame(LinkType::ETHERNET, Nanos(0), &data[..68], data.len() as u32).unwrap();
    assert_eq!(segment.payload_len, 100);
    assert_eq!(segment.payload.len(), 68 - 54);
    assert!(segment.truncated);

    // Fewer than 20 bytes of TCP header: a skip reason, not an error.
    assert_eq!(
        decode_frame(LinkType::ETHERNET, Nanos(0), &data[..50], data.len() as u32),
        Err(SkipReason::TruncatedTcpHeader)
    );
    assert_eq!(
        decode_frame(LinkType::ETHERNET, Nanos(0), &data[..30], data.len() as u32),
        Err(SkipReason::TruncatedIpHeader)
    );
}

#[test]
fn offload_zero_ip_length_uses_the_frame() {
    // TSO: IPv4 total length 0 in a 64 KB super-segment seen on the sender.
    let tcp = v4_segment().payload(20_000);
    let mut frame = tcp.ethernet();
    let wire_len = frame.len() as u32;
    frame[14 + 2..14 + 4].copy_from_slice(&[0, 0]);
    let segment = decode_frame(LinkType::ETHERNET, Nanos(0), &frame[..96], wire_len).unwrap();
    assert!(segment.length_from_frame);
    assert_eq!(segment.payload_len, 20_000);
    // IPv6 payload length 0 without a jumbo option: same.
    let mut packet = v6_segment().payload(5_000).ip_bytes();
    packet[4..6].copy_from_slice(&[0, 0]);
    let segment =
        decode_frame(LinkType::RAW, Nanos(0), &packet[..80], packet.len() as u32).unwrap();
    assert!(segment.length_from_frame);
    assert_eq!(segment.payload_len, 5_000);
}

/// Every TCP packet of every real trace decodes to the same ports,
/// sequence numbers, flags, window and option values as etherparse finds
/// (where etherparse can slice the full TCP header), and no trace packet
/// that etherparse sees as TCP is skipped by us.
#[test]
fn agrees_with_etherparse_on_real_traces() {
    let mut compared = 0;
    for folder in ["zeek", "tcptrace"] {
        for path in trace_files(folder) {
            let mut reader = TraceReader::open(&path).unwrap();
            while let Some(packet) = reader.next_packet().unwrap() {
                if packet.link_type != LinkType::ETHERNET {
                    continue;
                }
                let Ok(sliced) = etherparse::LaxSlicedPacket::from_ethernet(packet.data) else {
                    continue;
                };
                let Some(etherparse::TransportSlice::Tcp(tcp)) = sliced.transport else {
                    continue;
                };
                let ours = vantage_trace::decode(&packet)
                    .unwrap_or_else(|reason| panic!("{}: {reason:?}", path.display()));
                assert_eq!(ours.source.port, tcp.source_port());
                assert_eq!(ours.destination.port, tcp.destination_port());
                assert_eq!(ours.seq, tcp.sequence_number());
                assert_eq!(ours.ack, tcp.acknowledgment_number());
                assert_eq!(ours.window, tcp.window_size());
                assert_eq!(ours.flags.syn(), tcp.syn());
                assert_eq!(ours.flags.fin(), tcp.fin());
                assert_eq!(ours.flags.rst(), tcp.rst());
                assert_eq!(ours.flags.ack(), tcp.ack());
                for option in tcp.options_iterator().flatten() {
                    use etherparse::TcpOptionElement as O;
                    match option {
                        O::MaximumSegmentSize(mss) => assert_eq!(ours.options.mss, Some(mss)),
                        O::WindowScale(scale) => assert_eq!(ours.options.window_scale, Some(scale)),
                        O::SelectiveAcknowledgementPermitted => {
                            assert!(ours.options.sack_permitted)
                        }
                        O::Timestamp(value, echo) => assert_eq!(
                            ours.options.timestamps,
                            Some(TcpTimestamps {
                                value,
                                echo_reply: echo
                            })
                        ),
                        O::SelectiveAcknowledgement(first, rest) => {
                            let blocks = ours.options.sack_blocks();
                            assert_eq!((blocks[0].left, blocks[0].right), first);
                            let others: Vec<(u32, u32)> = rest.iter().flatten().copied().collect();
                            let ours_rest: Vec<(u32, u32)> =
                                blocks[1..].iter().map(|b| (b.left, b.right)).collect();
                            assert_eq!(ours_rest, others);
                        }
                        _ => {}
                    }
                }
                if let Some(etherparse::LaxNetSlice::Ipv4(ipv4)) = &sliced.net {
                    let header = ipv4.header();
                    let tcp_len = usize::from(header.total_len()) - header.slice().len();
                    if header.total_len() != 0 {
                        assert_eq!(
                            ours.payload_len as usize,
                            tcp_len - tcp.header_len(),
                            "{}",
                            path.display()
                        );
                    }
                }
                compared += 1;
            }
        }
    }
    if common::shared_traces().is_some() {
        assert!(compared > 40_000, "compared {compared} packets");
    }
}
