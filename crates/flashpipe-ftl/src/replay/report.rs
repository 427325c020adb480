//! What a replay through the FTL reports: per request type, collection and wear during
//! the measurement, utilizations, and the latency histograms behind the percentiles.

use flashpipe_base::LatencyHistogram;
use serde::Serialize;

use crate::FtlStats;

/// Latency figures of one request type, in microseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct KindSummary {
    /// Requests completed (failed ones included).
    pub count: u64,
    /// Of those, completed with an error.
    pub failed: u64,
    /// Bytes the trace asked for (completed requests).
    pub bytes: u64,
    /// `bytes` over the measured span, decimal megabytes per second.
    pub megabytes_per_second: f64,
    /// Mean latency.
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

/// Garbage collection and wear during the measured part of the replay.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CollectionSummary {
    /// Host pages programmed.
    pub host_pages_written: u64,
    /// Valid pages collection copied.
    pub gc_pages_copied: u64,
    /// Of those, pages moved inside their die by copy-back (no data on the bus).
    pub gc_copy_backs: u64,
    /// Victim blocks collected.
    pub gc_victims: u64,
    /// Block erases.
    pub erases: u64,
    /// (host + collection pages) / host pages.
    pub write_amplification: f64,
    /// The same counting log and checkpoint pages.
    pub write_amplification_with_metadata: f64,
    /// Host pages that waited for collection.
    pub host_write_stalls: u64,
    /// Longest such wait, microseconds.
    pub host_write_wait_us_max: f64,
    /// Blocks moved by static wear leveling.
    pub static_wear_leveling_moves: u64,
    /// Blocks retired (factory and grown bad) at the end.
    pub retired_blocks: u32,
    /// Blocks retired during the replay.
    pub grown_bad_blocks: u64,
    /// Reads the ECC could not correct.
    pub uncorrectable_reads: u64,
    /// Fewest and most erases of a good block at the end.
    pub erase_count_min: u32,
    /// Most erases of a good block at the end.
    pub erase_count_max: u32,
}

impl CollectionSummary {
    pub(super) fn of(stats: &FtlStats) -> CollectionSummary {
        CollectionSummary {
            host_pages_written: stats.host_pages_written,
            gc_pages_copied: stats.gc_pages_copied,
            gc_copy_backs: stats.gc_copy_backs,
            gc_victims: stats.gc_victims,
            erases: stats.erases,
            write_amplification: stats.write_amplification(),
            write_amplification_with_metadata: stats.write_amplification_with_metadata(),
            host_write_stalls: stats.host_write_stalls,
            host_write_wait_us_max: stats.host_write_wait_ns_max as f64 / 1000.0,
            static_wear_leveling_moves: stats.static_wear_leveling_moves,
            retired_blocks: stats.retired_blocks,
            grown_bad_blocks: stats.grown_bad_blocks,
            uncorrectable_reads: stats.uncorrectable_reads,
            erase_count_min: stats.erase_count_min,
            erase_count_max: stats.erase_count_max,
        }
    }
}

/// The outcome of a replay through the FTL.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayReport {
    /// Requests in the trace.
    pub requests: u64,
    /// Reads.
    pub reads: KindSummary,
    /// Writes.
    pub writes: KindSummary,
    /// Trims.
    pub trims: KindSummary,
    /// All requests together.
    pub all: KindSummary,
    /// Requests the FTL refused at submission (out of range; never with a checked trace).
    pub rejected_requests: u64,
    /// Reads that touched a page never written (or trimmed), and such pages.
    pub unwritten_read_requests: u64,
    /// Pages of those reads that were never written.
    pub unwritten_read_pages: u64,
    /// Reads of never-written pages only, answered with zeros without flash: counted
    /// here alone, not in `reads` (count, bytes, latency) nor in `all`.
    pub zero_filled_reads: u64,
    /// Pages written before the measurement (`--unwritten-reads precondition`).
    pub precondition_pages_written: u64,
    /// Requests whose range reached past the logical capacity and was wrapped.
    pub wrapped_requests: u64,
    /// Requests not aligned to whole pages (modelled as whole-page operations).
    pub partial_page_requests: u64,
    /// Open loop: requests that arrived while the outstanding bound was reached.
    pub outstanding_bound_hits: u64,
    /// Their summed wait before issue, microseconds.
    pub outstanding_bound_wait_us_total: f64,
    /// Most requests outstanding at once.
    pub outstanding_max: u64,
    /// Virtual time from the first arrival to the last completion.
    pub elapsed_ns: u64,
    /// Arrival span of the trace after scaling by `speed`.
    pub trace_span_ns: u64,
    /// Collection and wear during the measurement.
    pub collection: CollectionSummary,
    /// Busy share of each die over the measurement.
    pub die_utilization: Vec<f64>,
    /// Busy share of each channel.
    pub channel_utilization: Vec<f64>,
    /// Logical pages of the FTL device and its page size.
    pub logical_pages: u64,
    /// Bytes per logical page.
    pub page_bytes: u64,
    /// Completed bytes per interval of `throughput_interval_ns`, from the first arrival.
    pub throughput_bytes: Vec<u64>,
    /// Width of one throughput interval.
    pub throughput_interval_ns: u64,
    /// Latencies of completed requests, ns, by kind (for CDFs; not serialized).
    #[serde(skip)]
    pub latencies_ns: KindLatencies,
}

/// Latencies by request kind, in bounded histograms (exact while few distinct values).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KindLatencies {
    /// Reads.
    pub reads: LatencyHistogram,
    /// Writes.
    pub writes: LatencyHistogram,
    /// Trims.
    pub trims: LatencyHistogram,
}

impl ReplayReport {
    /// Writes that failed or were refused: any makes a replay's result unusable.
    pub fn failed_writes(&self) -> u64 {
        self.writes.failed + self.rejected_requests
    }
}

/// Summarizes `latencies_ns` (nearest-rank percentiles, exact while the histogram is).
pub(super) fn summarize(
    latencies_ns: &LatencyHistogram,
    failed: u64,
    bytes: u64,
    elapsed_ns: u64,
) -> KindSummary {
    let megabytes_per_second = bytes as f64 / (elapsed_ns as f64 / 1e9) / 1e6;
    if latencies_ns.is_empty() {
        return KindSummary {
            failed,
            megabytes_per_second,
            ..KindSummary::default()
        };
    }
    let microseconds = |value_ns: u64| value_ns as f64 / 1000.0;
    KindSummary {
        count: latencies_ns.count(),
        failed,
        bytes,
        megabytes_per_second,
        latency_us_mean: latencies_ns.mean() / 1000.0,
        latency_us_p50: microseconds(latencies_ns.percentile(0.5)),
        latency_us_p99: microseconds(latencies_ns.percentile(0.99)),
        latency_us_p999: microseconds(latencies_ns.percentile(0.999)),
        latency_us_max: microseconds(latencies_ns.max()),
    }
}
