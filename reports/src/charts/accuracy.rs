//! The accuracy matrix: wrongly allowed and wrongly limited shares per algorithm and scenario.

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::lineup::Lineup;
use crate::schema::Results;
use crate::style::{tidy, GREY, GRID_BOLD, INK};

use super::draw::*;
use super::scenarios;
use super::series::*;

/// Mean wrong-allow and wrong-limit percentages per (algorithm, scenario).
pub(crate) fn accuracy_cells(r: &Results) -> BTreeMap<(String, String), (f64, f64)> {
    let mut acc: BTreeMap<(String, String), (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    for x in &r.results {
        let e = acc.entry((x.subject.clone(), x.scenario.clone())).or_default();
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

pub(super) fn accuracy(r: &Results, path: &Path) -> anyhow::Result<Drawn> {
    let title = "Accuracy: decisions that differ from the exact oracle";
    let cells = accuracy_cells(r);
    if cells.is_empty() {
        return placeholder(
            path,
            title,
            &format!(
                "no data for this chart: run {} (the results list is empty)",
                results::command::command("simulate")
            ),
        );
    }
    let lineup = Lineup::of(r);
    let algorithms = lineup.order(r.results.iter().map(|x| x.subject.as_str()));
    let scen = scenarios(r);
    let label_w = 180;
    let bar_w = 120;
    let cell_w = ((WIDTH as i32 - 30 - label_w - bar_w) / scen.len().max(1) as i32).max(20);
    let cell_h = 34;
    let panel_h = 40 + 42 + algorithms.len() as i32 * cell_h + 16;
    let seeds = distinct(r.results.iter().map(|x| x.seed as f64)).len();
    let head = header_height(&[]);
    let (root, log) = canvas(path, head + 2 * panel_h as u32 + 10)?;
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
            let label = lineup.label(a);
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
    finish(root, log, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_column_labels_split_after_a_hyphen() {
        assert_eq!(column_label("baseline", 90), vec!["baseline"]);
        assert_eq!(column_label("window-boundary", 90), vec!["window-", "boundary"]);
        assert_eq!(column_label("averyveryverylongname", 40), vec!["averyveryverylongname"]);
    }

    #[test]
    fn colour_bar_ticks_rise_from_zero_to_the_maximum() {
        let ticks = bar_ticks(40.0);
        assert_eq!(ticks.first(), Some(&0.0));
        assert_eq!(ticks.last(), Some(&40.0));
        assert!(ticks.windows(2).all(|w| w[0] < w[1]), "{ticks:?}");
        assert_eq!(bar_ticks(0.0), vec![0.0]);
    }
}
