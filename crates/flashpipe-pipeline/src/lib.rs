//! flashpipe-pipeline: runs a compute kernel next to the data, inside the engine's process, as a
//! three-stage pipeline with every phase overlapped (RAD III.C: the slowest phase, not the sum,
//! sets the pace):
//!
//! 1. **read stage**: one or more reader threads, each an [`flashpipe_engine::EngineClient`] with
//!    many reads in flight (SISC 3.5's reader threads and slots);
//! 2. **kernel stage**: a pool of worker threads that run the kernel straight on the engine's read
//!    buffers ([`flashpipe_engine::ReadData::bytes`], no copy); parallel kernels map chunks in any
//!    order, in-order kernels see a file's chunks one at a time in offset order;
//! 3. **result stage**: puts mapped parts back in offset order, reduces them, and hands the
//!    transformed stream to the **write stage**, which writes it back into the store
//!    ([`flashpipe_engine::Command::Write`]) or returns it to the caller.
//!
//! Stages are joined by bounded crossbeam channels, and a fixed number of *chunk credits*, one
//! per engine pool buffer, bounds the buffers held anywhere between "read submitted" and
//! "reduced" (the small files of one batched read that share a buffer share its credit): a
//! slow kernel stalls the readers instead of growing memory. Output buffers are recycled
//! between the write stage and the sinks, and kept between jobs (bounded).
//!
//! Time: the pipeline runs on real threads in real time. It never reads the wall clock itself; it
//! takes the store device's [`flashpipe_device::Clock`] from the engine it runs on
//! ([`flashpipe_engine::Engine::clock`]), so busy times are measured with the same clock as the
//! devices ("one stack, two clocks").
//!
//! Written by hand because no crate offers a pipeline over this engine's completion-based client;
//! the queues are `crossbeam-channel`.

pub mod compare;
pub mod config;
pub mod demo;
pub mod error;
mod output;
pub mod report;
pub mod run;
pub mod staged;
mod stages;
pub mod store_file_options;

pub use config::{OutputTarget, PipelineConfig};
pub use error::PipelineError;
pub use report::{FileOutcome, PipelineReport, PipelineResult, StageReport};
pub use run::{run_pipeline, run_pipeline_observed, FileObserver};
pub use staged::{output_target, StagedOutputs, StagingError};
