//! Profiling the critical path: the six-category taxonomy of the tcpeval
//! paper, Section 3.4.
//!
//! "We assign a natural category to each arc type": arcs between
//! differently-typed nodes on one endpoint (data → ACK, ACK → data, and
//! here the application-level arcs) are that endpoint's time — **server**
//! or **client**; arcs from one endpoint to the other are **network** time,
//! split into **propagation** (the minimum one-way delay of that direction)
//! and **network variation** (the rest); arcs between data departures on
//! one endpoint are **loss**, repaired by a coarse **time-out** or by
//! **fast retransmit**. The paper's footnote applies: server time spent
//! generating a retransmission is counted as loss.
//!
//! # Propagation and clocks
//!
//! "We define propagation delay to be the minimum observed delay in each
//! direction over *all* experiments in which the path did not change":
//! here the minimum over the whole input, per client–server host pair,
//! from Karn-valid samples only (no sample across a retransmission).
//!
//! * Two captures: one-way delays are read across the two clocks. The
//!   offset between them (server minus client) is given, or estimated as
//!   half the difference of the minimum client→server and server→client
//!   readings, per host pair, then the median over pairs — exact when the
//!   two directions' propagation delays are equal (the paper synchronised
//!   its clocks with NTP and planned GPS instead). Times are reported on
//!   the client's clock.
//! * One capture (single vantage): propagation each way is half the
//!   minimum round-trip time seen at the captured endpoint, and the other
//!   endpoint's events are placed that far from their captured
//!   counterparts. A turnaround at the unobserved endpoint that ends in a
//!   pure ACK is counted as network variation (a kernel sends ACKs at once,
//!   so the excess over the minimum round trip is queueing), one that ends
//!   in data or in a window update (the application read) as that
//!   endpoint's time. Delayed ACKs are therefore network variation in this
//!   mode. [`approximation`] states this for
//!   the output.
//!
//! # Conservation
//!
//! Every node gets one time on the reference clock; the arcs' weights are
//! differences of consecutive node times, so they sum to the last time
//! minus the first: the transaction's duration, exactly, in integer
//! nanoseconds. Where clock error or placement makes a node earlier than
//! its parent, the node is moved to its parent's time (and never past the
//! transaction's end), counted as a clamped arc; the duration, measured
//! between the path's two ends, does not move.

use serde::Serialize;
use vantage_core::Nanos;
use vantage_trace::Endpoint;

use crate::critical_path::{RawNode, RawPath};
use crate::graph::{ArcKind, Phase};
pub use crate::packet_label::PacketLabel;
use crate::reno::LossRepair;
use crate::view::Vantage;
use crate::Side;

/// The six categories of delay (Section 3.4), and a seventh for loss
/// repairs the trace cannot classify (shown only when it is not empty).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    Server,
    Client,
    Propagation,
    NetworkVariation,
    LossTimeout,
    LossFastRetransmit,
    LossUnknown,
}

impl Category {
    pub const ALL: [Category; 7] = [
        Category::Server,
        Category::Client,
        Category::Propagation,
        Category::NetworkVariation,
        Category::LossTimeout,
        Category::LossFastRetransmit,
        Category::LossUnknown,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Category::Server => "server",
            Category::Client => "client",
            Category::Propagation => "propagation",
            Category::NetworkVariation => "network variation",
            Category::LossTimeout => "loss (time-out)",
            Category::LossFastRetransmit => "loss (fast retransmit)",
            Category::LossUnknown => "loss (unknown kind)",
        }
    }

    fn of_side(side: Side) -> Category {
        match side {
            Side::Server => Category::Server,
            Side::Client => Category::Client,
        }
    }
}

/// A transaction's time by category; the fields sum to its duration.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Profile {
    pub server: Nanos,
    pub client: Nanos,
    pub propagation: Nanos,
    pub network_variation: Nanos,
    pub loss_timeout: Nanos,
    pub loss_fast_retransmit: Nanos,
    /// Loss repaired sooner than any timer, with no evidence of a fast
    /// retransmit in the trace (left out of the JSON when zero).
    #[serde(skip_serializing_if = "is_zero")]
    pub loss_unknown: Nanos,
}

fn is_zero(value: &Nanos) -> bool {
    *value == Nanos::ZERO
}

fn is_zero_count(value: &u32) -> bool {
    *value == 0
}

impl Profile {
    pub fn get(&self, category: Category) -> Nanos {
        match category {
            Category::Server => self.server,
            Category::Client => self.client,
            Category::Propagation => self.propagation,
            Category::NetworkVariation => self.network_variation,
            Category::LossTimeout => self.loss_timeout,
            Category::LossFastRetransmit => self.loss_fast_retransmit,
            Category::LossUnknown => self.loss_unknown,
        }
    }

    fn slot(&mut self, category: Category) -> &mut Nanos {
        match category {
            Category::Server => &mut self.server,
            Category::Client => &mut self.client,
            Category::Propagation => &mut self.propagation,
            Category::NetworkVariation => &mut self.network_variation,
            Category::LossTimeout => &mut self.loss_timeout,
            Category::LossFastRetransmit => &mut self.loss_fast_retransmit,
            Category::LossUnknown => &mut self.loss_unknown,
        }
    }

    /// Sum of the categories.
    pub fn total(&self) -> Nanos {
        Category::ALL
            .iter()
            .fold(Nanos::ZERO, |sum, &c| sum + self.get(c))
    }

    /// Share of the total in each category, in [`Category::ALL`] order (0
    /// when the total is 0).
    pub fn shares(&self) -> [f64; 7] {
        let total = self.total().0 as f64;
        Category::ALL.map(|c| {
            if total > 0.0 {
                self.get(c).0 as f64 / total
            } else {
                0.0
            }
        })
    }
}

/// A transaction's time by part (the paper's Figure 2); sums to its
/// duration.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Phases {
    pub setup: Nanos,
    pub request: Nanos,
    pub response: Nanos,
    pub teardown: Nanos,
}

impl Phases {
    fn slot(&mut self, phase: Phase) -> &mut Nanos {
        match phase {
            Phase::Setup => &mut self.setup,
            Phase::Request => &mut self.request,
            Phase::Response => &mut self.response,
            Phase::Teardown => &mut self.teardown,
        }
    }

    pub fn get(&self, phase: Phase) -> Nanos {
        match phase {
            Phase::Setup => self.setup,
            Phase::Request => self.request,
            Phase::Response => self.response,
            Phase::Teardown => self.teardown,
        }
    }
}

/// Losses on the critical path, by how they were repaired.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LossCounts {
    pub timeout: u32,
    pub fast_retransmit: u32,
    #[serde(skip_serializing_if = "is_zero_count")]
    pub unknown: u32,
}

impl LossCounts {
    pub fn total(&self) -> u32 {
        self.timeout + self.fast_retransmit + self.unknown
    }
}

/// One event on the critical path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PathNode {
    /// The endpoint where it happened.
    pub side: Side,
    /// A departure (else an arrival).
    pub departure: bool,
    /// On the reference clock (the client's with two captures).
    pub time: Nanos,
    /// Captured (else placed: single vantage or capture drop).
    pub observed: bool,
    pub packet: PacketLabel,
}

/// One arc of the critical path with its weight and category.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PathArc {
    pub kind: ArcKind,
    pub phase: Phase,
    pub from: PathNode,
    pub to: PathNode,
    pub duration: Nanos,
    /// Where the arc's time went: all of it to `category`, except the
    /// `propagation` part of a network arc.
    pub category: Category,
    pub propagation: Nanos,
    /// The arc's end was moved to its start (clock error or placement).
    pub clamped: bool,
}

/// Capture and model findings for one transaction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TransactionFlags {
    /// Several requests before a response (HTTP pipelining), analyzed as
    /// one transaction.
    pub pipelined: bool,
    /// The capture ends before the response (or request) was complete.
    pub incomplete: bool,
    /// The path includes the connection's tear-down.
    pub teardown: bool,
    /// Hidden time-outs among this transaction's packets (Section 3.3).
    pub hidden_timeouts: u32,
    /// This transaction's packets sent beyond the modelled window (Section
    /// 3.5: capture reordering, or a sender that is not Reno).
    pub beyond_window: u32,
    /// Arcs with no known dependence (capture gaps).
    pub unexplained_arcs: u32,
    /// Arcs whose end had to be moved to their start.
    pub clamped_arcs: u32,
}

/// One event of a transaction's connection, for the sequence plot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PacketEvent {
    pub side: Side,
    pub departure: bool,
    pub time: Nanos,
    pub packet: PacketLabel,
    pub on_critical_path: bool,
}

/// The analysis of one transaction.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Transaction {
    /// Position in the analysis, from 1, in order of start time.
    pub number: usize,
    /// The connection's number in the (server's, else client's) capture.
    pub connection: u64,
    /// Position in its connection, from 0.
    pub index_in_connection: usize,
    pub client: Endpoint,
    pub server: Endpoint,
    pub vantage: Vantage,
    /// First event, on the reference clock (capture time, ns since the
    /// epoch).
    pub start: Nanos,
    pub duration: Nanos,
    pub request_bytes: u64,
    pub response_bytes: u64,
    pub profile: Profile,
    pub phases: Phases,
    /// Distinct packets with an event on the critical path.
    pub critical_path_packets: usize,
    pub losses: LossCounts,
    pub flags: TransactionFlags,
    /// Initial windows the Reno models used, in segments (client's,
    /// server's).
    pub initial_window: [u32; 2],
    /// Propagation used, by sender (client→server, server→client).
    pub propagation_used: [Nanos; 2],
    pub path: Vec<PathArc>,
    /// Every event of the transaction's packets (kept on request).
    pub packets: Vec<PacketEvent>,
    /// Why it took this long, in one line.
    pub verdict: String,
}

impl Transaction {
    pub fn client_port(&self) -> u16 {
        self.client.port
    }
}

/// How unobserved events are placed and times compared.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Placement {
    /// The endpoint whose clock times are reported on.
    pub reference: Side,
    /// Server clock minus client clock.
    pub offset: i64,
    /// Propagation by sender.
    pub propagation: [Nanos; 2],
}

impl Placement {
    pub(crate) fn to_reference(self, side: Side, time: Nanos) -> i64 {
        let time = time.0.min(i64::MAX as u64) as i64;
        match (self.reference, side) {
            (Side::Client, Side::Server) => time - self.offset,
            (Side::Server, Side::Client) => time + self.offset,
            _ => time,
        }
    }
}

/// The profiled path of one transaction.
pub(crate) struct Profiled {
    pub start: Nanos,
    pub duration: Nanos,
    pub profile: Profile,
    pub phases: Phases,
    pub path: Vec<PathArc>,
    pub losses: LossCounts,
    pub clamped: u32,
    pub packets: usize,
}

/// A node's time on the reference clock: captured, or re-placed one
/// propagation delay from its captured counterpart.
pub(crate) fn node_time(node: &RawNode, placement: &Placement) -> i64 {
    if node.observed {
        return placement.to_reference(node.side, node.time);
    }
    let propagation = placement.propagation[node.label.sender.index()].0 as i64;
    match node.anchor {
        Some(anchor) => {
            let counterpart = placement.to_reference(node.side.other(), anchor);
            if node.departure {
                counterpart - propagation
            } else {
                counterpart + propagation
            }
        }
        None => placement.to_reference(node.side, node.time),
    }
}

/// Times the nodes of a traced path and profiles its arcs.
pub(crate) fn profile(raw: &RawPath, placement: &Placement) -> Profiled {
    let times: Vec<i64> = raw
        .nodes
        .iter()
        .map(|node| node_time(node, placement))
        .collect();
    let first = times.first().copied().unwrap_or(0);
    let last = times.last().copied().unwrap_or(first).max(first);
    let mut clamped_times = Vec::with_capacity(times.len());
    let mut clamped = 0;
    for (i, &time) in times.iter().enumerate() {
        let placed = if i == 0 {
            first
        } else if i + 1 == times.len() {
            last
        } else {
            let previous: i64 = clamped_times[i - 1];
            time.max(previous).min(last)
        };
        if i > 0 && placed != time {
            clamped += 1;
        }
        clamped_times.push(placed);
    }

    let mut profile = Profile::default();
    let mut phases = Phases::default();
    let mut losses = LossCounts::default();
    let mut path = Vec::with_capacity(raw.kinds.len());
    let mut packets: Vec<u32> = raw.nodes.iter().map(|node| node.packet).collect();
    packets.sort_unstable();
    packets.dedup();
    let node_at = |i: usize| {
        let node = &raw.nodes[i];
        PathNode {
            side: node.side,
            departure: node.departure,
            time: Nanos(clamped_times[i].max(0) as u64),
            observed: node.observed,
            packet: node.label,
        }
    };
    for (i, &kind) in raw.kinds.iter().enumerate() {
        let (from, to) = (&raw.nodes[i], &raw.nodes[i + 1]);
        let weight = Nanos((clamped_times[i + 1] - clamped_times[i]).max(0) as u64);
        let crosses = from.side != to.side;
        let (category, propagation) = match kind {
            ArcKind::Retransmission(LossRepair::Timeout) => {
                losses.timeout += 1;
                (Category::LossTimeout, Nanos::ZERO)
            }
            ArcKind::Retransmission(LossRepair::FastRetransmit) => {
                losses.fast_retransmit += 1;
                (Category::LossFastRetransmit, Nanos::ZERO)
            }
            ArcKind::Retransmission(LossRepair::Unknown) => {
                losses.unknown += 1;
                (Category::LossUnknown, Nanos::ZERO)
            }
            // The sender waits on the receiver's closed window.
            ArcKind::WindowProbe => (Category::of_side(to.side.other()), Nanos::ZERO),
            ArcKind::Transit => (
                Category::NetworkVariation,
                weight.min(placement.propagation[to.label.sender.index()]),
            ),
            ArcKind::Unexplained if crosses => (
                Category::NetworkVariation,
                weight.min(placement.propagation[to.label.sender.index()]),
            ),
            _ if !to.observed && to.departure && to.kernel_ack => {
                (Category::NetworkVariation, Nanos::ZERO)
            }
            _ => (Category::of_side(to.side), Nanos::ZERO),
        };
        *profile.slot(Category::Propagation) += propagation;
        *profile.slot(category) += weight - propagation;
        *phases.slot(to.phase) += weight;
        path.push(PathArc {
            kind,
            phase: to.phase,
            from: node_at(i),
            to: node_at(i + 1),
            duration: weight,
            category,
            propagation,
            clamped: clamped_times[i + 1] != times[i + 1],
        });
    }
    Profiled {
        start: Nanos(first.max(0) as u64),
        duration: Nanos((last - first) as u64),
        profile,
        phases,
        path,
        losses,
        clamped,
        packets: packets.len(),
    }
}

/// The one-line "why was this slow": the largest category, its time and
/// its share of the duration, named after where on the path it arose when
/// one place accounts for it (`1.0 s SYN time-out = 82 %`, `50 ms server
/// first-byte delay = 80 %`), else with the largest place
/// (`209 ms server = 99 % — mostly first-byte delay (70 ms)`).
pub(crate) fn verdict(duration: Nanos, path: &[PathArc]) -> String {
    if duration == Nanos::ZERO || path.is_empty() {
        return "no time on the critical path".to_string();
    }
    // (category, place) → time, in path order.
    let mut places: Vec<(Category, &'static str, Nanos)> = Vec::new();
    let mut add = |category: Category, place: &'static str, amount: Nanos| {
        if amount == Nanos::ZERO {
            return;
        }
        match places
            .iter_mut()
            .find(|(c, p, _)| *c == category && *p == place)
        {
            Some((_, _, total)) => *total += amount,
            None => places.push((category, place, amount)),
        }
    };
    let transits = path
        .iter()
        .filter(|arc| arc.propagation > Nanos::ZERO)
        .count();
    for arc in path {
        add(Category::Propagation, "", arc.propagation);
        let place = match arc.category {
            Category::LossTimeout | Category::LossFastRetransmit | Category::LossUnknown => {
                match arc.to.packet.kind() {
                    "SYN" => "SYN",
                    "SYN-ACK" => "SYN-ACK",
                    "FIN" => "FIN",
                    _ => match arc.to.packet.sender {
                        Side::Client => "request",
                        Side::Server => "response",
                    },
                }
            }
            Category::Server | Category::Client if arc.kind == ArcKind::WindowProbe => {
                "closed receive window"
            }
            Category::Server
                if arc.phase == Phase::Response && arc.kind == ArcKind::Application =>
            {
                "first-byte delay"
            }
            Category::Server | Category::Client => match arc.phase {
                Phase::Setup => "delay in set-up",
                Phase::Request => "delay in request",
                Phase::Response => "delay in transfer",
                Phase::Teardown => "delay in tear-down",
            },
            Category::Propagation | Category::NetworkVariation => "",
        };
        add(arc.category, place, arc.duration - arc.propagation);
    }
    let mut totals: Vec<(Category, Nanos)> = Vec::new();
    for &(category, _, amount) in &places {
        match totals.iter_mut().find(|(c, _)| *c == category) {
            Some((_, total)) => *total += amount,
            None => totals.push((category, amount)),
        }
    }
    let Some(&(category, total)) = totals
        .iter()
        .enumerate()
        .max_by(|(i, (_, a)), (j, (_, b))| a.cmp(b).then(j.cmp(i)))
        .map(|(_, entry)| entry)
    else {
        return "no time on the critical path".to_string();
    };
    let mut within: Vec<(&'static str, Nanos)> = places
        .iter()
        .filter(|(c, _, _)| *c == category)
        .map(|&(_, place, amount)| (place, amount))
        .collect();
    within.sort_by_key(|entry| std::cmp::Reverse(entry.1));
    let share = (total.0 as f64 / duration.0 as f64 * 100.0).round();
    let amount = format_duration(total);
    let single = within.len() == 1;
    let top = within.first().map_or("", |(place, _)| place);
    let name = match category {
        Category::Propagation => format!(
            "propagation ({transits} one-way trip{})",
            if transits == 1 { "" } else { "s" }
        ),
        Category::NetworkVariation => "network variation".to_string(),
        Category::LossTimeout if single => format!("{top} time-out"),
        Category::LossTimeout => "loss by time-outs".to_string(),
        Category::LossFastRetransmit if single => format!("{top} fast retransmit"),
        Category::LossFastRetransmit => "loss by fast retransmits".to_string(),
        Category::LossUnknown if single => format!("{top} loss repair of unknown kind"),
        Category::LossUnknown => "loss repaired in unknown ways".to_string(),
        Category::Server | Category::Client if single => {
            format!("{} {top}", category.name())
        }
        Category::Server | Category::Client => category.name().to_string(),
    };
    let mut line = format!("{amount} {name} = {share:.0} %");
    if !single {
        if let Some((place, part)) = within.first() {
            line.push_str(&format!(" — mostly {place} ({})", format_duration(*part)));
        }
    }
    line
}

/// A duration for people: `1.0 s`, `35 ms`, `2.5 ms`, `120 µs`.
pub fn format_duration(duration: Nanos) -> String {
    let seconds = duration.as_secs_f64();
    if seconds >= 1.0 {
        format!("{seconds:.1} s")
    } else if seconds >= 0.01 {
        format!("{:.0} ms", seconds * 1e3)
    } else if seconds >= 0.001 {
        format!("{:.1} ms", seconds * 1e3)
    } else {
        format!("{:.0} µs", seconds * 1e6)
    }
}

/// The approximation statement for output, by vantage.
pub fn approximation(vantage: Vantage) -> &'static str {
    match vantage {
        Vantage::Both => {
            "two captures: one-way delays read across the two clocks after removing their \
             offset (given, or estimated as half the difference of the minimum one-way readings, \
             which assumes equal propagation both ways); times are on the client's clock"
        }
        Vantage::Server => {
            "single vantage (server capture): client events are placed half the minimum \
             round-trip time (per client-server host pair) from their server-side counterparts; \
             propagation is that half each way; a client turnaround that ends in a pure ACK \
             counts as network variation (delayed ACKs included), one that ends in data (a \
             request) or a window update as client time; \
             losses before the server's capture (lost SYNs, lost requests) are not seen"
        }
        Vantage::Client => {
            "single vantage (client capture): server events are placed half the minimum \
             round-trip time (per client-server host pair) from their client-side counterparts; \
             propagation is that half each way; a server turnaround that ends in a pure ACK \
             counts as network variation (delayed ACKs included), one that ends in data (a \
             response) or a window update as server time; \
             losses before the client's capture are not seen"
        }
    }
}
