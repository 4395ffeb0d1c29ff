//! Root test: `vantage testbed sbac scenarios/proxy/sbac-live.toml --quick`
//! runs every variant against the CPU-capped backend and accounts for
//! every session. Skips (saying why) without root or without nginx and
//! haproxy; `scripts/test` installs both. The experiment tears down its
//! namespaces, cgroup and processes itself, also when it fails; the test
//! checks that none is left.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

mod leftovers;
use leftovers::count;

fn installed(program: &str) -> bool {
    vantage_sys::command::find_program(program).is_some()
}

fn plan() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/proxy/sbac-live.toml")
}

#[test]
fn quick_run_has_every_variant_and_accounts_for_every_session() {
    if !vantage_sys::privilege::is_root() {
        eprintln!("skipped: needs root (geteuid() = 0) for network namespaces and cgroups");
        return;
    }
    for program in ["nginx", "haproxy"] {
        if !installed(program) {
            eprintln!("skipped: {program} is not installed (scripts/test installs it)");
            return;
        }
    }
    let out = std::env::temp_dir().join(format!("vantage-sbac-live-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let child = Command::new(env!("CARGO_BIN_EXE_vantage"))
        .args(["testbed", "sbac"])
        .arg(plan())
        .args(["--quick", "--json", "--out"])
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("vantage runs");
    // The run names its CPU cgroup after its own process id
    // (`vantage-sb<pid in hex>`): another run on the machine keeps its own.
    let own_cgroup = format!("vantage-sb{:x}", child.id());
    let output = child.wait_with_output().expect("vantage runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "vantage testbed sbac failed:\n{stderr}"
    );
    let report: Value = serde_json::from_slice(&output.stdout).expect("JSON report");

    // Nothing left behind.
    let left: Vec<String> = std::fs::read_dir("/sys/fs/cgroup/cpu")
        .into_iter()
        .chain(std::fs::read_dir("/sys/fs/cgroup"))
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| *n == own_cgroup)
        .collect();
    assert!(left.is_empty(), "cgroups left: {left:?}");

    let text = std::fs::read_to_string(plan()).expect("plan");
    let plan: toml::Value = toml::from_str(&text).expect("plan TOML");
    let variants: Vec<&str> = plan["variant"]
        .as_array()
        .expect("variants")
        .iter()
        .map(|v| v["name"].as_str().expect("name"))
        .collect();
    let live = report["live"].as_array().expect("live rows");
    let ran: Vec<&str> = live
        .iter()
        .map(|r| r["variant"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(ran, variants, "every variant ran once, in order");

    assert!(report["capacity_rps"].as_f64().unwrap_or(0.0) > 1.0);
    for row in live {
        let attempted = count(row, "attempted");
        assert!(attempted > 0, "{row}");
        let accounted = [
            "completed",
            "aborted",
            "rejected",
            "failed_at_start",
            "unfinished",
        ]
        .iter()
        .map(|k| count(row, k))
        .sum::<u64>();
        assert_eq!(accounted, attempted, "every session has one outcome: {row}");
        let by_load = row["by_load"].as_array().expect("by_load");
        let split: u64 = by_load.iter().map(|l| count(l, "attempted")).sum();
        assert_eq!(split, attempted, "loads split the sessions: {row}");
        let aborted = row["aborted_pct"].as_f64().expect("aborted_pct");
        assert!((0.0..=100.0).contains(&aborted), "{row}");
        if count(row, "completed") > 0 {
            let p50 = row["response_p50_ms"].as_f64().expect("p50");
            let p99 = row["response_p99_ms"].as_f64().expect("p99");
            assert!(p50 <= p99, "{row}");
        }
    }
    // Without admission nothing is rejected; some SBAC strategy rejected
    // sessions at the highest load.
    let highest = |row: &Value| -> Value {
        row["by_load"]
            .as_array()
            .and_then(|l| l.last())
            .cloned()
            .expect("a load")
    };
    let mut sbac_rejections = 0;
    for row in live {
        let name = row["variant"].as_str().unwrap_or("");
        if name == "none" {
            assert_eq!(count(row, "rejected"), 0, "{row}");
        }
        if name.starts_with("sbac-") {
            sbac_rejections += count(&highest(row), "rejected");
        }
    }
    assert!(sbac_rejections > 0, "no SBAC strategy rejected at overload");
    // At the highest load, clients without admission abort a larger share
    // of their sessions than under the best SBAC strategy.
    let at_overload = |row: &Value| {
        row["by_load"]
            .as_array()
            .and_then(|l| l.last())
            .and_then(|l| l["aborted_pct"].as_f64())
            .expect("aborted share at the highest load")
    };
    let none = live
        .iter()
        .find(|r| r["variant"] == "none")
        .expect("none ran");
    let best_sbac = live
        .iter()
        .filter(|r| {
            r["variant"]
                .as_str()
                .is_some_and(|n| n.starts_with("sbac-"))
        })
        .map(at_overload)
        .fold(f64::INFINITY, f64::min);
    assert!(
        at_overload(none) > best_sbac,
        "no admission aborts {:.2} % at overload, the best SBAC strategy {best_sbac:.2} %",
        at_overload(none)
    );
    // The simulator ran the same workload for every SBAC strategy and none.
    let simulated: Vec<&str> = report["simulator"]
        .as_array()
        .expect("simulator rows")
        .iter()
        .map(|r| r["strategy"].as_str().unwrap_or(""))
        .collect();
    for strategy in ["none", "stable", "responsive", "hybrid", "predictive"] {
        assert!(
            simulated.contains(&strategy),
            "simulator has {strategy}: {simulated:?}"
        );
    }
    assert!(!report["comparisons"]
        .as_array()
        .expect("comparisons")
        .is_empty());
    let dir = out.join("quick");
    for file in ["report.json", "table.md", "manifest.json"] {
        assert!(dir.join(file).is_file(), "{file} written");
    }
    let _ = std::fs::remove_dir_all(&out);
}
