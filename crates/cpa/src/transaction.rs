//! Splitting a connection into HTTP transactions and each transaction into
//! the four parts of the tcpeval paper's Figure 2 (Section 3.2):
//! connection set-up (SYN, SYN-ACK, ACK), the request ("the packet sequence
//! delivering the HTTP GET and associated parameters"), the response
//! transfer, and tear-down (FIN, ACK, FIN, ACK).
//!
//! HTTP/1.0, as in the paper, has one transaction per connection. Beyond
//! the paper, persistent non-pipelined HTTP/1.1 connections carry one
//! transaction per request/response: a new request starts when the client
//! sends new data after the server has sent response data. When the
//! captured payload shows HTTP (the first client data begins with a
//! method), a request must also begin with a method, so a request body sent
//! after a `100 Continue` stays in its transaction; when payloads were not
//! captured (snap length) or the protocol is not HTTP, alternation alone
//! decides. A request line arriving before the previous request got any
//! response is pipelining: the requests stay in one transaction, flagged
//! (so are several request lines in one segment).
//!
//! The split is read at one endpoint — the server when its capture exists,
//! the client otherwise — in that endpoint's time order, from first
//! transmissions of new bytes, so retransmissions and reordering do not
//! create transactions. Sequence numbers are relative (the SYN is 0).
//!
//! A payload segment that brings no new byte and that its receiver had
//! already acknowledged (by the vantage's order) is a stale re-send: it
//! starts no transaction and adds to none, so it is counted
//! ([`StaleResends`]). A spurious retransmission after a lost ACK is one; a
//! connection whose later exchanges reuse sequence numbers acknowledged long
//! before (copies of a trace merged with their addresses kept) gives many.

use serde::Serialize;

use crate::view::{ConnectionView, PayloadStart};
use crate::Side;

/// Payload segments that re-sent bytes their receiver had already
/// acknowledged, by sender: they start no transaction and their bytes are
/// in none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StaleResends {
    pub client_segments: u64,
    /// Payload bytes of those segments.
    pub client_bytes: u64,
    pub server_segments: u64,
    pub server_bytes: u64,
}

impl StaleResends {
    pub fn segments(&self) -> u64 {
        self.client_segments + self.server_segments
    }

    pub fn add(&mut self, other: &StaleResends) {
        self.client_segments += other.client_segments;
        self.client_bytes += other.client_bytes;
        self.server_segments += other.server_segments;
        self.server_bytes += other.server_bytes;
    }

    fn count(&mut self, sender: Side, bytes: u64) {
        match sender {
            Side::Client => {
                self.client_segments += 1;
                self.client_bytes += bytes;
            }
            Side::Server => {
                self.server_segments += 1;
                self.server_bytes += bytes;
            }
        }
    }
}

/// One request/response exchange, as byte ranges of the two sequence
/// spaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TransactionSpan {
    /// Position in its connection, from 0.
    pub index: usize,
    /// Client data bytes `[start, end)` of the request (empty when the
    /// server spoke first).
    pub request: (i64, i64),
    /// Server data bytes `[start, end)` of the response (empty when no
    /// response came).
    pub response: (i64, i64),
    /// Several request lines arrived before a response: HTTP pipelining,
    /// which this analysis does not separate.
    pub pipelined: bool,
    /// The captured payload shows HTTP: a request expects a response.
    pub http: bool,
}

impl TransactionSpan {
    pub fn request_bytes(&self) -> u64 {
        (self.request.1 - self.request.0).max(0) as u64
    }

    pub fn response_bytes(&self) -> u64 {
        (self.response.1 - self.response.0).max(0) as u64
    }
}

/// The transactions of a connection, in order, and the stale re-sends
/// that took no part in them.
pub(crate) fn split(view: &ConnectionView) -> (Vec<TransactionSpan>, StaleResends) {
    let vantage_side = if view.vantage.observes(Side::Server) {
        Side::Server
    } else {
        Side::Client
    };
    let first_data = |sender: Side| {
        if view.syn_seen[sender.index()] {
            1
        } else {
            view.initial_una[sender.index()]
        }
    };
    let mut client_high = first_data(Side::Client);
    let mut server_high = first_data(Side::Server);
    let mut http = None::<bool>;
    let mut spans: Vec<TransactionSpan> = Vec::new();
    let mut current: Option<TransactionSpan> = None;
    // Highest acknowledgement of each sender's bytes seen so far.
    let mut acknowledged = [i64::MIN; 2];
    let mut stale = StaleResends::default();

    for &index in view.side_order(vantage_side) {
        let record = view.record(index);
        if record.flags.ack() {
            let receiver = record.sender.other().index();
            acknowledged[receiver] = acknowledged[receiver].max(record.ack);
        }
        if record.payload_len == 0 || record.flags.rst() {
            continue;
        }
        let (start, end) = record.data_range();
        let high = match record.sender {
            Side::Client => client_high,
            Side::Server => server_high,
        };
        if end <= high {
            if end <= acknowledged[record.sender.index()] {
                stale.count(record.sender, u64::from(record.payload_len));
            }
            continue;
        }
        match record.sender {
            Side::Client => {
                let aligned = start == client_high;
                let several = aligned && record.payload == PayloadStart::Requests;
                let starts_request = aligned
                    && matches!(
                        record.payload,
                        PayloadStart::Request | PayloadStart::Requests
                    );
                let is_http = *http.get_or_insert(starts_request);
                let kind = if aligned {
                    record.payload
                } else {
                    PayloadStart::Unknown
                };
                let new_request = match kind {
                    PayloadStart::Request | PayloadStart::Requests | PayloadStart::Unknown => true,
                    PayloadStart::Response | PayloadStart::Other => !is_http,
                };
                // Bytes between the previous high and this segment were sent
                // but not captured: they belong here too.
                let from = client_high;
                match current.as_mut() {
                    Some(span) if span.response.1 > span.response.0 && new_request => {
                        spans.push(*span);
                        current = Some(TransactionSpan {
                            index: spans.len(),
                            request: (from, end),
                            response: (server_high, server_high),
                            pipelined: several,
                            http: is_http,
                        });
                    }
                    Some(span) => {
                        span.pipelined |= several;
                        if span.request.1 > span.request.0 {
                            if is_http && starts_request {
                                span.pipelined = true;
                            }
                        } else {
                            span.request.0 = from;
                        }
                        span.request.1 = end;
                    }
                    None => {
                        current = Some(TransactionSpan {
                            index: 0,
                            request: (from, end),
                            response: (server_high, server_high),
                            pipelined: several,
                            http: is_http,
                        });
                    }
                }
                client_high = end;
            }
            Side::Server => {
                let from = server_high;
                let span = current.get_or_insert(TransactionSpan {
                    index: spans.len(),
                    request: (client_high, client_high),
                    response: (from, from),
                    pipelined: false,
                    http: http == Some(true),
                });
                if span.response.1 <= span.response.0 {
                    span.response.0 = from;
                }
                span.response.1 = end;
                server_high = end;
            }
        }
    }
    if let Some(span) = current {
        spans.push(span);
    }
    (spans, stale)
}
