//! The simulator beside the live runs: every modelled variant on the very
//! arrivals the live clients were given, and on `sim_repetitions` ×
//! `sim_horizon_s` of the same arrival model (common random numbers: one
//! set of long-run arrivals shared by every filter).

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use vantage_core::tcp::ClientMix;
use vantage_core::Nanos;
use vantage_sim::syn::metrics::Tally;
use vantage_sim::syn::network::Network;
use vantage_sim::syn::run::{simulate, Recording};
use vantage_testbed::load::arrivals::{ArrivalConfig, MAX_CONNECTIONS_LIMIT};

use super::error::ExperimentRunError;
use super::plan::{Experiment, FilterModel};
use super::results::{sim_row, ResultRow};

/// The seeded generator of the simulator's comparison runs (ChaCha8, like
/// every random choice of the testbed and the simulator).
pub fn generator(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

/// Runs the simulator's model of `run` on `first_syns`.
pub fn simulate_model(
    model: &FilterModel,
    clients: &ClientMix,
    first_syns: &[Nanos],
    seed: u64,
) -> Result<Tally, ExperimentRunError> {
    let mut filter = model.params.build(model.kind, &model.filter_population)?;
    let mut rng = generator(seed);
    let network = Network {
        base_delay: Nanos::ZERO,
        jitter: Nanos::ZERO,
    };
    let result = simulate(
        filter.as_mut(),
        clients,
        network,
        first_syns,
        Recording::default(),
        &mut rng,
    );
    Ok(result.tally)
}

/// The simulator's rows: every modelled variant on the live arrivals and
/// on the long run.
/// An arrival model (with the long run's horizon) and the run's seed.
type LongRunKey = (ArrivalConfig, u64);

pub fn simulator_rows(x: &Experiment) -> Result<Vec<ResultRow>, ExperimentRunError> {
    // The long run's arrivals, drawn once per arrival model and seed (all
    // runs usually share one) and shared by every filter: common random
    // numbers, as in the simulator's own studies.
    let mut long_arrivals: Vec<(LongRunKey, Vec<Vec<Nanos>>)> = Vec::new();
    for run in &x.runs {
        let mut config = run.spec.load.arrivals.clone();
        config.duration_s = x.sim_horizon.as_secs_f64();
        config.max_connections = MAX_CONNECTIONS_LIMIT;
        let key = (config, run.spec.seed);
        if run.model.is_none() || long_arrivals.iter().any(|(k, _)| *k == key) {
            continue;
        }
        let schedules = (0..u64::from(x.sim_repetitions))
            .into_par_iter()
            .map(|rep| key.0.schedule(key.1.wrapping_add(1_000 + rep)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| ExperimentRunError::Arrivals(e.to_string()))?;
        long_arrivals.push((key, schedules));
    }
    let per_run: Vec<Result<Vec<ResultRow>, ExperimentRunError>> = x
        .runs
        .par_iter()
        .map(|run| -> Result<Vec<ResultRow>, ExperimentRunError> {
            let Some(model) = &run.model else {
                return Ok(Vec::new());
            };
            let seed = run.spec.seed;
            let schedule = run
                .spec
                .load
                .arrivals
                .schedule(seed)
                .map_err(|e| ExperimentRunError::Arrivals(e.to_string()))?;
            let same = simulate_model(model, &run.sim_clients, &schedule, seed ^ 0xC11E)?;
            let mut config = run.spec.load.arrivals.clone();
            config.duration_s = x.sim_horizon.as_secs_f64();
            config.max_connections = MAX_CONNECTIONS_LIMIT;
            let schedules = long_arrivals
                .iter()
                .find(|((c, s), _)| *c == config && *s == seed)
                .map(|(_, schedules)| schedules)
                .ok_or_else(|| ExperimentRunError::NoLongRunArrivals(run.variant.id.clone()))?;
            let mut long = Tally::default();
            for (rep, first_syns) in schedules.iter().enumerate() {
                let rep_seed = seed.wrapping_add(1_000 + rep as u64);
                long.merge(&simulate_model(
                    model,
                    &run.sim_clients,
                    first_syns,
                    rep_seed ^ 0xC11E,
                )?);
            }
            Ok(vec![
                sim_row(
                    run,
                    model,
                    "sim-same-arrivals",
                    &same,
                    x.delay_cost,
                    x.reject_cost,
                ),
                sim_row(run, model, "sim-long", &long, x.delay_cost, x.reject_cost),
            ])
        })
        .collect();
    let mut rows = Vec::new();
    for r in per_run {
        rows.extend(r?);
    }
    Ok(rows)
}
