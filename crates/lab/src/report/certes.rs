//! The Certes validation study's results ([`crate::studies::certes`]) for
//! people and machines.
//!
//! * tables: per scenario, the paper's Figure 16 as rows (truth, Certes,
//!   SYN-to-END, application-level time, M/M/1, sliding window, relative
//!   errors) with Table II's drop and connection rates beside the paper's;
//!   tracking and distribution errors; the mid-stream start of Appendix B;
//!   the full model of Section 3.1 beside the fast one (Certes' column);
//!   a summary beside the paper's stated results; the checks;
//! * `--json`: one document, `{"rows": [...], "checks": [...]}`;
//! * `--out DIR`: `DIR/certes/figure16.csv` (every row),
//!   `DIR/certes/tracking-<scenario>-<profile>.csv` (one-second bins),
//!   `DIR/certes/paper-comparison.csv` (checks) and an SVG per plotted
//!   scenario and profile (Figures 18, 19, 21, 25, 26).

use super::new_table;
use super::right;
use super::svg::{legend_beside, Chart, Key, LegendEntry, LEGEND_WIDTH};
use crate::error::create_dir;
use crate::report;
use crate::studies::certes::{self, CertesResult, TrackPoint};
use crate::{Check, LabError};
use comfy_table::Cell;
use plotters::prelude::*;
use std::path::Path;

fn secs(v: f64) -> String {
    format!("{v:.3}")
}

fn pct(v: f64) -> String {
    format!("{:+.1} %", 100.0 * v)
}

fn opt_secs(v: Option<f64>) -> String {
    v.map_or("–".into(), secs)
}

fn opt_pct(v: Option<f64>) -> String {
    v.map_or("–".into(), pct)
}

pub fn print_tables(results: &[CertesResult]) {
    let mut i = 0;
    while i < results.len() {
        let first = &results[i];
        let name = first.row.scenario.clone();
        let group: Vec<&CertesResult> = results[i..]
            .iter()
            .take_while(|r| r.row.scenario == name)
            .collect();
        i += group.len();
        println!(
            "## {} — {} ({})\n",
            first.row.figure, first.title, first.row.scenario
        );
        if let Some(reason) = &first.bound_reason {
            println!(
                "Documented bound ±{:.1} %: {reason}\n",
                100.0 * first.row.certes_bound
            );
        }
        print_figure16(&group);
        print_tracking(&group);
        if group.iter().any(|r| r.row.midstream_start_s.is_some()) {
            print_midstream(&group);
        }
    }
    print_summary(results);
}

fn print_figure16(group: &[&CertesResult]) {
    let mut table = new_table();
    table.set_header(vec![
        "profile",
        "truth s",
        "Certes s",
        "err",
        "full model s",
        "err",
        "SYN-to-END s",
        "err",
        "app s",
        "err",
        "M/M/1 s",
        "err",
        "window s",
        "err",
        "SYN drops % p5–p95",
        "conn/s p5–p95",
        "gave up % true/Certes",
    ]);
    for r in group {
        let w = &r.row;
        let paper = r.paper.as_ref();
        let drops = match paper.and_then(|p| p.syn_drop_pct) {
            Some([lo, hi]) => format!(
                "{:.1}–{:.1} (paper {lo}–{hi})",
                w.syn_drop_pct_p5, w.syn_drop_pct_p95
            ),
            None => format!("{:.1}–{:.1}", w.syn_drop_pct_p5, w.syn_drop_pct_p95),
        };
        let rates = match paper.and_then(|p| p.connections_per_s) {
            Some([lo, hi]) => format!(
                "{:.0}–{:.0} (paper {lo}–{hi})",
                w.connections_per_s_p5, w.connections_per_s_p95
            ),
            None => format!(
                "{:.0}–{:.0}",
                w.connections_per_s_p5, w.connections_per_s_p95
            ),
        };
        table.add_row(vec![
            Cell::new(&w.profile),
            right(secs(w.truth_mean_s)),
            right(secs(w.certes_mean_s)),
            right(pct(w.certes_rel_err)),
            right(opt_secs(w.full_mean_s)),
            right(opt_pct(w.full_rel_err)),
            right(secs(w.syn_to_end_mean_s)),
            right(pct(w.syn_to_end_rel_err)),
            right(secs(w.application_mean_s)),
            right(pct(w.application_rel_err)),
            right(opt_secs(w.mm1_mean_s)),
            right(opt_pct(w.mm1_rel_err)),
            right(opt_secs(w.sliding_window_mean_s)),
            right(opt_pct(w.sliding_window_rel_err)),
            right(drops),
            right(rates),
            right(format!(
                "{:.2} / {:.2}",
                w.truth_gave_up_pct, w.certes_gave_up_pct
            )),
        ]);
    }
    println!("{table}");
}

fn print_tracking(group: &[&CertesResult]) {
    let mut table = new_table();
    table.set_header(vec![
        "profile",
        "tracking |err| 250 ms",
        "1 s (p90)",
        "10 s",
        "full model 1 s",
        "SYN-to-END 1 s",
        "M/M/1 1 s",
        "window 1 s",
        "p90 true/Certes s",
        "F̂ at true p90",
        "p99 true/Certes s",
        "F̂ at true p99",
    ]);
    let points = |v: Option<f64>| v.map_or("–".into(), |f| format!("{:+.2} pts", 100.0 * f));
    let abs = |v: f64| format!("{:.2} %", 100.0 * v);
    for r in group {
        let w = &r.row;
        table.add_row(vec![
            Cell::new(&w.profile),
            right(abs(w.certes_interval_err)),
            right(format!(
                "{} ({})",
                abs(w.certes_tracking_err),
                abs(w.certes_tracking_err_p90)
            )),
            right(abs(w.certes_tracking_err_10s)),
            right(w.full_tracking_err.map_or("–".into(), abs)),
            right(abs(w.syn_to_end_tracking_err)),
            right(w.mm1_tracking_err.map_or("–".into(), abs)),
            right(w.sliding_window_tracking_err.map_or("–".into(), abs)),
            right(format!(
                "{} / {}",
                opt_secs(w.truth_p90_s),
                opt_secs(w.certes_p90_s)
            )),
            right(points(w.p90_cdf_err)),
            right(format!(
                "{} / {}",
                opt_secs(w.truth_p99_s),
                opt_secs(w.certes_p99_s)
            )),
            right(points(w.p99_cdf_err)),
        ]);
    }
    println!("{table}");
}

fn print_midstream(group: &[&CertesResult]) {
    let mut table = new_table();
    table.set_header(vec![
        "profile",
        "started at s",
        "|err| vs truth, first FTO",
        "after one FTO",
        "mean err after one FTO",
        "|gap| to estimator from 0, after one FTO",
        "recovered after s (paper: FTO)",
    ]);
    for r in group {
        let w = &r.row;
        let abs = |v: Option<f64>| v.map_or("–".into(), |x| format!("{:.2} %", 100.0 * x));
        table.add_row(vec![
            Cell::new(&w.profile),
            right(
                w.midstream_start_s
                    .map_or("–".into(), |s| format!("{s:.2}")),
            ),
            right(abs(w.midstream_first_fto_err)),
            right(abs(w.midstream_after_fto_err)),
            right(opt_pct(w.midstream_after_fto_rel_err)),
            right(abs(w.midstream_gap_after_fto)),
            right(w.midstream_recovered_after_s.map_or("never".into(), |s| {
                format!("{s:.2} ({:.0})", w.model_frustration_timeout_s)
            })),
        ]);
    }
    println!("{table}");
}

/// Figure 16 over the whole study, beside the paper's statements.
fn print_summary(results: &[CertesResult]) {
    println!("## Figure 16 over all scenarios — ours beside the paper's\n");
    let mut table = new_table();
    table.set_header(vec![
        "scenario",
        "profile",
        "truth s",
        "Certes err (paper: ≤ 2.5 % in 13/16, ≤ 7.4 % all)",
        "full model err (Sec. 3.1)",
        "full model: intervals corrected / unresolved",
        "SYN-to-END err (paper: −5 % … < −80 %)",
        "app err (paper: ≤ −80 %)",
        "M/M/1 err",
        "window err",
    ]);
    for r in results {
        let w = &r.row;
        let mark = if w.certes_rel_err.abs() <= certes::CERTES_BOUND {
            ""
        } else if w.certes_rel_err.abs() <= w.certes_bound {
            " (documented)"
        } else {
            " OUT"
        };
        table.add_row(vec![
            Cell::new(&w.scenario),
            Cell::new(&w.profile),
            right(secs(w.truth_mean_s)),
            right(format!("{}{mark}", pct(w.certes_rel_err))),
            right(opt_pct(w.full_rel_err)),
            right(
                match (w.full_intervals_corrected, w.full_intervals_unresolved) {
                    (Some(c), Some(u)) => format!("{c} / {u}"),
                    _ => "–".into(),
                },
            ),
            right(pct(w.syn_to_end_rel_err)),
            right(pct(w.application_rel_err)),
            right(opt_pct(w.mm1_rel_err)),
            right(opt_pct(w.sliding_window_rel_err)),
        ]);
    }
    println!("{table}\n");
}

/// Writes the study's CSV and SVG files into `dir`.
pub fn write_outputs(
    results: &[CertesResult],
    checks: &[Check],
    dir: &Path,
) -> Result<(), LabError> {
    create_dir(dir)?;
    let path = dir.join("figure16.csv");
    let mut w = csv::Writer::from_path(&path).map_err(|source| LabError::Write {
        path: path.to_path_buf(),
        source,
    })?;
    for r in results {
        w.serialize(&r.row)?;
    }
    w.flush()?;
    for r in results {
        let path = dir.join(format!("tracking-{}-{}.csv", r.row.scenario, r.row.profile));
        let mut w = csv::Writer::from_path(&path).map_err(|source| LabError::Write {
            path: path.to_path_buf(),
            source,
        })?;
        for p in &r.track {
            w.serialize(p)?;
        }
        w.flush()?;
        if let Some(stem) = &r.plot {
            let svg = dir.join(format!("{stem}-{}.svg", r.row.profile));
            plot_tracking(&svg, r).map_err(|source| LabError::Draw {
                path: svg.to_path_buf(),
                source: Box::new(source),
            })?;
        }
    }
    if !checks.is_empty() {
        report::write_checks_csv(&dir.join("paper-comparison.csv"), checks)?;
    }
    Ok(())
}

const TRUTH: RGBColor = RGBColor(0, 0, 0);
const CERTES: RGBColor = RGBColor(214, 39, 40);
const SYN_TO_END: RGBColor = RGBColor(31, 119, 180);
const MIDSTREAM: RGBColor = RGBColor(44, 160, 44);
const DROPS: RGBColor = RGBColor(255, 127, 14);
const QUEUE: RGBColor = RGBColor(148, 103, 189);
const FULL_MODEL: RGBColor = RGBColor(140, 86, 75);

fn err<E: std::fmt::Display>(e: E) -> LabError {
    LabError::Plot(e.to_string())
}

fn line(
    chart: &mut Chart,
    track: &[&TrackPoint],
    value: fn(&TrackPoint) -> Option<f64>,
    color: RGBColor,
    label: &str,
) -> Result<(), LabError> {
    // Bins without a value break the line into segments.
    let mut segments: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
    for p in track {
        match value(p) {
            Some(v) => segments
                .last_mut()
                .expect("one segment")
                .push((p.time_s, v)),
            None => segments.push(Vec::new()),
        }
    }
    let mut labelled = false;
    for points in segments.into_iter().filter(|s| !s.is_empty()) {
        let series = chart
            .draw_series(LineSeries::new(points, color.stroke_width(1)))
            .map_err(err)?;
        if !labelled {
            series
                .label(label.to_string())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], color));
            labelled = true;
        }
    }
    Ok(())
}

/// Response times over time (truth, Certes, SYN-to-END and, when started
/// late, the mid-stream estimator), and below them the SYN drop rate and
/// the accept-queue limit.
fn plot_tracking(path: &Path, r: &CertesResult) -> Result<(), LabError> {
    let track: Vec<&TrackPoint> = r.track.iter().collect();
    let x_hi = track.last().map_or(1.0, |p| p.time_s + 1.0);
    let y_hi = track
        .iter()
        .flat_map(|p| {
            [
                p.truth_s,
                p.certes_s,
                p.syn_to_end_s,
                p.midstream_s,
                p.full_s,
            ]
        })
        .flatten()
        .fold(0.1, f64::max)
        * 1.05;
    let root = SVGBackend::new(path, (1100 + LEGEND_WIDTH, 620)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (plots, legend_area) = root.split_horizontally(1100);
    let (top, bottom) = plots.split_vertically(420);
    let mut chart = ChartBuilder::on(&top)
        .caption(
            format!("{} — {} — {}", r.row.figure, r.title, r.row.profile),
            ("sans-serif", 15),
        )
        .margin(8)
        .x_label_area_size(30)
        .y_label_area_size(55)
        .build_cartesian_2d(0.0..x_hi, 0.0..y_hi)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc("mean response time per second (s)")
        .draw()
        .map_err(err)?;
    line(
        &mut chart,
        &track,
        |p| p.truth_s,
        TRUTH,
        "client-perceived (truth)",
    )?;
    line(&mut chart, &track, |p| p.certes_s, CERTES, "Certes")?;
    if r.row.full_mean_s.is_some() {
        line(
            &mut chart,
            &track,
            |p| p.full_s,
            FULL_MODEL,
            "Certes, full model (Sec. 3.1)",
        )?;
    }
    line(
        &mut chart,
        &track,
        |p| p.syn_to_end_s,
        SYN_TO_END,
        "SYN-to-END",
    )?;
    if r.row.midstream_start_s.is_some() {
        line(
            &mut chart,
            &track,
            |p| p.midstream_s,
            MIDSTREAM,
            "Certes started mid-stream",
        )?;
    }

    let queue_hi = track
        .iter()
        .map(|p| f64::from(p.accept_queue_limit))
        .fold(1.0, f64::max);
    let mut lower = ChartBuilder::on(&bottom)
        .margin(8)
        .x_label_area_size(30)
        .y_label_area_size(55)
        .right_y_label_area_size(55)
        .build_cartesian_2d(0.0..x_hi, 0.0..100.0)
        .map_err(err)?
        .set_secondary_coord(0.0..x_hi, 0.0..queue_hi * 1.1);
    lower
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc("SYN drop rate (%)")
        .draw()
        .map_err(err)?;
    lower
        .configure_secondary_axes()
        .y_desc("accept-queue limit (connections)")
        .draw()
        .map_err(err)?;
    lower
        .draw_series(LineSeries::new(
            track.iter().map(|p| (p.time_s, 100.0 * p.syn_drop_rate)),
            DROPS.stroke_width(1),
        ))
        .map_err(err)?
        .label("SYN drop rate")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], DROPS));
    lower
        .draw_secondary_series(LineSeries::new(
            track
                .iter()
                .map(|p| (p.time_s, f64::from(p.accept_queue_limit))),
            QUEUE.stroke_width(1),
        ))
        .map_err(err)?
        .label("accept-queue limit")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], QUEUE));
    let mut entries = vec![
        LegendEntry::new(Key::Line(TRUTH), "ours: client-perceived (truth)"),
        LegendEntry::new(Key::Line(CERTES), "ours: Certes"),
    ];
    if r.row.full_mean_s.is_some() {
        entries.push(LegendEntry::new(
            Key::Line(FULL_MODEL),
            "ours: Certes, full model (Sec. 3.1)",
        ));
    }
    entries.extend([LegendEntry::new(Key::Line(SYN_TO_END), "ours: SYN-to-END")]);
    if r.row.midstream_start_s.is_some() {
        entries.push(LegendEntry::new(
            Key::Line(MIDSTREAM),
            "ours: Certes started mid-stream",
        ));
    }
    entries.push(LegendEntry::new(
        Key::Line(DROPS),
        "SYN drop rate (left axis)",
    ));
    entries.push(LegendEntry::new(
        Key::Line(QUEUE),
        "accept-queue limit (right axis)",
    ));
    legend_beside(&legend_area, &entries).map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}
