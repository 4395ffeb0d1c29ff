//! The gate's counters: atomics shared by every worker and the metrics
//! endpoint, and their totals at one moment.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use vantage_core::admission::syn::record::GateCounts;

/// Label of `vantage_gate_syns_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerdictLabel {
    pub verdict: String,
}

/// The gate's counters: atomics shared by every worker and the metrics
/// endpoint (prometheus-client counters are `Arc<AtomicU64>`; clones share).
#[derive(Clone, Debug, Default)]
pub struct GateCounters {
    /// `vantage_gate_syns_total{verdict}`.
    pub syns: Family<VerdictLabel, Counter>,
    pub accepted: Counter,
    pub dropped: Counter,
    pub rejected: Counter,
    /// Packets that were not SYNs to a listener (or not parsable).
    pub passed: Counter,
    /// Packets the kernel could not deliver (packet-id gaps), accepted
    /// unseen (fail-open).
    pub overruns: Counter,
    /// Verdicts the kernel refused, malformed messages, failed sends.
    pub errors: Counter,
}

impl GateCounters {
    pub fn new() -> GateCounters {
        let syns = Family::<VerdictLabel, Counter>::default();
        let get = |verdict: &str| {
            syns.get_or_create(&VerdictLabel {
                verdict: verdict.to_string(),
            })
            .clone()
        };
        GateCounters {
            accepted: get("accept"),
            dropped: get("drop"),
            rejected: get("reject"),
            syns,
            passed: Counter::default(),
            overruns: Counter::default(),
            errors: Counter::default(),
        }
    }

    pub fn add(&self, counts: &GateCounts) {
        for (counter, n) in [
            (&self.accepted, counts.accepted),
            (&self.dropped, counts.dropped),
            (&self.rejected, counts.rejected),
            (&self.passed, counts.passed),
        ] {
            if n > 0 {
                counter.inc_by(n);
            }
        }
    }

    /// Every counter's total at this moment.
    pub fn totals(&self) -> GateCounts {
        GateCounts {
            accepted: self.accepted.get(),
            dropped: self.dropped.get(),
            rejected: self.rejected.get(),
            passed: self.passed.get(),
            overruns: self.overruns.get(),
            errors: self.errors.get(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_totals_subtract() {
        let counters = GateCounters::new();
        let before = counters.totals();
        counters.add(&GateCounts {
            accepted: 1,
            dropped: 2,
            rejected: 3,
            passed: 4,
            ..GateCounts::default()
        });
        counters.overruns.inc_by(5);
        let delta = counters.totals().since(&before);
        assert_eq!(delta.syns(), 6);
        assert_eq!(delta.passed, 4);
        assert_eq!(delta.overruns, 5);
        assert_eq!(delta.errors, 0);
    }
}
