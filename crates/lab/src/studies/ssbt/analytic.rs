//! Figure 3 of the proxy thesis: the probability that a persistent
//! connection is active, from Section 2.3's analysis.
//!
//! T(f) = h(S_c + f/ρ_c) + (1 − h)(S_c + S_s + f/ρ_c + f/ρ_s), with
//! S = X·rtt/2 + (1 − X)·3rtt/2 (Eq. 1, 2), X_c = d(T_p), X_s = (1 − h)·d(T_p)
//! (Eq. 4, 5), d the CDF of the Pareto idle time p(x) = α k^α / x^(α+1),
//! α = 1.5, k = 1 s (Eq. 3; the thesis prints x^(α+1) in the numerator),
//! and U = ∫_0^{T_p} p(x)·T/(T + x) dx + (1 − d(T_p))·T/(T + T_p).
//!
//! Departure: ρ_c and ρ_s come from the Padhye et al. formula
//! ([`vantage_core::tcp::throughput`]) where the thesis uses its own
//! reference [28], which is not given; rto = 4·rtt as in the thesis.

use vantage_core::tcp::throughput::{self, PathEstimate};
use vantage_core::OutOfRange;

const PARETO_SHAPE: f64 = 1.5;
const PARETO_MIN_S: f64 = 1.0;
/// Steps of the numerical integral over [k, T_p].
const STEPS: usize = 4_000;

/// One side's path for the analysis.
#[derive(Clone, Copy, Debug)]
pub struct Side {
    pub rtt_s: f64,
    pub loss: f64,
}

/// The analysis's fixed inputs.
#[derive(Clone, Copy, Debug)]
pub struct Inputs {
    pub hit_ratio: f64,
    pub document_bytes: f64,
    pub segment_bytes: f64,
    pub max_window_bytes: f64,
}

fn idle_cdf(x: f64) -> f64 {
    if x <= PARETO_MIN_S {
        0.0
    } else {
        1.0 - (PARETO_MIN_S / x).powf(PARETO_SHAPE)
    }
}

fn idle_density(x: f64) -> f64 {
    if x < PARETO_MIN_S {
        0.0
    } else {
        PARETO_SHAPE * PARETO_MIN_S.powf(PARETO_SHAPE) / x.powf(PARETO_SHAPE + 1.0)
    }
}

fn bytes_per_sec(side: Side, inputs: &Inputs) -> Result<f64, OutOfRange> {
    let path = PathEstimate {
        rtt_secs: side.rtt_s,
        rto_secs: 4.0 * side.rtt_s,
        loss: side.loss,
        max_window_segments: inputs.max_window_bytes / inputs.segment_bytes,
    };
    Ok(throughput::segments_per_sec(&path)? * inputs.segment_bytes)
}

/// U for persistent timer `timer_s`.
pub fn active_probability(
    client: Side,
    server: Side,
    inputs: &Inputs,
    timer_s: f64,
) -> Result<f64, OutOfRange> {
    let rho_c = bytes_per_sec(client, inputs)?;
    let rho_s = bytes_per_sec(server, inputs)?;
    let h = inputs.hit_ratio;
    let f = inputs.document_bytes;
    let kept = idle_cdf(timer_s);
    let setup = |rtt: f64, x: f64| x * rtt / 2.0 + (1.0 - x) * 1.5 * rtt;
    let s_c = setup(client.rtt_s, kept);
    let s_s = setup(server.rtt_s, (1.0 - h) * kept);
    let transfer = h * (s_c + f / rho_c) + (1.0 - h) * (s_c + s_s + f / rho_c + f / rho_s);
    let share = |x: f64| transfer / (transfer + x);
    let mut integral = 0.0;
    if timer_s > PARETO_MIN_S {
        // Simpson's rule over [k, T_p].
        let width = (timer_s - PARETO_MIN_S) / STEPS as f64;
        let g = |x: f64| idle_density(x) * share(x);
        for i in 0..STEPS {
            let a = PARETO_MIN_S + i as f64 * width;
            let b = a + width;
            integral += width / 6.0 * (g(a) + 4.0 * g((a + b) / 2.0) + g(b));
        }
    }
    Ok(integral + (1.0 - kept) * share(timer_s))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs() -> Inputs {
        Inputs {
            hit_ratio: 0.5,
            document_bytes: 12_000.0,
            segment_bytes: 1460.0,
            max_window_bytes: 65_536.0,
        }
    }

    #[test]
    fn a_timer_below_the_shortest_idle_time_keeps_nothing_idle() {
        // T_p = 1 s = k: d(T_p) = 0, U = T/(T + 1).
        let client = Side {
            rtt_s: 0.02,
            loss: 0.0,
        };
        let server = Side {
            rtt_s: 0.02,
            loss: 0.0,
        };
        let u = active_probability(client, server, &inputs(), 1.0).unwrap();
        // ρ = 44.88 segments / 0.02 s · 1460 = 3 276 800 B/s; f/ρ = 0.003662 s
        // S_c = S_s = 0.03 s; T = 0.5(0.033662) + 0.5(0.067324) = 0.050493
        let t = 0.050_493;
        assert!((u - t / (t + 1.0)).abs() < 1e-4, "{u}");
    }

    #[test]
    fn utilization_falls_as_the_timer_grows() {
        let client = Side {
            rtt_s: 0.2,
            loss: 0.01,
        };
        let server = Side {
            rtt_s: 0.2,
            loss: 0.01,
        };
        let at = |t| active_probability(client, server, &inputs(), t).unwrap();
        assert!(at(1.0) > at(5.0));
        assert!(at(5.0) > at(30.0));
        assert!(at(30.0) < 0.5);
    }
}
