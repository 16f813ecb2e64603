//! Delivered against offered rate, one curve per verified subject: what `cargo xtask verify`
//! measured of each subject's script on one key at exact times. An exact limiter follows the
//! diagonal up to the limit and stays on it after; a starving one falls away, a leaky one
//! climbs past it.

use std::path::Path;

use plotters::prelude::*;

use crate::lineup::Lineup;
use crate::schema::Results;
use crate::style::{tidy, GREY};

use super::draw::*;
use super::overlap::{self, note, Bands};
use super::series::headroom;

pub(super) fn rate(r: &Results, path: &Path) -> anyhow::Result<Drawn> {
    let title = "Delivered against offered rate, per verified subject";
    let curves: Vec<_> = r.verify.iter().filter(|s| !s.profile.rate_curve.is_empty()).collect();
    if curves.is_empty() {
        return placeholder(
            path,
            title,
            &format!("no data for this chart: it shows the subjects of {}", results::command::command("verify")),
        );
    }
    let lineup = Lineup::of(r);
    let xmax = curves.iter().flat_map(|s| &s.profile.rate_curve).map(|p| p.offered).fold(1.0, f64::max) * 1.04;
    let ymax =
        headroom(curves.iter().flat_map(|s| &s.profile.rate_curve).map(|p| p.delivered).fold(1.0, f64::max), 1.2);
    let mut legend: Vec<LegendItem> =
        curves.iter().map(|s| LegendItem::new(s.name.clone(), Swatch::Line(lineup.color(&s.name)))).collect();
    legend.push(LegendItem::new("an exact limiter: min(offered, limit)", Swatch::Dashed(GREY)));
    let lines: Vec<(String, Vec<(f64, f64)>)> = curves
        .iter()
        .map(|s| (s.name.clone(), s.profile.rate_curve.iter().map(|p| (p.offered, p.delivered)).collect()))
        .collect();
    let bands = Bands::of(&lines, ymax * 0.01);
    let names: Vec<String> = lines.iter().map(|l| l.0.clone()).collect();
    let note = note(bands.names(&names));
    let head = overlap::height_with(&legend, &note);
    let (root, log) = canvas(path, head + 420)?;
    let (top, body) = root.split_vertically(head);
    header(
        &top,
        title,
        "one key, requests evenly spaced at each multiple of the limit, ten periods after a warm-up; both axes in \
         multiples of the limit",
        &legend,
    )?;
    overlap::draw_note(&top, &legend, &note)?;
    let fmt = |v: &f64| tidy(*v);
    let mut chart = ChartBuilder::on(&body.margin(6, 20, 10, 10))
        .x_label_area_size(40)
        .y_label_area_size(52)
        .build_cartesian_2d(0f64..xmax, 0f64..ymax)?;
    mesh_style(&mut chart)
        .x_desc("offered (x the limit)")
        .y_desc("delivered (x the limit)")
        .x_label_formatter(&fmt)
        .y_label_formatter(&fmt)
        .draw()?;
    chart.draw_series(DashedLineSeries::new([(0.0, 0.0), (1.0, 1.0), (xmax, 1.0)], 8, 6, GREY.stroke_width(2)))?;
    for ((name, pts), w) in lines.iter().zip(&bands.widths) {
        let c = lineup.color(name);
        chart.draw_series(LineSeries::new(pts.clone(), c.stroke_width(*w)))?;
        chart.draw_series(pts.iter().map(|p| Circle::new(*p, 4, c.filled())))?;
    }
    finish(root, log, path)
}
