//! Reading traces into the analyzer: the driver around the sans-IO parts.
//!
//! Each trace goes through the shared ingest of `vantage-trace` (reader,
//! decoder, streaming connection table). Two things the table does not
//! keep are collected on the side, index-aligned with each connection's
//! segment records: the IPv4 identification (to match packets between two
//! captures) and how the payload begins (to tell HTTP requests apart).
//!
//! With two captures, packets are read from whichever trace is behind in
//! time, so a connection finishes in both tables at about the same moment;
//! finished connections wait for their counterpart (matched on client,
//! server and the client's initial sequence number), so memory follows the
//! connections in flight. Connections only one capture saw are analysed
//! from that capture alone.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;

use vantage_core::Nanos;
use vantage_trace::{
    decode, ConnectionId, ConnectionTable, Endpoint, Observation, Segment, SkipReason, TableConfig,
    TimeOrder, TraceReader, DEFAULT_REORDER_WINDOW,
};

use crate::analysis::{Analyzer, InputSummary};
use crate::view::{CapturedConnection, PayloadStart, SegmentExtra};
use crate::{CpaError, Options, Side};

/// A packet in the time-order window, already decoded.
enum Decoded {
    /// A TCP segment (its payload dropped, its side-channel taken).
    Segment(Segment<'static>, SegmentExtra),
    /// Not analysed: why, and the packet's link type.
    Skipped(SkipReason, u16),
}

/// What one step of reading did.
enum Step {
    /// A packet went into the time-order window.
    Read,
    /// The earliest packet left the window.
    Released(Decoded),
    /// The trace has ended and the window is empty.
    End,
}

/// The reading half of a [`Source`]: file, decoder, time-order window.
struct Input {
    side: Side,
    reader: TraceReader,
    /// Packets put back in time order before the table sees them, decoded
    /// as they are read (the table needs no payload bytes, so none are
    /// copied into the window).
    order: TimeOrder<Decoded>,
    last_time: Nanos,
    input_done: bool,
    done: bool,
    packets: u64,
    cut_off: Option<String>,
}

impl Input {
    /// Reads one packet into the time-order window and, once it is full
    /// (or the trace has ended), releases the earliest.
    fn step(&mut self) -> Result<Step, CpaError> {
        if self.done {
            return Ok(Step::End);
        }
        if !self.input_done {
            match self.reader.next_packet() {
                Ok(Some(packet)) => {
                    self.packets += 1;
                    self.last_time = self.last_time.max(packet.timestamp);
                    let decoded = match decode(&packet) {
                        Ok(segment) => Decoded::Segment(
                            Segment {
                                payload: &[],
                                ..segment
                            },
                            SegmentExtra {
                                ip_id: segment.ip_id,
                                payload: if segment.payload_len > 0 {
                                    PayloadStart::classify(segment.payload)
                                } else {
                                    PayloadStart::Unknown
                                },
                            },
                        ),
                        Err(reason) => Decoded::Skipped(reason, packet.link_type.0),
                    };
                    self.order.push(packet.timestamp, decoded);
                    if !self.order.is_full() {
                        return Ok(Step::Read);
                    }
                }
                Ok(None) => self.input_done = true,
                Err(source) if source.is_cut_off() => {
                    // Every complete packet before the cut is analysed; the
                    // summary carries the warning.
                    self.cut_off = Some(source.to_string());
                    self.input_done = true;
                }
                Err(source) => {
                    return Err(CpaError::Trace {
                        side: self.side.name(),
                        source,
                    })
                }
            }
        }
        match self.order.pop() {
            Some((_, decoded)) => Ok(Step::Released(decoded)),
            None => {
                self.done = true;
                Ok(Step::End)
            }
        }
    }
}

/// The tracking half of a [`Source`]: connection table and side-channel.
struct Tracker {
    side: Side,
    table: ConnectionTable,
    /// Looked up once per segment: foldhash rather than SipHash.
    extras: foldhash::HashMap<ConnectionId, Vec<SegmentExtra>>,
    /// The counts this half keeps (segments, skips, connections).
    summary: InputSummary,
}

impl Tracker {
    /// Takes the packet by reference: the table reads the header in place
    /// (moving the ~200-byte header out of its batch was a tenth of this
    /// stage's time on the loss shape).
    fn apply(&mut self, decoded: &Decoded) {
        match decoded {
            Decoded::Segment(segment, extra) => {
                self.summary.tcp_segments += 1;
                if let Observation::Recorded { connection, .. } = self.table.observe(segment) {
                    self.extras.entry(connection).or_default().push(*extra);
                }
            }
            &Decoded::Skipped(reason, link_type) => {
                if reason == SkipReason::UnsupportedLinkType {
                    self.summary.unsupported_link_type.get_or_insert(link_type);
                }
                self.summary.skipped.add(reason)
            }
        }
    }

    /// The next finished connection.
    fn pop(&mut self) -> Option<CapturedConnection> {
        let connection = self.table.pop_finished()?;
        self.summary.connections += 1;
        let extras = self.extras.remove(&connection.id).unwrap_or_default();
        Some(CapturedConnection {
            side: self.side,
            connection,
            extras,
        })
    }
}

/// One trace being read.
pub(crate) struct Source {
    input: Input,
    tracker: Tracker,
}

impl Source {
    pub fn open(path: &Path, side: Side, config: TableConfig) -> Result<Source, CpaError> {
        let reader = TraceReader::open(path).map_err(|source| CpaError::Trace {
            side: side.name(),
            source,
        })?;
        Ok(Source {
            input: Input {
                side,
                reader,
                order: TimeOrder::new(DEFAULT_REORDER_WINDOW),
                last_time: Nanos::ZERO,
                input_done: false,
                done: false,
                packets: 0,
                cut_off: None,
            },
            tracker: Tracker {
                side,
                table: ConnectionTable::new(TableConfig {
                    record_segments: true,
                    ..config
                }),
                extras: foldhash::HashMap::default(),
                summary: InputSummary {
                    side: Some(side),
                    ..InputSummary::default()
                },
            },
        })
    }

    fn done(&self) -> bool {
        self.input.done
    }

    fn last_time(&self) -> Nanos {
        self.input.last_time
    }

    /// Reads one packet into the time-order window and, once it is full
    /// (or the trace has ended), hands the earliest packet to the table;
    /// false at the end of the trace.
    pub fn step(&mut self) -> Result<bool, CpaError> {
        if self.input.done {
            return Ok(false);
        }
        match self.input.step()? {
            Step::Read => Ok(true),
            Step::Released(decoded) => {
                self.tracker.apply(&decoded);
                Ok(true)
            }
            Step::End => {
                self.tracker.table.finish_all();
                Ok(false)
            }
        }
    }

    /// The next finished connection.
    pub fn pop(&mut self) -> Option<CapturedConnection> {
        self.tracker.pop()
    }

    pub fn summary(&self) -> InputSummary {
        let mut summary = self.tracker.summary.clone();
        let stats = self.tracker.table.stats();
        summary.packets = self.input.packets;
        summary.cut_off.clone_from(&self.input.cut_off);
        summary.peak_active_connections = stats.peak_active;
        summary.late_segments = stats.late_segments;
        summary.connections_evicted = stats.evicted;
        summary.reordering = self.input.order.stats();
        summary
    }

    /// A trace whose packets are all of a link type the decoder does not
    /// know gives no answer, rather than "0 transactions".
    fn check_link_type(&self) -> Result<(), CpaError> {
        let summary = &self.tracker.summary;
        match summary.unsupported_link_type {
            Some(link_type) if summary.tcp_segments == 0 => Err(CpaError::UnsupportedLinkType {
                side: self.input.side.name(),
                link_type,
                packets: summary.skipped.get(SkipReason::UnsupportedLinkType),
            }),
            _ => Ok(()),
        }
    }
}

/// Packets handed from the reading thread to the tracking one at a time,
/// and batches in flight at most: the reader waits beyond these, so
/// memory stays bounded (the connection table's cap plus 8 × 2,048 decoded
/// headers).
const PACKET_BATCH: usize = 2048;
const PACKET_BATCHES_IN_FLIGHT: usize = 8;

/// The rest of one trace in three stages, each on its own thread (two
/// cores are kept busy; no stage alone is half of the work): this thread
/// reads, decodes and puts packets in time order; a second keeps the
/// connection table; a third analyses each connection as it finishes. Every
/// stage sees its items in the order one thread would, so the output is
/// the same.
fn read_in_stages(
    source: &mut Source,
    analyse: impl FnMut(Vec<CapturedConnection>, &mut Analyzer) + Send,
    analyzer: &mut Analyzer,
) -> Result<(), CpaError> {
    let Source { input, tracker } = source;
    std::thread::scope(|scope| {
        let (sender, receiver) =
            std::sync::mpsc::sync_channel::<Vec<Decoded>>(PACKET_BATCHES_IN_FLIGHT);
        let worker = scope.spawn(move || {
            let track = |deliver: &mut dyn FnMut(CapturedConnection)| {
                for batch in receiver {
                    for decoded in &batch {
                        tracker.apply(decoded);
                        while let Some(captured) = tracker.pop() {
                            deliver(captured);
                        }
                    }
                }
                // The channel closes at the end of the trace (or on an
                // error, which is returned below).
                tracker.table.finish_all();
                while let Some(captured) = tracker.pop() {
                    deliver(captured);
                }
                Ok(())
            };
            pipeline(2, analyzer, analyse, track)
        });
        let mut read = || -> Result<(), CpaError> {
            let mut batch = Vec::with_capacity(PACKET_BATCH);
            loop {
                match input.step()? {
                    Step::Read => {}
                    Step::Released(decoded) => {
                        batch.push(decoded);
                        if batch.len() == PACKET_BATCH {
                            let full =
                                std::mem::replace(&mut batch, Vec::with_capacity(PACKET_BATCH));
                            // Fails only when the second thread panicked;
                            // the join below passes the panic on.
                            if sender.send(full).is_err() {
                                return Ok(());
                            }
                        }
                    }
                    Step::End => break,
                }
            }
            let _ = sender.send(batch);
            Ok(())
        };
        let result = read();
        drop(sender);
        match worker.join() {
            Ok(tracked) => result.and(tracked),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

/// Finished connections waiting for the analysis thread, at most: the
/// reader waits beyond this, so memory stays bounded by the connection
/// table's cap plus this many connections.
const PIPELINE_DEPTH: usize = 64;

/// Runs `read`, which hands each finished connection to its argument, and
/// `analyse` on them in the order they were handed over: on the same
/// thread one at a time, or with `threads` = 2 on a second one, fed
/// through a bounded channel, as many at a time as are waiting (when many
/// connections finish together, as at the end of a trace of long ones,
/// `analyse` can spread them over the cores).
fn pipeline<A>(
    threads: usize,
    analyzer: &mut Analyzer,
    mut analyse: A,
    read: impl FnOnce(&mut dyn FnMut(CapturedConnection)) -> Result<(), CpaError>,
) -> Result<(), CpaError>
where
    A: FnMut(Vec<CapturedConnection>, &mut Analyzer) + Send,
{
    if threads < 2 {
        return read(&mut |captured| analyse(vec![captured], analyzer));
    }
    std::thread::scope(|scope| {
        let (sender, receiver) = std::sync::mpsc::sync_channel(PIPELINE_DEPTH);
        let worker = scope.spawn(move || {
            while let Ok(first) = receiver.recv() {
                let mut waiting = vec![first];
                waiting.extend(receiver.try_iter().take(PIPELINE_DEPTH));
                analyse(waiting, analyzer);
            }
        });
        // A send fails only when the analysis thread panicked; the join
        // below passes the panic on.
        let result = read(&mut |captured| {
            let _ = sender.send(captured);
        });
        drop(sender);
        if let Err(panic) = worker.join() {
            std::panic::resume_unwind(panic);
        }
        result
    })
}

/// Analyses one trace taken at `side`: on one thread until
/// [`Options::parallel_after_packets`], then (with two threads) in stages
/// ([`read_in_stages`]).
pub(crate) fn single(
    path: &Path,
    side: Side,
    options: &Options,
    analyzer: &mut Analyzer,
) -> Result<InputSummary, CpaError> {
    let mut source = Source::open(path, side, options.table)?;
    let analyse = move |batch: Vec<CapturedConnection>, analyzer: &mut Analyzer| {
        let connections: Vec<_> = batch
            .iter()
            .map(|captured| match side {
                Side::Client => (Some(captured), None),
                Side::Server => (None, Some(captured)),
            })
            .collect();
        analyzer.on_connections(&connections);
    };
    let mut more = true;
    while more {
        if options.threads > 1 && source.input.packets >= options.parallel_after_packets {
            read_in_stages(&mut source, analyse, analyzer)?;
            break;
        }
        more = source.step()?;
        while let Some(captured) = source.pop() {
            analyse(vec![captured], analyzer);
        }
    }
    source.check_link_type()?;
    Ok(source.summary())
}

/// Identifies a connection across the two captures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct PairKey {
    client: Endpoint,
    server: Endpoint,
    client_isn: Option<u32>,
}

impl PairKey {
    fn of(captured: &CapturedConnection) -> PairKey {
        let connection = &captured.connection;
        PairKey {
            client: connection.initiator,
            server: connection.responder,
            client_isn: connection.from_initiator.isn,
        }
    }
}

/// Finished connections waiting for their counterpart, by side.
#[derive(Default)]
struct Pairing {
    waiting: [BTreeMap<PairKey, VecDeque<CapturedConnection>>; 2],
}

impl Pairing {
    fn offer(&mut self, captured: CapturedConnection, analyzer: &mut Analyzer) {
        let key = PairKey::of(&captured);
        let other = captured.side.other().index();
        if let Some(queue) = self.waiting[other].get_mut(&key) {
            if let Some(peer) = queue.pop_front() {
                if queue.is_empty() {
                    self.waiting[other].remove(&key);
                }
                analyze_pair(captured, peer, analyzer);
                return;
            }
        }
        self.waiting[captured.side.index()]
            .entry(key)
            .or_default()
            .push_back(captured);
    }

    /// At the end: pairs the rest by endpoints alone (one capture missed
    /// the SYN), in time order; analyses what is left from one capture.
    fn finish(self, analyzer: &mut Analyzer) {
        let [client_side, server_side] = self.waiting.map(|waiting| {
            let mut all: Vec<CapturedConnection> = waiting.into_values().flatten().collect();
            all.sort_by_key(|c| (c.connection.first_timestamp, c.connection.id));
            all
        });
        let mut servers: Vec<Option<CapturedConnection>> =
            server_side.into_iter().map(Some).collect();
        for client in client_side {
            let endpoints = |c: &CapturedConnection| {
                let (a, b) = (c.connection.initiator, c.connection.responder);
                (a.min(b), a.max(b))
            };
            let wanted = endpoints(&client);
            let found = servers
                .iter_mut()
                .find(|slot| slot.as_ref().is_some_and(|s| endpoints(s) == wanted))
                .and_then(Option::take);
            match found {
                Some(server) => analyze_pair(client, server, analyzer),
                None => analyzer.on_connection(Some(&client), None),
            }
        }
        for server in servers.into_iter().flatten() {
            analyzer.on_connection(None, Some(&server));
        }
    }
}

fn analyze_pair(a: CapturedConnection, b: CapturedConnection, analyzer: &mut Analyzer) {
    let (client, server) = if a.side == Side::Client {
        (a, b)
    } else {
        (b, a)
    };
    analyzer.on_connection(Some(&client), Some(&server));
}

/// Analyses a client-side and a server-side trace of the same
/// transactions.
pub(crate) fn dual(
    client_path: &Path,
    server_path: &Path,
    options: &Options,
    analyzer: &mut Analyzer,
) -> Result<[InputSummary; 2], CpaError> {
    let mut sources = [
        Source::open(client_path, Side::Client, options.table)?,
        Source::open(server_path, Side::Server, options.table)?,
    ];
    let mut pairing = Pairing::default();
    // Server times are compared after removing the given offset.
    let offset = options.clock_offset.unwrap_or(0);
    // Reads until both traces end, or until `stop_after` packets.
    let read = |sources: &mut [Source; 2],
                deliver: &mut dyn FnMut(CapturedConnection),
                stop_after: Option<u64>|
     -> Result<(), CpaError> {
        loop {
            let behind = match (sources[0].done(), sources[1].done()) {
                (true, true) => return Ok(()),
                (true, false) => 1,
                (false, true) => 0,
                (false, false) => {
                    let client_time = sources[0].last_time().0 as i128;
                    let server_time = sources[1].last_time().0 as i128 - i128::from(offset);
                    usize::from(server_time <= client_time)
                }
            };
            sources[behind].step()?;
            for source in sources.iter_mut() {
                while let Some(captured) = source.pop() {
                    deliver(captured);
                }
            }
            let packets = sources[0].input.packets + sources[1].input.packets;
            if stop_after.is_some_and(|limit| packets >= limit) {
                return Ok(());
            }
        }
    };
    let pairing_ref = &mut pairing;
    pipeline(
        1,
        analyzer,
        |batch, analyzer| {
            for captured in batch {
                pairing_ref.offer(captured, analyzer);
            }
        },
        |deliver| read(&mut sources, deliver, Some(options.parallel_after_packets)),
    )?;
    if !(sources[0].done() && sources[1].done()) {
        let pairing_ref = &mut pairing;
        pipeline(
            options.threads,
            analyzer,
            |batch, analyzer| {
                for captured in batch {
                    pairing_ref.offer(captured, analyzer);
                }
            },
            |deliver| read(&mut sources, deliver, None),
        )?;
    }
    pairing.finish(analyzer);
    for source in &sources {
        source.check_link_type()?;
    }
    Ok([sources[0].summary(), sources[1].summary()])
}

#[cfg(test)]
mod tests {
    use super::*;
    use vantage_trace::synth::trace_files;

    /// Every connection of a trace, in the order the table finishes them;
    /// `None` when the trace cannot be read whole.
    fn connections(path: &Path, side: Side) -> Option<Vec<CapturedConnection>> {
        let mut source = Source::open(path, side, TableConfig::default()).ok()?;
        let mut all = Vec::new();
        loop {
            let more = source.step().ok()?;
            while let Some(captured) = source.pop() {
                all.push(captured);
            }
            if !more {
                return Some(all);
            }
        }
    }

    /// What batching relies on: a view that does not rest on the
    /// input-wide delays is the same whatever they are; and some views do
    /// rest on them (connections without a delay sample of their own).
    #[test]
    fn only_views_resting_on_the_fallback_depend_on_it() {
        let mut files = trace_files("zeek");
        files.extend(trace_files("tcptrace"));
        let other = crate::view::Fallback {
            raw_one_way: [Some(3_000_000), Some(-1_000_000)],
            round_trip: Some(Nanos::from_millis(37)),
            clock_offset: None,
        };
        let mut depending = 0;
        for path in files {
            for side in [Side::Server, Side::Client] {
                for captured in connections(&path, side).unwrap_or_default() {
                    let both = [Some(&captured), Some(&captured)];
                    let single = match side {
                        Side::Client => [Some(&captured), None],
                        Side::Server => [None, Some(&captured)],
                    };
                    for [client, server] in [single, both] {
                        let build = |fallback| {
                            crate::view::build(client, server, fallback)
                                .map(|view| (format!("{view:?}"), view.rests_on_fallback()))
                        };
                        let (Some(plain), Some(given)) =
                            (build(&Default::default()), build(&other))
                        else {
                            continue;
                        };
                        assert_eq!(plain.1, given.1, "{}", path.display());
                        if plain.1 {
                            depending += usize::from(plain.0 != given.0);
                        } else {
                            assert!(plain.0 == given.0, "{} as {side:?}", path.display());
                        }
                    }
                }
            }
        }
        assert!(
            depending > 0 || trace_files("zeek").is_empty(),
            "no view rests on the fallback: the test shows nothing"
        );
    }

    /// Batches examined on the rayon pool give what one connection at a
    /// time gives, including connections placed with the delays of the
    /// ones before them in the same batch.
    #[test]
    fn connections_analysed_in_batches_give_what_one_at_a_time_gives() {
        let mut files = trace_files("zeek");
        files.extend(trace_files("tcptrace"));
        for path in files {
            for side in [Side::Server, Side::Client] {
                let Some(all) = connections(&path, side) else {
                    continue;
                };
                let pairs: Vec<_> = all
                    .iter()
                    .map(|captured| match side {
                        Side::Client => (Some(captured), None),
                        Side::Server => (None, Some(captured)),
                    })
                    .collect();
                let options = Options::default();
                let mut one_at_a_time = Analyzer::new(options.clone());
                for &(client, server) in &pairs {
                    one_at_a_time.on_connection(client, server);
                }
                let expected = one_at_a_time.finish();
                for size in [2, 3, pairs.len().max(2)] {
                    let mut batched = Analyzer::new(options.clone());
                    for batch in pairs.chunks(size) {
                        batched.on_connections(batch);
                    }
                    assert!(
                        batched.finish() == expected,
                        "{} as {side:?}, {size} at a time",
                        path.display()
                    );
                }
            }
        }
    }
}
