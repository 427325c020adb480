//! The charts of the reproductions: one per figure and unit, ours as lines or bars, the
//! paper's values as named diamonds. RAD Fig. 4 has a true linear x axis (N = 1..32 at
//! their distances, so linear scaling reads as a straight line); RAD Fig. 4(a) through
//! the FTL draws the paper's single raw-flash value once per kind, at 0% over-provisioning,
//! in the same colours as RAD Fig. 4 (read first); minFlash Fig. 5 draws random reads
//! dashed with triangles over the solid sequential curve, since the two coincide.

use super::{Reproduction, Row};
use crate::plot::{value_text, Chart, ChartKind, Marker, ReferencePoint, Series};

/// What a reproduction's chart says: its title, axes, and how it draws.
struct FigureText {
    title: &'static str,
    x_label: &'static str,
    y_label: &'static str,
    bars: bool,
    /// Lines at the rows' own x values (a linear axis) instead of evenly spaced categories.
    numeric_x: bool,
    /// The paper gives one value per series, not one per point: drawn once, at this x,
    /// its label saying what it is.
    paper_once: Option<(f64, &'static str)>,
    /// The legend's name of the paper's values, when the default would mislead.
    reference_name: Option<&'static str>,
    /// A series drawn dashed with triangles, and what its legend entry adds.
    dashed_series: Option<(&'static str, &'static str)>,
    /// The series whose name starts with "read" drawn first (its colour the first).
    reads_first: bool,
}

/// The text of the chart of `which` for the rows in `unit`.
fn figure_text(which: Reproduction, unit: &str) -> FigureText {
    let numeric_x = matches!(which, Reproduction::RadFig4 | Reproduction::RadFig4Ftl);
    let (paper_once, reference_name) = if which == Reproduction::RadFig4Ftl {
        (
            Some((0.0, "raw flash, no FTL")),
            Some("RAD Fig. 4(a) as published: the raw 1x1 package, no FTL (drawn once, at 0%)"),
        )
    } else {
        (None, None)
    };
    let dashed_series = (which == Reproduction::MinflashFig5)
        .then_some(("random", "dashed, triangles; on sequential where equal"));
    let (title, x_label, y_label, bars) = match (which, unit) {
        (Reproduction::RadFig4, _) => (
            "RAD Fig. 4: N x 1 flash matrix, 512-sector sequential requests",
            "flash packages N in the N x 1 matrix",
            "bandwidth (MiB/s, virtual time)",
            false,
        ),
        (Reproduction::RadFig4Ftl, "x") => (
            "RAD Fig. 4(a) through the FTL: write amplification of the measured writes",
            "over-provisioning (%)",
            "write amplification (flash pages / host pages)",
            false,
        ),
        (Reproduction::RadFig4Ftl, _) => (
            "RAD Fig. 4(a) through the FTL, steady state, 512-sector requests",
            "over-provisioning (%)",
            "bandwidth (MiB/s, virtual time)",
            false,
        ),
        (Reproduction::RadTable2, "rows") => (
            "RAD Table II: flash matrix rows N for each kernel",
            "kernel",
            "rows N (packages per column)",
            true,
        ),
        (Reproduction::RadTable2, "GiB/s") => (
            "RAD Table II: matrix bandwidth at those N rows",
            "kernel",
            "bandwidth (GiB/s, virtual time)",
            true,
        ),
        (Reproduction::RadTable2, _) => (
            "RAD Table II: N x 1 rates the sizing uses",
            "rate",
            "bandwidth (MiB/s, virtual time)",
            true,
        ),
        (Reproduction::MinflashTable1, _) => (
            "minFlash Table I: latency of one 8 KiB read and write",
            "step of the request",
            "latency (us, virtual time)",
            true,
        ),
        (Reproduction::MinflashFig5, _) => (
            "minFlash Fig. 5: read bandwidth vs request size (1 device, 1 host)",
            "request size",
            "bandwidth (GB/s, virtual time)",
            false,
        ),
        (Reproduction::MinflashFig6, _) => (
            "minFlash Fig. 6: random 16 MiB reads over devices and hosts",
            "N (devices, hosts, or both, as the series says)",
            "total bandwidth (GB/s, virtual time)",
            false,
        ),
        (Reproduction::MinflashFig7 | Reproduction::All, _) => (
            "minFlash Fig. 7: 8 KiB read latency over network hops",
            "hops between the host's device and the one read",
            "latency (us, virtual time)",
            false,
        ),
    };
    FigureText {
        title,
        x_label,
        y_label,
        bars,
        numeric_x,
        paper_once,
        reference_name,
        dashed_series,
        reads_first: which == Reproduction::RadFig4Ftl,
    }
}

/// The charts of one reproduction's rows: one per unit, in order of appearance.
pub(super) fn figure_charts(which: Reproduction, rows: &[Row]) -> Vec<Chart> {
    let mut units: Vec<&'static str> = Vec::new();
    for row in rows.iter().filter(|row| row.series.is_some()) {
        if !units.contains(&row.unit) {
            units.push(row.unit);
        }
    }
    units
        .into_iter()
        .map(|unit| {
            let unit_rows: Vec<&Row> = rows
                .iter()
                .filter(|row| row.unit == unit && row.series.is_some())
                .collect();
            chart_of_rows(&figure_text(which, unit), &unit_rows)
        })
        .collect()
}

/// Names in order of first appearance.
fn first_appearances<'row>(names: impl Iterator<Item = &'row str>) -> Vec<&'row str> {
    let mut seen = Vec::new();
    for name in names {
        if !seen.contains(&name) {
            seen.push(name);
        }
    }
    seen
}

/// One chart: a series per row series, x the row's category (or its x on a linear axis);
/// the paper's values as reference points named by their value.
fn chart_of_rows(text: &FigureText, rows: &[&Row]) -> Chart {
    let mut series_names = first_appearances(rows.iter().filter_map(|row| row.series));
    if text.reads_first {
        // The table's order stays; the chart takes RAD Fig. 4's colours (read first).
        series_names.sort_by_key(|name| !name.starts_with("read"));
    }
    let categories: Vec<String> =
        first_appearances(rows.iter().filter_map(|row| row.category.as_deref()))
            .into_iter()
            .map(str::to_string)
            .collect();
    let place = |row: &Row| {
        let series_index = series_names
            .iter()
            .position(|name| Some(*name) == row.series)?;
        if text.numeric_x {
            return Some((series_index, row.x?));
        }
        let category = categories
            .iter()
            .position(|name| Some(name.as_str()) == row.category.as_deref())?;
        Some((series_index, category as f64))
    };
    let series = series_names
        .iter()
        .enumerate()
        .map(|(index, name)| {
            let points = rows.iter().filter_map(|row| {
                place(row)
                    .filter(|(at, _)| *at == index)
                    .map(|(_, x)| (x, row.ours))
            });
            let mut legend_name = if name.starts_with("our") {
                name.to_string()
            } else {
                format!("{name} (ours)")
            };
            match text.dashed_series {
                Some((dashed, note)) if dashed == *name => {
                    legend_name = format!("{name} (ours; {note})");
                    Series::new(legend_name, points)
                        .dashed()
                        .with_marker(Marker::Triangle)
                }
                _ => Series::new(legend_name, points),
            }
        })
        .collect();
    let mut reference_points: Vec<ReferencePoint> = rows
        .iter()
        .filter_map(|row| {
            let (series_index, x) = place(row)?;
            let paper = row.paper?;
            Some(match text.paper_once {
                Some((at, note)) => ReferencePoint {
                    name: format!("paper {} ({note})", value_text(paper)),
                    x: at,
                    y: paper,
                    series_index,
                },
                None => ReferencePoint {
                    name: format!("paper {}", value_text(paper)),
                    x,
                    y: paper,
                    series_index,
                },
            })
        })
        .collect();
    if text.paper_once.is_some() {
        let mut seen = Vec::new();
        reference_points.retain(|point| {
            let first = !seen.contains(&point.series_index);
            seen.push(point.series_index);
            first
        });
    }
    let kind = if text.bars {
        ChartKind::GroupedBars { categories }
    } else if text.numeric_x {
        ChartKind::Lines
    } else {
        ChartKind::CategoryLines { categories }
    };
    let reference_name = text.reference_name.map_or_else(
        || {
            format!(
                "the paper's values ({})",
                text.title.split(':').next().unwrap_or(text.title)
            )
        },
        str::to_string,
    );
    Chart {
        title: text.title.to_string(),
        x_label: text.x_label.to_string(),
        y_label: text.y_label.to_string(),
        kind,
        series,
        reference_points,
        reference_name,
    }
}

#[cfg(test)]
mod tests;
