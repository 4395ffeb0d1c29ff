//! Server-side kernel counters: `/proc/net/netstat` and `/proc/net/snmp` of
//! the server namespace, sampled at a fixed interval and stored as
//! per-interval deltas.
//!
//! These are the counters Certes (Section 3) reads to estimate client-
//! perceived time from the server alone — SYNs dropped because the accept
//! queue was full (`TcpExt.ListenOverflows`, `TcpExt.ListenDrops`), the
//! SYN queue was full (`TcpExt.TCPReqQFullDrop`), connections accepted
//! (`Tcp.PassiveOpens`) — so a run records them next to the client-side
//! ground truth they will be compared with.
//!
//! Parsing and reading are [`vantage_sys::proc_net`]'s; sampling runs on a
//! thread that entered the server namespace.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::load::client::realtime_ns;
use serde::Serialize;
use vantage_sys::proc_net::{
    read_thread_namespace_counters, ProcNetError, LISTEN_DROPS, LISTEN_OVERFLOWS, PASSIVE_OPENS,
    REQ_QUEUE_FULL_DROPS,
};

pub use vantage_sys::proc_net::Counters;

/// Counters shown per interval in the CSV, in this order. All counters are
/// kept in the totals.
pub const INTERVAL_COLUMNS: &[&str] = &[
    LISTEN_OVERFLOWS,
    LISTEN_DROPS,
    REQ_QUEUE_FULL_DROPS,
    "TcpExt.TCPReqQFullDoCookies",
    "TcpExt.SyncookiesSent",
    PASSIVE_OPENS,
    "Tcp.AttemptFails",
    "Tcp.EstabResets",
    "Tcp.InSegs",
    "Tcp.OutSegs",
    "Tcp.RetransSegs",
    "TcpExt.TCPTimeouts",
    "TcpExt.TCPFastRetrans",
    "TcpExt.TCPSynRetrans",
];

/// Change of every counter from `before` to `after` (counters that went
/// backwards, which kernel counters do not, count as 0).
pub fn delta(before: &Counters, after: &Counters) -> Counters {
    after
        .iter()
        .map(|(name, value)| {
            let base = before.get(name).copied().unwrap_or(0);
            (name.clone(), value.saturating_sub(base))
        })
        .collect()
}

/// One sampling interval's deltas.
#[derive(Clone, Debug, Serialize)]
pub struct IntervalSample {
    /// End of the interval, ns since the UNIX epoch (CLOCK_REALTIME).
    pub end_ns: u64,
    pub seconds: f64,
    pub deltas: Counters,
}

/// Every sample of a run plus the whole-run delta of every counter.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CounterRecord {
    pub intervals: Vec<IntervalSample>,
    pub totals: Counters,
}

impl CounterRecord {
    /// Whole-run delta of one counter (0 if the kernel has no such counter).
    pub fn total(&self, name: &str) -> u64 {
        self.totals.get(name).copied().unwrap_or(0)
    }

    /// Writes the per-interval CSV: `end_ns,seconds,<INTERVAL_COLUMNS…>`.
    pub fn write_csv(&self, path: &Path) -> Result<(), csv::Error> {
        let mut writer = csv::Writer::from_path(path)?;
        let mut header = vec!["end_ns".to_string(), "seconds".to_string()];
        header.extend(INTERVAL_COLUMNS.iter().map(|c| c.to_string()));
        writer.write_record(&header)?;
        for sample in &self.intervals {
            let mut row = vec![sample.end_ns.to_string(), format!("{:.6}", sample.seconds)];
            row.extend(
                INTERVAL_COLUMNS
                    .iter()
                    .map(|c| sample.deltas.get(*c).copied().unwrap_or(0).to_string()),
            );
            writer.write_record(&row)?;
        }
        writer.flush()?;
        Ok(())
    }
}

/// Samples the calling thread's namespace every `interval` until `stop` is
/// set (checked every 10 ms), then takes a last sample. Call it on a thread
/// that entered the server namespace.
pub fn sample_until(interval: Duration, stop: &AtomicBool) -> Result<CounterRecord, ProcNetError> {
    let first = read_thread_namespace_counters()?;
    let mut previous = first.clone();
    let mut previous_at = Instant::now();
    let mut record = CounterRecord::default();
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        if stopping || previous_at.elapsed() >= interval {
            let now = read_thread_namespace_counters()?;
            record.intervals.push(IntervalSample {
                end_ns: realtime_ns(),
                seconds: previous_at.elapsed().as_secs_f64(),
                deltas: delta(&previous, &now),
            });
            previous = now;
            previous_at = Instant::now();
        }
        if stopping {
            break;
        }
        std::thread::sleep(Duration::from_millis(10).min(interval));
    }
    record.totals = delta(&first, &previous);
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;
    use vantage_sys::proc_net::parse_counters;

    const NETSTAT: &str = "TcpExt: SyncookiesSent ListenOverflows ListenDrops\n\
TcpExt: 0 12 14\n\
IpExt: InNoRoutes InOctets\n\
IpExt: 0 123456\n";

    #[test]
    fn delta_is_per_counter_difference() {
        let before = parse_counters(NETSTAT, "a").unwrap();
        let after = parse_counters(&NETSTAT.replace("0 12 14", "3 20 25"), "b").unwrap();
        let d = delta(&before, &after);
        assert_eq!(d["TcpExt.ListenOverflows"], 8);
        assert_eq!(d["TcpExt.ListenDrops"], 11);
        assert_eq!(d["IpExt.InOctets"], 0);
    }

    #[test]
    fn samples_this_machines_counters_until_stopped() {
        let stop = AtomicBool::new(true);
        let record = sample_until(Duration::from_millis(10), &stop).unwrap();
        assert_eq!(record.intervals.len(), 1);
        assert!(record.totals.contains_key("TcpExt.ListenDrops"));
        assert!(record.totals.contains_key("Tcp.PassiveOpens"));
    }
}
