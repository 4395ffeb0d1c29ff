//! `p99-vs-success.svg`: p99 connection delay against success, one panel
//! per client profile.

use std::path::Path;

use plotters::prelude::*;

use super::error::ExperimentRunError;
use super::plan::Experiment;
use super::results::{ExperimentReport, ResultRow};
use crate::report::svg::PALETTE;

fn plot_error<E: std::fmt::Display>(e: E) -> ExperimentRunError {
    ExperimentRunError::Plot(e.to_string())
}

/// p99 connection delay against success %, one panel per profile: live
/// runs filled, the simulator on the same arrivals hollow, one colour per
/// variant.
pub fn plot(
    report: &ExperimentReport,
    x: &Experiment,
    path: &Path,
) -> Result<(), ExperimentRunError> {
    let panels = x.profiles.len().max(1);
    let root = SVGBackend::new(path, (520 * panels as u32, 440)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let areas = root.split_evenly((1, panels));
    for (area, profile) in areas.iter().zip(&x.profiles) {
        let rows: Vec<&ResultRow> = report
            .rows
            .iter()
            .filter(|r| &r.profile == profile && r.source != "sim-long" && r.summary.is_some())
            .collect();
        let xs: Vec<f64> = rows
            .iter()
            .filter_map(|r| r.summary.as_ref().map(|m| m.throughput_pct))
            .collect();
        let ys: Vec<f64> = rows
            .iter()
            .filter_map(|r| r.summary.as_ref().map(|m| m.delay_p99_s))
            .collect();
        let x_lo = xs.iter().copied().fold(100.0, f64::min);
        let x_lo = (x_lo - 2.0).max(0.0).floor();
        let y_hi = ys.iter().copied().fold(1.0, f64::max) * 1.15;
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!("p99 connection delay vs success — {profile} (● live, ○ simulator)"),
                ("sans-serif", 16),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(x_lo..100.5, 0.0..y_hi)
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .x_desc("connection attempts that succeed (%)")
            .y_desc("p99 connection-establishment delay (s)")
            .draw()
            .map_err(plot_error)?;
        for (i, variant) in x.variants.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            let point = |source: &str| {
                rows.iter()
                    .find(|r| r.variant == variant.id && r.source == source)
                    .and_then(|r| r.summary.as_ref())
                    .map(|m| (m.throughput_pct, m.delay_p99_s))
            };
            let live = point("live");
            let sim = point("sim-same-arrivals");
            if live.is_none() && sim.is_none() {
                continue;
            }
            let name = format!("({}) {}", variant.id, variant.label);
            let label_style = ("sans-serif", 13).into_font().color(&color);
            if let Some(p) = live {
                chart
                    .draw_series(std::iter::once(
                        EmptyElement::at(p)
                            + Circle::new((0, 0), 6, color.filled())
                            + Text::new(variant.id.clone(), (8, -14), label_style.clone()),
                    ))
                    .map_err(plot_error)?
                    .label(name.clone())
                    .legend(move |(px, py)| Circle::new((px + 7, py), 5, color.filled()));
            }
            if let Some(p) = sim {
                let series = chart
                    .draw_series(std::iter::once(
                        EmptyElement::at(p)
                            + Circle::new((0, 0), 6, color.stroke_width(2))
                            + Text::new(format!("{}′", variant.id), (8, 2), label_style),
                    ))
                    .map_err(plot_error)?;
                if live.is_none() {
                    series.label(name).legend(move |(px, py)| {
                        Circle::new((px + 7, py), 5, color.stroke_width(2))
                    });
                }
            }
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 12))
            .draw()
            .map_err(plot_error)?;
    }
    root.present().map_err(plot_error)?;
    Ok(())
}
