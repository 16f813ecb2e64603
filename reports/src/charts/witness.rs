//! A break's witness on a timeline: the admissions of the stretch that shows it, one colour per
//! instance, counted up over true time against what the promise allows from the first one. Each
//! admission is drawn where it may have been decided (a bar from the request leaving to its
//! answer, a dot where that is one instant); faults are shaded and the instances' clock offsets
//! named in the legend.

use std::path::Path;

use plotters::prelude::*;

use crate::schema::{SubjectReport, VerdictLine, Witness};
use crate::style::{tidy, GREY, OI_BLUE, OI_GREEN, OI_ORANGE, OI_PURPLE, OI_SKY, OI_VERMILLION, OI_YELLOW};

use super::draw::*;

const INSTANCE_COLORS: [RGBColor; 6] = [OI_BLUE, OI_ORANGE, OI_GREEN, OI_VERMILLION, OI_PURPLE, OI_SKY];

/// The verdicts of `r` a witness chart is drawn for.
pub(crate) fn witnessed(r: &SubjectReport) -> impl Iterator<Item = (&VerdictLine, &Witness)> {
    r.verdicts.iter().filter_map(|v| v.witness.as_ref().filter(|w| !w.requests.is_empty()).map(|w| (v, w)))
}

pub(super) fn witness(r: &SubjectReport, v: &VerdictLine, w: &Witness, path: &Path) -> anyhow::Result<Drawn> {
    let title = format!("{}: {} {}, the witness", r.name, v.check, v.verdict.word());
    let color = |i: u32| INSTANCE_COLORS[i as usize % INSTANCE_COLORS.len()];
    let instances = w.requests.iter().map(|q| q.instance).max().unwrap_or(0) + 1;
    let mut legend: Vec<LegendItem> = (0..instances)
        .map(|i| {
            let offset = w.offsets_ms.get(i as usize).map_or(String::new(), |o| format!(", clock {o:+} ms"));
            LegendItem::new(format!("admitted by instance {i}{offset}"), Swatch::Line(color(i)))
        })
        .collect();
    if !w.envelope.is_empty() {
        legend.push(LegendItem::new("what the promise allows from the first admission", Swatch::Dashed(GREY)));
    }
    if w.requests.iter().any(|q| !q.admitted) {
        legend.push(LegendItem::new("denied", Swatch::Line(GREY)));
    }
    let kinds: Vec<String> = w.faults.iter().map(|f| f.what.clone()).collect();
    legend.extend(fault_legend(&kinds));

    let lo = w.requests.iter().map(|q| q.lo_ms).chain(w.faults.iter().map(|f| f.from_ms)).fold(f64::MAX, f64::min);
    let hi = w
        .requests
        .iter()
        .map(|q| q.hi_ms)
        .chain(w.faults.iter().map(|f| f.to_ms))
        .chain(w.envelope.iter().map(|p| p[0]))
        .fold(lo, f64::max);
    let pad = ((hi - lo) * 0.05).max(5.0);
    let (x0, x1) = (lo - pad, hi + pad);
    // Admissions counted up in the order they may first have been decided.
    let mut admitted: Vec<_> = w.requests.iter().filter(|q| q.admitted).collect();
    admitted.sort_by(|a, b| a.lo_ms.total_cmp(&b.lo_ms));
    let total: u64 = admitted.iter().map(|q| q.units).sum();
    let ymax = w.envelope.iter().map(|p| p[1]).fold(total as f64, f64::max) * 1.15 + 1.0;

    let head = header_height(&legend);
    let (root, log) = canvas(path, head + 420)?;
    let (top, body) = root.split_vertically(head);
    header(
        &top,
        &title,
        "true time from the run's start; each admission counted up where it may first have been decided, its bar \
         reaching to when its answer arrived",
        &legend,
    )?;
    let fmt = |v: &f64| tidy(*v);
    let mut chart = ChartBuilder::on(&body.margin(6, 20, 10, 10))
        .x_label_area_size(40)
        .y_label_area_size(52)
        .build_cartesian_2d(x0..x1, 0f64..ymax)?;
    mesh_style(&mut chart)
        .x_desc("ms")
        .y_desc("units admitted")
        .x_label_formatter(&fmt)
        .y_label_formatter(&fmt)
        .draw()?;
    let min_width = (x1 - x0) * 0.004;
    chart.draw_series(w.faults.iter().map(|f| {
        Rectangle::new([(f.from_ms, 0.0), (f.to_ms.max(f.from_ms + min_width), ymax)], OI_YELLOW.mix(0.45).filled())
    }))?;
    if !w.envelope.is_empty() {
        let line: Vec<(f64, f64)> = w.envelope.iter().map(|p| (p[0], p[1])).collect();
        chart.draw_series(DashedLineSeries::new(line, 8, 6, GREY.stroke_width(2)))?;
    }
    let mut count = 0u64;
    for q in admitted {
        count += q.units;
        let (y, c) = (count as f64, color(q.instance));
        chart.draw_series(std::iter::once(PathElement::new([(q.lo_ms, y), (q.hi_ms, y)], c.stroke_width(3))))?;
        chart.draw_series(std::iter::once(Circle::new((q.lo_ms, y), 3, c.filled())))?;
    }
    chart.draw_series(
        w.requests.iter().filter(|q| !q.admitted).map(|q| Cross::new((q.lo_ms, ymax * 0.02), 4, GREY.stroke_width(2))),
    )?;
    finish(root, log, path)
}
