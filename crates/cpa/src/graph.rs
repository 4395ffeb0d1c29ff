//! The packet dependence graph (PDG) of a connection: for every node (a
//! packet's departure or arrival at an endpoint) the node it depends on,
//! and the kind of that arc.
//!
//! tcpeval paper, Section 3.1: "There are four kinds of arcs in the
//! graph": departure to arrival of each packet ([`ArcKind::Transit`]); the
//! arrival of the data packet an ACK acknowledges to the ACK's departure
//! ([`ArcKind::AckTrigger`]); the arrival of an ACK to the departure of
//! each data packet it liberated ([`ArcKind::Liberation`], found by the
//! Reno model's forward pass, [`crate::reno`]); and the departure of a lost
//! packet to the departure of its retransmission
//! ([`ArcKind::Retransmission`]). Section 3.2 adds the application-level
//! dependences of HTTP, which the paper keeps out of the PDG and handles by
//! splitting the transaction in four parts; here they are arcs of their own
//! ([`ArcKind::Application`]) so that one backward pass covers all four
//! parts: the client sends its request once the SYN-ACK arrived; the
//! server sends its response once the request's last byte arrived (the
//! paper's "dependence … between the last packet comprising the HTTP GET
//! and the first data packet sent in response"); an endpoint closes after
//! its last write, after reading the peer's data, or after the peer's FIN.
//!
//! A data packet depends on whichever came later of the ACK that
//! liberated it and the moment its data existed: an ACK that arrived
//! before the request could not have released the response.
//!
//! Each node's parent is an earlier event at the same endpoint (or, for an
//! arrival, the packet's departure), so the graph is the paper's tree.
//! Which of several copies of a byte range an ACK answers is decided by the
//! receiver's own arrivals: the ACK depends on the arrival that completed
//! the bytes it acknowledges (for a hole filled by a retransmission, the
//! retransmission), a duplicate ACK on the latest data arrival before it.
//! The paper says "the data packet containing the last byte being
//! acknowledged"; the two agree except when a retransmission fills a hole,
//! where the paper's choice would skip the retransmission that released
//! the ACK.

use std::borrow::Cow;

use serde::Serialize;

use crate::reno::Liberator;
use crate::reno::{AckArrival, LossRepair, RenoConfig, RenoSender, SendOutcome};
use crate::transaction::TransactionSpan;
use crate::view::{ConnectionView, Record};
use crate::{Options, Side};

/// The kinds of dependence arcs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ArcKind {
    /// A packet's departure at one endpoint to its arrival at the other
    /// (network: propagation and network variation).
    Transit,
    /// The arrival of the data an ACK acknowledges to the ACK's departure
    /// (the receiving endpoint's time).
    AckTrigger,
    /// The arrival of an ACK to the departure of a data packet it
    /// liberated (the sending endpoint's time).
    Liberation,
    /// The departure of a lost packet to the departure of its
    /// retransmission (loss).
    Retransmission(LossRepair),
    /// A zero-window probe waiting on the closed window: from the previous
    /// probe (or the ACK that closed the window) to this one (the
    /// receiver's time: its application did not read).
    WindowProbe,
    /// An application-level dependence: request after connection set-up,
    /// response after request, close after the last exchange (the
    /// endpoint's time).
    Application,
    /// No dependence could be found (capture gaps); joins the node to the
    /// transaction's first event.
    Unexplained,
}

impl ArcKind {
    pub fn name(self) -> &'static str {
        match self {
            ArcKind::Transit => "transit",
            ArcKind::AckTrigger => "ack-trigger",
            ArcKind::Liberation => "liberation",
            ArcKind::Retransmission(LossRepair::Timeout) => "retransmission (time-out)",
            ArcKind::Retransmission(LossRepair::FastRetransmit) => {
                "retransmission (fast retransmit)"
            }
            ArcKind::Retransmission(LossRepair::Unknown) => "retransmission (unknown kind)",
            ArcKind::WindowProbe => "window probe",
            ArcKind::Application => "application",
            ArcKind::Unexplained => "unexplained",
        }
    }
}

/// Part of a transaction (the paper's Figure 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Setup,
    Request,
    Response,
    Teardown,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Setup => "set-up",
            Phase::Request => "request",
            Phase::Response => "response",
            Phase::Teardown => "tear-down",
        }
    }
}

/// Per-connection results of the Reno forward pass.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ModelCounts {
    pub hidden_timeouts: u64,
    pub beyond_window: u64,
}

const NONE: u32 = u32::MAX;

/// Latest record of a kind at or before each position of a side.
struct Latest {
    peer_data_arrival: Vec<u32>,
    own_data_departure: Vec<u32>,
    peer_syn_arrival: Vec<u32>,
    peer_fin_arrival: Vec<u32>,
    own_syn_departure: Vec<u32>,
    /// Highest acknowledgement this side sent strictly before each position.
    own_ack_before: Vec<i64>,
    /// Window this side advertised last, strictly before each position.
    own_window_before: Vec<Option<u64>>,
}

impl Latest {
    fn build(view: &ConnectionView, side: Side) -> Latest {
        let order = view.side_order(side);
        let n = order.len();
        let mut latest = Latest {
            peer_data_arrival: vec![NONE; n],
            own_data_departure: vec![NONE; n],
            peer_syn_arrival: vec![NONE; n],
            peer_fin_arrival: vec![NONE; n],
            own_syn_departure: vec![NONE; n],
            own_ack_before: vec![i64::MIN; n],
            own_window_before: vec![None; n],
        };
        let mut window = None;
        let mut current = [NONE; 5];
        let mut highest_ack = i64::MIN;
        for (position, &index) in order.iter().enumerate() {
            latest.own_ack_before[position] = highest_ack;
            latest.own_window_before[position] = window;
            let r = view.record(index);
            if r.is_departure() {
                if r.payload_len > 0 && !r.flags.rst() {
                    current[1] = index;
                }
                if r.is_syn() {
                    current[4] = index;
                }
                if r.flags.ack() && !r.flags.rst() {
                    highest_ack = highest_ack.max(r.ack);
                    window = Some(r.window);
                }
            } else if !r.flags.rst() {
                if r.payload_len > 0 {
                    current[0] = index;
                }
                if r.is_syn() {
                    current[2] = index;
                }
                if r.flags.fin() {
                    current[3] = index;
                }
            }
            latest.peer_data_arrival[position] = current[0];
            latest.own_data_departure[position] = current[1];
            latest.peer_syn_arrival[position] = current[2];
            latest.peer_fin_arrival[position] = current[3];
            latest.own_syn_departure[position] = current[4];
        }
        latest
    }
}

fn found(value: u32) -> Option<u32> {
    (value != NONE).then_some(value)
}

/// For a receiver: after each arrival carrying the peer's sequence space,
/// how far the peer's bytes had arrived contiguously.
struct Completion {
    /// (record, contiguous end after it), in the receiver's order.
    steps: Vec<(u32, i64)>,
}

impl Completion {
    /// Bytes the receiver acknowledged without their arrival being seen
    /// (the capture dropped them) count as arrived with the last arrival
    /// seen before that acknowledgement.
    fn build(view: &ConnectionView, receiver: Side) -> Completion {
        let sender = receiver.other();
        let mut next = if view.syn_seen[sender.index()] {
            0
        } else {
            view.initial_una[sender.index()]
        };
        let mut pending: std::collections::BTreeMap<i64, i64> = Default::default();
        // At most one step per record of the receiver: no copy as it grows.
        let mut steps: Vec<(u32, i64)> = Vec::with_capacity(view.side_order(receiver).len());
        for &index in view.side_order(receiver) {
            let r = view.record(index);
            if r.flags.rst() {
                continue;
            }
            if r.is_departure() {
                if r.flags.ack() && r.ack > next {
                    if let Some(last) = steps.last_mut() {
                        next = r.ack;
                        last.1 = next;
                    }
                }
            } else if r.has_space() {
                if r.seq <= next {
                    next = next.max(r.end);
                } else {
                    let end = pending.entry(r.seq).or_insert(r.end);
                    *end = (*end).max(r.end);
                }
                steps.push((index, next));
            } else {
                continue;
            }
            while let Some((&start, &end)) = pending.first_key_value() {
                if start > next {
                    break;
                }
                next = next.max(end);
                pending.pop_first();
            }
            if let Some(last) = steps.last_mut() {
                last.1 = next;
            }
        }
        Completion { steps }
    }

    /// The arrival after which the peer's bytes below `target` had all
    /// arrived.
    fn arrival_reaching(&self, target: i64) -> Option<u32> {
        let at = self.steps.partition_point(|&(_, next)| next < target);
        self.steps.get(at).map(|&(index, _)| index)
    }
}

/// Departures of one sender sorted by first sequence number.
struct Copies<'a> {
    by_start: Cow<'a, [(i64, u32)]>,
    longest: i64,
}

impl<'a> Copies<'a> {
    fn build(view: &'a ConnectionView, sender: Side) -> Copies<'a> {
        // The placement sorted the observed side's departures already.
        if let Some((by_start, longest)) = &view.departures_by_first_byte[sender.index()] {
            return Copies {
                by_start: Cow::Borrowed(by_start),
                longest: *longest,
            };
        }
        let order = view.side_order(sender);
        // Room for every record of the side: no copy as it grows.
        let mut by_start: Vec<(i64, u32)> = Vec::with_capacity(order.len());
        by_start.extend(
            order
                .iter()
                .copied()
                .filter(|&i| {
                    let r = view.record(i);
                    r.is_departure() && r.has_space()
                })
                .map(|i| (view.record(i).seq, i)),
        );
        by_start.sort();
        let longest = by_start
            .iter()
            .map(|&(_, i)| view.record(i).end - view.record(i).seq)
            .max()
            .unwrap_or(0);
        Copies {
            by_start: Cow::Owned(by_start),
            longest,
        }
    }

    /// The earliest departure carrying data in `[start, end)`.
    fn first_within(&self, view: &ConnectionView, start: i64, end: i64) -> Option<u32> {
        let from = self
            .by_start
            .partition_point(|&(first, _)| first < start - self.longest);
        let to = self.by_start.partition_point(|&(first, _)| first < end);
        self.by_start[from..to]
            .iter()
            .map(|&(_, i)| i)
            .filter(|&i| {
                let (first, last) = view.record(i).data_range();
                first < end && last > start && last > first
            })
            .min_by_key(|&i| view.position_of(i))
    }

    /// The latest earlier departure (before `position`) that carried `byte`.
    fn previous(&self, view: &ConnectionView, byte: i64, position: usize) -> Option<u32> {
        let upper = self.by_start.partition_point(|&(start, _)| start <= byte);
        self.by_start[..upper]
            .iter()
            .rev()
            .take_while(|&&(start, _)| start >= byte - self.longest)
            .map(|&(_, i)| i)
            .filter(|&i| view.record(i).end > byte && view.position_of(i) < position)
            .max_by_key(|&i| view.position_of(i))
    }
}

/// The dependence structure of one connection: per-record model outcomes
/// and the lookups the parent rules need.
pub(crate) struct Graph<'a> {
    pub view: &'a ConnectionView,
    outcomes: Vec<Option<SendOutcome>>,
    latest: [Latest; 2],
    /// Completion at each receiver (index: receiver side).
    completion: [Completion; 2],
    copies: [Copies<'a>; 2],
    /// (first data byte, transaction) of transactions with data, by sender.
    owners: [Vec<(i64, usize)>; 2],
    last_transaction: usize,
    /// The transaction of each record.
    owners_of_records: Vec<usize>,
    /// End of each sender's FIN (relative sequence), if it sent one.
    fin_end: [Option<i64>; 2],
    pub counts: ModelCounts,
    /// Initial window used for each sender's model, in segments.
    pub initial_window: [u32; 2],
}

/// The application-level anchors of one transaction.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Anchors {
    pub index: usize,
    /// The transaction's first event.
    pub root: u32,
    /// When each side's data for this transaction existed (index: side).
    pub available: [Option<u32>; 2],
}

impl<'a> Graph<'a> {
    pub fn build(
        view: &'a ConnectionView,
        spans: &[TransactionSpan],
        options: &Options,
    ) -> Graph<'a> {
        let mut outcomes = vec![None; view.records.len()];
        let mut counts = ModelCounts::default();
        let mut initial_window = [0; 2];
        for sender in [Side::Client, Side::Server] {
            let window = run_model(view, sender, options, &mut outcomes);
            counts.hidden_timeouts += window.1.hidden_timeouts;
            counts.beyond_window += window.1.beyond_window;
            initial_window[sender.index()] = window.0;
        }
        let mut owners = [Vec::new(), Vec::new()];
        for span in spans {
            if span.request.1 > span.request.0 {
                owners[Side::Client.index()].push((span.request.0, span.index));
            }
            if span.response.1 > span.response.0 {
                owners[Side::Server.index()].push((span.response.0, span.index));
            }
        }
        let mut fin_end = [None; 2];
        for r in &view.records {
            if r.flags.fin() && !r.flags.rst() {
                fin_end[r.sender.index()].get_or_insert(r.end);
            }
        }
        let mut graph = Graph {
            view,
            outcomes,
            fin_end,
            owners_of_records: Vec::new(),
            latest: [
                Latest::build(view, Side::Client),
                Latest::build(view, Side::Server),
            ],
            completion: [
                Completion::build(view, Side::Client),
                Completion::build(view, Side::Server),
            ],
            copies: [
                Copies::build(view, Side::Client),
                Copies::build(view, Side::Server),
            ],
            owners,
            last_transaction: spans.len().saturating_sub(1),
            counts,
            initial_window,
        };
        graph.owners_of_records = view
            .records
            .iter()
            .map(|record| graph.compute_owner(record))
            .collect();
        graph
    }

    /// A pure ACK that only opens the window (same acknowledgement, larger
    /// window): the receiving application read data, so it is that
    /// endpoint's doing, not the kernel's immediate answer.
    pub fn window_update(&self, departure: u32) -> bool {
        let record = self.view.record(departure);
        if !record.is_departure() || !record.is_pure_ack() {
            return false;
        }
        let position = self.view.position_of(departure);
        let latest = &self.latest[record.side.index()];
        record.ack <= latest.own_ack_before[position]
            && latest.own_window_before[position].is_some_and(|w| record.window > w)
    }

    /// Whether a departure re-sent sequence space (a SYN: an earlier SYN).
    pub fn retransmission(&self, departure: u32) -> bool {
        if let Some(outcome) = self.outcomes[departure as usize] {
            return outcome.retransmission;
        }
        let record = self.view.record(departure);
        if !record.is_departure() || !record.is_syn() {
            return false;
        }
        let position = self.view.position_of(departure);
        position > 0
            && found(self.latest[record.side.index()].own_syn_departure[position - 1]).is_some()
    }

    /// End of a sender's FIN in its sequence space, if it sent one.
    pub fn fin_end(&self, sender: Side) -> Option<i64> {
        self.fin_end[sender.index()]
    }

    pub fn outcome(&self, record: u32) -> Option<SendOutcome> {
        self.outcomes[record as usize]
    }

    /// The arrival at `receiver` after which the peer's bytes below
    /// `target` had all arrived.
    pub fn completed(&self, receiver: Side, target: i64) -> Option<u32> {
        self.completion[receiver.index()].arrival_reaching(target)
    }

    /// The transaction owning a byte of `sender`'s data.
    fn owner_of_byte(&self, sender: Side, byte: i64) -> usize {
        let owners = &self.owners[sender.index()];
        let at = owners.partition_point(|&(start, _)| start <= byte);
        if at == 0 {
            0
        } else {
            owners[at - 1].1
        }
    }

    /// The first departure of `sender` carrying data in `[start, end)`.
    pub fn first_within(&self, sender: Side, start: i64, end: i64) -> Option<u32> {
        self.copies[sender.index()].first_within(self.view, start, end)
    }

    /// The transaction a record belongs to.
    pub fn owner(&self, index: u32) -> usize {
        self.owners_of_records[index as usize]
    }

    fn compute_owner(&self, record: &Record) -> usize {
        if record.flags.rst() {
            return self.last_transaction;
        }
        if record.payload_len > 0 {
            return self.owner_of_byte(record.sender, record.data_range().0);
        }
        if record.flags.fin() {
            return self.last_transaction;
        }
        if record.is_syn() {
            return 0;
        }
        // A pure ACK belongs with the bytes it acknowledges.
        self.owner_of_byte(record.sender.other(), record.ack - 1)
    }

    /// The phase a record belongs to.
    pub fn phase(&self, record: &Record) -> Phase {
        if record.flags.rst() || (record.flags.fin() && record.payload_len == 0) {
            return Phase::Teardown;
        }
        if record.is_syn() {
            return Phase::Setup;
        }
        if record.payload_len > 0 {
            return match record.sender {
                Side::Client => Phase::Request,
                Side::Server => Phase::Response,
            };
        }
        let peer = record.sender.other();
        let peer_una = self.view.initial_una[peer.index()];
        if self.fin_end[peer.index()].is_some_and(|end| record.ack >= end) {
            Phase::Teardown
        } else if self.view.syn_seen[peer.index()] && record.ack <= peer_una {
            Phase::Setup
        } else {
            match peer {
                Side::Client => Phase::Request,
                Side::Server => Phase::Response,
            }
        }
    }

    /// The parent of a node in the PDG, with the arc kind; `None` when no
    /// dependence is known (the caller joins the node to the root).
    pub fn parent(&self, node: u32, anchors: &Anchors) -> Option<(u32, ArcKind)> {
        let record = self.view.record(node);
        if !record.is_departure() {
            return record.link.map(|departure| (departure, ArcKind::Transit));
        }
        let side = record.side;
        let position = self.view.position_of(node);
        let latest = &self.latest[side.index()];
        let before = |array: &Vec<u32>| {
            if position == 0 {
                None
            } else {
                found(array[position - 1])
            }
        };
        if record.is_syn() {
            let previous = before(&latest.own_syn_departure);
            if !record.flags.ack() {
                return previous.map(|p| (p, ArcKind::Retransmission(LossRepair::Timeout)));
            }
            // A SYN-ACK answers the latest SYN, unless it re-sends an
            // earlier SYN-ACK on its timer.
            let syn = before(&latest.peer_syn_arrival);
            return match (previous, syn) {
                (None, Some(syn)) => Some((syn, ArcKind::AckTrigger)),
                (Some(previous), Some(syn))
                    if self.view.position_of(syn) > self.view.position_of(previous) =>
                {
                    Some((syn, ArcKind::AckTrigger))
                }
                (Some(previous), _) => {
                    Some((previous, ArcKind::Retransmission(LossRepair::Timeout)))
                }
                (None, None) => None,
            };
        }
        if record.has_space() {
            let outcome = self.outcomes[node as usize];
            if outcome.is_some_and(|o| o.window_probe) {
                let copies = &self.copies[side.index()];
                let waited_on = copies
                    .previous(self.view, record.seq, position)
                    .or_else(|| match outcome.and_then(|o| o.liberator) {
                        Some(Liberator::Ack(token)) | Some(Liberator::LossRecovery(token)) => {
                            Some(token)
                        }
                        _ => None,
                    })
                    .filter(|&p| self.admissible(p, anchors, position));
                if let Some(previous) = waited_on {
                    return Some((previous, ArcKind::WindowProbe));
                }
            }
            if let Some(repair) = outcome.and_then(|o| o.repair) {
                let copies = &self.copies[side.index()];
                // The original's departure, else (it was never captured) the
                // first capture of any of its bytes, else the moment the
                // data existed: the wait is the loss's either way.
                let original = copies
                    .previous(self.view, record.seq, position)
                    .or_else(|| {
                        copies
                            .first_within(self.view, record.seq, record.end)
                            .filter(|&first| self.view.position_of(first) < position)
                    })
                    .or_else(|| {
                        (self.owner(node) == anchors.index)
                            .then_some(anchors.available[side.index()])
                            .flatten()
                            .filter(|&a| self.admissible(a, anchors, position))
                    });
                if let Some(previous) = original {
                    return Some((previous, ArcKind::Retransmission(repair)));
                }
            }
            if record.payload_len == 0 && record.flags.fin() {
                let candidates = [
                    before(&latest.own_data_departure),
                    before(&latest.peer_data_arrival),
                    before(&latest.peer_fin_arrival),
                ];
                return self
                    .latest_admissible(&candidates, anchors, position)
                    .map(|p| (p, ArcKind::Application))
                    .or_else(|| self.root_if_before(anchors, side, position));
            }
            let liberator = match outcome.and_then(|o| o.liberator) {
                Some(Liberator::Ack(token)) | Some(Liberator::LossRecovery(token)) => Some(token),
                _ => None,
            };
            let available = if self.owner(node) == anchors.index {
                anchors.available[side.index()]
            } else {
                None
            };
            let liberator = liberator.filter(|&l| self.admissible(l, anchors, position));
            let available = available.filter(|&a| self.admissible(a, anchors, position));
            return match (liberator, available) {
                (Some(l), Some(a)) if self.view.position_of(l) > self.view.position_of(a) => {
                    Some((l, ArcKind::Liberation))
                }
                (_, Some(a)) => Some((a, ArcKind::Application)),
                (Some(l), None) => Some((l, ArcKind::Liberation)),
                (None, None) => self.root_if_before(anchors, side, position),
            };
        }
        if record.is_pure_ack() {
            let receiver_of_data = side;
            let advancing = record.ack > latest.own_ack_before[position];
            let trigger = if advancing {
                self.completed(receiver_of_data, record.ack)
                    .filter(|&a| self.admissible(a, anchors, position))
            } else {
                None
            };
            let trigger = trigger.or_else(|| {
                let previous_arrival = before(&latest.peer_data_arrival)
                    .or_else(|| before(&latest.peer_syn_arrival))
                    .or_else(|| before(&latest.peer_fin_arrival));
                previous_arrival.filter(|&a| self.admissible(a, anchors, position))
            });
            return trigger.map(|t| (t, ArcKind::AckTrigger));
        }
        None
    }

    /// The event before `node` at the same endpoint, if it belongs to this
    /// transaction (the fallback of an unexplained node).
    pub fn previous_event(&self, node: u32, anchors: &Anchors) -> Option<u32> {
        let record = self.view.record(node);
        let position = self.view.position_of(node);
        let previous = *self
            .view
            .side_order(record.side)
            .get(position.checked_sub(1)?)?;
        self.admissible(previous, anchors, position)
            .then_some(previous)
    }

    /// A candidate parent is usable when it precedes the node at the same
    /// endpoint and does not belong to an earlier transaction.
    fn admissible(&self, candidate: u32, anchors: &Anchors, position: usize) -> bool {
        self.view.position_of(candidate) < position
            && (candidate == anchors.root || self.owner(candidate) >= anchors.index)
    }

    fn latest_admissible(
        &self,
        candidates: &[Option<u32>],
        anchors: &Anchors,
        position: usize,
    ) -> Option<u32> {
        candidates
            .iter()
            .flatten()
            .copied()
            .filter(|&c| self.admissible(c, anchors, position))
            .max_by_key(|&c| self.view.position_of(c))
    }

    fn root_if_before(
        &self,
        anchors: &Anchors,
        side: Side,
        position: usize,
    ) -> Option<(u32, ArcKind)> {
        let root = self.view.record(anchors.root);
        (root.side == side && self.view.position_of(anchors.root) < position)
            .then_some((anchors.root, ArcKind::Application))
    }
}

/// Runs the Reno model of one sender over its endpoint's events; returns
/// the initial window used and the model's counts.
fn run_model(
    view: &ConnectionView,
    sender: Side,
    options: &Options,
    outcomes: &mut [Option<SendOutcome>],
) -> (u32, ModelCounts) {
    let mss = view.mss[sender.index()];
    let initial_window = options
        .initial_window
        .or_else(|| inferred_initial_window(view, sender))
        .unwrap_or(options.default_initial_window)
        .max(1);
    let round_trip = view.round_trip();
    let config = RenoConfig {
        mss,
        initial_window_segments: initial_window,
        initial_ssthresh: options
            .initial_ssthresh
            .map(|s| u64::from(s) * u64::from(mss)),
        slow_start_limit_segments: options.slow_start_limit_segments,
        prompt_retransmit: round_trip.unwrap_or(options.min_rto),
        min_rto: options.min_rto,
        restart_after_idle: options.restart_after_idle,
    };
    let mut model = RenoSender::new(
        config,
        view.initial_una[sender.index()],
        view.initial_rwnd[sender.index()],
    );
    model.reserve(view.side_order(sender).len());
    for &index in view.side_order(sender) {
        let r = view.record(index);
        if r.flags.rst() {
            continue;
        }
        if r.is_departure() {
            if r.has_space() && !r.is_syn() {
                outcomes[index as usize] = Some(model.on_send(r.time, index, r.seq, r.end));
            }
        } else if r.flags.ack() {
            model.on_ack(
                r.time,
                index,
                AckArrival {
                    ack: r.ack,
                    window: r.window,
                    carries_data: r.end > r.seq,
                    sack: r.sack,
                },
            );
        }
    }
    let counters = model.counters();
    (
        initial_window,
        ModelCounts {
            hidden_timeouts: counters.hidden_timeouts,
            beyond_window: counters.beyond_window,
        },
    )
}

/// The initial window a sender's first flight shows: the segments sent
/// before the first ACK of data arrived, when more data followed that ACK
/// without the peer sending anything (so the window, not the application,
/// ended the flight) and the peer's receive window did not.
fn inferred_initial_window(view: &ConnectionView, sender: Side) -> Option<u32> {
    let una = view.initial_una[sender.index()];
    let mss = i64::from(view.mss[sender.index()].max(1));
    let mut highest = una;
    let mut flight = None::<i64>;
    let mut peer_spoke = false;
    for &index in view.side_order(sender) {
        let r = view.record(index);
        if r.flags.rst() {
            continue;
        }
        let new_data = r.is_departure() && r.payload_len > 0 && r.data_range().1 > highest;
        match flight {
            None => {
                if new_data {
                    highest = r.data_range().1;
                } else if !r.is_departure() && r.flags.ack() && r.ack > una && highest > una {
                    flight = Some(highest - una);
                }
            }
            Some(bytes) => {
                if !r.is_departure() && r.payload_len > 0 {
                    peer_spoke = true;
                }
                if new_data {
                    let receive_limited = bytes + mss > view.initial_rwnd[sender.index()] as i64;
                    if peer_spoke || receive_limited {
                        return None;
                    }
                    return u32::try_from((bytes + mss - 1) / mss).ok();
                }
            }
        }
    }
    None
}
