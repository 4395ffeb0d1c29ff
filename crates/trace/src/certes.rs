//! A server-side capture as Certes input: [`handshake`](crate::handshake)
//! reads one observation per connection, and
//! `vantage_core::certes::stream` adds each, as soon as its connection
//! finishes, to the interval counters the server would have counted
//! (Section 4) and to the exact client-perceived times (Eq. 1 with the real
//! retry count), per class (Section 3.2.4) when asked — the same rules as
//! `vantage_core::certes::observed`.
//!
//! Memory is bounded by the connection table's cap, the connections whose
//! outcome waits for the capture's clock (see `stream`; at most
//! [`MAX_HELD_CONNECTIONS`]), the intervals not
//! yet handed over, and — when no listener is named — the connections to
//! responders not yet seen answering a SYN, at most
//! [`MAX_UNCONFIRMED_CONNECTIONS`]. It does not grow with the number of
//! SYNs in the capture.
//!
//! Read as a stream ([`CaptureStream::take_closed`]), an interval is
//! handed over once no connection can still land in it: the capture's
//! clock, the first packet of every connection still open and the first
//! SYN of every connection still waiting are all past its end; without a
//! listener named, a connection to a responder not yet seen answering holds
//! its intervals for up to the table's idle timeout (name the listener with
//! `--server` for prompt intervals). Counts that arrive for an interval
//! already handed over — a responder that answers its first SYN only after
//! that, or timestamps that go backwards across an interval — are left out
//! of the stream and counted (`CaptureNotes::late_counts`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use vantage_core::certes::input::{
    check_class_intervals, CaptureNotes, ClassInput, EstimateInput, TooManyClassIntervals,
    EMPTY_INTERVAL,
};
use vantage_core::certes::learn::SynLearner;
use vantage_core::certes::observed::{
    BucketStats, ConnectionObservation, ExactConfig, ExactFigures, ExactInterval, IntervalGrid,
    ObservedError, MAX_INTERVALS,
};
use vantage_core::certes::stream::{BucketedInterval, ClassBucketer};
use vantage_core::certes::summary::ClassInterval;
use vantage_core::certes::CertesConfig;
use vantage_core::Nanos;

use crate::decode::Endpoint;
use crate::error::TraceError;
use crate::file::{Packet, TraceReader};
use crate::handshake::{ClassBy, Handshake, HandshakeCollector, HandshakeConfig, ServerFilter};

/// Most connections kept while their responder has not been seen
/// answering a SYN (no `--server` given: a responder becomes a listener
/// when it answers one). Beyond it, such connections are counted, not
/// kept; if their responder answers later they are reported as
/// `connections_not_kept`.
pub const MAX_UNCONFIRMED_CONNECTIONS: usize = 100_000;

/// Most connections held, over all classes, while the capture's clock has
/// not yet decided their outcome (a client that may still give up, an
/// accepted connection that may still be abandoned). Beyond it the one
/// decided soonest is decided at once, as if the capture ran on to that
/// instant, and counted (`CaptureNotes::decided_early`). A flood puts
/// every SYN of one frustration timeout in that window.
pub const MAX_HELD_CONNECTIONS: usize = 200_000;

/// Most responders whose connections beyond [`MAX_UNCONFIRMED_CONNECTIONS`]
/// are counted one by one (further ones count as other servers').
const MAX_UNCONFIRMED_RESPONDERS: usize = 100_000;

/// Why a capture gives no Certes input.
#[derive(Debug, thiserror::Error)]
pub enum CaptureInputError {
    #[error("cannot read capture {path}")]
    Read {
        path: String,
        #[source]
        source: TraceError,
    },
    /// No SYN to a selected listener; the message says what was seen.
    #[error("{0}")]
    NoConnection(String),
    /// More classes × intervals than one run takes.
    #[error("{path}: {source}")]
    TooLarge {
        path: String,
        source: TooManyClassIntervals,
    },
    /// The interval grid or the exact figures' configuration.
    #[error(transparent)]
    Setup(ObservedError),
    /// Bucketing or the exact figures, naming the capture.
    #[error("{path}")]
    Observed {
        path: String,
        #[source]
        source: ObservedError,
    },
}

/// Reads a server-side capture (`-` for standard input) into per-class
/// intervals of `model.interval` aligned to the UNIX epoch, with the exact
/// figures beside the counters. `server` selects the listener (default:
/// every listener that answered a SYN); `by` splits into classes.
pub fn capture_input(
    path: &Path,
    server: Option<ServerFilter>,
    by: Option<ClassBy>,
    model: &CertesConfig,
) -> Result<EstimateInput, CaptureInputError> {
    let mut capture = CaptureStream::open(path, server, by, model)?;
    while capture.read_packet()? {}
    capture.into_input()
}

/// Adds one class's bucketing counts into `total`.
fn add_bucket_stats(total: &mut BucketStats, one: &BucketStats) {
    total.connections += one.connections;
    total.dropped += one.dropped;
    total.accepted += one.accepted;
    total.completed += one.completed;
    total.syns_after_answer += one.syns_after_answer;
    total.refused += one.refused;
    total.accepted_without_end += one.accepted_without_end;
    total.rtt_missing += one.rtt_missing;
    total.reset += one.reset;
    total.aborted += one.aborted;
}

/// One interval handed over by [`CaptureStream::take_closed`].
#[derive(Clone, Debug)]
pub struct ClosedInterval {
    /// Index from the first interval (the one holding the first packet).
    pub index: usize,
    /// Every class known so far, in order, with what it counted in the
    /// interval (`None`: nothing).
    pub classes: Vec<(String, Option<BucketedInterval>)>,
}

/// The exact figures of a class that counted nothing in an interval.
static EMPTY_EXACT: ExactInterval = ExactInterval {
    completed: 0,
    gave_up: 0,
    total_time: Nanos::ZERO,
    conn_fail_total: Nanos::ZERO,
    completed_by_retries: Vec::new(),
};

impl ClosedInterval {
    /// Every class's counters and exact figures as
    /// `RunningEstimate::interval` takes them (empty ones for a class
    /// that counted nothing; with `RunningEstimate::rows_from_first_count`
    /// a class gives no row before it counted anything).
    pub fn class_intervals(&self) -> Vec<ClassInterval<'_>> {
        self.classes
            .iter()
            .map(|(class, taken)| ClassInterval {
                class,
                counters: taken.as_ref().map_or(&EMPTY_INTERVAL, |t| &t.counters),
                exact: Some(taken.as_ref().map_or(&EMPTY_EXACT, |t| &t.exact)),
            })
            .collect()
    }
}

/// What a streamed capture gives at its end, beside its intervals.
#[derive(Clone, Debug)]
pub struct CaptureTotals {
    pub description: String,
    /// Interval 0's start, ns since the UNIX epoch.
    pub origin_unix: Nanos,
    /// Intervals from the first packet's through the last packet's.
    pub intervals: usize,
    /// Per class, the exact figures' totals (no connections, no intervals).
    pub classes: BTreeMap<String, ExactFigures>,
    pub notes: CaptureNotes,
}

/// A capture read packet by packet (see the module docs).
pub struct CaptureStream {
    name: String,
    /// `None` for a live source, fed by [`push_packet`](Self::push_packet).
    reader: Option<TraceReader>,
    collector: HandshakeCollector,
    /// The finished connections being routed, kept between packets for
    /// its capacity ([`HandshakeCollector::swap_finished`]).
    routing: Vec<Handshake>,
    server: Option<ServerFilter>,
    by: Option<ClassBy>,
    interval: Nanos,
    exact_config: ExactConfig,
    listeners: BTreeSet<Endpoint>,
    unconfirmed: BTreeMap<Endpoint, Vec<ConnectionObservation>>,
    unconfirmed_len: usize,
    /// First SYNs of the unconfirmed connections (multiset).
    unconfirmed_first_syns: BTreeMap<Nanos, u32>,
    /// How long an unconfirmed connection holds its intervals open.
    unconfirmed_hold: Nanos,
    not_kept: BTreeMap<Endpoint, u64>,
    classes: BTreeMap<String, ClassBucketer>,
    selected: u64,
    handshakes: u64,
    /// The clock's interval when the waiting connections were last
    /// decided.
    clock_interval: Option<u64>,
    /// The clock entered a new interval since [`take_closed`](Self::take_closed).
    crossed: bool,
    /// Next interval to hand over, by index from the clock's origin.
    next_to_close: Option<u64>,
    late_counts: u64,
    most_retained: usize,
    /// At least the observations the classes hold (see
    /// [`MAX_HELD_CONNECTIONS`]).
    held_at_most: usize,
    /// Live source: at most this many classes; later ones go to
    /// [`OTHER_CLASS`].
    max_classes: Option<usize>,
    /// Several listeners named (live source): a connection to any is
    /// selected.
    named: Vec<ServerFilter>,
    /// Learning the clients ([`learn_clients`](Self::learn_clients)).
    learning: Option<Learning>,
}

/// Per class, a learner fed each selected connection's SYNs and outcome.
struct Learning {
    fresh: SynLearner,
    classes: BTreeMap<String, SynLearner>,
    /// Connections the server refused (RST): neither accepted nor given up.
    refused: u64,
}

/// The class of a live stream's connections beyond its class cap
/// ([`CaptureStream::set_class_cap`]).
pub const OTHER_CLASS: &str = "other";

impl CaptureStream {
    /// Opens a capture (`-`: standard input); see [`capture_input`].
    pub fn open(
        path: &Path,
        server: Option<ServerFilter>,
        by: Option<ClassBy>,
        model: &CertesConfig,
    ) -> Result<CaptureStream, CaptureInputError> {
        let name = path.display().to_string();
        let reader = TraceReader::open(path).map_err(|source| CaptureInputError::Read {
            path: name.clone(),
            source,
        })?;
        CaptureStream::from_reader(name, reader, server, by, model)
    }

    /// A stream fed packet by packet by a live source named `name` (an
    /// interface ring): [`push_packet`](Self::push_packet) and
    /// [`advance_clock`](Self::advance_clock) instead of
    /// [`read_packet`](Self::read_packet).
    /// `listeners` selects the connections (any one matching; none given:
    /// every responder that answered a SYN); `max_connections` caps the
    /// connection table (`TableConfig::max_connections`).
    pub fn live(
        name: String,
        listeners: &[ServerFilter],
        by: Option<ClassBy>,
        model: &CertesConfig,
        max_connections: usize,
    ) -> Result<CaptureStream, CaptureInputError> {
        let server = match listeners {
            [one] => Some(*one),
            _ => None,
        };
        let mut stream = CaptureStream::new(name, None, server, by, model)?;
        if listeners.len() > 1 {
            stream.named = listeners.to_vec();
        }
        let config = HandshakeConfig {
            server,
            table: crate::connection::TableConfig {
                max_connections: max_connections.max(1),
                half_open_limit: Some(model.latest_give_up()),
                ..HandshakeConfig::default().table
            },
        };
        stream.collector = HandshakeCollector::new(config);
        Ok(stream)
    }

    /// Like [`open`](Self::open), with the connection table's settings of
    /// `config` (its listener selects the connections).
    pub fn open_with(
        path: &Path,
        config: &HandshakeConfig,
        by: Option<ClassBy>,
        model: &CertesConfig,
    ) -> Result<CaptureStream, CaptureInputError> {
        let mut stream = CaptureStream::open(path, config.server, by, model)?;
        stream.collector = HandshakeCollector::new(*config);
        stream.unconfirmed_hold = config.table.idle_timeout;
        Ok(stream)
    }

    /// Like [`open`](Self::open), for an open reader named `name`.
    pub fn from_reader(
        name: String,
        reader: TraceReader,
        server: Option<ServerFilter>,
        by: Option<ClassBy>,
        model: &CertesConfig,
    ) -> Result<CaptureStream, CaptureInputError> {
        CaptureStream::new(name, Some(reader), server, by, model)
    }

    fn new(
        name: String,
        reader: Option<TraceReader>,
        server: Option<ServerFilter>,
        by: Option<ClassBy>,
        model: &CertesConfig,
    ) -> Result<CaptureStream, CaptureInputError> {
        let exact_config = ExactConfig::from_model(model).map_err(CaptureInputError::Setup)?;
        IntervalGrid::new(Nanos::ZERO, model.interval).map_err(CaptureInputError::Setup)?;
        let handshake_config = HandshakeConfig {
            server,
            ..HandshakeConfig::default()
        };
        Ok(CaptureStream {
            name,
            reader,
            collector: HandshakeCollector::new(handshake_config),
            routing: Vec::new(),
            server,
            by,
            interval: model.interval,
            exact_config,
            listeners: BTreeSet::new(),
            unconfirmed: BTreeMap::new(),
            unconfirmed_len: 0,
            unconfirmed_first_syns: BTreeMap::new(),
            unconfirmed_hold: handshake_config.table.idle_timeout,
            not_kept: BTreeMap::new(),
            classes: BTreeMap::new(),
            selected: 0,
            handshakes: 0,
            clock_interval: None,
            crossed: false,
            next_to_close: None,
            late_counts: 0,
            most_retained: 0,
            held_at_most: 0,
            max_classes: None,
            named: Vec::new(),
            learning: None,
        })
    }

    /// Reads the next packet and adds the connections it finished; false
    /// at the end of the capture.
    /// A live stream has no file: false at once.
    pub fn read_packet(&mut self) -> Result<bool, CaptureInputError> {
        let Some(reader) = self.reader.as_mut() else {
            return Ok(false);
        };
        let more =
            self.collector
                .read_packet(reader)
                .map_err(|source| CaptureInputError::Read {
                    path: self.name.clone(),
                    source,
                })?;
        self.took_input()?;
        Ok(more)
    }

    /// Takes one packet from any source (the entry
    /// [`read_packet`](Self::read_packet) uses for a file) and adds the
    /// connections it finished.
    pub fn push_packet(&mut self, packet: &Packet<'_>) -> Result<(), CaptureInputError> {
        self.collector.push_packet(packet);
        self.took_input()
    }

    /// A live source's clock reached `now` with no packet (a poll timed
    /// out): idle connections finish and intervals can close on time.
    pub fn advance_clock(&mut self, now: Nanos) -> Result<(), CaptureInputError> {
        self.collector.advance_clock(now);
        self.took_input()
    }

    /// After a packet or a clock step: routes the finished connections
    /// and moves the classes' clocks.
    fn took_input(&mut self) -> Result<(), CaptureInputError> {
        // Most packets finish no connection.
        if self.collector.has_finished() {
            let mut finished = std::mem::take(&mut self.routing);
            self.collector.swap_finished(&mut finished);
            for handshake in finished.drain(..) {
                self.route(handshake)?;
            }
            self.routing = finished;
        }
        if let Some(clock) = self.collector.last_timestamp() {
            let index = clock.0 / self.interval.0;
            if self.clock_interval != Some(index) {
                self.clock_interval = Some(index);
                self.crossed = true;
                for bucketer in self.classes.values_mut() {
                    bucketer.advance(clock);
                }
            }
        }
        self.most_retained = self.most_retained.max(self.retained());
        Ok(())
    }

    /// Connection observations held now: those waiting for the clock to
    /// decide their outcome and those to responders not yet seen
    /// answering. (The connection table holds the open connections, at
    /// most `TableConfig::max_connections`.)
    pub fn retained(&self) -> usize {
        self.unconfirmed_len + self.classes.values().map(|c| c.retained()).sum::<usize>()
    }

    /// The most [`retained`](Self::retained) after any packet.
    pub fn most_retained(&self) -> usize {
        self.most_retained
    }

    /// Caps the classes of a stream split `by` a source prefix: beyond
    /// `cap` classes, connections of a new class count in [`OTHER_CLASS`]
    /// (a live source sees any number of clients).
    pub fn set_class_cap(&mut self, cap: usize) {
        self.max_classes = Some(cap.max(1));
    }

    /// From now on, every selected connection's SYN arrivals and outcome
    /// (accepted, or given up: [`Handshake::learner_attempt`]) feed a copy
    /// of `fresh` per class, as the simulator feeds it its server's SYNs.
    /// Without a listener named, connections finished before their
    /// responder was seen answering are not learned from.
    pub fn learn_clients(&mut self, fresh: SynLearner) {
        // A live stream decides unanswered connections at the latest
        // give-up; the learner needs every SYN a client of its profiles may
        // send.
        if let Some(limit) = self.collector.half_open_limit() {
            self.collector
                .set_half_open_limit(Some(limit.max(fresh.latest_give_up())));
        }
        self.learning = Some(Learning {
            fresh,
            classes: BTreeMap::new(),
            refused: 0,
        });
    }

    /// Per class, the learner's state (none unless
    /// [`learn_clients`](Self::learn_clients)).
    pub fn learners(&self) -> impl Iterator<Item = (&String, &SynLearner)> {
        self.learning.iter().flat_map(|l| l.classes.iter())
    }

    /// Selected connections not given to a learner: the server refused
    /// them.
    pub fn refused_not_learned(&self) -> u64 {
        self.learning.as_ref().map_or(0, |l| l.refused)
    }

    /// A live stream never ends: its intervals are handed over and
    /// forgotten, so the caps on a whole run's span do not apply.
    fn is_live(&self) -> bool {
        self.reader.is_none()
    }

    /// The first packet's time (or the first clock step's): interval 0
    /// holds it.
    pub fn first_timestamp(&self) -> Option<Nanos> {
        self.collector.first_timestamp()
    }

    /// What the stream counted beside the connections it took, so far.
    pub fn notes_so_far(&self) -> CaptureNotes {
        self.notes()
    }

    /// Per class, the exact figures' running totals (failures by kind,
    /// give-ups, unresolved).
    pub fn class_figures(&self) -> impl Iterator<Item = (&String, &ExactFigures)> {
        self.classes.iter().map(|(class, b)| (class, b.figures()))
    }

    /// The packet decoder's and connection table's counts so far.
    pub fn handshake_stats(&self) -> &crate::handshake::HandshakeStats {
        self.collector.stats()
    }

    /// Connections open in the connection table now.
    pub fn open_connections(&self) -> usize {
        self.collector.open_connections()
    }

    fn route(&mut self, handshake: Handshake) -> Result<(), CaptureInputError> {
        self.handshakes += 1;
        let answered = !handshake.synacks.is_empty();
        let any_listener = self.server.is_none() && self.named.is_empty();
        if answered && self.listeners.insert(handshake.server) && any_listener {
            if let Some(waiting) = self.unconfirmed.remove(&handshake.server) {
                self.unconfirmed_len -= waiting.len();
                for observation in waiting {
                    let first = observation.syn_arrivals.first().copied();
                    if let Some(n) = first.and_then(|f| self.unconfirmed_first_syns.get_mut(&f)) {
                        *n -= 1;
                        if *n == 0 {
                            if let Some(first) = first {
                                self.unconfirmed_first_syns.remove(&first);
                            }
                        }
                    }
                    self.add(observation)?;
                }
            }
        }
        let server = handshake.server;
        let selected = match &self.server {
            Some(filter) => filter.matches(&server),
            None if !self.named.is_empty() => self.named.iter().any(|f| f.matches(&server)),
            None => self.listeners.contains(&server),
        };
        let class = self.by.map(|by| {
            let class = by.class_of(&handshake);
            if self
                .max_classes
                .is_some_and(|cap| self.classes.len() >= cap && !self.classes.contains_key(&class))
            {
                OTHER_CLASS.to_string()
            } else {
                class
            }
        });
        if selected {
            if let Some(learning) = &mut self.learning {
                match handshake.learner_attempt() {
                    Some((syns, outcome)) => learning
                        .classes
                        .entry(class.clone().unwrap_or_default())
                        .or_insert_with(|| learning.fresh.clone())
                        .observe(syns, outcome),
                    None => learning.refused += 1,
                }
            }
        }
        let mut observation = handshake.into_observation();
        observation.class = class;
        if selected {
            self.add(observation)?;
        } else if any_listener {
            if self.unconfirmed_len < MAX_UNCONFIRMED_CONNECTIONS {
                if let Some(first) = observation.syn_arrivals.first() {
                    *self.unconfirmed_first_syns.entry(*first).or_default() += 1;
                }
                self.unconfirmed
                    .entry(server)
                    .or_default()
                    .push(observation);
                self.unconfirmed_len += 1;
            } else if let Some(n) = self.not_kept.get_mut(&server) {
                *n += 1;
            } else if self.not_kept.len() < MAX_UNCONFIRMED_RESPONDERS {
                self.not_kept.insert(server, 1);
            }
        }
        Ok(())
    }

    fn add(&mut self, observation: ConnectionObservation) -> Result<(), CaptureInputError> {
        self.selected += 1;
        // A known class (nearly every connection): two lookups, no copy
        // of its name.
        let class = observation.class.as_deref().unwrap_or_default();
        if !self.classes.contains_key(class) {
            if !self.is_live() {
                // Every class is a row per interval: refuse before memory
                // grows (a span beyond MAX_INTERVALS is refused at the end,
                // by name).
                let mut intervals = self.intervals_so_far();
                if intervals as u64 > MAX_INTERVALS {
                    intervals = 1;
                }
                check_class_intervals(self.classes.len() + 1, intervals, &self.class_key())
                    .map_err(|source| CaptureInputError::TooLarge {
                        path: self.name.clone(),
                        source,
                    })?;
            }
            let bucketer = ClassBucketer::new(self.interval, self.exact_config.clone())
                .map_err(CaptureInputError::Setup)?;
            self.classes.insert(class.to_string(), bucketer);
        }
        if let Some(bucketer) = self.classes.get_mut(class) {
            bucketer
                .add(observation)
                .map_err(|source| CaptureInputError::Observed {
                    path: self.name.clone(),
                    source,
                })?;
            // An upper bound: an observation adds at most one waiting one.
            self.held_at_most += 1;
        }
        if self.held_at_most > MAX_HELD_CONNECTIONS {
            self.held_at_most = self.classes.values().map(|c| c.retained()).sum();
            while self.held_at_most > MAX_HELD_CONNECTIONS {
                let fullest = self.classes.values_mut().max_by_key(|c| c.retained());
                if !fullest.is_some_and(|c| c.decide_soonest_early()) {
                    break;
                }
                self.held_at_most -= 1;
            }
        }
        Ok(())
    }

    fn class_key(&self) -> String {
        match self.by {
            Some(ClassBy::Listener) => "--by listener".to_string(),
            Some(ClassBy::SourcePrefix(bits)) => format!("--by source-prefix/{bits}"),
            None => "none".to_string(),
        }
    }

    /// Intervals from the first packet's through the latest packet's.
    fn intervals_so_far(&self) -> usize {
        match (
            self.collector.first_timestamp(),
            self.collector.last_timestamp(),
        ) {
            (Some(first), Some(last)) => {
                let first = first.0 / self.interval.0;
                (last.0 / self.interval.0).saturating_sub(first) as usize + 1
            }
            _ => 1,
        }
    }

    fn first_index(&self) -> u64 {
        self.collector.first_timestamp().unwrap_or(Nanos::ZERO).0 / self.interval.0
    }

    /// The intervals no connection can still land in, not handed over yet
    /// (every interval from the first, empty ones included), in order.
    pub fn take_closed(&mut self) -> Result<Vec<ClosedInterval>, CaptureInputError> {
        if !std::mem::take(&mut self.crossed) {
            return Ok(Vec::new());
        }
        let Some(clock) = self.collector.last_timestamp() else {
            return Ok(Vec::new());
        };
        let mut watermark = clock;
        if let Some(open) = self.collector.oldest_open() {
            watermark = watermark.min(open);
        }
        for bucketer in self.classes.values() {
            if let Some(first) = bucketer.earliest_waiting() {
                watermark = watermark.min(first);
            }
        }
        // A connection to a responder not yet seen answering holds its
        // intervals for the table's idle timeout: the responder may still
        // answer another connection and become a listener.
        let held_since = Nanos(clock.0.saturating_sub(self.unconfirmed_hold.0));
        if let Some((first, _)) = self.unconfirmed_first_syns.range(held_since..).next() {
            watermark = watermark.min(*first);
        }
        let before = watermark.0 / self.interval.0;
        let next = *self.next_to_close.get_or_insert(self.first_index());
        if before <= next {
            return Ok(Vec::new());
        }
        // A gap of years would be handed over interval by interval (a
        // live clock does not jump).
        if !self.is_live() {
            self.checked_grid(clock)?;
        }
        Ok(self.close_through(before - 1))
    }

    /// Hands over every interval from the next through `last` (index from
    /// the clock's origin).
    fn close_through(&mut self, last: u64) -> Vec<ClosedInterval> {
        let first_index = self.first_index();
        let next = *self.next_to_close.get_or_insert(first_index);
        let mut taken: BTreeMap<u64, Vec<(String, BucketedInterval)>> = BTreeMap::new();
        for (class, bucketer) in &mut self.classes {
            for interval in bucketer.take_through(last) {
                if interval.index < next {
                    let c = &interval.counters;
                    let x = &interval.exact;
                    self.late_counts +=
                        c.dropped + c.accepted + c.refused + c.completed + x.gave_up;
                    continue;
                }
                taken
                    .entry(interval.index)
                    .or_default()
                    .push((class.clone(), interval));
            }
        }
        // Without classes, the one class is there from the first interval.
        let mut names: Vec<String> = self.classes.keys().cloned().collect();
        if self.by.is_none() && names.is_empty() {
            names.push(String::new());
        }
        let mut closed = Vec::new();
        for index in next..=last {
            let mut present = taken
                .remove(&index)
                .unwrap_or_default()
                .into_iter()
                .peekable();
            let classes = names
                .iter()
                .map(|name| {
                    let here = present.next_if(|(class, _)| class == name).map(|(_, b)| b);
                    (name.clone(), here)
                })
                .collect();
            closed.push(ClosedInterval {
                index: (index - first_index) as usize,
                classes,
            });
        }
        self.next_to_close = Some(last + 1);
        closed
    }

    /// Decides every connection still in flight, as at the end of the
    /// capture, and adds it (and feeds it to the learners): before a last
    /// [`learners`](Self::learners) read when the input stops, so that the
    /// attempts still unanswered are learned from as abandoned.
    pub fn decide_in_flight(&mut self) -> Result<(), CaptureInputError> {
        self.collector.finish_streaming();
        for handshake in self.collector.take_finished() {
            self.route(handshake)?;
        }
        Ok(())
    }

    /// Ends the capture: every connection is added and decided.
    fn finish(&mut self) -> Result<Nanos, CaptureInputError> {
        self.decide_in_flight()?;
        let capture_end = self.collector.last_timestamp().unwrap_or(Nanos::ZERO);
        for bucketer in self.classes.values_mut() {
            bucketer.finish(capture_end);
        }
        if self.selected == 0 {
            return Err(self.no_connection());
        }
        Ok(capture_end)
    }

    fn no_connection(&self) -> CaptureInputError {
        let stats = self.collector.stats();
        let listeners: Vec<String> = self.listeners.iter().map(|l| l.to_string()).collect();
        let target = match &self.server {
            Some(filter) => format!("to {filter}"),
            None => "to a listener that answered a SYN".to_string(),
        };
        let attempts = stats.connections - stats.without_syn;
        let seen = if attempts == 0 {
            "no SYN captured".to_string()
        } else {
            format!("{attempts} connections opened by a SYN, none {target}")
        };
        CaptureInputError::NoConnection(format!(
            "{}: no connection attempt {target} ({seen}; {} packets, {} connections; listeners seen: {}){}",
            self.name,
            stats.packets,
            stats.connections,
            if listeners.is_empty() {
                "none".to_string()
            } else {
                listeners.join(", ")
            },
            if self.server.is_none() {
                "; if every SYN to your listener was dropped or refused, name it with --server ADDR:PORT"
            } else {
                ""
            }
        ))
    }

    /// The grid and its number of intervals through the capture's end,
    /// checked against the caps.
    fn checked_grid(&self, capture_end: Nanos) -> Result<(IntervalGrid, usize), CaptureInputError> {
        let grid = IntervalGrid::aligned(
            self.collector.first_timestamp().unwrap_or(Nanos::ZERO),
            self.interval,
        )
        .map_err(CaptureInputError::Setup)?;
        let intervals = grid
            .checked_count_through(capture_end)
            .map_err(CaptureInputError::Setup)?;
        check_class_intervals(self.classes.len(), intervals, &self.class_key()).map_err(
            |source| CaptureInputError::TooLarge {
                path: self.name.clone(),
                source,
            },
        )?;
        Ok((grid, intervals))
    }

    fn notes(&self) -> CaptureNotes {
        let stats = self.collector.stats();
        let not_kept: u64 = self
            .not_kept
            .iter()
            .filter(|(server, _)| self.listeners.contains(server))
            .map(|(_, n)| n)
            .sum();
        let mut notes = CaptureNotes {
            packets: stats.packets,
            connections: self.selected,
            listeners: self.listeners.iter().map(|l| l.to_string()).collect(),
            connections_without_syn: stats.without_syn,
            connections_to_other_servers: self.handshakes - self.selected - not_kept,
            connections_evicted: stats.evicted,
            connections_evicted_half_open: stats.evicted_half_open,
            connections_not_kept: not_kept,
            late_counts: self.late_counts,
            decided_early: self.classes.values().map(|c| c.decided_early()).sum(),
            cut_off: stats.cut_off.clone(),
            ..CaptureNotes::default()
        };
        for bucketer in self.classes.values() {
            notes.abandoned += bucketer.abandoned();
            notes.syns_after_answer += bucketer.stats().syns_after_answer;
            notes.rtt_missing += bucketer.stats().rtt_missing;
        }
        notes
    }

    /// Reads nothing more: the whole capture as one estimate input (every
    /// interval not handed over; read this way, none was).
    pub fn into_input(self) -> Result<EstimateInput, CaptureInputError> {
        self.into_input_and_stats().map(|(input, _)| input)
    }

    /// Like [`into_input`](Self::into_input), with the bucketing counts of
    /// every class added up.
    pub fn into_input_and_stats(
        mut self,
    ) -> Result<(EstimateInput, BucketStats), CaptureInputError> {
        let capture_end = self.finish()?;
        let (grid, intervals) = self.checked_grid(capture_end)?;
        let notes = self.notes();
        let mut stats = BucketStats::default();
        for bucketer in self.classes.values() {
            add_bucket_stats(&mut stats, bucketer.stats());
        }
        let first_index = grid.start.0 / grid.interval.0;
        let mut classes = Vec::new();
        for (class, bucketer) in &mut self.classes {
            let mut figures = ExactFigures::empty(grid, intervals);
            figures.add_totals(bucketer.figures());
            let mut counters = Vec::new();
            for taken in bucketer.take_through(u64::MAX) {
                let index = (taken.index - first_index) as usize;
                if let Some(slot) = figures.intervals.get_mut(index) {
                    *slot = taken.exact;
                }
                if taken.counters != Default::default() {
                    counters.push((index, taken.counters));
                }
            }
            classes.push(ClassInput {
                class: class.clone(),
                counters,
                exact: Some(figures),
            });
        }
        let input = EstimateInput {
            description: self.name.clone(),
            t0_s: 0.0,
            origin_unix: Some(grid.start),
            intervals,
            classes,
            capture_notes: Some(notes),
        };
        Ok((input, stats))
    }

    /// Reads nothing more: hands over the intervals still open (through
    /// the capture's last packet) and returns the totals.
    pub fn finish_stream(
        mut self,
    ) -> Result<(Vec<ClosedInterval>, CaptureTotals), CaptureInputError> {
        let capture_end = self.finish()?;
        let (grid, intervals) = self.checked_grid(capture_end)?;
        let first_index = grid.start.0 / grid.interval.0;
        let last = first_index + intervals as u64 - 1;
        let closed = if self.next_to_close.is_some_and(|next| next > last) {
            Vec::new()
        } else {
            self.close_through(last)
        };
        let notes = self.notes();
        let classes = self
            .classes
            .iter()
            .map(|(class, bucketer)| {
                let mut figures = ExactFigures::empty(grid, 0);
                figures.add_totals(bucketer.figures());
                (class.clone(), figures)
            })
            .collect();
        Ok((
            closed,
            CaptureTotals {
                description: self.name.clone(),
                origin_unix: grid.start,
                intervals,
                classes,
                notes,
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::{syn_options, Pcap, Record, Tcp, ACK, FIN, PSH, SYN};
    use vantage_core::tcp::ClientMix;

    const ORIGIN_NS: u64 = 1_700_000_000_000_000_000;

    /// The server's SYN-ACK at `t` + 0.1 ms, then the handshake's ACK, a
    /// 100-byte response and both FINs, 0.1 ms apart.
    fn push_served(
        records: &mut Vec<Record>,
        t: u64,
        client: (&'static str, u16),
        server: (&'static str, u16),
        isn: u32,
    ) {
        for (dt, tcp) in [
            (
                100_000,
                Tcp::new(server, client, 5000, isn + 1, SYN | ACK).options(syn_options(1460, 7, 1)),
            ),
            (200_000, Tcp::new(client, server, isn + 1, 5001, ACK)),
            (
                300_000,
                Tcp::new(server, client, 5001, isn + 1, PSH | ACK).payload(100),
            ),
            (400_000, Tcp::new(server, client, 5101, isn + 1, FIN | ACK)),
            (500_000, Tcp::new(client, server, isn + 1, 5102, FIN | ACK)),
        ] {
            records.push(Record::new(t + dt, tcp.ethernet()));
        }
    }

    /// Twenty attempts 100 ms apart: every fourth has its first SYN
    /// dropped and answered on the retry 1 s later; all are served.
    fn capture() -> Vec<u8> {
        let pcap = Pcap {
            nanosecond: true,
            ..Pcap::ethernet()
        };
        let server = ("10.0.0.2", 80);
        let mut records = Vec::new();
        for i in 0..20u64 {
            let client = ("10.1.0.1", 2000 + i as u16);
            let isn = 7000 + i as u32;
            let first = ORIGIN_NS + i * 100_000_000;
            let syn = Tcp::new(client, server, isn, 0, SYN).options(syn_options(1460, 7, 1));
            records.push(Record::new(first, syn.ethernet()));
            let t = if i % 4 == 0 {
                records.push(Record::new(first + 1_000_000_000, syn.ethernet()));
                first + 1_000_000_000
            } else {
                first
            };
            push_served(&mut records, t, client, server, isn);
        }
        records.sort_by_key(|r| r.timestamp_ns);
        pcap.file(&records)
    }

    fn model() -> CertesConfig {
        CertesConfig::new(
            Nanos::from_millis(250),
            ClientMix::builtin("linux-6.5").unwrap(),
            Nanos::from_secs(21),
        )
    }

    fn reader() -> TraceReader {
        TraceReader::from_reader("synthetic", std::io::Cursor::new(capture())).unwrap()
    }

    /// Packets pushed one by one from outside give the same intervals and
    /// totals as the file read by the stream itself.
    #[test]
    fn pushed_packets_give_what_the_file_gives() {
        let server = Some(":80".parse().unwrap());
        let mut from_file =
            CaptureStream::from_reader("synthetic".into(), reader(), server, None, &model())
                .unwrap();
        let mut file_closed = Vec::new();
        while from_file.read_packet().unwrap() {
            file_closed.extend(from_file.take_closed().unwrap());
        }
        let (rest, file_totals) = from_file.finish_stream().unwrap();
        file_closed.extend(rest);

        let mut live = CaptureStream::live(
            "synthetic".into(),
            &[":80".parse().unwrap()],
            None,
            &model(),
            1000,
        )
        .unwrap();
        assert!(!live.read_packet().unwrap());
        let mut source = reader();
        let mut live_closed = Vec::new();
        while let Some(packet) = source.next_packet().unwrap() {
            live.push_packet(&packet).unwrap();
            live_closed.extend(live.take_closed().unwrap());
        }
        let (rest, live_totals) = live.finish_stream().unwrap();
        live_closed.extend(rest);

        assert_eq!(format!("{file_closed:?}"), format!("{live_closed:?}"));
        assert_eq!(format!("{file_totals:?}"), format!("{live_totals:?}"));
        let dropped: u64 = live_closed
            .iter()
            .flat_map(|c| &c.classes)
            .filter_map(|(_, b)| b.as_ref())
            .map(|b| b.counters.dropped)
            .sum();
        assert_eq!(dropped, 5);
        assert_eq!(live_totals.notes.connections, 20);
    }

    /// With no packet, the clock still closes intervals once it passes
    /// them (a live source's poll timeout).
    #[test]
    fn the_clock_closes_intervals_without_packets() {
        let mut live = CaptureStream::live(
            "synthetic".into(),
            &[":80".parse().unwrap()],
            None,
            &model(),
            1000,
        )
        .unwrap();
        let mut source = reader();
        while let Some(packet) = source.next_packet().unwrap() {
            live.push_packet(&packet).unwrap();
        }
        let before: usize = live.take_closed().unwrap().len();
        // Ten seconds later, nothing captured: every interval through the
        // last packet's is closed.
        let last = ORIGIN_NS + 19 * 100_000_000 + 1_000_000;
        live.advance_clock(Nanos(last + 10_000_000_000)).unwrap();
        let closed = live.take_closed().unwrap();
        assert!(!closed.is_empty());
        let completed: u64 = closed
            .iter()
            .flat_map(|c| &c.classes)
            .filter_map(|(_, b)| b.as_ref())
            .map(|b| b.counters.completed)
            .sum();
        assert!(before + closed.len() >= 40, "{before} + {}", closed.len());
        assert!(completed > 0);
        // An earlier clock changes nothing.
        live.advance_clock(Nanos(ORIGIN_NS)).unwrap();
        assert!(live.take_closed().unwrap().is_empty());
    }

    /// A client whose SYNs are never answered (Linux ≥ 6.5 SYNs at 0, 1,
    /// 2, 3, 4, 5, 7, 11, 19 s, then it gives up at 21 s) holds the
    /// intervals its SYNs fell in only until its first SYN + the model's
    /// latest give-up (21 s), not a quiet of 21 s after its last SYN (40 s)
    /// nor the table's idle timeout (300 s): a live stream's intervals lag
    /// a give-up by at most that.
    #[test]
    fn a_client_that_gave_up_holds_intervals_until_its_first_syn_plus_the_give_up() {
        let server = ("10.0.0.2", 80);
        let client = ("10.1.0.9", 4000);
        let syn = Tcp::new(client, server, 9000, 0, SYN).options(syn_options(1460, 7, 1));
        let mut live = CaptureStream::live(
            "synthetic".into(),
            &[":80".parse().unwrap()],
            None,
            &model(),
            1000,
        )
        .unwrap();
        let sends_s = [0u64, 1, 2, 3, 4, 5, 7, 11, 19];
        let mut records: Vec<Record> = sends_s
            .iter()
            .map(|s| Record::new(ORIGIN_NS + s * 1_000_000_000, syn.ethernet()))
            .collect();
        // A served connection at the start, so the listener answers.
        push_served(&mut records, ORIGIN_NS, ("10.1.0.8", 4001), server, 100);
        let first =
            Tcp::new(("10.1.0.8", 4001), server, 100, 0, SYN).options(syn_options(1460, 7, 1));
        records.push(Record::new(ORIGIN_NS, first.ethernet()));
        records.sort_by_key(|r| r.timestamp_ns);
        let pcap = Pcap {
            nanosecond: true,
            ..Pcap::ethernet()
        };
        let mut source =
            TraceReader::from_reader("synthetic", std::io::Cursor::new(pcap.file(&records)))
                .unwrap();
        while let Some(packet) = source.next_packet().unwrap() {
            live.push_packet(&packet).unwrap();
        }
        let mut closed = live.take_closed().unwrap();
        // Before the give-up, the interval of the first SYN stays open.
        live.advance_clock(Nanos(ORIGIN_NS + 20_900_000_000))
            .unwrap();
        closed.extend(live.take_closed().unwrap());
        assert!(closed.is_empty(), "{} intervals closed", closed.len());
        // 21.5 s after the first SYN: decided, and every interval through
        // 21.25 s handed over (the clock is at 21.5 s).
        live.advance_clock(Nanos(ORIGIN_NS + 21_500_000_000))
            .unwrap();
        closed.extend(live.take_closed().unwrap());
        let dropped: u64 = closed
            .iter()
            .flat_map(|c| &c.classes)
            .filter_map(|(_, b)| b.as_ref())
            .map(|b| b.counters.dropped)
            .sum();
        assert_eq!(
            closed.len(),
            21 * 4 + 2,
            "intervals closed 21.5 s after the first SYN"
        );
        assert_eq!(
            dropped,
            sends_s.len() as u64,
            "the SYNs of the client that gave up"
        );
    }

    /// Clients of known schedules — three Linux 3.7 (SYNs at 0, 1, 3, 7,
    /// 15 s) for each Windows 9x (0, 3, 9, 21 s) — whose SYNs the server
    /// drops: accepted on their second, third or fourth SYN, or giving up
    /// after their fourth. Pushed as packets into a live stream learning
    /// its clients, the shares come back from the SYN gaps.
    #[test]
    fn a_live_stream_learns_its_clients_schedules() {
        let server = ("10.0.0.2", 80);
        let linux = [0u64, 1_000, 3_000, 7_000];
        let windows = [0u64, 3_000, 9_000, 21_000];
        let mut records = Vec::new();
        for i in 0..400u64 {
            let client = (
                if i % 2 == 0 { "10.1.0.1" } else { "10.1.0.3" },
                1000 + i as u16,
            );
            let isn = 9000 + i as u32;
            let start = ORIGIN_NS + i * 250_000_000;
            let points = if i % 4 == 3 { &windows } else { &linux };
            // Accepted on SYN 2, 3 or 4; every fourth attempt of each kind
            // is abandoned after its fourth SYN.
            let (syns, answered) = match (i / 4) % 4 {
                0 => (2, true),
                1 => (3, true),
                2 => (4, true),
                _ => (4, false),
            };
            let syn = Tcp::new(client, server, isn, 0, SYN).options(syn_options(1460, 7, 1));
            for ms in &points[..syns] {
                records.push(Record::new(start + ms * 1_000_000, syn.ethernet()));
            }
            if answered {
                let t = start + points[syns - 1] * 1_000_000;
                push_served(&mut records, t, client, server, isn);
            }
        }
        records.sort_by_key(|r| r.timestamp_ns);
        let last = records.last().map_or(0, |r| r.timestamp_ns);
        let pcap = Pcap {
            nanosecond: true,
            ..Pcap::ethernet()
        };
        let mut source =
            TraceReader::from_reader("synthetic", std::io::Cursor::new(pcap.file(&records)))
                .unwrap();
        let mut live = CaptureStream::live(
            "synthetic".into(),
            &[":80".parse().unwrap()],
            Some(ClassBy::Listener),
            &model(),
            10_000,
        )
        .unwrap();
        live.learn_clients(SynLearner::with_builtin_profiles().unwrap());
        while let Some(packet) = source.next_packet().unwrap() {
            live.push_packet(&packet).unwrap();
        }
        // Past the connection table's idle timeout: the abandoned attempts
        // finish too.
        live.advance_clock(Nanos(last + 400_000_000_000)).unwrap();
        let learners: Vec<_> = live.learners().collect();
        assert_eq!(learners.len(), 1, "one class: the listener");
        let (class, learner) = learners[0];
        assert_eq!(learner.counts().attempts, 400);
        assert_eq!(learner.counts().classified, 400);
        let learned = learner
            .learn(vantage_core::certes::learn::GiveUpPlacement::Midpoint)
            .unwrap();
        let share = |first_gap_s: u64| -> f64 {
            learned
                .clients
                .entries()
                .iter()
                .filter(|(p, _)| p.send_offset(1) == Nanos::from_secs(first_gap_s))
                .map(|(_, w)| w)
                .sum()
        };
        let shares: Vec<String> = learned
            .clients
            .entries()
            .iter()
            .map(|(p, w)| format!("{} {w:.3}", p.name))
            .collect();
        eprintln!("learned shares of {class}: {}", shares.join(", "));
        assert!((share(1) - 0.75).abs() < 0.02, "{learned:?}");
        assert!((share(3) - 0.25).abs() < 0.02, "{learned:?}");
        assert!(learned
            .clients
            .entries()
            .iter()
            .any(|(p, w)| p.name == "linux-3.7" && (w - 0.75).abs() < 0.02));
        // Nobody gave up before the fourth SYN; those who did, after it:
        // Linux in (7, 15] s, Windows in (21, 45] s (the cells are the
        // innermost intervals of both schedules' points).
        let mass = |after: u64, by: u64| -> f64 {
            learned
                .give_ups
                .iter()
                .filter(|c| {
                    c.after >= Nanos::from_secs(after)
                        && c.by.is_some_and(|b| b <= Nanos::from_secs(by))
                })
                .map(|c| c.weight)
                .sum()
        };
        assert!(mass(0, 7) < 1e-6, "{learned:?}");
        assert!(mass(7, 15) > 0.1, "{learned:?}");
        assert!(mass(21, 45) > 0.05, "{learned:?}");
    }

    /// Several listeners named: a connection to any of them counts, and
    /// one to another address on the same port does not.
    #[test]
    fn a_live_stream_selects_any_named_listener() {
        let run = |listeners: &[&str]| {
            let listeners: Vec<ServerFilter> =
                listeners.iter().map(|l| l.parse().unwrap()).collect();
            let mut live =
                CaptureStream::live("synthetic".into(), &listeners, None, &model(), 1000).unwrap();
            let mut source = reader();
            while let Some(packet) = source.next_packet().unwrap() {
                live.push_packet(&packet).unwrap();
            }
            live.finish_stream()
                .map(|(_, totals)| totals.notes.connections)
        };
        assert_eq!(run(&[":81", "10.0.0.2:80"]).unwrap(), 20);
        assert!(matches!(
            run(&[":81", "10.0.0.9:80"]),
            Err(CaptureInputError::NoConnection(_))
        ));
    }
}
