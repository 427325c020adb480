//! The references of the large-file part: fio jobs (raw device files with `direct=1`,
//! or an ordinary file buffered) and plain `read()`/`write()`/`pread()` on an ordinary
//! file of the folder's file system, plus dropping the page cache.
//!
//! fio's JSON report is read by the `bench device` module's parser; only the job's
//! command line is built here, because these jobs need several files per job, other
//! I/O engines (`psync`) and whole passes instead of timed runs.

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use flashpipe_device::SplitMix64;
use serde::Serialize;

use super::page_cache::PageCacheDrop;
use super::{BenchFsError, MIB};
use crate::device::fio::{parse_report, run_fio_command, Fio};
use crate::pattern::{DataPattern, DataPatternReader};

/// Throughput of one measured phase.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Measured {
    /// Megabytes (10^6 bytes) per second.
    pub mb_per_s: f64,
    /// Requests per second.
    pub iops: f64,
    /// Mean time per request in microseconds (fio: measured; ours: elapsed time times
    /// requests in flight over requests, Little's law).
    pub latency_us_mean: f64,
    /// Requests completed.
    pub requests: u64,
    /// Seconds the phase took.
    pub seconds: f64,
}

impl Measured {
    /// A phase that moved `bytes` in `requests` requests with `queue_depth` in flight.
    pub fn transfer(bytes: u64, requests: u64, queue_depth: u32, elapsed: Duration) -> Measured {
        let seconds = elapsed.as_secs_f64().max(1e-9);
        Measured {
            mb_per_s: bytes as f64 / seconds / 1e6,
            iops: requests as f64 / seconds,
            latency_us_mean: seconds * 1e6 * f64::from(queue_depth) / requests.max(1) as f64,
            requests,
            seconds,
        }
    }
}

/// One fio job.
pub struct FioJob<'a> {
    /// The files (fio spreads `size_bytes` evenly over them).
    pub files: &'a [PathBuf],
    /// Bytes over all files.
    pub size_bytes: u64,
    /// fio's `rw`: read, write, randread.
    pub rw: &'a str,
    /// Bytes per request.
    pub request_bytes: u64,
    /// Requests in flight.
    pub queue_depth: u32,
    /// fio's `ioengine`.
    pub io_engine: &'a str,
    /// `direct=1` when true.
    pub direct_io: bool,
    /// Timed run, or one whole pass when `None`.
    pub runtime: Option<Duration>,
}

impl FioJob<'_> {
    /// A label such as `fio io_uring direct QD32`.
    pub fn describe(&self) -> String {
        let buffering = if self.direct_io { "direct" } else { "buffered" };
        format!("fio {} {buffering} QD{}", self.io_engine, self.queue_depth)
    }

    fn arguments(&self) -> Vec<String> {
        let file_names: Vec<String> = self
            .files
            .iter()
            .map(|path| path.display().to_string().replace(':', "\\:"))
            .collect();
        let mut arguments = vec![
            "--name=flashpipe-bench-fs".to_string(),
            format!("--filename={}", file_names.join(":")),
            format!("--size={}", self.size_bytes),
            format!("--bs={}", self.request_bytes),
            format!("--rw={}", self.rw),
            format!("--iodepth={}", self.queue_depth),
            format!("--ioengine={}", self.io_engine),
            format!("--direct={}", u8::from(self.direct_io)),
            "--norandommap".to_string(),
            "--randrepeat=0".to_string(),
            "--lat_percentiles=1".to_string(),
            "--allow_file_create=0".to_string(),
            "--output-format=json".to_string(),
        ];
        match self.runtime {
            Some(runtime) => arguments.extend([
                "--time_based".to_string(),
                format!("--runtime={}ms", runtime.as_millis().max(1)),
            ]),
            None if self.rw == "write" => arguments.push("--end_fsync=1".to_string()),
            None => {}
        }
        arguments
    }

    /// Runs the job and returns its figures.
    pub fn run(&self, _fio: &Fio) -> Result<Measured, String> {
        let report = run_fio_command(&self.arguments())?;
        let figures = parse_report(&report, self.rw != "write")?;
        Ok(Measured {
            mb_per_s: figures.mb_per_s,
            iops: figures.iops,
            latency_us_mean: figures.latency_us_mean,
            requests: figures.requests,
            seconds: figures.requests as f64 / figures.iops.max(1e-9),
        })
    }
}

/// Drops the page cache (`sync; echo 3 > /proc/sys/vm/drop_caches`) when asked; says
/// what happened, for the report.
pub fn drop_page_cache(wanted: bool) -> String {
    match super::page_cache::drop_page_cache_if(wanted) {
        PageCacheDrop::Dropped => "dropped before each buffered read".to_string(),
        PageCacheDrop::NotAsked => "not dropped (--quick)".to_string(),
        PageCacheDrop::Refused(reason) => {
            format!("could not drop it ({reason}): buffered reads may hit the cache")
        }
    }
}

/// Writes the pattern into a new ordinary file with `write()` of 1 MiB, then `fsync`.
pub fn write_ordinary_file(
    path: &Path,
    pattern: &DataPattern,
    size_bytes: u64,
) -> Result<Measured, BenchFsError> {
    let started = Instant::now();
    let mut file =
        File::create(path).map_err(BenchFsError::io(format!("creating {}", path.display())))?;
    let mut source = DataPatternReader::new(pattern, size_bytes);
    let mut chunk = vec![0u8; MIB as usize];
    let mut written_bytes = 0;
    while written_bytes < size_bytes {
        let length = source
            .read(&mut chunk)
            .map_err(BenchFsError::io("pattern"))?;
        file.write_all(&chunk[..length])
            .map_err(BenchFsError::io(format!("writing {}", path.display())))?;
        written_bytes += length as u64;
    }
    file.sync_all()
        .map_err(BenchFsError::io(format!("fsync of {}", path.display())))?;
    Ok(Measured::transfer(
        size_bytes,
        size_bytes.div_ceil(MIB),
        1,
        started.elapsed(),
    ))
}

/// Reads an ordinary file sequentially with `read()` of 1 MiB, checking the pattern.
pub fn read_ordinary_file(path: &Path, pattern: &DataPattern) -> Result<Measured, BenchFsError> {
    let started = Instant::now();
    let mut file =
        File::open(path).map_err(BenchFsError::io(format!("opening {}", path.display())))?;
    let mut chunk = vec![0u8; MIB as usize];
    let mut offset_bytes = 0u64;
    let mut requests = 0u64;
    loop {
        let length = read_full(&mut file, &mut chunk)
            .map_err(BenchFsError::io(format!("reading {}", path.display())))?;
        if length == 0 {
            break;
        }
        pattern.check(offset_bytes, &chunk[..length])?;
        offset_bytes += length as u64;
        requests += 1;
    }
    Ok(Measured::transfer(
        offset_bytes,
        requests,
        1,
        started.elapsed(),
    ))
}

fn read_full(file: &mut File, buffer: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buffer.len() {
        match file.read(&mut buffer[filled..])? {
            0 => break,
            count => filled += count,
        }
    }
    Ok(filled)
}

/// Reads 4 KiB at random aligned offsets with `pread()` (QD1) for `runtime`.
pub fn random_reads_ordinary_file(
    path: &Path,
    pattern: &DataPattern,
    size_bytes: u64,
    runtime: Duration,
) -> Result<Measured, BenchFsError> {
    let file = File::open(path).map_err(BenchFsError::io(format!("opening {}", path.display())))?;
    let mut generator = SplitMix64::new(7);
    let mut buffer = vec![0u8; 4096];
    let block_count = size_bytes / 4096;
    let started = Instant::now();
    let mut requests = 0u64;
    while started.elapsed() < runtime {
        let offset_bytes = generator.below(block_count) * 4096;
        file.read_exact_at(&mut buffer, offset_bytes)
            .map_err(BenchFsError::io(format!("pread of {}", path.display())))?;
        pattern.check(offset_bytes, &buffer)?;
        requests += 1;
    }
    Ok(Measured::transfer(
        requests * 4096,
        requests,
        1,
        started.elapsed(),
    ))
}
