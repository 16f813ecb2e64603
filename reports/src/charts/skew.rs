//! Clock skew: admitted ÷ bound against skew, client time against server time.

use std::path::Path;

use plotters::prelude::*;

use crate::lineup::Lineup;
use crate::schema::Results;
use crate::style::{ordered, tidy, GREY, OI_BLUE, OI_VERMILLION};

use super::draw::*;
use super::series::*;

pub(super) fn skew(r: &Results, path: &Path) -> anyhow::Result<Drawn> {
    let title = "Clock skew: over-admission against skew, client time versus server time";
    let sweep = &r.skew_sweep;
    if sweep.is_empty() {
        return placeholder(path, title, "no data for this chart: run the clock-skew sweep (skew_sweep is empty)");
    }
    let ratio = |p: &crate::schema::SkewPoint| if p.bound == 0 { 0.0 } else { p.admitted as f64 / p.bound as f64 };
    let lineup = Lineup::of(r);
    let algorithms = lineup.order(sweep.iter().map(|p| p.subject.as_str()));
    let sources = ordered(sweep.iter().map(|p| p.time_source.as_str()), &["client", "server"]);
    let skews = distinct(sweep.iter().map(|p| p.skew_ms as f64));
    let xmax = skews.last().copied().unwrap_or(1.0).max(1.0) * 1.04;
    let xmin = skews.first().copied().unwrap_or(0.0).min(0.0) * 1.04;
    let ymax = headroom(sweep.iter().map(ratio).fold(0.0, f64::max), 1.0);
    let source_color = |s: &str| match s {
        "client" => OI_VERMILLION,
        "server" => OI_BLUE,
        _ => GREY,
    };
    let mut legend: Vec<LegendItem> = sources
        .iter()
        .map(|s| {
            let label = match s.as_str() {
                "client" => "client time (each instance's clock)".to_string(),
                "server" => "server time (Redis TIME)".to_string(),
                other => format!("{other} time"),
            };
            LegendItem::new(label, Swatch::Line(source_color(s)))
        })
        .collect();
    legend.push(LegendItem::new("bound (admitted = bound)", Swatch::Dashed(GREY)));
    let (rows, cols) = grid(algorithms.len());
    let head = header_height(&legend);
    let (root, log) = canvas(path, head + rows as u32 * 290 + 10)?;
    let (top, body) = root.split_vertically(head);
    let seeds = distinct(sweep.iter().map(|p| p.seed as f64)).len();
    header(
        &top,
        title,
        &format!("admitted ÷ the algorithm's bound, mean of {seeds} seed(s); above 1 the bound is broken"),
        &legend,
    )?;
    let body = body.margin(0, 10, 6, 6);
    let fmt = |v: &f64| tidy(*v);
    for (panel, a) in body.split_evenly((rows, cols)).iter().zip(&algorithms) {
        let caption = lineup.label(a);
        let mut chart = ChartBuilder::on(&panel.margin(4, 4, 4, 10))
            .caption(caption, bold(14.0))
            .x_label_area_size(40)
            .y_label_area_size(52)
            .build_cartesian_2d(xmin..xmax, 0f64..ymax)?;
        mesh_style(&mut chart)
            .x_desc("clock skew (ms)")
            .y_desc("admitted ÷ bound")
            .x_label_formatter(&fmt)
            .y_label_formatter(&fmt)
            .x_labels(5)
            .y_labels(6)
            .draw()?;
        chart.draw_series(DashedLineSeries::new([(xmin, 1.0), (xmax, 1.0)], 8, 6, GREY.stroke_width(2)))?;
        for s in &sources {
            let pts: Vec<(f64, f64)> = skews
                .iter()
                .filter_map(|k| {
                    let v: Vec<f64> = sweep
                        .iter()
                        .filter(|p| &p.subject == a && &p.time_source == s && same(p.skew_ms as f64, *k))
                        .map(ratio)
                        .collect();
                    (!v.is_empty()).then(|| (*k, mean(&v)))
                })
                .collect();
            let c = source_color(s);
            chart.draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))?;
            chart.draw_series(pts.iter().map(|p| Circle::new(*p, 4, c.filled())))?;
        }
    }
    finish(root, log, path)
}
