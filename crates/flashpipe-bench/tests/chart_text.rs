//! A rendered chart carries text: ink (dark pixels) inside the title's band and the two
//! axis labels' bands, and none there when the chart has no title or labels, so the ink
//! is the text and not lines or marks straying into the bands.

use flashpipe_bench::plot::{
    legend_height_pixels, render_chart, Chart, ChartKind, ReferencePoint, RenderedChart, Series,
    AXIS_LABEL_BAND_PIXELS, PANEL_HEIGHT_PIXELS, TITLE_BAND_PIXELS,
};

/// A pixel this dark is ink, not the white background or the light grid.
const INK_LEVEL_MAX: u8 = 110;

fn chart(title: &str, x_label: &str, y_label: &str) -> Chart {
    Chart {
        title: title.to_string(),
        x_label: x_label.to_string(),
        y_label: y_label.to_string(),
        kind: ChartKind::CategoryLines {
            categories: ["1", "2", "4", "8"].map(String::from).to_vec(),
        },
        series: vec![
            Series::new(
                "read",
                [(0.0, 24.0), (1.0, 48.0), (2.0, 95.0), (3.0, 190.0)],
            ),
            Series::new("write", [(0.0, 7.0), (1.0, 15.0), (2.0, 30.0), (3.0, 60.0)]),
        ],
        reference_points: vec![ReferencePoint {
            name: "paper 24.6".to_string(),
            x: 0.0,
            y: 24.6,
            series_index: 0,
        }],
        reference_name: "paper".to_string(),
    }
}

/// Dark pixels in the rectangle [left, right) x [top, bottom).
fn ink_pixels(rendered: &RenderedChart, (left, top, right, bottom): (u32, u32, u32, u32)) -> usize {
    (top..bottom)
        .flat_map(|y| (left..right).map(move |x| (x, y)))
        .filter(|&(x, y)| {
            let (red, green, blue) = rendered.pixel(x, y);
            red.max(green).max(blue) <= INK_LEVEL_MAX
        })
        .count()
}

fn title_band(rendered: &RenderedChart) -> (u32, u32, u32, u32) {
    (0, 0, rendered.width_pixels, TITLE_BAND_PIXELS)
}

fn x_label_band(rendered: &RenderedChart, chart: &Chart) -> (u32, u32, u32, u32) {
    let bottom = PANEL_HEIGHT_PIXELS - legend_height_pixels(chart, rendered.width_pixels);
    (
        AXIS_LABEL_BAND_PIXELS,
        bottom - AXIS_LABEL_BAND_PIXELS,
        rendered.width_pixels,
        bottom,
    )
}

fn y_label_band(rendered: &RenderedChart, chart: &Chart) -> (u32, u32, u32, u32) {
    let bottom = PANEL_HEIGHT_PIXELS
        - legend_height_pixels(chart, rendered.width_pixels)
        - AXIS_LABEL_BAND_PIXELS;
    (0, TITLE_BAND_PIXELS, AXIS_LABEL_BAND_PIXELS, bottom)
}

#[test]
fn the_title_and_axis_labels_are_drawn_as_ink() {
    let chart = chart("RAD Fig. 4", "packages N", "bandwidth (MiB/s)");
    let rendered = render_chart(&chart).unwrap();
    assert!(
        ink_pixels(&rendered, title_band(&rendered)) > 100,
        "no title ink"
    );
    assert!(
        ink_pixels(&rendered, x_label_band(&rendered, &chart)) > 50,
        "no x label ink"
    );
    assert!(
        ink_pixels(&rendered, y_label_band(&rendered, &chart)) > 50,
        "no y label ink"
    );
}

#[test]
fn a_chart_without_title_or_labels_has_no_ink_in_their_bands() {
    let chart = chart("", "", "");
    let rendered = render_chart(&chart).unwrap();
    assert_eq!(ink_pixels(&rendered, title_band(&rendered)), 0);
    assert_eq!(ink_pixels(&rendered, x_label_band(&rendered, &chart)), 0);
    assert_eq!(ink_pixels(&rendered, y_label_band(&rendered, &chart)), 0);
}

#[test]
fn the_legend_is_drawn_as_ink() {
    let chart = chart("t", "x", "y");
    let rendered = render_chart(&chart).unwrap();
    let legend_top = PANEL_HEIGHT_PIXELS - legend_height_pixels(&chart, rendered.width_pixels);
    let legend = (0, legend_top, rendered.width_pixels, PANEL_HEIGHT_PIXELS);
    assert!(ink_pixels(&rendered, legend) > 100, "no legend ink");
}
