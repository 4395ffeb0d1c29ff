//! The gate's counters: atomics shared by every worker and the metrics
//! endpoint, and their totals at one moment; the verdict-latency
//! histogram.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;

use vantage_core::admission::syn::record::GateCounts;

/// Label of `vantage_gate_syns_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerdictLabel {
    pub verdict: String,
}

/// Labels of `vantage_gate_listener_syns_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ListenerVerdictLabel {
    /// `address:port`, or `*:port` for a listener without an address.
    pub listener: String,
    pub verdict: String,
}

/// The SYN counters of one listener: accept, drop, reject.
pub type ListenerSyns = [Counter; 3];

/// Buckets of the verdict latency, seconds: 1 µs to 10 ms, 1-2.5-5 steps.
pub const VERDICT_LATENCY_BUCKETS: [f64; 13] = [
    1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2,
];

/// The gate's counters: atomics shared by every worker and the metrics
/// endpoint (prometheus-client counters are `Arc<AtomicU64>`; clones share).
#[derive(Clone, Debug)]
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
    /// `vantage_gate_listener_syns_total{listener,verdict}`: one series
    /// per configured listener and verdict, created when the listener is
    /// configured (bounded by the listeners ever configured).
    pub listener_syns: Family<ListenerVerdictLabel, Counter>,
    /// SYNs whose 4-tuple was seen within the retransmission window.
    pub retransmitted_syns: Counter,
    /// Seconds from a batch's first packet read to its verdicts sent.
    pub verdict_latency: Histogram,
    /// `vantage_gate_shortcut_syns_total{verdict}`: SYNs the kernel-side
    /// shortcut dropped and rejected (included in `dropped` and `rejected`;
    /// not split by listener, not checked for retransmission).
    pub shortcut_syns: Family<VerdictLabel, Counter>,
    pub shortcut_dropped: Counter,
    pub shortcut_rejected: Counter,
    /// Shortcut SYNs the filter, told of them late, would have decided
    /// otherwise (counted by the shortcut's verdict all the same).
    pub shortcut_disagreed: Counter,
}

impl Default for GateCounters {
    fn default() -> GateCounters {
        GateCounters::new()
    }
}

impl GateCounters {
    pub fn new() -> GateCounters {
        let syns = Family::<VerdictLabel, Counter>::default();
        let shortcut_syns = Family::<VerdictLabel, Counter>::default();
        let get_in = |family: &Family<VerdictLabel, Counter>, verdict: &str| {
            family
                .get_or_create(&VerdictLabel {
                    verdict: verdict.to_string(),
                })
                .clone()
        };
        let get = |verdict: &str| get_in(&syns, verdict);
        GateCounters {
            accepted: get("accept"),
            dropped: get("drop"),
            rejected: get("reject"),
            syns,
            passed: Counter::default(),
            overruns: Counter::default(),
            errors: Counter::default(),
            listener_syns: Family::default(),
            retransmitted_syns: Counter::default(),
            verdict_latency: Histogram::new(VERDICT_LATENCY_BUCKETS),
            shortcut_dropped: get_in(&shortcut_syns, "drop"),
            shortcut_rejected: get_in(&shortcut_syns, "reject"),
            shortcut_syns,
            shortcut_disagreed: Counter::default(),
        }
    }

    /// The accept, drop and reject counters of `listener` (created on the
    /// first call; later calls share them).
    pub fn listener_syns(&self, listener: &str) -> ListenerSyns {
        ["accept", "drop", "reject"].map(|verdict| {
            self.listener_syns
                .get_or_create(&ListenerVerdictLabel {
                    listener: listener.to_string(),
                    verdict: verdict.to_string(),
                })
                .clone()
        })
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
