//! Fonts, colours and the drawing helpers every chart shares.

use std::path::Path;
use std::sync::OnceLock;

use anyhow::anyhow;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

pub(crate) type Area<'a> = DrawingArea<BitMapBackend<'a>, Shift>;

/// Every chart is this wide, so the page lines them up.
pub(crate) const WIDTH: u32 = 1280;

static REGULAR: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
static BOLD: &[u8] = include_bytes!("../assets/DejaVuSans-Bold.ttf");

/// Registers the embedded DejaVu Sans as plotters' `sans-serif` (once per process).
pub(crate) fn ensure_fonts() -> anyhow::Result<()> {
    static DONE: OnceLock<bool> = OnceLock::new();
    let ok = *DONE.get_or_init(|| {
        plotters::style::register_font("sans-serif", FontStyle::Normal, REGULAR).is_ok()
            && plotters::style::register_font("sans-serif", FontStyle::Bold, BOLD).is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err(anyhow!("the embedded DejaVu Sans font could not be loaded"))
    }
}

// Okabe & Ito's palette: distinguishable with every common colour vision deficiency.
pub(crate) const OI_ORANGE: RGBColor = RGBColor(0xE6, 0x9F, 0x00);
pub(crate) const OI_SKY: RGBColor = RGBColor(0x56, 0xB4, 0xE9);
pub(crate) const OI_GREEN: RGBColor = RGBColor(0x00, 0x9E, 0x73);
pub(crate) const OI_YELLOW: RGBColor = RGBColor(0xF0, 0xE4, 0x42);
pub(crate) const OI_BLUE: RGBColor = RGBColor(0x00, 0x72, 0xB2);
pub(crate) const OI_VERMILLION: RGBColor = RGBColor(0xD5, 0x5E, 0x00);
pub(crate) const OI_PURPLE: RGBColor = RGBColor(0xCC, 0x79, 0xA7);
pub(crate) const INK: RGBColor = RGBColor(0x1A, 0x1A, 0x1A);
pub(crate) const GREY: RGBColor = RGBColor(0x70, 0x70, 0x70);
pub(crate) const GRID: RGBColor = RGBColor(0xE8, 0xE8, 0xE8);
pub(crate) const GRID_BOLD: RGBColor = RGBColor(0xC8, 0xC8, 0xC8);

/// Algorithms in the order every chart and table lists them.
pub(crate) const ALGORITHMS: [&str; 7] =
    ["fixed-window", "sliding-window", "sliding-log", "token-bucket", "gcra", "adr002", "naive"];

/// Failure policies in the order every chart and table lists them.
pub(crate) const POLICIES: [&str; 3] = ["fail-open", "fail-closed", "local-budget"];

/// A fixed colour per algorithm, so one algorithm looks the same in every chart.
pub(crate) fn algorithm_color(name: &str) -> RGBColor {
    match name {
        "fixed-window" => OI_ORANGE,
        "sliding-window" => OI_SKY,
        "sliding-log" => OI_GREEN,
        "token-bucket" => OI_BLUE,
        "gcra" => OI_PURPLE,
        "adr002" => INK,
        "naive" => OI_VERMILLION,
        _ => GREY,
    }
}

pub(crate) fn policy_color(name: &str) -> RGBColor {
    match name {
        "fail-open" => OI_VERMILLION,
        "fail-closed" => OI_BLUE,
        "local-budget" => OI_GREEN,
        _ => GREY,
    }
}

/// The subjects are drawn dashed in line charts, so they stand out without relying on colour.
pub(crate) fn is_subject_name(name: &str) -> bool {
    matches!(name, "adr002" | "naive")
}

/// Sorts names by a preferred order, unknown names after it in first-seen order.
pub(crate) fn ordered<'a>(names: impl IntoIterator<Item = &'a str>, preferred: &[&str]) -> Vec<String> {
    let mut seen: Vec<&str> = Vec::new();
    for n in names {
        if !seen.contains(&n) {
            seen.push(n);
        }
    }
    let mut out: Vec<String> = preferred.iter().filter(|p| seen.contains(p)).map(|p| p.to_string()).collect();
    out.extend(seen.iter().filter(|n| !preferred.contains(n)).map(|n| n.to_string()));
    out
}

pub(crate) fn font(size: f64) -> TextStyle<'static> {
    TextStyle::from(FontDesc::new(FontFamily::SansSerif, size, FontStyle::Normal)).color(&INK)
}

pub(crate) fn bold(size: f64) -> TextStyle<'static> {
    TextStyle::from(FontDesc::new(FontFamily::SansSerif, size, FontStyle::Bold)).color(&INK)
}

/// How a legend entry is drawn.
#[derive(Clone, Copy)]
pub(crate) enum Swatch {
    Line(RGBColor),
    /// A wide light line, for reference levels drawn under the data.
    Band(RGBColor),
    Dashed(RGBColor),
    Fill(RGBAColor),
}

pub(crate) struct LegendItem {
    pub label: String,
    pub swatch: Swatch,
}

impl LegendItem {
    pub fn new(label: impl Into<String>, swatch: Swatch) -> Self {
        Self { label: label.into(), swatch }
    }
}

pub(crate) fn draw_err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("drawing failed: {e}")
}

/// The height [`header`] needs for a legend of these items.
pub(crate) fn header_height(legend: &[LegendItem]) -> u32 {
    let rows = legend_rows(legend).len() as u32;
    74 + rows * 26 + if rows > 0 { 8 } else { 0 }
}

/// Width of a text in pixels, measured with the embedded font.
pub(crate) fn text_width(text: &str, size: f64) -> i32 {
    FontDesc::new(FontFamily::SansSerif, size, FontStyle::Normal)
        .box_size(text)
        .map(|(w, _)| w as i32)
        .unwrap_or((text.chars().count() as f64 * size * 0.6) as i32)
}

fn legend_width(item: &LegendItem) -> i32 {
    40 + text_width(&item.label, 15.0) + 26
}

fn legend_rows(legend: &[LegendItem]) -> Vec<Vec<&LegendItem>> {
    let max = WIDTH as i32 - 80;
    let mut rows: Vec<Vec<&LegendItem>> = Vec::new();
    let mut width = 0;
    for item in legend {
        let w = legend_width(item);
        match rows.last_mut() {
            Some(row) if width + w <= max => {
                row.push(item);
                width += w;
            }
            _ => {
                rows.push(vec![item]);
                width = w;
            }
        }
    }
    rows
}

/// Title, subtitle and a centred legend across the top of a chart.
pub(crate) fn header(area: &Area, title: &str, subtitle: &str, legend: &[LegendItem]) -> anyhow::Result<()> {
    let (w, _) = area.dim_in_pixel();
    let cx = w as i32 / 2;
    area.draw(&Text::new(title.to_string(), (cx, 12), bold(24.0).pos(Pos::new(HPos::Center, VPos::Top))))
        .map_err(draw_err)?;
    area.draw(&Text::new(
        subtitle.to_string(),
        (cx, 46),
        font(15.0).color(&GREY).pos(Pos::new(HPos::Center, VPos::Top)),
    ))
    .map_err(draw_err)?;
    let mut y = 80;
    for row in legend_rows(legend) {
        let total: i32 = row.iter().map(|i| legend_width(i)).sum();
        let mut x = cx - total / 2;
        for item in row {
            draw_swatch(area, item.swatch, x, y)?;
            area.draw(&Text::new(item.label.clone(), (x + 40, y), font(15.0).pos(Pos::new(HPos::Left, VPos::Center))))
                .map_err(draw_err)?;
            x += legend_width(item);
        }
        y += 26;
    }
    Ok(())
}

fn draw_swatch(area: &Area, swatch: Swatch, x: i32, y: i32) -> anyhow::Result<()> {
    match swatch {
        Swatch::Line(c) => area.draw(&PathElement::new(vec![(x, y), (x + 32, y)], c.stroke_width(3))),
        Swatch::Band(c) => area.draw(&PathElement::new(vec![(x, y), (x + 32, y)], c.stroke_width(7))),
        Swatch::Dashed(c) => {
            for dx in [0, 12, 24] {
                area.draw(&PathElement::new(vec![(x + dx, y), (x + dx + 8, y)], c.stroke_width(3)))
                    .map_err(draw_err)?;
            }
            Ok(())
        }
        Swatch::Fill(c) => {
            area.draw(&Rectangle::new([(x, y - 8), (x + 32, y + 8)], c.filled())).map_err(draw_err)?;
            area.draw(&Rectangle::new([(x, y - 8), (x + 32, y + 8)], GRID_BOLD.stroke_width(1)))
        }
    }
    .map_err(draw_err)
}

/// A chart that has nothing to show says so, and which run would fill it.
pub(crate) fn placeholder(path: &Path, title: &str, message: &str) -> anyhow::Result<()> {
    let root = BitMapBackend::new(path, (WIDTH, 260)).into_drawing_area();
    root.fill(&WHITE).map_err(draw_err)?;
    header(&root, title, "", &[])?;
    root.draw(&Rectangle::new([(40, 70), (WIDTH as i32 - 40, 230)], RGBColor(0xF4, 0xF4, 0xF4).filled()))
        .map_err(draw_err)?;
    root.draw(&Rectangle::new([(40, 70), (WIDTH as i32 - 40, 230)], GRID_BOLD.stroke_width(2))).map_err(draw_err)?;
    root.draw(&Text::new(
        message.to_string(),
        (WIDTH as i32 / 2, 150),
        font(20.0).pos(Pos::new(HPos::Center, VPos::Center)),
    ))
    .map_err(draw_err)?;
    root.present().map_err(|e| anyhow!("{}: cannot write the chart: {e}", path.display()))
}

/// Opens a chart file of the standard width.
pub(crate) fn canvas(path: &Path, height: u32) -> anyhow::Result<Area<'_>> {
    let root = BitMapBackend::new(path, (WIDTH, height)).into_drawing_area();
    root.fill(&WHITE).map_err(draw_err)?;
    Ok(root)
}

pub(crate) fn finish(root: Area<'_>, path: &Path) -> anyhow::Result<()> {
    root.present().map_err(|e| anyhow!("{}: cannot write the chart: {e}", path.display()))
}

/// A tidy number for axis labels and cells: no trailing zeros, at most three decimals.
pub(crate) fn tidy(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let s = if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}
