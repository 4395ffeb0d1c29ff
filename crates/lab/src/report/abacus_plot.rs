//! SVG plots per figure: the Section 6 metrics against the swept parameter
//! (one line per filter, or per series value) with the 95 % interval over
//! seeds as error bars where a point pools two or more repetitions
//! ([`Spread`]), and for Figures 4 and 5 the arrivals and drops over time.

use super::svg::{
    error_bars, legend_beside, line_with_points, padded_bounds, paper_marks, Key, LegendEntry,
    PaperMark, LEGEND_WIDTH, PALETTE,
};
use crate::studies::abacus::checks::{
    FIG11_MEAN_OVER, FIG11_MEAN_TIMEOUTS_PCT, FIG8_REJECT_BELOW_AF_POINTS,
    FIG8_REJECT_BELOW_GREEDY_POINTS, FIG8_REJECT_COST_ABOVE_AF_PCT, MODERATE_STD_DEV,
};
use crate::studies::abacus::spread::Spread;
use crate::LabError;
use plotters::prelude::*;
use std::path::Path;
use vantage_sim::syn::filters::FilterKind;
use vantage_sim::syn::scenario::{Kind, Scenario};
use vantage_sim::syn::{Row, ScenarioResult};

/// The first six colours of the palette: the figures' lines cycle through six.
const COLORS: &[RGBColor] = PALETTE.split_at(6).0;

fn err<E: std::fmt::Display>(e: E) -> LabError {
    LabError::Plot(e.to_string())
}

/// Writes the figure's SVG files into `dir`, one per client population.
pub fn figure(dir: &Path, s: &Scenario, r: &ScenarioResult) -> Result<(), LabError> {
    for clients in &s.populations {
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

/// A panel: its axis label, the row's value and its half-width.
type Metric = (&'static str, fn(&Row) -> f64, fn(&Spread) -> Option<f64>);

/// The swept parameter as an axis label with its unit.
fn axis_label(parameter: &str) -> String {
    match parameter {
        "workload.std_dev" => "burstiness σ (requests/s)".into(),
        "filter.window_s" => "Abacus window S (s)".into(),
        "filter.reject_cost" => "reject cost r (s)".into(),
        "filter.bucket_size" => "bucket size W (tokens, log2 scale)".into(),
        "workload.spread_ms" => "burst spread (ms)".into(),
        "filter.refill_rate" => "refill rate r_t (tokens/s)".into(),
        "network.jitter_ms" => "delay jitter, ± (ms, log10 scale)".into(),
        other => other.to_string(),
    }
}

/// The paper's numbers for one panel of a sweep: (line index, mark, what).
type Marks = Vec<(usize, PaperMark, String)>;

/// The paper's numbers a sweep figure shows, by panel (the metric's name):
/// Figure 11's mean time-outs over r ∈ [0, 500] per filter, and Figure 8's
/// gaps at moderate burstiness, placed relative to our Abacus Filter and
/// Greedy (the paper gives the gaps, not the levels).
fn paper_marks_of(figure: &str, metric: &str, lines: &[(String, Vec<&Row>)]) -> Marks {
    let index = |kind: FilterKind| lines.iter().position(|(l, _)| l == kind.name());
    let at = |kind: FilterKind, x: f64| -> Option<&Row> {
        let i = index(kind)?;
        lines[i].1.iter().copied().find(|r| r.value == Some(x))
    };
    let mut out = Vec::new();
    match (figure, metric) {
        ("fig11", TIMEOUTS) => {
            let (from, to) = FIG11_MEAN_OVER;
            for (kind, y) in FIG11_MEAN_TIMEOUTS_PCT {
                if let Some(i) = index(kind) {
                    out.push((
                        i,
                        PaperMark::Level { from, to, y },
                        format!("paper Fig. 11 (mean, r ∈ [{from}, {to}]): {}", kind.name()),
                    ));
                }
            }
        }
        ("fig8", THROUGHPUT) => {
            let m = MODERATE_STD_DEV;
            if let Some(reject) = index(FilterKind::TbfReject) {
                for (kind, gap) in [
                    (FilterKind::Abacus, FIG8_REJECT_BELOW_AF_POINTS),
                    (FilterKind::Greedy, FIG8_REJECT_BELOW_GREEDY_POINTS),
                ] {
                    if let Some(r) = at(kind, m) {
                        out.push((
                            reject,
                            PaperMark::Point {
                                x: m,
                                y: r.summary.throughput_pct - gap,
                            },
                            format!("paper Fig. 8: Reject {gap} pts below our {}", kind.name()),
                        ));
                    }
                }
            }
        }
        ("fig8", COST) => {
            let m = MODERATE_STD_DEV;
            if let (Some(reject), Some(af)) =
                (index(FilterKind::TbfReject), at(FilterKind::Abacus, m))
            {
                out.push((
                    reject,
                    PaperMark::Point {
                        x: m,
                        y: af.summary.cost_mean * (1.0 + FIG8_REJECT_COST_ABOVE_AF_PCT / 100.0),
                    },
                    format!("paper Fig. 8: Reject +{FIG8_REJECT_COST_ABOVE_AF_PCT} % over our AF"),
                ));
            }
        }
        _ => {}
    }
    out
}

const THROUGHPUT: &str = "throughput (%)";
const COST: &str = "mean cost (s)";
const TIMEOUTS: &str = "requests timed out (%)";

fn sweep(path: &Path, s: &Scenario, rows: &[&Row], profile: &str) -> Result<(), LabError> {
    let Some(axis) = &s.sweep else { return Ok(()) };
    let mut metrics: Vec<Metric> = vec![
        (
            THROUGHPUT,
            |r| r.summary.throughput_pct,
            |s| s.throughput_pct_ci95,
        ),
        (
            "mean connection delay (s)",
            |r| r.summary.delay_mean_s,
            |s| s.delay_mean_s_ci95,
        ),
        (COST, |r| r.summary.cost_mean, |s| s.cost_mean_ci95),
    ];
    if s.figure == "fig11" {
        metrics.push((
            TIMEOUTS,
            |r| r.summary.timeouts_pct,
            |s| s.timeouts_pct_ci95,
        ));
    }
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
    // Values that span orders of magnitude go on a log scale.
    let to_x = |v: f64| match axis.parameter.as_str() {
        "filter.bucket_size" => v.max(1.0).log2(),
        "network.jitter_ms" => v.max(1e-3).log10(),
        _ => v,
    };
    let shown: Vec<Metric> = if by_series {
        metrics.into_iter().filter(|m| m.0 == COST).collect()
    } else {
        metrics
    };
    let marks: Vec<Marks> = shown
        .iter()
        .map(|(name, _, _)| paper_marks_of(&s.figure, name, &lines))
        .collect();
    let mut xs: Vec<f64> = axis.values.iter().map(|&v| to_x(v)).collect();
    xs.extend(marks.iter().flatten().flat_map(|(_, m, _)| m.xs()));
    let (x_lo, x_hi) = padded_bounds(&xs);
    let panels = shown.len() as u32;
    let root = SVGBackend::new(path, (400 * panels + LEGEND_WIDTH, 380)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (plots, legend_area) = root.split_horizontally(400 * panels);
    let areas = plots.split_evenly((1, panels as usize));
    let spreads: Vec<Spread> = rows.iter().map(|r| Spread::of(r)).collect();
    let mut intervals = 0usize;
    for ((area, (name, metric, half)), marks) in areas.iter().zip(&shown).zip(&marks) {
        let mut ys: Vec<f64> = rows
            .iter()
            .zip(&spreads)
            .flat_map(|(r, sp)| {
                let h = half(sp).unwrap_or(0.0);
                [metric(r) - h, metric(r) + h]
            })
            .collect();
        ys.extend(marks.iter().flat_map(|(_, m, _)| m.ys()));
        let (y_lo, y_hi) = padded_bounds(&ys);
        let mut chart = ChartBuilder::on(area)
            .caption(format!("{} — {profile}", s.figure), ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(55)
            .build_cartesian_2d(x_lo..x_hi, y_lo..y_hi)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc(axis_label(&axis.parameter))
            .y_desc(*name)
            .draw()
            .map_err(err)?;
        for (i, (label, line)) in lines.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let points: Vec<(f64, f64)> = line
                .iter()
                .filter_map(|r| Some((to_x(r.value?), metric(r))))
                .collect();
            line_with_points(&mut chart, points, color, label.clone()).map_err(err)?;
            // Each line's bars a little to the side, so lines that share
            // a point do not hide each other's bars.
            let dodge = (i as f64 - (lines.len() as f64 - 1.0) / 2.0) * 0.008 * (x_hi - x_lo);
            let bars: Vec<(f64, f64, f64)> = line
                .iter()
                .filter_map(|r| Some((to_x(r.value?) + dodge, metric(r), half(&Spread::of(r))?)))
                .collect();
            intervals += bars.len();
            error_bars(&mut chart, &bars, color, x_hi - x_lo).map_err(err)?;
            let own: Vec<PaperMark> = marks
                .iter()
                .filter(|(j, _, _)| *j == i)
                .map(|(_, m, _)| m.clone())
                .collect();
            paper_marks(&mut chart, &own, color, x_hi - x_lo).map_err(err)?;
        }
    }
    let mut entries: Vec<LegendEntry> = lines
        .iter()
        .enumerate()
        .map(|(i, (l, _))| {
            LegendEntry::new(Key::Ours(COLORS[i % COLORS.len()]), format!("ours: {l}"))
        })
        .collect();
    for (i, mark, what) in marks.iter().flatten() {
        let color = COLORS[i % COLORS.len()];
        let key = match mark {
            PaperMark::Point { .. } => Key::PaperPoint(color),
            PaperMark::Range { .. } => Key::PaperRange(color),
            PaperMark::Level { .. } => Key::PaperLevel(color),
        };
        entries.push(LegendEntry::new(key, what.clone()));
    }
    if intervals > 0 {
        let n = rows
            .iter()
            .map(|r| r.per_repetition.len())
            .max()
            .unwrap_or(0);
        entries.push(LegendEntry::new(
            Key::Interval,
            format!("95 % interval over {n} seeds"),
        ));
    }
    legend_beside(&legend_area, &entries).map_err(err)?;
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
    let root =
        SVGBackend::new(path, (900 + LEGEND_WIDTH, 300 * lines.len() as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (plots, legend_area) = root.split_horizontally(900);
    let areas = plots.split_evenly((lines.len(), 1));
    for (area, t) in areas.iter().zip(&lines) {
        let x_hi = (t.bins.len() as f64 * t.bin_s).max(t.bin_s);
        let y_hi = t.bins.iter().map(|b| b.arrivals).max().unwrap_or(1).max(1) as f64;
        let label = match (&s.sweep, t.value) {
            (Some(a), Some(v)) => format!("{} = {v}", axis_label(&a.parameter)),
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
    }
    legend_beside(
        &legend_area,
        &[
            LegendEntry::new(Key::Line(COLORS[0]), "ours: SYN arrivals"),
            LegendEntry::new(Key::Line(COLORS[1]), "ours: SYNs dropped"),
        ],
    )
    .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use vantage_sim::syn::metrics::Summary;
    use vantage_sim::syn::Repetition;

    const FIG8: &str = r#"
[scenario]
study = "abacus"
figure = "fig8"
title = "t"
kind = "sweep"
populations = ["windows-9x-nt"]
filters = ["tbf", "abacus"]
repetitions = 3
horizon_s = 60

[workload]
kind = "mwm"
mean = 100
std_dev = 40
hurst = 0.8
scales = 10

[filter]
bucket_size = 120
refill_rate = 120
window_s = 50
greedy_window_s = 50
reject_cost = 75

[sweep]
parameter = "workload.std_dev"
values = [10, 40]
"#;

    fn summary(level: f64) -> Summary {
        Summary {
            requests: 1000,
            throughput_pct: 80.0 + level,
            delay_mean_s: 1.0 + level,
            delay_p50_s: 0.0,
            delay_p95_s: 3.0,
            delay_p99_s: 9.0,
            cost_mean: 20.0 + level,
            timeouts_pct: 1.0,
            rejects_pct: 0.0,
            retransmissions_mean: 0.5,
        }
    }

    /// Rows of [`FIG8`] whose repetitions measured `levels` (shifted per
    /// filter and σ), the pooled numbers their mean.
    fn result(s: &Scenario, levels: &[f64]) -> ScenarioResult {
        let mut rows = Vec::new();
        for (fi, kind) in s.filters.iter().enumerate() {
            for (vi, value) in s.sweep_values().into_iter().enumerate() {
                let shift = (2 * fi + vi) as f64;
                let mean = levels.iter().sum::<f64>() / levels.len() as f64;
                rows.push(Row {
                    study: s.study.clone(),
                    figure: s.figure.clone(),
                    profile: "windows-9x-nt".into(),
                    filter: kind.name(),
                    parameter: Some("workload.std_dev".into()),
                    value,
                    series_parameter: None,
                    series_value: None,
                    summary: summary(shift + mean),
                    extras: BTreeMap::new(),
                    per_repetition: levels
                        .iter()
                        .map(|l| Repetition {
                            summary: summary(shift + l),
                            settle_s: 0.0,
                        })
                        .collect(),
                });
            }
        }
        ScenarioResult {
            rows,
            ..ScenarioResult::default()
        }
    }

    fn drawn(name: &str, levels: &[f64]) -> String {
        let s = Scenario::from_toml(FIG8, "fig8.toml").unwrap();
        let dir =
            std::env::temp_dir().join(format!("vantage-abacus-plot-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        figure(&dir, &s, &result(&s, levels)).unwrap();
        let svg = std::fs::read_to_string(dir.join("fig8-windows-9x-nt.svg")).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        svg
    }

    /// With three repetitions per point every point of the three panels
    /// gets a bar (a vertical line and two caps) and the legend says so;
    /// with one repetition there are no bars.
    #[test]
    fn sweep_plots_draw_the_interval_over_seeds_as_error_bars() {
        let with = drawn("three", &[-1.0, 0.0, 1.0]);
        let without = drawn("one", &[0.0]);
        assert!(with.contains("95 % interval over 3 seeds"), "{with}");
        assert!(!without.contains("interval over"));
        // Thin lines in a series' colour are bars; the lines themselves
        // are 2 px wide, axes and the legend's key black.
        let bar_lines = |svg: &str| {
            COLORS[..2]
                .iter()
                .map(|c| {
                    let stroke = format!(
                        "stroke=\"#{:02X}{:02X}{:02X}\" stroke-width=\"1\"",
                        c.0, c.1, c.2
                    );
                    svg.matches(&stroke).count()
                })
                .sum::<usize>()
        };
        // 2 filters × 2 σ × 3 panels, each bar a line and two caps.
        assert_eq!(bar_lines(&with), 2 * 2 * 3 * 3);
        assert_eq!(bar_lines(&without), 0);
    }

    #[test]
    fn figure_11_carries_the_papers_mean_time_outs_per_filter() {
        let lines: Vec<(String, Vec<&Row>)> = FilterKind::ALL
            .iter()
            .map(|k| (k.name().to_string(), Vec::new()))
            .collect();
        let marks = paper_marks_of("fig11", TIMEOUTS, &lines);
        assert_eq!(marks.len(), FIG11_MEAN_TIMEOUTS_PCT.len());
        for (kind, y) in FIG11_MEAN_TIMEOUTS_PCT {
            let i = lines.iter().position(|(l, _)| l == kind.name()).unwrap();
            assert!(marks.iter().any(|(j, m, _)| *j == i
                && *m
                    == PaperMark::Level {
                        from: FIG11_MEAN_OVER.0,
                        to: FIG11_MEAN_OVER.1,
                        y
                    }));
        }
        assert!(paper_marks_of("fig11", THROUGHPUT, &lines).is_empty());
        // Figure 8's gaps need our Abacus and Greedy rows at σ = 55.
        assert!(paper_marks_of("fig8", THROUGHPUT, &lines).is_empty());
        assert!(paper_marks_of("fig9", COST, &lines).is_empty());
    }
}
