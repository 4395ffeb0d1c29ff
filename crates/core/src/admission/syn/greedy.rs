//! Predictive Greedy filter (Abacus paper, Section 4.3, Eq. 12–16, run as
//! Section 6 describes).
//!
//! Stage one is a token bucket (W, r_t). At the start of every observation
//! period of length T0 the filter chooses λ_thresh, the number of new
//! requests of the coming period worth letting through rather than
//! rejecting: the smallest λ for which one more request raises the
//! predicted holding cost H by more than the rejection cost r (Eq. 15–16),
//! H being the cost of Eq. 12 over the window S_G. H is computed with the fluid model of Section 4.2:
//! arrivals A(t) = λ(t) + Σ X_i(t − d_i) (Eq. 3), equal drop probability
//! P_d = (1 − W(t)/A(t))⁺ for every transmission class (Eq. 4, A8), drops of
//! class i retransmitted d_i later (Eq. 5–6), tokens per Eq. 7, holding cost
//! Σ h·d_i·X_i with d_N = T_conn − T_N + r/h (Eq. 8).
//!
//! During the period, a request that finds no token is dropped while the
//! period's drops stay within what the model expects at λ_thresh
//! (λ_thresh plus predicted retransmissions minus capacity), and rejected
//! after that.
//!
//! Departures, with reasons:
//! * Assumptions A3 and A4 are relaxed as in the paper's Section 6: the
//!   filter cannot tell new requests from retransmissions, so drops and
//!   rejects fall on every class alike. The model splits each period's
//!   observed arrivals into classes by its own prediction of returning
//!   retransmissions (scaled down when it predicted more than arrived) and
//!   charges each class the observed drop fraction; accepted and rejected
//!   requests leave the model alike.
//! * Eq. 4 and 7 let a period use only the tokens present at its start; the
//!   model adds the period's refill r_t·T0, which the continuous first stage
//!   really offers, so that it does not predict drops the bucket absorbs.
//! * λ_thresh is found by bisection, assuming the marginal cost
//!   H(λ+1) − H(λ) does not decrease with λ (more drops only add
//!   congestion); the paper scans.
//! * Section 4.3 computes H "under the assumption of no new arrivals in the
//!   future", yet says the method depends on its estimate of λ(t). Taken
//!   literally, the model offers retransmissions the whole refill r_t of
//!   every future period, so under any realistic load it never rejects and
//!   the filter becomes a plain TBF. The model therefore lets new requests
//!   keep arriving after the coming period at the estimated rate λ̂ (an
//!   exponentially weighted average of the model's per-period new-arrival
//!   counts, weight `arrival_smoothing`, started at the first period's), which leaves retransmissions the
//!   spare capacity r_t − λ̂, as the Abacus Filter's W_a does. Only the coming
//!   period's new requests are the decision variable, as in Eq. 12.
//! * With a mixture of client profiles, new requests split among profiles by
//!   weight and each profile's classes follow its own timeouts.

use super::{
    check, check_interval_and_smoothing, periods, ConstantVerdict, FilterConfigError,
    FilterSnapshot, Intervals, SynFilter, TokenBucket, Verdict,
};
use crate::tcp::ClientMix;
use crate::Nanos;

/// Largest λ_thresh considered: beyond it the filter never rejects.
const THRESHOLD_LIMIT: f64 = (1u64 << 24) as f64;

/// Parameters of a Predictive Greedy filter.
#[derive(Clone, Debug)]
pub struct GreedyConfig {
    /// W: size of the first-stage token bucket.
    pub bucket_size: u64,
    /// r_t: refill rate, tokens per second.
    pub refill_rate: f64,
    /// T0: observation period.
    pub interval: Nanos,
    /// S_G: how far ahead the cost is predicted (at least T_N, Section 4.3).
    pub window: Nanos,
    /// Client population: the transmission classes and their timeouts d_i.
    pub clients: ClientMix,
    /// h: cost of one second of delay of one request.
    pub delay_cost: f64,
    /// r: cost of rejecting one request.
    pub reject_cost: f64,
    /// Weight of the newest period in the new-arrival rate estimate λ̂, in (0, 1].
    pub arrival_smoothing: f64,
}

/// Transmission classes of one client profile.
#[derive(Clone, Debug)]
struct ProfileClasses {
    weight: f64,
    /// d_0 … d_{N−1} in periods (at least one).
    gaps: Vec<usize>,
    /// h·d_i for i = 0 … N, with h·d_N = h·(T_conn − T_N) + r.
    hold_cost: Vec<f64>,
}

/// Predictive Greedy filter state.
#[derive(Clone, Debug)]
pub struct PredictiveGreedy {
    first_stage: TokenBucket,
    intervals: Intervals,
    interval_secs: f64,
    refill_rate: f64,
    bucket_size: f64,
    reject_cost: f64,
    window: usize,
    profiles: Vec<ProfileClasses>,
    /// Classes per profile in the flattened arrays (max N + 1).
    classes: usize,
    /// Predicted retransmission arrivals: ring of periods × profiles × classes.
    pending: Vec<f64>,
    ring_len: usize,
    head: usize,
    /// Scratch space for the forward model: window × profiles × classes.
    scratch: Vec<f64>,
    arrivals: u64,
    dropped: u64,
    drop_budget: u64,
    threshold: f64,
    started: bool,
    /// λ̂: estimated new requests per period, before the decay of
    /// `idle_periods`.
    new_per_period: f64,
    /// Empty periods since the last SYN beyond the ring: they only decay
    /// λ̂, applied in one step ([`PredictiveGreedy::arrival_estimate`]).
    idle_periods: u64,
    /// Periods closed one by one since the last SYN (the first held it).
    closed_since_syn: u64,
    arrival_smoothing: f64,
    /// Periods folded into λ̂ (the first one sets it).
    periods_seen: u64,
}

impl PredictiveGreedy {
    pub fn new(config: GreedyConfig) -> Result<PredictiveGreedy, FilterConfigError> {
        check_interval_and_smoothing(config.interval, config.arrival_smoothing)?;
        check(
            config.delay_cost.is_finite() && config.delay_cost >= 0.0,
            "delay cost h",
            "finite and non-negative",
            config.delay_cost,
        )?;
        check(
            config.reject_cost.is_finite() && config.reject_cost >= 0.0,
            "reject cost r",
            "finite and non-negative",
            config.reject_cost,
        )?;
        let window = (config.window.0 / config.interval.0) as usize;
        check(
            window <= 100_000,
            "window S_G",
            "at most 10^5 intervals",
            config.window,
        )?;
        let first_stage = TokenBucket::new(config.bucket_size, config.refill_rate)?;
        let interval_secs = config.interval.as_secs_f64();
        let h = config.delay_cost;
        let profiles: Vec<ProfileClasses> = config
            .clients
            .entries()
            .iter()
            .map(|(profile, weight)| {
                let gaps = profile
                    .gaps
                    .iter()
                    .map(|g| periods(*g, config.interval))
                    .collect();
                let mut hold_cost: Vec<f64> =
                    profile.gaps.iter().map(|g| h * g.as_secs_f64()).collect();
                let last = profile.send_offset(profile.retransmissions());
                hold_cost.push(h * (profile.give_up - last).as_secs_f64() + config.reject_cost);
                ProfileClasses {
                    weight: *weight,
                    gaps,
                    hold_cost,
                }
            })
            .collect();
        let classes = profiles
            .iter()
            .map(|p| p.hold_cost.len())
            .max()
            .unwrap_or(1);
        let max_gap = profiles
            .iter()
            .flat_map(|p| p.gaps.iter().copied())
            .max()
            .unwrap_or(1);
        check(
            max_gap <= 100_000,
            "interval T0",
            "long enough that the longest SYN timeout spans at most 10^5 intervals",
            config.interval,
        )?;
        let ring_len = max_gap + 1;
        let cells = profiles.len() * classes;
        Ok(PredictiveGreedy {
            first_stage,
            intervals: Intervals::new(config.interval),
            interval_secs,
            refill_rate: config.refill_rate,
            bucket_size: config.bucket_size as f64,
            reject_cost: config.reject_cost,
            window,
            classes,
            pending: vec![0.0; ring_len * cells],
            ring_len,
            head: 0,
            scratch: vec![0.0; window.max(1) * cells],
            profiles,
            arrivals: 0,
            dropped: 0,
            drop_budget: u64::MAX,
            threshold: THRESHOLD_LIMIT,
            started: false,
            new_per_period: 0.0,
            idle_periods: 0,
            closed_since_syn: 0,
            arrival_smoothing: config.arrival_smoothing,
            periods_seen: 0,
        })
    }

    /// λ̂ with the decay of the idle periods applied.
    fn arrival_estimate(&self) -> f64 {
        let idle = self.idle_periods.min(i32::MAX as u64) as i32;
        self.new_per_period * (1.0 - self.arrival_smoothing).powi(idle)
    }

    fn cells(&self) -> usize {
        self.profiles.len() * self.classes
    }

    /// Folds the period that just ended into the model of pending
    /// retransmissions, then moves the ring one period on.
    fn close_period(&mut self, arrivals: u64, dropped: u64) {
        let cells = self.cells();
        let base = self.head * cells;
        let predicted: f64 = (0..self.profiles.len())
            .map(|p| {
                (1..self.classes)
                    .map(|i| self.pending[base + p * self.classes + i])
                    .sum::<f64>()
            })
            .sum();
        let arrivals = arrivals as f64;
        let scale = if predicted > arrivals {
            arrivals / predicted
        } else {
            1.0
        };
        let new = (arrivals - predicted * scale).max(0.0);
        if self.periods_seen == 0 {
            self.new_per_period = new;
        } else {
            self.new_per_period += self.arrival_smoothing * (new - self.new_per_period);
        }
        self.periods_seen += 1;
        let drop_fraction = if arrivals > 0.0 {
            dropped as f64 / arrivals
        } else {
            0.0
        };
        for p in 0..self.profiles.len() {
            let n = self.profiles[p].gaps.len();
            for i in 0..=n {
                let here = base + p * self.classes + i;
                let class_arrivals = if i == 0 {
                    new * self.profiles[p].weight
                } else {
                    self.pending[here] * scale
                };
                let dropped_here = class_arrivals * drop_fraction;
                if i < n && dropped_here > 0.0 {
                    let slot = (self.head + self.profiles[p].gaps[i]) % self.ring_len;
                    self.pending[slot * cells + p * self.classes + i + 1] += dropped_here;
                }
            }
        }
        self.pending[base..base + cells].fill(0.0);
        self.head = (self.head + 1) % self.ring_len;
    }

    /// H(λ): predicted holding cost over the window when λ new requests of
    /// the coming period are let through (Eq. 12's third term).
    fn holding_cost(&mut self, new_requests: f64, start_tokens: f64) -> f64 {
        let cells = self.cells();
        let classes = self.classes;
        let window = self.window;
        let lambda_hat = self.arrival_estimate();
        self.scratch.fill(0.0);
        for j in 0..window.min(self.ring_len) {
            let slot = (self.head + j) % self.ring_len;
            self.scratch[j * cells..(j + 1) * cells]
                .copy_from_slice(&self.pending[slot * cells..(slot + 1) * cells]);
        }
        for j in 0..window {
            let new = if j == 0 { new_requests } else { lambda_hat };
            for (p, profile) in self.profiles.iter().enumerate() {
                self.scratch[j * cells + p * classes] += new * profile.weight;
            }
        }
        let refill = self.refill_rate * self.interval_secs;
        let mut tokens = start_tokens;
        let mut cost = 0.0;
        for j in 0..window {
            let row = j * cells;
            let total: f64 = self.scratch[row..row + cells].iter().sum();
            let capacity = tokens + refill;
            let accepted = total.min(capacity);
            tokens = (capacity - accepted).min(self.bucket_size);
            if total <= capacity {
                continue;
            }
            let drop_probability = 1.0 - capacity / total;
            for (p, profile) in self.profiles.iter().enumerate() {
                let n = profile.gaps.len();
                for i in 0..=n {
                    let dropped = drop_probability * self.scratch[row + p * classes + i];
                    if dropped <= 0.0 {
                        continue;
                    }
                    cost += profile.hold_cost[i] * dropped;
                    if i < n {
                        let later = j + profile.gaps[i];
                        if later < window {
                            self.scratch[later * cells + p * classes + i + 1] += dropped;
                        }
                    }
                }
            }
        }
        cost
    }

    /// Whether one more request beyond `lambda` costs more than a reject.
    fn marginal_exceeds_reject(&mut self, lambda: f64, start_tokens: f64) -> bool {
        let without = self.holding_cost(lambda, start_tokens);
        let with = self.holding_cost(lambda + 1.0, start_tokens);
        with - without > self.reject_cost
    }

    /// Eq. 16: λ_thresh for the period starting now, and the drop budget.
    fn choose_threshold(&mut self, start_tokens: f64) {
        let threshold = if self.marginal_exceeds_reject(0.0, start_tokens) {
            0.0
        } else {
            let mut low = 0.0; // marginal ≤ r here
            let mut high = 1.0;
            while high < THRESHOLD_LIMIT && !self.marginal_exceeds_reject(high, start_tokens) {
                low = high;
                high *= 2.0;
            }
            if high >= THRESHOLD_LIMIT {
                THRESHOLD_LIMIT
            } else {
                while high - low > 1.0 {
                    let mid = ((low + high) / 2.0).floor();
                    if self.marginal_exceeds_reject(mid, start_tokens) {
                        high = mid;
                    } else {
                        low = mid;
                    }
                }
                high
            }
        };
        self.threshold = threshold;
        let cells = self.cells();
        let base = self.head * cells;
        let predicted: f64 = self.pending[base..base + cells].iter().sum();
        let capacity = start_tokens + self.refill_rate * self.interval_secs;
        let expected_drops = threshold + predicted - capacity;
        self.drop_budget = if threshold >= THRESHOLD_LIMIT {
            u64::MAX
        } else {
            expected_drops.max(0.0).round() as u64
        };
    }

    /// Closes the periods that ended before `now` and sets the new period's
    /// threshold. The count of periods closed since the last SYN persists
    /// across calls, so that closing in several steps ends in the state one
    /// step would.
    fn close_periods(&mut self, now: Nanos) {
        let first = !self.started;
        self.started = true;
        let ended = self.intervals.advance(now);
        if ended == 0 {
            if first {
                self.first_stage.refill(now);
                let tokens = self.first_stage.tokens() as f64;
                self.choose_threshold(tokens);
            }
            return;
        }
        // Periods 0 ..= ring_len after the SYN's are closed one by one;
        // after them every predicted retransmission has come and gone, and
        // the remaining empty periods only decay λ̂.
        let one_by_one = (self.ring_len as u64 + 1)
            .saturating_sub(self.closed_since_syn)
            .min(ended);
        for _ in 0..one_by_one {
            let arrivals = std::mem::take(&mut self.arrivals);
            let dropped = std::mem::take(&mut self.dropped);
            self.close_period(arrivals, dropped);
            self.closed_since_syn += 1;
        }
        self.idle_periods = self.idle_periods.saturating_add(ended - one_by_one);
        self.arrivals = 0;
        self.dropped = 0;
        let start = self.intervals.current_start();
        self.first_stage.refill(start);
        let tokens = self.first_stage.tokens() as f64;
        self.choose_threshold(tokens);
    }

    /// λ_thresh of the current period.
    pub fn threshold(&self) -> f64 {
        self.threshold
    }

    /// Drops still allowed in the current period before rejecting.
    pub fn drop_budget(&self) -> u64 {
        self.drop_budget.saturating_sub(self.dropped)
    }

    /// Retransmissions the model expects `ahead` periods from now.
    pub fn predicted_retransmissions(&self, ahead: usize) -> f64 {
        if ahead >= self.ring_len {
            return 0.0;
        }
        let cells = self.cells();
        let slot = (self.head + ahead) % self.ring_len;
        self.pending[slot * cells..(slot + 1) * cells].iter().sum()
    }
}

impl SynFilter for PredictiveGreedy {
    fn on_syn(&mut self, now: Nanos) -> Verdict {
        self.close_periods(now);
        self.new_per_period = self.arrival_estimate();
        self.idle_periods = 0;
        self.closed_since_syn = 0;
        self.arrivals += 1;
        if self.first_stage.try_take(now) {
            Verdict::Accept
        } else if self.dropped < self.drop_budget {
            self.dropped += 1;
            Verdict::Drop
        } else {
            Verdict::Reject
        }
    }

    fn advance(&mut self, now: Nanos) {
        if self.started {
            self.close_periods(now);
        }
        self.first_stage.refill(now);
    }

    fn snapshot(&self) -> FilterSnapshot {
        FilterSnapshot {
            tokens: self.first_stage.tokens(),
            bucket_size: self.first_stage.capacity(),
            refill_rate: self.refill_rate,
            arrival_rate: Some(self.arrival_estimate() / self.interval_secs),
            drop_threshold: Some(self.threshold),
            drop_budget: Some(self.drop_budget()),
            ..FilterSnapshot::default()
        }
    }

    /// The cost model uses the new r_t from the next period on.
    fn set_refill_rate(&mut self, refill_rate: f64) -> Result<(), FilterConfigError> {
        let now = self.first_stage.last_refill();
        self.first_stage.set_refill_rate(now, refill_rate)?;
        self.refill_rate = refill_rate;
        Ok(())
    }

    /// With the first stage empty: reject until the next token or the end
    /// of the period once the period's drop budget is spent; drop until
    /// then when the budget is unbounded (λ_thresh at its limit). A budget
    /// with drops left is a count, not a time: no constant verdict.
    fn constant_until(&self, now: Nanos) -> Option<ConstantVerdict> {
        let period_end = self.intervals.current_end()?;
        if !self.started || now >= period_end {
            return None;
        }
        let token = self.first_stage.next_token_at(now)?;
        let verdict = if self.dropped >= self.drop_budget {
            Verdict::Reject
        } else if self.drop_budget == u64::MAX {
            Verdict::Drop
        } else {
            return None;
        };
        Some(ConstantVerdict {
            verdict,
            until: token.min(period_end),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(bucket_size: u64, refill_rate: f64, reject_cost: f64) -> PredictiveGreedy {
        PredictiveGreedy::new(GreedyConfig {
            bucket_size,
            refill_rate,
            interval: Nanos::from_secs(1),
            window: Nanos::from_secs(50),
            clients: ClientMix::builtin("windows-9x-nt").unwrap(),
            delay_cost: 1.0,
            reject_cost,
            arrival_smoothing: 0.25,
        })
        .unwrap()
    }

    /// An idle system with spare capacity (W = 1, r_t = 10/s: 11 requests
    /// per period): a 12th request is dropped once, waits d_0 = 3 s and comes
    /// back to ample tokens, so its marginal cost is h·d_0 = 3 (Eq. 8).
    #[test]
    fn marginal_cost_of_one_drop_is_first_timeout() {
        let mut f = filter(1, 10.0, 75.0);
        assert_eq!(f.holding_cost(11.0, 1.0), 0.0);
        let h12 = f.holding_cost(12.0, 1.0);
        assert!((h12 - 3.0).abs() < 1e-9, "H(12) = {h12}");
    }

    /// Eq. 8 with d_N: a drop in the last class costs h·(T_conn − T_N) + r.
    /// Windows 9x: T_N = 21 s, T_conn = 45 s, so 24 + r.
    #[test]
    fn timeout_class_costs_remaining_wait_plus_reject() {
        let f = filter(1, 10.0, 75.0);
        assert_eq!(f.profiles[0].hold_cost, vec![3.0, 6.0, 12.0, 24.0 + 75.0]);
    }

    /// Eq. 16: the threshold grows with r; with r below h·d_0 nothing beyond
    /// the period's capacity is worth dropping; even a huge r stays finite
    /// because a timed-out request costs more than a rejected one.
    #[test]
    fn threshold_grows_with_reject_cost() {
        let thresholds: Vec<f64> = [0.5, 5.0, 75.0, 500.0, 1e6]
            .iter()
            .map(|&r| {
                let mut f = filter(1, 10.0, r);
                f.choose_threshold(1.0);
                f.threshold()
            })
            .collect();
        assert_eq!(thresholds[0], 11.0);
        assert!(
            thresholds.windows(2).all(|w| w[0] <= w[1]),
            "{thresholds:?}"
        );
        assert!(thresholds[1] > 11.0, "{thresholds:?}");
        assert!(thresholds[4] < THRESHOLD_LIMIT, "{thresholds:?}");
    }

    #[test]
    fn an_idle_period_shows_refilled_tokens_after_advance() {
        let mut f = filter(5, 10.0, 20.0);
        for _ in 0..60 {
            f.on_syn(Nanos::ZERO);
        }
        assert_eq!(f.snapshot().tokens, 0);
        f.advance(Nanos::from_secs(1));
        let busy = f.snapshot().arrival_rate.unwrap();
        assert!(busy > 0.0);
        // 14 s without a SYN, past the ring of predicted retransmissions.
        f.advance(Nanos::from_secs(15));
        let idle = f.snapshot();
        assert_eq!(idle.tokens, 5);
        assert!(idle.arrival_rate.unwrap() < busy * 0.75f64.powi(12));
        assert_eq!(f.predicted_retransmissions(0), 0.0);
        f.advance(Nanos::from_secs(100));
        assert!(f.snapshot().arrival_rate.unwrap() < busy * 0.75f64.powi(90));
    }

    #[test]
    fn drops_within_budget_then_rejects() {
        let mut f = filter(1, 10.0, 20.0);
        let t = Nanos::ZERO;
        let verdicts: Vec<Verdict> = (0..300).map(|_| f.on_syn(t)).collect();
        let budget = (f.threshold() - 11.0) as usize;
        assert!(budget > 0 && budget < 299, "budget {budget}");
        assert_eq!(verdicts[0], Verdict::Accept);
        assert!(verdicts[1..=budget].iter().all(|v| *v == Verdict::Drop));
        assert!(verdicts[budget + 1..].iter().all(|v| *v == Verdict::Reject));
    }

    #[test]
    fn rejects_are_constant_once_the_budget_is_spent_until_the_next_token() {
        let mut f = filter(1, 10.0, 20.0);
        let t = Nanos::from_millis(250);
        assert_eq!(f.on_syn(t), Verdict::Accept);
        // Drops left: a count, not a time.
        assert_eq!(f.on_syn(t), Verdict::Drop);
        assert_eq!(f.constant_until(t), None);
        while f.on_syn(t) == Verdict::Drop {}
        // Budget spent, no token: reject until the next token (100 ms at
        // 10/s), which comes before the period's end (1.25 s).
        let constant = f.constant_until(t).unwrap();
        assert_eq!(constant.verdict, Verdict::Reject);
        assert_eq!(constant.until, Nanos::from_millis(350));
        assert_eq!(f.on_syn(Nanos(349_999_999)), Verdict::Reject);
        assert_eq!(f.on_syn(Nanos::from_millis(350)), Verdict::Accept);
        // Before the first SYN nothing is constant.
        assert_eq!(filter(1, 10.0, 20.0).constant_until(t), None);
    }

    #[test]
    fn dropped_requests_are_predicted_to_return_after_d0() {
        let mut f = filter(1, 10.0, 75.0);
        let verdicts: Vec<Verdict> = (0..30).map(|_| f.on_syn(Nanos::ZERO)).collect();
        let drops = verdicts.iter().filter(|v| **v == Verdict::Drop).count();
        assert_eq!(drops, 29, "cheap to drop: they all fit when they return");
        f.advance(Nanos::from_secs(1));
        // Dropped at t = 0, back at t = 3 s: two periods after the one that
        // starts at t = 1 s.
        assert!((f.predicted_retransmissions(2) - 29.0).abs() < 1e-9);
        assert_eq!(f.predicted_retransmissions(1), 0.0);
    }

    /// With new requests expected at the full refill rate, a dropped request
    /// finds no spare capacity when it returns: dropping costs more, so the
    /// threshold is lower than with an idle future.
    #[test]
    fn expected_future_arrivals_lower_the_threshold() {
        let mut idle = filter(1, 10.0, 75.0);
        idle.choose_threshold(1.0);
        let mut busy = filter(1, 10.0, 75.0);
        busy.new_per_period = 10.0;
        busy.choose_threshold(1.0);
        assert!(
            busy.threshold() < idle.threshold(),
            "{} vs {}",
            busy.threshold(),
            idle.threshold()
        );
        assert!(
            busy.threshold() >= 11.0,
            "the period's own capacity is free"
        );
    }
}
