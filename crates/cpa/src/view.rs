//! One connection as both endpoints saw it: every packet's departure at its
//! sender and arrival at its receiver, each in that endpoint's clock — the
//! nodes of the packet dependence graph (tcpeval paper, Section 3.1: "each
//! node represents the arrival or departure of a single packet at either
//! endpoint").
//!
//! # Two captures (the paper's setting)
//!
//! The client's capture gives the client's departures and arrivals, the
//! server's capture the server's. A packet is matched across them by its
//! sequence range (a receiver packet lies inside the sender packet that
//! carried its last byte, so segmentation offload on the sender and receive
//! offload on the receiver still match), acknowledgement number, SYN and
//! FIN flags, TCP timestamp value and IPv4 identification (a TSO piece
//! carries its super-segment's ID plus its index); pure ACKs by their whole
//! header. When several transmissions fit (a retransmission of the same
//! bytes with no timestamp or ID to tell them apart), the one whose one-way
//! delay is closest above the connection's minimum is taken. Delay samples
//! obey Karn's rule: only packets whose bytes were sent once, and pure ACKs
//! that match uniquely, give one. With one capture, bytes re-sent only
//! after their ACK arrived (stale re-sends, as in merged copies of a trace)
//! leave the first transmission's sample valid.
//!
//! Capture artefacts (Section 3.5): a packet in the receiver's capture but
//! not the sender's was dropped by the sender's packet filter; its
//! departure is placed one minimum one-way delay before its arrival. A
//! packet in the sender's capture only was lost in the network, unless the
//! receiver acknowledged its bytes and no other copy of them arrived: then
//! the receiver's filter dropped it, and its arrival is placed one minimum
//! delay after its departure. Capture duplicates and clamped timestamps are
//! handled by the connection table (`vantage-trace`).
//!
//! # One capture (single vantage)
//!
//! The unobserved endpoint's events are placed half the connection's
//! minimum round-trip time before or after their observed counterparts
//! (a data arrival never after the placed ACK that answers it). A
//! packet the observed side sent and later re-sent is presumed lost unless
//! the peer acknowledged it before the re-sent copy could have arrived.
//! The profile later re-places these events with the input-wide minimum
//! (see [`crate::profile`]).
//!
//! Departures: packets are matched on address and port as captured — a NAT
//! between the captures is not undone; clock drift between the captures is
//! not estimated (one offset for the whole input).

/// Per-packet maps: foldhash rather than SipHash.
use foldhash::HashMap;

use vantage_core::Nanos;
use vantage_trace::TcpFlags;
use vantage_trace::{Artefacts, Connection, ConnectionId, Direction, Endpoint, SegmentNotes};

use crate::Side;

/// How a segment's captured payload begins, as far as HTTP is concerned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PayloadStart {
    /// Not captured (snap length), or no payload.
    #[default]
    Unknown,
    /// An HTTP request line (`GET `, `POST `, …).
    Request,
    /// An HTTP request line, and another request line after the end of
    /// the first request's header (`\r\n\r\n`) in the same segment:
    /// pipelining.
    Requests,
    /// An HTTP status line (`HTTP/`).
    Response,
    /// Anything else.
    Other,
}

const METHODS: [&[u8]; 9] = [
    b"GET ",
    b"HEAD ",
    b"POST ",
    b"PUT ",
    b"DELETE ",
    b"OPTIONS ",
    b"TRACE ",
    b"CONNECT ",
    b"PATCH ",
];

impl PayloadStart {
    /// Classifies the captured bytes of a payload.
    pub fn classify(captured: &[u8]) -> PayloadStart {
        let Some(&first) = captured.first() else {
            return PayloadStart::Unknown;
        };
        // Every token below starts with a capital letter: most payloads
        // (the body bytes of a transfer) are told apart by their first byte.
        if !first.is_ascii_uppercase() {
            return PayloadStart::Other;
        }
        let mut undecided = false;
        for token in METHODS.iter().copied().chain([b"HTTP/".as_slice()]) {
            // No token is empty; one with another first byte cannot match.
            if token[0] != first {
                continue;
            }
            let n = token.len().min(captured.len());
            if captured[..n] == token[..n] {
                if n == token.len() {
                    return if token == b"HTTP/" {
                        PayloadStart::Response
                    } else if another_request(captured) {
                        PayloadStart::Requests
                    } else {
                        PayloadStart::Request
                    };
                }
                undecided = true;
            }
        }
        if undecided {
            PayloadStart::Unknown
        } else {
            PayloadStart::Other
        }
    }
}

/// Whether a request line follows the end of a header (`\r\n\r\n`) in a
/// payload that begins with one. A body that happens to begin with a
/// method after its header is taken for a request too (the length of a
/// body is not parsed).
fn another_request(captured: &[u8]) -> bool {
    captured.windows(4).enumerate().any(|(i, window)| {
        window == b"\r\n\r\n" && {
            let rest = &captured[i + 4..];
            METHODS.iter().any(|method| rest.starts_with(method))
        }
    })
}

/// What the connection table does not keep but the analysis uses, for one
/// recorded segment: kept by the ingest side-channel, index-aligned with
/// [`Connection::segments`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SegmentExtra {
    /// IPv4 identification (0 for IPv6).
    pub ip_id: u16,
    pub payload: PayloadStart,
}

/// A finished connection from one capture, with its side-channel.
#[derive(Clone, Debug)]
pub struct CapturedConnection {
    /// Where the capture was taken.
    pub side: Side,
    pub connection: Connection,
    /// One per segment record (missing entries count as default).
    pub extras: Vec<SegmentExtra>,
}

/// Which captures a connection was seen in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Vantage {
    /// Client and server captures (the paper's setting).
    Both,
    /// The server's capture only.
    Server,
    /// The client's capture only.
    Client,
}

impl Vantage {
    /// Whether events at `side` were captured.
    pub fn observes(self, side: Side) -> bool {
        match self {
            Vantage::Both => true,
            Vantage::Server => side == Side::Server,
            Vantage::Client => side == Side::Client,
        }
    }
}

/// One packet event at one endpoint.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Record {
    /// Where the event happens.
    pub side: Side,
    /// Who sent the packet.
    pub sender: Side,
    /// In `side`'s clock: captured, or placed (see the module docs).
    pub time: Nanos,
    pub observed: bool,
    /// Sequence space `[seq, end)`, relative to the sender's ISN (the SYN
    /// is 0), unwrapped.
    pub seq: i64,
    pub end: i64,
    /// Acknowledgement number relative to the receiver's ISN (valid when
    /// the ACK flag is set).
    pub ack: i64,
    pub payload_len: u32,
    pub flags: TcpFlags,
    /// Advertised window in bytes (scaled).
    pub window: u64,
    pub ts_value: Option<u32>,
    pub ip_id: u16,
    pub payload: PayloadStart,
    /// It carried SACK blocks.
    pub sack: bool,
    /// For an arrival: the departure of the same packet. For a placed
    /// departure: the arrival it was placed from.
    pub link: Option<u32>,
    /// Position in its capture (observed) or of its counterpart (placed).
    pub capture_index: u32,
}

impl Record {
    pub fn is_departure(&self) -> bool {
        self.side == self.sender
    }

    pub fn has_space(&self) -> bool {
        self.end > self.seq && !self.flags.rst()
    }

    pub fn is_syn(&self) -> bool {
        self.flags.syn()
    }

    /// A segment with no sequence space and no control flag: a pure ACK
    /// (or a window probe without data).
    pub fn is_pure_ack(&self) -> bool {
        self.end == self.seq && self.flags.ack() && !self.flags.rst()
    }

    /// First and one-past-last data byte (SYN and FIN excluded).
    pub fn data_range(&self) -> (i64, i64) {
        let start = self.seq + i64::from(self.flags.syn());
        (start, start + i64::from(self.payload_len))
    }
}

/// Karn-valid delay minima of one connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct DelaySamples {
    /// Two captures: minimum of arrival time minus departure time, across
    /// the two clocks (one-way delay plus clock offset), by sender.
    pub raw_one_way: [Option<i64>; 2],
    /// One capture: minimum round-trip time at the observed side.
    pub round_trip: Option<Nanos>,
}

/// Input-wide estimates used where a connection has no sample of its own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Fallback {
    pub raw_one_way: [Option<i64>; 2],
    pub round_trip: Option<Nanos>,
    /// The clock offset given by the user (server clock minus client
    /// clock), if any.
    pub clock_offset: Option<i64>,
}

/// Departures as (first byte, record), sorted, and the longest sequence
/// span among them: what an overlap search scans.
pub(crate) type ByFirstByte = (Vec<(i64, u32)>, i64);

/// A connection's packets at both endpoints.
#[derive(Clone, Debug)]
pub(crate) struct ConnectionView {
    pub id: ConnectionId,
    pub client: Endpoint,
    pub server: Endpoint,
    pub vantage: Vantage,
    pub records: Vec<Record>,
    /// Record indices per side (index [`Side::index`]), in that side's time.
    pub order: [Vec<u32>; 2],
    /// Each record's position in its side's order.
    pub position: Vec<u32>,
    /// Segment size by sender.
    pub mss: [u32; 2],
    /// Whether a SYN from this sender was seen (its ISN is 0).
    pub syn_seen: [bool; 2],
    /// Receive window the peer's SYN offered, by sender.
    pub initial_rwnd: [u64; 2],
    /// One past the sender's SYN (and Fast Open data), or the lowest
    /// sequence seen when no SYN was.
    pub initial_una: [i64; 2],
    pub samples: DelaySamples,
    /// One-way delay used to place unobserved events, by sender (across
    /// clocks with two captures).
    pub placement_delay: [i64; 2],
    /// Server clock minus client clock, as far as this connection shows
    /// (0 with one capture).
    pub clock_offset: i64,
    pub artefacts: Artefacts,
    /// By side, when the placement built it: the side's departures with
    /// sequence space as (first byte, record), sorted, and the longest span
    /// among them (what [`crate::graph`] searches for copies).
    pub departures_by_first_byte: [Option<ByFirstByte>; 2],
}

impl ConnectionView {
    pub fn record(&self, index: u32) -> &Record {
        &self.records[index as usize]
    }

    pub fn side_order(&self, side: Side) -> &[u32] {
        &self.order[side.index()]
    }

    /// The connection's minimum round-trip time, from its own Karn-valid
    /// samples.
    pub fn round_trip(&self) -> Option<Nanos> {
        match self.samples.raw_one_way {
            [Some(a), Some(b)] => Some(Nanos((a + b).max(0) as u64)),
            _ => self.samples.round_trip,
        }
    }

    /// Whether [`build`] used the [`Fallback`] it was given: where the
    /// connection lacks delay samples of its own.
    pub fn rests_on_fallback(&self) -> bool {
        match self.vantage {
            Vantage::Both => self.samples.raw_one_way.contains(&None),
            Vantage::Server | Vantage::Client => self.samples.round_trip.is_none(),
        }
    }

    pub fn position_of(&self, index: u32) -> usize {
        self.position[index as usize] as usize
    }
}

/// Unwraps 32-bit sequence numbers of one sequence space against the
/// highest seen.
#[derive(Clone, Copy, Debug)]
struct Unwrap {
    base: u32,
    highest: i64,
}

impl Unwrap {
    fn relative(&mut self, value: u32) -> i64 {
        let reference = self.base.wrapping_add(self.highest as u32);
        let relative = self.highest + i64::from(value.wrapping_sub(reference) as i32);
        self.highest = self.highest.max(relative);
        relative
    }
}

/// Builds the view of one connection from one or two captures of it.
/// Returns `None` when neither capture has a segment.
pub(crate) fn build(
    client: Option<&CapturedConnection>,
    server: Option<&CapturedConnection>,
    fallback: &Fallback,
) -> Option<ConnectionView> {
    let primary = server.or(client)?;
    let vantage = match (client.is_some(), server.is_some()) {
        (true, true) => Vantage::Both,
        (false, true) => Vantage::Server,
        _ => Vantage::Client,
    };
    // The initiator is the client, from whichever capture saw the opening.
    let opener = [server, client]
        .into_iter()
        .flatten()
        .find(|c| c.connection.opening != vantage_trace::Opening::MidStream)
        .unwrap_or(primary);
    let client_endpoint = opener.connection.initiator;
    let server_endpoint = opener.connection.responder;

    // Sequence bases by sender: the ISN when a SYN was seen.
    let mut bases = [None::<u32>; 2];
    let mut syn_seen = [false; 2];
    for capture in [server, client].into_iter().flatten() {
        for sender in [Side::Client, Side::Server] {
            let summary = capture.connection.direction(direction_from(
                &capture.connection,
                sender,
                client_endpoint,
            ));
            if let Some(isn) = summary.isn {
                if bases[sender.index()].is_none() || !syn_seen[sender.index()] {
                    bases[sender.index()] = Some(isn);
                    syn_seen[sender.index()] |= summary.syns > 0;
                }
            }
        }
    }
    for sender in [Side::Client, Side::Server] {
        if bases[sender.index()].is_none() {
            bases[sender.index()] = [server, client].into_iter().flatten().find_map(|c| {
                c.connection
                    .direction(direction_from(&c.connection, sender, client_endpoint))
                    .first_seq
            });
        }
    }

    // One record per captured segment; with one capture, the placement
    // adds at most one per record (reserved now: no copy as it grows).
    let captured: usize = [client, server]
        .into_iter()
        .flatten()
        .map(|c| c.connection.segments.len())
        .sum();
    let placed = if vantage == Vantage::Both {
        0
    } else {
        captured
    };
    let mut records = Vec::with_capacity(captured + placed);
    // By side: its records are all captured, in capture order, at times
    // that never decrease; lists of them taken in record order are then
    // already in time order and are not sorted again.
    let mut in_time_order = [false; 2];
    let mut artefacts = Artefacts::default();
    let mut mss = [None::<u16>; 2];
    for capture in [client, server].into_iter().flatten() {
        artefacts.add(&capture.connection.artefacts());
        for sender in [Side::Client, Side::Server] {
            let announced = capture.connection.mss_limit(direction_from(
                &capture.connection,
                sender,
                client_endpoint,
            ));
            mss[sender.index()] = mss[sender.index()].or(announced);
        }
        in_time_order[capture.side.index()] =
            convert(capture, client_endpoint, bases, &mut records);
    }
    if records.is_empty() {
        return None;
    }

    let mut view = ConnectionView {
        id: primary.connection.id,
        client: client_endpoint,
        server: server_endpoint,
        vantage,
        records,
        order: [Vec::new(), Vec::new()],
        position: Vec::new(),
        mss: [0; 2],
        syn_seen,
        initial_rwnd: [0; 2],
        initial_una: [0; 2],
        samples: DelaySamples::default(),
        placement_delay: [0; 2],
        clock_offset: 0,
        artefacts,
        departures_by_first_byte: [None, None],
    };
    for sender in [Side::Client, Side::Server] {
        let largest = view
            .records
            .iter()
            .filter(|r| r.sender == sender)
            .map(|r| r.payload_len)
            .max()
            .unwrap_or(0);
        view.mss[sender.index()] = match mss[sender.index()] {
            Some(announced) if announced > 0 => u32::from(announced),
            _ if largest > 0 => largest,
            _ => 536,
        };
        let peer_syn_window = view
            .records
            .iter()
            .find(|r| r.sender == sender.other() && r.is_syn())
            .map(|r| r.window);
        view.initial_rwnd[sender.index()] = peer_syn_window.unwrap_or(u64::from(u16::MAX));
        view.initial_una[sender.index()] = if syn_seen[sender.index()] {
            view.records
                .iter()
                .filter(|r| r.sender == sender && r.is_syn())
                .map(|r| r.end)
                .max()
                .unwrap_or(1)
        } else {
            view.records
                .iter()
                .filter(|r| r.sender == sender && r.has_space())
                .map(|r| r.seq)
                .min()
                .unwrap_or(0)
        };
    }

    match vantage {
        Vantage::Both => {
            // Matching places records at either side: both sorted.
            in_time_order = [false; 2];
            match_captures(&mut view, fallback);
        }
        Vantage::Server => place_unobserved(&mut view, Side::Server, fallback, in_time_order),
        Vantage::Client => place_unobserved(&mut view, Side::Client, fallback, in_time_order),
    }
    sort_sides(&mut view, in_time_order);
    Some(view)
}

/// The trace crate's direction of packets sent by `sender`.
fn direction_from(connection: &Connection, sender: Side, client: Endpoint) -> Direction {
    let sender_is_initiator = (connection.initiator == client) == (sender == Side::Client);
    if sender_is_initiator {
        Direction::FromInitiator
    } else {
        Direction::FromResponder
    }
}

/// Appends a capture's records; returns whether their times never
/// decrease (in capture order).
fn convert(
    capture: &CapturedConnection,
    client: Endpoint,
    bases: [Option<u32>; 2],
    out: &mut Vec<Record>,
) -> bool {
    let connection = &capture.connection;
    let scaling = connection.window_scaling();
    let mut spaces = [Side::Client, Side::Server].map(|side| Unwrap {
        base: bases[side.index()].unwrap_or(0),
        highest: 0,
    });
    let mut in_time_order = true;
    let mut latest = Nanos::ZERO;
    for (index, segment) in connection.segments.iter().enumerate() {
        if segment.notes.contains(SegmentNotes::OUT_OF_WINDOW) {
            continue;
        }
        in_time_order &= segment.timestamp >= latest;
        latest = segment.timestamp;
        let source = match segment.direction() {
            Direction::FromInitiator => connection.initiator,
            Direction::FromResponder => connection.responder,
        };
        let sender = if source == client {
            Side::Client
        } else {
            Side::Server
        };
        let extra = capture.extras.get(index).copied().unwrap_or_default();
        let flags = segment.flags;
        let seq = spaces[sender.index()].relative(segment.seq);
        let end =
            seq + i64::from(segment.payload_len) + i64::from(flags.syn()) + i64::from(flags.fin());
        if end > seq {
            let space = &mut spaces[sender.index()];
            space.highest = space.highest.max(end - 1);
        }
        let ack = if flags.ack() {
            spaces[sender.other().index()].relative(segment.ack)
        } else {
            0
        };
        let shift = match scaling {
            Some((initiator, responder)) if !flags.syn() => {
                if segment.direction() == Direction::FromInitiator {
                    initiator
                } else {
                    responder
                }
            }
            _ => 0,
        };
        out.push(Record {
            side: capture.side,
            sender,
            time: segment.timestamp,
            observed: true,
            seq,
            end,
            ack,
            payload_len: segment.payload_len,
            flags,
            window: u64::from(segment.window) << shift,
            ts_value: segment
                .notes
                .contains(SegmentNotes::TIMESTAMPS)
                .then_some(segment.ts_value),
            ip_id: extra.ip_id,
            payload: extra.payload,
            sack: segment.sack_count > 0,
            link: None,
            capture_index: index as u32,
        });
    }
    in_time_order
}

fn signed(time: Nanos) -> i64 {
    time.0.min(i64::MAX as u64) as i64
}

fn unsigned(time: i64) -> Nanos {
    Nanos(time.max(0) as u64)
}

/// The departures `keep` accepts as (first byte, index), sorted, and the
/// longest sequence span among them: what an overlap search scans.
fn sorted_by_first_byte(
    records: &[Record],
    departures: &[u32],
    keep: impl Fn(&Record) -> bool,
) -> (Vec<(i64, u32)>, i64) {
    let mut by_start: Vec<(i64, u32)> = Vec::with_capacity(departures.len());
    by_start.extend(
        departures
            .iter()
            .filter(|&&i| keep(&records[i as usize]))
            .map(|&i| (records[i as usize].seq, i)),
    );
    by_start.sort();
    let longest = by_start
        .iter()
        .map(|&(_, i)| records[i as usize].end - records[i as usize].seq)
        .max()
        .unwrap_or(0);
    (by_start, longest)
}

/// Marks departures whose sequence space overlaps another departure of
/// the same sender (re-sent bytes: no delay sample, Karn's rule).
fn overlapped(records: &[Record], departures: &[u32]) -> HashMap<u32, bool> {
    let mut by_start: Vec<u32> = departures
        .iter()
        .copied()
        .filter(|&i| records[i as usize].has_space())
        .collect();
    by_start.sort_by_key(|&i| (records[i as usize].seq, i));
    let mut marks: HashMap<u32, bool> = by_start.iter().map(|&i| (i, false)).collect();
    let mut reach: Option<(i64, u32)> = None;
    for &i in &by_start {
        let record = &records[i as usize];
        if let Some((end, holder)) = reach {
            if record.seq < end {
                marks.insert(i, true);
                marks.insert(holder, true);
            }
        }
        if reach.is_none_or(|(end, _)| record.end > end) {
            reach = Some((record.end, i));
        }
    }
    marks
}

/// The time of the first later departure (by capture time and position)
/// overlapping each departure's sequence space, for those re-sent.
fn first_later_copies(
    records: &[Record],
    by_start: &[(i64, u32)],
    longest: i64,
) -> HashMap<u32, Nanos> {
    let mut later_copy: HashMap<u32, Nanos> = HashMap::default();
    let key = |i: u32| (records[i as usize].time, records[i as usize].capture_index);
    for &(start, d) in by_start {
        let departure = &records[d as usize];
        let from = by_start.partition_point(|&(s, _)| s < start - longest);
        let to = by_start.partition_point(|&(s, _)| s < departure.end);
        let first_later = by_start[from..to]
            .iter()
            .map(|&(_, r)| r)
            .filter(|&r| r != d && key(r) > key(d) && records[r as usize].end > departure.seq)
            .min_by_key(|&r| key(r));
        if let Some(r) = first_later {
            later_copy.insert(d, records[r as usize].time);
        }
    }
    later_copy
}

/// Departures that re-send bytes sent before and not yet acknowledged
/// when they left: retransmissions, whose ACK may answer either copy
/// (Karn's rule). A re-send of bytes all acknowledged before it left is
/// stale, not a retransmission.
/// `in_time_order`: the departures are captured ones, listed in capture
/// order at times that never decrease.
fn retransmissions(
    records: &[Record],
    departures: &[u32],
    acks: &AckIndex,
    in_time_order: bool,
) -> foldhash::HashSet<u32> {
    let mut in_time: Vec<u32> = Vec::with_capacity(departures.len());
    in_time.extend(
        departures
            .iter()
            .copied()
            .filter(|&i| records[i as usize].has_space()),
    );
    if !in_time_order {
        in_time.sort_by_key(|&i| {
            (
                records[i as usize].time,
                records[i as usize].capture_index,
                i,
            )
        });
    }
    let mut sent = SentRanges::default();
    let mut found = foldhash::HashSet::default();
    for i in in_time {
        let record = &records[i as usize];
        if sent.overlaps(record.seq, record.end) && record.end > acks.highest_by(record.time) {
            found.insert(i);
        }
        sent.insert(record.seq, record.end);
    }
    found
}

/// Sequence ranges sent so far, merged: start → end, disjoint.
#[derive(Default)]
struct SentRanges {
    ranges: std::collections::BTreeMap<i64, i64>,
}

impl SentRanges {
    /// Whether any byte of `[start, end)` was sent.
    fn overlaps(&self, start: i64, end: i64) -> bool {
        self.ranges
            .range(..end)
            .next_back()
            .is_some_and(|(_, &last)| last > start)
    }

    fn insert(&mut self, mut start: i64, mut end: i64) {
        // Ranges touching or overlapping `[start, end)` merge into it.
        while let Some((&s, &e)) = self.ranges.range(..=end).next_back() {
            if e < start {
                break;
            }
            start = start.min(s);
            end = end.max(e);
            self.ranges.remove(&s);
        }
        self.ranges.insert(start, end);
    }
}

/// Identifies a pure ACK across captures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct PureKey {
    ack: i64,
    flags: u16,
    window: u64,
    ts_value: Option<u32>,
    ip_id: u16,
    seq: i64,
}

impl PureKey {
    fn of(record: &Record) -> PureKey {
        PureKey {
            ack: record.ack,
            flags: record.flags.0,
            window: record.window,
            ts_value: record.ts_value,
            ip_id: record.ip_id,
            seq: record.seq,
        }
    }
}

fn match_captures(view: &mut ConnectionView, fallback: &Fallback) {
    let records = &view.records;
    let mut links: Vec<(u32, u32)> = Vec::new();
    let mut raw_min = [None::<i64>; 2];
    let mut ambiguous: Vec<(u32, Vec<u32>)> = Vec::new();
    let mut unmatched_arrivals = Vec::new();
    let mut matched_departures = vec![false; records.len()];

    for sender in [Side::Client, Side::Server] {
        let departures: Vec<u32> = (0..records.len() as u32)
            .filter(|&i| {
                let r = &records[i as usize];
                r.sender == sender && r.is_departure()
            })
            .collect();
        let arrivals: Vec<u32> = (0..records.len() as u32)
            .filter(|&i| {
                let r = &records[i as usize];
                r.sender == sender && !r.is_departure()
            })
            .collect();
        let resent = overlapped(records, &departures);
        let (by_start, longest) = sorted_by_first_byte(records, &departures, |r| r.end > r.seq);
        let mut pure: HashMap<PureKey, Vec<u32>> = HashMap::default();
        let mut pure_arrivals: HashMap<PureKey, u32> = HashMap::default();
        for &i in &departures {
            let r = &records[i as usize];
            if r.end == r.seq {
                pure.entry(PureKey::of(r)).or_default().push(i);
            }
        }
        for &i in &arrivals {
            let r = &records[i as usize];
            if r.end == r.seq {
                *pure_arrivals.entry(PureKey::of(r)).or_default() += 1;
            }
        }
        for &a in &arrivals {
            let arrival = &records[a as usize];
            let candidates: Vec<u32> = if arrival.end > arrival.seq {
                space_candidates(records, arrival, &by_start, longest)
            } else {
                pure.get(&PureKey::of(arrival)).cloned().unwrap_or_default()
            };
            match candidates.len() {
                0 => unmatched_arrivals.push(a),
                1 => {
                    let d = candidates[0];
                    links.push((a, d));
                    matched_departures[d as usize] = true;
                    let once = if arrival.end > arrival.seq {
                        !resent.get(&d).copied().unwrap_or(false)
                    } else {
                        pure_arrivals.get(&PureKey::of(arrival)) == Some(&1)
                    };
                    if once {
                        let delay = signed(arrival.time) - signed(records[d as usize].time);
                        let slot = &mut raw_min[sender.index()];
                        *slot = Some(slot.map_or(delay, |m: i64| m.min(delay)));
                    }
                }
                _ => ambiguous.push((a, candidates)),
            }
        }
    }

    // Ambiguous arrivals: the departure with the smallest delay not below
    // the connection's minimum (the latest copy that could have arrived).
    let mut used_pure = vec![false; records.len()];
    for (a, candidates) in ambiguous {
        let arrival = &records[a as usize];
        let sender = arrival.sender;
        let reference = raw_min[sender.index()].or(fallback.raw_one_way[sender.index()]);
        let pure = arrival.end == arrival.seq;
        let available: Vec<u32> = candidates
            .iter()
            .copied()
            .filter(|&d| !pure || !used_pure[d as usize])
            .collect();
        let pool = if available.is_empty() {
            &candidates
        } else {
            &available
        };
        let delay = |d: u32| signed(arrival.time) - signed(records[d as usize].time);
        let chosen = match reference {
            Some(minimum) => pool
                .iter()
                .copied()
                .filter(|&d| delay(d) >= minimum)
                .min_by_key(|&d| (delay(d), d))
                .or_else(|| pool.iter().copied().max_by_key(|&d| (delay(d), d))),
            None => pool.first().copied(),
        };
        if let Some(d) = chosen {
            used_pure[d as usize] = pure;
            links.push((a, d));
            matched_departures[d as usize] = true;
        }
    }

    for sender in [Side::Client, Side::Server] {
        view.placement_delay[sender.index()] = raw_min[sender.index()]
            .or(fallback.raw_one_way[sender.index()])
            .unwrap_or(0);
    }
    view.samples.raw_one_way = raw_min;
    let both = |minima: [Option<i64>; 2]| match minima {
        [Some(client), Some(server)] => Some((client - server) / 2),
        _ => None,
    };
    view.clock_offset = fallback
        .clock_offset
        .or_else(|| both(raw_min))
        .or_else(|| both(fallback.raw_one_way))
        .unwrap_or(0);
    for (a, d) in links {
        view.records[a as usize].link = Some(d);
    }

    // Sender-side capture drops: place the departure.
    for a in unmatched_arrivals {
        let arrival = view.records[a as usize];
        let delay = view.placement_delay[arrival.sender.index()];
        let placed = Record {
            side: arrival.sender,
            time: unsigned(signed(arrival.time) - delay),
            observed: false,
            link: Some(a),
            ..arrival
        };
        view.records.push(placed);
        let index = view.records.len() as u32 - 1;
        view.records[a as usize].link = Some(index);
    }

    // Receiver-side capture drops: acknowledged, and no copy arrived.
    let mut highest_ack = [i64::MIN; 2];
    for r in &view.records {
        if r.observed && r.is_departure() && r.flags.ack() {
            let slot = &mut highest_ack[r.sender.index()];
            *slot = (*slot).max(r.ack);
        }
    }
    let count = view.records.len();
    for d in 0..count {
        let departure = view.records[d];
        if !departure.observed
            || !departure.is_departure()
            || matched_departures.get(d).copied().unwrap_or(true)
            || departure.end <= departure.seq
            || highest_ack[departure.sender.other().index()] < departure.end
        {
            continue;
        }
        let last_byte = departure.end - 1;
        let copy_arrived = view.records.iter().any(|r| {
            r.sender == departure.sender
                && !r.is_departure()
                && r.seq <= last_byte
                && r.end > last_byte
        });
        if copy_arrived {
            continue;
        }
        let delay = view.placement_delay[departure.sender.index()];
        view.records.push(Record {
            side: departure.sender.other(),
            time: unsigned(signed(departure.time) + delay),
            observed: false,
            link: Some(d as u32),
            ..departure
        });
    }
}

/// Departures of `records` that could have carried `arrival`: they hold
/// its last byte, its acknowledgement and its SYN, and agree on the
/// timestamp and (up to a TSO piece index) the IP ID.
fn space_candidates(
    records: &[Record],
    arrival: &Record,
    by_start: &[(i64, u32)],
    longest: i64,
) -> Vec<u32> {
    let last_byte = arrival.end - 1;
    let upper = by_start.partition_point(|&(start, _)| start <= last_byte);
    let mut candidates = Vec::new();
    for &(start, d) in by_start[..upper].iter().rev() {
        if start < last_byte - longest {
            break;
        }
        let departure = &records[d as usize];
        if departure.end <= last_byte
            || departure.flags.syn() != arrival.flags.syn()
            || (arrival.flags.fin() && !departure.flags.fin())
            || departure.flags.ack() != arrival.flags.ack()
            || (arrival.flags.ack() && departure.ack != arrival.ack)
        {
            continue;
        }
        if let (Some(sent), Some(received)) = (departure.ts_value, arrival.ts_value) {
            if sent != received {
                continue;
            }
        }
        if departure.ip_id != 0 && arrival.ip_id != 0 {
            let same_shape = departure.seq == arrival.seq && departure.end == arrival.end;
            let piece = arrival.ip_id.wrapping_sub(departure.ip_id);
            if (same_shape && piece != 0) || piece >= 64 {
                continue;
            }
        }
        candidates.push(d);
    }
    candidates.sort_unstable();
    candidates
}

/// The first arrival at `side` of an ACK from the peer acknowledging at
/// least `byte`, at or after `from`: (its time, its record).
pub(crate) struct AckIndex {
    /// (time, highest acknowledgement so far, record) in capture order.
    entries: Vec<(Nanos, i64, u32)>,
}

impl AckIndex {
    /// `in_time_order`: `side`'s records are captured ones, in capture
    /// order at times that never decrease.
    fn new(records: &[Record], side: Side, in_time_order: bool) -> AckIndex {
        let mut arrivals: Vec<u32> = Vec::with_capacity(records.len());
        arrivals.extend((0..records.len() as u32).filter(|&i| {
            let r = &records[i as usize];
            r.side == side && !r.is_departure() && r.flags.ack() && !r.flags.rst()
        }));
        if !in_time_order {
            arrivals
                .sort_by_key(|&i| (records[i as usize].time, records[i as usize].capture_index));
        }
        let mut highest = i64::MIN;
        let entries = arrivals
            .into_iter()
            .map(|i| {
                let r = &records[i as usize];
                highest = highest.max(r.ack);
                (r.time, highest, i)
            })
            .collect();
        AckIndex { entries }
    }

    /// The highest acknowledgement among the ACKs that arrived at or
    /// before `time` (`i64::MIN` if none had).
    fn highest_by(&self, time: Nanos) -> i64 {
        let index = self.entries.partition_point(|&(at, _, _)| at <= time);
        index
            .checked_sub(1)
            .map_or(i64::MIN, |last| self.entries[last].1)
    }

    /// The first ACK arrival whose cumulative acknowledgement reaches
    /// `byte`; `None` if none did.
    fn first_reaching(&self, byte: i64) -> Option<(Nanos, u32)> {
        let index = self
            .entries
            .partition_point(|&(_, highest, _)| highest < byte);
        self.entries
            .get(index)
            .map(|&(time, _, record)| (time, record))
    }
}

/// Single vantage: places the unobserved endpoint's events.
fn place_unobserved(
    view: &mut ConnectionView,
    observed: Side,
    fallback: &Fallback,
    in_time_order: [bool; 2],
) {
    let unobserved = observed.other();
    let in_time_order = in_time_order[observed.index()];
    let acks = AckIndex::new(&view.records, observed, in_time_order);
    let mut departures: Vec<u32> = Vec::with_capacity(view.records.len());
    departures.extend((0..view.records.len() as u32).filter(|&i| {
        let r = &view.records[i as usize];
        r.side == observed && r.is_departure()
    }));
    // The first later copy of each departure's bytes, found through the
    // departures sorted by first byte.
    let (by_first_byte, longest) =
        sorted_by_first_byte(&view.records, &departures, Record::has_space);
    let later_copy = first_later_copies(&view.records, &by_first_byte, longest);
    let retransmissions = retransmissions(&view.records, &departures, &acks, in_time_order);

    // Karn-valid round-trip samples: a first transmission of its bytes, to
    // the first ACK covering it, when no copy of them left before that
    // ACK arrived. Bytes re-sent after their ACK (a stale re-send, as when
    // copies of a trace are merged) leave the earlier sample valid and
    // give none themselves (their ACK came before they left).
    let mut round_trip: Option<Nanos> = None;
    for &d in &departures {
        let departure = &view.records[d as usize];
        if !departure.has_space() || retransmissions.contains(&d) {
            continue;
        }
        if let Some((at, _)) = acks.first_reaching(departure.end) {
            let copied_before = later_copy.get(&d).is_some_and(|&resent_at| resent_at < at);
            if at >= departure.time && !copied_before {
                let sample = at - departure.time;
                round_trip = Some(round_trip.map_or(sample, |m| m.min(sample)));
            }
        }
    }
    view.samples.round_trip = round_trip;
    let rtt = signed(round_trip.or(fallback.round_trip).unwrap_or(Nanos::ZERO));
    // Half each way; the observed side's outgoing half takes the odd ns.
    let outgoing = rtt - rtt / 2;
    view.placement_delay[observed.index()] = outgoing;
    view.placement_delay[unobserved.index()] = rtt / 2;

    // Departures at the unobserved side, from the arrivals it caused (at
    // most one each).
    let count = view.records.len();
    view.records.reserve(count);
    for a in 0..count {
        let candidate = &view.records[a];
        if candidate.side != observed || candidate.is_departure() {
            continue;
        }
        let arrival = *candidate;
        view.records.push(Record {
            side: unobserved,
            time: unsigned(signed(arrival.time) - rtt / 2),
            observed: false,
            link: Some(a as u32),
            ..arrival
        });
        let placed = view.records.len() as u32 - 1;
        view.records[a].link = Some(placed);
    }

    // Arrivals at the unobserved side, unless presumed lost.
    for &d in &departures {
        let departure = view.records[d as usize];
        if let Some(&resent_at) = later_copy.get(&d) {
            let acknowledged_in_time = acks
                .first_reaching(departure.end)
                .is_some_and(|(at, _)| signed(at) < signed(resent_at) + rtt);
            if !acknowledged_in_time {
                continue;
            }
        }
        // Not after the peer's placed answer to it: a round trip shorter
        // than the minimum (an ACK sooner than any Karn-valid sample)
        // must not put the arrival after the ACK it caused.
        let mut arrival = signed(departure.time) + outgoing;
        if let Some((acked_at, _)) = acks.first_reaching(departure.end) {
            if acked_at >= departure.time && departure.has_space() {
                let answered = signed(acked_at) - rtt / 2;
                arrival = arrival.min(answered.max(signed(departure.time)));
            }
        }
        view.records.push(Record {
            side: unobserved,
            time: unsigned(arrival),
            observed: false,
            link: Some(d),
            ..departure
        });
    }
    view.departures_by_first_byte[observed.index()] = Some((by_first_byte, longest));
}

/// Orders each side's records by its clock. At one instant, captured
/// records keep their capture order and come before placed ones; placed
/// records keep the order in which their counterparts were captured (the
/// other endpoint saw them in causal order; with coarse timestamps or a
/// zero round trip many share an instant). A side whose records are all
/// captured in time order (`in_time_order`) is in that order already.
fn sort_sides(view: &mut ConnectionView, in_time_order: [bool; 2]) {
    let records = &view.records;
    let mut position = vec![0u32; records.len()];
    let mut order = [Vec::new(), Vec::new()];
    for side in [Side::Client, Side::Server] {
        let mut indices: Vec<u32> = Vec::with_capacity(records.len());
        indices.extend((0..records.len() as u32).filter(|&i| records[i as usize].side == side));
        if !in_time_order[side.index()] {
            indices.sort_by_key(|&i| {
                let r = &records[i as usize];
                (r.time, !r.observed, r.capture_index, i)
            });
        }
        for (n, &i) in indices.iter().enumerate() {
            position[i as usize] = n as u32;
        }
        order[side.index()] = indices;
    }
    view.order = order;
    view.position = position;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_starts_are_classified() {
        assert_eq!(
            PayloadStart::classify(b"GET / HTTP/1.1\r\n"),
            PayloadStart::Request
        );
        assert_eq!(PayloadStart::classify(b"POST /x"), PayloadStart::Request);
        assert_eq!(
            PayloadStart::classify(b"HTTP/1.1 200 OK"),
            PayloadStart::Response
        );
        assert_eq!(PayloadStart::classify(b"GE"), PayloadStart::Unknown);
        assert_eq!(PayloadStart::classify(b""), PayloadStart::Unknown);
        assert_eq!(PayloadStart::classify(b"\x16\x03\x01"), PayloadStart::Other);
        assert_eq!(PayloadStart::classify(b"GETX"), PayloadStart::Other);
        assert_eq!(
            PayloadStart::classify(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\n"),
            PayloadStart::Requests
        );
        assert_eq!(
            PayloadStart::classify(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n"),
            PayloadStart::Request
        );
    }

    #[test]
    fn sent_ranges_merge_and_tell_overlaps() {
        let mut sent = SentRanges::default();
        sent.insert(100, 200);
        assert!(!sent.overlaps(0, 100) && !sent.overlaps(200, 300));
        assert!(sent.overlaps(150, 160) && sent.overlaps(0, 101) && sent.overlaps(199, 250));
        sent.insert(300, 400);
        sent.insert(200, 300);
        assert_eq!(sent.ranges.len(), 1);
        assert!(sent.overlaps(399, 500) && !sent.overlaps(400, 500));
        sent.insert(0, 50);
        sent.insert(10, 20);
        assert_eq!(
            sent.ranges.iter().collect::<Vec<_>>(),
            [(&0, &50), (&100, &400)]
        );
    }

    #[test]
    fn sequence_numbers_unwrap_across_the_32_bit_boundary() {
        let mut space = Unwrap {
            base: u32::MAX - 10,
            highest: 0,
        };
        assert_eq!(space.relative(u32::MAX - 10), 0);
        assert_eq!(space.relative(5), 16);
        assert_eq!(space.relative(u32::MAX), 10);
        assert_eq!(space.relative(100), 111);
    }
}
