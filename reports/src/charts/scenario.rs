//! One chart per scenario: admitted against the oracle over time, one panel per algorithm.

use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use results::verdict::{Kind, RowVerdict};

use crate::lineup::Lineup;
use crate::schema::{Results, RunResult};
use crate::style::{
    ordered, policy_color, tidy, INK, OI_BLUE, OI_GREEN, OI_ORANGE, OI_PURPLE, OI_SKY, OI_VERMILLION, POLICIES,
};

use super::draw::*;
use super::first_seed;
use super::series::*;

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
    let lineup = Lineup::of(r);
    let algorithms = lineup.order(rows.iter().map(|x| x.subject.as_str()));
    let policies = ordered(rows.iter().map(|x| x.policy.as_str()), &POLICIES);
    let clocks_vary = algorithms
        .iter()
        .any(|a| ordered(rows.iter().filter(|x| &x.subject == a).map(|x| x.time_source.as_str()), &[]).len() > 1);
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
            let mine: Vec<&RunResult> = rows.iter().filter(|x| x.subject == a).copied().collect();
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

/// What a panel's title says: the algorithm, and the verdict on each line it draws.
struct Caption {
    /// The subject, noted "external" and "client time" where that applies.
    name: String,
    /// The terminal table's verdict on each line's row over every seed ([`RowVerdict::text`]),
    /// prefixed by the line's variant; one verdict alone when every line has the same. True
    /// where the row fails the run.
    verdicts: Vec<(String, bool)>,
}

impl Caption {
    fn alarm(&self) -> bool {
        self.verdicts.iter().any(|(_, failure)| *failure)
    }
}

/// How panel titles are laid out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Titles {
    /// The name on the first line, each verdict on its own line below, every line wrapped to
    /// the panel's width, and as many title lines above every panel as the longest title
    /// needs: titles never reach a neighbour, whatever the names and verdicts.
    Wrapped,
    /// "name: verdict; verdict" on one line, as this chart once drew it: a long title runs
    /// into the next panel's. Kept only to show that the layout check catches that.
    #[cfg(test)]
    OneLine,
}

/// Height of one title line.
const TITLE_LINE: i32 = 18;

/// A panel's margin left of its y axis labels, their width, and its right margin: where its
/// plotting area starts and ends.
const MARGIN_LEFT: i32 = 4;
const Y_LABELS: i32 = 52;
const PLOT_LEFT: i32 = MARGIN_LEFT + Y_LABELS;
const PLOT_RIGHT: i32 = 10;

/// The title lines of a panel `width` pixels wide: text, bold, and drawn as an alarm. Lines
/// fit over the plotting area, where they are centred.
fn title_lines(caption: &Caption, width: i32, titles: Titles) -> Vec<(String, bool, bool)> {
    let max = width - PLOT_LEFT - PLOT_RIGHT;
    match titles {
        Titles::Wrapped => {
            let mut lines: Vec<(String, bool, bool)> = wrap(&caption.name, max, |t| bold_width(t, 14.0))
                .into_iter()
                .map(|l| (l, true, caption.alarm()))
                .collect();
            for (verdict, failure) in &caption.verdicts {
                lines.extend(wrap(verdict, max, |t| text_width(t, 13.0)).into_iter().map(|l| (l, false, *failure)));
            }
            lines
        }
        #[cfg(test)]
        Titles::OneLine => {
            let verdicts: Vec<&str> = caption.verdicts.iter().map(|(v, _)| v.as_str()).collect();
            vec![(format!("{}: {}", caption.name, verdicts.join("; ")), true, caption.alarm())]
        }
    }
}

fn panel_caption(
    lineup: &Lineup,
    scenario_rows: &[&RunResult],
    algorithm: &str,
    runs: &[(usize, &RunResult)],
    variants: &[String],
    vary: Vary,
) -> Caption {
    let mut notes = Vec::new();
    if runs.iter().any(|(_, x)| !x.library) || lineup.is_external(algorithm) {
        notes.push("external");
    }
    if !matches!(vary, Vary::Clock | Vary::Both) && runs.iter().all(|(_, x)| x.time_source == "client") {
        notes.push("client time");
    }
    let name = if notes.is_empty() { algorithm.to_string() } else { format!("{algorithm} ({})", notes.join(", ")) };
    let per_line: Vec<(&str, RowVerdict)> = runs
        .iter()
        .map(|(i, x)| {
            let row = scenario_rows
                .iter()
                .filter(|y| y.subject == x.subject && y.policy == x.policy && y.time_source == x.time_source);
            (variants[*i].as_str(), RowVerdict::of(row.copied()))
        })
        .collect();
    let texts: Vec<String> = per_line.iter().map(|(_, v)| v.text()).collect();
    let verdicts = if texts.iter().all(|t| Some(t) == texts.first()) {
        let failure = per_line.iter().any(|(_, v)| v.kind() == Kind::Failure);
        texts.into_iter().take(1).map(|t| (t, failure)).collect()
    } else {
        per_line
            .iter()
            .zip(texts)
            .map(|((variant, v), text)| (format!("{variant}: {text}"), v.kind() == Kind::Failure))
            .collect()
    };
    Caption { name, verdicts }
}

pub(super) fn scenario(r: &Results, scenario: &str, path: &Path) -> anyhow::Result<Drawn> {
    scenario_with(r, scenario, path, Titles::Wrapped)
}

fn scenario_with(r: &Results, scenario: &str, path: &Path, titles: Titles) -> anyhow::Result<Drawn> {
    let title = format!("Scenario {scenario}: admitted against the oracle over time");
    let lineup = Lineup::of(r);
    let scenario_rows: Vec<&RunResult> = r.results.iter().filter(|x| x.scenario == scenario).collect();
    let (vary, variants, panels) = scenario_panels(r, scenario);
    let panels: Vec<_> = panels.into_iter().filter(|(_, runs)| !runs.is_empty()).collect();
    if panels.is_empty() {
        let msg = format!("no data for this chart: run scenario {scenario} (its results have no time series)");
        return placeholder(path, &title, &msg);
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
    // Panels split the body evenly, after 6 px of margin each side.
    let panel_w = (WIDTH as i32 - 12) / cols as i32;
    let captions: Vec<Vec<(String, bool, bool)>> = panels
        .iter()
        .map(|(a, runs)| {
            title_lines(&panel_caption(&lineup, &scenario_rows, a, runs, &variants, vary), panel_w, titles)
        })
        .collect();
    let title_h = 10 + TITLE_LINE * captions.iter().map(Vec::len).max().unwrap_or(1) as i32;
    let head = header_height(&legend);
    let (root, log) = canvas(path, head + rows as u32 * (title_h as u32 + 282) + 10)?;
    let (top, body) = root.split_vertically(head);
    header(&top, &title, &subtitle, &legend)?;
    let body = body.margin(0, 10, 6, 6);
    let fmt = |v: &f64| tidy(*v);
    for ((panel, (_, runs)), lines) in body.split_evenly((rows, cols)).iter().zip(&panels).zip(&captions) {
        let (title_area, plot_area) = panel.split_vertically(title_h);
        let (w, _) = title_area.dim_in_pixel();
        for (k, (line, strong, alarm)) in lines.iter().enumerate() {
            let style = if *strong { bold(14.0) } else { font(13.0) };
            let style = style.color(if *alarm { &OI_VERMILLION } else { &INK });
            let at = ((PLOT_LEFT + w as i32 - PLOT_RIGHT) / 2, 6 + TITLE_LINE * k as i32);
            title_area.draw(&Text::new(line.clone(), at, style.pos(Pos::new(HPos::Center, VPos::Top))))?;
        }
        let mut chart = ChartBuilder::on(&plot_area.margin(0, 4, MARGIN_LEFT, PLOT_RIGHT))
            .x_label_area_size(40)
            .y_label_area_size(Y_LABELS)
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
    finish(root, log, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text_box::overlapping;

    /// A real simulator run: redis-outage, where ADR-002's and the naive counter's titles are
    /// long ("adr002 (external, client time): starved 1/1 (expected)").
    fn real_run() -> Results {
        serde_json::from_str(include_str!("../../tests/fixtures/real-run.json")).unwrap()
    }

    fn overlaps(titles: Titles) -> Vec<(String, String)> {
        crate::charts::ensure_fonts().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let drawn = scenario_with(&real_run(), "redis-outage", &dir.path().join("chart.png"), titles).unwrap();
        assert!(drawn.text.len() > 60, "tick labels, axis titles, legend and titles: {:#?}", drawn.text);
        overlapping(&drawn.text)
            .into_iter()
            .map(|(i, j)| (drawn.text[i].text.clone(), drawn.text[j].text.clone()))
            .collect()
    }

    #[test]
    fn one_line_titles_run_into_each_other_and_the_layout_check_says_so() {
        let found = overlaps(Titles::OneLine);
        assert!(
            found.contains(&(
                "adr002 (external, client time): starved 1/1 (expected)".to_string(),
                "naive (external, client time): broken 1/1 (expected)".to_string()
            )),
            "{found:#?}"
        );
    }

    #[test]
    fn wrapped_titles_overlap_nothing() {
        assert_eq!(overlaps(Titles::Wrapped), Vec::<(String, String)>::new());
    }
}
