//! What an estimate run reads, before the model runs: per class, the
//! interval counters of Eq. 2–3 on one grid of Δ-long intervals, and for
//! a capture the exact figures over the same intervals.

use serde::Serialize;

use super::counters::IntervalCounters;
use super::observed::{
    bucket, end_abandoned, exact, ConnectionObservation, ExactConfig, ExactFigures, IntervalGrid,
    ObservedCounters, ObservedError,
};
use crate::Nanos;

/// One class's intervals, ready for the model (Section 3.2.4).
#[derive(Clone, Debug)]
pub struct ClassInput {
    /// Empty when the input has no classes.
    pub class: String,
    /// The intervals that saw anything, as (index, counters) in order of
    /// index; every other interval of the run is empty. Idle runs take no
    /// room, however long.
    pub counters: Vec<(usize, IntervalCounters)>,
    /// Capture input: the exact figures over the same intervals.
    pub exact: Option<ExactFigures>,
}

/// An interval where nothing happened.
pub static EMPTY_INTERVAL: IntervalCounters = IntervalCounters {
    dropped: 0,
    dropped_by_attempt: Vec::new(),
    accepted: 0,
    refused: 0,
    refused_by_attempt: Vec::new(),
    completed: 0,
    syn_to_end_sum: Nanos::ZERO,
    rtt_sum: Nanos::ZERO,
    syn_to_end_histogram: None,
    segments_sent: 0,
    segments_retransmitted: 0,
};

impl ClassInput {
    /// The counters of interval `index` (empty when not listed).
    pub fn at(&self, index: usize) -> &IntervalCounters {
        match self.counters.binary_search_by_key(&index, |(i, _)| *i) {
            Ok(position) => &self.counters[position].1,
            Err(_) => &EMPTY_INTERVAL,
        }
    }

    /// A class from one entry per interval (empty ones are left out).
    pub fn from_dense(
        class: String,
        counters: Vec<IntervalCounters>,
        exact: Option<ExactFigures>,
    ) -> ClassInput {
        let empty = IntervalCounters::default();
        ClassInput {
            class,
            counters: counters
                .into_iter()
                .enumerate()
                .filter(|(_, c)| *c != empty)
                .collect(),
            exact,
        }
    }
}

/// Most classes × intervals one estimate run takes: every interval of
/// every class is a row of the output (a counters file of a few bytes
/// could otherwise ask for years of intervals, or a `--by` key for one
/// class per client).
pub const MAX_CLASS_INTERVALS: u64 = 4_000_000;

/// Refuses a run of `classes` × `intervals` beyond
/// [`MAX_CLASS_INTERVALS`]; `key` names what splits the input into
/// classes (a column, a `--by` key).
pub fn check_class_intervals(
    classes: usize,
    intervals: usize,
    key: &str,
) -> Result<(), TooManyClassIntervals> {
    let cells = (classes as u64).saturating_mul(intervals as u64);
    if cells > MAX_CLASS_INTERVALS {
        return Err(TooManyClassIntervals {
            classes,
            intervals,
            key: key.to_string(),
        });
    }
    Ok(())
}

/// A run larger than [`MAX_CLASS_INTERVALS`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{classes} classes (by {key}) × {intervals} intervals is more than the {limit} class-intervals \
     one run takes (MAX_CLASS_INTERVALS); use a longer interval, fewer classes or a shorter input",
    limit = MAX_CLASS_INTERVALS
)]
pub struct TooManyClassIntervals {
    pub classes: usize,
    pub intervals: usize,
    pub key: String,
}

/// One class of observed connections on the grid: what the server would
/// have counted and the exact figures.
#[derive(Clone, Debug)]
pub struct ObservedClass {
    pub counters: ObservedCounters,
    pub exact: ExactFigures,
    /// Accepted connections ended at first SYN + FTO
    /// (`observed::end_abandoned`).
    pub abandoned: u64,
}

/// The steps every reader of observed connections takes, in order: end
/// the abandoned connections, bucket into counters, compute the exact
/// figures.
pub fn observe_class(
    observations: &mut [ConnectionObservation],
    grid: IntervalGrid,
    capture_end: Nanos,
    exact_config: &ExactConfig,
) -> Result<ObservedClass, ObservedError> {
    let abandoned = end_abandoned(observations, exact_config.frustration_timeout, capture_end);
    let counters = bucket(observations, grid, capture_end)?;
    let exact = exact(observations, grid, capture_end, exact_config)?;
    Ok(ObservedClass {
        counters,
        exact,
        abandoned,
    })
}

/// Every class of one input on one interval grid.
#[derive(Clone, Debug)]
pub struct EstimateInput {
    /// What was read, as named in messages and the summary.
    pub description: String,
    /// Start of interval 0, in seconds on the input's own time axis (the
    /// file's `t_start_s`, or 0 for a capture's first interval).
    pub t0_s: f64,
    /// Capture input: interval 0's start, ns since the UNIX epoch.
    pub origin_unix: Option<Nanos>,
    pub intervals: usize,
    /// At least one; sorted by class name.
    pub classes: Vec<ClassInput>,
    /// Capture input: what the reader and bucketing counted.
    pub capture_notes: Option<CaptureNotes>,
}

impl EstimateInput {
    /// Whether the input names classes (then rows and summaries say which).
    pub fn classed(&self) -> bool {
        self.classes.len() > 1 || self.classes.first().is_some_and(|c| !c.class.is_empty())
    }
}

/// What the capture reader and bucketing counted beside the connections.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CaptureNotes {
    pub packets: u64,
    pub connections: u64,
    pub listeners: Vec<String>,
    pub connections_without_syn: u64,
    pub connections_to_other_servers: u64,
    pub syns_after_answer: u64,
    pub rtt_missing: u64,
    /// Accepted connections ended at first SYN + FTO (never served or
    /// closed; see `observed::end_abandoned`).
    pub abandoned: u64,
    /// Connections the table finished early to stay within its cap (of
    /// them, half-open): their SYNs are counted, their END may be missing.
    pub connections_evicted: u64,
    pub connections_evicted_half_open: u64,
    /// Connections to a listener that were not kept while it had not yet
    /// answered any SYN (the reader's cap on such connections): left out.
    #[serde(skip_serializing_if = "is_zero")]
    pub connections_not_kept: u64,
    /// Read as a stream: counts (drops, accepts, completions, give-ups)
    /// that arrived for an interval already handed over, left out.
    #[serde(skip_serializing_if = "is_zero")]
    pub late_counts: u64,
    /// Read as a stream: connections decided before the capture's clock
    /// reached their give-up or abandon instant, to stay within the cap on
    /// held connections (as if the capture ran on to that instant).
    #[serde(skip_serializing_if = "is_zero")]
    pub decided_early: u64,
    /// The capture stops mid-record: what and at which byte offset (every
    /// complete packet before it was read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut_off: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
