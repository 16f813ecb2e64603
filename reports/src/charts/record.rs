//! A bitmap backend that records where every text's pixels land.
//!
//! plotters draws all text (titles, legends, axis labels, tick labels) through
//! `DrawingBackend::draw_text`. [`Recorder`] wraps the bitmap backend, draws text exactly as
//! plotters' default does (the bitmap backend does not override it, so the PNG is unchanged),
//! and keeps the extent of the pixels each text inks: the box a reader sees, which is what a
//! layout check must compare. Every other call goes straight to the bitmap.

use std::cell::RefCell;
use std::rc::Rc;

use plotters::prelude::*;
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingErrorKind};

use crate::text_box::TextBox;

/// The boxes a chart's text landed in, shared between the backend and whoever reads them.
pub(crate) type TextLog = Rc<RefCell<Vec<TextBox>>>;

pub(crate) struct Recorder<'a> {
    inner: BitMapBackend<'a>,
    log: TextLog,
}

impl<'a> Recorder<'a> {
    pub(crate) fn new(inner: BitMapBackend<'a>) -> (Self, TextLog) {
        let log = TextLog::default();
        (Recorder { inner, log: log.clone() }, log)
    }
}

type Failed<'a> = DrawingErrorKind<<BitMapBackend<'a> as DrawingBackend>::ErrorType>;

impl<'a> DrawingBackend for Recorder<'a> {
    type ErrorType = <BitMapBackend<'a> as DrawingBackend>::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.inner.get_size()
    }

    fn ensure_prepared(&mut self) -> Result<(), Failed<'a>> {
        self.inner.ensure_prepared()
    }

    fn present(&mut self) -> Result<(), Failed<'a>> {
        self.inner.present()
    }

    fn draw_pixel(&mut self, point: BackendCoord, color: BackendColor) -> Result<(), Failed<'a>> {
        self.inner.draw_pixel(point, color)
    }

    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), Failed<'a>> {
        self.inner.draw_line(from, to, style)
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), Failed<'a>> {
        self.inner.draw_rect(upper_left, bottom_right, style, fill)
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), Failed<'a>> {
        self.inner.draw_path(path, style)
    }

    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), Failed<'a>> {
        self.inner.draw_circle(center, radius, style, fill)
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Result<(), Failed<'a>> {
        self.inner.fill_polygon(vert, style)
    }

    fn blit_bitmap(&mut self, pos: BackendCoord, size: (u32, u32), src: &[u8]) -> Result<(), Failed<'a>> {
        self.inner.blit_bitmap(pos, size, src)
    }

    fn estimate_text_size<TStyle: BackendTextStyle>(
        &self,
        text: &str,
        style: &TStyle,
    ) -> Result<(u32, u32), Failed<'a>> {
        self.inner.estimate_text_size(text, style)
    }

    /// plotters' default text drawing, step for step, noting the extent of the inked pixels
    /// (before clipping to the image, so text that runs off the edge shows as such).
    fn draw_text<TStyle: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &TStyle,
        pos: BackendCoord,
    ) -> Result<(), Failed<'a>> {
        if style.color().alpha == 0.0 {
            return Ok(());
        }
        let ((min_x, min_y), (max_x, max_y)) =
            style.layout_box(text).map_err(|e| DrawingErrorKind::FontError(Box::new(e)))?;
        let (width, height) = (max_x - min_x, max_y - min_y);
        let dx = match style.anchor().h_pos {
            HPos::Left => 0,
            HPos::Right => -width,
            HPos::Center => -width / 2,
        };
        let dy = match style.anchor().v_pos {
            VPos::Top => 0,
            VPos::Center => -height / 2,
            VPos::Bottom => -height,
        };
        let transform = style.transform();
        let (w, h) = self.get_size();
        let mut inked: Option<(i32, i32, i32, i32)> = None;
        let drawn = style.draw(text, (0, 0), |x, y, color| {
            let (x, y) = transform.transform(x + dx - min_x, y + dy - min_y);
            let (x, y) = (pos.0 + x, pos.1 + y);
            if color.alpha > 0.0 {
                inked = Some(match inked {
                    None => (x, y, x, y),
                    Some((l, t, r, b)) => (l.min(x), t.min(y), r.max(x), b.max(y)),
                });
            }
            if x >= 0 && x < w as i32 && y >= 0 && y < h as i32 {
                self.inner.draw_pixel((x, y), color)
            } else {
                Ok(())
            }
        });
        if let Some((l, t, r, b)) = inked {
            self.log.borrow_mut().push(TextBox {
                text: text.to_string(),
                left: l as f64,
                top: t as f64,
                right: (r + 1) as f64,
                bottom: (b + 1) as f64,
            });
        }
        match drawn {
            Ok(result) => result,
            Err(e) => Err(DrawingErrorKind::FontError(Box::new(e))),
        }
    }
}
