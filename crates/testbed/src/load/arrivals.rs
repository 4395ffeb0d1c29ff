//! Open-loop arrival schedules: when each connection of a load run starts.
//!
//! The load generator is open-loop: a connection starts at its scheduled
//! time whether or not earlier ones have finished, as the clients of the
//! papers' testbeds did (Certes drove Apache with WebStone clients switching
//! between *on* and *sleep* states; the Abacus paper's Section 6 drives its
//! filters with self-similar MWM arrivals). A closed-loop generator would
//! slow down exactly when the server is overloaded and hide the SYN drops the
//! testbed exists to measure.
//!
//! A schedule is a sorted list of offsets ([`Nanos`]) from the start of the
//! run, produced from a seeded ChaCha generator: the same configuration and
//! seed give the same schedule, bit for bit. Three patterns:
//!
//! * `constant` — `rate` connections per second, evenly spaced (`i / rate`),
//!   or with exponential gaps (a Poisson process) when `poisson = true`;
//! * `on-off` — `rate` during `on_s` seconds, nothing during `off_s`
//!   seconds, repeated (Certes's on/sleep generator);
//! * `mwm` — one-second points of the Multifractal Wavelet Model, drawn by
//!   [`vantage_core::traffic::arrivals::mwm_first_syns`], the function the
//!   simulator's workload uses.
//!
//! Every schedule is bounded by `duration_s` and by the hard cap
//! `max_connections`: a configuration whose expected count exceeds the cap is
//! refused before anything is generated, and a random schedule that happens
//! to exceed it is refused too, so a typo in a rate cannot open millions of
//! sockets.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp};
use serde::{Deserialize, Serialize};
use vantage_core::traffic::arrivals::{self, ArrivalsError};
use vantage_core::traffic::mwm::{MwmError, MwmParams};
use vantage_core::{Nanos, OutOfRange};

/// Largest accepted `duration_s`: one day.
pub const MAX_DURATION_S: f64 = 86_400.0;
/// Largest accepted `rate` (connections per second) and MWM `mean`.
pub const MAX_RATE: f64 = 1_000_000.0;
/// Largest accepted `max_connections`.
pub const MAX_CONNECTIONS_LIMIT: u64 = 10_000_000;

/// The shape of the arrival process (TOML table `arrivals.pattern`, tagged
/// by `kind`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum ArrivalPattern {
    /// `rate` connections per second for the whole run.
    Constant {
        /// Connections per second, in (0, 1e6].
        rate: f64,
        /// Exponential gaps (Poisson arrivals) instead of even spacing.
        #[serde(default)]
        poisson: bool,
    },
    /// `rate` connections per second for `on_s` seconds, then none for
    /// `off_s` seconds, repeated from the start of the run.
    OnOff {
        /// Connections per second while on, in (0, 1e6].
        rate: f64,
        /// Length of an on period, seconds, > 0.
        on_s: f64,
        /// Length of an off period, seconds, ≥ 0.
        off_s: f64,
        /// Exponential gaps within on periods instead of even spacing.
        #[serde(default)]
        poisson: bool,
    },
    /// Self-similar arrivals (Abacus paper, Section 6): one MWM point per
    /// second, each point the number of connections in that second.
    Mwm {
        /// μ: mean connections per second.
        mean: f64,
        /// σ: standard deviation of the per-second counts.
        std_dev: f64,
        /// H: Hurst parameter, in [0.5, 1).
        hurst: f64,
        /// J: number of wavelet scales; one series has 2^J seconds.
        scales: u32,
    },
}

/// When connections start (TOML table `arrivals`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArrivalConfig {
    /// Length of the arrival period, seconds, in (0, 86400].
    pub duration_s: f64,
    /// Hard cap on the number of connections; a schedule above it is an
    /// error, never silently truncated. In [1, 1e7]; default 100000.
    #[serde(default = "default_max_connections")]
    pub max_connections: u64,
    /// The arrival process.
    pub pattern: ArrivalPattern,
}

fn default_max_connections() -> u64 {
    100_000
}

impl Default for ArrivalConfig {
    /// Ten connections per second, evenly spaced, for ten seconds.
    fn default() -> Self {
        ArrivalConfig {
            duration_s: 10.0,
            max_connections: default_max_connections(),
            pattern: ArrivalPattern::Constant {
                rate: 10.0,
                poisson: false,
            },
        }
    }
}

/// Why an arrival configuration cannot be used; names the TOML key.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ArrivalError {
    #[error("{key} must be {allowed}, got {value}")]
    OutOfRange {
        key: &'static str,
        allowed: &'static str,
        value: f64,
    },
    #[error("arrivals.pattern (kind = \"mwm\"): {0}")]
    Mwm(MwmError),
    #[error(
        "the arrivals would start {count} connections, more than \
         arrivals.max_connections = {max_connections}; raise max_connections \
         (at most {MAX_CONNECTIONS_LIMIT}) or lower the rate or duration"
    )]
    TooManyConnections { count: u64, max_connections: u64 },
}

fn check(
    ok: bool,
    key: &'static str,
    allowed: &'static str,
    value: f64,
) -> Result<(), ArrivalError> {
    if ok {
        Ok(())
    } else {
        Err(ArrivalError::OutOfRange {
            key,
            allowed,
            value,
        })
    }
}

fn check_rate(rate: f64) -> Result<(), ArrivalError> {
    check(
        rate.is_finite() && rate > 0.0 && rate <= MAX_RATE,
        "arrivals.pattern.rate",
        "in (0, 1e6] connections per second",
        rate,
    )
}

impl ArrivalPattern {
    fn validate(&self) -> Result<(), ArrivalError> {
        match self {
            ArrivalPattern::Constant { rate, .. } => check_rate(*rate),
            ArrivalPattern::OnOff {
                rate, on_s, off_s, ..
            } => {
                check_rate(*rate)?;
                check(
                    on_s.is_finite() && *on_s > 0.0 && *on_s <= MAX_DURATION_S,
                    "arrivals.pattern.on_s",
                    "in (0, 86400] seconds",
                    *on_s,
                )?;
                check(
                    off_s.is_finite() && *off_s >= 0.0 && *off_s <= MAX_DURATION_S,
                    "arrivals.pattern.off_s",
                    "in [0, 86400] seconds",
                    *off_s,
                )
            }
            &ArrivalPattern::Mwm {
                mean,
                std_dev,
                hurst,
                scales,
            } => {
                check(
                    mean.is_finite() && mean > 0.0 && mean <= MAX_RATE,
                    "arrivals.pattern.mean",
                    "in (0, 1e6] connections per second",
                    mean,
                )?;
                let params = MwmParams {
                    mean,
                    std_dev,
                    hurst,
                    scales,
                };
                params.validate().map_err(mwm_error)
            }
        }
    }
}

/// Names the TOML key of an out-of-range MWM parameter.
fn mwm_error(error: MwmError) -> ArrivalError {
    match error {
        MwmError::OutOfRange(OutOfRange {
            parameter,
            expected,
            value,
        }) => ArrivalError::OutOfRange {
            key: match parameter {
                "mean" => "arrivals.pattern.mean",
                "standard deviation" => "arrivals.pattern.std_dev",
                "Hurst parameter" => "arrivals.pattern.hurst",
                "number of scales" => "arrivals.pattern.scales",
                _ => "arrivals.pattern",
            },
            allowed: expected,
            // The MWM check formats an f64, which reads back exactly.
            value: value.parse().unwrap_or(f64::NAN),
        },
        other => ArrivalError::Mwm(other),
    }
}

impl ArrivalConfig {
    /// Checks every key's range and that the expected number of connections
    /// fits under `max_connections`.
    pub fn validate(&self) -> Result<(), ArrivalError> {
        check(
            self.duration_s.is_finite()
                && self.duration_s > 0.0
                && self.duration_s <= MAX_DURATION_S,
            "arrivals.duration_s",
            "in (0, 86400] seconds",
            self.duration_s,
        )?;
        check(
            (1..=MAX_CONNECTIONS_LIMIT).contains(&self.max_connections),
            "arrivals.max_connections",
            "in [1, 10000000]",
            self.max_connections as f64,
        )?;
        self.pattern.validate()?;
        let expected = self.expected_connections();
        if expected > self.max_connections as f64 {
            return Err(ArrivalError::TooManyConnections {
                count: expected.ceil() as u64,
                max_connections: self.max_connections,
            });
        }
        Ok(())
    }

    /// Length of the arrival period.
    pub fn duration(&self) -> Nanos {
        Nanos::from_secs_f64(self.duration_s)
    }

    /// Expected number of connections over `duration_s` (exact for evenly
    /// spaced patterns up to rounding; the mean for random ones).
    pub fn expected_connections(&self) -> f64 {
        match self.pattern {
            ArrivalPattern::Constant { rate, .. } => rate * self.duration_s,
            ArrivalPattern::OnOff {
                rate, on_s, off_s, ..
            } => {
                let cycle = on_s + off_s;
                let whole = (self.duration_s / cycle).floor();
                let rest = (self.duration_s - whole * cycle).min(on_s);
                rate * (whole * on_s + rest)
            }
            ArrivalPattern::Mwm { mean, .. } => mean * self.duration_s.ceil(),
        }
    }

    /// The start offsets of every connection, sorted, all below
    /// `duration_s`. The same configuration and seed give the same list.
    pub fn schedule(&self, seed: u64) -> Result<Vec<Nanos>, ArrivalError> {
        self.validate()?;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let horizon = self.duration();
        let mut times = Vec::with_capacity(self.expected_connections().ceil() as usize);
        let cap = self.max_connections;
        match &self.pattern {
            ArrivalPattern::Constant { rate, poisson } => {
                push_period(
                    &mut times,
                    Nanos::ZERO,
                    horizon,
                    *rate,
                    *poisson,
                    &mut rng,
                    cap,
                )?;
            }
            ArrivalPattern::OnOff {
                rate,
                on_s,
                off_s,
                poisson,
            } => {
                let on = Nanos::from_secs_f64(*on_s);
                let cycle = Nanos::from_secs_f64(on_s + off_s);
                let mut period_start = Nanos::ZERO;
                // Bounded: on_s > 0 so cycle > 0, and the horizon is finite.
                while period_start < horizon {
                    let period_end = (period_start + on).min(horizon);
                    push_period(
                        &mut times,
                        period_start,
                        period_end,
                        *rate,
                        *poisson,
                        &mut rng,
                        cap,
                    )?;
                    period_start += cycle;
                }
            }
            &ArrivalPattern::Mwm {
                mean,
                std_dev,
                hurst,
                scales,
            } => {
                let params = MwmParams {
                    mean,
                    std_dev,
                    hurst,
                    scales,
                };
                times =
                    arrivals::mwm_first_syns(&params, Nanos::from_secs(1), horizon, cap, &mut rng)
                        .map_err(|e| match e {
                            ArrivalsError::TooMany { count } => too_many(count, cap),
                            ArrivalsError::Mwm(e) => mwm_error(e),
                            // The point is one second.
                            ArrivalsError::ZeroPoint => ArrivalError::OutOfRange {
                                key: "arrivals.pattern",
                                allowed: "a positive point length",
                                value: 0.0,
                            },
                        })?;
            }
        }
        Ok(times)
    }
}

fn too_many(count: u64, max_connections: u64) -> ArrivalError {
    ArrivalError::TooManyConnections {
        count,
        max_connections,
    }
}

/// Appends arrivals at `rate` per second in [from, to): evenly spaced from
/// `from`, or with exponential gaps.
fn push_period(
    times: &mut Vec<Nanos>,
    from: Nanos,
    to: Nanos,
    rate: f64,
    poisson: bool,
    rng: &mut ChaCha8Rng,
    cap: u64,
) -> Result<(), ArrivalError> {
    if poisson {
        let gaps = Exp::new(rate).map_err(|_| ArrivalError::OutOfRange {
            key: "arrivals.pattern.rate",
            allowed: "in (0, 1e6] connections per second",
            value: rate,
        })?;
        let mut offset = 0.0;
        loop {
            offset += gaps.sample(rng);
            let at = from + Nanos::from_secs_f64(offset);
            if at >= to {
                return Ok(());
            }
            times.push(at);
            if times.len() as u64 > cap {
                return Err(too_many(times.len() as u64, cap));
            }
        }
    } else {
        let spacing_ns = 1e9 / rate;
        for index in 0u64.. {
            let at = from + Nanos((index as f64 * spacing_ns).round() as u64);
            if at >= to {
                return Ok(());
            }
            times.push(at);
            if times.len() as u64 > cap {
                return Err(too_many(times.len() as u64, cap));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn constant(rate: f64, duration_s: f64) -> ArrivalConfig {
        ArrivalConfig {
            duration_s,
            max_connections: 1_000_000,
            pattern: ArrivalPattern::Constant {
                rate,
                poisson: false,
            },
        }
    }

    #[test]
    fn constant_rate_is_evenly_spaced() {
        let times = constant(4.0, 1.0).schedule(0).unwrap();
        assert_eq!(
            times,
            vec![
                Nanos(0),
                Nanos::from_millis(250),
                Nanos::from_millis(500),
                Nanos::from_millis(750)
            ]
        );
    }

    #[test]
    fn on_off_skips_off_periods() {
        let config = ArrivalConfig {
            duration_s: 5.0,
            max_connections: 1000,
            pattern: ArrivalPattern::OnOff {
                rate: 10.0,
                on_s: 1.0,
                off_s: 1.0,
                poisson: false,
            },
        };
        let times = config.schedule(0).unwrap();
        assert_eq!(times.len(), 30);
        assert_eq!(config.expected_connections(), 30.0);
        for t in &times {
            let second = t.as_nanos() / 1_000_000_000;
            assert!(second % 2 == 0, "arrival at {t} in an off period");
        }
    }

    #[test]
    fn poisson_keeps_its_rate() {
        let config = ArrivalConfig {
            duration_s: 100.0,
            max_connections: 100_000,
            pattern: ArrivalPattern::Constant {
                rate: 200.0,
                poisson: true,
            },
        };
        let times = config.schedule(9).unwrap();
        let rate = times.len() as f64 / 100.0;
        assert!((rate - 200.0).abs() < 6.0, "rate {rate}");
        assert!(times.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn errors_name_the_key() {
        let err = constant(-1.0, 1.0).validate().unwrap_err();
        assert!(err.to_string().contains("arrivals.pattern.rate"), "{err}");
        let err = constant(1.0, f64::NAN).validate().unwrap_err();
        assert!(err.to_string().contains("arrivals.duration_s"), "{err}");
        let mwm = ArrivalConfig {
            duration_s: 10.0,
            max_connections: 1000,
            pattern: ArrivalPattern::Mwm {
                mean: 10.0,
                std_dev: 3.0,
                hurst: 1.5,
                scales: 4,
            },
        };
        let err = mwm.validate().unwrap_err();
        assert!(
            err.to_string()
                .starts_with("arrivals.pattern.hurst must be in [0.5, 1)"),
            "{err}"
        );
        let mut big = constant(1000.0, 60.0);
        big.max_connections = 1000;
        let err = big.schedule(0).unwrap_err();
        assert!(err.to_string().contains("max_connections"), "{err}");
    }

    #[test]
    fn toml_round_trip_and_unknown_keys() {
        let text =
            "duration_s = 2.0\n[pattern]\nkind = \"on-off\"\nrate = 5\non_s = 0.5\noff_s = 0.5\n";
        let config: ArrivalConfig = toml::from_str(text).unwrap();
        assert_eq!(config.max_connections, 100_000);
        assert!(matches!(config.pattern, ArrivalPattern::OnOff { .. }));
        let bad = "duration_s = 2.0\n[pattern]\nkind = \"constant\"\nrate = 5\nrat = 3\n";
        assert!(toml::from_str::<ArrivalConfig>(bad).is_err());
    }
}
