//! A round-based TCP Reno flow (one step per round trip), the transport of
//! the proxy simulator.
//!
//! The model follows the assumptions of Padhye et al. (SIGCOMM '98), so
//! that its send rate can be checked against their formula
//! ([`vantage_core::tcp::throughput`]): the receiver delays ACKs (b = 2),
//! so congestion avoidance adds half a segment per round and slow start
//! multiplies the window by 1.5; each segment is lost with probability p
//! and, once one is lost, the rest of its round is lost too; a loss with at
//! least three segments delivered ahead of it in the round is repaired by
//! fast retransmit (window halved), otherwise by a time-out of T0 doubled
//! for each lost retransmission (at most 64·T0), then slow start from one
//! segment. The window is min(cwnd, window limit), cwnd rounded to the
//! nearest segment, the limit being what both socket buffers allow; cwnd
//! never grows past the limit (as with congestion-window validation). A round lasts one RTT or the time to
//! put the window on the link, whichever is longer.
//!
//! While a loss is repaired the receiver holds the segments that arrived
//! behind the hole until the retransmission fills it: about one window,
//! as Section 3.1.2 of the proxy thesis describes. For this the model
//! takes the loss as independent (the rest of the window arrives), while
//! its rate accounting keeps Padhye's rest-of-round assumption.

use rand::Rng;
use vantage_core::Nanos;

/// One path's properties.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowPath {
    pub rtt: Nanos,
    /// T0: the first retransmission time-out.
    pub rto: Nanos,
    /// p: probability that a segment is lost.
    pub loss: f64,
    pub bandwidth_bits_per_sec: f64,
    pub mss: u32,
}

/// What one round did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Round {
    /// How long the round took, including any time-out.
    pub duration: Nanos,
    /// The window used, segments.
    pub window_segments: u64,
    /// Segments put on the link, retransmissions included.
    pub sent_segments: u64,
    /// Segments lost.
    pub lost_segments: u64,
    /// Whether the round ended in a loss.
    pub loss: bool,
    /// Whether the loss was repaired by a time-out.
    pub timeout: bool,
    /// Segments the receiver held behind a hole during the repair.
    pub out_of_order_segments: u64,
}

/// Congestion state of one flow.
#[derive(Clone, Debug)]
pub struct RenoFlow {
    path: FlowPath,
    cwnd: f64,
    ssthresh: f64,
}

/// Initial window, segments (RFC 2581, the thesis's era).
const INITIAL_WINDOW: f64 = 2.0;
/// Segments acknowledged per ACK (delayed ACKs).
const DELAYED_ACK: f64 = 2.0;
/// The largest time-out multiplier (RFC 6298 back-off, as in Padhye et al.).
const MAX_BACKOFF: u32 = 6;

impl RenoFlow {
    pub fn new(path: FlowPath) -> RenoFlow {
        RenoFlow {
            path,
            cwnd: INITIAL_WINDOW,
            ssthresh: f64::INFINITY,
        }
    }

    pub fn path(&self) -> &FlowPath {
        &self.path
    }

    pub fn cwnd_segments(&self) -> f64 {
        self.cwnd
    }

    /// Changes the path's loss (the same flow on a new estimate).
    pub fn set_loss(&mut self, loss: f64) {
        self.path.loss = loss;
    }

    /// One round with at most `window_limit_segments` in flight (what the
    /// send and receive buffers allow; at least one segment is sent).
    pub fn round<R: Rng + ?Sized>(&mut self, window_limit_segments: u64, rng: &mut R) -> Round {
        self.round_with_data(window_limit_segments, u64::MAX, rng)
    }

    /// One round that sends at most `data_segments` (the data ready to
    /// send; at least one). A round short of data does not grow cwnd.
    pub fn round_with_data<R: Rng + ?Sized>(
        &mut self,
        window_limit_segments: u64,
        data_segments: u64,
        rng: &mut R,
    ) -> Round {
        let limit = window_limit_segments.max(1) as f64;
        self.cwnd = self.cwnd.min(limit).max(1.0);
        let cwnd_window = self.cwnd.round().max(1.0) as u64;
        let window = cwnd_window.min(data_segments.max(1));
        let on_link =
            window as f64 * f64::from(self.path.mss) * 8.0 / self.path.bandwidth_bits_per_sec;
        let mut round = Round {
            duration: self.path.rtt.max(Nanos::from_secs_f64(on_link)),
            window_segments: window,
            sent_segments: window,
            ..Round::default()
        };
        let Some(first_lost) = first_loss(self.path.loss, window, rng) else {
            if window < cwnd_window {
                return round;
            }
            let acks = window as f64 / DELAYED_ACK;
            if self.cwnd < self.ssthresh {
                self.cwnd += acks;
            } else {
                self.cwnd += acks / self.cwnd;
            }
            self.cwnd = self.cwnd.min(limit);
            return round;
        };
        round.loss = true;
        round.lost_segments = window - first_lost;
        round.out_of_order_segments = window - 1;
        self.ssthresh = (window as f64 / 2.0).max(2.0);
        if first_lost >= 3 {
            self.cwnd = self.ssthresh;
            return round;
        }
        round.timeout = true;
        let mut backoff = 0;
        loop {
            round.duration += self.path.rto.saturating_mul(1 << backoff);
            round.sent_segments += 1;
            if rng.gen::<f64>() >= self.path.loss {
                break;
            }
            round.lost_segments += 1;
            backoff = (backoff + 1).min(MAX_BACKOFF);
        }
        self.cwnd = 1.0;
        round
    }
}

/// Index of the first lost segment among `window`, if any is lost.
fn first_loss<R: Rng + ?Sized>(loss: f64, window: u64, rng: &mut R) -> Option<u64> {
    if loss <= 0.0 {
        return None;
    }
    if loss >= 1.0 {
        return Some(0);
    }
    let u: f64 = rng.gen::<f64>().max(f64::MIN_POSITIVE);
    let index = (u.ln() / (1.0 - loss).ln()).floor();
    (index < window as f64).then_some(index as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use vantage_core::tcp::throughput::{self, PathEstimate};

    fn send_rate(path: FlowPath, limit: u64, horizon: Nanos, seed: u64) -> f64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut flow = RenoFlow::new(path);
        let mut elapsed = Nanos::ZERO;
        let mut sent = 0u64;
        while elapsed < horizon {
            let round = flow.round(limit, &mut rng);
            elapsed += round.duration;
            sent += round.sent_segments;
        }
        sent as f64 / elapsed.as_secs_f64()
    }

    #[test]
    fn send_rate_matches_the_padhye_formula_within_15_percent() {
        for rtt_ms in [10u64, 100, 500] {
            for loss in [0.0001, 0.001, 0.01, 0.05] {
                let rtt = Nanos::from_millis(rtt_ms);
                let rto = Nanos::from_millis((4 * rtt_ms).max(200));
                let path = FlowPath {
                    rtt,
                    rto,
                    loss,
                    bandwidth_bits_per_sec: 1e12,
                    mss: 1460,
                };
                // Enough rounds for many loss events at every grid point.
                let rounds = 20_000.0_f64.max(200.0 / loss.sqrt());
                let horizon = Nanos::from_secs_f64(rtt.as_secs_f64() * rounds);
                let ours = send_rate(path, 1_000_000, horizon, 11);
                let model = throughput::segments_per_sec(&PathEstimate {
                    rtt_secs: rtt.as_secs_f64(),
                    rto_secs: rto.as_secs_f64(),
                    loss,
                    max_window_segments: 1e6,
                })
                .unwrap();
                let error = (ours - model).abs() / model;
                assert!(
                    error < 0.15,
                    "rtt {rtt_ms} ms, loss {loss}: ours {ours:.1}, formula {model:.1}"
                );
            }
        }
    }

    #[test]
    fn without_loss_the_window_limit_sets_the_rate() {
        let path = FlowPath {
            rtt: Nanos::from_millis(100),
            rto: Nanos::from_millis(400),
            loss: 0.0,
            bandwidth_bits_per_sec: 1e12,
            mss: 1000,
        };
        // 20 segments per 0.1 s = 200 segments/s once slow start is over.
        let rate = send_rate(path, 20, Nanos::from_secs(100), 1);
        assert!((rate - 200.0).abs() < 2.0, "{rate}");
    }

    #[test]
    fn the_link_caps_the_rate() {
        let path = FlowPath {
            rtt: Nanos::from_millis(100),
            rto: Nanos::from_millis(400),
            loss: 0.0,
            bandwidth_bits_per_sec: 8e5,
            mss: 1000,
        };
        // 800 kb/s = 100 segments/s, whatever the window.
        let rate = send_rate(path, 1_000, Nanos::from_secs(100), 1);
        assert!((rate - 100.0).abs() < 2.0, "{rate}");
    }

    #[test]
    fn a_repaired_loss_holds_about_a_window_out_of_order() {
        let path = FlowPath {
            rtt: Nanos::from_millis(100),
            rto: Nanos::from_millis(400),
            loss: 0.01,
            bandwidth_bits_per_sec: 1e12,
            mss: 1460,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut flow = RenoFlow::new(path);
        let (mut held, mut windows, mut losses) = (0u64, 0u64, 0u64);
        for _ in 0..50_000 {
            let round = flow.round(1_000, &mut rng);
            if round.loss && !round.timeout {
                held += round.out_of_order_segments;
                windows += round.window_segments;
                losses += 1;
            }
        }
        assert!(losses > 100);
        // All but the lost segment.
        assert_eq!(held + losses, windows);
    }
}
