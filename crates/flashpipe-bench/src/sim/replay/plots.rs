//! The pictures of a replay through the FTL: the latency CDF per request type (reads
//! answered with zeros without flash left out, their count in the title) and the
//! throughput over time.

use flashpipe_ftl::replay::ReplayReport;

use crate::error::io_with;
use crate::plot::{draw_chart, Chart, ChartKind, Series};
use crate::BenchResult;

/// The latency CDF (per request type) and the throughput over time, as PNGs.
pub(super) fn draw_ftl_plots(folder: &str, report: &ReplayReport) -> BenchResult {
    if !std::path::Path::new(folder).is_dir() {
        std::fs::create_dir(folder).map_err(io_with(format!(
            "--plot {folder}: cannot create the folder"
        )))?;
    }
    let cdf_series: Vec<Series> = [
        ("read", &report.latencies_ns.reads),
        ("write", &report.latencies_ns.writes),
        ("trim", &report.latencies_ns.trims),
    ]
    .into_iter()
    .filter(|(_, latencies)| !latencies.is_empty())
    .map(|(name, latencies)| Series::new(name, cdf_points(latencies)))
    .collect();
    let cdf = Chart {
        title: if report.zero_filled_reads > 0 {
            format!(
                "Request latency CDF through the FTL ({} zero-filled reads left out)",
                report.zero_filled_reads
            )
        } else {
            "Request latency CDF (replay through the FTL)".to_string()
        },
        x_label: "latency (us)".to_string(),
        y_label: "share of requests".to_string(),
        kind: ChartKind::Lines,
        series: cdf_series,
        reference_points: Vec::new(),
        reference_name: String::new(),
    };
    let interval_seconds = report.throughput_interval_ns as f64 / 1e9;
    let throughput = Chart {
        title: "Throughput over time (completed bytes)".to_string(),
        x_label: "virtual time (s)".to_string(),
        y_label: "MB/s".to_string(),
        kind: ChartKind::Lines,
        series: vec![Series::new(
            "read + write",
            report
                .throughput_bytes
                .iter()
                .enumerate()
                .map(|(index, &bytes)| {
                    (
                        index as f64 * interval_seconds,
                        bytes as f64 / interval_seconds / 1e6,
                    )
                }),
        )],
        reference_points: Vec::new(),
        reference_name: String::new(),
    };
    let folder = std::path::Path::new(folder);
    draw_chart(&folder.join("latency-cdf.png").to_string_lossy(), &cdf)?;
    draw_chart(
        &folder.join("throughput.png").to_string_lossy(),
        &throughput,
    )?;
    Ok(())
}

/// At most 200 points of the CDF of sorted latencies: (latency us, share at or below).
pub(super) fn cdf_points(sorted_latencies_ns: &[u64]) -> Vec<(f64, f64)> {
    const POINTS: usize = 200;
    let count = sorted_latencies_ns.len();
    let step = count.div_ceil(POINTS).max(1);
    let mut points: Vec<(f64, f64)> = (step - 1..count)
        .step_by(step)
        .map(|index| {
            (
                sorted_latencies_ns[index] as f64 / 1000.0,
                (index + 1) as f64 / count as f64,
            )
        })
        .collect();
    if points.last().is_none_or(|&(_, share)| share < 1.0) {
        points.push((sorted_latencies_ns[count - 1] as f64 / 1000.0, 1.0));
    }
    points
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plot::record::record_chart;

    #[test]
    fn the_cdf_starts_at_the_fastest_latency_and_ends_at_one() {
        let points = cdf_points(&[120_000, 130_000, 150_000, 400_000]);
        assert_eq!(points.first(), Some(&(120.0, 0.25)));
        assert_eq!(points.last(), Some(&(400.0, 1.0)));
        let chart = Chart {
            title: "t".to_string(),
            x_label: "latency (us)".to_string(),
            y_label: "share of requests".to_string(),
            kind: ChartKind::Lines,
            series: vec![Series::new("read", points)],
            reference_points: Vec::new(),
            reference_name: String::new(),
        };
        let recording = record_chart(&chart).unwrap();
        assert_eq!(recording.texts_equal("latency (us)").len(), 1);
        assert_eq!(recording.texts_equal("read").len(), 1, "the legend");
    }
}
