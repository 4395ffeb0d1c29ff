//! How a packet is named on a critical path and in plots (tcpeval's
//! figures label arcs by segment kind and sequence range).

use std::fmt;

use serde::Serialize;
use vantage_trace::TcpFlags;

use crate::view::Record;
use crate::Side;

/// A packet, as the path and plots name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PacketLabel {
    pub sender: Side,
    /// Sequence space `[seq, end)` relative to the sender's ISN.
    pub seq: i64,
    pub end: i64,
    /// Acknowledgement number relative to the receiver's ISN (`None`
    /// without the ACK flag).
    pub ack: Option<i64>,
    pub payload_len: u32,
    pub flags: TcpFlags,
    /// It re-sent sequence space already sent.
    pub retransmission: bool,
}

impl PacketLabel {
    pub(crate) fn of(record: &Record, retransmission: bool) -> PacketLabel {
        PacketLabel {
            sender: record.sender,
            seq: record.seq,
            end: record.end,
            ack: record.flags.ack().then_some(record.ack),
            payload_len: record.payload_len,
            flags: record.flags,
            retransmission,
        }
    }

    /// Short kind: `SYN`, `SYN-ACK`, `FIN`, `RST`, `data`, `ACK`.
    pub fn kind(&self) -> &'static str {
        let flags = self.flags;
        if flags.rst() {
            "RST"
        } else if flags.syn() && flags.ack() {
            "SYN-ACK"
        } else if flags.syn() {
            "SYN"
        } else if self.payload_len > 0 && flags.fin() {
            "data+FIN"
        } else if self.payload_len > 0 {
            "data"
        } else if flags.fin() {
            "FIN"
        } else {
            "ACK"
        }
    }
}

impl fmt::Display for PacketLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.kind())?;
        if self.payload_len > 0 {
            let start = self.seq + i64::from(self.flags.syn());
            write!(f, " {}:{}", start, start + i64::from(self.payload_len))?;
        }
        if let Some(ack) = self.ack {
            if !self.flags.syn() || self.flags.ack() {
                write!(f, " ack {ack}")?;
            }
        }
        if self.retransmission {
            write!(f, " (retransmission)")?;
        }
        Ok(())
    }
}
