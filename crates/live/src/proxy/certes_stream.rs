//! `[certes]`: the listener's Certes counters (Olshefski, Nieh and Agrawal,
//! TOCS 2004, Section 3.1 and Section 4, Eq. 2–4) per interval, appended
//! as one JSON line each in the counters format — written by its one owner,
//! `vantage_core::certes::ingest::counters_jsonl_line` — which `vantage
//! certes estimate --counters` and `certes watch`'s `[proxy]` input read.
//!
//! Intervals are Δ long on the wall clock's grid (they start at k × Δ in
//! UNIX time, `t_start_s`), so that a reader can put them beside its own.
//! Per interval:
//!
//! * ACCEPTED_i: client connections whose SYN arrived in the interval and
//!   was accepted. The proxy sees `accept()`, not the SYN; the SYN's
//!   arrival is estimated once at accept from `TCP_INFO`
//!   ([`syn_before_accept`]: accept − accept-queue wait − handshake RTT),
//!   and the connection counts in that interval. So that it can, an
//!   interval's row is written `accept_lag_ms` after the interval ends
//!   (default 1 s); a connection whose SYN is older than the oldest
//!   unwritten interval counts in that one and as late
//!   (`vantage_proxy_certes_late_accepts_total`);
//! * COMPLETED_i, Σ SYN-to-END, Σ RTT: client connections that ended, in
//!   the interval in progress when the proxy closes the connection (its
//!   task ends: the client closed, or a timeout, or the proxy refused it at
//!   the connection cap). For a client that closes after its last response
//!   that is the paper's END (the last response byte) plus the close's
//!   trip; for a keep-alive client left idle it includes the idle time
//!   until the close;
//! * DROPPED_i: the change of `TcpExt.ListenDrops` of the proxy's network
//!   namespace over the interval (`vantage_sys::proc_net`) — the proxy sees
//!   no dropped SYN, and the kernel's counter is the namespace's, every
//!   listener in it.
//!
//! Per connection the cost is one `getsockopt(TCP_INFO)` at accept and two
//! short lock holds; nothing is allocated.

use std::collections::VecDeque;
use std::io;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use prometheus_client::metrics::counter::Counter;
use vantage_core::certes::counters::{syn_before_accept, IntervalCounters};
use vantage_core::certes::ingest::{counters_jsonl_line, CountersRow};
use vantage_core::Nanos;
use vantage_sys::proc_net::{self, LISTEN_DROPS};
use vantage_sys::tcp_info::tcp_info;

use super::config::CertesStreamConfig;
use crate::daemon::LogFile;

/// The intervals not yet written: the one in progress (last) and the
/// closed ones still waiting for late accepts, oldest first. Pure
/// bookkeeping on UNIX nanoseconds, no clock of its own.
#[derive(Debug)]
pub struct PendingIntervals {
    step: u64,
    /// Start of `rows[0]`, on the grid of `step`.
    first_start: u64,
    rows: VecDeque<IntervalCounters>,
}

impl PendingIntervals {
    /// Starts with the interval that holds `now` in progress.
    pub fn new(step: Nanos, now: u64) -> PendingIntervals {
        let step = step.0.max(1);
        let mut rows = VecDeque::new();
        rows.push_back(IntervalCounters::default());
        PendingIntervals {
            step,
            first_start: now / step * step,
            rows,
        }
    }

    /// Start of the interval in progress.
    pub fn current_start(&self) -> u64 {
        self.first_start + self.step * (self.rows.len() as u64 - 1)
    }

    /// A connection accepted whose SYN arrived at `syn`: counted in the
    /// interval of the SYN, or — older than every unwritten interval —
    /// in the oldest one; returns whether it was late. A SYN after the
    /// interval in progress began (a clock step) counts in that one.
    pub fn accept(&mut self, syn: u64) -> bool {
        let late = syn < self.first_start;
        let index = usize::try_from(syn.saturating_sub(self.first_start) / self.step)
            .unwrap_or(usize::MAX)
            .min(self.rows.len() - 1);
        if let Some(row) = self.rows.get_mut(index) {
            row.accepted += 1;
        }
        late
    }

    /// A connection ended now: counted in the interval in progress.
    pub fn complete(&mut self, syn_to_end: Nanos, rtt: Nanos) {
        if let Some(row) = self.rows.back_mut() {
            row.completed += 1;
            row.syn_to_end_sum = Nanos(row.syn_to_end_sum.0.saturating_add(syn_to_end.0));
            row.rtt_sum = Nanos(row.rtt_sum.0.saturating_add(rtt.0));
        }
    }

    /// Ends the interval in progress with the SYNs the kernel dropped in
    /// it and starts the next one.
    pub fn close_current(&mut self, dropped: u64) {
        if let Some(row) = self.rows.back_mut() {
            row.dropped = dropped;
        }
        self.rows.push_back(IntervalCounters::default());
    }

    /// Takes the oldest closed interval (its start and counters) once it
    /// ended at least `lag` before `now`, or always with `flush`.
    pub fn take_due(
        &mut self,
        now: u64,
        lag: Nanos,
        flush: bool,
    ) -> Option<(u64, IntervalCounters)> {
        if self.rows.len() < 2 {
            return None;
        }
        let end = self.first_start + self.step;
        if !flush && now < end.saturating_add(lag.0) {
            return None;
        }
        let row = self.rows.pop_front()?;
        let start = self.first_start;
        self.first_start = end;
        Some((start, row))
    }

    /// After a clock step: everything closed is taken first (`take_due`
    /// with `flush`), then the interval in progress restarts on the grid
    /// at `now`, its counts kept.
    pub fn restart_at(&mut self, now: u64) {
        let current = self.rows.pop_back().unwrap_or_default();
        self.rows.clear();
        self.rows.push_back(current);
        self.first_start = now / self.step * self.step;
    }
}

/// The counters of the intervals not yet written and the file they go to.
pub struct CertesStream {
    interval: Nanos,
    accept_lag: Nanos,
    pending: Mutex<PendingIntervals>,
    late_accepts: Counter,
    log: Mutex<LogFile>,
    /// A write or a `/proc` read failed (said once, then again after a
    /// success).
    failing: AtomicBool,
}

/// A connection as it was accepted: when, and how long before its SYN
/// came.
#[derive(Clone, Copy, Debug)]
pub struct Accepted {
    at: Instant,
    syn_before: Nanos,
    rtt: Nanos,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

fn unix_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

fn listen_drops() -> Result<u64, String> {
    let counters = proc_net::read_thread_namespace_counters().map_err(|e| e.to_string())?;
    counters
        .get(LISTEN_DROPS)
        .copied()
        .ok_or_else(|| format!("no {LISTEN_DROPS} in the namespace's netstat"))
}

impl CertesStream {
    /// Opens (appends to) the log; late accepts are counted in
    /// `late_accepts`.
    pub fn open(config: &CertesStreamConfig, late_accepts: Counter) -> io::Result<CertesStream> {
        let interval = Nanos::from_millis(config.interval_ms);
        Ok(CertesStream {
            interval,
            accept_lag: Nanos::from_millis(config.accept_lag_ms),
            pending: Mutex::new(PendingIntervals::new(interval, unix_nanos())),
            late_accepts,
            log: Mutex::new(LogFile::open(&config.log)?),
            failing: AtomicBool::new(false),
        })
    }

    /// At accept: one `TCP_INFO` read. Should it fail, the SYN is placed
    /// at the accept and the RTT taken as 0.
    pub fn accepted(&self, socket: impl AsFd) -> Accepted {
        let at = Instant::now();
        let now = unix_nanos();
        let (syn_before, rtt) = match tcp_info(socket) {
            Ok(info) => (
                syn_before_accept(info.last_ack_recv_ms, info.rtt_us),
                Nanos::from_micros(u64::from(info.rtt_us)),
            ),
            Err(_) => (Nanos::ZERO, Nanos::ZERO),
        };
        if lock(&self.pending).accept(now.saturating_sub(syn_before.0)) {
            self.late_accepts.inc();
        }
        Accepted {
            at,
            syn_before,
            rtt,
        }
    }

    /// At the connection's close.
    pub fn ended(&self, accepted: &Accepted) {
        let syn_to_end = accepted
            .syn_before
            .0
            .saturating_add(u64::try_from(accepted.at.elapsed().as_nanos()).unwrap_or(u64::MAX));
        lock(&self.pending).complete(Nanos(syn_to_end), accepted.rtt);
    }

    /// Reopens the log by its path (SIGUSR1, after logrotate).
    pub fn reopen(&self) -> io::Result<()> {
        lock(&self.log).reopen()
    }

    fn report(&self, result: Result<(), String>) {
        match result {
            Ok(()) => self.failing.store(false, Ordering::Relaxed),
            Err(e) => {
                if !self.failing.swap(true, Ordering::Relaxed) {
                    eprintln!("vantage proxy: certes log: {e}");
                }
            }
        }
    }

    /// Writes one closed interval that started at `t_start` (UNIX ns).
    fn write_row(&self, t_start: u64, counters: IntervalCounters) {
        let row = CountersRow {
            t_start_s: Nanos(t_start).as_secs_f64_exact(),
            interval: self.interval,
            class: String::new(),
            counters,
        };
        let line = counters_jsonl_line(&row);
        let mut log = lock(&self.log);
        let written = log
            .write_line(line.as_bytes())
            .map_err(|e| format!("{}: {e}", log.path().display()));
        drop(log);
        self.report(written);
    }

    /// Writes every closed interval that is due (all of them with
    /// `flush`), oldest first.
    fn write_due(&self, now: u64, flush: bool) {
        loop {
            let due = lock(&self.pending).take_due(now, self.accept_lag, flush);
            match due {
                Some((start, counters)) => self.write_row(start, counters),
                None => return,
            }
        }
    }
}

/// At every interval boundary of the wall clock: closes the interval in
/// progress with its SYN drops and writes the closed intervals that ended
/// `accept_lag_ms` ago or more; at `stop`, closes the interval in progress
/// and writes everything.
pub fn run_loop(stream: Arc<CertesStream>, stop: Arc<AtomicBool>) {
    let step = stream.interval.0.max(1);
    let mut drops_before = listen_drops();
    if let Err(e) = &drops_before {
        stream.report(Err(format!("DROPPED is written as 0: {e}")));
    }
    loop {
        let start = lock(&stream.pending).current_start();
        let end = start + step;
        let stopping = loop {
            if stop.load(Ordering::Relaxed) {
                break true;
            }
            let now = unix_nanos();
            if now >= end {
                break false;
            }
            std::thread::sleep(Duration::from_nanos(end - now).min(Duration::from_millis(50)));
        };
        let drops_now = listen_drops();
        let dropped = match (&drops_before, &drops_now) {
            (Ok(before), Ok(now)) => now.saturating_sub(*before),
            _ => 0,
        };
        if let Err(e) = &drops_now {
            stream.report(Err(format!("DROPPED is written as 0: {e}")));
        }
        drops_before = drops_now;
        lock(&stream.pending).close_current(dropped);
        let now = unix_nanos();
        if stopping {
            stream.write_due(now, true);
            return;
        }
        // A clock that jumped: write what is closed and go on from the
        // interval the clock is in now.
        if now >= end + step || now < start {
            stream.write_due(now, true);
            lock(&stream.pending).restart_at(now);
        } else {
            stream.write_due(now, false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn an_accept_counts_in_the_interval_its_syn_arrived_in() {
        let mut pending = PendingIntervals::new(Nanos::from_millis(250), 10_000 * MS);
        assert_eq!(pending.current_start(), 10_000 * MS);
        pending.close_current(3); // [10.00, 10.25) closed, 3 drops
        pending.close_current(0); // [10.25, 10.50) closed
                                  // Accepted in [10.50, 10.75) after 400 ms in the accept queue: the
                                  // SYN came at 10.20 s, in the first interval.
        assert!(!pending.accept(10_200 * MS));
        assert!(!pending.accept(10_600 * MS));
        pending.complete(Nanos::from_millis(450), Nanos::from_millis(1));
        let lag = Nanos::from_millis(1000);
        // The first interval ended at 10.25 s: not due before 11.25 s.
        assert_eq!(pending.take_due(11_249 * MS, lag, false), None);
        let (start, first) = pending.take_due(11_250 * MS, lag, false).unwrap();
        assert_eq!(start, 10_000 * MS);
        assert_eq!((first.dropped, first.accepted, first.completed), (3, 1, 0));
        // An accept whose SYN is older than every unwritten interval counts
        // in the oldest one, as late.
        assert!(pending.accept(10_100 * MS));
        let (start, second) = pending.take_due(11_500 * MS, lag, false).unwrap();
        assert_eq!(start, 10_250 * MS);
        assert_eq!((second.accepted, second.completed), (1, 0));
        // The interval in progress is never taken, even with flush.
        assert_eq!(pending.take_due(20_000 * MS, lag, true), None);
        pending.close_current(0);
        let (start, third) = pending.take_due(0, lag, true).unwrap();
        assert_eq!(start, 10_500 * MS);
        assert_eq!((third.accepted, third.completed), (1, 1));
        assert_eq!(third.syn_to_end_sum, Nanos::from_millis(450));
    }

    #[test]
    fn a_syn_in_the_future_counts_in_the_interval_in_progress() {
        let mut pending = PendingIntervals::new(Nanos::from_millis(250), 10_000 * MS);
        assert!(!pending.accept(99_000 * MS));
        pending.close_current(0);
        let (_, row) = pending.take_due(0, Nanos::ZERO, true).unwrap();
        assert_eq!(row.accepted, 1);
    }

    #[test]
    fn a_clock_step_restarts_on_the_new_grid_keeping_the_counts() {
        let mut pending = PendingIntervals::new(Nanos::from_millis(250), 10_000 * MS);
        pending.close_current(0);
        pending.accept(10_300 * MS);
        assert!(pending.take_due(0, Nanos::ZERO, true).is_some());
        pending.restart_at(50_123 * MS);
        assert_eq!(pending.current_start(), 50_000 * MS);
        pending.close_current(0);
        let (start, row) = pending.take_due(0, Nanos::ZERO, true).unwrap();
        assert_eq!((start, row.accepted), (50_000 * MS, 1));
    }
}
