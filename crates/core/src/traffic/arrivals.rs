//! Arrival times from a rate series (Abacus paper, Section 6): each point of
//! an MWM series is the number of new requests in one point's length (the
//! paper: one second), rounded at random to a whole count and spread
//! uniformly over that point. A horizon longer than one series uses further
//! independent series.

use rand::Rng;

use super::mwm::{self, MwmError, MwmParams};
use crate::Nanos;

/// Why no arrival times could be drawn.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ArrivalsError {
    #[error(transparent)]
    Mwm(#[from] MwmError),
    #[error("the length of one point must be positive")]
    ZeroPoint,
    /// More than the caller's cap; `count` arrivals were drawn so far.
    #[error("{count} arrivals, more than the cap")]
    TooMany { count: u64 },
}

/// First-SYN times of every new request in [0, `horizon`), sorted: MWM
/// series of `params`, one count per `point`. Stops with
/// [`ArrivalsError::TooMany`] once more than `max_arrivals` are drawn.
/// The random draws are, in order: one series, its rounding, then each
/// point's instants; the same generator state gives the same times.
pub fn mwm_first_syns<R: Rng + ?Sized>(
    params: &MwmParams,
    point: Nanos,
    horizon: Nanos,
    max_arrivals: u64,
    rng: &mut R,
) -> Result<Vec<Nanos>, ArrivalsError> {
    if point == Nanos::ZERO {
        return Err(ArrivalsError::ZeroPoint);
    }
    let points = horizon.0.div_ceil(point.0) as usize;
    let mut counts = Vec::with_capacity(points);
    while counts.len() < points {
        let series = params.generate(rng)?;
        counts.extend(mwm::to_counts(&series, rng));
    }
    counts.truncate(points);
    let mut times = Vec::new();
    for (index, &count) in counts.iter().enumerate() {
        let start = index as u64 * point.0;
        let mut in_point: Vec<Nanos> = (0..count)
            .map(|_| Nanos(start + rng.gen_range(0..point.0)))
            .filter(|t| *t < horizon)
            .collect();
        in_point.sort_unstable();
        times.extend(in_point);
        if times.len() as u64 > max_arrivals {
            return Err(ArrivalsError::TooMany {
                count: times.len() as u64,
            });
        }
    }
    Ok(times)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn params() -> MwmParams {
        MwmParams {
            mean: 100.0,
            std_dev: 30.0,
            hurst: 0.8,
            scales: 10,
        }
    }

    #[test]
    fn arrivals_are_sorted_below_the_horizon_at_the_mean_rate() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let horizon = Nanos::from_secs(600);
        let times =
            mwm_first_syns(&params(), Nanos::from_secs(1), horizon, u64::MAX, &mut rng).unwrap();
        assert!(times.windows(2).all(|p| p[0] <= p[1]));
        assert!(times.iter().all(|t| *t < horizon));
        let rate = times.len() as f64 / 600.0;
        assert!((rate - 100.0).abs() < 15.0, "rate {rate}");
    }

    #[test]
    fn the_cap_stops_the_draw() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let e = mwm_first_syns(
            &params(),
            Nanos::from_secs(1),
            Nanos::from_secs(600),
            50,
            &mut rng,
        )
        .unwrap_err();
        assert!(matches!(e, ArrivalsError::TooMany { count } if count > 50));
    }
}
