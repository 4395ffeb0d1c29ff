//! Abacus Filter (Abacus paper, Section 5, Figures 6 and 7).
//!
//! Stage one is a token bucket (W, r_t). A request it cannot accept goes to
//! stage two, a circular array of future buckets, one per observation
//! period of length T0 over a window S. Each bucket holds the tokens
//! W_a = (r_t − λ)·T0 that the future period is expected to have spare for
//! retransmissions, λ being a time-weighted average of arrivals. Stage two
//! drops the first B[0] requests of a period without borrowing (they are
//! retransmissions already accounted for), then runs the borrowing algorithm
//! of Figure 7: it looks for a token in the bucket at the time the dropped
//! request will be retransmitted (T_1), then at the next retransmission
//! (T_2), and so on; on success it drops the request and adds one to the
//! chain-borrow counter B[j] of every bucket j it found empty on the way;
//! if it passes T_N or the window S, it rejects.
//!
//! Generalized beyond the paper:
//! * The bucket offsets come from the client retransmission schedule
//!   (`tcp::SynProfile`) instead of the hard-coded 3·2^k s: offset k is
//!   T_k / T0, rounded. With a mixture of client profiles, each request
//!   borrowed for follows one profile's offsets, chosen by smooth weighted
//!   round-robin so that borrowing matches the mixture's weights without a
//!   random generator.
//! * λ is an exponentially weighted average of arrivals per period with the
//!   weight `arrival_smoothing` given to the newest period, started at the
//!   first period's count; the paper says
//!   only "weighted-time average of the observed request arrivals over the
//!   most recent observation periods". The filter cannot tell a new request
//!   from a retransmission (assumption A3 relaxed), but its own buckets say
//!   how many retransmissions each period expects: the tokens borrowed from
//!   the period's bucket plus its B[0]. λ counts the period's arrivals less
//!   that number, so that it estimates new requests, as W_a = (r_t − λ)·T0
//!   requires, instead of growing with the retransmissions it plans for.
//! * The window never reaches past the clients' last retransmission T_N
//!   (the latest over a mixture): a longer S is cut to T_N. The paper
//!   bounds S the same way ("even when r/h is very large, the maximum value
//!   of S is bounded", Section 6.2, O2): no request can borrow beyond T_N,
//!   and since the array spans the window and each bucket is filled when it
//!   enters it, buckets beyond T_N would only make every future bucket's
//!   W_a older without adding a bucket to borrow from. Uncut, the cost kept
//!   falling as S grew past T_N (Figure 10), for that reason alone.
//! * Before the first period ends λ is unknown; the filter starts with every
//!   future bucket holding r_t·T0, as a token bucket starts full, and when
//!   the first estimate of λ arrives takes λ·T0 back from every bucket, so
//!   that a long window does not carry the optimistic start for S seconds.

use super::{
    check, check_interval_and_smoothing, periods, ConstantVerdict, FilterConfigError,
    FilterSnapshot, Intervals, SynFilter, TokenBucket, Verdict,
};
use crate::tcp::ClientMix;
use crate::Nanos;

/// Parameters of an Abacus Filter.
#[derive(Clone, Debug)]
pub struct AbacusConfig {
    /// W: size of the first-stage token bucket.
    pub bucket_size: u64,
    /// r_t: refill rate of the first stage, tokens per second.
    pub refill_rate: f64,
    /// T0: time granularity (length of one future bucket).
    pub interval: Nanos,
    /// S: how far into the future the filter may borrow; cut to the
    /// clients' last retransmission T_N when longer.
    pub window: Nanos,
    /// Client population whose retransmission times place the borrowing.
    pub clients: ClientMix,
    /// Weight of the newest period in the average arrival rate λ, in (0, 1].
    pub arrival_smoothing: f64,
}

/// Abacus Filter state.
#[derive(Clone, Debug)]
pub struct Abacus {
    first_stage: TokenBucket,
    intervals: Intervals,
    interval_secs: f64,
    refill_rate: f64,
    arrival_smoothing: f64,
    /// A[i]: tokens of the bucket i periods ahead, at `(head + i) % len`.
    tokens: Vec<u64>,
    /// B[i]: retransmissions expected to be dropped again i periods ahead.
    chain_borrowed: Vec<u64>,
    head: usize,
    /// Per client profile: bucket offsets T_1/T0 … T_N/T0.
    offsets: Vec<Vec<usize>>,
    /// Smooth weighted round-robin: integer weights and running credit.
    weights: Vec<i64>,
    credit: Vec<i64>,
    /// λ, arrivals per second.
    arrival_rate: f64,
    arrivals_this_period: u64,
    /// Tokens each bucket was filled with (W_a at its append).
    filled: Vec<u64>,
    /// Retransmissions the current period's bucket expects.
    expected_retransmissions: u64,
    /// Periods folded into λ (the first one sets it).
    periods_seen: u64,
    /// Periods closed since the last SYN (the first of them held it).
    closed_since_syn: u64,
    /// Every bucket renewed and λ decayed to nothing since the last SYN:
    /// further empty periods change no state.
    dormant: bool,
}

impl Abacus {
    pub fn new(config: AbacusConfig) -> Result<Abacus, FilterConfigError> {
        check_interval_and_smoothing(config.interval, config.arrival_smoothing)?;
        check(
            config.window.0 / config.interval.0 <= 1_000_000,
            "window S",
            "at most 10^6 intervals",
            config.window,
        )?;
        let first_stage = TokenBucket::new(config.bucket_size, config.refill_rate)?;
        let offsets: Vec<Vec<usize>> = config
            .clients
            .entries()
            .iter()
            .map(|(profile, _)| {
                profile
                    .retransmission_offsets()
                    .iter()
                    .map(|t| periods(*t, config.interval))
                    .collect()
            })
            .collect();
        let last_retransmission = offsets.iter().flatten().copied().max().unwrap_or(0);
        let window = (config.window.0 / config.interval.0) as usize;
        let len = window.min(last_retransmission) + 1;
        let interval_secs = config.interval.as_secs_f64();
        let weights: Vec<i64> = config
            .clients
            .entries()
            .iter()
            .map(|(_, w)| ((w * 1_000_000.0).round() as i64).max(1))
            .collect();
        let mut filter = Abacus {
            first_stage,
            intervals: Intervals::new(config.interval),
            interval_secs,
            refill_rate: config.refill_rate,
            arrival_smoothing: config.arrival_smoothing,
            tokens: vec![0; len],
            chain_borrowed: vec![0; len],
            head: 0,
            offsets,
            credit: vec![0; weights.len()],
            weights,
            arrival_rate: 0.0,
            arrivals_this_period: 0,
            filled: vec![0; len],
            expected_retransmissions: 0,
            periods_seen: 0,
            closed_since_syn: 0,
            dormant: false,
        };
        let spare = filter.spare_tokens();
        filter.tokens.iter_mut().for_each(|t| *t = spare);
        filter.filled.iter_mut().for_each(|t| *t = spare);
        Ok(filter)
    }

    /// W_a = (r_t − λ)·T0, floored at zero.
    fn spare_tokens(&self) -> u64 {
        self.spare_tokens_at(self.arrival_rate)
    }

    fn spare_tokens_at(&self, arrival_rate: f64) -> u64 {
        ((self.refill_rate - arrival_rate) * self.interval_secs)
            .max(0.0)
            .floor() as u64
    }

    fn slot(&self, ahead: usize) -> usize {
        (self.head + ahead) % self.tokens.len()
    }

    /// Closes the periods that ended before `now`: updates λ, drops the
    /// current bucket and appends a new one holding W_a tokens. The count
    /// of periods closed since the last SYN persists across calls, so that
    /// closing in several steps ends in the state one step would.
    fn close_periods(&mut self, now: Nanos) {
        let ended = self.intervals.advance(now);
        for _ in 0..ended {
            if self.dormant {
                break;
            }
            let n = self.closed_since_syn;
            self.closed_since_syn += 1;
            let arrivals = std::mem::take(&mut self.arrivals_this_period);
            // New requests: arrivals less the retransmissions this period's
            // bucket was expecting (tokens borrowed from it, plus B[0]).
            let new = arrivals.saturating_sub(std::mem::take(&mut self.expected_retransmissions));
            let rate = new as f64 / self.interval_secs;
            if self.periods_seen == 0 {
                self.arrival_rate = rate;
                // The buckets filled before any estimate assumed λ = 0: take
                // back what the first estimate says they do not hold.
                let overestimate = self.spare_tokens_at(0.0) - self.spare_tokens_at(rate);
                self.tokens
                    .iter_mut()
                    .for_each(|t| *t = t.saturating_sub(overestimate));
                self.filled
                    .iter_mut()
                    .for_each(|t| *t = t.saturating_sub(overestimate));
            } else {
                self.arrival_rate += self.arrival_smoothing * (rate - self.arrival_rate);
            }
            self.periods_seen += 1;
            if n >= self.tokens.len() as u64 && self.arrival_rate < 1e-9 {
                // Every bucket has been renewed and λ has decayed to nothing:
                // the remaining empty periods change no state.
                self.dormant = true;
                break;
            }
            let spare = self.spare_tokens();
            let old = self.head;
            self.tokens[old] = spare;
            self.filled[old] = spare;
            self.chain_borrowed[old] = 0;
            self.head = (self.head + 1) % self.tokens.len();
            let now_current = self.head;
            self.expected_retransmissions = self.filled[now_current]
                .saturating_sub(self.tokens[now_current])
                + self.chain_borrowed[now_current];
        }
    }

    /// Which client profile the next borrowing follows.
    fn next_profile(&mut self) -> usize {
        let total: i64 = self.weights.iter().sum();
        let mut best = 0;
        for i in 0..self.weights.len() {
            self.credit[i] += self.weights[i];
            if self.credit[i] > self.credit[best] {
                best = i;
            }
        }
        self.credit[best] -= total;
        best
    }

    /// Figure 7, BORROW_TOKEN: decides drop or reject for a request the
    /// first stage could not accept.
    fn borrow(&mut self) -> Verdict {
        let current = self.slot(0);
        if self.chain_borrowed[current] > 0 {
            self.chain_borrowed[current] -= 1;
            return Verdict::Drop;
        }
        let profile = self.next_profile();
        let window = self.tokens.len() - 1;
        // Z: the buckets found empty on the way (at most N of them).
        let mut passed: Vec<usize> = Vec::new();
        for k in 0..self.offsets[profile].len() {
            let ahead = self.offsets[profile][k];
            if ahead > window {
                return Verdict::Reject;
            }
            let slot = self.slot(ahead);
            if self.tokens[slot] > 0 {
                self.tokens[slot] -= 1;
                for &j in &passed {
                    self.chain_borrowed[j] += 1;
                }
                return Verdict::Drop;
            }
            passed.push(slot);
        }
        Verdict::Reject
    }

    /// A[i]: tokens in the bucket `ahead` periods from now.
    pub fn future_tokens(&self, ahead: usize) -> u64 {
        self.tokens[self.slot(ahead)]
    }

    /// B[i]: chain-borrow counter of the bucket `ahead` periods from now.
    pub fn chain_borrowed(&self, ahead: usize) -> u64 {
        self.chain_borrowed[self.slot(ahead)]
    }

    /// λ, the filter's estimate of arrivals per second.
    pub fn arrival_rate(&self) -> f64 {
        self.arrival_rate
    }

    /// Number of future buckets including the current one
    /// (min(S, T_N)/T0 + 1).
    pub fn buckets(&self) -> usize {
        self.tokens.len()
    }

    pub fn first_stage(&self) -> &TokenBucket {
        &self.first_stage
    }
}

impl SynFilter for Abacus {
    fn on_syn(&mut self, now: Nanos) -> Verdict {
        self.close_periods(now);
        self.closed_since_syn = 0;
        self.dormant = false;
        self.arrivals_this_period += 1;
        if self.first_stage.try_take(now) {
            Verdict::Accept
        } else {
            self.borrow()
        }
    }

    fn advance(&mut self, now: Nanos) {
        if self.intervals.started() {
            self.close_periods(now);
        }
        self.first_stage.refill(now);
    }

    fn snapshot(&self) -> FilterSnapshot {
        FilterSnapshot {
            tokens: self.first_stage.tokens(),
            bucket_size: self.first_stage.capacity(),
            refill_rate: self.refill_rate,
            arrival_rate: Some(self.arrival_rate),
            future_tokens: Some(self.tokens.iter().sum()),
            chain_borrowed: Some(self.chain_borrowed.iter().sum()),
            future_buckets: Some(self.tokens.len()),
            ..FilterSnapshot::default()
        }
    }

    /// Buckets appended from now on get W_a = (r_t − λ)·T0 at the new r_t;
    /// buckets already in the window keep their tokens.
    fn set_refill_rate(&mut self, refill_rate: f64) -> Result<(), FilterConfigError> {
        let now = self.first_stage.last_refill();
        self.first_stage.set_refill_rate(now, refill_rate)?;
        self.refill_rate = refill_rate;
        Ok(())
    }

    /// Reject until the next first-stage token or the end of the period,
    /// whichever comes first, when the first stage is empty, no chain
    /// borrowing is owed in the current bucket, and every client profile
    /// finds no token on its way through the future buckets: a rejected
    /// request takes nothing, so the next one finds the same.
    fn constant_until(&self, now: Nanos) -> Option<ConstantVerdict> {
        let period_end = self.intervals.current_end()?;
        if now >= period_end || self.chain_borrowed[self.slot(0)] > 0 {
            return None;
        }
        let token = self.first_stage.next_token_at(now)?;
        let window = self.tokens.len() - 1;
        let every_profile_rejects = self.offsets.iter().all(|offsets| {
            offsets
                .iter()
                .take_while(|&&ahead| ahead <= window)
                .all(|&ahead| self.tokens[self.slot(ahead)] == 0)
        });
        every_profile_rejects.then_some(ConstantVerdict {
            verdict: Verdict::Reject,
            until: token.min(period_end),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::SynProfile;

    /// The paper's setting of Figure 6: Windows clients (T = 3, 9, 21 s),
    /// T0 = 1 s.
    fn paper_filter(bucket_size: u64, refill_rate: f64, window_secs: u64) -> Abacus {
        Abacus::new(AbacusConfig {
            bucket_size,
            refill_rate,
            interval: Nanos::from_secs(1),
            window: Nanos::from_secs(window_secs),
            clients: ClientMix::builtin("windows-9x-nt").unwrap(),
            arrival_smoothing: 0.25,
        })
        .unwrap()
    }

    /// Figure 7 worked by hand. W = 0 and r_t = 2/s: stage one accepts
    /// nothing at t = 0 and every future bucket holds W_a = 2 tokens.
    /// Requests 1–2 borrow from bucket 3; 3–4 find bucket 3 empty and borrow
    /// from 9, incrementing B[3]; 5–6 borrow from 21 with B[3] and B[9]
    /// incremented; the 7th finds 3, 9 and 21 empty and k > N: reject.
    #[test]
    fn figure7_borrowing_by_hand() {
        let mut f = paper_filter(0, 2.0, 50);
        let t = Nanos::ZERO;
        let verdicts: Vec<Verdict> = (0..7).map(|_| f.on_syn(t)).collect();
        assert_eq!(&verdicts[..6], &[Verdict::Drop; 6]);
        assert_eq!(verdicts[6], Verdict::Reject);
        assert_eq!(f.future_tokens(3), 0);
        assert_eq!(f.future_tokens(9), 0);
        assert_eq!(f.future_tokens(21), 0);
        assert_eq!(f.future_tokens(4), 2, "untouched buckets keep W_a");
        assert_eq!(f.chain_borrowed(3), 4, "requests 3–6 passed bucket 3");
        assert_eq!(f.chain_borrowed(9), 2, "requests 5–6 passed bucket 9");
        assert_eq!(f.chain_borrowed(21), 0);
    }

    #[test]
    fn an_idle_period_shows_refilled_tokens_after_advance() {
        let mut f = paper_filter(20, 10.0, 50);
        for _ in 0..40 {
            f.on_syn(Nanos::ZERO);
        }
        assert_eq!(f.snapshot().tokens, 0);
        // 14 s without a SYN: the first stage is full again, λ has decayed
        // and the future buckets were renewed.
        f.advance(Nanos::from_secs(14));
        let snapshot = f.snapshot();
        assert_eq!(snapshot.tokens, 20);
        assert!(snapshot.arrival_rate.unwrap() < 40.0 * 0.75f64.powi(12));
        // The bucket renewed last holds W_a at the decayed λ.
        let spare = ((10.0 - f.arrival_rate()).max(0.0)).floor() as u64;
        assert_eq!(f.future_tokens(f.buckets() - 1), spare);
        assert!(spare >= 9, "λ decayed: {}", f.arrival_rate());
    }

    /// When the borrowed-from period arrives, its first B[0] rejected-by-stage-one
    /// requests are dropped without borrowing.
    #[test]
    fn rejects_are_constant_once_no_future_bucket_is_left() {
        // Figure 7: six drops borrow every bucket the profile reaches, the
        // seventh request is rejected, and so is every later one until the
        // period ends (W = 0: no first-stage token ever).
        let mut f = paper_filter(0, 2.0, 50);
        let t = Nanos::from_millis(100);
        for _ in 0..5 {
            assert_eq!(f.on_syn(t), Verdict::Drop);
            assert_eq!(f.constant_until(t), None, "buckets left");
        }
        assert_eq!(f.on_syn(t), Verdict::Drop);
        // The sixth took the last bucket the profile reaches.
        let constant = f.constant_until(t).unwrap();
        assert_eq!(f.on_syn(t), Verdict::Reject);
        assert_eq!(constant.verdict, Verdict::Reject);
        assert_eq!(constant.until, Nanos::from_millis(1100), "the period's end");
        assert_eq!(f.on_syn(Nanos(1_099_999_999)), Verdict::Reject);
        // Owed chain-borrowed drops in the current bucket: not constant.
        f.advance(Nanos::from_secs(3) + t);
        assert!(f.chain_borrowed(0) > 0);
        assert_eq!(f.constant_until(Nanos::from_secs(3) + t), None);
    }

    #[test]
    fn chain_counters_drop_retransmissions_without_borrowing() {
        let mut f = paper_filter(0, 2.0, 50);
        for _ in 0..6 {
            f.on_syn(Nanos::ZERO);
        }
        // Three seconds later bucket 3 is current with B = 4. W = 0 holds no
        // tokens, so every request reaches stage two.
        let t3 = Nanos::from_secs(3);
        f.advance(t3);
        assert_eq!(f.chain_borrowed(0), 4);
        let before_6 = f.future_tokens(6);
        for _ in 0..4 {
            assert_eq!(f.on_syn(t3), Verdict::Drop);
        }
        assert_eq!(f.chain_borrowed(0), 0);
        assert_eq!(
            f.future_tokens(6),
            before_6,
            "no borrowing for the first B[0]"
        );
        // The first period's 6 arrivals give λ = 6 > r_t: W_a = 0, and the
        // buckets filled before the estimate lose their optimistic 2 tokens.
        // The fifth request finds nothing to borrow and is rejected.
        assert_eq!(f.on_syn(t3), Verdict::Reject);
        assert!((1..f.buckets()).all(|i| f.future_tokens(i) == 0));
    }

    #[test]
    fn window_shorter_than_first_retransmission_rejects() {
        let mut f = paper_filter(0, 100.0, 2);
        assert_eq!(f.on_syn(Nanos::ZERO), Verdict::Reject);
        // With S = 3 the bucket at T_1 is inside the window.
        let mut f = paper_filter(0, 100.0, 3);
        assert_eq!(f.on_syn(Nanos::ZERO), Verdict::Drop);
    }

    #[test]
    fn new_buckets_hold_spare_capacity_of_estimated_rate() {
        // r_t = 10/s, W = 1000 (everything accepted); 6 arrivals in the first
        // second with smoothing 1 give λ = 6 and W_a = 4.
        let mut f = Abacus::new(AbacusConfig {
            bucket_size: 1000,
            refill_rate: 10.0,
            interval: Nanos::from_secs(1),
            window: Nanos::from_secs(5),
            clients: ClientMix::builtin("windows-9x-nt").unwrap(),
            arrival_smoothing: 1.0,
        })
        .unwrap();
        for i in 0..6 {
            assert_eq!(f.on_syn(Nanos::from_millis(100 * i)), Verdict::Accept);
        }
        f.advance(Nanos::from_secs(1));
        assert_eq!(f.arrival_rate(), 6.0);
        assert_eq!(f.future_tokens(5), 4, "appended bucket holds (r_t − λ)·T0");
        assert_eq!(
            f.future_tokens(4),
            4,
            "the first estimate takes back the optimistic start"
        );
    }

    #[test]
    fn offsets_follow_the_client_profile() {
        let mut f = Abacus::new(AbacusConfig {
            bucket_size: 0,
            refill_rate: 1.0,
            interval: Nanos::from_secs(1),
            window: Nanos::from_secs(50),
            clients: ClientMix::single(SynProfile::builtin("linux-6.5").unwrap()),
            arrival_smoothing: 0.25,
        })
        .unwrap();
        // One token per future bucket: successive requests borrow from the
        // buckets at T_1 = 1, T_2 = 2, …, T_9 = 35 s; T_10 = 67 s is beyond S.
        let mut borrowed_at = Vec::new();
        for _ in 0..9 {
            let before: Vec<u64> = (0..f.buckets()).map(|i| f.future_tokens(i)).collect();
            assert_eq!(f.on_syn(Nanos::ZERO), Verdict::Drop);
            let changed: Vec<usize> = (0..f.buckets())
                .filter(|&i| f.future_tokens(i) != before[i])
                .collect();
            assert_eq!(changed.len(), 1);
            borrowed_at.push(changed[0]);
        }
        assert_eq!(borrowed_at, vec![1, 2, 3, 4, 5, 7, 11, 19, 35]);
        assert_eq!(f.on_syn(Nanos::ZERO), Verdict::Reject);
    }

    /// λ counts new requests: a period's arrivals less the retransmissions
    /// its bucket expects (tokens borrowed from it plus B[0]).
    #[test]
    fn arrival_rate_excludes_expected_retransmissions() {
        let mut f = Abacus::new(AbacusConfig {
            bucket_size: 0,
            refill_rate: 10.0,
            interval: Nanos::from_secs(1),
            window: Nanos::from_secs(50),
            clients: ClientMix::builtin("windows-9x-nt").unwrap(),
            arrival_smoothing: 1.0,
        })
        .unwrap();
        for _ in 0..4 {
            assert_eq!(
                f.on_syn(Nanos::ZERO),
                Verdict::Drop,
                "borrows from T_1 = 3 s"
            );
        }
        f.advance(Nanos::from_secs(1));
        assert_eq!(
            f.arrival_rate(),
            4.0,
            "nothing was expected in the first period"
        );
        // At t = 3 s the 4 retransmissions come back with 2 new requests.
        for i in 0..6 {
            f.on_syn(Nanos::from_secs(3) + Nanos::from_millis(i));
        }
        f.advance(Nanos::from_secs(4));
        assert_eq!(f.arrival_rate(), 2.0);
    }

    /// No request can borrow beyond T_N, so a window past it is cut there:
    /// S = 21 s and S = 50 s are the same filter for Windows clients
    /// (T = 3, 9, 21 s), and S = 20 s is not.
    #[test]
    fn window_is_cut_at_the_last_retransmission() {
        assert_eq!(paper_filter(0, 2.0, 50).buckets(), 22);
        assert_eq!(paper_filter(0, 2.0, 21).buckets(), 22);
        let verdicts = |window_secs| {
            let mut f = paper_filter(20, 120.0, window_secs);
            (0..200_000u64)
                .map(|i| {
                    // Bursts of 400/s for 2 s in every 10 s over 100/s.
                    let second = i / 150;
                    let burst = second % 10 < 2;
                    let step = if burst { 2_500_000 } else { 10_000_000 };
                    f.on_syn(Nanos(i * step))
                })
                .collect::<Vec<_>>()
        };
        let at_21 = verdicts(21);
        assert_eq!(verdicts(50), at_21);
        assert!(at_21.contains(&Verdict::Drop) && at_21.contains(&Verdict::Reject));
        assert_ne!(verdicts(20), at_21);
    }

    #[test]
    fn same_inputs_same_verdicts() {
        let run = || {
            let mut f = paper_filter(5, 10.0, 50);
            (0..5000u64)
                .map(|i| f.on_syn(Nanos::from_millis(i * 7 % 100_000 + i)))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(), run());
    }
}
