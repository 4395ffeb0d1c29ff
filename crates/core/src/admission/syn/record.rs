//! The SYN gate's interval record: one JSON Lines object per interval, as
//! the live gate writes it (`docs/gate.md`, "Log") and every reader reads
//! it — the testbed experiment's log totals and the Certes counters reader.
//!
//! Field names are the log's; keys a record of an older or merged log lacks
//! (`arrivals`, `interval_s`, `elapsed_s`, `passed`, `overruns`, `errors`, `dry_run`,
//! `filter`, `capacity`, `t_start_unix_s`) read as zero, false or absent,
//! and keys it has beyond these are ignored.

use serde::{Deserialize, Serialize};

use super::{CapacityInterval, FilterSnapshot};

/// The gate's six counters over some span (one interval, a whole run, a
/// whole log). `accepted`, `dropped` and `rejected` are the filter's
/// verdicts on SYNs to a listener, also in a dry run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateCounts {
    pub accepted: u64,
    pub dropped: u64,
    pub rejected: u64,
    /// Queued packets that were not SYNs to a listener, let through.
    #[serde(default)]
    pub passed: u64,
    /// Packets the kernel let through unseen (queue full, `--queue-bypass`).
    #[serde(default)]
    pub overruns: u64,
    /// Refused verdicts, malformed messages and failed sends.
    #[serde(default)]
    pub errors: u64,
}

impl GateCounts {
    /// SYNs that met the filter: `accepted + dropped + rejected`.
    pub fn syns(&self) -> u64 {
        self.accepted + self.dropped + self.rejected
    }

    /// What happened between `earlier` and `self`, counter by counter
    /// (a counter that went backwards gives zero).
    pub fn since(&self, earlier: &GateCounts) -> GateCounts {
        GateCounts {
            accepted: self.accepted.saturating_sub(earlier.accepted),
            dropped: self.dropped.saturating_sub(earlier.dropped),
            rejected: self.rejected.saturating_sub(earlier.rejected),
            passed: self.passed.saturating_sub(earlier.passed),
            overruns: self.overruns.saturating_sub(earlier.overruns),
            errors: self.errors.saturating_sub(earlier.errors),
        }
    }

    /// Adds `other` counter by counter.
    pub fn add(&mut self, other: &GateCounts) {
        self.accepted += other.accepted;
        self.dropped += other.dropped;
        self.rejected += other.rejected;
        self.passed += other.passed;
        self.overruns += other.overruns;
        self.errors += other.errors;
    }
}

/// One line of the gate's log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IntervalRecord {
    /// Start of the interval, seconds since the gate started.
    pub time_s: f64,
    /// Start of the interval on the wall clock (UNIX seconds): the gate's
    /// wall clock when it started plus `time_s`. What a reader on another
    /// clock (`vantage certes watch`) aligns the record by; absent in logs
    /// of older gates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_start_unix_s: Option<f64>,
    /// The configured interval.
    #[serde(default)]
    pub interval_s: f64,
    /// The time the counts really cover (shorter for the last record).
    #[serde(default)]
    pub elapsed_s: f64,
    /// SYNs to a listener: `counts.syns()` as the gate counted them.
    #[serde(default)]
    pub arrivals: u64,
    #[serde(flatten)]
    pub counts: GateCounts,
    #[serde(default)]
    pub dry_run: bool,
    /// The filter's state at the end of the interval.
    #[serde(default)]
    pub filter: FilterSnapshot,
    /// With `refill_rate = "measure"`: the capacity measurement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacityRecord>,
}

/// The capacity measurement of one interval.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CapacityRecord {
    /// `Tcp: PassiveOpens` at the end of the interval.
    pub passive_opens: u64,
    /// The listeners' accept-queue length at the end of the interval.
    pub accept_queue: u64,
    /// What the interval showed; absent for the first reading and for
    /// inconsistent ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<CapacityInterval>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of `docs/gate.md`.
    const DOCUMENTED_LINE: &str = r#"{"time_s":3.0,"interval_s":1.0,"elapsed_s":1.0001,"arrivals":130,"accepted":120,"dropped":10,"rejected":0,"passed":0,"overruns":0,"errors":0,"dry_run":false,"filter":{"tokens":0,"bucket_size":120,"refill_rate":120.0,"arrival_rate":101.3,"future_tokens":310,"chain_borrowed":2,"future_buckets":51}}"#;

    #[test]
    fn the_documented_line_parses_and_writes_back_the_same() {
        let record: IntervalRecord = serde_json::from_str(DOCUMENTED_LINE).unwrap();
        assert_eq!(record.arrivals, 130);
        assert_eq!(
            record.counts,
            GateCounts {
                accepted: 120,
                dropped: 10,
                ..GateCounts::default()
            }
        );
        assert_eq!(record.counts.syns(), record.arrivals);
        assert_eq!(record.filter.future_tokens, Some(310));
        assert_eq!(record.capacity, None);
        assert_eq!(record.t_start_unix_s, None);
        assert_eq!(serde_json::to_string(&record).unwrap(), DOCUMENTED_LINE);
    }

    #[test]
    fn the_wall_clock_start_round_trips_after_the_start() {
        let line = r#"{"time_s":3.0,"t_start_unix_s":1764000003.25,"interval_s":1.0,"elapsed_s":1.0,"arrivals":0,"accepted":0,"dropped":0,"rejected":0,"passed":0,"overruns":0,"errors":0,"dry_run":false,"filter":{"tokens":0,"bucket_size":1,"refill_rate":1.0}}"#;
        let record: IntervalRecord = serde_json::from_str(line).unwrap();
        assert_eq!(record.t_start_unix_s, Some(1_764_000_003.25));
        assert_eq!(serde_json::to_string(&record).unwrap(), line);
    }

    #[test]
    fn a_capacity_record_round_trips() {
        let line = r#"{"time_s":0.0,"interval_s":1.0,"elapsed_s":1.0,"arrivals":3,"accepted":3,"dropped":0,"rejected":0,"passed":1,"overruns":0,"errors":2,"dry_run":true,"filter":{"tokens":1,"bucket_size":5,"refill_rate":5.0},"capacity":{"passive_opens":40,"accept_queue":2,"interval":{"accepts":3,"accept_rate":3.0,"saturated":false,"estimate":4.5}}}"#;
        let record: IntervalRecord = serde_json::from_str(line).unwrap();
        let capacity = record.capacity.as_ref().unwrap();
        assert_eq!(capacity.interval.unwrap().estimate, 4.5);
        assert_eq!(serde_json::to_string(&record).unwrap(), line);
    }

    #[test]
    fn missing_keys_read_as_zero_and_extra_keys_are_ignored() {
        let record: IntervalRecord = serde_json::from_str(
            r#"{"time_s":1.0,"arrivals":5,"accepted":5,"dropped":0,"rejected":0,"overruns":2,"completed":4}"#,
        )
        .unwrap();
        assert_eq!(record.counts.overruns, 2);
        assert_eq!(record.counts.passed, 0);
        assert_eq!(record.filter, FilterSnapshot::default());
        let error = serde_json::from_str::<IntervalRecord>(r#"{"arrivals":1}"#)
            .unwrap_err()
            .to_string();
        assert!(error.contains("time_s"), "{error}");
    }

    #[test]
    fn counts_add_up() {
        let mut total = GateCounts::default();
        let one = GateCounts {
            accepted: 1,
            dropped: 2,
            rejected: 3,
            passed: 4,
            overruns: 5,
            errors: 6,
        };
        total.add(&one);
        total.add(&one);
        assert_eq!(total.syns(), 12);
        assert_eq!(total.errors, 12);
    }
}
