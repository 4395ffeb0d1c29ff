//! The gate's log: JSON Lines, one object per interval, flushed as written.
//! The record is `vantage_core::admission::syn::record::IntervalRecord`,
//! the one format its readers parse too.
//!
//! ```json
//! {"time_s":3.0,"interval_s":1.0,"elapsed_s":1.0002,"arrivals":130,"accepted":120,
//!  "dropped":10,"rejected":0,"passed":0,"overruns":0,"errors":0,"dry_run":false,
//!  "filter":{"tokens":0,"bucket_size":120,"refill_rate":120.0,"arrival_rate":101.3,…}}
//! ```
//!
//! * `time_s` — start of the interval, seconds since the gate started
//!   (`CLOCK_MONOTONIC`), on the grid `k × interval_s`;
//! * `t_start_unix_s` — the same instant on the wall clock: the wall clock
//!   when the gate started plus `time_s` (absent in older logs);
//! * `interval_s` — the configured interval; `elapsed_s` — the time the
//!   counts really cover (shorter for the last record, written on exit);
//! * `arrivals` — SYNs to a listener; `accepted`, `dropped`, `rejected` —
//!   the filter's verdicts on them (also in a dry run, where every packet
//!   was accepted anyway); `passed` — other queued packets; `overruns` —
//!   packets the kernel accepted unseen; `errors` — refused verdicts and
//!   failed sends;
//! * `filter` — the filter's state at the end of the interval
//!   (`FilterSnapshot`);
//! * `capacity` — with `refill_rate = "measure"`: the readings and what
//!   the interval showed (`CapacityInterval`), when it was usable.
//!
//! Certes reads this file as a counters file (`vantage certes estimate
//! --counters gate.jsonl --interval <interval>`): DROPPED_i is `dropped`,
//! ACCEPTED_i — SYNs answered, not dropped — is `accepted + rejected` (a
//! RST is an answer: the client does not retransmit). The gate sees no
//! connection ends, so COMPLETED_i and the SYN-to-END sum are zero unless a
//! record carries them (`docs/gate.md`).
//!
//! The file is appended to, never truncated, and opened only once the
//! queues are bound and the rules are in (a gate that fails to start does
//! not touch it); each run's times restart at zero. SIGUSR1 reopens it
//! (logrotate).

use std::path::Path;

use crate::daemon::LogFile;

pub use vantage_core::admission::syn::record::{CapacityRecord, GateCounts, IntervalRecord};

use super::GateError;

/// The open log file.
pub struct IntervalLog {
    file: LogFile,
}

impl IntervalLog {
    /// Opens the file for appending (creates it if needed).
    pub fn open(path: &Path) -> Result<IntervalLog, GateError> {
        let file = LogFile::open(path).map_err(|source| GateError::Log {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(IntervalLog { file })
    }

    /// Appends one record and flushes it.
    pub fn write(&mut self, record: &IntervalRecord) -> Result<(), GateError> {
        let path = self.file.path().to_path_buf();
        let error = |source: std::io::Error| GateError::Log { path, source };
        match serde_json::to_vec(record) {
            Ok(line) => self.file.write_line(&line).map_err(error),
            Err(e) => Err(error(e.into())),
        }
    }

    /// Opens the path again (after logrotate renamed the file).
    pub fn reopen(&mut self) -> Result<(), GateError> {
        self.file.reopen().map_err(|source| GateError::Log {
            path: self.file.path().to_path_buf(),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vantage_core::admission::syn::FilterSnapshot;

    fn record() -> IntervalRecord {
        IntervalRecord {
            time_s: 2.0,
            t_start_unix_s: Some(1_764_000_002.5),
            interval_s: 1.0,
            elapsed_s: 1.0,
            arrivals: 9,
            counts: GateCounts {
                accepted: 5,
                dropped: 3,
                rejected: 1,
                passed: 4,
                overruns: 0,
                errors: 0,
            },
            dry_run: false,
            filter: FilterSnapshot {
                tokens: 0,
                bucket_size: 5,
                refill_rate: 5.0,
                ..FilterSnapshot::default()
            },
            capacity: None,
        }
    }

    #[test]
    fn a_record_is_one_json_line_with_the_documented_keys() {
        let dir = std::env::temp_dir().join(format!("vantage-gate-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("gate.jsonl");
        let _ = std::fs::remove_file(&path);
        let mut log = IntervalLog::open(&path).unwrap();
        let record = record();
        log.write(&record).unwrap();
        log.write(&record).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        let value: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
        for key in [
            "time_s",
            "t_start_unix_s",
            "interval_s",
            "elapsed_s",
            "arrivals",
            "accepted",
            "dropped",
            "rejected",
            "passed",
            "overruns",
            "errors",
            "dry_run",
            "filter",
        ] {
            assert!(value.get(key).is_some(), "{key} missing: {text}");
        }
        assert_eq!(value["filter"]["bucket_size"], 5);
        assert!(value.get("capacity").is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_written_record_reads_back_equal() {
        let dir =
            std::env::temp_dir().join(format!("vantage-gate-log-back-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("gate.jsonl");
        let _ = std::fs::remove_file(&path);
        let mut log = IntervalLog::open(&path).unwrap();
        let mut written = vec![record()];
        let mut second = record();
        second.time_s = 3.0;
        second.elapsed_s = 0.25;
        second.filter.arrival_rate = Some(101.3);
        second.capacity = Some(CapacityRecord {
            passive_opens: 17,
            accept_queue: 3,
            interval: None,
        });
        written.push(second);
        for r in &written {
            log.write(r).unwrap();
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let read: Vec<IntervalRecord> = text
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(read, written);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
