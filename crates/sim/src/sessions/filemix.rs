//! The SpecWeb96 file mix of Section 4 and the session length law.
//!
//! Four classes — 100–900 bytes (35 %), 1–9 KB (50 %), 10–90 KB (14 %),
//! 100–900 KB (1 %) — each of nine files (1 to 9 times the class's base
//! size), equally likely within a class. The mean file is 14,675 bytes; a
//! request's service time is its size over that mean, times the mean
//! service time 1 / capacity (Section 4: "service time … proportional to
//! the requested file size", 1,000 requests per second for the mix).
//!
//! Departure: SpecWeb96 weights the nine files of a class unequally; the
//! paper states only the class shares, and we take the files as equally
//! likely (the class means, and so the mix's mean, are unchanged).
//!
//! Session lengths are "exponentially distributed with mean m" (Section 6);
//! a session is a whole number of requests, so we draw the geometric law on
//! {1, 2, …} with mean m — the discrete exponential — whose length bins
//! (≤ m, (m, 2m], > 2m) are 64/23/13 % for m = 50, the paper's 63/23/14 %.

use rand::Rng;

/// Class shares and base sizes (bytes).
pub const CLASSES: [(f64, u64); 4] = [(0.35, 100), (0.50, 1_000), (0.14, 10_000), (0.01, 100_000)];

/// Mean file size of the mix, bytes: Σ share · 5 · base.
pub fn mean_size() -> f64 {
    CLASSES.iter().map(|(p, b)| p * 5.0 * *b as f64).sum()
}

/// One file size, bytes.
pub fn draw_size<R: Rng>(rng: &mut R) -> u64 {
    let u: f64 = rng.gen();
    let mut acc = 0.0;
    let mut base = CLASSES[CLASSES.len() - 1].1;
    for (p, b) in CLASSES {
        acc += p;
        if u < acc {
            base = b;
            break;
        }
    }
    base * rng.gen_range(1..=9u64)
}

/// A session length: geometric on {1, 2, …} with mean `mean` (≥ 1).
pub fn draw_length<R: Rng>(rng: &mut R, mean: f64) -> u32 {
    if mean <= 1.0 {
        return 1;
    }
    let p = 1.0 / mean;
    // Inversion: 1 + floor(ln U / ln(1 − p)).
    let u: f64 = 1.0 - rng.gen::<f64>(); // (0, 1]
    let extra = (u.ln() / (1.0 - p).ln()).floor();
    (1.0 + extra).min(u32::MAX as f64) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn mix_mean_and_shares() {
        assert!((mean_size() - 14_675.0).abs() < 1e-9);
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let n = 400_000;
        let sizes: Vec<u64> = (0..n).map(|_| draw_size(&mut rng)).collect();
        let mean = sizes.iter().sum::<u64>() as f64 / n as f64;
        assert!((mean / mean_size() - 1.0).abs() < 0.03, "{mean}");
        let big = sizes.iter().filter(|&&s| s >= 100_000).count() as f64 / n as f64;
        assert!((big - 0.01).abs() < 0.002);
        let small = sizes.iter().filter(|&&s| s < 1_000).count() as f64 / n as f64;
        assert!((small - 0.35).abs() < 0.005);
    }

    #[test]
    fn lengths_have_the_mean_and_the_papers_bins() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for m in [5.0, 15.0, 50.0] {
            let n = 200_000;
            let lengths: Vec<u32> = (0..n).map(|_| draw_length(&mut rng, m)).collect();
            let mean = lengths.iter().map(|&l| l as f64).sum::<f64>() / n as f64;
            assert!((mean / m - 1.0).abs() < 0.02, "m {m}: {mean}");
            assert!(lengths.iter().all(|&l| l >= 1));
            if m == 50.0 {
                // Section 6: 63 / 23 / 14 % of the original sessions.
                let share = |f: &dyn Fn(f64) -> bool| {
                    lengths.iter().filter(|&&l| f(l as f64)).count() as f64 / n as f64 * 100.0
                };
                assert!((share(&|l| l <= m) - 63.0).abs() < 2.0);
                assert!((share(&|l| l > m && l <= 2.0 * m) - 23.0).abs() < 1.5);
                assert!((share(&|l| l > 2.0 * m) - 14.0).abs() < 1.5);
            }
        }
    }
}
