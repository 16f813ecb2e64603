//! The drawing helpers every chart shares: canvas, header and legend, panels and axes, fault
//! bands, placeholders.

use std::path::Path;
use std::sync::OnceLock;

use anyhow::anyhow;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::schema::RunResult;
use crate::text_box::TextBox;

use super::record::{Recorder, TextLog};
use crate::style::{GREY, GRID, GRID_BOLD, INK, OI_YELLOW};

pub(crate) type Area<'a> = DrawingArea<Recorder<'a>, Shift>;

/// A chart written to its file.
pub(crate) struct Drawn {
    /// True when the image only says that there was no data.
    pub placeholder: bool,
    pub width: u32,
    pub height: u32,
    /// Every text drawn, where its pixels landed.
    pub text: Vec<TextBox>,
}

/// Every chart is this wide, so the page lines them up.
pub(crate) const WIDTH: u32 = 1280;

static REGULAR: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");
static BOLD: &[u8] = include_bytes!("../../assets/DejaVuSans-Bold.ttf");

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

/// Width of a bold text in pixels.
pub(crate) fn bold_width(text: &str, size: f64) -> i32 {
    FontDesc::new(FontFamily::SansSerif, size, FontStyle::Bold)
        .box_size(text)
        .map(|(w, _)| w as i32)
        .unwrap_or((text.chars().count() as f64 * size * 0.65) as i32)
}

/// Breaks `text` into lines no wider than `max_px` as `width` measures them, at spaces. A
/// single word wider than that keeps a line to itself.
pub(crate) fn wrap(text: &str, max_px: i32, width: impl Fn(&str) -> i32) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        match lines.last_mut() {
            Some(line) if width(&format!("{line} {word}")) <= max_px => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines
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
pub(crate) fn placeholder(path: &Path, title: &str, message: &str) -> anyhow::Result<Drawn> {
    let (root, log) = canvas(path, 260)?;
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
    let mut drawn = finish(root, log, path)?;
    drawn.placeholder = true;
    Ok(drawn)
}

/// Opens a chart file of the standard width, and the log of the text drawn on it.
pub(crate) fn canvas(path: &Path, height: u32) -> anyhow::Result<(Area<'_>, TextLog)> {
    let (backend, log) = Recorder::new(BitMapBackend::new(path, (WIDTH, height)));
    let root = backend.into_drawing_area();
    root.fill(&WHITE).map_err(draw_err)?;
    Ok((root, log))
}

/// Writes the chart to its file.
pub(crate) fn finish(root: Area<'_>, log: TextLog, path: &Path) -> anyhow::Result<Drawn> {
    root.present().map_err(|e| anyhow!("{}: cannot write the chart: {e}", path.display()))?;
    let (width, height) = root.dim_in_pixel();
    drop(root);
    let text = log.take();
    Ok(Drawn { placeholder: false, width, height, text })
}

/// The limit is a wide light band under the data, so it stays visible where a line runs on it.
pub(crate) const LIMIT_BAND: RGBColor = RGBColor(0xB4, 0xB4, 0xB4);

/// Grid shape for small multiples: at most four columns.
pub(crate) fn grid(n: usize) -> (usize, usize) {
    let cols = match n {
        0..=4 => n.max(1),
        5 | 6 | 9 => 3,
        _ => 4,
    };
    (n.div_ceil(cols), cols)
}

pub(crate) fn mesh_style<'a, 'b, X, Y>(
    chart: &'b mut ChartContext<'a, Recorder<'a>, Cartesian2d<X, Y>>,
) -> plotters::chart::MeshStyle<'a, 'b, X, Y, Recorder<'a>>
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

pub(crate) fn empty_panel(area: &Area, message: &str) -> anyhow::Result<()> {
    let (w, h) = area.dim_in_pixel();
    area.draw(&Rectangle::new([(10, 30), (w as i32 - 10, h as i32 - 30)], RGBColor(0xF4, 0xF4, 0xF4).filled()))?;
    area.draw(&Text::new(
        message.to_string(),
        (w as i32 / 2, h as i32 / 2),
        font(15.0).pos(Pos::new(HPos::Center, VPos::Center)),
    ))?;
    Ok(())
}

/// Fault windows as shaded bands; an instantaneous fault (a script flush) still shows as a
/// thin band.
pub(crate) fn shade_faults(
    chart: &mut ChartContext<
        '_,
        Recorder<'_>,
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

pub(crate) fn fault_legend(kinds: &[String]) -> Option<LegendItem> {
    (!kinds.is_empty())
        .then(|| LegendItem::new(format!("fault: {}", kinds.join(", ")), Swatch::Fill(OI_YELLOW.mix(0.45))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_breaks_at_spaces_within_the_width() {
        let chars = |s: &str| s.len() as i32;
        assert_eq!(wrap("fail-open: starved 1/1 (expected)", 20, chars), ["fail-open: starved", "1/1 (expected)"]);
        assert_eq!(wrap("  one  ", 20, chars), ["one"]);
        assert_eq!(wrap("averyveryverylongword x", 5, chars), ["averyveryverylongword", "x"]);
        assert!(wrap("", 5, chars).is_empty());
    }

    #[test]
    fn grid_never_exceeds_four_columns() {
        for n in 1..20 {
            let (rows, cols) = grid(n);
            assert!(cols <= 4 && rows * cols >= n, "{n} -> {rows}x{cols}");
        }
    }
}
