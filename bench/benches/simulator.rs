//! Simulator speed on the Figure 8 workload: events (SYN arrivals) per
//! second and simulated seconds per wall-clock second, per filter, on one
//! core. Run: `cargo bench -p vantage-bench --bench simulator`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::time::Instant;
use vantage_bench::figure8;
use vantage_sim::syn::filters::FilterKind;

fn simulator(c: &mut Criterion) {
    let setup = figure8();
    let arrivals = setup.arrivals(1);
    let horizon = setup.horizon().as_secs_f64();
    let mut group = c.benchmark_group("figure8-run-600s");
    for kind in FilterKind::ALL {
        let events = setup.run_once(kind, &arrivals).events;
        group.throughput(Throughput::Elements(events));
        group.bench_function(kind.name(), |b| b.iter(|| setup.run_once(kind, &arrivals)));
        // Simulated time per wall time, measured here in the same run.
        let rounds = 20;
        let start = Instant::now();
        for _ in 0..rounds {
            std::hint::black_box(setup.run_once(kind, &arrivals));
        }
        let wall = start.elapsed().as_secs_f64() / rounds as f64;
        println!(
            "{:>10}: {events} events per run, {:.0}× real time, {:.2e} events/s",
            kind.name(),
            horizon / wall,
            events as f64 / wall
        );
    }
    group.finish();
}

criterion_group!(benches, simulator);
criterion_main!(benches);
