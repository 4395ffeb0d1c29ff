//! A fixed-bucket latency histogram for SYN-to-END times.
//!
//! Written here rather than taken from a crate because Certes needs a
//! histogram that is small, mergeable, cheap to clear, deterministic, and
//! whose CDF can be evaluated at an arbitrary point (to mix shifted copies
//! of it, see [`super::Estimate::percentile`]). Buckets are geometric:
//! 16 per octave from 10 µs to about 5.8 min, so a value is known within
//! 4.4 % (half that at the bucket's geometric middle). Values below the
//! first edge go to bucket 0, above the last to the last bucket.

use crate::Nanos;
use serde::{Deserialize, Serialize};

const FIRST_EDGE_NANOS: f64 = 10_000.0;
const BUCKETS_PER_OCTAVE: f64 = 16.0;
/// Number of buckets: 25 octaves above 10 µs.
pub const BUCKETS: usize = 400;

/// Counts of values in geometric buckets.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "SparseHistogram", into = "SparseHistogram")]
pub struct LatencyHistogram {
    counts: Vec<u64>,
    total: u64,
}

/// Serialized form: only the non-empty buckets, as `[index, count]` pairs.
#[derive(Serialize, Deserialize)]
struct SparseHistogram {
    buckets: Vec<(u16, u64)>,
}

impl From<SparseHistogram> for LatencyHistogram {
    fn from(sparse: SparseHistogram) -> Self {
        let mut h = LatencyHistogram::new();
        for (index, count) in sparse.buckets {
            let index = (index as usize).min(BUCKETS - 1);
            h.counts[index] += count;
            h.total += count;
        }
        h
    }
}

impl From<LatencyHistogram> for SparseHistogram {
    fn from(h: LatencyHistogram) -> Self {
        SparseHistogram {
            buckets: h
                .counts
                .iter()
                .enumerate()
                .filter(|(_, c)| **c > 0)
                .map(|(i, c)| (i as u16, *c))
                .collect(),
        }
    }
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    pub fn new() -> Self {
        LatencyHistogram {
            counts: vec![0; BUCKETS],
            total: 0,
        }
    }

    /// Bucket index of a value.
    pub fn bucket_of(value: Nanos) -> usize {
        let v = value.0 as f64;
        if v < FIRST_EDGE_NANOS {
            return 0;
        }
        let index = ((v / FIRST_EDGE_NANOS).log2() * BUCKETS_PER_OCTAVE).floor() as usize;
        index.min(BUCKETS - 1)
    }

    /// Lower edge of a bucket, in nanoseconds (bucket 0 starts at zero).
    pub fn lower_edge(index: usize) -> f64 {
        if index == 0 {
            0.0
        } else {
            FIRST_EDGE_NANOS * (index as f64 / BUCKETS_PER_OCTAVE).exp2()
        }
    }

    /// Upper edge of a bucket, in nanoseconds.
    pub fn upper_edge(index: usize) -> f64 {
        FIRST_EDGE_NANOS * ((index + 1) as f64 / BUCKETS_PER_OCTAVE).exp2()
    }

    pub fn record(&mut self, value: Nanos) {
        self.record_n(value, 1);
    }

    pub fn record_n(&mut self, value: Nanos, count: u64) {
        self.counts[Self::bucket_of(value)] += count;
        self.total += count;
    }

    pub fn merge(&mut self, other: &LatencyHistogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.total += other.total;
    }

    pub fn clear(&mut self) {
        self.counts.iter_mut().for_each(|c| *c = 0);
        self.total = 0;
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// Fraction of values at or below `x` nanoseconds, linear within a bucket.
    pub fn cdf(&self, x: f64) -> f64 {
        if self.total == 0 || x < 0.0 {
            return 0.0;
        }
        let bucket = Self::bucket_of(Nanos(x.min(u64::MAX as f64) as u64));
        let below: u64 = self.counts[..bucket].iter().sum();
        let (lo, hi) = (Self::lower_edge(bucket), Self::upper_edge(bucket));
        let within = ((x - lo) / (hi - lo)).clamp(0.0, 1.0);
        (below as f64 + within * self.counts[bucket] as f64) / self.total as f64
    }

    /// The q-quantile (0 ≤ q ≤ 1), linear within a bucket.
    pub fn quantile(&self, q: f64) -> Option<Nanos> {
        if self.total == 0 {
            return None;
        }
        let target = q.clamp(0.0, 1.0) * self.total as f64;
        let mut below = 0.0;
        for (index, &count) in self.counts.iter().enumerate() {
            if count == 0 {
                continue;
            }
            let c = count as f64;
            if below + c >= target {
                let (lo, hi) = (Self::lower_edge(index), Self::upper_edge(index));
                let within = ((target - below) / c).clamp(0.0, 1.0);
                return Some(Nanos((lo + within * (hi - lo)).round() as u64));
            }
            below += c;
        }
        None
    }

    /// Non-empty buckets as (lower edge, upper edge, count), in nanoseconds.
    pub fn buckets(&self) -> impl Iterator<Item = (f64, f64, u64)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, c)| **c > 0)
            .map(|(i, c)| (Self::lower_edge(i), Self::upper_edge(i), *c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_within_bucket_resolution() {
        let mut h = LatencyHistogram::new();
        for ms in 1..=1000u64 {
            h.record(Nanos::from_millis(ms));
        }
        for (q, expect_ms) in [(0.5, 500.0), (0.9, 900.0), (0.99, 990.0)] {
            let got = h.quantile(q).unwrap().0 as f64 / 1e6;
            assert!((got / expect_ms - 1.0).abs() < 0.045, "q{q}: {got} ms");
        }
        assert!((h.cdf(500e6) - 0.5).abs() < 0.03);
        assert_eq!(h.cdf(1e15), 1.0);
        assert_eq!(h.cdf(0.0), 0.0);
    }

    #[test]
    fn merge_conserves_counts_and_serde_round_trips() {
        let mut a = LatencyHistogram::new();
        let mut b = LatencyHistogram::new();
        a.record_n(Nanos::from_millis(3), 7);
        b.record(Nanos::from_secs(400));
        b.record(Nanos(5));
        a.merge(&b);
        assert_eq!(a.total(), 9);
        let text = serde_json::to_string(&a).unwrap();
        let back: LatencyHistogram = serde_json::from_str(&text).unwrap();
        assert_eq!(back, a);
    }
}
