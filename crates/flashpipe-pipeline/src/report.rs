//! What a pipeline run returns: each file's summary (and stream, when asked), and per-stage
//! throughput and busy time so the slowest phase is named (RAD III.C).

use flashpipe_kernels::api::Summary;
use serde::Serialize;

/// The result of one input file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileOutcome {
    /// The input file.
    pub name: String,
    /// Its size.
    pub size_bytes: u64,
    /// The kernel's summary.
    pub summary: Summary,
    /// Bytes of transformed stream produced.
    pub output_bytes: u64,
    /// The stream, with [`crate::OutputTarget::ReturnToCaller`].
    #[serde(skip)]
    pub output: Option<Vec<u8>>,
    /// The store file the stream went to, with [`crate::OutputTarget::StoreFiles`].
    pub output_file: Option<String>,
}

/// One stage's work.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageReport {
    /// `read`, `kernel`, `reduce`, `write`.
    pub stage: &'static str,
    /// Threads in the stage.
    pub thread_count: usize,
    /// Chunks or buffers handled.
    pub item_count: u64,
    /// Bytes handled.
    pub bytes: u64,
    /// Time spent working (summed over threads); for the read stage, waiting on the device.
    pub busy_seconds: f64,
    /// Time blocked on the next stage (full queue, no credits) (summed over threads).
    pub blocked_downstream_seconds: f64,
    /// `bytes / (busy_seconds / thread_count)`: what the stage could sustain alone.
    pub capacity_bytes_per_second: f64,
}

impl StageReport {
    pub(crate) fn new(
        stage: &'static str,
        thread_count: usize,
        counters: &StageCounters,
    ) -> StageReport {
        let busy_seconds = counters.busy_ns as f64 / 1e9;
        let per_thread_seconds = busy_seconds / thread_count.max(1) as f64;
        let capacity_bytes_per_second = if per_thread_seconds > 0.0 {
            counters.bytes as f64 / per_thread_seconds
        } else {
            f64::INFINITY
        };
        StageReport {
            stage,
            thread_count,
            item_count: counters.items,
            bytes: counters.bytes,
            busy_seconds,
            blocked_downstream_seconds: counters.blocked_ns as f64 / 1e9,
            capacity_bytes_per_second,
        }
    }
}

/// Counters a stage thread keeps (merged over threads).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct StageCounters {
    pub(crate) items: u64,
    pub(crate) bytes: u64,
    pub(crate) busy_ns: u64,
    pub(crate) blocked_ns: u64,
}

impl StageCounters {
    pub(crate) fn merge(&mut self, other: &StageCounters) {
        self.items += other.items;
        self.bytes += other.bytes;
        self.busy_ns += other.busy_ns;
        self.blocked_ns += other.blocked_ns;
    }
}

/// How the run went.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PipelineReport {
    /// The kernel's registry name.
    pub kernel: String,
    /// Input files.
    pub file_count: usize,
    /// Input bytes.
    pub input_bytes: u64,
    /// Output bytes (transformed streams).
    pub output_bytes: u64,
    /// Start to last write, by the store device's clock.
    pub elapsed_seconds: f64,
    /// `input_bytes / elapsed_seconds`.
    pub input_bytes_per_second: f64,
    /// Each stage.
    pub stages: Vec<StageReport>,
    /// The stage with the lowest capacity: the one that sets the pace.
    pub slowest_stage: &'static str,
    /// Most credits (engine pool buffers) held at once (never above the credits).
    pub max_chunks_in_flight: usize,
    /// The credit limit.
    pub chunk_credit_count: usize,
}

impl PipelineReport {
    /// Names the stage whose capacity is lowest among those that handled bytes.
    pub(crate) fn slowest_of(stages: &[StageReport]) -> &'static str {
        stages
            .iter()
            .filter(|stage| stage.bytes > 0)
            .min_by(|left, right| {
                left.capacity_bytes_per_second
                    .total_cmp(&right.capacity_bytes_per_second)
            })
            .map_or("none", |stage| stage.stage)
    }
}

/// A run's files (in input order) and report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PipelineResult {
    /// One per input, in input order.
    pub files: Vec<FileOutcome>,
    /// Timing.
    pub report: PipelineReport,
}
