//! The proxy's metrics: a prometheus-client registry served by the shared
//! endpoint ([`crate::metrics`]).
//!
//! | metric | type | meaning |
//! |---|---|---|
//! | `vantage_proxy_requests_total{class="2xx"…"5xx"}` | counter | responses sent to clients, by status class (the proxy's own 4xx/5xx included) |
//! | `vantage_proxy_failures_total{kind}` | counter | `connect`, `timeout` (upstream response), `upstream_5xx`, `upstream_error`, `client_gone`, `body_too_large`, `no_upstream` |
//! | `vantage_proxy_upstream_latency_seconds{upstream}` | histogram | request sent → response head received |
//! | `vantage_proxy_connections_open` | gauge | client connections open |
//! | `vantage_proxy_connections_refused_total` | counter | client connections closed at once (`limits.max_connections` open, none idle) |
//! | `vantage_proxy_connections_evicted_total` | counter | idle client connections closed to make room for a new one |
//! | `vantage_proxy_send_timeouts_total` | counter | client connections closed because they took no byte of a waiting response for `timeouts.send_ms` |
//! | `vantage_proxy_evictions_passed_on_total` | counter | idle connections chosen for eviction that kept their slot because a request had just arrived on them (the next idlest was chosen) |
//! | `vantage_proxy_tls_handshakes_failed_total` | counter | TLS handshakes that failed or took longer than the request-header timeout |
//! | `vantage_proxy_sessions_admitted_total` | counter | new sessions admitted |
//! | `vantage_proxy_sessions_rejected_total` | counter | new sessions rejected (503 or redirect) |
//! | `vantage_proxy_sessions_active` | gauge | sessions tracked as in progress |
//! | `vantage_proxy_sessions_ended_total{reason="idle"\|"max_age"}` | counter | sessions ended by T or by the maximum age |
//! | `vantage_proxy_sessions_untracked_total` | counter | admitted sessions not tracked (`sbac.max_tracked_sessions` reached) |
//! | `vantage_proxy_session_tokens_refused_total{reason}` | counter | cookies that did not count: `malformed`, `bad_signature`, `expired`, `too_old`, `future` |
//! | `vantage_proxy_utilization` | gauge | U_i^measured of the last interval |
//! | `vantage_proxy_utilization_unavailable_total` | counter | intervals whose utilization could not be read (previous value kept) |
//! | `vantage_proxy_orca_reports_ignored_total` | counter | `endpoint-load-metrics` headers without a usable `cpu_utilization` |
//! | `vantage_proxy_controller_admitting` | gauge | 1 while new sessions are admitted |
//! | `vantage_proxy_controller_predicted_utilization` | gauge | f_ac(i+1) (stable, responsive, hybrid) |
//! | `vantage_proxy_controller_weight` | gauge | k (stable, responsive, hybrid) |
//! | `vantage_proxy_controller_quota` | gauge | new sessions left this interval (predictive; 0 until the first interval ended) |
//! | `vantage_proxy_reloads_total{result="ok"\|"refused"}` | counter | configuration reloads |
//! | `vantage_proxy_access_log_errors_total` | counter | access-log lines that could not be written |
//! | `vantage_proxy_send_buffer_bytes` | histogram | held send buffers of client connections, each interval (`[resources]` ssbt*) |
//! | `vantage_proxy_receive_buffer_bytes` | histogram | held receive buffers of upstream connections, each interval (ssbt*) |
//! | `vantage_proxy_buffer_pool_bytes` | gauge | the pool now (cut under kernel memory pressure) |
//! | `vantage_proxy_send_pool_used_bytes`, `vantage_proxy_receive_pool_used_bytes` | gauge | held bytes assigned from each share of the pool |
//! | `vantage_proxy_kernel_tcp_memory_bytes` | gauge | `/proc/net/sockstat` TCP `mem`, in bytes |
//! | `vantage_proxy_pool_pressure_cuts_total` | counter | intervals that cut the pool for `tcp_mem` pressure |
//! | `vantage_proxy_resource_unread_intervals_total` | counter | intervals that read no connection (a pressure cut: the shrinks only) |
//! | `vantage_proxy_buffer_sets_deferred_total` | counter | buffer moves beyond an interval's bound on sets, left to the next interval |
//! | `vantage_proxy_idle_closes_total{reason}` | counter | idle client connections the manager closed: `descriptors`, `tcp_memory`, `connections`, `idle_list_full` |
//! | `vantage_proxy_idle_closes_skipped_total` | counter | connections the manager chose that kept a request already arrived and not yet read (`FIONREAD`): not closed |
//! | `vantage_proxy_idle_upstream_connections` | gauge | upstream connections idle in the pool whose receive buffer shrinks (ssbt* with `idle_buffer_half_life_ms`) |
//! | `vantage_proxy_idle_upstream_shrinks_total` | counter | receive buffers of idle pooled upstream connections set smaller by the idle decay |
//! | `vantage_proxy_idle_upstream_regrows_total` | counter | shrunken upstream receive buffers given back their tuner's size as the connection left the pool for a request |
//! | `vantage_proxy_idle_client_regrows_total` | counter | client connections reused after idling whose send buffer was set back to what they held before (as far as the send pool has room) as the request started |
//! | `vantage_proxy_tcp_memory_source` | gauge | whose TCP memory sets the default pool and the manager's memory marks: 1 the host's (`tcp_mem`), 2 the proxy's memory cgroup's (90 % of its limit), 0 neither visible; pressure is either's |
//! | `vantage_proxy_cgroup_tcp_memory_bytes` | gauge | the TCP memory charged to the proxy's memory cgroup (0 without a cgroup limit) |
//! | `vantage_proxy_resource_loop_cpu_seconds_total` | counter | the control loop's own CPU time |
//! | `vantage_proxy_resource_intervals_total` | counter | intervals run |
//! | `vantage_proxy_resource_errors_total` | counter | socket reads or sets that failed (the connection skipped for that interval) |
//! | `vantage_proxy_upstream_reads_total{path="dump"\|"getsockopt_fallback"}` | counter | upstream connections read from the `sock_diag` dump, and those read by `getsockopt` in an interval meant for the dump (missing from it, the dump failed, or too many remote ports) |
//! | `vantage_proxy_upstream_dump_failures_total` | counter | `sock_diag` dumps that failed (also in the errors) |
//! | `vantage_proxy_upstream_dump_replies_total{socket="upstream"\|"other"}` | counter | the dump's replies for registered upstream connections and for other sockets with the same remote ports (dropped; many of them put the loop back on `getsockopt` for ten intervals) |
//! | `vantage_metrics_*`, `vantage_build_info`, `process_*` | | the endpoint and the process ([`crate::metrics`]) |
//!
//! A controller gauge exists only for the strategies that have the
//! quantity: a scrape never shows a made-up zero.

use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};
use vantage_core::admission::session::{Decision, TokenError};

use super::config::Strategy;

use crate::metrics::{register_daemon_metrics, EndpointCounters, Format};

type FloatGauge = Gauge<f64, AtomicU64>;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClassLabel {
    pub class: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReadPathLabel {
    pub path: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SocketLabel {
    pub socket: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UpstreamLabel {
    pub upstream: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    pub result: String,
}

/// Why a request failed (a failure, counted, and an abort for hybrid).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    Connect,
    Timeout,
    Upstream5xx,
    UpstreamError,
    ClientGone,
    BodyTooLarge,
    NoUpstream,
}

impl Failure {
    pub fn name(self) -> &'static str {
        match self {
            Failure::Connect => "connect",
            Failure::Timeout => "timeout",
            Failure::Upstream5xx => "upstream_5xx",
            Failure::UpstreamError => "upstream_error",
            Failure::ClientGone => "client_gone",
            Failure::BodyTooLarge => "body_too_large",
            Failure::NoUpstream => "no_upstream",
        }
    }
}

fn histogram() -> Histogram {
    // 50 µs … 13 s.
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        50e-6, 2.0, 19,
    ))
}

fn buffer_histogram() -> Histogram {
    // 4 KiB … 128 MiB.
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        4096.0, 2.0, 16,
    ))
}

/// The `[resources]` control loop's metrics.
#[derive(Clone, Debug)]
pub struct ResourceMetrics {
    pub send_assigned: Histogram,
    pub receive_assigned: Histogram,
    pub pool_bytes: Gauge,
    pub send_pool_used: Gauge,
    pub receive_pool_used: Gauge,
    pub kernel_tcp_bytes: Gauge,
    pub pressure_cuts: Counter,
    pub unread_intervals: Counter,
    pub buffer_sets_deferred: Counter,
    pub closes: Family<ReasonLabel, Counter>,
    /// Idle connections chosen to close that kept a request not yet read.
    pub reclaims_skipped_for_request: Counter,
    pub idle_upstreams: Gauge,
    pub idle_upstream_shrinks: Counter,
    pub idle_upstream_regrows: Counter,
    pub idle_client_regrows: Counter,
    pub memory_source: Gauge,
    pub cgroup_tcp_bytes: Gauge,
    pub cpu_seconds: Counter<f64, AtomicU64>,
    pub intervals: Counter,
    pub errors: Counter,
    pub upstream_reads: Family<ReadPathLabel, Counter>,
    pub upstream_dump_failures: Counter,
    pub upstream_dump_replies: Family<SocketLabel, Counter>,
}

impl Default for ResourceMetrics {
    fn default() -> Self {
        ResourceMetrics {
            send_assigned: buffer_histogram(),
            receive_assigned: buffer_histogram(),
            pool_bytes: Gauge::default(),
            send_pool_used: Gauge::default(),
            receive_pool_used: Gauge::default(),
            kernel_tcp_bytes: Gauge::default(),
            pressure_cuts: Counter::default(),
            unread_intervals: Counter::default(),
            buffer_sets_deferred: Counter::default(),
            closes: Family::default(),
            reclaims_skipped_for_request: Counter::default(),
            idle_upstreams: Gauge::default(),
            idle_upstream_shrinks: Counter::default(),
            idle_upstream_regrows: Counter::default(),
            idle_client_regrows: Counter::default(),
            memory_source: Gauge::default(),
            cgroup_tcp_bytes: Gauge::default(),
            cpu_seconds: Counter::default(),
            intervals: Counter::default(),
            errors: Counter::default(),
            upstream_reads: Family::default(),
            upstream_dump_failures: Counter::default(),
            upstream_dump_replies: Family::default(),
        }
    }
}

impl ResourceMetrics {
    /// Counts how one interval read its upstream connections: from the
    /// `sock_diag` dump or by `getsockopt` in its place, and the dump's
    /// replies for other sockets, so a loop that falls back is visible.
    pub fn record_upstream_reads(&self, report: &super::resources::IntervalReport) {
        let reads = |path: &str, n: usize| {
            self.upstream_reads
                .get_or_create(&ReadPathLabel { path: path.into() })
                .inc_by(n as u64);
        };
        reads("dump", report.upstream_reads_dumped);
        reads("getsockopt_fallback", report.upstream_reads_fallback);
        self.upstream_dump_failures
            .inc_by(report.upstream_dump_failures as u64);
        let replies = |socket: &str, n: usize| {
            self.upstream_dump_replies
                .get_or_create(&SocketLabel {
                    socket: socket.into(),
                })
                .inc_by(n as u64);
        };
        replies("upstream", report.upstream_dump_matched);
        replies("other", report.upstream_dump_others);
    }

    fn register(&self, registry: &mut Registry) {
        registry.register_with_unit(
            "vantage_proxy_send_buffer",
            "Held send buffers of client connections, sampled each interval",
            Unit::Bytes,
            self.send_assigned.clone(),
        );
        registry.register_with_unit(
            "vantage_proxy_receive_buffer",
            "Held receive buffers of upstream connections, sampled each interval",
            Unit::Bytes,
            self.receive_assigned.clone(),
        );
        registry.register_with_unit(
            "vantage_proxy_buffer_pool",
            "The socket-buffer pool now",
            Unit::Bytes,
            self.pool_bytes.clone(),
        );
        registry.register_with_unit(
            "vantage_proxy_send_pool_used",
            "Held bytes assigned from the send share of the pool",
            Unit::Bytes,
            self.send_pool_used.clone(),
        );
        registry.register_with_unit(
            "vantage_proxy_receive_pool_used",
            "Held bytes assigned from the receive share of the pool",
            Unit::Bytes,
            self.receive_pool_used.clone(),
        );
        registry.register_with_unit(
            "vantage_proxy_kernel_tcp_memory",
            "Memory the kernel charges to TCP (sockstat TCP mem)",
            Unit::Bytes,
            self.kernel_tcp_bytes.clone(),
        );
        registry.register(
            "vantage_proxy_pool_pressure_cuts",
            "Intervals that cut the pool for tcp_mem pressure",
            self.pressure_cuts.clone(),
        );
        registry.register(
            "vantage_proxy_resource_unread_intervals",
            "Intervals that read no connection (a pressure cut sets the shrinks only)",
            self.unread_intervals.clone(),
        );
        registry.register(
            "vantage_proxy_buffer_sets_deferred",
            "Buffer moves beyond an interval's bound on sets, left to the next interval",
            self.buffer_sets_deferred.clone(),
        );
        registry.register(
            "vantage_proxy_idle_closes",
            "Idle client connections closed by the connection manager, by reason",
            self.closes.clone(),
        );
        registry.register(
            "vantage_proxy_idle_closes_skipped",
            "Idle connections the manager chose that were kept: a request had arrived, not yet read",
            self.reclaims_skipped_for_request.clone(),
        );
        registry.register(
            "vantage_proxy_idle_upstream_connections",
            "Upstream connections idle in the pool whose receive buffer shrinks",
            self.idle_upstreams.clone(),
        );
        registry.register(
            "vantage_proxy_idle_upstream_shrinks",
            "Receive buffers of idle pooled upstream connections set smaller",
            self.idle_upstream_shrinks.clone(),
        );
        registry.register(
            "vantage_proxy_idle_upstream_regrows",
            "Shrunken upstream receive buffers restored as the connection left the pool",
            self.idle_upstream_regrows.clone(),
        );
        registry.register(
            "vantage_proxy_idle_client_regrows",
            "Client send buffers set back to their size before idling as the connection was reused",
            self.idle_client_regrows.clone(),
        );
        registry.register(
            "vantage_proxy_tcp_memory_source",
            "Whose TCP memory sets the default pool: 1 host tcp_mem, 2 the proxy's memory cgroup, 0 neither",
            self.memory_source.clone(),
        );
        registry.register(
            "vantage_proxy_cgroup_tcp_memory_bytes",
            "TCP memory charged to the proxy's memory cgroup (0 without a limit)",
            self.cgroup_tcp_bytes.clone(),
        );
        registry.register_with_unit(
            "vantage_proxy_resource_loop_cpu",
            "CPU time of the resource control loop",
            Unit::Seconds,
            self.cpu_seconds.clone(),
        );
        registry.register(
            "vantage_proxy_resource_intervals",
            "Intervals of the resource control loop",
            self.intervals.clone(),
        );
        registry.register(
            "vantage_proxy_resource_errors",
            "Socket reads or sets of the resource control loop that failed",
            self.errors.clone(),
        );
        registry.register(
            "vantage_proxy_upstream_reads",
            "Upstream connections read from the sock_diag dump, or by getsockopt in an interval meant for the dump",
            self.upstream_reads.clone(),
        );
        registry.register(
            "vantage_proxy_upstream_dump_failures",
            "sock_diag dumps of upstream connections that failed (also counted in the errors)",
            self.upstream_dump_failures.clone(),
        );
        registry.register(
            "vantage_proxy_upstream_dump_replies",
            "Replies of the upstream sock_diag dump, for registered upstream connections and for other sockets",
            self.upstream_dump_replies.clone(),
        );
    }
}

/// The registry and every metric the proxy sets.
#[derive(Debug)]
pub struct ProxyMetrics {
    registry: Registry,
    pub endpoint: EndpointCounters,
    pub requests: Family<ClassLabel, Counter>,
    /// The 1xx … 5xx counters of `requests`, looked up once.
    status_classes: [Counter; 5],
    pub failures: Family<KindLabel, Counter>,
    pub upstream_latency: Family<UpstreamLabel, Histogram, fn() -> Histogram>,
    pub connections_open: Gauge,
    pub connections_refused: Counter,
    pub connections_evicted: Counter,
    pub evictions_passed_on: Counter,
    pub send_timeouts: Counter,
    pub tls_handshakes_failed: Counter,
    pub sessions_admitted: Counter,
    pub sessions_rejected: Counter,
    pub sessions_active: Gauge,
    pub sessions_ended: Family<ReasonLabel, Counter>,
    pub sessions_untracked: Counter,
    pub tokens_refused: Family<ReasonLabel, Counter>,
    pub utilization: FloatGauge,
    pub utilization_unavailable: Counter,
    pub orca_ignored: Counter,
    pub admitting: Gauge,
    pub predicted_utilization: FloatGauge,
    pub weight: FloatGauge,
    pub quota: FloatGauge,
    pub reloads: Family<ResultLabel, Counter>,
    pub access_log_errors: Counter,
    pub certes_late_accepts: Counter,
    pub resources: ResourceMetrics,
}

impl ProxyMetrics {
    /// Registers everything; the session metrics only when SBAC runs, and
    /// the controller gauges of its strategy (set by
    /// [`ProxyMetrics::set_decision`]).
    pub fn new(sbac: Option<Strategy>) -> ProxyMetrics {
        let mut registry = Registry::default();
        let m = ProxyMetrics {
            registry: Registry::default(),
            endpoint: EndpointCounters::default(),
            requests: Family::default(),
            status_classes: Default::default(),
            failures: Family::default(),
            upstream_latency: Family::new_with_constructor(histogram),
            connections_open: Gauge::default(),
            connections_refused: Counter::default(),
            connections_evicted: Counter::default(),
            evictions_passed_on: Counter::default(),
            send_timeouts: Counter::default(),
            tls_handshakes_failed: Counter::default(),
            sessions_admitted: Counter::default(),
            sessions_rejected: Counter::default(),
            sessions_active: Gauge::default(),
            sessions_ended: Family::default(),
            sessions_untracked: Counter::default(),
            tokens_refused: Family::default(),
            utilization: FloatGauge::default(),
            utilization_unavailable: Counter::default(),
            orca_ignored: Counter::default(),
            admitting: Gauge::default(),
            predicted_utilization: FloatGauge::default(),
            weight: FloatGauge::default(),
            quota: FloatGauge::default(),
            reloads: Family::default(),
            access_log_errors: Counter::default(),
            certes_late_accepts: Counter::default(),
            resources: ResourceMetrics::default(),
        };
        m.resources.register(&mut registry);
        registry.register(
            "vantage_proxy_requests",
            "Responses sent to clients, by status class",
            m.requests.clone(),
        );
        registry.register(
            "vantage_proxy_failures",
            "Requests that failed, by kind",
            m.failures.clone(),
        );
        registry.register_with_unit(
            "vantage_proxy_upstream_latency",
            "Request sent upstream to response head received",
            Unit::Seconds,
            m.upstream_latency.clone(),
        );
        registry.register(
            "vantage_proxy_connections_open",
            "Client connections open",
            m.connections_open.clone(),
        );
        registry.register(
            "vantage_proxy_connections_refused",
            "Client connections closed at once because limits.max_connections were open",
            m.connections_refused.clone(),
        );
        registry.register(
            "vantage_proxy_connections_evicted",
            "Idle client connections closed to make room for a new one",
            m.connections_evicted.clone(),
        );
        registry.register(
            "vantage_proxy_evictions_passed_on",
            "Idle connections chosen for eviction that kept their slot because a request had just arrived",
            m.evictions_passed_on.clone(),
        );
        registry.register(
            "vantage_proxy_send_timeouts",
            "Client connections closed because they took no byte of a waiting response for timeouts.send_ms",
            m.send_timeouts.clone(),
        );
        registry.register(
            "vantage_proxy_tls_handshakes_failed",
            "TLS handshakes that failed or did not end within the request-header timeout",
            m.tls_handshakes_failed.clone(),
        );
        registry.register(
            "vantage_proxy_reloads",
            "Configuration reloads, applied or refused",
            m.reloads.clone(),
        );
        registry.register(
            "vantage_proxy_access_log_errors",
            "Access-log lines that could not be written",
            m.access_log_errors.clone(),
        );
        registry.register(
            "vantage_proxy_utilization",
            "Measured utilization of the last interval",
            m.utilization.clone(),
        );
        registry.register(
            "vantage_proxy_utilization_unavailable",
            "Intervals whose utilization could not be read (the previous value was kept)",
            m.utilization_unavailable.clone(),
        );
        registry.register(
            "vantage_proxy_certes_late_accepts",
            "With [certes]: connections whose SYN came before every unwritten interval (accept-queue wait above accept_lag_ms), counted in the oldest",
            m.certes_late_accepts.clone(),
        );
        registry.register(
            "vantage_proxy_orca_reports_ignored",
            "endpoint-load-metrics headers without a usable cpu_utilization",
            m.orca_ignored.clone(),
        );
        if let Some(strategy) = sbac {
            let ewma = strategy != Strategy::Predictive;
            registry.register(
                "vantage_proxy_sessions_admitted",
                "New sessions admitted",
                m.sessions_admitted.clone(),
            );
            registry.register(
                "vantage_proxy_sessions_rejected",
                "New sessions rejected",
                m.sessions_rejected.clone(),
            );
            registry.register(
                "vantage_proxy_sessions_active",
                "Sessions tracked as in progress",
                m.sessions_active.clone(),
            );
            registry.register(
                "vantage_proxy_sessions_ended",
                "Sessions ended by the idle timeout or the maximum age",
                m.sessions_ended.clone(),
            );
            registry.register(
                "vantage_proxy_sessions_untracked",
                "Admitted sessions not tracked because sbac.max_tracked_sessions were",
                m.sessions_untracked.clone(),
            );
            registry.register(
                "vantage_proxy_session_tokens_refused",
                "Session cookies that did not count, by reason",
                m.tokens_refused.clone(),
            );
            registry.register(
                "vantage_proxy_controller_admitting",
                "1 while new sessions are admitted",
                m.admitting.clone(),
            );
            if ewma {
                registry.register(
                    "vantage_proxy_controller_predicted_utilization",
                    "Predicted utilization of the next interval",
                    m.predicted_utilization.clone(),
                );
            }
            if ewma {
                registry.register(
                    "vantage_proxy_controller_weight",
                    "The ac-weight k in force",
                    m.weight.clone(),
                );
            }
            if !ewma {
                registry.register(
                    "vantage_proxy_controller_quota",
                    "New sessions still allowed in this interval",
                    m.quota.clone(),
                );
            }
        }
        register_daemon_metrics(&mut registry, &m.endpoint);
        let status_classes = ["1xx", "2xx", "3xx", "4xx", "5xx"].map(|class| {
            m.requests
                .get_or_create(&ClassLabel {
                    class: class.into(),
                })
                .clone()
        });
        ProxyMetrics {
            registry,
            status_classes,
            ..m
        }
    }

    pub fn encode(&self, format: Format) -> String {
        crate::metrics::encode(&self.registry, format)
    }

    pub fn count_status(&self, status: u16) {
        let class = usize::from((status / 100).clamp(1, 5)) - 1;
        self.status_classes[class].inc();
    }

    /// The latency histogram of one upstream.
    pub fn upstream_histogram(&self, upstream: SocketAddr) -> Histogram {
        self.upstream_latency
            .get_or_create(&UpstreamLabel {
                upstream: upstream.to_string(),
            })
            .clone()
    }

    pub fn count_failure(&self, failure: Failure) {
        self.failures
            .get_or_create(&KindLabel {
                kind: failure.name().into(),
            })
            .inc();
    }

    pub fn count_token_refused(&self, why: &TokenError) {
        let reason = match why {
            TokenError::Malformed => "malformed",
            TokenError::BadSignature => "bad_signature",
            TokenError::Expired { .. } => "expired",
            TokenError::TooOld { .. } => "too_old",
            TokenError::IssuedInFuture { .. } => "future",
            TokenError::ShortKey(_) | TokenError::KeyCount(_) => "malformed",
        };
        self.tokens_refused
            .get_or_create(&ReasonLabel {
                reason: reason.into(),
            })
            .inc();
    }

    pub fn count_reload(&self, applied: bool) {
        self.reloads
            .get_or_create(&ResultLabel {
                result: if applied { "ok" } else { "refused" }.into(),
            })
            .inc();
    }

    pub fn set_decision(&self, decision: &Decision) {
        self.admitting.set(i64::from(decision.admitting));
        if let Some(p) = decision.predicted_utilization {
            self.predicted_utilization.set(p);
        }
        if let Some(k) = decision.weight {
            self.weight.set(k);
        }
        if let Some(q) = decision.quota {
            self.quota.set(q);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::resources::IntervalReport;

    #[test]
    fn upstream_read_paths_are_exported() {
        let metrics = ProxyMetrics::new(None);
        let report = IntervalReport {
            upstream_reads_dumped: 2040,
            upstream_reads_fallback: 8,
            upstream_dump_failures: 1,
            upstream_dump_matched: 2040,
            upstream_dump_others: 17,
            ..IntervalReport::default()
        };
        metrics.resources.record_upstream_reads(&report);
        metrics.resources.record_upstream_reads(&report);
        let text = metrics.encode(Format::Text);
        for line in [
            "vantage_proxy_upstream_reads_total{path=\"dump\"} 4080",
            "vantage_proxy_upstream_reads_total{path=\"getsockopt_fallback\"} 16",
            "vantage_proxy_upstream_dump_failures_total 2",
            "vantage_proxy_upstream_dump_replies_total{socket=\"upstream\"} 4080",
            "vantage_proxy_upstream_dump_replies_total{socket=\"other\"} 34",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{line} missing from\n{text}"
            );
        }
    }
}
