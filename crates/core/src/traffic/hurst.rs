//! Hurst parameter estimators, used to check generated self-similar series.
//!
//! * Aggregated variance: the variance of block means of size m falls as
//!   m^(2H−2); H = 1 + slope/2 of log V(m) against log m.
//! * Rescaled range (R/S): E[R/S](n) grows as n^H; H = slope of
//!   log R/S against log n.
//!
//! Block sizes are powers of two, from 1 (R/S: 16) up to a size that still
//! leaves 16 blocks, and slopes are fitted by least squares.

/// Least-squares slope of y against x.
fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx == 0.0 {
        f64::NAN
    } else {
        sxy / sxx
    }
}

fn block_sizes(len: usize, smallest: usize) -> impl Iterator<Item = usize> {
    std::iter::successors(Some(smallest), |m| Some(m * 2)).take_while(move |m| len / m >= 16)
}

/// Aggregated-variance estimate of H; NaN for a series under 64 points.
pub fn aggregated_variance(series: &[f64]) -> f64 {
    let mut points = Vec::new();
    for m in block_sizes(series.len(), 1) {
        let blocks: Vec<f64> = series
            .chunks_exact(m)
            .map(|c| c.iter().sum::<f64>() / m as f64)
            .collect();
        let mean = blocks.iter().sum::<f64>() / blocks.len() as f64;
        let var =
            blocks.iter().map(|b| (b - mean).powi(2)).sum::<f64>() / (blocks.len() - 1) as f64;
        if var > 0.0 {
            points.push(((m as f64).ln(), var.ln()));
        }
    }
    if points.len() < 3 {
        return f64::NAN;
    }
    1.0 + slope(&points) / 2.0
}

/// Rescaled-range (R/S) estimate of H; NaN for a series under 512 points.
pub fn rescaled_range(series: &[f64]) -> f64 {
    let mut points = Vec::new();
    for n in block_sizes(series.len(), 16) {
        let mut sum = 0.0;
        let mut count = 0usize;
        for block in series.chunks_exact(n) {
            let mean = block.iter().sum::<f64>() / n as f64;
            let (mut cum, mut lo, mut hi) = (0.0f64, 0.0f64, 0.0f64);
            for x in block {
                cum += x - mean;
                lo = lo.min(cum);
                hi = hi.max(cum);
            }
            let sd = (block.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
            if sd > 0.0 {
                sum += (hi - lo) / sd;
                count += 1;
            }
        }
        if count > 0 {
            points.push(((n as f64).ln(), (sum / count as f64).ln()));
        }
    }
    if points.len() < 3 {
        return f64::NAN;
    }
    slope(&points)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Independent noise has H = 0.5 (both estimators carry a small
    /// known bias; R/S overestimates at small n).
    #[test]
    fn white_noise_is_one_half() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let series: Vec<f64> = (0..1 << 16).map(|_| rng.gen::<f64>()).collect();
        let av = aggregated_variance(&series);
        assert!((av - 0.5).abs() < 0.03, "aggregated variance {av}");
        let rs = rescaled_range(&series);
        assert!((rs - 0.5).abs() < 0.1, "R/S {rs}");
    }

    #[test]
    fn short_series_give_nan() {
        assert!(aggregated_variance(&[1.0; 10]).is_nan());
        assert!(rescaled_range(&[1.0; 100]).is_nan());
    }
}
