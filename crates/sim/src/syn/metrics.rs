//! The metrics of the Abacus paper's Section 6, over every request of a run
//! (or of several runs pooled, as the paper pools its 30 repetitions):
//!
//! * throughput — % of requests that eventually get in;
//! * connection-establishment delay — time from the first SYN's arrival
//!   until the request is accepted, rejected or times out, averaged over all
//!   requests, with its 50th, 95th and 99th percentiles;
//! * average cost — delay·h, plus r for each rejected or timed-out request;
//! * mean number of retransmissions before the request is accepted,
//!   rejected or times out; % of requests that time out.

use serde::Serialize;
use vantage_core::Nanos;

/// How a connection request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Accepted,
    Rejected,
    TimedOut,
}

/// Running totals over requests.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    pub requests: u64,
    pub accepted: u64,
    pub rejected: u64,
    pub timed_out: u64,
    pub retransmissions: u64,
    delay_sum_secs: f64,
    delays_secs: Vec<f32>,
}

/// The Section 6 metrics of a tally.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub requests: u64,
    pub throughput_pct: f64,
    pub delay_mean_s: f64,
    pub delay_p50_s: f64,
    pub delay_p95_s: f64,
    pub delay_p99_s: f64,
    pub cost_mean: f64,
    pub timeouts_pct: f64,
    pub rejects_pct: f64,
    pub retransmissions_mean: f64,
}

impl Tally {
    pub fn record(&mut self, outcome: Outcome, delay: Nanos, retransmissions: u32) {
        self.requests += 1;
        match outcome {
            Outcome::Accepted => self.accepted += 1,
            Outcome::Rejected => self.rejected += 1,
            Outcome::TimedOut => self.timed_out += 1,
        }
        self.retransmissions += u64::from(retransmissions);
        let secs = delay.as_secs_f64();
        self.delay_sum_secs += secs;
        self.delays_secs.push(secs as f32);
    }

    /// Adds another tally's requests (merge in a fixed order for
    /// bit-for-bit reproducible sums).
    pub fn merge(&mut self, other: &Tally) {
        self.requests += other.requests;
        self.accepted += other.accepted;
        self.rejected += other.rejected;
        self.timed_out += other.timed_out;
        self.retransmissions += other.retransmissions;
        self.delay_sum_secs += other.delay_sum_secs;
        self.delays_secs.extend_from_slice(&other.delays_secs);
    }

    /// Section 6 metrics with delay cost `h` per second and reject cost `r`.
    pub fn summary(&self, delay_cost: f64, reject_cost: f64) -> Summary {
        let n = self.requests.max(1) as f64;
        let pct = |count: u64| 100.0 * count as f64 / n;
        let delay_mean = self.delay_sum_secs / n;
        let mut sorted = self.delays_secs.clone();
        sorted.sort_unstable_by(f32::total_cmp);
        let quantile = |q: f64| -> f64 {
            if sorted.is_empty() {
                return 0.0;
            }
            // Nearest rank.
            let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
            f64::from(sorted[rank - 1])
        };
        Summary {
            requests: self.requests,
            throughput_pct: pct(self.accepted),
            delay_mean_s: delay_mean,
            delay_p50_s: quantile(0.50),
            delay_p95_s: quantile(0.95),
            delay_p99_s: quantile(0.99),
            cost_mean: delay_cost * delay_mean
                + reject_cost * (self.rejected + self.timed_out) as f64 / n,
            timeouts_pct: pct(self.timed_out),
            rejects_pct: pct(self.rejected),
            retransmissions_mean: self.retransmissions as f64 / n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn section6_cost_counts_reject_and_timeout() {
        let mut t = Tally::default();
        t.record(Outcome::Accepted, Nanos::from_secs(3), 1);
        t.record(Outcome::Rejected, Nanos::ZERO, 0);
        t.record(Outcome::TimedOut, Nanos::from_secs(45), 3);
        t.record(Outcome::Accepted, Nanos::ZERO, 0);
        let s = t.summary(1.0, 75.0);
        assert_eq!(s.throughput_pct, 50.0);
        assert_eq!(s.delay_mean_s, 12.0);
        // (3 + 0 + 45 + 0)/4 + 75·2/4
        assert_eq!(s.cost_mean, 12.0 + 37.5);
        assert_eq!(s.timeouts_pct, 25.0);
        assert_eq!(s.retransmissions_mean, 1.0);
        assert_eq!(s.delay_p50_s, 0.0);
        assert_eq!(s.delay_p99_s, 45.0);
    }

    #[test]
    fn merge_pools_requests() {
        let mut a = Tally::default();
        a.record(Outcome::Accepted, Nanos::from_secs(1), 0);
        let mut b = Tally::default();
        b.record(Outcome::Rejected, Nanos::from_secs(3), 2);
        a.merge(&b);
        let s = a.summary(1.0, 0.0);
        assert_eq!(s.requests, 2);
        assert_eq!(s.delay_mean_s, 2.0);
        assert_eq!(s.rejects_pct, 50.0);
    }
}
