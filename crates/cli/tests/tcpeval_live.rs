//! Root test: `vantage testbed tcpeval scenarios/cpa/section4.toml --quick`
//! runs every test (file size × server load × network load) on both paths,
//! analyses the transactions and reports what the analysis left aside.
//! Skips (saying why) without root or without nginx or tcpdump;
//! `scripts/test` installs them. The experiment tears down its namespaces
//! (and with them the emulator's rule and the processes inside), stops
//! nginx and removes its cgroup itself, also when it fails; the test checks
//! that nothing is left. The paper's statements are printed, not asserted
//! (they are measurements).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

mod leftovers;
use leftovers::{count, namespaces, processes_mentioning, rules_mentioning};

fn plan() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/cpa/section4.toml")
}

#[test]
fn quick_run_has_every_test_on_both_paths_and_accounts_for_every_fetch() {
    if !vantage_sys::privilege::is_root() {
        eprintln!(
            "skipped: needs root (geteuid() = 0) for network namespaces, iptables and cgroups"
        );
        return;
    }
    for program in ["nginx", "tcpdump"] {
        if vantage_sys::command::find_program(program).is_none() {
            eprintln!("skipped: {program} is not installed (scripts/test installs it)");
            return;
        }
    }
    let out = std::env::temp_dir().join(format!("vantage-tcpeval-live-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let child = Command::new(env!("CARGO_BIN_EXE_vantage"))
        .args(["testbed", "tcpeval"])
        .arg(plan())
        .args(["--quick", "--json", "--out"])
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("vantage runs");
    // The run's namespaces are `vtb-te<its pid in hex>-…`, its cgroup
    // `vantage-te<pid>`, its server's files `vantage-tcpeval-server-<pid>`.
    let pid = child.id();
    let tag = format!("te{pid:x}");
    let prefix = format!("vtb-{tag}-");
    let output = child.wait_with_output().expect("vantage finishes");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "vantage testbed tcpeval failed:\n{stderr}"
    );
    let report: Value = serde_json::from_slice(&output.stdout).expect("JSON report");

    // Nothing left behind: namespaces, processes, rules, cgroup, files.
    assert!(
        namespaces(&prefix).is_empty(),
        "namespaces left: {:?}",
        namespaces(&prefix)
    );
    let server_files = format!("vantage-tcpeval-server-{pid}");
    for needle in [out.display().to_string(), server_files.clone()] {
        let left = processes_mentioning(&needle);
        assert!(left.is_empty(), "processes left: {left:?}");
    }
    let rules = rules_mentioning(&prefix);
    assert!(rules.is_empty(), "rules left: {rules:?}");
    for root in [
        "/sys/fs/cgroup",
        "/sys/fs/cgroup/unified",
        "/sys/fs/cgroup/cpu",
    ] {
        let cgroup = Path::new(root).join(format!("vantage-{tag}"));
        assert!(!cgroup.exists(), "cgroup left: {}", cgroup.display());
    }
    assert!(
        !std::env::temp_dir().join(&server_files).exists(),
        "the server's files were removed"
    );

    // Every test ran on both paths.
    let text = std::fs::read_to_string(plan()).expect("plan");
    let plan: toml::Value = toml::from_str(&text).expect("plan TOML");
    let sizes: Vec<u64> = plan["server"]["monitored_bytes"]
        .as_array()
        .expect("sizes")
        .iter()
        .map(|v| v.as_integer().expect("bytes") as u64)
        .collect();
    let rows = report["rows"].as_array().expect("rows");
    let ran: BTreeSet<(String, u64, String)> = rows
        .iter()
        .map(|r| {
            (
                r["path"].as_str().expect("path").to_string(),
                count(r, "bytes"),
                r["label"].as_str().expect("label").to_string(),
            )
        })
        .collect();
    let mut planned = BTreeSet::new();
    for path in ["long", "short"] {
        for &bytes in &sizes {
            for label in ["LNLS", "LNHS", "HNLS", "HNHS"] {
                planned.insert((path.to_string(), bytes, label.to_string()));
            }
        }
    }
    assert_eq!(ran, planned, "every test on both paths, once");
    assert_eq!(rows.len(), planned.len());

    // Every fetch accounted for, every completed fetch analysed.
    let mut analysed = 0;
    for row in rows {
        let name = format!("{} {} {}", row["path"], row["bytes"], row["label"]);
        let fetches = count(row, "fetches");
        assert!(fetches > 0, "{name}: the client fetched");
        assert_eq!(
            count(row, "completed") + count(row, "failed") + count(row, "cut"),
            fetches,
            "{name}: completed + failed + cut = fetches"
        );
        let kinds: u64 = row["fetch_failures"]
            .as_object()
            .expect("failures by kind")
            .values()
            .map(|v| v.as_u64().expect("a count"))
            .sum();
        assert_eq!(
            kinds,
            count(row, "failed"),
            "{name}: every failure has a kind"
        );
        assert!(
            count(row, "transactions") >= count(row, "completed"),
            "{name}: every completed fetch is an analysed transaction"
        );
        analysed += count(row, "transactions") - count(row, "incomplete");
        assert_eq!(row["mean_s"].as_array().map(Vec::len), Some(7));
        assert_eq!(row["std_s"].as_array().map(Vec::len), Some(7));
        let utilisation = row["server_utilisation"].as_f64().expect("utilisation");
        assert!(utilisation > 0.0, "{name}: the server's CPU was measured");
    }
    assert!(analysed > 0, "transactions were analysed whole");

    // What the analysis left aside is reported, per path.
    let analyses = report["analyses"].as_array().expect("analyses");
    assert_eq!(analyses.len(), 2);
    for a in analyses {
        let c = &a["counts"];
        assert!(count(c, "packets") > 0, "{}: packets read", a["path"]);
        for key in [
            "connections_server_only",
            "connections_client_only",
            "connections_without_transactions",
            "failures",
            "transactions_untraceable",
            "hidden_timeouts",
            "beyond_window",
            "stale_resend_segments",
            "connections_evicted",
            "late_segments",
        ] {
            count(c, key);
        }
    }
    count(&report, "transactions_outside_tests");
    for capture in report["captures"].as_array().expect("captures") {
        count(capture, "dropped_by_kernel");
        assert!(
            count(capture, "captured") > 0,
            "{capture}: packets captured"
        );
    }

    // The paper's statements beside ours (measurements, not pass
    // conditions); each carries its criterion.
    let checks = report["checks"].as_array().expect("checks");
    assert!(!checks.is_empty());
    for check in checks {
        assert!(check["criterion"].as_str().is_some_and(|c| !c.is_empty()));
        eprintln!(
            "{} · {} · {}: paper {}, ours {} ({}) → {}",
            check["figure"].as_str().unwrap_or(""),
            check["profile"].as_str().unwrap_or(""),
            check["claim"].as_str().unwrap_or(""),
            check["paper"].as_str().unwrap_or(""),
            check["ours"].as_str().unwrap_or(""),
            check["criterion"].as_str().unwrap_or(""),
            if check["holds"] == true {
                "holds"
            } else {
                "does not hold"
            },
        );
    }
    let dir = out.join("quick");
    for file in ["report.json", "table.md", "figure4.svg", "manifest.json"] {
        assert!(dir.join(file).is_file(), "{file} written");
    }
    let _ = std::fs::remove_dir_all(&out);
}
