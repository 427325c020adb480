//! Part 2: the thesis's file-system efficiency (HWFS ch. 4.2.1.1, Fig. 4.3-4.5, Tables
//! 4.1-4.3) measured on one and two RAM disks.
//!
//! The thesis defines efficiency as "raw block transfer time" over "filesystem block
//! transfer time". Here, for each file:
//! - **total write time** = `Create` + the file's bytes in `Write` commands of at most
//!   1 MiB (32 outstanding, buffers filled before the clock starts) + `Flush`, all
//!   through the engine, from the first submit to the flush's completion;
//! - **total read time** = the whole file in `Read` commands of at most 1 MiB (32
//!   outstanding) through the engine (a by-name read: lookup, block map, device reads);
//!   an untimed read first brings the engine's read buffers into memory;
//! - **raw read time** = the very device blocks holding the file's data (the FS's block
//!   map after the engine stopped), read straight from the device layer with
//!   `run_batch`, requests of at most 1 MiB (`MAX_REQUEST_BYTES`), in waves of 32
//!   requests into 32 recycled buffers (as the engine: 32 reads in flight, pool buffers
//!   reused), after one untimed pass (as the engine read, so both find the data equally
//!   warm in the CPU caches);
//! - **raw write time** = each wave written back right after it was read (the bytes just
//!   read, so the file is unchanged), then one device flush.
//!
//! The same files are also measured with the file system called directly on the
//! calling thread (no engine, no thread hand-off: `create`, `write` of <= 1 MiB,
//! `flush`; `read_into` of <= 1 MiB), which separates the file system's own overhead
//! from the engine's queues.
//!
//! Each file is measured alone, several files per size (3 to 30, one in `--quick`);
//! the report gives the shortest time of each kind over them (the machine's other load
//! only ever adds time), and efficiency = shortest raw / shortest total. RAM disks are
//! written over once before mkfs so no measurement pays for first-touch page faults.
//! Two RAM disks are striped with a stripe unit of one FS block (blocks alternate).
//!
//! Beside flashpipe, the same sizes on tmpfs and on ext4 over a RAM-backed loop device
//! ([`super::anchors`], issue #13): per file size, flashpipe's time per file (one RAM
//! disk, 4 KiB FS blocks, through the engine) over theirs, write + flush and read.
//!
//! Beside the RAM disks, the same measurement on the file device and on paced emulated
//! flash, with one commit per file and with commits batched ([`super::devices`], chosen
//! with `--efficiency-devices`).

use std::path::Path;
use std::time::{Duration, Instant};

use flashpipe_device::{run_batch, BlockDevice, IoBuf, Operation};
use flashpipe_engine::{Command, EngineClient, Reply};
use flashpipe_fs::{Filesystem, FsCore, MAX_REQUEST_BYTES};
use serde::Serialize;

use super::anchors::{self, AnchorResult};
use super::store::{self, StoreShape};
use super::{BenchFsError, Settings, MIB};
use crate::pattern::DataPattern;

/// File sizes measured (the thesis's 1 KB..100 MB, here in binary units).
pub const FILE_SIZES_BYTES: [u64; 6] = [1 << 10, 10 << 10, 100 << 10, MIB, 10 * MIB, 100 * MIB];
/// File sizes of `--quick` runs.
const QUICK_FILE_SIZE_COUNT: usize = 4;
/// FS block sizes measured.
pub const FS_BLOCK_SIZES_BYTES: [u32; 3] = [4096, 8192, 16384];
/// RAM disk counts measured.
pub const DISK_COUNTS: [u32; 2] = [1, 2];
/// Bytes per engine command.
const COMMAND_BYTES: u64 = MIB;
/// Commands outstanding.
pub(super) const COMMANDS_IN_FLIGHT: usize = 32;
/// RAM over all disks of one store.
const RAM_BYTES_TOTAL: u64 = 1024 * MIB;
/// RAM over all disks in `--quick` runs.
const QUICK_RAM_BYTES_TOTAL: u64 = 32 * MIB;
/// RAM disks of the store compared with the anchors (the table).
pub const ANCHOR_DISK_COUNT: u32 = 1;
/// FS block size of the store compared with the anchors.
pub const ANCHOR_FS_BLOCK_SIZE_BYTES: u32 = 4096;

/// One (disks, block size, file size) point.
#[derive(Debug, Clone, Serialize)]
pub struct EfficiencyPoint {
    /// RAM disks.
    pub disk_count: u32,
    /// FS block size.
    pub fs_block_size_bytes: u32,
    /// File size.
    pub file_size_bytes: u64,
    /// Files measured (times below are per file, the shortest over them).
    pub repetitions: u32,
    /// Create + write + flush through the engine, per file.
    pub write_total_us: f64,
    /// The same blocks written straight to the device (+ flush), per file.
    pub write_raw_us: f64,
    /// write_raw / write_total.
    pub write_efficiency_ratio: f64,
    /// Read through the engine, per file.
    pub read_total_us: f64,
    /// The same blocks read straight from the device, per file.
    pub read_raw_us: f64,
    /// read_raw / read_total.
    pub read_efficiency_ratio: f64,
    /// Create + write + flush calling the file system directly, per file.
    pub write_direct_total_us: f64,
    /// The raw write time of those files, per file.
    pub write_direct_raw_us: f64,
    /// write_direct_raw / write_direct_total.
    pub write_direct_efficiency_ratio: f64,
    /// Reading the file calling the file system directly, per file.
    pub read_direct_total_us: f64,
    /// The raw read time of those files, per file.
    pub read_direct_raw_us: f64,
    /// read_direct_raw / read_direct_total.
    pub read_direct_efficiency_ratio: f64,
    /// Device requests of the raw transfer, per file.
    pub raw_requests: u64,
    /// The thesis's read time for this file size and disk count with its largest
    /// block (1024 B), in microseconds (Table 4.1 / 4.3).
    pub thesis_read_us_1024_byte_blocks: Option<f64>,
    /// The same for writes.
    pub thesis_write_us_1024_byte_blocks: Option<f64>,
}

/// One file size: flashpipe's time per file beside tmpfs's and ext4-RAM's.
#[derive(Debug, Clone, Serialize)]
pub struct PerFileComparison {
    /// File size.
    pub file_size_bytes: u64,
    /// Create + write + flush through the engine, per file (the anchor store shape).
    pub flashpipe_write_us: f64,
    /// Read through the engine, per file.
    pub flashpipe_read_us: f64,
    /// Create + write + flush calling the file system directly, per file.
    pub flashpipe_direct_write_us: f64,
    /// Read calling the file system directly, per file.
    pub flashpipe_direct_read_us: f64,
    /// The raw transfer of the same blocks (the efficiency's numerator), write.
    pub raw_write_us: f64,
    /// The same, read.
    pub raw_read_us: f64,
    /// open + write + fsync + close on tmpfs.
    pub tmpfs_write_us: Option<f64>,
    /// open + read + close on tmpfs.
    pub tmpfs_read_us: Option<f64>,
    /// open + write + fsync + close on ext4 over a RAM-backed loop device.
    pub ext4_ram_write_us: Option<f64>,
    /// open + read + close on ext4 over a RAM-backed loop device.
    pub ext4_ram_read_us: Option<f64>,
    /// flashpipe write time / tmpfs write time (target <= 1.0, goal <= 0.5).
    pub write_time_ratio_to_tmpfs: Option<f64>,
    /// flashpipe read time / tmpfs read time (target <= 1.0, goal <= 0.5).
    pub read_time_ratio_to_tmpfs: Option<f64>,
    /// flashpipe write time / ext4-RAM write time.
    pub write_time_ratio_to_ext4_ram: Option<f64>,
    /// flashpipe read time / ext4-RAM read time.
    pub read_time_ratio_to_ext4_ram: Option<f64>,
}

/// Everything part 2 measured, with the thesis's figures.
#[derive(Debug, Clone, Serialize)]
pub struct EfficiencyResult {
    /// How the times are measured.
    pub method: String,
    /// One point per disk count, block size and file size.
    pub points: Vec<EfficiencyPoint>,
    /// RAM disks of the store compared with the anchors.
    pub anchor_disk_count: u32,
    /// FS block size of the store compared with the anchors.
    pub anchor_fs_block_size_bytes: u32,
    /// tmpfs and ext4-RAM, the same file sizes.
    pub anchors: AnchorResult,
    /// Per file size, flashpipe beside the anchors.
    pub per_file: Vec<PerFileComparison>,
    /// Per file size, one memcpy plus one CRC32C pass of its bytes on one core.
    pub floors: Vec<super::floor::CopyFloor>,
    /// How the device rows are measured.
    pub devices_method: String,
    /// The same efficiency on the file device and on paced flash, one commit per file
    /// and commits batched (empty when `--efficiency-devices none`).
    pub devices: Vec<super::devices::DeviceEfficiency>,
    /// The thesis's tables and statements.
    pub thesis: super::report::ThesisEfficiency,
}

/// Runs part 2; the anchors mount (when they can) under `folder`.
pub fn run(settings: &Settings, folder: &Path) -> Result<EfficiencyResult, BenchFsError> {
    let sizes = match settings.quick {
        true => &FILE_SIZES_BYTES[..QUICK_FILE_SIZE_COUNT],
        false => &FILE_SIZES_BYTES[..],
    };
    let pattern = DataPattern::new();
    let mut points = Vec::new();
    for disk_count in DISK_COUNTS {
        for fs_block_size_bytes in FS_BLOCK_SIZES_BYTES {
            let store = Combination {
                disk_count,
                fs_block_size_bytes,
                quick: settings.quick,
            };
            points.extend(store.measure(sizes, &pattern)?);
        }
    }
    let anchor_sizes: Vec<(u64, u32)> = sizes
        .iter()
        .map(|&size| (size, repetitions(settings.quick, size)))
        .collect();
    let anchors = anchors::run(&anchor_sizes, folder);
    let per_file = sizes
        .iter()
        .filter_map(|&size| per_file_comparison(&points, &anchors, size))
        .collect();
    Ok(EfficiencyResult {
        method: METHOD.to_string(),
        points,
        anchor_disk_count: ANCHOR_DISK_COUNT,
        anchor_fs_block_size_bytes: ANCHOR_FS_BLOCK_SIZE_BYTES,
        anchors,
        per_file,
        floors: super::floor::measure(sizes),
        devices_method: super::devices::METHOD.to_string(),
        devices: super::devices::run(&settings.efficiency_devices, settings.quick, folder)?,
        thesis: super::report::ThesisEfficiency::new(),
    })
}

/// Files measured per size (each alone): 3 to 30, one in `--quick` runs.
fn repetitions(quick: bool, file_size_bytes: u64) -> u32 {
    match quick {
        true => 1,
        false => (32 * MIB / file_size_bytes).clamp(3, 30) as u32,
    }
}

/// flashpipe's point of the anchor store shape for `size` beside the anchors.
fn per_file_comparison(
    points: &[EfficiencyPoint],
    anchors: &AnchorResult,
    size: u64,
) -> Option<PerFileComparison> {
    let ours = points.iter().find(|point| {
        point.disk_count == ANCHOR_DISK_COUNT
            && point.fs_block_size_bytes == ANCHOR_FS_BLOCK_SIZE_BYTES
            && point.file_size_bytes == size
    })?;
    let tmpfs = anchors.tmpfs.point(size);
    let ext4_ram = anchors.ext4_ram.point(size);
    let time_ratio = |ours_us: f64, theirs_us: Option<f64>| {
        theirs_us
            .filter(|theirs_us| *theirs_us > 0.0)
            .map(|theirs_us| ours_us / theirs_us)
    };
    let tmpfs_write_us = tmpfs.map(|point| point.write_us);
    let tmpfs_read_us = tmpfs.map(|point| point.read_us);
    let ext4_ram_write_us = ext4_ram.map(|point| point.write_us);
    let ext4_ram_read_us = ext4_ram.map(|point| point.read_us);
    Some(PerFileComparison {
        file_size_bytes: size,
        flashpipe_write_us: ours.write_total_us,
        flashpipe_read_us: ours.read_total_us,
        flashpipe_direct_write_us: ours.write_direct_total_us,
        flashpipe_direct_read_us: ours.read_direct_total_us,
        raw_write_us: ours.write_raw_us,
        raw_read_us: ours.read_raw_us,
        tmpfs_write_us,
        tmpfs_read_us,
        ext4_ram_write_us,
        ext4_ram_read_us,
        write_time_ratio_to_tmpfs: time_ratio(ours.write_total_us, tmpfs_write_us),
        read_time_ratio_to_tmpfs: time_ratio(ours.read_total_us, tmpfs_read_us),
        write_time_ratio_to_ext4_ram: time_ratio(ours.write_total_us, ext4_ram_write_us),
        read_time_ratio_to_ext4_ram: time_ratio(ours.read_total_us, ext4_ram_read_us),
    })
}

/// The definition printed with the results.
const METHOD: &str = "total write = Create + Write commands (<= 1 MiB, 32 outstanding) + Flush \
through the engine; total read = Read commands (<= 1 MiB, 32 outstanding) through the engine; \
raw read/write = the file's data blocks (from the FS block map) read / written back straight \
to the device layer with run_batch, requests <= 1 MiB in waves of 32 into recycled buffers, \
write + one device flush; \
efficiency = raw / total, each the shortest over the files of a size";

/// One store shape.
struct Combination {
    disk_count: u32,
    fs_block_size_bytes: u32,
    quick: bool,
}

/// Timings of one file.
#[derive(Default, Clone, Copy)]
pub(super) struct FileTimes {
    pub(super) write_total: Duration,
    pub(super) read_total: Duration,
    /// The raw write, its device flush included.
    pub(super) write_raw: Duration,
    pub(super) read_raw: Duration,
    /// The raw write's device flush alone.
    pub(super) raw_flush: Duration,
    pub(super) raw_requests: u64,
}

impl Combination {
    fn repetitions(&self, file_size_bytes: u64) -> u32 {
        repetitions(self.quick, file_size_bytes)
    }

    fn measure(
        &self,
        sizes: &[u64],
        pattern: &DataPattern,
    ) -> Result<Vec<EfficiencyPoint>, BenchFsError> {
        let ram_total = if self.quick {
            QUICK_RAM_BYTES_TOTAL
        } else {
            RAM_BYTES_TOTAL
        };
        let shape = StoreShape::ram(
            self.disk_count,
            ram_total / u64::from(self.disk_count),
            u64::from(self.fs_block_size_bytes),
            self.fs_block_size_bytes,
        );
        let fresh = shape.format(Path::new("."))?;
        let engine = store::start_engine(fresh.filesystem);
        let mut client = engine.client(64);
        let mut engine_files: Vec<(String, u64, FileTimes)> = Vec::new();
        for &size in sizes {
            for repetition in 0..self.repetitions(size) {
                let name = format!("engine-{size}-{repetition}");
                let times = measure_through_engine(&mut client, &name, size, pattern)?;
                engine_files.push((name, size, times));
            }
        }
        drop(client);
        let mut filesystem = engine.shutdown()?;
        let mut direct_files: Vec<(String, u64, FileTimes)> = Vec::new();
        for &size in sizes {
            for repetition in 0..self.repetitions(size) {
                let name = format!("direct-{size}-{repetition}");
                let buffers = file_buffers(size, pattern);
                let times = measure_direct(&mut filesystem, &name, buffers, pattern)?;
                direct_files.push((name, size, times));
            }
        }
        let (core, mut device) = filesystem.into_parts();
        for (name, size, times) in engine_files.iter_mut().chain(&mut direct_files) {
            measure_raw(&core, &mut *device, name, *size, times)?;
        }
        Ok(sizes
            .iter()
            .map(|&size| {
                let (engine, count) = fastest_for_size(&engine_files, size);
                let (direct, _) = fastest_for_size(&direct_files, size);
                self.point(size, &engine, &direct, count)
            })
            .collect())
    }

    fn point(
        &self,
        size: u64,
        engine: &FileTimes,
        direct: &FileTimes,
        count: u32,
    ) -> EfficiencyPoint {
        let per_file_us = |duration: Duration| duration.as_secs_f64() * 1e6;
        let ratio = |raw: Duration, total: Duration| raw.as_secs_f64() / total.as_secs_f64();
        let (thesis_read, thesis_write) =
            super::report::ThesisEfficiency::time_us_1024_byte_blocks(self.disk_count, size);
        EfficiencyPoint {
            disk_count: self.disk_count,
            fs_block_size_bytes: self.fs_block_size_bytes,
            file_size_bytes: size,
            repetitions: count,
            write_total_us: per_file_us(engine.write_total),
            write_raw_us: per_file_us(engine.write_raw),
            write_efficiency_ratio: ratio(engine.write_raw, engine.write_total),
            read_total_us: per_file_us(engine.read_total),
            read_raw_us: per_file_us(engine.read_raw),
            read_efficiency_ratio: ratio(engine.read_raw, engine.read_total),
            write_direct_total_us: per_file_us(direct.write_total),
            write_direct_raw_us: per_file_us(direct.write_raw),
            write_direct_efficiency_ratio: ratio(direct.write_raw, direct.write_total),
            read_direct_total_us: per_file_us(direct.read_total),
            read_direct_raw_us: per_file_us(direct.read_raw),
            read_direct_efficiency_ratio: ratio(direct.read_raw, direct.read_total),
            raw_requests: engine.raw_requests,
            thesis_read_us_1024_byte_blocks: thesis_read,
            thesis_write_us_1024_byte_blocks: thesis_write,
        }
    }
}

/// The shortest of each time over the files of `size` (each measured alone), and the
/// file count.
fn fastest_for_size(files: &[(String, u64, FileTimes)], size: u64) -> (FileTimes, u32) {
    let mut fastest: Option<FileTimes> = None;
    let mut count = 0u32;
    for (_, _, times) in files.iter().filter(|(_, file_size, _)| *file_size == size) {
        let best = fastest.get_or_insert(*times);
        best.write_total = best.write_total.min(times.write_total);
        best.read_total = best.read_total.min(times.read_total);
        best.write_raw = best.write_raw.min(times.write_raw);
        best.read_raw = best.read_raw.min(times.read_raw);
        count += 1;
    }
    (fastest.expect("every size was measured"), count)
}

/// The file's bytes in buffers of at most 1 MiB, filled (so their pages are mapped).
pub(super) fn file_buffers(size_bytes: u64, pattern: &DataPattern) -> Vec<IoBuf> {
    (0..size_bytes.div_ceil(COMMAND_BYTES))
        .map(|index| {
            let offset = index * COMMAND_BYTES;
            let mut buffer = IoBuf::zeroed(COMMAND_BYTES.min(size_bytes - offset) as usize);
            pattern.fill(offset, &mut buffer);
            buffer
        })
        .collect()
}

/// The file offset of buffer `index` of [`file_buffers`].
fn offset_of(index: usize) -> u64 {
    index as u64 * COMMAND_BYTES
}

/// Timed create + write + flush of `buffers` (from [`file_buffers`]) and timed read into
/// them, calling the file system directly.
fn measure_direct(
    filesystem: &mut Filesystem,
    name: &str,
    mut buffers: Vec<IoBuf>,
    pattern: &DataPattern,
) -> Result<FileTimes, BenchFsError> {
    let started = Instant::now();
    let file = filesystem.create(name)?;
    for (index, buffer) in buffers.iter().enumerate() {
        filesystem.write(file, offset_of(index), buffer)?;
    }
    filesystem.flush()?;
    let write_total = started.elapsed();
    let started = Instant::now();
    for (index, buffer) in buffers.iter_mut().enumerate() {
        filesystem.read_into(file, offset_of(index), buffer)?;
    }
    let read_total = started.elapsed();
    for (index, buffer) in buffers.iter().enumerate() {
        pattern.check(offset_of(index), buffer)?;
    }
    Ok(FileTimes {
        write_total,
        read_total,
        ..FileTimes::default()
    })
}

/// Timed create + write + flush, an untimed warm-up read, then a timed read.
pub(super) fn measure_through_engine(
    client: &mut EngineClient,
    name: &str,
    size_bytes: u64,
    pattern: &DataPattern,
) -> Result<FileTimes, BenchFsError> {
    let mut buffers = file_buffers(size_bytes, pattern);
    let started = Instant::now();
    client.call(Command::Create {
        name: name.to_string(),
    })?;
    let mut offset_bytes = 0;
    for buffer in buffers.drain(..) {
        if client.outstanding() >= COMMANDS_IN_FLIGHT {
            expect_written(client)?;
        }
        let length = buffer.len() as u64;
        client.submit(Command::Write {
            name: name.to_string(),
            offset_bytes,
            data: buffer,
        })?;
        offset_bytes += length;
    }
    while client.outstanding() > 0 {
        expect_written(client)?;
    }
    client.call(Command::Flush)?;
    let write_total = started.elapsed();
    read_through_engine(client, name, size_bytes, pattern)?;
    let started = Instant::now();
    read_through_engine(client, name, size_bytes, pattern)?;
    Ok(FileTimes {
        write_total,
        read_total: started.elapsed(),
        ..FileTimes::default()
    })
}

pub(super) fn expect_written(client: &mut EngineClient) -> Result<(), BenchFsError> {
    match client.next_completion()?.1? {
        Reply::Written { .. } => Ok(()),
        other => unreachable!("a write completed with {other:?}"),
    }
}

fn read_through_engine(
    client: &mut EngineClient,
    name: &str,
    size_bytes: u64,
    pattern: &DataPattern,
) -> Result<(), BenchFsError> {
    let mut offsets_by_ticket = std::collections::HashMap::new();
    let mut next_offset = 0u64;
    let mut received_bytes = 0u64;
    while received_bytes < size_bytes {
        while next_offset < size_bytes && client.outstanding() < COMMANDS_IN_FLIGHT {
            let length_bytes = COMMAND_BYTES.min(size_bytes - next_offset);
            let ticket = client.submit(Command::Read {
                name: name.to_string(),
                offset_bytes: next_offset,
                length_bytes,
            })?;
            offsets_by_ticket.insert(ticket, next_offset);
            next_offset += length_bytes;
        }
        let (ticket, result) = client.next_completion()?;
        let offset = offsets_by_ticket
            .remove(&ticket)
            .expect("a read submitted here");
        match result? {
            Reply::Data(data) => {
                pattern.check(offset, data.bytes())?;
                received_bytes += data.len() as u64;
            }
            other => unreachable!("a read completed with {other:?}"),
        }
    }
    Ok(())
}

/// Times the raw read and write-back of the file's data blocks on the device.
pub(super) fn measure_raw(
    filesystem: &FsCore,
    device: &mut dyn BlockDevice,
    name: &str,
    size_bytes: u64,
    times: &mut FileTimes,
) -> Result<(), BenchFsError> {
    let file = filesystem.open(name)?;
    let runs = filesystem.block_map(file, 0, size_bytes)?;
    let fs_block_bytes = u64::from(filesystem.stats().fs_block_size_bytes);
    let device_block_bytes = u64::from(filesystem.device_info().block_size_bytes);
    let mut extents = Vec::new();
    for run in &runs {
        let first_device_block = run
            .first_device_block
            .expect("a file written whole has no holes");
        let mut first = first_device_block;
        let mut bytes_left = run.block_count * fs_block_bytes;
        while bytes_left > 0 {
            let length = bytes_left.min(MAX_REQUEST_BYTES);
            extents.push((first, length));
            first += length / device_block_bytes;
            bytes_left -= length;
        }
    }
    let mut buffers: Vec<IoBuf> = (0..COMMANDS_IN_FLIGHT)
        .map(|_| touched_buffer(MAX_REQUEST_BYTES as usize))
        .collect();
    raw_passes(device, &extents, &mut buffers, &mut FileTimes::default())?;
    raw_passes(device, &extents, &mut buffers, times)?;
    let started = Instant::now();
    run_batch(device, vec![Operation::Flush])?;
    times.raw_flush = started.elapsed();
    times.write_raw += times.raw_flush;
    times.raw_requests = extents.len() as u64;
    check_device_state(device);
    Ok(())
}

/// Reads the extents in waves of at most 32 requests into the same recycled buffers
/// (as the engine recycles its pool), writing each wave back right after it was read;
/// adds the read and write time to `times`.
fn raw_passes(
    device: &mut dyn BlockDevice,
    extents: &[(u64, u64)],
    buffers: &mut Vec<IoBuf>,
    times: &mut FileTimes,
) -> Result<(), BenchFsError> {
    for wave in extents.chunks(COMMANDS_IN_FLIGHT) {
        let reads = wave
            .iter()
            .map(|&(first_block, length)| {
                let mut buffer = buffers.pop().expect("one buffer per request of a wave");
                buffer.set_len(length as usize);
                Operation::Read {
                    first_block,
                    buffer,
                }
            })
            .collect();
        let started = Instant::now();
        let completions = run_batch(device, reads)?;
        times.read_raw += started.elapsed();
        let writes = completions
            .into_iter()
            .zip(wave)
            .map(|(completion, &(first_block, _))| Operation::Write {
                first_block,
                buffer: completion.buffer.expect("a read hands its buffer back"),
            })
            .collect();
        let started = Instant::now();
        let completions = run_batch(device, writes)?;
        times.write_raw += started.elapsed();
        buffers.extend(
            completions
                .into_iter()
                .filter_map(|completion| completion.buffer),
        );
    }
    Ok(())
}

/// A buffer whose pages are already mapped, so the timed transfer pays no page faults.
fn touched_buffer(length_bytes: usize) -> IoBuf {
    let mut buffer = IoBuf::zeroed(length_bytes);
    buffer.as_mut_slice().fill(0xa5);
    buffer
}

fn check_device_state(device: &mut dyn BlockDevice) {
    assert_eq!(device.in_flight(), 0, "raw batches leave nothing in flight");
}
