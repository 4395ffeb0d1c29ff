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
//! * ACCEPTED_i: client connections accepted — counted at the accept, in
//!   the interval of the accept, where Certes counts a SYN in the interval
//!   it arrived (departure: the proxy sees `accept()`, not the SYN; under
//!   a long accept-queue wait the count lags by that wait);
//! * COMPLETED_i, Σ SYN-to-END, Σ RTT: client connections that ended, END
//!   being when the proxy closes the connection (its task ends: the client
//!   closed, or a timeout, or the proxy refused it at the connection cap).
//!   For a client that closes after its last response that is the paper's
//!   END (the last response byte) plus the close's trip; for a keep-alive
//!   client left idle it includes the idle time until the close. The SYN's
//!   arrival is estimated once at accept from `TCP_INFO`
//!   ([`syn_before_accept`]: accept − accept-queue wait − handshake RTT);
//! * DROPPED_i: the change of `TcpExt.ListenDrops` of the proxy's network
//!   namespace (`vantage_sys::proc_net`) — the proxy sees no dropped SYN,
//!   and the kernel's counter is the namespace's, every listener in it.
//!
//! Per connection the cost is one `getsockopt(TCP_INFO)` at accept and two
//! short lock holds; nothing is allocated.

use std::io;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use vantage_core::certes::counters::{syn_before_accept, IntervalCounters};
use vantage_core::certes::ingest::{counters_jsonl_line, CountersRow};
use vantage_core::Nanos;
use vantage_sys::proc_net::{self, LISTEN_DROPS};
use vantage_sys::tcp_info::tcp_info;

use super::config::CertesStreamConfig;
use crate::daemon::LogFile;

/// The counters of the interval in progress and the file they go to.
pub struct CertesStream {
    interval: Nanos,
    counts: Mutex<IntervalCounters>,
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
    /// Opens (appends to) the log.
    pub fn open(config: &CertesStreamConfig) -> io::Result<CertesStream> {
        Ok(CertesStream {
            interval: Nanos::from_millis(config.interval_ms),
            counts: Mutex::new(IntervalCounters::default()),
            log: Mutex::new(LogFile::open(&config.log)?),
            failing: AtomicBool::new(false),
        })
    }

    /// At accept: one `TCP_INFO` read. Should it fail, the SYN is placed
    /// at the accept and the RTT taken as 0.
    pub fn accepted(&self, socket: impl AsFd) -> Accepted {
        let at = Instant::now();
        let (syn_before, rtt) = match tcp_info(socket) {
            Ok(info) => (
                syn_before_accept(info.last_ack_recv_ms, info.rtt_us),
                Nanos::from_micros(u64::from(info.rtt_us)),
            ),
            Err(_) => (Nanos::ZERO, Nanos::ZERO),
        };
        lock(&self.counts).accepted += 1;
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
        let mut counts = lock(&self.counts);
        counts.completed += 1;
        counts.syn_to_end_sum = Nanos(counts.syn_to_end_sum.0.saturating_add(syn_to_end));
        counts.rtt_sum = Nanos(counts.rtt_sum.0.saturating_add(accepted.rtt.0));
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

    /// Ends the interval that started at `t_start` (UNIX ns) and writes it.
    fn close_interval(&self, t_start: u64, dropped: u64) {
        let mut counters = std::mem::take(&mut *lock(&self.counts));
        counters.dropped = dropped;
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
}

/// Writes one row at every interval boundary of the wall clock until
/// `stop`, then the interval in progress.
pub fn run_loop(stream: Arc<CertesStream>, stop: Arc<AtomicBool>) {
    let step = stream.interval.0.max(1);
    let mut start = unix_nanos() / step * step;
    let mut drops_before = listen_drops();
    if let Err(e) = &drops_before {
        stream.report(Err(format!("DROPPED is written as 0: {e}")));
    }
    loop {
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
        stream.close_interval(start, dropped);
        if stopping {
            return;
        }
        // A clock that jumped: go on from the interval it is in now.
        let now = unix_nanos();
        start = if now >= end + step || now < start {
            now / step * step
        } else {
            end
        };
    }
}
