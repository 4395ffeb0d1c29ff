//! The `--json` document of `vantage cpa --server FILE`, without the rest
//! of the command line (for profiling the analysis on its own; the
//! time of the analysis and of the JSON goes to standard error): `cargo run
//! --release -p vantage-cpa --example server_json -- FILE [THREADS]`.

use std::io::Write;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let server = args.next().ok_or("give a server capture")?;
    let threads = match args.next() {
        Some(threads) => threads.parse()?,
        None => vantage_cpa::Options::default().threads,
    };
    let options = vantage_cpa::Options {
        threads,
        ..vantage_cpa::Options::default()
    };
    let inputs = vantage_cpa::Inputs {
        server: Some(server.into()),
        client: None,
    };
    let started = std::time::Instant::now();
    let analysis = vantage_cpa::analyze(&inputs, &options)?;
    let analysed = started.elapsed();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    vantage_cpa::report::write_json_document(&mut out, &analysis, threads)?;
    writeln!(out)?;
    out.flush()?;
    eprintln!(
        "analysis {:.3} s, JSON {:.3} s",
        analysed.as_secs_f64(),
        (started.elapsed() - analysed).as_secs_f64()
    );
    Ok(())
}
