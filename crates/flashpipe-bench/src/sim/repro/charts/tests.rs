//! Each reproduction's chart drawn (without pixels) and checked for what it shows: axes,
//! series colours and strokes, the paper's labels and where they sit.

use super::super::{Reproduction, Row};
use super::figure_charts;
use crate::plot::record::{record_chart, series_colour, DrawnText, Recording};
use crate::plot::{Chart, ChartKind};

fn rad_fig4_rows() -> Vec<Row> {
    let mut rows = Vec::new();
    for n in [1u32, 2, 4, 8, 16, 32] {
        let n_value = f64::from(n);
        rows.push(
            Row::new(
                "RAD Fig.4(b)",
                format!("{n}x1 read"),
                24.0 * n_value,
                Some(24.61 * n_value),
                "MiB/s",
            )
            .at("read", n_value, n.to_string()),
        );
        rows.push(
            Row::new(
                "RAD Fig.4(b)",
                format!("{n}x1 write"),
                7.5 * n_value,
                Some(7.54 * n_value),
                "MiB/s",
            )
            .at("write", n_value, n.to_string()),
        );
    }
    rows
}

fn rad_fig4_ftl_rows() -> Vec<Row> {
    let mut rows = Vec::new();
    for share in [0.07, 0.15, 0.25, 0.35, 0.5] {
        let percent = format!("{:.0}%", share * 100.0);
        let x = share * 100.0;
        // The command's order: write, then read (the table keeps it).
        rows.push(
            Row::new("f", format!("write {percent}"), 3.0, Some(7.54), "MiB/s").at(
                "write through the FTL",
                x,
                percent.clone(),
            ),
        );
        rows.push(
            Row::new("f", format!("read {percent}"), 24.0, Some(24.61), "MiB/s").at(
                "read through the FTL",
                x,
                percent.clone(),
            ),
        );
        rows.push(Row::new("f", format!("wa {percent}"), 2.0, None, "x").at(
            "write amplification",
            x,
            percent,
        ));
    }
    rows
}

fn is_number(text: &str) -> bool {
    !text.is_empty() && text.parse::<f64>().is_ok()
}

fn paper_labels(recording: &Recording) -> Vec<&DrawnText> {
    recording.texts_starting("paper ")
}

#[test]
fn rad_fig4_has_a_linear_x_axis_and_paper_labels_clear_of_the_ticks() {
    let charts = figure_charts(Reproduction::RadFig4, &rad_fig4_rows());
    assert_eq!(charts.len(), 1);
    let chart = &charts[0];
    assert_eq!(
        chart.kind,
        ChartKind::Lines,
        "N is drawn at its own distances"
    );
    let read_xs: Vec<f64> = chart.series[0].points.iter().map(|point| point.0).collect();
    assert_eq!(read_xs, [1.0, 2.0, 4.0, 8.0, 16.0, 32.0]);
    let recording = record_chart(chart).unwrap();
    assert_eq!(recording.texts_equal(&chart.x_label).len(), 1);
    assert_eq!(recording.texts_equal(&chart.y_label).len(), 1);
    for tick in ["0", "10", "20", "30"] {
        assert!(
            !recording.texts_equal(tick).is_empty(),
            "no x tick {tick} on a linear axis: {:?}",
            recording.texts
        );
    }
    let ticks: Vec<&DrawnText> = recording
        .texts
        .iter()
        .filter(|drawn| is_number(&drawn.text))
        .collect();
    let labels = paper_labels(&recording);
    assert!(!labels.is_empty(), "no paper label drawn");
    for label in &labels {
        for tick in &ticks {
            assert!(
                !label.overlaps(tick),
                "the label {label:?} covers the tick {tick:?}"
            );
        }
        for other in &labels {
            assert!(std::ptr::eq(*label, *other) || !label.overlaps(other));
        }
    }
}

#[test]
fn rad_fig4_ftl_draws_the_paper_value_once_in_rad_fig4s_colours() {
    let charts = figure_charts(Reproduction::RadFig4Ftl, &rad_fig4_ftl_rows());
    assert_eq!(charts.len(), 2, "bandwidth and write amplification");
    let bandwidth = &charts[0];
    assert_eq!(bandwidth.reference_points.len(), 2, "one per kind");
    assert!(bandwidth
        .reference_points
        .iter()
        .all(|point| point.x == 0.0 && point.name.contains("no FTL")));
    assert!(bandwidth.reference_name.contains("no FTL"));
    assert!(!bandwidth.reference_name.contains("through the FTL"));
    let rad_fig4 = &figure_charts(Reproduction::RadFig4, &rad_fig4_rows())[0];
    for (index, kind) in ["read", "write"].iter().enumerate() {
        assert!(bandwidth.series[index].name.starts_with(kind));
        assert!(rad_fig4.series[index].name.starts_with(kind));
    }
    let recording = record_chart(bandwidth).unwrap();
    assert_eq!(paper_labels(&recording).len(), 2, "{:?}", recording.texts);
    assert!(!recording
        .texts_starting("read through the FTL (ours)")
        .is_empty());
}

#[test]
fn minflash_fig5_draws_random_dashed_with_triangles_over_sequential() {
    let mut rows = Vec::new();
    for (index, size) in ["8 KiB", "16 KiB", "32 KiB", "64 KiB"].iter().enumerate() {
        for name in ["sequential", "random"] {
            rows.push(
                Row::new(
                    "minFlash Fig.5",
                    format!("{name} {size}"),
                    1.0,
                    None,
                    "GB/s",
                )
                .at(name, index as f64, *size),
            );
        }
    }
    let charts: Vec<Chart> = figure_charts(Reproduction::MinflashFig5, &rows);
    let chart = &charts[0];
    assert!(!chart.series[0].dashed);
    assert!(chart.series[1].dashed);
    assert!(chart.series[1].name.contains("dashed"));
    let recording = record_chart(chart).unwrap();
    let (sequential, random) = (series_colour(0), series_colour(1));
    assert!(
        recording.paths_in(random) >= 6,
        "the random curve is not dashed: {} paths",
        recording.paths_in(random)
    );
    assert!(recording.polygons_in(random, 3) >= 4, "no triangles");
    assert!(recording.polygons_in(sequential, 12) >= 4, "no circles");
    assert_eq!(recording.polygons_in(sequential, 3), 0);
}
