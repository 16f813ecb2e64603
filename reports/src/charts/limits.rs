//! The charts of limits that are not a rate per period: an in-flight scenario's holders
//! working at once against N, one panel per subject; and the post-hoc scenario's units charged
//! against what the promise allows, one bar per subject.

use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use results::verdict::{Kind, RowVerdict};

use crate::lineup::Lineup;
use crate::schema::{Results, RunResult};
use crate::style::{tidy, INK, OI_BLUE, OI_VERMILLION};

use super::draw::*;
use super::first_seed;
use super::series::*;

/// Whether a scenario's runs are an in-flight limit's (they carry slots held).
pub(crate) fn is_in_flight(r: &Results, scenario: &str) -> bool {
    r.results.iter().any(|x| x.scenario == scenario && x.held.is_some())
}

/// Whether a scenario's runs are of costs known after the work (they carry charges).
pub(crate) fn is_post_hoc(r: &Results, scenario: &str) -> bool {
    r.results.iter().any(|x| x.scenario == scenario && x.charges.is_some())
}

/// A subject's row over every seed of `scenario`: its verdict in the table's words, and
/// whether it fails the run.
fn row_verdict(r: &Results, scenario: &str, subject: &str) -> (String, bool) {
    let v = RowVerdict::of(r.results.iter().filter(|x| x.scenario == scenario && x.subject == subject));
    (v.text(), v.kind() == Kind::Failure)
}

/// The subjects of `scenario` in the report's order, each with its first seed's run that `has`.
fn lead_runs<'a>(r: &'a Results, scenario: &str, has: impl Fn(&RunResult) -> bool) -> Vec<&'a RunResult> {
    let rows: Vec<&RunResult> = r.results.iter().filter(|x| x.scenario == scenario && has(x)).collect();
    let first = first_seed(r);
    Lineup::of(r)
        .order(rows.iter().map(|x| x.subject.as_str()))
        .into_iter()
        .filter_map(|s| {
            let mine = rows.iter().filter(|x| x.subject == s);
            mine.clone().find(|x| Some(x.seed) == first).or_else(|| mine.min_by_key(|x| x.seed)).copied()
        })
        .collect()
}

/// Holders working at once over time against N, one panel per subject.
pub(super) fn held(r: &Results, scenario: &str, path: &Path) -> anyhow::Result<Drawn> {
    let title = format!("Scenario {scenario}: holders working at once against the in-flight limit");
    let runs = lead_runs(r, scenario, |x| x.held.as_ref().is_some_and(|h| !h.per_bucket.is_empty()));
    let Some(first) = runs.first().copied() else {
        return placeholder(path, &title, &format!("no data for this chart: run scenario {scenario}"));
    };
    let spans = || runs.iter().filter_map(|x| x.held.as_ref());
    let xmax = spans().map(|h| h.per_bucket.len() as f64 * h.bucket_ms as f64 / 1000.0).fold(0.0, f64::max).max(0.001);
    let ymax = headroom(
        spans().flat_map(|h| h.per_bucket.iter().map(|&n| f64::from(n)).chain([h.limit as f64])).fold(0.0, f64::max),
        1.0,
    );
    let mut legend = vec![
        LegendItem::new("most holders working at once in each bucket", Swatch::Line(OI_BLUE)),
        LegendItem::new("limit N", Swatch::Band(LIMIT_BAND)),
    ];
    legend.extend(fault_legend(&fault_kinds(&runs)));
    let lease_ms = first.held.as_ref().map_or(0, |h| h.lease_ms);
    let subtitle = format!(
        "seed {} · {} instances · N = {} · leases of {lease_ms} ms · above the band: more than N at once",
        first.seed, first.instances, first.limit
    );
    let (rows, cols) = grid(runs.len());
    let head = header_height(&legend);
    let (root, log) = canvas(path, head + rows as u32 * 320 + 10)?;
    let (top, body) = root.split_vertically(head);
    header(&top, &title, &subtitle, &legend)?;
    let fmt = |v: &f64| tidy(*v);
    for (panel, x) in body.margin(0, 10, 6, 6).split_evenly((rows, cols)).iter().zip(&runs) {
        let Some(h) = x.held.as_ref() else { continue };
        let (verdict, failure) = row_verdict(r, scenario, &x.subject);
        let external = if x.library { "" } else { " (external)" };
        let colour = if failure { OI_VERMILLION } else { INK };
        let mut chart = ChartBuilder::on(&panel.margin(0, 4, 4, 10))
            .caption(format!("{}{external}: {verdict}", x.subject), bold(14.0).color(&colour))
            .x_label_area_size(40)
            .y_label_area_size(52)
            .build_cartesian_2d(0f64..xmax, 0f64..ymax)?;
        mesh_style(&mut chart)
            .x_desc("time (s)")
            .y_desc("working at once")
            .x_label_formatter(&fmt)
            .y_label_formatter(&fmt)
            .x_labels(6)
            .y_labels(6)
            .draw()?;
        shade_faults(&mut chart, x, xmax, ymax)?;
        let n = h.limit as f64;
        chart.draw_series(LineSeries::new([(0.0, n), (xmax, n)], LIMIT_BAND.stroke_width(6)))?;
        let counts: Vec<u64> = h.per_bucket.iter().map(|&v| u64::from(v)).collect();
        let line = if x.library { OI_BLUE } else { OI_VERMILLION };
        chart.draw_series(LineSeries::new(points(&counts, h.bucket_ms as f64 / 1000.0, 1.0), line.stroke_width(2)))?;
    }
    finish(root, log, path)
}

/// Units charged against what the promise allows: one bar per subject, the largest share of
/// the bound any of its runs came to in one span.
pub(super) fn charged(r: &Results, scenario: &str, path: &Path) -> anyhow::Result<Drawn> {
    let title = format!("Scenario {scenario}: units charged against what the promise allows");
    let runs = lead_runs(r, scenario, |x| x.charges.is_some());
    if runs.is_empty() {
        return placeholder(path, &title, &format!("no data for this chart: run scenario {scenario}"));
    }
    let worst = |subject: &str| {
        r.results
            .iter()
            .filter(|x| x.scenario == scenario && x.subject == subject)
            .filter_map(|x| x.charges.as_ref())
            .map(|c| c.worst_ratio)
            .fold(0.0, f64::max)
    };
    let bars: Vec<(String, f64, String, bool)> = runs
        .iter()
        .map(|x| {
            let (verdict, failure) = row_verdict(r, scenario, &x.subject);
            let external = if x.library { "" } else { " (external)" };
            (format!("{}{external}", x.subject), worst(&x.subject), verdict, failure || !x.library)
        })
        .collect();
    let legend =
        [LegendItem::new("what the promise for twice the capacity allows in the worst span", Swatch::Dashed(INK))];
    let head = header_height(&legend);
    let n = bars.len() as i32;
    let (root, log) = canvas(path, head + 90 + n as u32 * 46)?;
    let (top, body) = root.split_vertically(head);
    header(
        &top,
        &title,
        "every unit charged, at admission and after, in the span where it came nearest its bound, over every seed; \
         past 1 the bound is broken",
        &legend,
    )?;
    // Room right of the longest bar for its verdict.
    let xmax = bars.iter().map(|b| b.1).fold(1.0, f64::max) * 1.5;
    let names: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
    let mut chart = ChartBuilder::on(&body.margin(6, 6, 10, 24))
        .x_label_area_size(44)
        .y_label_area_size(190)
        .build_cartesian_2d(0f64..xmax, (0..n - 1).into_segmented())?;
    // Row 0 is drawn at the bottom: put the first subject at the top.
    let fmt_y = move |v: &SegmentValue<i32>| match v {
        SegmentValue::CenterOf(i) => names.get((n - 1 - *i) as usize).cloned().unwrap_or_default(),
        _ => String::new(),
    };
    let fmt_x = |v: &f64| tidy(*v);
    mesh_style(&mut chart)
        .x_desc("units charged over what the bound allows, in the worst span")
        .y_labels(bars.len())
        .y_label_formatter(&fmt_y)
        .x_label_formatter(&fmt_x)
        .x_labels(6)
        .disable_y_mesh()
        .label_style(font(14.0))
        .draw()?;
    for (k, (_, ratio, verdict, red)) in bars.iter().enumerate() {
        let i = n - 1 - k as i32;
        let colour = if *red { OI_VERMILLION } else { OI_BLUE };
        let mut bar =
            Rectangle::new([(0.0, SegmentValue::Exact(i)), (*ratio, SegmentValue::Exact(i + 1))], colour.filled());
        bar.set_margin(8, 8, 0, 0);
        chart.draw_series(std::iter::once(bar))?;
        chart.draw_series(std::iter::once(Text::new(
            format!("  {:.2}: {verdict}", ratio),
            (*ratio, SegmentValue::CenterOf(i)),
            font(14.0).pos(Pos::new(HPos::Left, VPos::Center)),
        )))?;
    }
    chart.draw_series(DashedLineSeries::new(
        [(1.0, SegmentValue::Exact(0)), (1.0, SegmentValue::Exact(n))],
        7,
        5,
        INK.stroke_width(2),
    ))?;
    finish(root, log, path)
}
