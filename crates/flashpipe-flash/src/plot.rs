//! PNG line charts of reproductions, drawn with the plotters crate's bitmap backend.
//!
//! The charts carry no text: plotters renders text through system fonts (its `ttf`
//! feature) or an embedded font file we do not ship, and neither is dependable here. Axes
//! start at zero (drawn in black); each series is one colour, in the order the caller gives; the axis
//! ranges and the series' names go to the caller's table and docs/reproductions.md.

use plotters::prelude::*;

/// One line: its points (x, y).
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Points in x order.
    pub points: Vec<(f64, f64)>,
}

/// Why a chart could not be drawn.
#[derive(Debug, thiserror::Error)]
#[error("cannot draw {path}: {detail}")]
pub struct PlotError {
    /// The output file.
    pub path: String,
    /// What failed.
    pub detail: String,
}

const COLOURS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// Draws `series` into a 800 x 500 PNG at `path`, axes from zero to the largest values.
pub fn line_chart(path: &str, series: &[Series]) -> Result<(), PlotError> {
    let error = |detail: String| PlotError {
        path: path.to_string(),
        detail,
    };
    let x_max = max_of(series, |point| point.0);
    let y_max = max_of(series, |point| point.1);
    let root = BitMapBackend::new(path, (800, 500)).into_drawing_area();
    root.fill(&WHITE)
        .map_err(|failure| error(failure.to_string()))?;
    let mut chart = ChartBuilder::on(&root)
        .margin(20)
        .build_cartesian_2d(0.0..x_max * 1.05, 0.0..y_max * 1.1)
        .map_err(|failure| error(failure.to_string()))?;
    chart
        .configure_mesh()
        .x_labels(0)
        .y_labels(0)
        .draw()
        .map_err(|failure| error(failure.to_string()))?;
    let axes = [vec![(0.0, y_max * 1.1), (0.0, 0.0), (x_max * 1.05, 0.0)]];
    for axis in axes {
        chart
            .draw_series(LineSeries::new(axis, BLACK.stroke_width(2)))
            .map_err(|failure| error(failure.to_string()))?;
    }
    for (index, line) in series.iter().enumerate() {
        let colour = COLOURS[index % COLOURS.len()];
        chart
            .draw_series(LineSeries::new(
                line.points.iter().copied(),
                colour.stroke_width(3),
            ))
            .map_err(|failure| error(failure.to_string()))?;
        chart
            .draw_series(
                line.points
                    .iter()
                    .map(|&point| Circle::new(point, 4, colour.filled())),
            )
            .map_err(|failure| error(failure.to_string()))?;
    }
    root.present().map_err(|failure| error(failure.to_string()))
}

fn max_of(series: &[Series], value: impl Fn(&(f64, f64)) -> f64) -> f64 {
    let largest = series
        .iter()
        .flat_map(|line| line.points.iter().map(&value))
        .fold(0.0, f64::max);
    if largest > 0.0 {
        largest
    } else {
        1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_a_png_without_fonts() {
        let path = std::env::temp_dir().join(format!("flashpipe-plot-{}.png", std::process::id()));
        let path = path.to_str().unwrap().to_string();
        let series = vec![Series {
            points: vec![(1.0, 2.0), (2.0, 4.0), (4.0, 8.0)],
        }];
        line_chart(&path, &series).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
        std::fs::remove_file(&path).unwrap();
    }
}
