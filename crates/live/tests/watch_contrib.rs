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
    let metrics =
        vantage_live::watch::WatchMetrics::new().encode(vantage_live::metrics::Format::Text);
    for name in [
        "vantage_certes_gave_up_estimated_total",
        "vantage_certes_syns_dropped_total",
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
