//! The SBAC study's results ([`crate::studies::sbac`]) for people and
//! machines.
//!
//! * tables: per scenario, one row per run (strategy, mean session length,
//!   load or pattern, completed sessions per second, aborted %, mean
//!   completed length, useful utilization, rejection overhead); Table 2
//!   with the paper's numbers beside ours; the step study (time to first
//!   rejection, coefficient of variation of admissions); the checks;
//! * `--json`: one document `{"rows": [...], "table2": [...], "checks": [...]}`;
//! * `--out DIR`: `DIR/sbac/<scenario>.csv`, `DIR/sbac/paper-comparison.csv`
//!   and one SVG per figure.

use super::new_table;
use super::right;
use super::svg::{legend, line_with_points, padded_bounds, PALETTE};
use crate::error::create_dir;
use crate::report;
use crate::studies::sbac::{Kind, SbacOutcome, SbacRow, SbacScenario};
use crate::LabError;
use comfy_table::Cell;
use plotters::prelude::*;
use serde::Serialize;
use std::path::Path;

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("–".into(), |v| format!("{v:.digits$}"))
}

fn rows_of<'a>(outcome: &'a SbacOutcome, s: &SbacScenario) -> Vec<&'a SbacRow> {
    outcome
        .rows
        .iter()
        .filter(|r| r.meta.scenario == s.name)
        .collect()
}

/// Prints every scenario's table, Table 2 and the step study.
pub fn print_tables(outcome: &SbacOutcome) {
    for s in &outcome.scenarios {
        println!("## {} — {} ({})\n", s.figure, s.title, s.origin);
        let mut table = new_table();
        let mut header = vec!["strategy", "m", "load %", "pattern"];
        if s.retries.len() > 1 {
            header.push("retries");
        }
        if s.think_times_s.len() > 1 {
            header.push("think s");
        }
        header.extend([
            "completed/s",
            "aborted %",
            "rejected %",
            "mean completed len",
            "bins ≤m/≤2m/>2m %",
            "useful util %",
            "util %",
            "rejection overhead %",
            "mean k",
        ]);
        if s.kind == Kind::Step {
            header.extend(["first rejection s", "admission CV"]);
        }
        table.set_header(header);
        for r in rows_of(outcome, s) {
            let o = &r.outcome;
            let mut cells = vec![
                Cell::new(&r.meta.strategy),
                right(format!("{}", r.meta.session_length_mean)),
                right(format!("{:.0}", r.meta.load_pct)),
                Cell::new(&r.meta.pattern),
            ];
            if s.retries.len() > 1 {
                cells.push(right(r.meta.retries.to_string()));
            }
            if s.think_times_s.len() > 1 {
                cells.push(right(format!("{}", r.meta.think_time_s)));
            }
            cells.extend([
                right(format!("{:.2}", o.completed_sessions_per_s)),
                right(format!("{:.2}", o.aborted_pct)),
                right(format!("{:.1}", o.rejected_pct)),
                right(format!("{:.2}", o.mean_completed_length)),
                right(format!(
                    "{:.1}/{:.1}/{:.2}",
                    o.completed_bins.up_to_mean_pct,
                    o.completed_bins.up_to_twice_mean_pct,
                    o.completed_bins.longer_pct
                )),
                right(format!("{:.1}", o.useful_utilization_pct)),
                right(format!("{:.1}", o.utilization_pct)),
                right(format!("{:.1}", o.rejection_overhead_pct)),
                right(opt(o.mean_weight, 2)),
            ]);
            if s.kind == Kind::Step {
                cells.push(right(opt(o.time_to_first_rejection_s, 2)));
                cells.push(right(opt(o.admitted_rate_cv, 2)));
            }
            table.add_row(cells);
        }
        println!("{table}\n");
    }
    if !outcome.table2.is_empty() {
        println!("## Table 2 — aborted sessions, % of admitted: paper | ours\n");
        let mut table = new_table();
        table.set_header(vec!["pattern", "strategy", "m = 5", "m = 15", "m = 50"]);
        for chunk in outcome.table2.chunks(3) {
            let mut cells = vec![Cell::new(&chunk[0].pattern), Cell::new(&chunk[0].strategy)];
            for c in chunk {
                cells.push(right(format!(
                    "{:.2} | {}",
                    c.paper_aborted_pct,
                    opt(c.aborted_pct, 2)
                )));
            }
            table.add_row(cells);
        }
        println!("{table}\n");
    }
}

/// Writes the study's CSV and SVG files into `dir`.
pub fn write_outputs(outcome: &SbacOutcome, dir: &Path) -> Result<(), LabError> {
    create_dir(dir)?;
    for s in &outcome.scenarios {
        let path = dir.join(format!("{}.csv", s.name));
        let mut w = csv::Writer::from_path(&path).map_err(|source| LabError::Write {
            path: path.to_path_buf(),
            source,
        })?;
        for r in rows_of(outcome, s) {
            w.serialize(CsvRow::from(r))?;
        }
        w.flush()?;
        plot(dir, s, &rows_of(outcome, s))?;
    }
    if !outcome.checks.is_empty() {
        report::write_checks_csv(&dir.join("paper-comparison.csv"), &outcome.checks)?;
    }
    Ok(())
}

/// A flat CSV record (the CSV writer cannot flatten nested structs).
#[derive(Serialize)]
struct CsvRow<'a> {
    figure: &'a str,
    strategy: &'a str,
    session_length_mean: f64,
    load_pct: f64,
    pattern: &'a str,
    retries: u32,
    think_time_s: f64,
    interval_s: f64,
    completed_sessions_per_s: f64,
    aborted_pct: f64,
    rejected_pct: f64,
    mean_completed_length: f64,
    useful_utilization_pct: f64,
    utilization_pct: f64,
    rejection_overhead_pct: f64,
    bin_up_to_mean_pct: f64,
    bin_up_to_twice_mean_pct: f64,
    bin_longer_pct: f64,
    time_to_first_rejection_s: Option<f64>,
    admitted_rate_cv: Option<f64>,
}

impl<'a> From<&'a SbacRow> for CsvRow<'a> {
    fn from(r: &'a SbacRow) -> Self {
        let o = &r.outcome;
        CsvRow {
            figure: &r.meta.figure,
            strategy: &r.meta.strategy,
            session_length_mean: r.meta.session_length_mean,
            load_pct: r.meta.load_pct,
            pattern: &r.meta.pattern,
            retries: r.meta.retries,
            think_time_s: r.meta.think_time_s,
            interval_s: r.meta.interval_s,
            completed_sessions_per_s: o.completed_sessions_per_s,
            aborted_pct: o.aborted_pct,
            rejected_pct: o.rejected_pct,
            mean_completed_length: o.mean_completed_length,
            useful_utilization_pct: o.useful_utilization_pct,
            utilization_pct: o.utilization_pct,
            rejection_overhead_pct: o.rejection_overhead_pct,
            bin_up_to_mean_pct: o.completed_bins.up_to_mean_pct,
            bin_up_to_twice_mean_pct: o.completed_bins.up_to_twice_mean_pct,
            bin_longer_pct: o.completed_bins.longer_pct,
            time_to_first_rejection_s: o.time_to_first_rejection_s,
            admitted_rate_cv: o.admitted_rate_cv,
        }
    }
}

fn err<E: std::fmt::Display>(e: E) -> LabError {
    LabError::Plot(e.to_string())
}

type Metric = (&'static str, fn(&SbacRow) -> f64);

/// One SVG per scenario: completed sessions, aborted %, useful utilization
/// and mean completed length against the load (steady) or the mean session
/// length (patterns, steps), one line per series.
fn plot(dir: &Path, s: &SbacScenario, rows: &[&SbacRow]) -> Result<(), LabError> {
    if rows.is_empty() {
        return Ok(());
    }
    let path = dir.join(format!("{}.svg", s.name));
    let steady = s.kind == Kind::Steady;
    let x_of = |r: &SbacRow| {
        if steady {
            r.meta.load_pct
        } else {
            r.meta.session_length_mean
        }
    };
    let label_of = |r: &SbacRow| {
        let mut l = r.meta.strategy.clone();
        if steady {
            l.push_str(&format!(" m={}", r.meta.session_length_mean));
        } else {
            l.push_str(&format!(" {}", r.meta.pattern));
        }
        if s.retries.len() > 1 {
            l.push_str(&format!(" retries={}", r.meta.retries));
        }
        if s.think_times_s.len() > 1 {
            l.push_str(&format!(" think={}s", r.meta.think_time_s));
        }
        l
    };
    let mut labels: Vec<String> = Vec::new();
    for r in rows {
        let l = label_of(r);
        if !labels.contains(&l) {
            labels.push(l);
        }
    }
    let metrics: [Metric; 4] = [
        ("completed sessions/s", |r| {
            r.outcome.completed_sessions_per_s
        }),
        ("aborted sessions (%)", |r| r.outcome.aborted_pct),
        ("useful utilization (%)", |r| {
            r.outcome.useful_utilization_pct
        }),
        ("mean completed length", |r| r.outcome.mean_completed_length),
    ];
    let root = SVGBackend::new(&path, (1000, 760)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let areas = root.split_evenly((2, 2));
    let xs: Vec<f64> = rows.iter().map(|r| x_of(r)).collect();
    let (x_lo, x_hi) = padded_bounds(&xs);
    for (area, (name, metric)) in areas.iter().zip(metrics) {
        let ys: Vec<f64> = rows.iter().map(|r| metric(r)).collect();
        let (mut y_lo, y_hi) = padded_bounds(&ys);
        y_lo = y_lo.min(0.0);
        let mut chart = ChartBuilder::on(area)
            .caption(format!("{} — {}", s.figure, name), ("sans-serif", 14))
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(45)
            .build_cartesian_2d(x_lo..x_hi, y_lo..y_hi)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc(if steady {
                "load (%)"
            } else {
                "mean session length"
            })
            .y_desc(name)
            .draw()
            .map_err(err)?;
        for (i, label) in labels.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            let mut points: Vec<(f64, f64)> = rows
                .iter()
                .filter(|r| &label_of(r) == label)
                .map(|r| (x_of(r), metric(r)))
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            line_with_points(&mut chart, points, color, label.clone()).map_err(err)?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight, Some(10)).map_err(err)?;
    }
    root.present().map_err(err)?;
    Ok(())
}
