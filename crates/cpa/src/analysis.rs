//! The sans-IO analyzer: finished connections in (one or two captures of
//! each), profiled transactions out.
//!
//! Each connection is analysed as it is handed in — view, transactions,
//! Reno forward pass, backward pass — and only its transactions' critical
//! paths are kept. Propagation is "the minimum observed delay in each
//! direction over *all* experiments" (Section 3.4), so the profiles are
//! computed in [`Analyzer::finish`], once the whole input has been seen;
//! memory is the connections in flight plus a few nodes per transaction.

use std::collections::BTreeMap;
use std::net::IpAddr;

use rayon::prelude::*;
use serde::Serialize;
use vantage_core::Nanos;
use vantage_trace::{Connection, Endpoint, Opening, SkipCounts};

use crate::critical_path::{self, RawNode, RawPath};
use crate::graph::Graph;
use crate::profile::{self, PacketEvent, PathArc, Placement, Transaction, TransactionFlags};
use crate::transaction::{self, StaleResends};
use crate::view::{self, CapturedConnection, Fallback, Vantage};
use crate::{Options, Side};

/// Minimum delays of one client–server host pair, from Karn-valid samples.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct PairSamples {
    /// Two captures: minimum arrival minus departure across the clocks, by
    /// sender.
    raw_one_way: [Option<i64>; 2],
    /// One capture: minimum round-trip time.
    round_trip: Option<Nanos>,
}

fn keep_min<T: Ord + Copy>(slot: &mut Option<T>, value: Option<T>) {
    if let Some(value) = value {
        *slot = Some(slot.map_or(value, |current| current.min(value)));
    }
}

/// A transaction traced but not yet profiled.
struct Pending {
    raw: RawPath,
    connection: u64,
    index: usize,
    client: Endpoint,
    server: Endpoint,
    vantage: Vantage,
    request_bytes: u64,
    response_bytes: u64,
    flags: TransactionFlags,
    initial_window: [u32; 2],
    packets: Vec<RawNode>,
}

/// The clock offset between two captures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ClockOffset {
    /// Server clock minus client clock, in nanoseconds.
    pub server_minus_client_ns: i64,
    /// Estimated from the traces (else given).
    pub estimated: bool,
    /// Host pairs whose minimum delays both ways gave an estimate.
    pub pairs_used: usize,
}

/// Propagation per client–server host pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PathDelays {
    pub client: IpAddr,
    pub server: IpAddr,
    /// Minimum one-way delay client→server (two captures, offset removed).
    pub client_to_server: Option<Nanos>,
    /// Minimum one-way delay server→client.
    pub server_to_client: Option<Nanos>,
    /// Minimum round-trip time at the one captured endpoint.
    pub round_trip: Option<Nanos>,
}

/// Counts over one input file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct InputSummary {
    pub side: Option<Side>,
    pub packets: u64,
    pub tcp_segments: u64,
    pub skipped: SkipCounts,
    pub connections: u64,
    pub peak_active_connections: usize,
    pub late_segments: u64,
    /// Connections the table finished early to stay within its cap.
    pub connections_evicted: u64,
    /// Packets put back in time order, and packets too far out of order
    /// for the window (then clamped).
    pub reordering: vantage_trace::ReorderStats,
    /// The first link type the decoder did not know, if any.
    pub unsupported_link_type: Option<u16>,
    /// The trace stops mid-record: what and at which byte offset (the
    /// complete packets before it were analysed).
    pub cut_off: Option<String>,
}

/// Connections that never delivered a response, by how they failed. They
/// give no transaction (a failure is not a fast success, nor client time)
/// and are counted here instead.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Failures {
    /// The server answered the SYN with a RST (nothing listened).
    pub refused: u64,
    /// The SYNs were never answered (the client gave up, or the capture
    /// ended first).
    pub abandoned: u64,
    /// Accepted, then reset by the server before any response byte (an
    /// overloaded server shedding connections).
    pub reset_by_server: u64,
    /// Reset by the client before any response byte (accepted or not).
    pub aborted_by_client: u64,
}

impl Failures {
    pub fn total(&self) -> u64 {
        self.refused + self.abandoned + self.reset_by_server + self.aborted_by_client
    }

    /// The failure a connection shows, if any: only connections whose SYN
    /// was captured are judged (a connection seen mid-stream may have
    /// delivered its response before the capture began).
    pub fn classify(connection: &Connection) -> Option<Failure> {
        let client = &connection.from_initiator;
        let server = &connection.from_responder;
        if connection.opening != Opening::Syn || client.syns == 0 {
            return None;
        }
        if server.syns == 0 {
            return Some(if server.rst {
                Failure::Refused
            } else if client.rst {
                Failure::AbortedByClient
            } else {
                Failure::Abandoned
            });
        }
        if server.payload_bytes > 0 {
            return None;
        }
        if server.rst {
            Some(Failure::ResetByServer)
        } else if client.rst {
            Some(Failure::AbortedByClient)
        } else {
            None
        }
    }

    pub fn add(&mut self, failure: Failure) {
        match failure {
            Failure::Refused => self.refused += 1,
            Failure::Abandoned => self.abandoned += 1,
            Failure::ResetByServer => self.reset_by_server += 1,
            Failure::AbortedByClient => self.aborted_by_client += 1,
        }
    }
}

/// How one connection failed (see [`Failures`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Failure {
    Refused,
    Abandoned,
    ResetByServer,
    AbortedByClient,
}

/// Counts over the analysis.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct AnalysisStats {
    /// Connections seen in both captures, the server's only, the client's
    /// only.
    pub connections_both: u64,
    pub connections_server_only: u64,
    pub connections_client_only: u64,
    /// Connections that carried no data and did not fail (unused).
    pub connections_without_transactions: u64,
    /// Connections that failed before a response (no transaction).
    pub failures: Failures,
    pub transactions: u64,
    /// Transactions whose first or last event was not captured.
    pub transactions_untraceable: u64,
    /// Hidden time-outs and packets beyond the modelled window found by the
    /// Reno models (Sections 3.3 and 3.5), over all connections.
    pub hidden_timeouts: u64,
    pub beyond_window: u64,
    /// Payload segments re-sending bytes already acknowledged, which start
    /// no transaction and add to none (see [`StaleResends`]).
    pub stale_resends: StaleResends,
    /// Capture artefacts over all connections and captures.
    pub artefacts: vantage_trace::Artefacts,
    /// One per input file (filled by [`crate::analyze`]).
    pub inputs: Vec<InputSummary>,
}

/// The result of an analysis.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Analysis {
    /// In order of start time, numbered from 1.
    pub transactions: Vec<Transaction>,
    /// With two captures: the offset used.
    pub clock_offset: Option<ClockOffset>,
    pub paths: Vec<PathDelays>,
    /// The approximations the profiles rest on, one per vantage present.
    pub approximations: Vec<&'static str>,
    pub stats: AnalysisStats,
}

impl Analysis {
    /// Transaction `number` (from 1).
    pub fn transaction(&self, number: usize) -> Option<&Transaction> {
        number
            .checked_sub(1)
            .and_then(|index| self.transactions.get(index))
    }
}

/// Connections in, an [`Analysis`] out; reads no file and no clock.
pub struct Analyzer {
    options: Options,
    pending: Vec<Pending>,
    pairs: BTreeMap<(IpAddr, IpAddr), PairSamples>,
    fallback: Fallback,
    stats: AnalysisStats,
    both_seen: bool,
}

impl Analyzer {
    pub fn new(options: Options) -> Analyzer {
        let fallback = Fallback {
            clock_offset: options.clock_offset,
            ..Fallback::default()
        };
        Analyzer {
            options,
            pending: Vec::new(),
            pairs: BTreeMap::new(),
            fallback,
            stats: AnalysisStats::default(),
            both_seen: false,
        }
    }

    /// Takes in one finished connection, from the client's capture, the
    /// server's, or both (the same connection).
    pub fn on_connection(
        &mut self,
        client: Option<&CapturedConnection>,
        server: Option<&CapturedConnection>,
    ) {
        let examined = examine(client, server, &self.fallback, &self.options);
        self.take_in(examined);
    }

    /// Takes in several finished connections (client capture, server
    /// capture): the same as [`Analyzer::on_connection`] on each in turn,
    /// with the connections examined on the rayon pool. A connection whose
    /// view rests on the input-wide delays of the connections before it is
    /// examined again when those changed within the batch, so the result
    /// does not depend on how the input was batched.
    pub fn on_connections(
        &mut self,
        connections: &[(Option<&CapturedConnection>, Option<&CapturedConnection>)],
    ) {
        if connections.len() < 2 {
            for &(client, server) in connections {
                self.on_connection(client, server);
            }
            return;
        }
        let before = self.fallback;
        let options = &self.options;
        let examined: Vec<Examined> = connections
            .par_iter()
            .map(|&(client, server)| examine(client, server, &before, options))
            .collect();
        for (&(client, server), examined) in connections.iter().zip(examined) {
            let examined = if examined.rests_on_fallback && self.fallback != before {
                examine(client, server, &self.fallback, &self.options)
            } else {
                examined
            };
            self.take_in(examined);
        }
    }

    /// Adds one examined connection to the counts, the input-wide delays
    /// and the transactions to profile.
    fn take_in(&mut self, examined: Examined) {
        let Examined {
            failure, outcome, ..
        } = examined;
        let Some(seen) = outcome else {
            if let Some(failure) = failure {
                self.stats.failures.add(failure);
            }
            return;
        };
        match seen.vantage {
            Vantage::Both => {
                self.stats.connections_both += 1;
                self.both_seen = true;
            }
            Vantage::Server => self.stats.connections_server_only += 1,
            Vantage::Client => self.stats.connections_client_only += 1,
        }
        let pair = self.pairs.entry(seen.hosts).or_default();
        for sender in [Side::Client, Side::Server] {
            keep_min(
                &mut pair.raw_one_way[sender.index()],
                seen.samples.raw_one_way[sender.index()],
            );
            keep_min(
                &mut self.fallback.raw_one_way[sender.index()],
                seen.samples.raw_one_way[sender.index()],
            );
        }
        keep_min(&mut pair.round_trip, seen.samples.round_trip);
        keep_min(&mut self.fallback.round_trip, seen.samples.round_trip);

        self.stats.artefacts.add(&seen.artefacts);
        self.stats.stale_resends.add(&seen.stale_resends);
        if let Some(failure) = failure {
            self.stats.failures.add(failure);
            return;
        }
        match seen.transactions {
            None => self.stats.connections_without_transactions += 1,
            Some(traced) => {
                self.stats.hidden_timeouts += traced.hidden_timeouts;
                self.stats.beyond_window += traced.beyond_window;
                self.stats.transactions_untraceable += traced.untraceable;
                self.pending.extend(traced.pending);
            }
        }
    }

    /// Profiles every transaction with the input-wide propagation and
    /// clock offset.
    pub fn finish(self) -> Analysis {
        let Analyzer {
            options,
            pending,
            pairs,
            mut stats,
            both_seen,
            ..
        } = self;
        let clock_offset = if !both_seen {
            None
        } else if let Some(given) = options.clock_offset {
            Some(ClockOffset {
                server_minus_client_ns: given,
                estimated: false,
                pairs_used: 0,
            })
        } else {
            let mut estimates: Vec<i64> = pairs
                .values()
                .filter_map(|p| match p.raw_one_way {
                    [Some(client), Some(server)] => Some((client - server) / 2),
                    _ => None,
                })
                .collect();
            estimates.sort_unstable();
            Some(ClockOffset {
                server_minus_client_ns: estimates
                    .get(estimates.len().saturating_sub(1) / 2)
                    .copied()
                    .unwrap_or(0),
                estimated: true,
                pairs_used: estimates.len(),
            })
        };
        let offset = clock_offset.map_or(0, |c| c.server_minus_client_ns);
        let delays: BTreeMap<(IpAddr, IpAddr), PathDelays> = pairs
            .iter()
            .map(|(&(client, server), samples)| {
                let one_way = |raw: Option<i64>, correction: i64| {
                    raw.map(|r| Nanos((r + correction).max(0) as u64))
                };
                (
                    (client, server),
                    PathDelays {
                        client,
                        server,
                        client_to_server: one_way(samples.raw_one_way[0], -offset),
                        server_to_client: one_way(samples.raw_one_way[1], offset),
                        round_trip: samples.round_trip,
                    },
                )
            })
            .collect();

        // Each transaction is profiled on its own (on the rayon pool with
        // two threads); the order is kept.
        let profile_one = |p: Pending| {
            let path_delays = delays.get(&(p.client.ip, p.server.ip)).copied();
            let placement = placement(p.vantage, offset, path_delays);
            let profiled = profile::profile(&p.raw, &placement);
            let mut flags = p.flags;
            flags.clamped_arcs = profiled.clamped;
            let verdict = profile::verdict(profiled.duration, &profiled.path);
            let packets = packet_events(&p.packets, &profiled.path, &placement);
            Transaction {
                number: 0,
                connection: p.connection,
                index_in_connection: p.index,
                client: p.client,
                server: p.server,
                vantage: p.vantage,
                start: profiled.start,
                duration: profiled.duration,
                request_bytes: p.request_bytes,
                response_bytes: p.response_bytes,
                profile: profiled.profile,
                phases: profiled.phases,
                critical_path_packets: profiled.packets,
                losses: profiled.losses,
                flags,
                initial_window: p.initial_window,
                propagation_used: placement.propagation,
                path: profiled.path,
                packets,
                verdict,
            }
        };
        let mut transactions: Vec<Transaction> = if options.threads > 1 {
            pending.into_par_iter().map(profile_one).collect()
        } else {
            pending.into_iter().map(profile_one).collect()
        };
        stats.transactions += transactions.len() as u64;
        let by_start = |a: &Transaction, b: &Transaction| {
            (
                a.start,
                a.client,
                a.server,
                a.connection,
                a.index_in_connection,
            )
                .cmp(&(
                    b.start,
                    b.client,
                    b.server,
                    b.connection,
                    b.index_in_connection,
                ))
        };
        // Both sorts are stable: the same order either way.
        if options.threads > 1 {
            transactions.par_sort_by(by_start);
        } else {
            transactions.sort_by(by_start);
        }
        for (i, t) in transactions.iter_mut().enumerate() {
            t.number = i + 1;
        }
        let mut vantages: Vec<Vantage> = transactions.iter().map(|t| t.vantage).collect();
        vantages.sort_unstable();
        vantages.dedup();
        Analysis {
            transactions,
            clock_offset,
            paths: delays.into_values().collect(),
            approximations: vantages.into_iter().map(profile::approximation).collect(),
            stats,
        }
    }
}

/// What one connection gives the analyzer, worked out from the
/// connection and the input-wide delays before it alone (see
/// [`Analyzer::on_connections`]).
struct Examined {
    failure: Option<Failure>,
    /// `None` when no capture has a segment of it.
    outcome: Option<Seen>,
    /// The view used the input-wide delays (the connection lacks samples of
    /// its own).
    rests_on_fallback: bool,
}

/// A connection with a view.
struct Seen {
    vantage: Vantage,
    hosts: (IpAddr, IpAddr),
    samples: view::DelaySamples,
    artefacts: vantage_trace::Artefacts,
    stale_resends: StaleResends,
    /// `None` when it carried no transaction (or failed).
    transactions: Option<Traced>,
}

/// A connection's transactions, traced.
struct Traced {
    hidden_timeouts: u64,
    beyond_window: u64,
    untraceable: u64,
    pending: Vec<Pending>,
}

/// View, transactions, Reno forward pass and backward pass of one
/// connection; reads nothing but its arguments.
fn examine(
    client: Option<&CapturedConnection>,
    server: Option<&CapturedConnection>,
    fallback: &Fallback,
    options: &Options,
) -> Examined {
    let failure = server
        .or(client)
        .and_then(|captured| Failures::classify(&captured.connection));
    let Some(view) = view::build(client, server, fallback) else {
        return Examined {
            failure,
            outcome: None,
            rests_on_fallback: false,
        };
    };
    let rests_on_fallback = view.rests_on_fallback();
    let mut seen = Seen {
        vantage: view.vantage,
        hosts: (view.client.ip, view.server.ip),
        samples: view.samples,
        artefacts: view.artefacts,
        stale_resends: StaleResends::default(),
        transactions: None,
    };
    let examined = |seen| Examined {
        failure,
        outcome: Some(seen),
        rests_on_fallback,
    };
    if failure.is_some() {
        return examined(seen);
    }
    let (spans, stale_resends) = transaction::split(&view);
    seen.stale_resends = stale_resends;
    if spans.is_empty() {
        return examined(seen);
    }
    let graph = Graph::build(&view, &spans, options);
    let mut model_flags = vec![(0u32, 0u32); spans.len()];
    for index in 0..view.records.len() as u32 {
        if let (Some(outcome), Some(slot)) = (
            graph.outcome(index),
            model_flags.get_mut(graph.owner(index)),
        ) {
            slot.0 += u32::from(outcome.hidden_timeout);
            slot.1 += u32::from(outcome.beyond_window);
        }
    }
    let mut events = if options.keep_packets {
        critical_path::events_by_transaction(&graph, spans.len())
    } else {
        Vec::new()
    };
    let mut traced = Traced {
        hidden_timeouts: graph.counts.hidden_timeouts,
        beyond_window: graph.counts.beyond_window,
        untraceable: 0,
        pending: Vec::with_capacity(spans.len()),
    };
    for span in &spans {
        let last = span.index + 1 == spans.len();
        let Some(raw) = critical_path::trace(&graph, span, options.teardown, options.min_rto, last)
        else {
            traced.untraceable += 1;
            continue;
        };
        let mut flags = TransactionFlags {
            pipelined: span.pipelined,
            incomplete: raw.incomplete,
            teardown: raw.teardown,
            unexplained_arcs: raw.unexplained as u32,
            ..TransactionFlags::default()
        };
        (flags.hidden_timeouts, flags.beyond_window) = model_flags[span.index];
        let packets = events
            .get_mut(span.index)
            .map(std::mem::take)
            .unwrap_or_default();
        traced.pending.push(Pending {
            raw,
            connection: view.id.0,
            index: span.index,
            client: view.client,
            server: view.server,
            vantage: view.vantage,
            request_bytes: span.request_bytes(),
            response_bytes: span.response_bytes(),
            flags,
            initial_window: graph.initial_window,
            packets,
        });
    }
    seen.transactions = Some(traced);
    examined(seen)
}

/// Where a transaction's unobserved events go and which clock it is
/// reported on.
fn placement(vantage: Vantage, offset: i64, delays: Option<PathDelays>) -> Placement {
    let delays = delays.unwrap_or(PathDelays {
        client: IpAddr::from([0, 0, 0, 0]),
        server: IpAddr::from([0, 0, 0, 0]),
        client_to_server: None,
        server_to_client: None,
        round_trip: None,
    });
    let halves = |round_trip: Option<Nanos>| {
        round_trip.map(|rtt| (Nanos(rtt.0 / 2), Nanos(rtt.0 - rtt.0 / 2)))
    };
    let one_way_sum = match (delays.client_to_server, delays.server_to_client) {
        (Some(a), Some(b)) => Some(a + b),
        _ => None,
    };
    match vantage {
        Vantage::Both => {
            let from_round_trip = halves(delays.round_trip);
            let client_to_server = delays
                .client_to_server
                .or(delays.server_to_client)
                .or(from_round_trip.map(|h| h.0))
                .unwrap_or(Nanos::ZERO);
            let server_to_client = delays
                .server_to_client
                .or(delays.client_to_server)
                .or(from_round_trip.map(|h| h.1))
                .unwrap_or(Nanos::ZERO);
            Placement {
                reference: Side::Client,
                offset,
                propagation: [client_to_server, server_to_client],
            }
        }
        Vantage::Server | Vantage::Client => {
            let (short, long) =
                halves(delays.round_trip.or(one_way_sum)).unwrap_or((Nanos::ZERO, Nanos::ZERO));
            // The captured side's outgoing half takes the odd nanosecond,
            // as when the events were first placed.
            let (reference, propagation) = if vantage == Vantage::Server {
                (Side::Server, [short, long])
            } else {
                (Side::Client, [long, short])
            };
            Placement {
                reference,
                offset: 0,
                propagation,
            }
        }
    }
}

fn packet_events(nodes: &[RawNode], path: &[PathArc], placement: &Placement) -> Vec<PacketEvent> {
    nodes
        .iter()
        .map(|node| {
            let time = profile::node_time(node, placement);
            let on_critical_path = path.iter().any(|arc| {
                [arc.from, arc.to].iter().any(|n| {
                    n.side == node.side && n.departure == node.departure && n.packet == node.label
                })
            });
            PacketEvent {
                side: node.side,
                departure: node.departure,
                time: Nanos(time.max(0) as u64),
                packet: node.label,
                on_critical_path,
            }
        })
        .collect()
}

/// Sum check used by tests and debug builds: categories and phases both
/// add up to the duration.
pub fn conserves(transaction: &Transaction) -> bool {
    let phases = &transaction.phases;
    let by_phase = phases.setup + phases.request + phases.response + phases.teardown;
    transaction.profile.total() == transaction.duration && by_phase == transaction.duration
}
