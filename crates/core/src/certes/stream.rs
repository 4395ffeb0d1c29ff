//! Observed connections bucketed as they finish, in bounded memory: the
//! interval counters (Eq. 2–3, Section 4) and the exact figures of
//! [`observed`](super::observed), with the same rules, for a capture read
//! once from start to end (a file or a live pipe).
//!
//! Each observation is added to its intervals at once and dropped, except
//! one whose outcome depends on when the capture stops: a never-answered
//! connection whose client would give up later than the capture's clock
//! (gave up or unresolved), and an accepted connection without END whose
//! first SYN + FTO is still ahead (abandoned or unresolved). Those wait,
//! until the clock passes that instant or the capture ends — at most one
//! frustration timeout (or the profile's give-up time) after their first
//! SYN. [`ClassBucketer::retained`] counts them. A flood can put many
//! connections in that window, so the caller caps them: beyond its cap the
//! observation decided soonest is decided at once, as if the capture ran on
//! to that instant ([`ClassBucketer::decide_soonest_early`]), and counted.
//!
//! Intervals are kept sparse, by index from the clock's origin
//! (`t / Δ`, the same as [`IntervalGrid::aligned`]'s), until the caller
//! takes them: when no later observation can land in them
//! ([`ClassBucketer::take_through`]), or at the end.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use super::counters::IntervalCounters;
use super::observed::{
    abandon_time, bucket_one, end_abandoned_one, exact_one, give_up_time, BucketStats,
    ConnectionObservation, ExactConfig, ExactFigures, ExactInterval, IntervalGrid, IntervalSlots,
    ObservedError,
};
use crate::Nanos;

/// Intervals by index from the clock's origin.
struct SparseSlots<'a, T> {
    interval: Nanos,
    map: &'a mut BTreeMap<u64, T>,
}

impl<T: Default> IntervalSlots<T> for SparseSlots<'_, T> {
    fn index(&self, t: Nanos) -> u64 {
        t.0 / self.interval.0
    }

    fn at(&mut self, t: Nanos) -> &mut T {
        self.map.entry(self.index(t)).or_default()
    }
}

/// An observation waiting for the clock to decide its outcome.
struct Waiting {
    decided_at: Nanos,
    sequence: u64,
    observation: ConnectionObservation,
}

impl PartialEq for Waiting {
    fn eq(&self, other: &Self) -> bool {
        (self.decided_at, self.sequence) == (other.decided_at, other.sequence)
    }
}

impl Eq for Waiting {}

impl PartialOrd for Waiting {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Waiting {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.decided_at, self.sequence).cmp(&(other.decided_at, other.sequence))
    }
}

/// One interval taken from a [`ClassBucketer`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BucketedInterval {
    /// Index from the clock's origin (`start / Δ`).
    pub index: u64,
    pub counters: IntervalCounters,
    pub exact: ExactInterval,
}

/// One class's observations, bucketed as they come (see the module docs).
pub struct ClassBucketer {
    interval: Nanos,
    config: ExactConfig,
    counters: BTreeMap<u64, IntervalCounters>,
    exact: BTreeMap<u64, ExactInterval>,
    stats: BucketStats,
    /// Totals only: no connections, no intervals.
    figures: ExactFigures,
    abandoned: u64,
    waiting: BinaryHeap<Reverse<Waiting>>,
    /// First SYNs of the waiting observations (multiset).
    waiting_first_syns: BTreeMap<Nanos, u32>,
    clock: Nanos,
    added: u64,
    decided_early: u64,
}

impl ClassBucketer {
    pub fn new(interval: Nanos, config: ExactConfig) -> Result<ClassBucketer, ObservedError> {
        if interval == Nanos::ZERO {
            return Err(ObservedError::ZeroInterval);
        }
        if config.frustration_timeout == Nanos::ZERO {
            return Err(ObservedError::ZeroFrustrationTimeout);
        }
        let grid = IntervalGrid::new(Nanos::ZERO, interval)?;
        Ok(ClassBucketer {
            interval,
            config,
            counters: BTreeMap::new(),
            exact: BTreeMap::new(),
            stats: BucketStats::default(),
            figures: ExactFigures::empty(grid, 0),
            abandoned: 0,
            waiting: BinaryHeap::new(),
            waiting_first_syns: BTreeMap::new(),
            clock: Nanos::ZERO,
            added: 0,
            decided_early: 0,
        })
    }

    /// Adds one finished connection. Its events must not be later than the
    /// clock given to [`advance`](Self::advance) (a capture's connection
    /// finishes after its packets).
    pub fn add(&mut self, observation: ConnectionObservation) -> Result<(), ObservedError> {
        observation.validate(self.added as usize)?;
        self.added += 1;
        self.clock = self
            .clock
            .max(observation.syn_arrivals[observation.syn_arrivals.len() - 1]);
        if let Some(end) = observation.end {
            self.clock = self.clock.max(end);
        }
        match self.decided_at(&observation) {
            Some(decided_at) if decided_at > self.clock => {
                *self
                    .waiting_first_syns
                    .entry(observation.syn_arrivals[0])
                    .or_default() += 1;
                self.waiting.push(Reverse(Waiting {
                    decided_at,
                    sequence: self.added,
                    observation,
                }));
            }
            _ => self.apply(observation, self.clock),
        }
        Ok(())
    }

    /// The instant from which the outcome no longer depends on the
    /// capture's end, when there is one.
    fn decided_at(&self, o: &ConnectionObservation) -> Option<Nanos> {
        match (o.answered, o.refused) {
            (Some(_), _) => abandon_time(o, self.config.frustration_timeout),
            (None, true) => None,
            (None, false) => Some(give_up_time(o, &self.config)),
        }
    }

    fn apply(&mut self, mut o: ConnectionObservation, capture_end: Nanos) {
        if end_abandoned_one(&mut o, self.config.frustration_timeout, capture_end) {
            self.abandoned += 1;
        }
        let mut counters = SparseSlots {
            interval: self.interval,
            map: &mut self.counters,
        };
        bucket_one(&o, &mut self.stats, &mut counters);
        let mut exact = SparseSlots {
            interval: self.interval,
            map: &mut self.exact,
        };
        exact_one(
            0,
            &o,
            capture_end,
            &self.config,
            &mut self.figures,
            &mut exact,
        );
    }

    /// The capture's clock reached `now`: the waiting observations whose
    /// outcome it decides are added.
    pub fn advance(&mut self, now: Nanos) {
        self.clock = self.clock.max(now);
        while self
            .waiting
            .peek()
            .is_some_and(|w| w.0.decided_at <= self.clock)
        {
            if let Some(Reverse(waiting)) = self.waiting.pop() {
                self.forget_waiting(&waiting.observation);
                self.apply(waiting.observation, self.clock);
            }
        }
    }

    fn forget_waiting(&mut self, o: &ConnectionObservation) {
        let first = o.syn_arrivals[0];
        if let Some(n) = self.waiting_first_syns.get_mut(&first) {
            *n -= 1;
            if *n == 0 {
                self.waiting_first_syns.remove(&first);
            }
        }
    }

    /// The capture ended at `capture_end`: every waiting observation is
    /// decided.
    pub fn finish(&mut self, capture_end: Nanos) {
        self.clock = self.clock.max(capture_end);
        while let Some(Reverse(waiting)) = self.waiting.pop() {
            self.forget_waiting(&waiting.observation);
            self.apply(waiting.observation, capture_end);
        }
    }

    /// Observations held until the clock decides them.
    pub fn retained(&self) -> usize {
        self.waiting.len()
    }

    /// Decides the waiting observation whose outcome the clock would decide
    /// soonest, as if the capture ran on to that instant (what
    /// [`advance`](Self::advance) does when the clock gets there); the
    /// caller's cap on held observations. Returns whether there was one.
    pub fn decide_soonest_early(&mut self) -> bool {
        let Some(Reverse(waiting)) = self.waiting.pop() else {
            return false;
        };
        self.forget_waiting(&waiting.observation);
        self.decided_early += 1;
        let decided_at = waiting.decided_at;
        self.apply(waiting.observation, decided_at);
        true
    }

    /// Observations decided early by [`decide_soonest_early`](Self::decide_soonest_early).
    pub fn decided_early(&self) -> u64 {
        self.decided_early
    }

    /// Intervals holding something, not yet taken.
    pub fn open_intervals(&self) -> usize {
        self.counters.len().max(self.exact.len())
    }

    /// The earliest first SYN of a waiting observation: its counts land at
    /// or after it.
    pub fn earliest_waiting(&self) -> Option<Nanos> {
        self.waiting_first_syns.keys().next().copied()
    }

    /// Takes every interval up to index `last` (inclusive), in order.
    pub fn take_through(&mut self, last: u64) -> Vec<BucketedInterval> {
        let Some(after) = last.checked_add(1) else {
            return self.take_all();
        };
        let later_counters = self.counters.split_off(&after);
        let later_exact = self.exact.split_off(&after);
        let counters = std::mem::replace(&mut self.counters, later_counters);
        let exact = std::mem::replace(&mut self.exact, later_exact);
        merge(counters, exact)
    }

    fn take_all(&mut self) -> Vec<BucketedInterval> {
        merge(
            std::mem::take(&mut self.counters),
            std::mem::take(&mut self.exact),
        )
    }

    pub fn stats(&self) -> &BucketStats {
        &self.stats
    }

    /// The exact figures' totals (no connections, no intervals).
    pub fn figures(&self) -> &ExactFigures {
        &self.figures
    }

    /// Accepted connections ended at first SYN + FTO
    /// (`observed::end_abandoned`).
    pub fn abandoned(&self) -> u64 {
        self.abandoned
    }
}

/// The two maps' intervals side by side, in order of index.
fn merge(
    counters: BTreeMap<u64, IntervalCounters>,
    exact: BTreeMap<u64, ExactInterval>,
) -> Vec<BucketedInterval> {
    let mut out: BTreeMap<u64, BucketedInterval> = BTreeMap::new();
    for (index, c) in counters {
        out.entry(index).or_default().counters = c;
    }
    for (index, x) in exact {
        out.entry(index).or_default().exact = x;
    }
    out.into_iter()
        .map(|(index, mut interval)| {
            interval.index = index;
            interval
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certes::observed::{bucket, end_abandoned, exact};
    use crate::tcp::ClientMix;

    fn s(secs: f64) -> Nanos {
        Nanos::from_secs_f64(secs)
    }

    fn config() -> ExactConfig {
        ExactConfig {
            clients: ClientMix::builtin("linux-6.5").unwrap(),
            frustration_timeout: Nanos::from_secs(21),
        }
    }

    /// Deciding the soonest waiting observation early gives what letting
    /// the clock reach its instant gives, and is counted.
    #[test]
    fn deciding_early_is_the_clock_reaching_the_instant() {
        let never_answered = |first: f64| ConnectionObservation {
            syn_arrivals: vec![s(first), s(first + 1.0)],
            ..Default::default()
        };
        let accepted_unserved = |first: f64| ConnectionObservation {
            syn_arrivals: vec![s(first)],
            answered: Some(0),
            ..Default::default()
        };
        let interval = Nanos::from_millis(250);
        let mut early = ClassBucketer::new(interval, config()).unwrap();
        let mut clocked = ClassBucketer::new(interval, config()).unwrap();
        for b in [&mut early, &mut clocked] {
            b.advance(s(101.0));
            b.add(never_answered(100.0)).unwrap();
            b.add(accepted_unserved(100.5)).unwrap();
            assert_eq!(b.retained(), 2);
        }
        assert!(early.decide_soonest_early());
        assert!(early.decide_soonest_early());
        assert!(!early.decide_soonest_early());
        assert_eq!((early.retained(), early.decided_early()), (0, 2));
        clocked.advance(s(200.0));
        assert_eq!((clocked.retained(), clocked.decided_early()), (0, 0));
        assert_eq!(early.abandoned(), 1);
        assert_eq!(early.abandoned(), clocked.abandoned());
        assert_eq!(early.stats(), clocked.stats());
        assert_eq!(early.take_through(u64::MAX), clocked.take_through(u64::MAX));
        assert_eq!(early.figures().gave_up, clocked.figures().gave_up);
        assert_eq!(early.figures().gave_up, 1);
    }

    /// A mix of every outcome, fed in the order a capture finishes them,
    /// with the clock advancing: the same counters and figures as the
    /// batch functions over the whole list.
    #[test]
    fn streaming_equals_batch_and_holds_only_undecided_connections() {
        let mut observations = Vec::new();
        for i in 0..400u64 {
            let first = s(100.0 + 0.37 * i as f64);
            let o = match i % 5 {
                // Answered at once, served.
                0 => ConnectionObservation {
                    syn_arrivals: vec![first],
                    answered: Some(0),
                    end: Some(first + Nanos::from_millis(30 + i % 11)),
                    rtt: Some(Nanos::from_millis(2)),
                    segments_sent: 2,
                    ..Default::default()
                },
                // Two drops, then served.
                1 => ConnectionObservation {
                    syn_arrivals: vec![first, first + s(1.0), first + s(2.0)],
                    answered: Some(2),
                    end: Some(first + s(2.2)),
                    ..Default::default()
                },
                // Never answered.
                2 => ConnectionObservation {
                    syn_arrivals: vec![first, first + s(1.0), first + s(3.0)],
                    ..Default::default()
                },
                // Accepted, never served: abandoned or unresolved.
                3 => ConnectionObservation {
                    syn_arrivals: vec![first],
                    answered: Some(0),
                    ..Default::default()
                },
                _ => ConnectionObservation {
                    syn_arrivals: vec![first],
                    refused: true,
                    ..Default::default()
                },
            };
            observations.push(o);
        }
        let capture_end = s(260.0);
        let interval = Nanos::from_millis(250);
        let grid = IntervalGrid::aligned(s(100.0), interval).unwrap();
        let mut batch = observations.clone();
        let abandoned = end_abandoned(&mut batch, config().frustration_timeout, capture_end);
        let counted = bucket(&batch, grid, capture_end).unwrap();
        let figures = exact(&batch, grid, capture_end, &config()).unwrap();

        let mut stream = ClassBucketer::new(interval, config()).unwrap();
        let mut most_retained = 0;
        for o in &observations {
            let last = o
                .syn_arrivals
                .last()
                .copied()
                .into_iter()
                .chain(o.end)
                .max();
            stream.advance(last.unwrap());
            stream.add(o.clone()).unwrap();
            most_retained = most_retained.max(stream.retained());
        }
        // Only the connections of the last ~21 s wait: 3 of every 5 at 0.37 s apart.
        assert!(most_retained > 0 && most_retained < 40, "{most_retained}");
        stream.finish(capture_end);
        assert_eq!(stream.retained(), 0);
        assert_eq!(stream.abandoned(), abandoned);
        assert_eq!(stream.stats(), &counted.stats);
        let offset = grid.start.0 / interval.0;
        let taken = stream.take_through(u64::MAX);
        let mut dense = vec![IntervalCounters::default(); counted.intervals.len()];
        let mut dense_exact = vec![ExactInterval::default(); counted.intervals.len()];
        for b in taken {
            dense[(b.index - offset) as usize] = b.counters;
            dense_exact[(b.index - offset) as usize] = b.exact;
        }
        assert_eq!(dense, counted.intervals);
        assert_eq!(dense_exact, figures.intervals);
        let totals = stream.figures();
        assert_eq!(
            (
                totals.completed,
                totals.gave_up,
                totals.refused,
                totals.unresolved,
                totals.total_time
            ),
            (
                figures.completed,
                figures.gave_up,
                figures.refused,
                figures.unresolved,
                figures.total_time
            )
        );
        assert_eq!(totals.completed_by_retries, figures.completed_by_retries);
        for q in [0.5, 0.9, 0.99] {
            assert_eq!(totals.percentile(q), figures.percentile(q));
        }
        assert!(figures.unresolved > 0 && figures.gave_up > 0);
    }

    #[test]
    fn taking_intervals_splits_at_the_index() {
        let mut stream = ClassBucketer::new(Nanos::from_secs(1), config()).unwrap();
        for t in [1.5, 2.5, 3.5] {
            stream.advance(s(t));
            stream
                .add(ConnectionObservation {
                    syn_arrivals: vec![s(t)],
                    refused: true,
                    ..Default::default()
                })
                .unwrap();
        }
        // Refused after one SYN: nothing dropped, one REFUSED in the
        // interval of the SYN.
        let first = stream.take_through(2);
        let refused: Vec<_> = first
            .iter()
            .map(|t| (t.index, t.counters.dropped, t.counters.refused))
            .collect();
        assert_eq!(refused, vec![(1, 0, 1), (2, 0, 1)]);
        assert_eq!(stream.open_intervals(), 1);
        stream
            .add(ConnectionObservation {
                syn_arrivals: vec![s(3.6), s(4.6)],
                refused: true,
                ..Default::default()
            })
            .unwrap();
        let taken = stream.take_through(2);
        assert!(taken.is_empty());
        let taken = stream.take_through(3);
        assert_eq!(taken.len(), 1);
        let c = &taken[0].counters;
        assert_eq!((taken[0].index, c.dropped, c.refused), (3, 1, 1));
        let last = stream.take_through(4);
        assert_eq!((last[0].index, last[0].counters.refused), (4, 1));
        assert_eq!(stream.stats().refused, 4);
    }
}
