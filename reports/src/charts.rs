//! One function per chart. Each writes one PNG, or a placeholder PNG that says which run would
//! fill it when the results hold no data for it.

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::schema::{Results, RunResult, Series};
use crate::style::{
    algorithm_color, bold, canvas, finish, font, header, header_height, is_subject_name, ordered, placeholder,
    policy_color, text_width, tidy, Area, LegendItem, Swatch, ALGORITHMS, GREY, GRID, GRID_BOLD, INK, OI_BLUE,
    OI_GREEN, OI_ORANGE, OI_PURPLE, OI_SKY, OI_VERMILLION, OI_YELLOW, POLICIES, WIDTH,
};

/// The limit is a wide light band under the data, so it stays visible where a line runs on it.
const LIMIT_BAND: RGBColor = RGBColor(0xB4, 0xB4, 0xB4);

/// The scenario whose results feed the outage chart.
pub(crate) const OUTAGE_SCENARIO: &str = "redis-outage";

/// What a chart shows; the page places it by this.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ChartKind {
    Race,
    Scenario(String),
    Accuracy,
    Skew,
    Outage,
    Cost,
}

/// A chart written to the report directory.
#[derive(Debug, Clone)]
pub(crate) struct Chart {
    pub kind: ChartKind,
    /// File name inside the report directory (no directories, only `[a-z0-9.-]`).
    pub file: String,
    /// Alt text for the page.
    pub alt: String,
    /// True when the image only says that there was no data.
    pub placeholder: bool,
}

/// Scenarios in the order they first appear in the results.
pub(crate) fn scenarios(r: &Results) -> Vec<String> {
    ordered(r.results.iter().map(|x| x.scenario.as_str()), &[])
}

/// The seed whose runs the over-time charts show: the first one listed.
pub(crate) fn first_seed(r: &Results) -> Option<u64> {
    r.seeds.first().copied().or_else(|| r.results.iter().map(|x| x.seed).min())
}

/// A file-name-safe form of a scenario name.
pub(crate) fn slug(name: &str) -> String {
    let s: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    let s = s.split('-').filter(|p| !p.is_empty()).collect::<Vec<_>>().join("-");
    let s: String = s.chars().take(40).collect();
    if s.is_empty() {
        "unnamed".into()
    } else {
        s
    }
}

pub(crate) fn render_all(r: &Results, out: &Path) -> anyhow::Result<Vec<Chart>> {
    let mut charts = Vec::new();
    let mut add = |kind: ChartKind, file: String, alt: String, f: &dyn Fn(&Path) -> anyhow::Result<bool>| {
        let placeholder = f(&out.join(&file))?;
        charts.push(Chart { kind, file, alt, placeholder });
        anyhow::Ok(())
    };
    add(
        ChartKind::Race,
        "race.png".into(),
        "GET+SET race: admitted divided by limit against instances and Redis latency".into(),
        &|p| race(r, p),
    )?;
    for (i, s) in scenarios(r).iter().enumerate() {
        add(
            ChartKind::Scenario(s.clone()),
            format!("scenario-{:02}-{}.png", i + 1, slug(s)),
            format!("Admitted against the oracle over time in scenario {s}, one panel per algorithm"),
            &|p| scenario(r, s, p),
        )?;
    }
    add(
        ChartKind::Accuracy,
        "accuracy.png".into(),
        "Accuracy matrix: wrongly allowed and wrongly limited requests per algorithm and scenario".into(),
        &|p| accuracy(r, p),
    )?;
    add(
        ChartKind::Skew,
        "skew.png".into(),
        "Clock skew: admitted divided by bound against skew, client time versus server time".into(),
        &|p| skew(r, p),
    )?;
    add(
        ChartKind::Outage,
        "outage.png".into(),
        "Admissions per second through a Redis outage, one line per failure policy".into(),
        &|p| outage(r, p),
    )?;
    add(
        ChartKind::Cost,
        "cost.png".into(),
        "Redis commands per request and memory bytes per key, per algorithm".into(),
        &|p| cost(r, p),
    )?;
    Ok(charts)
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// Distinct values, sorted.
fn distinct(values: impl IntoIterator<Item = f64>) -> Vec<f64> {
    let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    v.dedup_by(|a, b| (*a - *b).abs() < 1e-9);
    v
}

fn same(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

/// An upper axis bound with some headroom, never below `floor`.
fn headroom(max: f64, floor: f64) -> f64 {
    let m = if max.is_finite() { max.max(floor) } else { floor };
    m * 1.12
}

/// Grid shape for small multiples: at most four columns.
fn grid(n: usize) -> (usize, usize) {
    let cols = match n {
        0..=4 => n.max(1),
        5 | 6 | 9 => 3,
        _ => 4,
    };
    (n.div_ceil(cols), cols)
}

fn mesh_style<'a, 'b, X, Y>(
    chart: &'b mut ChartContext<'a, BitMapBackend<'a>, Cartesian2d<X, Y>>,
) -> plotters::chart::MeshStyle<'a, 'b, X, Y, BitMapBackend<'a>>
where
    X: plotters::coord::ranged1d::Ranged<ValueType: std::fmt::Debug>
        + plotters::coord::ranged1d::ValueFormatter<<X as plotters::coord::ranged1d::Ranged>::ValueType>,
    Y: plotters::coord::ranged1d::Ranged<ValueType: std::fmt::Debug>
        + plotters::coord::ranged1d::ValueFormatter<<Y as plotters::coord::ranged1d::Ranged>::ValueType>,
{
    let mut m = chart.configure_mesh();
    m.label_style(font(13.0))
        .axis_desc_style(font(14.0))
        .light_line_style(GRID)
        .bold_line_style(GRID_BOLD)
        .axis_style(GREY.stroke_width(1))
        .max_light_lines(2);
    m
}

// ---------------------------------------------------------------------------------------------
// 1. GET+SET race

fn race(r: &Results, path: &Path) -> anyhow::Result<bool> {
    let title = "GET+SET race: how far each algorithm over-admits";
    let sweep = &r.race_sweep;
    if sweep.is_empty() {
        placeholder(path, title, "no data for this chart: run the race sweep (race_sweep is empty)")?;
        return Ok(true);
    }
    let ratio = |p: &crate::schema::RacePoint| if p.limit == 0 { 0.0 } else { p.admitted as f64 / p.limit as f64 };
    let algorithms = ordered(sweep.iter().map(|p| p.algorithm.as_str()), &ALGORITHMS);
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
                        .filter(|p| &p.algorithm == a && p.instances == *n)
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
                        .filter(|p| &p.algorithm == a && same(p.latency_ms, *l) && Some(p.instances) == ref_instances)
                        .map(ratio)
                        .collect();
                    (!v.is_empty()).then(|| (*l, mean(&v)))
                })
                .collect();
            (a.clone(), pts)
        })
        .collect();
    let ymax = headroom(sweep.iter().map(ratio).fold(0.0, f64::max), 1.0);

    let mut legend: Vec<LegendItem> = algorithms
        .iter()
        .map(|a| {
            let label = if is_subject_name(a) { format!("{a} (subject)") } else { a.clone() };
            LegendItem::new(label, Swatch::Line(algorithm_color(a)))
        })
        .collect();
    legend.push(LegendItem::new("limit (admitted = limit)", Swatch::Dashed(GREY)));
    // Lines that coincide are drawn as nested bands (widest first) and named in a note, so no
    // algorithm silently disappears under another.
    let tol = ymax * 0.01;
    let left_groups = coinciding(&by_instances, tol);
    let right_groups = coinciding(&by_latency, tol);
    let widths = |groups: &[Vec<usize>]| {
        let mut w = vec![2u32; algorithms.len()];
        for g in groups.iter().filter(|g| g.len() > 1) {
            for (j, &i) in g.iter().enumerate() {
                w[i] = 2 + 2 * (g.len() - 1 - j) as u32;
            }
        }
        w
    };
    let (left_w, right_w) = (widths(&left_groups), widths(&right_groups));
    let mut notes: Vec<String> = Vec::new();
    for g in left_groups.iter().chain(&right_groups).filter(|g| g.len() > 1) {
        let names = g.iter().map(|&i| algorithms[i].as_str()).collect::<Vec<_>>().join(", ");
        if !notes.contains(&names) {
            notes.push(names);
        }
    }
    let note = (!notes.is_empty()).then(|| format!("coinciding lines, drawn as nested bands: {}", notes.join("; ")));
    let head = header_height(&legend) + if note.is_some() { 26 } else { 0 };
    let root = canvas(path, head + 520)?;
    let (top, body) = root.split_vertically(head);
    let seeds = distinct(sweep.iter().map(|p| p.seed as f64)).len();
    header(
        &top,
        title,
        &format!("admitted ÷ limit over one period, mean of {seeds} seed(s); 1 means exactly the limit"),
        &legend,
    )?;
    if let Some(note) = note {
        top.draw(&Text::new(
            note,
            (WIDTH as i32 / 2, header_height(&legend) as i32 + 2),
            font(14.0).color(&GREY).pos(Pos::new(HPos::Center, VPos::Top)),
        ))?;
    }
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
    for ((a, pts), w) in by_instances.iter().zip(&left_w) {
        let c = algorithm_color(a);
        let w = if is_subject_name(a) { (*w).max(3) } else { *w };
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
        for ((a, pts), w) in by_latency.iter().zip(&right_w) {
            let c = algorithm_color(a);
            let w = if is_subject_name(a) { (*w).max(3) } else { *w };
            chart.draw_series(LineSeries::new(pts.clone(), c.stroke_width(w)))?;
            chart.draw_series(pts.iter().map(|p| Circle::new(*p, 4, c.filled())))?;
        }
    } else {
        empty_panel(&right, "no latency sweep: race_sweep has one Redis latency only")?;
    }
    finish(root, path)?;
    Ok(false)
}

/// Groups lines (by index) whose points share x values and differ by at most `tol` everywhere.
fn coinciding<X: PartialEq>(lines: &[(String, Vec<(X, f64)>)], tol: f64) -> Vec<Vec<usize>> {
    let same_line = |a: &[(X, f64)], b: &[(X, f64)]| {
        !a.is_empty() && a.len() == b.len() && a.iter().zip(b).all(|(p, q)| p.0 == q.0 && (p.1 - q.1).abs() <= tol)
    };
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (i, (_, pts)) in lines.iter().enumerate() {
        match groups.iter_mut().find(|g| same_line(&lines[g[0]].1, pts)) {
            Some(g) => g.push(i),
            None => groups.push(vec![i]),
        }
    }
    groups
}

fn empty_panel(area: &Area, message: &str) -> anyhow::Result<()> {
    let (w, h) = area.dim_in_pixel();
    area.draw(&Rectangle::new([(10, 30), (w as i32 - 10, h as i32 - 30)], RGBColor(0xF4, 0xF4, 0xF4).filled()))?;
    area.draw(&Text::new(
        message.to_string(),
        (w as i32 / 2, h as i32 / 2),
        font(15.0).pos(Pos::new(HPos::Center, VPos::Center)),
    ))?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 2. Admitted against the oracle over time, one chart per scenario

/// What the lines of one scenario panel tell apart.
#[derive(Clone, Copy, PartialEq)]
enum Vary {
    Nothing,
    Policy,
    Clock,
    Both,
}

fn variant_of(x: &RunResult, vary: Vary) -> String {
    match vary {
        Vary::Nothing => String::new(),
        Vary::Policy => x.policy.clone(),
        Vary::Clock => format!("{} time", x.time_source),
        Vary::Both => format!("{}, {} time", x.policy, x.time_source),
    }
}

/// One small multiple: an algorithm and its runs, each tagged with its variant's index.
type Panel<'a> = (String, Vec<(usize, &'a RunResult)>);

/// What a scenario chart shows: its variants in a fixed order, and per algorithm the first
/// seed's run of each variant. Variants are the failure policies, or the time sources where an
/// algorithm runs on both clocks, or both.
fn scenario_panels<'a>(r: &'a Results, scenario: &str) -> (Vary, Vec<String>, Vec<Panel<'a>>) {
    let rows: Vec<&RunResult> = r.results.iter().filter(|x| x.scenario == scenario && has_series(x)).collect();
    let algorithms = ordered(rows.iter().map(|x| x.algorithm.as_str()), &ALGORITHMS);
    let policies = ordered(rows.iter().map(|x| x.policy.as_str()), &POLICIES);
    let clocks_vary = algorithms
        .iter()
        .any(|a| ordered(rows.iter().filter(|x| &x.algorithm == a).map(|x| x.time_source.as_str()), &[]).len() > 1);
    let vary = match (policies.len() > 1, clocks_vary) {
        (false, false) => Vary::Nothing,
        (true, false) => Vary::Policy,
        (false, true) => Vary::Clock,
        (true, true) => Vary::Both,
    };
    let clocks = ordered(rows.iter().map(|x| x.time_source.as_str()), &["server", "client"]);
    let mut variants: Vec<String> = Vec::new();
    for p in &policies {
        for c in &clocks {
            if let Some(x) = rows.iter().find(|x| &x.policy == p && &x.time_source == c) {
                let v = variant_of(x, vary);
                if !variants.contains(&v) {
                    variants.push(v);
                }
            }
        }
    }
    let first = first_seed(r);
    let panels = algorithms
        .into_iter()
        .map(|a| {
            let mine: Vec<&RunResult> = rows.iter().filter(|x| x.algorithm == a).copied().collect();
            // The first seed when this algorithm ran it, else its smallest.
            let seed =
                if mine.iter().any(|x| Some(x.seed) == first) { first } else { mine.iter().map(|x| x.seed).min() };
            let runs = variants
                .iter()
                .enumerate()
                .filter_map(|(i, v)| {
                    mine.iter().find(|x| Some(x.seed) == seed && &variant_of(x, vary) == v).map(|x| (i, *x))
                })
                .collect();
            (a, runs)
        })
        .collect();
    (vary, variants, panels)
}

/// Colour and legend label of each variant.
fn variant_styles(vary: Vary, variants: &[String]) -> Vec<(RGBColor, String)> {
    const CYCLE: [RGBColor; 6] = [OI_VERMILLION, OI_BLUE, OI_GREEN, OI_PURPLE, OI_SKY, OI_ORANGE];
    variants
        .iter()
        .enumerate()
        .map(|(i, v)| match vary {
            Vary::Nothing => (OI_BLUE, "admitted".to_string()),
            Vary::Policy => (policy_color(v), format!("admitted, {v}")),
            Vary::Clock => (if v.starts_with("client") { OI_VERMILLION } else { OI_BLUE }, format!("admitted, {v}")),
            Vary::Both => (CYCLE[i % CYCLE.len()], format!("admitted, {v}")),
        })
        .collect()
}

fn has_series(x: &RunResult) -> bool {
    x.series.as_ref().is_some_and(|s| !s.admitted.is_empty() || !s.oracle_admitted.is_empty())
}

fn bucket_s(s: &Series) -> f64 {
    if s.bucket_ms == 0 {
        1.0
    } else {
        s.bucket_ms as f64 / 1000.0
    }
}

fn series_end_s(s: &Series) -> f64 {
    s.admitted.len().max(s.oracle_admitted.len()) as f64 * bucket_s(s)
}

/// A step line: each bucket's count held flat across the bucket, scaled by `scale`.
fn points(values: &[u64], bucket_s: f64, scale: f64) -> Vec<(f64, f64)> {
    values
        .iter()
        .map(|&v| v as f64 * scale)
        .enumerate()
        .flat_map(|(i, v)| [(i as f64 * bucket_s, v), ((i + 1) as f64 * bucket_s, v)])
        .collect()
}

fn fault_kinds(rows: &[&RunResult]) -> Vec<String> {
    ordered(rows.iter().flat_map(|x| x.faults.iter().map(|f| f.kind.as_str())), &[])
}

fn fault_legend(kinds: &[String]) -> Option<LegendItem> {
    (!kinds.is_empty())
        .then(|| LegendItem::new(format!("fault: {}", kinds.join(", ")), Swatch::Fill(OI_YELLOW.mix(0.45))))
}

/// Whether a broken bound is what the run set out to show rather than a defect.
pub(crate) fn expected_break(x: &RunResult) -> bool {
    x.subject || x.expected_finding
}

/// A panel's caption and whether it reports an unexpected break.
fn panel_caption(algorithm: &str, runs: &[(usize, &RunResult)], vary: Vary) -> (String, bool) {
    let mut notes = Vec::new();
    if runs.iter().any(|(_, x)| x.subject) || is_subject_name(algorithm) {
        notes.push("subject");
    }
    if !matches!(vary, Vary::Clock | Vary::Both) && runs.iter().all(|(_, x)| x.time_source == "client") {
        notes.push("client time");
    }
    let name = if notes.is_empty() { algorithm.to_string() } else { format!("{algorithm} ({})", notes.join(", ")) };
    let broken: Vec<&RunResult> = runs.iter().map(|(_, x)| *x).filter(|x| x.bound == "broken").collect();
    let unexpected = broken.iter().any(|x| !expected_break(x));
    let policy_broken = runs.iter().any(|(_, x)| x.policy_check == "broken");
    let mut verdict = if unexpected {
        "bound BROKEN".to_string()
    } else if !broken.is_empty() {
        "bound broken (expected)".to_string()
    } else if runs.iter().any(|(_, x)| x.bound == "held") {
        "bound held".to_string()
    } else {
        String::new()
    };
    if policy_broken {
        verdict = if verdict.is_empty() { "policy BROKEN".into() } else { format!("{verdict}, policy BROKEN") };
    }
    let caption = if verdict.is_empty() { name } else { format!("{name}: {verdict}") };
    (caption, unexpected || policy_broken)
}

/// Fault windows as shaded bands; an instantaneous fault (a script flush) still shows as a
/// thin band.
fn shade_faults(
    chart: &mut ChartContext<
        '_,
        BitMapBackend<'_>,
        Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
    >,
    x: &RunResult,
    xmax: f64,
    ymax: f64,
) -> anyhow::Result<()> {
    let min_width = xmax * 0.006;
    chart.draw_series(x.faults.iter().map(|f| {
        let a = (f.at_ms as f64 / 1000.0).clamp(0.0, xmax);
        let b = (f.until_ms as f64 / 1000.0).clamp(0.0, xmax).max(a + min_width);
        Rectangle::new([(a, 0.0), (b, ymax)], OI_YELLOW.mix(0.45).filled())
    }))?;
    Ok(())
}

fn scenario(r: &Results, scenario: &str, path: &Path) -> anyhow::Result<bool> {
    let title = format!("Scenario {scenario}: admitted against the oracle over time");
    let (vary, variants, panels) = scenario_panels(r, scenario);
    let panels: Vec<_> = panels.into_iter().filter(|(_, runs)| !runs.is_empty()).collect();
    if panels.is_empty() {
        let msg = format!("no data for this chart: run scenario {scenario} (its results have no time series)");
        placeholder(path, &title, &msg)?;
        return Ok(true);
    }
    let runs: Vec<&RunResult> = panels.iter().flat_map(|(_, runs)| runs.iter().map(|(_, x)| *x)).collect();
    let series = || runs.iter().filter_map(|x| x.series.as_ref());
    let xmax = series().map(series_end_s).fold(0.0, f64::max).max(0.001);
    let ymax = headroom(
        series()
            .flat_map(|s| s.admitted.iter().chain(&s.oracle_admitted).map(|&n| n as f64).chain([s.limit_per_bucket]))
            .fold(0.0, f64::max),
        1.0,
    );
    let styles = variant_styles(vary, &variants);
    let mut legend: Vec<LegendItem> =
        styles.iter().map(|(c, label)| LegendItem::new(label.clone(), Swatch::Line(*c))).collect();
    legend.push(LegendItem::new("oracle (exact model, same requests)", Swatch::Dashed(INK)));
    legend.push(LegendItem::new("limit per bucket", Swatch::Band(LIMIT_BAND)));
    legend.extend(fault_legend(&fault_kinds(&runs)));
    let first = runs[0];
    let bucket_ms = first.series.as_ref().map_or(0, |s| s.bucket_ms);
    let mut subtitle = format!(
        "seed {} · {} instances · limit {} per {} ms, burst {} · counts per {} ms bucket",
        first.seed, first.instances, first.limit, first.period_ms, first.burst, bucket_ms
    );
    if vary == Vary::Nothing {
        subtitle.push_str(&format!(" · {}", first.policy));
    }
    let (rows, cols) = grid(panels.len());
    let head = header_height(&legend);
    let root = canvas(path, head + rows as u32 * 300 + 10)?;
    let (top, body) = root.split_vertically(head);
    header(&top, &title, &subtitle, &legend)?;
    let body = body.margin(0, 10, 6, 6);
    let fmt = |v: &f64| tidy(*v);
    for (panel, (algorithm, runs)) in body.split_evenly((rows, cols)).iter().zip(&panels) {
        let (caption, alarm) = panel_caption(algorithm, runs, vary);
        let mut chart = ChartBuilder::on(&panel.margin(4, 4, 4, 10))
            .caption(caption, bold(14.0).color(if alarm { &OI_VERMILLION } else { &INK }))
            .x_label_area_size(40)
            .y_label_area_size(52)
            .build_cartesian_2d(0f64..xmax, 0f64..ymax)?;
        mesh_style(&mut chart)
            .x_desc("time (s)")
            .y_desc(format!("admitted per {bucket_ms} ms"))
            .x_label_formatter(&fmt)
            .y_label_formatter(&fmt)
            .x_labels(6)
            .y_labels(6)
            .draw()?;
        let (_, lead) = runs[0];
        shade_faults(&mut chart, lead, xmax, ymax)?;
        if let Some(l) = lead.series.as_ref().map(|s| s.limit_per_bucket).filter(|&l| l > 0.0) {
            chart.draw_series(LineSeries::new([(0.0, l), (xmax, l)], LIMIT_BAND.stroke_width(6)))?;
        }
        for (i, x) in runs {
            let Some(s) = x.series.as_ref() else { continue };
            chart.draw_series(LineSeries::new(points(&s.admitted, bucket_s(s), 1.0), styles[*i].0.stroke_width(2)))?;
        }
        if let Some(s) = lead.series.as_ref() {
            chart.draw_series(DashedLineSeries::new(
                points(&s.oracle_admitted, bucket_s(s), 1.0),
                6,
                5,
                INK.stroke_width(1),
            ))?;
        }
    }
    finish(root, path)?;
    Ok(false)
}

// ---------------------------------------------------------------------------------------------
// 3. Accuracy matrix

/// Mean wrong-allow and wrong-limit percentages per (algorithm, scenario).
pub(crate) fn accuracy_cells(r: &Results) -> BTreeMap<(String, String), (f64, f64)> {
    let mut acc: BTreeMap<(String, String), (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    for x in &r.results {
        let e = acc.entry((x.algorithm.clone(), x.scenario.clone())).or_default();
        e.0.push(x.wrong_allow_pct);
        e.1.push(x.wrong_limit_pct);
    }
    acc.into_iter().map(|(k, (a, l))| (k, (mean(&a), mean(&l)))).collect()
}

/// Sequential ramp, white -> orange -> dark vermillion: ordered by lightness, so it reads the
/// same in greyscale and with colour vision deficiencies.
fn ramp(t: f64) -> RGBColor {
    const STOPS: [(f64, (f64, f64, f64)); 4] = [
        (0.0, (255.0, 255.0, 255.0)),
        (0.3, (252.0, 226.0, 170.0)),
        (0.65, (230.0, 159.0, 0.0)),
        (1.0, (150.0, 55.0, 10.0)),
    ];
    let t = t.clamp(0.0, 1.0);
    for w in STOPS.windows(2) {
        let ((t0, c0), (t1, c1)) = (w[0], w[1]);
        if t <= t1 {
            let f = if t1 > t0 { (t - t0) / (t1 - t0) } else { 0.0 };
            let mix = |a: f64, b: f64| (a + (b - a) * f).round() as u8;
            return RGBColor(mix(c0.0, c1.0), mix(c0.1, c1.1), mix(c0.2, c1.2));
        }
    }
    RGBColor(150, 55, 10)
}

/// Log-like scale so 0.01 % and 10 % are both visible: t = ln(1 + v/0.01) / ln(1 + max/0.01).
fn scale_t(v: f64, max: f64) -> f64 {
    if max <= 0.0 {
        0.0
    } else {
        (1.0 + v / 0.01).ln() / (1.0 + max / 0.01).ln()
    }
}

fn pct(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v < 0.001 {
        "<0.001%".into()
    } else {
        format!("{}%", tidy(v))
    }
}

/// Colour-bar ticks: 0, the powers of ten below the maximum, and the maximum, never crowded.
fn bar_ticks(max: f64) -> Vec<f64> {
    let mut ticks = vec![0.0];
    if max <= 0.0 {
        return ticks;
    }
    for p in [0.001, 0.01, 0.1, 1.0, 10.0, 100.0] {
        if p < max && scale_t(max, max) - scale_t(p, max) > 0.1 && scale_t(p, max) > 0.1 {
            ticks.push(p);
        }
    }
    ticks.push(max);
    ticks
}

/// A column heading on one line, or on two split after a hyphen when one line is too wide.
fn column_label(text: &str, max_px: i32) -> Vec<String> {
    if text_width(text, 14.0) <= max_px {
        return vec![text.to_string()];
    }
    let half = text.len() / 2;
    let split = text
        .char_indices()
        .filter(|(_, c)| *c == '-' || *c == ' ')
        .map(|(i, _)| i + 1)
        .min_by_key(|i| i.abs_diff(half));
    match split {
        Some(i) if i < text.len() => vec![text[..i].trim_end().to_string(), text[i..].to_string()],
        _ => vec![text.to_string()],
    }
}

/// Shrinks, then shortens, a label until it fits `max_px`.
fn fit(text: &str, max_px: i32) -> (String, f64) {
    for size in [14.0, 13.0, 12.0, 11.0] {
        if text_width(text, size) <= max_px {
            return (text.to_string(), size);
        }
    }
    let mut s: String = text.to_string();
    while !s.is_empty() && text_width(&format!("{s}…"), 11.0) > max_px {
        s.pop();
    }
    (format!("{s}…"), 11.0)
}

fn accuracy(r: &Results, path: &Path) -> anyhow::Result<bool> {
    let title = "Accuracy: decisions that differ from the exact oracle";
    let cells = accuracy_cells(r);
    if cells.is_empty() {
        placeholder(path, title, "no data for this chart: run cargo xtask simulate (the results list is empty)")?;
        return Ok(true);
    }
    let algorithms = ordered(r.results.iter().map(|x| x.algorithm.as_str()), &ALGORITHMS);
    let scen = scenarios(r);
    let label_w = 180;
    let bar_w = 120;
    let cell_w = ((WIDTH as i32 - 30 - label_w - bar_w) / scen.len().max(1) as i32).max(20);
    let cell_h = 34;
    let panel_h = 40 + 42 + algorithms.len() as i32 * cell_h + 16;
    let seeds = distinct(r.results.iter().map(|x| x.seed as f64)).len();
    let head = header_height(&[]);
    let root = canvas(path, head + 2 * panel_h as u32 + 10)?;
    let (top, body) = root.split_vertically(head);
    header(
        &top,
        title,
        &format!(
            "% of all requests, mean over {seeds} seed(s) and all policies; darker cells are worse, grey means not run"
        ),
        &[],
    )?;
    let (first, second) = body.split_vertically(panel_h);
    let panels: [(&Area, &str, bool); 2] = [
        (&first, "wrongly allowed (admitted, the oracle denied): % of requests", true),
        (&second, "wrongly limited (denied, the oracle admitted): % of requests", false),
    ];
    for (area, caption, allow) in panels {
        let value =
            |a: &str, s: &str| cells.get(&(a.to_string(), s.to_string())).map(|v| if allow { v.0 } else { v.1 });
        let max = cells.values().map(|v| if allow { v.0 } else { v.1 }).fold(0.0, f64::max);
        area.draw(&Text::new(caption.to_string(), (20, 12), bold(16.0)))?;
        let x0 = 20 + label_w;
        let y0 = 40 + 42;
        for (j, s) in scen.iter().enumerate() {
            let cx = x0 + j as i32 * cell_w + cell_w / 2;
            for (k, line) in column_label(s, cell_w - 8).iter().rev().enumerate() {
                let (text, size) = fit(line, cell_w - 6);
                let y = y0 - 6 - 17 * k as i32;
                area.draw(&Text::new(text, (cx, y), font(size).pos(Pos::new(HPos::Center, VPos::Bottom))))?;
            }
        }
        for (i, a) in algorithms.iter().enumerate() {
            let y = y0 + i as i32 * cell_h;
            let label = if is_subject_name(a) { format!("{a} (subject)") } else { a.clone() };
            let (label, size) = fit(&label, label_w - 12);
            area.draw(&Text::new(
                label,
                (x0 - 10, y + cell_h / 2),
                font(size).pos(Pos::new(HPos::Right, VPos::Center)),
            ))?;
            for (j, s) in scen.iter().enumerate() {
                let x = x0 + j as i32 * cell_w;
                let rect = [(x, y), (x + cell_w, y + cell_h)];
                match value(a, s) {
                    Some(v) => {
                        let t = scale_t(v, max);
                        area.draw(&Rectangle::new(rect, ramp(t).filled()))?;
                        let ink = if t > 0.72 { WHITE } else { INK };
                        area.draw(&Text::new(
                            pct(v),
                            (x + cell_w / 2, y + cell_h / 2),
                            font(13.0).color(&ink).pos(Pos::new(HPos::Center, VPos::Center)),
                        ))?;
                    }
                    None => {
                        area.draw(&Rectangle::new(rect, RGBColor(0xD9, 0xD9, 0xD9).filled()))?;
                        area.draw(&Text::new(
                            "not run",
                            (x + cell_w / 2, y + cell_h / 2),
                            font(12.0).color(&GREY).pos(Pos::new(HPos::Center, VPos::Center)),
                        ))?;
                    }
                }
                area.draw(&Rectangle::new(rect, GRID_BOLD.stroke_width(1)))?;
            }
        }
        // Colour bar.
        let bx = x0 + scen.len() as i32 * cell_w + 24;
        let bh = algorithms.len() as i32 * cell_h;
        for k in 0..bh {
            let t = 1.0 - k as f64 / (bh - 1).max(1) as f64;
            area.draw(&Rectangle::new([(bx, y0 + k), (bx + 18, y0 + k + 1)], ramp(t).filled()))?;
        }
        area.draw(&Rectangle::new([(bx, y0), (bx + 18, y0 + bh)], GRID_BOLD.stroke_width(1)))?;
        for v in bar_ticks(max) {
            let y = y0 + ((1.0 - scale_t(v, max)) * (bh - 1) as f64) as i32;
            area.draw(&PathElement::new(vec![(bx + 18, y), (bx + 22, y)], GREY.stroke_width(1)))?;
            area.draw(&Text::new(pct(v), (bx + 24, y), font(12.0).pos(Pos::new(HPos::Left, VPos::Center))))?;
        }
    }
    finish(root, path)?;
    Ok(false)
}

// ---------------------------------------------------------------------------------------------
// 4. Clock skew

fn skew(r: &Results, path: &Path) -> anyhow::Result<bool> {
    let title = "Clock skew: over-admission against skew, client time versus server time";
    let sweep = &r.skew_sweep;
    if sweep.is_empty() {
        placeholder(path, title, "no data for this chart: run the clock-skew sweep (skew_sweep is empty)")?;
        return Ok(true);
    }
    let ratio = |p: &crate::schema::SkewPoint| if p.bound == 0 { 0.0 } else { p.admitted as f64 / p.bound as f64 };
    let algorithms = ordered(sweep.iter().map(|p| p.algorithm.as_str()), &ALGORITHMS);
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
    let root = canvas(path, head + rows as u32 * 290 + 10)?;
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
        let caption = if is_subject_name(a) { format!("{a} (subject)") } else { a.clone() };
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
                        .filter(|p| &p.algorithm == a && &p.time_source == s && same(p.skew_ms as f64, *k))
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
    finish(root, path)?;
    Ok(false)
}

// ---------------------------------------------------------------------------------------------
// 5. Outage

/// The runs the outage chart shows: one algorithm, the first seed, one run per policy.
pub(crate) fn outage_runs(r: &Results) -> Vec<&RunResult> {
    let rows: Vec<&RunResult> = r.results.iter().filter(|x| x.scenario == OUTAGE_SCENARIO && has_series(x)).collect();
    let algorithms = ordered(rows.iter().map(|x| x.algorithm.as_str()), &ALGORITHMS);
    let pick = if algorithms.iter().any(|a| a == "token-bucket") {
        Some("token-bucket".to_string())
    } else {
        algorithms.iter().find(|a| !is_subject_name(a)).or(algorithms.first()).cloned()
    };
    let Some(alg) = pick else { return Vec::new() };
    let seed = first_seed(r);
    let rows: Vec<&RunResult> = rows.into_iter().filter(|x| x.algorithm == alg).collect();
    let seed = if rows.iter().any(|x| Some(x.seed) == seed) { seed } else { rows.iter().map(|x| x.seed).min() };
    let rows: Vec<&RunResult> = rows.into_iter().filter(|x| Some(x.seed) == seed).collect();
    ordered(rows.iter().map(|x| x.policy.as_str()), &POLICIES)
        .iter()
        .filter_map(|p| rows.iter().find(|x| &x.policy == p).copied())
        .collect()
}

fn outage(r: &Results, path: &Path) -> anyhow::Result<bool> {
    let title = "Redis outage: admissions per second under each failure policy";
    let runs = outage_runs(r);
    if runs.is_empty() {
        placeholder(path, title, &format!("no data for this chart: run scenario {OUTAGE_SCENARIO}"))?;
        return Ok(true);
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
    let mut legend: Vec<LegendItem> = runs
        .iter()
        .map(|x| LegendItem::new(format!("admitted, {}", x.policy), Swatch::Line(policy_color(&x.policy))))
        .collect();
    legend.push(LegendItem::new("oracle", Swatch::Dashed(INK)));
    legend.push(LegendItem::new("limit", Swatch::Band(LIMIT_BAND)));
    legend.extend(fault_legend(&fault_kinds(&runs)));
    let head = header_height(&legend);
    let root = canvas(path, head + 500)?;
    let (top, body) = root.split_vertically(head);
    header(
        &top,
        title,
        &format!(
            "scenario {OUTAGE_SCENARIO} · {} · seed {} · {} instances · limit {} per {} ms",
            first.algorithm, first.seed, first.instances, first.limit, first.period_ms
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
    finish(root, path)?;
    Ok(false)
}

// ---------------------------------------------------------------------------------------------
// 6. Cost

/// Per algorithm: (Redis commands per request, memory bytes per key), each `None` without data.
pub(crate) fn cost_rows(r: &Results) -> Vec<(String, Option<f64>, Option<f64>)> {
    let algorithms = ordered(r.results.iter().map(|x| x.algorithm.as_str()), &ALGORITHMS);
    algorithms
        .into_iter()
        .map(|a| {
            let rows: Vec<&RunResult> = r.results.iter().filter(|x| x.algorithm == a && x.redis.is_some()).collect();
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

fn cost(r: &Results, path: &Path) -> anyhow::Result<bool> {
    let title = "Cost: what each algorithm asks of Redis";
    let rows = cost_rows(r);
    if rows.is_empty() {
        placeholder(
            path,
            title,
            "no data for this chart: no result recorded Redis commands or keys (run cargo xtask simulate)",
        )?;
        return Ok(true);
    }
    let head = header_height(&[]);
    let height = 90 + rows.len() as u32 * 46;
    let root = canvas(path, head + height)?;
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
                        algorithm_color(a).filled(),
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
    finish(root, path)?;
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slug_keeps_file_names_safe() {
        assert_eq!(slug("redis-outage"), "redis-outage");
        assert_eq!(slug("<script>alert(1)</script>"), "script-alert-1-script");
        assert_eq!(slug("../../etc"), "etc");
        assert_eq!(slug("???"), "unnamed");
    }

    #[test]
    fn long_column_labels_split_after_a_hyphen() {
        assert_eq!(column_label("baseline", 90), vec!["baseline"]);
        assert_eq!(column_label("window-boundary", 90), vec!["window-", "boundary"]);
        assert_eq!(column_label("averyveryverylongname", 40), vec!["averyveryverylongname"]);
    }

    #[test]
    fn grid_never_exceeds_four_columns() {
        for n in 1..20 {
            let (rows, cols) = grid(n);
            assert!(cols <= 4 && rows * cols >= n, "{n} -> {rows}x{cols}");
        }
    }

    #[test]
    fn colour_bar_ticks_rise_from_zero_to_the_maximum() {
        let ticks = bar_ticks(40.0);
        assert_eq!(ticks.first(), Some(&0.0));
        assert_eq!(ticks.last(), Some(&40.0));
        assert!(ticks.windows(2).all(|w| w[0] < w[1]), "{ticks:?}");
        assert_eq!(bar_ticks(0.0), vec![0.0]);
    }

    #[test]
    fn coinciding_lines_are_grouped() {
        let lines = vec![
            ("a".to_string(), vec![(0, 1.0), (1, 1.0)]),
            ("b".to_string(), vec![(0, 1.0), (1, 1.01)]),
            ("c".to_string(), vec![(0, 1.0), (1, 5.0)]),
        ];
        assert_eq!(coinciding(&lines, 0.05), vec![vec![0, 1], vec![2]]);
    }
}
