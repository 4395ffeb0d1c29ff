//! Certes measurements from a server-side packet capture: per connection
//! to a listener, every SYN, which one the server answered, the handshake
//! RTT, and the connection's END.
//!
//! Certes paper, Section 3 (Eq. 1) and Section 4. The paper's kernel
//! counts SYNs dropped and accepted, and times SYN-to-END and RTT; a
//! capture at the server shows all of that per connection, and more: a
//! client re-sends a dropped SYN with the same 4-tuple and initial sequence
//! number (the [`ConnectionTable`]'s identity), so the capture knows each
//! connection's retry count, which the server's kernel cannot (Section 3:
//! "the server is unaware of how many failed connection attempts have been
//! made"). That makes the exact CONN-FAIL available to check the model
//! against (`vantage_core::certes::observed`).
//!
//! Per connection ([`Handshake::from_connection`]):
//! * the **server** is the responder: the side that received the SYN;
//! * **SYNs**: every SYN from the client; the **answered** one is the last
//!   SYN at or before the server's first SYN-ACK; those before it were
//!   dropped (by the server, or lost on the way — a capture at the server
//!   cannot tell, and neither can the client); SYNs after it re-sent a SYN
//!   whose SYN-ACK was lost or late;
//! * a RST from the server before any SYN-ACK **refuses** the connection;
//! * **RTT**: from the latest SYN-ACK sent before the client's first
//!   segment acknowledging it, to that segment (Section 3: "from when the
//!   SYN/ACK is sent … to when the server receives the ACK back"; the
//!   latest SYN-ACK, because when the server dropped the handshake ACK at a
//!   full accept queue it re-sends the SYN-ACK and the client ACKs again);
//! * **END** (Section 4): the earliest of the server's last data segment,
//!   the server's first FIN and the first RST either way, all after the
//!   first SYN-ACK.
//!
//! Departures from Section 4, with their reasons: the paper also ends the
//! transaction at a FIN *from the client*. A client that half-closes after
//! its request (`shutdown(SHUT_WR)`, as some HTTP/1.0 clients do) is still
//! waiting for the response, and ending there would cut its response time
//! short; here the client's FIN is END only when the server sent no data.
//! Likewise the server's first FIN is END only when no data segment
//! follows it: data after a FIN is a retransmission of a segment lost on
//! the way (often the last one, which carries the FIN), and the client
//! waits for it — Section 3 ends SYN-to-END when "the server sends the
//! last data packet", and the client's time when it is received. A FIN
//! re-sent alone (the FIN lost, the data not) ends nothing later: the
//! client already had the response.
//!
//! A connection's END is **unknown** — and its outcome unresolved — when
//! the capture stopped before it: no FIN or RST from the server, no RST,
//! no client FIN after the server's last data, and the connection still
//! open at the end of the trace. (Data followed by a long silence — the
//! table's idle timeout — or by a reuse of the 4-tuple ends at the last
//! data.)
//!
//! Which connections count: those to the listener given
//! ([`HandshakeConfig::server`]), or by default to every responder that
//! answered at least one SYN in the capture (a listener whose every SYN
//! was dropped must be named). Connections whose first SYN the capture did
//! not see (started mid-stream, or only the SYN-ACK seen) are skipped and
//! counted.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::IpAddr;
use std::path::Path;
use std::str::FromStr;

use serde::Serialize;
use smallvec::SmallVec;
use vantage_core::certes::counters::IntervalCounters;
use vantage_core::certes::input::CaptureNotes;
use vantage_core::certes::learn::AttemptOutcome;
use vantage_core::certes::observed::{
    compare, estimate_intervals, Comparison, ConnectionObservation, ExactFigures, Failure,
    IntervalGrid, ObservedCounters, ObservedError,
};
use vantage_core::certes::{Certes, CertesConfig, CertesError, Estimate};
use vantage_core::Nanos;

use crate::certes::{CaptureInputError, CaptureStream};
use crate::connection::{Connection, ConnectionTable, Direction, FinishCause, SegmentNotes};
use crate::connection::{Opening, TableConfig};
use crate::decode::{decode, Endpoint, SkipCounts};
use crate::error::TraceError;
use crate::file::{Packet, TraceReader};

/// Acknowledgement distance beyond which an ACK is not for this SYN-ACK.
const ACK_REACH: u32 = 1 << 30;

/// Which listener's connections to take: an address, a port, or both.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ServerFilter {
    pub ip: Option<IpAddr>,
    pub port: Option<u16>,
}

impl ServerFilter {
    pub fn matches(&self, endpoint: &Endpoint) -> bool {
        self.ip.is_none_or(|ip| ip == endpoint.ip) && self.port.is_none_or(|p| p == endpoint.port)
    }
}

impl FromStr for ServerFilter {
    type Err = String;

    /// `ADDR:PORT`, `[V6ADDR]:PORT`, `ADDR` or `:PORT`.
    fn from_str(text: &str) -> Result<ServerFilter, String> {
        let text = text.trim();
        if let Ok(socket) = text.parse::<std::net::SocketAddr>() {
            return Ok(ServerFilter {
                ip: Some(socket.ip()),
                port: Some(socket.port()),
            });
        }
        if let Ok(ip) = text.trim_matches(['[', ']']).parse::<IpAddr>() {
            return Ok(ServerFilter {
                ip: Some(ip),
                port: None,
            });
        }
        if let Some(port) = text.strip_prefix(':').and_then(|p| p.parse::<u16>().ok()) {
            return Ok(ServerFilter {
                ip: None,
                port: Some(port),
            });
        }
        Err(format!(
            "`{text}` is not a listener: give ADDR:PORT (10.0.0.2:80, [2001:db8::1]:443), ADDR, or :PORT"
        ))
    }
}

impl fmt::Display for ServerFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.ip, self.port) {
            (Some(ip), Some(port)) => write!(f, "{}", std::net::SocketAddr::new(ip, port)),
            (Some(ip), None) => write!(f, "{ip}"),
            (None, Some(port)) => write!(f, ":{port}"),
            (None, None) => write!(f, "any listener"),
        }
    }
}

/// Classes of traffic for per-class estimates (Section 3.2.4): what a SYN
/// carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum ClassBy {
    /// The listener's address and port.
    Listener,
    /// The client's address cut to its first N bits.
    SourcePrefix(u8),
}

impl FromStr for ClassBy {
    type Err = String;

    /// `listener` or `source-prefix/N`.
    fn from_str(text: &str) -> Result<ClassBy, String> {
        if text == "listener" {
            return Ok(ClassBy::Listener);
        }
        if let Some(bits) = text.strip_prefix("source-prefix/") {
            if let Ok(bits) = bits.parse::<u8>() {
                if bits <= 128 {
                    return Ok(ClassBy::SourcePrefix(bits));
                }
            }
        }
        Err(format!(
            "`{text}` is not a class: give `listener` or `source-prefix/N` (N in 0..=32 for IPv4, 0..=128 for IPv6)"
        ))
    }
}

impl ClassBy {
    /// The class of a connection, as text (`10.0.0.2:80`, `10.1.0.0/16`).
    pub fn class_of(&self, handshake: &Handshake) -> String {
        match *self {
            ClassBy::Listener => handshake.server.to_string(),
            ClassBy::SourcePrefix(bits) => match handshake.client.ip {
                IpAddr::V4(ip) => {
                    let bits = bits.min(32);
                    let mask = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
                    let network = std::net::Ipv4Addr::from(u32::from(ip) & mask);
                    format!("{network}/{bits}")
                }
                IpAddr::V6(ip) => {
                    let bits = bits.min(128);
                    let mask = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
                    let network = std::net::Ipv6Addr::from(u128::from(ip) & mask);
                    format!("{network}/{bits}")
                }
            },
        }
    }
}

/// What to read from a capture.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HandshakeConfig {
    /// The listener; `None`: every responder that answered a SYN.
    pub server: Option<ServerFilter>,
    /// The connection table's timeouts (segments are always recorded).
    pub table: TableConfig,
}

/// A connection's SYN-ACK times: two inline before it allocates.
pub type SynAckTimes = SmallVec<[Nanos; 2]>;

/// Times serialized as a sequence, as a `Vec` of them is.
fn serialize_times<S: serde::Serializer>(
    times: &SynAckTimes,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_seq(times.iter())
}

/// One connection attempt to a listener, as the server's capture saw it.
/// Times are capture timestamps (ns since the UNIX epoch for pcap).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Handshake {
    pub client: Endpoint,
    pub server: Endpoint,
    /// The client's initial sequence number.
    pub isn: Option<u32>,
    /// Every SYN from the client, in capture order.
    pub syns: Vec<Nanos>,
    /// Index in `syns` of the SYN the first SYN-ACK answered.
    pub answered: Option<usize>,
    /// Every SYN-ACK the server sent (nearly always one or two: held
    /// inline, no allocation per connection).
    #[serde(serialize_with = "serialize_times")]
    pub synacks: SynAckTimes,
    /// The server answered a SYN with a RST.
    pub refused: bool,
    /// The client's first segment acknowledging the SYN-ACK.
    pub handshake_ack: Option<Nanos>,
    /// `handshake_ack` − the latest SYN-ACK before it.
    pub rtt: Option<Nanos>,
    /// The server's last segment carrying data.
    pub last_data: Option<Nanos>,
    pub server_fin: Option<Nanos>,
    pub client_fin: Option<Nanos>,
    /// First RST, either way, after the first SYN-ACK.
    pub reset: Option<Nanos>,
    /// The server sent that first RST.
    pub reset_by_server: bool,
    /// END (see the module docs); `None` when the capture stopped first.
    pub end: Option<Nanos>,
    /// Data segments the server sent, and how many of them re-sent data.
    pub data_segments: u64,
    pub data_retransmissions: u64,
    /// How the connection table finished the connection.
    pub finish: FinishCause,
}

impl Handshake {
    /// The Certes measurements of one connection; `None` when the
    /// client's SYN was not captured.
    pub fn from_connection(connection: &Connection) -> Option<Handshake> {
        if connection.opening == Opening::MidStream || connection.from_initiator.syns == 0 {
            return None;
        }
        let server_isn = connection.from_responder.isn;
        let mut h = Handshake {
            client: connection.initiator,
            server: connection.responder,
            isn: connection.from_initiator.isn,
            // At most one entry per SYN the table counted: sized once.
            syns: Vec::with_capacity(connection.from_initiator.syns as usize),
            answered: None,
            synacks: SynAckTimes::new(),
            refused: false,
            handshake_ack: None,
            rtt: None,
            last_data: None,
            server_fin: None,
            client_fin: None,
            reset: None,
            reset_by_server: false,
            end: None,
            data_segments: 0,
            data_retransmissions: 0,
            finish: connection.finish,
        };
        for record in &connection.segments {
            let t = record.timestamp;
            let flags = record.flags;
            let answered = !h.synacks.is_empty();
            match record.direction() {
                Direction::FromInitiator => {
                    if flags.syn() {
                        if !flags.ack() {
                            h.syns.push(t);
                        }
                        continue;
                    }
                    if !answered {
                        continue;
                    }
                    let acks_synack = flags.ack()
                        && server_isn.is_some_and(|isn| {
                            (1..ACK_REACH).contains(&record.ack.wrapping_sub(isn))
                        });
                    if acks_synack && h.handshake_ack.is_none() {
                        h.handshake_ack = Some(t);
                        let sent = h.synacks.iter().rev().find(|s| **s <= t);
                        h.rtt = sent.map(|s| t - *s);
                    }
                    if flags.fin() {
                        h.client_fin.get_or_insert(t);
                    }
                    if flags.rst() && h.reset.is_none() {
                        h.reset = Some(t);
                    }
                }
                Direction::FromResponder => {
                    if flags.syn() && flags.ack() {
                        h.synacks.push(t);
                    } else if flags.rst() && !answered {
                        if !h.syns.is_empty() {
                            h.refused = true;
                        }
                        continue;
                    } else if !answered {
                        continue;
                    }
                    if record.payload_len > 0 {
                        h.data_segments += 1;
                        if record.notes.contains(SegmentNotes::RETRANSMISSION) {
                            h.data_retransmissions += 1;
                        }
                        h.last_data = Some(t);
                    }
                    if flags.fin() {
                        h.server_fin.get_or_insert(t);
                    }
                    if flags.rst() && h.reset.is_none() {
                        h.reset = Some(t);
                        h.reset_by_server = true;
                    }
                }
            }
        }
        if h.syns.is_empty() {
            return None;
        }
        if let Some(&first_synack) = h.synacks.first() {
            // The last SYN at or before the first SYN-ACK (timestamps are
            // monotonic within a connection; a SYN captured after its
            // SYN-ACK carries the SYN-ACK's time).
            h.answered = h.syns.iter().rposition(|s| *s <= first_synack).or(Some(0));
            h.refused = false;
            h.end = h.end_of_transaction();
        }
        Some(h)
    }

    /// END, or `None` while the connection could still send (see the
    /// module docs).
    fn end_of_transaction(&self) -> Option<Nanos> {
        let client_fin_ends = match (self.client_fin, self.last_data) {
            (Some(_), None) => true,
            (Some(fin), Some(data)) => fin >= data,
            (None, _) => false,
        };
        // A data segment after the server's first FIN can only be a
        // retransmission (no new data follows a FIN): the client is still
        // waiting for it, so that FIN ends nothing.
        let server_fin_ends = match (self.server_fin, self.last_data) {
            (Some(_), None) => true,
            (Some(fin), Some(data)) => fin >= data,
            (None, _) => false,
        };
        let over = self.server_fin.is_some()
            || self.reset.is_some()
            || client_fin_ends
            || (self.last_data.is_some() && self.finish != FinishCause::EndOfTrace);
        if !over {
            return None;
        }
        let client_fin = if self.last_data.is_none() {
            self.client_fin
        } else {
            None
        };
        let server_fin = self.server_fin.filter(|_| server_fin_ends);
        [self.last_data, server_fin, self.reset, client_fin]
            .into_iter()
            .flatten()
            .min()
    }

    /// An accepted connection ended by a RST before the server sent any
    /// data: reset by the server or aborted by the client.
    pub fn failure(&self) -> Option<Failure> {
        let reset = self.reset?;
        if self.end != Some(reset) || self.last_data.is_some() {
            return None;
        }
        Some(if self.reset_by_server {
            Failure::Reset
        } else {
            Failure::Aborted
        })
    }

    /// Retransmitted SYNs before the answered one.
    pub fn retries(&self) -> Option<usize> {
        self.answered
    }

    /// The connection as the client learner's input
    /// (`vantage_core::certes::learn::SynLearner::observe`): the SYNs that
    /// reached the server through the one it answered, and whether one was
    /// answered. A connection the server refused (RST) is no attempt that
    /// ended by acceptance or by the client giving up: `None`.
    pub fn learner_attempt(&self) -> Option<(&[Nanos], AttemptOutcome)> {
        if self.refused || self.syns.is_empty() {
            return None;
        }
        Some(match self.answered {
            Some(i) => (
                &self.syns[..=i.min(self.syns.len() - 1)],
                AttemptOutcome::Accepted,
            ),
            None => (&self.syns[..], AttemptOutcome::Abandoned),
        })
    }

    /// [`observation`](Self::observation) without copying the SYN times.
    pub fn into_observation(self) -> ConnectionObservation {
        let failure = self.failure();
        ConnectionObservation {
            syn_arrivals: self.syns,
            answered: self.answered,
            refused: self.refused,
            end: self.end,
            rtt: self.rtt,
            segments_sent: self.data_segments,
            segments_retransmitted: self.data_retransmissions,
            class: None,
            failure,
        }
    }

    /// The connection as the Certes model's input (no class).
    pub fn observation(&self) -> ConnectionObservation {
        ConnectionObservation {
            syn_arrivals: self.syns.clone(),
            answered: self.answered,
            refused: self.refused,
            end: self.end,
            rtt: self.rtt,
            segments_sent: self.data_segments,
            segments_retransmitted: self.data_retransmissions,
            class: None,
            failure: self.failure(),
        }
    }
}

/// Counts of what the capture held beside the connections taken.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct HandshakeStats {
    pub packets: u64,
    pub tcp_segments: u64,
    /// Packets that were not TCP or could not be decoded, by reason.
    pub skipped: SkipCounts,
    /// Connections the table emitted.
    pub connections: u64,
    /// Of those, without a captured SYN from the client.
    pub without_syn: u64,
    /// Of those, to a responder not selected.
    pub other_servers: u64,
    /// Packets stamped earlier than the packet before them.
    pub timestamp_regressions: u64,
    /// Connections the table finished early to stay within
    /// [`TableConfig::max_connections`], and of them half-open.
    pub evicted: u64,
    pub evicted_half_open: u64,
    /// The capture stops mid-record: what and at which byte offset (every
    /// complete packet before it was read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut_off: Option<String>,
}

/// The connections to the selected listener(s) in one capture.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HandshakeTrace {
    /// Selected connections, by first SYN.
    pub handshakes: Vec<Handshake>,
    /// Responders that answered at least one SYN (all connections).
    pub listeners: Vec<Endpoint>,
    /// Earliest and latest packet timestamps of the capture.
    pub first_timestamp: Option<Nanos>,
    pub last_timestamp: Option<Nanos>,
    pub stats: HandshakeStats,
}

impl HandshakeTrace {
    /// The last packet's time: the end of what the capture can tell.
    pub fn capture_end(&self) -> Nanos {
        self.last_timestamp.unwrap_or(Nanos::ZERO)
    }

    /// An interval grid aligned to multiples of `interval` from the UNIX
    /// epoch, holding the capture's first packet.
    pub fn grid(&self, interval: Nanos) -> Result<IntervalGrid, ObservedError> {
        IntervalGrid::aligned(self.first_timestamp.unwrap_or(Nanos::ZERO), interval)
    }

    /// Every selected connection as a Certes observation, by first SYN.
    pub fn observations(&self) -> Vec<ConnectionObservation> {
        self.handshakes.iter().map(Handshake::observation).collect()
    }

    /// The observations split by class (each tagged with its class).
    pub fn observations_by_class(
        &self,
        by: ClassBy,
    ) -> BTreeMap<String, Vec<ConnectionObservation>> {
        let mut classes: BTreeMap<String, Vec<ConnectionObservation>> = BTreeMap::new();
        for handshake in &self.handshakes {
            let class = by.class_of(handshake);
            let mut observation = handshake.observation();
            observation.class = Some(class.clone());
            classes.entry(class).or_default().push(observation);
        }
        classes
    }
}

/// Builds a [`HandshakeTrace`] from segments fed in capture order; or,
/// read in one pass, hands each connection over as it finishes
/// ([`take_finished`](Self::take_finished)) and keeps none.
pub struct HandshakeCollector {
    config: HandshakeConfig,
    table: ConnectionTable,
    all: Vec<Handshake>,
    stats: HandshakeStats,
    first_timestamp: Option<Nanos>,
    last_timestamp: Option<Nanos>,
    previous_timestamp: Option<Nanos>,
}

impl HandshakeCollector {
    pub fn new(config: HandshakeConfig) -> HandshakeCollector {
        let table = ConnectionTable::new(TableConfig {
            record_segments: true,
            ..config.table
        });
        HandshakeCollector {
            config,
            table,
            all: Vec::new(),
            stats: HandshakeStats::default(),
            first_timestamp: None,
            last_timestamp: None,
            previous_timestamp: None,
        }
    }

    /// The connection table's `half_open_limit`.
    pub fn half_open_limit(&self) -> Option<Nanos> {
        self.config.table.half_open_limit
    }

    /// Sets the connection table's `half_open_limit`.
    pub fn set_half_open_limit(&mut self, limit: Option<Nanos>) {
        self.config.table.half_open_limit = limit;
        self.table.set_half_open_limit(limit);
    }

    /// Takes the connections finished since the last call, in the order
    /// finished (every connection with a captured SYN, to any responder:
    /// selecting is the caller's). Taken connections are not kept.
    pub fn take_finished(&mut self) -> Vec<Handshake> {
        std::mem::take(&mut self.all)
    }

    /// Like [`take_finished`](Self::take_finished), for a caller that
    /// reads packet by packet: the finished connections are swapped into
    /// `buffer` (emptied first), and `buffer`'s capacity takes the next
    /// ones, so the vector is not grown from nothing after every call.
    /// Each buffer holds at most the connections one call finishes, at
    /// most the table's `max_connections`.
    pub fn swap_finished(&mut self, buffer: &mut Vec<Handshake>) {
        buffer.clear();
        std::mem::swap(&mut self.all, buffer);
    }

    /// Whether a connection finished since the last take or swap.
    pub fn has_finished(&self) -> bool {
        !self.all.is_empty()
    }

    /// Reads, decodes and takes in the next packet; false at the end of
    /// the capture (a record cut off is noted in the stats, not an error).
    pub fn read_packet(&mut self, reader: &mut TraceReader) -> Result<bool, TraceError> {
        let packet = match reader.next_packet() {
            Ok(Some(packet)) => packet,
            Ok(None) => return Ok(false),
            // Every complete packet before the cut is used; the stats
            // carry the warning.
            Err(error) if error.is_cut_off() => {
                self.stats.cut_off = Some(error.to_string());
                return Ok(false);
            }
            Err(error) => return Err(error),
        };
        self.push_packet(&packet);
        Ok(true)
    }

    /// Decodes and takes in one packet from any source (a capture file, a
    /// live ring): the one entry both go through.
    pub fn push_packet(&mut self, packet: &Packet<'_>) {
        match decode(packet) {
            Ok(segment) => self.observe(&segment),
            Err(reason) => {
                self.saw_time(packet.timestamp);
                self.stats.skipped.add(reason);
            }
        }
    }

    /// A live source's clock reached `now` with no packet: connections
    /// idle past the table's timeout finish, and the span of the capture
    /// reaches `now` (not counted as a packet). An earlier `now` is
    /// ignored.
    pub fn advance_clock(&mut self, now: Nanos) {
        if self.last_timestamp.is_some_and(|last| now <= last) {
            return;
        }
        self.first_timestamp.get_or_insert(now);
        self.last_timestamp = Some(now);
        self.table.expire(now);
        self.drain();
    }

    /// End of a streamed capture: every connection still open is finished
    /// (then taken with [`take_finished`](Self::take_finished)).
    pub fn finish_streaming(&mut self) {
        self.table.finish_all();
        self.drain();
        self.stats.evicted = self.table.stats().evicted;
        self.stats.evicted_half_open = self.table.stats().evicted_half_open;
    }

    /// What was counted so far.
    pub fn stats(&self) -> &HandshakeStats {
        &self.stats
    }

    /// Earliest and latest packet timestamps so far.
    pub fn first_timestamp(&self) -> Option<Nanos> {
        self.first_timestamp
    }

    pub fn last_timestamp(&self) -> Option<Nanos> {
        self.last_timestamp
    }

    /// When the oldest connection still open was first seen: connections
    /// finished later start no earlier (unless timestamps go backwards).
    pub fn oldest_open(&mut self) -> Option<Nanos> {
        self.table.oldest_active_since()
    }

    /// Connections in the table now.
    pub fn open_connections(&self) -> usize {
        self.table.active_len()
    }

    /// Takes one packet's time (every packet, TCP or not, marks the span
    /// of the capture).
    fn saw_time(&mut self, timestamp: Nanos) {
        self.stats.packets += 1;
        if self.previous_timestamp.is_some_and(|p| timestamp < p) {
            self.stats.timestamp_regressions += 1;
        }
        self.previous_timestamp = Some(timestamp);
        self.first_timestamp = Some(self.first_timestamp.map_or(timestamp, |f| f.min(timestamp)));
        self.last_timestamp = Some(self.last_timestamp.map_or(timestamp, |l| l.max(timestamp)));
    }

    /// Feeds one TCP segment.
    pub fn observe(&mut self, segment: &crate::decode::Segment<'_>) {
        self.saw_time(segment.timestamp);
        self.stats.tcp_segments += 1;
        self.table.observe(segment);
        self.drain();
    }

    fn drain(&mut self) {
        while let Some(mut connection) = self.table.pop_finished() {
            self.stats.connections += 1;
            match Handshake::from_connection(&connection) {
                Some(handshake) => self.all.push(handshake),
                None => self.stats.without_syn += 1,
            }
            self.table.recycle(std::mem::take(&mut connection.segments));
        }
    }

    /// Ends the capture: finishes open connections and selects the
    /// listener's.
    pub fn finish(mut self) -> HandshakeTrace {
        self.table.finish_all();
        self.drain();
        self.stats.evicted = self.table.stats().evicted;
        self.stats.evicted_half_open = self.table.stats().evicted_half_open;
        let listeners: BTreeSet<Endpoint> = self
            .all
            .iter()
            .filter(|h| !h.synacks.is_empty())
            .map(|h| h.server)
            .collect();
        let selected = |h: &Handshake| match &self.config.server {
            Some(filter) => filter.matches(&h.server),
            None => listeners.contains(&h.server),
        };
        let (mut handshakes, others): (Vec<Handshake>, Vec<Handshake>) =
            self.all.drain(..).partition(|h| selected(h));
        self.stats.other_servers = others.len() as u64;
        handshakes.sort_by_key(|h| (h.syns[0], h.client, h.server));
        HandshakeTrace {
            handshakes,
            listeners: listeners.into_iter().collect(),
            first_timestamp: self.first_timestamp,
            last_timestamp: self.last_timestamp,
            stats: self.stats,
        }
    }
}

/// Reads a whole capture (`-` for standard input; pcap, pcapng, gzip).
pub fn read_handshakes(
    path: impl AsRef<Path>,
    config: &HandshakeConfig,
) -> Result<HandshakeTrace, TraceError> {
    handshakes_from_reader(TraceReader::open(path)?, config)
}

/// Like [`read_handshakes`], for an open reader.
pub fn handshakes_from_reader(
    mut reader: TraceReader,
    config: &HandshakeConfig,
) -> Result<HandshakeTrace, TraceError> {
    let mut collector = HandshakeCollector::new(*config);
    while collector.read_packet(&mut reader)? {}
    Ok(collector.finish())
}

/// Everything Certes gives for one capture, all selected connections as
/// one class: the counters the server would have counted, the model's
/// estimates, the exact figures' totals and their comparison. Read in one
/// pass through [`crate::certes::CaptureStream`] (the path `vantage certes
/// estimate --trace` takes): memory is bounded by that stream's caps and
/// the number of intervals, not by the number of connections.
#[derive(Clone, Debug)]
pub struct CaptureEstimate {
    /// Intervals of the model's length, aligned to the UNIX epoch.
    pub grid: IntervalGrid,
    pub counters: ObservedCounters,
    /// One per interval of `counters`.
    pub estimates: Vec<Estimate>,
    /// Totals and intervals (no per-connection figures: none are kept).
    pub exact: ExactFigures,
    /// Transaction-weighted mean of the estimates beside the exact mean.
    pub comparison: Comparison,
    /// What the reader counted beside the connections.
    pub notes: CaptureNotes,
}

/// Why [`estimate_capture`] failed.
#[derive(Debug, thiserror::Error)]
pub enum CaptureEstimateError {
    #[error(transparent)]
    Capture(#[from] CaptureInputError),
    #[error(transparent)]
    Observed(#[from] ObservedError),
    #[error(transparent)]
    Model(#[from] CertesError),
}

/// Reads a server-side capture and runs Certes over it (all selected
/// connections as one class): the interval, clients and frustration
/// timeout come from `model`, the listener and the connection table's
/// settings from `handshakes`.
pub fn estimate_capture(
    path: impl AsRef<Path>,
    handshakes: &HandshakeConfig,
    model: &CertesConfig,
) -> Result<CaptureEstimate, CaptureEstimateError> {
    // The model's own checks first (an interval beyond the first SYN
    // timeout, …), before the capture is read.
    Certes::new(model.clone())?;
    let mut stream = CaptureStream::open_with(path.as_ref(), handshakes, None, model)?;
    while stream.read_packet()? {}
    let (input, stats) = stream.into_input_and_stats()?;
    let grid = IntervalGrid::aligned(input.origin_unix.unwrap_or(Nanos::ZERO), model.interval)?;
    let mut intervals = vec![IntervalCounters::default(); input.intervals];
    let mut exact = ExactFigures::empty(grid, input.intervals);
    // One class: the selected connections (none selected is an error of
    // the stream).
    if let Some(class) = input.classes.into_iter().next() {
        for (index, counters) in class.counters {
            if let Some(slot) = intervals.get_mut(index) {
                *slot = counters;
            }
        }
        if let Some(figures) = class.exact {
            exact = figures;
        }
    }
    let counters = ObservedCounters {
        grid,
        intervals,
        stats,
    };
    let estimates = estimate_intervals(model.clone(), &counters.intervals)?;
    let comparison = compare(&estimates, &exact);
    Ok(CaptureEstimate {
        grid,
        counters,
        estimates,
        exact,
        comparison,
        notes: input.capture_notes.unwrap_or_default(),
    })
}
