//! An in-memory driver: runs a kernel over byte slices split into chunks, the way the pipeline
//! engine will (parallel kernels mapped by a pool of scoped threads in any order, parts reduced in
//! offset order; sequential kernels fed in order, files in parallel). Used by tests, throughput
//! measurement and the CLI until the engine lands.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::api::{Chunk, ChunkMapper, ChunkPart, FileInfo, FileJob, Kernel, OutputSink, Summary};
use crate::error::KernelError;

/// In which order the workers take the chunks of a parallel kernel (results never depend on it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapOrder {
    /// First chunk first.
    Forward,
    /// Last chunk first (tests that out-of-order mapping is harmless).
    Reverse,
}

/// How to drive one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrivePlan {
    /// Chunk length (at least 1); the last chunk may be shorter.
    pub chunk_size_bytes: usize,
    /// Worker threads for parallel kernels (at least 1).
    pub worker_count: usize,
    /// Order in which chunks are handed to workers.
    pub map_order: MapOrder,
}

impl DrivePlan {
    /// One worker, forward order.
    pub fn single(chunk_size_bytes: usize) -> Self {
        Self {
            chunk_size_bytes,
            worker_count: 1,
            map_order: MapOrder::Forward,
        }
    }
}

/// Splits `data` into chunks of `chunk_size_bytes` (an empty file has no chunks).
pub fn split_into_chunks<'a>(
    file: &'a str,
    data: &'a [u8],
    chunk_size_bytes: usize,
) -> Vec<Chunk<'a>> {
    assert!(chunk_size_bytes > 0, "chunk size must be positive");
    data.chunks(chunk_size_bytes)
        .enumerate()
        .map(|(index, bytes)| Chunk {
            file,
            offset_bytes: (index * chunk_size_bytes) as u64,
            data: bytes,
        })
        .collect()
}

/// Runs `kernel` over one file held in memory, writing the stream to `sink`.
pub fn run_on_bytes(
    kernel: &dyn Kernel,
    file_name: &str,
    data: &[u8],
    plan: DrivePlan,
    sink: &mut dyn OutputSink,
) -> Result<Summary, KernelError> {
    let file = FileInfo::new(file_name, data.len() as u64);
    let chunks = split_into_chunks(file_name, data, plan.chunk_size_bytes);
    match kernel.start_file(&file)? {
        FileJob::Sequential(mut job) => {
            for chunk in &chunks {
                job.process_chunk(chunk, sink)?;
            }
            job.finish(sink)
        }
        FileJob::Parallel {
            mapper,
            mut reducer,
        } => {
            let parts = map_all(mapper.as_ref(), &chunks, plan)?;
            for part in parts {
                reducer.reduce_part(part, sink)?;
            }
            reducer.finish(sink)
        }
    }
}

/// Maps every chunk with `plan.worker_count` threads and returns the parts in offset order.
fn map_all(
    mapper: &dyn ChunkMapper,
    chunks: &[Chunk<'_>],
    plan: DrivePlan,
) -> Result<Vec<ChunkPart>, KernelError> {
    let order: Vec<usize> = match plan.map_order {
        MapOrder::Forward => (0..chunks.len()).collect(),
        MapOrder::Reverse => (0..chunks.len()).rev().collect(),
    };
    let next_position = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<Result<ChunkPart, KernelError>>>> =
        chunks.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..plan.worker_count.max(1) {
            scope.spawn(|| loop {
                let position = next_position.fetch_add(1, Ordering::Relaxed);
                let Some(&chunk_index) = order.get(position) else {
                    break;
                };
                let result = mapper.map_chunk(&chunks[chunk_index]);
                *slots[chunk_index].lock().expect("slot lock poisoned") = Some(result);
            });
        }
    });
    slots
        .into_iter()
        .map(|slot| {
            slot.into_inner()
                .expect("slot lock poisoned")
                .expect("every chunk was mapped")
        })
        .collect()
}

/// Runs `kernel` over several in-memory files, one file per worker at a time (how sequential
/// kernels use many cores); returns each file's summary, or the first error.
pub fn run_files_in_parallel(
    kernel: &dyn Kernel,
    files: &[(String, Vec<u8>)],
    chunk_size_bytes: usize,
    worker_count: usize,
) -> Result<Vec<Summary>, KernelError> {
    let next_file = AtomicUsize::new(0);
    let results: Vec<Mutex<Option<Result<Summary, KernelError>>>> =
        files.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..worker_count.max(1) {
            scope.spawn(|| loop {
                let index = next_file.fetch_add(1, Ordering::Relaxed);
                let Some((name, data)) = files.get(index) else {
                    break;
                };
                let mut sink = crate::api::CountingSink::default();
                let result = run_on_bytes(
                    kernel,
                    name,
                    data,
                    DrivePlan::single(chunk_size_bytes),
                    &mut sink,
                );
                *results[index].lock().expect("result lock poisoned") = Some(result);
            });
        }
    });
    results
        .into_iter()
        .map(|slot| {
            slot.into_inner()
                .expect("result lock poisoned")
                .expect("every file ran")
        })
        .collect()
}
