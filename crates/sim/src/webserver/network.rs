//! The path between one client and the server: round-trip time, jitter and
//! random packet loss (Certes paper, Section 5.1 and Table II: a DummyNet
//! WAN emulator with ping RTTs from 0.2 ms to 167 ms and 0 % or 3 % loss).
//!
//! Model:
//! * each client has a fixed base RTT drawn uniformly over
//!   `[rtt_min, min(rtt_max, 2·rtt_avg − rtt_min)]`, so the base RTTs have the
//!   mean `rtt_avg` of Table II's ping column when the range allows it;
//! * every packet's one-way delay is half the client's base RTT plus a jitter
//!   uniform over `[0, jitter]` drawn for that packet (Figure 4: the RTT of a
//!   client varies between its connection attempts);
//! * every packet, in either direction, is lost independently with
//!   probability `loss` (DummyNet's `plr`).
//!
//! The retransmission timeout of an established connection follows RFC 6298
//! as Linux applies it after one clean RTT sample R: SRTT = R, RTTVAR = R/2,
//! RTO = SRTT + max(4·RTTVAR, 200 ms) = R + max(2R, 200 ms), doubled after
//! each timeout and capped at 120 s (`TCP_RTO_MAX`). Both ends use it: the
//! client for its request, the server for its response.

use rand::Rng;
use vantage_core::Nanos;

/// Linux's minimum retransmission timeout (`TCP_RTO_MIN`).
pub const RTO_MIN: Nanos = Nanos::from_millis(200);
/// Linux's maximum retransmission timeout (`TCP_RTO_MAX`).
pub const RTO_MAX: Nanos = Nanos::from_secs(120);

/// Round-trip time, jitter and loss of the clients' paths.
#[derive(Clone, Debug, PartialEq)]
pub struct PathConfig {
    /// Smallest base RTT (Table II, ping min).
    pub rtt_min: Nanos,
    /// Mean base RTT (Table II, ping avg).
    pub rtt_avg: Nanos,
    /// Largest base RTT (Table II, ping max).
    pub rtt_max: Nanos,
    /// Upper bound of the per-packet one-way jitter.
    pub jitter: Nanos,
    /// Probability that any one packet is lost.
    pub loss: f64,
}

impl PathConfig {
    /// A loss-free path with a fixed RTT and no jitter (for tests).
    pub fn fixed(rtt: Nanos) -> PathConfig {
        PathConfig {
            rtt_min: rtt,
            rtt_avg: rtt,
            rtt_max: rtt,
            jitter: Nanos::ZERO,
            loss: 0.0,
        }
    }

    /// Checks the ranges; the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.rtt_min <= self.rtt_avg && self.rtt_avg <= self.rtt_max) {
            return Err(format!(
                "rtt: need min ≤ avg ≤ max, got {} / {} / {}",
                self.rtt_min, self.rtt_avg, self.rtt_max
            ));
        }
        if !(self.loss.is_finite() && (0.0..=0.5).contains(&self.loss)) {
            return Err(format!(
                "loss: must be between 0 and 0.5, got {}",
                self.loss
            ));
        }
        Ok(())
    }

    /// Upper end of the base-RTT range (see the module doc).
    fn base_high(&self) -> Nanos {
        let symmetric = (2 * self.rtt_avg.0).saturating_sub(self.rtt_min.0);
        Nanos(symmetric.min(self.rtt_max.0).max(self.rtt_min.0))
    }

    /// One client's path, for a uniform draw in [0, 1).
    pub fn client_path(&self, uniform: f64) -> ClientPath {
        let low = self.rtt_min.0 as f64;
        let high = self.base_high().0 as f64;
        ClientPath {
            base_rtt: Nanos((low + uniform.clamp(0.0, 1.0) * (high - low)).round() as u64),
            jitter: self.jitter,
            loss: self.loss,
        }
    }
}

/// The path of one client.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClientPath {
    /// The client's base round-trip time.
    pub base_rtt: Nanos,
    jitter: Nanos,
    loss: f64,
}

/// A flight sent until it got through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// When the copy that got through arrived.
    pub arrival: Nanos,
    /// When that copy was sent.
    pub sent: Nanos,
    /// Its one-way delay.
    pub delay: Nanos,
    /// Copies sent, including the one that got through.
    pub transmissions: u32,
}

impl ClientPath {
    /// One packet's one-way delay.
    pub fn one_way<R: Rng + ?Sized>(&self, rng: &mut R) -> Nanos {
        let jitter = if self.jitter == Nanos::ZERO {
            0
        } else {
            rng.gen_range(0..=self.jitter.0)
        };
        Nanos(self.base_rtt.0 / 2 + jitter)
    }

    /// Whether one packet is lost.
    pub fn lost<R: Rng + ?Sized>(&self, rng: &mut R) -> bool {
        self.loss > 0.0 && rng.gen::<f64>() < self.loss
    }

    /// RTO after a clean RTT sample of the base RTT (module doc).
    pub fn rto(&self) -> Nanos {
        self.base_rtt + Nanos((2 * self.base_rtt.0).max(RTO_MIN.0))
    }

    /// RTO after `backoff` consecutive timeouts.
    pub fn rto_backed_off(&self, backoff: u32) -> Nanos {
        let factor = 1u64 << backoff.min(20);
        self.rto().saturating_mul(factor).min(RTO_MAX)
    }

    /// Sends one packet at `send` and retransmits it on each RTO (doubling)
    /// until a copy gets through; returns when and how it arrived.
    pub fn deliver<R: Rng + ?Sized>(&self, send: Nanos, rng: &mut R) -> Delivery {
        let mut at = send;
        let mut backoff = 0;
        loop {
            let lost = self.lost(rng);
            let delay = self.one_way(rng);
            if !lost {
                return Delivery {
                    arrival: at + delay,
                    sent: at,
                    delay,
                    transmissions: backoff + 1,
                };
            }
            at += self.rto_backed_off(backoff);
            backoff += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn base_rtt_spans_min_to_symmetric_high() {
        let p = PathConfig {
            rtt_min: Nanos::from_millis(1),
            rtt_avg: Nanos::from_millis(8),
            rtt_max: Nanos::from_millis(21),
            jitter: Nanos::ZERO,
            loss: 0.0,
        };
        assert_eq!(p.client_path(0.0).base_rtt, Nanos::from_millis(1));
        assert_eq!(p.client_path(0.5).base_rtt, Nanos::from_millis(8));
        assert_eq!(p.client_path(1.0).base_rtt, Nanos::from_millis(15));
        // A skewed range is cut at the maximum.
        let skewed = PathConfig {
            rtt_min: Nanos::from_micros(200),
            rtt_avg: Nanos::from_millis(4),
            rtt_max: Nanos::from_millis(5),
            ..p
        };
        assert_eq!(skewed.client_path(1.0).base_rtt, Nanos::from_millis(5));
    }

    #[test]
    fn rto_is_rtt_plus_max_of_two_rtt_and_200_ms() {
        let lan = PathConfig::fixed(Nanos::from_millis(1)).client_path(0.5);
        assert_eq!(lan.rto(), Nanos::from_millis(201));
        let wan = PathConfig::fixed(Nanos::from_millis(150)).client_path(0.5);
        assert_eq!(wan.rto(), Nanos::from_millis(450));
        assert_eq!(wan.rto_backed_off(2), Nanos::from_millis(1800));
        assert_eq!(wan.rto_backed_off(30), RTO_MAX);
    }

    #[test]
    fn lossy_delivery_waits_whole_rtos() {
        let path = PathConfig {
            loss: 0.5,
            ..PathConfig::fixed(Nanos::from_millis(100))
        }
        .client_path(0.0);
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut retried = 0;
        for _ in 0..200 {
            let d = path.deliver(Nanos::ZERO, &mut rng);
            assert_eq!(d.delay, Nanos::from_millis(50));
            // RTO = 100 + max(200, 200) ms: sent at 0, 300, 900, 2100 ms …
            let n = d.transmissions - 1;
            assert_eq!(d.sent, Nanos::from_millis(300 * ((1 << n) - 1)));
            retried += u32::from(n > 0);
        }
        assert!((70..130).contains(&retried), "{retried}");
    }
}
