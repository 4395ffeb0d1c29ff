//! tcpeval's Section 4 as a study (`critical-path-tcp.txt`, Barford and
//! Crovella, Section 4.1; Figures 4–8): `vantage reproduce cpa` runs the
//! testbed experiment of [`crate::tcpeval_live`] on the embedded
//! `scenarios/cpa/section4.toml` (its `[quick]` plan under `--quick`) and
//! writes its files (`report.json`, `table.md`, `figure4.svg`, the
//! captures under `runs/`) under `out/cpa`; its statements are those of
//! [`crate::tcpeval_live::checks`].
//!
//! The experiment needs root, nginx and tcpdump. Where the machine lacks
//! one (the experiment's own [`preflight`]), or the caller skips the
//! testbed, the study is not run: its outcome has no statements and says
//! why ([`StudyOutcome::not_run`]), so it never reads as a pass. The
//! file is a testbed plan, not a simulation: `vantage sim` refuses it
//! ([`LabError::TestbedPlan`]). Departures: `docs/differences/cpa.md`.

use crate::provenance::RunRecord;
use crate::tcpeval_live::{self, preflight, TcpevalPlan};
use crate::{LabError, RunOptions, ScenarioFile, Study, StudyOutcome};

/// The study's name on the command line.
pub const NAME: &str = "cpa";
/// The paper it reproduces.
pub const PAPER: &str = "critical-path-tcp.txt";

/// The embedded plan: (origin, text).
pub const SCENARIO_FILES: &[(&str, &str)] = &[(
    "scenarios/cpa/section4.toml",
    include_str!("../../../../../scenarios/cpa/section4.toml"),
)];

/// tcpeval's Section 4 on the testbed.
pub struct CpaStudy;

impl Study for CpaStudy {
    fn name(&self) -> &'static str {
        NAME
    }

    fn paper(&self) -> &'static str {
        PAPER
    }

    fn scenario_files(&self) -> &'static [(&'static str, &'static str)] {
        SCENARIO_FILES
    }

    /// Refuses: a tcpeval plan is run on the testbed, not simulated.
    fn run(&self, files: &[ScenarioFile], _: &RunOptions) -> Result<StudyOutcome, LabError> {
        Err(LabError::TestbedPlan {
            origin: files
                .first()
                .map_or_else(|| NAME.to_string(), |f| f.origin.to_string()),
        })
    }

    /// Runs the embedded plan on the testbed, or returns a not-run outcome
    /// when the machine cannot run it.
    fn reproduce(&self, options: &RunOptions) -> Result<StudyOutcome, LabError> {
        if let Err(why) = preflight() {
            return not_run(&why.to_string(), options);
        }
        let (origin, text) = SCENARIO_FILES[0];
        let plan = TcpevalPlan::from_toml(text, origin).map_err(|e| LabError::Experiment {
            what: origin.to_string(),
            message: e.to_string(),
        })?;
        let args = std::env::args_os()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let record = RunRecord::start(args, options.quick, None);
        let dir = options.out.join(NAME);
        let show = options.print_tables;
        let progress = |line: &str| {
            if show {
                eprintln!("{line}");
            }
        };
        let report = tcpeval_live::run(
            &plan,
            options.quick,
            &tcpeval_live::runs_dir(&dir),
            &progress,
        )
        .map_err(|e| LabError::Experiment {
            what: format!("the testbed experiment of {origin}"),
            message: e.to_string(),
        })?;
        tcpeval_live::write_results(&report, &dir, &record, ScenarioFile { origin, text })?;
        if options.print_tables {
            print!("{}", tcpeval_live::render(&report));
            crate::report::print_checks(&report.checks);
        }
        let summary = serde_json::json!({
            "ran": true,
            "quick": report.quick,
            "rows": &report.rows,
            "figure8": &report.figure8,
            "checks": &report.checks,
            "duration_s": report.duration_s,
        });
        Ok(StudyOutcome {
            rows: serde_json::to_value(&report.rows)?,
            checks: report.checks,
            document: serde_json::to_string_pretty(&summary)?,
            summary,
        })
    }
}

/// The outcome of a study that did not run, for `reason`: said on stderr,
/// and written as `report.json` (`"ran": false`) under `out/cpa` so the
/// folder holds no earlier run's report beside this run's manifest.
pub fn not_run(reason: &str, options: &RunOptions) -> Result<StudyOutcome, LabError> {
    eprintln!("vantage reproduce {NAME}: not run: {reason}");
    let outcome = StudyOutcome::not_run(reason);
    let dir = options.out.join(NAME);
    crate::error::create_dir(&dir)?;
    crate::error::write_file(&dir, "report.json", outcome.document.clone() + "\n")?;
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_plan_parses_in_both_modes() {
        let (origin, text) = SCENARIO_FILES[0];
        let plan = TcpevalPlan::from_toml(text, origin).unwrap();
        assert!(plan.tests() > 0);
        assert!(plan.mode(true).test_s <= plan.mode(false).test_s);
    }

    #[test]
    fn sim_refuses_the_plan_and_names_the_testbed_command() {
        let (origin, text) = SCENARIO_FILES[0];
        let options = RunOptions {
            quick: true,
            print_tables: false,
            out: std::env::temp_dir(),
        };
        let err = CpaStudy
            .run(&[ScenarioFile { origin, text }], &options)
            .unwrap_err()
            .to_string();
        assert!(err.contains("vantage testbed tcpeval"), "{err}");
        assert!(err.contains(origin), "{err}");
    }

    #[test]
    fn a_study_not_run_has_no_statements_and_says_why() {
        let out = std::env::temp_dir().join(format!("vantage-cpa-not-run-{}", std::process::id()));
        let options = RunOptions {
            quick: true,
            print_tables: false,
            out: out.clone(),
        };
        let outcome = not_run("nginx is missing", &options).unwrap();
        assert!(outcome.checks.is_empty());
        assert_eq!(outcome.not_run_reason(), Some("nginx is missing"));
        let written: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("cpa/report.json")).unwrap())
                .unwrap();
        assert_eq!(written["ran"], false);
        assert_eq!(written["reason"], "nginx is missing");
        let _ = std::fs::remove_dir_all(&out);
    }
}
