//! Statistics of a run in virtual time: bandwidth, IOPS, latency percentiles, and the
//! utilization of channels, dies and host links.

use flashpipe_base::LatencyHistogram;
use serde::Serialize;

use crate::interface::CommandKind;

/// Latencies and bytes of completed requests, per command kind.
#[derive(Debug, Clone, Default)]
pub struct LatencyRecorder {
    read_latencies_ns: LatencyHistogram,
    write_latencies_ns: LatencyHistogram,
    erase_latencies_ns: LatencyHistogram,
    read_bytes: u64,
    write_bytes: u64,
    failed_count: u64,
}

impl LatencyRecorder {
    /// Records one completed request.
    pub fn record(&mut self, kind: CommandKind, latency_ns: u64, page_bytes: u64, succeeded: bool) {
        if !succeeded {
            self.failed_count += 1;
        }
        match kind {
            CommandKind::Read => {
                self.read_latencies_ns.record(latency_ns);
                self.read_bytes += page_bytes;
            }
            CommandKind::Write => {
                self.write_latencies_ns.record(latency_ns);
                self.write_bytes += page_bytes;
            }
            CommandKind::Erase => self.erase_latencies_ns.record(latency_ns),
        }
    }
}

/// Latency percentiles of one command kind, in microseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LatencySummary {
    /// Requests completed.
    pub count: u64,
    /// Mean.
    pub latency_us_mean: f64,
    /// Median.
    pub latency_us_p50: f64,
    /// 99th percentile.
    pub latency_us_p99: f64,
    /// 99.9th percentile.
    pub latency_us_p999: f64,
    /// Largest.
    pub latency_us_max: f64,
}

impl LatencySummary {
    /// Summarizes a histogram (nearest-rank percentiles; exact while it is).
    pub fn of(latencies_ns: &LatencyHistogram) -> LatencySummary {
        if latencies_ns.is_empty() {
            return LatencySummary::default();
        }
        let microseconds = |value_ns: u64| value_ns as f64 / 1000.0;
        LatencySummary {
            count: latencies_ns.count(),
            latency_us_mean: latencies_ns.mean() / 1000.0,
            latency_us_p50: microseconds(latencies_ns.percentile(0.5)),
            latency_us_p99: microseconds(latencies_ns.percentile(0.99)),
            latency_us_p999: microseconds(latencies_ns.percentile(0.999)),
            latency_us_max: microseconds(latencies_ns.max()),
        }
    }
}

/// A snapshot of a run's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlashStats {
    /// Virtual time covered.
    pub elapsed_ns: u64,
    /// Reads.
    pub reads: LatencySummary,
    /// Writes.
    pub writes: LatencySummary,
    /// Erases.
    pub erases: LatencySummary,
    /// Requests that did not end `Ok`.
    pub failed_count: u64,
    /// Read bandwidth (decimal megabytes per second).
    pub read_megabytes_per_second: f64,
    /// Write bandwidth.
    pub write_megabytes_per_second: f64,
    /// Page operations per second (reads, writes and erases).
    pub iops: f64,
    /// Busy share of each channel's bus.
    pub channel_utilization: Vec<f64>,
    /// Busy share of each die's array.
    pub die_utilization: Vec<f64>,
    /// Busy share of each host's link.
    pub host_link_utilization: Vec<f64>,
}

impl FlashStats {
    /// Summarizes `recorder` over `elapsed_ns`.
    pub fn new(
        recorder: &LatencyRecorder,
        elapsed_ns: u64,
        channel_utilization: Vec<f64>,
        die_utilization: Vec<f64>,
        host_link_utilization: Vec<f64>,
    ) -> FlashStats {
        let seconds = elapsed_ns as f64 / 1e9;
        let operations = recorder.read_latencies_ns.count()
            + recorder.write_latencies_ns.count()
            + recorder.erase_latencies_ns.count();
        FlashStats {
            elapsed_ns,
            reads: LatencySummary::of(&recorder.read_latencies_ns),
            writes: LatencySummary::of(&recorder.write_latencies_ns),
            erases: LatencySummary::of(&recorder.erase_latencies_ns),
            failed_count: recorder.failed_count,
            read_megabytes_per_second: recorder.read_bytes as f64 / seconds / 1e6,
            write_megabytes_per_second: recorder.write_bytes as f64 / seconds / 1e6,
            iops: operations as f64 / seconds,
            channel_utilization,
            die_utilization,
            host_link_utilization,
        }
    }

    /// Mean of the channel utilizations.
    pub fn mean_channel_utilization(&self) -> f64 {
        mean(&self.channel_utilization)
    }

    /// Mean of the die utilizations.
    pub fn mean_die_utilization(&self) -> f64 {
        mean(&self.die_utilization)
    }
}

fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_take_the_nearest_rank() {
        let mut latencies_ns = LatencyHistogram::default();
        (1..=1000)
            .rev()
            .for_each(|value| latencies_ns.record(value * 1000));
        let summary = LatencySummary::of(&latencies_ns);
        assert_eq!(summary.count, 1000);
        assert_eq!(summary.latency_us_p50, 500.0);
        assert_eq!(summary.latency_us_p99, 990.0);
        assert_eq!(summary.latency_us_p999, 999.0);
        assert_eq!(summary.latency_us_max, 1000.0);
        assert_eq!(summary.latency_us_mean, 500.5);
    }
}
