//! Colours, the order names are listed in, and number formatting: shared by the charts and
//! the page.

use plotters::prelude::*;

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

/// Failure policies in the order every chart and table lists them.
pub(crate) const POLICIES: [&str; 3] = ["fail-open", "fail-closed", "local-budget"];

pub(crate) fn policy_color(name: &str) -> RGBColor {
    match name {
        "fail-open" => OI_VERMILLION,
        "fail-closed" => OI_BLUE,
        "local-budget" => OI_GREEN,
        _ => GREY,
    }
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
