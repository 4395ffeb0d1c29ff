//! `vantage certes estimate`: client-perceived response time from server
//! counters or a server-side capture (Certes paper, Sections 3–4).
//!
//! Inputs:
//! * a counters file (CSV or JSON Lines; per-interval, or cumulative
//!   readings turned into intervals with `CumulativeCounters::since`), the
//!   DROPPED/ACCEPTED/COMPLETED counts and SYN-to-END and RTT sums of
//!   Eq. 2–4 — columns in `docs/certes.md`; a `vantage gate` log (JSON
//!   Lines, `docs/gate.md`) is such a file too (see [`gate_row`]);
//! * a packet capture taken at the server, read by
//!   `vantage_trace::handshake` into one observation per connection, from
//!   which `vantage_core::certes::observed` builds the same counters *and*
//!   the exact client-perceived time (Eq. 1 with the real retry count),
//!   printed beside the model's estimate.
//!
//! The model is `vantage_core::certes::Certes` (Section 3.2), one per class
//! (Section 3.2.4) with `--by` or a `class` column.
//!
//! Output: a per-interval table (idle intervals left out), or `--json`
//! (JSON Lines: one object per interval, then one `{"summary": …}` line),
//! `--csv FILE` (every interval), and a summary: the transaction-weighted
//! mean of the estimate against the exact one, the drop rate, give-ups, and
//! the SYN-to-END mean — what a server-side latency metric reports today.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, CellAlignment, Table};
use serde::Serialize;
use serde_json::Value;
use vantage_core::certes::observed::{
    bucket, compare, end_abandoned, exact, ExactConfig, ExactFigures, MAX_INTERVALS,
};
use vantage_core::certes::{
    Certes, CertesConfig, CumulativeCounters, Estimate, IntervalCounters, NetworkLoss,
};
use vantage_core::tcp::ClientMix;
use vantage_core::Nanos;
use vantage_trace::handshake::{read_handshakes, ClassBy, HandshakeConfig, ServerFilter};

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
}

/// Format of a counters file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum CountersFormat {
    Csv,
    Jsonl,
}

#[derive(clap::Args)]
struct EstimateArgs {
    /// Counters file: CSV or JSON Lines, one row per interval (or per
    /// reading, with --cumulative); columns in docs/certes.md. `-` reads
    /// standard input (give --format).
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "trace",
        required_unless_present = "trace"
    )]
    counters: Option<PathBuf>,
    /// Format of the counters file (default: from its extension, .csv or
    /// .jsonl/.ndjson/.json).
    #[arg(long, value_enum, requires = "counters")]
    format: Option<CountersFormat>,
    /// The counters file holds running totals (readings), not per-interval
    /// counts.
    #[arg(long, requires = "counters")]
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
    #[arg(long, value_name = "ADDR:PORT", requires = "trace")]
    server: Option<ServerFilter>,
    /// Trace input: one estimator per class (Section 3.2.4): `listener` or
    /// `source-prefix/N`.
    #[arg(long, value_name = "CLASSES", requires = "trace")]
    by: Option<ClassBy>,
    /// One JSON object per interval (JSON Lines), then a summary line.
    #[arg(long)]
    json: bool,
    /// Also write every interval to this CSV file.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
}

pub fn run(args: CertesArgs) -> Result<()> {
    match args.command {
        CertesCommand::Estimate(args) => estimate(args),
    }
}

/// Parses `250ms`, `1s`, `1.5s`, `500us`, `100ns`, `2min`; a bare number is
/// seconds.
fn parse_duration(text: &str) -> Result<Nanos, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration (e.g. 250ms, 1s, 21s)"))?;
    let scale = match unit.trim() {
        "" | "s" => 1e9,
        "ms" => 1e6,
        "us" | "µs" => 1e3,
        "ns" => 1.0,
        "min" => 60e9,
        other => {
            return Err(format!(
                "unknown unit `{other}` in `{text}` (known: ns, us, ms, s, min)"
            ))
        }
    };
    let nanos = value * scale;
    if !(1.0..=86_400e9).contains(&nanos) {
        return Err(format!("`{text}` is out of range (1 ns to 24 h)"));
    }
    Ok(Nanos(nanos.round() as u64))
}

fn parse_network_loss(text: &str) -> Result<NetworkLoss, String> {
    match text.trim() {
        "none" => Ok(NetworkLoss::None),
        "retransmissions" => Ok(NetworkLoss::FromRetransmissions),
        other => match other.parse::<f64>() {
            Ok(q) if (0.0..1.0).contains(&q) => Ok(NetworkLoss::Fixed(q)),
            _ => Err(format!(
                "`{other}` is not a network loss: give `none`, `retransmissions` or a fraction in [0, 1) such as 0.03"
            )),
        },
    }
}

/// One class's intervals, ready for the model.
struct ClassInput {
    /// Empty when the input has no classes.
    class: String,
    counters: Vec<IntervalCounters>,
    /// Trace input: the exact figures over the same intervals.
    exact: Option<ExactFigures>,
}

/// What was read, before the model runs.
struct Input {
    description: String,
    /// Start of interval 0, in seconds on the input's own time axis (the
    /// file's `t_start_s`, or 0 for a capture's first interval).
    t0_s: f64,
    /// Trace input: interval 0's start, ns since the UNIX epoch.
    origin_unix: Option<Nanos>,
    intervals: usize,
    classes: Vec<ClassInput>,
    /// Trace input: what the reader and bucketing counted.
    trace_notes: Option<TraceNotes>,
}

#[derive(Clone, Debug, Default, Serialize)]
struct TraceNotes {
    packets: u64,
    connections: u64,
    listeners: Vec<String>,
    connections_without_syn: u64,
    connections_to_other_servers: u64,
    syns_after_answer: u64,
    rtt_missing: u64,
    /// Accepted connections ended at first SYN + FTO (never served or
    /// closed; see `observed::end_abandoned`).
    abandoned: u64,
}

fn estimate(args: EstimateArgs) -> Result<()> {
    let clients = ClientMix::builtin(&args.profile).context("--profile")?;
    let mut config = CertesConfig::new(args.interval, clients, args.frustration_timeout);
    config.network_loss = args.network_loss;
    config.damping = !args.undamped;
    // Built once and copied per class: construction computes the
    // recursion's critical failure rate.
    let fresh = Certes::new(config.clone()).context("cannot run the model with these options")?;

    let input = match (&args.counters, &args.trace) {
        (Some(path), None) => {
            read_counters_file(path, args.format, args.cumulative, args.interval)?
        }
        (None, Some(path)) => read_trace(path, &args, &config)?,
        _ => bail!("give one input: --counters FILE or --trace FILE"),
    };

    let mut results = Vec::new();
    for class in &input.classes {
        let mut certes = fresh.clone();
        results.push(
            class
                .counters
                .iter()
                .map(|c| certes.on_interval(c))
                .collect(),
        );
    }
    let rows = rows(&input, &results, args.interval);
    let summary = summarize(&input, &results, &args, &config);

    if let Some(path) = &args.csv {
        write_csv(path, &rows)?;
    }
    if args.json {
        let mut out = String::new();
        for row in &rows {
            out.push_str(&serde_json::to_string(row)?);
            out.push('\n');
        }
        out.push_str(&serde_json::to_string(
            &serde_json::json!({ "summary": summary }),
        )?);
        out.push('\n');
        print!("{out}");
    } else {
        print_table(
            &rows,
            input.classes.len() > 1 || !input.classes[0].class.is_empty(),
        );
        print_summary(&summary);
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Trace input

fn read_trace(path: &Path, args: &EstimateArgs, config: &CertesConfig) -> Result<Input> {
    let handshake_config = HandshakeConfig {
        server: args.server,
        ..HandshakeConfig::default()
    };
    let trace = read_handshakes(path, &handshake_config)
        .with_context(|| format!("cannot read capture {}", path.display()))?;
    let listeners: Vec<String> = trace.listeners.iter().map(|l| l.to_string()).collect();
    if trace.handshakes.is_empty() {
        let target = match &args.server {
            Some(filter) => format!("to {filter}"),
            None => "to a listener that answered a SYN".to_string(),
        };
        bail!(
            "{}: no connection attempt {target} (no SYN captured; {} packets, {} connections; listeners seen: {}){}",
            path.display(),
            trace.stats.packets,
            trace.stats.connections,
            if listeners.is_empty() {
                "none".to_string()
            } else {
                listeners.join(", ")
            },
            if args.server.is_none() {
                "; if every SYN to your listener was dropped or refused, name it with --server ADDR:PORT"
            } else {
                ""
            }
        );
    }
    let grid = trace.grid(args.interval)?;
    let capture_end = trace.capture_end();
    let exact_config = ExactConfig::from_model(config)?;
    let classes_observed = match args.by {
        Some(by) => trace.observations_by_class(by),
        None => BTreeMap::from([(String::new(), trace.observations())]),
    };
    let mut notes = TraceNotes {
        packets: trace.stats.packets,
        connections: trace.handshakes.len() as u64,
        listeners,
        connections_without_syn: trace.stats.without_syn,
        connections_to_other_servers: trace.stats.other_servers,
        ..TraceNotes::default()
    };
    let mut classes = Vec::new();
    let mut intervals = 0;
    for (class, mut observations) in classes_observed {
        notes.abandoned += end_abandoned(
            &mut observations,
            exact_config.frustration_timeout,
            capture_end,
        );
        let counted = bucket(&observations, grid, capture_end)
            .with_context(|| format!("{}", path.display()))?;
        let figures = exact(&observations, grid, capture_end, &exact_config)
            .with_context(|| format!("{}", path.display()))?;
        notes.syns_after_answer += counted.stats.syns_after_answer;
        notes.rtt_missing += counted.stats.rtt_missing;
        intervals = counted.intervals.len();
        classes.push(ClassInput {
            class,
            counters: counted.intervals,
            exact: Some(figures),
        });
    }
    Ok(Input {
        description: path.display().to_string(),
        t0_s: 0.0,
        origin_unix: Some(grid.start),
        intervals,
        classes,
        trace_notes: Some(notes),
    })
}

// ---------------------------------------------------------------------------
// Counters files

/// Columns a counters file may have.
const COLUMNS: &[&str] = &[
    "t_start_s",
    "interval",
    "dropped",
    "accepted",
    "completed",
    "syn_to_end_sum_s",
    "rtt_sum_s",
    "segments_sent",
    "segments_retransmitted",
    "class",
    "cumulative",
];
const REQUIRED: &[&str] = &["dropped", "accepted", "completed", "syn_to_end_sum_s"];

/// One row of a counters file, as read.
struct RawRow {
    line: u64,
    /// Start of the interval (or time of the reading), seconds.
    t_s: f64,
    /// Which column gave the time.
    time_column: &'static str,
    class: String,
    cumulative: Option<bool>,
    values: CumulativeCounters,
}

/// A cell's value, from CSV text or a JSON value.
enum CellValue<'a> {
    Text(&'a str),
    Json(&'a Value),
}

impl CellValue<'_> {
    fn is_empty(&self) -> bool {
        match self {
            CellValue::Text(t) => t.trim().is_empty(),
            CellValue::Json(v) => v.is_null(),
        }
    }
}

/// Names the file, line and column of a bad cell.
struct Where<'a> {
    file: &'a str,
    line: u64,
}

impl Where<'_> {
    fn error(&self, column: &str, problem: impl std::fmt::Display) -> anyhow::Error {
        anyhow::anyhow!(
            "{}, line {}, column `{column}`: {problem}",
            self.file,
            self.line
        )
    }

    fn count(&self, column: &str, value: &CellValue) -> Result<u64> {
        let problem = || self.error(column, "expected a whole number ≥ 0");
        match value {
            CellValue::Text(t) => t.trim().parse::<u64>().map_err(|_| problem()),
            CellValue::Json(v) => v
                .as_u64()
                .or_else(|| {
                    v.as_f64()
                        .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 1.8e19)
                        .map(|f| f as u64)
                })
                .ok_or_else(problem),
        }
    }

    fn seconds(&self, column: &str, value: &CellValue, signed: bool) -> Result<f64> {
        let number = match value {
            CellValue::Text(t) => t.trim().parse::<f64>().ok(),
            CellValue::Json(v) => v.as_f64(),
        };
        match number {
            Some(s) if s.is_finite() && (signed || s >= 0.0) && s.abs() < 1e12 => Ok(s),
            _ => Err(self.error(
                column,
                if signed {
                    "expected a number of seconds"
                } else {
                    "expected a number of seconds ≥ 0"
                },
            )),
        }
    }

    fn boolean(&self, column: &str, value: &CellValue) -> Result<bool> {
        let parsed = match value {
            CellValue::Text(t) => match t.trim() {
                "true" | "1" => Some(true),
                "false" | "0" => Some(false),
                _ => None,
            },
            CellValue::Json(Value::Bool(b)) => Some(*b),
            CellValue::Json(v) => v.as_u64().filter(|n| *n <= 1).map(|n| n == 1),
        };
        parsed.ok_or_else(|| self.error(column, "expected true or false"))
    }

    fn text(&self, column: &str, value: &CellValue) -> Result<String> {
        match value {
            CellValue::Text(t) => Ok(t.trim().to_string()),
            CellValue::Json(Value::String(s)) => Ok(s.clone()),
            CellValue::Json(Value::Number(n)) => Ok(n.to_string()),
            CellValue::Json(_) => Err(self.error(column, "expected a string")),
        }
    }
}

fn unknown_column(file: &str, line: u64, name: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "{file}, line {line}: unknown column `{name}` (allowed: {})",
        COLUMNS.join(", ")
    )
}

/// Builds one row from (column, value) pairs.
fn raw_row<'a>(
    at: &Where,
    cells: impl Iterator<Item = (&'a str, CellValue<'a>)>,
) -> Result<RawRow> {
    let mut row = RawRow {
        line: at.line,
        t_s: 0.0,
        time_column: "",
        class: String::new(),
        cumulative: None,
        values: CumulativeCounters::default(),
    };
    let mut seen: Vec<&str> = Vec::new();
    for (column, value) in cells {
        if value.is_empty() {
            continue;
        }
        seen.push(column);
        match column {
            "t_start_s" => {
                row.t_s = at.seconds(column, &value, true)?;
                row.time_column = "t_start_s";
            }
            "interval" => {
                row.t_s = at.count(column, &value)? as f64;
                row.time_column = "interval";
            }
            "dropped" => row.values.dropped = at.count(column, &value)?,
            "accepted" => row.values.accepted = at.count(column, &value)?,
            "completed" => row.values.completed = at.count(column, &value)?,
            "syn_to_end_sum_s" => {
                row.values.syn_to_end_sum = Nanos::from_secs_f64(at.seconds(column, &value, false)?)
            }
            "rtt_sum_s" => {
                row.values.rtt_sum = Nanos::from_secs_f64(at.seconds(column, &value, false)?)
            }
            "segments_sent" => row.values.segments_sent = at.count(column, &value)?,
            "segments_retransmitted" => {
                row.values.segments_retransmitted = at.count(column, &value)?
            }
            "class" => row.class = at.text(column, &value)?,
            "cumulative" => row.cumulative = Some(at.boolean(column, &value)?),
            other => return Err(unknown_column(at.file, at.line, other)),
        }
    }
    if seen.contains(&"t_start_s") && seen.contains(&"interval") {
        bail!(
            "{}, line {}: give `t_start_s` or `interval`, not both",
            at.file,
            at.line
        );
    }
    if row.time_column.is_empty() {
        bail!(
            "{}, line {}: no time: give `t_start_s` (seconds) or `interval` (index)",
            at.file,
            at.line
        );
    }
    for required in REQUIRED {
        if !seen.contains(required) {
            bail!(
                "{}, line {}, column `{required}`: missing (required: {})",
                at.file,
                at.line,
                REQUIRED.join(", ")
            );
        }
    }
    Ok(row)
}

fn open_input(path: &Path) -> Result<Box<dyn Read>> {
    if path.as_os_str() == "-" {
        return Ok(Box::new(std::io::stdin()));
    }
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    Ok(Box::new(file))
}

fn read_csv_rows(path: &Path, name: &str) -> Result<Vec<RawRow>> {
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .comment(Some(b'#'))
        .from_reader(open_input(path)?);
    let header: Vec<String> = reader
        .headers()
        .with_context(|| format!("{name}, line 1: cannot read the header"))?
        .iter()
        .map(str::to_string)
        .collect();
    for (index, column) in header.iter().enumerate() {
        if !COLUMNS.contains(&column.as_str()) {
            return Err(unknown_column(name, 1, column));
        }
        if header[..index].contains(column) {
            bail!("{name}, line 1: column `{column}` appears twice");
        }
    }
    let mut rows = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| {
            let line = e.position().map_or(0, |p| p.line());
            match e.kind() {
                csv::ErrorKind::UnequalLengths { len, .. } => anyhow::anyhow!(
                    "{name}, line {line}: {len} fields, but the header has {}",
                    header.len()
                ),
                _ => anyhow::anyhow!("{name}, line {line}: {e}"),
            }
        })?;
        let line = record.position().map_or(0, |p| p.line());
        let at = Where { file: name, line };
        let cells = header
            .iter()
            .zip(record.iter())
            .map(|(h, v)| (h.as_str(), CellValue::Text(v)));
        rows.push(raw_row(&at, cells)?);
    }
    Ok(rows)
}

fn read_jsonl_rows(path: &Path, name: &str, interval: Nanos) -> Result<Vec<RawRow>> {
    let reader = BufReader::new(open_input(path)?);
    let mut rows = Vec::new();
    for (index, line) in reader.lines().enumerate() {
        let number = index as u64 + 1;
        let line = line.with_context(|| format!("{name}, line {number}: cannot read"))?;
        let text = line.trim();
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        let value: Value = serde_json::from_str(text).map_err(|e| {
            // serde_json's message ends with its own "at line 1 column N".
            let message = e.to_string();
            let message = message
                .rsplit_once(" at line ")
                .map_or(message.as_str(), |(m, _)| m)
                .to_string();
            anyhow::anyhow!("{name}, line {number}, column {}: {message}", e.column())
        })?;
        let Value::Object(object) = &value else {
            bail!("{name}, line {number}: expected a JSON object {{\"t_start_s\": …, \"dropped\": …}}");
        };
        let at = Where {
            file: name,
            line: number,
        };
        if is_gate_record(object) {
            rows.push(gate_row(&at, object, interval)?);
            continue;
        }
        let cells = object.iter().map(|(k, v)| (k.as_str(), CellValue::Json(v)));
        rows.push(raw_row(&at, cells)?);
    }
    Ok(rows)
}

/// Whether a JSON object is a record of `vantage gate`'s log
/// (`docs/gate.md`): it has the gate's `filter` snapshot and `rejected`.
fn is_gate_record(object: &serde_json::Map<String, Value>) -> bool {
    object.contains_key("filter") && object.contains_key("rejected")
}

/// One record of `vantage gate`'s log as a counters row. The gate counts
/// the filter's verdicts on SYNs: DROPPED_i is `dropped`; ACCEPTED_i, the
/// SYNs the server answered, is `accepted + rejected` (a RST is an answer:
/// the client does not retransmit); in a dry run every SYN was accepted.
/// The gate sees no connection end: `completed` and the sums are zero
/// unless the record carries them (a log merged with the server's). The
/// record's `interval_s` must be `--interval`; its other keys are ignored.
fn gate_row(
    at: &Where,
    object: &serde_json::Map<String, Value>,
    interval: Nanos,
) -> Result<RawRow> {
    let get = |key: &str| {
        object
            .get(key)
            .filter(|v| !v.is_null())
            .map(CellValue::Json)
            .ok_or_else(|| at.error(key, "missing (every vantage gate log record has it)"))
    };
    let t_s = at.seconds("time_s", &get("time_s")?, false)?;
    let logged = at.seconds("interval_s", &get("interval_s")?, false)?;
    let wanted = interval.as_secs_f64();
    if (logged - wanted).abs() > 1e-6 * wanted {
        return Err(at.error(
            "interval_s",
            format!(
                "the gate logged {logged} s intervals but --interval is {}; run with --interval {logged}s",
                format_seconds(interval)
            ),
        ));
    }
    let accepted = at.count("accepted", &get("accepted")?)?;
    let dropped = at.count("dropped", &get("dropped")?)?;
    let rejected = at.count("rejected", &get("rejected")?)?;
    let dry_run = match object.get("dry_run").filter(|v| !v.is_null()) {
        Some(v) => at.boolean("dry_run", &CellValue::Json(v))?,
        None => false,
    };
    let mut row = RawRow {
        line: at.line,
        t_s,
        time_column: "time_s",
        class: String::new(),
        cumulative: Some(false),
        values: CumulativeCounters::default(),
    };
    if dry_run {
        row.values.accepted = accepted + dropped + rejected;
    } else {
        row.values.accepted = accepted + rejected;
        row.values.dropped = dropped;
    }
    for (column, value) in object {
        let value = CellValue::Json(value);
        if value.is_empty() {
            continue;
        }
        match column.as_str() {
            "completed" => row.values.completed = at.count(column, &value)?,
            "syn_to_end_sum_s" => {
                row.values.syn_to_end_sum = Nanos::from_secs_f64(at.seconds(column, &value, false)?)
            }
            "rtt_sum_s" => {
                row.values.rtt_sum = Nanos::from_secs_f64(at.seconds(column, &value, false)?)
            }
            "segments_sent" => row.values.segments_sent = at.count(column, &value)?,
            "segments_retransmitted" => {
                row.values.segments_retransmitted = at.count(column, &value)?
            }
            "class" => row.class = at.text(column, &value)?,
            _ => {}
        }
    }
    Ok(row)
}

/// Reads a counters file into aligned per-class intervals (see
/// docs/certes.md: gaps are filled with empty intervals; cumulative
/// readings are differenced).
fn read_counters_file(
    path: &Path,
    format: Option<CountersFormat>,
    cumulative_flag: bool,
    interval: Nanos,
) -> Result<Input> {
    let name = path.display().to_string();
    let format = match format {
        Some(format) => format,
        None => {
            let extension = path
                .extension()
                .and_then(|e| e.to_str())
                .map(str::to_ascii_lowercase);
            match extension.as_deref() {
                Some("csv") => CountersFormat::Csv,
                Some("jsonl" | "ndjson" | "json") => CountersFormat::Jsonl,
                _ => bail!(
                    "cannot tell the format of {name} from its name; give --format csv or --format jsonl"
                ),
            }
        }
    };
    let rows = match format {
        CountersFormat::Csv => read_csv_rows(path, &name)?,
        CountersFormat::Jsonl => read_jsonl_rows(path, &name, interval)?,
    };
    if rows.is_empty() {
        bail!("{name}: no rows");
    }
    let cumulative = cumulative_mode(&rows, cumulative_flag, &name)?;
    counters_input(&name, rows, cumulative, interval)
}

/// Whether the rows are cumulative readings: the flag, or a `cumulative`
/// column that says the same on every row.
fn cumulative_mode(rows: &[RawRow], flag: bool, name: &str) -> Result<bool> {
    let mut mode: Option<(bool, u64)> = None;
    for row in rows {
        if let Some(value) = row.cumulative {
            match mode {
                None => mode = Some((value, row.line)),
                Some((first, line)) if first != value => bail!(
                    "{name}, line {}, column `cumulative`: {value} here but {first} on line {line}; a file is cumulative or not",
                    row.line
                ),
                Some(_) => {}
            }
        }
    }
    match mode {
        Some((false, line)) if flag => bail!(
            "{name}, line {line}, column `cumulative`: the file says false but --cumulative was given"
        ),
        Some((value, _)) => Ok(value || flag),
        None => Ok(flag),
    }
}

fn counters_input(
    name: &str,
    rows: Vec<RawRow>,
    cumulative: bool,
    interval: Nanos,
) -> Result<Input> {
    let delta_s = interval.as_secs_f64();
    let time_column = rows[0].time_column;
    if let Some(row) = rows.iter().find(|r| r.time_column != time_column) {
        bail!(
            "{name}, line {}: uses `{}` but line {} uses `{time_column}`; use one time column",
            row.line,
            row.time_column,
            rows[0].line
        );
    }
    // Times in seconds: `interval` indices are multiples of Δ.
    let time_of = |row: &RawRow| {
        if time_column == "interval" {
            row.t_s * delta_s
        } else {
            row.t_s
        }
    };
    let t0 = rows.iter().map(time_of).fold(f64::INFINITY, f64::min);
    let mut per_class: BTreeMap<String, Vec<(u64, &RawRow)>> = BTreeMap::new();
    for row in &rows {
        let position = (time_of(row) - t0) / delta_s;
        let index = position.round();
        if (position - index).abs() > 0.25 {
            bail!(
                "{name}, line {}, column `{time_column}`: {} s is not on the grid of {} intervals starting at {t0} s; rows must be --interval apart",
                row.line,
                time_of(row),
                format_seconds(interval)
            );
        }
        if index >= MAX_INTERVALS as f64 {
            bail!(
                "{name}, line {}: {} s after the first row is more than {MAX_INTERVALS} intervals of {}; use a longer --interval",
                row.line,
                time_of(row) - t0,
                format_seconds(interval)
            );
        }
        let index = index as u64;
        let series = per_class.entry(row.class.clone()).or_default();
        if let Some(&(previous, previous_row)) = series.last() {
            if index <= previous {
                let what = if index == previous {
                    "is the same interval as"
                } else {
                    "comes before"
                };
                bail!(
                    "{name}, line {}, column `{time_column}`: {} s {what} line {} ({} s){}; rows of a class must go forward in time",
                    row.line,
                    time_of(row),
                    previous_row.line,
                    time_of(previous_row),
                    class_suffix(&row.class)
                );
            }
        }
        series.push((index, row));
    }

    let mut classes = Vec::new();
    let mut intervals = 0usize;
    let mut series_intervals: Vec<(String, Vec<(u64, IntervalCounters)>)> = Vec::new();
    for (class, series) in per_class {
        let mut counted: Vec<(u64, IntervalCounters)> = Vec::new();
        if cumulative {
            for pair in series.windows(2) {
                let ((start, earlier), (end, later)) = (pair[0], pair[1]);
                if end != start + 1 {
                    bail!(
                        "{name}, line {}: readings at {} s (line {}) and {} s are {} intervals apart; a cumulative file needs a reading every interval{}",
                        later.line,
                        time_of(earlier),
                        earlier.line,
                        time_of(later),
                        end - start,
                        class_suffix(&class)
                    );
                }
                let difference = later.values.since(&earlier.values).map_err(|e| {
                    anyhow::anyhow!(
                        "{name}, line {}, column `{}`: went backwards from {} (line {}) to {}{}; counters restarted?",
                        later.line,
                        column_of_counter(e.counter),
                        e.previous,
                        earlier.line,
                        e.current,
                        class_suffix(&class)
                    )
                })?;
                counted.push((start, difference));
            }
        } else {
            for (index, row) in series {
                let v = &row.values;
                counted.push((
                    index,
                    IntervalCounters {
                        dropped: v.dropped,
                        accepted: v.accepted,
                        completed: v.completed,
                        syn_to_end_sum: v.syn_to_end_sum,
                        rtt_sum: v.rtt_sum,
                        syn_to_end_histogram: None,
                        segments_sent: v.segments_sent,
                        segments_retransmitted: v.segments_retransmitted,
                    },
                ));
            }
        }
        if let Some((last, _)) = counted.last() {
            intervals = intervals.max(*last as usize + 1);
        }
        series_intervals.push((class, counted));
    }
    if intervals == 0 {
        bail!("{name}: a cumulative file needs at least two readings");
    }
    for (class, counted) in series_intervals {
        let mut counters = vec![IntervalCounters::default(); intervals];
        for (index, c) in counted {
            counters[index as usize] = c;
        }
        classes.push(ClassInput {
            class,
            counters,
            exact: None,
        });
    }
    Ok(Input {
        description: name.to_string(),
        t0_s: t0,
        origin_unix: None,
        intervals,
        classes,
        trace_notes: None,
    })
}

fn class_suffix(class: &str) -> String {
    if class.is_empty() {
        String::new()
    } else {
        format!(" (class `{class}`)")
    }
}

/// The file column behind a [`CumulativeCounters`] field.
fn column_of_counter(counter: &str) -> String {
    match counter {
        "syn_to_end_sum" | "rtt_sum" => format!("{counter}_s"),
        other => other.to_string(),
    }
}

// ---------------------------------------------------------------------------
// Output

/// One interval of one class, as printed and serialized.
#[derive(Clone, Debug, Serialize)]
struct Row {
    t_start_s: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    class: Option<String>,
    dropped: u64,
    accepted: u64,
    completed: u64,
    drop_rate: f64,
    /// Clients the model estimates gave up in this interval.
    gave_up: f64,
    /// CLIENT_RT_i (Eq. 4).
    estimate_mean_s: Option<f64>,
    syn_to_end_mean_s: Option<f64>,
    rtt_mean_s: Option<f64>,
    conn_fail_mean_s: Option<f64>,
    p50_s: Option<f64>,
    p90_s: Option<f64>,
    p99_s: Option<f64>,
    /// Trace input: the exact mean of the interval's transactions.
    #[serde(skip_serializing_if = "Option::is_none")]
    exact_mean_s: Option<Option<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    exact_completed: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    exact_gave_up: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    exact_conn_fail_mean_s: Option<Option<f64>>,
}

impl Row {
    fn idle(&self) -> bool {
        self.dropped + self.accepted + self.completed == 0
            && self.gave_up < 0.005
            && self.exact_gave_up.unwrap_or(0) == 0
    }
}

fn secs(n: Option<Nanos>) -> Option<f64> {
    n.map(Nanos::as_secs_f64)
}

fn rows(input: &Input, results: &[Vec<Estimate>], interval: Nanos) -> Vec<Row> {
    let classed = input.classes.len() > 1 || !input.classes[0].class.is_empty();
    let mut rows = Vec::with_capacity(input.intervals * input.classes.len());
    for i in 0..input.intervals {
        for (class, estimates) in input.classes.iter().zip(results) {
            let c = &class.counters[i];
            let e = &estimates[i];
            let exact = class.exact.as_ref().map(|x| &x.intervals[i]);
            rows.push(Row {
                t_start_s: round9(input.t0_s + (i as f64) * interval.as_secs_f64()),
                class: classed.then(|| class.class.clone()),
                dropped: c.dropped,
                accepted: c.accepted,
                completed: c.completed,
                drop_rate: c.drop_rate(),
                gave_up: e.gave_up,
                estimate_mean_s: secs(e.mean),
                syn_to_end_mean_s: secs(e.syn_to_end_mean),
                rtt_mean_s: secs(e.rtt_mean),
                conn_fail_mean_s: secs(e.conn_fail_mean),
                p50_s: secs(e.percentile(0.5)),
                p90_s: secs(e.percentile(0.9)),
                p99_s: secs(e.percentile(0.99)),
                exact_mean_s: exact.map(|x| secs(x.mean())),
                exact_completed: exact.map(|x| x.completed),
                exact_gave_up: exact.map(|x| x.gave_up),
                exact_conn_fail_mean_s: exact.map(|x| secs(x.conn_fail_mean())),
            });
        }
    }
    rows
}

/// Rounds away binary noise (0.1 + 0.2) so times print as written.
fn round9(x: f64) -> f64 {
    (x * 1e9).round() / 1e9
}

fn format_seconds(n: Nanos) -> String {
    let s = n.as_secs_f64();
    if s < 1.0 {
        format!("{} ms", round9(s * 1e3))
    } else {
        format!("{} s", round9(s))
    }
}

fn write_csv(path: &Path, rows: &[Row]) -> Result<()> {
    let mut writer =
        csv::Writer::from_path(path).with_context(|| format!("cannot write {}", path.display()))?;
    let mut header = vec![
        "t_start_s",
        "class",
        "dropped",
        "accepted",
        "completed",
        "drop_rate",
        "gave_up",
        "estimate_mean_s",
        "syn_to_end_mean_s",
        "rtt_mean_s",
        "conn_fail_mean_s",
        "p50_s",
        "p90_s",
        "p99_s",
    ];
    let trace = rows.first().is_some_and(|r| r.exact_completed.is_some());
    if trace {
        header.extend([
            "exact_mean_s",
            "exact_completed",
            "exact_gave_up",
            "exact_conn_fail_mean_s",
        ]);
    }
    writer.write_record(&header)?;
    let opt = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
    for r in rows {
        let mut record = vec![
            r.t_start_s.to_string(),
            r.class.clone().unwrap_or_default(),
            r.dropped.to_string(),
            r.accepted.to_string(),
            r.completed.to_string(),
            r.drop_rate.to_string(),
            r.gave_up.to_string(),
            opt(r.estimate_mean_s),
            opt(r.syn_to_end_mean_s),
            opt(r.rtt_mean_s),
            opt(r.conn_fail_mean_s),
            opt(r.p50_s),
            opt(r.p90_s),
            opt(r.p99_s),
        ];
        if trace {
            record.extend([
                opt(r.exact_mean_s.flatten()),
                r.exact_completed.unwrap_or(0).to_string(),
                r.exact_gave_up.unwrap_or(0).to_string(),
                opt(r.exact_conn_fail_mean_s.flatten()),
            ]);
        }
        writer.write_record(&record)?;
    }
    writer
        .flush()
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

fn right(text: String) -> Cell {
    Cell::new(text).set_alignment(CellAlignment::Right)
}

fn fixed(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".to_string(), |v| format!("{v:.digits$}"))
}

fn print_table(rows: &[Row], classed: bool) {
    let trace = rows.first().is_some_and(|r| r.exact_completed.is_some());
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    let mut header = vec!["t s"];
    if classed {
        header.push("class");
    }
    header.extend([
        "dropped",
        "accepted",
        "completed",
        "drop %",
        "gave up",
        "SYN-to-END s",
        "RTT ms",
        "CONN-FAIL s",
        "estimate s",
        "p90 s",
    ]);
    if trace {
        header.extend(["exact s", "exact gave up"]);
    }
    table.set_header(header);
    let mut shown = 0;
    for r in rows.iter().filter(|r| !r.idle()) {
        shown += 1;
        let mut cells = vec![right(format!("{:.3}", r.t_start_s))];
        if classed {
            cells.push(Cell::new(r.class.clone().unwrap_or_default()));
        }
        cells.extend([
            right(r.dropped.to_string()),
            right(r.accepted.to_string()),
            right(r.completed.to_string()),
            right(format!("{:.1}", 100.0 * r.drop_rate)),
            right(format!("{:.2}", r.gave_up)),
            right(fixed(r.syn_to_end_mean_s, 3)),
            right(fixed(r.rtt_mean_s.map(|s| s * 1e3), 1)),
            right(fixed(r.conn_fail_mean_s, 3)),
            right(fixed(r.estimate_mean_s, 3)),
            right(fixed(r.p90_s, 3)),
        ]);
        if trace {
            cells.push(right(fixed(r.exact_mean_s.flatten(), 3)));
            cells.push(right(r.exact_gave_up.unwrap_or(0).to_string()));
        }
        table.add_row(cells);
    }
    if shown > 0 {
        println!("{table}");
    }
    let idle = rows.len() - shown;
    if idle > 0 {
        let rows = if idle == 1 { "row" } else { "rows" };
        println!("({idle} {rows} of idle intervals not shown; --json or --csv has them all)");
    }
}

/// Whole-input figures of one class (or all).
#[derive(Clone, Debug, Serialize)]
struct ClassSummary {
    #[serde(skip_serializing_if = "Option::is_none")]
    class: Option<String>,
    offered: u64,
    dropped: u64,
    accepted: u64,
    drop_rate: f64,
    completed: u64,
    /// Clients the model estimates gave up.
    gave_up: f64,
    /// Σ SYN-to-END / COMPLETED: what server-side latency metrics report.
    syn_to_end_mean_s: Option<f64>,
    rtt_mean_s: Option<f64>,
    /// Σ Eq. 4 numerators / Σ transactions.
    estimate_mean_s: Option<f64>,
    /// Completed connections by retry count, as the model split them.
    estimate_completed_by_retries: Vec<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    exact: Option<ExactSummary>,
    /// (estimate − exact) / exact.
    #[serde(skip_serializing_if = "Option::is_none")]
    relative_difference: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
struct ExactSummary {
    mean_s: Option<f64>,
    completed: u64,
    gave_up: u64,
    refused: u64,
    /// Outcome unknown at the end of the capture: left out.
    unresolved: u64,
    p50_s: Option<f64>,
    p90_s: Option<f64>,
    p99_s: Option<f64>,
    /// Completed connections by retry count (SYNs before the answered one).
    completed_by_retries: Vec<u64>,
}

#[derive(Clone, Debug, Serialize)]
struct Summary {
    input: String,
    profile: String,
    interval_s: f64,
    frustration_timeout_s: f64,
    network_loss: String,
    intervals: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    origin_unix_s: Option<f64>,
    #[serde(flatten)]
    total: ClassSummary,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    classes: Vec<ClassSummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    trace: Option<TraceNotes>,
}

fn class_summary(
    class: Option<String>,
    inputs: &[&ClassInput],
    estimates: &[&Vec<Estimate>],
) -> ClassSummary {
    let mut total = IntervalCounters::default();
    for input in inputs {
        for c in &input.counters {
            total.dropped += c.dropped;
            total.accepted += c.accepted;
            total.completed += c.completed;
            total.syn_to_end_sum += c.syn_to_end_sum;
            total.rtt_sum += c.rtt_sum;
        }
    }
    let all: Vec<Estimate> = estimates.iter().flat_map(|e| e.iter().cloned()).collect();
    let mut by_retries: Vec<f64> = Vec::new();
    for e in &all {
        if by_retries.len() < e.completed_by_attempt.len() {
            by_retries.resize(e.completed_by_attempt.len(), 0.0);
        }
        for (slot, n) in by_retries.iter_mut().zip(&e.completed_by_attempt) {
            *slot += n;
        }
    }
    by_retries
        .iter_mut()
        .for_each(|n| *n = (*n * 100.0).round() / 100.0);
    while by_retries.last().is_some_and(|n| *n == 0.0) {
        by_retries.pop();
    }
    let gave_up: f64 = all.iter().map(|e| e.gave_up).sum();
    // The exact figures of several classes, merged.
    let exacts: Vec<&ExactFigures> = inputs.iter().filter_map(|i| i.exact.as_ref()).collect();
    let (exact, relative_difference) = if exacts.is_empty() {
        (None, None)
    } else {
        let mut merged = exacts[0].clone();
        for other in &exacts[1..] {
            merged.connections.extend(other.connections.iter().copied());
            merged.completed += other.completed;
            merged.gave_up += other.gave_up;
            merged.refused += other.refused;
            merged.unresolved += other.unresolved;
            merged.total_time += other.total_time;
        }
        let mut completed_by_retries: Vec<u64> = Vec::new();
        for figures in &exacts {
            for interval in &figures.intervals {
                if completed_by_retries.len() < interval.completed_by_retries.len() {
                    completed_by_retries.resize(interval.completed_by_retries.len(), 0);
                }
                for (slot, n) in completed_by_retries
                    .iter_mut()
                    .zip(&interval.completed_by_retries)
                {
                    *slot += n;
                }
            }
        }
        let comparison = compare(&all, &merged);
        (
            Some(ExactSummary {
                mean_s: secs(merged.mean()),
                completed: merged.completed,
                gave_up: merged.gave_up,
                refused: merged.refused,
                unresolved: merged.unresolved,
                p50_s: secs(merged.percentile(0.5)),
                p90_s: secs(merged.percentile(0.9)),
                p99_s: secs(merged.percentile(0.99)),
                completed_by_retries,
            }),
            comparison.relative_difference,
        )
    };
    let transactions: f64 = all.iter().map(Estimate::transactions).sum();
    let total_time: f64 = all.iter().map(Estimate::total_time_nanos).sum();
    ClassSummary {
        class,
        offered: total.offered(),
        dropped: total.dropped,
        accepted: total.accepted,
        drop_rate: total.drop_rate(),
        completed: total.completed,
        gave_up: (gave_up * 100.0).round() / 100.0,
        syn_to_end_mean_s: secs(total.syn_to_end_mean()),
        rtt_mean_s: secs(total.rtt_mean()),
        estimate_mean_s: (transactions > 0.0).then(|| total_time / transactions / 1e9),
        estimate_completed_by_retries: by_retries,
        exact,
        relative_difference,
    }
}

fn summarize(
    input: &Input,
    results: &[Vec<Estimate>],
    args: &EstimateArgs,
    config: &CertesConfig,
) -> Summary {
    let all_inputs: Vec<&ClassInput> = input.classes.iter().collect();
    let all_results: Vec<&Vec<Estimate>> = results.iter().collect();
    let total = class_summary(None, &all_inputs, &all_results);
    let classes = if input.classes.len() > 1 || !input.classes[0].class.is_empty() {
        input
            .classes
            .iter()
            .zip(results)
            .map(|(c, r)| class_summary(Some(c.class.clone()), &[c], &[r]))
            .collect()
    } else {
        Vec::new()
    };
    Summary {
        input: input.description.clone(),
        profile: config.clients.name.clone(),
        interval_s: args.interval.as_secs_f64(),
        frustration_timeout_s: args.frustration_timeout.as_secs_f64(),
        network_loss: match args.network_loss {
            NetworkLoss::None => "none".to_string(),
            NetworkLoss::Fixed(q) => q.to_string(),
            NetworkLoss::FromRetransmissions => "retransmissions".to_string(),
        },
        intervals: input.intervals,
        origin_unix_s: input.origin_unix.map(|n| n.as_secs_f64()),
        total,
        classes,
        trace: input.trace_notes.clone(),
    }
}

fn print_class_summary(s: &ClassSummary, indent: &str) {
    let pct = |x: f64| format!("{:.2} %", 100.0 * x);
    println!(
        "{indent}SYNs: {} offered, {} dropped (drop rate {}), {} accepted",
        s.offered,
        s.dropped,
        pct(s.drop_rate),
        s.accepted
    );
    println!(
        "{indent}connections completed: {}; clients the model says gave up: {:.2}",
        s.completed, s.gave_up
    );
    println!(
        "{indent}SYN-to-END mean (what server-side latency metrics report): {}",
        fixed(s.syn_to_end_mean_s, 4)
            + if s.syn_to_end_mean_s.is_some() {
                " s"
            } else {
                ""
            }
    );
    println!(
        "{indent}RTT mean: {}",
        fixed(s.rtt_mean_s.map(|v| v * 1e3), 2) + if s.rtt_mean_s.is_some() { " ms" } else { "" }
    );
    println!(
        "{indent}Certes estimate, mean client-perceived time: {}",
        fixed(s.estimate_mean_s, 4)
            + if s.estimate_mean_s.is_some() {
                " s"
            } else {
                ""
            }
    );
    if let Some(x) = &s.exact {
        println!(
            "{indent}exact, from each connection's own SYNs:      {}{}",
            fixed(x.mean_s, 4) + if x.mean_s.is_some() { " s" } else { "" },
            s.relative_difference.map_or(String::new(), |d| format!(
                "  (estimate − exact: {:+.2} %)",
                100.0 * d
            ))
        );
        println!(
            "{indent}  exact p50 / p90 / p99: {} / {} / {} s; {} completed, {} gave up, {} refused, {} unresolved at the end of the capture (left out)",
            fixed(x.p50_s, 3),
            fixed(x.p90_s, 3),
            fixed(x.p99_s, 3),
            x.completed,
            x.gave_up,
            x.refused,
            x.unresolved
        );
        let model: Vec<String> = s
            .estimate_completed_by_retries
            .iter()
            .map(|n| format!("{n:.1}"))
            .collect();
        let exact: Vec<String> = x.completed_by_retries.iter().map(u64::to_string).collect();
        println!(
            "{indent}  completed after 0, 1, 2, … retries: exact [{}], model [{}]",
            exact.join(", "),
            model.join(", ")
        );
    }
}

fn print_summary(s: &Summary) {
    println!(
        "\nSummary — {} ({} intervals of {}; profile {}, frustration timeout {}, network loss {})",
        s.input,
        s.intervals,
        format_seconds(Nanos::from_secs_f64(s.interval_s)),
        s.profile,
        format_seconds(Nanos::from_secs_f64(s.frustration_timeout_s)),
        s.network_loss
    );
    print_class_summary(&s.total, "  ");
    for class in &s.classes {
        println!("  class {}:", class.class.as_deref().unwrap_or(""));
        print_class_summary(class, "    ");
    }
    if let Some(t) = &s.trace {
        println!(
            "  capture: {} packets; {} connections to {}; skipped: {} without a captured SYN, {} to other servers; {} SYNs re-sent after their SYN-ACK; {} completed without a measured RTT",
            t.packets,
            t.connections,
            if t.listeners.is_empty() { "-".to_string() } else { t.listeners.join(", ") },
            t.connections_without_syn,
            t.connections_to_other_servers,
            t.syns_after_answer,
            t.rtt_missing
        );
    }
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
