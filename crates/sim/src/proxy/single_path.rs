//! One long transfer on one path (the proxy thesis's Figure 5 network,
//! Section 4.1): E-ATBT sizing the sender's buffer (Figure 6), and the
//! receive-buffer tuner sizing the receiver's (Figure 7).
//!
//! The sender's estimate of p is loss events per segment sent (the
//! loss-indication rate of Padhye et al.) through [`LossEstimator`], as
//! `vantage proxy` estimates it (zero until the first loss, when E-ATBT
//! asks for the receiver's whole window);
//! its RTT and RTO are the path's. Both run their mechanism once per
//! `interval` (1 s in the thesis's implementation, Section 5.1).

use rand::Rng;
use vantage_core::resources::{
    CouplingParams, IntervalObservation, LossEstimator, LossEstimatorParams, ReceiveBufferTuner,
    ReceiveTunerParams, SendBufferAllocator,
};
use vantage_core::tcp::throughput::PathEstimate;
use vantage_core::{Nanos, OutOfRange};

use super::flow::{FlowPath, RenoFlow};

/// One interval of a single-path run.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct BufferSample {
    /// End of the interval, seconds.
    pub time_secs: f64,
    /// The buffer the mechanism assigned for the next interval, bytes.
    pub assigned_bytes: u64,
    /// The most data held in the tuned buffer during the interval, bytes.
    pub peak_stored_bytes: u64,
    /// Bytes delivered per second during the interval.
    pub throughput_bytes_per_sec: f64,
}

/// Why a single-path run could not start.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SinglePathError {
    #[error("single path: {0}")]
    OutOfRange(#[from] OutOfRange),
    #[error("single path: {0}")]
    SendBuffer(#[from] vantage_core::resources::SendBufferError),
}

/// Figure 6: E-ATBT's send buffer for one connection over `horizon`; the
/// receiver's buffer is `receive_buffer_bytes`.
pub fn send_buffer_run<R: Rng + ?Sized>(
    path: FlowPath,
    receive_buffer_bytes: u64,
    horizon: Nanos,
    interval: Nanos,
    rng: &mut R,
) -> Result<Vec<BufferSample>, SinglePathError> {
    OutOfRange::check(interval > Nanos::ZERO, "interval", "positive", interval)?;
    let mss = u64::from(path.mss);
    let receive_window = (receive_buffer_bytes / mss).max(1);
    let mut allocator =
        SendBufferAllocator::new(u64::MAX / 2, path.mss, 1, CouplingParams::default())?;
    let estimate = |loss: f64| PathEstimate {
        rtt_secs: path.rtt.as_secs_f64(),
        rto_secs: path.rto.as_secs_f64(),
        loss,
        max_window_segments: receive_window as f64,
    };
    allocator.set_path(0, &estimate(0.0))?;
    let mut flow = RenoFlow::new(path);
    let mut loss_estimator = LossEstimator::new(LossEstimatorParams::default())?;
    let (mut now, mut next_tick) = (Nanos::ZERO, interval);
    let (mut sent, mut lost, mut delivered_in_interval) = (0u64, 0u64, 0u64);
    let mut samples = Vec::new();
    while now < horizon {
        let assigned = allocator.assigned(0).unwrap_or(0);
        let limit = (assigned / mss).clamp(1, receive_window);
        let round = flow.round(limit, rng);
        now += round.duration;
        sent += round.sent_segments;
        lost += u64::from(round.loss);
        delivered_in_interval += round.sent_segments - round.lost_segments;
        while now >= next_tick && next_tick <= horizon {
            let loss = loss_estimator.observe_interval(sent, lost);
            (sent, lost) = (0, 0);
            allocator.set_path(0, &estimate(loss))?;
            samples.push(BufferSample {
                time_secs: next_tick.as_secs_f64(),
                assigned_bytes: allocator.assigned(0).unwrap_or(0),
                peak_stored_bytes: 0,
                throughput_bytes_per_sec: (delivered_in_interval * mss) as f64
                    / interval.as_secs_f64(),
            });
            delivered_in_interval = 0;
            next_tick += interval;
        }
    }
    Ok(samples)
}

/// Figure 7: the receive-buffer tuner for one connection over `horizon`;
/// the sender's buffer is `send_buffer_bytes` and the receiving
/// application reads in-order data at once.
pub fn receive_buffer_run<R: Rng + ?Sized>(
    path: FlowPath,
    send_buffer_bytes: u64,
    initial_receive_bytes: u64,
    params: ReceiveTunerParams,
    horizon: Nanos,
    interval: Nanos,
    rng: &mut R,
) -> Result<Vec<BufferSample>, SinglePathError> {
    OutOfRange::check(interval > Nanos::ZERO, "interval", "positive", interval)?;
    let mss = u64::from(path.mss);
    let send_window = (send_buffer_bytes / mss).max(1);
    let mut tuner = ReceiveBufferTuner::new(params, initial_receive_bytes)?;
    let mut flow = RenoFlow::new(path);
    let (mut now, mut next_tick) = (Nanos::ZERO, interval);
    let (mut peak_stored, mut received, mut loss) = (0u64, 0u64, false);
    let mut samples = Vec::new();
    while now < horizon {
        let limit = (tuner.advertised_bytes() / mss).clamp(1, send_window);
        let round = flow.round(limit, rng);
        now += round.duration;
        tuner.advance(now);
        received += (round.sent_segments - round.lost_segments) * mss;
        if round.loss {
            loss = true;
            let held = (round.out_of_order_segments * mss).min(tuner.advertised_bytes());
            peak_stored = peak_stored.max(held);
        }
        while now >= next_tick && next_tick <= horizon {
            tuner.end_interval(
                next_tick,
                &IntervalObservation {
                    peak_stored_bytes: peak_stored,
                    received_bytes: received,
                    loss,
                },
            );
            samples.push(BufferSample {
                time_secs: next_tick.as_secs_f64(),
                assigned_bytes: tuner.advertised_bytes(),
                peak_stored_bytes: peak_stored,
                throughput_bytes_per_sec: received as f64 / interval.as_secs_f64(),
            });
            (peak_stored, received, loss) = (0, 0, false);
            next_tick += interval;
        }
    }
    Ok(samples)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn path(loss: f64) -> FlowPath {
        FlowPath {
            rtt: Nanos::from_millis(200),
            rto: Nanos::from_millis(800),
            loss,
            bandwidth_bits_per_sec: 100e6,
            mss: 1460,
        }
    }

    fn mean_assigned(samples: &[BufferSample]) -> f64 {
        let tail = &samples[samples.len() / 2..];
        tail.iter().map(|s| s.assigned_bytes as f64).sum::<f64>() / tail.len() as f64
    }

    #[test]
    fn e_atbt_gives_higher_loss_a_smaller_buffer() {
        let run = |loss, seed| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            send_buffer_run(
                path(loss),
                16 << 20,
                Nanos::from_secs(200),
                Nanos::from_secs(1),
                &mut rng,
            )
            .unwrap()
        };
        let (high, mid, low) = (run(0.01, 1), run(0.001, 2), run(0.0001, 3));
        assert_eq!(high.len(), 200);
        assert!(mean_assigned(&high) < mean_assigned(&mid));
        assert!(mean_assigned(&mid) < mean_assigned(&low));
    }

    #[test]
    fn the_receive_buffer_follows_what_is_stored() {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let samples = receive_buffer_run(
            path(0.01),
            16 << 20,
            65_536,
            ReceiveTunerParams::default(),
            Nanos::from_secs(200),
            Nanos::from_secs(1),
            &mut rng,
        )
        .unwrap();
        let tail = &samples[100..];
        let peaks: Vec<f64> = tail
            .iter()
            .filter(|s| s.peak_stored_bytes > 0)
            .map(|s| s.peak_stored_bytes as f64)
            .collect();
        assert!(!peaks.is_empty());
        let stored = peaks.iter().sum::<f64>() / peaks.len() as f64;
        let assigned: f64 =
            tail.iter().map(|s| s.assigned_bytes as f64).sum::<f64>() / tail.len() as f64;
        // The loss rules keep the buffer between 1/T_u and 1/T_l times the
        // window a loss shows; no drift above that.
        assert!(assigned < 2.5 * stored, "{assigned} vs {stored}");
        assert!(assigned > stored, "{assigned} vs {stored}");
    }
}
