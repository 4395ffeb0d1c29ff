//! The Abacus Filter study (`abacus-filters-syn-control.txt`, Sections 3 and
//! 6): Figures 4, 5 and 8–11 in the SYN simulator ([`vantage_sim::syn`]),
//! and the paper's stated results beside ours ([`checks`]).

pub mod checks;
pub mod spread;

use crate::error::create_dir;
use crate::report::{self, abacus as tables, abacus_plot};
use crate::study::runs_progress_bar;
use crate::{LabError, RunOptions, ScenarioFile, Study, StudyOutcome};
use serde::Serialize;
use spread::RowWithSpread;
use std::path::Path;
use std::time::Instant;
use vantage_sim::syn::scenario::Scenario;
use vantage_sim::syn::{execute, steps, Effort, ScenarioResult};

pub const NAME: &str = "abacus";
pub const PAPER: &str = "abacus-filters-syn-control.txt";

/// The embedded `scenarios/abacus/` files: (origin, text).
pub const SCENARIO_FILES: &[(&str, &str)] = &[
    (
        "scenarios/abacus/fig4-resync.toml",
        include_str!("../../../../../scenarios/abacus/fig4-resync.toml"),
    ),
    (
        "scenarios/abacus/fig5-tbf-convergence.toml",
        include_str!("../../../../../scenarios/abacus/fig5-tbf-convergence.toml"),
    ),
    (
        "scenarios/abacus/fig8-burstiness.toml",
        include_str!("../../../../../scenarios/abacus/fig8-burstiness.toml"),
    ),
    (
        "scenarios/abacus/fig9-bucket-size.toml",
        include_str!("../../../../../scenarios/abacus/fig9-bucket-size.toml"),
    ),
    (
        "scenarios/abacus/fig10-window-vs-cost.toml",
        include_str!("../../../../../scenarios/abacus/fig10-window-vs-cost.toml"),
    ),
    (
        "scenarios/abacus/fig11-reject-cost.toml",
        include_str!("../../../../../scenarios/abacus/fig11-reject-cost.toml"),
    ),
    (
        "scenarios/abacus/sec6.1-jitter.toml",
        include_str!("../../../../../scenarios/abacus/sec6.1-jitter.toml"),
    ),
];

/// The Abacus Filter study.
pub struct AbacusStudy;

impl Study for AbacusStudy {
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
            .map(|f| Scenario::from_toml(f.text, f.origin))
            .collect::<Result<Vec<_>, _>>()?;
        for warning in scenarios.iter().flat_map(|s| &s.warnings) {
            eprintln!("vantage: warning: {warning}");
        }
        let results = run_scenarios(scenarios, options)?;
        let checks = checks::checks(&results);
        if options.print_tables {
            report::print_checks(&checks);
        }
        write_outputs(&results, &checks, &options.out.join(NAME))?;
        let rows: Vec<RowWithSpread> = results
            .iter()
            .flat_map(|(_, r)| r.rows.iter().map(RowWithSpread::new))
            .collect();
        let document = serde_json::to_string_pretty(&Document {
            rows: &rows,
            checks: &checks,
        })?;
        let rows = serde_json::to_value(rows)?;
        Ok(StudyOutcome {
            summary: rows.clone(),
            rows,
            checks,
            document,
        })
    }
}

/// The study's JSON document: every row with its spread over seeds.
#[derive(Serialize)]
struct Document<'a> {
    rows: &'a [RowWithSpread<'a>],
    checks: &'a [crate::Check],
}

/// The embedded scenarios, parsed.
pub fn scenarios() -> Result<Vec<Scenario>, LabError> {
    Ok(SCENARIO_FILES
        .iter()
        .map(|(origin, text)| Scenario::from_toml(text, origin))
        .collect::<Result<Vec<_>, _>>()?)
}

/// Runs scenarios with a progress bar; prints each table when asked.
fn run_scenarios(
    scenarios: Vec<Scenario>,
    options: &RunOptions,
) -> Result<Vec<(Scenario, ScenarioResult)>, LabError> {
    let effort = Effort {
        quick: options.quick,
    };
    let total: u64 = scenarios.iter().map(|s| steps(s, effort)).sum();
    let bar = runs_progress_bar(total, "{msg}");
    let mut results = Vec::new();
    for s in scenarios {
        bar.set_message(format!("{} {}", s.study, s.figure));
        let started = Instant::now();
        let r = execute(&s, effort, &|| bar.inc(1))?;
        let wall = started.elapsed().as_secs_f64();
        if options.print_tables {
            bar.suspend(|| {
                tables::print_scenario(&s, &r);
                println!(
                    "  {} SYN arrivals, {:.0} simulated hours in {:.1} s ({:.0}× real time)\n",
                    r.events,
                    r.simulated.as_secs_f64() / 3600.0,
                    wall,
                    r.simulated.as_secs_f64() / wall.max(1e-9)
                );
            });
        }
        results.push((s, r));
    }
    bar.finish_and_clear();
    Ok(results)
}

fn write_outputs(
    results: &[(Scenario, ScenarioResult)],
    checks: &[crate::Check],
    dir: &Path,
) -> Result<(), LabError> {
    create_dir(dir)?;
    for (s, r) in results {
        tables::write_csv(&dir.join(format!("{}.csv", s.figure)), r)?;
        abacus_plot::figure(dir, s, r)?;
    }
    if !checks.is_empty() {
        report::write_checks_csv(&dir.join("paper-comparison.csv"), checks)?;
    }
    Ok(())
}
