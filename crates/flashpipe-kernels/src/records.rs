//! Parallel processing of fixed-size records at aligned file offsets, over arbitrary chunks.
//!
//! Many kernels work on fixed-size records that start at multiples of the record size in the file
//! (DES blocks, kNN vectors, language-ID pieces). A chunk from the engine generally starts and ends
//! inside records, so the [`RecordMapper`] processes the whole records lying inside the chunk
//! without copying and hands back the fragments at both edges (each shorter than two records); the
//! [`RecordReducer`], which sees the parts in offset order, joins the fragments into whole records,
//! processes those few records itself, and folds the partial results in file order. The last,
//! possibly short, record is given to [`RecordKernel::finish`].

use std::sync::Arc;

use crate::api::{
    Chunk, ChunkMapper, ChunkPart, FileInfo, FileJob, OutputSink, PartReducer, Summary,
};
use crate::error::{KernelError, KernelErrorKind};

/// A kernel over fixed-size, aligned records.
pub trait RecordKernel: Send + Sync + 'static {
    /// Partial result of a run of whole records.
    type Partial: Send + 'static;
    /// Per-file state of the in-order fold.
    type Accumulator: Send + 'static;

    /// The record size (at least 1).
    fn record_size_bytes(&self) -> usize;
    /// Processes whole records (`records.len()` is a positive multiple of the record size)
    /// starting at file offset `offset_bytes`; called concurrently, in any order.
    fn map_records(
        &self,
        file: &FileInfo,
        offset_bytes: u64,
        records: &[u8],
    ) -> Result<Self::Partial, KernelError>;
    /// A fresh accumulator for a file.
    fn new_accumulator(&self, file: &FileInfo) -> Self::Accumulator;
    /// Folds the partial result of the next records in file order, writing any stream output.
    fn fold(
        &self,
        accumulator: &mut Self::Accumulator,
        partial: Self::Partial,
        sink: &mut dyn OutputSink,
    ) -> Result<(), KernelError>;
    /// Handles the final short record (empty when the file is a whole number of records) at
    /// `offset_bytes` and returns the file's summary.
    fn finish(
        &self,
        accumulator: Self::Accumulator,
        file: &FileInfo,
        offset_bytes: u64,
        short_record: &[u8],
        sink: &mut dyn OutputSink,
    ) -> Result<Summary, KernelError>;
}

/// Starts a parallel job over `file` for a record kernel.
pub fn start_record_job<K: RecordKernel>(kernel: &Arc<K>, file: &FileInfo) -> FileJob {
    FileJob::Parallel {
        mapper: Arc::new(RecordMapper {
            kernel: Arc::clone(kernel),
            file: file.clone(),
        }),
        reducer: Box::new(RecordReducer {
            accumulator: kernel.new_accumulator(file),
            kernel: Arc::clone(kernel),
            file: file.clone(),
            carry: Vec::new(),
            carry_offset_bytes: 0,
            next_offset_bytes: 0,
        }),
    }
}

/// The per-chunk result of a [`RecordMapper`].
struct RecordChunkPartial<P> {
    head: Vec<u8>,
    interior: Option<P>,
    tail: Vec<u8>,
}

/// Maps the whole records inside a chunk.
pub struct RecordMapper<K: RecordKernel> {
    kernel: Arc<K>,
    file: FileInfo,
}

impl<K: RecordKernel> ChunkMapper for RecordMapper<K> {
    fn map_chunk(&self, chunk: &Chunk<'_>) -> Result<ChunkPart, KernelError> {
        let record_size = self.kernel.record_size_bytes() as u64;
        let start = chunk.offset_bytes;
        let end = chunk.end_offset_bytes();
        let first_boundary = start.div_ceil(record_size) * record_size;
        let last_boundary = end / record_size * record_size;
        let partial = if first_boundary >= last_boundary {
            RecordChunkPartial::<K::Partial> {
                head: chunk.data.to_vec(),
                interior: None,
                tail: Vec::new(),
            }
        } else {
            let head_length = (first_boundary - start) as usize;
            let interior_length = (last_boundary - first_boundary) as usize;
            let interior_bytes = &chunk.data[head_length..head_length + interior_length];
            RecordChunkPartial {
                head: chunk.data[..head_length].to_vec(),
                interior: Some(self.kernel.map_records(
                    &self.file,
                    first_boundary,
                    interior_bytes,
                )?),
                tail: chunk.data[head_length + interior_length..].to_vec(),
            }
        };
        Ok(ChunkPart::new(chunk, partial))
    }
}

/// Joins edge fragments into records and folds partial results in file order.
pub struct RecordReducer<K: RecordKernel> {
    kernel: Arc<K>,
    file: FileInfo,
    accumulator: K::Accumulator,
    carry: Vec<u8>,
    carry_offset_bytes: u64,
    next_offset_bytes: u64,
}

impl<K: RecordKernel> RecordReducer<K> {
    fn absorb_fragment(
        &mut self,
        fragment: &[u8],
        sink: &mut dyn OutputSink,
    ) -> Result<(), KernelError> {
        let record_size = self.kernel.record_size_bytes();
        self.carry.extend_from_slice(fragment);
        let whole_length = self.carry.len() / record_size * record_size;
        if whole_length == 0 {
            return Ok(());
        }
        let partial = self.kernel.map_records(
            &self.file,
            self.carry_offset_bytes,
            &self.carry[..whole_length],
        )?;
        self.kernel.fold(&mut self.accumulator, partial, sink)?;
        self.carry.drain(..whole_length);
        self.carry_offset_bytes += whole_length as u64;
        Ok(())
    }
}

impl<K: RecordKernel> PartReducer for RecordReducer<K> {
    fn reduce_part(
        &mut self,
        part: ChunkPart,
        sink: &mut dyn OutputSink,
    ) -> Result<(), KernelError> {
        if part.offset_bytes != self.next_offset_bytes {
            return Err(self.file.error_at(
                part.offset_bytes,
                KernelErrorKind::Internal(format!(
                    "part out of order: expected offset {}",
                    self.next_offset_bytes
                )),
            ));
        }
        self.next_offset_bytes += part.length_bytes as u64;
        let partial: RecordChunkPartial<K::Partial> = part.into_partial(&self.file)?;
        self.absorb_fragment(&partial.head, sink)?;
        if let Some(interior) = partial.interior {
            assert!(
                self.carry.is_empty(),
                "a record-aligned interior must follow a whole number of records"
            );
            self.kernel.fold(&mut self.accumulator, interior, sink)?;
            self.carry_offset_bytes = self.next_offset_bytes - partial.tail.len() as u64;
            self.carry = partial.tail;
        }
        Ok(())
    }

    fn finish(self: Box<Self>, sink: &mut dyn OutputSink) -> Result<Summary, KernelError> {
        let reducer = *self;
        if reducer.next_offset_bytes != reducer.file.size_bytes {
            return Err(reducer.file.error_at(
                reducer.next_offset_bytes,
                KernelErrorKind::Internal(format!(
                    "file ended after {} of {} bytes",
                    reducer.next_offset_bytes, reducer.file.size_bytes
                )),
            ));
        }
        assert!(reducer.carry.len() < reducer.kernel.record_size_bytes());
        reducer.kernel.finish(
            reducer.accumulator,
            &reducer.file,
            reducer.carry_offset_bytes,
            &reducer.carry,
            sink,
        )
    }
}
