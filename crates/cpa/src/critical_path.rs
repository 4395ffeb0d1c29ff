//! The backward pass up the critical path (tcpeval paper, Section 3.3 and
//! Figure 3): from a transaction's last event, follow each node's parent in
//! the packet dependence graph ([`crate::graph`]) back to the transaction's
//! first event. "At each round, we accumulate arcs onto the critical path,
//! and then move to the parent round … until reaching the first round".
//!
//! A transaction's first event is the client's first SYN (first
//! transaction of a connection whose opening was captured) or the
//! departure of its request's first byte (later requests on a persistent
//! connection, connections captured mid-stream; the server's first byte
//! when the server speaks first). Its last event is the arrival at the
//! client of the response's last byte — the arrival that completed the
//! response, a retransmission if one filled the last hole — or, for the
//! connection's last transaction when tear-down is included (the paper's
//! Figure 2; see [`Teardown`]), the last arrival of the FIN exchange: each FIN at its peer,
//! and the acknowledgement of each FIN back at its sender.
//!
//! The paper's tree has one path from the root to any node, so the path
//! found is the longest one. Where the graph has no parent for a node
//! (capture gaps, or a capture that ordered an ACK before the data it
//! acknowledges so that a parent would revisit a node), the node is joined
//! by an [`ArcKind::Unexplained`] arc to the previous event at the same
//! endpoint (or, if none is left in the transaction, to its first event),
//! counted in the transaction's flags, and the pass goes on from there: the
//! path always spans exactly the transaction, which is what makes the
//! profile conserve its duration.

use foldhash::HashSet;

use vantage_core::Nanos;

use crate::graph::{Anchors, ArcKind, Graph, Phase};
use crate::packet_label::PacketLabel;
use crate::transaction::TransactionSpan;
use crate::view::Record;
use crate::{Side, Teardown};

/// One node of a traced path, with what the profile needs to re-place it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RawNode {
    pub side: Side,
    pub departure: bool,
    pub observed: bool,
    /// In `side`'s clock: captured, or placed from the connection's own
    /// delays.
    pub time: Nanos,
    /// For a placed node: the captured time of the same packet at the other
    /// endpoint (in that endpoint's clock).
    pub anchor: Option<Nanos>,
    pub label: PacketLabel,
    /// A pure ACK the endpoint's kernel sends at once (not a window update).
    pub kernel_ack: bool,
    pub phase: Phase,
    /// The packet (its departure record), to count distinct packets.
    pub packet: u32,
}

/// A traced critical path, first event first.
#[derive(Clone, Debug)]
pub(crate) struct RawPath {
    pub nodes: Vec<RawNode>,
    /// `kinds[i]` joins `nodes[i]` to `nodes[i + 1]`.
    pub kinds: Vec<ArcKind>,
    /// The transaction's end was not captured (response cut short).
    pub incomplete: bool,
    /// The path ends with the tear-down.
    pub teardown: bool,
    pub unexplained: usize,
}

/// Traces the critical path of one transaction.
pub(crate) fn trace(
    graph: &Graph,
    span: &TransactionSpan,
    teardown_policy: Teardown,
    min_rto: Nanos,
    last: bool,
) -> Option<RawPath> {
    let view = graph.view;
    let root = root_of(graph, span)?;
    let anchors = Anchors {
        index: span.index,
        root,
        available: [
            available_at_client(graph, span, root),
            available_at_server(graph, span, root),
        ],
    };
    let (mut end, mut incomplete) = end_of_exchange(graph, span)?;
    let mut teardown = false;
    let prompt = view.round_trip().unwrap_or(min_rto).max(min_rto);
    let include = last
        && match teardown_policy {
            Teardown::Never => false,
            Teardown::Always => true,
            Teardown::Prompt => first_fin(graph).is_some_and(|fin| {
                reference_time(graph, fin)
                    <= reference_time(graph, end)
                        .saturating_add(prompt.0.min(i64::MAX as u64) as i64)
            }),
        };
    if include {
        if let Some(close) = end_of_teardown(graph) {
            if reference_time(graph, close) > reference_time(graph, end) {
                end = close;
                teardown = true;
                incomplete = false;
            }
        }
    }
    // An HTTP request that never got a response is incomplete, closed or
    // not (a one-way transfer of another protocol expects none).
    if span.http && span.request.1 > span.request.0 && span.response.1 <= span.response.0 {
        incomplete = true;
    }

    let mut chain = vec![end];
    let mut kinds = Vec::new();
    let mut unexplained = 0;
    let mut visited: HashSet<u32> = [end].into_iter().collect();
    let mut node = end;
    let limit = 2 * view.records.len() + 4;
    while node != root {
        let step = graph
            .parent(node, &anchors)
            .filter(|&(parent, _)| !visited.contains(&parent) && chain.len() < limit);
        let (parent, kind) = match step {
            Some(step) => step,
            None => {
                unexplained += 1;
                let previous = (chain.len() < limit)
                    .then(|| graph.previous_event(node, &anchors))
                    .flatten()
                    .filter(|previous| !visited.contains(previous));
                (previous.unwrap_or(root), ArcKind::Unexplained)
            }
        };
        visited.insert(parent);
        chain.push(parent);
        kinds.push(kind);
        node = parent;
    }
    chain.reverse();
    kinds.reverse();
    let nodes = chain.iter().map(|&index| raw_node(graph, index)).collect();
    Some(RawPath {
        nodes,
        kinds,
        incomplete,
        teardown,
        unexplained,
    })
}

/// Time of a record on the connection's common clock (the client's when
/// both were captured), for ordering events at different endpoints.
fn reference_time(graph: &Graph, index: u32) -> i64 {
    let record = graph.view.record(index);
    let time = record.time.0.min(i64::MAX as u64) as i64;
    match record.side {
        Side::Client => time,
        Side::Server => time - graph.view.clock_offset,
    }
}

fn first_departure(graph: &Graph, side: Side, predicate: impl Fn(&Record) -> bool) -> Option<u32> {
    graph.view.side_order(side).iter().copied().find(|&i| {
        let r = graph.view.record(i);
        r.is_departure() && predicate(r)
    })
}

fn carries(record: &Record, byte: i64) -> bool {
    let (start, end) = record.data_range();
    start <= byte && byte < end
}

fn root_of(graph: &Graph, span: &TransactionSpan) -> Option<u32> {
    let view = graph.view;
    if span.index == 0 && view.syn_seen[Side::Client.index()] {
        if let Some(syn) = first_departure(graph, Side::Client, |r| r.is_syn() && !r.flags.ack()) {
            return Some(syn);
        }
    }
    if span.request.1 > span.request.0 {
        graph.first_within(Side::Client, span.request.0, span.request.1)
    } else {
        graph.first_within(Side::Server, span.response.0, span.response.1)
    }
}

/// When the client could send this transaction's request: on the SYN-ACK's
/// arrival for a connection's first request, at the root otherwise.
fn available_at_client(graph: &Graph, span: &TransactionSpan, root: u32) -> Option<u32> {
    let view = graph.view;
    if span.index == 0 && view.syn_seen[Side::Server.index()] {
        if let Some(synack) = graph.completed(Side::Client, view.initial_una[Side::Server.index()])
        {
            return Some(synack);
        }
    }
    (view.record(root).side == Side::Client).then_some(root)
}

/// When the server could send this transaction's response: when the
/// request's last byte arrived; for a server that speaks first, when the
/// handshake completed.
fn available_at_server(graph: &Graph, span: &TransactionSpan, root: u32) -> Option<u32> {
    let view = graph.view;
    if span.request.1 > span.request.0 {
        return graph.completed(Side::Server, span.request.1).or_else(|| {
            last_arrival(graph, Side::Server, |r| {
                r.sender == Side::Client && r.payload_len > 0 && carries(r, span.request.1 - 1)
            })
        });
    }
    if view.syn_seen[Side::Server.index()] {
        let synack_end = view.initial_una[Side::Server.index()];
        let handshake = view.side_order(Side::Server).iter().copied().find(|&i| {
            let r = view.record(i);
            !r.is_departure() && r.flags.ack() && !r.flags.rst() && r.ack >= synack_end
        });
        if handshake.is_some() {
            return handshake;
        }
    }
    (view.record(root).side == Side::Server).then_some(root)
}

fn last_arrival(graph: &Graph, side: Side, predicate: impl Fn(&Record) -> bool) -> Option<u32> {
    graph
        .view
        .side_order(side)
        .iter()
        .rev()
        .copied()
        .find(|&i| {
            let r = graph.view.record(i);
            !r.is_departure() && !r.flags.rst() && predicate(r)
        })
}

/// The arrival that completed the response at the client (or, with no
/// response, the request at the server); whether the capture cut it short.
fn end_of_exchange(graph: &Graph, span: &TransactionSpan) -> Option<(u32, bool)> {
    if span.response.1 > span.response.0 {
        if let Some(done) = graph.completed(Side::Client, span.response.1) {
            return Some((done, false));
        }
        let partial = last_arrival(graph, Side::Client, |r| {
            r.sender == Side::Server && r.payload_len > 0 && {
                let (start, end) = r.data_range();
                start < span.response.1 && end > span.response.0
            }
        });
        if partial.is_some() {
            return partial.map(|p| (p, true));
        }
    }
    if span.request.1 > span.request.0 {
        if let Some(done) = graph.completed(Side::Server, span.request.1) {
            return Some((done, span.response.1 > span.response.0));
        }
        return last_arrival(graph, Side::Server, |r| {
            r.sender == Side::Client && r.payload_len > 0 && {
                let (start, end) = r.data_range();
                start < span.request.1 && end > span.request.0
            }
        })
        .map(|p| (p, true));
    }
    None
}

/// The connection's first FIN departure (either side).
fn first_fin(graph: &Graph) -> Option<u32> {
    (0..graph.view.records.len() as u32)
        .filter(|&i| {
            let r = graph.view.record(i);
            r.is_departure() && r.flags.fin() && !r.flags.rst()
        })
        .min_by_key(|&i| (reference_time(graph, i), i))
}

/// The last arrival of the FIN exchange: each FIN at its peer, and each
/// FIN's acknowledgement back at its sender.
fn end_of_teardown(graph: &Graph) -> Option<u32> {
    let view = graph.view;
    let mut candidates = Vec::new();
    for closer in [Side::Client, Side::Server] {
        let Some(fin_end) = graph.fin_end(closer) else {
            continue;
        };
        candidates.extend(graph.completed(closer.other(), fin_end));
        candidates.extend(view.side_order(closer).iter().copied().find(|&i| {
            let r = view.record(i);
            !r.is_departure() && r.flags.ack() && !r.flags.rst() && r.ack >= fin_end
        }));
    }
    candidates
        .into_iter()
        .max_by_key(|&i| (reference_time(graph, i), i))
}

/// Every event of each transaction's packets (for the sequence plot),
/// by transaction.
pub(crate) fn events_by_transaction(graph: &Graph, transactions: usize) -> Vec<Vec<RawNode>> {
    let view = graph.view;
    let mut events = vec![Vec::new(); transactions];
    for index in 0..view.records.len() as u32 {
        if view.record(index).flags.rst() {
            continue;
        }
        if let Some(list) = events.get_mut(graph.owner(index)) {
            list.push(raw_node(graph, index));
        }
    }
    events
}

fn raw_node(graph: &Graph, index: u32) -> RawNode {
    let view = graph.view;
    let record = view.record(index);
    let packet = if record.is_departure() {
        index
    } else {
        record.link.unwrap_or(index)
    };
    let anchor = if record.observed {
        None
    } else {
        record
            .link
            .map(|link| view.record(link))
            .filter(|counterpart| counterpart.observed)
            .map(|counterpart| counterpart.time)
    };
    RawNode {
        side: record.side,
        departure: record.is_departure(),
        observed: record.observed,
        time: record.time,
        anchor,
        label: PacketLabel::of(record, graph.retransmission(packet)),
        kernel_ack: record.is_pure_ack() && !graph.window_update(index),
        phase: graph.phase(record),
        packet,
    }
}
