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
//! The files are read through `/proc/thread-self/net/…` from a thread that
//! entered the server namespace: `/proc/self/net` would show the namespace
//! of the process's main thread instead.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

/// Counter values keyed `Group.Name` (`TcpExt.ListenDrops`, `Tcp.PassiveOpens`).
pub type Counters = BTreeMap<String, u64>;

/// Counters shown per interval in the CSV, in this order. All counters are
/// kept in the totals.
pub const INTERVAL_COLUMNS: &[&str] = &[
    "TcpExt.ListenOverflows",
    "TcpExt.ListenDrops",
    "TcpExt.TCPReqQFullDrop",
    "TcpExt.TCPReqQFullDoCookies",
    "TcpExt.SyncookiesSent",
    "Tcp.PassiveOpens",
    "Tcp.AttemptFails",
    "Tcp.EstabResets",
    "Tcp.InSegs",
    "Tcp.OutSegs",
    "Tcp.RetransSegs",
    "TcpExt.TCPTimeouts",
    "TcpExt.TCPFastRetrans",
    "TcpExt.TCPSynRetrans",
];

#[derive(Debug, thiserror::Error)]
pub enum CounterError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}, line {line}: {problem}")]
    Malformed {
        path: String,
        line: usize,
        problem: String,
    },
}

/// Parses the `Group: names…` / `Group: values…` line pairs of
/// `/proc/net/netstat` and `/proc/net/snmp` (`path` only names the source
/// in errors).
pub fn parse(text: &str, path: &str) -> Result<Counters, CounterError> {
    let malformed = |line: usize, problem: String| CounterError::Malformed {
        path: path.to_string(),
        line,
        problem,
    };
    let mut counters = Counters::new();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if !lines.len().is_multiple_of(2) {
        return Err(malformed(
            lines.len(),
            "odd number of lines: a header without values".into(),
        ));
    }
    for (pair, chunk) in lines.chunks(2).enumerate() {
        let line = pair * 2 + 1;
        let (group, names) = chunk[0]
            .split_once(':')
            .ok_or_else(|| malformed(line, "no `Group:` prefix".into()))?;
        let (value_group, values) = chunk[1]
            .split_once(':')
            .ok_or_else(|| malformed(line + 1, "no `Group:` prefix".into()))?;
        if group != value_group {
            return Err(malformed(
                line + 1,
                format!("values of `{value_group}` follow names of `{group}`"),
            ));
        }
        let names: Vec<&str> = names.split_whitespace().collect();
        let values: Vec<&str> = values.split_whitespace().collect();
        if names.len() != values.len() {
            return Err(malformed(
                line + 1,
                format!(
                    "{} names but {} values in `{group}`",
                    names.len(),
                    values.len()
                ),
            ));
        }
        for (name, value) in names.iter().zip(values) {
            // Tcp.MaxConn is −1 ("no limit"): kept as 0, it is a constant.
            let parsed = match value.parse::<i64>() {
                Ok(v) => v.max(0) as u64,
                Err(_) => value.parse::<u64>().map_err(|_| {
                    malformed(
                        line + 1,
                        format!("`{group}.{name}` = {value:?} is not a number"),
                    )
                })?,
            };
            counters.insert(format!("{group}.{name}"), parsed);
        }
    }
    Ok(counters)
}

/// Reads both files of the calling thread's network namespace.
pub fn read_current_namespace() -> Result<Counters, CounterError> {
    let mut all = Counters::new();
    for file in ["netstat", "snmp"] {
        let path = format!("/proc/thread-self/net/{file}");
        let text = std::fs::read_to_string(&path).map_err(|source| CounterError::Read {
            path: path.clone(),
            source,
        })?;
        all.extend(parse(&text, &path)?);
    }
    Ok(all)
}

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

/// Nanoseconds since the UNIX epoch, from CLOCK_REALTIME.
pub fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Samples the calling thread's namespace every `interval` until `stop` is
/// set (checked every 10 ms), then takes a last sample. Call it on a thread
/// that entered the server namespace.
pub fn sample_until(interval: Duration, stop: &AtomicBool) -> Result<CounterRecord, CounterError> {
    let first = read_current_namespace()?;
    let mut previous = first.clone();
    let mut previous_at = Instant::now();
    let mut record = CounterRecord::default();
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        if stopping || previous_at.elapsed() >= interval {
            let now = read_current_namespace()?;
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

    const NETSTAT: &str = "TcpExt: SyncookiesSent ListenOverflows ListenDrops\n\
TcpExt: 0 12 14\n\
IpExt: InNoRoutes InOctets\n\
IpExt: 0 123456\n";

    #[test]
    fn parses_name_value_pairs_by_group() {
        let c = parse(NETSTAT, "netstat").unwrap();
        assert_eq!(c["TcpExt.ListenOverflows"], 12);
        assert_eq!(c["TcpExt.ListenDrops"], 14);
        assert_eq!(c["IpExt.InOctets"], 123456);
        let snmp = parse(
            "Tcp: RtoAlgorithm MaxConn PassiveOpens\nTcp: 1 -1 7\n",
            "snmp",
        )
        .unwrap();
        assert_eq!(snmp["Tcp.MaxConn"], 0);
        assert_eq!(snmp["Tcp.PassiveOpens"], 7);
    }

    #[test]
    fn malformed_input_names_file_and_line() {
        let e = parse("TcpExt: A B\nTcpExt: 1\n", "/proc/x")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/proc/x, line 2") && e.contains("2 names but 1 values"),
            "{e}"
        );
        let e = parse("TcpExt: A\nIpExt: 1\n", "f").unwrap_err().to_string();
        assert!(e.contains("line 2"), "{e}");
        let e = parse("TcpExt: A\nTcpExt: x\n", "f")
            .unwrap_err()
            .to_string();
        assert!(e.contains("TcpExt.A"), "{e}");
        assert!(parse("TcpExt: A\n", "f").is_err());
    }

    #[test]
    fn delta_is_per_counter_difference() {
        let before = parse(NETSTAT, "a").unwrap();
        let after = parse(&NETSTAT.replace("0 12 14", "3 20 25"), "b").unwrap();
        let d = delta(&before, &after);
        assert_eq!(d["TcpExt.ListenOverflows"], 8);
        assert_eq!(d["TcpExt.ListenDrops"], 11);
        assert_eq!(d["IpExt.InOctets"], 0);
    }

    #[test]
    fn reads_this_machines_counters() {
        let c = read_current_namespace().unwrap();
        assert!(c.contains_key("TcpExt.ListenDrops"));
        assert!(c.contains_key("Tcp.PassiveOpens"));
    }
}
