//! Steady-state TCP Reno throughput (Padhye, Firoiu, Towsley, Kurose,
//! SIGCOMM '98), as the proxy thesis prints it (Okamoto 2003, Section 3.1.1):
//!
//! λ = min(W_max/RTT, 1 / (RTT·√(2bp/3) + T0·min(1, 3·√(3bp/8))·p·(1 + 32p²)))
//!
//! in segments per second, with b = 2 (the receiver delays ACKs). E-ATBT
//! takes this λ as a connection's expected throughput ρ̄. With p = 0 the
//! loss term is unbounded and λ is the window cap W_max/RTT.

use crate::OutOfRange;

/// Segments acknowledged per ACK when the receiver delays ACKs (b).
pub const SEGMENTS_PER_ACK: f64 = 2.0;

/// What the formula needs to know about one connection's path.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PathEstimate {
    /// RTT, seconds (> 0).
    pub rtt_secs: f64,
    /// T0: retransmission time-out, seconds (≥ 0).
    pub rto_secs: f64,
    /// p: probability that a segment is lost, in [0, 1].
    pub loss: f64,
    /// W_max: the largest window the receiver allows, segments (> 0).
    pub max_window_segments: f64,
}

impl PathEstimate {
    /// Checks every field's range.
    pub fn validate(&self) -> Result<(), OutOfRange> {
        OutOfRange::check(
            self.rtt_secs.is_finite() && self.rtt_secs > 0.0,
            "rtt",
            "a positive number of seconds",
            self.rtt_secs,
        )?;
        OutOfRange::check(
            self.rto_secs.is_finite() && self.rto_secs >= 0.0,
            "rto",
            "a non-negative number of seconds",
            self.rto_secs,
        )?;
        OutOfRange::check(
            (0.0..=1.0).contains(&self.loss),
            "loss",
            "a probability in [0, 1]",
            self.loss,
        )?;
        OutOfRange::check(
            self.max_window_segments.is_finite() && self.max_window_segments > 0.0,
            "max window",
            "a positive number of segments",
            self.max_window_segments,
        )
    }
}

/// λ in segments per second for `path`.
pub fn segments_per_sec(path: &PathEstimate) -> Result<f64, OutOfRange> {
    path.validate()?;
    let window_cap = path.max_window_segments / path.rtt_secs;
    let p = path.loss;
    if p == 0.0 {
        return Ok(window_cap);
    }
    let b = SEGMENTS_PER_ACK;
    let congestion_avoidance = path.rtt_secs * (2.0 * b * p / 3.0).sqrt();
    let timeouts =
        path.rto_secs * (3.0 * (3.0 * b * p / 8.0).sqrt()).min(1.0) * p * (1.0 + 32.0 * p * p);
    Ok(window_cap.min(1.0 / (congestion_avoidance + timeouts)))
}

/// λ in bytes per second, for segments of `mss` bytes.
pub fn bytes_per_sec(path: &PathEstimate, mss: u32) -> Result<f64, OutOfRange> {
    OutOfRange::check(mss > 0, "mss", "a positive number of bytes", mss)?;
    Ok(segments_per_sec(path)? * f64::from(mss))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn path(rtt: f64, rto: f64, loss: f64, window: f64) -> PathEstimate {
        PathEstimate {
            rtt_secs: rtt,
            rto_secs: rto,
            loss,
            max_window_segments: window,
        }
    }

    #[test]
    fn one_percent_loss_at_100_ms() {
        // RTT·√(2·2·0.01/3) = 0.1·√0.013333 = 0.1·0.115470 = 0.0115470
        // min(1, 3·√(3·2·0.01/8)) = 3·√0.0075 = 3·0.0866025 = 0.259808
        // T0·0.259808·p·(1 + 32p²) = 0.4·0.259808·0.01·1.0032 = 0.0010426
        // λ = 1 / (0.0115470 + 0.0010426) = 1 / 0.0125896 = 79.431
        let lambda = segments_per_sec(&path(0.1, 0.4, 0.01, 1e6)).unwrap();
        assert!((lambda - 79.431).abs() < 0.001, "{lambda}");
    }

    #[test]
    fn ten_percent_loss_at_200_ms() {
        // 0.2·√(2·2·0.1/3) = 0.2·0.365148 = 0.0730297
        // 3·√(3·2·0.1/8) = 3·√0.075 = 0.821584 (< 1)
        // 1.0·0.821584·0.1·(1 + 0.32) = 0.108449
        // λ = 1 / 0.181479 = 5.5103
        let lambda = segments_per_sec(&path(0.2, 1.0, 0.1, 1e6)).unwrap();
        assert!((lambda - 5.5103).abs() < 0.0001, "{lambda}");
    }

    #[test]
    fn heavy_loss_saturates_the_timeout_factor() {
        // p = 0.5: 3·√(3·2·0.5/8) = 3·√0.375 = 1.837 → min(1, ·) = 1
        // 0.1·√(2·2·0.5/3) = 0.1·0.816497 = 0.0816497
        // 1.0·1·0.5·(1 + 32·0.25) = 4.5
        // λ = 1 / 4.5816497 = 0.218262
        let lambda = segments_per_sec(&path(0.1, 1.0, 0.5, 1e6)).unwrap();
        assert!((lambda - 0.218262).abs() < 1e-6, "{lambda}");
    }

    #[test]
    fn window_caps_when_loss_vanishes() {
        // 64 segments over 0.1 s = 640 segments/s
        assert_eq!(segments_per_sec(&path(0.1, 0.4, 0.0, 64.0)).unwrap(), 640.0);
        assert_eq!(
            segments_per_sec(&path(0.1, 0.4, 1e-9, 64.0)).unwrap(),
            640.0
        );
        // 79.43 segments/s · 1460 bytes
        let bytes = bytes_per_sec(&path(0.1, 0.4, 0.01, 1e6), 1460).unwrap();
        assert!((bytes - 79.431 * 1460.0).abs() < 2.0);
    }

    #[test]
    fn rejects_out_of_range_inputs() {
        assert!(segments_per_sec(&path(0.0, 0.4, 0.01, 64.0)).is_err());
        assert!(segments_per_sec(&path(0.1, -1.0, 0.01, 64.0)).is_err());
        assert!(segments_per_sec(&path(0.1, 0.4, 1.5, 64.0)).is_err());
        assert!(segments_per_sec(&path(0.1, 0.4, f64::NAN, 64.0)).is_err());
        assert!(segments_per_sec(&path(0.1, 0.4, 0.01, 0.0)).is_err());
        assert!(bytes_per_sec(&path(0.1, 0.4, 0.01, 64.0), 0).is_err());
    }

    proptest! {
        #[test]
        fn decreasing_in_loss_rtt_and_timeout(
            rtt in 0.001f64..2.0,
            rto in 0.0f64..5.0,
            loss in 1e-6f64..0.9,
            window in 1.0f64..1e5,
            factor in 1.001f64..4.0,
        ) {
            let base = segments_per_sec(&path(rtt, rto, loss, window)).unwrap();
            let more_loss = segments_per_sec(&path(rtt, rto, (loss * factor).min(1.0), window)).unwrap();
            let longer_rtt = segments_per_sec(&path(rtt * factor, rto, loss, window)).unwrap();
            let longer_rto = segments_per_sec(&path(rtt, rto * factor + 0.001, loss, window)).unwrap();
            prop_assert!(more_loss <= base);
            prop_assert!(longer_rtt < base);
            prop_assert!(longer_rto <= base);
            prop_assert!(base <= window / rtt * (1.0 + 1e-12));
        }
    }
}
