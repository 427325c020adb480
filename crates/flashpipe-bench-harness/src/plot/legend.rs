//! The legend under a chart: one entry per series (its colour, its marker, a dashed or
//! solid stroke, as the series is drawn), then the reference points' name beside a grey
//! diamond; entries flow left to right and wrap onto new rows.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{
    font, series_colour, Chart, ChartKind, Marker, LEGEND_ENTRIES_PER_ROW, LEGEND_ROW_PIXELS,
    TICK_FONT_PIXELS,
};

/// One legend entry: its text and how its sample is drawn.
struct Entry {
    name: String,
    /// `None` for the reference points' entry (a grey diamond).
    sample: Option<Sample>,
}

/// A series' sample: colour, marker and stroke.
#[derive(Clone, Copy)]
struct Sample {
    colour: RGBColor,
    marker: Marker,
    dashed: bool,
}

/// Height in pixels of the legend of `chart` in a panel `width_pixels` wide.
pub fn legend_height_pixels(chart: &Chart, width_pixels: u32) -> u32 {
    let rows = legend_layout(&legend_entries(chart), width_pixels)
        .iter()
        .map(|&(row, _)| row + 1)
        .max()
        .unwrap_or(1);
    rows * LEGEND_ROW_PIXELS + 8
}

/// The legend entries of `chart`: its series as they are drawn, then the reference
/// points' name if it has any.
fn legend_entries(chart: &Chart) -> Vec<Entry> {
    let mut entries: Vec<Entry> = chart
        .series
        .iter()
        .enumerate()
        .map(|(index, line)| Entry {
            name: line.name.clone(),
            sample: Some(Sample {
                colour: series_colour(index),
                marker: line.marker_at(index),
                dashed: line.dashed,
            }),
        })
        .collect();
    if !chart.reference_points.is_empty() {
        entries.push(Entry {
            name: chart.reference_name.clone(),
            sample: None,
        });
    }
    entries
}

/// Roughly how wide `text` is in pixels at `size_pixels` (DejaVu Sans' mean advance).
pub(super) fn text_width_estimate_pixels(text: &str, size_pixels: f64) -> i32 {
    (text.chars().count() as f64 * size_pixels * 0.62).ceil() as i32
}

/// Each legend entry's row and left edge: entries flow left to right from a 40-pixel
/// indent, at least a third of the width apart, wrapping onto a new row when full.
fn legend_layout(entries: &[Entry], width_pixels: u32) -> Vec<(u32, i32)> {
    let indent = 40;
    let usable = width_pixels as i32 - indent;
    let column = usable / LEGEND_ENTRIES_PER_ROW as i32;
    let mut places = Vec::with_capacity(entries.len());
    let (mut row, mut left) = (0u32, indent);
    for entry in entries {
        let wanted = 36 + text_width_estimate_pixels(&entry.name, TICK_FONT_PIXELS) + 24;
        let width = ((wanted + column - 1) / column).max(1) * column;
        if left > indent && left + wanted > width_pixels as i32 {
            row += 1;
            left = indent;
        }
        places.push((row, left));
        left += width;
    }
    places
}

/// Draws the legend of `chart` into `area`.
pub(super) fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    chart: &Chart,
) -> Result<(), String> {
    let (width, _) = area.dim_in_pixel();
    let bars = matches!(chart.kind, ChartKind::GroupedBars { .. });
    let entries = legend_entries(chart);
    for (entry, (row, left)) in entries.iter().zip(legend_layout(&entries, width)) {
        let middle = 4 + (row * LEGEND_ROW_PIXELS + LEGEND_ROW_PIXELS / 2) as i32;
        draw_legend_sample(area, (left, middle), entry.sample, bars)?;
        area.draw_text(
            &entry.name,
            &font(TICK_FONT_PIXELS).pos(Pos::new(HPos::Left, VPos::Center)),
            (left + 36, middle),
        )
        .map_err(|failure| failure.to_string())?;
    }
    Ok(())
}

fn draw_legend_sample<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    (left, middle): (i32, i32),
    sample: Option<Sample>,
    bars: bool,
) -> Result<(), String> {
    let failed = |failure: DrawingAreaErrorKind<DB::ErrorType>| failure.to_string();
    match sample {
        Some(sample) if bars => area
            .draw(&Rectangle::new(
                [(left, middle - 6), (left + 28, middle + 6)],
                sample.colour.filled(),
            ))
            .map_err(failed),
        Some(sample) => {
            let stroke = sample.colour.stroke_width(3);
            if sample.dashed {
                for start in [left, left + 11, left + 22] {
                    area.draw(&PathElement::new(
                        vec![(start, middle), ((start + 6).min(left + 28), middle)],
                        stroke,
                    ))
                    .map_err(failed)?;
                }
            } else {
                area.draw(&PathElement::new(
                    vec![(left, middle), (left + 28, middle)],
                    stroke,
                ))
                .map_err(failed)?;
            }
            area.draw(&super::marker_element(
                (left + 14, middle),
                sample.marker,
                4,
                sample.colour,
            ))
            .map_err(failed)
        }
        None => area
            .draw(&Polygon::new(
                vec![
                    (left + 14, middle - 7),
                    (left + 21, middle),
                    (left + 14, middle + 7),
                    (left + 7, middle),
                ],
                RGBColor(160, 160, 160).filled(),
            ))
            .and_then(|()| {
                area.draw(&PathElement::new(
                    vec![
                        (left + 14, middle - 7),
                        (left + 21, middle),
                        (left + 14, middle + 7),
                        (left + 7, middle),
                        (left + 14, middle - 7),
                    ],
                    BLACK.stroke_width(2),
                ))
            })
            .map_err(failed),
    }
}
