//! The client-to-server path of the Abacus paper's Section 6: no
//! bottleneck, a fixed one-way delay, and jitter uniform over ±5 ms
//! (Section 3.1, Eq. 2).
//!
//! Eq. 2 centres jitter on zero; a delay cannot be negative, so the path
//! has a base delay (default 5 ms, equal to the jitter half-width) around
//! which the jitter is spread. Delays are excluded from the metrics as in
//! the paper: connection-establishment delay counts from the first SYN's
//! arrival at the server.

use vantage_core::Nanos;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Network {
    /// Mean one-way delay from client to server.
    pub base_delay: Nanos,
    /// Half-width of the uniform jitter (Eq. 2: 5 ms).
    pub jitter: Nanos,
}

impl Network {
    /// One-way delay for a uniform draw in [0, 1).
    pub fn one_way_delay(&self, uniform: f64) -> Nanos {
        let offset = (2.0 * uniform - 1.0) * self.jitter.0 as f64;
        let delay = self.base_delay.0 as f64 + offset;
        Nanos(delay.max(0.0).round() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eq2_uniform_ten_millisecond_window() {
        let n = Network {
            base_delay: Nanos::from_millis(5),
            jitter: Nanos::from_millis(5),
        };
        assert_eq!(n.one_way_delay(0.0), Nanos::ZERO);
        assert_eq!(n.one_way_delay(0.5), Nanos::from_millis(5));
        assert_eq!(n.one_way_delay(1.0), Nanos::from_millis(10));
    }
}
