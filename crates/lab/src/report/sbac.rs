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

use super::interval::with_interval;
use super::new_table;
use super::right;
use super::svg::{
    error_bars, legend_beside, line_with_points, padded_bounds, paper_marks, Key, LegendEntry,
    PaperMark, LEGEND_WIDTH, PALETTE,
};
use crate::error::create_dir;
use crate::report;
use crate::studies::sbac::{
    paper_values, Kind, Metric, PaperValue, SbacOutcome, SbacRow, SbacScenario,
};
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
        let runs = rows_of(outcome, s)
            .iter()
            .map(|r| r.spread.repetitions)
            .max()
            .unwrap_or(0);
        if runs > 1 {
            println!(
                "Each cell pools {runs} runs with their own seeds; `± x` is the half-width of the 95 % interval of the mean over them (Student t).\n"
            );
        }
        let mut table = new_table();
        let mut header = vec!["strategy", "m", "load %", "pattern"];
        if s.thresholds.len() > 1 {
            header.push("U_ac %");
        }
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
            if s.thresholds.len() > 1 {
                cells.push(right(opt(r.meta.threshold.map(|t| 100.0 * t), 0)));
            }
            if s.retries.len() > 1 {
                cells.push(right(r.meta.retries.to_string()));
            }
            if s.think_times_s.len() > 1 {
                cells.push(right(format!("{}", r.meta.think_time_s)));
            }
            let spread = &r.spread;
            cells.extend([
                right(with_interval(
                    o.completed_sessions_per_s,
                    spread.completed_sessions_per_s_ci95,
                    2,
                )),
                right(with_interval(o.aborted_pct, spread.aborted_pct_ci95, 2)),
                right(format!("{:.1}", o.rejected_pct)),
                right(with_interval(
                    o.mean_completed_length,
                    spread.mean_completed_length_ci95,
                    2,
                )),
                right(format!(
                    "{:.1}/{:.1}/{:.2}",
                    o.completed_bins.up_to_mean_pct,
                    o.completed_bins.up_to_twice_mean_pct,
                    o.completed_bins.longer_pct
                )),
                right(with_interval(
                    o.useful_utilization_pct,
                    spread.useful_utilization_pct_ci95,
                    1,
                )),
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
                    c.aborted_pct
                        .map_or("–".into(), |a| with_interval(a, c.aborted_pct_ci95, 2))
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
    threshold: Option<f64>,
    session_length_mean: f64,
    load_pct: f64,
    pattern: &'a str,
    retries: u32,
    think_time_s: f64,
    interval_s: f64,
    repetitions: usize,
    completed_sessions_per_s: f64,
    completed_sessions_per_s_ci95: Option<f64>,
    aborted_pct: f64,
    aborted_pct_ci95: Option<f64>,
    rejected_pct: f64,
    mean_completed_length: f64,
    mean_completed_length_ci95: Option<f64>,
    useful_utilization_pct: f64,
    useful_utilization_pct_ci95: Option<f64>,
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
            threshold: r.meta.threshold,
            session_length_mean: r.meta.session_length_mean,
            load_pct: r.meta.load_pct,
            pattern: &r.meta.pattern,
            retries: r.meta.retries,
            think_time_s: r.meta.think_time_s,
            interval_s: r.meta.interval_s,
            repetitions: r.spread.repetitions,
            completed_sessions_per_s: o.completed_sessions_per_s,
            completed_sessions_per_s_ci95: r.spread.completed_sessions_per_s_ci95,
            aborted_pct: o.aborted_pct,
            aborted_pct_ci95: r.spread.aborted_pct_ci95,
            rejected_pct: o.rejected_pct,
            mean_completed_length: o.mean_completed_length,
            mean_completed_length_ci95: r.spread.mean_completed_length_ci95,
            useful_utilization_pct: o.useful_utilization_pct,
            useful_utilization_pct_ci95: r.spread.useful_utilization_pct_ci95,
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

type Plotted = (
    Metric,
    &'static str,
    fn(&SbacRow) -> f64,
    fn(&SbacRow) -> Option<f64>,
);

/// One SVG per scenario: completed sessions, aborted %, useful utilization
/// and mean completed length against the load (steady) or the mean session
/// length (patterns, steps), one line per series; the paper's numbers for
/// the scenario ([`paper_values`]) as triangles, bars or dashed levels in
/// the colour of their series; the 95 % interval over seeds as error bars
/// where a cell ran more than once; the legend in a strip on the right.
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
        if s.thresholds.len() > 1 {
            if let Some(t) = r.meta.threshold {
                l.push_str(&format!(" U_ac={}%", (100.0 * t).round()));
            }
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
    // Each of the paper's values goes with the first series of its
    // strategy (and mean session length, where it names one).
    let paper: Vec<(usize, PaperValue)> = paper_values(&s.name)
        .into_iter()
        .filter_map(|v| {
            let row = rows.iter().find(|r| {
                r.meta.strategy == v.strategy
                    && v.session_length_mean
                        .is_none_or(|m| r.meta.session_length_mean == m)
            })?;
            let series = labels.iter().position(|l| *l == label_of(row))?;
            Some((series, v))
        })
        .collect();
    let metrics: [Plotted; 4] = [
        (
            Metric::CompletedSessionsPerS,
            "completed sessions (1/s)",
            |r| r.outcome.completed_sessions_per_s,
            |r| r.spread.completed_sessions_per_s_ci95,
        ),
        (
            Metric::AbortedPct,
            "aborted sessions (% of admitted)",
            |r| r.outcome.aborted_pct,
            |r| r.spread.aborted_pct_ci95,
        ),
        (
            Metric::UsefulUtilizationPct,
            "useful utilization (%)",
            |r| r.outcome.useful_utilization_pct,
            |r| r.spread.useful_utilization_pct_ci95,
        ),
        (
            Metric::MeanCompletedLength,
            "mean completed length (requests)",
            |r| r.outcome.mean_completed_length,
            |r| r.spread.mean_completed_length_ci95,
        ),
    ];
    let xs: Vec<f64> = rows.iter().map(|r| x_of(r)).collect();
    let (x_lo, x_hi) = padded_bounds(&xs);
    let (x_min, x_max) = (
        xs.iter().copied().fold(f64::INFINITY, f64::min),
        xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    );
    let mark_of = |v: &PaperValue| match v.at {
        Some(x) if v.low == v.high => PaperMark::Point { x, y: v.low },
        Some(x) => PaperMark::Range {
            x,
            low: v.low,
            high: v.high,
        },
        None => PaperMark::Level {
            from: x_min,
            to: x_max,
            y: v.low,
        },
    };
    let root = SVGBackend::new(&path, (1000 + LEGEND_WIDTH, 760)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (plots, legend_area) = root.split_horizontally(1000);
    let areas = plots.split_evenly((2, 2));
    let mut intervals = 0usize;
    for (area, (metric, name, value, half)) in areas.iter().zip(metrics) {
        let marks: Vec<(usize, PaperMark)> = paper
            .iter()
            .filter(|(_, v)| v.metric == metric)
            .map(|(i, v)| (*i, mark_of(v)))
            .collect();
        let mut ys: Vec<f64> = rows
            .iter()
            .flat_map(|r| {
                let h = half(r).unwrap_or(0.0);
                [value(r) - h, value(r) + h]
            })
            .collect();
        ys.extend(marks.iter().flat_map(|(_, m)| m.ys()));
        let (mut y_lo, y_hi) = padded_bounds(&ys);
        y_lo = y_lo.min(0.0);
        let mut chart = ChartBuilder::on(area)
            .caption(format!("{} — {}", s.figure, name), ("sans-serif", 14))
            .margin(8)
            .x_label_area_size(35)
            .y_label_area_size(50)
            .build_cartesian_2d(x_lo..x_hi, y_lo..y_hi)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc(if steady {
                "offered load (% of capacity)"
            } else {
                "mean session length (requests)"
            })
            .y_desc(name)
            .draw()
            .map_err(err)?;
        for (i, label) in labels.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            let mut series: Vec<&&SbacRow> =
                rows.iter().filter(|r| &label_of(r) == label).collect();
            series.sort_by(|a, b| x_of(a).total_cmp(&x_of(b)));
            let points = series.iter().map(|r| (x_of(r), value(r))).collect();
            line_with_points(&mut chart, points, color, label.clone()).map_err(err)?;
            let bars: Vec<(f64, f64, f64)> = series
                .iter()
                .filter_map(|r| Some((x_of(r), value(r), half(r)?)))
                .collect();
            intervals += bars.len();
            error_bars(&mut chart, &bars, color, x_hi - x_lo).map_err(err)?;
            let own: Vec<PaperMark> = marks
                .iter()
                .filter(|(j, _)| *j == i)
                .map(|(_, m)| m.clone())
                .collect();
            paper_marks(&mut chart, &own, color, x_hi - x_lo).map_err(err)?;
        }
    }
    let mut entries: Vec<LegendEntry> = labels
        .iter()
        .enumerate()
        .map(|(i, l)| LegendEntry::new(Key::Ours(PALETTE[i % PALETTE.len()]), format!("ours: {l}")))
        .collect();
    let mut seen: Vec<(usize, &str, &str)> = Vec::new();
    for (i, v) in &paper {
        let color = PALETTE[i % PALETTE.len()];
        let (key, kind) = match mark_of(v) {
            PaperMark::Point { .. } => (Key::PaperPoint(color), "point"),
            PaperMark::Range { .. } => (Key::PaperRange(color), "range"),
            PaperMark::Level { .. } => (Key::PaperLevel(color), "level"),
        };
        if seen.contains(&(*i, v.source, kind)) {
            continue;
        }
        seen.push((*i, v.source, kind));
        let what = match kind {
            "range" => "range",
            "level" => "at every load",
            _ => "",
        };
        let series = if steady && v.session_length_mean.is_none() {
            format!("{}, every m", v.strategy)
        } else {
            labels[*i].clone()
        };
        let what = if what.is_empty() {
            String::new()
        } else {
            format!(", {what}")
        };
        entries.push(LegendEntry::new(
            key,
            format!("paper {}{what}: {series}", v.source),
        ));
    }
    if intervals > 0 {
        let n = rows.iter().map(|r| r.spread.repetitions).max().unwrap_or(0);
        entries.push(LegendEntry::new(
            Key::Interval,
            format!("95 % interval over {n} seeds"),
        ));
    }
    legend_beside(&legend_area, &entries).map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}
