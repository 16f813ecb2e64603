//! Cost: Redis commands per request and memory per key, per algorithm.

use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::lineup::Lineup;
use crate::schema::{Results, RunResult};
use crate::style::{tidy, GREY};

use super::draw::*;
use super::series::*;

/// Per algorithm: (Redis commands per request, memory bytes per key), each `None` without data.
pub(crate) fn cost_rows(r: &Results) -> Vec<(String, Option<f64>, Option<f64>)> {
    let algorithms = Lineup::of(r).order(r.results.iter().map(|x| x.subject.as_str()));
    algorithms
        .into_iter()
        .map(|a| {
            let rows: Vec<&RunResult> = r.results.iter().filter(|x| x.subject == a && x.redis.is_some()).collect();
            let commands: u64 = rows.iter().filter_map(|x| x.redis.as_ref()).map(|s| s.commands).sum();
            let requests: u64 = rows.iter().map(|x| x.requests).sum();
            let per_request = (requests > 0 && commands > 0).then(|| commands as f64 / requests as f64);
            let per_key: Vec<f64> = rows
                .iter()
                .filter_map(|x| x.redis.as_ref())
                .filter(|s| s.keys > 0)
                .map(|s| s.memory_bytes as f64 / s.keys as f64)
                .collect();
            let per_key = (!per_key.is_empty()).then(|| mean(&per_key));
            (a, per_request, per_key)
        })
        .filter(|(_, c, b)| c.is_some() || b.is_some())
        .collect()
}

pub(super) fn cost(r: &Results, path: &Path) -> anyhow::Result<Drawn> {
    let title = "Cost: what each algorithm asks of Redis";
    let lineup = Lineup::of(r);
    let rows = cost_rows(r);
    if rows.is_empty() {
        return placeholder(
            path,
            title,
            &format!(
                "no data for this chart: no result recorded Redis commands or keys (run {})",
                results::command::command("simulate")
            ),
        );
    }
    let head = header_height(&[]);
    let height = 90 + rows.len() as u32 * 46;
    let (root, log) = canvas(path, head + height)?;
    let (top, body) = root.split_vertically(head);
    header(&top, title, "mean over every scenario, policy and seed; one bar per algorithm, longer is costlier", &[])?;
    let (left, right) = body.split_horizontally(WIDTH / 2);
    let n = rows.len() as i32;
    let names: Vec<String> = rows.iter().map(|(a, ..)| a.clone()).collect();
    let panels: [(&Area, &str, &str, bool); 2] = [
        (&left, "Redis commands per request", "commands per request", true),
        (&right, "Redis memory per key", "bytes per key", false),
    ];
    for (area, caption, desc, commands) in panels {
        let values: Vec<Option<f64>> = rows.iter().map(|(_, c, b)| if commands { *c } else { *b }).collect();
        let vmax = values.iter().flatten().copied().fold(0.0, f64::max);
        let xmax = if vmax > 0.0 { vmax * 1.3 } else { 1.0 };
        let mut chart = ChartBuilder::on(&area.margin(6, 6, 10, 24))
            .caption(caption, bold(15.0))
            .x_label_area_size(44)
            .y_label_area_size(130)
            .build_cartesian_2d(0f64..xmax, (0..n - 1).into_segmented())?;
        let names = names.clone();
        // Row 0 is drawn at the bottom: put the first algorithm at the top.
        let fmt_y = move |v: &SegmentValue<i32>| match v {
            SegmentValue::CenterOf(i) => names.get((n - 1 - *i) as usize).cloned().unwrap_or_default(),
            _ => String::new(),
        };
        let fmt_x = |v: &f64| tidy(*v);
        mesh_style(&mut chart)
            .x_desc(desc)
            .y_labels(rows.len())
            .y_label_formatter(&fmt_y)
            .x_label_formatter(&fmt_x)
            .x_labels(6)
            .disable_y_mesh()
            .label_style(font(14.0))
            .draw()?;
        for (k, ((a, ..), v)) in rows.iter().zip(&values).enumerate() {
            let i = n - 1 - k as i32;
            match v {
                Some(v) => {
                    let mut bar = Rectangle::new(
                        [(0.0, SegmentValue::Exact(i)), (*v, SegmentValue::Exact(i + 1))],
                        lineup.color(a).filled(),
                    );
                    bar.set_margin(8, 8, 0, 0);
                    chart.draw_series(std::iter::once(bar))?;
                    chart.draw_series(std::iter::once(Text::new(
                        format!("  {}", tidy(*v)),
                        (*v, SegmentValue::CenterOf(i)),
                        font(14.0).pos(Pos::new(HPos::Left, VPos::Center)),
                    )))?;
                }
                None => {
                    chart.draw_series(std::iter::once(Text::new(
                        "  no data",
                        (0.0, SegmentValue::CenterOf(i)),
                        font(13.0).color(&GREY).pos(Pos::new(HPos::Left, VPos::Center)),
                    )))?;
                }
            }
        }
    }
    finish(root, log, path)
}
