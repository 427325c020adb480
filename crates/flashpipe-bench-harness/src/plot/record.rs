//! A chart drawn without pixels: a drawing backend that keeps each text with its box and
//! each shape with its colour, so tests check what a chart shows (its axis labels, tick
//! values, legend, the paper's labels and where they sit, each series' colour, marker
//! and stroke) rather than comparing images.

use std::cell::RefCell;
use std::convert::Infallible;
use std::rc::Rc;

use plotters::prelude::*;
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingErrorKind,
};

use super::{check_charts, draw_grid, Chart, PlotError, PANEL_HEIGHT_PIXELS, PANEL_WIDTH_PIXELS};

/// A text drawn, with the box it covers in pixels (before any rotation).
#[derive(Debug, Clone, PartialEq)]
pub struct DrawnText {
    /// The text.
    pub text: String,
    /// Left edge.
    pub left: i32,
    /// Top edge.
    pub top: i32,
    /// Right edge.
    pub right: i32,
    /// Bottom edge.
    pub bottom: i32,
}

impl DrawnText {
    /// Whether this text's box and `other`'s share any pixel.
    pub fn overlaps(&self, other: &DrawnText) -> bool {
        self.left < other.right
            && other.left < self.right
            && self.top < other.bottom
            && other.top < self.bottom
    }
}

/// A filled polygon drawn: its colour and how many corners it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrawnPolygon {
    /// Its colour, (red, green, blue).
    pub colour: (u8, u8, u8),
    /// Its corners.
    pub corners: usize,
}

/// What drawing a chart drew.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Recording {
    /// Every text, in drawing order.
    pub texts: Vec<DrawnText>,
    /// Every path (a line or a dash of a dashed line): its colour.
    pub paths: Vec<(u8, u8, u8)>,
    /// Every filled polygon (markers, diamonds).
    pub polygons: Vec<DrawnPolygon>,
    /// Width of the drawing.
    pub width_pixels: u32,
    /// Height of the drawing.
    pub height_pixels: u32,
}

impl Recording {
    /// The texts exactly equal to `text`.
    pub fn texts_equal(&self, text: &str) -> Vec<&DrawnText> {
        self.texts
            .iter()
            .filter(|drawn| drawn.text == text)
            .collect()
    }

    /// The texts starting with `prefix`.
    pub fn texts_starting(&self, prefix: &str) -> Vec<&DrawnText> {
        self.texts
            .iter()
            .filter(|drawn| drawn.text.starts_with(prefix))
            .collect()
    }

    /// Paths drawn in `colour`.
    pub fn paths_in(&self, colour: (u8, u8, u8)) -> usize {
        self.paths.iter().filter(|&&drawn| drawn == colour).count()
    }

    /// Polygons of `corners` corners drawn in `colour`.
    pub fn polygons_in(&self, colour: (u8, u8, u8), corners: usize) -> usize {
        self.polygons
            .iter()
            .filter(|drawn| drawn.colour == colour && drawn.corners == corners)
            .count()
    }
}

/// The colour series `index` of a chart is drawn in, as (red, green, blue).
pub fn series_colour(index: usize) -> (u8, u8, u8) {
    let RGBColor(red, green, blue) = super::series_colour(index);
    (red, green, blue)
}

/// Draws `chart` as one panel and returns what was drawn.
pub fn record_chart(chart: &Chart) -> Result<Recording, PlotError> {
    let error = |detail: String| PlotError {
        path: "(recording)".to_string(),
        detail,
        kind: crate::kind::BenchErrorKind::Internal,
    };
    check_charts(std::slice::from_ref(chart), 1).map_err(error)?;
    let recording = Rc::new(RefCell::new(Recording {
        width_pixels: PANEL_WIDTH_PIXELS,
        height_pixels: PANEL_HEIGHT_PIXELS,
        ..Recording::default()
    }));
    {
        let backend = RecordingBackend {
            size: (PANEL_WIDTH_PIXELS, PANEL_HEIGHT_PIXELS),
            recording: Rc::clone(&recording),
        };
        let root = backend.into_drawing_area();
        draw_grid(&root, std::slice::from_ref(chart), 1).map_err(error)?;
    }
    let recorded = recording.borrow().clone();
    Ok(recorded)
}

/// The backend: no pixels, only the record.
struct RecordingBackend {
    size: (u32, u32),
    recording: Rc<RefCell<Recording>>,
}

fn rgb(colour: BackendColor) -> (u8, u8, u8) {
    colour.rgb
}

impl DrawingBackend for RecordingBackend {
    type ErrorType = Infallible;

    fn get_size(&self) -> (u32, u32) {
        self.size
    }

    fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<Infallible>> {
        Ok(())
    }

    fn present(&mut self) -> Result<(), DrawingErrorKind<Infallible>> {
        Ok(())
    }

    fn draw_pixel(
        &mut self,
        _point: BackendCoord,
        _colour: BackendColor,
    ) -> Result<(), DrawingErrorKind<Infallible>> {
        Ok(())
    }

    fn draw_line<S: BackendStyle>(
        &mut self,
        _from: BackendCoord,
        _to: BackendCoord,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Infallible>> {
        self.recording.borrow_mut().paths.push(rgb(style.color()));
        Ok(())
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        _upper_left: BackendCoord,
        _bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<Infallible>> {
        if fill {
            self.recording.borrow_mut().polygons.push(DrawnPolygon {
                colour: rgb(style.color()),
                corners: 4,
            });
        }
        Ok(())
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        _path: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Infallible>> {
        if style.color().alpha > 0.0 {
            self.recording.borrow_mut().paths.push(rgb(style.color()));
        }
        Ok(())
    }

    fn draw_circle<S: BackendStyle>(
        &mut self,
        _center: BackendCoord,
        _radius: u32,
        style: &S,
        _fill: bool,
    ) -> Result<(), DrawingErrorKind<Infallible>> {
        self.recording.borrow_mut().polygons.push(DrawnPolygon {
            colour: rgb(style.color()),
            corners: 0,
        });
        Ok(())
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vertices: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Infallible>> {
        let corners = vertices.into_iter().count();
        self.recording.borrow_mut().polygons.push(DrawnPolygon {
            colour: rgb(style.color()),
            corners,
        });
        Ok(())
    }

    fn draw_text<TStyle: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &TStyle,
        (x, y): BackendCoord,
    ) -> Result<(), DrawingErrorKind<Infallible>> {
        let ((min_x, min_y), (max_x, max_y)) = style
            .layout_box(text)
            .unwrap_or(((0, 0), (text.chars().count() as i32 * 7, 13)));
        let (width, height) = (max_x - min_x, max_y - min_y);
        let left = match style.anchor().h_pos {
            HPos::Left => x,
            HPos::Right => x - width,
            HPos::Center => x - width / 2,
        };
        let top = match style.anchor().v_pos {
            VPos::Top => y,
            VPos::Center => y - height / 2,
            VPos::Bottom => y - height,
        };
        self.recording.borrow_mut().texts.push(DrawnText {
            text: text.to_string(),
            left,
            top,
            right: left + width,
            bottom: top + height,
        });
        Ok(())
    }
}
