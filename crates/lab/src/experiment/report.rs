//! The experiment's report for people (tables) and its files
//! (`experiment.csv`, `experiment.json`, the plot).

use std::fmt::Write as _;
use std::path::Path;

use comfy_table::{Cell, Table};

use super::error::ExperimentRunError;
use super::plan::Experiment;
use super::plot::plot;
use super::results::{ExperimentReport, ResultRow};
use crate::report::new_table;
use crate::report::{right, summary_cells, SUMMARY_COLUMNS};

/// `println!` into a `String`.
macro_rules! outln {
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

fn source_name(row: &ResultRow) -> String {
    match row.source.as_str() {
        "live" => "live".into(),
        "sim-same-arrivals" => format!("sim {}", row.model.as_deref().unwrap_or("")),
        _ => format!("sim {} long", row.model.as_deref().unwrap_or("")),
    }
}

fn metrics_table(rows: &[&ResultRow]) -> Table {
    let mut table = new_table();
    table.set_header(vec![
        "profile",
        "variant",
        "measured",
        "attempts",
        "success %",
        "delay mean s",
        "p99 s",
        "timed out %",
        "rejected %",
        "cost",
        "SYN retx",
    ]);
    for row in rows {
        let mut cells = vec![
            Cell::new(&row.profile),
            Cell::new(format!("({}) {}", row.variant, row.label)),
            Cell::new(source_name(row)),
        ];
        match (&row.summary, &row.error) {
            (Some(m), _) => {
                for v in [
                    m.requests.to_string(),
                    format!("{:.1}", m.throughput_pct),
                    format!("{:.2}", m.delay_mean_s),
                    format!("{:.2}", m.delay_p99_s),
                    format!("{:.2}", m.timeouts_pct),
                    format!("{:.1}", m.rejects_pct),
                    format!("{:.2}", m.cost_mean),
                    format!("{:.2}", m.retransmissions_mean),
                ] {
                    cells.push(right(v));
                }
            }
            (None, Some(_)) => cells.push(Cell::new("failed (see Runs)")),
            (None, None) => cells.push(Cell::new("—")),
        }
        table.add_row(cells);
    }
    table
}

/// Every table for people, up to the paper's statements (which the
/// study report writer prints, followed by [`statements_summary`]).
pub fn render_report(report: &ExperimentReport, x: &Experiment) -> String {
    let mut out = String::new();
    outln!(out, "# {} — {}\n", report.title, report.file);
    outln!(
        out,
        "h = {} per second of delay, r = {} per rejected or timed-out connection{}\n",
        report.delay_cost,
        report.reject_cost,
        if report.quick { "; --quick" } else { "" }
    );
    for w in &report.workload {
        outln!(
            out,
            "arrivals (seed {}): {} connections in {} s — mean {:.1}/s, σ {:.1}/s, peak {}/s, {} s above the server's capacity{}",
            w.seed,
            w.connections,
            w.duration_s,
            w.mean_per_s,
            w.std_dev_per_s,
            w.peak_per_s,
            w.seconds_above_capacity,
            w.capacity_ratio
                .map_or(String::new(), |c| format!(" (capacity / mean = {c:.2})"))
        );
    }
    out.push('\n');
    let near: Vec<&ResultRow> = report
        .rows
        .iter()
        .filter(|r| r.source != "sim-long")
        .collect();
    outln!(
        out,
        "## Live clients, and the simulator on the same arrivals\n"
    );
    outln!(out, "{}", metrics_table(&near));
    let long: Vec<&ResultRow> = report
        .rows
        .iter()
        .filter(|r| r.source == "sim-long")
        .collect();
    if !long.is_empty() {
        outln!(
            out,
            "\n## The simulator, {} × {:.0} s of the same arrival model\n",
            report.sim_repetitions,
            report.sim_horizon_s
        );
        outln!(out, "{}", metrics_table(&long));
    }
    // Live minus simulator on the same arrivals.
    let mut diff = new_table();
    diff.set_header(vec![
        "profile",
        "variant",
        "model",
        "Δ success pts",
        "Δ delay mean s",
        "Δ p99 s",
        "Δ timed out pts",
        "Δ rejected pts",
    ]);
    let mut any = false;
    for live in report.rows.iter().filter(|r| r.source == "live") {
        let Some(sim) = report.rows.iter().find(|r| {
            r.source == "sim-same-arrivals"
                && r.profile == live.profile
                && r.variant == live.variant
        }) else {
            continue;
        };
        let (Some(a), Some(b)) = (&live.summary, &sim.summary) else {
            continue;
        };
        any = true;
        diff.add_row(vec![
            Cell::new(&live.profile),
            Cell::new(format!("({}) {}", live.variant, live.label)),
            Cell::new(sim.model.clone().unwrap_or_default()),
            right(format!("{:+.1}", a.throughput_pct - b.throughput_pct)),
            right(format!("{:+.2}", a.delay_mean_s - b.delay_mean_s)),
            right(format!("{:+.2}", a.delay_p99_s - b.delay_p99_s)),
            right(format!("{:+.2}", a.timeouts_pct - b.timeouts_pct)),
            right(format!("{:+.1}", a.rejects_pct - b.rejects_pct)),
        ]);
    }
    if any {
        outln!(out, "\n## Live minus simulator (same arrivals)\n");
        outln!(out, "{diff}");
    }
    // Run details.
    let mut details = Vec::new();
    for row in report.rows.iter().filter(|r| r.source == "live") {
        let mut parts = Vec::new();
        if let Some(o) = &row.outcomes {
            let list: Vec<String> = o
                .by_outcome
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            parts.push(format!(
                "outcomes: {}; HTTP complete {:.1} %",
                list.join(", "),
                o.http_ok_pct
            ));
            let after: Vec<String> = o
                .connected_after
                .iter()
                .map(|t| {
                    format!(
                        "{}×{} ({:.2} s)",
                        t.connections, t.retransmissions, t.median_s
                    )
                })
                .collect();
            parts.push(format!(
                "connected after N retransmissions, count×N (median delay): {}",
                after.join(" ")
            ));
        }
        if let Some(g) = &row.gate {
            if let (Some(a), Some(r)) = (g.limit_accepted, g.limit_refused) {
                parts.push(format!("iptables: {a} SYNs within the limit, {r} over"));
            }
            if g.kind == "vantage" {
                parts.push(format!(
                    "gate exit {}{}",
                    g.exit_code.map_or_else(
                        || format!("signal {}", g.exit_signal.unwrap_or(0)),
                        |c| c.to_string()
                    ),
                    if g.killed { " (killed)" } else { "" }
                ));
            }
        }
        if let Some(t) = &row.gate_log {
            parts.push(format!(
                "gate log: {} SYNs = {} accepted + {} dropped + {} rejected; {} overruns, {} errors",
                t.arrivals,
                t.counts.accepted,
                t.counts.dropped,
                t.counts.rejected,
                t.counts.overruns,
                t.counts.errors
            ));
        }
        parts.extend(row.problems.iter().map(|p| format!("problem: {p}")));
        if let Some(e) = &row.error {
            parts.push(format!("failed: {e}"));
        }
        if let Some(dir) = &row.dir {
            parts.push(format!("in {}", dir.display()));
        }
        if !parts.is_empty() {
            details.push(format!(
                "  ({}) {}: {}",
                row.variant,
                row.profile,
                parts.join("; ")
            ));
        }
    }
    if !details.is_empty() {
        outln!(out, "\n## Runs\n");
        for d in details {
            outln!(out, "{d}");
        }
    }
    for note in &x.notes {
        outln!(out, "note: {note}");
    }
    out.push('\n');
    out
}

/// The line after the statements table: how many of them hold.
pub fn statements_summary(report: &ExperimentReport) -> Option<String> {
    if report.checks.is_empty() {
        return None;
    }
    let holds = report.checks.iter().filter(|c| c.holds).count();
    Some(format!(
        "{holds} of {} statements of the paper hold with live clients.",
        report.checks.len()
    ))
}

/// Writes `experiment.csv`, `experiment.json` and `p99-vs-success.svg` in
/// `out` (`checks.csv` is the study report writer's).
pub fn write_outputs(
    report: &ExperimentReport,
    x: &Experiment,
    out: &Path,
) -> Result<(), ExperimentRunError> {
    let csv_path = out.join("experiment.csv");
    let mut w =
        csv::Writer::from_path(&csv_path).map_err(|source| ExperimentRunError::CreateCsv {
            path: csv_path.clone(),
            source,
        })?;
    let mut header = vec!["profile", "variant", "label", "source", "model"];
    header.extend(SUMMARY_COLUMNS);
    header.extend(["attempts", "http_ok_pct", "other", "dir", "error"]);
    w.write_record(&header)?;
    for row in &report.rows {
        let mut record = vec![
            row.profile.clone(),
            row.variant.clone(),
            row.label.clone(),
            row.source.clone(),
            row.model.clone().unwrap_or_default(),
        ];
        match &row.summary {
            Some(m) => record.extend(summary_cells(m)),
            None => record.extend(std::iter::repeat_n(String::new(), SUMMARY_COLUMNS.len())),
        }
        match &row.outcomes {
            Some(o) => record.extend([
                o.attempts.to_string(),
                o.http_ok_pct.to_string(),
                o.other.to_string(),
            ]),
            None => record.extend(std::iter::repeat_n(String::new(), 3)),
        }
        record.push(
            row.dir
                .as_ref()
                .map_or(String::new(), |d| d.display().to_string()),
        );
        record.push(row.error.clone().unwrap_or_default());
        w.write_record(&record)?;
    }
    w.flush()?;
    let json_path = out.join("experiment.json");
    std::fs::write(&json_path, serde_json::to_vec_pretty(report)?).map_err(|source| {
        ExperimentRunError::Write {
            path: json_path.clone(),
            source,
        }
    })?;
    plot(report, x, &out.join("p99-vs-success.svg"))
}
