//! `vantage certes estimate`: client-perceived response time from server
//! counters or a server-side capture (Certes paper, Sections 3–4).
//!
//! Arguments and output only: a counters file is read by
//! `vantage_core::certes::ingest`, a capture by `vantage_trace::certes`,
//! and `vantage_core::certes::summary` runs the model and summarizes.
//! Output: a per-interval table (idle intervals left out), or `--json`
//! (one document: `intervals` and `summary`), or `--jsonl` (one object per
//! interval, then one `{"summary": …}` line; from a capture, each interval's
//! line as soon as it closes, through `vantage_trace::certes::CaptureStream`
//! and `vantage_core::certes::summary::RunningEstimate`), `--csv FILE`
//! (every interval), and the summary.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use vantage_core::certes::ingest;
use vantage_core::certes::input::{CaptureNotes, EstimateInput};
use vantage_core::certes::summary::{estimate_each, RunningEstimate};
use vantage_core::certes::{Certes, CertesConfig, NetworkLoss};
use vantage_core::config::CappedReader;
use vantage_core::tcp::ClientMix;
use vantage_core::Nanos;
use vantage_lab::report::certes_estimate::{self, CsvRows};
use vantage_trace::certes::{capture_input, CaptureStream, ClosedInterval};
use vantage_trace::handshake::{ClassBy, ServerFilter};

#[derive(clap::Args)]
pub struct CertesArgs {
    #[command(subcommand)]
    command: CertesCommand,
}

#[derive(clap::Subcommand)]
enum CertesCommand {
    /// Estimate client-perceived response time per interval from server
    /// counters (--counters) or a server-side capture (--trace); with a
    /// capture, also the exact figure from each connection's own SYNs.
    Estimate(EstimateArgs),
    /// Run the Certes watch daemon on a live listener (AF_PACKET capture;
    /// needs CAP_NET_RAW): metrics, JSON Lines, until SIGTERM. SIGHUP
    /// reloads, SIGUSR1 reopens the log. `watch check --config FILE`
    /// validates a configuration (docs/certes-watch.md).
    Watch(WatchArgs),
}

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
struct WatchArgs {
    #[command(subcommand)]
    action: Option<WatchAction>,
    /// Watch configuration (TOML; docs/certes-watch.md).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Create this file, holding the daemon's pid, once it captures
    /// (removed on exit).
    #[arg(long, value_name = "PATH")]
    ready_file: Option<PathBuf>,
}

#[derive(clap::Subcommand)]
enum WatchAction {
    /// Validate a configuration and print what it sets.
    Check {
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
    },
}

/// Format of a counters file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum CountersFormat {
    Csv,
    Jsonl,
}

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("counters_input").args(["input", "counters"])))]
#[command(group(clap::ArgGroup::new("trace_input").args(["input", "trace"])))]
struct EstimateArgs {
    /// A server-side capture (.pcap, .pcapng, .cap, .gz) or a counters file
    /// (.csv, .jsonl, .ndjson, .json), told apart by extension, else by
    /// content. `-` reads standard input: counters with --format, else a
    /// capture.
    #[arg(value_name = "FILE", conflicts_with_all = ["counters", "trace"])]
    input: Option<PathBuf>,
    /// Counters file: CSV or JSON Lines, one row per interval (or per
    /// reading, with --cumulative); columns in docs/certes.md. `-` reads
    /// standard input (give --format).
    #[arg(long, value_name = "FILE", conflicts_with = "trace")]
    counters: Option<PathBuf>,
    /// Format of the counters file (default: from its extension, .csv or
    /// .jsonl/.ndjson/.json).
    #[arg(long, value_enum, requires = "counters_input")]
    format: Option<CountersFormat>,
    /// The counters file holds running totals (readings), not per-interval
    /// counts.
    #[arg(long, requires = "counters_input")]
    cumulative: bool,
    /// Packet capture taken at the server (pcap, pcapng, gzip; `-` for
    /// standard input).
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Interval length Δ (e.g. 250ms, 1s); must be below the profile's
    /// first SYN timeout. A bare number is seconds.
    #[arg(long, default_value = "250ms", value_parser = parse_duration)]
    interval: Nanos,
    /// Client SYN retransmission profile or mixture (`vantage profiles`).
    #[arg(long, default_value = "linux-6.5")]
    profile: String,
    /// Client frustration timeout FTO (Section 3.2.2), e.g. 21s.
    #[arg(long, default_value = "21s", value_parser = parse_duration)]
    frustration_timeout: Nanos,
    /// SYN loss in the network (Section 3.2.1): `none`, a fraction such
    /// as 0.03, or `retransmissions` (the server's share of retransmitted
    /// data segments).
    #[arg(long, default_value = "none", value_parser = parse_network_loss)]
    network_loss: NetworkLoss,
    /// Run Section 3.2's fast model as published: no damping of its
    /// recursion above the drop rate where it turns unstable (61.8 % for
    /// the paper's 3/6 s clients).
    #[arg(long)]
    undamped: bool,
    /// Trace input: the listener, ADDR:PORT, ADDR or :PORT (default: every
    /// listener that answered a SYN in the capture).
    #[arg(long, value_name = "ADDR:PORT", requires = "trace_input")]
    server: Option<ServerFilter>,
    /// Trace input: one estimator per class (Section 3.2.4): `listener` or
    /// `source-prefix/N`.
    #[arg(long, value_name = "CLASSES", requires = "trace_input")]
    by: Option<ClassBy>,
    /// One JSON document: `intervals` (one object each) and `summary`.
    #[arg(long, conflicts_with = "jsonl")]
    json: bool,
    /// One JSON object per interval (JSON Lines), then a summary line.
    #[arg(long)]
    jsonl: bool,
    /// Also write every interval to this CSV file.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
}

pub fn run(args: CertesArgs) -> Result<()> {
    match args.command {
        CertesCommand::Estimate(args) => estimate(args),
        CertesCommand::Watch(args) => watch(args),
    }
}

fn watch(args: WatchArgs) -> Result<()> {
    use vantage_live::watch;
    match (args.action, args.config) {
        (Some(WatchAction::Check { config }), _) => {
            println!("{}", watch::check(&config)?);
            Ok(())
        }
        (None, Some(path)) => {
            let config = watch::WatchConfig::load(&path)?;
            let signals = vantage_live::daemon::Signals::new();
            signals.register().context("vantage certes watch")?;
            let options = watch::RunOptions {
                ready_file: args.ready_file,
                signals,
                config_path: Some(path),
            };
            let summary = watch::run(&config, &options)?;
            serde_json::to_writer(std::io::stdout().lock(), &summary)?;
            println!();
            Ok(())
        }
        (None, None) => bail!("give --config FILE (or `watch check --config FILE`)"),
    }
}

use vantage_live::watch::config::{parse_duration, parse_network_loss};

fn estimate(args: EstimateArgs) -> Result<()> {
    let clients = ClientMix::builtin(&args.profile).context("--profile")?;
    let mut config = CertesConfig::new(args.interval, clients, args.frustration_timeout);
    config.network_loss = args.network_loss;
    config.damping = !args.undamped;
    // Built once and copied per class: construction computes the
    // recursion's critical failure rate.
    let fresh = Certes::new(config.clone()).context("cannot run the model with these options")?;

    let (counters, trace) = match args.input {
        Some(path) if is_capture(&path, args.format.is_some())? => (None, Some(path)),
        Some(path) => (Some(path), None),
        None => (args.counters, args.trace),
    };
    let input = match (&counters, &trace) {
        (Some(path), None) => {
            if args.server.is_some() || args.by.is_some() {
                bail!(
                    "--server and --by apply to a capture, and {} is a counters file",
                    path.display()
                );
            }
            read_counters_file(path, args.format, args.cumulative, args.interval)?
        }
        (None, Some(path)) => {
            if args.format.is_some() || args.cumulative {
                bail!(
                    "--format and --cumulative apply to a counters file, and {} is a capture",
                    path.display()
                );
            }
            if args.jsonl {
                let options = StreamOptions {
                    server: args.server,
                    by: args.by,
                    frustration_timeout: args.frustration_timeout,
                    csv: args.csv.as_deref(),
                };
                return stream_capture(path, options, &config, &fresh);
            }
            capture_input(path, args.server, args.by, &config)?
        }
        _ => bail!(
            "give one input: FILE (a capture or a counters file), --counters FILE or --trace FILE"
        ),
    };

    // Rows go out as they are made: only the table's non-idle rows are
    // kept, so memory does not grow with idle intervals.
    let trace = input.classes.first().is_some_and(|c| c.exact.is_some());
    let mut csv = match &args.csv {
        Some(path) => Some(CsvRows::create(path, trace)?),
        None => None,
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut shown = Vec::new();
    let mut idle = 0usize;
    // `--json` is one document, written as the rows come: the intervals
    // array first, the summary last.
    if args.json {
        out.write_all(b"{\"intervals\":[")?;
    }
    let mut first = true;
    let summary = estimate_each(&input, &fresh, args.frustration_timeout, |row| {
        if let Some(csv) = &mut csv {
            csv.write(&row)?;
        }
        if args.json {
            if !std::mem::take(&mut first) {
                out.write_all(b",")?;
            }
            serde_json::to_writer(&mut out, &row)?;
        } else if args.jsonl {
            serde_json::to_writer(&mut out, &row)?;
            out.write_all(b"\n")?;
        } else if row.idle() {
            idle += 1;
        } else {
            shown.push(row);
        }
        Ok::<(), anyhow::Error>(())
    })?;
    if let Some(csv) = csv {
        csv.finish()?;
    }
    if args.json {
        out.write_all(b"],\"summary\":")?;
        serde_json::to_writer(&mut out, &summary)?;
        out.write_all(b"}\n")?;
        out.flush()?;
    } else if args.jsonl {
        serde_json::to_writer(&mut out, &serde_json::json!({ "summary": summary }))?;
        out.write_all(b"\n")?;
        out.flush()?;
    } else {
        drop(out);
        print!(
            "{}",
            certes_estimate::render_table(&shown, idle, input.classed(), trace)
        );
        print!("{}", certes_estimate::render_summary(&summary));
    }
    match &input.capture_notes {
        Some(notes) => capture_warnings(notes),
        None => Ok(()),
    }
}

/// Warns of what the capture reader counted; a capture cut off gives exit
/// status 3.
fn capture_warnings(notes: &CaptureNotes) -> Result<()> {
    if notes.connections_evicted > 0 {
        eprintln!(
            "vantage: warning: {} connections ({} of them half-open) finished early to keep the connection table within its cap; their SYNs are counted",
            notes.connections_evicted, notes.connections_evicted_half_open
        );
    }
    if notes.connections_not_kept > 0 {
        eprintln!(
            "vantage: warning: {} connections to a listener were left out: they came before it answered its first SYN, beyond the {} such connections kept (name the listener with --server)",
            notes.connections_not_kept,
            vantage_trace::certes::MAX_UNCONFIRMED_CONNECTIONS
        );
    }
    if notes.decided_early > 0 {
        eprintln!(
            "vantage: warning: {} connections were decided before the capture reached their give-up or abandon time, beyond the {} held at once; they count as if the capture ran on to that time",
            notes.decided_early,
            vantage_trace::certes::MAX_HELD_CONNECTIONS
        );
    }
    if notes.late_counts > 0 {
        eprintln!(
            "vantage: warning: {} counts arrived for intervals already printed and were left out of them and of the summary",
            notes.late_counts
        );
    }
    if let Some(message) = &notes.cut_off {
        eprintln!(
            "vantage: warning: {message}; the {} complete packets before it were read",
            notes.packets
        );
        return Err(crate::ExitStatus(crate::cpa::CUT_OFF_EXIT_STATUS).into());
    }
    Ok(())
}

/// What a streamed capture run takes from the arguments.
struct StreamOptions<'a> {
    server: Option<ServerFilter>,
    by: Option<ClassBy>,
    frustration_timeout: Nanos,
    csv: Option<&'a Path>,
}

/// `--trace FILE --jsonl`: each interval's line as soon as the capture's
/// clock closes it (flushed, so a live pipe shows it at once), then the
/// summary line.
fn stream_capture(
    path: &Path,
    args: StreamOptions<'_>,
    config: &CertesConfig,
    fresh: &Certes,
) -> Result<()> {
    let mut capture = CaptureStream::open(path, args.server, args.by, config)?;
    // A class's lines start at the first interval it counted anything in,
    // as the whole-capture run's rows do (a class seen only when a later
    // interval closes has nothing in the intervals printed before).
    let mut run = RunningEstimate::new(fresh, args.frustration_timeout, args.by.is_some(), 0.0)
        .rows_from_first_count();
    let mut csv = match args.csv {
        Some(path) => Some(CsvRows::create(path, true)?),
        None => None,
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut emit = |closed: Vec<ClosedInterval>, run: &mut RunningEstimate| -> Result<()> {
        for interval in closed {
            let given = interval.class_intervals();
            run.interval(&given, |row| {
                if let Some(csv) = &mut csv {
                    csv.write(&row)?;
                }
                serde_json::to_writer(&mut out, &row)?;
                out.write_all(b"\n")?;
                out.flush()?;
                Ok::<(), anyhow::Error>(())
            })?;
        }
        Ok(())
    };
    while capture.read_packet()? {
        let closed = capture.take_closed()?;
        emit(closed, &mut run)?;
    }
    let (closed, totals) = capture.finish_stream()?;
    emit(closed, &mut run)?;
    if let Some(csv) = csv {
        csv.finish()?;
    }
    let summary = run.finish(
        totals.description,
        Some(totals.origin_unix),
        &totals.classes,
        Some(totals.notes.clone()),
    );
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, &serde_json::json!({ "summary": summary }))?;
    out.write_all(b"\n")?;
    out.flush()?;
    capture_warnings(&totals.notes)
}

/// Whether a positional input is a capture rather than a counters file: by
/// extension, else by its first bytes (pcap, pcapng or gzip magic). `-` is a
/// capture unless `--format` was given.
fn is_capture(path: &Path, format_given: bool) -> Result<bool> {
    if path.as_os_str() == "-" {
        return Ok(!format_given);
    }
    let extension = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match extension.as_deref() {
        Some("pcap" | "pcapng" | "cap" | "gz") => return Ok(true),
        Some("csv" | "jsonl" | "ndjson" | "json") => return Ok(false),
        _ => {}
    }
    let mut magic = [0u8; 4];
    let mut file =
        std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let read = std::io::Read::read(&mut file, &mut magic)
        .with_context(|| format!("cannot read {}", path.display()))?;
    Ok(matches!(
        &magic[..read],
        [0xd4, 0xc3, 0xb2, 0xa1]
            | [0xa1, 0xb2, 0xc3, 0xd4]
            | [0x4d, 0x3c, 0xb2, 0xa1]
            | [0xa1, 0xb2, 0x3c, 0x4d]
            | [0x0a, 0x0d, 0x0d, 0x0a]
            | [0x1f, 0x8b, ..]
    ))
}

/// Opens a counters file (`-`: standard input) and hands it to
/// `vantage_core::certes::ingest`; the format comes from the flag or the
/// file's extension.
fn read_counters_file(
    path: &Path,
    format: Option<CountersFormat>,
    cumulative: bool,
    interval: Nanos,
) -> Result<EstimateInput> {
    let name = path.display().to_string();
    let format = match format {
        Some(CountersFormat::Csv) => ingest::CountersFormat::Csv,
        Some(CountersFormat::Jsonl) => ingest::CountersFormat::Jsonl,
        None => {
            let extension = path
                .extension()
                .and_then(|e| e.to_str())
                .map(str::to_ascii_lowercase);
            match extension.as_deref() {
                Some("csv") => ingest::CountersFormat::Csv,
                Some("jsonl" | "ndjson" | "json") => ingest::CountersFormat::Jsonl,
                _ => bail!(
                    "cannot tell the format of {name} from its name; give --format csv or --format jsonl"
                ),
            }
        }
    };
    let cap = vantage_core::config::MAX_COUNTERS_BYTES;
    let reader: Box<dyn BufRead> = if path.as_os_str() == "-" {
        Box::new(BufReader::new(CappedReader::new(std::io::stdin(), cap)))
    } else {
        let file =
            std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        Box::new(BufReader::new(CappedReader::new(file, cap)))
    };
    Ok(ingest::read_counters(
        reader, &name, format, cumulative, interval,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_losses_parse() {
        assert_eq!(parse_duration("250ms"), Ok(Nanos::from_millis(250)));
        assert_eq!(parse_duration("1s"), Ok(Nanos::from_secs(1)));
        assert_eq!(parse_duration("1.5"), Ok(Nanos::from_millis(1500)));
        assert_eq!(parse_duration("2min"), Ok(Nanos::from_secs(120)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("3 fortnights").is_err());
        assert!(parse_duration("").is_err());
        assert_eq!(parse_network_loss("0.03"), Ok(NetworkLoss::Fixed(0.03)));
        assert!(parse_network_loss("1.5").is_err());
        assert_eq!(
            parse_network_loss("retransmissions"),
            Ok(NetworkLoss::FromRetransmissions)
        );
    }
}
