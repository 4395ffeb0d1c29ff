//! Plot set-up shared by every SVG the lab draws: the palette, padded axis
//! ranges, a line with its points, the papers' values drawn on our axes,
//! error bars, and the legend drawn in a strip beside the plots.

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

/// A value the paper gives, drawn on the axes of our plot.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum PaperMark {
    /// One number at one x: a triangle.
    Point { x: f64, y: f64 },
    /// A range the paper states at one x ("below 7 %"): a translucent bar.
    Range { x: f64, low: f64, high: f64 },
    /// A mean the paper gives over `from..=to` on the x axis: a dashed level.
    Level { from: f64, to: f64, y: f64 },
}

impl PaperMark {
    /// The y values the axes must show for the mark to be seen.
    pub(crate) fn ys(&self) -> Vec<f64> {
        match *self {
            PaperMark::Point { y, .. } | PaperMark::Level { y, .. } => vec![y],
            PaperMark::Range { low, high, .. } => vec![low, high],
        }
    }

    /// The x values the axes must show.
    pub(crate) fn xs(&self) -> Vec<f64> {
        match *self {
            PaperMark::Point { x, .. } | PaperMark::Range { x, .. } => vec![x],
            PaperMark::Level { from, to, .. } => vec![from, to],
        }
    }
}

/// Draws the paper's `marks` in `color` (the colour of our series they
/// belong to); `x_span` sizes a range's bar.
pub(crate) fn paper_marks(
    chart: &mut Chart,
    marks: &[PaperMark],
    color: RGBColor,
    x_span: f64,
) -> Result<(), DrawError> {
    let half = (x_span * 0.012).max(1e-9);
    for mark in marks {
        match *mark {
            PaperMark::Point { x, y } => {
                // A black triangle under a smaller coloured one: an outline.
                chart.draw_series(std::iter::once(TriangleMarker::new(
                    (x, y),
                    8,
                    BLACK.filled(),
                )))?;
                chart.draw_series(std::iter::once(TriangleMarker::new(
                    (x, y),
                    5,
                    color.filled(),
                )))?;
            }
            PaperMark::Range { x, low, high } => {
                chart.draw_series(std::iter::once(Rectangle::new(
                    [(x - half, low), (x + half, high)],
                    color.mix(0.3).filled(),
                )))?;
                chart.draw_series(std::iter::once(Rectangle::new(
                    [(x - half, low), (x + half, high)],
                    BLACK.stroke_width(1),
                )))?;
            }
            PaperMark::Level { from, to, y } => {
                chart.draw_series(DashedLineSeries::new(
                    vec![(from, y), (to, y)],
                    6,
                    4,
                    color.stroke_width(2),
                ))?;
            }
        }
    }
    Ok(())
}

/// Vertical error bars: (x, mean, half-width) in `color`, with caps
/// `x_span` × 1 % wide.
pub(crate) fn error_bars(
    chart: &mut Chart,
    bars: &[(f64, f64, f64)],
    color: RGBColor,
    x_span: f64,
) -> Result<(), DrawError> {
    let cap = x_span * 0.01;
    for &(x, y, h) in bars.iter().filter(|b| b.2 > 0.0) {
        let (lo, hi) = (y - h, y + h);
        chart.draw_series(
            [
                vec![(x, lo), (x, hi)],
                vec![(x - cap, lo), (x + cap, lo)],
                vec![(x - cap, hi), (x + cap, hi)],
            ]
            .into_iter()
            .map(|p| PathElement::new(p, color.stroke_width(1))),
        )?;
    }
    Ok(())
}

/// What a legend entry shows before its label.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Key {
    /// Our measurement: a line with a dot.
    Ours(RGBColor),
    /// Our measurement: a line only (time series).
    Line(RGBColor),
    /// A paper's number: a triangle.
    PaperPoint(RGBColor),
    /// A paper's range: a bar.
    PaperRange(RGBColor),
    /// A paper's mean over a range of x: a dashed line.
    PaperLevel(RGBColor),
    /// The 95 % interval over seeds.
    Interval,
}

/// One entry of a legend drawn beside the plots.
pub(crate) struct LegendEntry {
    pub key: Key,
    pub label: String,
}

impl LegendEntry {
    pub(crate) fn new(key: Key, label: impl Into<String>) -> Self {
        LegendEntry {
            key,
            label: label.into(),
        }
    }
}

/// The width of the strip [`legend_beside`] draws in.
pub(crate) const LEGEND_WIDTH: u32 = 260;

/// Draws `entries` top-down in `area`, a strip beside the plots, so the
/// legend never sits on the data.
pub(crate) fn legend_beside(
    area: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    entries: &[LegendEntry],
) -> Result<(), DrawError> {
    let font = ("sans-serif", 12).into_font();
    let row = 18;
    let mut y = 30;
    for entry in entries {
        let (x0, x1, mid) = (8, 30, y + 6);
        match entry.key {
            Key::Ours(c) => {
                area.draw(&PathElement::new(
                    vec![(x0, mid), (x1, mid)],
                    c.stroke_width(2),
                ))?;
                area.draw(&Circle::new(((x0 + x1) / 2, mid), 3, c.filled()))?;
            }
            Key::Line(c) => {
                area.draw(&PathElement::new(
                    vec![(x0, mid), (x1, mid)],
                    c.stroke_width(2),
                ))?;
            }
            Key::PaperPoint(c) => {
                area.draw(&TriangleMarker::new(
                    ((x0 + x1) / 2, mid),
                    8,
                    BLACK.filled(),
                ))?;
                area.draw(&TriangleMarker::new(((x0 + x1) / 2, mid), 5, c.filled()))?;
            }
            Key::PaperRange(c) => {
                area.draw(&Rectangle::new(
                    [(x0 + 6, mid - 7), (x1 - 6, mid + 7)],
                    c.mix(0.3).filled(),
                ))?;
                area.draw(&Rectangle::new(
                    [(x0 + 6, mid - 7), (x1 - 6, mid + 7)],
                    BLACK.stroke_width(1),
                ))?;
            }
            Key::PaperLevel(c) => {
                area.draw(&PathElement::new(
                    vec![(x0, mid), (x0 + 8, mid)],
                    c.stroke_width(2),
                ))?;
                area.draw(&PathElement::new(
                    vec![(x0 + 13, mid), (x1, mid)],
                    c.stroke_width(2),
                ))?;
            }
            Key::Interval => {
                let c = BLACK;
                let m = (x0 + x1) / 2;
                area.draw(&PathElement::new(
                    vec![(m, mid - 6), (m, mid + 6)],
                    c.stroke_width(1),
                ))?;
                area.draw(&PathElement::new(
                    vec![(m - 3, mid - 6), (m + 3, mid - 6)],
                    c,
                ))?;
                area.draw(&PathElement::new(
                    vec![(m - 3, mid + 6), (m + 3, mid + 6)],
                    c,
                ))?;
            }
        }
        area.draw(&Text::new(entry.label.clone(), (x1 + 6, y), font.clone()))?;
        y += row;
    }
    Ok(())
}
