//! End-to-end test of `vantage reproduce sbac --quick --json`: the fields
//! every row promises, Table 2 beside the paper and the
//! files written (the running time is printed, not checked).

use std::process::Command;
use std::time::Instant;

#[test]
fn quick_sbac_study_as_json() {
    let out_dir = std::env::temp_dir().join(format!("vantage-sbac-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out_dir);
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_vantage"))
        .args([
            "reproduce",
            "sbac",
            "--quick",
            "--json",
            "--out",
            out_dir.to_str().unwrap(),
        ])
        .output()
        .expect("the vantage binary runs");
    let elapsed = started.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Timings are not pass/fail (a busy machine is slower); the running
    // time is printed for the record.
    eprintln!("reproduce sbac --quick took {elapsed:.1} s");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let rows = doc["rows"].as_array().expect("rows");
    assert!(!rows.is_empty());
    for row in rows {
        for key in ["figure", "strategy", "pattern"] {
            assert!(row[key].is_string(), "row lacks {key}: {row}");
        }
        for key in [
            "session_length_mean",
            "load_pct",
            "completed_sessions_per_s",
            "aborted_pct",
            "useful_utilization_pct",
        ] {
            let v = row[key]
                .as_f64()
                .unwrap_or_else(|| panic!("row lacks {key}: {row}"));
            assert!(v.is_finite() && v >= 0.0, "{key} = {v}");
        }
    }
    // Every strategy of the paper appears.
    for strategy in ["none", "stable", "responsive", "hybrid", "predictive"] {
        assert!(rows.iter().any(|r| r["strategy"] == strategy), "{strategy}");
    }
    // Table 2: 24 cells, each with the paper's number and ours.
    let table2 = doc["table2"].as_array().expect("table2");
    assert_eq!(table2.len(), 24);
    for cell in table2 {
        assert!(cell["paper_aborted_pct"].is_number());
        assert!(cell["aborted_pct"].is_number(), "{cell}");
    }
    assert!(!doc["checks"].as_array().expect("checks").is_empty());
    for file in [
        "fig3-4.csv",
        "fig3-4.svg",
        "fig11-table2-busy-day.svg",
        "paper-comparison.csv",
    ] {
        assert!(
            out_dir.join("quick").join("sbac").join(file).exists(),
            "{file}"
        );
    }
    let _ = std::fs::remove_dir_all(&out_dir);
}
