//! Runs a Certes scenario under each of its client populations: the web
//! server simulated, the estimator and baselines fed its counters.

use super::analysis::{analyse, track};
use super::estimates::Estimates;
use super::learned;
use super::results::{CertesRow, TrackPoint};
use super::scenario::{CertesScenario, PaperRow};
use rayon::prelude::*;
use vantage_sim::seed::mix_seed;
use vantage_sim::syn::scenario::ScenarioError;
use vantage_sim::syn::Effort;
use vantage_sim::webserver;

/// Everything one run produced.
#[derive(Clone, Debug)]
pub struct CertesResult {
    pub row: CertesRow,
    pub track: Vec<TrackPoint>,
    /// File stem of the tracking plot, if the scenario draws one.
    pub plot: Option<String>,
    pub title: String,
    pub paper: Option<PaperRow>,
    pub bound_reason: Option<String>,
    /// Whether the clients ran in on/off mode (Test J).
    pub on_off: bool,
    /// Wall-clock seconds the run took.
    pub wall_s: f64,
}

/// Runs every scenario under every population, in parallel; results come
/// back in scenario then population order whatever the number of threads.
pub fn run(
    scenarios: &[CertesScenario],
    effort: Effort,
    progress: &(dyn Fn() + Sync),
) -> Result<Vec<CertesResult>, ScenarioError> {
    let jobs: Vec<(&CertesScenario, usize)> = scenarios
        .iter()
        .flat_map(|s| (0..s.populations.len()).map(move |i| (s, i)))
        .collect();
    jobs.into_par_iter()
        .map(|(s, i)| {
            let r = run_one(s, i, effort);
            progress();
            r
        })
        .collect()
}

/// Runs one scenario under population `index`.
pub fn run_one(
    s: &CertesScenario,
    index: usize,
    effort: Effort,
) -> Result<CertesResult, ScenarioError> {
    let started = std::time::Instant::now();
    let (system, model) = s.configs(index, effort);
    let fail = |key: &str, problem: String| ScenarioError::Invalid {
        origin: s.origin.clone(),
        key: key.to_string(),
        problem,
    };
    let seed = mix_seed(s.seed, index as u64 + 1);
    let run = webserver::simulate(&system, seed).map_err(|e| fail(e.part, e.problem))?;
    // The full model of Section 3.1 runs beside the fast one on the
    // paper's scenarios; the interval sweep (Figure 9) judges the fast
    // model alone.
    let with_full_model = !s.name.starts_with(super::INTERVAL_SWEEP_PREFIX);
    let estimates = Estimates::compute(s, &run, &model, effort, with_full_model)
        .map_err(|e| fail("scenario.interval_ms", e.to_string()))?;
    let track = track(&system, &run, &estimates);
    let mut row = analyse(s, &system, &run, &estimates, &track, effort);
    if s.learn {
        let comparison = learned::compare(s, &run, &model, row.truth_mean_s, row.certes_rel_err)
            .map_err(|e| fail("certes.learn", e))?;
        row.learned_rel_err = Some(comparison.learned_rel_err);
        row.learned_at_cell_ends_rel_err = Some(comparison.learned_at_cell_ends_rel_err);
        row.told_mixture_rel_err = Some(comparison.told_mixture_rel_err);
        row.learned_clients = Some(comparison.learned_clients.clone());
        row.learned_give_ups = Some(comparison.learned_give_ups.clone());
        row.learned = Some(comparison);
    }
    Ok(CertesResult {
        row,
        track,
        plot: s.plot.clone(),
        title: s.title.clone(),
        paper: s.paper.clone(),
        bound_reason: s.bound_reason.clone(),
        on_off: s.system.clients.on_off.is_some(),
        wall_s: started.elapsed().as_secs_f64(),
    })
}
