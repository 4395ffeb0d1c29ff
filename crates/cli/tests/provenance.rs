//! Results folders: `manifest.json` in each, quick runs under `quick/`,
//! `sim` never overwriting another scenario's results, and `--check`'s exit
//! status. Uses the SSBT Figure 6 scenario (a fraction of a second).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn vantage(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vantage"))
        .args(args)
        .output()
        .expect("the vantage binary runs")
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("vantage-prov-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn fig6() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/ssbt/fig6-send-buffer.toml")
}

/// Figure 6 with three equal losses: "the higher the loss, the smaller the
/// send buffer" cannot hold.
fn fig6_equal_losses(path: &Path) {
    let text = std::fs::read_to_string(fig6()).unwrap();
    let (start, rest) = text.split_at(text.find("\nlosses = ").expect("fig6 has losses") + 1);
    let end = rest.find('\n').unwrap();
    let changed = format!("{start}losses = [0.01, 0.01, 0.01]{}", &rest[end..]);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, changed).unwrap();
}

fn sim(scenario: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "sim",
        scenario.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    vantage(&args)
}

fn manifest(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("manifest.json"))
        .unwrap_or_else(|e| panic!("{}/manifest.json: {e}", dir.display()));
    serde_json::from_str(&text).expect("manifest.json parses")
}

#[test]
fn sim_writes_a_manifest_in_each_folder_and_quick_runs_apart() {
    let dir = temp_dir("manifest");
    let out = dir.join("results");
    let full = sim(&fig6(), &out, &[]);
    assert!(
        full.status.success(),
        "{}",
        String::from_utf8_lossy(&full.stderr)
    );
    let quick = sim(&fig6(), &out, &["--quick", "--threads", "1"]);
    assert!(
        quick.status.success(),
        "{}",
        String::from_utf8_lossy(&quick.stderr)
    );

    let full_dir = out.join("sim/fig6-send-buffer");
    let quick_dir = out.join("quick/sim/fig6-send-buffer");
    let canonical = std::fs::canonicalize(fig6()).unwrap();
    for (folder, mode) in [(&full_dir, "full"), (&quick_dir, "quick")] {
        assert!(folder.join("ssbt/fig6-send-buffer.csv").exists());
        for m in [manifest(folder), manifest(&folder.join("ssbt"))] {
            assert_eq!(m["mode"], mode, "{m}");
            assert_eq!(m["scenario_file"], canonical.to_str().unwrap(), "{m}");
            assert_eq!(m["vantage_version"], env!("CARGO_PKG_VERSION"));
            assert!(m["git_commit"].as_str().is_some_and(|c| !c.is_empty()));
            assert_eq!(m["command_line"][1], "sim");
            assert!(m["started_at"].as_str().unwrap().ends_with('Z'), "{m}");
            assert!(m["duration_s"].as_f64().unwrap() >= 0.0);
            assert!(m["machine"]["cpu_count"].as_u64().unwrap() >= 1);
            for key in ["hostname", "kernel_release", "cpu_model"] {
                assert!(m["machine"][key].is_string(), "{key}: {m}");
            }
            let study = &m["studies"][0];
            assert_eq!(study["study"], "ssbt");
            assert_eq!(study["scenarios"][0]["settings"]["scenario.seed"], 6);
        }
    }
    assert_eq!(manifest(&quick_dir)["threads"], 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sim_never_overwrites_another_scenarios_results() {
    let dir = temp_dir("overwrite");
    let out = dir.join("results");
    let other = dir.join("elsewhere/fig6-send-buffer.toml");
    fig6_equal_losses(&other);
    let first = sim(&fig6(), &out, &["--quick"]);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let folder = out.join("quick/sim/fig6-send-buffer");
    let csv = std::fs::read(folder.join("ssbt/fig6-send-buffer.csv")).unwrap();

    let second = sim(&other, &out, &["--quick"]);
    assert_eq!(second.status.code(), Some(1));
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(err.contains("holds results that are not those of"), "{err}");
    assert_eq!(
        std::fs::read(folder.join("ssbt/fig6-send-buffer.csv")).unwrap(),
        csv,
        "the first scenario's files are untouched"
    );
    let canonical = std::fs::canonicalize(fig6()).unwrap();
    assert_eq!(
        manifest(&folder)["scenario_file"],
        canonical.to_str().unwrap()
    );

    // The same scenario again may replace its own results.
    let again = sim(&fig6(), &out, &["--quick"]);
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn check_exit_status_follows_the_statements() {
    let dir = temp_dir("check");
    let out = dir.join("results");
    // Every statement of Figure 6 holds: 0, with or without --check.
    let holds = sim(&fig6(), &out, &["--quick", "--check", "--json"]);
    assert_eq!(
        holds.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&holds.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&holds.stdout).unwrap();
    assert!(doc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["holds"] == true));

    let failing = dir.join("equal-losses.toml");
    fig6_equal_losses(&failing);
    let without = sim(&failing, &out, &["--quick"]);
    assert_eq!(
        without.status.code(),
        Some(0),
        "without --check a failed statement is reported, not an error"
    );
    let checked = sim(&failing, &out, &["--quick", "--check", "--json"]);
    assert_eq!(checked.status.code(), Some(1));
    let doc: serde_json::Value =
        serde_json::from_slice(&checked.stdout).expect("JSON printed first");
    assert!(doc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["holds"] == false));
    let err = String::from_utf8_lossy(&checked.stderr);
    assert!(
        err.contains("--check: 1 statement(s) of the papers do not hold"),
        "{err}"
    );
    // Everything is written before the status.
    let folder = out.join("quick/sim/equal-losses");
    assert!(folder.join("ssbt/fig6-send-buffer.csv").exists());
    assert_eq!(manifest(&folder)["mode"], "quick");
    let _ = std::fs::remove_dir_all(&dir);
}
