//! SVG plots per figure: the Section 6 metrics against the swept parameter
//! (one line per filter, or per series value), and for Figures 4 and 5 the
//! arrivals and drops over time.

use super::svg::{legend, line_with_points, padded_bounds, PALETTE};
use crate::LabError;
use plotters::prelude::*;
use std::path::Path;
use vantage_sim::syn::scenario::{Kind, Scenario};
use vantage_sim::syn::{Row, ScenarioResult};

/// The first six colours of the palette: the figures' lines cycle through six.
const COLORS: &[RGBColor] = PALETTE.split_at(6).0;

fn err<E: std::fmt::Display>(e: E) -> LabError {
    LabError::Plot(e.to_string())
}

/// Writes the figure's SVG files into `dir`, one per client population.
pub fn figure(dir: &Path, s: &Scenario, r: &ScenarioResult) -> Result<(), LabError> {
    for clients in &s.clients {
        let path = dir.join(format!("{}-{}.svg", s.figure, clients.name));
        let rows: Vec<&Row> = r
            .rows
            .iter()
            .filter(|x| x.profile == clients.name)
            .collect();
        match s.kind {
            Kind::Sweep => sweep(&path, s, &rows, &clients.name)?,
            Kind::Resync | Kind::Convergence => timeline(&path, s, r, &clients.name)?,
        }
    }
    Ok(())
}

type Metric = (&'static str, fn(&Row) -> f64);

fn sweep(path: &Path, s: &Scenario, rows: &[&Row], profile: &str) -> Result<(), LabError> {
    let Some(axis) = &s.sweep else { return Ok(()) };
    let metrics: [Metric; 3] = [
        ("throughput (%)", |r| r.summary.throughput_pct),
        ("connection delay (s)", |r| r.summary.delay_mean_s),
        ("average cost", |r| r.summary.cost_mean),
    ];
    // Lines: one per filter, or per series value for a one-filter scenario.
    let by_series = s.filters.len() == 1 && s.series.is_some();
    let lines: Vec<(String, Vec<&Row>)> = if by_series {
        s.series_values()
            .into_iter()
            .map(|v| {
                let label = format!("r = {}", v.unwrap_or(0.0));
                (
                    label,
                    rows.iter()
                        .copied()
                        .filter(|x| x.series_value == v)
                        .collect(),
                )
            })
            .collect()
    } else {
        s.filters
            .iter()
            .map(|f| {
                (
                    f.name().to_string(),
                    rows.iter()
                        .copied()
                        .filter(|x| x.filter == f.name())
                        .collect(),
                )
            })
            .collect()
    };
    let log_x = axis.parameter == "filter.bucket_size";
    let xs: Vec<f64> = axis
        .values
        .iter()
        .map(|&v| if log_x { v.max(1.0).log2() } else { v })
        .collect();
    let (x_lo, x_hi) = padded_bounds(&xs);
    let panels = if by_series { 1 } else { 3 };
    let root = SVGBackend::new(path, (420 * panels as u32, 360)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let areas = root.split_evenly((1, panels));
    let shown = if by_series {
        &metrics[2..]
    } else {
        &metrics[..]
    };
    for (area, (name, metric)) in areas.iter().zip(shown) {
        let ys: Vec<f64> = rows.iter().map(|r| metric(r)).collect();
        let (y_lo, y_hi) = padded_bounds(&ys);
        let x_label = if log_x {
            format!("log2 {}", axis.parameter)
        } else {
            axis.parameter.clone()
        };
        let mut chart = ChartBuilder::on(area)
            .caption(format!("{} — {profile}", s.figure), ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(50)
            .build_cartesian_2d(x_lo..x_hi, y_lo..y_hi)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc(*name)
            .draw()
            .map_err(err)?;
        for (i, (label, line)) in lines.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let points: Vec<(f64, f64)> = line
                .iter()
                .filter_map(|r| {
                    let x = r.value?;
                    Some((if log_x { x.max(1.0).log2() } else { x }, metric(r)))
                })
                .collect();
            line_with_points(&mut chart, points, color, label.clone()).map_err(err)?;
        }
        // Throughput falls with the swept value, delay and cost rise: keep
        // the legend in the corner the lines leave free.
        let corner = if name.starts_with("throughput") {
            SeriesLabelPosition::LowerLeft
        } else {
            SeriesLabelPosition::UpperLeft
        };
        legend(&mut chart, corner, None).map_err(err)?;
    }
    root.present().map_err(err)?;
    Ok(())
}

fn timeline(path: &Path, s: &Scenario, r: &ScenarioResult, profile: &str) -> Result<(), LabError> {
    let lines: Vec<_> = r
        .timelines
        .iter()
        .filter(|t| t.profile == profile)
        .collect();
    if lines.is_empty() {
        return Ok(());
    }
    let root = SVGBackend::new(path, (900, 300 * lines.len() as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let areas = root.split_evenly((lines.len(), 1));
    for (area, t) in areas.iter().zip(&lines) {
        let x_hi = (t.bins.len() as f64 * t.bin_s).max(t.bin_s);
        let y_hi = t.bins.iter().map(|b| b.arrivals).max().unwrap_or(1).max(1) as f64;
        let label = match (&s.sweep, t.value) {
            (Some(a), Some(v)) => format!("{} = {v}", a.parameter),
            _ => String::new(),
        };
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!("{} — {profile} — {} — {label}", s.figure, t.filter),
                ("sans-serif", 15),
            )
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(50)
            .build_cartesian_2d(0.0..x_hi, 0.0..y_hi * 1.05)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("time (s)")
            .y_desc(format!("SYNs per {:.0} ms", t.bin_s * 1e3))
            .draw()
            .map_err(err)?;
        let series = |f: fn(&vantage_sim::syn::run::Bin) -> u64| -> Vec<(f64, f64)> {
            t.bins
                .iter()
                .enumerate()
                .map(|(i, b)| (i as f64 * t.bin_s, f(b) as f64))
                .collect()
        };
        for (i, (name, f)) in [
            (
                "arrivals",
                (|b: &vantage_sim::syn::run::Bin| b.arrivals) as fn(&_) -> u64,
            ),
            ("dropped", |b| b.dropped),
        ]
        .into_iter()
        .enumerate()
        {
            let color = COLORS[i];
            chart
                .draw_series(LineSeries::new(series(f), color.stroke_width(1)))
                .map_err(err)?
                .label(name)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], color));
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight, None).map_err(err)?;
    }
    root.present().map_err(err)?;
    Ok(())
}
