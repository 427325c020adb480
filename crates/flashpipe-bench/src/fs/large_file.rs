//! Part 1: one large file through the engine, beside fio on the same device files and
//! beside an ordinary file of the folder's file system.
//!
//! Order: (1) a store of two device files is formatted, the engine's read pool registered
//! with the device files' rings (reads on io_uring fixed buffers), and the file written (1 MiB
//! commands, 32 in flight, then a flush), read sequentially (1 MiB, 32 in flight) and
//! at random (4 KiB, 1 and 32 reads outstanding, timed); (2) fio runs on the same two
//! device files, raw (`io_uring`, `direct=1`), same total size, same request sizes and
//! depths (this overwrites the store, which is done with); (3) the same bytes are
//! written to an ordinary file and read buffered by `read()`/`pread()` and by fio, the
//! page cache dropped before each read.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use flashpipe_device::SplitMix64;
use flashpipe_engine::{Command, EngineClient, Reply};
use serde::Serialize;

use super::reference::{self, FioJob, Measured};
use super::store::{self, StoreShape};
use super::{BenchFsError, Settings, MIB};
use crate::device::fio::Fio;
use crate::pattern::{DataPattern, DataPatternReader};

/// Name of the large file in the store.
const LARGE_FILE_NAME: &str = "large-file";
/// Device files of the store.
const DEVICE_COUNT: u32 = 2;
/// Stripe unit of the store.
pub(crate) const STRIPE_UNIT_BYTES: u64 = 256 * 1024;
/// Bytes per sequential command.
const SEQUENTIAL_REQUEST_BYTES: u64 = MIB;
/// Sequential commands in flight.
const SEQUENTIAL_QUEUE_DEPTH: u32 = 32;
/// Bytes per random read.
const RANDOM_REQUEST_BYTES: u64 = 4096;

/// One workload across every system.
#[derive(Debug, Clone, Serialize)]
pub struct LargeFileRow {
    /// e.g. `seq-read 1MiB QD32`.
    pub workload: String,
    /// Through the engine and the file system.
    pub flashpipe: Measured,
    /// fio, `io_uring`, `direct=1`, on the store's device files.
    pub fio_raw_direct: Option<Measured>,
    /// `read()`/`write()`/`pread()` on the ordinary file, buffered.
    pub ordinary_file_syscalls: Option<Measured>,
    /// fio on the ordinary file, buffered.
    pub ordinary_file_fio: Option<Measured>,
    /// The fio job used on the ordinary file.
    pub ordinary_file_fio_job: Option<String>,
    /// flashpipe over fio raw (throughput; equal to the IOPS ratio).
    pub throughput_ratio_to_fio_raw: Option<f64>,
    /// flashpipe over the ordinary file's system calls.
    pub throughput_ratio_to_ordinary_file_syscalls: Option<f64>,
    /// flashpipe over fio on the ordinary file.
    pub throughput_ratio_to_ordinary_file_fio: Option<f64>,
    /// flashpipe's mean time per request over fio raw's (fio: its measured `lat` mean;
    /// flashpipe: elapsed time x requests in flight / requests).
    pub mean_latency_ratio_to_fio_raw: Option<f64>,
}

/// Everything part 1 measured.
#[derive(Debug, Clone, Serialize)]
pub struct LargeFileResult {
    /// Size of the file.
    pub size_bytes: u64,
    /// FS block size of the store.
    pub fs_block_size_bytes: u32,
    /// The store's device files.
    pub device_files: Vec<String>,
    /// Stripe unit of the store.
    pub stripe_unit_bytes: u64,
    /// The ordinary file.
    pub ordinary_file: String,
    /// What happened to the page cache.
    pub page_cache: String,
    /// Remarks (engine fallbacks, fio problems).
    pub notes: Vec<String>,
    /// One row per workload.
    pub rows: Vec<LargeFileRow>,
}

impl LargeFileResult {
    /// The row whose workload label starts with `prefix`.
    pub fn row(&self, prefix: &str) -> Option<&LargeFileRow> {
        self.rows
            .iter()
            .find(|row| row.workload.starts_with(prefix))
    }
}

/// Labels of the four workloads, in order.
pub const WORKLOADS: [&str; 4] = [
    "seq-write 1MiB QD32",
    "seq-read 1MiB QD32",
    "rand-read 4KiB QD1",
    "rand-read 4KiB QD32",
];

/// Runs part 1 in `folder`.
pub fn run(
    settings: &Settings,
    folder: &Path,
    fio: Option<&Fio>,
) -> Result<LargeFileResult, BenchFsError> {
    let size_bytes = settings.large_file_bytes;
    let pattern = DataPattern::new();
    let device_bytes = store::device_bytes_each(size_bytes, DEVICE_COUNT, 0);
    let shape = StoreShape::files(
        folder,
        "large",
        DEVICE_COUNT,
        device_bytes,
        STRIPE_UNIT_BYTES,
        settings.fs_block_size_bytes,
    );
    let fresh = shape.format(folder)?;
    let mut notes = fresh.notes.clone();
    let device_files = fresh.device_files.clone();
    let engine = store::start_engine(fresh.filesystem);
    if let Err(error) = engine.register_read_pool() {
        notes.push(format!(
            "reads on plain buffers: the kernel refused to register the engine's read pool \
             ({error}); raise the locked-memory limit (ulimit -l) to measure with it"
        ));
    }
    let flashpipe = measure_engine(&mut engine.client(64), settings, &pattern)?;
    drop(engine.shutdown()?);
    let fio_raw = run_fio_raw(settings, &device_files, fio, &mut notes);
    let ordinary_path = folder.join("ordinary-file.dat");
    let ordinary = measure_ordinary_file(settings, &ordinary_path, &pattern, fio, &mut notes)?;
    let _ = std::fs::remove_file(&ordinary_path);
    let rows = WORKLOADS
        .iter()
        .enumerate()
        .map(|(index, label)| row(label, flashpipe[index], fio_raw[index], &ordinary))
        .collect();
    Ok(LargeFileResult {
        size_bytes,
        fs_block_size_bytes: settings.fs_block_size_bytes,
        device_files: device_files
            .iter()
            .map(|path| path.display().to_string())
            .collect(),
        stripe_unit_bytes: STRIPE_UNIT_BYTES,
        ordinary_file: ordinary_path.display().to_string(),
        page_cache: ordinary.page_cache,
        notes,
        rows,
    })
}

fn ratio(ours: &Measured, reference: Option<Measured>) -> Option<f64> {
    reference
        .filter(|reference| reference.mb_per_s > 0.0)
        .map(|reference| ours.mb_per_s / reference.mb_per_s)
}

fn latency_ratio(ours: &Measured, reference: Option<Measured>) -> Option<f64> {
    reference
        .filter(|reference| reference.latency_us_mean > 0.0)
        .map(|reference| ours.latency_us_mean / reference.latency_us_mean)
}

fn row(
    label: &str,
    flashpipe: Measured,
    fio_raw: Option<Measured>,
    ordinary: &OrdinaryFigures,
) -> LargeFileRow {
    let index = WORKLOADS
        .iter()
        .position(|known| *known == label)
        .expect("known workload");
    let (syscalls, fio, fio_job) = (
        ordinary.syscalls[index],
        ordinary.fio[index],
        ordinary.fio_jobs[index].clone(),
    );
    LargeFileRow {
        workload: label.to_string(),
        flashpipe,
        fio_raw_direct: fio_raw,
        ordinary_file_syscalls: syscalls,
        ordinary_file_fio: fio,
        ordinary_file_fio_job: fio_job,
        throughput_ratio_to_fio_raw: ratio(&flashpipe, fio_raw),
        throughput_ratio_to_ordinary_file_syscalls: ratio(&flashpipe, syscalls),
        throughput_ratio_to_ordinary_file_fio: ratio(&flashpipe, fio),
        mean_latency_ratio_to_fio_raw: latency_ratio(&flashpipe, fio_raw),
    }
}

/// The four engine workloads, in [`WORKLOADS`] order.
pub(crate) fn measure_engine(
    client: &mut EngineClient,
    settings: &Settings,
    pattern: &DataPattern,
) -> Result<[Measured; 4], BenchFsError> {
    let size_bytes = settings.large_file_bytes;
    let write = engine_sequential_write(client, pattern, size_bytes)?;
    let read = engine_sequential_read(client, pattern, size_bytes)?;
    let random_qd1 = engine_random_reads(client, pattern, size_bytes, 1, settings.random_runtime)?;
    let random_qd32 =
        engine_random_reads(client, pattern, size_bytes, 32, settings.random_runtime)?;
    Ok([write, read, random_qd1, random_qd32])
}

/// Create, write the whole file (1 MiB commands, 32 outstanding), flush.
fn engine_sequential_write(
    client: &mut EngineClient,
    pattern: &DataPattern,
    size_bytes: u64,
) -> Result<Measured, BenchFsError> {
    let started = Instant::now();
    let mut source = DataPatternReader::new(pattern, size_bytes);
    let written = client.write_stream(
        LARGE_FILE_NAME,
        &mut source,
        SEQUENTIAL_REQUEST_BYTES as usize,
        SEQUENTIAL_QUEUE_DEPTH as usize,
        &mut |_| {},
    )?;
    client.call(Command::Flush)?;
    assert_eq!(written, size_bytes, "the whole file was written");
    Ok(Measured::transfer(
        size_bytes,
        size_bytes.div_ceil(SEQUENTIAL_REQUEST_BYTES),
        SEQUENTIAL_QUEUE_DEPTH,
        started.elapsed(),
    ))
}

/// Reads the whole file in order (1 MiB commands, 32 outstanding), checking it.
fn engine_sequential_read(
    client: &mut EngineClient,
    pattern: &DataPattern,
    size_bytes: u64,
) -> Result<Measured, BenchFsError> {
    let started = Instant::now();
    let mut offset_bytes = 0u64;
    let mut mismatch = None;
    let mut sink = |bytes: &[u8]| {
        if mismatch.is_none() {
            mismatch = pattern.check(offset_bytes, bytes).err();
        }
        offset_bytes += bytes.len() as u64;
        Ok(())
    };
    let read = client.read_stream(
        LARGE_FILE_NAME,
        &mut sink,
        SEQUENTIAL_REQUEST_BYTES,
        SEQUENTIAL_QUEUE_DEPTH as usize,
        &mut |_| {},
    )?;
    let elapsed = started.elapsed();
    if let Some(error) = mismatch {
        return Err(error.into());
    }
    assert_eq!(read, size_bytes, "the whole file was read");
    Ok(Measured::transfer(
        size_bytes,
        size_bytes.div_ceil(SEQUENTIAL_REQUEST_BYTES),
        SEQUENTIAL_QUEUE_DEPTH,
        elapsed,
    ))
}

/// 4 KiB reads at random aligned offsets, `queue_depth` kept outstanding, for `runtime`.
fn engine_random_reads(
    client: &mut EngineClient,
    pattern: &DataPattern,
    size_bytes: u64,
    queue_depth: u32,
    runtime: Duration,
) -> Result<Measured, BenchFsError> {
    let mut generator = SplitMix64::new(u64::from(queue_depth));
    let block_count = size_bytes / RANDOM_REQUEST_BYTES;
    let mut offsets_by_ticket = std::collections::HashMap::new();
    let started = Instant::now();
    let mut completed = 0u64;
    loop {
        while client.outstanding() < queue_depth as usize && started.elapsed() < runtime {
            let offset_bytes = generator.below(block_count) * RANDOM_REQUEST_BYTES;
            let ticket = client.submit(Command::Read {
                name: LARGE_FILE_NAME.to_string(),
                offset_bytes,
                length_bytes: RANDOM_REQUEST_BYTES,
            })?;
            offsets_by_ticket.insert(ticket, offset_bytes);
        }
        if client.outstanding() == 0 {
            break;
        }
        let (ticket, result) = client.next_completion()?;
        let offset_bytes = offsets_by_ticket
            .remove(&ticket)
            .expect("a read submitted here");
        match result? {
            Reply::Data(data) => pattern.check(offset_bytes, data.bytes())?,
            other => unreachable!("a read completed with {other:?}"),
        }
        completed += 1;
    }
    Ok(Measured::transfer(
        completed * RANDOM_REQUEST_BYTES,
        completed,
        queue_depth,
        started.elapsed(),
    ))
}

/// fio on the raw device files, in [`WORKLOADS`] order (`None` where fio is missing or
/// failed, with a note).
fn run_fio_raw(
    settings: &Settings,
    device_files: &[PathBuf],
    fio: Option<&Fio>,
    notes: &mut Vec<String>,
) -> [Option<Measured>; 4] {
    let Some(fio) = fio else {
        return [None; 4];
    };
    let job = |rw, request_bytes, queue_depth, runtime| FioJob {
        files: device_files,
        size_bytes: settings.large_file_bytes,
        rw,
        request_bytes,
        queue_depth,
        io_engine: "io_uring",
        direct_io: true,
        runtime,
    };
    let runtime = Some(settings.random_runtime);
    let jobs = [
        job(
            "write",
            SEQUENTIAL_REQUEST_BYTES,
            SEQUENTIAL_QUEUE_DEPTH,
            None,
        ),
        job(
            "read",
            SEQUENTIAL_REQUEST_BYTES,
            SEQUENTIAL_QUEUE_DEPTH,
            None,
        ),
        job("randread", RANDOM_REQUEST_BYTES, 1, runtime),
        job("randread", RANDOM_REQUEST_BYTES, 32, runtime),
    ];
    jobs.map(|job| run_noted(fio, &job, notes))
}

fn run_noted(fio: &Fio, job: &FioJob<'_>, notes: &mut Vec<String>) -> Option<Measured> {
    match job.run(fio) {
        Ok(measured) => Some(measured),
        Err(error) => {
            notes.push(error);
            None
        }
    }
}

/// The ordinary file's figures, in [`WORKLOADS`] order.
struct OrdinaryFigures {
    syscalls: [Option<Measured>; 4],
    fio: [Option<Measured>; 4],
    fio_jobs: [Option<String>; 4],
    page_cache: String,
}

fn measure_ordinary_file(
    settings: &Settings,
    path: &Path,
    pattern: &DataPattern,
    fio: Option<&Fio>,
    notes: &mut Vec<String>,
) -> Result<OrdinaryFigures, BenchFsError> {
    let size_bytes = settings.large_file_bytes;
    let runtime = settings.random_runtime;
    let write = reference::write_ordinary_file(path, pattern, size_bytes)?;
    let page_cache = reference::drop_page_cache(settings.drop_page_cache);
    let read = reference::read_ordinary_file(path, pattern)?;
    reference::drop_page_cache(settings.drop_page_cache);
    let random = reference::random_reads_ordinary_file(path, pattern, size_bytes, runtime)?;
    let files = [path.to_path_buf()];
    let job = |rw, request_bytes, queue_depth, io_engine, runtime| FioJob {
        files: &files,
        size_bytes,
        rw,
        request_bytes,
        queue_depth,
        io_engine,
        direct_io: false,
        runtime,
    };
    let random_job = |queue_depth, io_engine| {
        Some(job(
            "randread",
            RANDOM_REQUEST_BYTES,
            queue_depth,
            io_engine,
            Some(runtime),
        ))
    };
    let jobs = [
        None,
        Some(job("read", SEQUENTIAL_REQUEST_BYTES, 1, "psync", None)),
        random_job(1, "psync"),
        random_job(32, "io_uring"),
    ];
    let fio_jobs = jobs
        .each_ref()
        .map(|job| job.as_ref().map(FioJob::describe));
    let fio_figures = jobs.map(|job| {
        let (job, fio) = (job?, fio?);
        reference::drop_page_cache(settings.drop_page_cache);
        run_noted(fio, &job, notes)
    });
    Ok(OrdinaryFigures {
        syscalls: [Some(write), Some(read), Some(random), None],
        fio: fio_figures,
        fio_jobs,
        page_cache,
    })
}
