//! Root test: `vantage testbed certes-live scenarios/certes-live/smoke.toml
//! --quick` runs both configurations (the test server's accept queue with
//! Linux ≥ 6.5 clients; nginx behind the gate's token bucket with a mixture
//! and a learning daemon), each with the watch daemon beside the server and
//! a real Prometheus scraping it. Checks that every configuration produced
//! intervals, that Prometheus stored samples and holds the daemon's
//! histogram count, that the outcome counts add up, that the learning
//! daemon ran, and that no namespace or process is left. Not the 2.5 %
//! bound: one short run is one sample (its error is printed). Skips, saying
//! why, without root or without Prometheus (`apt-get install prometheus`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

mod leftovers;
use leftovers::processes_mentioning;

fn plan() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/certes-live/smoke.toml")
}

fn number(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} missing in {v}"))
}

#[test]
fn quick_run_scrapes_every_configuration_and_leaves_nothing() {
    if !vantage_sys::privilege::is_root() {
        eprintln!("skipped: needs root (geteuid() = 0) for network namespaces and packet capture");
        return;
    }
    if !Path::new("/usr/bin/prometheus").is_file() {
        eprintln!("skipped: /usr/bin/prometheus is not installed (apt-get install prometheus)");
        return;
    }
    let out = std::env::temp_dir().join(format!("vantage-certes-live-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let child = Command::new(env!("CARGO_BIN_EXE_vantage"))
        .args(["testbed", "certes-live"])
        .arg(plan())
        .args(["--quick", "--json", "--out"])
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("vantage runs");
    let tag = format!("vtb-{:x}-", child.id());
    let output = child.wait_with_output().expect("vantage ends");
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("{stderr}");

    // Nothing left behind, whatever the outcome.
    let namespaces: Vec<String> = std::fs::read_dir("/run/netns")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&tag))
        .collect();
    let processes = processes_mentioning(&out.to_string_lossy());
    let prometheus_data: Vec<PathBuf> = std::fs::read_dir(out.join("quick").join("runs"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("watch").join("prometheus-data"))
        .filter(|p| p.exists())
        .collect();
    assert!(
        output.status.success(),
        "vantage testbed certes-live failed:\n{stderr}"
    );
    assert!(namespaces.is_empty(), "namespaces left: {namespaces:?}");
    assert!(processes.is_empty(), "processes left: {processes:?}");
    assert!(
        prometheus_data.is_empty(),
        "Prometheus data left: {prometheus_data:?}"
    );

    let report: Value = serde_json::from_slice(&output.stdout).expect("JSON report");
    assert_eq!(
        report["failed"].as_array().map(Vec::len),
        Some(0),
        "{}",
        report["failed"]
    );
    let rows = report["rows"].as_array().expect("rows");
    let names: Vec<&str> = rows.iter().filter_map(|r| r["name"].as_str()).collect();
    assert_eq!(names, ["l65-test-queue-steady", "mix-nginx-tbf-steady"]);
    for row in rows {
        let name = row["name"].as_str().unwrap_or("");
        let daemon = &row["daemon"];
        let scraped = &row["scraped"];
        eprintln!(
            "{name}: clients' mean {:.3} s, daemon {:.3} s ({:+.1} %), SYN-to-END {:.3} s, {} SYNs dropped, {} intervals, Prometheus: {} samples, histogram count {}",
            number(row, "truth_mean_s"),
            number(daemon, "estimate_mean_s"),
            number(row, "relative_error") * 100.0,
            number(daemon, "syn_to_end_mean_s"),
            daemon["dropped"],
            daemon["intervals"],
            scraped["samples"],
            scraped["histogram_count"],
        );
        // The daemon closed intervals and counted the transactions.
        assert!(number(daemon, "intervals") > 10.0, "{name}: {daemon}");
        // Outcomes add up to the connections scheduled.
        let o = &row["outcomes"];
        let accounted: f64 = ["ok", "frustrated", "reset", "timed_out", "left_out"]
            .iter()
            .map(|k| number(o, k))
            .sum();
        assert!(number(o, "scheduled") > 100.0, "{name}: {o}");
        assert_eq!(accounted, number(o, "scheduled"), "{name}: {o}");
        // Every client served was served by the listener the daemon
        // watched: its completions are the clients' ok connections (a
        // client that gave up after its request reached the server counts
        // at both).
        let served = number(o, "ok") + number(o, "frustrated") + number(o, "reset");
        assert!(
            number(daemon, "completed") >= number(o, "ok") && number(daemon, "completed") <= served,
            "{name}: daemon completed {} for {o}",
            daemon["completed"]
        );
        assert!(
            number(daemon, "dropped") > 0.0,
            "{name}: no SYN dropped: {daemon}"
        );
        assert_eq!(number(daemon, "ring_drops"), 0.0, "{name}");
        // Prometheus scraped the daemon through the run and holds its
        // histogram: the count is the intervals' transactions, rounded.
        assert_eq!(number(scraped, "up"), 1.0, "{name}: {scraped}");
        assert!(number(scraped, "samples") >= 5.0, "{name}: {scraped}");
        let count = number(scraped, "histogram_count");
        let transactions = number(row, "transactions_when_scraped");
        assert!(
            (count - transactions).abs() <= 0.01 * transactions + 1.0,
            "{name}: histogram count {count}, transactions of the intervals scraped {transactions}"
        );
        assert!(
            number(scraped, "intervals") <= number(daemon, "intervals"),
            "{name}: Prometheus saw more intervals than the JSON Lines hold"
        );
    }
    // The mixture's learning daemon ran beside the told one and was scraped.
    let mix = &rows[1];
    assert!(
        number(&mix["learned"], "intervals") > 10.0,
        "{}",
        mix["learned"]
    );
    assert_eq!(number(&mix["learned_scraped"], "up"), 1.0);
    let shares = &mix["truth_mixture"];
    assert!((number(shares, "linux-3.7") - 0.5).abs() < 0.05, "{shares}");

    let dir = out.join("quick");
    for file in ["report.json", "table.md", "tracking.svg", "manifest.json"] {
        assert!(dir.join(file).is_file(), "{file} written");
    }
    let _ = std::fs::remove_dir_all(&out);
}
