//! The ssbt study end to end: the quick run of the embedded scenario
//! files produces every figure's rows, its JSON document and its files,
//! and the statements the mechanisms are built to show hold.

use vantage_lab::studies::{self, ssbt};
use vantage_lab::{RunOptions, ScenarioFile, Study};

fn options(out: &std::path::Path) -> RunOptions {
    RunOptions {
        quick: true,
        print_tables: false,
        out: out.to_path_buf(),
    }
}

fn holds(checks: &[vantage_lab::Check], figure: &str, claim_part: &str) -> bool {
    checks
        .iter()
        .filter(|c| c.figure == figure && c.claim.contains(claim_part))
        .all(|c| c.holds)
        && checks
            .iter()
            .any(|c| c.figure == figure && c.claim.contains(claim_part))
}

#[test]
fn quick_run_reproduces_the_orderings() {
    let out = std::env::temp_dir().join(format!("vantage-ssbt-{}", std::process::id()));
    let study = studies::by_name("ssbt").unwrap();
    let outcome = study.reproduce(&options(&out)).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&outcome.document).unwrap();
    for key in ["active_probability", "buffers", "proxy", "checks"] {
        assert!(doc.get(key).is_some(), "{key} missing");
    }
    let c = &outcome.checks;
    assert!(holds(c, "Fig. 3", "rises as T_p falls"));
    assert!(holds(c, "Fig. 6", "higher the loss"));
    assert!(holds(c, "Fig. 11", "SSBT + Conn beats SSBT"));
    assert!(holds(c, "Fig. 9", "SSBT beats the traditional scheme"));
    assert!(holds(c, "Fig. 7", "follows the data stored"));
    assert!(holds(
        c,
        "Fig. 9",
        "stays high when the total buffer is small"
    ));
    for name in [
        "fig3-active-probability.csv",
        "fig6-send-buffer.svg",
        "fig9-buffer-size.csv",
        "paper-comparison.csv",
    ] {
        assert!(out.join("ssbt").join(name).exists(), "{name}");
    }
    std::fs::remove_dir_all(&out).ok();
}

#[test]
fn the_same_seed_gives_the_same_document() {
    let out = std::env::temp_dir().join(format!("vantage-ssbt-seed-{}", std::process::id()));
    let (origin, text) = ssbt::SCENARIO_FILES[1];
    let files = [ScenarioFile { origin, text }];
    let a = ssbt::SsbtStudy.run(&files, &options(&out)).unwrap();
    let b = ssbt::SsbtStudy.run(&files, &options(&out)).unwrap();
    assert_eq!(a.document, b.document);
    std::fs::remove_dir_all(&out).ok();
}

#[test]
fn a_bad_file_names_itself_and_its_key() {
    let text = ssbt::SCENARIO_FILES[3]
        .1
        .replace("max_connections = 846", "max_connections = 0");
    let files = [ScenarioFile {
        origin: "bad.toml",
        text: &text,
    }];
    let out = std::env::temp_dir();
    let err = ssbt::SsbtStudy
        .run(&files, &options(&out))
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        err.contains("bad.toml") && err.contains("proxy.max_connections"),
        "{err}"
    );
}
