//! Shared set-up for Vantage's benchmarks: the Figure 8 workload of the
//! Abacus study (self-similar arrivals, mean 100/s, σ = 55, H = 0.8, 600 s,
//! Windows 9x/NT clients, W = r_t = 120, S = S_G = 50 s, r = 75).

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use vantage_core::tcp::ClientMix;
use vantage_core::Nanos;
use vantage_sim::filters::{AbacusWindow, FilterKind, FilterParams};
use vantage_sim::network::Network;
use vantage_sim::run::{simulate, Recording, RunResult};
use vantage_sim::workload::mwm::MwmParams;
use vantage_sim::workload::Workload;

pub const HORIZON_SECS: u64 = 600;

/// The first-SYN times of one Figure 8 repetition.
pub fn figure8_arrivals(seed: u64, std_dev: f64) -> Vec<Nanos> {
    Workload::Mwm {
        params: MwmParams {
            mean: 100.0,
            std_dev,
            hurst: 0.8,
            scales: 10,
        },
        point: Nanos::from_secs(1),
    }
    .first_syns(
        Nanos::from_secs(HORIZON_SECS),
        &mut ChaCha8Rng::seed_from_u64(seed),
    )
    .expect("Figure 8 workload is valid")
}

pub fn figure8_params() -> FilterParams {
    FilterParams {
        bucket_size: 120,
        refill_rate: 120.0,
        interval: Nanos::from_secs(1),
        window: AbacusWindow::Fixed(Nanos::from_secs(50)),
        greedy_window: Nanos::from_secs(50),
        delay_cost: 1.0,
        reject_cost: 75.0,
        arrival_smoothing: 0.1,
    }
}

/// One 600 s run of `kind` on `arrivals`.
pub fn run_once(kind: FilterKind, clients: &ClientMix, arrivals: &[Nanos]) -> RunResult {
    let mut filter = figure8_params()
        .build(kind, clients)
        .expect("Figure 8 parameters are valid");
    simulate(
        filter.as_mut(),
        clients,
        Network {
            base_delay: Nanos::from_millis(5),
            jitter: Nanos::from_millis(5),
        },
        arrivals,
        Recording::default(),
        &mut ChaCha8Rng::seed_from_u64(7),
    )
}
