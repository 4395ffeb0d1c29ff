//! Runs the critical-path analysis over trace files and prints the report:
//! `cargo run --release -p vantage-cpa --example cpa -- [--server FILE]
//! [--client FILE] [--json] [--explain N] [--svg DIR] [--clock-offset-ms X]`.

use std::path::PathBuf;
use std::process::exit;

use vantage_cpa::{analyze, plot, report, Inputs, Options, SizeClasses};

fn main() {
    let mut inputs = Inputs::default();
    let mut options = Options::default();
    let mut json = false;
    let mut explain = None;
    let mut svg = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next().unwrap_or_else(|| {
                eprintln!("{arg} needs a value");
                exit(2)
            })
        };
        match arg.as_str() {
            "--server" => inputs.server = Some(PathBuf::from(value())),
            "--client" => inputs.client = Some(PathBuf::from(value())),
            "--json" => json = true,
            "--explain" => explain = value().parse::<usize>().ok(),
            "--svg" => {
                svg = Some(PathBuf::from(value()));
                options.keep_packets = true;
            }
            "--clock-offset-ms" => {
                options.clock_offset = value().parse::<f64>().ok().map(|ms| (ms * 1e6) as i64)
            }
            other => {
                eprintln!("unknown argument {other}");
                exit(2)
            }
        }
    }
    let started = std::time::Instant::now();
    let analysis = match analyze(&inputs, &options) {
        Ok(analysis) => analysis,
        Err(error) => {
            eprintln!("{error}");
            exit(1)
        }
    };
    let seconds = started.elapsed().as_secs_f64();
    let packets: u64 = analysis.stats.inputs.iter().map(|i| i.packets).sum();
    let unexplained: u32 = analysis
        .transactions
        .iter()
        .map(|t| t.flags.unexplained_arcs)
        .sum();
    let clamped: u32 = analysis
        .transactions
        .iter()
        .map(|t| t.flags.clamped_arcs)
        .sum();
    eprintln!(
        "{packets} packets, {} transactions in {seconds:.3} s ({:.0} packets/s); \
         beyond window {}, hidden time-outs {}, unexplained arcs {unexplained}, clamped arcs {clamped}",
        analysis.transactions.len(),
        packets as f64 / seconds,
        analysis.stats.beyond_window,
        analysis.stats.hidden_timeouts,
    );
    if json {
        print!("{}", report::json_lines(&analysis));
    } else {
        print!("{}", report::render(&analysis, &SizeClasses::default()));
    }
    if let Some(number) = explain {
        match report::explain(&analysis, number) {
            Ok(text) => print!("{text}"),
            Err(error) => eprintln!("{error}"),
        }
        if let (Some(dir), Some(t)) = (&svg, analysis.transaction(number)) {
            let _ = std::fs::create_dir_all(dir);
            for (name, result) in [
                ("timeline", plot::timeline_svg(t)),
                ("sequence", plot::sequence_svg(t)),
            ] {
                match result {
                    Ok(text) => {
                        let path = dir.join(format!("transaction-{number}-{name}.svg"));
                        if let Err(error) = std::fs::write(&path, text) {
                            eprintln!("{}: {error}", path.display());
                        }
                    }
                    Err(error) => eprintln!("{error}"),
                }
            }
        }
    }
}
