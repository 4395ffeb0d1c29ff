//! The watch daemon's Prometheus families (names by the Prometheus naming
//! rules: a `vantage_certes_` prefix, base units, `_total` counters, `_ratio`
//! for fractions), in the registry the shared endpoint serves.
//!
//! The histogram of client-perceived response time is the model's
//! distribution (`Estimate::cdf`: the SYN-to-END distribution shifted by each
//! retry's wait, and the give-ups at their wait) times the interval's
//! transactions, added up over the intervals. Its counts are expected
//! counts, exported rounded (cumulative bucket by cumulative bucket, so they
//! stay monotone); its `_sum` is the sum of Eq. 4's numerators.
//!
//! Bucket bounds ([`bucket_bounds`]): every instant a built-in client
//! profile sends a SYN or gives up (Table 1 and today's kernels: 1, 2, 3,
//! 3.4, 4, 5, 7, 9, 10.1, 11, 15, 19, 21, … 180 s) — a client served on its
//! k-th retransmission lands between its k-th and (k+1)-th SYN — and, below
//! the first retransmission, 5 ms to 500 ms for the served-at-once. The
//! bounds are the same on every host whatever its configuration, so a
//! fleet's histograms add up (`sum by (le)`).

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::{Registry, Unit};
use vantage_core::certes::observed::ExactFigures;
use vantage_core::certes::summary::IntervalRow;
use vantage_core::certes::Estimate;
use vantage_core::tcp::syn_schedule::BUILTIN_PROFILES;
use vantage_core::tcp::SynProfile;

use super::capture::LearnedRecord;
use super::gate_input::{GatePoll, GateRecord, LINE_OUTCOMES};
use super::proxy_input::{ProxyGate, PROXY_LINE_OUTCOMES};
use crate::metrics::{register_daemon_metrics, EndpointCounters, Format};

type Labels = Vec<(String, String)>;
type FloatCounter = Counter<f64, AtomicU64>;
type FloatGauge = Gauge<f64, AtomicU64>;

/// Below the first retransmission: the clients served at once.
const SUBSECOND_BOUNDS: [f64; 7] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5];

/// The histogram's upper bounds, seconds, increasing (see the module docs).
pub fn bucket_bounds() -> Vec<f64> {
    let mut bounds: Vec<f64> = SUBSECOND_BOUNDS.to_vec();
    for name in BUILTIN_PROFILES {
        if let Ok(profile) = SynProfile::builtin(name) {
            for k in 1..=profile.retransmissions() {
                bounds.push(profile.send_offset(k).as_secs_f64());
            }
            bounds.push(profile.give_up.as_secs_f64());
        }
    }
    // Offsets are whole milliseconds: rounding removes float noise.
    let mut bounds: Vec<f64> = bounds
        .into_iter()
        .map(|b| (b * 1000.0).round() / 1000.0)
        .collect();
    bounds.sort_by(f64::total_cmp);
    bounds.dedup();
    bounds
}

/// The model's expected counts per bucket, added up over intervals.
#[derive(Debug)]
pub struct ModelHistogram {
    inner: Mutex<HistogramState>,
}

#[derive(Debug)]
struct HistogramState {
    bounds: Vec<f64>,
    /// Expected transactions at or below each bound.
    cumulative: Vec<f64>,
    transactions: f64,
    sum_seconds: f64,
}

impl Default for ModelHistogram {
    fn default() -> ModelHistogram {
        let bounds = bucket_bounds();
        ModelHistogram {
            inner: Mutex::new(HistogramState {
                cumulative: vec![0.0; bounds.len()],
                bounds,
                transactions: 0.0,
                sum_seconds: 0.0,
            }),
        }
    }
}

impl ModelHistogram {
    /// Adds one interval's estimate.
    pub fn add(&self, estimate: &Estimate) {
        let transactions = estimate.transactions();
        if transactions <= 0.0 {
            return;
        }
        let mut state = match self.inner.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        let HistogramState {
            bounds,
            cumulative,
            transactions: total,
            sum_seconds,
        } = &mut *state;
        for (bound, c) in bounds.iter().zip(cumulative.iter_mut()) {
            *c += transactions * estimate.cdf(bound * 1e9);
        }
        *total += transactions;
        *sum_seconds += estimate.total_time_nanos() / 1e9;
    }

    /// Rounded count, and the per-bucket counts as exported (the last is
    /// `+Inf`).
    pub fn exported(&self) -> (f64, u64, Vec<(f64, u64)>) {
        let state = match self.inner.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        let count = state.transactions.round() as u64;
        let mut buckets = Vec::with_capacity(state.bounds.len() + 1);
        let mut below = 0u64;
        for (bound, c) in state.bounds.iter().zip(&state.cumulative) {
            let at_or_below = (c.round() as u64).clamp(below, count);
            buckets.push((*bound, at_or_below - below));
            below = at_or_below;
        }
        buckets.push((f64::MAX, count - below));
        (state.sum_seconds, count, buckets)
    }
}

impl TypedMetric for ModelHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for ModelHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let (sum, count, buckets) = self.exported();
        encoder
            .encode_histogram::<prometheus_client::encoding::NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// Why the capture left something out or decided early (`CaptureNotes`
/// and the decoder's counts), by reason.
pub const NOTE_REASONS: [&str; 11] = [
    "packets_not_decoded",
    "connections_without_syn",
    "connections_to_other_servers",
    "connections_evicted",
    "connections_not_kept",
    "late_counts",
    "decided_early",
    "syns_after_answer",
    "rtt_missing",
    "abandoned",
    "refused_not_learned",
];

/// The families.
pub struct WatchMetrics {
    registry: Registry,
    endpoint: EndpointCounters,
    response_time: Family<Labels, ModelHistogram>,
    mean: Family<Labels, FloatGauge>,
    p50: Family<Labels, FloatGauge>,
    p90: Family<Labels, FloatGauge>,
    p99: Family<Labels, FloatGauge>,
    syn_to_end_mean: Family<Labels, FloatGauge>,
    give_up_ratio: Family<Labels, FloatGauge>,
    syn_drop_ratio: Family<Labels, FloatGauge>,
    exact_mean: Family<Labels, FloatGauge>,
    syns_dropped: Family<Labels, Counter>,
    syns_accepted: Family<Labels, Counter>,
    syns_refused: Family<Labels, Counter>,
    completed: Family<Labels, Counter>,
    gave_up_estimated: Family<Labels, FloatCounter>,
    syn_to_end_seconds: Family<Labels, FloatCounter>,
    exact_transactions: Family<Labels, Counter>,
    exact_client_time: Family<Labels, FloatCounter>,
    failures: Family<Labels, Counter>,
    failures_seen: Mutex<BTreeMap<(String, &'static str), u64>>,
    intervals: Counter,
    packets: Counter,
    ring_packets: Counter,
    ring_drops: Counter,
    ring_freezes: Counter,
    kernel: Family<Labels, Counter>,
    notes: Family<Labels, Counter>,
    notes_seen: Mutex<BTreeMap<&'static str, u64>>,
    open_connections: Gauge,
    held_connections: Gauge,
    reloads: Family<Labels, Counter>,
    learned_share: Family<Labels, FloatGauge>,
    learned_give_up: Family<Labels, FloatGauge>,
    learned_attempts: Family<Labels, Gauge>,
    model_learned: Family<Labels, Gauge>,
    /// Per class, the learned series last set (removed when learned again).
    learned_series: Mutex<BTreeMap<String, Vec<Labels>>>,
    gate_syns: Family<Labels, Counter>,
    gate_log_lines: Family<Labels, Counter>,
    gate_log_waiting: Family<Labels, Gauge>,
    gate_intervals: Family<Labels, Counter>,
    gate_mean: Family<Labels, FloatGauge>,
    gate_p99: Family<Labels, FloatGauge>,
    gate_syn_drop_ratio: Family<Labels, FloatGauge>,
    gate_give_up_ratio: Family<Labels, FloatGauge>,
    proxy_log_lines: Family<Labels, Counter>,
    proxy_log_waiting: Family<Labels, Gauge>,
    proxy_intervals: Counter,
    proxy_gate_intervals: Family<Labels, Counter>,
}

/// `coverage="covered"` or `"not_covered"`: whether a gate's log covered
/// an interval.
fn coverage_label(covered: bool) -> Labels {
    let coverage = if covered { "covered" } else { "not_covered" };
    vec![("coverage".to_string(), coverage.to_string())]
}

fn class_label(class: &str) -> Labels {
    let name = if class.is_empty() { "all" } else { class };
    vec![("class".to_string(), name.to_string())]
}

impl Default for WatchMetrics {
    fn default() -> WatchMetrics {
        WatchMetrics::new()
    }
}

impl WatchMetrics {
    pub fn new() -> WatchMetrics {
        let mut registry = Registry::default();
        let m = WatchMetrics {
            registry: Registry::default(),
            endpoint: EndpointCounters::default(),
            response_time: Family::default(),
            mean: Family::default(),
            p50: Family::default(),
            p90: Family::default(),
            p99: Family::default(),
            syn_to_end_mean: Family::default(),
            give_up_ratio: Family::default(),
            syn_drop_ratio: Family::default(),
            exact_mean: Family::default(),
            syns_dropped: Family::default(),
            syns_accepted: Family::default(),
            syns_refused: Family::default(),
            completed: Family::default(),
            gave_up_estimated: Family::default(),
            syn_to_end_seconds: Family::default(),
            exact_transactions: Family::default(),
            exact_client_time: Family::default(),
            failures: Family::default(),
            failures_seen: Mutex::new(BTreeMap::new()),
            intervals: Counter::default(),
            packets: Counter::default(),
            ring_packets: Counter::default(),
            ring_drops: Counter::default(),
            ring_freezes: Counter::default(),
            kernel: Family::default(),
            notes: Family::default(),
            notes_seen: Mutex::new(BTreeMap::new()),
            open_connections: Gauge::default(),
            held_connections: Gauge::default(),
            reloads: Family::default(),
            learned_share: Family::default(),
            learned_give_up: Family::default(),
            learned_attempts: Family::default(),
            model_learned: Family::default(),
            learned_series: Mutex::new(BTreeMap::new()),
            gate_syns: Family::default(),
            gate_log_lines: Family::default(),
            gate_log_waiting: Family::default(),
            gate_intervals: Family::default(),
            gate_mean: Family::default(),
            gate_p99: Family::default(),
            gate_syn_drop_ratio: Family::default(),
            gate_give_up_ratio: Family::default(),
            proxy_log_lines: Family::default(),
            proxy_log_waiting: Family::default(),
            proxy_intervals: Counter::default(),
            proxy_gate_intervals: Family::default(),
        };
        registry.register_with_unit(
            "vantage_certes_client_response_time",
            "Client-perceived response time estimated by Certes (SYN retries and give-ups included), expected counts rounded",
            Unit::Seconds,
            m.response_time.clone(),
        );
        registry.register_with_unit(
            "vantage_certes_interval_mean",
            "Last closed interval: mean client-perceived response time (Eq. 4), NaN when no transaction ended",
            Unit::Seconds,
            m.mean.clone(),
        );
        for (name, help, family) in [
            (
                "vantage_certes_interval_p50",
                "Last closed interval: median of the model's client-perceived response time, NaN when no transaction ended",
                &m.p50,
            ),
            (
                "vantage_certes_interval_p90",
                "Last closed interval: 90th percentile of the model's client-perceived response time, NaN when no transaction ended",
                &m.p90,
            ),
            (
                "vantage_certes_interval_p99",
                "Last closed interval: 99th percentile of the model's client-perceived response time, NaN when no transaction ended",
                &m.p99,
            ),
        ] {
            registry.register_with_unit(name, help, Unit::Seconds, family.clone());
        }
        registry.register_with_unit(
            "vantage_certes_interval_syn_to_end_mean",
            "Last closed interval: mean SYN-to-END of completed connections (what server-side metrics report)",
            Unit::Seconds,
            m.syn_to_end_mean.clone(),
        );
        registry.register(
            "vantage_certes_interval_give_up_ratio",
            "Last closed interval: share of transactions that are clients giving up",
            m.give_up_ratio.clone(),
        );
        registry.register(
            "vantage_certes_interval_syn_drop_ratio",
            "Last closed interval: share of SYNs the server dropped (DR, Eq. 5)",
            m.syn_drop_ratio.clone(),
        );
        registry.register_with_unit(
            "vantage_certes_interval_exact_mean",
            "Last closed interval: exact mean client-perceived time of connections whose SYNs were all seen, NaN when none ended",
            Unit::Seconds,
            m.exact_mean.clone(),
        );
        registry.register(
            "vantage_certes_syns_dropped",
            "SYNs the server dropped (DROPPED)",
            m.syns_dropped.clone(),
        );
        registry.register(
            "vantage_certes_syns_accepted",
            "SYNs the server answered with a SYN-ACK (ACCEPTED)",
            m.syns_accepted.clone(),
        );
        registry.register(
            "vantage_certes_syns_refused",
            "SYNs the server answered with a RST (REFUSED): failures, in the drop rate's denominator",
            m.syns_refused.clone(),
        );
        registry.register(
            "vantage_certes_completed",
            "Connections ended (COMPLETED)",
            m.completed.clone(),
        );
        registry.register(
            "vantage_certes_gave_up_estimated",
            "Clients the model estimates gave up (fractional)",
            m.gave_up_estimated.clone(),
        );
        registry.register_with_unit(
            "vantage_certes_syn_to_end",
            "Sum of SYN-to-END of completed connections",
            Unit::Seconds,
            m.syn_to_end_seconds.clone(),
        );
        registry.register(
            "vantage_certes_exact_transactions",
            "Exact figures: transactions (completed and given up) whose SYNs the capture saw",
            m.exact_transactions.clone(),
        );
        registry.register_with_unit(
            "vantage_certes_exact_client_time",
            "Exact figures: summed client-perceived time of those transactions",
            Unit::Seconds,
            m.exact_client_time.clone(),
        );
        registry.register(
            "vantage_certes_failures",
            "Connections that failed their client, by kind: refused (SYN answered by RST), reset (by the server before data), aborted (by the client before data), gave_up (no SYN answered)",
            m.failures.clone(),
        );
        registry.register(
            "vantage_certes_intervals",
            "Intervals closed and estimated",
            m.intervals.clone(),
        );
        registry.register(
            "vantage_certes_packets",
            "Packets taken from the ring",
            m.packets.clone(),
        );
        registry.register(
            "vantage_certes_ring_packets",
            "Packets the kernel filter kept for the ring (PACKET_STATISTICS)",
            m.ring_packets.clone(),
        );
        registry.register(
            "vantage_certes_ring_drops",
            "Packets the kernel dropped because the ring was full (PACKET_STATISTICS)",
            m.ring_drops.clone(),
        );
        registry.register(
            "vantage_certes_ring_freezes",
            "Times the ring was full (PACKET_STATISTICS)",
            m.ring_freezes.clone(),
        );
        registry.register(
            "vantage_certes_kernel",
            "Kernel counters of the network namespace over the closed intervals, as a cross-check (counter: ListenDrops, ListenOverflows, PassiveOpens)",
            m.kernel.clone(),
        );
        registry.register(
            "vantage_certes_capture_notes",
            "What the capture left out or decided early, by reason (docs/certes.md)",
            m.notes.clone(),
        );
        registry.register(
            "vantage_certes_open_connections",
            "Connections open in the connection table",
            m.open_connections.clone(),
        );
        registry.register(
            "vantage_certes_held_connections",
            "Connections held while the clock decides their outcome",
            m.held_connections.clone(),
        );
        registry.register(
            "vantage_certes_reloads",
            "Configuration reloads (SIGHUP), by result",
            m.reloads.clone(),
        );
        registry.register(
            "vantage_certes_learned_profile_share",
            "With learn: share of each client SYN profile in the mixture learned from the SYN gaps (profiles with one schedule share its weight evenly)",
            m.learned_share.clone(),
        );
        registry.register(
            "vantage_certes_learned_give_up_share",
            "With learn: share of clients learned to give up after `after` and no later than `by` seconds (by=+Inf: not before their last SYN)",
            m.learned_give_up.clone(),
        );
        registry.register(
            "vantage_certes_learned_attempts",
            "With learn: connection attempts the learner was fed, by use (classified, classified_with_missing_syns, single_syn, unclassified, not_kept)",
            m.learned_attempts.clone(),
        );
        registry.register(
            "vantage_certes_model_learned",
            "With learn: 1 once the class's model runs with the learned clients (absent: the configured ones)",
            m.model_learned.clone(),
        );
        registry.register(
            "vantage_certes_gate_syns",
            "With [gate]: the gate's verdicts on SYNs to the listeners, as its log counted them (verdict: accepted, dropped, rejected)",
            m.gate_syns.clone(),
        );
        registry.register(
            "vantage_certes_gate_log_lines",
            "With [gate]: lines of the gate's log, by outcome (read, invalid, oversized, wrong_interval, no_wall_clock)",
            m.gate_log_lines.clone(),
        );
        registry.register(
            "vantage_certes_gate_log_waiting",
            "With [gate]: 1 while the gate's log file is missing (waited for)",
            m.gate_log_waiting.clone(),
        );
        registry.register(
            "vantage_certes_gate_intervals",
            "With [gate]: closed intervals by whether the gate's log covered them (covered, not_covered: the gate estimate took the capture's SYN counts)",
            m.gate_intervals.clone(),
        );
        registry.register_with_unit(
            "vantage_certes_gate_interval_mean",
            "With [gate]: last closed interval, mean client-perceived response time (Eq. 4) from the gate's DROPPED and ACCEPTED and the capture's COMPLETED and SYN-to-END, NaN when no transaction ended",
            Unit::Seconds,
            m.gate_mean.clone(),
        );
        registry.register_with_unit(
            "vantage_certes_gate_interval_p99",
            "With [gate]: last closed interval, 99th percentile of the gate estimate's client-perceived response time, NaN when no transaction ended",
            Unit::Seconds,
            m.gate_p99.clone(),
        );
        registry.register(
            "vantage_certes_gate_interval_syn_drop_ratio",
            "With [gate]: last closed interval, share of SYNs the gate dropped (DR, Eq. 5)",
            m.gate_syn_drop_ratio.clone(),
        );
        registry.register(
            "vantage_certes_gate_interval_give_up_ratio",
            "With [gate]: last closed interval, share of transactions that are clients giving up, by the gate estimate",
            m.gate_give_up_ratio.clone(),
        );
        registry.register(
            "vantage_certes_proxy_log_lines",
            "With [proxy]: lines of the proxy's Certes stream, by outcome (read, invalid, oversized, wrong_interval, out_of_order)",
            m.proxy_log_lines.clone(),
        );
        registry.register(
            "vantage_certes_proxy_log_waiting",
            "With [proxy]: 1 while the proxy's Certes stream file is missing (waited for)",
            m.proxy_log_waiting.clone(),
        );
        registry.register(
            "vantage_certes_proxy_intervals",
            "With [proxy]: intervals of the proxy's stream estimated (series labelled source=\"proxy\")",
            m.proxy_intervals.clone(),
        );
        registry.register(
            "vantage_certes_proxy_gate_intervals",
            "With [proxy] and [gate]: intervals of the proxy's stream by whether the gate's log covered them (its drops merged) or not",
            m.proxy_gate_intervals.clone(),
        );
        register_daemon_metrics(&mut registry, &m.endpoint);
        WatchMetrics { registry, ..m }
    }

    /// The endpoint's own counters (registered here).
    pub fn endpoint_counters(&self) -> EndpointCounters {
        self.endpoint.clone()
    }

    /// One closed interval of one class.
    pub fn add_interval(&self, class: &str, row: &IntervalRow, estimate: &Estimate) {
        self.add_labelled_interval(class_label(class), row, estimate, true);
    }

    /// With `[proxy]`: one interval of the proxy's stream, the series
    /// labelled `source="proxy"` (no exact figures: the proxy has none).
    /// With `[gate]` too, whether the gate's log covered the interval.
    pub fn add_proxy_interval(
        &self,
        row: &IntervalRow,
        estimate: &Estimate,
        gate: Option<&ProxyGate>,
    ) {
        let mut labels = class_label("");
        labels.push(("source".to_string(), "proxy".to_string()));
        self.add_labelled_interval(labels, row, estimate, false);
        self.proxy_intervals.inc();
        if let Some(gate) = gate {
            self.proxy_gate_intervals
                .get_or_create(&coverage_label(gate.covered))
                .inc();
        }
    }

    /// What one poll of the proxy's stream read.
    pub fn add_proxy_poll(&self, log: &str, lines: &BTreeMap<&'static str, u64>, waiting: bool) {
        for outcome in PROXY_LINE_OUTCOMES {
            self.proxy_log_lines
                .get_or_create(&vec![("outcome".to_string(), outcome.to_string())])
                .inc_by(lines.get(outcome).copied().unwrap_or(0));
        }
        self.proxy_log_waiting
            .get_or_create(&vec![("log".to_string(), log.to_string())])
            .set(i64::from(waiting));
    }

    fn add_labelled_interval(
        &self,
        labels: Labels,
        row: &IntervalRow,
        estimate: &Estimate,
        exact_figures: bool,
    ) {
        self.response_time.get_or_create(&labels).add(estimate);
        let nan = |x: Option<f64>| x.unwrap_or(f64::NAN);
        self.mean
            .get_or_create(&labels)
            .set(nan(row.estimate_mean_s));
        self.p50.get_or_create(&labels).set(nan(row.p50_s));
        self.p90.get_or_create(&labels).set(nan(row.p90_s));
        self.p99.get_or_create(&labels).set(nan(row.p99_s));
        self.syn_to_end_mean
            .get_or_create(&labels)
            .set(nan(row.syn_to_end_mean_s));
        self.give_up_ratio
            .get_or_create(&labels)
            .set(estimate.give_up_rate);
        self.syn_drop_ratio
            .get_or_create(&labels)
            .set(row.drop_rate);
        self.exact_mean
            .get_or_create(&labels)
            .set(nan(row.exact_mean_s.flatten()));
        self.syns_dropped.get_or_create(&labels).inc_by(row.dropped);
        self.syns_accepted
            .get_or_create(&labels)
            .inc_by(row.accepted);
        self.syns_refused.get_or_create(&labels).inc_by(row.refused);
        self.completed.get_or_create(&labels).inc_by(row.completed);
        self.gave_up_estimated
            .get_or_create(&labels)
            .inc_by(row.gave_up.max(0.0));
        if let (Some(mean), completed) = (row.syn_to_end_mean_s, row.completed) {
            self.syn_to_end_seconds
                .get_or_create(&labels)
                .inc_by(mean * completed as f64);
        }
        if !exact_figures {
            return;
        }
        let exact_completed = row.exact_completed.unwrap_or(0);
        let exact_gave_up = row.exact_gave_up.unwrap_or(0);
        let exact = exact_completed + exact_gave_up;
        self.exact_transactions.get_or_create(&labels).inc_by(exact);
        if let Some(mean) = row.exact_mean_s.flatten() {
            self.exact_client_time
                .get_or_create(&labels)
                .inc_by(mean * exact as f64);
        }
    }

    /// Counts an interval closed (every class done).
    pub fn count_interval(&self) {
        self.intervals.inc();
    }

    /// The failures by kind from each class's running exact figures.
    pub fn set_failures<'a>(&self, classes: impl Iterator<Item = (&'a String, &'a ExactFigures)>) {
        let mut seen = match self.failures_seen.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        for (class, figures) in classes {
            for (kind, value) in [
                ("refused", figures.refused),
                ("reset", figures.reset),
                ("aborted", figures.aborted),
                ("gave_up", figures.gave_up),
            ] {
                let before = seen.entry((class.clone(), kind)).or_insert(0);
                if value > *before {
                    let mut labels = class_label(class);
                    labels.push(("kind".to_string(), kind.to_string()));
                    self.failures.get_or_create(&labels).inc_by(value - *before);
                    *before = value;
                }
            }
        }
    }

    /// The capture's notes so far, as running totals by reason.
    pub fn set_notes(&self, totals: &[(&'static str, u64)]) {
        let mut seen = match self.notes_seen.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        for &(reason, value) in totals {
            let before = seen.entry(reason).or_insert(0);
            let counter = self
                .notes
                .get_or_create(&vec![("reason".to_string(), reason.to_string())]);
            if value > *before {
                counter.inc_by(value - *before);
                *before = value;
            }
        }
    }

    pub fn count_packets(&self, packets: u64) {
        self.packets.inc_by(packets);
    }

    /// What the ring's kernel counts grew by since the last call.
    pub fn add_ring(&self, packets: u64, drops: u64, freezes: u64) {
        self.ring_packets.inc_by(packets);
        self.ring_drops.inc_by(drops);
        self.ring_freezes.inc_by(freezes);
    }

    /// One interval's kernel counter deltas.
    pub fn add_kernel(&self, deltas: &[(&'static str, u64)]) {
        for &(name, value) in deltas {
            self.kernel
                .get_or_create(&vec![("counter".to_string(), name.to_string())])
                .inc_by(value);
        }
    }

    /// What one poll of the gate's log read.
    pub fn add_gate_poll(&self, log: &str, poll: &GatePoll, waiting: bool) {
        for (verdict, count) in [
            ("accepted", poll.syns.accepted),
            ("dropped", poll.syns.dropped),
            ("rejected", poll.syns.rejected),
        ] {
            self.gate_syns
                .get_or_create(&vec![("verdict".to_string(), verdict.to_string())])
                .inc_by(count);
        }
        for outcome in LINE_OUTCOMES {
            self.gate_log_lines
                .get_or_create(&vec![("outcome".to_string(), outcome.to_string())])
                .inc_by(poll.lines.get(outcome).copied().unwrap_or(0));
        }
        self.gate_log_waiting
            .get_or_create(&vec![("log".to_string(), log.to_string())])
            .set(i64::from(waiting));
    }

    /// One closed interval's gate estimate.
    pub fn add_gate_interval(&self, record: &GateRecord, estimate: &Estimate) {
        self.gate_intervals
            .get_or_create(&coverage_label(record.covered))
            .inc();
        let labels = class_label("");
        self.gate_mean
            .get_or_create(&labels)
            .set(record.estimate_mean_s.unwrap_or(f64::NAN));
        self.gate_p99
            .get_or_create(&labels)
            .set(record.p99_s.unwrap_or(f64::NAN));
        self.gate_syn_drop_ratio
            .get_or_create(&labels)
            .set(record.drop_rate);
        self.gate_give_up_ratio
            .get_or_create(&labels)
            .set(estimate.give_up_rate);
    }

    pub fn set_connections(&self, open: usize, held: usize) {
        self.open_connections.set(open as i64);
        self.held_connections.set(held as i64);
    }

    /// A class's clients learned again: its learned series replaced.
    pub fn set_learned(&self, class: &str, learned: &LearnedRecord) {
        let mut series = match self.learned_series.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        let labels = class_label(class);
        let with = |extra: &[(&str, String)]| -> Labels {
            let mut l = labels.clone();
            l.extend(extra.iter().map(|(k, v)| (k.to_string(), v.clone())));
            l
        };
        for old in series.remove(class).unwrap_or_default() {
            self.learned_share.remove(&old);
            self.learned_give_up.remove(&old);
        }
        let mut set = Vec::new();
        for (profile, share) in &learned.profiles {
            let l = with(&[("profile", profile.clone())]);
            self.learned_share.get_or_create(&l).set(*share);
            set.push(l);
        }
        for cell in &learned.give_ups {
            let l = with(&[
                ("after", cell.after_s.to_string()),
                (
                    "by",
                    cell.by_s.map_or("+Inf".to_string(), |b| b.to_string()),
                ),
            ]);
            self.learned_give_up.get_or_create(&l).set(cell.share);
            set.push(l);
        }
        series.insert(class.to_string(), set);
        for (usage, count) in [
            ("classified", learned.uses.classified),
            (
                "classified_with_missing_syns",
                learned.uses.classified_with_missing_syns,
            ),
            ("single_syn", learned.uses.single_syn),
            ("unclassified", learned.uses.unclassified),
            ("not_kept", learned.uses.not_kept),
        ] {
            self.learned_attempts
                .get_or_create(&with(&[("use", usage.to_string())]))
                .set(count as i64);
        }
        self.model_learned.get_or_create(&labels).set(1);
    }

    pub fn count_reload(&self, applied: bool) {
        let result = if applied { "applied" } else { "refused" };
        self.reloads
            .get_or_create(&vec![("result".to_string(), result.to_string())])
            .inc();
    }

    /// Every metric in `format`.
    pub fn encode(&self, format: Format) -> String {
        crate::metrics::encode(&self.registry, format)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_hold_the_schedules_points() {
        let bounds = bucket_bounds();
        for point in [
            0.1, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 7.0, 9.0, 15.0, 21.0, 31.0, 45.0, 63.0,
        ] {
            assert!(bounds.contains(&point), "{point} not in {bounds:?}");
        }
        assert!(bounds.windows(2).all(|w| w[0] < w[1]));
        assert!(bounds.len() < 60, "{}", bounds.len());
    }

    /// Overload then recovery: the drops of the first intervals come back
    /// as retries, whose clients land above the 1 s bound; the exported
    /// buckets are monotone and add up to the rounded transactions.
    #[test]
    fn the_histogram_holds_the_models_distribution() {
        use vantage_core::certes::counters::IntervalCounters;
        use vantage_core::certes::{Certes, CertesConfig};
        use vantage_core::tcp::ClientMix;
        use vantage_core::Nanos;
        let config = CertesConfig::new(
            Nanos::from_millis(250),
            ClientMix::builtin("linux-6.5").unwrap(),
            Nanos::from_secs(21),
        );
        let mut certes = Certes::new(config).unwrap();
        let histogram = ModelHistogram::default();
        let mut transactions = 0.0;
        for i in 0..40 {
            let counters = IntervalCounters {
                dropped: if i < 8 { 30 } else { 0 },
                accepted: 20,
                completed: 20,
                syn_to_end_sum: Nanos::from_millis(20 * 50),
                ..IntervalCounters::default()
            };
            let estimate = certes.on_interval(&counters);
            transactions += estimate.transactions();
            histogram.add(&estimate);
        }
        let (sum, count, buckets) = histogram.exported();
        assert_eq!(count, transactions.round() as u64);
        assert_eq!(buckets.iter().map(|(_, n)| n).sum::<u64>(), count);
        assert!(sum > 0.05 * transactions);
        let at_or_below = |bound: f64| -> u64 {
            buckets
                .iter()
                .take_while(|(b, _)| *b <= bound)
                .map(|(_, n)| n)
                .sum()
        };
        // Most served at once (about 50 ms); some only after a retry.
        assert!(at_or_below(0.05) > count / 2, "{buckets:?}");
        assert!(at_or_below(1.0) < count, "{buckets:?}");
    }

    #[test]
    fn an_empty_registry_encodes() {
        let m = WatchMetrics::new();
        m.count_reload(true);
        let text = m.encode(Format::Text);
        assert!(
            text.contains("vantage_certes_reloads_total{result=\"applied\"} 1"),
            "{text}"
        );
    }

    /// Learned series replace the class's earlier ones: a profile or cell
    /// no longer learned is gone.
    #[test]
    fn learned_clients_are_exported() {
        let metrics = WatchMetrics::new();
        let record = |profiles: &[(&str, f64)], cells: &[(f64, Option<f64>, f64)]| LearnedRecord {
            profiles: profiles.iter().map(|(p, w)| (p.to_string(), *w)).collect(),
            give_ups: cells
                .iter()
                .map(
                    |&(after_s, by_s, share)| super::super::capture::GiveUpRecord {
                        after_s,
                        by_s,
                        share,
                    },
                )
                .collect(),
            never_gives_up: 0.0,
            send_offsets_s: BTreeMap::new(),
            uses: vantage_core::certes::learn::AttemptUses {
                attempts: 10,
                classified: 7,
                classified_with_missing_syns: 1,
                single_syn: 2,
                unclassified: 0,
                not_kept: 0,
            },
        };
        metrics.set_learned(
            "",
            &record(
                &[("linux-3.7", 0.75), ("windows-9x-nt", 0.25)],
                &[(7.0, Some(9.0), 0.5), (63.0, None, 0.5)],
            ),
        );
        let text = metrics.encode(Format::Text);
        for line in [
            "vantage_certes_learned_profile_share{class=\"all\",profile=\"linux-3.7\"} 0.75",
            "vantage_certes_learned_give_up_share{class=\"all\",after=\"63\",by=\"+Inf\"} 0.5",
            "vantage_certes_learned_attempts{class=\"all\",use=\"single_syn\"} 2",
            "vantage_certes_model_learned{class=\"all\"} 1",
        ] {
            assert!(text.contains(line), "{line} not in\n{text}");
        }
        metrics.set_learned("", &record(&[("linux-3.7", 1.0)], &[(7.0, Some(9.0), 1.0)]));
        let text = metrics.encode(Format::Text);
        assert!(!text.contains("windows-9x-nt"), "{text}");
        assert!(!text.contains("by=\"+Inf\""), "{text}");
    }
}
