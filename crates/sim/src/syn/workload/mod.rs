//! Arrival workloads of the Abacus paper's experiments: when each new
//! connection request sends its first SYN.
//!
//! * [`Workload::Mwm`] — self-similar arrivals from the Multifractal Wavelet
//!   Model (Section 6), drawn by [`arrivals::mwm_first_syns`].
//! * [`Workload::ConstantWithBurst`] — Poisson arrivals at a constant rate
//!   plus one burst at the start (Section 3.2, Figure 5).
//! * [`Workload::Burst`] — one burst of requests evenly spread over an
//!   interval, and nothing else (Section 3.1, Figure 4).

pub use vantage_core::traffic::{hurst, mwm};

use mwm::{MwmError, MwmParams};
use rand::Rng;
use rand_distr::{Distribution, Exp};
use vantage_core::traffic::arrivals::{self, ArrivalsError};
use vantage_core::Nanos;

#[derive(Clone, Debug, PartialEq)]
pub enum Workload {
    Mwm {
        params: MwmParams,
        /// Length of one point of the series (the paper: one second).
        point: Nanos,
    },
    ConstantWithBurst {
        /// New requests per second after (and during) the burst.
        rate: f64,
        /// Requests in the initial burst.
        burst_size: u64,
        /// The burst's requests are spread evenly over this long.
        burst_length: Nanos,
    },
    Burst {
        size: u64,
        spread: Nanos,
    },
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WorkloadError {
    #[error(transparent)]
    Mwm(#[from] MwmError),
    #[error("workload: {0}")]
    Arrivals(ArrivalsError),
    #[error("workload {parameter} must be {expected}, got {value}")]
    OutOfRange {
        parameter: &'static str,
        expected: &'static str,
        value: f64,
    },
}

impl Workload {
    pub fn validate(&self) -> Result<(), WorkloadError> {
        match self {
            Workload::Mwm { params, point } => {
                params.validate()?;
                if *point == Nanos::ZERO {
                    return Err(WorkloadError::OutOfRange {
                        parameter: "point length",
                        expected: "positive",
                        value: 0.0,
                    });
                }
                Ok(())
            }
            Workload::ConstantWithBurst { rate, .. } => {
                if rate.is_finite() && *rate >= 0.0 && *rate <= 1e7 {
                    Ok(())
                } else {
                    Err(WorkloadError::OutOfRange {
                        parameter: "rate",
                        expected: "between 0 and 1e7 per second",
                        value: *rate,
                    })
                }
            }
            Workload::Burst { .. } => Ok(()),
        }
    }

    /// Expected number of new requests before `horizon`.
    pub fn expected_requests(&self, horizon: Nanos) -> f64 {
        match self {
            Workload::Mwm { params, point } => {
                params.mean * horizon.as_secs_f64() / point.as_secs_f64().max(1e-9)
            }
            Workload::ConstantWithBurst {
                rate, burst_size, ..
            } => rate * horizon.as_secs_f64() + *burst_size as f64,
            Workload::Burst { size, .. } => *size as f64,
        }
    }

    /// First-SYN send times of every new request before `horizon`, sorted.
    pub fn first_syns<R: Rng + ?Sized>(
        &self,
        horizon: Nanos,
        rng: &mut R,
    ) -> Result<Vec<Nanos>, WorkloadError> {
        self.validate()?;
        let mut times = Vec::new();
        match self {
            Workload::Mwm { params, point } => {
                times = arrivals::mwm_first_syns(params, *point, horizon, u64::MAX, rng).map_err(
                    |e| match e {
                        ArrivalsError::Mwm(e) => WorkloadError::Mwm(e),
                        other => WorkloadError::Arrivals(other),
                    },
                )?;
            }
            Workload::ConstantWithBurst {
                rate,
                burst_size,
                burst_length,
            } => {
                times.extend(evenly_spread(*burst_size, *burst_length));
                if *rate > 0.0 {
                    let gaps = Exp::new(*rate).map_err(|_| WorkloadError::OutOfRange {
                        parameter: "rate",
                        expected: "positive",
                        value: *rate,
                    })?;
                    let mut t = 0.0;
                    loop {
                        t += gaps.sample(rng);
                        let at = Nanos::from_secs_f64(t);
                        if at >= horizon {
                            break;
                        }
                        times.push(at);
                    }
                }
                times.sort_unstable();
            }
            Workload::Burst { size, spread } => times.extend(evenly_spread(*size, *spread)),
        }
        Ok(times)
    }
}

/// `count` instants evenly spaced over [0, length).
fn evenly_spread(count: u64, length: Nanos) -> impl Iterator<Item = Nanos> {
    (0..count).map(move |i| Nanos((length.0 as u128 * i as u128 / count.max(1) as u128) as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn mwm_arrivals_follow_the_series_per_second() {
        let w = Workload::Mwm {
            params: MwmParams {
                mean: 100.0,
                std_dev: 30.0,
                hurst: 0.8,
                scales: 10,
            },
            point: Nanos::from_secs(1),
        };
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let times = w.first_syns(Nanos::from_secs(600), &mut rng).unwrap();
        assert!(times.windows(2).all(|p| p[0] <= p[1]));
        assert!(*times.last().unwrap() < Nanos::from_secs(600));
        let rate = times.len() as f64 / 600.0;
        // 600 of 1024 points: the mean is exact over 1024, not over 600.
        assert!((rate - 100.0).abs() < 15.0, "rate {rate}");
    }

    #[test]
    fn burst_is_evenly_spread() {
        let w = Workload::Burst {
            size: 100,
            spread: Nanos::from_millis(100),
        };
        let times = w
            .first_syns(Nanos::from_secs(1), &mut ChaCha8Rng::seed_from_u64(0))
            .unwrap();
        assert_eq!(times.len(), 100);
        assert_eq!(times[1], Nanos::from_millis(1));
        assert_eq!(times[99], Nanos::from_millis(99));
    }

    #[test]
    fn constant_rate_has_its_mean() {
        let w = Workload::ConstantWithBurst {
            rate: 100.0,
            burst_size: 50,
            burst_length: Nanos::from_secs(1),
        };
        let times = w
            .first_syns(Nanos::from_secs(100), &mut ChaCha8Rng::seed_from_u64(2))
            .unwrap();
        let n = times.len() as f64 - 50.0;
        assert!((n - 10_000.0).abs() < 400.0, "{n}");
    }
}
