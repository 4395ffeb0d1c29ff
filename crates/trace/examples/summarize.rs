//! Prints the summary of each trace given on the command line (`-` reads
//! standard input), as JSON lines: `cargo run --release -p vantage-trace
//! --example summarize -- FILE...`.

fn main() {
    let mut failed = false;
    for path in std::env::args().skip(1) {
        let started = std::time::Instant::now();
        match vantage_trace::summarize(&path) {
            Ok(summary) => {
                let seconds = started.elapsed().as_secs_f64();
                let json = serde_json::to_string(&summary).expect("summary serializes");
                println!("{path}\t{json}");
                eprintln!(
                    "{path}: {} packets in {seconds:.3} s ({:.2} M packets/s)",
                    summary.packets,
                    summary.packets as f64 / seconds / 1e6
                );
            }
            Err(error) => {
                eprintln!("{error}");
                failed = true;
            }
        }
    }
    if failed {
        std::process::exit(1);
    }
}
