//! `vantage wan`: the testbed's WAN emulator in the current network
//! namespace — per-client delay, jitter, loss and bottleneck rate on the
//! packets this namespace forwards — until Ctrl-C, SIGTERM or `--duration-s`.
//!
//! It binds an NFQUEUE queue, then (unless `--no-rules`) inserts
//! `iptables -I FORWARD -j NFQUEUE --queue-num N --queue-bypass`, removed
//! again on exit. The link options apply to both directions of every
//! `--client` prefix; `--config` reads per-direction settings from TOML
//! instead (see `vantage_testbed::wan::WanConfig`).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, CellAlignment, Table};
use vantage_sys::privilege::is_root;
use vantage_testbed::wan::{
    ClientPrefix, DirectionStats, Emulator, ForwardQueueRule, JitterDistribution, LinkConfig,
    LinkRule, WanConfig, WanStats,
};

/// Options of `vantage wan`.
#[derive(clap::Args, Debug)]
pub struct WanArgs {
    /// NFQUEUE queue number (the iptables rule's --queue-num).
    #[arg(long, default_value_t = 0)]
    pub queue: u16,
    /// One-way delay added in each direction, ms (the round trip gets
    /// twice it).
    #[arg(long, default_value_t = 25.0)]
    pub delay_ms: f64,
    /// Jitter scale, ms: half-width (uniform), standard deviation (normal)
    /// or mean (exponential).
    #[arg(long, default_value_t = 0.0)]
    pub jitter_ms: f64,
    /// Jitter distribution: uniform, normal or exponential.
    #[arg(long, default_value = "uniform")]
    pub jitter: JitterDistribution,
    /// Let jitter reorder packets (by default a packet never overtakes the
    /// one before it).
    #[arg(long)]
    pub reorder: bool,
    /// Independent loss probability per packet, percent.
    #[arg(long, default_value_t = 0.0)]
    pub loss_pct: f64,
    /// Bottleneck rate per direction, Mbit/s (0 = unlimited).
    #[arg(long, default_value_t = 0.0)]
    pub rate_mbit: f64,
    /// Bottleneck queue, packets (tail drop beyond).
    #[arg(long, default_value_t = 1000)]
    pub queue_packets: u32,
    /// Packets the kernel may hold for the emulator; must exceed packet
    /// rate × delay.
    #[arg(long, default_value_t = 65_536)]
    pub queue_maxlen: u32,
    /// Client address or prefix whose traffic gets the link (repeatable).
    #[arg(long = "client", default_value = "10.78.0.0/16")]
    pub clients: Vec<ClientPrefix>,
    /// WAN configuration file (TOML) with per-direction links; replaces the
    /// link options above.
    #[arg(long, conflicts_with_all = [
        "queue", "delay_ms", "jitter_ms", "jitter", "reorder", "loss_pct",
        "rate_mbit", "queue_packets", "queue_maxlen", "clients",
    ])]
    pub config: Option<PathBuf>,
    /// Stop after this many seconds (default: run until Ctrl-C/SIGTERM).
    #[arg(long)]
    pub duration_s: Option<f64>,
    /// Do not install the iptables rule (send packets to the queue
    /// yourself).
    #[arg(long)]
    pub no_rules: bool,
    /// Print the statistics as one JSON document instead of a table
    /// (times in seconds).
    #[arg(long)]
    pub json: bool,
    /// Seed of the loss and jitter draws (same seed, same fates).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

fn config_from_args(args: &WanArgs) -> Result<WanConfig> {
    if let Some(path) = &args.config {
        let text = crate::read_text(path, "WAN configuration")?;
        return Ok(WanConfig::from_toml(&text, &path.display().to_string())?);
    }
    let link = LinkConfig {
        delay_ms: args.delay_ms,
        jitter_ms: args.jitter_ms,
        jitter: args.jitter,
        order_preserving: !args.reorder,
        loss_pct: args.loss_pct,
        rate_mbit: args.rate_mbit,
        queue_packets: args.queue_packets,
    };
    let links = args
        .clients
        .iter()
        .map(|&client| LinkRule::symmetric(client, link.clone()))
        .collect();
    let config = WanConfig {
        queue_maxlen: args.queue_maxlen,
        ..WanConfig::new(args.queue, links)
    };
    config.validate().map_err(|e| {
        // Name the command-line option rather than the configuration key.
        let option = e.key.rsplit('.').next().unwrap_or(&e.key).replace('_', "-");
        anyhow::anyhow!(
            "--{option} {} is out of range (allowed: {})",
            e.value,
            e.allowed
        )
    })?;
    Ok(config)
}

/// Runs `vantage wan`.
pub fn run(args: WanArgs) -> Result<()> {
    let config = config_from_args(&args)?;
    let duration = match args.duration_s {
        None => None,
        Some(s) if s.is_finite() && s > 0.0 && s <= 1e9 => Some(Duration::from_secs_f64(s)),
        Some(s) => bail!("--duration-s {s} is out of range (allowed: 0 < duration ≤ 1e9 s)"),
    };
    if !is_root() {
        bail!("vantage wan needs root (CAP_NET_ADMIN) to bind an NFQUEUE queue and add its iptables rule");
    }

    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // A second Ctrl-C while stopping exits at once.
        signal_hook::flag::register_conditional_shutdown(signal, 1, Arc::clone(&stop))
            .context("cannot install the signal handler")?;
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .context("cannot install the signal handler")?;
    }

    let emulator = Emulator::bind(&config)?;
    let rule = if args.no_rules {
        None
    } else {
        Some(ForwardQueueRule::install(config.queue_num)?)
    };
    eprintln!(
        "vantage wan: queue {}, {} link rule(s); {}; stop with Ctrl-C{}",
        config.queue_num,
        config.links.len(),
        rule.as_ref().map_or_else(
            || "no iptables rule (--no-rules)".to_string(),
            |r| r.describe()
        ),
        duration.map_or(String::new(), |d| format!(
            " (or after {} s)",
            d.as_secs_f64()
        )),
    );
    if let Some(duration) = duration {
        let stop = Arc::clone(&stop);
        std::thread::Builder::new()
            .name("wan-duration".into())
            .spawn(move || {
                std::thread::sleep(duration);
                stop.store(true, Ordering::Relaxed);
            })
            .context("cannot start the duration timer")?;
    }

    let stats = emulator.run(&stop, args.seed);
    if let Some(rule) = rule {
        rule.remove()?;
    }
    let stats = stats?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json_in_seconds(&stats)?)?
        );
    } else {
        print_stats(&stats);
    }
    if stats.kernel_interfered() {
        eprintln!(
            "vantage wan: warning: the kernel let packets past the emulator undelayed \
             ({} overflow episodes, {} packets bypassed): raise --queue-maxlen (or recv_buffer_bytes \
             with --config), or lower the packet rate",
            stats.kernel_overflows, stats.kernel_bypassed_packets
        );
    }
    Ok(())
}

fn right(value: impl ToString) -> Cell {
    Cell::new(value.to_string()).set_alignment(CellAlignment::Right)
}

fn print_stats(stats: &WanStats) {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    table.set_header(vec![
        "client",
        "direction",
        "packets",
        "bytes",
        "released",
        "lost (random)",
        "dropped (queue full)",
    ]);
    for link in &stats.links {
        let rows: [(&str, &DirectionStats); 2] = [
            ("upstream", &link.upstream),
            ("downstream", &link.downstream),
        ];
        for (direction, d) in rows {
            table.add_row(vec![
                Cell::new(&link.client),
                Cell::new(direction),
                right(d.packets),
                right(d.bytes),
                right(d.released),
                right(d.dropped_loss),
                right(d.dropped_queue),
            ]);
        }
    }
    println!("{table}");
    println!(
        "unmatched {} · max held {} · kernel overflows {} · bypassed {} · verdict errors {} · accepted at stop {}",
        stats.unmatched,
        stats.max_held,
        stats.kernel_overflows,
        stats.kernel_bypassed_packets,
        stats.verdict_errors,
        stats.accepted_at_stop
    );
    println!(
        "release lateness mean {:.1} µs, max {:.1} µs · {:.1} s elapsed, {:.2} s CPU",
        stats.release_lateness_mean_us, stats.release_lateness_max_us, stats.elapsed_s, stats.cpu_s
    );
}

/// The statistics as JSON with every time in seconds: the release lateness,
/// kept in µs by the emulator, becomes `release_lateness_{mean,p99,max}_s`.
fn json_in_seconds(stats: &WanStats) -> Result<serde_json::Value> {
    let mut value = serde_json::to_value(stats)?;
    if let Some(object) = value.as_object_mut() {
        for name in ["mean", "p99", "max"] {
            let micros = format!("release_lateness_{name}_us");
            if let Some(us) = object.remove(&micros).and_then(|v| v.as_f64()) {
                object.insert(format!("release_lateness_{name}_s"), (us * 1e-6).into());
            }
        }
    }
    Ok(value)
}
