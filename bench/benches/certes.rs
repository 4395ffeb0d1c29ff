//! Cost of one Certes interval update (`Certes::on_interval`), with a
//! 131-second window of 250 ms intervals (Linux ≥ 6.5 clients whose
//! frustration timeout is their own 131 s give-up, so every retry class up
//! to the tenth retransmission is live), and with the `mix-2026` mixture.
//! The counters cycle through 4,096 varied intervals (overload, recovery,
//! idle), so the work is that of a loaded server, not of an idle one.
//! Run: `cargo bench -p vantage-bench --bench certes`.

use criterion::{criterion_group, criterion_main, Criterion};
use rand::{Rng, SeedableRng};
use std::hint::black_box;
use vantage_core::certes::{Baselines, Certes, CertesConfig, IntervalCounters};
use vantage_core::tcp::ClientMix;
use vantage_core::Nanos;

fn workload() -> Vec<IntervalCounters> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    (0..4096)
        .map(|i| {
            let overloaded = (i / 400) % 2 == 0;
            let offered: u64 = rng.gen_range(100..400);
            let dropped = if overloaded {
                offered * rng.gen_range(10..70) / 100
            } else {
                0
            };
            let completed = offered - dropped;
            IntervalCounters {
                dropped,
                accepted: offered - dropped,
                completed,
                syn_to_end_sum: Nanos::from_millis(completed * rng.gen_range(50..900)),
                rtt_sum: Nanos::from_millis(completed * 40),
                ..Default::default()
            }
        })
        .collect()
}

fn interval_update(c: &mut Criterion) {
    let counters = workload();
    let mut group = c.benchmark_group("certes-interval-update");
    for (name, fto_s) in [("linux-6.5", 131), ("mix-2026", 131), ("windows-9x-nt", 21)] {
        let config = CertesConfig::new(
            Nanos::from_millis(250),
            ClientMix::builtin(name).expect("built-in profile"),
            Nanos::from_secs(fto_s),
        );
        let mut certes = Certes::new(config.clone()).expect("valid configuration");
        let mut i = 0usize;
        group.bench_function(format!("certes/{name}"), |b| {
            b.iter(|| {
                i = (i + 1) % counters.len();
                black_box(certes.on_interval(black_box(&counters[i])))
            })
        });
        let mut baselines = Baselines::new(&config).expect("valid configuration");
        group.bench_function(format!("baselines/{name}"), |b| {
            b.iter(|| {
                i = (i + 1) % counters.len();
                black_box(baselines.on_interval(black_box(&counters[i])))
            })
        });
    }
    group.finish();
}

criterion_group!(benches, interval_update);
criterion_main!(benches);
