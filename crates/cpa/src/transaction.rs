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

use crate::view::{ConnectionView, PayloadStart};
use crate::Side;

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

/// The transactions of a connection, in order.
pub(crate) fn split(view: &ConnectionView) -> Vec<TransactionSpan> {
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

    for &index in view.side_order(vantage_side) {
        let record = view.record(index);
        if record.payload_len == 0 || record.flags.rst() {
            continue;
        }
        let (start, end) = record.data_range();
        match record.sender {
            Side::Client => {
                if end <= client_high {
                    continue;
                }
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
                if end <= server_high {
                    continue;
                }
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
    spans
}
