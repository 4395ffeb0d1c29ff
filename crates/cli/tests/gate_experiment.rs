//! Root test: a small `vantage testbed experiment` — the real
//! `scenarios/gate/section6.toml` with a 10 s `[quick]` section and variants
//! (a) no gate, (c) iptables limit + REJECT and (e) the vantage gate with the
//! Abacus Filter — and what must hold whatever the timing:
//!
//! * every scheduled connection is recorded exactly once, and the metrics
//!   account for every record;
//! * REJECT refuses clients (one refused client per rejected SYN, as
//!   iptables counts them); the kernel's accept queue refuses none;
//! * the gate exits cleanly, leaves no rule behind, and its JSON-lines log
//!   gives a verdict for every SYN it saw — as many as the server capture
//!   holds — with one handshake per accept and one refused client per
//!   reject.
//!
//! And, without root, `--seed-sweep`: its counts agree with its own rows.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use vantage_testbed::load::record::{read_csv, ConnectionRecord, Outcome};

const VANTAGE: &str = env!("CARGO_BIN_EXE_vantage");

fn scenario() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/gate/section6.toml")
}

/// The experiment file with this test's `[quick]` section in place of the
/// file's own.
fn small_experiment(variants: &[&str]) -> String {
    let text = std::fs::read_to_string(scenario()).expect("section6.toml is readable");
    let start = text
        .find("\n[quick]\n")
        .expect("section6.toml has a [quick] section");
    let end = start
        + 1
        + text[start + 1..]
            .find("\n[")
            .expect("a table follows [quick]");
    let variants: Vec<String> = variants.iter().map(|v| format!("\"{v}\"")).collect();
    // Seed 16's first 10 s hold 1,435 arrivals, more than a 120-token bucket
    // refilled at 120/s admits (1,320): (c) must refuse clients and (e) must
    // drop or reject some.
    let quick = format!(
        "\n[quick]\nduration_s = 10\nseed = 16\nprofiles = [\"linux-6.5\"]\nvariants = [{}]\nsim_repetitions = 1\n",
        variants.join(", ")
    );
    format!("{}{}{}", &text[..start], quick, &text[end..])
}

fn gate_subcommand_exists() -> bool {
    Command::new(VANTAGE)
        .args(["gate", "run", "--help"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

fn live_row<'a>(report: &'a Value, variant: &str) -> &'a Value {
    report["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .find(|r| r["source"] == "live" && r["variant"] == variant)
        .unwrap_or_else(|| panic!("no live row for variant {variant}"))
}

fn records_of(row: &Value) -> (PathBuf, Vec<ConnectionRecord>) {
    let dir = PathBuf::from(row["dir"].as_str().expect("a run directory"));
    let file = std::fs::File::open(dir.join("clients.csv")).expect("clients.csv");
    (dir, read_csv(file).expect("clients.csv parses"))
}

fn count(records: &[ConnectionRecord], outcome: Outcome) -> u64 {
    records.iter().filter(|r| r.outcome == outcome).count() as u64
}

fn u(value: &Value) -> u64 {
    value
        .as_u64()
        .unwrap_or_else(|| panic!("not a count: {value}"))
}

#[test]
fn small_experiment_accounts_for_every_connection_and_every_syn() {
    if !vantage_sys::privilege::is_root() {
        eprintln!("skipped: needs root (geteuid() = 0) to build the testbed's network namespaces and iptables rules");
        return;
    }
    let with_gate = gate_subcommand_exists();
    let variants: &[&str] = if with_gate {
        &["a", "c", "e"]
    } else {
        eprintln!("`vantage gate run` is not in this build: variant (e) is left out");
        &["a", "c"]
    };
    let dir = std::env::temp_dir().join(format!("vantage-gate-experiment-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("small.toml");
    std::fs::write(&file, small_experiment(variants)).unwrap();
    let out_dir = dir.join("out");
    let output = Command::new(VANTAGE)
        .args(["testbed", "experiment"])
        .arg(&file)
        .args(["--quick", "--json", "--out"])
        .arg(&out_dir)
        .output()
        .expect("vantage runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "experiment failed: {stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).expect("--json prints JSON");
    for name in [
        "experiment.json",
        "experiment.csv",
        "checks.csv",
        "p99-vs-success.svg",
    ] {
        assert!(out_dir.join(name).is_file(), "{name} was not written");
    }
    let scheduled = u(&report["workload"][0]["connections"]);
    assert!(
        scheduled > 1320,
        "seed 16's 10 s should exceed the bucket: {scheduled}"
    );

    let mut refused_by = BTreeMap::new();
    for variant in variants {
        let row = live_row(&report, variant);
        assert!(
            row.get("error").is_none(),
            "variant {variant} failed: {}",
            row["error"]
        );
        let (_, records) = records_of(row);
        // Every scheduled connection recorded exactly once.
        assert_eq!(records.len() as u64, scheduled, "variant {variant}");
        let mut per_client: BTreeMap<u32, BTreeSet<u64>> = BTreeMap::new();
        for r in &records {
            assert!(
                per_client.entry(r.client).or_default().insert(r.id),
                "variant {variant}: connection {}/{} recorded twice",
                r.client,
                r.id
            );
        }
        for (client, ids) in &per_client {
            assert_eq!(
                ids.iter().copied().collect::<Vec<_>>(),
                (0..ids.len() as u64).collect::<Vec<_>>(),
                "variant {variant}: client {client} misses records"
            );
        }
        // Conservation: connected + refused + gave up + others = attempts,
        // and the metrics count exactly the first three.
        let connected = records.iter().filter(|r| r.connected_ns.is_some()).count() as u64;
        let unconnected = |o: Outcome| {
            records
                .iter()
                .filter(|r| r.connected_ns.is_none() && r.outcome == o)
                .count() as u64
        };
        let refused = unconnected(Outcome::Refused) + unconnected(Outcome::Reset);
        let gave_up = unconnected(Outcome::TimedOut) + unconnected(Outcome::Frustrated);
        let others = scheduled - connected - refused - gave_up;
        let outcomes = &row["outcomes"];
        assert_eq!(u(&outcomes["attempts"]), scheduled);
        let by_outcome: u64 = outcomes["by_outcome"]
            .as_object()
            .unwrap()
            .values()
            .map(u)
            .sum();
        assert_eq!(by_outcome, scheduled, "variant {variant}");
        assert_eq!(u(&outcomes["connected"]), connected);
        assert_eq!(u(&outcomes["other"]), others);
        let summary = &row["summary"];
        let requests = u(&summary["requests"]);
        assert_eq!(requests + others, scheduled, "variant {variant}");
        let share = |key: &str| summary[key].as_f64().unwrap() * requests as f64 / 100.0;
        assert!((share("throughput_pct") - connected as f64).abs() < 0.5);
        assert!((share("rejects_pct") - refused as f64).abs() < 0.5);
        assert!((share("timeouts_pct") - gave_up as f64).abs() < 0.5);
        refused_by.insert(variant.to_string(), count(&records, Outcome::Refused));
    }

    // The kernel's accept queue drops; it never refuses.
    assert_eq!(refused_by["a"], 0, "no gate, yet clients were refused");
    // REJECT refuses one client per SYN over the limit.
    let c = live_row(&report, "c");
    assert!(
        refused_by["c"] > 0,
        "iptables REJECT refused no client although the arrivals exceed the bucket"
    );
    assert_eq!(
        u(&c["gate"]["limit_refused"]),
        refused_by["c"],
        "iptables' REJECT count and the clients' refusals differ"
    );

    if !with_gate {
        return;
    }
    let e = live_row(&report, "e");
    let (run_dir, records) = records_of(e);
    let gate = &e["gate"];
    assert_eq!(gate["kind"], "vantage");
    assert_eq!(
        gate["exit_code"], 0,
        "the gate did not exit cleanly: {gate}"
    );
    assert_eq!(gate["killed"], false);
    assert!(
        gate.get("rules_left_behind").is_none(),
        "the gate left rules behind: {gate}"
    );
    let log = run_dir.join("gate.jsonl");
    assert!(log.is_file(), "the gate left no log");
    let (mut arrivals, mut accepted, mut dropped, mut rejected, mut lines) = (0, 0, 0, 0, 0);
    for line in std::fs::read_to_string(&log).unwrap().lines() {
        let v: Value = serde_json::from_str(line).expect("each log line is JSON");
        arrivals += u(&v["arrivals"]);
        accepted += u(&v["accepted"]);
        dropped += u(&v["dropped"]);
        rejected += u(&v["rejected"]);
        assert_eq!(u(&v["overruns"]), 0, "SYNs passed the gate unseen: {line}");
        lines += 1;
    }
    assert!(lines >= 10, "one log line per second of the run: {lines}");
    assert_eq!(
        accepted + dropped + rejected,
        arrivals,
        "verdicts do not add up to the SYNs the gate saw"
    );
    assert!(arrivals >= scheduled, "every connection sends a SYN");
    assert!(
        dropped + rejected > 0,
        "the arrivals exceed the bucket, yet nothing was filtered"
    );
    let summary: Value =
        serde_json::from_slice(&std::fs::read(run_dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(
        u(&summary["server_syns"]),
        arrivals,
        "the server capture and the gate saw different SYNs"
    );
    let connected = records.iter().filter(|r| r.connected_ns.is_some()).count() as u64;
    assert_eq!(connected, accepted, "one handshake per accepted SYN");
    assert_eq!(
        count(&records, Outcome::Refused),
        rejected,
        "one refused client per rejected SYN"
    );
    let totals = &e["gate_log"];
    assert_eq!(u(&totals["arrivals"]), arrivals);
    let _ = std::fs::remove_dir_all(&dir);
}

/// No root needed: `--seed-sweep` simulates each seed's arrivals and counts
/// the statements; its counts add up and agree with its own rows.
#[test]
fn seed_sweep_counts_add_up() {
    let dir = std::env::temp_dir().join(format!("vantage-seed-sweep-{}", std::process::id()));
    let output = Command::new(VANTAGE)
        .args(["testbed", "experiment"])
        .arg(scenario())
        .args(["--quick", "--seed-sweep", "6", "--json", "--out"])
        .arg(&dir)
        .output()
        .expect("vantage runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).expect("JSON on stdout");
    assert_eq!(report["seeds"], 6);
    let workloads = report["workloads"].as_array().unwrap();
    let seeds: BTreeSet<u64> = workloads
        .iter()
        .map(|w| w["seed"].as_u64().unwrap())
        .collect();
    assert_eq!(seeds, (1..=6).collect());
    let comparisons = report["comparisons"].as_array().unwrap();
    for summary in report["summary"].as_array().unwrap() {
        let mine: Vec<&Value> = comparisons
            .iter()
            .filter(|c| {
                c["profile"] == summary["profile"]
                    && c["candidate"] == summary["candidate"]
                    && c["baseline"] == summary["baseline"]
                    && c["baseline_summary"]["timeouts_pct"].as_f64().unwrap() > 0.0
            })
            .collect();
        assert_eq!(
            summary["seeds_with_baseline_timeouts"].as_u64().unwrap() as usize,
            mine.len()
        );
        for i in 0..4 {
            let held = mine.iter().filter(|c| c["holds"][i] == true).count();
            assert_eq!(summary["holds"][i].as_u64().unwrap() as usize, held);
            assert!(held <= mine.len());
        }
    }
    // The CSV has one line per comparison, after its header.
    let csv = std::fs::read_to_string(dir.join("seed-sweep.csv")).expect("seed-sweep.csv");
    assert_eq!(csv.lines().count(), comparisons.len() + 1);
    let _ = std::fs::remove_dir_all(&dir);

    let refused = Command::new(VANTAGE)
        .args(["testbed", "experiment"])
        .arg(scenario())
        .args(["--seed-sweep", "0"])
        .output()
        .expect("vantage runs");
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--seed-sweep 0"));
}
