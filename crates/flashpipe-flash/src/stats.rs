//! Statistics of a run in virtual time: bandwidth, IOPS, latency percentiles, and the
//! utilization of channels, dies and host links.

use serde::Serialize;

use crate::interface::CommandKind;

/// Latencies and bytes of completed requests, per command kind.
#[derive(Debug, Clone, Default)]
pub struct LatencyRecorder {
    read_latencies_ns: Vec<u64>,
    write_latencies_ns: Vec<u64>,
    erase_latencies_ns: Vec<u64>,
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
                self.read_latencies_ns.push(latency_ns);
                self.read_bytes += page_bytes;
            }
            CommandKind::Write => {
                self.write_latencies_ns.push(latency_ns);
                self.write_bytes += page_bytes;
            }
            CommandKind::Erase => self.erase_latencies_ns.push(latency_ns),
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
    fn of(latencies_ns: &[u64]) -> LatencySummary {
        if latencies_ns.is_empty() {
            return LatencySummary::default();
        }
        let mut values = latencies_ns.to_vec();
        let count = values.len();
        let mut percentile = |fraction: f64| {
            let rank = ((count as f64 * fraction).ceil() as usize).clamp(1, count);
            let (_, value, _) = values.select_nth_unstable(rank - 1);
            *value as f64 / 1000.0
        };
        let latency_us_p50 = percentile(0.5);
        let latency_us_p99 = percentile(0.99);
        let latency_us_p999 = percentile(0.999);
        let total_ns: u128 = latencies_ns.iter().map(|&value| u128::from(value)).sum();
        let largest_ns = latencies_ns.iter().copied().max().unwrap_or(0);
        LatencySummary {
            count: count as u64,
            latency_us_mean: total_ns as f64 / count as f64 / 1000.0,
            latency_us_p50,
            latency_us_p99,
            latency_us_p999,
            latency_us_max: largest_ns as f64 / 1000.0,
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
        let operations = recorder.read_latencies_ns.len()
            + recorder.write_latencies_ns.len()
            + recorder.erase_latencies_ns.len();
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
        let latencies_ns: Vec<u64> = (1..=1000).rev().map(|value| value * 1000).collect();
        let summary = LatencySummary::of(&latencies_ns);
        assert_eq!(summary.count, 1000);
        assert_eq!(summary.latency_us_p50, 500.0);
        assert_eq!(summary.latency_us_p99, 990.0);
        assert_eq!(summary.latency_us_p999, 999.0);
        assert_eq!(summary.latency_us_max, 1000.0);
        assert_eq!(summary.latency_us_mean, 500.5);
    }
}
