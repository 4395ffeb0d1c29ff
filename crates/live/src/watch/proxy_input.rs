//! The `[proxy]` input: the Certes counters stream of a `vantage proxy` in
//! front of the service (its `[certes] log`, `docs/proxy.md`), followed as
//! it grows ([`super::follow`]), each line parsed by the one owner of the
//! counters format (`vantage_core::certes::ingest::parse_counters_line`),
//! and estimated by the estimator `certes estimate --jsonl` runs
//! (`RunningEstimate`, the configured model), as series labelled
//! `source="proxy"`.
//!
//! Certes (Olshefski, Nieh and Agrawal, TOCS 2004, Section 4, Eq. 2–4)
//! needs per interval DROPPED_i, ACCEPTED_i, COMPLETED_i and the SYN-to-END
//! sum; the proxy's stream gives all four, so it stands alone: a daemon
//! with `[proxy]` and no `listeners` runs no capture. Its departures are the
//! proxy's: the SYN's arrival estimated from `TCP_INFO` at accept (ACCEPTED
//! counted in that SYN's interval), END the proxy's close, DROPPED the
//! namespace's `ListenDrops` (every listener in it).
//!
//! **With `[gate]`** (a `vantage gate` in front of the proxy), the proxy's
//! DROPPED_i misses every SYN the gate dropped (the gate decides before
//! the kernel sees it): each row is merged with the gate's verdicts over
//! the same interval by the one rule
//! (`vantage_core::certes::ingest::proxy_counters_with_gate`: the gate's
//! drops added, its refusals counted as answered). The gate's log is
//! followed here on its own ([`GateInput`], aligned on the wall clock as
//! for the capture); a row whose interval the log does not cover keeps the
//! proxy's counts and is counted `not_covered`.
//!
//! Each row is estimated when it is read (the proxy writes an interval's
//! row `accept_lag_ms` after it ends), on the wall clock's grid of its
//! `t_start_s`. A row
//! whose `interval_s` is not the daemon's `interval` is refused naming the
//! file, the line and both values; rows that do not move forward
//! (`out_of_order`) are not used; a gap (the proxy was stopped) starts the
//! estimate afresh, since the retries the model expected from the
//! intervals before it cannot be placed.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::Serialize;
use vantage_core::admission::syn::record::GateCounts;
use vantage_core::certes::ingest::{parse_counters_line, proxy_counters_with_gate, CountersError};
use vantage_core::certes::summary::{ClassInterval, IntervalRow, RunningEstimate};
use vantage_core::certes::{Certes, Estimate};
use vantage_core::Nanos;

use super::config::{ProxyInputConfig, WatchConfig};
use super::follow::{FileFollower, Followed};
use super::gate_input::GateInput;
use super::metrics::WatchMetrics;
use super::{Outputs, WatchError};

/// Longest line of the stream read (a row is about 250 bytes).
pub const MAX_PROXY_LINE_BYTES: usize = 64 * 1024;
/// How often the stream is looked at.
const PROXY_POLL: Duration = Duration::from_millis(50);

/// What became of the stream's lines: the label of
/// `vantage_certes_proxy_log_lines_total{outcome}`.
pub const PROXY_LINE_OUTCOMES: [&str; 5] = [
    "read",
    "invalid",
    "oversized",
    "wrong_interval",
    "out_of_order",
];

/// With `[gate]`: the gate's verdicts merged into one interval of the
/// stream (`None` counts: its log did not cover the interval).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ProxyGate {
    pub covered: bool,
    pub accepted: Option<u64>,
    pub dropped: Option<u64>,
    pub rejected: Option<u64>,
    pub dry_run: Option<bool>,
}

impl ProxyGate {
    fn covered(counts: &GateCounts, dry_run: bool) -> ProxyGate {
        ProxyGate {
            covered: true,
            accepted: Some(counts.accepted),
            dropped: Some(counts.dropped),
            rejected: Some(counts.rejected),
            dry_run: Some(dry_run),
        }
    }

    const NOT_COVERED: ProxyGate = ProxyGate {
        covered: false,
        accepted: None,
        dropped: None,
        rejected: None,
        dry_run: None,
    };
}

/// One estimated interval of the stream.
pub struct ProxyInterval {
    /// Its index on the wall clock's grid (start / interval).
    pub index: u64,
    pub row: IntervalRow,
    pub estimate: Estimate,
    /// With `[gate]`: what the gate's log gave for it.
    pub gate: Option<ProxyGate>,
}

/// What one poll of the stream found.
#[derive(Default)]
pub struct ProxyPoll {
    /// Lines by outcome (labels of [`PROXY_LINE_OUTCOMES`]).
    pub lines: BTreeMap<&'static str, u64>,
    pub intervals: Vec<ProxyInterval>,
    /// For the daemon's log.
    pub messages: Vec<String>,
}

/// The followed stream and its estimate.
pub struct ProxyInput {
    follower: FileFollower,
    interval: Nanos,
    fresh: Certes,
    frustration_timeout: Nanos,
    run: RunningEstimate,
    /// The last interval estimated.
    last: Option<u64>,
    /// Problems said already (each kind once until a line is read).
    said: Vec<&'static str>,
    /// With `[gate]`: the gate's log, followed for this stream alone.
    gate: Option<GateInput>,
}

impl ProxyInput {
    pub fn new(
        config: &ProxyInputConfig,
        certes: &Certes,
        frustration_timeout: Nanos,
        gate: Option<GateInput>,
    ) -> Self {
        ProxyInput {
            follower: FileFollower::new(&config.log, MAX_PROXY_LINE_BYTES),
            interval: certes.config().interval,
            fresh: certes.clone(),
            frustration_timeout,
            run: RunningEstimate::new(certes, frustration_timeout, false, 0.0),
            last: None,
            said: Vec::new(),
            gate,
        }
    }

    /// With `[gate]`: reads what the gate's log gained (before the
    /// stream's rows, so that they find the gate's intervals).
    pub fn poll_gate(&mut self) -> Option<(String, super::gate_input::GatePoll, bool)> {
        let gate = self.gate.as_mut()?;
        let poll = gate.poll();
        Some((gate.log_name(), poll, gate.waiting()))
    }

    /// The stream's path, for messages and the metrics.
    pub fn log_name(&self) -> String {
        self.follower.path().display().to_string()
    }

    /// Whether the stream's path names no file now.
    pub fn waiting(&self) -> bool {
        self.follower.waiting()
    }

    /// Reads what the stream gained and estimates its new intervals.
    pub fn poll(&mut self) -> ProxyPoll {
        let mut poll = ProxyPoll::default();
        let file = self.log_name();
        for found in self.follower.poll() {
            if let Followed::Line { number, text } = &found {
                self.line(&file, *number, text, &mut poll);
                continue;
            }
            if matches!(found, Followed::Oversized { .. }) {
                *poll.lines.entry("oversized").or_default() += 1;
            }
            poll.messages
                .extend(found.message("proxy stream", &file, MAX_PROXY_LINE_BYTES, ""));
        }
        poll
    }

    fn say(&mut self, kind: &'static str, message: String, poll: &mut ProxyPoll) {
        *poll.lines.entry(kind).or_default() += 1;
        if !self.said.contains(&kind) {
            self.said.push(kind);
            poll.messages.push(message);
        }
    }

    fn line(&mut self, file: &str, number: u64, text: &[u8], poll: &mut ProxyPoll) {
        if text.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let name = format!("proxy stream {file}");
        let Ok(text) = std::str::from_utf8(text) else {
            return self.say("invalid", format!("{name}, line {number}: not UTF-8"), poll);
        };
        let row = match parse_counters_line(text, &name, number, self.interval) {
            Ok(row) => row,
            Err(e) => {
                let kind = match &e {
                    CountersError::Cell {
                        column, problem, ..
                    } if column == "interval_s" && !problem.starts_with("missing") => {
                        "wrong_interval"
                    }
                    _ => "invalid",
                };
                return self.say(kind, e.to_string(), poll);
            }
        };
        let index = (row.t_start_s / self.interval.as_secs_f64()).round() as u64;
        if self.last.is_some_and(|last| index <= last) {
            return self.say(
                "out_of_order",
                format!(
                    "{name}, line {number}: the interval starting at {} s is not after the one read before: not used",
                    row.t_start_s
                ),
                poll,
            );
        }
        if let Some(last) = self.last.filter(|last| index > last + 1) {
            poll.messages.push(format!(
                "{name}, line {number}: {} intervals missing before it (the proxy stopped?); the estimate starts afresh",
                index - last - 1
            ));
            self.run = RunningEstimate::new(&self.fresh, self.frustration_timeout, false, 0.0);
        }
        self.said.clear();
        *poll.lines.entry("read").or_default() += 1;
        self.last = Some(index);
        let (counters, gate) = match &mut self.gate {
            None => (row.counters, None),
            Some(input) => match input.take(index) {
                Some(g) => (
                    proxy_counters_with_gate(&row.counters, &g.counts, g.dry_run),
                    Some(ProxyGate::covered(&g.counts, g.dry_run)),
                ),
                None => (row.counters, Some(ProxyGate::NOT_COVERED)),
            },
        };
        let given = [ClassInterval {
            class: "",
            counters: &counters,
            exact: None,
        }];
        let _ = self
            .run
            .interval_with_estimates(&given, |row: IntervalRow, estimate| {
                poll.intervals.push(ProxyInterval {
                    index,
                    row,
                    estimate: estimate.clone(),
                    gate,
                });
                Ok::<(), ()>(())
            });
    }
}

/// One JSON Lines record of the proxy's stream: `source`, then `certes
/// estimate --jsonl`'s interval fields, then its start in UNIX time.
#[derive(Serialize)]
struct ProxyJsonLine<'a> {
    source: &'static str,
    #[serde(flatten)]
    row: &'a IntervalRow,
    t_start_unix_s: f64,
    /// With `[gate]`: the gate's verdicts merged into the row.
    #[serde(skip_serializing_if = "Option::is_none")]
    gate: Option<ProxyGate>,
}

/// The thread that follows the stream.
pub struct ProxyPipeline {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<u64>>,
}

impl ProxyPipeline {
    /// `None` without `[proxy]`.
    pub fn start(
        config: &WatchConfig,
        metrics: Arc<WatchMetrics>,
        outputs: Arc<Mutex<Outputs>>,
    ) -> Result<Option<ProxyPipeline>, WatchError> {
        let Some(proxy) = &config.proxy else {
            return Ok(None);
        };
        let certes = Certes::new(config.model.clone()).map_err(WatchError::Model)?;
        let gate = config
            .gate
            .as_ref()
            .map(|g| GateInput::new(g, config.model.interval));
        // With a capture, the capture's pipeline reports the gate's log
        // (its lines, verdicts and messages); this one only merges.
        let report_gate = !config.captures();
        let mut input = ProxyInput::new(proxy, &certes, config.frustration_timeout, gate);
        let interval = config.model.interval;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("certes-proxy".into())
            .spawn(move || {
                let mut intervals = 0;
                loop {
                    let stopping = flag.load(Ordering::Relaxed);
                    intervals += pass(&mut input, interval, report_gate, &metrics, &outputs);
                    if stopping {
                        return intervals;
                    }
                    std::thread::sleep(PROXY_POLL);
                }
            })
            .map_err(WatchError::Thread)?;
        Ok(Some(ProxyPipeline {
            stop,
            thread: Some(thread),
        }))
    }

    /// Whether the thread ended (a panic).
    pub fn finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Reads the stream once more and stops; the intervals estimated.
    pub fn stop(mut self) -> Result<u64, WatchError> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take() {
            Some(thread) => thread.join().map_err(|_| WatchError::Panicked),
            None => Ok(0),
        }
    }
}

impl Drop for ProxyPipeline {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// One poll: the metrics, the log and the JSON Lines; the intervals
/// estimated.
fn pass(
    input: &mut ProxyInput,
    interval: Nanos,
    report_gate: bool,
    metrics: &WatchMetrics,
    outputs: &Mutex<Outputs>,
) -> u64 {
    if let Some((log, gate_poll, waiting)) = input.poll_gate() {
        if report_gate {
            metrics.add_gate_poll(&log, &gate_poll, waiting);
            for message in &gate_poll.messages {
                Outputs::log(outputs, message);
            }
        }
    }
    let poll = input.poll();
    metrics.add_proxy_poll(&input.log_name(), &poll.lines, input.waiting());
    for message in &poll.messages {
        Outputs::log(outputs, message);
    }
    let mut lines = Vec::new();
    for one in &poll.intervals {
        metrics.add_proxy_interval(&one.row, &one.estimate, one.gate.as_ref());
        let line = ProxyJsonLine {
            source: "proxy",
            row: &one.row,
            t_start_unix_s: Nanos(one.index.saturating_mul(interval.0)).as_secs_f64_exact(),
            gate: one.gate,
        };
        match serde_json::to_vec(&line) {
            Ok(bytes) => lines.push(bytes),
            Err(e) => Outputs::log(outputs, &format!("JSON Lines record: {e}")),
        }
    }
    if !lines.is_empty() {
        Outputs::write_jsonl(outputs, &lines);
    }
    poll.intervals.len() as u64
}
