//! The paper's points on a chart: a black-edged diamond in the series' colour at each,
//! named beside it. Each name is placed right or left of its diamond, shifted up or down
//! as needed, inside the plotting area (never over the tick values), clear of every mark
//! (the series' points, the diamonds) and of the names placed before it, a thin grey line
//! joining a name moved away to its diamond; a name with no free place is left out rather
//! than drawn over something.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{
    bar_span, font, series_colour, text_width_estimate_pixels, Chart, ChartKind, Plot,
    NOTE_FONT_PIXELS,
};

pub(super) fn draw_reference_points<DB: DrawingBackend>(
    plot: &mut Plot<'_, DB>,
    chart: &Chart,
) -> Result<(), String> {
    let bars = matches!(chart.kind, ChartKind::GroupedBars { .. });
    // Labels keep clear of every mark: the series' points (on lines) and the diamonds.
    const MARK_CLEARANCE_PIXELS: i32 = 9;
    let mark_box = |(x, y): (i32, i32)| {
        (
            x - MARK_CLEARANCE_PIXELS,
            y - MARK_CLEARANCE_PIXELS,
            x + MARK_CLEARANCE_PIXELS,
            y + MARK_CLEARANCE_PIXELS,
        )
    };
    let mut taken: Vec<(i32, i32, i32, i32)> = Vec::new();
    if !bars {
        for line in &chart.series {
            taken.extend(
                line.points
                    .iter()
                    .map(|point| mark_box(plot.backend_coord(point))),
            );
        }
        taken.extend(
            chart
                .reference_points
                .iter()
                .map(|point| mark_box(plot.backend_coord(&(point.x, point.y)))),
        );
    }
    for point in &chart.reference_points {
        let x = if bars {
            let (left, right) = bar_span(point.x, point.series_index, chart.series.len());
            (left + right) / 2.0
        } else {
            point.x
        };
        let colour = series_colour(point.series_index);
        let diamond = EmptyElement::at((x, point.y))
            + Polygon::new(vec![(0, -7), (7, 0), (0, 7), (-7, 0)], colour.filled())
            + PathElement::new(
                vec![(0, -7), (7, 0), (0, 7), (-7, 0), (0, -7)],
                BLACK.stroke_width(2),
            );
        plot.draw_series(std::iter::once(diamond))
            .map_err(|failure| failure.to_string())?;
        let (pixel_x, pixel_y) = plot.backend_coord(&(x, point.y));
        let width = text_width_estimate_pixels(&point.name, NOTE_FONT_PIXELS);
        let height = NOTE_FONT_PIXELS as i32 + 2;
        let (plot_x_pixels, plot_y_pixels) = plot.plotting_area().get_pixel_range();
        let (right_of, left_of) = (pixel_x + 10, pixel_x - 10 - width);
        let inside = PixelBox {
            left: plot_x_pixels.start + 2,
            top: plot_y_pixels.start + 2,
            right: plot_x_pixels.end - 2,
            bottom: plot_y_pixels.end - 4,
        };
        if let Some((left, top)) = free_label_place(
            &taken,
            &inside,
            [right_of, left_of],
            pixel_y - height / 2,
            width,
            height,
        ) {
            taken.push((left, top, left + width, top + height));
            let middle = top + height / 2;
            if (middle - pixel_y).abs() > height {
                // Moved away from its diamond: a thin grey line says whose name it is.
                let edge = if left > pixel_x {
                    left - 2
                } else {
                    left + width + 2
                };
                let leader = EmptyElement::at((x, point.y))
                    + PathElement::new(
                        vec![(0, 0), (edge - pixel_x, middle - pixel_y)],
                        LEADER_COLOUR.stroke_width(1),
                    );
                plot.draw_series(std::iter::once(leader))
                    .map_err(|failure| failure.to_string())?;
            }
            let label = EmptyElement::at((x, point.y))
                + Text::new(
                    point.name.clone(),
                    (left - pixel_x, top - pixel_y),
                    font(NOTE_FONT_PIXELS).pos(Pos::new(HPos::Left, VPos::Top)),
                );
            plot.draw_series(std::iter::once(label))
                .map_err(|failure| failure.to_string())?;
        }
    }
    Ok(())
}

/// How many label heights a name may move up or down from its diamond.
const LABEL_SHIFT_STEPS: i32 = 8;
/// The line from a diamond to its name when the name moved away.
const LEADER_COLOUR: RGBColor = RGBColor(150, 150, 150);

/// A rectangle of pixels.
struct PixelBox {
    left: i32,
    top: i32,
    right: i32,
    bottom: i32,
}

/// A place for a label of `width` x `height` pixels beside a mark: its left edge one of
/// `lefts` (right of the mark, then left of it), its top `top` or shifted up and down in
/// steps of a label's height (nearest first, up to [`LABEL_SHIFT_STEPS`]), lying within `inside` (the plotting area: never over the tick values) and
/// overlapping none of `taken`; the first such candidate, or none.
fn free_label_place(
    taken: &[(i32, i32, i32, i32)],
    inside: &PixelBox,
    lefts: [i32; 2],
    top: i32,
    width: i32,
    height: i32,
) -> Option<(i32, i32)> {
    let step = height + 2;
    (0..=LABEL_SHIFT_STEPS)
        .flat_map(|steps| [-steps * step, steps * step])
        .flat_map(|shift| lefts.map(|left| (left, top + shift)))
        .filter(|&(x, y)| {
            x >= inside.left
                && y >= inside.top
                && x + width <= inside.right
                && y + height <= inside.bottom
        })
        .find(|&(x, y)| {
            taken.iter().all(|&(left, top, right, bottom)| {
                x + width <= left || x >= right || y + height <= top || y >= bottom
            })
        })
}
