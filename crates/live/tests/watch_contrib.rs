//! The watch daemon's contrib files: the example configuration is valid,
//! `promtool check rules` accepts the alert rules (when promtool is
//! installed), the dashboard is JSON with panels on the daemon's metrics,
//! and the unit grants CAP_NET_RAW only.

use std::path::{Path, PathBuf};
use std::process::Command;

fn contrib(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../contrib")
        .join(path)
}

#[test]
fn the_example_configuration_is_valid() {
    let config = vantage_live::watch::WatchConfig::load(&contrib("watch.example.toml")).unwrap();
    assert_eq!(config.ports(), vec![80, 443]);
}

#[test]
fn the_alert_rules_pass_promtool() {
    let rules = contrib("prometheus/vantage-watch.yml");
    let text = std::fs::read_to_string(&rules).unwrap();
    assert!(text.contains("vantage_certes_client_response_time_seconds_bucket"));
    if Command::new("promtool").arg("--version").output().is_err() {
        eprintln!("skipped promtool check rules: promtool is not installed (Debian `prometheus`)");
        return;
    }
    let out = Command::new("promtool")
        .args(["check", "rules"])
        .arg(&rules)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Series of the estimate's histogram for one host running both inputs: the
/// capture's (no `source` label) all at or under 1 s, the proxy stream's all
/// between 1 s and 10 s. Added together their p90 would be 8.2 s; apart, the
/// capture's is 0.9 s and the proxy's 9.1 s.
const BOTH_INPUTS_SERIES: &str = r#"
      - series: 'vantage_certes_client_response_time_seconds_bucket{instance="h",class="all",le="1"}'
        values: '0+10x20'
      - series: 'vantage_certes_client_response_time_seconds_bucket{instance="h",class="all",le="10"}'
        values: '0+10x20'
      - series: 'vantage_certes_client_response_time_seconds_bucket{instance="h",class="all",le="+Inf"}'
        values: '0+10x20'
      - series: 'vantage_certes_client_response_time_seconds_bucket{instance="h",class="all",source="proxy",le="1"}'
        values: '0+0x20'
      - series: 'vantage_certes_client_response_time_seconds_bucket{instance="h",class="all",source="proxy",le="10"}'
        values: '0+10x20'
      - series: 'vantage_certes_client_response_time_seconds_bucket{instance="h",class="all",source="proxy",le="+Inf"}'
        values: '0+10x20'
"#;

#[test]
fn the_wait_alert_keeps_the_capture_and_the_proxy_stream_apart() {
    if Command::new("promtool").arg("--version").output().is_err() {
        eprintln!("skipped promtool test rules: promtool is not installed (Debian `prometheus`)");
        return;
    }
    let rules = contrib("prometheus/vantage-watch.yml");
    let test = format!(
        r#"rule_files:
  - {rules}
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:{BOTH_INPUTS_SERIES}
    alert_rule_test:
      - eval_time: 15m
        alertname: VantageClientsWaitOver3s
        exp_alerts:
          - exp_labels:
              severity: warning
              instance: h
              source: proxy
            exp_annotations:
              summary: "Clients of h wait more than 3 s, SYN retries included (estimate from proxy)"
              description: "One client in ten waits 9.1s or more; server-side latency (SYN-to-END) does not show this wait."
"#,
        rules = rules.display()
    );
    let dir = std::env::temp_dir().join(format!("vantage-watch-rules-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("test.yml");
    std::fs::write(&path, test).unwrap();
    let out = Command::new("promtool")
        .args(["test", "rules"])
        .arg(&path)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_dashboard_queries_the_daemons_metrics() {
    let text = std::fs::read_to_string(contrib("grafana/vantage-watch.json")).unwrap();
    let dashboard: serde_json::Value = serde_json::from_str(&text).unwrap();
    let panels = dashboard["panels"].as_array().unwrap();
    assert!(!panels.is_empty());
    let exprs: Vec<&str> = panels
        .iter()
        .flat_map(|p| p["targets"].as_array().into_iter().flatten())
        .filter_map(|t| t["expr"].as_str())
        .collect();
    assert!(exprs
        .iter()
        .any(|e| e.starts_with("histogram_quantile(0.99, sum by (le) (rate(vantage_certes_client_response_time_seconds_bucket")));
    // The estimate's families exist once per input (capture, proxy stream):
    // every query on them picks one input, never their sum.
    for expr in &exprs {
        for family in [
            "vantage_certes_client_response_time_seconds",
            "vantage_certes_syn_to_end_seconds_total",
            "vantage_certes_completed_total",
            "vantage_certes_gave_up_estimated_total",
            "vantage_certes_syns_dropped_total",
            "vantage_certes_syns_accepted_total",
            "vantage_certes_syns_refused_total",
        ] {
            for (at, _) in expr.match_indices(family) {
                let selector = &expr[at..];
                let end = selector.find('}').unwrap_or(selector.len());
                assert!(
                    selector[..end].contains(r#"source=~"$source""#),
                    "{family} without the source filter in {expr}"
                );
            }
        }
    }
    let variables = dashboard["templating"]["list"].as_array().unwrap();
    let source = variables
        .iter()
        .find(|v| v["name"] == "source")
        .expect("a source variable");
    let values: Vec<&str> = source["options"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o["value"].as_str())
        .collect();
    assert_eq!(values, ["^$", "proxy"]);
    let metrics =
        vantage_live::watch::WatchMetrics::new().encode(vantage_live::metrics::Format::Text);
    for name in [
        "vantage_certes_gave_up_estimated_total",
        "vantage_certes_syns_dropped_total",
        "vantage_certes_syns_refused_total",
        "vantage_certes_ring_drops_total",
        "vantage_certes_learned_profile_share",
        "vantage_certes_learned_give_up_share",
    ] {
        assert!(exprs.iter().any(|e| e.contains(name)), "{name}");
        assert!(metrics.contains(name), "{name} is not exported");
    }
}

#[test]
fn the_unit_grants_cap_net_raw_only() {
    let unit = std::fs::read_to_string(contrib("systemd/vantage-watch.service")).unwrap();
    assert!(unit.contains("\nAmbientCapabilities=CAP_NET_RAW\n"));
    assert!(unit.contains("\nCapabilityBoundingSet=CAP_NET_RAW\n"));
    assert!(unit.contains("certes watch --config"));
}

#[test]
fn the_systemd_unit_verifies() {
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped the_systemd_unit_verifies: systemd-analyze is not installed");
        return;
    }
    let unit = std::fs::read_to_string(contrib("systemd/vantage-watch.service")).unwrap();
    // verify checks that the executable exists; the binary is not built
    // for this crate's tests, so a present one stands in.
    let unit = unit.replace("/usr/local/bin/vantage", "/bin/true");
    let dir = std::env::temp_dir().join(format!("vantage-watch-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("vantage-watch.service");
    std::fs::write(&path, unit).unwrap();
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success() && !err.contains("vantage-watch.service:"),
        "{err}"
    );
}
