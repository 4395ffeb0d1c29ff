//! The proxy thesis study's results ([`crate::studies::ssbt`]) for people
//! and machines.
//!
//! * tables: Figure 3's active probability per timer; Figures 6 and 7's
//!   mean assigned buffer, stored data and throughput per loss; one row
//!   per proxy run (scheme, total buffer, split, N_max, throughputs,
//!   transfer time, wait); the checks;
//! * `--json`: one document `{"active_probability": [...], "buffers":
//!   [...], "proxy": [...], "checks": [...]}` (time series under
//!   `buffers[].samples`);
//! * `--out DIR`: `DIR/ssbt/<scenario>.csv`, `DIR/ssbt/paper-comparison.csv`
//!   and one SVG per figure.

use super::right;
use super::svg::{legend_beside, padded_bounds, Key, LegendEntry, LEGEND_WIDTH, PALETTE};
use crate::report;
use crate::studies::ssbt::{Kind, ProxyRow, SsbtOutcome, SsbtScenario};
use crate::LabError;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, Table};
use plotters::prelude::*;
use serde::Serialize;
use std::path::Path;

/// The study's JSON document.
pub fn document(outcome: &SsbtOutcome) -> Result<serde_json::Value, LabError> {
    #[derive(Serialize)]
    struct Document<'a> {
        active_probability: &'a [crate::studies::ssbt::ActiveRow],
        buffers: &'a [crate::studies::ssbt::SeriesRow],
        proxy: &'a [ProxyRow],
        checks: &'a [crate::Check],
    }
    Ok(serde_json::to_value(Document {
        active_probability: &outcome.rows.active_probability,
        buffers: &outcome.rows.buffers,
        proxy: &outcome.rows.proxy,
        checks: &outcome.checks,
    })?)
}

fn mbps(bytes_per_sec: f64) -> String {
    format!("{:.2}", bytes_per_sec * 8.0 / 1e6)
}

/// Prints every figure's table.
pub fn print_tables(outcome: &SsbtOutcome) {
    let rows = &outcome.rows;
    if !rows.active_probability.is_empty() {
        println!("## Fig. 3 — probability that a persistent connection is active\n");
        let mut timers: Vec<f64> = rows.active_probability.iter().map(|r| r.timer_s).collect();
        timers.sort_by(|a, b| a.total_cmp(b));
        timers.dedup();
        let mut table = Table::new();
        table.load_preset(UTF8_FULL_CONDENSED);
        let mut header = vec!["panel".to_string(), "p_c".into(), "rtt_s (s)".into()];
        header.extend(timers.iter().map(|t| format!("T_p={t}")));
        table.set_header(header);
        let firsts = rows
            .active_probability
            .iter()
            .filter(|r| r.timer_s == timers[0]);
        for first in firsts {
            let mut line = vec![
                Cell::new(format!(
                    "rtt_c={} p_s={}",
                    first.client_rtt_s, first.server_loss
                )),
                right(first.client_loss.to_string()),
                right(first.server_rtt_s.to_string()),
            ];
            for t in &timers {
                let u = rows.active_probability.iter().find(|r| {
                    r.panel == first.panel
                        && r.client_loss == first.client_loss
                        && r.server_rtt_s == first.server_rtt_s
                        && r.timer_s == *t
                });
                line.push(right(
                    u.map_or("–".into(), |u| format!("{:.3}", u.active_probability)),
                ));
            }
            table.add_row(line);
        }
        println!("{table}\n");
    }
    if !rows.buffers.is_empty() {
        println!("## Figs. 6 and 7 — assigned buffers on one path (second half of the run)\n");
        let mut table = Table::new();
        table.load_preset(UTF8_FULL_CONDENSED);
        table.set_header(vec![
            "figure",
            "loss",
            "assigned (KB)",
            "peak stored (KB)",
            "throughput (Mb/s)",
        ]);
        for r in &rows.buffers {
            table.add_row(vec![
                Cell::new(&r.figure),
                right(format!("{} %", r.loss * 100.0)),
                right(format!("{:.0}", r.mean_assigned_bytes / 1024.0)),
                right(format!("{:.0}", r.mean_peak_stored_bytes / 1024.0)),
                right(mbps(r.mean_throughput_bytes_per_sec)),
            ]);
        }
        println!("{table}\n");
    }
    for s in outcome.scenarios.iter().filter(|s| s.kind == Kind::Proxy) {
        let runs: Vec<&ProxyRow> = rows.proxy.iter().filter(|r| r.scenario == s.name).collect();
        if runs.is_empty() {
            continue;
        }
        println!("## {} — {}\n", s.figure, s.name);
        let mut table = Table::new();
        table.load_preset(UTF8_FULL_CONDENSED);
        table.set_header(vec![
            "scheme",
            "total (MB)",
            "split",
            "N_max",
            "server side (Mb/s)",
            "client side (Mb/s)",
            "transfer (s)",
            "wait (s)",
            "documents",
            "closed idle",
        ]);
        for r in runs {
            table.add_row(vec![
                Cell::new(&r.scheme),
                right(r.total_buffer_mb.to_string()),
                right(r.split.clone()),
                right(r.max_connections.to_string()),
                right(mbps(r.result.server_side_bytes_per_sec)),
                right(mbps(r.result.client_side_bytes_per_sec)),
                right(format!("{:.2}", r.result.mean_transfer_secs)),
                right(format!("{:.2}", r.result.mean_wait_secs)),
                right(r.result.documents.to_string()),
                right(r.result.closed_for_resources.to_string()),
            ]);
        }
        println!("{table}\n");
    }
}

/// The closing note: why each statement that does not hold does not.
pub fn print_notes(checks: &[crate::Check]) {
    let failing: Vec<&crate::Check> = checks.iter().filter(|c| !c.holds).collect();
    if failing.is_empty() {
        return;
    }
    println!("Statements that do not hold in our runs:\n");
    for c in failing {
        println!(
            "* {} ({}): {}\n  {}",
            c.figure,
            c.profile,
            c.claim,
            crate::studies::ssbt::note(c)
        );
    }
    println!();
}

/// A flat CSV record of one proxy run.
#[derive(Serialize)]
struct ProxyCsv<'a> {
    figure: &'a str,
    scheme: &'a str,
    total_buffer_mb: f64,
    split: &'a str,
    max_connections: u32,
    server_side_bytes_per_sec: f64,
    client_side_bytes_per_sec: f64,
    mean_transfer_secs: f64,
    mean_wait_secs: f64,
    documents: u64,
    mean_assigned_buffer_bytes: f64,
    closed_for_resources: u64,
}

#[derive(Serialize)]
struct SeriesCsv {
    loss: f64,
    time_secs: f64,
    assigned_bytes: u64,
    peak_stored_bytes: u64,
    throughput_bytes_per_sec: f64,
}

fn writer(path: &Path) -> Result<csv::Writer<std::fs::File>, LabError> {
    csv::Writer::from_path(path).map_err(|source| LabError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// Writes the CSV files and SVG plots under `dir`.
pub fn write_outputs(outcome: &SsbtOutcome, dir: &Path) -> Result<(), LabError> {
    std::fs::create_dir_all(dir).map_err(|source| LabError::CreateDir {
        path: dir.to_path_buf(),
        source,
    })?;
    for s in &outcome.scenarios {
        let path = dir.join(format!("{}.csv", s.name));
        let mut w = writer(&path)?;
        match s.kind {
            Kind::ActiveProbability => {
                for r in &outcome.rows.active_probability {
                    w.serialize(r)?;
                }
            }
            Kind::SendBuffer | Kind::ReceiveBuffer => {
                for r in outcome.rows.buffers.iter().filter(|r| r.scenario == s.name) {
                    for sample in &r.samples {
                        w.serialize(SeriesCsv {
                            loss: r.loss,
                            time_secs: sample.time_secs,
                            assigned_bytes: sample.assigned_bytes,
                            peak_stored_bytes: sample.peak_stored_bytes,
                            throughput_bytes_per_sec: sample.throughput_bytes_per_sec,
                        })?;
                    }
                }
            }
            Kind::Proxy => {
                for r in outcome.rows.proxy.iter().filter(|r| r.scenario == s.name) {
                    w.serialize(ProxyCsv {
                        figure: &r.figure,
                        scheme: &r.scheme,
                        total_buffer_mb: r.total_buffer_mb,
                        split: &r.split,
                        max_connections: r.max_connections,
                        server_side_bytes_per_sec: r.result.server_side_bytes_per_sec,
                        client_side_bytes_per_sec: r.result.client_side_bytes_per_sec,
                        mean_transfer_secs: r.result.mean_transfer_secs,
                        mean_wait_secs: r.result.mean_wait_secs,
                        documents: r.result.documents,
                        mean_assigned_buffer_bytes: r.result.mean_assigned_buffer_bytes,
                        closed_for_resources: r.result.closed_for_resources,
                    })?;
                }
            }
        }
        w.flush()?;
        plot(dir, s, outcome)?;
    }
    if !outcome.checks.is_empty() {
        report::write_checks_csv(&dir.join("paper-comparison.csv"), &outcome.checks)?;
    }
    Ok(())
}

fn err<E: std::fmt::Display>(e: E) -> LabError {
    LabError::Plot(e.to_string())
}

/// One labelled line of a plot.
type Line = (String, Vec<(f64, f64)>);

fn lines_of(s: &SsbtScenario, outcome: &SsbtOutcome) -> (String, String, Vec<Line>) {
    let rows = &outcome.rows;
    match s.kind {
        Kind::ActiveProbability => {
            let mut lines: Vec<Line> = Vec::new();
            for r in &rows.active_probability {
                let label = format!(
                    "rtt_c={} p_s={} p_c={} rtt_s={}",
                    r.client_rtt_s, r.server_loss, r.client_loss, r.server_rtt_s
                );
                match lines.iter_mut().find(|(l, _)| *l == label) {
                    Some((_, points)) => points.push((r.timer_s, r.active_probability)),
                    None => lines.push((label, vec![(r.timer_s, r.active_probability)])),
                }
            }
            (
                "persistence timer T_p (s)".into(),
                "probability the connection is active".into(),
                lines,
            )
        }
        Kind::SendBuffer | Kind::ReceiveBuffer => {
            let mut lines = Vec::new();
            for r in rows.buffers.iter().filter(|r| r.scenario == s.name) {
                let label = format!("loss {} %", r.loss * 100.0);
                lines.push((
                    format!("{label} buffer"),
                    r.samples
                        .iter()
                        .map(|p| (p.time_secs, p.assigned_bytes as f64 / 1024.0))
                        .collect(),
                ));
                if s.kind == Kind::ReceiveBuffer {
                    lines.push((
                        format!("{label} stored"),
                        r.samples
                            .iter()
                            .map(|p| (p.time_secs, p.peak_stored_bytes as f64 / 1024.0))
                            .collect(),
                    ));
                }
            }
            ("time (s)".into(), "buffer (KB)".into(), lines)
        }
        Kind::Proxy => {
            let runs: Vec<&ProxyRow> = rows.proxy.iter().filter(|r| r.scenario == s.name).collect();
            let by_split = runs
                .iter()
                .map(|r| &r.split)
                .collect::<std::collections::BTreeSet<_>>()
                .len()
                > 1;
            let mut lines: Vec<Line> = Vec::new();
            for r in &runs {
                let x = if by_split {
                    let mut parts = r.split.split(':').map(|p| p.parse::<f64>().unwrap_or(1.0));
                    let send = parts.next().unwrap_or(1.0);
                    let receive = parts.next().unwrap_or(1.0);
                    send / (send + receive)
                } else {
                    r.total_buffer_mb
                };
                let y = r.result.client_side_bytes_per_sec * 8.0 / 1e6;
                match lines.iter_mut().find(|(l, _)| *l == r.scheme) {
                    Some((_, points)) => points.push((x, y)),
                    None => lines.push((r.scheme.clone(), vec![(x, y)])),
                }
            }
            let x = if by_split {
                "send share of the buffer (fraction)"
            } else {
                "total socket buffer (MB)"
            };
            (x.into(), "client-side throughput (Mb/s)".into(), lines)
        }
    }
}

fn plot(dir: &Path, s: &SsbtScenario, outcome: &SsbtOutcome) -> Result<(), LabError> {
    let (x_desc, y_desc, mut lines) = lines_of(s, outcome);
    if lines.iter().all(|(_, p)| p.is_empty()) {
        return Ok(());
    }
    let path = dir.join(format!("{}.svg", s.name));
    let xs: Vec<f64> = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.0))
        .collect();
    let ys: Vec<f64> = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.1))
        .collect();
    let (x_lo, x_hi) = padded_bounds(&xs);
    let (_, y_hi) = padded_bounds(&ys);
    let root = SVGBackend::new(&path, (1000 + LEGEND_WIDTH, 640)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (plot_area, legend_area) = root.split_horizontally(1000);
    let mut chart = ChartBuilder::on(&plot_area)
        .caption(format!("{} — {}", s.figure, s.name), ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(55)
        .build_cartesian_2d(x_lo..x_hi, 0.0..y_hi)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .draw()
        .map_err(err)?;
    for (i, (label, points)) in lines.iter_mut().enumerate() {
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        let color = PALETTE[i % PALETTE.len()];
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], color));
    }
    let entries: Vec<LegendEntry> = lines
        .iter()
        .enumerate()
        .map(|(i, (label, _))| {
            LegendEntry::new(
                Key::Line(PALETTE[i % PALETTE.len()]),
                format!("ours: {label}"),
            )
        })
        .collect();
    legend_beside(&legend_area, &entries).map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}
