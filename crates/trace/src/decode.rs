//! Link, network and TCP headers of one captured packet, decoded into a
//! [`Segment`] that borrows the packet's bytes.
//!
//! # What
//!
//! * Link layers: Ethernet II (and 802.3 with LLC/SNAP) with any stack of
//!   802.1Q / 802.1ad / QinQ tags; Linux cooked capture SLL (113) and SLL2
//!   (276); raw IP (101, and the historical 12 and 14); BSD loopback
//!   `DLT_NULL` (0, in either byte order, every BSD's `AF_INET6` value) and
//!   `DLT_LOOP` (108, network order); IPv4 (228) and IPv6 (229); FDDI (10,
//!   with LLC/SNAP: the tcptrace regression traces include one).
//! * IPv4 with options; IPv6 with hop-by-hop, routing, destination,
//!   fragment (atomic fragments only), authentication, mobility, HIP and
//!   shim6 extension headers, and the jumbo payload option.
//! * TCP with its options: MSS, window scale, SACK-permitted, up to four
//!   SACK blocks, timestamps.
//!
//! # Lengths under truncation and offload
//!
//! The payload length of a segment comes from the IP header (total length
//! or payload length), never from the captured bytes, so a snaplen-68
//! capture still says how much data each segment carried
//! ([`Segment::truncated`] tells that the capture cut it). When the IP length
//! field is zero — what segmentation offload (TSO/GSO, "BIG TCP") leaves in
//! super-segments captured on the sending host — the length is taken from
//! the frame's original length instead and [`Segment::length_from_frame`]
//! says so. Ethernet padding is ignored because the IP length bounds the
//! payload.
//!
//! # Why written by hand
//!
//! etherparse (used by the tests as an independent oracle) knows neither
//! SLL2, `DLT_NULL`/`DLT_LOOP` nor FDDI, and its lax decoder drops the whole
//! TCP header when snaplen cut its options; this decoder keeps the fixed
//! 20-byte header and marks the options incomplete. Every read is
//! bounds-checked; nothing here can panic on any input.
//!
//! Packets that are not TCP, and those whose headers cannot be decoded,
//! are not errors: [`decode()`] returns a [`SkipReason`], counted in
//! [`SkipCounts`].

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::Serialize;
use vantage_core::Nanos;

use crate::file::Packet;
pub use crate::link_type::LinkType;

/// One end of a TCP connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Endpoint {
    pub ip: IpAddr,
    pub port: u16,
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ip {
            IpAddr::V4(ip) => write!(f, "{ip}:{}", self.port),
            IpAddr::V6(ip) => write!(f, "[{ip}]:{}", self.port),
        }
    }
}

/// TCP header flags (the low 9 bits of bytes 12–13).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct TcpFlags(pub u16);

impl TcpFlags {
    pub const FIN: u16 = 0x001;
    pub const SYN: u16 = 0x002;
    pub const RST: u16 = 0x004;
    pub const PSH: u16 = 0x008;
    pub const ACK: u16 = 0x010;
    pub const URG: u16 = 0x020;
    pub const ECE: u16 = 0x040;
    pub const CWR: u16 = 0x080;
    /// Accurate-ECN (formerly NS).
    pub const AE: u16 = 0x100;

    pub fn contains(self, flag: u16) -> bool {
        self.0 & flag == flag
    }
    pub fn fin(self) -> bool {
        self.contains(Self::FIN)
    }
    pub fn syn(self) -> bool {
        self.contains(Self::SYN)
    }
    pub fn rst(self) -> bool {
        self.contains(Self::RST)
    }
    pub fn ack(self) -> bool {
        self.contains(Self::ACK)
    }
}

impl fmt::Display for TcpFlags {
    /// tcpdump's notation: `S`, `F`, `R`, `P`, `U`, `E`, `W`, `e`, `.` for ACK.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const LETTERS: [(u16, char); 9] = [
            (TcpFlags::SYN, 'S'),
            (TcpFlags::FIN, 'F'),
            (TcpFlags::PSH, 'P'),
            (TcpFlags::RST, 'R'),
            (TcpFlags::URG, 'U'),
            (TcpFlags::ECE, 'E'),
            (TcpFlags::CWR, 'W'),
            (TcpFlags::AE, 'e'),
            (TcpFlags::ACK, '.'),
        ];
        for (flag, letter) in LETTERS {
            if self.contains(flag) {
                write!(f, "{letter}")?;
            }
        }
        Ok(())
    }
}

/// One SACK block: bytes `[left, right)` received (RFC 2018).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct SackBlock {
    pub left: u32,
    pub right: u32,
}

/// The timestamps option (RFC 7323): TSval and TSecr.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct TcpTimestamps {
    pub value: u32,
    pub echo_reply: u32,
}

/// Whether all of a header's option bytes could be read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub enum OptionsParse {
    /// Every option was read (or there were none).
    #[default]
    Complete,
    /// The capture's snap length cut the options; those before the cut
    /// were read.
    Truncated,
    /// An option's length byte was invalid; options before it were read.
    Malformed,
}

/// The TCP options Vantage uses, parsed from one header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TcpOptions {
    pub mss: Option<u16>,
    /// Shift count as sent (RFC 7323 caps its use at 14).
    pub window_scale: Option<u8>,
    pub sack_permitted: bool,
    pub timestamps: Option<TcpTimestamps>,
    sack_blocks: [SackBlock; 4],
    sack_block_count: u8,
    pub parse: OptionsParse,
}

impl TcpOptions {
    /// The SACK blocks of this header, in the order sent (at most four).
    pub fn sack_blocks(&self) -> &[SackBlock] {
        &self.sack_blocks[..usize::from(self.sack_block_count)]
    }

    /// Parses option bytes (the header after its first 20 bytes, possibly
    /// cut by snaplen: `cut` says whether bytes are missing).
    pub fn parse(bytes: &[u8], cut: bool) -> TcpOptions {
        let mut options = TcpOptions::default();
        // The usual layout of a segment after the handshake (NOP, NOP,
        // timestamps) read at once; the loop below gives the same.
        if bytes.len() == 12 && bytes[..4] == [1, 1, 8, 10] {
            options.timestamps = Some(TcpTimestamps {
                value: be_u32(bytes, 4),
                echo_reply: be_u32(bytes, 8),
            });
            if cut {
                options.parse = OptionsParse::Truncated;
            }
            return options;
        }
        let mut position = 0;
        while position < bytes.len() {
            match bytes[position] {
                0 => return options,
                1 => {
                    position += 1;
                    continue;
                }
                _ => {}
            }
            let Some(&length) = bytes.get(position + 1) else {
                options.parse = OptionsParse::Truncated;
                return options;
            };
            let length = usize::from(length);
            if length < 2 {
                options.parse = OptionsParse::Malformed;
                return options;
            }
            let Some(value) = bytes.get(position + 2..position + length) else {
                options.parse = if cut {
                    OptionsParse::Truncated
                } else {
                    OptionsParse::Malformed
                };
                return options;
            };
            match (bytes[position], length) {
                (2, 4) => options.mss = Some(u16::from_be_bytes([value[0], value[1]])),
                (3, 3) => options.window_scale = Some(value[0]),
                (4, 2) => options.sack_permitted = true,
                (5, _) if (length - 2).is_multiple_of(8) => {
                    for block in value.chunks_exact(8).take(4) {
                        options.sack_blocks[usize::from(options.sack_block_count)] = SackBlock {
                            left: be_u32(block, 0),
                            right: be_u32(block, 4),
                        };
                        options.sack_block_count += 1;
                    }
                }
                (8, 10) => {
                    options.timestamps = Some(TcpTimestamps {
                        value: be_u32(value, 0),
                        echo_reply: be_u32(value, 4),
                    })
                }
                _ => {}
            }
            position += length;
        }
        if cut {
            options.parse = OptionsParse::Truncated;
        }
        options
    }
}

/// One decoded TCP segment, borrowing its captured payload from the packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment<'a> {
    pub timestamp: Nanos,
    pub source: Endpoint,
    pub destination: Endpoint,
    /// IPv4 identification field (0 for IPv6, which has none).
    pub ip_id: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: TcpFlags,
    /// Window field as sent (not yet scaled).
    pub window: u16,
    pub checksum: u16,
    pub options: TcpOptions,
    /// Bytes of TCP payload the segment carried, from the IP length.
    pub payload_len: u32,
    /// The captured part of the payload (shorter than `payload_len` when
    /// the snap length cut it).
    pub payload: &'a [u8],
    /// The capture cut this segment: its payload or its TCP options.
    pub truncated: bool,
    /// The IP length field was zero (segmentation offload) and the length
    /// was taken from the frame's original length.
    pub length_from_frame: bool,
}

impl Segment<'_> {
    /// Sequence space the segment occupies: payload plus one each for SYN
    /// and FIN.
    pub fn sequence_len(&self) -> u64 {
        u64::from(self.payload_len) + u64::from(self.flags.syn()) + u64::from(self.flags.fin())
    }
}

/// Why a packet yielded no TCP segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum SkipReason {
    /// The link type is not one this decoder knows.
    UnsupportedLinkType,
    /// Fewer bytes than the link-layer header needs.
    TruncatedLinkHeader,
    /// Not IPv4 or IPv6 (ARP, LLDP, STP, …).
    NotIp,
    /// Fewer bytes than the IP header (with options or extension headers).
    TruncatedIpHeader,
    /// IP version or lengths inconsistent.
    MalformedIpHeader,
    /// A fragment other than an atomic one: TCP ports are not (all) there.
    IpFragment,
    /// IP carrying something other than TCP (UDP, ICMP, ESP, …).
    NotTcp,
    /// Fewer than the 20 fixed bytes of the TCP header were captured.
    TruncatedTcpHeader,
    /// TCP data offset below 5 or beyond the IP payload.
    MalformedTcpHeader,
}

impl SkipReason {
    /// Every reason, in the order [`SkipCounts`] stores them.
    pub const ALL: [SkipReason; 9] = [
        SkipReason::UnsupportedLinkType,
        SkipReason::TruncatedLinkHeader,
        SkipReason::NotIp,
        SkipReason::TruncatedIpHeader,
        SkipReason::MalformedIpHeader,
        SkipReason::IpFragment,
        SkipReason::NotTcp,
        SkipReason::TruncatedTcpHeader,
        SkipReason::MalformedTcpHeader,
    ];

    /// A short snake_case name, for reports.
    pub fn name(self) -> &'static str {
        match self {
            SkipReason::UnsupportedLinkType => "unsupported_link_type",
            SkipReason::TruncatedLinkHeader => "truncated_link_header",
            SkipReason::NotIp => "not_ip",
            SkipReason::TruncatedIpHeader => "truncated_ip_header",
            SkipReason::MalformedIpHeader => "malformed_ip_header",
            SkipReason::IpFragment => "ip_fragment",
            SkipReason::NotTcp => "not_tcp",
            SkipReason::TruncatedTcpHeader => "truncated_tcp_header",
            SkipReason::MalformedTcpHeader => "malformed_tcp_header",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// How many packets were skipped, by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SkipCounts {
    counts: [u64; SkipReason::ALL.len()],
}

impl SkipCounts {
    pub fn add(&mut self, reason: SkipReason) {
        self.counts[reason.index()] += 1;
    }
    pub fn get(&self, reason: SkipReason) -> u64 {
        self.counts[reason.index()]
    }
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }
    /// Reasons with a non-zero count.
    pub fn iter(&self) -> impl Iterator<Item = (SkipReason, u64)> + '_ {
        SkipReason::ALL
            .iter()
            .map(|&reason| (reason, self.get(reason)))
            .filter(|&(_, count)| count > 0)
    }
}

impl Serialize for SkipCounts {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        for (reason, count) in self.iter() {
            map.serialize_entry(reason.name(), &count)?;
        }
        map.end()
    }
}

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86DD;
const ETHERTYPE_VLAN: u16 = 0x8100;
const ETHERTYPE_QINQ: u16 = 0x88A8;
const ETHERTYPE_QINQ_OLD: u16 = 0x9100;
const MAX_VLAN_TAGS: usize = 8;
const IP_PROTOCOL_TCP: u8 = 6;

/// Decodes a packet read from a trace.
pub fn decode<'a>(packet: &Packet<'a>) -> Result<Segment<'a>, SkipReason> {
    decode_frame(
        packet.link_type,
        packet.timestamp,
        packet.data,
        packet.original_len,
    )
}

/// Decodes one frame of the given link type. `original_len` is the frame's
/// length on the wire (used only when an IP length field is zero).
pub fn decode_frame(
    link_type: LinkType,
    timestamp: Nanos,
    frame: &[u8],
    original_len: u32,
) -> Result<Segment<'_>, SkipReason> {
    let (network_start, network) = link_payload(link_type, frame)?;
    let wire_len = (original_len as usize).max(frame.len());
    let network_wire_len = wire_len.saturating_sub(network_start);
    let bytes = &frame[network_start..];
    match network {
        Network::Ipv4 => decode_ipv4(timestamp, bytes, network_wire_len),
        Network::Ipv6 => decode_ipv6(timestamp, bytes, network_wire_len),
        Network::ByVersion => match bytes.first().map(|byte| byte >> 4) {
            Some(4) => decode_ipv4(timestamp, bytes, network_wire_len),
            Some(6) => decode_ipv6(timestamp, bytes, network_wire_len),
            Some(_) => Err(SkipReason::NotIp),
            None => Err(SkipReason::TruncatedIpHeader),
        },
    }
}

#[derive(Clone, Copy)]
enum Network {
    Ipv4,
    Ipv6,
    /// Raw IP: the version nibble decides.
    ByVersion,
}

/// Finds where the network header starts and which protocol it is.
fn link_payload(link_type: LinkType, frame: &[u8]) -> Result<(usize, Network), SkipReason> {
    match link_type {
        LinkType::ETHERNET => {
            if frame.len() < 14 {
                return Err(SkipReason::TruncatedLinkHeader);
            }
            let ether_type = be_u16(frame, 12);
            if ether_type < 0x0600 {
                // 802.3 length field: IP only inside LLC/SNAP.
                return snap_payload(frame, 14);
            }
            ether_type_payload(frame, 14, ether_type)
        }
        LinkType::LINUX_SLL => {
            if frame.len() < 16 {
                return Err(SkipReason::TruncatedLinkHeader);
            }
            ether_type_payload(frame, 16, be_u16(frame, 14))
        }
        LinkType::LINUX_SLL2 => {
            if frame.len() < 20 {
                return Err(SkipReason::TruncatedLinkHeader);
            }
            ether_type_payload(frame, 20, be_u16(frame, 0))
        }
        LinkType::RAW | LinkType::RAW_12 | LinkType::RAW_14 => Ok((0, Network::ByVersion)),
        LinkType::IPV4 => Ok((0, Network::Ipv4)),
        LinkType::IPV6 => Ok((0, Network::Ipv6)),
        LinkType::NULL | LinkType::LOOP => {
            if frame.len() < 4 {
                return Err(SkipReason::TruncatedLinkHeader);
            }
            let raw = [frame[0], frame[1], frame[2], frame[3]];
            let family = if link_type == LinkType::LOOP {
                u32::from_be_bytes(raw)
            } else {
                // Host byte order of the capturing machine: a family is
                // small, so the order that makes it small is the right one.
                let little = u32::from_le_bytes(raw);
                if little > 0xFFFF {
                    u32::from_be_bytes(raw)
                } else {
                    little
                }
            };
            match family {
                2 => Ok((4, Network::Ipv4)),
                // AF_INET6: Linux 10, NetBSD/OpenBSD 24, FreeBSD 28, macOS 30.
                10 | 24 | 28 | 30 => Ok((4, Network::Ipv6)),
                _ => Err(SkipReason::NotIp),
            }
        }
        LinkType::FDDI => {
            // Frame control, destination and source addresses, then LLC.
            if frame.len() < 13 {
                return Err(SkipReason::TruncatedLinkHeader);
            }
            snap_payload(frame, 13)
        }
        _ => Err(SkipReason::UnsupportedLinkType),
    }
}

/// An LLC/SNAP header (`aa aa 03`, OUI, EtherType) at `at`.
fn snap_payload(frame: &[u8], at: usize) -> Result<(usize, Network), SkipReason> {
    let Some(llc) = frame.get(at..at + 8) else {
        return if frame
            .get(at..at + 3)
            .is_some_and(|llc| llc != [0xAA, 0xAA, 0x03])
        {
            Err(SkipReason::NotIp)
        } else {
            Err(SkipReason::TruncatedLinkHeader)
        };
    };
    if llc[..3] != [0xAA, 0xAA, 0x03] {
        return Err(SkipReason::NotIp);
    }
    ether_type_payload(frame, at + 8, be_u16(llc, 6))
}

/// Dispatches on an EtherType at offset `at`, unwrapping VLAN tags.
fn ether_type_payload(
    frame: &[u8],
    mut at: usize,
    mut ether_type: u16,
) -> Result<(usize, Network), SkipReason> {
    for _ in 0..=MAX_VLAN_TAGS {
        match ether_type {
            ETHERTYPE_IPV4 => return Ok((at, Network::Ipv4)),
            ETHERTYPE_IPV6 => return Ok((at, Network::Ipv6)),
            ETHERTYPE_VLAN | ETHERTYPE_QINQ | ETHERTYPE_QINQ_OLD => {
                // Tag control information, then the inner EtherType.
                if frame.len() < at + 4 {
                    return Err(SkipReason::TruncatedLinkHeader);
                }
                ether_type = be_u16(frame, at + 2);
                at += 4;
            }
            _ => return Err(SkipReason::NotIp),
        }
    }
    Err(SkipReason::NotIp)
}

// Inlined into its callers, as `decode_tcp` into its own: the segment is
// built where the caller keeps it instead of copied out at each level.
#[inline(always)]
fn decode_ipv4(timestamp: Nanos, bytes: &[u8], wire_len: usize) -> Result<Segment<'_>, SkipReason> {
    if bytes.len() < 20 {
        return Err(SkipReason::TruncatedIpHeader);
    }
    if bytes[0] >> 4 != 4 {
        return Err(SkipReason::MalformedIpHeader);
    }
    let header_len = usize::from(bytes[0] & 0x0F) * 4;
    if header_len < 20 {
        return Err(SkipReason::MalformedIpHeader);
    }
    if bytes.len() < header_len {
        return Err(SkipReason::TruncatedIpHeader);
    }
    let total_len = usize::from(be_u16(bytes, 2));
    let (total_len, length_from_frame) = if total_len == 0 {
        (wire_len, true)
    } else {
        (total_len, false)
    };
    if total_len < header_len {
        return Err(SkipReason::MalformedIpHeader);
    }
    let fragment = be_u16(bytes, 6);
    if fragment & 0x3FFF != 0 {
        // More-fragments flag or a non-zero offset.
        return Err(SkipReason::IpFragment);
    }
    if bytes[9] != IP_PROTOCOL_TCP {
        return Err(SkipReason::NotTcp);
    }
    let source = IpAddr::V4(Ipv4Addr::new(bytes[12], bytes[13], bytes[14], bytes[15]));
    let destination = IpAddr::V4(Ipv4Addr::new(bytes[16], bytes[17], bytes[18], bytes[19]));
    let captured_end = bytes.len().min(total_len);
    decode_tcp(
        TcpContext {
            timestamp,
            source,
            destination,
            ip_id: be_u16(bytes, 4),
            tcp_len: total_len - header_len,
            length_from_frame,
        },
        &bytes[header_len..captured_end],
    )
}

fn decode_ipv6(timestamp: Nanos, bytes: &[u8], wire_len: usize) -> Result<Segment<'_>, SkipReason> {
    if bytes.len() < 40 {
        return Err(SkipReason::TruncatedIpHeader);
    }
    if bytes[0] >> 4 != 6 {
        return Err(SkipReason::MalformedIpHeader);
    }
    let declared_payload = usize::from(be_u16(bytes, 4));
    let mut next_header = bytes[6];
    let address = |at: usize| {
        let mut octets = [0u8; 16];
        octets.copy_from_slice(&bytes[at..at + 16]);
        IpAddr::V6(Ipv6Addr::from(octets))
    };
    let (source, destination) = (address(8), address(24));
    let mut position = 40;
    let mut jumbo_payload = None;
    // Each extension header is at least 8 bytes, so this ends.
    loop {
        match next_header {
            IP_PROTOCOL_TCP => break,
            // Hop-by-hop, routing, destination options, mobility, HIP, shim6,
            // and the two experimental values.
            0 | 43 | 60 | 135 | 139 | 140 | 253 | 254 => {
                let Some(header) = bytes.get(position..position + 2) else {
                    return Err(SkipReason::TruncatedIpHeader);
                };
                let length = (usize::from(header[1]) + 1) * 8;
                let Some(extension) = bytes.get(position..position + length) else {
                    return Err(SkipReason::TruncatedIpHeader);
                };
                if next_header == 0 {
                    jumbo_payload = jumbo_option(&extension[2..]);
                }
                next_header = header[0];
                position += length;
            }
            // Fragment header: only an atomic fragment holds a whole segment.
            44 => {
                let Some(header) = bytes.get(position..position + 8) else {
                    return Err(SkipReason::TruncatedIpHeader);
                };
                if be_u16(header, 2) & 0xFFF9 != 0 {
                    return Err(SkipReason::IpFragment);
                }
                next_header = header[0];
                position += 8;
            }
            // Authentication header: length in 4-byte units, minus 2.
            51 => {
                let Some(header) = bytes.get(position..position + 2) else {
                    return Err(SkipReason::TruncatedIpHeader);
                };
                let length = (usize::from(header[1]) + 2) * 4;
                if bytes.len() < position + length {
                    return Err(SkipReason::TruncatedIpHeader);
                }
                next_header = header[0];
                position += length;
            }
            // ESP, no next header, ICMPv6, UDP, anything else.
            _ => return Err(SkipReason::NotTcp),
        }
    }
    let (payload_len, length_from_frame) = match (declared_payload, jumbo_payload) {
        (0, Some(jumbo)) => (jumbo, false),
        (0, None) => (wire_len.saturating_sub(40), true),
        (declared, _) => (declared, false),
    };
    let total_len = 40 + payload_len;
    if total_len < position {
        return Err(SkipReason::MalformedIpHeader);
    }
    let captured_end = bytes.len().min(total_len);
    decode_tcp(
        TcpContext {
            timestamp,
            source,
            destination,
            ip_id: 0,
            tcp_len: total_len - position,
            length_from_frame,
        },
        &bytes[position..captured_end],
    )
}

/// The jumbo payload option (RFC 2675) among hop-by-hop options.
fn jumbo_option(mut options: &[u8]) -> Option<usize> {
    while let Some(&kind) = options.first() {
        if kind == 0 {
            options = &options[1..];
            continue;
        }
        let length = usize::from(*options.get(1)?);
        let value = options.get(2..2 + length)?;
        if kind == 0xC2 && length == 4 {
            return Some(be_u32(value, 0) as usize);
        }
        options = &options[2 + length..];
    }
    None
}

struct TcpContext {
    timestamp: Nanos,
    source: IpAddr,
    destination: IpAddr,
    ip_id: u16,
    /// TCP header plus payload, from the IP length.
    tcp_len: usize,
    length_from_frame: bool,
}

#[inline(always)]
fn decode_tcp(context: TcpContext, captured: &[u8]) -> Result<Segment<'_>, SkipReason> {
    if context.tcp_len < 20 {
        return Err(SkipReason::MalformedTcpHeader);
    }
    if captured.len() < 20 {
        return Err(SkipReason::TruncatedTcpHeader);
    }
    let header_len = usize::from(captured[12] >> 4) * 4;
    if header_len < 20 || header_len > context.tcp_len {
        return Err(SkipReason::MalformedTcpHeader);
    }
    let options_end = header_len.min(captured.len());
    let options_cut = options_end < header_len;
    let options = TcpOptions::parse(&captured[20..options_end], options_cut);
    let payload_len = context.tcp_len - header_len;
    let payload = captured.get(header_len..).unwrap_or(&[]);
    Ok(Segment {
        timestamp: context.timestamp,
        source: Endpoint {
            ip: context.source,
            port: be_u16(captured, 0),
        },
        destination: Endpoint {
            ip: context.destination,
            port: be_u16(captured, 2),
        },
        ip_id: context.ip_id,
        seq: be_u32(captured, 4),
        ack: be_u32(captured, 8),
        flags: TcpFlags(be_u16(captured, 12) & 0x01FF),
        window: be_u16(captured, 14),
        checksum: be_u16(captured, 16),
        options,
        payload_len: u32::try_from(payload_len).unwrap_or(u32::MAX),
        payload,
        truncated: options_cut || payload.len() < payload_len,
        length_from_frame: context.length_from_frame,
    })
}

fn be_u16(bytes: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([bytes[at], bytes[at + 1]])
}

fn be_u32(bytes: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}
