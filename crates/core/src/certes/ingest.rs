//! Counters files: the per-interval DROPPED/ACCEPTED/COMPLETED counts and
//! SYN-to-END and RTT sums of Eq. 2–4 (Section 4), with the optional
//! REFUSED count (SYNs answered with a RST, the rule in
//! [`super::counters`]; a file or stream without it has none), as CSV or JSON Lines
//! (columns in `docs/certes.md`), per interval or as cumulative readings
//! differenced with [`CumulativeCounters::since`]; a `vantage gate` log is
//! such a file too ([`gate_log_row`]). Rows are aligned on one grid of
//! Δ-long intervals per class, gaps filled with empty intervals.
//!
//! Sans-IO: the caller opens the file and hands a reader and the name to
//! use in messages. Errors name the file, line and column.
//!
//! The JSON Lines rows are also written here ([`counters_jsonl_line`], what
//! `vantage proxy`'s `[certes] log` appends) and read one at a time
//! ([`parse_counters_line`], what `certes watch`'s `[proxy]` input
//! follows): one owner of the columns for the writer and both readers.

use std::collections::BTreeMap;
use std::io::BufRead;

use serde_json::Value;

use crate::admission::syn::record::{GateCounts, IntervalRecord};

use super::counters::{CumulativeCounters, IntervalCounters};
use super::input::{check_class_intervals, ClassInput, EstimateInput};
use super::observed::MAX_INTERVALS;
use super::summary::format_seconds;
use crate::Nanos;

/// Format of a counters file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CountersFormat {
    Csv,
    Jsonl,
}

/// Columns a counters file may have.
pub const COLUMNS: &[&str] = &[
    "t_start_s",
    "interval",
    "dropped",
    "accepted",
    "refused",
    "completed",
    "syn_to_end_sum_s",
    "rtt_sum_s",
    "segments_sent",
    "segments_retransmitted",
    "interval_s",
    "class",
    "cumulative",
];
/// Columns every row must have.
pub const REQUIRED: &[&str] = &["dropped", "accepted", "completed", "syn_to_end_sum_s"];

/// Why a counters file cannot be read; every message starts with the
/// file's name.
#[derive(Debug, thiserror::Error)]
pub enum CountersError {
    /// A bad or missing cell.
    #[error("{file}, line {line}, column `{column}`: {problem}")]
    Cell {
        file: String,
        line: u64,
        column: String,
        problem: String,
    },
    /// A problem with a whole line.
    #[error("{file}, line {line}: {problem}")]
    Line {
        file: String,
        line: u64,
        problem: String,
    },
    /// A line that is not JSON; `column` is the character serde_json
    /// stopped at.
    #[error("{file}, line {line}, column {column}: {problem}")]
    Json {
        file: String,
        line: u64,
        column: usize,
        problem: String,
    },
    /// A problem with the whole file.
    #[error("{file}: {problem}")]
    File { file: String, problem: String },
    #[error("{file}, line 1: cannot read the header")]
    Header {
        file: String,
        #[source]
        source: csv::Error,
    },
    #[error("{file}, line {line}: cannot read")]
    Read {
        file: String,
        line: u64,
        #[source]
        source: std::io::Error,
    },
}

/// Reads a counters file into aligned per-class intervals. `name` names
/// the file in messages and the summary; `cumulative` is the caller's
/// claim that the rows are running totals (a `cumulative` column may say
/// so too); `interval` is Δ.
pub fn read_counters(
    reader: impl BufRead,
    name: &str,
    format: CountersFormat,
    cumulative: bool,
    interval: Nanos,
) -> Result<EstimateInput, CountersError> {
    let rows = match format {
        CountersFormat::Csv => read_csv_rows(reader, name, interval)?,
        CountersFormat::Jsonl => read_jsonl_rows(reader, name, interval)?,
    };
    if rows.is_empty() {
        return Err(CountersError::File {
            file: name.to_string(),
            problem: "no rows".to_string(),
        });
    }
    let cumulative = cumulative_mode(&rows, cumulative, name)?;
    align(name, rows, cumulative, interval)
}

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

fn line_error(file: &str, line: u64, problem: impl Into<String>) -> CountersError {
    CountersError::Line {
        file: file.to_string(),
        line,
        problem: problem.into(),
    }
}

/// Names the file, line and column of a bad cell; knows Δ, which an
/// `interval_s` cell must equal.
struct Where<'a> {
    file: &'a str,
    line: u64,
    interval: Nanos,
}

impl Where<'_> {
    fn error(&self, column: &str, problem: impl std::fmt::Display) -> CountersError {
        CountersError::Cell {
            file: self.file.to_string(),
            line: self.line,
            column: column.to_string(),
            problem: problem.to_string(),
        }
    }

    fn line_error(&self, problem: impl Into<String>) -> CountersError {
        line_error(self.file, self.line, problem)
    }

    fn count(&self, column: &str, value: &CellValue) -> Result<u64, CountersError> {
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

    fn seconds(&self, column: &str, value: &CellValue, signed: bool) -> Result<f64, CountersError> {
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

    /// A sum of seconds, refused beyond what a nanosecond count holds
    /// (about 584 years) rather than saturated.
    fn duration(&self, column: &str, value: &CellValue) -> Result<Nanos, CountersError> {
        let number = match value {
            CellValue::Text(t) => t.trim().parse::<f64>().ok(),
            CellValue::Json(v) => v.as_f64(),
        };
        let largest = Nanos::MAX.as_secs_f64();
        if let Some(seconds) = number.filter(|s| s.is_finite() && *s >= largest) {
            return Err(self.error(
                column,
                format!("{seconds} s is more than the {largest:.0} s a nanosecond count holds"),
            ));
        }
        Ok(Nanos::from_secs_f64(self.seconds(column, value, false)?))
    }

    /// An `interval_s` cell: the writer's Δ, which must be the reader's.
    fn check_interval(&self, column: &str, value: &CellValue) -> Result<(), CountersError> {
        let written = self.seconds(column, value, false)?;
        let wanted = self.interval.as_secs_f64();
        if (written - wanted).abs() > 1e-6 * wanted {
            return Err(self.error(
                column,
                format!(
                    "the rows are of {written} s intervals but the interval here is {}; use {written}s",
                    format_seconds(self.interval)
                ),
            ));
        }
        Ok(())
    }

    fn boolean(&self, column: &str, value: &CellValue) -> Result<bool, CountersError> {
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

    fn text(&self, column: &str, value: &CellValue) -> Result<String, CountersError> {
        match value {
            CellValue::Text(t) => Ok(t.trim().to_string()),
            CellValue::Json(Value::String(s)) => Ok(s.clone()),
            CellValue::Json(Value::Number(n)) => Ok(n.to_string()),
            CellValue::Json(_) => Err(self.error(column, "expected a string")),
        }
    }

    /// Reads one of the optional counter columns a row and a gate record
    /// share into `values`; false for any other column.
    fn optional_counter(
        &self,
        column: &str,
        value: &CellValue,
        row: &mut RawRow,
    ) -> Result<bool, CountersError> {
        match column {
            "completed" => row.values.completed = self.count(column, value)?,
            "syn_to_end_sum_s" => row.values.syn_to_end_sum = self.duration(column, value)?,
            "rtt_sum_s" => row.values.rtt_sum = self.duration(column, value)?,
            "segments_sent" => row.values.segments_sent = self.count(column, value)?,
            "segments_retransmitted" => {
                row.values.segments_retransmitted = self.count(column, value)?
            }
            "class" => row.class = self.text(column, value)?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}

fn unknown_column(file: &str, line: u64, name: &str) -> CountersError {
    line_error(
        file,
        line,
        format!("unknown column `{name}` (allowed: {})", COLUMNS.join(", ")),
    )
}

/// Builds one row from (column, value) pairs.
fn raw_row<'a>(
    at: &Where,
    cells: impl Iterator<Item = (&'a str, CellValue<'a>)>,
) -> Result<RawRow, CountersError> {
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
            "refused" => row.values.refused = at.count(column, &value)?,
            "cumulative" => row.cumulative = Some(at.boolean(column, &value)?),
            "interval_s" => at.check_interval(column, &value)?,
            other => {
                if !at.optional_counter(other, &value, &mut row)? {
                    return Err(unknown_column(at.file, at.line, other));
                }
            }
        }
    }
    if seen.contains(&"t_start_s") && seen.contains(&"interval") {
        return Err(at.line_error("give `t_start_s` or `interval`, not both"));
    }
    if row.time_column.is_empty() {
        return Err(at.line_error("no time: give `t_start_s` (seconds) or `interval` (index)"));
    }
    for required in REQUIRED {
        if !seen.contains(required) {
            return Err(at.error(
                required,
                format!("missing (required: {})", REQUIRED.join(", ")),
            ));
        }
    }
    Ok(row)
}

fn read_csv_rows(
    reader: impl BufRead,
    name: &str,
    interval: Nanos,
) -> Result<Vec<RawRow>, CountersError> {
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .comment(Some(b'#'))
        .from_reader(reader);
    let header: Vec<String> = reader
        .headers()
        .map_err(|source| CountersError::Header {
            file: name.to_string(),
            source,
        })?
        .iter()
        .map(str::to_string)
        .collect();
    for (index, column) in header.iter().enumerate() {
        if !COLUMNS.contains(&column.as_str()) {
            return Err(unknown_column(name, 1, column));
        }
        if header[..index].contains(column) {
            return Err(line_error(
                name,
                1,
                format!("column `{column}` appears twice"),
            ));
        }
    }
    let mut rows = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| {
            let line = e.position().map_or(0, |p| p.line());
            match e.kind() {
                csv::ErrorKind::UnequalLengths { len, .. } => line_error(
                    name,
                    line,
                    format!("{len} fields, but the header has {}", header.len()),
                ),
                _ => line_error(name, line, e.to_string()),
            }
        })?;
        let line = record.position().map_or(0, |p| p.line());
        let at = Where {
            file: name,
            line,
            interval,
        };
        let cells = header
            .iter()
            .zip(record.iter())
            .map(|(h, v)| (h.as_str(), CellValue::Text(v)));
        rows.push(raw_row(&at, cells)?);
    }
    Ok(rows)
}

fn read_jsonl_rows(
    reader: impl BufRead,
    name: &str,
    interval: Nanos,
) -> Result<Vec<RawRow>, CountersError> {
    let mut rows = Vec::new();
    for (index, line) in reader.lines().enumerate() {
        let number = index as u64 + 1;
        let line = line.map_err(|source| CountersError::Read {
            file: name.to_string(),
            line: number,
            source,
        })?;
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
            CountersError::Json {
                file: name.to_string(),
                line: number,
                column: e.column(),
                problem: message,
            }
        })?;
        let at = Where {
            file: name,
            line: number,
            interval,
        };
        let Value::Object(object) = &value else {
            return Err(at.line_error("expected a JSON object {\"t_start_s\": …, \"dropped\": …}"));
        };
        if is_gate_record(object) {
            rows.push(gate_log_row(&at, object, interval)?);
            continue;
        }
        let cells = object.iter().map(|(k, v)| (k.as_str(), CellValue::Json(v)));
        rows.push(raw_row(&at, cells)?);
    }
    Ok(rows)
}

/// One interval of one class as a JSON Lines counters row: what
/// [`counters_jsonl_line`] writes and [`parse_counters_line`] reads.
#[derive(Clone, Debug, PartialEq)]
pub struct CountersRow {
    /// Start of the interval, seconds (UNIX time for a live writer, so
    /// that a follower can put it on its own grid).
    pub t_start_s: f64,
    /// Δ, written as `interval_s`: a reader with another Δ refuses the row.
    pub interval: Nanos,
    /// Empty: the one class (no `class` column).
    pub class: String,
    /// The interval's counts and sums. The SYN-to-END histogram is not a
    /// column: it is not written, and a row read has none.
    pub counters: IntervalCounters,
}

/// One row as a line of a JSON Lines counters file (no newline), readable
/// by [`read_counters`] and [`parse_counters_line`]. Sums are written in
/// seconds with nanosecond digits.
pub fn counters_jsonl_line(row: &CountersRow) -> String {
    let c = &row.counters;
    let mut object = serde_json::Map::new();
    object.insert("t_start_s".into(), row.t_start_s.into());
    object.insert("interval_s".into(), row.interval.as_secs_f64().into());
    if !row.class.is_empty() {
        object.insert("class".into(), row.class.clone().into());
    }
    object.insert("dropped".into(), c.dropped.into());
    object.insert("accepted".into(), c.accepted.into());
    // Written only when some SYN was refused: a stream without refusals
    // stays readable by readers that predate the column.
    if c.refused > 0 {
        object.insert("refused".into(), c.refused.into());
    }
    object.insert("completed".into(), c.completed.into());
    object.insert(
        "syn_to_end_sum_s".into(),
        c.syn_to_end_sum.as_secs_f64().into(),
    );
    object.insert("rtt_sum_s".into(), c.rtt_sum.as_secs_f64().into());
    object.insert("segments_sent".into(), c.segments_sent.into());
    object.insert(
        "segments_retransmitted".into(),
        c.segments_retransmitted.into(),
    );
    Value::Object(object).to_string()
}

/// Reads one line of a JSON Lines counters file written per interval (a
/// live stream, [`counters_jsonl_line`]): it must give `t_start_s` and
/// `interval_s`, and `interval_s` must be `interval`. `file` and `line`
/// name it in errors.
pub fn parse_counters_line(
    text: &str,
    file: &str,
    line: u64,
    interval: Nanos,
) -> Result<CountersRow, CountersError> {
    let at = Where {
        file,
        line,
        interval,
    };
    let value: Value = serde_json::from_str(text.trim()).map_err(|e| CountersError::Json {
        file: file.to_string(),
        line,
        column: e.column(),
        problem: e
            .to_string()
            .rsplit_once(" at line ")
            .map_or(e.to_string(), |(m, _)| m.to_string()),
    })?;
    let Value::Object(object) = &value else {
        return Err(at.line_error("expected a JSON object {\"t_start_s\": …, \"dropped\": …}"));
    };
    if object.get("interval_s").is_none_or(|v| v.is_null()) {
        return Err(at.error(
            "interval_s",
            "missing: a live counters stream says its interval on every row",
        ));
    }
    let cells = object.iter().map(|(k, v)| (k.as_str(), CellValue::Json(v)));
    let row = raw_row(&at, cells)?;
    if row.time_column != "t_start_s" {
        return Err(at.error(
            "t_start_s",
            "missing: a live counters stream gives its start time",
        ));
    }
    if row.cumulative == Some(true) {
        return Err(at.error(
            "cumulative",
            "a live counters stream has one row per interval, not running totals",
        ));
    }
    Ok(CountersRow {
        t_start_s: row.t_s,
        interval,
        class: row.class,
        counters: interval_counters(&row.values),
    })
}

/// A row's values taken as one interval's counts.
fn interval_counters(v: &CumulativeCounters) -> IntervalCounters {
    IntervalCounters {
        dropped: v.dropped,
        dropped_by_attempt: Vec::new(),
        accepted: v.accepted,
        refused: v.refused,
        refused_by_attempt: Vec::new(),
        completed: v.completed,
        syn_to_end_sum: v.syn_to_end_sum,
        rtt_sum: v.rtt_sum,
        syn_to_end_histogram: None,
        segments_sent: v.segments_sent,
        segments_retransmitted: v.segments_retransmitted,
    }
}

/// Whether a JSON object is a record of `vantage gate`'s log
/// (`docs/gate.md`): it has the gate's `filter` snapshot and `rejected`.
fn is_gate_record(object: &serde_json::Map<String, Value>) -> bool {
    object.contains_key("filter") && object.contains_key("rejected")
}

/// DROPPED_i, ACCEPTED_i and REFUSED_i of the verdicts of `vantage gate`'s
/// log — for `certes estimate --counters` and `certes watch`'s `[gate]`
/// input: DROPPED_i is `dropped`, ACCEPTED_i `accepted`, REFUSED_i
/// `rejected` (answered with a RST: the client does not retransmit, and
/// fails — the rule of [`super::counters`]); in a dry run every SYN was
/// accepted. The other counters are zero: the gate sees no connection end.
pub fn gate_syn_counts(counts: &GateCounts, dry_run: bool) -> IntervalCounters {
    let (dropped, accepted, refused) = if dry_run {
        (0, counts.syns(), 0)
    } else {
        (counts.dropped, counts.accepted, counts.rejected)
    };
    IntervalCounters {
        dropped,
        accepted,
        refused,
        ..IntervalCounters::default()
    }
}

/// A `vantage proxy`'s counters row for one interval with the verdicts of
/// the `vantage gate` in front of it over the same time — the one rule, for
/// `certes watch` with `[proxy]` and `[gate]`. The gate decides before the
/// kernel sees a SYN, so the proxy's DROPPED_i (the kernel's `ListenDrops`)
/// never holds the gate's drops: DROPPED_i is the sum of both. The SYNs
/// the gate rejected were answered with a RST and never reached the proxy:
/// REFUSED_i is the proxy's plus those ([`gate_syn_counts`]' rule). In a
/// dry run the gate let every SYN through, so the proxy's row stands.
/// ACCEPTED_i, COMPLETED_i and the sums are the proxy's.
pub fn proxy_counters_with_gate(
    proxy: &IntervalCounters,
    gate: &GateCounts,
    dry_run: bool,
) -> IntervalCounters {
    let mut merged = proxy.clone();
    let syns = gate_syn_counts(gate, dry_run);
    merged.dropped += syns.dropped;
    merged.refused += syns.refused;
    merged
}

/// One record of `vantage gate`'s log as a counters row. The gate counts
/// the filter's verdicts on SYNs, read by [`gate_syn_counts`]: DROPPED_i
/// is `dropped`, ACCEPTED_i `accepted`, REFUSED_i `rejected`; in a dry run
/// every SYN was accepted. The gate sees no connection end: `completed` and the sums are zero
/// unless the record carries them (a log merged with the server's). The
/// record's `interval_s` must be Δ; its other keys are ignored.
fn gate_log_row(
    at: &Where,
    object: &serde_json::Map<String, Value>,
    interval: Nanos,
) -> Result<RawRow, CountersError> {
    for key in ["time_s", "interval_s", "accepted", "dropped", "rejected"] {
        if !matches!(object.get(key), Some(v) if !v.is_null()) {
            return Err(at.error(key, "missing (every vantage gate log record has it)"));
        }
    }
    let record: IntervalRecord = serde_json::from_value(Value::Object(object.clone()))
        .map_err(|e| at.line_error(format!("not a vantage gate log record: {e}")))?;
    let t_s = at.seconds("time_s", &CellValue::Json(&record.time_s.into()), false)?;
    let logged = at.seconds(
        "interval_s",
        &CellValue::Json(&record.interval_s.into()),
        false,
    )?;
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
    let mut row = RawRow {
        line: at.line,
        t_s,
        time_column: "time_s",
        class: String::new(),
        cumulative: Some(false),
        values: CumulativeCounters::default(),
    };
    let syns = gate_syn_counts(&record.counts, record.dry_run);
    row.values.accepted = syns.accepted;
    row.values.dropped = syns.dropped;
    row.values.refused = syns.refused;
    for (column, value) in object {
        let value = CellValue::Json(value);
        if value.is_empty() {
            continue;
        }
        at.optional_counter(column, &value, &mut row)?;
    }
    Ok(row)
}

/// Whether the rows are cumulative readings: the flag, or a `cumulative`
/// column that says the same on every row.
fn cumulative_mode(rows: &[RawRow], flag: bool, name: &str) -> Result<bool, CountersError> {
    let mut mode: Option<(bool, u64)> = None;
    for row in rows {
        if let Some(value) = row.cumulative {
            match mode {
                None => mode = Some((value, row.line)),
                Some((first, line)) if first != value => {
                    return Err(CountersError::Cell {
                        file: name.to_string(),
                        line: row.line,
                        column: "cumulative".to_string(),
                        problem: format!(
                            "{value} here but {first} on line {line}; a file is cumulative or not"
                        ),
                    })
                }
                Some(_) => {}
            }
        }
    }
    match mode {
        Some((false, line)) if flag => Err(CountersError::Cell {
            file: name.to_string(),
            line,
            column: "cumulative".to_string(),
            problem: "the file says false but --cumulative was given".to_string(),
        }),
        Some((value, _)) => Ok(value || flag),
        None => Ok(flag),
    }
}

/// Places every row on the grid of Δ-long intervals from the earliest
/// row, per class; differences cumulative readings; fills gaps with empty
/// intervals.
fn align(
    name: &str,
    rows: Vec<RawRow>,
    cumulative: bool,
    interval: Nanos,
) -> Result<EstimateInput, CountersError> {
    let delta_s = interval.as_secs_f64();
    let time_column = rows[0].time_column;
    if let Some(row) = rows.iter().find(|r| r.time_column != time_column) {
        return Err(line_error(
            name,
            row.line,
            format!(
                "uses `{}` but line {} uses `{time_column}`; use one time column",
                row.time_column, rows[0].line
            ),
        ));
    }
    let cell_error = |line: u64, problem: String| CountersError::Cell {
        file: name.to_string(),
        line,
        column: time_column.to_string(),
        problem,
    };
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
            return Err(cell_error(
                row.line,
                format!(
                    "{} s is not on the grid of {} intervals starting at {t0} s; rows must be --interval apart",
                    time_of(row),
                    format_seconds(interval)
                ),
            ));
        }
        if index >= MAX_INTERVALS as f64 {
            return Err(line_error(
                name,
                row.line,
                format!(
                    "{} s after the first row is more than {MAX_INTERVALS} intervals of {}; use a longer --interval",
                    time_of(row) - t0,
                    format_seconds(interval)
                ),
            ));
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
                return Err(cell_error(
                    row.line,
                    format!(
                        "{} s {what} line {} ({} s){}; rows of a class must go forward in time",
                        time_of(row),
                        previous_row.line,
                        time_of(previous_row),
                        class_suffix(&row.class)
                    ),
                ));
            }
        }
        series.push((index, row));
    }

    let mut intervals = 0usize;
    let mut totals = Totals::default();
    let mut classes = Vec::new();
    for (class, series) in per_class {
        let mut counted: Vec<(usize, IntervalCounters)> = Vec::new();
        if cumulative {
            for pair in series.windows(2) {
                let ((start, earlier), (end, later)) = (pair[0], pair[1]);
                if end != start + 1 {
                    return Err(line_error(
                        name,
                        later.line,
                        format!(
                            "readings at {} s (line {}) and {} s are {} intervals apart; a cumulative file needs a reading every interval{}",
                            time_of(earlier),
                            earlier.line,
                            time_of(later),
                            end - start,
                            class_suffix(&class)
                        ),
                    ));
                }
                let difference =
                    later
                        .values
                        .since(&earlier.values)
                        .map_err(|e| CountersError::Cell {
                            file: name.to_string(),
                            line: later.line,
                            column: column_of_counter(e.counter),
                            problem: format!(
                                "went backwards from {} (line {}) to {}{}; counters restarted?",
                                in_column_unit(e.counter, e.previous),
                                earlier.line,
                                in_column_unit(e.counter, e.current),
                                class_suffix(&class)
                            ),
                        })?;
                totals.add(name, later.line, &difference)?;
                counted.push((start as usize, difference));
            }
        } else {
            for (index, row) in series {
                let counters = interval_counters(&row.values);
                totals.add(name, row.line, &counters)?;
                counted.push((index as usize, counters));
            }
        }
        if let Some((last, _)) = counted.last() {
            intervals = intervals.max(*last + 1);
        }
        classes.push(ClassInput {
            class,
            counters: counted,
            exact: None,
        });
    }
    if intervals == 0 {
        return Err(CountersError::File {
            file: name.to_string(),
            problem: "a cumulative file needs at least two readings".to_string(),
        });
    }
    check_class_intervals(classes.len(), intervals, "the `class` column").map_err(|e| {
        CountersError::File {
            file: name.to_string(),
            problem: e.to_string(),
        }
    })?;
    Ok(EstimateInput {
        description: name.to_string(),
        t0_s: t0,
        origin_unix: None,
        intervals,
        classes,
        capture_notes: None,
    })
}

/// The whole file's sums of every counter, which the summary adds up:
/// refused when one would pass 2^64 − 1 rather than wrap.
#[derive(Default)]
struct Totals {
    dropped: u64,
    accepted: u64,
    refused: u64,
    offered: u64,
    completed: u64,
    syn_to_end_sum: u64,
    rtt_sum: u64,
    segments_sent: u64,
    segments_retransmitted: u64,
}

impl Totals {
    fn add(&mut self, file: &str, line: u64, c: &IntervalCounters) -> Result<(), CountersError> {
        let too_large = |column: &str, total: u64, value: String| {
            CountersError::Cell {
            file: file.to_string(),
            line,
            column: column.to_string(),
            problem: format!(
                "{value} brings the file's total to more than a 64-bit counter holds (total so far {total}); the counts cannot be added up"
            ),
        }
        };
        let count = |column: &str, total: &mut u64, value: u64| {
            *total = total
                .checked_add(value)
                .ok_or_else(|| too_large(column, *total, value.to_string()))?;
            Ok::<(), CountersError>(())
        };
        let seconds = |column: &str, total: &mut u64, value: Nanos| {
            *total = total.checked_add(value.0).ok_or_else(|| {
                too_large(
                    column,
                    *total,
                    format!("{} s", Nanos(value.0).as_secs_f64()),
                )
            })?;
            Ok::<(), CountersError>(())
        };
        let offered = c
            .dropped
            .checked_add(c.accepted)
            .ok_or_else(|| too_large("accepted", c.dropped, c.accepted.to_string()))?;
        let offered = offered
            .checked_add(c.refused)
            .ok_or_else(|| too_large("refused", offered, c.refused.to_string()))?;
        count("dropped", &mut self.dropped, c.dropped)?;
        count("accepted", &mut self.accepted, c.accepted)?;
        count("refused", &mut self.refused, c.refused)?;
        count("accepted", &mut self.offered, offered)?;
        count("completed", &mut self.completed, c.completed)?;
        seconds(
            "syn_to_end_sum_s",
            &mut self.syn_to_end_sum,
            c.syn_to_end_sum,
        )?;
        seconds("rtt_sum_s", &mut self.rtt_sum, c.rtt_sum)?;
        count("segments_sent", &mut self.segments_sent, c.segments_sent)?;
        count(
            "segments_retransmitted",
            &mut self.segments_retransmitted,
            c.segments_retransmitted,
        )?;
        Ok(())
    }
}

/// A counter's value in its file column's unit: seconds for the sums.
fn in_column_unit(counter: &str, value: u64) -> String {
    match counter {
        "syn_to_end_sum" | "rtt_sum" => format!("{} s", Nanos(value).as_secs_f64()),
        _ => value.to_string(),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certes::input::MAX_CLASS_INTERVALS;

    fn read(
        text: &str,
        format: CountersFormat,
        cumulative: bool,
    ) -> Result<EstimateInput, CountersError> {
        read_counters(
            text.as_bytes(),
            "counters",
            format,
            cumulative,
            Nanos::from_millis(250),
        )
    }

    #[test]
    fn a_proxy_row_with_the_gate_in_front_adds_the_gates_drops_and_refusals() {
        let proxy = IntervalCounters {
            dropped: 2,
            accepted: 10,
            completed: 9,
            syn_to_end_sum: Nanos::from_millis(900),
            rtt_sum: Nanos::from_millis(9),
            ..IntervalCounters::default()
        };
        let gate = GateCounts {
            accepted: 12,
            dropped: 5,
            rejected: 3,
            ..GateCounts::default()
        };
        let merged = proxy_counters_with_gate(&proxy, &gate, false);
        // The gate's 3 rejects are refusals, not accepts: ACCEPTED stays
        // the proxy's.
        assert_eq!(
            (merged.dropped, merged.accepted, merged.refused),
            (7, 10, 3)
        );
        assert_eq!(merged.offered(), 20);
        assert_eq!(
            (merged.completed, merged.syn_to_end_sum, merged.rtt_sum),
            (9, Nanos::from_millis(900), Nanos::from_millis(9))
        );
        // A dry run dropped and rejected nothing: the proxy's row stands.
        assert_eq!(proxy_counters_with_gate(&proxy, &gate, true), proxy);
    }

    #[test]
    fn csv_rows_align_on_the_grid_and_gaps_are_empty() {
        let input = read(
            "interval,dropped,accepted,completed,syn_to_end_sum_s\n0,1,4,4,0.4\n3,0,4,4,0.4\n",
            CountersFormat::Csv,
            false,
        )
        .unwrap();
        assert_eq!(input.intervals, 4);
        assert_eq!(input.classes.len(), 1);
        let class = &input.classes[0];
        assert_eq!((class.at(0).dropped, class.at(0).accepted), (1, 4));
        assert_eq!(*class.at(1), IntervalCounters::default());
        assert_eq!(class.at(3).syn_to_end_sum, Nanos::from_millis(400));
        // The gap takes no room.
        assert_eq!(class.counters.len(), 2);
    }

    #[test]
    fn cumulative_readings_are_differenced_per_class() {
        let text = "{\"t_start_s\":10,\"class\":\"a\",\"dropped\":1,\"accepted\":5,\"completed\":5,\"syn_to_end_sum_s\":1}\n\
                    {\"t_start_s\":10.25,\"class\":\"a\",\"dropped\":3,\"accepted\":9,\"completed\":8,\"syn_to_end_sum_s\":1.5}\n";
        let input = read(text, CountersFormat::Jsonl, true).unwrap();
        assert_eq!(input.t0_s, 10.0);
        assert_eq!(input.classes[0].class, "a");
        let c = input.classes[0].at(0);
        assert_eq!((c.dropped, c.accepted, c.completed), (2, 4, 3));
        assert_eq!(c.syn_to_end_sum, Nanos::from_millis(500));
    }

    #[test]
    fn a_gate_log_record_is_a_row() {
        let text = "{\"time_s\":5,\"interval_s\":0.25,\"accepted\":10,\"dropped\":3,\"rejected\":1,\"filter\":{}}\n\
                    {\"time_s\":5.25,\"interval_s\":0.25,\"accepted\":10,\"dropped\":3,\"rejected\":1,\"filter\":{},\"dry_run\":true}\n";
        let input = read(text, CountersFormat::Jsonl, false).unwrap();
        let class = &input.classes[0];
        let first = class.at(0);
        assert_eq!((first.dropped, first.accepted, first.refused), (3, 10, 1));
        let dry = class.at(1);
        assert_eq!((dry.dropped, dry.accepted, dry.refused), (0, 14, 0));
    }

    /// The one rule for a refused SYN, whoever counts it: a client whose
    /// first SYN was dropped and whose retry was refused, beside one
    /// accepted at once, gives the same counters from a capture's
    /// observations as from the gate's record of the same verdicts (and
    /// from a proxy row merged with that record).
    #[test]
    fn a_refused_connection_counts_alike_from_a_capture_and_a_gate_record() {
        use crate::certes::observed::{bucket, ConnectionObservation, IntervalGrid};
        let ms = Nanos::from_millis;
        let refused = ConnectionObservation {
            syn_arrivals: vec![ms(10), ms(100)],
            refused: true,
            ..Default::default()
        };
        let accepted = ConnectionObservation {
            syn_arrivals: vec![ms(20)],
            answered: Some(0),
            ..Default::default()
        };
        let grid = IntervalGrid::new(Nanos::ZERO, ms(250)).unwrap();
        let captured = bucket(&[refused, accepted], grid, ms(240)).unwrap();
        assert_eq!(captured.intervals.len(), 1);
        let from_capture = &captured.intervals[0];
        assert_eq!(captured.stats.refused, 1);

        let gate = GateCounts {
            accepted: 1,
            dropped: 1,
            rejected: 1,
            ..GateCounts::default()
        };
        let from_gate = gate_syn_counts(&gate, false);
        let syns = |c: &IntervalCounters| (c.dropped, c.accepted, c.refused);
        assert_eq!(syns(from_capture), (1, 1, 1));
        assert_eq!(syns(&from_gate), syns(from_capture));
        assert_eq!(from_gate.drop_rate(), from_capture.drop_rate());
        assert_eq!(from_capture.drop_rate(), 1.0 / 3.0);
        // Only the capture knows the refused SYN was attempt 1 (REFUSED^1);
        // the gate's total reads as the uniform rule.
        assert_eq!(from_capture.refused_split(), Some(&[0, 1][..]));
        assert_eq!(from_gate.refused_split(), None);

        // The gate's log read as a counters file says the same.
        let text = "{\"time_s\":0,\"interval_s\":0.25,\"accepted\":1,\"dropped\":1,\"rejected\":1,\"filter\":{}}\n";
        let input = read(text, CountersFormat::Jsonl, false).unwrap();
        assert_eq!(syns(input.classes[0].at(0)), syns(from_capture));

        // A proxy behind the gate sees only the accepted SYN.
        let proxy = IntervalCounters {
            accepted: 1,
            ..IntervalCounters::default()
        };
        let merged = proxy_counters_with_gate(&proxy, &gate, false);
        assert_eq!(syns(&merged), syns(from_capture));
    }

    #[test]
    fn the_refused_column_is_read_written_and_optional() {
        let row = CountersRow {
            t_start_s: 2.0,
            interval: Nanos::from_millis(250),
            class: String::new(),
            counters: IntervalCounters {
                dropped: 2,
                accepted: 5,
                refused: 3,
                ..IntervalCounters::default()
            },
        };
        let line = counters_jsonl_line(&row);
        assert!(line.contains("\"refused\":3"), "{line}");
        let back = parse_counters_line(&line, "s", 1, Nanos::from_millis(250)).unwrap();
        assert_eq!(back, row);
        // Without refusals the column is not written, and a row without it
        // reads as none refused.
        let none = CountersRow {
            counters: IntervalCounters {
                refused: 0,
                ..row.counters.clone()
            },
            ..row.clone()
        };
        let line = counters_jsonl_line(&none);
        assert!(!line.contains("refused"), "{line}");
        let back = parse_counters_line(&line, "s", 1, Nanos::from_millis(250)).unwrap();
        assert_eq!(back.counters.refused, 0);
        // CSV, cumulative: differenced like the other counts.
        let input = read(
            "t_start_s,dropped,accepted,refused,completed,syn_to_end_sum_s\n0,1,4,2,4,0.4\n0.25,3,8,7,8,0.8\n",
            CountersFormat::Csv,
            true,
        )
        .unwrap();
        let c = input.classes[0].at(0);
        assert_eq!((c.dropped, c.accepted, c.refused), (2, 4, 5));
        assert_eq!(c.offered(), 11);
    }

    #[test]
    fn errors_name_file_line_and_column() {
        let err = read(
            "t_start_s,dropped,accepted,completed,syn_to_end_sum_s\n0,1,x,1,1\n",
            CountersFormat::Csv,
            false,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "counters, line 2, column `accepted`: expected a whole number ≥ 0"
        );
        let err = read(
            "t_start_s,dropped,accepted,completed,syn_to_end_sum_s\n0,1,10,1,1\n0.25,0,11,2,2\n",
            CountersFormat::Csv,
            true,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "counters, line 3, column `dropped`: went backwards from 1 (line 2) to 0; counters restarted?"
        );
        let err = read("{\"t_start_s\": 0,\n", CountersFormat::Jsonl, false).unwrap_err();
        assert!(
            err.to_string().starts_with("counters, line 1, column "),
            "{err}"
        );
        let err = read("", CountersFormat::Jsonl, false).unwrap_err();
        assert_eq!(err.to_string(), "counters: no rows");
    }

    #[test]
    fn far_apart_rows_take_no_room_and_classes_times_intervals_is_capped() {
        // 83 bytes, two rows 999,000 s apart: 3,996,001 intervals of 250 ms.
        let text = "t_start_s,dropped,accepted,completed,syn_to_end_sum_s\n0,1,1,1,0.1\n999000,1,1,1,0.1\n";
        let input = read(text, CountersFormat::Csv, false).unwrap();
        assert_eq!(input.intervals, 3_996_001);
        assert_eq!(input.classes[0].counters.len(), 2);
        // Two classes over the same span: 8 M class-intervals.
        let text = "t_start_s,class,dropped,accepted,completed,syn_to_end_sum_s\n\
                    0,a,1,1,1,0.1\n999000,a,1,1,1,0.1\n0,b,1,1,1,0.1\n";
        let err = read(text, CountersFormat::Csv, false).unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains("2 classes (by the `class` column) × 3996001 intervals")
                && message.contains(&MAX_CLASS_INTERVALS.to_string()),
            "{message}"
        );
    }

    #[test]
    fn sums_that_would_wrap_or_saturate_are_refused_with_the_value() {
        let big = u64::MAX - 5;
        let text = format!(
            "interval,dropped,accepted,completed,syn_to_end_sum_s\n0,{big},0,0,0\n1,10,0,0,0\n"
        );
        let err = read(&text, CountersFormat::Csv, false).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("counters, line 3, column `dropped`: 10 brings the file's total to more than a 64-bit counter holds (total so far {big}); the counts cannot be added up")
        );
        let text =
            format!("interval,dropped,accepted,completed,syn_to_end_sum_s\n0,{big},{big},0,0\n");
        let err = read(&text, CountersFormat::Csv, false).unwrap_err();
        assert!(err.to_string().contains("column `accepted`"), "{err}");
        for value in ["1e12", "1e11"] {
            let text =
                format!("interval,dropped,accepted,completed,syn_to_end_sum_s\n0,1,1,1,{value}\n");
            let err = read(&text, CountersFormat::Csv, false).unwrap_err();
            let message = err.to_string();
            assert!(
                message.contains("column `syn_to_end_sum_s`")
                    && message
                        .contains("s is more than the 18446744074 s a nanosecond count holds"),
                "{message}"
            );
        }
        // Sums that fit one by one but not together.
        let text =
            "interval,dropped,accepted,completed,syn_to_end_sum_s\n0,1,1,1,1e10\n1,1,1,1,1e10\n";
        let err = read(text, CountersFormat::Csv, false).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("counters, line 3, column `syn_to_end_sum_s`: 10000000000 s brings"),
            "{err}"
        );
    }

    /// What the writer writes, both readers read back unchanged.
    #[test]
    fn written_rows_read_back_the_same() {
        let interval = Nanos::from_millis(250);
        let rows: Vec<CountersRow> = (0..3u64)
            .map(|i| CountersRow {
                t_start_s: 1_764_000_000.0 + 0.25 * i as f64,
                interval,
                class: String::new(),
                counters: IntervalCounters {
                    dropped: 7 * i,
                    // A counters file carries DROPPED_i only.
                    dropped_by_attempt: Vec::new(),
                    accepted: 40 + i,
                    refused: i % 3,
                    // A counters file carries REFUSED_i only.
                    refused_by_attempt: Vec::new(),
                    completed: 38 + 2 * i,
                    syn_to_end_sum: Nanos(1_234_567_891 * (i + 1) + 7),
                    rtt_sum: Nanos(987_654 * (i + 3)),
                    syn_to_end_histogram: None,
                    segments_sent: 1000 + i,
                    segments_retransmitted: i,
                },
            })
            .collect();
        let text: String = rows.iter().map(|r| counters_jsonl_line(r) + "\n").collect();
        let input = read_counters(
            text.as_bytes(),
            "proxy.jsonl",
            CountersFormat::Jsonl,
            false,
            interval,
        )
        .unwrap();
        assert_eq!(input.intervals, 3);
        assert_eq!(input.t0_s, rows[0].t_start_s);
        for (i, row) in rows.iter().enumerate() {
            assert_eq!(input.classes[0].at(i), &row.counters, "interval {i}");
            let line = counters_jsonl_line(row);
            let read = parse_counters_line(&line, "proxy.jsonl", i as u64 + 1, interval).unwrap();
            assert_eq!(&read, row);
        }
        let classed = CountersRow {
            class: "10.0.0.1:80".into(),
            ..rows[0].clone()
        };
        let read = parse_counters_line(&counters_jsonl_line(&classed), "p", 1, interval).unwrap();
        assert_eq!(read, classed);
    }

    #[test]
    fn a_row_of_another_interval_is_refused_naming_both() {
        let row = CountersRow {
            t_start_s: 10.0,
            interval: Nanos::from_millis(500),
            class: String::new(),
            counters: IntervalCounters::default(),
        };
        let line = counters_jsonl_line(&row);
        let err =
            parse_counters_line(&line, "proxy.jsonl", 4, Nanos::from_millis(250)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "proxy.jsonl, line 4, column `interval_s`: the rows are of 0.5 s intervals but the interval here is 250 ms; use 0.5s"
        );
        let err = read(&format!("{line}\n"), CountersFormat::Jsonl, false).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("counters, line 1, column `interval_s`: the rows are of 0.5 s"),
            "{err}"
        );
        let err = parse_counters_line(
            "{\"t_start_s\":1,\"dropped\":0,\"accepted\":0,\"completed\":0,\"syn_to_end_sum_s\":0}",
            "p",
            2,
            Nanos::from_millis(250),
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("p, line 2, column `interval_s`: missing"),
            "{err}"
        );
    }

    #[test]
    fn a_backwards_sum_is_reported_in_the_column_unit() {
        let err = read(
            "t_start_s,dropped,accepted,completed,syn_to_end_sum_s\n0,1,10,1,2.5\n0.25,1,11,2,1.25\n",
            CountersFormat::Csv,
            true,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "counters, line 3, column `syn_to_end_sum_s`: went backwards from 2.5 s (line 2) to 1.25 s; counters restarted?"
        );
    }
}
