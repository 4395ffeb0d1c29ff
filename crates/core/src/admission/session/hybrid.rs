//! The *hybrid* strategy of Section 11: an EWMA controller (Section 7)
//! whose ac-weight k tunes itself from the observed quality of service.
//!
//! * Ab(i) > 0 (aborted requests plus refused connections during T_i) sets
//!   k = 1 for T_{i+1}: the most restrictive, ac-responsive policy.
//! * When Σ Ab(j) = 0 for a whole ac_cycle since the last adjustment, k
//!   falls by 0.1, down to the ac-stable k = 0.1.
//!
//! ac_cycle is Section 12's approximation of a session's life: the mean
//! time between consecutive requests of a session (response plus think
//! time) times the mean session length C_r / C_s, in whole intervals.
//! Until both have been measured, [`HybridConfig::initial_ac_cycle`] holds.
//!
//! Departures: k is kept in tenths (integers), so ten steps of −0.1 land
//! exactly on 0.1 and 1.0; the new k already weighs the measurement of the
//! interval that triggered it (the paper's "for the next time interval
//! T_{i+1}" read as: f_ac(i+1) is computed with the new k). The paper does
//! not say where k starts; we start at [`HybridConfig::initial_weight`]
//! (ac-stable by default: no trouble has been seen yet).

use super::ewma::Predictor;
use super::{
    check, check_threshold, Decision, IntervalMeasurement, SessionAdmission, SessionConfigError,
    SessionCounters,
};
use crate::Nanos;

/// Parameters of the hybrid strategy.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HybridConfig {
    /// U_ac (0.95 in the paper).
    pub threshold: f64,
    /// k before any trouble has been seen, a multiple of 0.1 in [0.1, 1].
    pub initial_weight: f64,
    /// ac_cycle used until the inter-request time and the session length
    /// have been measured.
    pub initial_ac_cycle: Nanos,
}

impl Default for HybridConfig {
    fn default() -> Self {
        HybridConfig {
            threshold: 0.95,
            initial_weight: 0.1,
            initial_ac_cycle: Nanos::from_secs(60),
        }
    }
}

impl HybridConfig {
    pub fn validate(&self) -> Result<(), SessionConfigError> {
        check_threshold(self.threshold)?;
        let tenths = self.initial_weight * 10.0;
        check(
            (1.0..=10.0).contains(&tenths) && (tenths - tenths.round()).abs() < 1e-9,
            "initial_weight",
            "a multiple of 0.1 in [0.1, 1]",
            self.initial_weight,
        )?;
        check(
            self.initial_ac_cycle.0 > 0,
            "initial_ac_cycle",
            "positive",
            self.initial_ac_cycle,
        )
    }
}

/// Section 11's self-tuning controller.
#[derive(Clone, Debug)]
pub struct HybridController {
    config: HybridConfig,
    predictor: Predictor,
    /// k in tenths: 1 (ac-stable) ..= 10 (ac-responsive).
    weight_tenths: u8,
    /// Quiet intervals since the last adjustment of k.
    quiet_intervals: u64,
    counters: SessionCounters,
    last_interval: Nanos,
}

impl HybridController {
    pub fn new(config: HybridConfig) -> Result<HybridController, SessionConfigError> {
        config.validate()?;
        Ok(HybridController {
            config,
            predictor: Predictor::new(config.threshold),
            weight_tenths: (config.initial_weight * 10.0).round() as u8,
            quiet_intervals: 0,
            counters: SessionCounters::default(),
            last_interval: Nanos::ZERO,
        })
    }

    /// k now.
    pub fn weight(&self) -> f64 {
        self.weight_tenths as f64 / 10.0
    }

    pub fn predicted_utilization(&self) -> f64 {
        self.predictor.predicted
    }

    /// ac_cycle: mean inter-request time × mean session length, or the
    /// configured one before they are measured.
    pub fn ac_cycle(&self) -> Nanos {
        match (
            self.counters.inter_request(),
            self.counters.session_length(),
        ) {
            (Some(gap), Some(length)) => Nanos::from_secs_f64(gap.as_secs_f64() * length),
            _ => self.config.initial_ac_cycle,
        }
    }

    /// ac_cycle in whole ac-intervals (at least one).
    pub fn ac_cycle_intervals(&self) -> u64 {
        if self.last_interval.0 == 0 {
            return 1;
        }
        let cycle = self.ac_cycle().0;
        cycle.div_ceil(self.last_interval.0).max(1)
    }
}

impl SessionAdmission for HybridController {
    fn on_interval(&mut self, _now: Nanos, measured: &IntervalMeasurement) {
        self.counters.add(measured);
        if measured.elapsed.0 > 0 {
            self.last_interval = measured.elapsed;
        }
        if measured.troubles() > 0 {
            self.weight_tenths = 10;
            self.quiet_intervals = 0;
        } else {
            self.quiet_intervals += 1;
            if self.quiet_intervals >= self.ac_cycle_intervals() {
                self.weight_tenths = self.weight_tenths.saturating_sub(1).max(1);
                self.quiet_intervals = 0;
            }
        }
        self.predictor.update(self.weight(), measured.utilization());
    }

    fn admit_new_session(&mut self, _now: Nanos) -> bool {
        self.predictor.admitting()
    }

    fn decision(&self) -> Decision {
        Decision {
            admitting: self.predictor.admitting(),
            predicted_utilization: Some(self.predictor.predicted),
            weight: Some(self.weight()),
            session_length: self.counters.session_length(),
            ac_cycle_intervals: Some(self.ac_cycle_intervals()),
            ..Decision::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::session::busy_second;

    #[test]
    fn trouble_makes_it_responsive_and_quiet_cycles_relax_it() {
        let mut h = HybridController::new(HybridConfig {
            initial_ac_cycle: Nanos::from_secs(3),
            ..HybridConfig::default()
        })
        .unwrap();
        assert_eq!(h.weight(), 0.1);
        let mut troubled = busy_second(100);
        troubled.aborted_requests = 1;
        h.on_interval(Nanos::from_secs(1), &troubled);
        assert_eq!(h.weight(), 1.0);
        // With k = 1 the prediction is the last measurement.
        assert_eq!(h.predicted_utilization(), 1.0);
        assert_eq!(h.ac_cycle_intervals(), 3);
        // Two quiet intervals: not yet a whole ac_cycle.
        for t in 2..=3 {
            h.on_interval(Nanos::from_secs(t), &busy_second(50));
            assert_eq!(h.weight(), 1.0);
        }
        h.on_interval(Nanos::from_secs(4), &busy_second(50));
        assert!((h.weight() - 0.9).abs() < 1e-12);
        // Nine more cycles bring it to ac-stable, and no further.
        for t in 0..(3 * 12) {
            h.on_interval(Nanos::from_secs(5 + t), &busy_second(50));
        }
        assert_eq!(h.weight(), 0.1);
        // A refused connection is trouble too.
        let mut refused = busy_second(90);
        refused.refused_connections = 2;
        h.on_interval(Nanos::from_secs(60), &refused);
        assert_eq!(h.weight(), 1.0);
        assert_eq!(h.decision().weight, Some(1.0));
    }

    #[test]
    fn ac_cycle_is_inter_request_time_times_session_length() {
        let mut h = HybridController::new(HybridConfig::default()).unwrap();
        let mut m = busy_second(80);
        // 10 sessions, 150 requests: SesLength 15; gaps of 5 s on average.
        m.admitted_sessions = 10;
        m.session_requests = 150;
        m.inter_request_sum = Nanos::from_secs(500);
        m.inter_request_samples = 100;
        h.on_interval(Nanos::from_secs(1), &m);
        assert_eq!(h.ac_cycle(), Nanos::from_secs(75));
        assert_eq!(h.ac_cycle_intervals(), 75);
        assert_eq!(h.decision().session_length, Some(15.0));
    }

    #[test]
    fn rejects_bad_parameters() {
        let bad = HybridConfig {
            initial_weight: 0.25,
            ..HybridConfig::default()
        };
        assert!(HybridController::new(bad).is_err());
    }
}
