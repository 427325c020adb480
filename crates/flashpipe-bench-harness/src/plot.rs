//! PNG charts of experiments and reproductions, drawn with the plotters crate's bitmap
//! backend and an embedded font, so they read the same on machines without fonts.
//!
//! Every chart carries a title, axis labels with units, tick values, a grid, a legend
//! under the plot, and, where it reproduces a paper, the paper's points marked with a
//! black-edged diamond and named beside the mark. A chart is lines over a numeric or a
//! categorical x axis, or grouped bars over categories; several charts of different
//! units go into one file as a grid of panels, each with its own axes.
//!
//! Lines carry a marker per series (circle, square, triangle, inverted triangle, in
//! turn) and may be dashed, so curves that lie on each other stay told apart; the
//! paper's labels are kept inside the plotting area, clear of the tick values.
//! [`record`] draws a chart without pixels and keeps what was drawn, for tests.
//!
//! The font is DejaVu Sans (`assets/DejaVuSans.ttf`, Bitstream Vera licence, see
//! `assets/DejaVuSans-LICENSE.txt`), compiled into the binary.

mod legend;
pub mod record;
mod reference;

use std::sync::Once;

use crate::kind::BenchErrorKind;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{FontStyle, FontTransform};

pub use legend::legend_height_pixels;
use legend::{draw_legend, text_width_estimate_pixels};
use reference::draw_reference_points;

/// DejaVu Sans, embedded.
const FONT_BYTES: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
/// The family name charts ask plotters for.
const FONT_FAMILY: &str = "sans-serif";

/// Width of one panel in pixels.
pub const PANEL_WIDTH_PIXELS: u32 = 900;
/// Height of one panel in pixels.
pub const PANEL_HEIGHT_PIXELS: u32 = 560;
/// Height of the band at the top of a panel that holds the title (and nothing else).
pub const TITLE_BAND_PIXELS: u32 = 44;
/// Thickness of the bands that hold the axis labels: the x label's band under the tick
/// values, the y label's band at the left edge (and nothing else).
pub const AXIS_LABEL_BAND_PIXELS: u32 = 30;
/// Height of one row of the legend under the x label's band.
pub const LEGEND_ROW_PIXELS: u32 = 22;
/// Legend entries on one row.
pub const LEGEND_ENTRIES_PER_ROW: usize = 3;

const TITLE_FONT_PIXELS: f64 = 21.0;
const AXIS_LABEL_FONT_PIXELS: f64 = 16.0;
const TICK_FONT_PIXELS: f64 = 13.0;
const NOTE_FONT_PIXELS: f64 = 12.0;

const COLOURS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];
const GRID_COLOUR: RGBColor = RGBColor(225, 225, 225);

/// The colour of series `index` (the palette in turn).
fn series_colour(index: usize) -> RGBColor {
    COLOURS[index % COLOURS.len()]
}

/// The mark drawn at each point of a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    /// A filled circle.
    Circle,
    /// A filled square.
    Square,
    /// A filled triangle, point up.
    Triangle,
    /// A filled triangle, point down.
    InvertedTriangle,
}

/// The markers in the order series take them.
const MARKERS: [Marker; 4] = [
    Marker::Circle,
    Marker::Square,
    Marker::Triangle,
    Marker::InvertedTriangle,
];

/// One line (or one bar per category): its name for the legend and its points (x, y).
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The legend's name of the series.
    pub name: String,
    /// Points in x order. On a categorical axis x is the category's index.
    pub points: Vec<(f64, f64)>,
    /// Drawn dashed (lines only).
    pub dashed: bool,
    /// Its marker; `None` takes the series' turn in [`Marker`]'s order.
    pub marker: Option<Marker>,
}

impl Series {
    /// A series named `name` with `points`, solid, its marker by its turn.
    pub fn new(name: impl Into<String>, points: impl IntoIterator<Item = (f64, f64)>) -> Series {
        Series {
            name: name.into(),
            points: points.into_iter().collect(),
            dashed: false,
            marker: None,
        }
    }

    /// The same series drawn dashed.
    pub fn dashed(mut self) -> Series {
        self.dashed = true;
        self
    }

    /// The same series with `marker` at its points.
    pub fn with_marker(mut self, marker: Marker) -> Series {
        self.marker = Some(marker);
        self
    }

    /// The marker drawn when this series is series `index` of its chart.
    pub fn marker_at(&self, index: usize) -> Marker {
        self.marker.unwrap_or(MARKERS[index % MARKERS.len()])
    }
}

/// The corners of `marker` `size` pixels from its centre (a circle as a 12-gon).
fn marker_vertices(marker: Marker, size: i32) -> Vec<(i32, i32)> {
    match marker {
        Marker::Circle => (0..12)
            .map(|step| {
                let angle = f64::from(step) * std::f64::consts::PI / 6.0;
                (
                    (f64::from(size) * angle.cos()).round() as i32,
                    (f64::from(size) * angle.sin()).round() as i32,
                )
            })
            .collect(),
        Marker::Square => vec![(-size, -size), (size, -size), (size, size), (-size, size)],
        Marker::Triangle => vec![(0, -size - 1), (size + 1, size), (-size - 1, size)],
        Marker::InvertedTriangle => vec![(0, size + 1), (size + 1, -size), (-size - 1, -size)],
    }
}

/// A marker: its shape filled, then its outline.
type MarkerElement<C, DB> =
    plotters::element::ComposedElement<C, DB, Polygon<(i32, i32)>, PathElement<(i32, i32)>>;

/// `marker` of `size` pixels in `colour`, centred on `at`: the shape filled and its
/// outline stroked in the same colour (crisp edges).
fn marker_element<C, DB: DrawingBackend>(
    at: C,
    marker: Marker,
    size: i32,
    colour: RGBColor,
) -> MarkerElement<C, DB> {
    let corners = marker_vertices(marker, size);
    let mut outline = corners.clone();
    outline.push(corners[0]);
    EmptyElement::at(at)
        + Polygon::new(corners, colour.filled())
        + PathElement::new(outline, colour.stroke_width(1))
}

/// A point the paper gives, drawn as a diamond and named beside it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReferencePoint {
    /// Its name, written beside the mark (e.g. "paper 24.6").
    pub name: String,
    /// Its x (the category's index on a categorical axis).
    pub x: f64,
    /// Its y, in the chart's y unit.
    pub y: f64,
    /// The series it belongs to (its colour, and its bar in a bar chart).
    pub series_index: usize,
}

/// How the series are drawn.
#[derive(Debug, Clone, PartialEq)]
pub enum ChartKind {
    /// Lines with a dot at each point over a numeric x axis from zero.
    Lines,
    /// Lines with a dot at each point over named categories, evenly spaced.
    CategoryLines {
        /// The names of x = 0, 1, 2, ...
        categories: Vec<String>,
    },
    /// One bar per series in each category, its value written above it.
    GroupedBars {
        /// The names of x = 0, 1, 2, ...
        categories: Vec<String>,
    },
}

/// One chart: what it shows and how.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// The title at the top.
    pub title: String,
    /// The x axis' label, with its unit (e.g. "over-provisioning (%)").
    pub x_label: String,
    /// The y axis' label, with its unit.
    pub y_label: String,
    /// How the series are drawn.
    pub kind: ChartKind,
    /// The series, coloured in order.
    pub series: Vec<Series>,
    /// The paper's points, if the chart reproduces a paper.
    pub reference_points: Vec<ReferencePoint>,
    /// The legend's name of the reference points (e.g. "paper (minFlash Fig. 5)").
    pub reference_name: String,
}

/// Why a chart could not be drawn.
#[derive(Debug, thiserror::Error)]
#[error("cannot draw {path}: {detail}")]
pub struct PlotError {
    /// The output file.
    pub path: String,
    /// What failed.
    pub detail: String,
    /// What kind of failure it is (a wrong name, a missing folder, a drawing failed).
    pub kind: BenchErrorKind,
}

/// A chart rendered into memory: RGB bytes, row by row.
#[derive(Debug, Clone)]
pub struct RenderedChart {
    /// Width in pixels.
    pub width_pixels: u32,
    /// Height in pixels.
    pub height_pixels: u32,
    /// 3 bytes per pixel, rows top to bottom.
    pub rgb: Vec<u8>,
}

impl RenderedChart {
    /// The pixel at (x, y) as (r, g, b).
    pub fn pixel(&self, x: u32, y: u32) -> (u8, u8, u8) {
        assert!(x < self.width_pixels && y < self.height_pixels);
        let at = ((y * self.width_pixels + x) * 3) as usize;
        (self.rgb[at], self.rgb[at + 1], self.rgb[at + 2])
    }
}

/// Checks, before any work, that a chart can be written at `path`: its name ends in
/// `.png` and its folder exists.
pub fn check_plot_path(path: &str) -> Result<(), PlotError> {
    let error = |kind, detail: String| PlotError {
        path: path.to_string(),
        detail,
        kind,
    };
    if !path.to_ascii_lowercase().ends_with(".png") {
        return Err(error(
            BenchErrorKind::InvalidInput,
            "the chart is a PNG file: give a name ending in .png".to_string(),
        ));
    }
    let folder = std::path::Path::new(path)
        .parent()
        .filter(|folder| !folder.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    if !folder.is_dir() {
        let kind = if folder.exists() {
            BenchErrorKind::InvalidInput
        } else {
            BenchErrorKind::NotFound
        };
        return Err(error(
            kind,
            format!("the folder {} does not exist", folder.display()),
        ));
    }
    Ok(())
}

/// Draws one chart into a PNG at `path`.
pub fn draw_chart(path: &str, chart: &Chart) -> Result<(), PlotError> {
    draw_panels(path, std::slice::from_ref(chart), 1)
}

/// Draws `charts` into a PNG at `path` as a grid of panels, `columns` a row, each
/// panel with its own title, axes and legend.
pub fn draw_panels(path: &str, charts: &[Chart], columns: usize) -> Result<(), PlotError> {
    let error = |kind| {
        move |detail: String| PlotError {
            path: path.to_string(),
            detail,
            kind,
        }
    };
    check_plot_path(path)?;
    check_charts(charts, columns).map_err(error(BenchErrorKind::Internal))?;
    std::fs::File::create(path)
        .map_err(|failure| error(BenchErrorKind::Io(failure.kind()))(failure.to_string()))?;
    let (width, height) = grid_size_pixels(charts.len(), columns);
    let root = BitMapBackend::new(path, (width, height)).into_drawing_area();
    draw_grid(&root, charts, columns).map_err(error(BenchErrorKind::Internal))?;
    root.present().map_err(|_| {
        error(BenchErrorKind::Io(std::io::ErrorKind::Other))(
            "the PNG could not be encoded or written".to_string(),
        )
    })
}

/// Renders one chart into memory (for tests and for callers that encode it themselves).
pub fn render_chart(chart: &Chart) -> Result<RenderedChart, PlotError> {
    let error = |detail: String| PlotError {
        path: "(memory)".to_string(),
        detail,
        kind: BenchErrorKind::Internal,
    };
    check_charts(std::slice::from_ref(chart), 1).map_err(error)?;
    let mut rgb = vec![0u8; (PANEL_WIDTH_PIXELS * PANEL_HEIGHT_PIXELS * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (PANEL_WIDTH_PIXELS, PANEL_HEIGHT_PIXELS))
            .into_drawing_area();
        draw_grid(&root, std::slice::from_ref(chart), 1).map_err(error)?;
        root.present()
            .map_err(|failure| error(failure.to_string()))?;
    }
    Ok(RenderedChart {
        width_pixels: PANEL_WIDTH_PIXELS,
        height_pixels: PANEL_HEIGHT_PIXELS,
        rgb,
    })
}

fn check_charts(charts: &[Chart], columns: usize) -> Result<(), String> {
    if charts.is_empty() {
        return Err("there is nothing to chart (no panels)".to_string());
    }
    if columns == 0 {
        return Err("a grid of panels needs at least one column".to_string());
    }
    for chart in charts {
        let points: usize = chart.series.iter().map(|line| line.points.len()).sum();
        if points + chart.reference_points.len() == 0 {
            return Err(format!("the chart \"{}\" has no points", chart.title));
        }
        let finite = chart
            .series
            .iter()
            .flat_map(|line| line.points.iter().copied())
            .chain(
                chart
                    .reference_points
                    .iter()
                    .map(|point| (point.x, point.y)),
            )
            .all(|(x, y)| x.is_finite() && y.is_finite());
        if !finite {
            return Err(format!(
                "the chart \"{}\" has a point that is not a finite number",
                chart.title
            ));
        }
    }
    Ok(())
}

fn grid_size_pixels(panels: usize, columns: usize) -> (u32, u32) {
    let columns_used = columns.min(panels) as u32;
    let rows = panels.div_ceil(columns) as u32;
    (
        PANEL_WIDTH_PIXELS * columns_used,
        PANEL_HEIGHT_PIXELS * rows,
    )
}

fn register_font_once() {
    static REGISTER: Once = Once::new();
    REGISTER.call_once(|| {
        let registered = plotters::style::register_font(FONT_FAMILY, FontStyle::Normal, FONT_BYTES);
        assert!(
            registered.is_ok(),
            "the embedded DejaVu Sans font is a valid TrueType file"
        );
    });
}

fn draw_grid<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    charts: &[Chart],
    columns: usize,
) -> Result<(), String> {
    register_font_once();
    root.fill(&WHITE).map_err(|failure| failure.to_string())?;
    let rows = charts.len().div_ceil(columns);
    let panels = root.split_evenly((rows, columns.min(charts.len())));
    for (panel, chart) in panels.iter().zip(charts) {
        draw_panel(panel, chart)?;
    }
    Ok(())
}

fn font(size_pixels: f64) -> TextStyle<'static> {
    (FONT_FAMILY, size_pixels).into_font().color(&BLACK)
}

fn draw_centred_text<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    text: &str,
    style: TextStyle<'_>,
) -> Result<(), String> {
    if text.is_empty() {
        return Ok(());
    }
    let (width, height) = area.dim_in_pixel();
    area.draw_text(
        text,
        &style.pos(Pos::new(HPos::Center, VPos::Center)),
        (width as i32 / 2, height as i32 / 2),
    )
    .map_err(|failure| failure.to_string())
}

/// The panel's bands: title, y label, plot, x label, legend.
struct PanelBands<DB: DrawingBackend> {
    title: DrawingArea<DB, Shift>,
    y_label: DrawingArea<DB, Shift>,
    plot: DrawingArea<DB, Shift>,
    x_label: DrawingArea<DB, Shift>,
    legend: DrawingArea<DB, Shift>,
}

fn panel_bands<DB: DrawingBackend>(
    panel: &DrawingArea<DB, Shift>,
    chart: &Chart,
) -> PanelBands<DB> {
    let (_, height) = panel.dim_in_pixel();
    let (title, rest) = panel.split_vertically(TITLE_BAND_PIXELS);
    let (width, _) = panel.dim_in_pixel();
    let legend_height = legend_height_pixels(chart, width);
    let rest_height = height - TITLE_BAND_PIXELS;
    let (rest, legend) = rest.split_vertically(rest_height - legend_height);
    let (rest, x_label) =
        rest.split_vertically(rest_height - legend_height - AXIS_LABEL_BAND_PIXELS);
    let (y_label, plot) = rest.split_horizontally(AXIS_LABEL_BAND_PIXELS);
    PanelBands {
        title,
        y_label,
        plot,
        x_label,
        legend,
    }
}

fn draw_panel<DB: DrawingBackend>(
    panel: &DrawingArea<DB, Shift>,
    chart: &Chart,
) -> Result<(), String> {
    let bands = panel_bands(panel, chart);
    draw_centred_text(&bands.title, &chart.title, font(TITLE_FONT_PIXELS))?;
    draw_centred_text(&bands.x_label, &chart.x_label, font(AXIS_LABEL_FONT_PIXELS))?;
    draw_centred_text(
        &bands.y_label,
        &chart.y_label,
        font(AXIS_LABEL_FONT_PIXELS).transform(FontTransform::Rotate270),
    )?;
    draw_plot(&bands.plot, chart)?;
    draw_legend(&bands.legend, chart)
}

fn categories(chart: &Chart) -> Option<&[String]> {
    match &chart.kind {
        ChartKind::Lines => None,
        ChartKind::CategoryLines { categories } | ChartKind::GroupedBars { categories } => {
            Some(categories)
        }
    }
}

/// The x range: from zero for numbers, half a slot either side of the categories.
fn x_range(chart: &Chart) -> std::ops::Range<f64> {
    match categories(chart) {
        Some(names) => -0.5..(names.len().max(1) as f64 - 0.5),
        None => {
            let largest = chart
                .series
                .iter()
                .flat_map(|line| line.points.iter().map(|point| point.0))
                .chain(chart.reference_points.iter().map(|point| point.x))
                .fold(0.0, f64::max);
            let largest = if largest > 0.0 { largest } else { 1.0 };
            0.0..largest * 1.05
        }
    }
}

/// The y range: from zero (or the lowest value, if negative) to above the largest.
fn y_range(chart: &Chart) -> std::ops::Range<f64> {
    let values = chart
        .series
        .iter()
        .flat_map(|line| line.points.iter().map(|point| point.1))
        .chain(chart.reference_points.iter().map(|point| point.y));
    let (lowest, largest) = values.fold((0.0f64, 0.0f64), |(low, high), value| {
        (low.min(value), high.max(value))
    });
    let largest = if largest > lowest {
        largest
    } else {
        lowest + 1.0
    };
    let headroom = (largest - lowest) * 0.15;
    lowest..largest + headroom
}

/// A tick value with as few digits as it needs.
fn tick_text(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude == 0.0 {
        "0".to_string()
    } else if magnitude >= 10_000_000.0 {
        format!("{value:.2e}")
    } else if magnitude >= 100.0 || value.fract() == 0.0 {
        format!("{value:.0}")
    } else if magnitude >= 1.0 {
        trim_zeros(format!("{value:.2}"))
    } else {
        trim_zeros(format!("{value:.3}"))
    }
}

fn trim_zeros(text: String) -> String {
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// A value written on a bar or beside a mark: three significant digits.
pub fn value_text(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude >= 10_000_000.0 {
        format!("{value:.3e}")
    } else if magnitude >= 100.0 {
        format!("{value:.0}")
    } else if magnitude >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    }
}

/// Where series `series_index` of `series_count` sits in category `x` of a bar chart.
fn bar_span(x: f64, series_index: usize, series_count: usize) -> (f64, f64) {
    let slot = 0.8 / series_count.max(1) as f64;
    let left = x - 0.4 + slot * series_index as f64;
    (left + slot * 0.1, left + slot * 0.9)
}

fn draw_plot<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    chart: &Chart,
) -> Result<(), String> {
    let x_range = x_range(chart);
    let y_range = y_range(chart);
    let category_names: Vec<String> = categories(chart)
        .map(<[String]>::to_vec)
        .unwrap_or_default();
    let mut plot = ChartBuilder::on(area)
        .margin_top(12)
        .margin_right(28)
        .x_label_area_size(28)
        .y_label_area_size(64)
        .build_cartesian_2d(x_range, y_range)
        .map_err(|failure| failure.to_string())?;
    let x_formatter = |x: &f64| -> String {
        if category_names.is_empty() {
            return tick_text(*x);
        }
        let index = x.round();
        if (x - index).abs() > 1e-6 || index < 0.0 {
            return String::new();
        }
        category_names
            .get(index as usize)
            .cloned()
            .unwrap_or_default()
    };
    let x_tick_count = if category_names.is_empty() {
        10
    } else {
        category_names.len()
    };
    plot.configure_mesh()
        .x_labels(x_tick_count)
        .y_labels(8)
        .x_label_formatter(&x_formatter)
        .y_label_formatter(&|y: &f64| tick_text(*y))
        .x_label_style(font(TICK_FONT_PIXELS))
        .y_label_style(font(TICK_FONT_PIXELS))
        .light_line_style(WHITE.mix(0.0))
        .bold_line_style(GRID_COLOUR)
        .axis_style(BLACK.stroke_width(1))
        .draw()
        .map_err(|failure| failure.to_string())?;
    match chart.kind {
        ChartKind::GroupedBars { .. } => draw_bars(&mut plot, chart)?,
        ChartKind::Lines | ChartKind::CategoryLines { .. } => draw_lines(&mut plot, chart)?,
    }
    draw_reference_points(&mut plot, chart)
}

type Plot<'area, DB> = ChartContext<
    'area,
    DB,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

fn draw_lines<DB: DrawingBackend>(plot: &mut Plot<'_, DB>, chart: &Chart) -> Result<(), String> {
    let count = chart.series.len() as u32;
    for (index, line) in chart.series.iter().enumerate() {
        let colour = series_colour(index);
        // Earlier series are drawn wider, so a later one lying on top leaves them visible.
        let widening = 2 * (count - 1 - index as u32).min(3);
        let stroke = colour.stroke_width(3 + widening);
        if line.dashed {
            plot.draw_series(DashedLineSeries::new(
                line.points.iter().copied(),
                12,
                8,
                stroke,
            ))
        } else {
            plot.draw_series(LineSeries::new(line.points.iter().copied(), stroke))
        }
        .map_err(|failure| failure.to_string())?;
        let marker = line.marker_at(index);
        plot.draw_series(
            line.points
                .iter()
                .map(|&point| marker_element(point, marker, 4 + widening as i32, colour)),
        )
        .map_err(|failure| failure.to_string())?;
    }
    Ok(())
}

fn draw_bars<DB: DrawingBackend>(plot: &mut Plot<'_, DB>, chart: &Chart) -> Result<(), String> {
    let count = chart.series.len();
    for (index, line) in chart.series.iter().enumerate() {
        let colour = series_colour(index);
        for &(x, y) in &line.points {
            let (left, right) = bar_span(x, index, count);
            plot.draw_series(std::iter::once(Rectangle::new(
                [(left, 0.0), (right, y)],
                colour.filled(),
            )))
            .map_err(|failure| failure.to_string())?;
            let middle = (left + right) / 2.0;
            let bar_height_pixels =
                (plot.backend_coord(&(middle, 0.0)).1 - plot.backend_coord(&(middle, y)).1).abs();
            let (at, label_style) = if bar_height_pixels >= 24 {
                (
                    (middle, y / 2.0),
                    font(NOTE_FONT_PIXELS)
                        .color(&WHITE)
                        .pos(Pos::new(HPos::Center, VPos::Center)),
                )
            } else {
                (
                    (middle, y),
                    font(NOTE_FONT_PIXELS).pos(Pos::new(HPos::Center, VPos::Bottom)),
                )
            };
            plot.draw_series(std::iter::once(Text::new(value_text(y), at, label_style)))
                .map_err(|failure| failure.to_string())?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_chart() -> Chart {
        Chart {
            title: "Sample".to_string(),
            x_label: "x (units)".to_string(),
            y_label: "y (units)".to_string(),
            kind: ChartKind::Lines,
            series: vec![Series::new(
                "doubling",
                [(1.0, 2.0), (2.0, 4.0), (4.0, 8.0)],
            )],
            reference_points: vec![ReferencePoint {
                name: "paper 8".to_string(),
                x: 4.0,
                y: 8.0,
                series_index: 0,
            }],
            reference_name: "paper".to_string(),
        }
    }

    #[test]
    fn draws_a_png_file() {
        let path = std::env::temp_dir().join(format!("flashpipe-plot-{}.png", std::process::id()));
        let path = path.to_str().unwrap().to_string();
        draw_chart(&path, &sample_chart()).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn refuses_a_chart_without_points() {
        let mut chart = sample_chart();
        chart.series.clear();
        chart.reference_points.clear();
        let error = render_chart(&chart).unwrap_err();
        assert!(error.to_string().contains("no points"), "{error}");
    }

    #[test]
    fn tick_and_value_texts_are_short() {
        assert_eq!(tick_text(0.0), "0");
        assert_eq!(tick_text(2.5), "2.5");
        assert_eq!(tick_text(150.0), "150");
        assert_eq!(tick_text(0.125), "0.125");
        assert_eq!(value_text(24.61), "24.6");
        assert_eq!(value_text(1.2), "1.20");
    }
}
