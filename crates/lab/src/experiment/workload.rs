//! The arrivals a testbed run is given, in numbers: mean, spread and peak
//! of the one-second counts, and how often they exceed the test server's
//! capacity.

use serde::Serialize;
use vantage_core::Nanos;
use vantage_testbed::spec::{ServerSpec, TestbedSpec};

/// The arrivals a run is given, in numbers.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorkloadStats {
    pub seed: u64,
    pub duration_s: f64,
    pub connections: u64,
    pub mean_per_s: f64,
    /// Of the one-second counts.
    pub std_dev_per_s: f64,
    pub peak_per_s: u64,
    /// Seconds with more arrivals than the test server accepts per second.
    pub seconds_above_capacity: u64,
    /// The test server's accept rate over the mean arrival rate.
    pub capacity_ratio: Option<f64>,
}

/// Statistics of `schedule` (the run's arrivals) under `spec`.
pub fn workload_stats(spec: &TestbedSpec, schedule: &[Nanos]) -> WorkloadStats {
    let duration = spec.load.arrivals.duration_s;
    let seconds = duration.ceil().max(1.0) as usize;
    let mut counts = vec![0u64; seconds];
    for t in schedule {
        let i = ((t.0 / 1_000_000_000) as usize).min(seconds - 1);
        counts[i] += 1;
    }
    let n = counts.len() as f64;
    let mean_count = counts.iter().sum::<u64>() as f64 / n;
    let variance = counts
        .iter()
        .map(|&c| (c as f64 - mean_count).powi(2))
        .sum::<f64>()
        / n;
    let capacity = match &spec.server {
        ServerSpec::Test(t) if t.accept_rate > 0.0 => Some(t.accept_rate),
        _ => None,
    };
    let mean_per_s = schedule.len() as f64 / duration;
    WorkloadStats {
        seed: spec.seed,
        duration_s: duration,
        connections: schedule.len() as u64,
        mean_per_s,
        std_dev_per_s: variance.sqrt(),
        peak_per_s: counts.iter().copied().max().unwrap_or(0),
        seconds_above_capacity: capacity.map_or(0, |c| {
            counts.iter().filter(|&&x| x as f64 > c).count() as u64
        }),
        capacity_ratio: capacity.map(|c| c / mean_per_s.max(1e-9)),
    }
}
