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

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use vantage_core::certes::input::EMPTY_INTERVAL;
use vantage_core::certes::observed::ExactInterval;
use vantage_core::certes::summary::{ClassInterval, RunningEstimate};
use vantage_core::certes::Certes;
use vantage_core::Nanos;
use vantage_sys::packet_ring::PacketRing;
use vantage_sys::proc_net::{self, LISTEN_DROPS, LISTEN_OVERFLOWS, PASSIVE_OPENS};
use vantage_trace::certes::{CaptureStream, ClosedInterval};
use vantage_trace::{LinkType, Packet};

use super::config::WatchConfig;
use super::metrics::WatchMetrics;
use super::{Outputs, WatchError};

/// Longest wait for a packet before the clock moves on.
const POLL: Duration = Duration::from_millis(100);
/// How often the ring's statistics, the notes and the gauges are read.
const HOUSEKEEPING: Duration = Duration::from_secs(1);
/// Kernel readings kept for intervals not yet closed.
const MAX_KERNEL_INTERVALS: usize = 4096;

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
        let stop = Arc::new(AtomicBool::new(false));
        let state = CaptureState {
            ring,
            stream,
            run: RunningEstimate::new(
                &fresh,
                config.frustration_timeout,
                config.classes.is_some(),
                0.0,
            ),
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

struct CaptureState {
    ring: PacketRing,
    stream: CaptureStream,
    run: RunningEstimate,
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
}

impl CaptureState {
    fn log(&self, message: String) {
        Outputs::log(&self.outputs, &message);
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
            let got = match self.ring.next(wait)? {
                Some(p) => {
                    let packet = Packet {
                        timestamp: Nanos(p.timestamp_ns),
                        link_type: LinkType::RAW,
                        interface: 0,
                        original_len: p.original_len,
                        data: p.data,
                        offset: 0,
                    };
                    self.stream.push_packet(&packet)?;
                    true
                }
                None => false,
            };
            let now = wall_clock();
            if got {
                self.report.packets += 1;
                self.metrics.count_packet();
            } else {
                self.stream
                    .advance_clock(Nanos(now.0.saturating_sub(self.lag.0)))?;
            }
            let outputs = Arc::clone(&self.outputs);
            self.kernel
                .tick(now, &|m: String| Outputs::log(&outputs, &m));
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
        Ok(self.report)
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
        ]);
        self.metrics.set_failures(self.stream.class_figures());
        self.metrics
            .set_connections(self.stream.open_connections(), self.stream.retained());
    }

    fn emit(&mut self, closed: ClosedInterval) -> Result<(), WatchError> {
        let origin = self.stream.first_timestamp().unwrap_or(Nanos::ZERO);
        let first_index = origin.0 / self.interval.0;
        let index = first_index + closed.index as u64;
        let t_start_unix_s = (index * self.interval.0) as f64 / 1e9;
        let kernel = self.kernel.deltas.remove(&index);
        if let Some(k) = &kernel {
            self.metrics.add_kernel(&[
                ("ListenDrops", k.listen_drops),
                ("ListenOverflows", k.listen_overflows),
                ("PassiveOpens", k.passive_opens),
            ]);
        }
        let ring_drops = self.ring_seen.1;
        let empty = ExactInterval::default();
        let given: Vec<ClassInterval<'_>> = closed
            .classes
            .iter()
            .map(|(class, taken)| ClassInterval {
                class,
                counters: taken.as_ref().map_or(&EMPTY_INTERVAL, |t| &t.counters),
                exact: Some(taken.as_ref().map_or(&empty, |t| &t.exact)),
            })
            .collect();
        let metrics = &self.metrics;
        let outputs = &self.outputs;
        let mut lines = Vec::new();
        let mut classes = closed.classes.iter();
        self.run
            .interval_with_estimates(&given, |row, estimate| {
                let class = classes.next().map_or("", |(c, _)| c.as_str());
                metrics.add_interval(class, &row, estimate);
                let line = JsonLine {
                    row: &row,
                    t_start_unix_s,
                    kernel,
                    ring_drops_total: ring_drops,
                };
                lines.push(serde_json::to_vec(&line)?);
                Ok::<(), serde_json::Error>(())
            })
            .map_err(WatchError::Json)?;
        Outputs::write_jsonl(outputs, &lines);
        self.metrics.count_interval();
        self.report.intervals += 1;
        Ok(())
    }
}
