//! Shared set-up for Vantage's benchmarks: one point of the Abacus study's
//! Figure 8 scenario (`scenarios/abacus/fig8-burstiness.toml`, embedded in
//! the binary) at moderate burstiness, σ = 55, under Windows 9x/NT clients.
//! Parameters come from the scenario file itself, so the benchmark measures
//! exactly what `vantage reproduce` runs.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use vantage_core::tcp::ClientMix;
use vantage_core::Nanos;
use vantage_lab::studies::abacus;
use vantage_sim::syn::filters::FilterKind;
use vantage_sim::syn::run::{simulate, Recording, RunResult};
use vantage_sim::syn::scenario::{Point, Scenario};

/// The Figure 8 scenario, its moderate-burstiness point and its clients.
pub struct Figure8 {
    pub scenario: Scenario,
    pub point: Point,
    pub clients: ClientMix,
}

pub fn figure8() -> Figure8 {
    let scenario = abacus::scenarios()
        .expect("embedded scenarios are valid")
        .into_iter()
        .find(|s| s.figure == "fig8")
        .expect("the abacus study has Figure 8");
    let point = scenario
        .point(None, Some(55.0))
        .expect("σ = 55 is a valid point");
    let clients = scenario.populations[0].clone();
    Figure8 {
        scenario,
        point,
        clients,
    }
}

impl Figure8 {
    /// Seconds of traffic in one repetition.
    pub fn horizon(&self) -> Nanos {
        self.scenario.horizon
    }

    /// The first-SYN times of one repetition.
    pub fn arrivals(&self, seed: u64) -> Vec<Nanos> {
        self.point
            .workload
            .first_syns(self.horizon(), &mut ChaCha8Rng::seed_from_u64(seed))
            .expect("Figure 8 workload is valid")
    }

    /// One repetition of `kind` on `arrivals`.
    pub fn run_once(&self, kind: FilterKind, arrivals: &[Nanos]) -> RunResult {
        let mut filter = self
            .point
            .filter
            .build(kind, &self.clients)
            .expect("Figure 8 parameters are valid");
        simulate(
            filter.as_mut(),
            &self.clients,
            self.point.network,
            arrivals,
            Recording::default(),
            &mut ChaCha8Rng::seed_from_u64(7),
        )
    }
}
