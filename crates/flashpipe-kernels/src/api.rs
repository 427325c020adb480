//! The kernel API, shaped for a streaming pipeline with a pool of workers.
//!
//! The engine reads each file as a sequence of [`Chunk`]s: byte slices borrowed straight from its
//! read buffers, tagged with the file name and the byte offset of their first byte. Chunk boundaries
//! are arbitrary (a kernel never relies on them), but chunks of one file never overlap and together
//! cover the file exactly.
//!
//! A [`Kernel`] starts one [`FileJob`] per file. The job comes in one of two shapes, chosen by the
//! kernel's [`Schedule`]:
//! - [`FileJob::Parallel`]: a shared [`ChunkMapper`] that any worker may call on any chunk, in any
//!   order, concurrently; and a [`PartReducer`] that receives the mapped [`ChunkPart`]s in offset
//!   order (the engine's ordering stage) and stitches them together: it resolves what straddles a
//!   boundary (a DES block, a line for grep, a record for kNN), emits the transformed stream in file
//!   order, and folds the summaries.
//! - [`FileJob::Sequential`]: a [`SequentialJob`] fed the chunks one at a time in offset order
//!   (CBC, SHA-256, Sobel's whole-file decode, external sort). Different files still run on
//!   different workers at once.
//!
//! Every kernel's result is its [`OutputKind`]: a transformed byte stream written to an
//! [`OutputSink`] in input order (to become a file), or a [`Summary`] value, or both.

use std::any::Any;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::{KernelError, KernelErrorKind};
use crate::registry::KernelSpec;

/// One piece of a file, borrowed from a read buffer.
#[derive(Debug, Clone, Copy)]
pub struct Chunk<'a> {
    /// The file the bytes belong to (for error messages and per-file results).
    pub file: &'a str,
    /// Byte offset of `data[0]` within the file.
    pub offset_bytes: u64,
    /// The bytes themselves.
    pub data: &'a [u8],
}

impl Chunk<'_> {
    /// The offset one past the last byte of this chunk.
    pub fn end_offset_bytes(&self) -> u64 {
        self.offset_bytes + self.data.len() as u64
    }

    /// Asserts that this chunk starts at `*next_offset_bytes` (a sequential job's chunks
    /// arrive in order, back to back) and moves `*next_offset_bytes` past it.
    pub fn advance_in_order(&self, next_offset_bytes: &mut u64) {
        assert_eq!(
            self.offset_bytes, *next_offset_bytes,
            "chunks arrive in order"
        );
        *next_offset_bytes = self.end_offset_bytes();
    }

    /// An error located at `offset_bytes` in this chunk's file.
    pub fn error_at(&self, offset_bytes: u64, kind: KernelErrorKind) -> KernelError {
        KernelError::new(self.file, offset_bytes, kind)
    }
}

/// What a kernel knows about a file before its first chunk arrives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileInfo {
    /// The file's name in the store.
    pub name: Arc<str>,
    /// The file's total length; chunks cover `0..size_bytes` exactly.
    pub size_bytes: u64,
}

impl FileInfo {
    /// A file description.
    pub fn new(name: &str, size_bytes: u64) -> Self {
        Self {
            name: Arc::from(name),
            size_bytes,
        }
    }

    /// An error located at `offset_bytes` in this file.
    pub fn error_at(&self, offset_bytes: u64, kind: KernelErrorKind) -> KernelError {
        KernelError::new(&self.name, offset_bytes, kind)
    }
}

/// How the chunks of one file may be scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Schedule {
    /// Chunks of one file may be mapped by any worker in any order; parts are reduced in order.
    ChunksInParallel,
    /// Chunks of one file must be processed one at a time in offset order.
    ChunksInOrder,
}

/// What a kernel produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OutputKind {
    /// A transformed byte stream, in input order (written back as a file); the summary is empty.
    TransformedStream,
    /// A summary value per file (matches, checksum, labels, neighbours); no byte stream.
    Summary,
}

/// Where a kernel writes its transformed stream. The engine's implementation may block
/// (back-pressure from a bounded result queue); `Vec<u8>` collects everything.
pub trait OutputSink {
    /// Appends `bytes` to the output stream.
    fn write_output(&mut self, bytes: &[u8]) -> Result<(), KernelError>;
}

impl OutputSink for Vec<u8> {
    fn write_output(&mut self, bytes: &[u8]) -> Result<(), KernelError> {
        self.extend_from_slice(bytes);
        Ok(())
    }
}

/// A sink that discards the stream but counts it (for throughput runs of summary kernels).
#[derive(Debug, Default)]
pub struct CountingSink {
    /// Bytes written so far.
    pub written_bytes: u64,
}

impl OutputSink for CountingSink {
    fn write_output(&mut self, bytes: &[u8]) -> Result<(), KernelError> {
        self.written_bytes += bytes.len() as u64;
        Ok(())
    }
}

/// The result of mapping one chunk in parallel: transformed bytes for the chunk's interior and a
/// kernel-specific partial state the reducer consumes.
pub struct ChunkPart {
    /// Offset of the chunk this part came from.
    pub offset_bytes: u64,
    /// Length of that chunk.
    pub length_bytes: usize,
    /// Kernel-specific partial result (interior output, boundary fragments, partial summaries).
    pub partial: Box<dyn Any + Send>,
}

impl std::fmt::Debug for ChunkPart {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ChunkPart")
            .field("offset_bytes", &self.offset_bytes)
            .field("length_bytes", &self.length_bytes)
            .finish_non_exhaustive()
    }
}

impl ChunkPart {
    /// Wraps a kernel's partial result for `chunk`.
    pub fn new<T: Any + Send>(chunk: &Chunk<'_>, partial: T) -> Self {
        Self {
            offset_bytes: chunk.offset_bytes,
            length_bytes: chunk.data.len(),
            partial: Box::new(partial),
        }
    }

    /// Recovers the kernel's partial result; a part from another kernel is an internal error.
    pub fn into_partial<T: Any>(self, file: &FileInfo) -> Result<T, KernelError> {
        let offset_bytes = self.offset_bytes;
        self.partial
            .downcast::<T>()
            .map(|boxed| *boxed)
            .map_err(|_| {
                file.error_at(
                    offset_bytes,
                    KernelErrorKind::Internal("a chunk part from another kernel".into()),
                )
            })
    }
}

/// Maps chunks of one file; shared by all workers (`Sync`), called in any order.
pub trait ChunkMapper: Send + Sync {
    /// Processes one chunk independently of every other chunk.
    fn map_chunk(&self, chunk: &Chunk<'_>) -> Result<ChunkPart, KernelError>;
}

/// Folds the parts of one file, which it receives strictly in offset order.
pub trait PartReducer: Send {
    /// Consumes the next part (the one starting where the previous ended).
    fn reduce_part(
        &mut self,
        part: ChunkPart,
        sink: &mut dyn OutputSink,
    ) -> Result<(), KernelError>;
    /// Called once after the last part: flushes what remains and returns the file's summary.
    fn finish(self: Box<Self>, sink: &mut dyn OutputSink) -> Result<Summary, KernelError>;
}

/// Processes the chunks of one file one at a time, in offset order.
pub trait SequentialJob: Send {
    /// Consumes the next chunk (the one starting where the previous ended).
    fn process_chunk(
        &mut self,
        chunk: &Chunk<'_>,
        sink: &mut dyn OutputSink,
    ) -> Result<(), KernelError>;
    /// Called once after the last chunk: flushes what remains and returns the file's summary.
    fn finish(self: Box<Self>, sink: &mut dyn OutputSink) -> Result<Summary, KernelError>;
}

/// The work for one file.
pub enum FileJob {
    /// Map chunks in parallel, reduce parts in order.
    Parallel {
        /// Shared by every worker.
        mapper: Arc<dyn ChunkMapper>,
        /// Owned by the ordering stage.
        reducer: Box<dyn PartReducer>,
    },
    /// Feed chunks one at a time in order.
    Sequential(Box<dyn SequentialJob>),
}

/// A configured kernel (options already parsed and validated).
pub trait Kernel: Send + Sync {
    /// The registry name.
    fn name(&self) -> &'static str;
    /// How chunks of one file may be scheduled: by default what the kernel's registry
    /// entry declares (a kernel outside the registry, or one whose schedule depends on
    /// its options, says its own).
    fn schedule(&self) -> Schedule {
        registered(self.name()).schedule
    }
    /// What the kernel produces: by default what the kernel's registry entry declares.
    fn output_kind(&self) -> OutputKind {
        registered(self.name()).output
    }
    /// Starts the work for one file.
    fn start_file(&self, file: &FileInfo) -> Result<FileJob, KernelError>;
}

/// The registry entry of a kernel named `name`; a kernel outside the registry overrides
/// the methods that call this.
fn registered(name: &str) -> &'static KernelSpec {
    crate::registry::find_kernel(name).unwrap_or_else(|_| {
        panic!("kernel {name} is not in the registry: it must state its schedule and output")
    })
}

/// A file's summary value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Summary {
    /// The kernel produced only a byte stream.
    Stream {
        /// Bytes written to the sink.
        output_bytes: u64,
    },
    /// A checksum or digest, in lowercase hexadecimal.
    Digest {
        /// Algorithm name (`crc32c`, `sha256`).
        algorithm: String,
        /// The value in hexadecimal.
        hex: String,
    },
    /// Lines matching a search.
    Matches {
        /// Number of matching lines.
        matching_line_count: u64,
        /// The first matches (up to the kernel's `max_matches`).
        matches: Vec<LineMatch>,
    },
    /// A language label per chunk (or one for the whole file).
    Labels {
        /// One entry per classified piece.
        labels: Vec<PieceLabel>,
    },
    /// The k nearest records for each query.
    Neighbours {
        /// One entry per query, in query order.
        queries: Vec<QueryNeighbours>,
    },
    /// Statistics of an external sort.
    Sorted {
        /// Records written.
        record_count: u64,
        /// Sorted runs spilled to temporary storage (0 when everything fit in memory).
        spilled_run_count: u64,
    },
    /// Text a user kernel returned (a WebAssembly module's UTF-8 result).
    Text {
        /// The text.
        text: String,
    },
    /// A sparse index built over a sorted record file.
    Index {
        /// Records seen.
        record_count: u64,
        /// Index entries kept in memory.
        entry_count: u64,
    },
}

/// One matching line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineMatch {
    /// 1-based line number.
    pub line_number: u64,
    /// Offset of the line's first byte in the file.
    pub line_offset_bytes: u64,
    /// The line (without its newline), lossily decoded as UTF-8 and cut to 200 bytes.
    pub line: String,
}

/// The language of one piece of a file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PieceLabel {
    /// Offset of the piece's first byte.
    pub offset_bytes: u64,
    /// Length of the piece.
    pub length_bytes: u64,
    /// Language code from the profile file.
    pub language: String,
    /// Score margin over the runner-up (natural-log units per n-gram); larger is surer.
    pub margin: f32,
}

/// The neighbours of one query.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueryNeighbours {
    /// Index of the query in the query batch.
    pub query_index: usize,
    /// Nearest first: (record index in the file, squared Euclidean distance).
    pub neighbours: Vec<Neighbour>,
}

/// One neighbour.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Neighbour {
    /// Index of the record in the data file.
    pub record_index: u64,
    /// Squared Euclidean distance to the query.
    pub distance_squared: f32,
}
