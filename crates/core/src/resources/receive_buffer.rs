//! Receive-buffer tuning (proxy thesis, Section 3.1.2; the delayed
//! decrease of Section 5.1).
//!
//! Once per interval the receiver reports the peak occupancy of the
//! buffer (U_i, as a fraction of the buffer B_{i−1}; occupancy is what
//! Figure 7 calls stored data: in-order data the application has not read
//! plus out-of-order data held behind a hole), the bytes received (the
//! rate ρ_i) and whether a segment was lost. With α = 2.0, β = 0.9, T_l = 0.4, T_u = 0.8 by default:
//!
//! * loss: B_i = α·U_i·B_{i−1} when U_i > T_u; β·B_{i−1} when U_i < T_l;
//!   otherwise B_{i−1};
//! * no loss: α·B_{i−1} when U_i < T_l and the rate rises; β·B_{i−1} when
//!   U_i < T_l and it falls; B_{i−1} otherwise (see below for "rises").
//!
//! The thesis's list writes "U_i < T_u" for the first loss rule. Its text
//! says the buffer grows when occupancy comes "close to 100 %" (the sender
//! is then limited by the buffer) and shrinks when it stays "substantially
//! lower"; with `<` both loss rules would hold at once below T_l. We read
//! it as U_i > T_u, and hold between the thresholds. The first interval
//! has no previous rate and counts as rising.
//!
//! Without loss the text tells the two cases apart "by increasing the
//! assigned receive socket buffer and monitoring the change in
//! throughput": the rate test is the outcome of a growth. Between growths
//! the rate changes for the sender's own reasons (congestion avoidance
//! raises it every round, a loss halves it), so comparing every interval
//! with the one before doubles a buffer that limits nothing each time the
//! window recovers from a loss, and the buffer drifts far above the data
//! it ever holds. So an interval without loss grows the buffer only while
//! a probe is open: the first active interval opens one, a growth whose
//! next interval delivered more than `rate_margin` (10 %) above the rate
//! it was decided at keeps it open, anything else (a growth that did not
//! pay, an interval with loss) closes it; from then on the loss rules,
//! which measure the window directly, size the buffer. Without an open
//! probe the buffer shrinks by β when ρ_i falls more than `rate_margin`
//! below ρ_{i−1}, and otherwise holds.
//!
//! A shrink for a falling rate is not undone by the rules above: the
//! probe is closed, and an interval without loss grows nothing. Where the
//! rate follows the demand rather than the window — an upstream
//! connection kept in the proxy's pool carries one document after another,
//! and what it receives falls about every other interval — the buffer then
//! only ever shrinks, by β each time, down to `min_bytes`. So the tuner
//! keeps the size the sender was found to use (where the last probe
//! closed, or what the last loss rule set: a loss shows the window, as
//! Section 3.1.2 argues), a shrink for a falling rate does not lower it,
//! and an interval without loss whose rate does not fall grows a buffer
//! below it back by α, to at most that size: never above what a probe or
//! a loss measured, so Figure 7's buffer does not drift.
//!
//! An interval in which nothing arrived (an idle keep-alive connection)
//! says nothing about the sender: the buffer holds and the rate history is
//! kept.
//!
//! A decrease is advertised at once but the memory is released only
//! `decrease_delay` (0.5 s) later, so that segments already sent into the
//! old window still fit; an increase takes effect at once and cancels a
//! pending decrease. Buffers stay within [min_bytes, max_bytes].

use crate::{Nanos, OutOfRange};

/// The tuner's constants.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReceiveTunerParams {
    /// α: growth factor.
    pub growth: f64,
    /// β: shrink factor.
    pub shrink: f64,
    /// T_l: low utilization threshold.
    pub low_threshold: f64,
    /// T_u: high utilization threshold.
    pub high_threshold: f64,
    /// How far ρ_i must be above the rate a growth was decided at to count
    /// as rising, or below ρ_{i−1} to count as falling (a fraction).
    pub rate_margin: f64,
    /// How long after advertising a smaller window the memory is freed.
    pub decrease_delay: Nanos,
    pub min_bytes: u64,
    pub max_bytes: u64,
}

impl Default for ReceiveTunerParams {
    fn default() -> Self {
        ReceiveTunerParams {
            growth: 2.0,
            shrink: 0.9,
            low_threshold: 0.4,
            high_threshold: 0.8,
            rate_margin: 0.1,
            decrease_delay: Nanos::from_millis(500),
            min_bytes: 4096,
            max_bytes: 16 << 20,
        }
    }
}

impl ReceiveTunerParams {
    pub fn validate(&self) -> Result<(), OutOfRange> {
        OutOfRange::check(
            self.growth > 1.0 && self.growth.is_finite(),
            "growth (α)",
            "above 1",
            self.growth,
        )?;
        OutOfRange::check(
            self.shrink > 0.0 && self.shrink < 1.0,
            "shrink (β)",
            "in (0, 1)",
            self.shrink,
        )?;
        OutOfRange::check(
            0.0 < self.low_threshold
                && self.low_threshold < self.high_threshold
                && self.high_threshold <= 1.0,
            "thresholds",
            "0 < T_l < T_u ≤ 1",
            format!("{} / {}", self.low_threshold, self.high_threshold),
        )?;
        OutOfRange::check(
            self.rate_margin >= 0.0 && self.rate_margin.is_finite(),
            "rate_margin",
            "a non-negative fraction",
            self.rate_margin,
        )?;
        OutOfRange::check(
            0 < self.min_bytes && self.min_bytes <= self.max_bytes,
            "buffer bounds",
            "0 < min_bytes ≤ max_bytes",
            format!("{} / {}", self.min_bytes, self.max_bytes),
        )
    }
}

/// What the receiver saw during one interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IntervalObservation {
    /// Peak bytes held in the buffer (in order and out of order).
    pub peak_stored_bytes: u64,
    /// Bytes delivered in the interval.
    pub received_bytes: u64,
    /// Whether a segment was lost (a hole held data back).
    pub loss: bool,
}

/// Which rule an interval applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReceiveDecision {
    Grow,
    Shrink,
    Hold,
}

/// Per-connection receive-buffer state.
#[derive(Clone, Debug)]
pub struct ReceiveBufferTuner {
    params: ReceiveTunerParams,
    advertised: u64,
    pending_decrease: Option<Nanos>,
    held: u64,
    /// While a probe is open: the bytes received in the interval whose
    /// growth is being tested (None before the first active interval).
    probe_baseline: Option<u64>,
    probing: bool,
    previous_received: Option<u64>,
    /// The buffer the sender was found to use: where the last probe
    /// closed, or what the last loss rule set. A shrink for a falling rate
    /// does not lower it, and the buffer grows back to it.
    settled: Option<u64>,
}

impl ReceiveBufferTuner {
    pub fn new(params: ReceiveTunerParams, initial_bytes: u64) -> Result<Self, OutOfRange> {
        params.validate()?;
        let initial = initial_bytes.clamp(params.min_bytes, params.max_bytes);
        Ok(ReceiveBufferTuner {
            params,
            advertised: initial,
            pending_decrease: None,
            held: initial,
            probe_baseline: None,
            probing: true,
            previous_received: None,
            settled: None,
        })
    }

    /// The buffer size the sender is told (the window limit).
    pub fn advertised_bytes(&self) -> u64 {
        self.advertised
    }

    /// Memory held for the buffer: the old size until a decrease is due.
    pub fn held_bytes(&self) -> u64 {
        self.held
    }

    /// When a pending decrease releases memory, if one is pending.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        self.pending_decrease
    }

    /// Applies a pending decrease whose time has come.
    pub fn advance(&mut self, now: Nanos) {
        if let Some(due) = self.pending_decrease {
            if now >= due {
                self.held = self.advertised;
                self.pending_decrease = None;
            }
        }
    }

    /// Ends an interval at `now` with what was observed in it.
    pub fn end_interval(&mut self, now: Nanos, seen: &IntervalObservation) -> ReceiveDecision {
        self.advance(now);
        if seen.received_bytes == 0 && seen.peak_stored_bytes == 0 && !seen.loss {
            return ReceiveDecision::Hold;
        }
        let p = self.params;
        let previous = self.advertised as f64;
        let utilization = seen.peak_stored_bytes as f64 / previous;
        let rate_rising = self.probing
            && match self.probe_baseline {
                Some(base) => seen.received_bytes as f64 > base as f64 * (1.0 + p.rate_margin),
                None => true,
            };
        let rate_falling = self.previous_received.is_some_and(|previous| {
            (seen.received_bytes as f64) < previous as f64 * (1.0 - p.rate_margin)
        });
        self.previous_received = Some(seen.received_bytes);
        // Whatever this interval decides, the open probe (if any) has its
        // answer; only a growth without loss opens the next one.
        let was_probing = self.probing;
        self.probing = false;
        let below_settled = self.settled.filter(|&settled| (previous as u64) < settled);
        let target = if seen.loss {
            if utilization > p.high_threshold {
                p.growth * utilization * previous
            } else if utilization < p.low_threshold {
                p.shrink * previous
            } else {
                previous
            }
        } else if utilization < p.low_threshold {
            if rate_rising {
                self.probing = true;
                self.probe_baseline = Some(seen.received_bytes);
                p.growth * previous
            } else if rate_falling {
                p.shrink * previous
            } else if let Some(settled) = below_settled {
                (p.growth * previous).min(settled as f64)
            } else {
                previous
            }
        } else {
            previous
        };
        let target = (target.round() as u64).clamp(p.min_bytes, p.max_bytes);
        if seen.loss {
            self.settled = Some(target);
        } else if was_probing && !self.probing {
            self.settled = Some(self.advertised);
        }
        if target > self.advertised {
            self.advertised = target;
            self.held = self.held.max(target);
            self.pending_decrease = None;
            ReceiveDecision::Grow
        } else if target < self.advertised {
            self.advertised = target;
            self.pending_decrease = Some(now + p.decrease_delay);
            ReceiveDecision::Shrink
        } else {
            ReceiveDecision::Hold
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tuner(initial: u64) -> ReceiveBufferTuner {
        ReceiveBufferTuner::new(ReceiveTunerParams::default(), initial).unwrap()
    }

    fn seen(peak: u64, received: u64, loss: bool) -> IntervalObservation {
        IntervalObservation {
            peak_stored_bytes: peak,
            received_bytes: received,
            loss,
        }
    }

    #[test]
    fn loss_with_a_full_buffer_grows_to_twice_the_peak() {
        let mut t = tuner(100_000);
        // U = 0.9 > T_u: B = 2.0·0.9·100 000 = 180 000
        let d = t.end_interval(Nanos::from_secs(1), &seen(90_000, 1, true));
        assert_eq!(d, ReceiveDecision::Grow);
        assert_eq!(t.advertised_bytes(), 180_000);
        assert_eq!(t.held_bytes(), 180_000);
    }

    #[test]
    fn loss_between_the_thresholds_holds() {
        let mut t = tuner(100_000);
        let d = t.end_interval(Nanos::from_secs(1), &seen(60_000, 1, true));
        assert_eq!(d, ReceiveDecision::Hold);
        assert_eq!(t.advertised_bytes(), 100_000);
    }

    #[test]
    fn a_decrease_frees_memory_half_a_second_later() {
        let mut t = tuner(100_000);
        // U = 0.1 < T_l with loss: B = 0.9·100 000 = 90 000
        t.end_interval(Nanos::from_secs(1), &seen(10_000, 1, true));
        assert_eq!(t.advertised_bytes(), 90_000);
        assert_eq!(t.held_bytes(), 100_000);
        assert_eq!(t.poll_timeout(), Some(Nanos::from_millis(1_500)));
        t.advance(Nanos::from_millis(1_499));
        assert_eq!(t.held_bytes(), 100_000);
        t.advance(Nanos::from_millis(1_500));
        assert_eq!(t.held_bytes(), 90_000);
        assert_eq!(t.poll_timeout(), None);
    }

    #[test]
    fn without_loss_grows_while_the_rate_rises_and_shrinks_when_it_falls() {
        let mut t = tuner(10_000);
        assert_eq!(
            t.end_interval(Nanos::from_secs(1), &seen(1_000, 50_000, false)),
            ReceiveDecision::Grow
        );
        assert_eq!(t.advertised_bytes(), 20_000);
        assert_eq!(
            t.end_interval(Nanos::from_secs(2), &seen(1_000, 60_000, false)),
            ReceiveDecision::Grow
        );
        assert_eq!(t.advertised_bytes(), 40_000);
        // 59 000 is neither above 1.1·60 000 nor below 0.9·60 000.
        assert_eq!(
            t.end_interval(Nanos::from_secs(3), &seen(1_000, 59_000, false)),
            ReceiveDecision::Hold
        );
        // 50 000 < 0.9·59 000 = 53 100: falling.
        assert_eq!(
            t.end_interval(Nanos::from_secs(3), &seen(1_000, 50_000, false)),
            ReceiveDecision::Shrink
        );
        assert_eq!(t.advertised_bytes(), 36_000);
        // U = 20 000 / 36 000 = 0.56 ≥ T_l: the application is the limit.
        assert_eq!(
            t.end_interval(Nanos::from_secs(4), &seen(20_000, 10, false)),
            ReceiveDecision::Hold
        );
    }

    #[test]
    fn a_flat_rate_is_not_rising() {
        let mut t = tuner(10_000);
        t.end_interval(Nanos::from_secs(1), &seen(1_000, 50_000, false));
        // 54 000 < 1.1·50 000: not rising, and not falling either.
        assert_eq!(
            t.end_interval(Nanos::from_secs(2), &seen(1_000, 54_000, false)),
            ReceiveDecision::Hold
        );
        assert_eq!(t.advertised_bytes(), 20_000);
    }

    #[test]
    fn a_rate_that_rises_after_a_growth_that_did_not_pay_grows_nothing() {
        let mut t = tuner(10_000);
        t.end_interval(Nanos::from_secs(1), &seen(1_000, 50_000, false));
        assert_eq!(t.advertised_bytes(), 20_000);
        // The growth did not raise the rate: the probe closes.
        assert_eq!(
            t.end_interval(Nanos::from_secs(2), &seen(1_000, 50_000, false)),
            ReceiveDecision::Hold
        );
        // Congestion avoidance raises the rate; the buffer is not the cause.
        for (second, received) in [(3, 60_000), (4, 70_000), (5, 80_000)] {
            assert_eq!(
                t.end_interval(Nanos::from_secs(second), &seen(1_000, received, false)),
                ReceiveDecision::Hold
            );
        }
        assert_eq!(t.advertised_bytes(), 20_000);
    }

    #[test]
    fn an_interval_with_loss_closes_the_probe() {
        let mut t = tuner(100_000);
        t.end_interval(Nanos::from_secs(1), &seen(1_000, 50_000, false));
        assert_eq!(t.advertised_bytes(), 200_000);
        // U = 100 000 / 200 000 = 0.5: hold, and the probe is answered.
        assert_eq!(
            t.end_interval(Nanos::from_secs(2), &seen(100_000, 90_000, true)),
            ReceiveDecision::Hold
        );
        assert_eq!(
            t.end_interval(Nanos::from_secs(3), &seen(0, 120_000, false)),
            ReceiveDecision::Hold
        );
        // With loss and a full buffer it grows to twice the peak.
        assert_eq!(
            t.end_interval(Nanos::from_secs(4), &seen(180_000, 120_000, true)),
            ReceiveDecision::Grow
        );
        assert_eq!(t.advertised_bytes(), 360_000);
    }

    /// An upstream connection kept in the proxy's pool carries one
    /// document after another: what it receives in an interval follows the
    /// requests, not its window, and falls about every other interval.
    #[test]
    fn a_rate_that_falls_with_the_demand_does_not_ratchet_the_buffer_down() {
        let mut t = tuner(131_072);
        // The first interval's probe grows it; the next does not pay.
        t.end_interval(Nanos::from_secs(1), &seen(0, 1_000_000, false));
        t.end_interval(Nanos::from_secs(2), &seen(0, 1_000_000, false));
        let settled = t.advertised_bytes();
        assert_eq!(settled, 262_144);
        for second in 3..60 {
            let received = if second % 2 == 0 { 1_000_000 } else { 300_000 };
            t.end_interval(Nanos::from_secs(second), &seen(0, received, false));
            assert!(
                t.advertised_bytes() as f64 >= 0.9 * settled as f64 - 1.0,
                "second {second}: {} of {settled}",
                t.advertised_bytes()
            );
        }
    }

    #[test]
    fn an_idle_interval_changes_nothing() {
        let mut t = tuner(10_000);
        t.end_interval(Nanos::from_secs(1), &seen(1_000, 50_000, false));
        assert_eq!(
            t.end_interval(Nanos::from_secs(2), &seen(0, 0, false)),
            ReceiveDecision::Hold
        );
        assert_eq!(t.advertised_bytes(), 20_000);
        // The rate history is that of the last active interval.
        assert_eq!(
            t.end_interval(Nanos::from_secs(3), &seen(1_000, 50_000, false)),
            ReceiveDecision::Hold
        );
    }

    #[test]
    fn an_increase_cancels_a_pending_decrease() {
        let mut t = tuner(100_000);
        t.end_interval(Nanos::from_secs(1), &seen(10_000, 1, true));
        t.end_interval(Nanos::from_millis(1_200), &seen(85_000, 1, true));
        assert_eq!(t.poll_timeout(), None);
        assert_eq!(t.held_bytes(), t.advertised_bytes());
    }

    proptest! {
        #[test]
        fn stays_within_bounds_and_holds_at_least_what_it_advertises(
            steps in proptest::collection::vec((0u64..40_000_000, 0u64..1_000_000, any::<bool>(), 1u64..3_000), 1..60),
        ) {
            let params = ReceiveTunerParams::default();
            let mut t = ReceiveBufferTuner::new(params, 65_536).unwrap();
            let mut now = Nanos::ZERO;
            for (peak, received, loss, step_ms) in steps {
                now += Nanos::from_millis(step_ms);
                t.end_interval(now, &seen(peak, received, loss));
                prop_assert!(t.advertised_bytes() >= params.min_bytes);
                prop_assert!(t.advertised_bytes() <= params.max_bytes);
                prop_assert!(t.held_bytes() >= t.advertised_bytes());
                if let Some(due) = t.poll_timeout() {
                    prop_assert!(due > now);
                }
            }
        }
    }
}
