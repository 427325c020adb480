//! `flashpipe bench chart`: draws one PNG of panels from panel files (tab-separated text,
//! [`tsv`]) that a script wrote from its own run, so a shell experiment such as
//! `scripts/bench-ycsb --plot` gets the project's charts without a plotting library.
//!
//! Every file is read and checked before anything is drawn, and the PNG's path is
//! checked before any file is read: a refused chart writes nothing.

use clap::Args;
use flashpipe_bench_harness::option_range::check_within;

use crate::error::{invalid_input, BenchError};
use crate::plot::{check_plot_path, draw_panels, Chart};
use crate::BenchResult;

pub mod tsv;

/// Panels in one PNG.
pub const MAX_PANELS: usize = 6;
/// Panels on one row of the grid.
pub const MAX_COLUMNS: usize = 3;

/// `flashpipe bench chart`.
#[derive(Debug, Args)]
pub struct BenchChartArgs {
    /// A panel file, tab-separated: `title`, `x_label`, `y_label` and optional `kind`
    /// (`lines` or `bars`) lines, then the line `series x y`, then one row a point (docs/cli.md).
    /// Repeat for more panels (at most 6), drawn left to right, top to bottom.
    #[arg(long = "panel", value_name = "FILE.tsv", required = true)]
    pub panels: Vec<String>,
    /// Panels on a row of the grid (1 to 3).
    #[arg(long, default_value_t = 2)]
    pub columns: usize,
    /// The PNG to write (its folder must exist).
    #[arg(long, value_name = "PATH.png")]
    pub plot: String,
    /// Print JSON (`{"plot": PATH, "panels": N}`; an error as one JSON line) instead of the text.
    #[arg(long)]
    pub json: bool,
}

/// Runs `flashpipe bench chart`: checks the path and every panel, then draws.
pub fn run(arguments: BenchChartArgs) -> BenchResult {
    let charts = checked_charts(&arguments)?;
    draw_panels(&arguments.plot, &charts, arguments.columns)?;
    if arguments.json {
        let written = serde_json::json!({"plot": arguments.plot, "panels": charts.len()});
        println!("{written}");
    } else {
        let plural = if charts.len() == 1 { "" } else { "s" };
        println!("wrote {} ({} panel{plural})", arguments.plot, charts.len());
    }
    Ok(())
}

/// The panels to draw, once the path, the grid and every panel file passed their checks.
pub fn checked_charts(arguments: &BenchChartArgs) -> Result<Vec<Chart>, BenchError> {
    check_plot_path(&arguments.plot).map_err(|error| BenchError::from(error).prefixed("--plot"))?;
    check_within("--columns", arguments.columns, 1..=MAX_COLUMNS).map_err(invalid_input)?;
    if arguments.panels.len() > MAX_PANELS {
        return Err(invalid_input(format!(
            "--panel is given {} times: a chart holds at most {MAX_PANELS} panels",
            arguments.panels.len()
        )));
    }
    arguments
        .panels
        .iter()
        .map(|path| tsv::read_panel(path))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plot::{render_chart, PANEL_HEIGHT_PIXELS, PANEL_WIDTH_PIXELS};
    use crate::scratch::Scratch;
    use std::path::{Path, PathBuf};

    const LINES: &str = "title\tThroughput\nx_label\ttime (s)\ny_label\tops/s\nseries\tx\ty\n\
                         ext4\t5\t900\next4\t10\t950\nfs\t5\t400\nfs\t10\t390\n";
    const BARS: &str = "kind\tbars\ntitle\tRate\nx_label\tphase\ny_label\tops/s\nseries\tx\ty\n\
                        ext4\trun\t900\nfs\trun\t400\n";

    /// A scratch folder holding the panel files `LINES` (a.tsv) and `BARS` (b.tsv).
    fn panels_folder(label: &str) -> (Scratch, PathBuf, PathBuf) {
        let scratch = Scratch::new(&std::env::temp_dir(), label).unwrap();
        let (lines, bars) = (scratch.path().join("a.tsv"), scratch.path().join("b.tsv"));
        std::fs::write(&lines, LINES).unwrap();
        std::fs::write(&bars, BARS).unwrap();
        (scratch, lines, bars)
    }

    fn arguments(panels: &[&Path], plot: &Path, columns: usize) -> BenchChartArgs {
        BenchChartArgs {
            panels: panels
                .iter()
                .map(|path| path.to_str().unwrap().to_string())
                .collect(),
            columns,
            plot: plot.to_str().unwrap().to_string(),
            json: false,
        }
    }

    /// The PNG's width and height from its header chunk.
    fn png_size(bytes: &[u8]) -> (u32, u32) {
        assert_eq!(&bytes[1..4], b"PNG");
        let word = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
        (word(16), word(20))
    }

    #[test]
    fn draws_a_grid_of_panels_of_the_expected_size() {
        let (scratch, lines, bars) = panels_folder("chart-grid");
        let png = scratch.path().join("out.png");
        run(arguments(&[&lines, &bars, &lines], &png, 2)).unwrap();
        let size = png_size(&std::fs::read(&png).unwrap());
        assert_eq!(size, (2 * PANEL_WIDTH_PIXELS, 2 * PANEL_HEIGHT_PIXELS));
    }

    #[test]
    fn a_panel_read_from_text_draws_its_series() {
        for text in [LINES, BARS] {
            let rendered = render_chart(&tsv::parse_panel(text).unwrap()).unwrap();
            let coloured = (0..rendered.height_pixels)
                .flat_map(|y| (0..rendered.width_pixels).map(move |x| (x, y)))
                .filter(|&(x, y)| rendered.pixel(x, y) == (31, 119, 180))
                .count();
            assert!(
                coloured > 200,
                "only {coloured} pixels of the first series' colour"
            );
        }
    }

    #[test]
    fn a_refused_chart_writes_nothing() {
        let (scratch, good, _) = panels_folder("chart-refused");
        let folder = scratch.path();
        let (bad, png) = (folder.join("bad.tsv"), folder.join("out.png"));
        std::fs::write(&bad, LINES.replace("950", "fast")).unwrap();
        let missing = folder.join("missing.tsv");
        let cases = [
            (arguments(&[&good, &bad], &png, 2), "line 6: the y `fast`"),
            (
                arguments(&[&good, &missing], &png, 2),
                "cannot open the panel",
            ),
            (arguments(&[&good], &png, 0), "--columns"),
            (arguments(&[good.as_path(); 7], &png, 2), "at most 6 panels"),
            (
                arguments(&[&good], &folder.join("no").join("out.png"), 2),
                "does not exist",
            ),
            (
                arguments(&[&good], &folder.join("out.svg"), 2),
                "ending in .png",
            ),
        ];
        for (case, expected) in cases {
            let error = run(case).unwrap_err().to_string();
            assert!(error.contains(expected), "{error} lacks {expected}");
            assert!(!png.exists(), "a refused chart wrote {}", png.display());
        }
    }
}
