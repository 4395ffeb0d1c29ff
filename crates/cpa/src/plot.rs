//! SVG pictures of one transaction: the critical-path time-line with a
//! client and a server lane (the tcpeval paper's Figure 5: "time
//! progressing downward from the top, and lines representing dependence
//! arcs in the PDG … the client is on the left … and the server is on the
//! right"), and a sequence plot of the transaction's packets with the
//! critical path highlighted (the paper's tool "produces time line and
//! sequence plots for visual analysis", Section 3.5).
//!
//! Arcs are coloured by category: server red, client blue, network grey
//! (darker where it exceeds propagation), loss by time-out orange, loss by
//! fast retransmit purple.

use plotters::prelude::*;
use vantage_core::Nanos;

use crate::profile::{Category, PathArc, Transaction};
use crate::{CpaError, Side};

fn plot_error<E: std::fmt::Display>(error: E) -> CpaError {
    CpaError::Plot(error.to_string())
}

fn category_color(category: Category, network_excess: bool) -> RGBColor {
    match category {
        Category::Server => RGBColor(214, 39, 40),
        Category::Client => RGBColor(31, 119, 180),
        Category::Propagation => RGBColor(150, 150, 150),
        Category::NetworkVariation if network_excess => RGBColor(60, 60, 60),
        Category::NetworkVariation => RGBColor(150, 150, 150),
        Category::LossTimeout => RGBColor(255, 127, 14),
        Category::LossFastRetransmit => RGBColor(148, 103, 189),
        Category::LossUnknown => RGBColor(140, 86, 75),
    }
}

fn lane(side: Side) -> f64 {
    match side {
        Side::Client => 0.25,
        Side::Server => 0.75,
    }
}

fn ms_since(time: Nanos, start: Nanos) -> f64 {
    (time - start).as_secs_f64() * 1e3
}

/// Figure 5: the critical path between a client lane (left) and a server
/// lane (right), time downward, in milliseconds from the first event.
pub fn timeline_svg(transaction: &Transaction) -> Result<String, CpaError> {
    let mut svg = String::new();
    let total = (transaction.duration.as_secs_f64() * 1e3).max(1e-3);
    let height = (360 + 14 * transaction.path.len() as u32).min(2400);
    {
        let root = SVGBackend::with_string(&mut svg, (640, height)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let caption = format!(
            "transaction {}: {} -> {}, {:.3} ms",
            transaction.number, transaction.client, transaction.server, total
        );
        root.draw(&Text::new(
            transaction.verdict.clone(),
            (14, height as i32 - 18),
            ("sans-serif", 12).into_font(),
        ))
        .map_err(plot_error)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(caption, ("sans-serif", 14))
            .margin(12)
            .margin_bottom(28)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..1.0, -total * 1.02..total * 0.04)
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .disable_x_axis()
            .y_desc("ms since the first event")
            .y_label_formatter(&|y| format!("{:.1}", -y + 0.0))
            .draw()
            .map_err(plot_error)?;
        for side in [Side::Client, Side::Server] {
            let x = lane(side);
            chart
                .draw_series(LineSeries::new(
                    vec![(x, total * 0.02), (x, -total * 1.02)],
                    BLACK.mix(0.4).stroke_width(1),
                ))
                .map_err(plot_error)?;
            chart
                .draw_series(std::iter::once(Text::new(
                    side.name(),
                    (x - 0.03, total * 0.035),
                    ("sans-serif", 13).into_font(),
                )))
                .map_err(plot_error)?;
        }
        let start = transaction.start;
        for arc in &transaction.path {
            draw_arc(&mut chart, arc, start)?;
        }
        for (index, arc) in transaction.path.iter().enumerate() {
            if arc.from.side != arc.to.side {
                let y = -ms_since(arc.to.time, start);
                let x = match arc.to.side {
                    Side::Client => 0.01,
                    Side::Server => 0.77,
                };
                let label = format!("{}", arc.to.packet);
                let shown: String = label.chars().take(30).collect();
                chart
                    .draw_series(std::iter::once(Text::new(
                        shown,
                        (x, y),
                        ("sans-serif", 10).into_font().color(&BLACK.mix(0.8)),
                    )))
                    .map_err(plot_error)?;
            } else if index == 0 || arc.duration.0 > transaction.duration.0 / 20 {
                let y = -(ms_since(arc.from.time, start) + ms_since(arc.to.time, start)) / 2.0;
                let x = lane(arc.to.side) + 0.015;
                chart
                    .draw_series(std::iter::once(Text::new(
                        format!(
                            "{} {}",
                            arc.category.name(),
                            crate::profile::format_duration(arc.duration)
                        ),
                        (x, y),
                        ("sans-serif", 10)
                            .into_font()
                            .color(&category_color(arc.category, true)),
                    )))
                    .map_err(plot_error)?;
            }
        }
        root.present().map_err(plot_error)?;
    }
    Ok(svg)
}

type Chart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

fn draw_arc(chart: &mut Chart<'_, '_>, arc: &PathArc, start: Nanos) -> Result<(), CpaError> {
    let from = (lane(arc.from.side), -ms_since(arc.from.time, start));
    let to = (lane(arc.to.side), -ms_since(arc.to.time, start));
    let excess = arc.duration > arc.propagation;
    let color = category_color(arc.category, excess);
    let width = if from.0 == to.0 { 4 } else { 2 };
    chart
        .draw_series(LineSeries::new(vec![from, to], color.stroke_width(width)))
        .map_err(plot_error)?;
    chart
        .draw_series(std::iter::once(Circle::new(to, 2, color.filled())))
        .map_err(plot_error)?;
    Ok(())
}

/// A sequence plot of the transaction: sequence number against time (ms
/// from the first event) for both senders' packets as the server saw them
/// (departures of its data, arrivals of the client's ACKs), with packets
/// on the critical path drawn larger. Needs [`crate::Options::keep_packets`].
pub fn sequence_svg(transaction: &Transaction) -> Result<String, CpaError> {
    if transaction.packets.is_empty() {
        return Err(CpaError::PacketsNotKept {
            number: transaction.number,
        });
    }
    let start = transaction.start;
    let data: Vec<_> = transaction
        .packets
        .iter()
        .filter(|e| e.side == Side::Server && e.departure && e.packet.end > e.packet.seq)
        .collect();
    let acks: Vec<(f64, f64)> = transaction
        .packets
        .iter()
        .filter(|e| e.side == Side::Server && !e.departure && e.packet.sender == Side::Client)
        .filter_map(|e| {
            e.packet
                .ack
                .map(|ack| (ms_since(e.time, start), ack as f64))
        })
        .collect();
    let requests: Vec<_> = transaction
        .packets
        .iter()
        .filter(|e| e.side == Side::Client && e.departure && e.packet.payload_len > 0)
        .collect();
    let times = transaction.packets.iter().map(|e| ms_since(e.time, start));
    let x_high = times.fold(1e-3, f64::max) * 1.05;
    let y_low = data
        .iter()
        .map(|e| e.packet.seq as f64)
        .chain(acks.iter().map(|a| a.1))
        .fold(f64::INFINITY, f64::min);
    let y_high = data
        .iter()
        .map(|e| e.packet.end as f64)
        .chain(acks.iter().map(|a| a.1))
        .fold(f64::NEG_INFINITY, f64::max);
    let (y_low, y_high) = if y_low.is_finite() && y_high > y_low {
        (y_low, y_high + (y_high - y_low) * 0.05)
    } else if y_low.is_finite() {
        (y_low - 1.0, y_low + 1.0)
    } else {
        (0.0, 1.0)
    };
    // Everything drawn stays inside the axes (the backend maps to i32).
    let inside = |(x, y): (f64, f64)| (x.clamp(0.0, x_high), y.clamp(y_low, y_high));
    let acks: Vec<(f64, f64)> = acks.into_iter().map(inside).collect();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (800, 500)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!(
                    "transaction {}: server sequence plot ({} bytes)",
                    transaction.number, transaction.response_bytes
                ),
                ("sans-serif", 14),
            )
            .margin(12)
            .x_label_area_size(35)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..x_high, y_low..y_high)
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .x_desc("ms since the first event")
            .y_desc("server sequence number")
            .draw()
            .map_err(plot_error)?;
        let mut ack_line = acks.clone();
        ack_line.sort_by(|a, b| a.0.total_cmp(&b.0));
        chart
            .draw_series(LineSeries::new(
                ack_line,
                RGBColor(44, 160, 44).stroke_width(1),
            ))
            .map_err(plot_error)?
            .label("client ACKs arriving")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], RGBColor(44, 160, 44)));
        for (label, color) in [
            ("server data on the critical path", RGBColor(214, 39, 40)),
            ("server retransmission", RGBColor(255, 127, 14)),
            ("server data", RGBColor(31, 119, 180)),
        ] {
            chart
                .draw_series(std::iter::empty::<PathElement<(f64, f64)>>())
                .map_err(plot_error)?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x + 7, y - 6), (x + 7, y + 6)], color.stroke_width(3))
                });
        }
        for event in &data {
            let x = ms_since(event.time, start);
            let color = if event.on_critical_path {
                RGBColor(214, 39, 40)
            } else if event.packet.retransmission {
                RGBColor(255, 127, 14)
            } else {
                RGBColor(31, 119, 180)
            };
            let width = if event.on_critical_path { 3 } else { 1 };
            chart
                .draw_series(LineSeries::new(
                    vec![
                        inside((x, event.packet.seq as f64)),
                        inside((x, event.packet.end as f64)),
                    ],
                    color.stroke_width(width),
                ))
                .map_err(plot_error)?;
        }
        chart
            .draw_series(requests.iter().map(|e| {
                TriangleMarker::new(
                    inside((ms_since(e.time, start), y_low)),
                    5,
                    RGBColor(31, 119, 180).filled(),
                )
            }))
            .map_err(plot_error)?
            .label("client sends request data")
            .legend(|(x, y)| TriangleMarker::new((x + 7, y), 5, RGBColor(31, 119, 180).filled()));
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(plot_error)?;
        root.present().map_err(plot_error)?;
    }
    Ok(svg)
}
