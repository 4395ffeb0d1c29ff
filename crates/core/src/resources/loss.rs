//! A connection's packet-loss estimate for E-ATBT (proxy thesis, Section
//! 3.1.1: p "from the number of successfully transmitted packets and the
//! number of lost packets detected at the sender"; the thesis gives no
//! window). Fed once per interval with the sender's cumulative counters
//! (segments sent, segments retransmitted — Linux `TCP_INFO`'s
//! `data_segs_out` and `total_retrans`) or with per-interval counts.
//!
//! Two parts, the smaller of which is the estimate:
//!
//! * **Window**: retransmissions over segments in the newest intervals
//!   that together cover at least `min_segments` segments (at most
//!   `max_intervals` of them). One interval at a time is too little: at
//!   0.1 % an interval of a few hundred segments holds one retransmission
//!   or none, so the estimate jumps between 0 and several times the rate,
//!   and E-ATBT's demand (about 1/√p, Padhye et al. 1998, Eq. 31) between
//!   the peer's window and a fraction of the target. 2,000 segments hold
//!   two expected losses at 0.1 % and twenty at 1 %.
//! * **Open interval**: segments sent since the last interval with a
//!   retransmission, S; no loss in S segments bounds the rate near 1/S.
//!   This is TFRC's rule for a falling loss rate (RFC 5348, Section 5.4:
//!   the interval since the last loss counts when it lowers the rate), and
//!   it is what follows a step down at once: a window alone would keep the
//!   old, high rate until the new segments fill it — and a send buffer
//!   sized for the old rate sends slowly, so that would take many
//!   intervals. An interval without retransmission never drops the
//!   estimate to 0: it lowers it to at most 1/S.
//!
//! Before the first retransmission the estimate is 0 (the formula's
//! loss-free case, bounded by the peer's window), as the thesis's
//! simulation starts. An interval that sent nothing leaves the estimate as
//! it was. Departure from an exact count: where in an interval its
//! retransmissions fell is unknown, so S counts only whole intervals after
//! it (shorter, so the bound is the higher, more cautious one).

use crate::OutOfRange;

/// Most intervals the window holds (the array's size).
pub const MAX_WINDOW_INTERVALS: usize = 16;

/// The estimator's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LossEstimatorParams {
    /// The window reaches back until it covers this many segments...
    pub min_segments: u64,
    /// ...or holds this many intervals (at most [`MAX_WINDOW_INTERVALS`]).
    pub max_intervals: usize,
}

impl Default for LossEstimatorParams {
    fn default() -> Self {
        LossEstimatorParams {
            min_segments: 2_000,
            max_intervals: 8,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct IntervalCounts {
    sent: u64,
    retransmitted: u64,
}

/// One connection's loss estimate.
#[derive(Clone, Debug)]
pub struct LossEstimator {
    params: LossEstimatorParams,
    /// The last cumulative counters (segments sent, retransmitted).
    last: Option<(u32, u32)>,
    /// The newest intervals that sent something; `newest` is the index of
    /// the latest, `filled` how many are held.
    window: [IntervalCounts; MAX_WINDOW_INTERVALS],
    newest: usize,
    filled: usize,
    /// Segments sent since the last interval with a retransmission.
    open_segments: u64,
    seen_loss: bool,
    estimate: f64,
}

impl LossEstimator {
    pub fn new(params: LossEstimatorParams) -> Result<LossEstimator, OutOfRange> {
        OutOfRange::check(
            params.min_segments > 0,
            "loss estimator min_segments",
            "at least 1",
            params.min_segments,
        )?;
        OutOfRange::check(
            (1..=MAX_WINDOW_INTERVALS).contains(&params.max_intervals),
            "loss estimator max_intervals",
            "1 to 16",
            params.max_intervals,
        )?;
        Ok(LossEstimator {
            params,
            last: None,
            window: [IntervalCounts::default(); MAX_WINDOW_INTERVALS],
            newest: 0,
            filled: 0,
            open_segments: 0,
            seen_loss: false,
            estimate: 0.0,
        })
    }

    /// The current estimate, a probability.
    pub fn estimate(&self) -> f64 {
        self.estimate
    }

    /// One interval's end, given the sender's cumulative 32-bit counters
    /// (they wrap; a wrap is a difference like any other). Counters that
    /// went backwards or moved by more than 2³¹ in an interval, or more
    /// retransmissions than segments, are a reset (a new socket behind the
    /// same connection, or a bad read): the interval is skipped and the
    /// counters taken as the new base. Returns the estimate.
    pub fn observe_counters(&mut self, segments_sent: u32, retransmitted: u32) -> f64 {
        let previous = self.last.replace((segments_sent, retransmitted));
        let Some((previous_sent, previous_retransmitted)) = previous else {
            return self.estimate;
        };
        let sent = segments_sent.wrapping_sub(previous_sent);
        let lost = retransmitted.wrapping_sub(previous_retransmitted);
        let reset = sent > 1 << 31 || lost > 1 << 31 || lost > sent;
        if reset {
            return self.estimate;
        }
        self.observe_interval(u64::from(sent), u64::from(lost))
    }

    /// One interval's end, given its own counts (a simulator's). More
    /// retransmissions than segments count as all segments lost. Returns
    /// the estimate.
    pub fn observe_interval(&mut self, sent: u64, retransmitted: u64) -> f64 {
        if sent == 0 {
            return self.estimate;
        }
        let retransmitted = retransmitted.min(sent);
        self.newest = (self.newest + 1) % MAX_WINDOW_INTERVALS;
        self.window[self.newest] = IntervalCounts {
            sent,
            retransmitted,
        };
        self.filled = (self.filled + 1).min(self.params.max_intervals);
        if retransmitted > 0 {
            self.seen_loss = true;
            self.open_segments = 0;
        } else {
            self.open_segments = self.open_segments.saturating_add(sent);
        }
        if !self.seen_loss {
            return self.estimate;
        }
        let (mut window_sent, mut window_lost) = (0u64, 0u64);
        for back in 0..self.filled {
            let i = (self.newest + MAX_WINDOW_INTERVALS - back) % MAX_WINDOW_INTERVALS;
            window_sent += self.window[i].sent;
            window_lost += self.window[i].retransmitted;
            if window_sent >= self.params.min_segments {
                break;
            }
        }
        // A window without a retransmission lies inside the open interval
        // (S ≥ its segments > 0): the estimate is 1/S, never 0.
        let windowed = window_lost as f64 / window_sent as f64;
        self.estimate = if self.open_segments > 0 {
            let open = 1.0 / self.open_segments as f64;
            if window_lost == 0 {
                open
            } else {
                windowed.min(open)
            }
        } else {
            windowed
        };
        self.estimate
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::send_buffer::demand_bytes;
    use crate::tcp::throughput::PathEstimate;

    fn estimator() -> LossEstimator {
        LossEstimator::new(LossEstimatorParams::default()).unwrap()
    }

    /// E-ATBT's demand on the step run's path (RTT 50 ms) at `loss`.
    fn demand(loss: f64) -> u64 {
        let path = PathEstimate {
            rtt_secs: 0.05,
            rto_secs: 0.25,
            loss,
            max_window_segments: 1e6,
        };
        demand_bytes(&path, 1448).unwrap()
    }

    /// Feeds one interval as cumulative counters.
    fn feed(e: &mut LossEstimator, counters: &mut (u32, u32), sent: u32, lost: u32) -> f64 {
        counters.0 = counters.0.wrapping_add(sent);
        counters.1 = counters.1.wrapping_add(lost);
        e.observe_counters(counters.0, counters.1)
    }

    #[test]
    fn a_step_from_one_percent_to_a_tenth_is_followed_within_three_intervals() {
        // 1 %: ten retransmissions in every 1,000 segments.
        let target = demand(0.001);
        // After the step, the worst of the likely 0.1 % sequences: one
        // retransmission in every interval (no loss-free interval to
        // lower the estimate), or loss-free intervals, or retransmissions
        // still arriving for the old losses in the first one.
        for after in [[1, 1, 1], [0, 0, 0], [5, 0, 1], [3, 1, 1]] {
            let mut e = estimator();
            let mut counters = (u32::MAX - 3_000, 0);
            e.observe_counters(counters.0, counters.1);
            for _ in 0..10 {
                feed(&mut e, &mut counters, 1_000, 10);
            }
            assert!((e.estimate() - 0.01).abs() < 1e-9);
            let mut reached = None;
            for (k, lost) in after.iter().enumerate() {
                let p = feed(&mut e, &mut counters, 1_000, *lost);
                if reached.is_none() && demand(p) * 10 >= target * 9 {
                    reached = Some(k + 1);
                }
            }
            let reached = reached.unwrap_or(usize::MAX);
            assert!(reached <= 3, "{after:?}: {reached} intervals");
        }
    }

    #[test]
    fn a_slow_connection_follows_the_step_through_the_open_interval() {
        // The buffer sized for 1 % lets 160 segments out per interval.
        let mut e = estimator();
        for _ in 0..20 {
            e.observe_interval(160, 2);
        }
        let before = e.estimate();
        assert!(before > 0.009, "{before}");
        // Three loss-free intervals: the window still holds the old rate
        // (2,000 segments reach back before the step), the open interval
        // lowers it to 1/480.
        for _ in 0..3 {
            e.observe_interval(160, 0);
        }
        assert!((e.estimate() - 1.0 / 480.0).abs() < 1e-12);
    }

    #[test]
    fn an_interval_without_retransmissions_does_not_drop_the_estimate_to_zero() {
        let mut e = estimator();
        // 0.1 %, 700 segments per interval: 1, 0, 1, 0, ... retransmissions.
        for i in 0..10 {
            e.observe_interval(700, i % 2);
        }
        let settled = e.estimate();
        assert!((0.0005..0.001).contains(&settled), "{settled}");
        let p = e.observe_interval(700, 0);
        // The window's rate over its 2,100 segments, below the open
        // interval's bound 1/700.
        assert_eq!(p, 1.0 / 2_100.0);
        assert!(p <= 1.0 / 700.0);
        // The demand moves by less than a factor 1.5, where a per-interval
        // estimate of 0 would give the peer's whole window.
        assert!(demand(p) * 2 <= demand(settled) * 3);
        // Two more: the window (2,100 segments) holds no retransmission;
        // the estimate is 1/S over the 2,100 since the last one.
        e.observe_interval(700, 0);
        let p = e.observe_interval(700, 0);
        assert_eq!(p, 1.0 / 2_100.0);
        let p = e.observe_interval(700, 0);
        assert_eq!(p, 1.0 / 2_800.0);
    }

    #[test]
    fn nothing_sent_changes_nothing_and_no_loss_is_zero() {
        let mut e = estimator();
        assert_eq!(e.observe_interval(0, 0), 0.0);
        assert_eq!(e.observe_interval(5_000, 0), 0.0, "never a loss: 0");
        // The loss-free segments before it count in the window.
        assert_eq!(e.observe_interval(1_000, 20), 20.0 / 6_000.0);
        assert_eq!(e.observe_interval(0, 0), 20.0 / 6_000.0);
        assert_eq!(
            e.observe_interval(10, 30),
            (20.0 + 10.0) / 6_010.0,
            "capped at what was sent"
        );
    }

    #[test]
    fn counters_that_wrap_are_differences_and_a_reset_is_skipped() {
        let mut e = estimator();
        let first = e.observe_counters(u32::MAX - 499, u32::MAX - 4);
        assert_eq!(first, 0.0, "the first read is the base");
        // 1,000 segments, 10 retransmissions, both counters wrapping.
        assert_eq!(e.observe_counters(500, 5), 0.01);
        // Counters back near zero (a reset): skipped, taken as the base.
        assert_eq!(e.observe_counters(100, 50), 0.01);
        assert_eq!(e.observe_counters(1_100, 60), (10.0 + 10.0) / 2_000.0);
        // More retransmissions than segments: a bad read, skipped.
        assert_eq!(e.observe_counters(1_110, 90), 0.01);
    }

    #[test]
    fn settings_are_checked() {
        let bad = |min_segments, max_intervals| {
            LossEstimator::new(LossEstimatorParams {
                min_segments,
                max_intervals,
            })
            .is_err()
        };
        assert!(bad(0, 8));
        assert!(bad(100, 0));
        assert!(bad(100, MAX_WINDOW_INTERVALS + 1));
        assert!(!bad(100, MAX_WINDOW_INTERVALS));
    }
}
