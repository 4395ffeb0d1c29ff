//! Streaming TCP connection table: which connection each segment belongs
//! to, what each direction negotiated and sent, which capture artefacts it
//! shows, and when a connection is over — memory follows the connections
//! alive at one moment, not the length of the trace.
//!
//! **Identity** is the two endpoints plus the initiator's ISN, keyed on the
//! canonical endpoint pair, so both ends on one host are told apart (tcptrace
//! compares addresses first and mixes them up). On a known 4-tuple a SYN
//! with the recorded ISN is a retransmitted SYN; a pure SYN with another ISN
//! (or a SYN-ACK answering neither side) starts a new connection and
//! finishes the old one ([`FinishCause::Superseded`]); after a close, a
//! tombstone kept for [`TableConfig::time_wait`] absorbs late FINs, ACKs
//! and data ([`TableStats::late_segments`]). Connections seen mid-stream
//! or from their SYN-ACK are tracked too ([`Opening`]).
//!
//! **Capture artefacts** (tcpeval, Section 3.5), per direction in
//! [`Artefacts`] and per segment in [`SegmentNotes`]:
//! * packets dropped by the filter: sequence space ACKed or SACKed but never
//!   seen ([`Artefacts::capture_drops`]); a segment that turns up after its
//!   ACK takes its bytes back ([`Artefacts::seen_after_ack`]);
//! * packets added by the capture (two interfaces, or both sides of a
//!   router): a copy is identified by what it is — same IPv4 ID, TCP
//!   checksum, sequence, acknowledgement, length, flags and window (TTL and
//!   MACs may differ) — among the last [`DUPLICATE_MEMORY`] segments of its
//!   direction, up to [`TableConfig::duplicate_horizon`] apart, while its
//!   sender numbers its packets (a genuine re-send then carries a new IP
//!   ID; the horizon only guards against IP ID reuse). Where the IP ID
//!   is zero or repeats between two segments in a row (IPv6, senders that
//!   zero it under DF, or keep it constant) that cannot
//!   tell a copy from a re-send, so only a copy within
//!   [`TableConfig::duplicate_window`] counts, and never a pure ACK (real
//!   duplicate ACKs are byte-identical); duplicates are counted, not
//!   recorded;
//! * timestamps out of order: the drivers sort them within a bounded window
//!   first ([`crate::reorder`]); what still arrives out of order is clamped
//!   to the connection's previous one and counted;
//! * beyond the paper: snap-length truncation, offload super-segments larger
//!   than the peer's MSS, and out-of-window sequence numbers (more than 2^30
//!   away: counted, recorded, ignored for sequence tracking).
//!
//! **Finishing**: after a close and [`TableConfig::close_linger`] (the idle
//! timeout while data below a FIN is missing or unacknowledged), after
//! [`TableConfig::idle_timeout`], when superseded, or at
//! [`ConnectionTable::finish_all`]; finished connections with their compact
//! [`SegmentRecord`]s are queued ([`ConnectionTable::pop_finished`]) and
//! dropped from the table. Time is the trace's ([`ConnectionTable::expire`]
//! lets a live driver advance it).
//!
//! Departure from tcpeval, which sorted whole traces by timestamp: sorting
//! is bounded ([`crate::reorder`]), so memory stays bounded; the table
//! makes time monotonic per connection for what is left. Memory is bounded
//! by [`TableConfig::max_connections`] too.
//!
//! Beyond the paper, for cost: a finished connection's duplicate rings, and
//! its segment buffer when the reader gives it back
//! ([`ConnectionTable::recycle`]), go to new connections (a bounded spare
//! pool), so short connections do not each grow their vectors from nothing;
//! each direction counts its remembered segments per bucket of sequence
//! and acknowledgement numbers, so the duplicate search runs only when a
//! copy may be among them.

use std::collections::VecDeque;

/// Flow-keyed maps are looked up once per packet: foldhash (seeded per
/// process) instead of SipHash.
type FlowMap<V> = foldhash::HashMap<FlowKey, V>;

use serde::Serialize;
use vantage_core::Nanos;

use crate::decode::{Endpoint, SackBlock, Segment, TcpFlags};

/// Sequence distance beyond which a segment is out of window.
const OUT_OF_WINDOW: i64 = 1 << 30;
/// Sequence distance within which a tombstone claims a late segment.
const TOMBSTONE_REACH: i64 = 1 << 24;
/// Most data a SYN may carry (TCP Fast Open: at most one MSS).
const MAX_SYN_DATA: u32 = 65_535;
/// Gaps and acknowledged-unseen ranges remembered per direction.
const MAX_RANGES: usize = 16;
/// Recent segments per direction compared for capture duplicates.
pub const DUPLICATE_MEMORY: usize = 32;
/// Buckets counting a direction's remembered segments by sequence and
/// acknowledgement numbers (a power of two; at most [`DUPLICATE_MEMORY`]
/// in one, so a `u8` holds the count).
const RECENT_BUCKETS: usize = 64;
/// Emptied buffers kept for new connections, per kind (duplicate rings,
/// segment records), and the largest capacity kept, in items: a short
/// connection takes the buffers an earlier one grew instead of growing its
/// own from nothing, and a connection holds no more than it would have
/// grown to itself or [`SPARE_CAPACITY`] items.
const SPARE_BUFFERS: usize = 4096;
const SPARE_CAPACITY: usize = 16;

/// Timeouts and switches of a [`ConnectionTable`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TableConfig {
    /// A connection with no segment for longer than this is finished.
    pub idle_timeout: Nanos,
    /// A half-open connection (SYNs, no SYN-ACK) is finished once more
    /// than this has passed since its first segment; `None`: only the idle
    /// timeout. A live Certes stream sets the latest give-up time its model
    /// allows (a client sends no SYN after it gives up, first SYN +
    /// min(F, T_conn)), so the interval a client began in need not wait
    /// for the idle timeout; later SYNs are the misinformed case.
    pub half_open_limit: Option<Nanos>,
    /// A closed connection (FIN both ways, or RST) is finished after more
    /// than this without a segment, so trailing ACKs and retransmitted FINs
    /// still reach it; after FINs (not a RST), one with data below a FIN
    /// never seen or never acknowledged (lost before the close) waits up
    /// to the idle timeout for its retransmission.
    pub close_linger: Nanos,
    /// How long a closed, finished connection's tombstone catches late
    /// segments (2 MSL by RFC 9293).
    pub time_wait: Nanos,
    /// Most tombstones kept; the oldest go first.
    pub max_tombstones: usize,
    /// Where the IP ID cannot tell a copy from a re-send (zero or
    /// constant), identical segments closer together than this are capture
    /// duplicates, not retransmissions.
    pub duplicate_window: Nanos,
    /// Where the sender numbers its packets, a copy with the same IP ID,
    /// checksum and content up to this long after the original is a
    /// capture duplicate (forwarding copies are 1–20 ms apart).
    pub duplicate_horizon: Nanos,
    /// Most connections in the table at once; beyond it the oldest
    /// half-open connection (no SYN-ACK seen) is finished early, else the
    /// oldest connection ([`FinishCause::Evicted`],
    /// [`TableStats::evicted`]).
    pub max_connections: usize,
    /// Keep each connection's [`SegmentRecord`]s (for analyses that need
    /// them); off, only counts are kept.
    pub record_segments: bool,
}

impl Default for TableConfig {
    fn default() -> TableConfig {
        TableConfig {
            idle_timeout: Nanos::from_secs(300),
            half_open_limit: None,
            close_linger: Nanos::from_secs(2),
            time_wait: Nanos::from_secs(240),
            max_tombstones: 100_000,
            duplicate_window: Nanos::from_millis(1),
            duplicate_horizon: Nanos::from_millis(100),
            max_connections: 100_000,
            record_segments: true,
        }
    }
}

/// Connections are numbered in the order they were first seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct ConnectionId(pub u64);

/// Which way a segment travelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Direction {
    FromInitiator,
    FromResponder,
}

impl Direction {
    pub fn reverse(self) -> Direction {
        match self {
            Direction::FromInitiator => Direction::FromResponder,
            Direction::FromResponder => Direction::FromInitiator,
        }
    }

    fn index(self) -> usize {
        match self {
            Direction::FromInitiator => 0,
            Direction::FromResponder => 1,
        }
    }
}

/// How the first segment of a connection identified its initiator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Opening {
    /// A SYN: its sender is the initiator.
    Syn,
    /// A SYN-ACK before any SYN: its receiver is the initiator.
    SynAck,
    /// The trace began mid-connection: the side with the only port below
    /// 1024 is taken as the responder, otherwise the first sender as the
    /// initiator.
    MidStream,
}

/// Why a connection left the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum FinishCause {
    /// Closed (FIN both ways, or RST) and then quiet for the close linger,
    /// or closed when something else finished it.
    Closed,
    /// No segment for the idle timeout.
    IdleTimeout,
    /// A SYN with a new ISN reused its 4-tuple before it closed.
    Superseded,
    /// Still open at [`ConnectionTable::finish_all`].
    EndOfTrace,
    /// Finished early to keep the table within
    /// [`TableConfig::max_connections`].
    Evicted,
}

/// Capture artefacts and related counts for one direction (or summed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Artefacts {
    /// Ranges of sequence space acknowledged (cumulatively or by SACK) but
    /// never seen: packets the capture dropped.
    pub capture_drops: u64,
    /// Sequence numbers in those ranges (payload bytes, plus one for an
    /// unseen SYN or FIN).
    pub capture_dropped_bytes: u64,
    /// Segments seen after their acknowledgement (capture reordering).
    pub seen_after_ack: u64,
    /// Capture duplicates discarded.
    pub duplicates: u64,
    /// Segments whose timestamp went backwards and was clamped.
    pub timestamps_clamped: u64,
    /// Segments cut by the snap length.
    pub truncated_segments: u64,
    /// Segments with more payload than the peer's MSS (offload).
    pub super_segments: u64,
    /// Segments with a sequence number far outside their direction's.
    pub out_of_window: u64,
}

impl Artefacts {
    pub fn add(&mut self, other: &Artefacts) {
        self.capture_drops += other.capture_drops;
        self.capture_dropped_bytes += other.capture_dropped_bytes;
        self.seen_after_ack += other.seen_after_ack;
        self.duplicates += other.duplicates;
        self.timestamps_clamped += other.timestamps_clamped;
        self.truncated_segments += other.truncated_segments;
        self.super_segments += other.super_segments;
        self.out_of_window += other.out_of_window;
    }
}

/// What one direction of a connection sent and negotiated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DirectionSummary {
    /// Initial sequence number, from this side's SYN (or, for the
    /// initiator, from a SYN-ACK seen before the SYN).
    pub isn: Option<u32>,
    /// Sequence number of the first segment seen from this side.
    pub first_seq: Option<u32>,
    /// One past the highest sequence number this side is known to have
    /// sent (seen, or implied by the peer's acknowledgements).
    pub next_seq: Option<u32>,
    /// Segments recorded (duplicates excluded).
    pub segments: u64,
    /// Payload bytes carried, retransmissions included.
    pub payload_bytes: u64,
    /// Segments that re-sent sequence space already seen.
    pub retransmissions: u64,
    /// Sequence space re-sent.
    pub retransmitted_bytes: u64,
    /// SYN segments sent (more than one: retransmitted SYNs).
    pub syns: u32,
    pub fin: bool,
    pub rst: bool,
    /// Options of this side's (latest) SYN.
    pub mss: Option<u16>,
    pub window_scale: Option<u8>,
    pub sack_permitted: bool,
    pub timestamps: bool,
    pub first_timestamp: Option<Nanos>,
    pub last_timestamp: Option<Nanos>,
    pub artefacts: Artefacts,
}

/// Marks on one recorded segment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct SegmentNotes(pub u16);

impl SegmentNotes {
    /// Sent by the responder (otherwise by the initiator).
    pub const FROM_RESPONDER: u16 = 1 << 0;
    /// Carried the timestamps option (`ts_value`, `ts_echo` are valid).
    pub const TIMESTAMPS: u16 = 1 << 1;
    /// Cut by the snap length.
    pub const TRUNCATED: u16 = 1 << 2;
    /// Payload larger than the peer's MSS.
    pub const SUPER_SEGMENT: u16 = 1 << 3;
    /// Timestamp went backwards and was clamped.
    pub const TIMESTAMP_CLAMPED: u16 = 1 << 4;
    /// Re-sent sequence space already seen.
    pub const RETRANSMISSION: u16 = 1 << 5;
    /// Filled (part of) a gap in the sequence space seen so far.
    pub const FILLS_GAP: u16 = 1 << 6;
    /// Started beyond the highest sequence seen: a gap precedes it.
    pub const AFTER_GAP: u16 = 1 << 7;
    /// Its ACK or SACK acknowledged sequence space never seen.
    pub const ACKS_UNSEEN: u16 = 1 << 8;
    /// Carried sequence space already acknowledged but not yet seen.
    pub const SEEN_AFTER_ACK: u16 = 1 << 9;
    /// Sequence number far outside its direction's.
    pub const OUT_OF_WINDOW: u16 = 1 << 10;
    /// IP length field was zero (offload); length taken from the frame.
    pub const LENGTH_FROM_FRAME: u16 = 1 << 11;

    pub fn contains(self, note: u16) -> bool {
        self.0 & note == note
    }

    fn set(&mut self, note: u16) {
        self.0 |= note;
    }

    pub fn direction(self) -> Direction {
        if self.contains(Self::FROM_RESPONDER) {
            Direction::FromResponder
        } else {
            Direction::FromInitiator
        }
    }
}

/// One recorded segment, compact: what later analyses (critical path,
/// response time) need, without addresses (the connection has them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentRecord {
    /// Capture time, clamped to be monotonic within the connection.
    pub timestamp: Nanos,
    pub seq: u32,
    pub ack: u32,
    /// Payload length from the IP header.
    pub payload_len: u32,
    /// TSval and TSecr, valid when notes contain `TIMESTAMPS`.
    pub ts_value: u32,
    pub ts_echo: u32,
    /// Index of this segment's first SACK block in
    /// [`Connection::sack_blocks`].
    pub sack_start: u32,
    /// Window field as sent (scale with [`Connection::window_scaling`]).
    pub window: u16,
    pub flags: TcpFlags,
    pub notes: SegmentNotes,
    pub sack_count: u8,
}

impl SegmentRecord {
    pub fn direction(&self) -> Direction {
        self.notes.direction()
    }
}

/// A finished connection, as emitted by the table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Connection {
    pub id: ConnectionId,
    pub initiator: Endpoint,
    pub responder: Endpoint,
    pub opening: Opening,
    pub first_timestamp: Nanos,
    pub last_timestamp: Nanos,
    pub finish: FinishCause,
    pub from_initiator: DirectionSummary,
    pub from_responder: DirectionSummary,
    /// Every recorded segment in trace order (empty when
    /// [`TableConfig::record_segments`] is off).
    pub segments: Vec<SegmentRecord>,
    /// SACK blocks of all segments, indexed by [`SegmentRecord::sack_start`].
    pub sack_blocks: Vec<SackBlock>,
}

impl Connection {
    pub fn direction(&self, direction: Direction) -> &DirectionSummary {
        match direction {
            Direction::FromInitiator => &self.from_initiator,
            Direction::FromResponder => &self.from_responder,
        }
    }

    fn direction_mut(&mut self, direction: Direction) -> &mut DirectionSummary {
        match direction {
            Direction::FromInitiator => &mut self.from_initiator,
            Direction::FromResponder => &mut self.from_responder,
        }
    }

    /// Both sides sent a SYN (the three-way handshake was seen, at least
    /// its first two steps).
    pub fn handshake_seen(&self) -> bool {
        self.from_initiator.syns > 0 && self.from_responder.syns > 0
    }

    /// Window scale shifts (initiator's, responder's) when both SYNs
    /// offered scaling (RFC 7323); shifts above 14 are taken as 14.
    pub fn window_scaling(&self) -> Option<(u8, u8)> {
        match (
            self.from_initiator.window_scale,
            self.from_responder.window_scale,
        ) {
            (Some(initiator), Some(responder)) => Some((initiator.min(14), responder.min(14))),
            _ => None,
        }
    }

    /// SACK was permitted by both SYNs.
    pub fn sack_permitted(&self) -> bool {
        self.from_initiator.sack_permitted && self.from_responder.sack_permitted
    }

    /// Timestamps were offered by both SYNs.
    pub fn timestamps_negotiated(&self) -> bool {
        self.from_initiator.timestamps && self.from_responder.timestamps
    }

    /// Largest payload a direction may send: the MSS its peer announced.
    pub fn mss_limit(&self, direction: Direction) -> Option<u16> {
        self.direction(direction.reverse()).mss
    }

    /// FIN seen from both sides.
    pub fn closed_by_fins(&self) -> bool {
        self.from_initiator.fin && self.from_responder.fin
    }

    /// Either side sent a RST.
    pub fn reset(&self) -> bool {
        self.from_initiator.rst || self.from_responder.rst
    }

    /// Artefacts of both directions.
    pub fn artefacts(&self) -> Artefacts {
        let mut total = self.from_initiator.artefacts;
        total.add(&self.from_responder.artefacts);
        total
    }

    /// The SACK blocks a recorded segment carried.
    pub fn sack_blocks_of(&self, record: &SegmentRecord) -> &[SackBlock] {
        let start = record.sack_start as usize;
        self.sack_blocks
            .get(start..start + usize::from(record.sack_count))
            .unwrap_or(&[])
    }
}

/// Where an observed segment went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Observation {
    /// Recorded in a connection.
    Recorded {
        connection: ConnectionId,
        direction: Direction,
        notes: SegmentNotes,
    },
    /// A capture duplicate of a recent segment: counted, not recorded.
    Duplicate {
        connection: ConnectionId,
        direction: Direction,
    },
    /// A late segment of a closed connection already emitted.
    Late,
}

/// Counters of the table as a whole.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TableStats {
    /// Segments observed.
    pub segments: u64,
    pub duplicates: u64,
    /// Segments caught by a closed connection's tombstone.
    pub late_segments: u64,
    pub connections_opened: u64,
    pub connections_finished: u64,
    /// Most connections in the table at once.
    pub peak_active: usize,
    /// Tombstones dropped early because of [`TableConfig::max_tombstones`].
    pub tombstones_evicted: u64,
    /// Connections finished early because of
    /// [`TableConfig::max_connections`], and how many of them were
    /// half-open.
    pub evicted: u64,
    pub evicted_half_open: u64,
}

/// The canonical pair of endpoints: `low` ≤ `high` by (address, port).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct FlowKey {
    low: Endpoint,
    high: Endpoint,
}

impl FlowKey {
    /// The key and whether the source is its `low` endpoint.
    fn of(source: Endpoint, destination: Endpoint) -> (FlowKey, bool) {
        if source <= destination {
            (
                FlowKey {
                    low: source,
                    high: destination,
                },
                true,
            )
        } else {
            (
                FlowKey {
                    low: destination,
                    high: source,
                },
                false,
            )
        }
    }
}

/// Disjoint half-open ranges of relative sequence numbers, at most
/// [`MAX_RANGES`] (the lowest are dropped beyond that; `dropped` counts
/// the ranges and space lost that way).
#[derive(Clone, Debug, Default)]
struct RangeSet {
    ranges: Vec<(i64, i64)>,
    dropped_ranges: u64,
    dropped_space: u64,
}

impl RangeSet {
    fn add(&mut self, start: i64, end: i64) {
        if start >= end {
            return;
        }
        let (mut start, mut end) = (start, end);
        self.ranges.retain(|&(s, e)| {
            if s <= end && start <= e {
                start = start.min(s);
                end = end.max(e);
                false
            } else {
                true
            }
        });
        self.ranges.push((start, end));
        if self.ranges.len() > MAX_RANGES {
            let lowest = (0..self.ranges.len())
                .min_by_key(|&i| self.ranges[i].0)
                .unwrap_or(0);
            let (s, e) = self.ranges.swap_remove(lowest);
            self.dropped_ranges += 1;
            self.dropped_space += (e - s) as u64;
        }
    }

    /// Removes `[start, end)`; returns how much space was removed.
    fn remove(&mut self, start: i64, end: i64) -> i64 {
        self.remove_with(start, end, |_, _| {})
    }

    /// Removes `[start, end)`, handing each removed piece to `f`; returns
    /// how much space was removed.
    fn remove_with(&mut self, start: i64, end: i64, mut f: impl FnMut(i64, i64)) -> i64 {
        if start >= end || self.ranges.is_empty() {
            return 0;
        }
        let mut removed = 0;
        let mut kept = Vec::new();
        self.ranges.retain(|&(s, e)| {
            if s < end && start < e {
                let (from, to) = (s.max(start), e.min(end));
                removed += to - from;
                f(from, to);
                if s < start {
                    kept.push((s, start));
                }
                if end < e {
                    kept.push((end, e));
                }
                false
            } else {
                true
            }
        });
        for (s, e) in kept {
            self.add(s, e);
        }
        removed
    }

    /// Removes everything below `limit`, handing each removed piece to `f`.
    fn drain_below(&mut self, limit: i64, mut f: impl FnMut(i64, i64)) {
        if self.ranges.is_empty() {
            return;
        }
        let mut kept = Vec::new();
        self.ranges.retain(|&(s, e)| {
            if s < limit {
                f(s, e.min(limit));
                if limit < e {
                    kept.push((limit, e));
                }
                false
            } else {
                true
            }
        });
        self.ranges.extend(kept);
    }

    fn count(&self) -> u64 {
        self.ranges.len() as u64 + self.dropped_ranges
    }

    fn space(&self) -> u64 {
        self.ranges
            .iter()
            .map(|&(s, e)| (e - s) as u64)
            .sum::<u64>()
            + self.dropped_space
    }
}

/// What identifies a segment for duplicate detection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Fingerprint {
    seq: u32,
    ack: u32,
    payload_len: u32,
    ts_value: u32,
    first_sack_left: u32,
    flags: u16,
    window: u16,
    ip_id: u16,
    checksum: u16,
}

impl Fingerprint {
    fn of(segment: &Segment<'_>) -> Fingerprint {
        Fingerprint {
            seq: segment.seq,
            ack: segment.ack,
            payload_len: segment.payload_len,
            ts_value: segment.options.timestamps.map_or(0, |ts| ts.value),
            first_sack_left: segment.options.sack_blocks().first().map_or(0, |b| b.left),
            flags: segment.flags.0,
            window: segment.window,
            ip_id: segment.ip_id,
            checksum: segment.checksum,
        }
    }

    /// Which of [`RECENT_BUCKETS`] buckets its sequence and
    /// acknowledgement numbers fall in (equal fingerprints share one).
    fn bucket(&self) -> usize {
        let mixed = (self.seq ^ self.ack.rotate_left(16)).wrapping_mul(0x9E37_79B1);
        (mixed >> (32 - RECENT_BUCKETS.trailing_zeros())) as usize
    }

    /// Whether a copy of this segment can be told from a genuine resend
    /// within the time window: it carries data or a control flag, or an
    /// IPv4 ID. Pure ACKs without an ID are byte-identical when they are
    /// genuine duplicate ACKs.
    fn distinguishable(&self) -> bool {
        self.payload_len > 0
            || self.flags & (TcpFlags::SYN | TcpFlags::FIN | TcpFlags::RST) != 0
            || self.ip_id != 0
    }
}

/// Counts of remembered segments per bucket (arrays longer than 32 have
/// no `Default`).
#[derive(Clone, Debug)]
struct RecentBuckets([u8; RECENT_BUCKETS]);

impl Default for RecentBuckets {
    fn default() -> RecentBuckets {
        RecentBuckets([0; RECENT_BUCKETS])
    }
}

/// Sequence tracking of one direction, in numbers relative to `base`
/// (unwrapped to 64 bits against the highest seen).
#[derive(Clone, Debug, Default)]
struct SequenceTracker {
    base: Option<u32>,
    next_relative: i64,
    /// Gaps below `next_relative` not yet seen nor acknowledged.
    gaps: RangeSet,
    /// Space acknowledged by the peer but never seen.
    unseen: RangeSet,
    /// Highest cumulative acknowledgement of this direction's space.
    acked_to: Option<i64>,
    /// Where this direction's FIN sits.
    fin_at: Option<i64>,
    /// The last [`DUPLICATE_MEMORY`] segments (a ring, grown on demand).
    recent: Vec<(Fingerprint, Nanos)>,
    recent_next: usize,
    /// How many segments of the ring fall in each bucket of
    /// [`Fingerprint::bucket`]: a segment whose bucket is empty has no
    /// copy in the ring, so the ring is only searched when it might.
    recent_buckets: RecentBuckets,
    /// IP ID of the previous segment, and whether two segments in a row
    /// carried the same one (then the sender does not number its packets).
    last_ip_id: Option<u16>,
    ip_id_constant: bool,
}

impl SequenceTracker {
    fn relative(&self, base: u32, seq: u32) -> i64 {
        let reference = base.wrapping_add(self.next_relative as u32);
        self.next_relative + i64::from(seq.wrapping_sub(reference) as i32)
    }

    fn is_duplicate(&self, fingerprint: &Fingerprint, now: Nanos, config: &TableConfig) -> bool {
        let numbered = fingerprint.ip_id != 0 && !self.ip_id_constant;
        let window = if numbered {
            config.duplicate_horizon.max(config.duplicate_window)
        } else if fingerprint.distinguishable() {
            config.duplicate_window
        } else {
            return false;
        };
        if self.recent_buckets.0[fingerprint.bucket()] == 0 {
            return false;
        }
        // Sequence and acknowledgement numbers first: they tell nearly
        // every pair apart without comparing the whole fingerprint.
        self.recent.iter().any(|(seen, at)| {
            seen.seq == fingerprint.seq
                && seen.ack == fingerprint.ack
                && seen == fingerprint
                && now.saturating_sub(*at) <= window
        })
    }

    fn remember(&mut self, fingerprint: Fingerprint, now: Nanos) {
        if self.last_ip_id == Some(fingerprint.ip_id) {
            self.ip_id_constant = true;
        }
        self.last_ip_id = Some(fingerprint.ip_id);
        self.recent_buckets.0[fingerprint.bucket()] += 1;
        if self.recent.len() < DUPLICATE_MEMORY {
            self.recent.push((fingerprint, now));
        } else {
            let (forgotten, _) = self.recent[self.recent_next];
            self.recent_buckets.0[forgotten.bucket()] -= 1;
            self.recent[self.recent_next] = (fingerprint, now);
        }
        self.recent_next = (self.recent_next + 1) % DUPLICATE_MEMORY;
    }

    /// Records that the peer acknowledged up to `acked` (relative): space
    /// beyond the highest seen, and gaps below it, were never seen.
    fn acknowledged(&mut self, acked: i64) -> bool {
        let mut unseen = false;
        let delta = acked - self.next_relative;
        if delta > OUT_OF_WINDOW {
            // A garbage acknowledgement number says nothing.
            return false;
        }
        self.acked_to = Some(self.acked_to.map_or(acked, |a| a.max(acked)));
        if delta > 0 {
            self.unseen.add(self.next_relative, acked);
            self.next_relative = acked;
            unseen = true;
        }
        let unseen_ranges = &mut self.unseen;
        self.gaps.drain_below(acked, |start, end| {
            unseen_ranges.add(start, end);
            unseen = true;
        });
        unseen
    }

    /// Records a SACK block `[left, right)` (relative): gaps it covers,
    /// and space beyond the highest seen, were never seen.
    fn selectively_acknowledged(&mut self, left: i64, right: i64) -> bool {
        if right <= left || right - left > OUT_OF_WINDOW {
            return false;
        }
        let mut unseen = false;
        let unseen_ranges = &mut self.unseen;
        self.gaps
            .remove_with(left, right.min(self.next_relative), |start, end| {
                unseen_ranges.add(start, end);
                unseen = true;
            });
        let beyond = right - self.next_relative;
        if beyond > 0 && beyond <= OUT_OF_WINDOW {
            if left > self.next_relative {
                self.gaps.add(self.next_relative, left);
            }
            self.unseen.add(left.max(self.next_relative), right);
            self.next_relative = right;
            unseen = true;
        }
        unseen
    }
}

/// A connection in the table, with its trackers.
struct ActiveConnection {
    connection: Connection,
    /// Whether the initiator is the key's `low` endpoint.
    initiator_is_low: bool,
    trackers: [SequenceTracker; 2],
    closed_at: Option<Nanos>,
}

/// Emptied buffers of finished connections, reused by new ones (at most
/// [`SPARE_BUFFERS`] of each kind, none larger than [`SPARE_CAPACITY`]).
#[derive(Default)]
struct Spares {
    recent: Vec<Vec<(Fingerprint, Nanos)>>,
    segments: Vec<Vec<SegmentRecord>>,
}

impl Spares {
    fn keep<T>(pool: &mut Vec<Vec<T>>, mut buffer: Vec<T>) {
        if pool.len() < SPARE_BUFFERS && (1..=SPARE_CAPACITY).contains(&buffer.capacity()) {
            buffer.clear();
            pool.push(buffer);
        }
    }
}

impl ActiveConnection {
    fn new(id: ConnectionId, segment: &Segment<'_>, source_is_low: bool) -> ActiveConnection {
        let flags = segment.flags;
        let (opening, source_initiates) = if flags.syn() && !flags.ack() {
            (Opening::Syn, true)
        } else if flags.syn() {
            (Opening::SynAck, false)
        } else {
            // Only the responder's port is below 1024: it serves.
            let source_serves = segment.source.port < 1024 && segment.destination.port >= 1024;
            (Opening::MidStream, !source_serves)
        };
        let (initiator, responder) = if source_initiates {
            (segment.source, segment.destination)
        } else {
            (segment.destination, segment.source)
        };
        ActiveConnection {
            connection: Connection {
                id,
                initiator,
                responder,
                opening,
                first_timestamp: segment.timestamp,
                last_timestamp: segment.timestamp,
                finish: FinishCause::EndOfTrace,
                from_initiator: DirectionSummary::default(),
                from_responder: DirectionSummary::default(),
                segments: Vec::new(),
                sack_blocks: Vec::new(),
            },
            initiator_is_low: source_initiates == source_is_low,
            trackers: [SequenceTracker::default(), SequenceTracker::default()],
            closed_at: None,
        }
    }

    /// Takes spare buffers for its segment records and duplicate rings.
    fn take_spares(&mut self, spares: &mut Spares) {
        if let Some(segments) = spares.segments.pop() {
            self.connection.segments = segments;
        }
        for tracker in &mut self.trackers {
            if let Some(recent) = spares.recent.pop() {
                tracker.recent = recent;
            }
        }
    }

    fn direction_of(&self, source_is_low: bool) -> Direction {
        if source_is_low == self.initiator_is_low {
            Direction::FromInitiator
        } else {
            Direction::FromResponder
        }
    }

    /// Whether `segment` opens a new connection on this 4-tuple instead of
    /// belonging to this one (see the module docs).
    fn superseded_by(&self, segment: &Segment<'_>, direction: Direction) -> bool {
        let flags = segment.flags;
        if !flags.syn() {
            return false;
        }
        let sender = self.connection.direction(direction);
        let peer = self.connection.direction(direction.reverse());
        if !flags.ack() {
            return match sender.isn {
                Some(isn) => isn != segment.seq,
                None if self.closed_at.is_some() => true,
                // Nothing seen from this side yet: simultaneous open, or
                // the SYN of a connection first seen from the other side.
                None => sender
                    .first_seq
                    .is_some_and(|first| first != segment.seq.wrapping_add(1)),
            };
        }
        // It answers this connection's SYN if it acknowledges the SYN (plus
        // any TCP Fast Open data the SYN carried).
        let answers_our_syn = match peer.isn {
            Some(isn) => (1..=MAX_SYN_DATA + 1).contains(&segment.ack.wrapping_sub(isn)),
            None => peer.first_seq == Some(segment.ack),
        };
        let repeats_our_isn = sender.isn == Some(segment.seq);
        if answers_our_syn || repeats_our_isn {
            false
        } else if peer.isn.is_some() || sender.isn.is_some() {
            true
        } else {
            self.closed_at.is_some()
        }
    }

    /// Opened by a SYN that no SYN-ACK has answered yet.
    fn half_open(&self) -> bool {
        self.connection.opening == Opening::Syn && self.connection.from_responder.syns == 0
    }

    /// After FINs, data below a FIN that was never seen, or never
    /// acknowledged: a retransmission is still due (not after a RST).
    fn awaits_retransmission(&self) -> bool {
        !self.connection.reset()
            && self.trackers.iter().any(|tracker| {
                !tracker.gaps.ranges.is_empty()
                    || tracker
                        .fin_at
                        .is_some_and(|fin| tracker.acked_to.is_none_or(|acked| acked < fin))
            })
    }

    fn expired(&self, now: Nanos, config: &TableConfig) -> Option<FinishCause> {
        let idle = now - self.connection.last_timestamp;
        if self.closed_at.is_some() && idle > config.close_linger && !self.awaits_retransmission() {
            Some(FinishCause::Closed)
        } else if idle > config.idle_timeout
            || (self.half_open()
                && config
                    .half_open_limit
                    .is_some_and(|limit| now - self.connection.first_timestamp > limit))
        {
            Some(FinishCause::IdleTimeout)
        } else {
            None
        }
    }

    /// Takes in one segment of this connection.
    fn observe(
        &mut self,
        segment: &Segment<'_>,
        direction: Direction,
        config: &TableConfig,
    ) -> Observation {
        let id = self.connection.id;
        let d = direction.index();
        let mut notes = SegmentNotes::default();
        if direction == Direction::FromResponder {
            notes.set(SegmentNotes::FROM_RESPONDER);
        }
        let mut timestamp = segment.timestamp;
        if timestamp < self.connection.last_timestamp {
            timestamp = self.connection.last_timestamp;
            notes.set(SegmentNotes::TIMESTAMP_CLAMPED);
        }

        let fingerprint = Fingerprint::of(segment);
        if self.trackers[d].is_duplicate(&fingerprint, timestamp, config) {
            self.connection
                .direction_mut(direction)
                .artefacts
                .duplicates += 1;
            return Observation::Duplicate {
                connection: id,
                direction,
            };
        }
        self.trackers[d].remember(fingerprint, timestamp);
        self.connection.last_timestamp = timestamp;

        let peer_mss = self.connection.direction(direction.reverse()).mss;
        let flags = segment.flags;
        {
            let summary = self.connection.direction_mut(direction);
            summary.segments += 1;
            summary.payload_bytes += u64::from(segment.payload_len);
            summary.first_timestamp.get_or_insert(timestamp);
            summary.last_timestamp = Some(timestamp);
            if notes.contains(SegmentNotes::TIMESTAMP_CLAMPED) {
                summary.artefacts.timestamps_clamped += 1;
            }
            if flags.syn() {
                summary.syns += 1;
                summary.isn.get_or_insert(segment.seq);
                summary.mss = segment.options.mss;
                summary.window_scale = segment.options.window_scale;
                summary.sack_permitted = segment.options.sack_permitted;
                summary.timestamps = segment.options.timestamps.is_some();
            }
            summary.fin |= flags.fin();
            summary.rst |= flags.rst();
            summary.first_seq.get_or_insert(segment.seq);
            if segment.truncated {
                notes.set(SegmentNotes::TRUNCATED);
                summary.artefacts.truncated_segments += 1;
            }
            if segment.length_from_frame {
                notes.set(SegmentNotes::LENGTH_FROM_FRAME);
            }
            if peer_mss.is_some_and(|mss| segment.payload_len > u32::from(mss)) {
                notes.set(SegmentNotes::SUPER_SEGMENT);
                summary.artefacts.super_segments += 1;
            }
        }

        self.track_sequence(segment, direction, &mut notes);
        if flags.ack() {
            self.track_acknowledgement(segment, direction, &mut notes);
        }
        for tracked in [Direction::FromInitiator, Direction::FromResponder] {
            let tracker = &self.trackers[tracked.index()];
            if let Some(base) = tracker.base {
                self.connection.direction_mut(tracked).next_seq =
                    Some(base.wrapping_add(tracker.next_relative as u32));
            }
        }

        let closed = self.connection.closed_by_fins() || self.connection.reset();
        if closed && self.closed_at.is_none() {
            self.closed_at = Some(timestamp);
        }

        if config.record_segments {
            self.record(segment, timestamp, notes);
        }
        Observation::Recorded {
            connection: id,
            direction,
            notes,
        }
    }

    fn track_sequence(
        &mut self,
        segment: &Segment<'_>,
        direction: Direction,
        notes: &mut SegmentNotes,
    ) {
        let first_syn = segment.flags.syn() && self.connection.direction(direction).syns == 1;
        let tracker = &mut self.trackers[direction.index()];
        let base = *tracker.base.get_or_insert(segment.seq);
        let mut start = tracker.relative(base, segment.seq);
        if first_syn && (start - tracker.next_relative).abs() > OUT_OF_WINDOW {
            // A side's first SYN defines its sequence space: whatever came
            // before it from that side (a stray or injected RST) does not.
            tracker.base = Some(segment.seq);
            tracker.next_relative = 0;
            tracker.gaps = RangeSet::default();
            tracker.unseen = RangeSet::default();
            start = 0;
        }
        if (start - tracker.next_relative).abs() > OUT_OF_WINDOW {
            notes.set(SegmentNotes::OUT_OF_WINDOW);
            self.connection
                .direction_mut(direction)
                .artefacts
                .out_of_window += 1;
            return;
        }
        let length = segment.sequence_len() as i64;
        let end = start + length;
        if segment.flags.fin() {
            tracker.fin_at.get_or_insert(end - 1);
        }
        if start > tracker.next_relative {
            tracker.gaps.add(tracker.next_relative, start);
            notes.set(SegmentNotes::AFTER_GAP);
        }
        let mut resent = 0;
        let mut late = 0;
        if length > 0 && start < tracker.next_relative {
            let overlap_end = end.min(tracker.next_relative);
            let filled = tracker.gaps.remove(start, overlap_end);
            late = tracker.unseen.remove(start, overlap_end);
            resent = overlap_end - start - filled - late;
            if filled > 0 {
                notes.set(SegmentNotes::FILLS_GAP);
            }
            if late > 0 {
                notes.set(SegmentNotes::SEEN_AFTER_ACK);
            }
            if resent > 0 {
                notes.set(SegmentNotes::RETRANSMISSION);
            }
        }
        tracker.next_relative = tracker.next_relative.max(end);
        let summary = self.connection.direction_mut(direction);
        if resent > 0 {
            summary.retransmissions += 1;
            summary.retransmitted_bytes += resent as u64;
        }
        if late > 0 {
            summary.artefacts.seen_after_ack += 1;
        }
    }

    fn track_acknowledgement(
        &mut self,
        segment: &Segment<'_>,
        direction: Direction,
        notes: &mut SegmentNotes,
    ) {
        let peer_direction = direction.reverse();
        let tracker = &mut self.trackers[peer_direction.index()];
        let base = match tracker.base {
            Some(base) => base,
            None if segment.flags.syn() => {
                // A SYN-ACK before the SYN it answers: the initiator's ISN.
                let isn = segment.ack.wrapping_sub(1);
                tracker.base = Some(isn);
                self.connection
                    .direction_mut(peer_direction)
                    .isn
                    .get_or_insert(isn);
                isn
            }
            None => return,
        };
        let mut unseen = tracker.acknowledged(tracker.relative(base, segment.ack));
        for block in segment.options.sack_blocks() {
            let left = tracker.relative(base, block.left);
            let right = tracker.relative(base, block.right);
            unseen |= tracker.selectively_acknowledged(left, right);
        }
        if unseen {
            notes.set(SegmentNotes::ACKS_UNSEEN);
        }
    }

    fn record(&mut self, segment: &Segment<'_>, timestamp: Nanos, mut notes: SegmentNotes) {
        let (ts_value, ts_echo) = match segment.options.timestamps {
            Some(ts) => {
                notes.set(SegmentNotes::TIMESTAMPS);
                (ts.value, ts.echo_reply)
            }
            None => (0, 0),
        };
        let sack = segment.options.sack_blocks();
        let sack_start = self.connection.sack_blocks.len() as u32;
        self.connection.sack_blocks.extend_from_slice(sack);
        self.connection.segments.push(SegmentRecord {
            timestamp,
            seq: segment.seq,
            ack: segment.ack,
            payload_len: segment.payload_len,
            ts_value,
            ts_echo,
            sack_start,
            window: segment.window,
            flags: segment.flags,
            notes,
            sack_count: sack.len() as u8,
        });
    }

    /// Turns the connection into what is emitted: artefacts that are only
    /// known at the end (capture drops) are filled in.
    fn into_finished(mut self: Box<Self>, cause: FinishCause) -> Connection {
        let closed = self.closed_at.is_some();
        self.connection.finish = match cause {
            FinishCause::Superseded | FinishCause::EndOfTrace if closed => FinishCause::Closed,
            other => other,
        };
        for direction in [Direction::FromInitiator, Direction::FromResponder] {
            let tracker = &self.trackers[direction.index()];
            let artefacts = &mut self.connection.direction_mut(direction).artefacts;
            artefacts.capture_drops = tracker.unseen.count();
            artefacts.capture_dropped_bytes = tracker.unseen.space();
        }
        self.connection
    }

    fn tombstone(&self, now: Nanos) -> Tombstone {
        let next = |d: Direction| {
            let tracker = &self.trackers[d.index()];
            tracker
                .base
                .map(|base| base.wrapping_add(tracker.next_relative as u32))
        };
        Tombstone {
            id: self.connection.id,
            initiator_is_low: self.initiator_is_low,
            isn: [
                self.connection.from_initiator.isn,
                self.connection.from_responder.isn,
            ],
            next_seq: [
                next(Direction::FromInitiator),
                next(Direction::FromResponder),
            ],
            finished_at: now,
        }
    }
}

/// What remains of a closed connection after it was emitted.
#[derive(Clone, Copy, Debug)]
struct Tombstone {
    id: ConnectionId,
    initiator_is_low: bool,
    isn: [Option<u32>; 2],
    next_seq: [Option<u32>; 2],
    finished_at: Nanos,
}

impl Tombstone {
    /// Whether `segment` is a late segment of this finished connection.
    fn claims(&self, segment: &Segment<'_>, source_is_low: bool) -> bool {
        let direction = if source_is_low == self.initiator_is_low {
            Direction::FromInitiator
        } else {
            Direction::FromResponder
        };
        let d = direction.index();
        if segment.flags.syn() {
            return self.isn[d] == Some(segment.seq);
        }
        self.next_seq[d].is_some_and(|next| {
            i64::from(segment.seq.wrapping_sub(next) as i32).abs() <= TOMBSTONE_REACH
        })
    }
}

/// The streaming connection table. Feed it segments in trace order with
/// [`observe`](Self::observe); take finished connections with
/// [`pop_finished`](Self::pop_finished); call
/// [`finish_all`](Self::finish_all) at the end of the trace.
pub struct ConnectionTable {
    config: TableConfig,
    active: FlowMap<Box<ActiveConnection>>,
    tombstones: FlowMap<Tombstone>,
    tombstone_order: VecDeque<(FlowKey, ConnectionId)>,
    /// Connections in the order they were opened, and those opened by a
    /// SYN, for eviction (entries of finished connections are skipped, and
    /// compacted away).
    open_order: VecDeque<(FlowKey, ConnectionId)>,
    half_open_order: VecDeque<(FlowKey, ConnectionId)>,
    finished: VecDeque<Connection>,
    spares: Spares,
    now: Nanos,
    last_sweep: Nanos,
    observed_since_sweep: usize,
    next_id: u64,
    stats: TableStats,
    expired_keys: Vec<(FlowKey, FinishCause)>,
    expired_order: Vec<(Nanos, ConnectionId, usize)>,
}

impl ConnectionTable {
    pub fn new(config: TableConfig) -> ConnectionTable {
        ConnectionTable {
            config,
            active: FlowMap::default(),
            tombstones: FlowMap::default(),
            tombstone_order: VecDeque::new(),
            open_order: VecDeque::new(),
            half_open_order: VecDeque::new(),
            finished: VecDeque::new(),
            spares: Spares::default(),
            now: Nanos::ZERO,
            last_sweep: Nanos::ZERO,
            observed_since_sweep: 0,
            next_id: 0,
            stats: TableStats::default(),
            expired_keys: Vec::new(),
            expired_order: Vec::new(),
        }
    }

    /// Sets [`TableConfig::half_open_limit`] for connections checked from
    /// now on.
    pub fn set_half_open_limit(&mut self, limit: Option<Nanos>) {
        self.config.half_open_limit = limit;
    }

    pub fn config(&self) -> &TableConfig {
        &self.config
    }

    pub fn stats(&self) -> &TableStats {
        &self.stats
    }

    /// Connections currently in the table.
    pub fn active_len(&self) -> usize {
        self.active.len()
    }

    /// Tombstones currently kept.
    pub fn tombstone_len(&self) -> usize {
        self.tombstones.len()
    }

    /// The latest trace time seen (or given to [`expire`](Self::expire)).
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Takes in one segment; finished connections it causes (port reuse,
    /// timeouts) are queued for [`pop_finished`](Self::pop_finished).
    pub fn observe(&mut self, segment: &Segment<'_>) -> Observation {
        self.stats.segments += 1;
        self.now = self.now.max(segment.timestamp);
        let (key, source_is_low) = FlowKey::of(segment.source, segment.destination);

        // One lookup on the common path. A connection whose linger or idle
        // timeout has passed is finished before it could take this segment,
        // however lazily sweeps run.
        let now = self.now;
        let replaced = match self.active.get_mut(&key) {
            Some(active) => match active.expired(now, &self.config) {
                Some(cause) => Some(cause),
                None => {
                    let direction = active.direction_of(source_is_low);
                    if active.superseded_by(segment, direction) {
                        Some(FinishCause::Superseded)
                    } else {
                        let observation = active.observe(segment, direction, &self.config);
                        if let Observation::Duplicate { .. } = observation {
                            self.stats.duplicates += 1;
                        }
                        self.maybe_sweep();
                        return observation;
                    }
                }
            },
            None => None,
        };
        if let Some(cause) = replaced {
            if let Some(previous) = self.active.remove(&key) {
                self.finish(key, previous, cause);
            }
        }
        if let Some(tombstone) = self.tombstones.get(&key) {
            if tombstone.claims(segment, source_is_low) {
                self.stats.late_segments += 1;
                self.maybe_sweep();
                return Observation::Late;
            }
            self.tombstones.remove(&key);
        }

        while self.active.len() >= self.config.max_connections.max(1) {
            if !self.evict_one() {
                break;
            }
        }
        let id = ConnectionId(self.next_id);
        self.next_id += 1;
        self.stats.connections_opened += 1;
        let mut active = Box::new(ActiveConnection::new(id, segment, source_is_low));
        active.take_spares(&mut self.spares);
        let direction = active.direction_of(source_is_low);
        let observation = active.observe(segment, direction, &self.config);
        if active.connection.opening == Opening::Syn {
            self.half_open_order.push_back((key, id));
        }
        self.open_order.push_back((key, id));
        self.active.insert(key, active);
        self.compact_orders();
        self.stats.peak_active = self.stats.peak_active.max(self.active.len());
        self.maybe_sweep();
        observation
    }

    /// The next finished connection, oldest first.
    pub fn pop_finished(&mut self) -> Option<Connection> {
        self.finished.pop_front()
    }

    /// Gives back the segment records of a finished connection that are
    /// no longer needed: a new connection reuses the buffer (optional;
    /// records dropped instead are freed).
    pub fn recycle(&mut self, segments: Vec<SegmentRecord>) {
        Spares::keep(&mut self.spares.segments, segments);
    }

    /// Advances trace time to `now` (if later) and finishes every
    /// connection whose linger or idle timeout has passed.
    pub fn expire(&mut self, now: Nanos) {
        self.now = self.now.max(now);
        self.sweep();
    }

    /// Finishes every connection still in the table (end of trace), in the
    /// order they were opened.
    pub fn finish_all(&mut self) {
        let mut remaining: Vec<(FlowKey, Box<ActiveConnection>)> = self.active.drain().collect();
        remaining.sort_by_key(|(_, active)| active.connection.id);
        for (key, active) in remaining {
            self.finish(key, active, FinishCause::EndOfTrace);
        }
    }

    /// Finishes the oldest half-open connection, else the oldest one;
    /// false if the table is empty.
    fn evict_one(&mut self) -> bool {
        while let Some((key, id)) = self.half_open_order.pop_front() {
            let still_half_open = self
                .active
                .get(&key)
                .is_some_and(|a| a.connection.id == id && a.half_open());
            if still_half_open {
                if let Some(active) = self.active.remove(&key) {
                    self.stats.evicted += 1;
                    self.stats.evicted_half_open += 1;
                    self.finish(key, active, FinishCause::Evicted);
                    return true;
                }
            }
        }
        while let Some((key, id)) = self.open_order.pop_front() {
            if self.active.get(&key).is_some_and(|a| a.connection.id == id) {
                if let Some(active) = self.active.remove(&key) {
                    self.stats.evicted += 1;
                    self.finish(key, active, FinishCause::Evicted);
                    return true;
                }
            }
        }
        false
    }

    /// When the oldest connection still in the table was first seen
    /// (`None` when it is empty): a connection finished later starts no
    /// earlier, unless the capture's timestamps go backwards.
    pub fn oldest_active_since(&mut self) -> Option<Nanos> {
        while let Some((key, id)) = self.open_order.front() {
            match self.active.get(key) {
                Some(a) if a.connection.id == *id => return Some(a.connection.first_timestamp),
                _ => {
                    self.open_order.pop_front();
                }
            }
        }
        None
    }

    /// Drops order entries of connections no longer in the table once they
    /// outnumber the live ones, so the queues follow the table's size.
    fn compact_orders(&mut self) {
        let limit = 2 * self.active.len() + 64;
        let active = &self.active;
        let live = |(key, id): &(FlowKey, ConnectionId)| {
            active.get(key).is_some_and(|a| a.connection.id == *id)
        };
        if self.open_order.len() > limit {
            self.open_order.retain(live);
        }
        if self.half_open_order.len() > limit {
            self.half_open_order.retain(|(key, id)| {
                active
                    .get(key)
                    .is_some_and(|a| a.connection.id == *id && a.half_open())
            });
        }
    }

    fn finish(&mut self, key: FlowKey, mut active: Box<ActiveConnection>, cause: FinishCause) {
        if active.closed_at.is_some() && cause != FinishCause::Superseded {
            self.bury(key, active.tombstone(self.now));
        }
        for tracker in &mut active.trackers {
            Spares::keep(&mut self.spares.recent, std::mem::take(&mut tracker.recent));
        }
        self.stats.connections_finished += 1;
        self.finished.push_back(active.into_finished(cause));
    }

    fn bury(&mut self, key: FlowKey, tombstone: Tombstone) {
        if self.config.max_tombstones == 0 {
            return;
        }
        while self.tombstones.len() >= self.config.max_tombstones {
            if !self.pop_oldest_tombstone() {
                break;
            }
            self.stats.tombstones_evicted += 1;
        }
        self.tombstone_order.push_back((key, tombstone.id));
        self.tombstones.insert(key, tombstone);
    }

    /// Drops the oldest tombstone still current; false if none is left.
    fn pop_oldest_tombstone(&mut self) -> bool {
        while let Some((key, id)) = self.tombstone_order.pop_front() {
            if self.tombstones.get(&key).is_some_and(|t| t.id == id) {
                self.tombstones.remove(&key);
                return true;
            }
        }
        false
    }

    /// Sweeps when trace time has moved on and enough segments have been
    /// observed since the last sweep to pay for it (amortised O(1) per
    /// segment), or at the latest once per idle timeout of trace time.
    fn maybe_sweep(&mut self) {
        self.observed_since_sweep += 1;
        let elapsed = self.now - self.last_sweep;
        let interval = Nanos(self.config.close_linger.0.min(self.config.idle_timeout.0) / 2);
        let paid_for = self.observed_since_sweep >= self.active.len();
        if (elapsed >= interval && paid_for) || elapsed >= self.config.idle_timeout {
            self.sweep();
        }
    }

    fn sweep(&mut self) {
        self.observed_since_sweep = 0;
        self.last_sweep = self.now;
        let now = self.now;
        let mut expired = std::mem::take(&mut self.expired_keys);
        let mut order = std::mem::take(&mut self.expired_order);
        expired.clear();
        order.clear();
        for (key, active) in &self.active {
            if let Some(cause) = active.expired(now, &self.config) {
                order.push((
                    active.connection.last_timestamp,
                    active.connection.id,
                    expired.len(),
                ));
                expired.push((*key, cause));
            }
        }
        // Ids are unique: an unstable sort gives the one order. The keys
        // stay where they are; only (time, id, index) entries move.
        order.sort_unstable_by_key(|&(last, id, _)| (last, id));
        for &(_, _, index) in &order {
            let (key, cause) = expired[index];
            if let Some(active) = self.active.remove(&key) {
                self.finish(key, active, cause);
            }
        }
        self.expired_keys = expired;
        self.expired_order = order;
        while let Some(&(key, id)) = self.tombstone_order.front() {
            match self.tombstones.get(&key) {
                Some(tombstone) if tombstone.id == id => {
                    if now - tombstone.finished_at < self.config.time_wait {
                        break;
                    }
                    self.tombstones.remove(&key);
                }
                _ => {}
            }
            self.tombstone_order.pop_front();
        }
    }
}
