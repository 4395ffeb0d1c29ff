//! The `[gate]` input: the log of a `vantage gate` guarding the listeners,
//! followed as it grows ([`super::follow`]), each line parsed by the one
//! owner of its format (`vantage_core::admission::syn::record::IntervalRecord`)
//! and turned into DROPPED_i and ACCEPTED_i by the one rule
//! (`vantage_core::certes::ingest::gate_syn_counts`).
//!
//! **How the gate's counts are used.** Certes (Olshefski, Nieh and
//! Agrawal, TOCS 2004, Section 4) runs on per-interval counters: DROPPED_i,
//! ACCEPTED_i, COMPLETED_i and the SYN-to-END sum (Eq. 2–4). The gate counts
//! its own verdicts exactly but sees no connection end, so it cannot stand
//! alone (the configuration refuses `[gate]` without listeners). Its counts
//! feed a second estimate, beside the capture's, never in place of it:
//! [`GateEstimate`] runs the configured model over DROPPED_i and ACCEPTED_i
//! from the gate and COMPLETED_i, the SYN-to-END and RTT sums from the
//! capture (summed over classes: the gate has none). The capture's own
//! estimate stays as it is because its DROPPED_i is the larger truth: it
//! sees every SYN the host left unanswered, the gate's drops *and* the
//! kernel's behind it (a full accept queue), while the gate knows only its
//! own. The two agree when the gate is the only dropper; the gap between
//! them is what the gate did not decide (or what the capture missed: ring
//! drops). An interval the gate's log does not cover (no record yet, the
//! gate stopped, a bad line) takes the capture's SYN counts, so the series
//! goes on, and is counted as not covered.
//!
//! **Time alignment.** The gate's `time_s` runs from the gate's start on
//! its monotonic clock; the capture's intervals are on the wall clock's
//! grid (`k × interval` UNIX time). The record's `t_start_unix_s` (the
//! gate's wall clock at its start plus `time_s`) puts it on the interval
//! whose start is nearest: the two grids may be up to half an interval
//! apart, so a SYN near an edge may count in the neighbouring interval of
//! one and not the other. Records without it (older gates) cannot be
//! aligned and are counted, not used. A record whose `interval_s` is not
//! the daemon's interval is an error naming the file, the line and both
//! values, counted and not used.

use std::collections::BTreeMap;

use serde::Serialize;
use vantage_core::admission::syn::record::{GateCounts, IntervalRecord};
use vantage_core::certes::ingest::gate_syn_counts;
use vantage_core::certes::summary::{ClassInterval, IntervalRow, RunningEstimate};
use vantage_core::certes::{Certes, Estimate, IntervalCounters, LatencyHistogram};
use vantage_core::Nanos;

use super::config::GateInputConfig;
use super::follow::{FileFollower, Followed};

/// Longest line of the gate's log read (a record is about 400 bytes).
pub const MAX_GATE_LINE_BYTES: usize = 64 * 1024;
/// Gate intervals kept while waiting for the capture's interval of the
/// same time (17 min at 250 ms; a capture runs at most its give-up time
/// behind, 180 s with `learn`).
pub const MAX_GATE_INTERVALS: usize = 4096;

/// What became of the lines of the gate's log: the label of
/// `vantage_certes_gate_log_lines_total{outcome}`.
pub const LINE_OUTCOMES: [&str; 5] = [
    "read",
    "invalid",
    "oversized",
    "wrong_interval",
    "no_wall_clock",
];

/// The gate's verdicts over one of the daemon's intervals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GateInterval {
    pub counts: GateCounts,
    pub dry_run: bool,
    /// Records put on it (more than one only around a gate restart).
    pub records: u32,
}

/// What one poll of the log found.
#[derive(Debug, Default, PartialEq)]
pub struct GatePoll {
    /// Lines by outcome (labels of [`LINE_OUTCOMES`]).
    pub lines: BTreeMap<&'static str, u64>,
    /// The verdicts of the records read.
    pub syns: GateCounts,
    /// For the daemon's log.
    pub messages: Vec<String>,
}

/// The followed log and the gate intervals read from it.
pub struct GateInput {
    follower: FileFollower,
    interval: Nanos,
    intervals: BTreeMap<u64, GateInterval>,
    /// Problems said already (each kind once until a line is read).
    said: Vec<&'static str>,
}

impl GateInput {
    pub fn new(config: &GateInputConfig, interval: Nanos) -> GateInput {
        GateInput {
            follower: FileFollower::new(&config.log, MAX_GATE_LINE_BYTES),
            interval,
            intervals: BTreeMap::new(),
            said: Vec::new(),
        }
    }

    /// The log's path, for messages and the metrics.
    pub fn log_name(&self) -> String {
        self.follower.path().display().to_string()
    }

    /// Whether the log's path names no file now.
    pub fn waiting(&self) -> bool {
        self.follower.waiting()
    }

    /// Reads what the log gained.
    pub fn poll(&mut self) -> GatePoll {
        let mut poll = GatePoll::default();
        let file = self.follower.path().display().to_string();
        for found in self.follower.poll() {
            if let Followed::Line { number, text } = &found {
                self.line(&file, *number, text, &mut poll);
                continue;
            }
            if matches!(found, Followed::Oversized { .. }) {
                *poll.lines.entry("oversized").or_default() += 1;
            }
            poll.messages.extend(found.message(
                "gate log",
                &file,
                MAX_GATE_LINE_BYTES,
                " (the gate's SYN counts are not used meanwhile)",
            ));
        }
        poll
    }

    fn say(&mut self, kind: &'static str, message: String, poll: &mut GatePoll) {
        *poll.lines.entry(kind).or_default() += 1;
        if !self.said.contains(&kind) {
            self.said.push(kind);
            poll.messages.push(message);
        }
    }

    fn line(&mut self, file: &str, number: u64, text: &[u8], poll: &mut GatePoll) {
        if text.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let record: IntervalRecord = match serde_json::from_slice(text) {
            Ok(r) => r,
            Err(e) => {
                return self.say(
                    "invalid",
                    format!("gate log {file}, line {number}: not a vantage gate log record: {e}"),
                    poll,
                )
            }
        };
        let wanted = self.interval.as_secs_f64();
        if (record.interval_s - wanted).abs() > 1e-6 * wanted {
            return self.say(
                "wrong_interval",
                format!(
                    "gate log {file}, line {number}: the gate logged {} s intervals but the interval here is {wanted} s; give both the same interval (the gate's `interval_ms`, this file's `interval`)",
                    record.interval_s
                ),
                poll,
            );
        }
        let Some(start) = record.t_start_unix_s.filter(|t| t.is_finite() && *t >= 0.0) else {
            return self.say(
                "no_wall_clock",
                format!(
                    "gate log {file}, line {number}: no `t_start_unix_s` (a gate older than this daemon): the record cannot be put on the wall clock and is not used"
                ),
                poll,
            );
        };
        self.said.clear();
        *poll.lines.entry("read").or_default() += 1;
        poll.syns.add(&record.counts);
        let index = (start / wanted).round() as u64;
        let slot = self.intervals.entry(index).or_default();
        slot.counts.add(&record.counts);
        slot.dry_run |= record.dry_run;
        slot.records += 1;
        while self.intervals.len() > MAX_GATE_INTERVALS {
            self.intervals.pop_first();
        }
    }

    /// The gate's verdicts over the daemon's interval `index` (its start
    /// over the interval, on the wall clock), if its log covered it;
    /// earlier intervals are forgotten.
    pub fn take(&mut self, index: u64) -> Option<GateInterval> {
        let found = self.intervals.remove(&index);
        while self
            .intervals
            .first_key_value()
            .is_some_and(|(i, _)| *i < index)
        {
            self.intervals.pop_first();
        }
        found
    }
}

/// The gate's part of one JSON Lines record.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GateRecord {
    /// Whether the gate's log covered the interval (if not, the estimate
    /// below took the capture's SYN counts).
    pub covered: bool,
    pub accepted: Option<u64>,
    pub dropped: Option<u64>,
    pub rejected: Option<u64>,
    pub dry_run: Option<bool>,
    /// The estimate from the gate's DROPPED and ACCEPTED (see the module
    /// documentation).
    pub estimate_mean_s: Option<f64>,
    pub drop_rate: f64,
    pub gave_up: f64,
    pub p99_s: Option<f64>,
}

/// The estimate from the gate's SYN counts and the capture's completions.
pub struct GateEstimate {
    run: RunningEstimate,
}

impl GateEstimate {
    /// The configured model (a learned one is the capture's: the gate
    /// sees no SYN times to learn from).
    pub fn new(certes: &Certes, frustration_timeout: Nanos) -> GateEstimate {
        GateEstimate {
            run: RunningEstimate::new(certes, frustration_timeout, false, 0.0),
        }
    }

    /// The next interval: the capture's classes and the gate's verdicts
    /// over the same time, if its log covered it. `None` only if the
    /// estimator gave no row (it gives one per class given).
    pub fn interval(
        &mut self,
        capture: &[ClassInterval<'_>],
        gate: Option<&GateInterval>,
    ) -> Option<(GateRecord, Estimate)> {
        let counters = merged_counters(capture, gate);
        let given = [ClassInterval {
            class: "",
            counters: &counters,
            exact: None,
        }];
        let mut out = None;
        let _ = self
            .run
            .interval_with_estimates(&given, |row: IntervalRow, estimate| {
                let record = GateRecord {
                    covered: gate.is_some(),
                    accepted: gate.map(|g| g.counts.accepted),
                    dropped: gate.map(|g| g.counts.dropped),
                    rejected: gate.map(|g| g.counts.rejected),
                    dry_run: gate.map(|g| g.dry_run),
                    estimate_mean_s: row.estimate_mean_s,
                    drop_rate: row.drop_rate,
                    gave_up: row.gave_up,
                    p99_s: row.p99_s,
                };
                out = Some((record, estimate.clone()));
                Ok::<(), ()>(())
            });
        out
    }
}

/// COMPLETED_i, the SYN-to-END and RTT sums (and histogram, when every
/// class that completed has one) and the data segments of every class,
/// with DROPPED_i, ACCEPTED_i and REFUSED_i from the gate when it covered the
/// interval, else from the capture.
pub fn merged_counters(
    capture: &[ClassInterval<'_>],
    gate: Option<&GateInterval>,
) -> IntervalCounters {
    let mut sum = IntervalCounters::default();
    let mut histogram = Some(LatencyHistogram::new());
    for one in capture {
        let c = one.counters;
        sum.add_dropped(c);
        sum.accepted += c.accepted;
        sum.add_refused(c);
        sum.completed += c.completed;
        sum.syn_to_end_sum += c.syn_to_end_sum;
        sum.rtt_sum += c.rtt_sum;
        sum.segments_sent += c.segments_sent;
        sum.segments_retransmitted += c.segments_retransmitted;
        match (&mut histogram, &c.syn_to_end_histogram) {
            (Some(all), Some(h)) => all.merge(h),
            (Some(_), None) if c.completed > 0 => histogram = None,
            _ => {}
        }
    }
    if sum.completed > 0 {
        sum.syn_to_end_histogram = histogram;
    }
    if let Some(gate) = gate {
        let syns = gate_syn_counts(&gate.counts, gate.dry_run);
        sum.dropped = syns.dropped;
        sum.accepted = syns.accepted;
        sum.refused = syns.refused;
        // The gate's log counts drops and refusals, not their attempts.
        sum.dropped_by_attempt.clear();
        sum.refused_by_attempt.clear();
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watch::capture::Models;
    use crate::watch::config::WatchConfig;
    use vantage_core::admission::syn::FilterSnapshot;
    use vantage_trace::certes::{CaptureStream, ClosedInterval};
    use vantage_trace::synth::{syn_options, Tcp, ACK, FIN, PSH, SYN};
    use vantage_trace::{LinkType, Packet};

    /// A boundary of the 250 ms grid, UNIX nanoseconds.
    const ORIGIN_NS: u64 = 1_764_000_000_000_000_000;
    const INTERVAL_S: f64 = 0.25;

    struct Dir(std::path::PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn config(dir: &Dir) -> WatchConfig {
        let text = format!(
            "listeners = [\":80\"]\nprofile = \"linux-6.5\"\ninterval = \"250ms\"\n[gate]\nlog = \"{}\"",
            dir.0.join("gate.jsonl").display()
        );
        WatchConfig::from_toml(&text, "w.toml").unwrap()
    }

    /// Twenty attempts 100 ms apart through the live capture stream: every
    /// fourth has its first SYN dropped and is answered on the retry 1 s
    /// later; all are served. The closed intervals and the first one's
    /// index on the wall clock's grid.
    fn captured(config: &WatchConfig) -> (u64, Vec<ClosedInterval>) {
        let server = ("10.0.0.2", 80);
        let mut frames = Vec::new();
        for i in 0..20u64 {
            let client = ("10.1.0.1", 2000 + i as u16);
            let isn = 7000 + i as u32;
            let first = ORIGIN_NS + i * 100_000_000;
            let syn = Tcp::new(client, server, isn, 0, SYN).options(syn_options(1460, 7, 1));
            frames.push((first, syn.ethernet()));
            let t = if i % 4 == 0 {
                frames.push((first + 1_000_000_000, syn.ethernet()));
                first + 1_000_000_000
            } else {
                first
            };
            for (dt, tcp) in [
                (100_000, Tcp::new(server, client, 5000, isn + 1, SYN | ACK)),
                (
                    200_000,
                    Tcp::new(client, server, isn + 1, 5001, ACK).payload(50),
                ),
                (
                    300_000,
                    Tcp::new(server, client, 5001, isn + 51, PSH | ACK).payload(100),
                ),
                (400_000, Tcp::new(server, client, 5101, isn + 51, FIN | ACK)),
                (500_000, Tcp::new(client, server, isn + 51, 5102, FIN | ACK)),
            ] {
                frames.push((t + dt, tcp.ethernet()));
            }
        }
        frames.sort_by_key(|f| f.0);
        let mut stream = CaptureStream::live(
            "synthetic".into(),
            &config.listeners,
            None,
            &config.model,
            1000,
        )
        .unwrap();
        let mut closed = Vec::new();
        for (t, frame) in &frames {
            stream
                .push_packet(&Packet {
                    timestamp: Nanos(*t),
                    link_type: LinkType::ETHERNET,
                    interface: 0,
                    original_len: frame.len() as u32,
                    data: frame,
                    offset: 0,
                })
                .unwrap();
            closed.extend(stream.take_closed().unwrap());
        }
        let first = stream.first_timestamp().unwrap().0 / 250_000_000;
        stream
            .advance_clock(Nanos(ORIGIN_NS + 30_000_000_000))
            .unwrap();
        closed.extend(stream.take_closed().unwrap());
        let (rest, _) = stream.finish_stream().unwrap();
        closed.extend(rest);
        (first, closed)
    }

    /// The gate's record of the daemon's interval `index`: its own grid
    /// 100 ms later than the daemon's.
    fn record(index: u64, accepted: u64, dropped: u64) -> String {
        let start = index as f64 * INTERVAL_S + 0.1;
        serde_json::to_string(&IntervalRecord {
            time_s: start - 1_764_000_000.0,
            t_start_unix_s: Some(start),
            interval_s: INTERVAL_S,
            elapsed_s: INTERVAL_S,
            arrivals: accepted + dropped,
            counts: GateCounts {
                accepted,
                dropped,
                ..GateCounts::default()
            },
            dry_run: false,
            filter: FilterSnapshot::default(),
            capacity: None,
        })
        .unwrap()
    }

    /// Each closed interval through the daemon's two estimates, as
    /// `capture.rs` runs them: (the gate's record, the capture's mean).
    /// With `totals_only` the capture's model is given its counts without
    /// DROPPED_i^j, as much as a gate's log knows.
    fn run(
        config: &WatchConfig,
        input: &mut GateInput,
        first: u64,
        closed: &[ClosedInterval],
        totals_only: bool,
    ) -> Vec<(GateRecord, Option<f64>)> {
        let certes = Certes::new(config.model.clone()).unwrap();
        let mut models = Models::new(config, certes.clone());
        let mut gate = GateEstimate::new(&certes, config.frustration_timeout);
        let mut out = Vec::new();
        for interval in closed {
            let given = interval.class_intervals();
            let covered = input.take(first + interval.index as u64);
            let (record, _) = gate.interval(&given, covered.as_ref()).unwrap();
            let totals: Vec<IntervalCounters> = given
                .iter()
                .map(|one| IntervalCounters {
                    dropped_by_attempt: Vec::new(),
                    ..one.counters.clone()
                })
                .collect();
            let given_totals: Vec<ClassInterval<'_>> = given
                .iter()
                .zip(&totals)
                .map(|(one, counters)| ClassInterval { counters, ..*one })
                .collect();
            let mut mean = None;
            models
                .interval(if totals_only { &given_totals } else { &given }, |one| {
                    mean = one.row.estimate_mean_s;
                    Ok::<(), ()>(())
                })
                .unwrap();
            out.push((record, mean));
        }
        out
    }

    /// A gate log that counts what the capture counts gives the capture's
    /// estimate from the same totals, interval by interval (the capture
    /// also knows each drop's attempt, DROPPED_i^j, which moves its own
    /// estimate); one that counts more drops gives a
    /// longer response time; intervals it does not cover take the
    /// capture's counts and say so; bad lines are counted and named.
    #[test]
    fn a_gate_log_feeds_the_second_estimate_through_the_watch_pipeline() {
        let dir =
            Dir(std::env::temp_dir().join(format!("vantage-gate-input-{}", std::process::id())));
        let _ = std::fs::remove_dir_all(&dir.0);
        std::fs::create_dir_all(&dir.0).unwrap();
        let config = config(&dir);
        let path = config.gate.as_ref().unwrap().log.clone();
        let (first, closed) = captured(&config);
        assert!(closed.len() >= 12, "{} intervals", closed.len());
        let counts = |i: &ClosedInterval| {
            let given = i.class_intervals();
            (given[0].counters.accepted, given[0].counters.dropped)
        };
        let dropped: u64 = closed.iter().map(|i| counts(i).1).sum();
        assert_eq!(dropped, 5, "the capture saw the five dropped SYNs");

        // The same counts as the capture's.
        let mut input = GateInput::new(config.gate.as_ref().unwrap(), config.model.interval);
        let poll = input.poll();
        assert!(input.waiting());
        assert!(poll.messages[0].contains("no such file yet"), "{poll:?}");
        let mut text = String::new();
        for i in &closed {
            let (a, d) = counts(i);
            text += &record(first + i.index as u64, a, d);
            text.push('\n');
        }
        text += "not json\n";
        text += &record(first, 1, 0).replace("\"interval_s\":0.25", "\"interval_s\":1.0");
        text.push('\n');
        text += &record(first, 1, 0).replace(",\"t_start_unix_s\":", ",\"x\":");
        text.push('\n');
        std::fs::write(&path, &text).unwrap();
        let poll = input.poll();
        assert!(!input.waiting());
        let n = closed.len() as u64;
        assert_eq!(poll.lines.get("read"), Some(&n));
        for outcome in ["invalid", "wrong_interval", "no_wall_clock"] {
            assert_eq!(poll.lines.get(outcome), Some(&1), "{outcome}: {poll:?}");
        }
        assert_eq!(poll.syns.dropped, 5);
        let wrong = poll
            .messages
            .iter()
            .find(|m| m.contains("intervals"))
            .unwrap();
        let line = format!("line {}", n + 2);
        assert!(
            wrong.contains(&path.display().to_string()) && wrong.contains(&line),
            "{wrong}"
        );
        assert!(wrong.contains("1 s") && wrong.contains("0.25 s"), "{wrong}");
        let rows = run(&config, &mut input, first, &closed, true);
        let mut with_completions = 0;
        for (gate, capture) in &rows {
            assert!(gate.covered);
            assert_eq!(gate.estimate_mean_s, *capture);
            with_completions += usize::from(capture.is_some());
        }
        assert!(with_completions >= 8, "{rows:?}");
        let capture_means = |rows: &[(GateRecord, Option<f64>)]| -> Vec<Option<f64>> {
            rows.iter().map(|(_, capture)| *capture).collect()
        };
        let mut input = GateInput::new(config.gate.as_ref().unwrap(), config.model.interval);
        input.poll();
        let with_split = run(&config, &mut input, first, &closed, false);
        assert_ne!(capture_means(&with_split), capture_means(&rows));

        // Ten more drops in the first interval; the second half not covered.
        std::fs::remove_file(&path).unwrap();
        let mut input = GateInput::new(config.gate.as_ref().unwrap(), config.model.interval);
        input.poll();
        let half = closed.len() / 2;
        let mut text = String::new();
        for i in &closed[..half] {
            let (a, d) = counts(i);
            let extra = if i.index == 0 { 10 } else { 0 };
            text += &record(first + i.index as u64, a, d + extra);
            text.push('\n');
        }
        std::fs::write(&path, &text).unwrap();
        input.poll();
        let rows = run(&config, &mut input, first, &closed, true);
        let (a0, d0) = counts(&closed[0]);
        assert_eq!(rows[0].0.dropped, Some(d0 + 10));
        let rate = (d0 + 10) as f64 / (a0 + d0 + 10) as f64;
        assert!((rows[0].0.drop_rate - rate).abs() < 1e-12, "{rows:?}");
        let longer = rows
            .iter()
            .filter(|(g, c)| matches!((g.estimate_mean_s, c), (Some(g), Some(c)) if g > *c))
            .count();
        assert!(longer >= 1, "more drops, longer waits: {rows:?}");
        for (k, (gate, _)) in rows.iter().enumerate() {
            assert_eq!(gate.covered, k < half, "{k}");
        }
        assert!(rows[half..].iter().all(|(g, _)| g.dropped.is_none()));
    }

    /// The capture's classes add their drops and refusals by attempt; the
    /// gate's counts, which know totals only, clear both splits.
    #[test]
    fn merged_counters_keep_the_capture_splits_and_clear_them_under_the_gate() {
        let one = |dropped: Vec<u64>, refused: Vec<u64>| IntervalCounters {
            dropped: dropped.iter().sum(),
            dropped_by_attempt: dropped,
            accepted: 5,
            refused: refused.iter().sum(),
            refused_by_attempt: refused,
            ..IntervalCounters::default()
        };
        let (a, b) = (one(vec![3, 1], vec![0, 2]), one(vec![2], vec![1]));
        let classes = [
            ClassInterval {
                class: "a",
                counters: &a,
                exact: None,
            },
            ClassInterval {
                class: "b",
                counters: &b,
                exact: None,
            },
        ];
        let sum = merged_counters(&classes, None);
        assert_eq!((sum.dropped, sum.accepted, sum.refused), (6, 10, 3));
        assert_eq!(sum.dropped_split(), Some(&[5, 1][..]));
        assert_eq!(sum.refused_split(), Some(&[1, 2][..]));
        let gate = GateInterval {
            counts: GateCounts {
                accepted: 9,
                dropped: 4,
                rejected: 2,
                ..Default::default()
            },
            dry_run: false,
            records: 1,
        };
        let sum = merged_counters(&classes, Some(&gate));
        assert_eq!((sum.dropped, sum.accepted, sum.refused), (4, 9, 2));
        assert!(sum.dropped_by_attempt.is_empty() && sum.refused_by_attempt.is_empty());
    }
}
