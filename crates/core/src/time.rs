//! Time as integer nanoseconds: one type for instants and durations.
//!
//! State machines never hold floating-point seconds; conversions from and
//! to `f64` seconds exist only at the edges (configuration, reports).

use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// An instant or a duration, in nanoseconds. Instants count from an
/// arbitrary origin chosen by the driver (zero in the simulator).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(transparent)]
pub struct Nanos(pub u64);

impl Nanos {
    pub const ZERO: Nanos = Nanos(0);
    pub const MAX: Nanos = Nanos(u64::MAX);

    pub const fn from_secs(secs: u64) -> Nanos {
        Nanos(secs * 1_000_000_000)
    }

    pub const fn from_millis(millis: u64) -> Nanos {
        Nanos(millis * 1_000_000)
    }

    pub const fn from_micros(micros: u64) -> Nanos {
        Nanos(micros * 1_000)
    }

    /// Converts seconds given as a float (configuration input), rounding
    /// to the nearest nanosecond. Negative and non-finite values saturate
    /// to zero and `MAX`; callers validate ranges before converting.
    pub fn from_secs_f64(secs: f64) -> Nanos {
        if secs.is_nan() || secs <= 0.0 {
            Nanos::ZERO
        } else if secs >= u64::MAX as f64 / 1e9 {
            Nanos::MAX
        } else {
            Nanos((secs * 1e9).round() as u64)
        }
    }

    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }

    /// Seconds, whole seconds and fraction converted apart: the f64
    /// nearest the decimal value even past 2^53 ns (UNIX times), where
    /// [`as_secs_f64`](Self::as_secs_f64) is off by up to 128 ns
    /// (1764000000.25 s would print as 1764000000.2499998).
    pub fn as_secs_f64_exact(self) -> f64 {
        (self.0 / 1_000_000_000) as f64 + (self.0 % 1_000_000_000) as f64 / 1e9
    }

    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Whole milliseconds, rounded down.
    pub const fn as_millis(self) -> u64 {
        self.0 / 1_000_000
    }

    pub const fn saturating_mul(self, factor: u64) -> Nanos {
        Nanos(self.0.saturating_mul(factor))
    }

    pub const fn saturating_sub(self, other: Nanos) -> Nanos {
        Nanos(self.0.saturating_sub(other.0))
    }

    pub const fn saturating_add(self, other: Nanos) -> Nanos {
        Nanos(self.0.saturating_add(other.0))
    }
}

impl Add for Nanos {
    type Output = Nanos;
    fn add(self, rhs: Nanos) -> Nanos {
        Nanos(self.0.saturating_add(rhs.0))
    }
}

impl AddAssign for Nanos {
    fn add_assign(&mut self, rhs: Nanos) {
        *self = *self + rhs;
    }
}

impl Sub for Nanos {
    type Output = Nanos;
    /// Saturating: an earlier instant minus a later one is zero.
    fn sub(self, rhs: Nanos) -> Nanos {
        self.saturating_sub(rhs)
    }
}

impl fmt::Display for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3} s", self.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_times_convert_to_the_nearest_seconds() {
        let t = Nanos(1_764_000_000_250_000_000);
        assert_eq!(t.as_secs_f64_exact(), 1_764_000_000.25);
        assert_ne!(t.as_secs_f64(), 1_764_000_000.25);
        assert_eq!(
            Nanos(1_795_641_025_100_000_000)
                .as_secs_f64_exact()
                .to_string(),
            "1795641025.1"
        );
        assert_eq!(Nanos::from_millis(50).as_secs_f64_exact(), 0.05);
    }

    #[test]
    fn conversions_round_trip() {
        assert_eq!(Nanos::from_secs(3), Nanos(3_000_000_000));
        assert_eq!(Nanos::from_secs_f64(3.4), Nanos(3_400_000_000));
        assert_eq!(Nanos::from_millis(50).as_secs_f64(), 0.05);
        assert_eq!(Nanos::from_secs_f64(-1.0), Nanos::ZERO);
        assert_eq!(Nanos::from_secs_f64(f64::NAN), Nanos::ZERO);
        assert_eq!(Nanos::from_secs_f64(f64::INFINITY), Nanos::MAX);
    }

    #[test]
    fn arithmetic_saturates() {
        assert_eq!(Nanos(5) - Nanos(7), Nanos::ZERO);
        assert_eq!(Nanos::MAX + Nanos(1), Nanos::MAX);
    }
}
