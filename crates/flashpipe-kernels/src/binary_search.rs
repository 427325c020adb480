//! Binary search over a sorted file of fixed-size records with an in-memory sparse index (SISC
//! microbenchmark 2.1): one streaming pass keeps the key of the first record of every block of
//! `block_records` records (and checks the file is sorted); a lookup then searches the index in
//! memory and reads exactly one block from storage (one probe read), or none when the index
//! alone answers. Lookups find the first record whose key equals the query.

use std::sync::{Arc, Mutex};

use serde::Serialize;

use crate::api::{Chunk, FileInfo, FileJob, Kernel, OutputSink, SequentialJob, Summary};
use crate::error::{KernelError, KernelErrorKind, OptionsError};
use crate::options::{
    KernelOptions, OptionSpec, MAX_BLOCK_RECORDS, MAX_INDEX_BLOCK_BYTES, MAX_RECORD_BYTES,
};

/// Options of the index builder.
pub const SEARCH_INDEX_OPTIONS: &[OptionSpec] = &[
    OptionSpec::required("record", "record size in bytes (1..=1M)"),
    OptionSpec::optional(
        "key",
        "0",
        "key prefix length in bytes; 0 uses the whole record",
    ),
    OptionSpec::optional(
        "block_records",
        "64",
        "records per indexed block (one probe read per lookup reads one block)",
    ),
];

/// Random-access reads of the sorted file (the engine's store, a file, or memory).
pub trait ProbeRead {
    /// Fills `buffer` from `offset_bytes`.
    fn read_exact_at(&self, offset_bytes: u64, buffer: &mut [u8]) -> std::io::Result<()>;
}

impl ProbeRead for [u8] {
    fn read_exact_at(&self, offset_bytes: u64, buffer: &mut [u8]) -> std::io::Result<()> {
        let start = usize::try_from(offset_bytes).map_err(|_| std::io::ErrorKind::UnexpectedEof)?;
        let source = self
            .get(start..start + buffer.len())
            .ok_or(std::io::ErrorKind::UnexpectedEof)?;
        buffer.copy_from_slice(source);
        Ok(())
    }
}

impl ProbeRead for std::fs::File {
    fn read_exact_at(&self, offset_bytes: u64, buffer: &mut [u8]) -> std::io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(self, buffer, offset_bytes)
    }
}

/// Record layout of an index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexLayout {
    /// Record size.
    pub record_size_bytes: usize,
    /// Key prefix length (1..=record size).
    pub key_size_bytes: usize,
    /// Records per indexed block (at least 1).
    pub block_records: usize,
}

/// The in-memory sparse index of a sorted record file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SparseIndex {
    layout: IndexLayout,
    record_count: u64,
    block_first_keys: Vec<u8>,
}

/// The answer to one lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LookupResult {
    /// Index of the first record with the key, if any.
    pub record_index: Option<u64>,
    /// Reads issued to storage (0 or 1).
    pub probe_read_count: u32,
}

impl SparseIndex {
    /// Records in the file.
    pub fn record_count(&self) -> u64 {
        self.record_count
    }

    /// Index entries (blocks).
    pub fn entry_count(&self) -> usize {
        self.block_first_keys.len() / self.layout.key_size_bytes
    }

    fn block_key(&self, block: usize) -> &[u8] {
        let key = self.layout.key_size_bytes;
        &self.block_first_keys[block * key..(block + 1) * key]
    }

    /// Finds the first record whose key equals `key` (exactly `key_size_bytes` long).
    pub fn lookup<R: ProbeRead + ?Sized>(
        &self,
        key: &[u8],
        file: &R,
    ) -> std::io::Result<LookupResult> {
        assert_eq!(
            key.len(),
            self.layout.key_size_bytes,
            "query keys have the index's key length"
        );
        let blocks_before =
            partition_point(self.entry_count(), |block| self.block_key(block) < key);
        let at_block_start = |block: usize| {
            (block < self.entry_count() && self.block_key(block) == key)
                .then(|| (block * self.layout.block_records) as u64)
        };
        if blocks_before == 0 {
            return Ok(LookupResult {
                record_index: at_block_start(0),
                probe_read_count: 0,
            });
        }
        let block = blocks_before - 1;
        let first_record = (block * self.layout.block_records) as u64;
        let records_in_block =
            (self.record_count - first_record).min(self.layout.block_records as u64) as usize;
        let record = self.layout.record_size_bytes;
        let mut block_bytes = vec![0u8; records_in_block * record];
        file.read_exact_at(first_record * record as u64, &mut block_bytes)?;
        let record_key = |index: usize| &block_bytes[index * record..index * record + key.len()];
        let position = partition_point(records_in_block, |index| record_key(index) < key);
        let record_index = if position < records_in_block && record_key(position) == key {
            Some(first_record + position as u64)
        } else {
            at_block_start(blocks_before)
        };
        Ok(LookupResult {
            record_index,
            probe_read_count: 1,
        })
    }
}

/// The first index in `0..count` for which `is_before` is false (`is_before` is monotone).
fn partition_point(count: usize, is_before: impl Fn(usize) -> bool) -> usize {
    let (mut low, mut high) = (0, count);
    while low < high {
        let middle = low + (high - low) / 2;
        if is_before(middle) {
            low = middle + 1;
        } else {
            high = middle;
        }
    }
    low
}

/// Builds a [`SparseIndex`] from the file's bytes fed in order, checking that keys never decrease.
#[derive(Debug)]
pub struct SparseIndexBuilder {
    file: FileInfo,
    index: SparseIndex,
    carry: Vec<u8>,
    previous_key: Vec<u8>,
}

impl SparseIndexBuilder {
    /// A builder for `file`.
    pub fn new(file: FileInfo, layout: IndexLayout) -> Self {
        assert!(layout.key_size_bytes >= 1 && layout.key_size_bytes <= layout.record_size_bytes);
        assert!(layout.block_records >= 1);
        Self {
            file,
            index: SparseIndex {
                layout,
                record_count: 0,
                block_first_keys: Vec::new(),
            },
            carry: Vec::new(),
            previous_key: Vec::new(),
        }
    }

    fn add_record(&mut self, record: &[u8]) -> Result<(), KernelError> {
        let layout = self.index.layout;
        let key = &record[..layout.key_size_bytes];
        if !self.previous_key.is_empty() && key < &self.previous_key[..] {
            return Err(self.file.error_at(
                self.index.record_count * layout.record_size_bytes as u64,
                KernelErrorKind::WrongFormat(format!(
                    "record {} is out of order: the file is not sorted",
                    self.index.record_count
                )),
            ));
        }
        if self.index.record_count % layout.block_records as u64 == 0 {
            self.index.block_first_keys.extend_from_slice(key);
        }
        self.previous_key.clear();
        self.previous_key.extend_from_slice(key);
        self.index.record_count += 1;
        Ok(())
    }

    /// Feeds the next bytes of the file.
    pub fn add_bytes(&mut self, mut bytes: &[u8]) -> Result<(), KernelError> {
        let record = self.index.layout.record_size_bytes;
        if !self.carry.is_empty() {
            let needed = (record - self.carry.len()).min(bytes.len());
            self.carry.extend_from_slice(&bytes[..needed]);
            bytes = &bytes[needed..];
            if self.carry.len() < record {
                return Ok(());
            }
            let whole = std::mem::take(&mut self.carry);
            self.add_record(&whole)?;
        }
        let mut records = bytes.chunks_exact(record);
        for whole in records.by_ref() {
            self.add_record(whole)?;
        }
        self.carry.extend_from_slice(records.remainder());
        Ok(())
    }

    /// The finished index; a trailing partial record is an error.
    pub fn finish(self) -> Result<SparseIndex, KernelError> {
        if !self.carry.is_empty() {
            let offset = self.index.record_count * self.index.layout.record_size_bytes as u64;
            return Err(self.file.error_at(
                offset,
                KernelErrorKind::WrongLength(format!(
                    "file ends inside a {}-byte record",
                    self.index.layout.record_size_bytes
                )),
            ));
        }
        Ok(self.index)
    }
}

/// The index-building kernel: verifies sortedness and keeps the last built index for lookups.
pub struct SearchIndexKernel {
    layout: IndexLayout,
    last_index: Arc<Mutex<Option<SparseIndex>>>,
}

impl SearchIndexKernel {
    /// A kernel with this layout.
    pub fn new(layout: IndexLayout) -> Self {
        Self {
            layout,
            last_index: Arc::default(),
        }
    }

    /// Builds from options.
    pub fn from_options(options: &KernelOptions) -> Result<Arc<dyn Kernel>, OptionsError> {
        let record_size_bytes = options.integer("record", 1, MAX_RECORD_BYTES)? as usize;
        let key = options.integer("key", 0, record_size_bytes as u64)? as usize;
        let block_records = options.integer("block_records", 1, MAX_BLOCK_RECORDS)? as usize;
        if (record_size_bytes as u64) * (block_records as u64) > MAX_INDEX_BLOCK_BYTES {
            return Err(OptionsError::BadValue {
                key: "block_records".into(),
                value: block_records.to_string(),
                reason: format!(
                    "record x block_records = {} bytes, above the limit of {MAX_INDEX_BLOCK_BYTES} bytes per index block",
                    record_size_bytes as u64 * block_records as u64
                ),
            });
        }
        Ok(Arc::new(Self::new(IndexLayout {
            record_size_bytes,
            key_size_bytes: if key == 0 { record_size_bytes } else { key },
            block_records,
        })))
    }

    /// The index built by the most recently finished file.
    pub fn last_index(&self) -> Option<SparseIndex> {
        self.last_index.lock().expect("index lock poisoned").clone()
    }
}

struct SearchIndexJob {
    builder: SparseIndexBuilder,
    last_index: Arc<Mutex<Option<SparseIndex>>>,
}

impl SequentialJob for SearchIndexJob {
    fn process_chunk(
        &mut self,
        chunk: &Chunk<'_>,
        _sink: &mut dyn OutputSink,
    ) -> Result<(), KernelError> {
        self.builder.add_bytes(chunk.data)
    }

    fn finish(self: Box<Self>, _sink: &mut dyn OutputSink) -> Result<Summary, KernelError> {
        let index = self.builder.finish()?;
        let summary = Summary::Index {
            record_count: index.record_count(),
            entry_count: index.entry_count() as u64,
        };
        *self.last_index.lock().expect("index lock poisoned") = Some(index);
        Ok(summary)
    }
}

impl Kernel for SearchIndexKernel {
    fn name(&self) -> &'static str {
        "search-index"
    }

    fn start_file(&self, file: &FileInfo) -> Result<FileJob, KernelError> {
        Ok(FileJob::Sequential(Box::new(SearchIndexJob {
            builder: SparseIndexBuilder::new(file.clone(), self.layout),
            last_index: Arc::clone(&self.last_index),
        })))
    }
}
