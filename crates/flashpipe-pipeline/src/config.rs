//! Pipeline settings: reader threads, reads in flight, chunk size, workers, queue bounds, and
//! where results go.

use flashpipe_engine::EngineConfig;

use crate::error::PipelineError;

/// Most kernel worker threads of one pipeline (`--workers`).
pub const MAX_WORKER_COUNT: usize = 256;
/// Most reader threads of one pipeline (`--readers`).
pub const MAX_READER_COUNT: usize = 64;
/// Most reads one reader keeps in flight, chunk credits, queued outputs and writes in flight.
pub const MAX_QUEUE_ENTRIES: usize = 1 << 16;
/// Largest output write: 64 MiB.
pub const MAX_OUTPUT_CHUNK_BYTES: usize = 1 << 26;

/// Checks thread counts before anything starts: `reader_count` readers and `worker_count`
/// workers, each at least 1 and at most its limit.
pub fn check_thread_counts(reader_count: usize, worker_count: usize) -> Result<(), PipelineError> {
    for (name, value, maximum) in [
        ("reader_count", reader_count, MAX_READER_COUNT),
        ("worker_count", worker_count, MAX_WORKER_COUNT),
    ] {
        if !(1..=maximum).contains(&value) {
            return Err(PipelineError::Config(format!(
                "{name} {value} is not within 1..={maximum}"
            )));
        }
    }
    Ok(())
}

/// Where a kernel's transformed stream goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutputTarget {
    /// Count the bytes and drop them (summary kernels, throughput runs).
    Discard,
    /// Return each file's stream to the caller in [`crate::FileOutcome::output`].
    ReturnToCaller,
    /// Write each input's stream into the store as the file named at the same index
    /// (created, or truncated when it exists).
    StoreFiles(Vec<String>),
}

/// How a pipeline runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipelineConfig {
    /// Reader threads; files are dealt to them round-robin (SISC's reader threads).
    pub reader_count: usize,
    /// Reads each reader keeps in flight (SISC's slots).
    pub reads_in_flight_per_reader: usize,
    /// Bytes per read (SISC's slot size); at most the engine's `max_read_bytes`.
    pub chunk_bytes: u64,
    /// Kernel worker threads.
    pub worker_count: usize,
    /// Engine pool buffers the job holds at once, each from "read submitted" until nothing
    /// read into it is needed any more (a batch of small files in one buffer holds one):
    /// the memory bound. Must not exceed the engine's read buffers.
    pub chunk_credit_count: usize,
    /// Output buffers queued towards the write stage.
    pub output_queue_capacity: usize,
    /// Bytes per output write command.
    pub output_chunk_bytes: usize,
    /// Writes the write stage keeps in flight.
    pub writes_in_flight: usize,
    /// Where transformed streams go.
    pub output: OutputTarget,
}

impl PipelineConfig {
    /// Settings that fit `engine`: all its read buffers as credits, one reader, workers on
    /// every core.
    pub fn for_engine(engine: &EngineConfig, output: OutputTarget) -> PipelineConfig {
        let cores = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .min(MAX_WORKER_COUNT);
        let credits = (engine.read_buffer_count as usize).max(1);
        PipelineConfig {
            reader_count: 1,
            reads_in_flight_per_reader: engine.reads_in_flight_limit.min(credits).max(1),
            chunk_bytes: engine.max_read_bytes as u64,
            worker_count: cores,
            chunk_credit_count: credits,
            output_queue_capacity: 4,
            output_chunk_bytes: 1 << 20,
            writes_in_flight: 8,
            output,
        }
    }

    /// Refuses settings that cannot run against an engine configured as `engine`.
    pub fn check(&self, engine: &EngineConfig, file_count: usize) -> Result<(), PipelineError> {
        let positive = [
            ("reader_count", self.reader_count),
            (
                "reads_in_flight_per_reader",
                self.reads_in_flight_per_reader,
            ),
            ("chunk_bytes", usize::from(self.chunk_bytes != 0)),
            ("worker_count", self.worker_count),
            ("chunk_credit_count", self.chunk_credit_count),
            ("output_queue_capacity", self.output_queue_capacity),
            ("output_chunk_bytes", self.output_chunk_bytes),
            ("writes_in_flight", self.writes_in_flight),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, value)| *value == 0) {
            return Err(PipelineError::Config(format!("{name} must be at least 1")));
        }
        check_thread_counts(self.reader_count, self.worker_count)?;
        for (name, value) in [
            (
                "reads_in_flight_per_reader",
                self.reads_in_flight_per_reader,
            ),
            ("chunk_credit_count", self.chunk_credit_count),
            ("output_queue_capacity", self.output_queue_capacity),
            ("writes_in_flight", self.writes_in_flight),
        ] {
            if value > MAX_QUEUE_ENTRIES {
                return Err(PipelineError::Config(format!(
                    "{name} {value} is above the limit of {MAX_QUEUE_ENTRIES}"
                )));
            }
        }
        if self.output_chunk_bytes > MAX_OUTPUT_CHUNK_BYTES {
            return Err(PipelineError::Config(format!(
                "output_chunk_bytes {} is above the limit of {MAX_OUTPUT_CHUNK_BYTES}",
                self.output_chunk_bytes
            )));
        }
        if self.chunk_bytes > engine.max_read_bytes as u64 {
            return Err(PipelineError::Config(format!(
                "chunk of {} bytes exceeds the engine's {} bytes per read",
                self.chunk_bytes, engine.max_read_bytes
            )));
        }
        if self.chunk_credit_count > engine.read_buffer_count as usize {
            return Err(PipelineError::Config(format!(
                "{} chunk credits exceed the engine's {} read buffers",
                self.chunk_credit_count, engine.read_buffer_count
            )));
        }
        if let OutputTarget::StoreFiles(names) = &self.output {
            if names.len() != file_count {
                return Err(PipelineError::Config(format!(
                    "{} output names for {file_count} input files",
                    names.len()
                )));
            }
        }
        Ok(())
    }
}
