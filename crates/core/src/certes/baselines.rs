//! The two estimators the Certes paper compares itself with (Appendix A).
//!
//! **M/M/1 (Eq. 32)**: the drop probability p is taken as constant, so the
//! expected wait is the retry schedule weighted by p^j:
//!
//! ```text
//! CLIENT_RT = Σ_{j=0..k} p^j (1 − p) (T_j + SYN-to-END) + p^{k+1} T_give-up
//! ```
//!
//! which for the paper's 3/6/12 s schedule and k = 2 is Eq. 32,
//! (t_s + t_q)(1 − p³) + 3p + 6p² + 12p³, with the interval's drop rate for
//! p and its mean SYN-to-END for t_s + t_q, as the paper's Figure 23 does.
//!
//! **Sliding window (Eq. 33)**: a connection completing in interval i was
//! accepted one SYN-to-END earlier, at a; its j-th earlier attempt was
//! dropped with the drop rate of the interval T_j before a:
//!
//! ```text
//! CLIENT_RT = SYN-to-END + Σ_{j=1..k} (T_j − T_{j−1}) Π_{l=1..j} DR_{a − T_l}
//! ```
//!
//! (for 3/6/12 s: 3·DR_{a−3} + 6·DR_{a−3}·DR_{a−9} + 12·DR_{a−3}·DR_{a−9}·DR_{a−21}).
//!
//! Both are generalized like the model (any profile or mixture, any
//! frustration timeout). Departure: both add the interval's mean RTT, as
//! Eq. 1 does, so that they differ from Certes only in how they account
//! for drops. Neither counts give-ups in its denominator, as in the paper.

use super::counters::IntervalCounters;
use super::model::{CertesConfig, CertesError};
use crate::Nanos;

/// A (profile, frustration timeout) class as the baselines need it.
#[derive(Clone, Debug)]
struct Schedule {
    weight: f64,
    /// T_0 = 0 … T_k.
    attempt_times: Vec<Nanos>,
    give_up: Nanos,
}

/// Both baselines, fed the same counters as Certes.
#[derive(Clone, Debug)]
pub struct Baselines {
    interval: Nanos,
    schedules: Vec<Schedule>,
    /// Ring of past drop rates, long enough for T_k plus the longest
    /// SYN-to-END.
    drop_rates: Vec<f64>,
    index: u64,
}

/// The baselines' estimates for one interval (`None` when nothing completed).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BaselineEstimates {
    /// Eq. 32.
    pub mm1: Option<Nanos>,
    /// Eq. 33.
    pub sliding_window: Option<Nanos>,
}

impl Baselines {
    pub fn new(config: &CertesConfig) -> Result<Baselines, CertesError> {
        // The model validates the configuration the same way.
        super::model::Certes::new(config.clone())?;
        let fto_total: f64 = config.frustration_timeouts.iter().map(|(_, w)| w).sum();
        let mut schedules = Vec::new();
        for (profile, weight) in config.clients.entries() {
            for &(timeout, fto_weight) in &config.frustration_timeouts {
                let give_up = timeout.min(profile.give_up);
                let attempt_times = (0..=profile.retransmissions())
                    .map(|j| profile.send_offset(j))
                    .take_while(|t| *t < give_up)
                    .collect();
                schedules.push(Schedule {
                    weight: weight * fto_weight / fto_total,
                    attempt_times,
                    give_up,
                });
            }
        }
        let longest = schedules
            .iter()
            .map(|s| s.give_up)
            .max()
            .unwrap_or(Nanos::ZERO);
        let length = ((longest + config.max_syn_to_end).0 / config.interval.0) as usize + 2;
        Ok(Baselines {
            interval: config.interval,
            schedules,
            drop_rates: vec![0.0; length],
            index: 0,
        })
    }

    /// Drop rate `back` intervals before the current one (zero before the start).
    fn drop_rate_back(&self, back: u64) -> f64 {
        if back > self.index || back as usize >= self.drop_rates.len() {
            return 0.0;
        }
        self.drop_rates[((self.index - back) % self.drop_rates.len() as u64) as usize]
    }

    pub fn on_interval(&mut self, counters: &IntervalCounters) -> BaselineEstimates {
        let length = self.drop_rates.len() as u64;
        self.drop_rates[(self.index % length) as usize] = counters.drop_rate();
        let estimates = match (counters.syn_to_end_mean(), counters.rtt_mean()) {
            (Some(syn_to_end), Some(rtt)) => {
                let base = (syn_to_end + rtt).0 as f64;
                BaselineEstimates {
                    mm1: Some(self.mm1(counters.drop_rate(), base)),
                    sliding_window: Some(self.sliding_window(syn_to_end, base)),
                }
            }
            _ => BaselineEstimates::default(),
        };
        self.index += 1;
        estimates
    }

    /// Eq. 32 generalized; `base` = SYN-to-END + RTT in nanoseconds.
    fn mm1(&self, p: f64, base: f64) -> Nanos {
        let mut total = 0.0;
        for s in &self.schedules {
            let k = s.attempt_times.len() - 1;
            let mut mean = 0.0;
            for (j, t) in s.attempt_times.iter().enumerate() {
                mean += p.powi(j as i32) * (1.0 - p) * (t.0 as f64 + base);
            }
            mean += p.powi(k as i32 + 1) * s.give_up.0 as f64;
            total += s.weight * mean;
        }
        Nanos(total.round() as u64)
    }

    /// Eq. 33 generalized.
    fn sliding_window(&self, syn_to_end: Nanos, base: f64) -> Nanos {
        let interval = self.interval.0 as f64;
        let accepted_back = (syn_to_end.0 as f64 / interval).round() as u64;
        let mut total = 0.0;
        for s in &self.schedules {
            let mut wait = 0.0;
            let mut product = 1.0;
            for j in 1..s.attempt_times.len() {
                let back = accepted_back + (s.attempt_times[j].0 as f64 / interval).round() as u64;
                product *= self.drop_rate_back(back);
                wait += (s.attempt_times[j] - s.attempt_times[j - 1]).0 as f64 * product;
            }
            total += s.weight * wait;
        }
        Nanos((base + total).round() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::ClientMix;

    fn paper() -> CertesConfig {
        CertesConfig::new(
            Nanos::from_secs(1),
            ClientMix::builtin("windows-9x-nt").unwrap(),
            Nanos::from_secs(21),
        )
    }

    fn interval(dropped: u64, accepted: u64) -> IntervalCounters {
        IntervalCounters {
            dropped,
            accepted,
            completed: 100,
            syn_to_end_sum: Nanos::from_millis(100 * 10),
            rtt_sum: Nanos::ZERO,
            ..Default::default()
        }
    }

    /// Appendix A: with t_s + t_q = 10 ms, Eq. 32 is
    /// 0.01(1 − p³) + 3p + 6p² + 12p³; "a drop rate of approximately 20 %
    /// adds 1 second".
    #[test]
    fn eq32_closed_form_and_figure_22() {
        let mut b = Baselines::new(&paper()).unwrap();
        let p: f64 = 0.2;
        let got = b.on_interval(&interval(20, 80)).mm1.unwrap().as_secs_f64();
        let expect = 0.01 * (1.0 - p.powi(3)) + 3.0 * p + 6.0 * p * p + 12.0 * p.powi(3);
        assert!((got - expect).abs() < 1e-6, "{got} vs {expect}");
        // 0.936 s added at p = 0.2: "approximately" one second.
        assert!((got - 0.01 - 1.0).abs() < 0.1, "{got}");
    }

    /// Eq. 33 with steady drop rate p: 3p + 6p² + 12p³ would need k = 3;
    /// with k = 2 (FTO 21 s) it is 3p + 6p² once the window is full, and
    /// zero extra while no drop history exists.
    #[test]
    fn eq33_steady_state() {
        let mut b = Baselines::new(&paper()).unwrap();
        let first = b.on_interval(&interval(50, 50)).sliding_window.unwrap();
        assert_eq!(first, Nanos::from_millis(10));
        let mut last = Nanos::ZERO;
        for _ in 0..30 {
            last = b.on_interval(&interval(50, 50)).sliding_window.unwrap();
        }
        let p = 0.5;
        let expect = 0.01 + 3.0 * p + 6.0 * p * p;
        assert!((last.as_secs_f64() - expect).abs() < 1e-6);
    }

    #[test]
    fn nothing_completed_gives_none() {
        let mut b = Baselines::new(&paper()).unwrap();
        let e = b.on_interval(&IntervalCounters {
            dropped: 5,
            ..Default::default()
        });
        assert_eq!(e, BaselineEstimates::default());
    }
}
