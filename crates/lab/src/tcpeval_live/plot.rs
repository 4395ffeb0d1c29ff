//! Figure 4 (and 6's short path): the mean critical-path profile of each
//! test as a stacked bar, one panel per file size and path.

use std::path::Path;

use plotters::prelude::*;

use super::report::{TcpevalReport, CATEGORY_NAMES};
use super::run::PathName;

const COLOURS: [RGBColor; 7] = [
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0x17, 0xbe, 0xcf),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x7f, 0x7f, 0x7f),
];

/// Writes the plot to `path`.
pub fn figure4(r: &TcpevalReport, path: &Path) -> Result<(), String> {
    draw(r, path).map_err(|e| e.to_string())
}

fn draw(r: &TcpevalReport, path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let mut sizes: Vec<u64> = r.rows.iter().map(|row| row.bytes).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let panels: Vec<(PathName, u64)> = PathName::BOTH
        .into_iter()
        .flat_map(|p| sizes.iter().map(move |&b| (p, b)))
        .collect();
    let width = 360 * sizes.len().max(1) as u32 + 180;
    let root = SVGBackend::new(path, (width, 760)).into_drawing_area();
    root.fill(&WHITE)?;
    let (plots, legend) = root.split_horizontally(width - 180);
    let areas = plots.split_evenly((2, sizes.len().max(1)));
    for (area, (p, bytes)) in areas.iter().zip(&panels) {
        let rows: Vec<_> = r
            .rows
            .iter()
            .filter(|row| row.path == *p && row.bytes == *bytes)
            .collect();
        let top = rows
            .iter()
            .map(|row| row.mean_s.iter().sum::<f64>() * 1e3)
            .fold(0.0, f64::max)
            .max(1.0)
            * 1.1;
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!("{} KB, {} path", bytes / 1024, p.name()),
                ("sans-serif", 16),
            )
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..rows.len().max(1) as f64, 0.0..top)?;
        let labels: Vec<String> = rows.iter().map(|row| row.label.clone()).collect();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .light_line_style(WHITE)
            .x_labels(rows.len().max(1) * 2 + 1)
            .x_label_formatter(&|x| {
                let i = (*x - 0.5).round();
                if (x - 0.5 - i).abs() < 0.01 && i >= 0.0 && (i as usize) < labels.len() {
                    labels[i as usize].clone()
                } else {
                    String::new()
                }
            })
            .y_desc("mean time on the critical path (ms)")
            .draw()?;
        for (i, row) in rows.iter().enumerate() {
            let mut base = 0.0;
            for (c, colour) in COLOURS.iter().enumerate() {
                let h = row.mean_s[c] * 1e3;
                if h <= 0.0 {
                    continue;
                }
                chart.draw_series(std::iter::once(Rectangle::new(
                    [(i as f64 + 0.15, base), (i as f64 + 0.85, base + h)],
                    colour.filled(),
                )))?;
                base += h;
            }
        }
    }
    for (c, (name, colour)) in CATEGORY_NAMES.iter().zip(COLOURS).enumerate() {
        let y = 60 + 28 * c as i32;
        legend.draw(&Rectangle::new([(10, y), (28, y + 16)], colour.filled()))?;
        legend.draw(&Text::new(
            name.to_string(),
            (34, y + 2),
            ("sans-serif", 13).into_font(),
        ))?;
    }
    root.present()?;
    Ok(())
}
