//! Lines that coincide: drawn as nested bands (widest first) and named in a note, so no line
//! silently disappears under another.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::draw::{draw_err, font, header_height, Area, LegendItem, WIDTH};
use crate::style::GREY;

/// Which lines coincide, and how wide to draw each.
pub(super) struct Bands {
    /// Groups of line indices whose points share x values and differ by at most the tolerance.
    groups: Vec<Vec<usize>>,
    /// Stroke width per line: 2 alone, wider the earlier it is drawn in a group.
    pub widths: Vec<u32>,
}

impl Bands {
    /// Groups `lines` whose y values differ by at most `tol` at every shared x.
    pub(super) fn of<X: PartialEq>(lines: &[(String, Vec<(X, f64)>)], tol: f64) -> Self {
        let groups = coinciding(lines, tol);
        let mut widths = vec![2u32; lines.len()];
        for g in groups.iter().filter(|g| g.len() > 1) {
            for (j, &i) in g.iter().enumerate() {
                widths[i] = 2 + 2 * (g.len() - 1 - j) as u32;
            }
        }
        Bands { groups, widths }
    }

    /// The names of each group of two or more, `a, b` per group.
    pub(super) fn names(&self, names: &[String]) -> Vec<String> {
        self.groups
            .iter()
            .filter(|g| g.len() > 1)
            .map(|g| g.iter().map(|&i| names[i].as_str()).collect::<Vec<_>>().join(", "))
            .collect()
    }
}

/// The note under a chart's legend naming the coinciding lines, if any.
pub(super) fn note(mut groups: Vec<String>) -> Option<String> {
    groups.dedup();
    let mut unique: Vec<String> = Vec::new();
    for g in groups {
        if !unique.contains(&g) {
            unique.push(g);
        }
    }
    (!unique.is_empty()).then(|| format!("coinciding lines, drawn as nested bands: {}", unique.join("; ")))
}

/// The header's height with room for the note, if there is one.
pub(super) fn height_with(legend: &[LegendItem], note: &Option<String>) -> u32 {
    header_height(legend) + if note.is_some() { 26 } else { 0 }
}

/// Draws the note, if any, under the header's legend.
pub(super) fn draw_note(top: &Area, legend: &[LegendItem], note: &Option<String>) -> anyhow::Result<()> {
    if let Some(note) = note {
        top.draw(&Text::new(
            note.clone(),
            (WIDTH as i32 / 2, header_height(legend) as i32 + 2),
            font(14.0).color(&GREY).pos(Pos::new(HPos::Center, VPos::Top)),
        ))
        .map_err(draw_err)?;
    }
    Ok(())
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coinciding_lines_are_grouped_and_drawn_widest_first() {
        let lines = vec![
            ("a".to_string(), vec![(0, 1.0), (1, 1.0)]),
            ("b".to_string(), vec![(0, 1.0), (1, 1.01)]),
            ("c".to_string(), vec![(0, 1.0), (1, 5.0)]),
        ];
        let bands = Bands::of(&lines, 0.05);
        assert_eq!(bands.groups, vec![vec![0, 1], vec![2]]);
        assert_eq!(bands.widths, vec![4, 2, 2]);
        let names: Vec<String> = lines.iter().map(|l| l.0.clone()).collect();
        assert_eq!(bands.names(&names), vec!["a, b".to_string()]);
        assert_eq!(
            note([bands.names(&names), bands.names(&names)].concat()).as_deref(),
            Some("coinciding lines, drawn as nested bands: a, b")
        );
        assert_eq!(note(Vec::new()), None);
    }
}
