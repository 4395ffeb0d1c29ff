//! Root test: `vantage testbed resources scenarios/proxy/autotune-scale.toml
//! --quick` runs every variant and the step run, accounts for every
//! download and samples the proxy's memory. Skips (saying why) without
//! root or without nginx; `scripts/test` installs it. The experiment tears
//! down its namespaces (and with them the emulator's rule) and stops nginx
//! itself, also when it fails; the test checks that nothing is left. The
//! issue's memory goal is printed, not asserted (it is a measurement).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

mod leftovers;
use leftovers::{count, namespaces, processes_mentioning};

fn installed(program: &str) -> bool {
    vantage_sys::command::find_program(program).is_some()
}

fn plan() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/proxy/autotune-scale.toml")
}

#[test]
fn quick_run_has_every_variant_and_accounts_for_every_download() {
    if !vantage_sys::privilege::is_root() {
        eprintln!("skipped: needs root (geteuid() = 0) for network namespaces and iptables");
        return;
    }
    if !installed("nginx") {
        eprintln!("skipped: nginx is not installed (scripts/test installs it)");
        return;
    }
    let out = std::env::temp_dir().join(format!("vantage-resources-live-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let child = Command::new(env!("CARGO_BIN_EXE_vantage"))
        .args(["testbed", "resources"])
        .arg(plan())
        .args(["--quick", "--json", "--out"])
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("vantage runs");
    // The run's namespaces are `vtb-rl<its pid in hex>-…`.
    let prefix = format!("vtb-rl{:x}-", child.id());
    let output = child.wait_with_output().expect("vantage finishes");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "vantage testbed resources failed:\n{stderr}"
    );
    let report: Value = serde_json::from_slice(&output.stdout).expect("JSON report");

    // Nothing left behind: namespaces, nginx.
    assert!(
        namespaces(&prefix).is_empty(),
        "namespaces left: {:?}",
        namespaces(&prefix)
    );
    let out_text = out.display().to_string();
    let left = processes_mentioning(&out_text);
    assert!(left.is_empty(), "processes left: {left:?}");

    let text = std::fs::read_to_string(plan()).expect("plan");
    let plan: toml::Value = toml::from_str(&text).expect("plan TOML");
    let variants: Vec<&str> = plan["variant"]
        .as_array()
        .expect("variants")
        .iter()
        .map(|v| v["name"].as_str().expect("name"))
        .collect();
    let rows = report["rows"].as_array().expect("rows");
    let ran: Vec<&str> = rows
        .iter()
        .map(|r| r["variant"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(ran, variants, "every variant ran once, in order");
    for mode in ["autotune", "fixed", "ssbt", "ssbt+conn"] {
        assert!(rows.iter().any(|r| r["mode"] == mode), "mode {mode} ran");
    }

    let downloads = count(&report, "downloads");
    for row in rows {
        let started = count(row, "started");
        assert_eq!(started, downloads, "every planned download started: {row}");
        assert_eq!(
            count(row, "completed") + count(row, "failed"),
            started,
            "completed + failed = started: {row}"
        );
        let kinds: u64 = row["failures"]
            .as_object()
            .expect("failures by kind")
            .values()
            .map(|v| v.as_u64().expect("a count"))
            .sum();
        assert_eq!(
            kinds,
            count(row, "failed"),
            "every failure has a kind: {row}"
        );
        let samples = row["samples"].as_array().expect("samples");
        assert!(
            samples.len() >= 4,
            "memory sampled: {} samples",
            samples.len()
        );
        assert!(
            samples.iter().any(|s| count(s, "proxy_sockets") > 0),
            "the proxy's sockets were found"
        );
        assert!(count(row, "peak_proxy_bytes") > 0, "{}", row["variant"]);
        assert!(
            row["goodput_mbps"].as_f64().unwrap_or(0.0) > 0.0,
            "{}",
            row["variant"]
        );
    }
    let step = &report["step"];
    assert_eq!(
        count(step, "started"),
        plan["step"]["downloads"]
            .as_integer()
            .expect("step downloads") as u64
    );
    assert!(
        !step["connections"]
            .as_array()
            .expect("connections")
            .is_empty(),
        "the step's connections were sampled"
    );

    // The goal, printed beside ours (a measurement, not a pass condition).
    for goal in report["goal"].as_array().expect("goal rows") {
        eprintln!(
            "{}: peak memory {:.0} % of autotune's (goal ≤ 50 %), goodput {:.0} % (goal ≥ 95 %)",
            goal["variant"].as_str().unwrap_or(""),
            goal["memory_share"].as_f64().unwrap_or(f64::NAN) * 100.0,
            goal["goodput_share"].as_f64().unwrap_or(f64::NAN) * 100.0,
        );
    }
    eprintln!(
        "step: worst {} intervals to the new target (goal ≤ 3), {} to regrow (goal ≤ 2)",
        step["worst_intervals_to_target"], step["worst_intervals_to_regrow"]
    );
    let dir = out.join("quick");
    for file in ["report.json", "table.md", "memory.svg", "manifest.json"] {
        assert!(dir.join(file).is_file(), "{file} written");
    }
    let _ = std::fs::remove_dir_all(&out);
}
