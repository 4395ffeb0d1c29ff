//! The gate's metrics: a prometheus-client registry served in the
//! OpenMetrics text format on `GET /metrics` by a small tiny_http server.
//!
//! Counters are the workers' own atomics ([`GateCounters`]); the gauges
//! describe the filter (its [`FilterSnapshot`]) and are refreshed at every
//! scrape and every interval. A gauge exists only when the filter kind has
//! the quantity (the Abacus second stage, Greedy's threshold), so a scrape
//! never shows a made-up zero.
//!
//! | metric | type | meaning (Abacus paper symbol) |
//! |---|---|---|
//! | `vantage_gate_syns_total{verdict="accept"\|"drop"\|"reject"}` | counter | SYNs to a listener by the filter's verdict (also in a dry run) |
//! | `vantage_gate_packets_passed_total` | counter | queued packets that were not SYNs to a listener, accepted unchanged |
//! | `vantage_gate_queue_overruns_total` | counter | packets the kernel could not hand to the gate and accepted unseen (fail-open) |
//! | `vantage_gate_errors_total` | counter | verdicts the kernel refused, malformed messages, failed sends |
//! | `vantage_gate_tokens` | gauge | tokens in the first-stage bucket |
//! | `vantage_gate_bucket_size_tokens` | gauge | W |
//! | `vantage_gate_refill_rate_tokens_per_second` | gauge | r_t |
//! | `vantage_gate_arrival_rate_per_second` | gauge | λ (abacus, greedy) |
//! | `vantage_gate_future_tokens` | gauge | Σ A\[i\] (abacus) |
//! | `vantage_gate_chain_borrowed` | gauge | Σ B\[i\] (abacus) |
//! | `vantage_gate_drop_threshold` | gauge | λ_thresh (greedy) |
//! | `vantage_gate_drop_budget` | gauge | drops left this period (greedy) |
//! | `vantage_gate_dry_run` | gauge | 1 in a dry run |
//! | `vantage_gate_filter_info{kind}` | info | the filter kind |
//! | `vantage_gate_accept_queue_connections` | gauge | accept-queue length (`refill_rate = "measure"`) |
//! | `vantage_gate_accept_rate_per_second` | gauge | the application's accept rate last interval (`"measure"`) |

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Registry, Unit};
use vantage_core::admission::syn::{FilterKind, FilterSnapshot};

use super::counters::GateCounters;
use super::GateError;

/// The OpenMetrics text format's content type.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

type FloatGauge = Gauge<f64, AtomicU64>;

/// The registry and the gauges the gate sets.
#[derive(Debug)]
pub struct GateMetrics {
    registry: Registry,
    tokens: Gauge,
    bucket_size: Gauge,
    refill_rate: FloatGauge,
    arrival_rate: Option<FloatGauge>,
    future_tokens: Option<Gauge>,
    chain_borrowed: Option<Gauge>,
    drop_threshold: Option<FloatGauge>,
    drop_budget: Option<Gauge>,
    accept_queue: Option<Gauge>,
    accept_rate: Option<FloatGauge>,
}

fn int(value: u64) -> i64 {
    value.min(i64::MAX as u64) as i64
}

impl GateMetrics {
    /// Registers every metric: `counters` as they are, gauges for what
    /// `initial` (the filter's first snapshot) has; with `measuring`, the
    /// capacity measurement's gauges too.
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
        registry.register_with_unit(
            "vantage_gate_refill_rate",
            "Refill rate r_t of the first-stage bucket",
            Unit::Other("tokens_per_second".into()),
            refill_rate.clone(),
        );
        let arrival_rate = initial.arrival_rate.map(|_| {
            let g = FloatGauge::default();
            registry.register_with_unit(
                "vantage_gate_arrival_rate",
                "Estimated rate lambda of new connection requests",
                Unit::Other("per_second".into()),
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
        registry.register(
            "vantage_gate_filter",
            "The SYN filter the gate runs",
            Info::new(vec![("kind".to_string(), kind.name().to_string())]),
        );
        let (accept_queue, accept_rate) = if measuring {
            let queue = Gauge::default();
            registry.register_with_unit(
                "vantage_gate_accept_queue",
                "Connections waiting in the listeners' accept queues at the last interval",
                Unit::Other("connections".into()),
                queue.clone(),
            );
            let rate = FloatGauge::default();
            registry.register_with_unit(
                "vantage_gate_accept_rate",
                "Connections the application accepted per second in the last interval",
                Unit::Other("per_second".into()),
                rate.clone(),
            );
            (Some(queue), Some(rate))
        } else {
            (None, None)
        };
        let metrics = GateMetrics {
            registry,
            tokens,
            bucket_size,
            refill_rate,
            arrival_rate,
            future_tokens,
            chain_borrowed,
            drop_threshold,
            drop_budget,
            accept_queue,
            accept_rate,
        };
        metrics.set_filter(initial);
        metrics
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

    /// Sets the capacity-measurement gauges (when measuring).
    pub fn set_capacity(&self, accept_queue: u64, accept_rate: Option<f64>) {
        if let Some(g) = &self.accept_queue {
            g.set(int(accept_queue));
        }
        if let (Some(g), Some(v)) = (&self.accept_rate, accept_rate) {
            g.set(v);
        }
    }

    /// The OpenMetrics text of every metric, `# EOF` included.
    pub fn encode(&self) -> String {
        let mut out = String::with_capacity(4096);
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

/// How long the server thread waits for a request before it looks at its
/// stop flag.
const ACCEPT_POLL: Duration = Duration::from_millis(100);

/// `GET /metrics` on a socket of its own, answered from a thread of its
/// own. Stopped (and joined) on drop.
pub struct MetricsServer {
    address: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Listens on `address` and answers each scrape with `render()`.
    pub fn start<F>(address: SocketAddr, render: F) -> Result<MetricsServer, GateError>
    where
        F: Fn() -> String + Send + 'static,
    {
        let server = tiny_http::Server::http(address).map_err(|e| GateError::Metrics {
            address,
            message: e.to_string(),
        })?;
        let bound = server.server_addr().to_ip().unwrap_or(address);
        let stop = Arc::new(AtomicBool::new(false));
        let thread_stop = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("gate-metrics".into())
            .spawn(move || {
                while !thread_stop.load(Ordering::Relaxed) {
                    match server.recv_timeout(ACCEPT_POLL) {
                        Ok(Some(request)) => answer(request, &render),
                        Ok(None) => {}
                        Err(e) => {
                            eprintln!("vantage gate: metrics endpoint: {e}");
                            std::thread::sleep(ACCEPT_POLL);
                        }
                    }
                }
            })
            .map_err(GateError::Thread)?;
        Ok(MetricsServer {
            address: bound,
            stop,
            thread: Some(thread),
        })
    }

    /// The address it listens on (the port the kernel chose for port 0).
    pub fn address(&self) -> SocketAddr {
        self.address
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// What a request gets: the metrics for `GET /metrics`, 405 for another
/// method on it, 404 elsewhere.
pub fn route(method: &str, url: &str) -> u16 {
    let path = url.split('?').next().unwrap_or(url);
    match (method, path) {
        ("GET", "/metrics") => 200,
        (_, "/metrics") => 405,
        _ => 404,
    }
}

fn answer<F: Fn() -> String>(request: tiny_http::Request, render: &F) {
    let method = request.method().as_str().to_string();
    let status = route(&method, request.url());
    let result = if status == 200 {
        let response = tiny_http::Response::from_string(render());
        // The header is a constant that always parses.
        match tiny_http::Header::from_bytes(&b"Content-Type"[..], CONTENT_TYPE.as_bytes()) {
            Ok(header) => request.respond(response.with_header(header)),
            Err(()) => request.respond(response),
        }
    } else {
        let body = if status == 405 {
            "only GET /metrics\n"
        } else {
            "not found: the metrics are at /metrics\n"
        };
        request.respond(tiny_http::Response::from_string(body).with_status_code(status))
    };
    // A scraper that hung up early is not the gate's problem.
    let _ = result;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
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
        let metrics = GateMetrics::new(
            &counters,
            FilterKind::Abacus,
            &abacus_snapshot(),
            true,
            true,
        );
        metrics.set_capacity(7, Some(12.5));
        let text = metrics.encode();
        for line in [
            "vantage_gate_syns_total{verdict=\"accept\"} 2",
            "vantage_gate_syns_total{verdict=\"drop\"} 3",
            "vantage_gate_syns_total{verdict=\"reject\"} 4",
            "vantage_gate_packets_passed_total 5",
            "vantage_gate_queue_overruns_total 6",
            "vantage_gate_errors_total 0",
            "vantage_gate_tokens 120",
            "vantage_gate_bucket_size_tokens 120",
            "vantage_gate_refill_rate_tokens_per_second 120.0",
            "vantage_gate_arrival_rate_per_second 0.0",
            "vantage_gate_future_tokens ",
            "vantage_gate_chain_borrowed 0",
            "vantage_gate_dry_run 1",
            "vantage_gate_filter_info{kind=\"abacus\"} 1",
            "vantage_gate_accept_queue_connections 7",
            "vantage_gate_accept_rate_per_second 12.5",
            "# TYPE vantage_gate_syns counter",
            "# UNIT vantage_gate_bucket_size_tokens tokens",
            "# EOF",
        ] {
            assert!(text.contains(line), "missing `{line}` in\n{text}");
        }
        // No Greedy gauges for an Abacus Filter.
        assert!(!text.contains("drop_threshold"), "{text}");
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
        let text = metrics.encode();
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

    #[test]
    fn routes() {
        assert_eq!(route("GET", "/metrics"), 200);
        assert_eq!(route("GET", "/metrics?x=1"), 200);
        assert_eq!(route("POST", "/metrics"), 405);
        assert_eq!(route("GET", "/"), 404);
        assert_eq!(route("GET", "/metricsx"), 404);
    }

    fn get(address: SocketAddr, path: &str) -> String {
        let mut stream = std::net::TcpStream::connect(address).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        write!(stream, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        response
    }

    #[test]
    fn the_endpoint_serves_metrics_with_the_openmetrics_type() {
        let server = MetricsServer::start("127.0.0.1:0".parse().unwrap(), || {
            "vantage_gate_tokens 1\n# EOF\n".to_string()
        })
        .unwrap();
        let response = get(server.address(), "/metrics");
        assert!(
            response.starts_with("HTTP/1.0 200") || response.starts_with("HTTP/1.1 200"),
            "{response}"
        );
        assert!(
            response.contains(&format!("Content-Type: {CONTENT_TYPE}")),
            "{response}"
        );
        assert!(
            response.ends_with("vantage_gate_tokens 1\n# EOF\n"),
            "{response}"
        );
        let response = get(server.address(), "/other");
        assert!(response.contains(" 404 "), "{response}");
        drop(server);
    }
}
