//! `vantage cpa`: critical-path analysis of TCP/HTTP transactions in packet
//! traces (tcpeval).
//!
//! Input: the server capture is positional (`vantage cpa FILE`, or
//! `--server FILE`), the client capture `--client FILE`. Output: tables,
//! `--json` (one document: `transactions` and `summary`) or `--jsonl` (one
//! transaction per line).
//!
//! Exit status: 0 on success, 1 on an error, [`CUT_OFF_EXIT_STATUS`] when an
//! input stops mid-record (everything before the cut was analysed and
//! printed, and a warning names the byte offset).

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use vantage_cpa::{analyze, plot, report, Inputs, Options, SizeClasses};

/// Exit status when an input capture was cut off mid-record.
pub const CUT_OFF_EXIT_STATUS: i32 = 3;

#[derive(clap::Args)]
pub struct CpaArgs {
    /// Capture taken at the server (pcap, pcapng, gzip; `-` for stdin).
    #[arg(value_name = "FILE", conflicts_with = "server")]
    capture: Option<PathBuf>,
    /// The server capture, as a flag (same as FILE).
    #[arg(long, value_name = "FILE")]
    server: Option<PathBuf>,
    /// Capture taken at the client, of the same transactions.
    #[arg(long)]
    client: Option<PathBuf>,
    /// Server clock minus client clock, ms (default: estimated from the
    /// minimum one-way delays both ways).
    #[arg(long, allow_hyphen_values = true)]
    clock_offset_ms: Option<f64>,
    /// Initial congestion window of the sender model, segments (default:
    /// read from the first flight, else 10).
    #[arg(long)]
    initial_window: Option<u32>,
    /// One JSON document instead of tables: `transactions` (one object
    /// each) and `summary` (the analysis's counts).
    #[arg(long, conflicts_with = "jsonl")]
    json: bool,
    /// One JSON object per transaction, one per line (JSON Lines), instead
    /// of tables.
    #[arg(long)]
    jsonl: bool,
    /// Print transaction N's critical path arc by arc.
    #[arg(long, value_name = "N")]
    explain: Option<usize>,
    /// With --explain: write its time-line and sequence plots (SVG) here.
    #[arg(long, value_name = "DIR")]
    svg: Option<PathBuf>,
    /// Cores to use: 1 thread, or 2 (reading, connection tracking and
    /// analysis pipelined on their own threads when the trace is large; the
    /// output is the same).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=2))]
    threads: u8,
}

pub fn run(args: CpaArgs) -> Result<()> {
    without_transparent_huge_pages();
    let server = args.capture.or(args.server);
    if server.is_none() && args.client.is_none() {
        bail!("give at least one capture: FILE (or --server FILE) and/or --client FILE");
    }
    if args.svg.is_some() && args.explain.is_none() {
        bail!("--svg writes the plots of the transaction --explain N names; add --explain");
    }
    let inputs = Inputs {
        server,
        client: args.client,
    };
    let mut options = Options::default();
    if let Some(ms) = args.clock_offset_ms {
        if !ms.is_finite() || ms.abs() > 86_400_000.0 {
            bail!("--clock-offset-ms {ms} is out of range (allowed ±86400000)");
        }
        options.clock_offset = Some((ms * 1e6).round() as i64);
    }
    if let Some(window) = args.initial_window {
        if !(1..=1000).contains(&window) {
            bail!("--initial-window {window} is out of range (allowed 1..=1000)");
        }
        options.initial_window = Some(window);
    }
    options.keep_packets = args.svg.is_some();
    options.threads = usize::from(args.threads);
    let started = Instant::now();
    let analysis = analyze(&inputs, &options)?;
    let seconds = started.elapsed().as_secs_f64();
    let packets: u64 = analysis.stats.inputs.iter().map(|i| i.packets).sum();
    if args.json {
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        report::write_json_document(&mut out, &analysis, options.threads)
            .and_then(|()| writeln!(out))
            .and_then(|()| out.flush())
            .context("cannot write standard output")?;
        if let Some(line) = report::failures_line(&analysis) {
            eprint!("{line}");
        }
    } else if args.jsonl {
        print!("{}", report::json_lines(&analysis));
        if let Some(line) = report::failures_line(&analysis) {
            eprint!("{line}");
        }
    } else {
        print!("{}", report::render(&analysis, &SizeClasses::default()));
        eprintln!(
            "{packets} packets, {} transactions in {seconds:.3} s ({:.0} packets/s)",
            analysis.transactions.len(),
            packets as f64 / seconds.max(1e-9)
        );
    }
    if let Some(number) = args.explain {
        print!("{}", report::explain(&analysis, number)?);
        if let Some(dir) = &args.svg {
            let transaction = analysis
                .transaction(number)
                .with_context(|| format!("no transaction {number}"))?;
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            for (name, svg) in [
                ("timeline", plot::timeline_svg(transaction)?),
                ("sequence", plot::sequence_svg(transaction)?),
            ] {
                let path = dir.join(format!("transaction-{number}-{name}.svg"));
                std::fs::write(&path, svg)
                    .with_context(|| format!("cannot write {}", path.display()))?;
            }
        }
    }
    if let Some(line) = report::stale_resends_line(&analysis) {
        eprint!("vantage: warning: {line}");
    }
    let mut cut_off = false;
    for input in &analysis.stats.inputs {
        if input.connections_evicted > 0 {
            eprintln!(
                "vantage: warning: {} connections finished early to keep the connection table within its cap",
                input.connections_evicted
            );
        }
        if input.late_segments > 0 {
            eprintln!(
                "vantage: note: {} segments came after their connection had closed and were not analysed",
                input.late_segments
            );
        }
        if input.reordering.overflow > 0 {
            eprintln!(
                "vantage: note: {} packets were stamped too far out of order for the {}-packet window; their times were clamped",
                input.reordering.overflow,
                vantage_trace::DEFAULT_REORDER_WINDOW
            );
        }
        if let Some(message) = &input.cut_off {
            eprintln!(
                "vantage: warning: {message}; the {} complete packets before it were analysed",
                input.packets
            );
            cut_off = true;
        }
    }
    if cut_off {
        std::io::stdout()
            .flush()
            .context("cannot write standard output")?;
        return Err(crate::ExitStatus(CUT_OFF_EXIT_STATUS).into());
    }
    Ok(())
}

/// Asks the kernel not to back this process's memory with transparent huge
/// pages. The allocator (mimalloc, see main.rs) advises huge pages for the
/// memory it maps; the analysis and the connection table then fault in
/// 2 MiB pages, each zeroed whole, and on a shared machine that system time
/// varied from run to run by more than the analysis' own CPU time
/// (bench/cpa/README.md, 2026-11-26). Only this process and its children
/// are affected; on a kernel without the setting nothing changes.
fn without_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    {
        let disable: libc::c_ulong = 1;
        let unused: libc::c_ulong = 0;
        // SAFETY: PR_SET_THP_DISABLE takes plain integers and reads or
        // writes no memory of this process; a failure leaves the default.
        let _ = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, disable, unused, unused, unused) };
    }
}
