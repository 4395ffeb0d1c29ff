//! The gate's metrics: a prometheus-client registry, served by the shared
//! endpoint ([`crate::metrics`]) in the format the scraper asks for.
//!
//! Counters are the workers' own atomics ([`GateCounters`]); the gauges
//! describe the filter (its [`FilterSnapshot`]) and are set at every
//! scrape and every interval. A gauge exists only when the filter kind has
//! the quantity (the Abacus second stage, Greedy's threshold), so a scrape
//! never shows a made-up zero. Rates are left to `rate()` over counters;
//! the two rate gauges are the filter's own state (r_t, λ).
//!
//! | metric | type | meaning (Abacus paper symbol) |
//! |---|---|---|
//! | `vantage_gate_syns_total{verdict="accept"\|"drop"\|"reject"}` | counter | SYNs to a listener by the filter's verdict (also in a dry run) |
//! | `vantage_gate_listener_syns_total{listener="addr:port",verdict}` | counter | the same, per configured listener (`*:port` without an address) |
//! | `vantage_gate_retransmitted_syns_total` | counter | SYNs whose 4-tuple the gate saw within the last 10 s (fixed table of 65,536 slots; a colliding newer SYN evicts an older) |
//! | `vantage_gate_shortcut_syns_total{verdict="drop"\|"reject"}` | counter | of `vantage_gate_syns_total`, SYNs the kernel-side shortcut decided while the filter's verdict was constant (not in the listener split, not checked for retransmission) |
//! | `vantage_gate_shortcut_disagreements_total` | counter | shortcut SYNs the filter, told of them late, would have decided otherwise |
//! | `vantage_gate_verdict_latency_seconds` | histogram | a batch's first packet read → its verdicts sent; buckets 1 µs … 10 ms |
//! | `vantage_gate_packets_passed_total` | counter | queued packets that were not SYNs to a listener, accepted unchanged |
//! | `vantage_gate_queue_overruns_total` | counter | packets the kernel could not hand to the gate and accepted unseen (fail-open) |
//! | `vantage_gate_errors_total` | counter | verdicts the kernel refused, malformed messages, failed sends |
//! | `vantage_gate_reloads_total{result="ok"\|"refused"}` | counter | SIGHUP reloads |
//! | `vantage_gate_tokens` | gauge | tokens in the first-stage bucket |
//! | `vantage_gate_bucket_size_tokens` | gauge | W |
//! | `vantage_gate_refill_rate` | gauge | r_t, tokens per second |
//! | `vantage_gate_arrival_rate_estimate` | gauge | λ, per second (abacus, greedy) |
//! | `vantage_gate_future_tokens` | gauge | Σ A\[i\] (abacus) |
//! | `vantage_gate_chain_borrowed` | gauge | Σ B\[i\] (abacus) |
//! | `vantage_gate_drop_threshold` | gauge | λ_thresh (greedy) |
//! | `vantage_gate_drop_budget` | gauge | drops left this period (greedy) |
//! | `vantage_gate_dry_run` | gauge | 1 in a dry run |
//! | `vantage_gate_rules_intact` | gauge | 1 while the gate's rules are all in place, 0 once they vanished (then it stops) |
//! | `vantage_gate_filter_info{kind}` | gauge | 1, labelled with the filter kind |
//! | `vantage_gate_accept_queue_connections` | gauge | accept-queue length (`refill_rate = "measure"`) |
//! | `vantage_gate_passive_opens_total` | counter | handshakes the kernel completed since the gate started (`"measure"`) |
//! | `vantage_metrics_connections_refused_total` | counter | metrics connections closed at once (too many open) |
//! | `vantage_metrics_requests_refused_total` | counter | metrics requests answered 4xx |
//! | `vantage_build_info{version}`, `process_*` | | build and process ([`crate::metrics`]) |

use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};
use vantage_core::admission::syn::{FilterKind, FilterSnapshot};

use super::counters::GateCounters;
use crate::metrics::{register_daemon_metrics, EndpointCounters, Format};

type FloatGauge = Gauge<f64, AtomicU64>;

/// Label of `vantage_gate_reloads_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReloadLabel {
    pub result: String,
}

/// The registry and the gauges the gate sets.
#[derive(Debug)]
pub struct GateMetrics {
    registry: Registry,
    endpoint: EndpointCounters,
    reloads: Family<ReloadLabel, Counter>,
    tokens: Gauge,
    bucket_size: Gauge,
    refill_rate: FloatGauge,
    arrival_rate: Option<FloatGauge>,
    future_tokens: Option<Gauge>,
    chain_borrowed: Option<Gauge>,
    drop_threshold: Option<FloatGauge>,
    drop_budget: Option<Gauge>,
    accept_queue: Option<Gauge>,
    passive_opens: Option<Counter>,
    passive_opens_seen: AtomicU64,
    rules_intact: Gauge,
}

fn int(value: u64) -> i64 {
    value.min(i64::MAX as u64) as i64
}

impl GateMetrics {
    /// Registers every metric: `counters` as they are, gauges for what
    /// `initial` (the filter's first snapshot) has; with `measuring`, the
    /// capacity measurement's too.
    pub fn new(
        counters: &GateCounters,
        kind: FilterKind,
        initial: &FilterSnapshot,
        dry_run: bool,
        measuring: bool,
    ) -> GateMetrics {
        let mut registry = Registry::default();
        registry.register(
            "vantage_gate_syns",
            "SYNs to a protected listener, by the filter's verdict",
            counters.syns.clone(),
        );
        registry.register(
            "vantage_gate_listener_syns",
            "SYNs to a protected listener, by listener and the filter's verdict",
            counters.listener_syns.clone(),
        );
        registry.register(
            "vantage_gate_retransmitted_syns",
            "SYNs whose 4-tuple the gate saw within the last 10 s (client retransmissions)",
            counters.retransmitted_syns.clone(),
        );
        registry.register(
            "vantage_gate_shortcut_syns",
            "Of the SYNs to a protected listener, those the kernel-side shortcut decided while the filter's verdict was constant",
            counters.shortcut_syns.clone(),
        );
        registry.register(
            "vantage_gate_shortcut_disagreements",
            "Shortcut SYNs the filter, told of them late, would have decided otherwise",
            counters.shortcut_disagreed.clone(),
        );
        registry.register_with_unit(
            "vantage_gate_verdict_latency",
            "Time from a batch's first packet read to its verdicts sent",
            Unit::Seconds,
            counters.verdict_latency.clone(),
        );
        registry.register(
            "vantage_gate_packets_passed",
            "Queued packets that were not SYNs to a listener, accepted unchanged",
            counters.passed.clone(),
        );
        registry.register(
            "vantage_gate_queue_overruns",
            "Packets the kernel could not hand to the gate and accepted unseen (fail-open)",
            counters.overruns.clone(),
        );
        registry.register(
            "vantage_gate_errors",
            "Verdicts the kernel refused, malformed messages and failed sends",
            counters.errors.clone(),
        );
        let reloads = Family::<ReloadLabel, Counter>::default();
        for result in ["ok", "refused"] {
            reloads
                .get_or_create(&ReloadLabel {
                    result: result.to_string(),
                })
                .inc_by(0);
        }
        registry.register(
            "vantage_gate_reloads",
            "Configuration reloads (SIGHUP), applied or refused",
            reloads.clone(),
        );
        let tokens = Gauge::default();
        registry.register(
            "vantage_gate_tokens",
            "Tokens in the first-stage bucket",
            tokens.clone(),
        );
        let bucket_size = Gauge::default();
        registry.register_with_unit(
            "vantage_gate_bucket_size",
            "Size W of the first-stage bucket",
            Unit::Other("tokens".into()),
            bucket_size.clone(),
        );
        let refill_rate = FloatGauge::default();
        registry.register(
            "vantage_gate_refill_rate",
            "Refill rate r_t of the first-stage bucket, tokens per second",
            refill_rate.clone(),
        );
        let arrival_rate = initial.arrival_rate.map(|_| {
            let g = FloatGauge::default();
            registry.register(
                "vantage_gate_arrival_rate_estimate",
                "The filter's estimate lambda of the rate of new connection requests, per second",
                g.clone(),
            );
            g
        });
        let future_tokens = initial.future_tokens.map(|_| {
            let g = Gauge::default();
            registry.register(
                "vantage_gate_future_tokens",
                "Tokens in the Abacus Filter's future buckets (sum of A[i])",
                g.clone(),
            );
            g
        });
        let chain_borrowed = initial.chain_borrowed.map(|_| {
            let g = Gauge::default();
            registry.register(
                "vantage_gate_chain_borrowed",
                "Chain-borrowed retransmissions the Abacus Filter expects (sum of B[i])",
                g.clone(),
            );
            g
        });
        let drop_threshold = initial.drop_threshold.map(|_| {
            let g = FloatGauge::default();
            registry.register(
                "vantage_gate_drop_threshold",
                "Predictive Greedy's drop threshold lambda_thresh of the current period",
                g.clone(),
            );
            g
        });
        let drop_budget = initial.drop_budget.map(|_| {
            let g = Gauge::default();
            registry.register(
                "vantage_gate_drop_budget",
                "Drops Predictive Greedy still allows in the current period",
                g.clone(),
            );
            g
        });
        let dry = Gauge::<i64, std::sync::atomic::AtomicI64>::default();
        dry.set(i64::from(dry_run));
        registry.register(
            "vantage_gate_dry_run",
            "1 when the gate computes verdicts but accepts every packet",
            dry,
        );
        let rules_intact = Gauge::default();
        rules_intact.set(1);
        registry.register(
            "vantage_gate_rules_intact",
            "1 while the gate's rules are all in place, 0 once they vanished",
            rules_intact.clone(),
        );
        let filter_kind = Family::<Vec<(String, String)>, Gauge>::default();
        filter_kind
            .get_or_create(&vec![("kind".to_string(), kind.name().to_string())])
            .set(1);
        registry.register(
            "vantage_gate_filter_info",
            "The SYN filter the gate runs (constant 1)",
            filter_kind,
        );
        let (accept_queue, passive_opens) = if measuring {
            let queue = Gauge::default();
            registry.register_with_unit(
                "vantage_gate_accept_queue",
                "Connections waiting in the listeners' accept queues at the last interval",
                Unit::Other("connections".into()),
                queue.clone(),
            );
            let opens = Counter::default();
            registry.register(
                "vantage_gate_passive_opens",
                "Handshakes the kernel completed (Tcp PassiveOpens) since the gate started",
                opens.clone(),
            );
            (Some(queue), Some(opens))
        } else {
            (None, None)
        };
        let endpoint = EndpointCounters::default();
        register_daemon_metrics(&mut registry, &endpoint);
        let metrics = GateMetrics {
            registry,
            endpoint,
            reloads,
            tokens,
            bucket_size,
            refill_rate,
            arrival_rate,
            future_tokens,
            chain_borrowed,
            drop_threshold,
            drop_budget,
            accept_queue,
            passive_opens,
            passive_opens_seen: AtomicU64::new(u64::MAX),
            rules_intact,
        };
        metrics.set_filter(initial);
        metrics
    }

    /// The endpoint's own counters (registered here).
    pub fn endpoint_counters(&self) -> EndpointCounters {
        self.endpoint.clone()
    }

    /// Counts a reload, applied (`ok`) or not.
    pub fn count_reload(&self, applied: bool) {
        self.reloads
            .get_or_create(&ReloadLabel {
                result: if applied { "ok" } else { "refused" }.to_string(),
            })
            .inc();
    }

    /// Whether the gate's rules are all in place.
    pub fn set_rules_intact(&self, intact: bool) {
        self.rules_intact.set(i64::from(intact));
    }

    /// Sets the filter gauges from a snapshot.
    pub fn set_filter(&self, s: &FilterSnapshot) {
        self.tokens.set(int(s.tokens));
        self.bucket_size.set(int(s.bucket_size));
        self.refill_rate.set(s.refill_rate);
        if let (Some(g), Some(v)) = (&self.arrival_rate, s.arrival_rate) {
            g.set(v);
        }
        if let (Some(g), Some(v)) = (&self.future_tokens, s.future_tokens) {
            g.set(int(v));
        }
        if let (Some(g), Some(v)) = (&self.chain_borrowed, s.chain_borrowed) {
            g.set(int(v));
        }
        if let (Some(g), Some(v)) = (&self.drop_threshold, s.drop_threshold) {
            g.set(v);
        }
        if let (Some(g), Some(v)) = (&self.drop_budget, s.drop_budget) {
            g.set(int(v));
        }
    }

    /// Sets the capacity-measurement metrics (when measuring) from the
    /// interval's readings: the accept queue and the kernel's
    /// `PassiveOpens` (the counter grows by its increase).
    pub fn set_capacity(&self, accept_queue: u64, passive_opens: u64) {
        if let Some(g) = &self.accept_queue {
            g.set(int(accept_queue));
        }
        if let Some(c) = &self.passive_opens {
            let before = self
                .passive_opens_seen
                .swap(passive_opens, Ordering::Relaxed);
            if before != u64::MAX && passive_opens > before {
                c.inc_by(passive_opens - before);
            }
        }
    }

    /// Every metric in `format`.
    pub fn encode(&self, format: Format) -> String {
        crate::metrics::encode(&self.registry, format)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vantage_core::admission::syn::record::GateCounts;
    use vantage_core::admission::syn::{AbacusWindow, FilterParams};
    use vantage_core::tcp::ClientMix;
    use vantage_core::Nanos;

    fn abacus_snapshot() -> FilterSnapshot {
        let params = FilterParams {
            bucket_size: 120,
            refill_rate: 120.0,
            interval: Nanos::from_secs(1),
            window: AbacusWindow::Fixed(Nanos::from_secs(50)),
            greedy_window: Some(Nanos::from_secs(50)),
            delay_cost: 1.0,
            reject_cost: 75.0,
            arrival_smoothing: 0.1,
        };
        params
            .build(
                FilterKind::Abacus,
                &ClientMix::builtin("linux-6.5").unwrap(),
            )
            .unwrap()
            .snapshot()
    }

    #[test]
    fn the_text_has_every_name_and_value() {
        let counters = GateCounters::new();
        counters.add(&GateCounts {
            accepted: 2,
            dropped: 3,
            rejected: 4,
            passed: 5,
            ..GateCounts::default()
        });
        counters.overruns.inc_by(6);
        counters.listener_syns("10.0.0.1:80")[1].inc_by(3);
        counters.retransmitted_syns.inc_by(2);
        counters.verdict_latency.observe(0.000_05);
        let metrics = GateMetrics::new(
            &counters,
            FilterKind::Abacus,
            &abacus_snapshot(),
            true,
            true,
        );
        metrics.set_capacity(7, 100);
        metrics.set_capacity(7, 112);
        metrics.count_reload(false);
        let text = metrics.encode(Format::OpenMetrics);
        for line in [
            "vantage_gate_syns_total{verdict=\"accept\"} 2",
            "vantage_gate_syns_total{verdict=\"drop\"} 3",
            "vantage_gate_syns_total{verdict=\"reject\"} 4",
            "vantage_gate_packets_passed_total 5",
            "vantage_gate_queue_overruns_total 6",
            "vantage_gate_errors_total 0",
            "vantage_gate_listener_syns_total{listener=\"10.0.0.1:80\",verdict=\"drop\"} 3",
            "vantage_gate_listener_syns_total{listener=\"10.0.0.1:80\",verdict=\"accept\"} 0",
            "vantage_gate_retransmitted_syns_total 2",
            "# TYPE vantage_gate_verdict_latency_seconds histogram",
            "vantage_gate_verdict_latency_seconds_bucket{le=\"0.000001\"} 0",
            "vantage_gate_verdict_latency_seconds_bucket{le=\"0.00005\"} 1",
            "vantage_gate_verdict_latency_seconds_bucket{le=\"0.01\"} 1",
            "vantage_gate_verdict_latency_seconds_bucket{le=\"+Inf\"} 1",
            "vantage_gate_verdict_latency_seconds_count 1",
            "vantage_gate_tokens 120",
            "vantage_gate_bucket_size_tokens 120",
            "vantage_gate_refill_rate 120.0",
            "vantage_gate_arrival_rate_estimate 0.0",
            "vantage_gate_future_tokens ",
            "vantage_gate_chain_borrowed 0",
            "vantage_gate_dry_run 1",
            "vantage_gate_rules_intact 1",
            "vantage_gate_filter_info{kind=\"abacus\"} 1",
            "vantage_gate_accept_queue_connections 7",
            "vantage_gate_passive_opens_total 12",
            "vantage_gate_reloads_total{result=\"refused\"} 1",
            "vantage_build_info{version=",
            "process_open_fds ",
            "process_cpu_seconds_total ",
            "# TYPE vantage_gate_syns counter",
            "# UNIT vantage_gate_bucket_size_tokens tokens",
            "# EOF",
        ] {
            assert!(text.contains(line), "missing `{line}` in\n{text}");
        }
        // No Greedy gauges for an Abacus Filter.
        assert!(!text.contains("drop_threshold"), "{text}");
        assert!(!text.contains("per_second"), "{text}");
        // The 0.0.4 text: every family has HELP and TYPE, counters named
        // by their sample.
        let text = metrics.encode(Format::Text);
        assert!(
            text.contains("# TYPE vantage_gate_syns_total counter"),
            "{text}"
        );
        assert!(text.contains("# HELP vantage_gate_syns_total "), "{text}");
        assert!(!text.contains("# EOF"), "{text}");
        let mut typed = 0;
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let name = rest.split(' ').next().unwrap();
                assert!(
                    text.contains(&format!("# HELP {name} ")),
                    "no HELP for {name}"
                );
                typed += 1;
            }
        }
        assert!(typed > 15, "{text}");
    }

    #[test]
    fn a_token_bucket_has_no_second_stage_gauges() {
        let counters = GateCounters::new();
        let snapshot = FilterSnapshot {
            tokens: 3,
            bucket_size: 5,
            refill_rate: 0.5,
            ..FilterSnapshot::default()
        };
        let metrics = GateMetrics::new(&counters, FilterKind::Tbf, &snapshot, false, false);
        let text = metrics.encode(Format::Text);
        assert!(text.contains("vantage_gate_tokens 3"), "{text}");
        assert!(text.contains("vantage_gate_dry_run 0"), "{text}");
        for absent in [
            "arrival_rate",
            "future_tokens",
            "chain_borrowed",
            "accept_queue",
        ] {
            assert!(!text.contains(absent), "{absent} in\n{text}");
        }
    }
}
