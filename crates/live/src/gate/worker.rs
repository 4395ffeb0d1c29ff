//! The verdict loop on one bound NFQUEUE queue, and the state every queue
//! of a gate shares: one filter, one clock, one set of counters.
//!
//! One [`QueueWorker`] per queue (per thread) drains what the kernel has
//! pending into one batch (at most [`MAX_BATCH`] packets), classifies it
//! without a lock ([`classify`]), locks the shared filter once per batch if
//! it holds a SYN, decides it with [`decide_batch`] and sends the verdicts
//! with one `send` per 64 KiB ([`VerdictBatch`]). The filter is the sans-IO
//! type of `vantage_core::admission::syn`; this file only moves bytes.
//! Memory is fixed: buffers are allocated once, nothing is kept per source.
//!
//! Time is `CLOCK_MONOTONIC` since the gate started, in [`Nanos`]. A worker
//! sleeps inside its first receive; with a busy-poll window
//! ([`QueueWorker::with_busy_poll`]) it keeps reading for that long after
//! its last packet, a core traded for latency (measured in
//! `bench/gate/README.md`). While the kernel-side shortcut is armed
//! ([`super::shortcut`]; after each batch, with the filter's constant
//! verdict) the worker sleeps until just before its deadline and reads
//! without sleeping from then until a SYN after it re-arms the shortcut (at
//! most [`DEADLINE_SPIN`]): the SYNs queued at a deadline do not wait for
//! a wake-up.
//!
//! Per batch the worker also counts each SYN by listener, recognises
//! retransmitted SYNs ([`RetransmitTable`], shared, locked once per batch
//! after the filter) and observes the verdict latency; all into counters
//! and buffers made beforehand, so the loop does not allocate.
//!
//! Packets the kernel could not deliver (receive buffer full) are accepted
//! unseen (fail-open) and not reported (`NETLINK_NO_ENOBUFS`); ids are
//! consecutive per queue, so the gaps count them (*overruns*).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};

use vantage_core::admission::syn::{
    FilterConfigError, FilterSnapshot, RetransmitTable, SynFilter, Verdict as FilterVerdict,
};
use vantage_core::Nanos;
use vantage_sys::nfqueue::{
    CopyMode, Message, NfqError, Queue, QueueConfig, Received, Verdict, VerdictBatch,
};

use super::config::Listener;
use super::counters::{GateCounters, ListenerSyns};
use super::decide::{decide_batch_with, has_syn, GateAction};
use super::packet::{syn_origin, PacketClass, SynOrigin, COPY_RANGE};
use super::shortcut::{self, Shortcut};
use super::GateError;
use vantage_core::admission::syn::record::GateCounts;

/// Most packets decided per batch (per lock of the filter).
pub const MAX_BATCH: usize = 1024;
/// Netlink receive buffer asked for with `SO_RCVBUFFORCE`: about 30 000
/// queued SYNs of 128 bytes plus headers, a quarter second of a heavy
/// flood.
pub const RECV_BUFFER_BYTES: usize = 8 << 20;
/// How long a worker waits for packets before it looks at its stop flag.
pub const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// How long before the shortcut's deadline a worker wakes up and reads
/// without sleeping, so that it is running when SYNs reach the queue again.
pub const DEADLINE_LEAD: Duration = Duration::from_micros(100);
/// How long after the deadline it keeps reading without sleeping for the
/// first SYN (that SYN arms the shortcut again).
pub const DEADLINE_SPIN: Duration = Duration::from_micros(300);

/// A SYN whose 4-tuple was seen at most this long before counts as
/// retransmitted (Linux retransmits after 1, 2 and 4 s).
pub const RETRANSMIT_WINDOW: Nanos = Nanos::from_secs(10);

/// The protected listeners and their SYN counters, index for index.
#[derive(Debug)]
pub struct ProtectedListeners {
    pub listeners: Vec<Listener>,
    pub syns: Vec<ListenerSyns>,
}

/// What every queue of one gate shares.
pub struct Gate {
    filter: Mutex<Box<dyn SynFilter + Send>>,
    /// Swapped whole by a reload; a worker takes the current set once per
    /// batch (a reference count, no copy).
    listeners: RwLock<Arc<ProtectedListeners>>,
    retransmits: Mutex<RetransmitTable>,
    dry_run: bool,
    reject_mark: u32,
    start: Instant,
    /// `CLOCK_MONOTONIC` (the clock of `bpf_ktime_get_ns`) in ns at, or a
    /// little before, `start`: a deadline converted with it ends early,
    /// never late.
    monotonic_at_start: u64,
    counters: GateCounters,
    /// The kernel-side shortcut, once the rules are in. Locked after the
    /// filter, never before.
    shortcut: Mutex<Option<ShortcutLink>>,
}

/// The gate's side of the shortcut.
#[derive(Debug)]
struct ShortcutLink {
    shortcut: Arc<Shortcut>,
    /// Each rule's count already told to the filter.
    told: [u64; 2],
    /// The end of the last arming of each verdict, for the SYNs counted
    /// after it.
    last_until: [Nanos; 2],
    /// What is armed: the slot and its end, gate time.
    armed: Option<(usize, Nanos)>,
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
        let counters = GateCounters::new();
        let listeners = protected(&counters, &listeners);
        let monotonic_at_start = monotonic_ns();
        Gate {
            filter: Mutex::new(filter),
            listeners: RwLock::new(Arc::new(listeners)),
            retransmits: Mutex::new(RetransmitTable::new(RETRANSMIT_WINDOW)),
            dry_run,
            reject_mark,
            start: Instant::now(),
            monotonic_at_start,
            counters,
            shortcut: Mutex::new(None),
        }
    }

    /// Connects the kernel-side shortcut of the rules (or none): from now
    /// on the gate arms it after each batch and tells the filter of the
    /// SYNs it took. The same one again keeps its state.
    pub fn attach_shortcut(&self, shortcut: Option<Arc<Shortcut>>) {
        let _filter = self.lock_filter();
        let mut link = self.lock_shortcut();
        match (&*link, shortcut) {
            (Some(old), Some(new)) if Arc::ptr_eq(&old.shortcut, &new) => {}
            (_, new) => {
                if let Some(old) = link.as_ref() {
                    old.shortcut.disarm();
                }
                *link = new.map(|shortcut| {
                    shortcut.disarm();
                    ShortcutLink {
                        told: shortcut.counts(),
                        shortcut,
                        last_until: [Nanos::ZERO; 2],
                        armed: None,
                    }
                });
            }
        }
    }

    fn lock_shortcut(&self) -> MutexGuard<'_, Option<ShortcutLink>> {
        self.shortcut
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Tells `filter` of the SYNs the shortcut took since the last time,
    /// as arrivals just before the end of the arming they came under, and
    /// counts them.
    fn tell_filter(&self, filter: &mut dyn SynFilter, now: Nanos) {
        let mut guard = self.lock_shortcut();
        let Some(link) = guard.as_mut() else { return };
        let counts = link.shortcut.counts();
        for (slot, &verdict) in shortcut::VERDICTS.iter().enumerate() {
            let new = counts[slot].wrapping_sub(link.told[slot]);
            if new == 0 {
                continue;
            }
            link.told[slot] = counts[slot];
            let at = now.min(Nanos(link.last_until[slot].0.saturating_sub(1)));
            let disagreed = filter.on_decided_elsewhere(new, verdict, at);
            let (counts, by_shortcut) = match verdict {
                FilterVerdict::Reject => (
                    GateCounts {
                        rejected: new,
                        ..GateCounts::default()
                    },
                    &self.counters.shortcut_rejected,
                ),
                _ => (
                    GateCounts {
                        dropped: new,
                        ..GateCounts::default()
                    },
                    &self.counters.shortcut_dropped,
                ),
            };
            self.counters.add(&counts);
            by_shortcut.inc_by(new);
            if disagreed > 0 {
                self.counters.shortcut_disagreed.inc_by(disagreed);
            }
        }
    }

    /// Arms the shortcut with the filter's constant verdict as of `now`,
    /// or disarms it (nothing to do when that is what is armed).
    fn arm_shortcut(&self, filter: &dyn SynFilter, now: Nanos) {
        let mut guard = self.lock_shortcut();
        let Some(link) = guard.as_mut() else { return };
        let wanted = filter
            .constant_until(now)
            .and_then(|c| Some((shortcut::slot(c.verdict)?, c.until)));
        if wanted == link.armed {
            return;
        }
        match wanted {
            Some((slot, until)) => {
                link.shortcut.arm(
                    shortcut::VERDICTS[slot],
                    self.monotonic_at_start.saturating_add(until.0),
                );
                link.last_until[slot] = until;
            }
            None => link.shortcut.disarm(),
        }
        link.armed = wanted;
    }

    /// The end of what the shortcut is armed with (gate time), if anything.
    pub fn shortcut_deadline(&self) -> Option<Nanos> {
        self.lock_shortcut()
            .as_ref()
            .and_then(|link| link.armed.map(|(_, until)| until))
    }

    /// Brings the counters and the filter up to date with the shortcut.
    pub fn sync_shortcut(&self) {
        drop(self.lock_filter());
    }

    /// Replaces the filter (a reload): the old one is told of the
    /// shortcut's SYNs first, and nothing stays armed on its word.
    pub fn replace_filter(&self, filter: Box<dyn SynFilter + Send>) {
        let mut current = self.lock_filter();
        *current = filter;
        if let Some(link) = self.lock_shortcut().as_mut() {
            link.shortcut.disarm();
            link.armed = None;
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

    /// The listeners whose SYNs the filter decides, as of now.
    pub fn listeners(&self) -> Arc<ProtectedListeners> {
        Arc::clone(
            &self
                .listeners
                .read()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        )
    }

    /// Replaces the listeners; the next batch of every worker uses them.
    pub fn set_listeners(&self, listeners: &[Listener]) {
        let listeners = Arc::new(protected(&self.counters, listeners));
        *self
            .listeners
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = listeners;
    }

    pub fn dry_run(&self) -> bool {
        self.dry_run
    }

    pub fn reject_mark(&self) -> u32 {
        self.reject_mark
    }

    /// Locks the filter, told of the SYNs the shortcut took so far. A
    /// worker that panicked while holding it left a filter that is still
    /// a valid state machine; use it.
    pub fn lock_filter(&self) -> MutexGuard<'_, Box<dyn SynFilter + Send>> {
        let mut filter = self
            .filter
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        self.tell_filter(&mut **filter, self.now());
        filter
    }

    pub fn snapshot(&self) -> FilterSnapshot {
        self.lock_filter().snapshot()
    }

    /// The filter's state as of `now`: refilled and with the periods that
    /// ended closed, even when no SYN came since (an idle period does not
    /// freeze the tokens at the last SYN). Changes no later verdict.
    pub fn snapshot_at(&self, now: Nanos) -> FilterSnapshot {
        let mut filter = self.lock_filter();
        filter.advance(now);
        filter.snapshot()
    }

    pub fn set_refill_rate(&self, refill_rate: f64) -> Result<(), FilterConfigError> {
        self.lock_filter().set_refill_rate(refill_rate)
    }
}

fn protected(counters: &GateCounters, listeners: &[Listener]) -> ProtectedListeners {
    ProtectedListeners {
        listeners: listeners.to_vec(),
        syns: listeners
            .iter()
            .map(|l| counters.listener_syns(&l.to_string()))
            .collect(),
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
    /// Verdicts, and packets the kernel could not deliver (`overruns`: id
    /// gaps) or that failed (`errors`: refused verdicts, malformed messages,
    /// failed sends).
    pub counts: GateCounts,
}

/// The verdict loop of one bound queue.
pub struct QueueWorker {
    queue: Queue,
    gate: Arc<Gate>,
    packets: Vec<(u32, PacketClass)>,
    /// The origin of each SYN of `packets`, in order.
    origins: Vec<SynOrigin>,
    /// The filter's verdict of each SYN of `packets`, in order.
    syn_verdicts: Vec<FilterVerdict>,
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
            origins: Vec::with_capacity(MAX_BATCH + 64),
            syn_verdicts: Vec::with_capacity(MAX_BATCH + 64),
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
            let busy = last_packet.is_some_and(|at: Instant| at.elapsed() < self.busy_poll);
            // Around the shortcut's deadline the worker is awake, so the
            // SYNs queued once it passes are decided (and the shortcut
            // armed again) without waiting for a wake-up.
            let now = self.gate.now();
            let deadline = self.gate.shortcut_deadline();
            let lead = Nanos(DEADLINE_LEAD.as_nanos() as u64);
            let near_deadline = deadline.is_some_and(|until| {
                now + lead >= until && now < until + Nanos(DEADLINE_SPIN.as_nanos() as u64)
            });
            // Asleep, the worker waits inside the first receive (one system
            // call per wake-up, not a poll and then a receive), until the
            // next deadline's lead at the latest.
            // Once the deadline has passed, the first SYN is decided alone:
            // it arms the shortcut again at once, instead of after a batch
            // that grows while the flood fills the queue.
            let budget = if deadline.is_some_and(|until| now >= until) {
                1
            } else {
                budget
            };
            let wait = (!busy && !near_deadline).then(|| match deadline {
                Some(until) if until > now + lead => {
                    POLL_INTERVAL.min(Duration::from_nanos((until - lead - now).0))
                }
                _ => POLL_INTERVAL,
            });
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
        self.origins.clear();
        self.syn_verdicts.clear();
        let protected = self.gate.listeners();
        let listeners = &protected.listeners[..];
        let counters = self.gate.counters();
        let mut first_read: Option<Instant> = None;
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
                                if first_read.is_none() {
                                    first_read = Some(Instant::now());
                                }
                                let class = match syn_origin(packet.payload, listeners) {
                                    Ok(origin) => {
                                        self.origins.push(origin);
                                        PacketClass::Syn
                                    }
                                    Err(reason) => PacketClass::Pass(reason),
                                };
                                self.packets.push((packet.packet_id, class));
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
                let syn_verdicts = &mut self.syn_verdicts;
                let counts = {
                    let mut filter = self.gate.lock_filter();
                    let counts =
                        decide_batch_with(&mut **filter, now, &self.packets, dry_run, emit, |v| {
                            syn_verdicts.push(v)
                        });
                    self.gate.arm_shortcut(&**filter, now);
                    counts
                };
                let mut retransmitted = 0u64;
                {
                    let mut table = self
                        .gate
                        .retransmits
                        .lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner());
                    for origin in &self.origins {
                        retransmitted += u64::from(table.on_syn(origin.key, now));
                    }
                }
                if retransmitted > 0 {
                    counters.retransmitted_syns.inc_by(retransmitted);
                }
                for (origin, verdict) in self.origins.iter().zip(&self.syn_verdicts) {
                    if let Some(syns) = protected.syns.get(origin.listener) {
                        let index = match verdict {
                            FilterVerdict::Accept => 0,
                            FilterVerdict::Drop => 1,
                            FilterVerdict::Reject => 2,
                        };
                        syns[index].inc();
                    }
                }
                counts
            } else {
                // No SYN: nothing to lock; every packet passes.
                let mut emit = emit;
                for &(id, _) in &self.packets {
                    emit(id, GateAction::Accept);
                }
                GateCounts {
                    passed: handled as u64,
                    ..GateCounts::default()
                }
            };
            if let Err(e) = self.queue.send_verdicts(&mut self.verdicts) {
                // The packets stay queued until the kernel's queue is full
                // and fail-open takes over; count it and go on.
                errors += 1;
                eprintln!("vantage gate: queue {}: {e}", self.queue.queue_num());
            }
            if let Some(at) = first_read {
                counters.verdict_latency.observe(at.elapsed().as_secs_f64());
            }
            counters.add(&counts);
            self.report.counts.add(&counts);
            self.report.packets += handled as u64;
            self.report.batches += 1;
        }
        if overruns > 0 {
            counters.overruns.inc_by(overruns);
            self.report.counts.overruns += overruns;
        }
        if errors > 0 {
            counters.errors.inc_by(errors);
            self.report.counts.errors += errors;
        }
        Ok(handled)
    }
}

/// `CLOCK_MONOTONIC` now, in ns.
fn monotonic_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes into the timespec given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    (now.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(now.tv_nsec as u64)
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
    use vantage_core::admission::syn::{EmptyAction, TokenBucket, TokenBucketFilter};

    #[test]
    fn a_snapshot_at_now_shows_the_tokens_refilled_while_idle() {
        let filter = TokenBucketFilter::new(TokenBucket::new(4, 2.0).unwrap(), EmptyAction::Drop);
        let gate = Gate::new(Box::new(filter), Vec::new(), false, 0x5647);
        {
            let mut filter = gate.lock_filter();
            for _ in 0..4 {
                filter.on_syn(Nanos::ZERO);
            }
        }
        assert_eq!(gate.snapshot().tokens, 0);
        assert_eq!(gate.snapshot_at(Nanos::from_secs(1)).tokens, 2);
        assert_eq!(gate.snapshot().tokens, 2);
        assert_eq!(gate.snapshot_at(Nanos::from_secs(30)).tokens, 4);
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
}
