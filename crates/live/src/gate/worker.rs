//! The verdict loop on one bound NFQUEUE queue, and the state every queue
//! of a gate shares: one filter, one clock, one set of counters.
//!
//! One [`QueueWorker`] per queue (per thread): it drains every packet the
//! kernel has pending into one batch (at most [`MAX_BATCH`] packets),
//! classifies them without any lock ([`classify`]), locks the shared
//! filter **once per batch** if the batch holds a SYN, decides it with
//! [`decide_batch`], and sends all the verdicts with one `send` per 64 KiB
//! ([`VerdictBatch`]). The algorithm is the sans-IO filter of
//! `vantage_core::admission::syn`; this file only moves bytes.
//!
//! Memory is fixed: the receive buffer (copy range + 4 KiB), the batch of
//! classified packets and the verdict buffer are allocated once; nothing is
//! kept per source or per flow, so a SYN flood costs time, not memory.
//!
//! Time is `CLOCK_MONOTONIC` (`std::time::Instant`) since the gate started,
//! in [`Nanos`]: the filters' time base (never the wall clock, which can
//! step).
//!
//! Latency: a worker sleeps inside its first receive (`recv` with a
//! receive timeout, one system call per wake-up), and each SYN costs a
//! wake-up (two context switches; on the benchmark VM the gate adds
//! 13–19 µs to a connect, 1–2 µs above a bare NFQUEUE loop). With a
//! busy-poll window ([`QueueWorker::with_busy_poll`], `busy_poll_us` in the
//! configuration) the worker keeps reading without sleeping for that long
//! after its last packet: a core traded for latency, as with the kernel's
//! own `SO_BUSY_POLL`. A wake-up on the core that handled the SYN is
//! cheaper than one on another core (an inter-processor interrupt): with
//! `cpu_fanout` each queue's thread is pinned to the CPUs whose SYNs the
//! kernel sends to it ([`fanout_cpus`], [`pin_current_thread`]).
//!
//! Packets the kernel could not deliver to the socket (receive buffer full)
//! are accepted unseen by the kernel (`NFQA_CFG_F_FAIL_OPEN`) and, with
//! `NETLINK_NO_ENOBUFS`, not reported; they still consumed a packet id, and
//! ids are consecutive per queue, so the gaps count them (*overruns*).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use vantage_core::admission::syn::{FilterConfigError, FilterSnapshot, SynFilter};
use vantage_core::Nanos;
use vantage_sys::nfqueue::{
    CopyMode, Message, NfqError, Queue, QueueConfig, Received, Verdict, VerdictBatch,
};

use super::config::Listener;
use super::decide::{decide_batch, has_syn, BatchCounts, GateAction};
use super::packet::{classify, PacketClass, COPY_RANGE};
use super::GateError;

/// Most packets decided per batch (per lock of the filter).
pub const MAX_BATCH: usize = 1024;
/// Netlink receive buffer asked for with `SO_RCVBUFFORCE`: about 30 000
/// queued SYNs of 128 bytes plus headers, a quarter second of a heavy
/// flood.
pub const RECV_BUFFER_BYTES: usize = 8 << 20;
/// How long a worker waits for packets before it looks at its stop flag.
pub const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// Label of `vantage_gate_syns_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerdictLabel {
    pub verdict: String,
}

/// The gate's counters: atomics shared by every worker and the metrics
/// endpoint (prometheus-client counters are `Arc<AtomicU64>`; clones share).
#[derive(Clone, Debug, Default)]
pub struct GateCounters {
    /// `vantage_gate_syns_total{verdict}`.
    pub syns: Family<VerdictLabel, Counter>,
    pub accepted: Counter,
    pub dropped: Counter,
    pub rejected: Counter,
    /// Packets that were not SYNs to a listener (or not parsable).
    pub passed: Counter,
    /// Packets the kernel could not deliver (packet-id gaps), accepted
    /// unseen (fail-open).
    pub overruns: Counter,
    /// Verdicts the kernel refused, malformed messages, failed sends.
    pub errors: Counter,
}

/// Totals of every counter at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CounterTotals {
    pub counts: BatchCounts,
    pub overruns: u64,
    pub errors: u64,
}

impl CounterTotals {
    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &CounterTotals) -> CounterTotals {
        CounterTotals {
            counts: BatchCounts {
                accepted: self.counts.accepted.saturating_sub(earlier.counts.accepted),
                dropped: self.counts.dropped.saturating_sub(earlier.counts.dropped),
                rejected: self.counts.rejected.saturating_sub(earlier.counts.rejected),
                passed: self.counts.passed.saturating_sub(earlier.counts.passed),
            },
            overruns: self.overruns.saturating_sub(earlier.overruns),
            errors: self.errors.saturating_sub(earlier.errors),
        }
    }
}

impl GateCounters {
    pub fn new() -> GateCounters {
        let syns = Family::<VerdictLabel, Counter>::default();
        let get = |verdict: &str| {
            syns.get_or_create(&VerdictLabel {
                verdict: verdict.to_string(),
            })
            .clone()
        };
        GateCounters {
            accepted: get("accept"),
            dropped: get("drop"),
            rejected: get("reject"),
            syns,
            passed: Counter::default(),
            overruns: Counter::default(),
            errors: Counter::default(),
        }
    }

    pub fn add(&self, counts: &BatchCounts) {
        for (counter, n) in [
            (&self.accepted, counts.accepted),
            (&self.dropped, counts.dropped),
            (&self.rejected, counts.rejected),
            (&self.passed, counts.passed),
        ] {
            if n > 0 {
                counter.inc_by(n);
            }
        }
    }

    pub fn totals(&self) -> CounterTotals {
        CounterTotals {
            counts: BatchCounts {
                accepted: self.accepted.get(),
                dropped: self.dropped.get(),
                rejected: self.rejected.get(),
                passed: self.passed.get(),
            },
            overruns: self.overruns.get(),
            errors: self.errors.get(),
        }
    }
}

/// What every queue of one gate shares.
pub struct Gate {
    filter: Mutex<Box<dyn SynFilter + Send>>,
    listeners: Vec<Listener>,
    dry_run: bool,
    reject_mark: u32,
    start: Instant,
    counters: GateCounters,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("listeners", &self.listeners)
            .field("dry_run", &self.dry_run)
            .field("reject_mark", &self.reject_mark)
            .finish_non_exhaustive()
    }
}

impl Gate {
    /// A gate around `filter`; its clock starts now.
    pub fn new(
        filter: Box<dyn SynFilter + Send>,
        listeners: Vec<Listener>,
        dry_run: bool,
        reject_mark: u32,
    ) -> Gate {
        Gate {
            filter: Mutex::new(filter),
            listeners,
            dry_run,
            reject_mark,
            start: Instant::now(),
            counters: GateCounters::new(),
        }
    }

    /// Now, on `CLOCK_MONOTONIC`, since the gate started.
    pub fn now(&self) -> Nanos {
        Nanos(self.start.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64)
    }

    /// The instant the gate's clock reads zero.
    pub fn started(&self) -> Instant {
        self.start
    }

    pub fn counters(&self) -> &GateCounters {
        &self.counters
    }

    pub fn listeners(&self) -> &[Listener] {
        &self.listeners
    }

    pub fn dry_run(&self) -> bool {
        self.dry_run
    }

    pub fn reject_mark(&self) -> u32 {
        self.reject_mark
    }

    /// Locks the filter. A worker that panicked while holding it left a
    /// filter that is still a valid state machine; use it.
    pub fn lock_filter(&self) -> MutexGuard<'_, Box<dyn SynFilter + Send>> {
        self.filter
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn snapshot(&self) -> FilterSnapshot {
        self.lock_filter().snapshot()
    }

    pub fn set_refill_rate(&self, refill_rate: f64) -> Result<(), FilterConfigError> {
        self.lock_filter().set_refill_rate(refill_rate)
    }
}

/// How a gate's queue is opened: whole headers (128 bytes), fail-open,
/// an 8 MiB receive buffer forced past `rmem_max`, no `ENOBUFS` reports.
pub fn queue_config(queue_num: u16, queue_maxlen: u32) -> QueueConfig {
    QueueConfig {
        copy_mode: CopyMode::Packet {
            copy_range: COPY_RANGE,
        },
        queue_maxlen,
        fail_open: true,
        recv_buffer_bytes: Some(RECV_BUFFER_BYTES),
        no_enobufs: true,
        ..QueueConfig::new(queue_num)
    }
}

/// What one worker did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct WorkerReport {
    /// Packets given a verdict.
    pub packets: u64,
    /// Batches sent.
    pub batches: u64,
    pub counts: BatchCounts,
    /// Packets the kernel could not deliver (id gaps).
    pub overruns: u64,
    /// Refused verdicts, malformed messages, failed sends.
    pub errors: u64,
}

/// The verdict loop of one bound queue.
pub struct QueueWorker {
    queue: Queue,
    gate: Arc<Gate>,
    packets: Vec<(u32, PacketClass)>,
    verdicts: VerdictBatch,
    last_id: Option<u32>,
    report: WorkerReport,
    busy_poll: Duration,
}

impl QueueWorker {
    /// Opens queue `queue_num` with [`queue_config`] and wraps it.
    pub fn open(
        queue_num: u16,
        queue_maxlen: u32,
        gate: Arc<Gate>,
    ) -> Result<QueueWorker, GateError> {
        let queue = Queue::open(&queue_config(queue_num, queue_maxlen)).map_err(|source| {
            GateError::Queue {
                queue: queue_num,
                source,
            }
        })?;
        Ok(QueueWorker::new(queue, gate))
    }

    /// Wraps an already bound queue.
    pub fn new(queue: Queue, gate: Arc<Gate>) -> QueueWorker {
        let queue_num = queue.queue_num();
        QueueWorker {
            queue,
            gate,
            packets: Vec::with_capacity(MAX_BATCH + 64),
            verdicts: VerdictBatch::new(queue_num),
            last_id: None,
            report: WorkerReport::default(),
            busy_poll: Duration::ZERO,
        }
    }

    /// Keeps reading without sleeping for `window` after the last packet
    /// (zero: always sleep in the receive when nothing is pending).
    pub fn with_busy_poll(mut self, window: Duration) -> QueueWorker {
        self.busy_poll = window;
        self
    }

    pub fn queue_num(&self) -> u16 {
        self.queue.queue_num()
    }

    pub fn report(&self) -> WorkerReport {
        self.report
    }

    /// The queue back, e.g. to unbind it.
    pub fn into_queue(self) -> Queue {
        self.queue
    }

    /// Runs the loop until `stop` is set or, with `max_packets`, until at
    /// least that many packets got a verdict. Waits at most
    /// [`POLL_INTERVAL`] between looks at `stop`.
    pub fn run(
        &mut self,
        stop: &AtomicBool,
        max_packets: Option<u64>,
    ) -> Result<WorkerReport, GateError> {
        let start = self.report.packets;
        let mut last_packet: Option<Instant> = None;
        loop {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let budget = match max_packets {
                Some(max) => {
                    let done = self.report.packets - start;
                    if done >= max {
                        break;
                    }
                    (max - done).min(MAX_BATCH as u64) as usize
                }
                None => MAX_BATCH,
            };
            let spinning = last_packet.is_some_and(|at: Instant| at.elapsed() < self.busy_poll);
            // Asleep, the worker waits inside the first receive (one system
            // call per wake-up, not a poll and then a receive).
            let wait = (!spinning).then_some(POLL_INTERVAL);
            if self.receive_and_decide(budget, wait)? > 0 && !self.busy_poll.is_zero() {
                last_packet = Some(Instant::now());
            }
        }
        Ok(self.report)
    }

    /// After the rules are gone: gives a verdict to every packet still
    /// arriving until the queue has been quiet for `quiet` (at most
    /// `limit` in all), so none is left to be dropped by the unbind.
    pub fn drain(&mut self, quiet: Duration, limit: Duration) -> Result<WorkerReport, GateError> {
        let deadline = Instant::now() + limit;
        loop {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            let readable = self
                .queue
                .wait_readable(quiet.min(deadline - now))
                .map_err(|source| self.queue_error(source))?;
            if !readable {
                break;
            }
            while self.process_pending(MAX_BATCH)? > 0 {}
        }
        Ok(self.report)
    }

    fn queue_error(&self, source: NfqError) -> GateError {
        GateError::Queue {
            queue: self.queue.queue_num(),
            source,
        }
    }

    /// Receives what is pending (up to `budget` packets, a little more if
    /// one datagram holds several), decides it as one batch and sends the
    /// verdicts. Returns the number of packets handled (zero when nothing
    /// was pending).
    pub fn process_pending(&mut self, budget: usize) -> Result<usize, GateError> {
        self.receive_and_decide(budget, None)
    }

    /// [`QueueWorker::process_pending`], the first receive waiting up to
    /// `first_wait` for a packet when one is given.
    fn receive_and_decide(
        &mut self,
        budget: usize,
        first_wait: Option<Duration>,
    ) -> Result<usize, GateError> {
        let budget = budget.clamp(1, MAX_BATCH);
        let mut wait = first_wait;
        self.packets.clear();
        let listeners = self.gate.listeners();
        let counters = self.gate.counters();
        let mut overruns = 0u64;
        let mut errors = 0u64;
        while self.packets.len() < budget {
            let received = match wait.take() {
                Some(timeout) => self.queue.recv_wait(timeout),
                None => self.queue.recv(),
            };
            let received = match received {
                Ok(received) => received,
                Err(NfqError::DatagramTooLarge { .. }) | Err(NfqError::Malformed(_)) => {
                    errors += 1;
                    continue;
                }
                Err(source) => {
                    return Err(GateError::Queue {
                        queue: self.queue.queue_num(),
                        source,
                    })
                }
            };
            match received {
                None => break,
                // With NETLINK_NO_ENOBUFS this is not reported; the lost
                // packets are counted from the id gap either way.
                Some(Received::Overrun) => {}
                Some(Received::Messages(messages)) => {
                    for message in messages {
                        match message {
                            Ok(Message::Packet(packet)) => {
                                if let Some(last) = self.last_id {
                                    overruns += missed_packets(last, packet.packet_id);
                                }
                                self.last_id = Some(packet.packet_id);
                                self.packets
                                    .push((packet.packet_id, classify(packet.payload, listeners)));
                            }
                            Ok(Message::Error { .. }) => errors += 1,
                            Ok(Message::Ack { .. }) | Ok(Message::Other { .. }) => {}
                            Err(_) => {
                                errors += 1;
                                break;
                            }
                        }
                    }
                }
            }
        }
        let handled = self.packets.len();
        if handled > 0 {
            let mark = self.gate.reject_mark();
            let dry_run = self.gate.dry_run();
            let verdicts = &mut self.verdicts;
            let emit = |id: u32, action: GateAction| match action {
                GateAction::Accept => verdicts.push(id, Verdict::Accept),
                GateAction::Drop => verdicts.push(id, Verdict::Drop),
                GateAction::Reject => verdicts.push_with_mark(id, Verdict::Repeat, mark),
            };
            let counts = if has_syn(&self.packets) {
                let now = self.gate.now();
                let mut filter = self.gate.lock_filter();
                decide_batch(&mut **filter, now, &self.packets, dry_run, emit)
            } else {
                // No SYN: nothing to lock; every packet passes.
                let mut emit = emit;
                for &(id, _) in &self.packets {
                    emit(id, GateAction::Accept);
                }
                BatchCounts {
                    passed: handled as u64,
                    ..BatchCounts::default()
                }
            };
            if let Err(e) = self.queue.send_verdicts(&mut self.verdicts) {
                // The packets stay queued until the kernel's queue is full
                // and fail-open takes over; count it and go on.
                errors += 1;
                eprintln!("vantage gate: queue {}: {e}", self.queue.queue_num());
            }
            counters.add(&counts);
            self.report.counts.add(&counts);
            self.report.packets += handled as u64;
            self.report.batches += 1;
        }
        if overruns > 0 {
            counters.overruns.inc_by(overruns);
            self.report.overruns += overruns;
        }
        if errors > 0 {
            counters.errors.inc_by(errors);
            self.report.errors += errors;
        }
        Ok(handled)
    }
}

/// The CPUs whose packets `--queue-cpu-fanout` sends to the queue at
/// `index` of `queues` (the kernel picks `first + CPU mod queues`), among
/// the `allowed` CPUs; empty when none of them maps there.
pub fn fanout_cpus(index: u16, queues: u16, allowed: &[usize]) -> Vec<usize> {
    let queues = usize::from(queues.max(1));
    allowed
        .iter()
        .copied()
        .filter(|cpu| cpu % queues == usize::from(index))
        .collect()
}

/// The CPUs this thread may run on (`sched_getaffinity`).
pub fn allowed_cpus() -> std::io::Result<Vec<usize>> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; the kernel fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable cpu_set_t of the size passed.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below CPU_SETSIZE.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect())
}

/// Runs the calling thread only on `cpus` (`sched_setaffinity`).
pub fn pin_current_thread(cpus: &[usize]) -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("CPU {cpu} is past CPU_SETSIZE"),
            ));
        }
        // SAFETY: `cpu` is below CPU_SETSIZE.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t of the size passed.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Packets the kernel numbered between two consecutive deliveries on one
/// queue but could not deliver (ids are consecutive per queue and wrap).
/// A jump backwards or of a billion or more is not a gap: zero.
pub fn missed_packets(last_id: u32, id: u32) -> u64 {
    let gap = id.wrapping_sub(last_id).wrapping_sub(1);
    if gap < 1 << 30 {
        u64::from(gap)
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fanout_gives_each_queue_the_cpus_that_map_to_it() {
        let all: Vec<usize> = (0..8).collect();
        assert_eq!(fanout_cpus(0, 2, &all), [0, 2, 4, 6]);
        assert_eq!(fanout_cpus(1, 2, &all), [1, 3, 5, 7]);
        assert_eq!(fanout_cpus(2, 3, &all), [2, 5]);
        // Every allowed CPU belongs to exactly one queue.
        let mut seen: Vec<usize> = (0..3).flat_map(|i| fanout_cpus(i, 3, &all)).collect();
        seen.sort_unstable();
        assert_eq!(seen, all);
        // A restricted affinity mask can leave a queue without a CPU.
        assert!(fanout_cpus(1, 2, &[0, 2]).is_empty());
    }

    #[test]
    fn pinning_keeps_the_thread_on_the_cpus_given() {
        let allowed = allowed_cpus().unwrap();
        assert!(!allowed.is_empty());
        let first = allowed[0];
        std::thread::spawn(move || {
            pin_current_thread(&[first]).unwrap();
            assert_eq!(allowed_cpus().unwrap(), [first]);
        })
        .join()
        .unwrap();
        assert!(pin_current_thread(&[libc::CPU_SETSIZE as usize]).is_err());
    }

    #[test]
    fn id_gaps_count_the_undelivered_packets() {
        assert_eq!(missed_packets(7, 8), 0);
        assert_eq!(missed_packets(7, 12), 4);
        assert_eq!(missed_packets(u32::MAX, 0), 0);
        assert_eq!(missed_packets(u32::MAX - 1, 2), 3);
        // The same id again, or an older one: not a gap.
        assert_eq!(missed_packets(7, 7), 0);
        assert_eq!(missed_packets(7, 3), 0);
    }

    #[test]
    fn counter_totals_subtract() {
        let counters = GateCounters::new();
        let before = counters.totals();
        counters.add(&BatchCounts {
            accepted: 1,
            dropped: 2,
            rejected: 3,
            passed: 4,
        });
        counters.overruns.inc_by(5);
        let delta = counters.totals().since(&before);
        assert_eq!(delta.counts.syns(), 6);
        assert_eq!(delta.counts.passed, 4);
        assert_eq!(delta.overruns, 5);
        assert_eq!(delta.errors, 0);
    }
}
