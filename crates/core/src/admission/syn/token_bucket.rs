//! Token bucket filter (Abacus paper, Section 3.2).
//!
//! A bucket of at most W tokens, refilled continuously at r_t tokens per
//! second and full at the start. A request takes a token if one is there;
//! otherwise the filter drops it (`TBF`) or rejects it (`TBF w/ Reject`).
//!
//! Tokens are counted in integer nano-tokens so that refill is exact and
//! runs are reproducible bit for bit.

use super::{check, ConstantVerdict, FilterConfigError, FilterSnapshot, SynFilter, Verdict};
use crate::Nanos;

const NANO_PER_TOKEN: u128 = 1_000_000_000;

/// A token bucket: size W, refill rate r_t.
#[derive(Clone, Debug)]
pub struct TokenBucket {
    capacity: u128,
    /// Refill in nano-tokens per second (= r_t · 10⁹).
    refill_per_second: u128,
    level: u128,
    last: Nanos,
    /// Sub-nano-token remainder of refill, carried so none is lost.
    refill_remainder: u128,
}

impl TokenBucket {
    /// A full bucket of `capacity` tokens refilled at `refill_rate` tokens/s.
    pub fn new(capacity: u64, refill_rate: f64) -> Result<TokenBucket, FilterConfigError> {
        check_refill_rate(refill_rate)?;
        let capacity = capacity as u128 * NANO_PER_TOKEN;
        Ok(TokenBucket {
            capacity,
            refill_per_second: (refill_rate * 1e9).round() as u128,
            level: capacity,
            last: Nanos::ZERO,
            refill_remainder: 0,
        })
    }

    /// Adds the tokens refilled between the last call and `now`.
    pub fn refill(&mut self, now: Nanos) {
        if now <= self.last {
            return;
        }
        let elapsed = (now - self.last).0 as u128;
        self.last = now;
        if self.level >= self.capacity {
            self.refill_remainder = 0;
            return;
        }
        let scaled = elapsed * self.refill_per_second + self.refill_remainder;
        let added = scaled / NANO_PER_TOKEN;
        self.refill_remainder = scaled % NANO_PER_TOKEN;
        self.level += added;
        if self.level >= self.capacity {
            // A full bucket discards the overflow, its fraction too, so
            // that refilling in steps ends where one refill would.
            self.level = self.capacity;
            self.refill_remainder = 0;
        }
    }

    /// When the bucket next holds a whole token, seen from `now`: `None`
    /// if it holds one at `now`, `Nanos(u64::MAX)` if it never will (no
    /// refill, or W = 0). Pure: refill is path-independent, so this is the
    /// instant `try_take` would first succeed.
    pub fn next_token_at(&self, now: Nanos) -> Option<Nanos> {
        let mut level = self.level;
        if now > self.last && level < self.capacity {
            let scaled =
                (now - self.last).0 as u128 * self.refill_per_second + self.refill_remainder;
            level = (level + scaled / NANO_PER_TOKEN).min(self.capacity);
        }
        if level >= NANO_PER_TOKEN {
            return None;
        }
        if self.capacity < NANO_PER_TOKEN || self.refill_per_second == 0 {
            return Some(Nanos(u64::MAX));
        }
        // Smallest elapsed e with e·rate + remainder ≥ (1 token − level)·10⁹.
        let wanted = (NANO_PER_TOKEN - self.level) * NANO_PER_TOKEN - self.refill_remainder;
        let elapsed = wanted.div_ceil(self.refill_per_second);
        let at = u128::from(self.last.0) + elapsed;
        Some(Nanos(at.min(u128::from(u64::MAX)) as u64))
    }

    /// Takes one token at `now` if there is one.
    pub fn try_take(&mut self, now: Nanos) -> bool {
        self.refill(now);
        if self.level >= NANO_PER_TOKEN {
            self.level -= NANO_PER_TOKEN;
            true
        } else {
            false
        }
    }

    /// Whole tokens in the bucket (as of the last refill).
    pub fn tokens(&self) -> u64 {
        (self.level / NANO_PER_TOKEN) as u64
    }

    /// W, in tokens.
    pub fn capacity(&self) -> u64 {
        (self.capacity / NANO_PER_TOKEN) as u64
    }

    /// r_t in tokens per second.
    pub fn refill_rate(&self) -> f64 {
        self.refill_per_second as f64 / 1e9
    }

    /// Changes r_t from `now` on: tokens refilled up to `now` come at the
    /// old rate.
    pub fn set_refill_rate(
        &mut self,
        now: Nanos,
        refill_rate: f64,
    ) -> Result<(), FilterConfigError> {
        check_refill_rate(refill_rate)?;
        self.refill(now);
        self.refill_per_second = (refill_rate * 1e9).round() as u128;
        Ok(())
    }

    /// The instant of the last refill.
    pub fn last_refill(&self) -> Nanos {
        self.last
    }
}

pub(crate) fn check_refill_rate(refill_rate: f64) -> Result<(), FilterConfigError> {
    check(
        refill_rate.is_finite() && (0.0..=1e9).contains(&refill_rate),
        "refill rate (tokens/s)",
        "between 0 and 1e9",
        refill_rate,
    )
}

/// What a token bucket filter does with a request that finds no token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EmptyAction {
    Drop,
    Reject,
}

/// `TBF` and `TBF w/ Reject` of Section 6.
#[derive(Clone, Debug)]
pub struct TokenBucketFilter {
    bucket: TokenBucket,
    when_empty: EmptyAction,
}

impl TokenBucketFilter {
    pub fn new(bucket: TokenBucket, when_empty: EmptyAction) -> TokenBucketFilter {
        TokenBucketFilter { bucket, when_empty }
    }

    pub fn bucket(&self) -> &TokenBucket {
        &self.bucket
    }
}

impl SynFilter for TokenBucketFilter {
    fn on_syn(&mut self, now: Nanos) -> Verdict {
        if self.bucket.try_take(now) {
            Verdict::Accept
        } else {
            match self.when_empty {
                EmptyAction::Drop => Verdict::Drop,
                EmptyAction::Reject => Verdict::Reject,
            }
        }
    }

    fn advance(&mut self, now: Nanos) {
        self.bucket.refill(now);
    }

    fn snapshot(&self) -> FilterSnapshot {
        FilterSnapshot {
            tokens: self.bucket.tokens(),
            bucket_size: self.bucket.capacity(),
            refill_rate: self.bucket.refill_rate(),
            ..FilterSnapshot::default()
        }
    }

    fn set_refill_rate(&mut self, refill_rate: f64) -> Result<(), FilterConfigError> {
        let now = self.bucket.last_refill();
        self.bucket.set_refill_rate(now, refill_rate)
    }

    /// Without a token every SYN finds the bucket empty until the next
    /// token: drop (or reject) until then.
    fn constant_until(&self, now: Nanos) -> Option<ConstantVerdict> {
        let until = self.bucket.next_token_at(now)?;
        let verdict = match self.when_empty {
            EmptyAction::Drop => Verdict::Drop,
            EmptyAction::Reject => Verdict::Reject,
        };
        Some(ConstantVerdict { verdict, until })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn full_bucket_then_refill_rate() {
        let mut f = TokenBucketFilter::new(TokenBucket::new(3, 2.0).unwrap(), EmptyAction::Drop);
        let t0 = Nanos::ZERO;
        assert_eq!(f.on_syn(t0), Verdict::Accept);
        assert_eq!(f.on_syn(t0), Verdict::Accept);
        assert_eq!(f.on_syn(t0), Verdict::Accept);
        assert_eq!(f.on_syn(t0), Verdict::Drop);
        // 2 tokens/s: one token after 500 ms, not before.
        assert_eq!(f.on_syn(Nanos::from_millis(499)), Verdict::Drop);
        assert_eq!(f.on_syn(Nanos::from_millis(500)), Verdict::Accept);
        assert_eq!(f.on_syn(Nanos::from_millis(500)), Verdict::Drop);
    }

    #[test]
    fn an_empty_bucket_drops_until_its_next_token() {
        let mut f = TokenBucketFilter::new(TokenBucket::new(3, 2.0).unwrap(), EmptyAction::Drop);
        assert_eq!(f.constant_until(Nanos::ZERO), None, "tokens left");
        for _ in 0..3 {
            f.on_syn(Nanos::ZERO);
        }
        let constant = f.constant_until(Nanos::from_millis(100)).unwrap();
        assert_eq!(constant.verdict, Verdict::Drop);
        assert_eq!(constant.until, Nanos::from_millis(500));
        assert_eq!(f.on_syn(Nanos(499_999_999)), Verdict::Drop);
        assert_eq!(f.on_syn(Nanos::from_millis(500)), Verdict::Accept);
        // No refill: empty for ever.
        let mut never =
            TokenBucketFilter::new(TokenBucket::new(1, 0.0).unwrap(), EmptyAction::Reject);
        never.on_syn(Nanos::ZERO);
        assert_eq!(
            never.constant_until(Nanos::from_secs(9)),
            Some(ConstantVerdict {
                verdict: Verdict::Reject,
                until: Nanos(u64::MAX)
            })
        );
    }

    proptest! {
        /// `next_token_at` is the first instant a token can be taken.
        #[test]
        fn the_next_token_comes_when_announced(
            capacity in 1u64..5,
            rate in 0.1f64..5000.0,
            gaps in proptest::collection::vec(0u64..20_000_000, 1..60),
        ) {
            let mut bucket = TokenBucket::new(capacity, rate).unwrap();
            let mut now = Nanos::ZERO;
            for gap in gaps {
                now += Nanos(gap);
                while bucket.try_take(now) {}
                let next = bucket.next_token_at(now).unwrap();
                prop_assert!(next > now);
                let mut before = bucket.clone();
                prop_assert!(!before.try_take(Nanos(next.0 - 1)), "a token before {}", next);
                let mut at = bucket.clone();
                prop_assert!(at.try_take(next), "no token at {}", next);
            }
        }
    }

    #[test]
    fn reject_variant_rejects_when_empty() {
        let mut f = TokenBucketFilter::new(TokenBucket::new(1, 0.0).unwrap(), EmptyAction::Reject);
        assert_eq!(f.on_syn(Nanos::ZERO), Verdict::Accept);
        assert_eq!(f.on_syn(Nanos::from_secs(100)), Verdict::Reject);
    }

    #[test]
    fn an_idle_period_shows_refilled_tokens_after_advance() {
        let mut f = TokenBucketFilter::new(TokenBucket::new(10, 2.0).unwrap(), EmptyAction::Drop);
        for _ in 0..10 {
            f.on_syn(Nanos::ZERO);
        }
        assert_eq!(f.snapshot().tokens, 0);
        f.advance(Nanos::from_secs(3));
        assert_eq!(f.snapshot().tokens, 6);
        f.advance(Nanos::from_secs(60));
        assert_eq!(f.snapshot().tokens, 10);
    }

    #[test]
    fn refilling_in_steps_ends_where_one_refill_does() {
        // 2.5 tokens/s leaves half a nano-token per odd nanosecond.
        let mut stepped = TokenBucket::new(2, 2.5).unwrap();
        let mut once = stepped.clone();
        assert!(stepped.try_take(Nanos(1)) && once.try_take(Nanos(1)));
        stepped.refill(Nanos(400_000_001));
        stepped.refill(Nanos(900_000_003));
        once.refill(Nanos(900_000_003));
        assert_eq!(stepped.tokens(), once.tokens());
        for t in [1_200_000_001u64, 1_600_000_000, 1_600_000_001] {
            assert_eq!(stepped.try_take(Nanos(t)), once.try_take(Nanos(t)), "{t}");
        }
    }

    #[test]
    fn a_new_refill_rate_applies_from_the_change_on() {
        let mut f = TokenBucketFilter::new(TokenBucket::new(10, 2.0).unwrap(), EmptyAction::Drop);
        for _ in 0..10 {
            assert_eq!(f.on_syn(Nanos::ZERO), Verdict::Accept);
        }
        assert_eq!(f.snapshot().tokens, 0);
        // 1 s at 2/s, then the rate becomes 4/s: 2 + 4 tokens after 2 s.
        assert_eq!(f.on_syn(Nanos::from_secs(1)), Verdict::Accept);
        f.set_refill_rate(4.0).unwrap();
        assert_eq!(f.snapshot().refill_rate, 4.0);
        let accepted = (0..20)
            .filter(|_| f.on_syn(Nanos::from_secs(2)) == Verdict::Accept)
            .count();
        assert_eq!(accepted, 1 + 4);
        assert!(f.set_refill_rate(-1.0).is_err());
    }

    #[test]
    fn bad_rate_is_named() {
        let err = TokenBucket::new(1, f64::NAN).unwrap_err();
        assert!(err.to_string().contains("refill rate"));
        assert!(TokenBucket::new(1, -1.0).is_err());
    }

    proptest! {
        /// Conservation: over any arrival sequence, tokens taken never exceed
        /// W + r_t·T, and when every arrival finds the bucket empty the
        /// deficit is under one token per arrival gap.
        #[test]
        fn tokens_are_conserved(
            capacity in 0u64..50,
            rate in 0.0f64..500.0,
            gaps in proptest::collection::vec(0u64..50_000_000, 1..400),
        ) {
            let mut bucket = TokenBucket::new(capacity, rate).unwrap();
            let mut now = Nanos::ZERO;
            let mut taken = 0u64;
            for gap in gaps {
                now += Nanos(gap);
                if bucket.try_take(now) {
                    taken += 1;
                }
            }
            let supply = capacity as f64 + rate * now.as_secs_f64();
            prop_assert!(taken as f64 <= supply + 1e-6);
            // What was not taken is still in the bucket (up to the cap).
            let left = bucket.tokens() as f64;
            prop_assert!(taken as f64 + left <= supply + 1e-6);
        }
    }
}
