//! SURGE web workload (Barford and Crovella, "Generating representative
//! Web workloads for network and server performance evaluation",
//! SIGMETRICS 1998, Table 4 — reference [14] of the proxy thesis):
//!
//! * file sizes: lognormal body (μ = 9.357, σ = 1.318, of ln bytes) and a
//!   Pareto tail (k = 133 000 bytes, α = 1.1) above the body/tail cut at k;
//!   `tail_fraction` of the files come from the tail;
//! * in-line objects per page (embedded references): Pareto (k = 1,
//!   α = 2.43), rounded down;
//! * active off time before each in-line object: Weibull (scale 0.382 s,
//!   shape 1.46);
//! * inactive off time between pages: Pareto (k = 1 s, α = 1.5) — the
//!   thesis's Eq. 3.
//!
//! Departures, all for bounded memory and run time: file sizes are capped
//! at `max_file_bytes`, in-line objects at `max_inline_objects`, inactive
//! off times at `max_inactive_off`. The tail fraction (7 %) is our reading
//! of the SURGE paper's body/tail split; it is a parameter.

use rand::Rng;
use rand_distr::{Distribution, LogNormal, Pareto, Weibull};

use crate::{Nanos, OutOfRange};

/// SURGE's distribution parameters and our caps.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SurgeParams {
    pub body_log_mean: f64,
    pub body_log_std_dev: f64,
    /// Pareto k of the tail, also the body/tail cut, bytes.
    pub tail_min_bytes: f64,
    pub tail_shape: f64,
    /// Probability that a file is drawn from the tail.
    pub tail_fraction: f64,
    pub inline_shape: f64,
    pub active_off_scale_secs: f64,
    pub active_off_shape: f64,
    pub inactive_off_min_secs: f64,
    pub inactive_off_shape: f64,
    pub max_file_bytes: u64,
    pub max_inline_objects: u32,
    pub max_inactive_off: Nanos,
}

impl Default for SurgeParams {
    fn default() -> Self {
        SurgeParams {
            body_log_mean: 9.357,
            body_log_std_dev: 1.318,
            tail_min_bytes: 133_000.0,
            tail_shape: 1.1,
            tail_fraction: 0.07,
            inline_shape: 2.43,
            active_off_scale_secs: 0.382,
            active_off_shape: 1.46,
            inactive_off_min_secs: 1.0,
            inactive_off_shape: 1.5,
            max_file_bytes: 100 << 20,
            max_inline_objects: 64,
            max_inactive_off: Nanos::from_secs(3_600),
        }
    }
}

/// One in-line object of a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InlineObject {
    /// Active off time between the previous object and this request.
    pub active_off: Nanos,
    pub bytes: u64,
}

/// One page: its main document, its in-line objects, and the think time
/// (inactive off) before the next page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page {
    pub main_bytes: u64,
    pub inline_objects: Vec<InlineObject>,
    pub inactive_off: Nanos,
}

impl Page {
    pub fn total_bytes(&self) -> u64 {
        self.inline_objects
            .iter()
            .fold(self.main_bytes, |sum, o| sum.saturating_add(o.bytes))
    }
}

/// Draws SURGE pages from a generator passed in.
#[derive(Clone, Debug)]
pub struct Surge {
    params: SurgeParams,
    body: LogNormal<f64>,
    tail: Pareto<f64>,
    inline: Pareto<f64>,
    active_off: Weibull<f64>,
    inactive_off: Pareto<f64>,
}

/// Attempts at a body draw below the cut before settling on the cut.
const BODY_DRAWS: usize = 64;

impl Surge {
    pub fn new(params: SurgeParams) -> Result<Self, OutOfRange> {
        let positive = |v: f64| v.is_finite() && v > 0.0;
        OutOfRange::check(
            (0.0..=1.0).contains(&params.tail_fraction),
            "tail_fraction",
            "a probability in [0, 1]",
            params.tail_fraction,
        )?;
        for (name, value) in [
            ("body_log_std_dev", params.body_log_std_dev),
            ("tail_min_bytes", params.tail_min_bytes),
            ("tail_shape", params.tail_shape),
            ("inline_shape", params.inline_shape),
            ("active_off_scale_secs", params.active_off_scale_secs),
            ("active_off_shape", params.active_off_shape),
            ("inactive_off_min_secs", params.inactive_off_min_secs),
            ("inactive_off_shape", params.inactive_off_shape),
        ] {
            OutOfRange::check(positive(value), name, "positive", value)?;
        }
        OutOfRange::check(
            params.body_log_mean.is_finite(),
            "body_log_mean",
            "finite",
            params.body_log_mean,
        )?;
        OutOfRange::check(
            params.max_file_bytes > 0,
            "max_file_bytes",
            "positive",
            params.max_file_bytes,
        )?;
        let invalid = |name: &'static str| OutOfRange {
            parameter: name,
            expected: "a valid distribution",
            value: String::from("rejected"),
        };
        Ok(Surge {
            params,
            body: LogNormal::new(params.body_log_mean, params.body_log_std_dev)
                .map_err(|_| invalid("body"))?,
            tail: Pareto::new(params.tail_min_bytes, params.tail_shape)
                .map_err(|_| invalid("tail"))?,
            inline: Pareto::new(1.0, params.inline_shape).map_err(|_| invalid("inline"))?,
            active_off: Weibull::new(params.active_off_scale_secs, params.active_off_shape)
                .map_err(|_| invalid("active off"))?,
            inactive_off: Pareto::new(params.inactive_off_min_secs, params.inactive_off_shape)
                .map_err(|_| invalid("inactive off"))?,
        })
    }

    pub fn params(&self) -> &SurgeParams {
        &self.params
    }

    /// One file size, bytes (at least 1).
    pub fn file_bytes<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        let p = &self.params;
        let bytes = if rng.gen::<f64>() < p.tail_fraction {
            self.tail.sample(rng)
        } else {
            (0..BODY_DRAWS)
                .map(|_| self.body.sample(rng))
                .find(|&b| b < p.tail_min_bytes)
                .unwrap_or(p.tail_min_bytes)
        };
        (bytes.round() as u64).clamp(1, p.max_file_bytes)
    }

    /// Number of in-line objects of one page.
    pub fn inline_count<R: Rng + ?Sized>(&self, rng: &mut R) -> u32 {
        let drawn = self.inline.sample(rng).floor();
        (drawn.min(f64::from(self.params.max_inline_objects))) as u32
    }

    pub fn active_off<R: Rng + ?Sized>(&self, rng: &mut R) -> Nanos {
        Nanos::from_secs_f64(self.active_off.sample(rng))
    }

    pub fn inactive_off<R: Rng + ?Sized>(&self, rng: &mut R) -> Nanos {
        Nanos::from_secs_f64(self.inactive_off.sample(rng)).min(self.params.max_inactive_off)
    }

    /// One page; draws, in order: main size, in-line count, then each
    /// object's active off and size, then the inactive off.
    pub fn page<R: Rng + ?Sized>(&self, rng: &mut R) -> Page {
        let main_bytes = self.file_bytes(rng);
        let count = self.inline_count(rng);
        let inline_objects = (0..count)
            .map(|_| {
                let active_off = self.active_off(rng);
                InlineObject {
                    active_off,
                    bytes: self.file_bytes(rng),
                }
            })
            .collect();
        Page {
            main_bytes,
            inline_objects,
            inactive_off: self.inactive_off(rng),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn the_same_seed_gives_the_same_pages() {
        let surge = Surge::new(SurgeParams::default()).unwrap();
        let draw = |seed| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            (0..50).map(|_| surge.page(&mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
    }

    #[test]
    fn sizes_follow_body_and_tail() {
        let surge = Surge::new(SurgeParams::default()).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let sizes: Vec<u64> = (0..100_000).map(|_| surge.file_bytes(&mut rng)).collect();
        let tail = sizes.iter().filter(|&&s| s >= 133_000).count() as f64 / 1e5;
        // 7 % from the tail, plus the body draws that settle on the cut.
        assert!((0.065..0.08).contains(&tail), "{tail}");
        // The body's median is e^9.357 = 11 582 bytes; truncation at the
        // cut lowers it slightly and the tail raises the overall median.
        let mut sorted = sizes.clone();
        sorted.sort_unstable();
        let median = sorted[sorted.len() / 2] as f64;
        assert!((10_000.0..15_000.0).contains(&median), "{median}");
        assert!(sizes.iter().all(|&s| (1..=100 << 20).contains(&s)));
    }

    #[test]
    fn off_times_and_inline_counts_have_surge_means() {
        let surge = Surge::new(SurgeParams::default()).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let n = 100_000;
        // Weibull mean = 0.382·Γ(1 + 1/1.46) = 0.382·0.9055 = 0.3459 s
        let active: f64 = (0..n)
            .map(|_| surge.active_off(&mut rng).as_secs_f64())
            .sum::<f64>()
            / n as f64;
        assert!((active - 0.3459).abs() < 0.01, "{active}");
        // P(inactive off > 4 s) = (1/4)^1.5 = 0.125
        let long = (0..n)
            .filter(|_| surge.inactive_off(&mut rng) > Nanos::from_secs(4))
            .count() as f64
            / n as f64;
        assert!((long - 0.125).abs() < 0.01, "{long}");
        // P(count ≥ 2) = P(X ≥ 2) = 2^−2.43 = 0.1856
        let two = (0..n).filter(|_| surge.inline_count(&mut rng) >= 2).count() as f64 / n as f64;
        assert!((two - 0.1856).abs() < 0.01, "{two}");
    }

    #[test]
    fn rejects_bad_parameters() {
        let params = SurgeParams {
            tail_fraction: 1.5,
            ..SurgeParams::default()
        };
        assert!(Surge::new(params).is_err());
        let params = SurgeParams {
            tail_shape: 0.0,
            ..SurgeParams::default()
        };
        assert!(Surge::new(params).is_err());
    }
}
