//! The capture thread: packets from the ring into
//! `vantage_trace::certes::CaptureStream` (the connection table and
//! interval logic `certes estimate --trace` runs), each closed interval
//! through `vantage_core::certes::summary::RunningEstimate` (the estimator
//! `certes estimate --jsonl` runs), then into the metrics and the JSON
//! Lines output, with the kernel counters of the same interval beside.
//!
//! The clock: a packet's kernel timestamp, or — when the ring stays empty
//! for a poll — the wall clock less [`clock_lag`] (a packet waits in a
//! block not yet handed over for up to the block timeout; a clock ahead of
//! it would close its interval before it came).

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use vantage_core::certes::learn::{AttemptUses, GiveUpPlacement, LearnedClients, SynLearner};
use vantage_core::certes::summary::{ClassInterval, RunningEstimate};
use vantage_core::certes::Certes;
use vantage_core::certes::{CertesConfig, IntervalCounters};
use vantage_core::Nanos;
use vantage_sys::packet_ring::PacketRing;
use vantage_sys::proc_net::{self, LISTEN_DROPS, LISTEN_OVERFLOWS, PASSIVE_OPENS};
use vantage_trace::certes::{CaptureStream, ClosedInterval};
use vantage_trace::{LinkType, Packet};

use super::config::WatchConfig;
use super::gate_input::{GateEstimate, GateInput, GateRecord};
use super::metrics::WatchMetrics;
use super::{Outputs, WatchError};

/// Longest wait for a packet before the clock moves on.
const POLL: Duration = Duration::from_millis(100);
/// Most packets taken from the ring between looks at the clock, the
/// kernel counters and the closed intervals.
const BATCH: u64 = 256;
/// `[gate]`: how often the gate's log is looked at.
const GATE_POLL: Duration = Duration::from_millis(50);
/// How often the ring's statistics, the notes and the gauges are read.
const HOUSEKEEPING: Duration = Duration::from_secs(1);
/// Kernel readings kept for intervals not yet closed.
const MAX_KERNEL_INTERVALS: usize = 4096;
/// With `learn`: intervals' counters kept, over all classes, to run a new
/// model over before it takes over (see [`ClassModel`]).
pub const MAX_REPLAY_COUNTERS: usize = 262_144;
/// With `learn`: most intervals one class keeps.
pub const MAX_REPLAY_INTERVALS: usize = 2048;

/// How far the clock stays behind the wall clock with no packet.
pub fn clock_lag(block_timeout_ms: u32) -> Nanos {
    Nanos::from_millis(2 * u64::from(block_timeout_ms) + 100)
}

fn wall_clock() -> Nanos {
    Nanos(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
    )
}

/// The kernel counters over one interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct KernelDelta {
    pub listen_drops: u64,
    pub listen_overflows: u64,
    pub passive_opens: u64,
}

/// Readings of `/proc/thread-self/net` at the wall clock's interval
/// boundaries, as deltas by interval index.
struct KernelReadings {
    interval: Nanos,
    last: Option<(u64, proc_net::Counters)>,
    deltas: BTreeMap<u64, KernelDelta>,
    failed: bool,
}

impl KernelReadings {
    fn tick(&mut self, now: Nanos, log: &dyn Fn(String)) {
        let index = now.0 / self.interval.0;
        if self.last.as_ref().is_some_and(|(i, _)| *i == index) {
            return;
        }
        let counters = match proc_net::read_thread_namespace_counters() {
            Ok(c) => {
                self.failed = false;
                c
            }
            Err(e) => {
                if !self.failed {
                    log(format!("kernel counters not read: {e}"));
                }
                self.failed = true;
                return;
            }
        };
        if let Some((_, before)) = &self.last {
            let delta = |name: &str| {
                counters
                    .get(name)
                    .copied()
                    .unwrap_or(0)
                    .saturating_sub(before.get(name).copied().unwrap_or(0))
            };
            // Readings more than an interval apart (a stalled thread) are
            // put on the latest interval they span.
            self.deltas.insert(
                index - 1,
                KernelDelta {
                    listen_drops: delta(LISTEN_DROPS),
                    listen_overflows: delta(LISTEN_OVERFLOWS),
                    passive_opens: delta(PASSIVE_OPENS),
                },
            );
            while self.deltas.len() > MAX_KERNEL_INTERVALS {
                self.deltas.pop_first();
            }
        }
        self.last = Some((index, counters));
    }
}

/// What a stopped capture thread did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CaptureReport {
    pub packets: u64,
    pub intervals: u64,
    pub ring_drops: u64,
}

/// A running capture thread.
pub struct Pipeline {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<CaptureReport, WatchError>>>,
}

impl Pipeline {
    /// Opens the ring here (so that an error is the caller's), then starts
    /// the thread.
    pub fn start(
        config: &WatchConfig,
        metrics: Arc<WatchMetrics>,
        outputs: Arc<Mutex<Outputs>>,
    ) -> Result<Pipeline, WatchError> {
        let ring = PacketRing::open(config.interface.as_deref(), &config.ports(), config.ring)?;
        let fresh = Certes::new(config.model.clone()).map_err(WatchError::Model)?;
        let name = format!(
            "live capture on {}",
            config.interface.as_deref().unwrap_or("every interface")
        );
        let mut stream = CaptureStream::live(
            name,
            &config.listeners,
            config.classes.map(|c| c.by),
            &config.model,
            config.max_connections,
        )?;
        if let Some(classes) = config.classes {
            stream.set_class_cap(classes.max);
        }
        if config.learn {
            stream.learn_clients(SynLearner::with_builtin_profiles().map_err(WatchError::Learn)?);
        }
        let gate = config.gate.as_ref().map(|g| {
            (
                GateInput::new(g, config.model.interval),
                GateEstimate::new(&fresh, config.frustration_timeout),
            )
        });
        let stop = Arc::new(AtomicBool::new(false));
        let state = CaptureState {
            gate,
            gate_polled: None,
            ring,
            stream,
            models: Models::new(config, fresh),
            interval: config.model.interval,
            lag: clock_lag(config.ring.block_timeout_ms),
            metrics,
            outputs,
            kernel: KernelReadings {
                interval: config.model.interval,
                last: None,
                deltas: BTreeMap::new(),
                failed: false,
            },
            report: CaptureReport::default(),
            ring_seen: (0, 0, 0),
        };
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("certes-capture".into())
            .spawn(move || state.run(&flag))
            .map_err(WatchError::Thread)?;
        Ok(Pipeline {
            stop,
            thread: Some(thread),
        })
    }

    /// Whether the thread ended (an error, or a panic).
    pub fn finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Stops the thread and returns what it did.
    pub fn stop(mut self) -> Result<CaptureReport, WatchError> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take() {
            Some(thread) => thread.join().map_err(|_| WatchError::Panicked)?,
            None => Ok(CaptureReport::default()),
        }
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// What a class's learner estimated, as the JSON Lines carry it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LearnedRecord {
    /// Share of each built-in profile in the learned mixture (profiles
    /// with the same schedule share their group's weight evenly).
    pub profiles: BTreeMap<String, f64>,
    /// The learned give-up distribution, cell by cell: clients who gave
    /// up after `after_s` and no later than `by_s` (`null`: not before
    /// their last SYN).
    pub give_ups: Vec<GiveUpRecord>,
    pub never_gives_up: f64,
    /// Profile name → the send times after the first SYN, in seconds, of
    /// the retransmissions whose real time was learned (the model takes
    /// these instead of the profile's nominal ones; `SynLearner`,
    /// "Real send times").
    pub send_offsets_s: BTreeMap<String, Vec<f64>>,
    /// Attempts the learner was fed, and how they were used.
    #[serde(flatten)]
    pub uses: AttemptUses,
}

/// One learned give-up cell.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GiveUpRecord {
    pub after_s: f64,
    pub by_s: Option<f64>,
    pub share: f64,
}

impl LearnedRecord {
    pub fn new(learned: &LearnedClients) -> LearnedRecord {
        let mut profiles = BTreeMap::new();
        for (profile, weight) in learned.clients.entries() {
            *profiles.entry(profile.name.clone()).or_insert(0.0) += weight;
        }
        LearnedRecord {
            profiles,
            give_ups: learned
                .give_ups
                .iter()
                .map(|cell| GiveUpRecord {
                    after_s: cell.after.as_secs_f64(),
                    by_s: cell.by.map(|b| b.as_secs_f64()),
                    share: cell.weight,
                })
                .collect(),
            never_gives_up: learned.never_gives_up,
            send_offsets_s: learned
                .send_times
                .iter()
                .flat_map(|times| {
                    let learned: Vec<f64> = times
                        .measured_prefix()
                        .iter()
                        .map(|t| t.as_secs_f64())
                        .collect();
                    times
                        .profiles
                        .iter()
                        .map(move |name| (name.clone(), learned.clone()))
                })
                .collect(),
            uses: learned.attempt_uses(),
        }
    }
}

/// Per class, the model its rows come from: the configured one or, with
/// `learn`, the configured one given the clients learned so far
/// (`LearnedClients::configure`, the schedule mixture and give-up times;
/// the give-ups of the cell that holds the configured frustration timeout
/// placed there, of the others at the cell's midpoint). A newly learned
/// model takes over only after it has run over the class's latest
/// intervals (kept for the longest connection time of the built-in
/// profiles, within [`MAX_REPLAY_COUNTERS`]), so that the retries it
/// expects from earlier drops are in it; each relearn starts from every
/// attempt fed since the capture started whose outcome can no longer be
/// pending (all of them once the input ends).
pub struct Models {
    configured: Certes,
    frustration_timeout: Nanos,
    classed: bool,
    interval: Nanos,
    learn: bool,
    /// Intervals given so far.
    next: usize,
    /// Intervals each class keeps to replay.
    depth: usize,
    /// Intervals between relearns (`learn_every`); each relearn starts
    /// from everything the class's learner was fed.
    every: usize,
    classes: BTreeMap<String, ClassModel>,
}

struct ClassModel {
    run: RunningEstimate,
    history: VecDeque<IntervalCounters>,
    learned: Option<LearnedRecord>,
    /// The learner's attempts when last learned.
    attempts_learned: u64,
    /// The last reason the learned model was not used (logged on change).
    refusal: Option<String>,
}

/// What [`Models::interval`] hands over per class.
pub struct ClassRow<'a> {
    pub class: &'a str,
    pub row: vantage_core::certes::summary::IntervalRow,
    pub estimate: &'a vantage_core::certes::Estimate,
    /// `Some`: the row's model uses these learned clients.
    pub learned: Option<&'a LearnedRecord>,
}

impl Models {
    pub fn new(config: &WatchConfig, configured: Certes) -> Models {
        let interval = configured.config().interval;
        let longest = vantage_core::tcp::syn_schedule::BUILTIN_PROFILES
            .iter()
            .filter_map(|name| vantage_core::tcp::SynProfile::builtin(name).ok())
            .map(|p| p.give_up)
            .chain([config.frustration_timeout])
            .max()
            .unwrap_or(config.frustration_timeout);
        let classes = config.classes.map_or(1, |c| c.max + 1);
        let depth = (longest.0.div_ceil(interval.0) as usize + 1)
            .min(MAX_REPLAY_INTERVALS)
            .min((MAX_REPLAY_COUNTERS / classes).max(1));
        Models {
            configured,
            frustration_timeout: config.frustration_timeout,
            classed: config.classes.is_some(),
            interval,
            learn: config.learn,
            next: 0,
            depth,
            every: (config.learn_every.0.div_ceil(interval.0) as usize).max(1),
            classes: BTreeMap::new(),
        }
    }

    fn running(&self, certes: &Certes, first: usize) -> RunningEstimate {
        RunningEstimate::new(
            certes,
            self.frustration_timeout,
            self.classed,
            first as f64 * self.interval.as_secs_f64(),
        )
    }

    /// The next interval of every class given, in order.
    pub fn interval<E>(
        &mut self,
        given: &[ClassInterval<'_>],
        mut each: impl FnMut(ClassRow<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let i = self.next;
        self.next += 1;
        for one in given {
            if !self.classes.contains_key(one.class) {
                let run = self.running(&self.configured, i);
                self.classes.insert(
                    one.class.to_string(),
                    ClassModel {
                        run,
                        history: VecDeque::new(),
                        learned: None,
                        attempts_learned: 0,
                        refusal: None,
                    },
                );
            }
            let Some(model) = self.classes.get_mut(one.class) else {
                continue;
            };
            if self.learn {
                if model.history.len() == self.depth {
                    model.history.pop_front();
                }
                model.history.push_back(one.counters.clone());
            }
            let learned = model.learned.as_ref();
            model
                .run
                .interval_with_estimates(std::slice::from_ref(one), |row, estimate| {
                    each(ClassRow {
                        class: one.class,
                        row,
                        estimate,
                        learned,
                    })
                })?;
        }
        Ok(())
    }

    /// Whether the clients are learned again after this interval.
    pub fn relearn_due(&self) -> bool {
        self.learn && self.next.is_multiple_of(self.every)
    }

    /// Learns each class's clients again (from its learner, when fed since
    /// the last time) and puts the model with them in place; what was
    /// learned goes to `learned`, a failure to `log` (once per reason).
    /// While the capture goes on, only from the attempts whose outcome
    /// cannot still be pending (`SynLearner::learn_complete`: the ones
    /// still in flight would be the accepted without the abandoned); once
    /// `input_ended`, every connection decided, from all.
    pub fn relearn<'a>(
        &mut self,
        learners: impl Iterator<Item = (&'a String, &'a SynLearner)>,
        input_ended: bool,
        mut learned_to: impl FnMut(&str, &LearnedRecord),
        mut log: impl FnMut(String),
    ) {
        for (class, learner) in learners {
            let Some(model) = self.classes.get_mut(class.as_str()) else {
                continue;
            };
            let attempts = learner.counts().attempts;
            if attempts == model.attempts_learned && !input_ended {
                continue;
            }
            model.attempts_learned = attempts;
            // Where in a learned cell the clients give up no SYN shows: at
            // the configured frustration timeout when the cell holds it.
            let placement = GiveUpPlacement::Told(self.frustration_timeout);
            let learned = if input_ended {
                learner.learn(placement)
            } else {
                learner.learn_complete(placement)
            };
            let outcome = learned.map_err(|e| e.to_string()).and_then(|learned| {
                let config: CertesConfig = learned.configure(self.configured.config());
                Certes::new(config)
                    .map(|certes| (learned, certes))
                    .map_err(|e| format!("the learned clients do not make a model: {e}"))
            });
            match outcome {
                Ok((learned, certes)) => {
                    let first = self.next - model.history.len();
                    let mut run = RunningEstimate::new(
                        &certes,
                        self.frustration_timeout,
                        self.classed,
                        first as f64 * self.interval.as_secs_f64(),
                    );
                    for counters in &model.history {
                        let replay = [ClassInterval {
                            class,
                            counters,
                            exact: None,
                        }];
                        let _ = run.interval(&replay, |_| Ok::<(), ()>(()));
                    }
                    model.run = run;
                    let record = LearnedRecord::new(&learned);
                    learned_to(class, &record);
                    model.learned = Some(record);
                    model.refusal = None;
                }
                Err(reason) => {
                    if model.refusal.as_ref() != Some(&reason) {
                        let kept = if model.learned.is_some() {
                            "the model learned before goes on"
                        } else {
                            "the configured model goes on"
                        };
                        log(format!(
                            "class {}: clients not learned ({reason}); {kept}",
                            if class.is_empty() { "all" } else { class }
                        ));
                        model.refusal = Some(reason);
                    }
                }
            }
        }
    }
}

struct CaptureState {
    /// `[gate]`: the followed log and the estimate from its SYN counts.
    gate: Option<(GateInput, GateEstimate)>,
    gate_polled: Option<Instant>,
    ring: PacketRing,
    stream: CaptureStream,
    models: Models,
    interval: Nanos,
    lag: Nanos,
    metrics: Arc<WatchMetrics>,
    outputs: Arc<Mutex<Outputs>>,
    kernel: KernelReadings,
    report: CaptureReport,
    /// Ring statistics already exported.
    ring_seen: (u64, u64, u64),
}

/// One JSON Lines record: `certes estimate --jsonl`'s interval fields,
/// then the daemon's.
#[derive(Serialize)]
struct JsonLine<'a> {
    #[serde(flatten)]
    row: &'a vantage_core::certes::summary::IntervalRow,
    t_start_unix_s: f64,
    /// The kernel counters over the same interval (`null`: not read).
    kernel: Option<KernelDelta>,
    /// The ring's drops since the daemon's capture started.
    ring_drops_total: u64,
    /// `configured` or `learned`: the clients the row's model was given.
    model: &'static str,
    /// With `learn`, once learned: the clients the row's model was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    learned: Option<&'a LearnedRecord>,
    /// With `[gate]`: the gate's verdicts over the interval and the
    /// estimate from them (the same on every class's line).
    #[serde(skip_serializing_if = "Option::is_none")]
    gate: Option<&'a GateRecord>,
}

impl CaptureState {
    fn log(&self, message: String) {
        Outputs::log(&self.outputs, &message);
    }

    /// `[gate]`: what the gate's log gained, into the metrics and the log.
    fn poll_gate(&mut self) {
        let Some((input, _)) = &mut self.gate else {
            return;
        };
        let poll = input.poll();
        let waiting = input.waiting();
        let log = input.log_name();
        self.metrics.add_gate_poll(&log, &poll, waiting);
        for message in poll.messages {
            Outputs::log(&self.outputs, &message);
        }
    }

    fn run(mut self, stop: &AtomicBool) -> Result<CaptureReport, WatchError> {
        let start = wall_clock();
        self.stream
            .advance_clock(Nanos(start.0.saturating_sub(self.lag.0)))?;
        let mut housekeeping = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            // Wake at the wall clock's next interval boundary, so that the
            // kernel counters are read close to it.
            let now = wall_clock();
            let to_boundary = self.interval.0 - now.0 % self.interval.0;
            let wait = POLL.min(Duration::from_nanos(to_boundary) + Duration::from_millis(1));
            // A batch of packets between looks at the clock (reading it is
            // a good part of a packet's cost).
            let mut taken = 0u64;
            while taken < BATCH {
                let timeout = if taken == 0 { wait } else { Duration::ZERO };
                let Some(p) = self.ring.next(timeout)? else {
                    break;
                };
                let packet = Packet {
                    timestamp: Nanos(p.timestamp_ns),
                    link_type: LinkType::RAW,
                    interface: 0,
                    original_len: p.original_len,
                    data: p.data,
                    offset: 0,
                };
                self.stream.push_packet(&packet)?;
                taken += 1;
            }
            let now = wall_clock();
            if taken > 0 {
                self.report.packets += taken;
                self.metrics.count_packets(taken);
            } else {
                self.stream
                    .advance_clock(Nanos(now.0.saturating_sub(self.lag.0)))?;
            }
            let outputs = Arc::clone(&self.outputs);
            self.kernel
                .tick(now, &|m: String| Outputs::log(&outputs, &m));
            if self.gate_polled.is_none_or(|at| at.elapsed() >= GATE_POLL) {
                self.gate_polled = Some(Instant::now());
                self.poll_gate();
            }
            let closed = self.stream.take_closed()?;
            if !closed.is_empty() {
                self.ring_statistics()?;
                for interval in closed {
                    self.emit(interval)?;
                }
                self.refresh();
            }
            if housekeeping.elapsed() >= HOUSEKEEPING {
                housekeeping = Instant::now();
                self.ring_statistics()?;
                self.refresh();
            }
        }
        self.ring_statistics()?;
        self.hand_over_open_intervals()?;
        Ok(self.report)
    }

    /// Stopping: the intervals still open are handed over as at the end of
    /// a capture (`CaptureStream::finish_stream`, what `certes estimate
    /// --jsonl` does at the end of its input; connections in flight are
    /// decided as there), so the JSON Lines and the metrics hold the whole
    /// run. Without it, a connection the server never ends (a request the
    /// kernel dropped at a full accept queue, whose client left) holds back
    /// every interval after its first SYN until the table's idle timeout.
    fn hand_over_open_intervals(&mut self) -> Result<(), WatchError> {
        let Some(origin) = self.stream.first_timestamp() else {
            return Ok(());
        };
        self.poll_gate();
        // Learned once more, with every connection in flight decided (and
        // fed to the learners) first, so that the intervals handed over now
        // use what every attempt says (relearning is otherwise due only
        // every `learn_every` of intervals handed over, and then from the
        // attempts that cannot still be pending).
        if self.models.learn {
            if let Err(e) = self.stream.decide_in_flight() {
                self.log(format!(
                    "stopping: the connections in flight were not decided: {e}"
                ));
            }
            let metrics = &self.metrics;
            let outputs = &self.outputs;
            self.models.relearn(
                self.stream.learners(),
                true,
                |class, record| metrics.set_learned(class, record),
                |message| Outputs::log(outputs, &message),
            );
        }
        let empty =
            CaptureStream::live(String::new(), &[], None, self.models.configured.config(), 1)?;
        let stream = std::mem::replace(&mut self.stream, empty);
        match stream.finish_stream() {
            Ok((closed, _)) => {
                for interval in closed {
                    self.emit_from(origin, interval, false)?;
                }
            }
            // Nothing selected since the capture started: nothing to hand over.
            Err(vantage_trace::certes::CaptureInputError::NoConnection(_)) => {}
            Err(e) => self.log(format!(
                "stopping: the intervals still open were not handed over: {e}"
            )),
        }
        Ok(())
    }

    fn ring_statistics(&mut self) -> Result<u64, WatchError> {
        let stats = self.ring.statistics()?;
        let (p, d, f) = self.ring_seen;
        self.metrics
            .add_ring(stats.packets - p, stats.drops - d, stats.freezes - f);
        if stats.drops > d {
            self.log(format!(
                "the ring dropped {} packets (block size {} × {} blocks): raise ring.block_count",
                stats.drops - d,
                self.ring.config().block_size,
                self.ring.config().block_count
            ));
        }
        self.ring_seen = (stats.packets, stats.drops, stats.freezes);
        self.report.ring_drops = stats.drops;
        Ok(stats.drops - d)
    }

    /// Notes, failures and gauges from the stream's running totals.
    fn refresh(&self) {
        let notes = self.stream.notes_so_far();
        let skipped: u64 =
            self.stream.handshake_stats().packets - self.stream.handshake_stats().tcp_segments;
        self.metrics.set_notes(&[
            ("packets_not_decoded", skipped),
            ("connections_without_syn", notes.connections_without_syn),
            (
                "connections_to_other_servers",
                notes.connections_to_other_servers,
            ),
            ("connections_evicted", notes.connections_evicted),
            ("connections_not_kept", notes.connections_not_kept),
            ("late_counts", notes.late_counts),
            ("decided_early", notes.decided_early),
            ("syns_after_answer", notes.syns_after_answer),
            ("rtt_missing", notes.rtt_missing),
            ("abandoned", notes.abandoned),
            ("refused_not_learned", self.stream.refused_not_learned()),
        ]);
        self.metrics.set_failures(self.stream.class_figures());
        self.metrics
            .set_connections(self.stream.open_connections(), self.stream.retained());
    }

    fn emit(&mut self, closed: ClosedInterval) -> Result<(), WatchError> {
        let origin = self.stream.first_timestamp().unwrap_or(Nanos::ZERO);
        self.emit_from(origin, closed, true)
    }

    /// Writes one closed interval; `origin` is the capture's first
    /// timestamp; `relearn`: the learned clients may be learned again after
    /// it (not while stopping).
    fn emit_from(
        &mut self,
        origin: Nanos,
        closed: ClosedInterval,
        relearn: bool,
    ) -> Result<(), WatchError> {
        let first_index = origin.0 / self.interval.0;
        let index = first_index + closed.index as u64;
        let t_start_unix_s = Nanos(index * self.interval.0).as_secs_f64_exact();
        let kernel = self.kernel.deltas.remove(&index);
        if let Some(k) = &kernel {
            self.metrics.add_kernel(&[
                ("ListenDrops", k.listen_drops),
                ("ListenOverflows", k.listen_overflows),
                ("PassiveOpens", k.passive_opens),
            ]);
        }
        let ring_drops = self.ring_seen.1;
        let given = closed.class_intervals();
        let gate = match &mut self.gate {
            Some((input, estimate)) => {
                let covered = input.take(index);
                let found = estimate.interval(&given, covered.as_ref());
                if let Some((record, estimate)) = &found {
                    self.metrics.add_gate_interval(record, estimate);
                }
                found.map(|(record, _)| record)
            }
            None => None,
        };
        let metrics = &self.metrics;
        let outputs = &self.outputs;
        let mut lines = Vec::new();
        self.models
            .interval(&given, |one| {
                metrics.add_interval(one.class, &one.row, one.estimate);
                let line = JsonLine {
                    row: &one.row,
                    t_start_unix_s,
                    kernel,
                    ring_drops_total: ring_drops,
                    model: if one.learned.is_some() {
                        "learned"
                    } else {
                        "configured"
                    },
                    learned: one.learned,
                    gate: gate.as_ref(),
                };
                lines.push(serde_json::to_vec(&line)?);
                Ok::<(), serde_json::Error>(())
            })
            .map_err(WatchError::Json)?;
        Outputs::write_jsonl(outputs, &lines);
        if relearn && self.models.relearn_due() {
            let metrics = &self.metrics;
            let outputs = &self.outputs;
            self.models.relearn(
                self.stream.learners(),
                false,
                |class, record| metrics.set_learned(class, record),
                |message| Outputs::log(outputs, &message),
            );
        }
        self.metrics.count_interval();
        self.report.intervals += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vantage_core::certes::learn::AttemptOutcome;

    fn config(learn: bool) -> WatchConfig {
        let text = format!(
            "listeners = [\":80\"]\nprofile = \"windows-9x-nt\"\ninterval = \"250ms\"\nlearn = {learn}"
        );
        WatchConfig::from_toml(&text, "w.toml").unwrap()
    }

    fn models(learn: bool) -> Models {
        let config = config(learn);
        let fresh = Certes::new(config.model.clone()).unwrap();
        Models::new(&config, fresh)
    }

    fn counters() -> IntervalCounters {
        IntervalCounters {
            dropped: 40,
            accepted: 60,
            completed: 60,
            syn_to_end_sum: Nanos::from_millis(60 * 20),
            rtt_sum: Nanos::from_millis(60),
            ..IntervalCounters::default()
        }
    }

    /// One interval of the one class: its mean and whether learned.
    fn step(models: &mut Models) -> (Option<f64>, Option<LearnedRecord>) {
        let c = counters();
        let given = [ClassInterval {
            class: "",
            counters: &c,
            exact: None,
        }];
        let mut out = None;
        models
            .interval(&given, |one| {
                out = Some((one.row.estimate_mean_s, one.learned.cloned()));
                Ok::<(), ()>(())
            })
            .unwrap();
        out.unwrap()
    }

    /// Linux 3.7 clients (SYNs at 0, 1, 3, 7 s), accepted on a retry or
    /// giving up after their third SYN.
    fn linux_learner() -> SynLearner {
        let mut learner = SynLearner::with_builtin_profiles().unwrap();
        let s = |ms: u64| Nanos::from_millis(ms);
        for i in 0..300u64 {
            let t = i * 10_000;
            match i % 3 {
                0 => learner.observe(&[s(t), s(t + 1000)], AttemptOutcome::Accepted),
                1 => learner.observe(&[s(t), s(t + 1000), s(t + 3000)], AttemptOutcome::Accepted),
                _ => learner.observe(&[s(t), s(t + 1000), s(t + 3000)], AttemptOutcome::Abandoned),
            }
        }
        learner
    }

    /// With `learn`, the rows come from the configured model until the
    /// clients are learned, then from the model given the learned ones
    /// (run over the kept intervals first); without it, never.
    #[test]
    fn the_model_takes_the_learned_clients() {
        let mut learning = models(true);
        let mut configured = models(false);
        assert_eq!(learning.every, 40, "10 s of 250 ms intervals");
        for _ in 0..learning.every {
            let (mean, learned) = step(&mut learning);
            assert_eq!(mean, step(&mut configured).0);
            assert!(learned.is_none());
        }
        assert!(learning.relearn_due());
        assert!(!configured.relearn_due());
        let learner = linux_learner();
        let class = String::new();
        let mut records = Vec::new();
        let mut logged = Vec::new();
        learning.relearn(
            [(&class, &learner)].into_iter(),
            false,
            |c, r| records.push((c.to_string(), r.clone())),
            |m| logged.push(m),
        );
        assert!(logged.is_empty(), "{logged:?}");
        assert_eq!(records.len(), 1);
        let record = &records[0].1;
        assert!(record.profiles["linux-3.7"] > 0.99, "{record:?}");
        assert_eq!(record.uses.attempts, 300);
        assert_eq!(record.uses.classified, 300);
        let (mean, learned) = step(&mut learning);
        assert_eq!(learned.as_ref(), Some(record));
        let told = step(&mut configured).0;
        assert_ne!(mean, told, "the learned model estimates otherwise");
        // Fed nothing new: not learned again.
        let mut again = 0;
        learning.relearn(
            [(&class, &learner)].into_iter(),
            false,
            |_, _| again += 1,
            |_| {},
        );
        assert_eq!(again, 0);
        // A learner with nothing to learn from: logged once, model kept.
        let mut empty = SynLearner::with_builtin_profiles().unwrap();
        for i in 0..2 {
            empty.observe(&[Nanos::from_secs(i)], AttemptOutcome::Accepted);
            learning.relearn(
                [(&class, &empty)].into_iter(),
                false,
                |_, _| panic!("nothing learned"),
                |m| logged.push(m),
            );
        }
        assert_eq!(logged.len(), 1, "{logged:?}");
        assert!(logged[0].contains("learned before goes on"), "{logged:?}");
        assert_eq!(step(&mut learning).1.as_ref(), Some(record));
    }

    /// The replay keeps at most the longest connection time of the
    /// built-in profiles, and within the overall cap.
    #[test]
    fn replay_is_bounded() {
        let mut m = models(true);
        // Solaris 2.7's 180 s at 250 ms.
        assert_eq!(m.depth, 721);
        for _ in 0..800 {
            step(&mut m);
        }
        assert_eq!(m.classes[""].history.len(), 721);
        let mut told = models(false);
        step(&mut told);
        assert!(told.classes[""].history.is_empty(), "kept only to learn");
    }
}
