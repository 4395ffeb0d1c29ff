//! Vantage trace ingest: packet traces in, TCP connections out — the input
//! stage shared by every Vantage tool (critical-path analysis in `cpa`,
//! response-time estimation, the testbed's captures).
//!
//! Three stages, each usable alone:
//!
//! * [`file`](mod@file) — pcap and pcapng (µs and ns, both byte orders, several
//!   interfaces and link types), gzip, standard input; streaming, with one
//!   reusable buffer; errors name the byte offset.
//! * [`decode`](mod@decode) — link layers (Ethernet with VLANs, Linux SLL and SLL2, raw
//!   IP, BSD loopback, FDDI), IPv4 and IPv6, TCP with its options, into a
//!   borrowed [`Segment`]; lengths from IP headers, so snaplen truncation
//!   does not hide how much data a segment carried.
//! * [`connection`] — the streaming connection table: 4-tuple plus ISN
//!   identity (port reuse, retransmitted SYNs and FINs, both ends on one
//!   address), per-direction state and negotiated options, the capture
//!   artefacts of the tcpeval paper's Section 3.5 and more, and eviction so
//!   memory follows the active connections, not the trace.
//!
//! * [`handshake`] — per connection to a listener, what Certes measures:
//!   every SYN and the one answered, RTT, END; and the whole Certes run
//!   over a server-side capture (counters, estimates, exact figures).
//! * [`certes`] — a server-side capture as the input of
//!   `vantage certes estimate`: per class, counters and exact figures.
//!
//! [`summarize`] runs all three over a file and counts what it saw.
//!
//! The table is sans-IO like every Vantage mechanism: it is handed segments
//! with their timestamps and never reads a clock or a file.

pub mod certes;
pub mod connection;
pub mod decode;
mod error;
pub mod file;
#[doc(hidden)]
pub mod fuzzing;
pub mod handshake;
mod link_type;
pub mod reorder;
#[cfg(feature = "synth")]
pub mod synth;

use std::path::Path;

use serde::Serialize;
use vantage_core::Nanos;

pub use connection::{
    Artefacts, Connection, ConnectionId, ConnectionTable, Direction, DirectionSummary, FinishCause,
    Observation, Opening, SegmentNotes, SegmentRecord, TableConfig, TableStats,
};
pub use decode::{
    decode, decode_frame, Endpoint, LinkType, OptionsParse, SackBlock, Segment, SkipCounts,
    SkipReason, TcpFlags, TcpOptions, TcpTimestamps,
};
pub use error::{FormatProblem, Location, TraceError};
pub use file::{Packet, TraceFormat, TraceReader};
pub use reorder::{OwnedPacket, ReorderBuffer, ReorderStats, TimeOrder, DEFAULT_REORDER_WINDOW};

/// What a whole trace contained, for tests and reports.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TraceSummary {
    pub format: TraceFormat,
    pub compressed: bool,
    /// Packet records read.
    pub packets: u64,
    /// Captured bytes of those records.
    pub captured_bytes: u64,
    /// Packets decoded as TCP segments.
    pub tcp_segments: u64,
    /// Packets that were not TCP or could not be decoded, by reason.
    pub skipped: SkipCounts,
    /// Connections, counted as they finished.
    pub connections: u64,
    /// Connections whose SYN and SYN-ACK were both seen.
    pub connections_with_handshake: u64,
    /// Connections first seen mid-stream.
    pub connections_mid_stream: u64,
    /// SYNs re-sent with the same ISN, over all connections.
    pub syn_retransmissions: u64,
    /// Segments re-sending sequence space already seen (retransmitted SYNs
    /// and FINs included), over all connections.
    pub retransmissions: u64,
    /// Capture artefacts summed over all connections and directions.
    pub artefacts: Artefacts,
    /// Segments of already-finished connections (after their close).
    pub late_segments: u64,
    /// Packets stamped earlier than the packet before them in the file.
    pub timestamp_regressions: u64,
    /// Of those, packets put back in time order, and packets too far out
    /// of order for the window (see [`reorder`]).
    pub reordering: ReorderStats,
    pub first_timestamp: Option<Nanos>,
    pub last_timestamp: Option<Nanos>,
    /// Most connections in the table at once.
    pub peak_active_connections: usize,
    /// Connections finished early to respect
    /// [`TableConfig::max_connections`].
    pub connections_evicted: u64,
    /// The capture stops mid-record: what and at which byte offset (every
    /// complete packet before it was read).
    pub cut_off: Option<String>,
}

/// Reads, decodes and tracks a whole trace (`-` for standard input) with
/// the default [`TableConfig`], keeping counts only.
pub fn summarize(path: impl AsRef<Path>) -> Result<TraceSummary, TraceError> {
    let config = TableConfig {
        record_segments: false,
        ..TableConfig::default()
    };
    summarize_reader(TraceReader::open(path)?, config)
}

/// Like [`summarize`], for an open reader and a chosen table config. A
/// capture cut off mid-record is read up to its last complete packet and
/// says so in [`TraceSummary::cut_off`].
pub fn summarize_reader(
    mut reader: TraceReader,
    config: TableConfig,
) -> Result<TraceSummary, TraceError> {
    let mut summary = TraceSummary {
        format: reader.format(),
        compressed: reader.compressed(),
        packets: 0,
        captured_bytes: 0,
        tcp_segments: 0,
        skipped: SkipCounts::default(),
        connections: 0,
        connections_with_handshake: 0,
        connections_mid_stream: 0,
        syn_retransmissions: 0,
        retransmissions: 0,
        artefacts: Artefacts::default(),
        late_segments: 0,
        timestamp_regressions: 0,
        reordering: ReorderStats::default(),
        first_timestamp: None,
        last_timestamp: None,
        peak_active_connections: 0,
        connections_evicted: 0,
        cut_off: None,
    };
    let mut table = ConnectionTable::new(config);
    let mut previous_timestamp = None;
    let mut order = ReorderBuffer::new(DEFAULT_REORDER_WINDOW);
    let mut input_done = false;
    loop {
        if !input_done && !order.is_full() {
            match reader.next_packet() {
                Ok(Some(packet)) => {
                    summary.packets += 1;
                    summary.captured_bytes += packet.data.len() as u64;
                    if previous_timestamp.is_some_and(|previous| packet.timestamp < previous) {
                        summary.timestamp_regressions += 1;
                    }
                    previous_timestamp = Some(packet.timestamp);
                    summary.first_timestamp.get_or_insert(packet.timestamp);
                    summary.last_timestamp = Some(
                        summary
                            .last_timestamp
                            .map_or(packet.timestamp, |last| last.max(packet.timestamp)),
                    );
                    order.push(&packet);
                    continue;
                }
                Ok(None) => input_done = true,
                Err(error) if error.is_cut_off() => {
                    summary.cut_off = Some(error.to_string());
                    input_done = true;
                }
                Err(error) => return Err(error),
            }
        }
        let Some(owned) = order.pop() else {
            break;
        };
        match decode(&owned.packet()) {
            Ok(segment) => {
                summary.tcp_segments += 1;
                table.observe(&segment);
            }
            Err(reason) => summary.skipped.add(reason),
        }
        while let Some(connection) = table.pop_finished() {
            summary.count(&connection);
        }
    }
    summary.reordering = order.stats();
    table.finish_all();
    while let Some(connection) = table.pop_finished() {
        summary.count(&connection);
    }
    summary.late_segments = table.stats().late_segments;
    summary.peak_active_connections = table.stats().peak_active;
    summary.connections_evicted = table.stats().evicted;
    Ok(summary)
}

impl TraceSummary {
    fn count(&mut self, connection: &Connection) {
        self.connections += 1;
        if connection.handshake_seen() {
            self.connections_with_handshake += 1;
        }
        if connection.opening == Opening::MidStream {
            self.connections_mid_stream += 1;
        }
        for direction in [&connection.from_initiator, &connection.from_responder] {
            self.syn_retransmissions += u64::from(direction.syns.saturating_sub(1));
            self.retransmissions += direction.retransmissions;
        }
        self.artefacts.add(&connection.artefacts());
    }
}
