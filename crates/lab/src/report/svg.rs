//! Plot set-up shared by every SVG the lab draws: the palette, padded axis
//! ranges, a line with its points and legend entry, and the legend box.

use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

/// Series colours, in order (the matplotlib "tab10" hues).
pub(crate) const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
    RGBColor(140, 86, 75),
    RGBColor(127, 127, 127),
];

/// A two-dimensional chart on an SVG file.
pub(crate) type Chart<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// What drawing on an SVG file can fail with.
pub(crate) type DrawError = DrawingAreaErrorKind<std::io::Error>;

/// The range of `values` padded by 5 % (at least 0.001) on each side;
/// (0, 1) when there are none.
pub(crate) fn padded_bounds(values: &[f64]) -> (f64, f64) {
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() || !hi.is_finite() {
        return (0.0, 1.0);
    }
    let pad = ((hi - lo) * 0.05).max(1e-3);
    (lo - pad, hi + pad)
}

/// A line through `points` with a dot on each, labelled in the legend.
pub(crate) fn line_with_points(
    chart: &mut Chart,
    points: Vec<(f64, f64)>,
    color: RGBColor,
    label: String,
) -> Result<(), DrawError> {
    chart
        .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?
        .label(label)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], color));
    chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
    Ok(())
}

/// The legend box at `position`: white, translucent, black border; labels
/// in `font_size` points of sans-serif, or plotters' default when `None`.
pub(crate) fn legend<'a, 'b: 'a>(
    chart: &mut Chart<'a, 'b>,
    position: SeriesLabelPosition,
    font_size: Option<u32>,
) -> Result<(), DrawError> {
    let mut labels = chart.configure_series_labels();
    labels
        .position(position)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK);
    if let Some(size) = font_size {
        labels.label_font(("sans-serif", size));
    }
    labels.draw()
}
