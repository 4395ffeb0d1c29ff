//! SYN admission filters: each arriving connection request is accepted,
//! dropped (the client will retransmit) or rejected (a RST tells the client
//! to stop).
//!
//! Abacus paper (`abacus-filters-syn-control.txt`):
//! * [`TokenBucketFilter`] — Section 3.2: a token bucket of size W refilled
//!   at r_t, that drops (`TBF`) or rejects (`TBF w/ Reject`) when empty.
//! * [`Abacus`] — Section 5, Figures 6 and 7: a token bucket first stage and
//!   a circular array of future buckets that decides drop or reject.
//! * [`PredictiveGreedy`] — Section 4.3, Eq. 12–16: a threshold on drops
//!   chosen each interval by the analytic cost model of Section 4.2.
//! * [`FilterSpec`] — the `[filter]` table every driver reads.
//!
//! Every filter is fed the arrival time of each SYN and returns a
//! [`Verdict`]; time only ever moves forward (an earlier `now` than the last
//! one seen is treated as the last one).

mod abacus;
mod capacity;
mod greedy;
mod params;
pub mod record;
mod retransmit;
mod spec;
mod token_bucket;

pub use abacus::{Abacus, AbacusConfig};
pub use capacity::{
    CapacityConfig, CapacityEstimator, CapacityInterval, DEFAULT_CAPACITY_SMOOTHING,
};
pub use greedy::{GreedyConfig, PredictiveGreedy};
pub use params::{AbacusWindow, FilterKind, FilterParams, DEFAULT_ARRIVAL_SMOOTHING};
pub use retransmit::RetransmitTable;
pub use spec::{
    FilterSpec, Refill, ValidFilter, DEFAULT_DELAY_COST, DEFAULT_FILTER_INTERVAL,
    DEFAULT_REJECT_COST,
};
pub use token_bucket::{EmptyAction, TokenBucket, TokenBucketFilter};

use crate::Nanos;

/// What to do with one connection request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Let the SYN through: the handshake completes.
    Accept,
    /// Discard silently: the client retransmits after its timeout.
    Drop,
    /// Answer with a RST: the client gives up (assumption A5).
    Reject,
}

/// A SYN admission filter.
pub trait SynFilter {
    /// A connection request arrives at `now`.
    fn on_syn(&mut self, now: Nanos) -> Verdict;

    /// Brings the filter's state up to `now` without a SYN: refills the
    /// first stage and closes the observation periods that ended. Pure
    /// bookkeeping: the verdicts of later SYNs are the same with or without
    /// it. Before the first SYN it changes nothing (periods start at the
    /// first arrival).
    fn advance(&mut self, now: Nanos);

    /// The filter's state, for metrics (as of the last `on_syn` or
    /// `advance`).
    fn snapshot(&self) -> FilterSnapshot;

    /// Changes r_t, the first stage's refill rate (and with it the second
    /// stage's spare capacity), e.g. when a live driver measures the
    /// server's capacity. Tokens already in the buckets stay.
    fn set_refill_rate(&mut self, refill_rate: f64) -> Result<(), FilterConfigError>;

    /// If every SYN offered at an instant in `[now, until)` — any number of
    /// them, in time order, with nothing else in between — would get the
    /// same verdict, that verdict and `until` (the first instant it may
    /// change: a token refilled, an observation period ended). Pure. `None`
    /// when the next SYN could get another verdict than the one after it,
    /// or the filter cannot tell without changing its state.
    ///
    /// A live driver uses it to let the kernel apply the verdict without
    /// asking, and then tells the filter with [`SynFilter::on_decided_elsewhere`].
    fn constant_until(&self, now: Nanos) -> Option<ConstantVerdict> {
        let _ = now;
        None
    }

    /// `count` SYNs that arrived before the `until` of a
    /// [`SynFilter::constant_until`] were given `verdict` without the
    /// filter: they are offered to it now, at `at`, so that its state is
    /// what deciding them would have made it. Returns how many the filter
    /// would have decided otherwise (zero unless the SYNs came after the
    /// `until`, e.g. counted late).
    fn on_decided_elsewhere(&mut self, count: u64, verdict: Verdict, at: Nanos) -> u64 {
        let mut differing = 0;
        for _ in 0..count {
            differing += u64::from(self.on_syn(at) != verdict);
        }
        differing
    }
}

/// A verdict every SYN gets until an instant ([`SynFilter::constant_until`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConstantVerdict {
    /// `Drop` or `Reject` (an accept takes a token: never constant).
    pub verdict: Verdict,
    /// The first instant at which the verdict may change.
    pub until: Nanos,
}

/// What a filter's state is at one moment: the first-stage bucket for all
/// filters, and the second stage's for the Abacus Filter and Predictive
/// Greedy.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct FilterSnapshot {
    /// Whole tokens in the first-stage bucket.
    pub tokens: u64,
    /// W.
    pub bucket_size: u64,
    /// r_t, tokens per second.
    pub refill_rate: f64,
    /// Abacus and Greedy: λ, estimated new requests per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arrival_rate: Option<f64>,
    /// Abacus: Σ A[i], tokens in the future buckets (current one included).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub future_tokens: Option<u64>,
    /// Abacus: Σ B[i], chain-borrowed retransmissions expected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chain_borrowed: Option<u64>,
    /// Abacus: number of future buckets (min(S, T_N)/T0 + 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub future_buckets: Option<usize>,
    /// Greedy: λ_thresh of the current period.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drop_threshold: Option<f64>,
    /// Greedy: drops still allowed in the current period.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drop_budget: Option<u64>,
}

impl<F: SynFilter + ?Sized> SynFilter for Box<F> {
    fn on_syn(&mut self, now: Nanos) -> Verdict {
        (**self).on_syn(now)
    }
    fn advance(&mut self, now: Nanos) {
        (**self).advance(now)
    }
    fn snapshot(&self) -> FilterSnapshot {
        (**self).snapshot()
    }
    fn set_refill_rate(&mut self, refill_rate: f64) -> Result<(), FilterConfigError> {
        (**self).set_refill_rate(refill_rate)
    }
    fn constant_until(&self, now: Nanos) -> Option<ConstantVerdict> {
        (**self).constant_until(now)
    }
    fn on_decided_elsewhere(&mut self, count: u64, verdict: Verdict, at: Nanos) -> u64 {
        (**self).on_decided_elsewhere(count, verdict, at)
    }
}

/// Why a filter's parameters are unusable.
pub type FilterConfigError = crate::OutOfRange;

pub(crate) fn check(
    ok: bool,
    parameter: &'static str,
    expected: &'static str,
    value: impl std::fmt::Display,
) -> Result<(), FilterConfigError> {
    crate::OutOfRange::check(ok, parameter, expected, value)
}

/// A duration in whole observation periods of length `interval`, rounded,
/// at least one (a retransmission never lands in the period it left).
pub(crate) fn periods(duration: Nanos, interval: Nanos) -> usize {
    ((duration.0 as f64 / interval.0 as f64).round() as usize).max(1)
}

/// Checks the two parameters every interval-driven filter shares.
pub(crate) fn check_interval_and_smoothing(
    interval: Nanos,
    arrival_smoothing: f64,
) -> Result<(), FilterConfigError> {
    check(interval > Nanos::ZERO, "interval T0", "positive", interval)?;
    check(
        arrival_smoothing > 0.0 && arrival_smoothing <= 1.0,
        "arrival smoothing",
        "in (0, 1]",
        arrival_smoothing,
    )
}

/// Observation periods of length T0 (assumption A7), advanced lazily from
/// the arrival times handed to a filter.
#[derive(Clone, Debug)]
pub(crate) struct Intervals {
    length: Nanos,
    /// Start of the current period; `None` before the first arrival.
    start: Option<Nanos>,
}

impl Intervals {
    pub(crate) fn new(length: Nanos) -> Intervals {
        Intervals {
            length,
            start: None,
        }
    }

    /// Whether the first period has started (an arrival was seen).
    pub(crate) fn started(&self) -> bool {
        self.start.is_some()
    }

    /// End of the current period (`None` before the first arrival).
    pub(crate) fn current_end(&self) -> Option<Nanos> {
        self.start.map(|start| start + self.length)
    }

    /// Start of the current period (zero before the first arrival).
    pub(crate) fn current_start(&self) -> Nanos {
        self.start.unwrap_or(Nanos::ZERO)
    }

    /// Moves to the period containing `now` and returns how many periods
    /// ended since the last call. The first call starts the first period.
    pub(crate) fn advance(&mut self, now: Nanos) -> u64 {
        match self.start {
            None => {
                self.start = Some(now);
                0
            }
            Some(start) if now < start + self.length => 0,
            Some(start) => {
                let ended = (now - start).0 / self.length.0;
                self.start = Some(start + Nanos(ended * self.length.0));
                ended
            }
        }
    }
}

#[cfg(test)]
mod advance_tests {
    use super::*;
    use crate::tcp::ClientMix;
    use proptest::prelude::*;

    fn filters() -> Vec<(&'static str, Box<dyn SynFilter>)> {
        let clients = ClientMix::builtin("windows-9x-nt").unwrap();
        vec![
            (
                "tbf",
                Box::new(TokenBucketFilter::new(
                    TokenBucket::new(5, 10.5).unwrap(),
                    EmptyAction::Drop,
                )),
            ),
            (
                "tbf-reject",
                Box::new(TokenBucketFilter::new(
                    TokenBucket::new(2, 3.0).unwrap(),
                    EmptyAction::Reject,
                )),
            ),
            (
                "abacus",
                Box::new(
                    Abacus::new(AbacusConfig {
                        bucket_size: 3,
                        refill_rate: 4.5,
                        interval: Nanos::from_secs(1),
                        window: Nanos::from_secs(30),
                        clients: clients.clone(),
                        arrival_smoothing: 0.25,
                    })
                    .unwrap(),
                ),
            ),
            (
                "greedy",
                Box::new(
                    PredictiveGreedy::new(GreedyConfig {
                        bucket_size: 3,
                        refill_rate: 4.5,
                        interval: Nanos::from_secs(1),
                        window: Nanos::from_secs(25),
                        clients,
                        delay_cost: 1.0,
                        reject_cost: 20.0,
                        arrival_smoothing: 0.25,
                    })
                    .unwrap(),
                ),
            ),
        ]
    }

    /// One step of a run: a gap, then a SYN or (in the advanced run only)
    /// an `advance`.
    fn step() -> impl Strategy<Value = (u64, bool)> {
        (
            prop_oneof![
                6 => 0u64..400_000_000,
                2 => 400_000_000u64..4_000_000_000,
                1 => 20_000_000_000u64..80_000_000_000,
            ],
            proptest::bool::weighted(0.7),
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// `advance` is bookkeeping: with advances interleaved, every SYN
        /// gets the verdict it gets without them, and advancing both to the
        /// same instant shows the same state.
        #[test]
        fn advance_never_changes_a_verdict(steps in proptest::collection::vec(step(), 1..160)) {
            for ((name, mut plain), (_, mut advanced)) in filters().into_iter().zip(filters()) {
                let mut now = Nanos::ZERO;
                for &(gap, syn) in &steps {
                    now += Nanos(gap);
                    if syn {
                        prop_assert_eq!(plain.on_syn(now), advanced.on_syn(now), "{} at {}", name, now);
                    } else {
                        advanced.advance(now);
                    }
                }
                let end = now + Nanos::from_secs(7);
                plain.advance(end);
                advanced.advance(end);
                prop_assert_eq!(plain.snapshot(), advanced.snapshot(), "{}", name);
            }
        }
    }

    /// Gaps of a flood (bursts of SYNs within microseconds) mixed with
    /// pauses, so that buckets run dry and periods end.
    fn flood_gap() -> impl Strategy<Value = u64> {
        prop_oneof![
            6 => 0u64..2_000_000,
            2 => 2_000_000u64..400_000_000,
            1 => 400_000_000u64..3_000_000_000,
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Whatever the state, a constant verdict is what every SYN offered
        /// before its end gets; and a filter told of those SYNs with
        /// `on_decided_elsewhere` ends in the state of one that decided
        /// them (same snapshot, same later verdicts).
        #[test]
        fn a_constant_verdict_holds_until_its_end(
            gaps in proptest::collection::vec(flood_gap(), 1..300),
            offsets in proptest::collection::vec(0u64..u64::MAX, 1..16),
        ) {
            for ((name, mut deciding), (_, mut told)) in filters().into_iter().zip(filters()) {
                let mut now = Nanos::ZERO;
                for (step, &gap) in gaps.iter().enumerate() {
                    now += Nanos(gap);
                    let verdict = deciding.on_syn(now);
                    prop_assert_eq!(told.on_syn(now), verdict, "{} at {}", name, now);
                    let Some(constant) = deciding.constant_until(now) else { continue };
                    prop_assert!(constant.until > now, "{}: {:?} at {}", name, constant, now);
                    prop_assert!(constant.verdict != Verdict::Accept, "{}", name);
                    // SYNs at instants spread over [now, until), at most 5 s on.
                    let span = (constant.until - now).0.min(5_000_000_000);
                    let count = 1 + (step % offsets.len());
                    let mut at: Vec<Nanos> = offsets[..count]
                        .iter()
                        .map(|o| now + Nanos(o % span))
                        .collect();
                    // The last instant the verdict is said to hold.
                    if (constant.until - now).0 <= span {
                        at.push(Nanos(constant.until.0 - 1));
                    }
                    at.sort();
                    let count = at.len();
                    for &t in &at {
                        prop_assert_eq!(deciding.on_syn(t), constant.verdict, "{} at {} ({:?})", name, t, constant);
                    }
                    let last = *at.last().unwrap();
                    prop_assert_eq!(told.on_decided_elsewhere(count as u64, constant.verdict, last), 0, "{}", name);
                    now = last;
                }
                let end = now + Nanos::from_secs(2);
                deciding.advance(end);
                told.advance(end);
                prop_assert_eq!(deciding.snapshot(), told.snapshot(), "{}", name);
                for i in 0..50 {
                    let t = end + Nanos(i * 1_000_000);
                    prop_assert_eq!(deciding.on_syn(t), told.on_syn(t), "{} at {}", name, t);
                }
            }
        }
    }

    /// Under a flood every filter reaches a constant verdict, and the end it
    /// gives is the next token or the end of the period.
    #[test]
    fn a_flood_reaches_a_constant_verdict_in_every_filter() {
        for (name, mut filter) in filters() {
            let mut seen = Vec::new();
            for i in 0..20_000u64 {
                let now = Nanos(i * 100_000);
                filter.on_syn(now);
                if let Some(constant) = filter.constant_until(now) {
                    assert!(constant.until > now, "{name}");
                    assert!(
                        constant.until <= now + Nanos::from_secs(1),
                        "{name}: {constant:?} at {now}"
                    );
                    seen.push(constant.verdict);
                }
            }
            assert!(
                seen.len() > 10_000,
                "{name}: {} constant of 20000",
                seen.len()
            );
            let expected = match name {
                "tbf" => Verdict::Drop,
                _ => Verdict::Reject,
            };
            assert!(seen.contains(&expected), "{name}: {seen:?}");
        }
    }

    /// A long idle stretch advanced second by second, through the Abacus
    /// Filter's dormancy and Greedy's decay-only periods, ends where one
    /// step ends.
    #[test]
    fn a_long_idle_stretch_in_steps_ends_where_one_step_ends() {
        for ((name, mut plain), (_, mut advanced)) in filters().into_iter().zip(filters()) {
            for i in 0..60 {
                let at = Nanos::from_millis(i * 20);
                assert_eq!(plain.on_syn(at), advanced.on_syn(at), "{name}");
            }
            for second in 2..300 {
                advanced.advance(Nanos::from_millis(second * 1000 + 7));
            }
            for i in 0..60 {
                let at = Nanos::from_secs(300) + Nanos::from_millis(i * 20);
                assert_eq!(plain.on_syn(at), advanced.on_syn(at), "{name} at {at}");
            }
            let end = Nanos::from_secs(400);
            plain.advance(end);
            advanced.advance(end);
            assert_eq!(plain.snapshot(), advanced.snapshot(), "{name}");
        }
    }

    #[test]
    fn advance_before_the_first_syn_changes_nothing() {
        for ((name, mut plain), (_, mut advanced)) in filters().into_iter().zip(filters()) {
            advanced.advance(Nanos::from_millis(2_500));
            let at = Nanos::from_secs(3);
            let first: Vec<Verdict> = (0..20).map(|_| plain.on_syn(at)).collect();
            let second: Vec<Verdict> = (0..20).map(|_| advanced.on_syn(at)).collect();
            assert_eq!(first, second, "{name}");
        }
    }
}
