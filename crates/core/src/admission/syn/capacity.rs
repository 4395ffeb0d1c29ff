//! Measuring r_t, the server's capacity, from kernel counters
//! (`refill_rate = "measure"` of the live gate).
//!
//! Abacus paper, Section 3.2: a token bucket matches "the number of requests
//! entering the system to the server capacity by setting W to the maximum
//! queue length and r_t to the average processing rate of the system", and
//! Section 5 builds the Abacus Filter's future buckets from the same r_t
//! (W_a = (r_t − λ)T0). The paper takes r_t as known. **This module is
//! beyond the paper**: it estimates r_t from what a Linux server exports.
//!
//! Once per interval the driver reads two numbers for the gated
//! listener(s) and hands them over with the time:
//!
//! * `passive_opens` — handshakes completed so far (the cumulative
//!   `Tcp: PassiveOpens` counter: a connection enters the accept queue when
//!   its handshake completes);
//! * `accept_queue` — connections waiting in the accept queue now.
//!
//! The application took `accepts = Δpassive_opens − Δaccept_queue`
//! connections out of the queue during the interval, at rate
//! `accepts / interval`.
//!
//! An interval is **saturated** when the accept queue was non-empty at both
//! of its ends: the application never ran out of work that we can see, so
//! its accept rate is its processing rate, the capacity r_t. Choices, with
//! reasons:
//!
//! * **Saturated intervals: an exponentially weighted moving average.** The
//!   first saturated interval replaces the configured initial rate (a guess)
//!   with its measurement; each later one moves the estimate by `smoothing`
//!   (the weight of the newest interval) towards its own rate. With the
//!   default weight of 0.2 the estimate follows a change of capacity within
//!   about five intervals, while the boundary noise of one interval (a
//!   handshake counted in one interval and accepted in the next) is damped
//!   five-fold.
//! * **Unsaturated intervals: no change.** When the queue was empty at one
//!   end, the application kept up with what the gate admitted, and its
//!   accept rate measures the admitted load, not the capacity. Taking it as
//!   a lower bound of the capacity ratchets the estimate up: the gate
//!   admits r_t plus a bucket's burst plus retransmissions, the server
//!   accepts all of it, the estimate rises to that, the gate admits more
//!   (20 → 92/s was observed against a server that never queued a
//!   connection). So only saturated intervals move the estimate, up or
//!   down; until the first one the configured initial rate holds. The cost:
//!   an estimate that fell low rises again only when the admitted load
//!   queues connections, which a bucket's bursts do at a server near its
//!   capacity. A server that accepts eagerly (nginx: an event loop that
//!   empties the accept queue at once) never queues, and its capacity must
//!   be given as a fixed `refill_rate` from a load test
//!   (`docs/gate-capacity.md`).
//! * **Inconsistent readings are skipped, not guessed.** A counter that
//!   went backwards (a namespace or a counter reset), a queue that grew by
//!   more than the handshakes completed (the two numbers were read at
//!   slightly different moments), or time that did not advance: the
//!   interval is ignored and the reading becomes the new baseline.
//!
//! Limits of the inputs (not of this type): `PassiveOpens` counts every
//! listener of the network namespace, so other busy listeners inflate the
//! accept rate; and an accept queue that is never empty for a long time
//! means connections wait in it, which the estimate does not try to avoid
//! (a smaller W does).

use super::token_bucket::check_refill_rate;
use super::{check, FilterConfigError};
use crate::Nanos;

/// Weight of the newest saturated interval in the estimate (see the module
/// documentation for why 0.2).
pub const DEFAULT_CAPACITY_SMOOTHING: f64 = 0.2;

/// How a [`CapacityEstimator`] starts and how fast it moves.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CapacityConfig {
    /// r_t until the first measurement, connections per second.
    pub initial_rate: f64,
    /// Weight of the newest saturated interval, in (0, 1].
    pub smoothing: f64,
}

impl CapacityConfig {
    /// `initial_rate` with the default smoothing.
    pub fn new(initial_rate: f64) -> CapacityConfig {
        CapacityConfig {
            initial_rate,
            smoothing: DEFAULT_CAPACITY_SMOOTHING,
        }
    }
}

/// One reading of the kernel counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Reading {
    now: Nanos,
    passive_opens: u64,
    accept_queue: u64,
}

/// What one interval showed, as returned by [`CapacityEstimator::on_interval`].
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CapacityInterval {
    /// Connections the application took from the accept queue.
    pub accepts: u64,
    /// `accepts` per second of the interval.
    pub accept_rate: f64,
    /// The accept queue was non-empty at both ends of the interval.
    pub saturated: bool,
    /// The capacity estimate after this interval, connections per second.
    pub estimate: f64,
}

/// Estimates r_t, the server's capacity, from the handshakes completed and
/// the accept-queue length read once per interval.
#[derive(Clone, Debug)]
pub struct CapacityEstimator {
    config: CapacityConfig,
    estimate: f64,
    previous: Option<Reading>,
    saturated_intervals: u64,
}

impl CapacityEstimator {
    pub fn new(config: CapacityConfig) -> Result<CapacityEstimator, FilterConfigError> {
        check_refill_rate(config.initial_rate)?;
        check(
            config.smoothing > 0.0 && config.smoothing <= 1.0,
            "capacity smoothing",
            "in (0, 1]",
            config.smoothing,
        )?;
        Ok(CapacityEstimator {
            config,
            estimate: config.initial_rate,
            previous: None,
            saturated_intervals: 0,
        })
    }

    /// The current estimate of r_t, connections per second.
    pub fn estimate(&self) -> f64 {
        self.estimate
    }

    /// Saturated intervals seen so far.
    pub fn saturated_intervals(&self) -> u64 {
        self.saturated_intervals
    }

    /// Feeds the readings taken at `now`: the cumulative count of
    /// completed handshakes and the current accept-queue length. Returns
    /// what the interval since the previous reading showed, or `None` for
    /// the first reading and for inconsistent ones (see the module
    /// documentation), which only become the new baseline.
    pub fn on_interval(
        &mut self,
        now: Nanos,
        passive_opens: u64,
        accept_queue: u64,
    ) -> Option<CapacityInterval> {
        let reading = Reading {
            now,
            passive_opens,
            accept_queue,
        };
        let previous = self.previous.replace(reading)?;
        if now <= previous.now || passive_opens < previous.passive_opens {
            return None;
        }
        let completed = i128::from(passive_opens - previous.passive_opens);
        let queue_growth = i128::from(accept_queue) - i128::from(previous.accept_queue);
        let accepts = completed - queue_growth;
        if accepts < 0 {
            return None;
        }
        let accepts = accepts as u64;
        let accept_rate = accepts as f64 / (now - previous.now).as_secs_f64();
        let saturated = previous.accept_queue > 0 && accept_queue > 0;
        let candidate = if saturated {
            self.saturated_intervals += 1;
            if self.saturated_intervals == 1 {
                accept_rate
            } else {
                self.estimate + self.config.smoothing * (accept_rate - self.estimate)
            }
        } else {
            self.estimate
        };
        // A rate a filter cannot take (beyond 1e9/s) is not a measurement.
        if check_refill_rate(candidate).is_ok() {
            self.estimate = candidate;
        }
        Some(CapacityInterval {
            accepts,
            accept_rate,
            saturated,
            estimate: self.estimate,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn estimator(initial: f64) -> CapacityEstimator {
        CapacityEstimator::new(CapacityConfig::new(initial)).unwrap()
    }

    #[test]
    fn initial_rate_holds_until_a_saturated_interval() {
        let mut e = estimator(120.0);
        assert_eq!(e.on_interval(Nanos::from_secs(0), 1000, 0), None);
        // 50 handshakes, queue empty at both ends: 50/s ≤ 120, nothing moves.
        let i = e.on_interval(Nanos::from_secs(1), 1050, 0).unwrap();
        assert_eq!(i.accepts, 50);
        assert_eq!(i.accept_rate, 50.0);
        assert!(!i.saturated);
        assert_eq!(i.estimate, 120.0);
        // Queue non-empty at the end only: still unsaturated.
        let i = e.on_interval(Nanos::from_secs(2), 1150, 30).unwrap();
        assert_eq!(i.accepts, 70);
        assert!(!i.saturated);
        assert_eq!(e.estimate(), 120.0);
        assert_eq!(e.saturated_intervals(), 0);
    }

    #[test]
    fn saturated_intervals_are_averaged() {
        let mut e = estimator(120.0);
        e.on_interval(Nanos::from_secs(10), 0, 5);
        // 2 s, 200 handshakes, queue 5 → 25: accepts = 200 − 20 = 180, 90/s.
        // The first saturated interval replaces the initial guess.
        let i = e.on_interval(Nanos::from_secs(12), 200, 25).unwrap();
        assert_eq!(i.accepts, 180);
        assert_eq!(i.accept_rate, 90.0);
        assert!(i.saturated);
        assert_eq!(i.estimate, 90.0);
        // 1 s, 120 handshakes, queue 25 → 5: accepts = 140, 140/s.
        // EWMA: 90 + 0.2 × (140 − 90) = 100.
        let i = e.on_interval(Nanos::from_secs(13), 320, 5).unwrap();
        assert_eq!(i.accepts, 140);
        assert!((i.estimate - 100.0).abs() < 1e-9, "{}", i.estimate);
        // 1 s, 60 handshakes, queue 5 → 5: 60/s → 100 − 0.2 × 40 = 92.
        let i = e.on_interval(Nanos::from_secs(14), 380, 5).unwrap();
        assert!((i.estimate - 92.0).abs() < 1e-9, "{}", i.estimate);
        assert_eq!(e.saturated_intervals(), 3);
    }

    #[test]
    fn an_unsaturated_interval_leaves_the_estimate() {
        let mut e = estimator(10.0);
        e.on_interval(Nanos::from_secs(0), 0, 0);
        // The server took 40/s and never queued: the admitted load, not its
        // capacity.
        let i = e.on_interval(Nanos::from_secs(1), 40, 0).unwrap();
        assert_eq!(i.estimate, 10.0);
        let i = e.on_interval(Nanos::from_secs(2), 45, 0).unwrap();
        assert_eq!(i.estimate, 10.0);
        // A saturated interval replaces it the first time.
        e.on_interval(Nanos::from_secs(3), 50, 3);
        let i = e.on_interval(Nanos::from_secs(4), 80, 3).unwrap();
        assert!(i.saturated);
        assert_eq!(i.estimate, 30.0);
        // Later unsaturated intervals, faster or slower, change nothing.
        for (t, opens) in [(5, 200), (6, 210), (7, 400)] {
            let i = e.on_interval(Nanos::from_secs(t), opens, 0).unwrap();
            assert!(!i.saturated);
            assert_eq!(i.estimate, 30.0);
        }
    }

    /// The climb observed against nginx: the gate starts at 20/s, admits a
    /// little more than r_t each interval (burst, retransmissions), the
    /// server accepts everything at once and the accept queue is never
    /// non-empty at both ends of an interval. The estimate must stay.
    #[test]
    fn rising_accept_rates_of_an_eager_server_do_not_raise_the_estimate() {
        let mut e = estimator(20.0);
        let mut opens = 0u64;
        e.on_interval(Nanos::ZERO, opens, 0);
        let mut rate = 20.0f64;
        for t in 1..=60u64 {
            rate = (rate * 1.05).min(92.0);
            opens += rate.round() as u64;
            // The queue is seen non-empty at some readings, never at two in
            // a row.
            let queue = if t % 2 == 0 { 2 } else { 0 };
            let i = e.on_interval(Nanos::from_secs(t), opens, queue);
            let Some(i) = i else { continue };
            assert!(!i.saturated, "t = {t}");
            assert_eq!(i.estimate, 20.0, "t = {t}");
        }
        assert_eq!(rate, 92.0);
        assert_eq!(e.estimate(), 20.0);
        assert_eq!(e.saturated_intervals(), 0);
    }

    #[test]
    fn inconsistent_readings_rebaseline() {
        let mut e = estimator(50.0);
        e.on_interval(Nanos::from_secs(5), 100, 0);
        // Counter went backwards.
        assert_eq!(e.on_interval(Nanos::from_secs(6), 90, 0), None);
        // Time did not advance.
        assert_eq!(e.on_interval(Nanos::from_secs(6), 95, 0), None);
        // Queue grew more than handshakes completed.
        assert_eq!(e.on_interval(Nanos::from_secs(7), 96, 10), None);
        // The last reading (96, 10) is the baseline: 100 handshakes and the
        // queue 10 → 5 in 1 s give 105 accepts; non-empty at both ends, so
        // the first saturated interval.
        let i = e.on_interval(Nanos::from_secs(8), 196, 5).unwrap();
        assert_eq!(i.accepts, 105);
        assert!(i.saturated);
        assert_eq!(i.estimate, 105.0);
        assert_eq!(e.estimate(), 105.0);
    }

    #[test]
    fn rejects_bad_configuration() {
        assert!(CapacityEstimator::new(CapacityConfig::new(-1.0)).is_err());
        assert!(CapacityEstimator::new(CapacityConfig::new(f64::NAN)).is_err());
        let config = CapacityConfig {
            initial_rate: 10.0,
            smoothing: 0.0,
        };
        assert!(CapacityEstimator::new(config).is_err());
    }
}
