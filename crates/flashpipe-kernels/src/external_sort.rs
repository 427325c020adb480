//! External merge sort of fixed-size records by a key prefix (SISC microbenchmark 2.1), for inputs
//! larger than the memory it is given: records gather in a buffer of at most `memory` bytes; a full
//! buffer is sorted and spilled as a run through [`SpillStorage`]; at the end the runs are merged
//! k-way with a binary heap (log k comparisons per record, like SISC's tree) and streamed to the
//! sink. Equal keys keep their input order (stable), so the result equals a stable in-memory sort.
//!
//! Sequential per file: the runs are one file's state.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::sync::Arc;

use crate::api::{Chunk, FileInfo, FileJob, Kernel, OutputSink, SequentialJob, Summary};
use crate::error::{KernelError, KernelErrorKind, OptionsError};
use crate::options::{KernelOptions, OptionSpec, MAX_RECORD_BYTES, MAX_SORT_MEMORY_BYTES};

/// Options of the external sort.
pub const SORT_OPTIONS: &[OptionSpec] = &[
    OptionSpec::required("record", "record size in bytes (1..=1M)"),
    OptionSpec::optional(
        "key",
        "0",
        "key prefix length in bytes; 0 sorts by the whole record",
    ),
    OptionSpec::optional(
        "memory",
        "64M",
        "memory for records and run buffers (at least 4 records)",
    ),
    OptionSpec::optional(
        "temp_dir",
        "",
        "folder for spilled runs; empty uses the system temporary folder",
    ),
];

/// Temporary storage for sorted runs.
pub trait SpillStorage: Send {
    /// Starts a new run; returns its number and a writer (dropped before the run is read).
    fn create_run(&mut self) -> std::io::Result<(usize, Box<dyn Write + Send>)>;
    /// Opens run `run` for reading from its start.
    fn open_run(&mut self, run: usize) -> std::io::Result<Box<dyn Read + Send>>;
}

/// Runs as anonymous temporary files (removed by the OS when closed).
#[derive(Debug)]
pub struct FileSpillStorage {
    directory: Option<PathBuf>,
    files: Vec<std::fs::File>,
}

impl FileSpillStorage {
    /// Storage in `directory` (the system temporary folder when `None`).
    pub fn new(directory: Option<PathBuf>) -> Self {
        Self {
            directory,
            files: Vec::new(),
        }
    }
}

impl SpillStorage for FileSpillStorage {
    fn create_run(&mut self) -> std::io::Result<(usize, Box<dyn Write + Send>)> {
        let file = match &self.directory {
            Some(directory) => tempfile::tempfile_in(directory)?,
            None => tempfile::tempfile()?,
        };
        let writer = file.try_clone()?;
        self.files.push(file);
        Ok((self.files.len() - 1, Box::new(writer)))
    }

    fn open_run(&mut self, run: usize) -> std::io::Result<Box<dyn Read + Send>> {
        let mut reader = self.files[run].try_clone()?;
        reader.seek(SeekFrom::Start(0))?;
        Ok(Box::new(reader))
    }
}

/// Record layout and memory budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SortSettings {
    /// Record size.
    pub record_size_bytes: usize,
    /// Key prefix length (1..=record size).
    pub key_size_bytes: usize,
    /// Memory budget for the record buffer (with its index) and the merge buffers.
    pub memory_bytes: usize,
}

impl SortSettings {
    /// Records held in memory per run (each costs its bytes plus a 4-byte index entry).
    pub fn records_per_run(&self) -> usize {
        (self.memory_bytes / (self.record_size_bytes + 4)).max(1)
    }
}

/// The external sort kernel.
pub struct ExternalSortKernel {
    settings: SortSettings,
    temp_directory: Option<PathBuf>,
}

impl ExternalSortKernel {
    /// A kernel with these settings, spilling to `temp_directory` (system default when `None`).
    pub fn new(settings: SortSettings, temp_directory: Option<PathBuf>) -> Self {
        Self {
            settings,
            temp_directory,
        }
    }

    /// Builds from options.
    pub fn from_options(options: &KernelOptions) -> Result<Arc<dyn Kernel>, OptionsError> {
        let record_size_bytes = options.integer("record", 1, MAX_RECORD_BYTES)? as usize;
        let key = options.integer("key", 0, record_size_bytes as u64)? as usize;
        let minimum_memory = 4 * (record_size_bytes as u64 + 4);
        let memory_bytes =
            options.integer("memory", minimum_memory, MAX_SORT_MEMORY_BYTES)? as usize;
        let temp_dir = options.text("temp_dir")?;
        let temp_directory = (!temp_dir.is_empty()).then(|| PathBuf::from(temp_dir));
        if let Some(directory) = &temp_directory {
            if !directory.is_dir() {
                return Err(OptionsError::BadFile {
                    key: "temp_dir".into(),
                    reason: format!("{} is not a folder", directory.display()),
                });
            }
        }
        let settings = SortSettings {
            record_size_bytes,
            key_size_bytes: if key == 0 { record_size_bytes } else { key },
            memory_bytes,
        };
        Ok(Arc::new(Self::new(settings, temp_directory)))
    }
}

impl Kernel for ExternalSortKernel {
    fn name(&self) -> &'static str {
        "sort"
    }

    fn start_file(&self, file: &FileInfo) -> Result<FileJob, KernelError> {
        let record_size = self.settings.record_size_bytes as u64;
        if file.size_bytes % record_size != 0 {
            return Err(file.error_at(
                file.size_bytes / record_size * record_size,
                KernelErrorKind::WrongLength(format!(
                    "{} bytes is not a whole number of {record_size}-byte records",
                    file.size_bytes
                )),
            ));
        }
        let storage = Box::new(FileSpillStorage::new(self.temp_directory.clone()));
        Ok(FileJob::Sequential(Box::new(ExternalSortJob::new(
            file.clone(),
            self.settings,
            storage,
        ))))
    }
}

/// Sorting one file.
pub struct ExternalSortJob {
    file: FileInfo,
    settings: SortSettings,
    storage: Box<dyn SpillStorage>,
    buffer: Vec<u8>,
    runs: Vec<usize>,
    record_count: u64,
}

impl ExternalSortJob {
    /// A job spilling through `storage`.
    pub fn new(file: FileInfo, settings: SortSettings, storage: Box<dyn SpillStorage>) -> Self {
        assert!(
            settings.key_size_bytes >= 1 && settings.key_size_bytes <= settings.record_size_bytes
        );
        Self {
            file,
            settings,
            storage,
            buffer: Vec::new(),
            runs: Vec::new(),
            record_count: 0,
        }
    }

    fn capacity_bytes(&self) -> usize {
        self.settings.records_per_run() * self.settings.record_size_bytes
    }

    fn io_error(&self, error: std::io::Error) -> KernelError {
        self.file.error_at(0, KernelErrorKind::Io(error))
    }

    /// Positions of the buffered records in stable key order.
    fn sorted_order(&self) -> Vec<u32> {
        let record = self.settings.record_size_bytes;
        let key = self.settings.key_size_bytes;
        let count = self.buffer.len() / record;
        let mut order: Vec<u32> = (0..count as u32).collect();
        order.sort_by(|&left, &right| {
            let left = left as usize * record;
            let right = right as usize * record;
            self.buffer[left..left + key].cmp(&self.buffer[right..right + key])
        });
        order
    }

    fn spill(&mut self) -> Result<(), KernelError> {
        let order = self.sorted_order();
        let (run, writer) = self
            .storage
            .create_run()
            .map_err(|error| self.io_error(error))?;
        let mut writer = BufWriter::with_capacity(1 << 16, writer);
        let record = self.settings.record_size_bytes;
        for index in order {
            let start = index as usize * record;
            writer
                .write_all(&self.buffer[start..start + record])
                .map_err(|error| self.io_error(error))?;
        }
        writer.flush().map_err(|error| self.io_error(error))?;
        self.runs.push(run);
        self.buffer.clear();
        Ok(())
    }

    fn write_in_memory(&self, sink: &mut dyn OutputSink) -> Result<(), KernelError> {
        let record = self.settings.record_size_bytes;
        let mut batch = Vec::with_capacity(1 << 16);
        for index in self.sorted_order() {
            let start = index as usize * record;
            batch.extend_from_slice(&self.buffer[start..start + record]);
            if batch.len() >= 1 << 16 {
                sink.write_output(&batch)?;
                batch.clear();
            }
        }
        sink.write_output(&batch)
    }

    fn merge_runs(&mut self, sink: &mut dyn OutputSink) -> Result<(), KernelError> {
        let record = self.settings.record_size_bytes;
        let key = self.settings.key_size_bytes;
        let reader_buffer_bytes = (self.settings.memory_bytes / (self.runs.len() + 2)).max(record);
        let mut readers = Vec::with_capacity(self.runs.len());
        for &run in &self.runs {
            let reader = self
                .storage
                .open_run(run)
                .map_err(|error| self.file.error_at(0, error.into()))?;
            readers.push(BufReader::with_capacity(reader_buffer_bytes, reader));
        }
        let mut current: Vec<Vec<u8>> = vec![vec![0u8; record]; readers.len()];
        let mut heap = BinaryHeap::with_capacity(readers.len());
        for (run, reader) in readers.iter_mut().enumerate() {
            if read_record(reader, &mut current[run]).map_err(|error| self.io_error(error))? {
                heap.push(Reverse((current[run][..key].to_vec(), run)));
            }
        }
        let mut batch = Vec::with_capacity(reader_buffer_bytes.min(1 << 16));
        while let Some(Reverse((mut heap_key, run))) = heap.pop() {
            batch.extend_from_slice(&current[run]);
            if batch.len() >= batch.capacity() {
                sink.write_output(&batch)?;
                batch.clear();
            }
            if read_record(&mut readers[run], &mut current[run])
                .map_err(|error| self.io_error(error))?
            {
                heap_key.clear();
                heap_key.extend_from_slice(&current[run][..key]);
                heap.push(Reverse((heap_key, run)));
            }
        }
        sink.write_output(&batch)
    }
}

/// Reads one record; `false` at a clean end of the run.
fn read_record(reader: &mut impl Read, record: &mut [u8]) -> std::io::Result<bool> {
    let mut filled = 0;
    while filled < record.len() {
        match reader.read(&mut record[filled..])? {
            0 if filled == 0 => return Ok(false),
            0 => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "spilled run ends inside a record",
                ))
            }
            read => filled += read,
        }
    }
    Ok(true)
}

impl SequentialJob for ExternalSortJob {
    fn process_chunk(
        &mut self,
        chunk: &Chunk<'_>,
        _sink: &mut dyn OutputSink,
    ) -> Result<(), KernelError> {
        let capacity = self.capacity_bytes();
        let mut rest = chunk.data;
        while !rest.is_empty() {
            let room = capacity - self.buffer.len();
            let (taken, remaining) = rest.split_at(room.min(rest.len()));
            self.buffer.extend_from_slice(taken);
            rest = remaining;
            if self.buffer.len() == capacity {
                self.spill()?;
            }
        }
        Ok(())
    }

    fn finish(mut self: Box<Self>, sink: &mut dyn OutputSink) -> Result<Summary, KernelError> {
        let record = self.settings.record_size_bytes;
        let buffered_records = (self.buffer.len() / record) as u64;
        assert_eq!(self.buffer.len() % record, 0, "length checked at start");
        self.record_count =
            self.runs.len() as u64 * self.settings.records_per_run() as u64 + buffered_records;
        if self.runs.is_empty() {
            self.write_in_memory(sink)?;
        } else {
            if !self.buffer.is_empty() {
                self.spill()?;
            }
            self.buffer = Vec::new();
            self.merge_runs(sink)?;
        }
        Ok(Summary::Sorted {
            record_count: self.record_count,
            spilled_run_count: self.runs.len() as u64,
        })
    }
}
