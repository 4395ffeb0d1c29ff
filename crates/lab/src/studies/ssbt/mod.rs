//! The proxy thesis study (`proxy-resource-management.txt`, Okamoto 2003):
//! the mechanisms of [`vantage_core::resources`] in the simulator of
//! [`vantage_sim::proxy`], with the thesis's statements beside ours.
//!
//! What it reproduces (one embedded scenario file under `scenarios/ssbt/`
//! per figure):
//! * Figure 3 — Section 2.3's analysis: the probability that a persistent
//!   connection is active against the timer T_p, both panels;
//! * Figure 6 — E-ATBT's send buffer on one 100 Mb/s, 0.1 s path at loss
//!   1 %, 0.1 %, 0.01 % (Section 4.1);
//! * Figure 7 — the tuned receive buffer and the data stored in it at loss
//!   0.1 % and 1 %;
//! * Figure 9 — proxy throughput (server and client side) and document
//!   transfer time for total buffers of 150, 50, 30, 10 MB: the sixteen
//!   fixed (send, receive) pairs, SSBT and Linux autotuning, N_max = 846;
//! * Figure 10 — send:receive splits 1:1, 2:1, 4:1, 1:2 at 50 MB;
//! * Figure 11 — N_max = 600: fixed pairs, SSBT, SSBT + connection
//!   management, Linux autotuning;
//! * beyond the thesis: Linux autotuning as a fourth scheme (2026).
//!
//! The thesis gives orderings, not numbers: each statement is checked as
//! an ordering, with "stays high" meaning at least [`checks::STAYS_HIGH`]
//! of the best. Fixed pair sizes (16, 64, 256, 1024 KB) are ours: the
//! thesis names only (32 KB, 64 KB) as an example. Departures of the
//! models are in [`vantage_sim::proxy`] and [`analytic`].

use crate::report;
use crate::{LabError, RunOptions, ScenarioFile, Study, StudyOutcome};
use indicatif::{ProgressBar, ProgressStyle};
use std::time::Instant;

pub mod analytic;
mod checks;
mod run;
mod scenario;

pub use checks::{checks, note, LOW_UTILIZATION, STAYS_HIGH};
pub use run::{proxy_runs, run, ActiveRow, ProxyRow, SeriesRow, SsbtRows};
pub use scenario::{Kind, SchemeName, SsbtScenario};

/// The study's name on the command line.
pub const NAME: &str = "ssbt";
/// The paper it reproduces.
pub const PAPER: &str = "proxy-resource-management.txt";

/// The proxy thesis study.
pub struct SsbtStudy;

/// What one run of the study produced.
pub struct SsbtOutcome {
    pub scenarios: Vec<SsbtScenario>,
    pub rows: SsbtRows,
    pub checks: Vec<crate::Check>,
}

impl Study for SsbtStudy {
    fn name(&self) -> &'static str {
        NAME
    }

    fn paper(&self) -> &'static str {
        PAPER
    }

    fn scenario_files(&self) -> &'static [(&'static str, &'static str)] {
        SCENARIO_FILES
    }

    fn run(&self, files: &[ScenarioFile], options: &RunOptions) -> Result<StudyOutcome, LabError> {
        let scenarios = files
            .iter()
            .map(|f| SsbtScenario::from_toml(f.text, f.origin))
            .collect::<Result<Vec<_>, _>>()?;
        let bar = ProgressBar::new(proxy_runs(&scenarios, options.quick) as u64).with_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} proxy runs ssbt (eta {eta})",
            )
            .expect("progress template is valid"),
        );
        if !options.print_tables {
            bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
        }
        let started = Instant::now();
        let rows = run(&scenarios, options.quick, &|| bar.inc(1))?;
        bar.finish_and_clear();
        let checks = checks(&rows);
        let outcome = SsbtOutcome {
            scenarios,
            rows,
            checks,
        };
        report::ssbt::write_outputs(&outcome, &options.out.join(NAME))?;
        if options.print_tables {
            report::ssbt::print_tables(&outcome);
            report::print_checks(&outcome.checks);
            report::ssbt::print_notes(&outcome.checks);
            let holds = outcome.checks.iter().filter(|c| c.holds).count();
            println!(
                "{} proxy runs in {:.1} s; {holds} of {} statements of the thesis hold.",
                outcome.rows.proxy.len(),
                started.elapsed().as_secs_f64(),
                outcome.checks.len()
            );
        }
        let summary = report::ssbt::document(&outcome)?;
        Ok(StudyOutcome {
            rows: serde_json::to_value(&outcome.rows.proxy)?,
            checks: outcome.checks,
            document: serde_json::to_string_pretty(&summary)?,
            summary,
        })
    }
}

/// The embedded `scenarios/ssbt/` files: (origin, text).
pub const SCENARIO_FILES: &[(&str, &str)] = &[
    (
        "scenarios/ssbt/fig3-active-probability.toml",
        include_str!("../../../../../scenarios/ssbt/fig3-active-probability.toml"),
    ),
    (
        "scenarios/ssbt/fig6-send-buffer.toml",
        include_str!("../../../../../scenarios/ssbt/fig6-send-buffer.toml"),
    ),
    (
        "scenarios/ssbt/fig7-receive-buffer.toml",
        include_str!("../../../../../scenarios/ssbt/fig7-receive-buffer.toml"),
    ),
    (
        "scenarios/ssbt/fig9-buffer-size.toml",
        include_str!("../../../../../scenarios/ssbt/fig9-buffer-size.toml"),
    ),
    (
        "scenarios/ssbt/fig10-split-ratio.toml",
        include_str!("../../../../../scenarios/ssbt/fig10-split-ratio.toml"),
    ),
    (
        "scenarios/ssbt/fig11-connection-management.toml",
        include_str!("../../../../../scenarios/ssbt/fig11-connection-management.toml"),
    ),
];

/// Every embedded scenario, parsed.
pub fn scenarios() -> Result<Vec<SsbtScenario>, LabError> {
    SCENARIO_FILES
        .iter()
        .map(|(origin, text)| SsbtScenario::from_toml(text, origin).map_err(LabError::from))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_scenarios_parse() {
        let all = scenarios().unwrap();
        assert_eq!(all.len(), SCENARIO_FILES.len());
        assert!(proxy_runs(&all, true) < proxy_runs(&all, false));
    }

    #[test]
    fn errors_name_file_and_key() {
        let text = SCENARIO_FILES[1].1.replace("delay_s = 0.1", "delay_s = -1");
        let err = SsbtScenario::from_toml(&text, "x.toml")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("x.toml") && err.contains("path.delay_s"),
            "{err}"
        );
        let text = SCENARIO_FILES[3].1.replace("\"ssbt\",", "\"magic\",");
        let err = SsbtScenario::from_toml(&text, "y.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("y.toml"), "{err}");
    }

    #[test]
    fn a_negative_idle_half_life_is_refused() {
        let (_, text) = SCENARIO_FILES
            .iter()
            .find(|(origin, _)| origin.contains("fig9"))
            .unwrap();
        let text = text.replace(
            "max_file_mb = 16",
            "max_file_mb = 16\nidle_buffer_half_life_s = -1",
        );
        let err = SsbtScenario::from_toml(&text, "z.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("proxy.idle_buffer_half_life_s"), "{err}");
    }
}
