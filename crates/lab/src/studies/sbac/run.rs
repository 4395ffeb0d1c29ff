//! Runs every job of the scenarios in the session simulator, in parallel,
//! results in job order whatever the number of threads.

use super::scenario::{Job, JobMeta, SbacScenario};
use super::SCENARIO_FILES;
use rayon::prelude::*;
use serde::Serialize;
use vantage_sim::sessions;
use vantage_sim::sessions::RunOutcome;
use vantage_sim::syn::scenario::ScenarioError;
use vantage_sim::syn::Effort;

/// One result row: what was run and what it measured.
#[derive(Clone, Debug, Serialize)]
pub struct SbacRow {
    #[serde(flatten)]
    pub meta: JobMeta,
    #[serde(flatten)]
    pub outcome: RunOutcome,
}

/// The embedded scenarios.
pub fn scenarios() -> Result<Vec<SbacScenario>, ScenarioError> {
    SCENARIO_FILES
        .iter()
        .map(|(origin, text)| SbacScenario::from_toml(text, origin))
        .collect()
}

/// Number of runs (progress steps).
pub fn steps(scenarios: &[SbacScenario], effort: Effort) -> u64 {
    scenarios.iter().map(|s| s.jobs(effort).len() as u64).sum()
}

/// Runs every scenario's jobs in parallel (rayon), calling `progress`
/// after each; one row per cell, its repetitions pooled
/// ([`RunOutcome::pool`]), in job order.
pub fn run(
    scenarios: &[SbacScenario],
    effort: Effort,
    progress: &(dyn Fn() + Sync),
) -> Vec<SbacRow> {
    let jobs: Vec<(usize, Job)> = scenarios
        .iter()
        .enumerate()
        .flat_map(|(i, s)| s.jobs(effort).into_iter().map(move |job| (i, job)))
        .collect();
    let runs: Vec<((usize, usize), JobMeta, RunOutcome)> = jobs
        .into_par_iter()
        .map(|(scenario, job)| {
            let outcome = sessions::run(&job.config);
            progress();
            ((scenario, job.cell), job.meta, outcome)
        })
        .collect();
    // A cell's repetitions are consecutive jobs, and rayon keeps job order.
    runs.chunk_by(|a, b| a.0 == b.0)
        .map(|cell| {
            let outcomes: Vec<RunOutcome> = cell.iter().map(|r| r.2.clone()).collect();
            SbacRow {
                meta: cell[0].1.clone(),
                outcome: RunOutcome::pool(&outcomes),
            }
        })
        .collect()
}
