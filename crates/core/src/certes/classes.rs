//! Certes per class of traffic (Certes paper, Section 3.2.4).
//!
//! A dropped SYN can be classified only by what the SYN carries: the
//! interface, source and destination address and port. One estimator runs
//! per class (per listener, per source prefix, …) with the same
//! configuration; a class first seen mid-stream starts its estimator then,
//! which is the mid-stream start of Appendix B.

use super::counters::IntervalCounters;
use super::model::{Certes, CertesConfig, CertesError, Estimate};
use std::collections::BTreeMap;

/// One [`Certes`] per class key.
#[derive(Clone, Debug)]
pub struct ClassifiedCertes<K: Ord + Clone> {
    /// A fresh estimator, copied for each new class (built once: its
    /// construction computes the recursion's critical failure rate).
    fresh: Certes,
    estimators: BTreeMap<K, Certes>,
}

impl<K: Ord + Clone> ClassifiedCertes<K> {
    /// Validates the configuration once for every class to come.
    pub fn new(config: CertesConfig) -> Result<Self, CertesError> {
        Ok(ClassifiedCertes {
            fresh: Certes::new(config)?,
            estimators: BTreeMap::new(),
        })
    }

    /// Feeds one interval: `counters` holds the classes that saw traffic;
    /// every known class not in it gets an empty interval, so that its
    /// retries keep coming due. Returns one estimate per known class.
    pub fn on_interval(
        &mut self,
        counters: &BTreeMap<K, IntervalCounters>,
    ) -> BTreeMap<K, Estimate> {
        for key in counters.keys() {
            if !self.estimators.contains_key(key) {
                self.estimators.insert(key.clone(), self.fresh.clone());
            }
        }
        let empty = IntervalCounters::default();
        self.estimators
            .iter_mut()
            .map(|(key, estimator)| {
                let c = counters.get(key).unwrap_or(&empty);
                (key.clone(), estimator.on_interval(c))
            })
            .collect()
    }

    pub fn classes(&self) -> impl Iterator<Item = &K> {
        self.estimators.keys()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::ClientMix;
    use crate::Nanos;

    #[test]
    fn classes_are_independent() {
        let config = CertesConfig::new(
            Nanos::from_millis(250),
            ClientMix::builtin("linux-6.5").unwrap(),
            Nanos::from_secs(21),
        );
        let mut classified = ClassifiedCertes::new(config.clone()).unwrap();
        let mut alone = Certes::new(config).unwrap();
        let busy = IntervalCounters {
            dropped: 30,
            accepted: 70,
            completed: 70,
            syn_to_end_sum: Nanos::from_millis(70 * 200),
            rtt_sum: Nanos::from_millis(70 * 20),
            ..Default::default()
        };
        let quiet = IntervalCounters {
            accepted: 5,
            completed: 5,
            syn_to_end_sum: Nanos::from_millis(5 * 100),
            ..Default::default()
        };
        for i in 0..200 {
            let mut map = BTreeMap::new();
            map.insert("busy", busy.clone());
            if i % 2 == 0 {
                map.insert("quiet", quiet.clone());
            }
            let out = classified.on_interval(&map);
            assert_eq!(out["busy"], alone.on_interval(&busy));
            if i > 0 {
                assert_eq!(out["quiet"].drop_rate, 0.0);
            }
        }
        assert_eq!(classified.classes().count(), 2);
    }
}
