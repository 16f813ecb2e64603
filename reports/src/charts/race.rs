//! The GET+SET race: admitted ÷ limit as instances and Redis latency grow.

use std::path::Path;

use plotters::prelude::*;

use crate::lineup::Lineup;
use crate::schema::Results;
use crate::style::{tidy, GREY};

use super::draw::*;
use super::overlap::{self, note, Bands};
use super::series::*;

pub(super) fn race(r: &Results, path: &Path) -> anyhow::Result<Drawn> {
    let title = "GET+SET race: how far each algorithm over-admits";
    let sweep = &r.race_sweep;
    if sweep.is_empty() {
        return placeholder(path, title, "no data for this chart: run the race sweep (race_sweep is empty)");
    }
    let ratio = |p: &crate::schema::RacePoint| if p.limit == 0 { 0.0 } else { p.admitted as f64 / p.limit as f64 };
    let lineup = Lineup::of(r);
    let algorithms = lineup.order(sweep.iter().map(|p| p.subject.as_str()));
    let latencies = distinct(sweep.iter().map(|p| p.latency_ms));
    let mut instances: Vec<u64> = sweep.iter().map(|p| p.instances).collect();
    instances.sort_unstable();
    instances.dedup();

    // Left panel: the latency at which the most instance counts were swept.
    let count_instances_at = |l: f64| {
        let mut v: Vec<u64> = sweep.iter().filter(|p| same(p.latency_ms, l)).map(|p| p.instances).collect();
        v.sort_unstable();
        v.dedup();
        v.len()
    };
    let ref_latency = latencies.iter().copied().fold(None, |best: Option<f64>, l| match best {
        Some(b) if count_instances_at(b) >= count_instances_at(l) => Some(b),
        _ => Some(l),
    });
    // Right panel: the instance count at which the most latencies were swept (largest on ties).
    let count_latencies_at = |n: u64| distinct(sweep.iter().filter(|p| p.instances == n).map(|p| p.latency_ms)).len();
    let ref_instances = instances.iter().copied().fold(None, |best: Option<u64>, n| match best {
        Some(b) if count_latencies_at(b) > count_latencies_at(n) => Some(b),
        _ => Some(n),
    });

    let by_instances: Vec<(String, Vec<(usize, f64)>)> = algorithms
        .iter()
        .map(|a| {
            let pts = instances
                .iter()
                .enumerate()
                .filter_map(|(i, n)| {
                    let v: Vec<f64> = sweep
                        .iter()
                        .filter(|p| &p.subject == a && p.instances == *n)
                        .filter(|p| ref_latency.is_some_and(|l| same(p.latency_ms, l)))
                        .map(ratio)
                        .collect();
                    (!v.is_empty()).then(|| (i, mean(&v)))
                })
                .collect();
            (a.clone(), pts)
        })
        .collect();
    let by_latency: Vec<(String, Vec<(f64, f64)>)> = algorithms
        .iter()
        .map(|a| {
            let pts = latencies
                .iter()
                .filter_map(|l| {
                    let v: Vec<f64> = sweep
                        .iter()
                        .filter(|p| &p.subject == a && same(p.latency_ms, *l) && Some(p.instances) == ref_instances)
                        .map(ratio)
                        .collect();
                    (!v.is_empty()).then(|| (*l, mean(&v)))
                })
                .collect();
            (a.clone(), pts)
        })
        .collect();
    let ymax = headroom(sweep.iter().map(ratio).fold(0.0, f64::max), 1.0);

    let mut legend: Vec<LegendItem> =
        algorithms.iter().map(|a| LegendItem::new(lineup.label(a), Swatch::Line(lineup.color(a)))).collect();
    legend.push(LegendItem::new("limit (admitted = limit)", Swatch::Dashed(GREY)));
    // Coinciding lines are drawn as nested bands and named, so no
    // algorithm silently disappears under another.
    let tol = ymax * 0.01;
    let (left_bands, right_bands) = (Bands::of(&by_instances, tol), Bands::of(&by_latency, tol));
    let note = note([left_bands.names(&algorithms), right_bands.names(&algorithms)].concat());
    let head = overlap::height_with(&legend, &note);
    let (root, log) = canvas(path, head + 520)?;
    let (top, body) = root.split_vertically(head);
    let seeds = distinct(sweep.iter().map(|p| p.seed as f64)).len();
    header(
        &top,
        title,
        &format!("admitted ÷ what the exact oracle admits of the same requests, mean of {seeds} seed(s); 1 means exactly the limit"),
        &legend,
    )?;
    overlap::draw_note(&top, &legend, &note)?;
    let (left, right) = body.split_horizontally(WIDTH / 2);

    // Left: against instance count, categorical axis (the sweep doubles instances).
    let n = instances.len() as i32;
    let caption = match ref_latency {
        Some(l) => format!("against instances sharing one key (Redis round trip {} ms)", tidy(l)),
        None => "against instances sharing one key".to_string(),
    };
    let mut chart = ChartBuilder::on(&left.margin(6, 6, 10, 16))
        .caption(caption, bold(15.0))
        .x_label_area_size(48)
        .y_label_area_size(64)
        .build_cartesian_2d((0..n - 1).into_segmented(), 0f64..ymax)?;
    let labels = instances.clone();
    let fmt_x = move |v: &SegmentValue<i32>| match v {
        SegmentValue::CenterOf(i) => labels.get(*i as usize).map(|n| n.to_string()).unwrap_or_default(),
        _ => String::new(),
    };
    let fmt_y = |y: &f64| tidy(*y);
    mesh_style(&mut chart)
        .x_desc("instances (limiters sharing the key)")
        .y_desc("admitted ÷ limit")
        .x_labels(instances.len())
        .x_label_formatter(&fmt_x)
        .y_label_formatter(&fmt_y)
        .disable_x_mesh()
        .draw()?;
    chart.draw_series(DashedLineSeries::new(
        [(SegmentValue::Exact(0), 1.0), (SegmentValue::Last, 1.0)],
        8,
        6,
        GREY.stroke_width(2),
    ))?;
    for ((a, pts), w) in by_instances.iter().zip(&left_bands.widths) {
        let c = lineup.color(a);
        let w = if lineup.is_external(a) { (*w).max(3) } else { *w };
        let pts: Vec<(SegmentValue<i32>, f64)> =
            pts.iter().map(|(i, y)| (SegmentValue::CenterOf(*i as i32), *y)).collect();
        chart.draw_series(LineSeries::new(pts.clone(), c.stroke_width(w)))?;
        chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 4, c.filled())))?;
    }

    // Right: against Redis latency at a fixed instance count.
    let right = right.margin(6, 6, 16, 10);
    let swept = latencies.len() >= 2 && by_latency.iter().any(|(_, p)| p.len() >= 2);
    if swept {
        let xmax = latencies.last().copied().unwrap_or(1.0) * 1.05;
        let caption = match ref_instances {
            Some(n) => format!("against Redis round-trip latency ({n} instances)"),
            None => "against Redis round-trip latency".to_string(),
        };
        let mut chart = ChartBuilder::on(&right)
            .caption(caption, bold(15.0))
            .x_label_area_size(48)
            .y_label_area_size(64)
            .build_cartesian_2d(0f64..xmax, 0f64..ymax)?;
        let fmt_x = |x: &f64| tidy(*x);
        mesh_style(&mut chart)
            .x_desc("Redis round-trip latency (ms)")
            .y_desc("admitted ÷ limit")
            .x_label_formatter(&fmt_x)
            .y_label_formatter(&fmt_y)
            .draw()?;
        chart.draw_series(DashedLineSeries::new([(0.0, 1.0), (xmax, 1.0)], 8, 6, GREY.stroke_width(2)))?;
        for ((a, pts), w) in by_latency.iter().zip(&right_bands.widths) {
            let c = lineup.color(a);
            let w = if lineup.is_external(a) { (*w).max(3) } else { *w };
            chart.draw_series(LineSeries::new(pts.clone(), c.stroke_width(w)))?;
            chart.draw_series(pts.iter().map(|p| Circle::new(*p, 4, c.filled())))?;
        }
    } else {
        empty_panel(&right, "no latency sweep: race_sweep has one Redis latency only")?;
    }
    finish(root, log, path)
}
