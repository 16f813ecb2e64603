//! A Redis outage: admissions per second under each failure policy.

use std::path::Path;

use plotters::prelude::*;
use redis_ratelimit::Algorithm;
use results::verdict::RowVerdict;

use crate::lineup::Lineup;
use crate::schema::{Results, RunResult, Series};
use crate::style::{ordered, policy_color, tidy, INK, POLICIES};

use super::draw::*;
use super::series::*;
use super::{first_seed, OUTAGE_SCENARIO};

/// The algorithm the outage chart shows when it ran: the token bucket's oracle runs flat at
/// the refill rate, so what each failure policy does stands out against it (a fixed window's
/// alternates between full and empty buckets).
const OUTAGE_ALGORITHM: Algorithm = Algorithm::TokenBucket;

/// The runs the outage chart shows: one algorithm ([`OUTAGE_ALGORITHM`], else the first
/// built-in one, else the first), the first seed, one run per policy.
pub(crate) fn outage_runs(r: &Results) -> Vec<&RunResult> {
    let rows: Vec<&RunResult> = r.results.iter().filter(|x| x.scenario == OUTAGE_SCENARIO && has_series(x)).collect();
    let lineup = Lineup::of(r);
    let algorithms = lineup.order(rows.iter().map(|x| x.subject.as_str()));
    let preferred = algorithms.iter().find(|a| a.as_str() == OUTAGE_ALGORITHM.name());
    let pick = preferred.or_else(|| algorithms.iter().find(|a| !lineup.is_external(a))).or(algorithms.first()).cloned();
    let Some(alg) = pick else { return Vec::new() };
    let seed = first_seed(r);
    let rows: Vec<&RunResult> = rows.into_iter().filter(|x| x.subject == alg).collect();
    let seed = if rows.iter().any(|x| Some(x.seed) == seed) { seed } else { rows.iter().map(|x| x.seed).min() };
    let rows: Vec<&RunResult> = rows.into_iter().filter(|x| Some(x.seed) == seed).collect();
    ordered(rows.iter().map(|x| x.policy.as_str()), &POLICIES)
        .iter()
        .filter_map(|p| rows.iter().find(|x| &x.policy == p).copied())
        .collect()
}

pub(super) fn outage(r: &Results, path: &Path) -> anyhow::Result<Drawn> {
    let title = "Redis outage: admissions per second under each failure policy";
    let runs = outage_runs(r);
    if runs.is_empty() {
        return placeholder(path, title, &format!("no data for this chart: run scenario {OUTAGE_SCENARIO}"));
    }
    let first = runs[0];
    let per_s = |s: &Series| 1.0 / bucket_s(s);
    let xmax = runs.iter().filter_map(|x| x.series.as_ref()).map(series_end_s).fold(0.0, f64::max).max(0.001);
    let ymax = headroom(
        runs.iter()
            .filter_map(|x| x.series.as_ref())
            .flat_map(|s| {
                let k = per_s(s);
                s.admitted
                    .iter()
                    .chain(&s.oracle_admitted)
                    .map(|&n| n as f64)
                    .chain([s.limit_per_bucket])
                    .map(move |v| v * k)
            })
            .fold(0.0, f64::max),
        1.0,
    );
    // Each policy's line is named with its row's verdict over every seed, as the terminal
    // table and the scenario's own chart give it.
    let verdict = |x: &RunResult| {
        let row = r.results.iter().filter(|y| {
            y.scenario == x.scenario && y.subject == x.subject && y.policy == x.policy && y.time_source == x.time_source
        });
        RowVerdict::of(row).text()
    };
    let mut legend: Vec<LegendItem> = runs
        .iter()
        .map(|x| {
            LegendItem::new(format!("admitted, {}: {}", x.policy, verdict(x)), Swatch::Line(policy_color(&x.policy)))
        })
        .collect();
    legend.push(LegendItem::new("oracle", Swatch::Dashed(INK)));
    legend.push(LegendItem::new("limit", Swatch::Band(LIMIT_BAND)));
    legend.extend(fault_legend(&fault_kinds(&runs)));
    let head = header_height(&legend);
    let (root, log) = canvas(path, head + 500)?;
    let (top, body) = root.split_vertically(head);
    header(
        &top,
        title,
        &format!(
            "scenario {OUTAGE_SCENARIO} · {} · seed {} · {} instances · limit {} per {} ms",
            first.subject, first.seed, first.instances, first.limit, first.period_ms
        ),
        &legend,
    )?;
    let fmt = |v: &f64| tidy(*v);
    let mut chart = ChartBuilder::on(&body.margin(6, 12, 20, 30))
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..xmax, 0f64..ymax)?;
    mesh_style(&mut chart)
        .x_desc("time (s)")
        .y_desc("admitted per second")
        .x_label_formatter(&fmt)
        .y_label_formatter(&fmt)
        .draw()?;
    shade_faults(&mut chart, first, xmax, ymax)?;
    if let Some(s) = first.series.as_ref() {
        if s.limit_per_bucket > 0.0 {
            let l = s.limit_per_bucket * per_s(s);
            chart.draw_series(LineSeries::new([(0.0, l), (xmax, l)], LIMIT_BAND.stroke_width(6)))?;
        }
    }
    for x in &runs {
        let Some(s) = x.series.as_ref() else { continue };
        let c = policy_color(&x.policy);
        chart.draw_series(LineSeries::new(points(&s.admitted, bucket_s(s), per_s(s)), c.stroke_width(3)))?;
    }
    if let Some(s) = first.series.as_ref() {
        chart.draw_series(DashedLineSeries::new(
            points(&s.oracle_admitted, bucket_s(s), per_s(s)),
            7,
            5,
            INK.stroke_width(2),
        ))?;
    }
    finish(root, log, path)
}
