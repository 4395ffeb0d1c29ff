//! Deriving the seed of one run from a scenario's seed: every simulator and
//! study keys its runs (population, sweep value, repetition) with this one
//! function, so a run's seed depends only on what it is, not on the order
//! or thread it runs in.

/// A new seed from `seed` and a key `x` (a boost-style hash combine
/// followed by a SplitMix64 finaliser round).
pub fn mix_seed(mut seed: u64, x: u64) -> u64 {
    seed ^= x
        .wrapping_add(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(seed << 6)
        .wrapping_add(seed >> 2);
    seed = seed.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    seed ^ (seed >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_give_distinct_seeds_and_the_same_key_the_same_seed() {
        assert_eq!(mix_seed(7, 1), mix_seed(7, 1));
        assert_ne!(mix_seed(7, 1), mix_seed(7, 2));
        assert_ne!(mix_seed(7, 1), mix_seed(8, 1));
    }
}
