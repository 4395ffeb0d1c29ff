//! The 95 % confidence interval of a mean over repetitions (seeds), by
//! Student's t: half-width t(0.975, n − 1) · s / √n, s the sample standard
//! deviation. The quantiles are tabled (exact to three decimals for up to
//! 30 degrees of freedom; above, the table's value at the next lower
//! tabled degree, which slightly widens the interval) rather than computed,
//! since only this one quantile is needed.

/// t(0.975, df) for df = 1 … 30.
const T975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// t(0.975, df) at 40, 60 and 120 degrees of freedom, and the normal
/// quantile beyond.
const T975_LARGE: [(usize, f64); 3] = [(40, 2.021), (60, 2.000), (120, 1.980)];
const Z975: f64 = 1.960;

/// The 0.975 quantile of Student's t with `df` ≥ 1 degrees of freedom.
pub fn t975(df: usize) -> f64 {
    match df {
        0 => f64::INFINITY,
        1..=30 => T975[df - 1],
        _ if df >= 1000 => Z975,
        _ => T975_LARGE
            .iter()
            .rev()
            .find(|(d, _)| *d <= df)
            .map_or(T975[29], |(_, t)| *t),
    }
}

/// The mean of `values` and the half-width of its 95 % interval; the
/// half-width is `None` with fewer than two values (no spread to measure).
/// Non-finite values are left out.
pub fn mean_ci95(values: &[f64]) -> (f64, Option<f64>) {
    let v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    let n = v.len();
    if n == 0 {
        return (f64::NAN, None);
    }
    let mean = v.iter().sum::<f64>() / n as f64;
    if n < 2 {
        return (mean, None);
    }
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    (mean, Some(t975(n - 1) * (var / n as f64).sqrt()))
}

/// `mean ± half-width` of the 95 % interval over seeds, or the mean alone
/// when there is no interval.
pub fn with_interval(mean: f64, half: Option<f64>, digits: usize) -> String {
    match half {
        Some(h) => format!("{mean:.digits$} ± {h:.digits$}"),
        None => format!("{mean:.digits$}"),
    }
}

/// Whether two intervals, each (mean, half-width), share a point.
pub fn overlap(a: (f64, f64), b: (f64, f64)) -> bool {
    (a.0 - b.0).abs() <= a.1 + b.1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_print_beside_the_mean_and_overlap_when_they_touch() {
        assert_eq!(with_interval(1.234, Some(0.05), 2), "1.23 ± 0.05");
        assert_eq!(with_interval(1.234, None, 1), "1.2");
        assert!(overlap((1.0, 0.5), (2.0, 0.5)));
        assert!(overlap((2.0, 0.5), (1.0, 0.6)));
        assert!(!overlap((1.0, 0.4), (2.0, 0.5)));
        assert!(!overlap((2.0, 0.0), (1.0, 0.0)));
    }

    #[test]
    fn half_width_of_a_known_sample() {
        // n = 5, mean 3, s = √2.5: 2.776 · √(2.5 / 5) = 1.963.
        let (mean, half) = mean_ci95(&[1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(mean, 3.0);
        let half = half.unwrap();
        assert!((half - 2.776 * 0.5f64.sqrt()).abs() < 1e-9, "{half}");
    }

    #[test]
    fn no_interval_without_spread_to_measure() {
        assert_eq!(mean_ci95(&[4.0]), (4.0, None));
        assert!(mean_ci95(&[]).0.is_nan());
        assert_eq!(mean_ci95(&[2.0, 2.0, 2.0]).1, Some(0.0));
    }

    #[test]
    fn quantiles_fall_towards_the_normal_one() {
        assert_eq!(t975(1), 12.706);
        assert_eq!(t975(30), 2.042);
        assert_eq!(t975(45), 2.021);
        assert_eq!(t975(5000), 1.960);
        assert!((1..2000).all(|d| t975(d) >= t975(d + 1)));
    }
}
