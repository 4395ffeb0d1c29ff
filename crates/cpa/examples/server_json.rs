//! The `--json` document of `vantage cpa --server FILE`, without the rest
//! of the command line (for profiling the analysis on its own): `cargo run
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
    let analysis = vantage_cpa::analyze(&inputs, &options)?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    vantage_cpa::report::write_json_document(&mut out, &analysis)?;
    writeln!(out)?;
    out.flush()?;
    Ok(())
}
