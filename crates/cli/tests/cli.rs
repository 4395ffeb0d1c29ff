//! End-to-end tests of the `vantage` binary: the Abacus study in quick mode,
//! machine output, and clear errors for bad input.

use std::process::Command;

fn vantage(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_vantage"))
        .args(args)
        .output()
        .expect("the vantage binary runs")
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("vantage-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// `reproduce abacus --quick --json` gives one JSON document whose rows carry
/// the fields the study promises, for all four filters, and writes CSV and
/// SVG per figure. The paper's qualitative results hold under its own
/// client profile.
#[test]
fn quick_abacus_study_as_json() {
    let out_dir = temp_dir("json");
    let out = vantage(&[
        "reproduce",
        "abacus",
        "--quick",
        "--json",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    let rows = doc["rows"].as_array().expect("rows");
    assert!(!rows.is_empty());
    for row in rows {
        for key in [
            "study",
            "figure",
            "profile",
            "filter",
            "parameter",
            "value",
            "throughput_pct",
            "delay_mean_s",
            "delay_p99_s",
            "cost_mean",
            "timeouts_pct",
            "retransmissions_mean",
        ] {
            assert!(row.get(key).is_some(), "row lacks {key}: {row}");
        }
    }
    for filter in ["tbf", "tbf-reject", "abacus", "greedy"] {
        assert!(
            rows.iter().any(|r| r["filter"] == filter),
            "no {filter} rows"
        );
    }
    for figure in ["fig4", "fig5", "fig8", "fig9", "fig10", "fig11"] {
        assert!(out_dir
            .join("quick")
            .join("abacus")
            .join(format!("{figure}.csv"))
            .exists());
        let svg = out_dir
            .join("quick")
            .join("abacus")
            .join(format!("{figure}-windows-9x-nt.svg"));
        let text = std::fs::read_to_string(&svg).expect("svg written");
        assert!(text.contains("<svg"), "{}", svg.display());
    }
    // Reject never lets a request time out, anywhere.
    for row in rows.iter().filter(|r| r["filter"] == "tbf-reject") {
        assert_eq!(row["timeouts_pct"].as_f64(), Some(0.0), "{row}");
    }
    // The paper's statements under its own (Windows 9x/NT) clients.
    let checks = doc["checks"].as_array().expect("checks");
    let must_hold = [
        "AF's mean delay below TBF's",
        "AF's time-outs far below TBF's",
        "R1: first retransmission",
        "TBF w/ Reject: no request times out",
    ];
    for claim in must_hold {
        let matching: Vec<_> = checks
            .iter()
            .filter(|c| c["profile"] == "windows-9x-nt")
            .filter(|c| c["claim"].as_str().unwrap().contains(claim))
            .collect();
        assert!(!matching.is_empty(), "no check for {claim}");
        for c in matching {
            assert_eq!(c["holds"], true, "{c}");
        }
    }
    // A manifest in the quick folder and the study's, naming every scenario.
    for folder in [out_dir.join("quick"), out_dir.join("quick").join("abacus")] {
        let text = std::fs::read_to_string(folder.join("manifest.json")).expect("manifest.json");
        let manifest: serde_json::Value = serde_json::from_str(&text).expect("manifest parses");
        assert_eq!(manifest["mode"], "quick");
        assert_eq!(manifest["studies"][0]["study"], "abacus");
        assert_eq!(
            manifest["studies"][0]["scenarios"]
                .as_array()
                .unwrap()
                .len(),
            7
        );
    }
    assert!(
        !out_dir.join("abacus").exists(),
        "a quick run leaves the full run's folder alone"
    );
    let _ = std::fs::remove_dir_all(&out_dir);
}

/// The same seed gives the same results, bit for bit, on any thread count.
#[test]
fn reproducible_across_thread_counts() {
    let scenario = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/abacus/fig8-burstiness.toml"
    );
    let dir = temp_dir("repro");
    let run = |threads: &str| {
        let out = vantage(&[
            "sim",
            scenario,
            "--quick",
            "--json",
            "--threads",
            threads,
            "--out",
            dir.to_str().unwrap(),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    assert_eq!(run("1"), run("2"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn missing_scenario_file_is_named() {
    let out = vantage(&["sim", "/nonexistent/scenario.toml"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/scenario.toml"), "{err}");
}

#[test]
fn wrong_key_is_named_with_file_and_line() {
    let dir = temp_dir("badkey");
    std::fs::create_dir_all(&dir).unwrap();
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/abacus/fig8-burstiness.toml"
    ))
    .unwrap()
    .replace("refill_rate = 120", "refil_rate = 120");
    let line = 1 + text
        .lines()
        .position(|l| l.starts_with("refil_rate"))
        .unwrap();
    let path = dir.join("bad.toml");
    std::fs::write(&path, text).unwrap();
    let out = vantage(&["sim", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("bad.toml:{line}:")) && err.contains("refil_rate"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unknown_study_is_named() {
    let out = vantage(&["reproduce", "nosuch"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nosuch") && err.contains("abacus"), "{err}");
}

#[test]
fn sim_refuses_the_testbed_plan_and_names_the_testbed_command() {
    let out_dir = temp_dir("sim-cpa");
    let plan = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/cpa/section4.toml"
    );
    let out = vantage(&["sim", plan, "--quick", "--out", &out_dir.to_string_lossy()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("vantage testbed tcpeval"), "{err}");
    assert!(err.contains("not a simulation"), "{err}");
    let _ = std::fs::remove_dir_all(&out_dir);
}

#[test]
fn a_skipped_testbed_study_is_not_run_and_check_says_so_without_failing() {
    let out_dir = temp_dir("reproduce-cpa-skipped");
    let out = vantage(&[
        "reproduce",
        "cpa",
        "--skip-testbed",
        "--quick",
        "--check",
        "--json",
        "--out",
        &out_dir.to_string_lossy(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("vantage reproduce cpa: not run: --skip-testbed was given"),
        "{err}"
    );
    assert!(
        err.contains("--check: study `cpa` was not run (--skip-testbed was given)"),
        "{err}"
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(doc["ran"], false);
    assert_eq!(doc["reason"], "--skip-testbed was given");
    let page = std::fs::read_to_string(out_dir.join("quick/index.html")).expect("the report");
    assert!(page.contains("not run: --skip-testbed was given"));
    let _ = std::fs::remove_dir_all(&out_dir);
}

#[test]
fn profiles_lists_table1_and_todays() {
    let out = vantage(&["profiles"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("windows-9x-nt (gaps 3,6,12 s, gives up at 45 s)"),
        "{text}"
    );
    assert!(
        text.contains("linux-6.5 (gaps 1,1,1,1,1,2,4,8,16,32 s, gives up at 131 s)"),
        "{text}"
    );
    assert!(text.contains("mix-2026"));
}

/// `vantage cpa` on a truncated capture names the file and the byte offset,
/// once, and exits non-zero; on a whole one it prints one JSON line per
/// transaction with the fields the issue names.
#[test]
fn cpa_reports_truncation_by_offset_and_analyzes_whole_files() {
    let data =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../cpa/tests/data/cpa-server-delay");
    let whole = std::fs::read(data.join("server.pcap")).unwrap();
    let dir = temp_dir("cpa-trunc");
    std::fs::create_dir_all(&dir).unwrap();
    let cut = dir.join("cut.pcap");
    std::fs::write(&cut, &whole[..whole.len() - 10]).unwrap();
    let out = vantage(&["cpa", "--server", cut.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("cut.pcap: byte ") && err.contains("truncated"),
        "{err}"
    );
    assert_eq!(
        err.matches("truncated").count(),
        1,
        "the cause is printed once: {err}"
    );

    let out = vantage(&[
        "cpa",
        "--server",
        data.join("server.pcap").to_str().unwrap(),
        "--client",
        data.join("client0.pcap").to_str().unwrap(),
        "--jsonl",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!lines.is_empty());
    for line in &lines {
        for field in [
            "client",
            "server",
            "start_s",
            "duration_s",
            "bytes",
            "server_s",
            "client_s",
            "propagation_s",
            "network_variation_s",
            "loss_timeout_s",
            "loss_fast_retransmit_s",
            "critical_path_packets",
        ] {
            assert!(line.get(field).is_some(), "missing {field} in {line}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `vantage sim` runs a scenario file of any study: a Certes file gives
/// Certes rows (truth beside the estimate), an SBAC file gives SBAC rows
/// for each of its strategies.
#[test]
fn sim_runs_certes_and_sbac_scenario_files() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out_dir = temp_dir("sim-any-study");
    let run = |file: &str| -> serde_json::Value {
        let path = root.join(file);
        let out = vantage(&[
            "sim",
            path.to_str().unwrap(),
            "--quick",
            "--json",
            "--out",
            out_dir.to_str().unwrap(),
        ]);
        assert!(
            out.status.success(),
            "{file}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("valid JSON")
    };
    let certes = run("scenarios/certes/test-a-steady.toml");
    let rows = certes["rows"].as_array().expect("certes rows");
    assert_eq!(rows.len(), 3, "one row per client population");
    for row in rows {
        assert_eq!(row["scenario"], "test-a");
        let truth = row["truth_mean_s"].as_f64().expect("truth");
        let estimate = row["certes_mean_s"].as_f64().expect("estimate");
        assert!(
            truth > 0.0 && (estimate / truth - 1.0).abs() < 0.05,
            "{row}"
        );
    }
    let sbac = run("scenarios/sbac/fig9-interval-5s.toml");
    let rows = sbac["rows"].as_array().expect("sbac rows");
    assert!(!rows.is_empty());
    for row in rows {
        assert_eq!(row["figure"], "Fig. 9");
        assert!(row["aborted_pct"].as_f64().is_some(), "{row}");
    }
    let _ = std::fs::remove_dir_all(&out_dir);
}

/// A scenario file naming a study that does not exist is refused with the
/// key and the studies there are, not parsed as some other study's file.
#[test]
fn sim_names_an_unknown_study() {
    let dir = temp_dir("sim-unknown-study");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("x.toml");
    std::fs::write(&file, "[scenario]\nstudy = \"abacusx\"\nname = \"x\"\n").unwrap();
    let out = vantage(&["sim", file.to_str().unwrap()]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("x.toml")
            && stderr.contains("`scenario.study`")
            && stderr.contains("\"abacusx\""),
        "{stderr}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The old names of `scenario.populations` (`scenario.clients` in the
/// Abacus format, `scenario.profiles` in the Certes one) still load, with
/// a warning on stderr that names the file, the line and both keys, and
/// give the same results; both names at once are refused, naming both.
#[test]
fn old_population_keys_load_with_a_warning_on_stderr() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = temp_dir("old-keys");
    std::fs::create_dir_all(&dir).unwrap();
    let run = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        vantage(&[
            "sim",
            path.to_str().unwrap(),
            "--quick",
            "--json",
            "--out",
            dir.join("out").to_str().unwrap(),
        ])
    };
    for (file, old_key, one) in [
        (
            "scenarios/abacus/fig4-resync.toml",
            "clients",
            "[\"linux-6.5\"]",
        ),
        (
            "scenarios/certes/fig9-interval-0250ms.toml",
            "profiles",
            "[\"windows-9x-nt\"]",
        ),
    ] {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        let new_line = text
            .lines()
            .find(|l| l.starts_with("populations = "))
            .unwrap_or_else(|| panic!("{file} lists scenario.populations"));
        let line = 1 + text.lines().position(|l| l == new_line).unwrap();
        // One population keeps the runs short.
        let new = text.replacen(new_line, &format!("populations = {one}"), 1);
        let old = text.replacen(new_line, &format!("{old_key} = {one}"), 1);

        let current = run("new.toml", &new);
        let stderr = String::from_utf8_lossy(&current.stderr);
        assert!(current.status.success(), "{file}: {stderr}");
        assert!(!stderr.contains("warning"), "{file}: {stderr}");

        let renamed = run("old.toml", &old);
        let stderr = String::from_utf8_lossy(&renamed.stderr);
        assert!(renamed.status.success(), "{file}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "vantage: warning: {}:{line}: `scenario.{old_key}` is the old name of `scenario.populations`",
                dir.join("old.toml").display()
            )),
            "{file}: {stderr}"
        );
        assert_eq!(
            String::from_utf8_lossy(&current.stdout),
            String::from_utf8_lossy(&renamed.stdout),
            "{file}: the old key gives other results"
        );

        let both = new.replacen(
            "populations = ",
            &format!("{old_key} = {one}\npopulations = "),
            1,
        );
        let refused = run("both.toml", &both);
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(1), "{file}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "both.toml:{line}: `scenario.{old_key}` and `scenario.populations` are the same setting"
            )),
            "{file}: {stderr}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
