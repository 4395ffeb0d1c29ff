//! Root test: `vantage testbed thesis
//! scenarios/proxy/thesis-section5-tcp-memory.toml --quick` (the Section 5
//! plan with every proxy in a memory cgroup limiting its kernel TCP
//! memory) runs every scheme at every user count, accounts for every
//! request, and charges every proxy's sockets to its cgroup. Skips (saying why) without root or without nginx, squid or ss;
//! `scripts/test` installs them. The experiment tears down its namespaces
//! (and with them the emulator's rule and the processes inside) and stops
//! the origins and proxies itself, also when it fails, and removes each
//! run's memory cgroup when the run ends, failed or not; the test checks
//! that nothing is left. The thesis's statements are printed, not
//! asserted (they are measurements).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

mod leftovers;
use leftovers::{count, namespaces, processes_mentioning, rules_mentioning};

/// Directories named `name` anywhere in the memory cgroup hierarchies
/// (v1 and v2).
fn memory_cgroups_named(name: &str) -> Vec<PathBuf> {
    fn walk(dir: &Path, name: &str, depth: u32, found: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if !path.is_dir() {
                continue;
            }
            if entry.file_name() == name {
                found.push(path.clone());
            }
            if depth < 4 {
                walk(&path, name, depth + 1, found);
            }
        }
    }
    let mut found = Vec::new();
    for root in [
        "/sys/fs/cgroup/memory",
        "/sys/fs/cgroup/unified",
        "/sys/fs/cgroup",
    ] {
        walk(Path::new(root), name, 0, &mut found);
    }
    found.sort();
    found.dedup();
    found
}

fn plan() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios/proxy/thesis-section5-tcp-memory.toml")
}

#[test]
fn quick_run_has_every_scheme_and_accounts_for_every_request() {
    if !vantage_sys::privilege::is_root() {
        eprintln!("skipped: needs root (geteuid() = 0) for network namespaces and iptables");
        return;
    }
    for program in ["nginx", "squid", "ss"] {
        if vantage_sys::command::find_program(program).is_none() {
            eprintln!("skipped: {program} is not installed (scripts/test installs it)");
            return;
        }
    }
    let out = std::env::temp_dir().join(format!("vantage-thesis-live-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let child = Command::new(env!("CARGO_BIN_EXE_vantage"))
        .args(["testbed", "thesis"])
        .arg(plan())
        .args(["--quick", "--json", "--out"])
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("vantage runs");
    // The run's namespaces are `vtb-th<its pid in hex>-…`, its origins'
    // documents under `vantage-thesis-origins-<its pid>`.
    let pid = child.id();
    let prefix = format!("vtb-th{pid:x}-");
    let output = child.wait_with_output().expect("vantage finishes");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "vantage testbed thesis failed:\n{stderr}"
    );
    let report: Value = serde_json::from_slice(&output.stdout).expect("JSON report");

    // Nothing left behind: namespaces, processes (origins, proxies), rules,
    // the origins' documents.
    assert!(
        namespaces(&prefix).is_empty(),
        "namespaces left: {:?}",
        namespaces(&prefix)
    );
    for needle in [
        out.display().to_string(),
        format!("vantage-thesis-origins-{pid}"),
    ] {
        let left = processes_mentioning(&needle);
        assert!(left.is_empty(), "processes left: {left:?}");
    }
    let rules = rules_mentioning(&prefix);
    assert!(rules.is_empty(), "rules left: {rules:?}");
    let cgroup = format!("vantage-th{pid:x}-tcp");
    let left = memory_cgroups_named(&cgroup);
    assert!(left.is_empty(), "memory cgroups left: {left:?}");
    assert!(
        !std::env::temp_dir()
            .join(format!("vantage-thesis-origins-{pid}"))
            .exists(),
        "the origins' documents were removed"
    );

    let text = std::fs::read_to_string(plan()).expect("plan");
    let plan: toml::Value = toml::from_str(&text).expect("plan TOML");
    let schemes: Vec<&str> = plan["scheme"]
        .as_array()
        .expect("schemes")
        .iter()
        .map(|v| v["name"].as_str().expect("name"))
        .collect();
    let users: Vec<u64> = plan["workload"]["users"]
        .as_array()
        .expect("users")
        .iter()
        .map(|u| u.as_integer().expect("a count") as u64)
        .collect();
    let rows = report["rows"].as_array().expect("rows");
    let ran: Vec<(u64, &str)> = rows
        .iter()
        .map(|r| (count(r, "users"), r["scheme"].as_str().unwrap_or("")))
        .collect();
    let planned: Vec<(u64, &str)> = users
        .iter()
        .flat_map(|&u| schemes.iter().map(move |&s| (u, s)))
        .collect();
    assert_eq!(
        ran, planned,
        "every scheme ran once at every user count, in order"
    );
    for proxy in ["vantage", "squid", "nginx"] {
        assert!(rows.iter().any(|r| r["proxy"] == proxy), "{proxy} ran");
    }
    for mode in ["autotune", "fixed", "ssbt", "ssbt+conn"] {
        assert!(rows.iter().any(|r| r["mode"] == mode), "mode {mode} ran");
    }

    for row in rows {
        let name = row["scheme"].as_str().unwrap_or("");
        let requests = count(row, "requests");
        assert!(requests > 0, "{name}: users made requests");
        assert_eq!(
            count(row, "completed") + count(row, "failed") + count(row, "cut"),
            requests,
            "{name}: completed + failed + cut = requests"
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
            "{name}: every failure has a kind"
        );
        let per_path: u64 = row["paths"]
            .as_array()
            .expect("paths")
            .iter()
            .map(|p| count(p, "requests"))
            .sum();
        assert_eq!(per_path, requests, "{name}: the paths add up");
        let path_users: u64 = row["paths"]
            .as_array()
            .expect("paths")
            .iter()
            .map(|p| count(p, "users"))
            .sum();
        assert_eq!(path_users, count(row, "users"), "{name}: every user ran");
        assert!(count(row, "completed") > 0, "{name}: documents arrived");
        let samples = row["samples"].as_array().expect("samples");
        assert!(
            samples.iter().any(|s| count(s, "client_connections") > 0),
            "{name}: the proxy's sockets were sampled"
        );
        assert!(
            count(row, "origin_responses") > 0,
            "{name}: the origins served"
        );
        assert!(
            count(row, "tcp_memory_limit_bytes") > 0,
            "{name}: the proxy ran under the limit"
        );
        assert!(
            count(row, "cgroup_tcp_peak_bytes") > 0,
            "{name}: its sockets were charged to its memory cgroup"
        );
        assert_eq!(
            row["vantage"].is_null(),
            row["proxy"] != "vantage",
            "{name}: vantage's own counters only for vantage"
        );
    }

    // The thesis's statements beside ours (measurements, not pass
    // conditions).
    for check in report["checks"].as_array().expect("checks") {
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
    for file in ["report.json", "table.md", "figures.svg", "manifest.json"] {
        assert!(dir.join(file).is_file(), "{file} written");
    }
    let _ = std::fs::remove_dir_all(&out);
}
