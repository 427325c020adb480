//! The pictures of a replay through the FTL: the latency CDF per request type (reads
//! answered with zeros without flash left out, their count in the title) and the
//! throughput over time.

use flashpipe_base::LatencyHistogram;
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

/// At most 200 points of the CDF of a latency histogram: (latency us, share at or below),
/// every `step`-th rank and the last.
pub(super) fn cdf_points(latencies_ns: &LatencyHistogram) -> Vec<(f64, f64)> {
    const POINTS: u64 = 200;
    let count = latencies_ns.count();
    let step = count.div_ceil(POINTS).max(1);
    let mut points = Vec::new();
    let mut next_rank = step;
    let mut seen = 0;
    for (value_ns, value_count) in latencies_ns.iter() {
        seen += value_count;
        while next_rank <= seen {
            let shown_ns = value_ns.min(latencies_ns.max());
            points.push((shown_ns as f64 / 1000.0, next_rank as f64 / count as f64));
            next_rank += step;
        }
    }
    if points.last().is_none_or(|&(_, share)| share < 1.0) {
        points.push((latencies_ns.max() as f64 / 1000.0, 1.0));
    }
    points
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plot::record::record_chart;

    #[test]
    fn the_cdf_starts_at_the_fastest_latency_and_ends_at_one() {
        let mut latencies_ns = LatencyHistogram::default();
        [400_000, 120_000, 150_000, 130_000]
            .into_iter()
            .for_each(|value| latencies_ns.record(value));
        let points = cdf_points(&latencies_ns);
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
