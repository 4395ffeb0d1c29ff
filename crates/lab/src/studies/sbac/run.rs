//! Runs every job of the scenarios in the session simulator, in parallel,
//! results in job order whatever the number of threads.

use super::scenario::{Job, JobMeta, SbacScenario};
use super::SCENARIO_FILES;
use crate::report::interval::mean_ci95;
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
    /// The spread of the plotted metrics over the cell's repetitions.
    #[serde(flatten)]
    pub spread: Spread,
}

/// Half-widths of the 95 % intervals over a cell's repetitions (seeds) of
/// the metrics the plots draw, each of the mean of the per-seed values
/// ([`mean_ci95`]); `None` with one repetition. The row's own values are
/// the pooled ones ([`RunOutcome::pool`]).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Spread {
    pub repetitions: usize,
    pub completed_sessions_per_s_ci95: Option<f64>,
    pub aborted_pct_ci95: Option<f64>,
    pub useful_utilization_pct_ci95: Option<f64>,
    pub mean_completed_length_ci95: Option<f64>,
}

impl Spread {
    /// The spread of `runs`, one per seed.
    pub fn of(runs: &[RunOutcome]) -> Spread {
        let half =
            |f: fn(&RunOutcome) -> f64| mean_ci95(&runs.iter().map(f).collect::<Vec<f64>>()).1;
        Spread {
            repetitions: runs.len(),
            completed_sessions_per_s_ci95: half(|r| r.completed_sessions_per_s),
            aborted_pct_ci95: half(|r| r.aborted_pct),
            useful_utilization_pct_ci95: half(|r| r.useful_utilization_pct),
            mean_completed_length_ci95: half(|r| r.mean_completed_length),
        }
    }
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
                spread: Spread::of(&outcomes),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(aborted_pct: f64, completed_per_s: f64) -> RunOutcome {
        RunOutcome {
            aborted_pct,
            completed_sessions_per_s: completed_per_s,
            ..RunOutcome::default()
        }
    }

    #[test]
    fn spread_over_seeds_is_the_student_t_interval_and_absent_for_one_run() {
        // Two seeds: half-width = t(0.975, 1) · |a − b| / 2.
        let spread = Spread::of(&[outcome(2.0, 10.0), outcome(4.0, 10.0)]);
        assert_eq!(spread.repetitions, 2);
        let half = spread.aborted_pct_ci95.expect("two runs");
        assert!((half - 12.706).abs() < 1e-9, "{half}");
        assert_eq!(spread.completed_sessions_per_s_ci95, Some(0.0));
        let one = Spread::of(&[outcome(2.0, 10.0)]);
        assert_eq!(one.repetitions, 1);
        assert_eq!(one.aborted_pct_ci95, None);
    }

    #[test]
    fn rows_keep_their_keys_and_add_the_intervals() {
        let row = SbacRow {
            meta: JobMeta {
                figure: "Table 2".into(),
                scenario: "s".into(),
                strategy: "stable".into(),
                weight: None,
                threshold: Some(0.95),
                session_length_mean: 5.0,
                load_pct: 100.0,
                pattern: "usual-day".into(),
                think_time_s: 5.0,
                retries: 1,
                interval_s: 1.0,
            },
            outcome: outcome(3.0, 10.0),
            spread: Spread::of(&[outcome(2.0, 10.0), outcome(4.0, 10.0)]),
        };
        let json = serde_json::to_value(&row).expect("serializes");
        assert_eq!(json["aborted_pct"], 3.0);
        assert_eq!(json["repetitions"], 2);
        assert!(json["aborted_pct_ci95"].is_number(), "{json}");
        assert!(json["mean_completed_length_ci95"].is_number(), "{json}");
    }
}
