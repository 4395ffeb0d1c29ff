//! End-to-end test of `vantage reproduce certes --quick --json`: the
//! fields every row promises, the documented bounds, the files and
//! reproducibility across thread counts (the running time is printed, not
//! checked).

use std::process::Command;
use std::time::Instant;

fn vantage(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_vantage"))
        .args(args)
        .output()
        .expect("the vantage binary runs")
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("vantage-certes-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn number(row: &serde_json::Value, key: &str) -> f64 {
    row[key]
        .as_f64()
        .unwrap_or_else(|| panic!("row lacks number {key}: {row}"))
}

#[test]
fn quick_certes_study_as_json_within_documented_bounds() {
    let out_dir = temp_dir("json");
    let started = Instant::now();
    let out = vantage(&[
        "reproduce",
        "certes",
        "--quick",
        "--json",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let elapsed = started.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Timings are not pass/fail (a busy machine is slower); the running
    // time is printed for the record.
    eprintln!("reproduce certes --quick took {elapsed:.1} s");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let rows = doc["rows"].as_array().expect("rows");
    for row in rows {
        for key in [
            "scenario",
            "profile",
            "truth_mean_s",
            "certes_mean_s",
            "syn_to_end_mean_s",
            "certes_rel_err",
            "syn_to_end_rel_err",
            "application_mean_s",
            "mm1_mean_s",
            "sliding_window_mean_s",
            "certes_tracking_err",
            "certes_interval_err",
            "p90_cdf_err",
            "p99_cdf_err",
        ] {
            assert!(row.get(key).is_some(), "row lacks {key}: {row}");
        }
    }
    // Every scenario the issue names, under the paper-era and today's clients.
    for scenario in [
        "test-a",
        "test-g",
        "test-j",
        "queue-switch",
        "test-k",
        "test-n",
        "test-o",
        "test-p",
        "fig25-midstream",
        "fig26-midstream",
    ] {
        for profile in ["windows-9x-nt", "linux-6.5", "mix-2026"] {
            assert!(
                rows.iter()
                    .any(|r| r["scenario"] == scenario && r["profile"] == profile),
                "no row for {scenario} under {profile}"
            );
        }
    }
    // Figure 9's sweep runs one workload and seed at seven interval
    // lengths: the same clients, counted differently. Its rows are judged
    // against each other by the checks, not by Figure 16's bounds.
    let (sweep, rows): (Vec<&serde_json::Value>, Vec<&serde_json::Value>) =
        rows.iter().partition(|r| r["figure"] == "Fig. 9");
    assert_eq!(sweep.len(), 7, "Figure 9's seven interval lengths");
    for row in &sweep {
        assert_eq!(row["truth_mean_s"], sweep[0]["truth_mean_s"], "{row}");
    }
    let mut at_default_bound = 0;
    for &row in &rows {
        let name = format!("{} / {}", row["scenario"], row["profile"]);
        let truth = number(row, "truth_mean_s");
        let certes = number(row, "certes_mean_s");
        let err = number(row, "certes_rel_err");
        assert!((certes / truth - 1.0 - err).abs() < 1e-9, "{name}");
        // Figure 16: Certes within 2.5 % unless the scenario documents a
        // wider bound (never wider than the paper's 7.4 % over all tests).
        let bound = number(row, "certes_bound");
        assert!(bound <= 0.074 + 1e-12, "{name}: bound {bound}");
        assert!(err.abs() <= bound, "{name}: Certes off by {err}");
        if bound == 0.025 {
            at_default_bound += 1;
        }
        // SYN-to-END errs low, by 5 % or more for the paper's own clients
        // (today's clients retry sooner, so in a long transaction such as
        // Test F's the dropped SYNs weigh less: docs/differences/certes.md);
        // Apache's time errs low by 80 % or more.
        let syn_to_end_err = number(row, "syn_to_end_rel_err");
        assert!(syn_to_end_err < 0.0, "{name}");
        if row["profile"] == "windows-9x-nt" {
            assert!(syn_to_end_err <= -0.05, "{name}");
        }
        assert!(number(row, "application_rel_err") <= -0.80, "{name}");
        // Tracking and distribution within the documented bounds.
        assert!(
            number(row, "certes_tracking_err") <= number(row, "tracking_bound"),
            "{name}"
        );
        assert!(
            number(row, "certes_tracking_err_10s") <= number(row, "tracking_bound_10s"),
            "{name}"
        );
        let percentile_bound = number(row, "percentile_bound");
        assert!(percentile_bound == 0.02 || bound > 0.025, "{name}");
        for key in ["p90_cdf_err", "p99_cdf_err"] {
            assert!(number(row, key).abs() <= percentile_bound, "{name}: {key}");
        }
        // Appendix B: recovery within one FTO (to the bin it ends in) is
        // the paper's statement, judged by the checks; in the quick run
        // windows-9x-nt converges one bin later (docs/differences/certes.md).
        // Here: a mid-stream estimator converges, within two FTOs.
        if row["midstream_start_s"].is_number() {
            let recovered = number(row, "midstream_recovered_after_s");
            let limit = number(row, "midstream_recovery_limit_s");
            assert!(limit <= 23.0 && recovered <= 2.0 * limit, "{name}");
        }
    }
    assert!(
        at_default_bound * 10 >= rows.len() * 8,
        "most rows must meet 2.5 %: {at_default_bound} of {}",
        rows.len()
    );
    // Above 61.8 % drops the paper's 3/6 s recursion is unstable
    // (z³ + p z² + p² = 0): run as published it tracks the per-second
    // mean worse than M/M/1; damped it tracks better than both.
    let row = |scenario: &str| {
        rows.iter()
            .find(|r| r["scenario"] == scenario && r["profile"] == "windows-9x-nt")
            .unwrap_or_else(|| panic!("no {scenario} row"))
    };
    let (damped, undamped) = (row("overload-instability"), row("overload-undamped"));
    assert_eq!(damped["damping"], true);
    assert_eq!(undamped["damping"], false);
    assert!((number(damped, "critical_failure") - 0.618).abs() < 1e-3);
    assert!(number(damped, "syn_drop_pct") > 61.8, "{damped}");
    let tracking = |r: &serde_json::Value| number(r, "certes_tracking_err");
    assert!(tracking(undamped) > number(undamped, "mm1_tracking_err"));
    assert!(tracking(damped) < number(damped, "mm1_tracking_err"));
    assert!(
        tracking(damped) * 2.0 < tracking(undamped),
        "{damped} {undamped}"
    );
    // The full model of Section 3.1 runs beside the fast one on every
    // paper scenario (not on Figure 9's sweep), and each such run carries
    // the statement comparing the two.
    let checks = doc["checks"].as_array().expect("checks");
    for row in &rows {
        assert!(row["full_rel_err"].is_number(), "{row}");
        assert!(row["full_window"].as_u64().is_some_and(|w| w >= 1), "{row}");
        let figure = format!(
            "{} ({})",
            row["scenario"].as_str().unwrap(),
            row["figure"].as_str().unwrap()
        );
        assert!(
            checks.iter().any(|c| c["figure"] == figure.as_str()
                && c["profile"] == row["profile"]
                && c["claim"]
                    .as_str()
                    .is_some_and(|claim| claim.contains("near optimal"))),
            "no full-model statement for {figure} {}",
            row["profile"]
        );
    }
    for row in &sweep {
        assert!(row["full_rel_err"].is_null(), "{row}");
    }
    assert!(checks
        .iter()
        .any(|c| c["figure"] == "all (Sec. 3.1 vs 3.2)"));
    // The checks say which of the paper's statements hold.
    let summary = checks
        .iter()
        .find(|c| c["figure"] == "all (Fig. 16)")
        .expect("summary check");
    assert_eq!(summary["holds"], true, "{summary}");
    // Files: the Figure 16 table, tracking series, plots.
    let dir = out_dir.join("quick").join("certes");
    let table = std::fs::read_to_string(dir.join("figure16.csv")).expect("figure16.csv");
    assert!(table.starts_with("scenario,figure,profile,"));
    assert_eq!(table.lines().count(), rows.len() + sweep.len() + 1);
    for plot in [
        "fig18a-test-a",
        "fig18b-test-g",
        "fig19-test-j",
        "fig21-queue-switch",
        "fig25-midstream-steady",
        "fig26-midstream-on-off",
    ] {
        let svg = dir.join(format!("{plot}-windows-9x-nt.svg"));
        let text = std::fs::read_to_string(&svg).expect("svg written");
        assert!(text.contains("<svg"), "{}", svg.display());
    }
    assert!(dir.join("tracking-test-j-linux-6.5.csv").exists());

    // Same seeds, same results on one thread.
    let again = vantage(&[
        "reproduce",
        "certes",
        "--quick",
        "--json",
        "--threads",
        "1",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert!(again.status.success());
    assert_eq!(out.stdout, again.stdout);
    let _ = std::fs::remove_dir_all(&out_dir);
}

#[test]
fn unknown_study_lists_certes() {
    let out = vantage(&["reproduce", "certez"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("certez") && err.contains("certes"), "{err}");
}
