//! Where text lands, and whether two texts overlap.
//!
//! Every chart records the box of every text it draws (see [`crate::RenderedChart`]): the
//! pixels the glyphs actually ink, axis labels and legends included. The browser test records
//! the boxes of the page's own text the same way, so one check covers what a reader sees.

/// The rectangle a text covers: in a chart, the pixels its glyphs ink; on a page, the box the
/// browser lays it out in. Right and bottom edges are exclusive.
#[derive(Debug, Clone, PartialEq)]
pub struct TextBox {
    pub text: String,
    pub left: f64,
    pub top: f64,
    pub right: f64,
    pub bottom: f64,
}

impl TextBox {
    /// Whether the two boxes share any area (touching edges do not count).
    pub fn intersects(&self, other: &TextBox) -> bool {
        self.left < other.right && other.left < self.right && self.top < other.bottom && other.top < self.bottom
    }

    /// Whether the box lies inside a `width` x `height` image from its origin.
    pub fn within(&self, width: f64, height: f64) -> bool {
        self.left >= 0.0 && self.top >= 0.0 && self.right <= width && self.bottom <= height
    }
}

/// Every pair of boxes that overlap, by index, the lower index first.
pub fn overlapping(boxes: &[TextBox]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for (i, a) in boxes.iter().enumerate() {
        for (j, b) in boxes.iter().enumerate().skip(i + 1) {
            if a.intersects(b) {
                out.push((i, j));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(left: f64, top: f64, right: f64, bottom: f64) -> TextBox {
        TextBox { text: String::new(), left, top, right, bottom }
    }

    #[test]
    fn boxes_overlap_when_they_share_area_not_when_they_touch() {
        let a = b(0.0, 0.0, 10.0, 10.0);
        assert!(a.intersects(&b(9.0, 9.0, 20.0, 20.0)));
        assert!(a.intersects(&b(2.0, 2.0, 3.0, 3.0)), "one inside the other");
        assert!(!a.intersects(&b(10.0, 0.0, 20.0, 10.0)), "side by side");
        assert!(!a.intersects(&b(0.0, 10.0, 10.0, 20.0)), "one above the other");
        assert_eq!(overlapping(&[a, b(20.0, 0.0, 30.0, 5.0), b(5.0, 4.0, 25.0, 6.0)]), vec![(0, 2), (1, 2)]);
    }

    #[test]
    fn within_checks_every_edge() {
        assert!(b(0.0, 0.0, 100.0, 50.0).within(100.0, 50.0));
        assert!(!b(-1.0, 0.0, 10.0, 10.0).within(100.0, 50.0));
        assert!(!b(0.0, 0.0, 101.0, 10.0).within(100.0, 50.0));
        assert!(!b(0.0, 45.0, 10.0, 51.0).within(100.0, 50.0));
    }
}
