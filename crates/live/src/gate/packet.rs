//! Which queued packets are SYNs to a protected listener.
//!
//! The rules already queue only TCP SYNs to the listeners' ports, but the
//! gate checks again from the bytes the kernel copied: a hand-added rule, a
//! wider rule from another tool or a shared queue number may hand it
//! anything, and only a connection request to a listener may meet the
//! filter. Everything else is accepted unchanged and counted as *passed*.
//!
//! Parsing uses etherparse's header slices (`Ipv4HeaderSlice`,
//! `Ipv6HeaderSlice`, `TcpHeaderSlice`), which read the headers in place
//! and need only the headers, not the whole packet: the gate copies 128
//! bytes per packet, room for the largest IPv4 header (60 bytes) or the
//! IPv6 header (40 bytes) and the largest TCP header (60 bytes). IPv6
//! extension headers before TCP (hop-by-hop, routing, destination options,
//! fragment) are skipped as far as the copied bytes reach. A SYN is what
//! iptables `--syn` means: SYN set; ACK, RST and FIN clear. Malformed or
//! truncated input is classified, never a panic.

use std::hash::{Hash, Hasher};
use std::net::IpAddr;

use etherparse::{IpNumber, Ipv4HeaderSlice, Ipv6HeaderSlice, TcpHeaderSlice};

use super::config::Listener;

/// Bytes of each packet the kernel copies to the gate: the largest IPv4
/// header and the largest TCP header (an IPv6 header and the largest TCP
/// header with 28 bytes to spare for extension headers).
pub const COPY_RANGE: u32 = 128;

/// Why a queued packet does not meet the filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PassReason {
    /// Not a well-formed IPv4 or IPv6 header (or cut before its end).
    NotIpv4,
    /// IP but not TCP.
    NotTcp,
    /// A non-first fragment: no TCP header to read.
    Fragment,
    /// The TCP header is malformed or cut short.
    BadTcpHeader,
    /// TCP, but not a connection request (a SYN-ACK, an ACK, a RST, …).
    NotSyn,
    /// A SYN to an address and port no listener protects.
    OtherListener,
}

/// What one queued packet is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PacketClass {
    /// A connection request to a protected listener: the filter decides.
    Syn,
    /// Anything else: accepted unchanged.
    Pass(PassReason),
}

/// Classifies a packet from its network header on (`PacketView::payload`).
pub fn classify(payload: &[u8], listeners: &[Listener]) -> PacketClass {
    match syn_origin(payload, listeners) {
        Ok(_) => PacketClass::Syn,
        Err(reason) => PacketClass::Pass(reason),
    }
}

/// A SYN to a protected listener: which one, and its connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SynOrigin {
    /// Index of the first listener it matches.
    pub listener: usize,
    /// A hash of (source, source port, destination, destination port):
    /// the same for a client's retransmissions of the request.
    pub key: u64,
}

/// [`classify`], with the listener and the connection of a SYN.
pub fn syn_origin(payload: &[u8], listeners: &[Listener]) -> Result<SynOrigin, PassReason> {
    let (source, destination, transport) = match payload.first().map(|b| b >> 4) {
        Some(6) => ipv6_transport(payload)?,
        _ => ipv4_transport(payload)?,
    };
    let Ok(tcp) = TcpHeaderSlice::from_slice(transport) else {
        return Err(PassReason::BadTcpHeader);
    };
    if !tcp.syn() || tcp.ack() || tcp.rst() || tcp.fin() {
        return Err(PassReason::NotSyn);
    }
    let port = tcp.destination_port();
    let listener = listeners
        .iter()
        .position(|l| l.matches(destination, port))
        .ok_or(PassReason::OtherListener)?;
    let mut hasher = std::hash::DefaultHasher::new();
    (source, tcp.source_port(), destination, port).hash(&mut hasher);
    Ok(SynOrigin {
        listener,
        key: hasher.finish(),
    })
}

/// The source, the destination and the bytes after the IPv4 header of a
/// TCP packet.
fn ipv4_transport(payload: &[u8]) -> Result<(IpAddr, IpAddr, &[u8]), PassReason> {
    let ip = Ipv4HeaderSlice::from_slice(payload).map_err(|_| PassReason::NotIpv4)?;
    if ip.protocol() != IpNumber::TCP {
        return Err(PassReason::NotTcp);
    }
    if ip.fragments_offset().value() != 0 {
        return Err(PassReason::Fragment);
    }
    let header_len = usize::from(ip.ihl()) * 4;
    let rest = payload.get(header_len..).ok_or(PassReason::BadTcpHeader)?;
    Ok((
        IpAddr::V4(ip.source_addr()),
        IpAddr::V4(ip.destination_addr()),
        rest,
    ))
}

/// Most IPv6 extension headers skipped before giving up.
const MAX_EXTENSION_HEADERS: usize = 8;

/// The source, the destination and the bytes of the TCP header of an
/// IPv6 packet, after any extension headers.
fn ipv6_transport(payload: &[u8]) -> Result<(IpAddr, IpAddr, &[u8]), PassReason> {
    let ip = Ipv6HeaderSlice::from_slice(payload).map_err(|_| PassReason::NotIpv4)?;
    let source = IpAddr::V6(ip.source_addr());
    let destination = IpAddr::V6(ip.destination_addr());
    let mut next = ip.next_header();
    let mut rest = &payload[ip.slice().len()..];
    for _ in 0..MAX_EXTENSION_HEADERS {
        match next {
            IpNumber::TCP => return Ok((source, destination, rest)),
            IpNumber::IPV6_HEADER_HOP_BY_HOP
            | IpNumber::IPV6_ROUTE_HEADER
            | IpNumber::IPV6_DESTINATION_OPTIONS => {
                let (&header, &length) = rest
                    .first()
                    .zip(rest.get(1))
                    .ok_or(PassReason::BadTcpHeader)?;
                let length = (usize::from(length) + 1) * 8;
                rest = rest.get(length..).ok_or(PassReason::BadTcpHeader)?;
                next = IpNumber(header);
            }
            IpNumber::IPV6_FRAGMENTATION_HEADER => {
                let header = rest.get(..8).ok_or(PassReason::BadTcpHeader)?;
                let offset = u16::from_be_bytes([header[2], header[3]]) >> 3;
                if offset != 0 {
                    return Err(PassReason::Fragment);
                }
                next = IpNumber(header[0]);
                rest = &rest[8..];
            }
            _ => return Err(PassReason::NotTcp),
        }
    }
    Err(PassReason::NotTcp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;

    const SERVER: [u8; 4] = [10, 77, 0, 2];

    fn listeners() -> Vec<Listener> {
        vec![Listener {
            address: Some(IpAddr::from(SERVER)),
            port: 80,
        }]
    }

    /// A hand-built SYN: IPv4 header, TCP header with an MSS option.
    fn hand_built_syn(port: u16) -> Vec<u8> {
        let mut p = vec![
            0x45, 0x00, 0x00, 0x2c, // version 4, IHL 5, total length 44
            0x12, 0x34, 0x40, 0x00, // id, DF
            0x40, 0x06, 0x00, 0x00, // TTL 64, TCP, checksum (unchecked)
            10, 78, 0, 9, // source
            10, 77, 0, 2, // destination
        ];
        p.extend_from_slice(&[
            0xc3,
            0x50, // source port 50000
            (port >> 8) as u8,
            port as u8, // destination port
            0,
            0,
            0,
            1, // sequence
            0,
            0,
            0,
            0, // acknowledgment
            0x60,
            0x02, // data offset 6 words, flags SYN
            0xff,
            0xff, // window
            0,
            0,
            0,
            0, // checksum, urgent
            0x02,
            0x04,
            0x05,
            0xb4, // MSS 1460
        ]);
        p
    }

    fn built(flags: &str, destination: [u8; 4], port: u16) -> Vec<u8> {
        let mut tcp =
            PacketBuilder::ipv4([10, 78, 0, 9], destination, 64).tcp(50000, port, 7, 1024);
        for flag in flags.chars() {
            tcp = match flag {
                'S' => tcp.syn(),
                'A' => tcp.ack(1),
                'R' => tcp.rst(),
                'F' => tcp.fin(),
                _ => unreachable!(),
            };
        }
        let mut out = Vec::new();
        tcp.write(&mut out, &[]).unwrap();
        out
    }

    #[test]
    fn a_hand_built_syn_to_the_listener_meets_the_filter() {
        assert_eq!(
            classify(&hand_built_syn(80), &listeners()),
            PacketClass::Syn
        );
        assert_eq!(
            classify(&hand_built_syn(81), &listeners()),
            PacketClass::Pass(PassReason::OtherListener)
        );
        let any = [Listener {
            address: None,
            port: 81,
        }];
        assert_eq!(classify(&hand_built_syn(81), &any), PacketClass::Syn);
    }

    #[test]
    fn only_bare_syns_are_connection_requests() {
        let l = listeners();
        assert_eq!(classify(&built("S", SERVER, 80), &l), PacketClass::Syn);
        for flags in ["SA", "A", "R", "SR", "SF", "F"] {
            assert_eq!(
                classify(&built(flags, SERVER, 80), &l),
                PacketClass::Pass(PassReason::NotSyn),
                "{flags}"
            );
        }
        assert_eq!(
            classify(&built("S", [10, 77, 0, 3], 80), &l),
            PacketClass::Pass(PassReason::OtherListener)
        );
    }

    #[test]
    fn other_protocols_and_fragments_pass() {
        let mut udp = Vec::new();
        PacketBuilder::ipv4([10, 78, 0, 9], SERVER, 64)
            .udp(5000, 80)
            .write(&mut udp, b"hi")
            .unwrap();
        assert_eq!(
            classify(&udp, &listeners()),
            PacketClass::Pass(PassReason::NotTcp)
        );
        let mut fragment = hand_built_syn(80);
        fragment[6] = 0x00;
        fragment[7] = 0x10; // offset 16 × 8 bytes
        assert_eq!(
            classify(&fragment, &listeners()),
            PacketClass::Pass(PassReason::Fragment)
        );
        let mut not_ip = hand_built_syn(80);
        not_ip[0] = 0x50;
        assert_eq!(
            classify(&not_ip, &listeners()),
            PacketClass::Pass(PassReason::NotIpv4)
        );
        // An IPv4 header where an IPv6 one is announced: cut short.
        let mut ipv6 = hand_built_syn(80);
        ipv6[0] = 0x60;
        assert!(matches!(
            classify(&ipv6, &listeners()),
            PacketClass::Pass(_)
        ));
    }

    const SERVER6: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

    #[test]
    fn a_syns_origin_names_its_listener_and_connection() {
        let two = vec![
            Listener {
                address: None,
                port: 81,
            },
            listeners()[0],
        ];
        let first = syn_origin(&built("S", SERVER, 80), &two).unwrap();
        assert_eq!(first.listener, 1);
        // A retransmission: the same key.
        assert_eq!(
            syn_origin(&hand_built_syn(80), &two).unwrap().key,
            first.key
        );
        let other = syn_origin(&built("S", SERVER, 81), &two).unwrap();
        assert_eq!(other.listener, 0);
        assert_ne!(other.key, first.key);
        assert_eq!(
            syn_origin(&built("SA", SERVER, 80), &two),
            Err(PassReason::NotSyn)
        );
    }

    fn built6(flags: &str, destination: [u8; 16], port: u16) -> Vec<u8> {
        let source = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9];
        let mut tcp = PacketBuilder::ipv6(source, destination, 64).tcp(50000, port, 7, 1024);
        for flag in flags.chars() {
            tcp = match flag {
                'S' => tcp.syn(),
                'A' => tcp.ack(1),
                _ => unreachable!(),
            };
        }
        let mut out = Vec::new();
        tcp.write(&mut out, &[]).unwrap();
        out
    }

    #[test]
    fn ipv6_syns_meet_the_filter() {
        let six = [Listener {
            address: Some(IpAddr::from(SERVER6)),
            port: 80,
        }];
        assert_eq!(classify(&built6("S", SERVER6, 80), &six), PacketClass::Syn);
        assert_eq!(
            classify(&built6("SA", SERVER6, 80), &six),
            PacketClass::Pass(PassReason::NotSyn)
        );
        assert_eq!(
            classify(&built6("S", SERVER6, 81), &six),
            PacketClass::Pass(PassReason::OtherListener)
        );
        let mut other = SERVER6;
        other[15] = 3;
        assert_eq!(
            classify(&built6("S", other, 80), &six),
            PacketClass::Pass(PassReason::OtherListener)
        );
        // An IPv4 listener does not take IPv6 SYNs; an any-address one does.
        assert_eq!(
            classify(&built6("S", SERVER6, 80), &listeners()),
            PacketClass::Pass(PassReason::OtherListener)
        );
        let any = [Listener {
            address: None,
            port: 80,
        }];
        assert_eq!(classify(&built6("S", SERVER6, 80), &any), PacketClass::Syn);
    }

    #[test]
    fn ipv6_extension_headers_are_skipped() {
        let syn = built6("S", SERVER6, 80);
        let six = [Listener {
            address: Some(IpAddr::from(SERVER6)),
            port: 80,
        }];
        // Insert a hop-by-hop header (8 bytes, next header TCP).
        let mut hop = syn[..40].to_vec();
        hop[6] = 0; // next header: hop-by-hop
        hop.extend_from_slice(&[6, 0, 1, 4, 0, 0, 0, 0]);
        hop.extend_from_slice(&syn[40..]);
        let length = (hop.len() - 40) as u16;
        hop[4..6].copy_from_slice(&length.to_be_bytes());
        assert_eq!(classify(&hop, &six), PacketClass::Syn);
        // A fragment header: the first fragment holds TCP, a later one not.
        let mut fragment = syn[..40].to_vec();
        fragment[6] = 44;
        fragment.extend_from_slice(&[6, 0, 0, 1, 0, 0, 0, 7]);
        fragment.extend_from_slice(&syn[40..]);
        let length = (fragment.len() - 40) as u16;
        fragment[4..6].copy_from_slice(&length.to_be_bytes());
        assert_eq!(classify(&fragment, &six), PacketClass::Syn);
        fragment[42] = 0x01; // offset 32 × 8 bytes
        assert_eq!(
            classify(&fragment, &six),
            PacketClass::Pass(PassReason::Fragment)
        );
        // UDP, and headers cut short: classified, no panic.
        let mut udp = syn.clone();
        udp[6] = 17;
        assert_eq!(classify(&udp, &six), PacketClass::Pass(PassReason::NotTcp));
        for len in 0..hop.len() {
            let _ = classify(&hop[..len], &six);
        }
    }

    #[test]
    fn truncated_and_garbage_input_never_panics() {
        let syn = hand_built_syn(80);
        for len in 0..syn.len() {
            let class = classify(&syn[..len], &listeners());
            let expected = if len < 20 {
                PassReason::NotIpv4
            } else {
                PassReason::BadTcpHeader
            };
            assert_eq!(class, PacketClass::Pass(expected), "cut at {len}");
        }
        // A header length pointing past the data.
        let mut long_ihl = syn.clone();
        long_ihl[0] = 0x4f;
        assert!(matches!(
            classify(&long_ihl, &listeners()),
            PacketClass::Pass(_)
        ));
        // Pseudo-random garbage of every length up to 200 bytes.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for len in 0..200 {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state as u8
                })
                .collect();
            let _ = classify(&bytes, &listeners());
            let mut ipv4ish = bytes.clone();
            if let Some(first) = ipv4ish.first_mut() {
                *first = 0x45;
            }
            let _ = classify(&ipv4ish, &listeners());
        }
    }
}
