//! Why a pipeline run failed; every data error names the file and the byte offset.

use flashpipe_engine::EngineError;
use flashpipe_kernels::error::KernelError;

/// A pipeline run failed (the first failure ends the job; the others stages stop).
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// An input file could not be opened (missing, bad name).
    #[error("{file}: cannot open: {source}")]
    Open {
        /// The input file.
        file: String,
        /// The engine's answer.
        source: EngineError,
    },
    /// A read of an input failed.
    #[error("{file} at byte {offset_bytes}: read failed: {source}")]
    Read {
        /// The input file.
        file: String,
        /// Offset of the failed read.
        offset_bytes: u64,
        /// The engine's answer.
        source: EngineError,
    },
    /// Reading a whole file out of the store failed (the no-overlap comparison).
    #[error("{file}: reading the whole file failed: {source}")]
    Stream {
        /// The input file.
        file: String,
        /// What failed.
        source: flashpipe_engine::StreamError,
    },
    /// The kernel refused or failed on an input (names its file and offset).
    #[error("kernel failed: {0}")]
    Kernel(#[from] KernelError),
    /// The kernel panicked (a bug in the kernel, reported instead of hanging the job).
    #[error("{file} at byte {offset_bytes}: the kernel panicked: {message}")]
    KernelPanicked {
        /// The input file.
        file: String,
        /// Offset of the chunk being processed.
        offset_bytes: u64,
        /// The panic message.
        message: String,
    },
    /// Preparing an output file failed.
    #[error("output file {file}: {source}")]
    Output {
        /// The output file.
        file: String,
        /// The engine's answer.
        source: EngineError,
    },
    /// Writing a result back failed.
    #[error("{file} at byte {offset_bytes}: writing the result failed: {source}")]
    Write {
        /// The output file.
        file: String,
        /// Offset of the failed write.
        offset_bytes: u64,
        /// The engine's answer.
        source: EngineError,
    },
    /// The settings cannot work.
    #[error("pipeline settings: {0}")]
    Config(String),
    /// The job was cancelled by its caller.
    #[error("the job was cancelled")]
    Cancelled,
}
