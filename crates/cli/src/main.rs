use std::time::Instant;
use vantage_sim::scenario::Scenario;
use vantage_sim::study::{execute, Effort};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let path = &args[1];
    let quick = args.iter().any(|a| a == "--quick");
    let text = std::fs::read_to_string(path)?;
    let s = Scenario::from_toml(&text, path)?;
    let t = Instant::now();
    let r = execute(&s, Effort { quick }, &|| {})?;
    let wall = t.elapsed().as_secs_f64();
    for row in &r.rows {
        println!(
            "{:14} {:10} {:>8} {:>6} thr {:6.2} delay {:7.3} p99 {:7.3} cost {:7.3} to {:6.3} rej {:6.2} retx {:5.3} {:?}",
            row.profile, row.filter, row.value.map_or(String::new(), |v| v.to_string()),
            row.series_value.map_or(String::new(), |v| v.to_string()),
            row.summary.throughput_pct, row.summary.delay_mean_s, row.summary.delay_p99_s,
            row.summary.cost_mean, row.summary.timeouts_pct, row.summary.rejects_pct,
            row.summary.retransmissions_mean, row.extras
        );
    }
    println!(
        "events {} simulated {:.0} s wall {:.2} s → {:.0}x, {:.2e} ev/s",
        r.events,
        r.simulated.as_secs_f64(),
        wall,
        r.simulated.as_secs_f64() / wall,
        r.events as f64 / wall
    );
    Ok(())
}
