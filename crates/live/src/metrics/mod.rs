//! What every Vantage daemon's metrics share: the hardened HTTP endpoint
//! ([`http`]), the exposition formats, the standard `process_*` metrics
//! ([`process`]) and `vantage_build_info`.
//!
//! Metrics live in a `prometheus-client` registry, which writes
//! OpenMetrics 1.0. A scraper that asks for it (`Accept:
//! application/openmetrics-text`) gets it; any other gets the Prometheus
//! text format 0.0.4, converted by [`openmetrics_to_text`]: counters'
//! `HELP`/`TYPE` name the `_total` sample, `# UNIT` and `# EOF` go.

pub mod http;
pub mod process;

use std::collections::BTreeSet;

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

pub use http::{EndpointCounters, EndpointError, Limits, MetricsServer, Render};
pub use process::ProcessCollector;

/// An exposition format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics 1.0 text.
    OpenMetrics,
    /// The Prometheus text format 0.0.4.
    Text,
}

impl Format {
    /// The format an `Accept` header asks for: OpenMetrics when it names
    /// it (with a non-zero quality), the 0.0.4 text otherwise.
    pub fn negotiate(accept: &str) -> Format {
        let wants_openmetrics = accept.split(',').any(|range| {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or("");
            let quality_zero = parts.any(|p| {
                p.strip_prefix("q=")
                    .and_then(|q| q.parse::<f64>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            media.eq_ignore_ascii_case("application/openmetrics-text") && !quality_zero
        });
        if wants_openmetrics {
            Format::OpenMetrics
        } else {
            Format::Text
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::Text => "text/plain; version=0.0.4; charset=utf-8",
        }
    }
}

/// The registry's OpenMetrics text in `format`.
pub fn encode(registry: &Registry, format: Format) -> String {
    let mut out = String::with_capacity(8192);
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut out, registry);
    match format {
        Format::OpenMetrics => out,
        Format::Text => openmetrics_to_text(&out),
    }
}

/// OpenMetrics text → Prometheus text 0.0.4: a counter family `x` is
/// described as `x_total` (its sample's name), `# UNIT` and `# EOF` lines
/// are dropped; samples are unchanged.
pub fn openmetrics_to_text(openmetrics: &str) -> String {
    let counters: BTreeSet<&str> = openmetrics
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let described = ["# HELP ", "# TYPE "]
            .iter()
            .find_map(|prefix| line.strip_prefix(prefix).map(|rest| (*prefix, rest)));
        match described {
            Some((prefix, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                out.push_str(prefix);
                out.push_str(name);
                if counters.contains(name) {
                    out.push_str("_total");
                }
                out.push(' ');
                out.push_str(tail);
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// Registers what every daemon's registry carries: the metrics endpoint's
/// own refusals, `vantage_build_info` and the process metrics.
pub fn register_daemon_metrics(registry: &mut Registry, endpoint: &EndpointCounters) {
    registry.register(
        "vantage_metrics_connections_refused",
        "Connections to the metrics endpoint closed at once because too many were open",
        endpoint.connections_refused.clone(),
    );
    registry.register(
        "vantage_metrics_requests_refused",
        "Requests to the metrics endpoint answered with a client error",
        endpoint.requests_refused.clone(),
    );
    register_build_info(registry);
    registry.register_collector(Box::new(ProcessCollector));
}

/// Registers `vantage_build_info{version="…"} 1`.
pub fn register_build_info(registry: &mut Registry) {
    let info = Family::<Vec<(String, String)>, Gauge>::default();
    info.get_or_create(&vec![(
        "version".to_string(),
        env!("CARGO_PKG_VERSION").to_string(),
    )])
    .set(1);
    registry.register(
        "vantage_build_info",
        "The running Vantage build (constant 1)",
        info,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::counter::Counter;

    #[test]
    fn negotiation() {
        assert_eq!(Format::negotiate(""), Format::Text);
        assert_eq!(Format::negotiate("text/plain"), Format::Text);
        assert_eq!(Format::negotiate("*/*"), Format::Text);
        assert_eq!(
            Format::negotiate("application/openmetrics-text;version=1.0.0;q=0.5,text/plain;q=0.4"),
            Format::OpenMetrics
        );
        assert_eq!(
            Format::negotiate("application/openmetrics-text;q=0,text/plain"),
            Format::Text
        );
    }

    #[test]
    fn text_names_counters_by_their_sample() {
        let mut registry = Registry::default();
        let c = Counter::<u64>::default();
        c.inc_by(3);
        registry.register("vantage_things", "Things seen", c);
        register_build_info(&mut registry);
        let open = encode(&registry, Format::OpenMetrics);
        assert!(open.contains("# TYPE vantage_things counter"), "{open}");
        assert!(open.ends_with("# EOF\n"), "{open}");
        let text = encode(&registry, Format::Text);
        for line in [
            "# HELP vantage_things_total Things seen.",
            "# TYPE vantage_things_total counter",
            "vantage_things_total 3",
            "# TYPE vantage_build_info gauge",
        ] {
            assert!(text.contains(line), "missing `{line}` in\n{text}");
        }
        assert!(!text.contains("# EOF"), "{text}");
    }
}
