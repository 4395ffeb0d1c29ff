//! An estimate run over a whole input: the model once per class and
//! interval (Section 3.2, one estimator per class as in Section 3.2.4), one
//! [`IntervalRow`] per interval and class, and the whole-input
//! [`Summary`] — the transaction-weighted mean of Eq. 4 beside the exact
//! one for a capture, the drop rate, give-ups, and the SYN-to-END mean a
//! server-side latency metric reports.
//!
//! With classes, a class's rows start at the first interval in which it
//! counted anything ([`ClassInterval::counts_anything`]): its model runs
//! over the intervals before, which are empty, but they give no row, and
//! its summary names its first row's interval (`first_interval`). Read
//! whole or streamed, an input gives the same rows.

use serde::Serialize;

use super::counters::IntervalCounters;
use super::input::{CaptureNotes, ClassInput, EstimateInput, EMPTY_INTERVAL};
use super::model::{Certes, Estimate, NetworkLoss};
use super::observed::{ExactFigures, ExactInterval};
use crate::Nanos;
use std::collections::BTreeMap;

/// One interval of one class, as printed and serialized.
#[derive(Clone, Debug, Serialize)]
pub struct IntervalRow {
    pub t_start_s: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    pub dropped: u64,
    pub accepted: u64,
    /// REFUSED_i: SYNs answered with a RST (failures, not in the mean).
    pub refused: u64,
    pub completed: u64,
    pub drop_rate: f64,
    /// Clients the model estimates gave up in this interval.
    pub gave_up: f64,
    /// CLIENT_RT_i (Eq. 4).
    pub estimate_mean_s: Option<f64>,
    pub syn_to_end_mean_s: Option<f64>,
    pub rtt_mean_s: Option<f64>,
    pub conn_fail_mean_s: Option<f64>,
    pub p50_s: Option<f64>,
    pub p90_s: Option<f64>,
    pub p99_s: Option<f64>,
    /// Capture input: the exact mean of the interval's transactions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exact_mean_s: Option<Option<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exact_completed: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exact_gave_up: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exact_conn_fail_mean_s: Option<Option<f64>>,
}

impl IntervalRow {
    /// Nothing arrived, completed or gave up in the interval.
    pub fn idle(&self) -> bool {
        self.dropped + self.accepted + self.refused + self.completed == 0
            && self.gave_up < 0.005
            && self.exact_gave_up.unwrap_or(0) == 0
    }
}

/// Whole-input figures of one class (or all).
#[derive(Clone, Debug, Serialize)]
pub struct ClassSummary {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    pub offered: u64,
    pub dropped: u64,
    pub accepted: u64,
    /// SYNs answered with a RST: failures, not in the mean.
    pub refused: u64,
    pub drop_rate: f64,
    pub completed: u64,
    /// Clients the model estimates gave up.
    pub gave_up: f64,
    /// Σ SYN-to-END / COMPLETED: what server-side latency metrics report.
    pub syn_to_end_mean_s: Option<f64>,
    pub rtt_mean_s: Option<f64>,
    /// Σ Eq. 4 numerators / Σ transactions.
    pub estimate_mean_s: Option<f64>,
    /// Completed connections by retry count, as the model split them.
    pub estimate_completed_by_retries: Vec<f64>,
    /// A class: the interval of its first row (the first it counted
    /// anything in), from 0; absent when it has no row.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_interval: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exact: Option<ExactSummary>,
    /// (estimate − exact) / exact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub relative_difference: Option<f64>,
}

/// The exact figures of a capture, whole-input.
#[derive(Clone, Debug, Serialize)]
pub struct ExactSummary {
    pub mean_s: Option<f64>,
    pub completed: u64,
    pub gave_up: u64,
    pub refused: u64,
    /// Accepted, then reset by the server before any response: left out of
    /// the mean.
    pub reset: u64,
    /// Of the completed, reset by their client before any response (their
    /// wait is in the mean).
    pub aborted: u64,
    /// Refused + reset + aborted + gave up.
    pub failures: u64,
    /// Failures / (completed + gave up + refused + reset).
    pub error_rate: Option<f64>,
    /// Outcome unknown at the end of the capture: left out.
    pub unresolved: u64,
    pub p50_s: Option<f64>,
    pub p90_s: Option<f64>,
    pub p99_s: Option<f64>,
    /// Present when the transactions outnumber the client times kept one
    /// by one (`observed::MAX_EXACT_CLIENT_TIMES`): the percentiles' largest
    /// relative error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percentiles_relative_error: Option<f64>,
    /// Completed connections by retry count (SYNs before the answered one).
    pub completed_by_retries: Vec<u64>,
}

/// The whole run: its settings, all classes together, and each class.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub input: String,
    pub profile: String,
    pub interval_s: f64,
    pub frustration_timeout_s: f64,
    pub network_loss: String,
    pub intervals: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub origin_unix_s: Option<f64>,
    #[serde(flatten)]
    pub total: ClassSummary,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<ClassSummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<CaptureNotes>,
}

/// Rows and summary of one run.
#[derive(Clone, Debug)]
pub struct EstimateReport {
    /// Interval by interval, classes in order within an interval.
    pub rows: Vec<IntervalRow>,
    pub summary: Summary,
}

/// Runs a copy of `fresh` over each class's intervals and summarizes.
/// `frustration_timeout` is the one the model was told, as reported.
pub fn estimate_input(
    input: &EstimateInput,
    fresh: &Certes,
    frustration_timeout: Nanos,
) -> EstimateReport {
    let mut rows = Vec::with_capacity(input.intervals * input.classes.len());
    let summary = estimate_each(input, fresh, frustration_timeout, |row| {
        rows.push(row);
        Ok::<(), std::convert::Infallible>(())
    });
    let summary = match summary {
        Ok(summary) => summary,
        Err(never) => match never {},
    };
    EstimateReport { rows, summary }
}

/// Like [`estimate_input`], handing each row to `each` as it is made
/// (interval by interval, classes in order within an interval) instead of
/// keeping them: memory does not grow with the number of intervals beyond
/// the input itself. Stops at the first error `each` returns.
pub fn estimate_each<E>(
    input: &EstimateInput,
    fresh: &Certes,
    frustration_timeout: Nanos,
    mut each: impl FnMut(IntervalRow) -> Result<(), E>,
) -> Result<Summary, E> {
    let classed = input.classed();
    let interval = fresh.config().interval;
    let mut estimators: Vec<Certes> = input.classes.iter().map(|_| fresh.clone()).collect();
    let mut cursors: Vec<IntervalCursor> = input
        .classes
        .iter()
        .map(|_| IntervalCursor::default())
        .collect();
    let mut tallies: Vec<Tally> = input.classes.iter().map(|_| Tally::default()).collect();
    let mut first_rows: Vec<Option<usize>> = input.classes.iter().map(|_| None).collect();
    for i in 0..input.intervals {
        for (k, class) in input.classes.iter().enumerate() {
            let c = cursors[k].at(&class.counters, i);
            let e = estimators[k].on_interval(c);
            tallies[k].add(c, &e);
            let exact = class.exact.as_ref().map(|x| &x.intervals[i]);
            if first_rows[k].is_none() {
                let given = ClassInterval {
                    class: &class.class,
                    counters: c,
                    exact,
                };
                if classed && !given.counts_anything() {
                    continue;
                }
                first_rows[k] = Some(i);
            }
            let t_start_s = round9(input.t0_s + (i as f64) * interval.as_secs_f64());
            let class = classed.then(|| class.class.clone());
            each(interval_row(t_start_s, class, c, &e, exact))?;
        }
    }
    Ok(summarize(
        input,
        tallies,
        &first_rows,
        fresh,
        frustration_timeout,
    ))
}

/// The row of one interval of one class.
fn interval_row(
    t_start_s: f64,
    class: Option<String>,
    c: &IntervalCounters,
    e: &Estimate,
    exact: Option<&ExactInterval>,
) -> IntervalRow {
    IntervalRow {
        t_start_s,
        class,
        dropped: c.dropped,
        accepted: c.accepted,
        refused: c.refused,
        completed: c.completed,
        drop_rate: c.drop_rate(),
        gave_up: e.gave_up,
        estimate_mean_s: secs(e.mean),
        syn_to_end_mean_s: secs(e.syn_to_end_mean),
        rtt_mean_s: secs(e.rtt_mean),
        conn_fail_mean_s: secs(e.conn_fail_mean),
        p50_s: secs(e.percentile(0.5)),
        p90_s: secs(e.percentile(0.9)),
        p99_s: secs(e.percentile(0.99)),
        exact_mean_s: exact.map(|x| secs(x.mean())),
        exact_completed: exact.map(|x| x.completed),
        exact_gave_up: exact.map(|x| x.gave_up),
        exact_conn_fail_mean_s: exact.map(|x| secs(x.conn_fail_mean())),
    }
}

/// One class's counters in one interval, for [`RunningEstimate::interval`].
pub struct ClassInterval<'a> {
    /// Empty when the input has no classes.
    pub class: &'a str,
    pub counters: &'a IntervalCounters,
    /// Capture input: the interval's exact figures.
    pub exact: Option<&'a ExactInterval>,
}

impl ClassInterval<'_> {
    /// The class counted something in the interval (a SYN, a completion,
    /// a give-up): with classes, its rows start at the first such
    /// interval.
    pub fn counts_anything(&self) -> bool {
        *self.counters != EMPTY_INTERVAL
            || self.exact.is_some_and(|x| *x != ExactInterval::default())
    }
}

/// An estimate run fed one interval at a time, as a live input closes
/// them (the model is incremental, Section 3.2): each row as soon as its
/// interval is given, the summary at the end. A class first given after
/// earlier intervals runs its model over them, empty. With
/// [`rows_from_first_count`](Self::rows_from_first_count) the rows and
/// summary are those of [`estimate_each`] for the same intervals, but for
/// the classed total, which adds up the class sums (the same figures up
/// to the last bits of the floating-point sums).
pub struct RunningEstimate {
    fresh: Certes,
    frustration_timeout: Nanos,
    classed: bool,
    t0_s: f64,
    next: usize,
    /// Rows of a class start at the first interval it counted anything in.
    from_first_count: bool,
    classes: BTreeMap<String, RunningClass>,
}

/// One class of a [`RunningEstimate`].
struct RunningClass {
    certes: Certes,
    tally: Tally,
    /// The interval of its first row.
    first_row: Option<usize>,
}

impl RunningEstimate {
    /// `classed`: the rows name their class; `t0_s`: interval 0's start.
    pub fn new(
        fresh: &Certes,
        frustration_timeout: Nanos,
        classed: bool,
        t0_s: f64,
    ) -> RunningEstimate {
        RunningEstimate {
            fresh: fresh.clone(),
            frustration_timeout,
            classed,
            t0_s,
            next: 0,
            from_first_count: false,
            classes: BTreeMap::new(),
        }
    }

    /// With classes, a class's rows start at the first interval it counted
    /// anything in (the rule of [`estimate_each`]; see the module docs):
    /// a class given before it counts anything gives no row. Without, a
    /// class gives a row for every interval it is given.
    pub fn rows_from_first_count(mut self) -> RunningEstimate {
        self.from_first_count = true;
        self
    }

    /// Intervals given so far.
    pub fn intervals(&self) -> usize {
        self.next
    }

    /// The next interval of every class known, in class order.
    pub fn interval<E>(
        &mut self,
        classes: &[ClassInterval<'_>],
        mut each: impl FnMut(IntervalRow) -> Result<(), E>,
    ) -> Result<(), E> {
        self.interval_with_estimates(classes, |row, _| each(row))
    }

    /// Like [`interval`](Self::interval), with each row the model's
    /// estimate it came from (its distribution: [`Estimate::cdf`]).
    pub fn interval_with_estimates<E>(
        &mut self,
        classes: &[ClassInterval<'_>],
        mut each: impl FnMut(IntervalRow, &Estimate) -> Result<(), E>,
    ) -> Result<(), E> {
        let i = self.next;
        self.next += 1;
        let t_start_s = round9(self.t0_s + (i as f64) * self.fresh.config().interval.as_secs_f64());
        for given in classes {
            let state = match self.classes.get_mut(given.class) {
                Some(state) => state,
                None => {
                    let mut certes = self.fresh.clone();
                    let mut tally = Tally::default();
                    for _ in 0..i {
                        let e = certes.on_interval(&EMPTY_INTERVAL);
                        tally.add(&EMPTY_INTERVAL, &e);
                    }
                    self.classes
                        .entry(given.class.to_string())
                        .or_insert(RunningClass {
                            certes,
                            tally,
                            first_row: None,
                        })
                }
            };
            let e = state.certes.on_interval(given.counters);
            state.tally.add(given.counters, &e);
            if state.first_row.is_none() {
                if self.from_first_count && self.classed && !given.counts_anything() {
                    continue;
                }
                state.first_row = Some(i);
            }
            let class = self.classed.then(|| given.class.to_string());
            each(
                interval_row(t_start_s, class, given.counters, &e, given.exact),
                &e,
            )?;
        }
        Ok(())
    }

    /// The summary: `exact` holds each class's exact figures (capture
    /// input), `notes` what the reader counted.
    pub fn finish(
        self,
        description: String,
        origin_unix: Option<Nanos>,
        exact: &BTreeMap<String, ExactFigures>,
        notes: Option<CaptureNotes>,
    ) -> Summary {
        let exacts_of =
            |class: &str| -> Vec<&ExactFigures> { exact.get(class).into_iter().collect() };
        let (total, classes) = if self.classed {
            let mut all = Tally::default();
            for state in self.classes.values() {
                all.merge(&state.tally);
            }
            let every: Vec<&ExactFigures> = exact.values().collect();
            let classes = self
                .classes
                .iter()
                .map(|(class, state)| ClassSummary {
                    first_interval: state.first_row,
                    ..class_summary(Some(class.clone()), &exacts_of(class), &state.tally)
                })
                .collect();
            (class_summary(None, &every, &all), classes)
        } else {
            let (class, tally) = match self.classes.iter().next() {
                Some((class, state)) => (class.clone(), state.tally.clone()),
                None => (String::new(), Tally::default()),
            };
            (class_summary(None, &exacts_of(&class), &tally), Vec::new())
        };
        let config = self.fresh.config();
        Summary {
            input: description,
            profile: config.clients.name.clone(),
            interval_s: config.interval.as_secs_f64(),
            frustration_timeout_s: self.frustration_timeout.as_secs_f64(),
            network_loss: network_loss_name(config.network_loss),
            intervals: self.next,
            origin_unix_s: origin_unix.map(|n| n.as_secs_f64()),
            total,
            classes,
            trace: notes,
        }
    }
}

/// Walks one class's non-empty intervals in order of index.
#[derive(Default)]
struct IntervalCursor {
    next: usize,
}

impl IntervalCursor {
    /// The counters of interval `index` (empty when not listed); indices
    /// must be asked in increasing order.
    fn at<'a>(
        &mut self,
        counters: &'a [(usize, IntervalCounters)],
        index: usize,
    ) -> &'a IntervalCounters {
        while counters.get(self.next).is_some_and(|(i, _)| *i < index) {
            self.next += 1;
        }
        match counters.get(self.next) {
            Some((i, c)) if *i == index => c,
            _ => &EMPTY_INTERVAL,
        }
    }
}

/// What a class summary needs from the intervals, added up in interval
/// order (the floating-point sums in the order a list of the estimates
/// would give them).
#[derive(Clone, Debug, Default)]
struct Tally {
    counters: IntervalCounters,
    /// Σ Eq. 4 numerators, ns.
    total_time_nanos: f64,
    transactions: f64,
    gave_up: f64,
    completed_by_attempt: Vec<f64>,
}

impl Tally {
    fn add(&mut self, c: &IntervalCounters, e: &Estimate) {
        let total = &mut self.counters;
        total.dropped += c.dropped;
        total.accepted += c.accepted;
        total.refused += c.refused;
        total.completed += c.completed;
        total.syn_to_end_sum += c.syn_to_end_sum;
        total.rtt_sum += c.rtt_sum;
        self.total_time_nanos += e.total_time_nanos();
        self.transactions += e.transactions();
        self.gave_up += e.gave_up;
        if self.completed_by_attempt.len() < e.completed_by_attempt.len() {
            self.completed_by_attempt
                .resize(e.completed_by_attempt.len(), 0.0);
        }
        for (slot, n) in self
            .completed_by_attempt
            .iter_mut()
            .zip(&e.completed_by_attempt)
        {
            *slot += n;
        }
    }

    /// Adds another tally (its intervals after this one's).
    fn merge(&mut self, other: &Tally) {
        let total = &mut self.counters;
        total.dropped += other.counters.dropped;
        total.accepted += other.counters.accepted;
        total.refused += other.counters.refused;
        total.completed += other.counters.completed;
        total.syn_to_end_sum += other.counters.syn_to_end_sum;
        total.rtt_sum += other.counters.rtt_sum;
        self.total_time_nanos += other.total_time_nanos;
        self.transactions += other.transactions;
        self.gave_up += other.gave_up;
        if self.completed_by_attempt.len() < other.completed_by_attempt.len() {
            self.completed_by_attempt
                .resize(other.completed_by_attempt.len(), 0.0);
        }
        for (slot, n) in self
            .completed_by_attempt
            .iter_mut()
            .zip(&other.completed_by_attempt)
        {
            *slot += n;
        }
    }

    /// Σ numerators / Σ transactions (Eq. 4 over the whole input), ns.
    fn mean_nanos(&self) -> Option<f64> {
        (self.transactions > 0.0).then(|| self.total_time_nanos / self.transactions)
    }
}

fn secs(n: Option<Nanos>) -> Option<f64> {
    n.map(Nanos::as_secs_f64)
}

/// Rounds away binary noise (0.1 + 0.2) so times print as written.
pub fn round9(x: f64) -> f64 {
    (x * 1e9).round() / 1e9
}

/// A duration as people write it: `250 ms`, `21 s`.
pub fn format_seconds(n: Nanos) -> String {
    let s = n.as_secs_f64();
    if s < 1.0 {
        format!("{} ms", round9(s * 1e3))
    } else {
        format!("{} s", round9(s))
    }
}

fn class_summary(class: Option<String>, exacts: &[&ExactFigures], tally: &Tally) -> ClassSummary {
    let total = &tally.counters;
    let mut by_retries = tally.completed_by_attempt.clone();
    by_retries
        .iter_mut()
        .for_each(|n| *n = (*n * 100.0).round() / 100.0);
    while by_retries.last().is_some_and(|n| *n == 0.0) {
        by_retries.pop();
    }
    let (exact, relative_difference) = match exact_summary(exacts) {
        None => (None, None),
        Some((summary, merged)) => {
            let estimate_mean = tally.mean_nanos().map(|mean| Nanos(mean.round() as u64));
            let relative_difference = match (estimate_mean, merged.mean()) {
                (Some(e), Some(x)) if x.0 > 0 => Some((e.0 as f64 - x.0 as f64) / x.0 as f64),
                _ => None,
            };
            (Some(summary), relative_difference)
        }
    };
    ClassSummary {
        class,
        offered: total.offered(),
        dropped: total.dropped,
        accepted: total.accepted,
        refused: total.refused,
        drop_rate: total.drop_rate(),
        completed: total.completed,
        gave_up: (tally.gave_up * 100.0).round() / 100.0,
        syn_to_end_mean_s: secs(total.syn_to_end_mean()),
        rtt_mean_s: secs(total.rtt_mean()),
        estimate_mean_s: tally.mean_nanos().map(|nanos| nanos / 1e9),
        estimate_completed_by_retries: by_retries,
        first_interval: None,
        exact,
        relative_difference,
    }
}

/// The exact figures of several classes, merged; `None` without any.
fn exact_summary(exacts: &[&ExactFigures]) -> Option<(ExactSummary, ExactFigures)> {
    let (first, rest) = exacts.split_first()?;
    let mut merged = (*first).clone();
    for other in rest {
        merged.add_totals(other);
    }
    let completed_by_retries = merged.completed_by_retries.clone();
    let summary = ExactSummary {
        mean_s: secs(merged.mean()),
        completed: merged.completed,
        gave_up: merged.gave_up,
        refused: merged.refused,
        reset: merged.reset,
        aborted: merged.aborted,
        failures: merged.failures(),
        error_rate: merged.error_rate(),
        unresolved: merged.unresolved,
        p50_s: secs(merged.percentile(0.5)),
        p90_s: secs(merged.percentile(0.9)),
        p99_s: secs(merged.percentile(0.99)),
        percentiles_relative_error: merged.times.relative_error(),
        completed_by_retries,
    };
    Some((summary, merged))
}

fn network_loss_name(loss: NetworkLoss) -> String {
    match loss {
        NetworkLoss::None => "none".to_string(),
        NetworkLoss::Fixed(q) => q.to_string(),
        NetworkLoss::FromRetransmissions => "retransmissions".to_string(),
    }
}

fn summarize(
    input: &EstimateInput,
    tallies: Vec<Tally>,
    first_rows: &[Option<usize>],
    certes: &Certes,
    frustration_timeout: Nanos,
) -> Summary {
    let config = certes.config();
    fn exacts_of(classes: &[ClassInput]) -> Vec<&ExactFigures> {
        classes.iter().filter_map(|c| c.exact.as_ref()).collect()
    }
    let all_exacts = exacts_of(&input.classes);
    let (total, classes) = if input.classed() {
        // The whole input's sums run class after class, as one list of
        // every class's estimates would: the model again, per class.
        let mut all = Tally::default();
        for class in &input.classes {
            let mut certes = certes.clone();
            let mut cursor = IntervalCursor::default();
            for i in 0..input.intervals {
                let c = cursor.at(&class.counters, i);
                let e = certes.on_interval(c);
                all.add(c, &e);
            }
        }
        let classes = input
            .classes
            .iter()
            .zip(&tallies)
            .zip(first_rows)
            .map(|((c, tally), first_row)| ClassSummary {
                first_interval: *first_row,
                ..class_summary(
                    Some(c.class.clone()),
                    &exacts_of(std::slice::from_ref(c)),
                    tally,
                )
            })
            .collect();
        (class_summary(None, &all_exacts, &all), classes)
    } else {
        let tally = tallies.into_iter().next().unwrap_or_default();
        (class_summary(None, &all_exacts, &tally), Vec::new())
    };
    Summary {
        input: input.description.clone(),
        profile: config.clients.name.clone(),
        interval_s: config.interval.as_secs_f64(),
        frustration_timeout_s: frustration_timeout.as_secs_f64(),
        network_loss: network_loss_name(config.network_loss),
        intervals: input.intervals,
        origin_unix_s: input.origin_unix.map(|n| n.as_secs_f64()),
        total,
        classes,
        trace: input.capture_notes.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certes::CertesConfig;
    use crate::tcp::ClientMix;

    /// The paper's worked case: with no drop, Eq. 4 is the SYN-to-END mean
    /// plus the RTT mean, interval by interval and over the whole input.
    #[test]
    fn no_drops_estimate_is_syn_to_end_plus_rtt() {
        let counters = IntervalCounters {
            accepted: 10,
            completed: 10,
            syn_to_end_sum: Nanos::from_millis(2500),
            rtt_sum: Nanos::from_millis(400),
            ..IntervalCounters::default()
        };
        let input = EstimateInput {
            description: "test".to_string(),
            t0_s: 0.0,
            origin_unix: None,
            intervals: 3,
            classes: vec![ClassInput {
                class: String::new(),
                counters: vec![(0, counters.clone()), (1, counters.clone()), (2, counters)],
                exact: None,
            }],
            capture_notes: None,
        };
        let clients = ClientMix::builtin("windows-9x-nt").unwrap();
        let config = CertesConfig::new(Nanos::from_secs(1), clients, Nanos::from_secs(21));
        let certes = Certes::new(config).unwrap();
        let report = estimate_input(&input, &certes, Nanos::from_secs(21));
        assert_eq!(report.rows.len(), 3);
        assert_eq!(report.rows[2].t_start_s, 2.0);
        assert!(report.rows[1].class.is_none());
        for row in &report.rows {
            assert!(
                (row.estimate_mean_s.unwrap() - 0.29).abs() < 1e-9,
                "{row:?}"
            );
        }
        let summary = &report.summary;
        assert_eq!((summary.total.offered, summary.total.completed), (30, 30));
        assert!((summary.total.estimate_mean_s.unwrap() - 0.29).abs() < 1e-9);
        assert!(summary.classes.is_empty() && summary.total.exact.is_none());
        assert_eq!(summary.frustration_timeout_s, 21.0);
        assert_eq!(format_seconds(Nanos::from_millis(250)), "250 ms");
    }

    /// Fed interval by interval, the run gives the same rows and summary
    /// as the whole-input run.
    #[test]
    fn running_estimate_equals_the_whole_input_run() {
        let busy = IntervalCounters {
            dropped: 6,
            accepted: 10,
            completed: 9,
            syn_to_end_sum: Nanos::from_millis(2500),
            rtt_sum: Nanos::from_millis(400),
            ..IntervalCounters::default()
        };
        let input = EstimateInput {
            description: "test".to_string(),
            t0_s: 0.0,
            origin_unix: None,
            intervals: 160,
            classes: vec![ClassInput {
                class: String::new(),
                counters: (0..160)
                    .filter(|i| i % 3 != 1)
                    .map(|i| (i, busy.clone()))
                    .collect(),
                exact: None,
            }],
            capture_notes: None,
        };
        let clients = ClientMix::builtin("linux-6.5").unwrap();
        let config = CertesConfig::new(Nanos::from_millis(250), clients, Nanos::from_secs(21));
        let certes = Certes::new(config).unwrap();
        let fto = Nanos::from_secs(21);
        let whole = estimate_input(&input, &certes, fto);
        let mut running = RunningEstimate::new(&certes, fto, false, 0.0);
        let mut rows = Vec::new();
        for i in 0..input.intervals {
            let given = [ClassInterval {
                class: "",
                counters: input.classes[0].at(i),
                exact: None,
            }];
            running
                .interval(&given, |row| {
                    rows.push(row);
                    Ok::<(), ()>(())
                })
                .unwrap();
        }
        let summary = running.finish("test".to_string(), None, &BTreeMap::new(), None);
        let json = |v: &serde_json::Value| v.to_string();
        let value = |v: serde_json::Result<serde_json::Value>| v.unwrap();
        assert_eq!(
            json(&value(serde_json::to_value(&rows))),
            json(&value(serde_json::to_value(&whole.rows)))
        );
        assert_eq!(
            json(&value(serde_json::to_value(&summary))),
            json(&value(serde_json::to_value(&whole.summary)))
        );
        assert!(whole.summary.total.gave_up > 0.0);
    }

    /// With classes, a class's rows start at its first interval with a
    /// count, streamed (given from before it counted, or only from when
    /// it first counted) or whole, and the summary names that interval.
    #[test]
    fn a_class_that_starts_late_has_rows_from_its_first_count() {
        let busy = IntervalCounters {
            dropped: 2,
            accepted: 10,
            completed: 10,
            syn_to_end_sum: Nanos::from_millis(2500),
            rtt_sum: Nanos::from_millis(400),
            ..IntervalCounters::default()
        };
        let class = |name: &str, from: usize| ClassInput {
            class: name.to_string(),
            counters: (from..40).map(|i| (i, busy.clone())).collect(),
            exact: None,
        };
        let input = EstimateInput {
            description: "test".to_string(),
            t0_s: 0.0,
            origin_unix: None,
            intervals: 40,
            classes: vec![class("a", 0), class("b", 25)],
            capture_notes: None,
        };
        let clients = ClientMix::builtin("linux-6.5").unwrap();
        let config = CertesConfig::new(Nanos::from_millis(250), clients, Nanos::from_secs(21));
        let certes = Certes::new(config).unwrap();
        let fto = Nanos::from_secs(21);
        let whole = estimate_input(&input, &certes, fto);
        let classes_of = |rows: &[IntervalRow], name: &str| {
            rows.iter()
                .filter(|r| r.class.as_deref() == Some(name))
                .count()
        };
        assert_eq!(classes_of(&whole.rows, "a"), 40);
        assert_eq!(classes_of(&whole.rows, "b"), 15);
        let json = |v: serde_json::Result<serde_json::Value>| v.unwrap().to_string();
        // Class b given from interval 10 (known, nothing counted), or only
        // from 25.
        for known_from in [10, 25] {
            let mut running = RunningEstimate::new(&certes, fto, true, 0.0).rows_from_first_count();
            let mut rows = Vec::new();
            for i in 0..input.intervals {
                let mut given = vec![ClassInterval {
                    class: "a",
                    counters: input.classes[0].at(i),
                    exact: None,
                }];
                if i >= known_from {
                    given.push(ClassInterval {
                        class: "b",
                        counters: input.classes[1].at(i),
                        exact: None,
                    });
                }
                running
                    .interval(&given, |row| {
                        rows.push(row);
                        Ok::<(), ()>(())
                    })
                    .unwrap();
            }
            let summary = running.finish("test".to_string(), None, &BTreeMap::new(), None);
            assert_eq!(
                json(serde_json::to_value(&rows)),
                json(serde_json::to_value(&whole.rows)),
                "b known from {known_from}"
            );
            assert_eq!(
                json(serde_json::to_value(&summary.classes)),
                json(serde_json::to_value(&whole.summary.classes))
            );
            let first: Vec<Option<usize>> =
                summary.classes.iter().map(|c| c.first_interval).collect();
            assert_eq!(first, [Some(0), Some(25)]);
        }
    }
}
