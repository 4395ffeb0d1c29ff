//! The utilization-based SBAC of Section 7: an exponentially weighted
//! prediction of the next interval's utilization against a threshold.
//!
//! f_ac(1) = U_ac; f_ac(i+1) = (1 − k)·f_ac(i) + k·U_i^measured. While
//! f_ac(i+1) > U_ac every new session of T_{i+1} is rejected; otherwise all
//! are admitted (the "on-off" control of Section 12).
//!
//! Departure: none in the rule. The ac-interval length is the driver's: the
//! controller is told when an interval ends and how long it was.

use super::{
    check, check_threshold, Decision, IntervalMeasurement, SessionAdmission, SessionConfigError,
};
use crate::Nanos;

/// Parameters of the EWMA family.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EwmaConfig {
    /// U_ac, the ac-threshold (the paper uses 0.95).
    pub threshold: f64,
    /// k, the ac-weight coefficient, in (0, 1].
    pub weight: f64,
}

impl EwmaConfig {
    /// *ac-stable*: k = 0.1, U_ac = 95 %.
    pub fn stable() -> EwmaConfig {
        EwmaConfig {
            threshold: 0.95,
            weight: 0.1,
        }
    }

    /// *ac-responsive*: k = 1, U_ac = 95 %.
    pub fn responsive() -> EwmaConfig {
        EwmaConfig {
            threshold: 0.95,
            weight: 1.0,
        }
    }

    pub fn validate(&self) -> Result<(), SessionConfigError> {
        check_threshold(self.threshold)?;
        check(
            self.weight > 0.0 && self.weight <= 1.0,
            "weight",
            "in (0, 1]",
            self.weight,
        )
    }
}

/// The predictor f_ac alone, shared with [`super::HybridController`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Predictor {
    pub threshold: f64,
    pub predicted: f64,
}

impl Predictor {
    pub fn new(threshold: f64) -> Predictor {
        // f_ac(1) = U_ac: the first interval admits.
        Predictor {
            threshold,
            predicted: threshold,
        }
    }

    /// f_ac(i+1) = (1 − k)·f_ac(i) + k·U_i.
    pub fn update(&mut self, weight: f64, measured: f64) {
        self.predicted = (1.0 - weight) * self.predicted + weight * measured;
    }

    pub fn admitting(&self) -> bool {
        self.predicted <= self.threshold
    }
}

/// Section 7's controller with a fixed k.
#[derive(Clone, Debug)]
pub struct EwmaController {
    config: EwmaConfig,
    predictor: Predictor,
}

impl EwmaController {
    pub fn new(config: EwmaConfig) -> Result<EwmaController, SessionConfigError> {
        config.validate()?;
        Ok(EwmaController {
            config,
            predictor: Predictor::new(config.threshold),
        })
    }

    pub fn config(&self) -> &EwmaConfig {
        &self.config
    }

    /// f_ac(i+1), the utilization predicted for the current interval.
    pub fn predicted_utilization(&self) -> f64 {
        self.predictor.predicted
    }
}

impl SessionAdmission for EwmaController {
    fn on_interval(&mut self, _now: Nanos, measured: &IntervalMeasurement) {
        self.predictor
            .update(self.config.weight, measured.utilization());
    }

    fn admit_new_session(&mut self, _now: Nanos) -> bool {
        self.predictor.admitting()
    }

    fn decision(&self) -> Decision {
        Decision {
            admitting: self.predictor.admitting(),
            predicted_utilization: Some(self.predictor.predicted),
            weight: Some(self.config.weight),
            ..Decision::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::session::busy_second;

    #[test]
    fn recurrence_matches_section_7() {
        let mut c = EwmaController::new(EwmaConfig {
            threshold: 0.95,
            weight: 0.3,
        })
        .unwrap();
        // f_ac(1) = U_ac.
        assert_eq!(c.predicted_utilization(), 0.95);
        assert!(c.admit_new_session(Nanos::ZERO));
        let mut expected = 0.95;
        for (i, u) in [100u64, 100, 40, 100, 100, 100, 0].into_iter().enumerate() {
            c.on_interval(Nanos::from_secs(i as u64 + 1), &busy_second(u));
            expected = 0.7 * expected + 0.3 * (u as f64 / 100.0);
            assert!((c.predicted_utilization() - expected).abs() < 1e-12);
            assert_eq!(
                c.admit_new_session(Nanos::from_secs(i as u64 + 1)),
                expected <= 0.95
            );
            assert_eq!(c.decision().predicted_utilization, Some(expected));
            assert_eq!(c.decision().weight, Some(0.3));
        }
    }

    #[test]
    fn responsive_follows_the_last_interval_only() {
        let mut c = EwmaController::new(EwmaConfig::responsive()).unwrap();
        c.on_interval(Nanos::from_secs(1), &busy_second(96));
        assert!(!c.admit_new_session(Nanos::from_secs(1)));
        c.on_interval(Nanos::from_secs(2), &busy_second(95));
        assert!(c.admit_new_session(Nanos::from_secs(2)));
    }

    #[test]
    fn stable_remembers_history_responsive_does_not() {
        // After a long overload, one calm interval (80 %) reopens the
        // responsive policy, while the stable one still predicts overload:
        // 0.9 · f + 0.1 · 0.8 with f near 1.
        let mut stable = EwmaController::new(EwmaConfig::stable()).unwrap();
        let mut responsive = EwmaController::new(EwmaConfig::responsive()).unwrap();
        for i in 1..=20u64 {
            stable.on_interval(Nanos::from_secs(i), &busy_second(100));
            responsive.on_interval(Nanos::from_secs(i), &busy_second(100));
            assert!(!stable.admit_new_session(Nanos::from_secs(i)));
            assert!(!responsive.admit_new_session(Nanos::from_secs(i)));
        }
        stable.on_interval(Nanos::from_secs(21), &busy_second(80));
        responsive.on_interval(Nanos::from_secs(21), &busy_second(80));
        assert!(!stable.admit_new_session(Nanos::from_secs(21)));
        assert!(responsive.admit_new_session(Nanos::from_secs(21)));
        // Conversely, a single burst after calm closes only the responsive
        // policy: the stable one absorbs it (Section 7, stability).
        let mut stable = EwmaController::new(EwmaConfig::stable()).unwrap();
        let mut responsive = EwmaController::new(EwmaConfig::responsive()).unwrap();
        for i in 1..=20u64 {
            stable.on_interval(Nanos::from_secs(i), &busy_second(70));
            responsive.on_interval(Nanos::from_secs(i), &busy_second(70));
        }
        stable.on_interval(Nanos::from_secs(21), &busy_second(100));
        responsive.on_interval(Nanos::from_secs(21), &busy_second(100));
        assert!(stable.admit_new_session(Nanos::from_secs(21)));
        assert!(!responsive.admit_new_session(Nanos::from_secs(21)));
    }

    #[test]
    fn rejects_bad_parameters() {
        for (threshold, weight) in [(0.0, 0.5), (1.2, 0.5), (0.9, 0.0), (0.9, 1.5)] {
            assert!(EwmaController::new(EwmaConfig { threshold, weight }).is_err());
        }
    }
}
