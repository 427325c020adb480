//! The no-overlap shape beside the pipeline (RAD's host-accelerator shape, inside the same
//! store): read each whole file out of the store first, then compute on it with every core.

use std::sync::Arc;

use flashpipe_device::Clock;
use flashpipe_engine::Engine;
use flashpipe_kernels::api::{CountingSink, Kernel};
use flashpipe_kernels::driver::{run_on_bytes, DrivePlan, MapOrder};
use serde::Serialize;

use crate::error::PipelineError;

/// Timing of a read-everything-then-compute run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReadThenComputeReport {
    /// Input bytes.
    pub input_bytes: u64,
    /// Time spent reading, by the store device's clock.
    pub read_seconds: f64,
    /// Time spent computing.
    pub compute_seconds: f64,
    /// `input_bytes / (read_seconds + compute_seconds)`.
    pub input_bytes_per_second: f64,
}

/// Reads every file whole from the store, then runs `kernel` on it (chunks of `chunk_bytes`,
/// `worker_count` threads), never overlapping the two.
pub fn read_then_compute(
    engine: &Engine,
    clock: &Arc<dyn Clock>,
    kernel: &dyn Kernel,
    files: &[String],
    chunk_bytes: usize,
    worker_count: usize,
) -> Result<ReadThenComputeReport, PipelineError> {
    let mut client = engine.client(16);
    let mut read_ns = 0u64;
    let mut compute_ns = 0u64;
    let mut input_bytes = 0u64;
    for name in files {
        let started_ns = clock.now_ns();
        let contents = client
            .read_to_vec(name, chunk_bytes as u64, 16)
            .map_err(|source| PipelineError::Stream {
                file: name.clone(),
                source,
            })?;
        let read_done_ns = clock.now_ns();
        let plan = DrivePlan {
            chunk_size_bytes: chunk_bytes,
            worker_count,
            map_order: MapOrder::Forward,
        };
        run_on_bytes(kernel, name, &contents, plan, &mut CountingSink::default())?;
        read_ns += read_done_ns - started_ns;
        compute_ns += clock.now_ns().saturating_sub(read_done_ns);
        input_bytes += contents.len() as u64;
    }
    let total_seconds = (read_ns + compute_ns) as f64 / 1e9;
    Ok(ReadThenComputeReport {
        input_bytes,
        read_seconds: read_ns as f64 / 1e9,
        compute_seconds: compute_ns as f64 / 1e9,
        input_bytes_per_second: if total_seconds > 0.0 {
            input_bytes as f64 / total_seconds
        } else {
            0.0
        },
    })
}
