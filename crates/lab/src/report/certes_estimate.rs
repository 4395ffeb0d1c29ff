//! The output of `vantage certes estimate`: the per-interval table, the
//! summary and the `--csv` rows (formats of `vantage_core::certes::summary`'s
//! rows and summary).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use comfy_table::Cell;
use vantage_core::certes::summary::{format_seconds, ClassSummary, IntervalRow, Summary};
use vantage_core::Nanos;

use super::{new_table, right};
use crate::error::LabError;

/// `writeln!` into a `String` (writing to a `String` cannot fail).
macro_rules! outln {
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

/// `--csv`: every interval, written as it comes.
pub struct CsvRows {
    writer: csv::Writer<std::fs::File>,
    path: PathBuf,
    trace: bool,
}

impl CsvRows {
    pub fn create(path: &Path, trace: bool) -> Result<CsvRows, LabError> {
        let write_error = |source| LabError::Write {
            path: path.to_path_buf(),
            source,
        };
        let mut writer = csv::Writer::from_path(path).map_err(write_error)?;
        let mut header = vec![
            "t_start_s",
            "class",
            "dropped",
            "accepted",
            "refused",
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
        if trace {
            header.extend([
                "exact_mean_s",
                "exact_completed",
                "exact_gave_up",
                "exact_conn_fail_mean_s",
            ]);
        }
        writer.write_record(&header).map_err(write_error)?;
        Ok(CsvRows {
            writer,
            path: path.to_path_buf(),
            trace,
        })
    }

    pub fn write(&mut self, r: &IntervalRow) -> Result<(), LabError> {
        let opt = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
        let mut record = vec![
            r.t_start_s.to_string(),
            r.class.clone().unwrap_or_default(),
            r.dropped.to_string(),
            r.accepted.to_string(),
            r.refused.to_string(),
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
        if self.trace {
            record.extend([
                opt(r.exact_mean_s.flatten()),
                r.exact_completed.unwrap_or(0).to_string(),
                r.exact_gave_up.unwrap_or(0).to_string(),
                opt(r.exact_conn_fail_mean_s.flatten()),
            ]);
        }
        self.writer
            .write_record(&record)
            .map_err(|source| LabError::Write {
                path: self.path.clone(),
                source,
            })
    }

    pub fn finish(mut self) -> Result<(), LabError> {
        self.writer.flush().map_err(|source| LabError::Write {
            path: self.path.clone(),
            source: source.into(),
        })
    }
}

fn fixed(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".to_string(), |v| format!("{v:.digits$}"))
}

/// The non-idle rows, and how many idle ones were left out.
pub fn render_table(rows: &[IntervalRow], idle: usize, classed: bool, trace: bool) -> String {
    let mut out = String::new();
    let mut table = new_table();
    let mut header = vec!["t s"];
    if classed {
        header.push("class");
    }
    header.extend([
        "dropped",
        "accepted",
        "refused",
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
    for r in rows {
        shown += 1;
        let mut cells = vec![right(format!("{:.3}", r.t_start_s))];
        if classed {
            cells.push(Cell::new(r.class.clone().unwrap_or_default()));
        }
        cells.extend([
            right(r.dropped.to_string()),
            right(r.accepted.to_string()),
            right(r.refused.to_string()),
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
        outln!(out, "{table}");
    }
    if idle > 0 {
        let rows = if idle == 1 { "row" } else { "rows" };
        outln!(
            out,
            "({idle} {rows} of idle intervals not shown; --json or --csv has them all)"
        );
    }
    out
}

fn render_class_summary(out: &mut String, s: &ClassSummary, indent: &str) {
    let pct = |x: f64| format!("{:.2} %", 100.0 * x);
    outln!(
        out,
        "{indent}SYNs: {} offered, {} dropped (drop rate {}), {} accepted, {} refused",
        s.offered,
        s.dropped,
        pct(s.drop_rate),
        s.accepted,
        s.refused
    );
    outln!(
        out,
        "{indent}connections completed: {}; clients the model says gave up: {:.2}",
        s.completed,
        s.gave_up
    );
    outln!(
        out,
        "{indent}SYN-to-END mean (what server-side latency metrics report): {}",
        fixed(s.syn_to_end_mean_s, 4)
            + if s.syn_to_end_mean_s.is_some() {
                " s"
            } else {
                ""
            }
    );
    outln!(
        out,
        "{indent}RTT mean: {}",
        fixed(s.rtt_mean_s.map(|v| v * 1e3), 2) + if s.rtt_mean_s.is_some() { " ms" } else { "" }
    );
    outln!(
        out,
        "{indent}Certes estimate, mean client-perceived time: {}",
        fixed(s.estimate_mean_s, 4)
            + if s.estimate_mean_s.is_some() {
                " s"
            } else {
                ""
            }
    );
    if let Some(x) = &s.exact {
        outln!(
            out,
            "{indent}exact, from each connection's own SYNs:      {}{}",
            fixed(x.mean_s, 4) + if x.mean_s.is_some() { " s" } else { "" },
            s.relative_difference.map_or(String::new(), |d| format!(
                "  (estimate − exact: {:+.2} %)",
                100.0 * d
            ))
        );
        outln!(
            out,
            "{indent}  exact p50 / p90 / p99: {} / {} / {} s; {} completed, {} gave up, {} refused, {} unresolved at the end of the capture (left out)",
            fixed(x.p50_s, 3),
            fixed(x.p90_s, 3),
            fixed(x.p99_s, 3),
            x.completed,
            x.gave_up,
            x.refused,
            x.unresolved
        );
        outln!(
            out,
            "{indent}  failures: {} ({}): {} refused, {} reset by the server after accepting (left out of the mean), {} aborted by the client (their wait is in the mean), {} gave up (their wait is in the mean)",
            x.failures,
            x.error_rate
                .map_or("-".to_string(), |r| format!("error rate {:.2} %", 100.0 * r)),
            x.refused,
            x.reset,
            x.aborted,
            x.gave_up
        );
        let model: Vec<String> = s
            .estimate_completed_by_retries
            .iter()
            .map(|n| format!("{n:.1}"))
            .collect();
        let exact: Vec<String> = x.completed_by_retries.iter().map(u64::to_string).collect();
        outln!(
            out,
            "{indent}  completed after 0, 1, 2, … retries: exact [{}], model [{}]",
            exact.join(", "),
            model.join(", ")
        );
    }
}

pub fn render_summary(s: &Summary) -> String {
    let mut out = String::new();
    outln!(
        out,
        "\nSummary — {} ({} intervals of {}; profile {}, frustration timeout {}, network loss {})",
        s.input,
        s.intervals,
        format_seconds(Nanos::from_secs_f64(s.interval_s)),
        s.profile,
        format_seconds(Nanos::from_secs_f64(s.frustration_timeout_s)),
        s.network_loss
    );
    render_class_summary(&mut out, &s.total, "  ");
    for class in &s.classes {
        outln!(out, "  class {}:", class.class.as_deref().unwrap_or(""));
        render_class_summary(&mut out, class, "    ");
    }
    if let Some(t) = &s.trace {
        outln!(
            out,
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
    out
}
