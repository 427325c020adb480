//! The thesis's efficiency where the raw transfer is a device's (issue 27, rows 2c and
//! 2d): files of 100 KiB and more on the file device (`O_DIRECT` through io_uring, a device
//! file in the benchmark's folder) and on paced emulated flash (the minflash preset,
//! fewer erase blocks, under the host FTL, its completions released at their modeled
//! wall-clock instants), through the engine.
//!
//! Writes are measured two ways, printed side by side:
//! - **one commit per file**: `Create` + the bytes in `Write` commands of at most 1 MiB
//!   (32 outstanding) + `Flush`, file after file, as the RAM-disk rows;
//! - **commits batched**: the files of one size written one after the other (`Create` +
//!   writes, each file's writes answered before the next file starts) and one `Flush` for
//!   them all; the time per file is the batch's time over its files. The thesis's
//!   measurement has no per-file durability point, so this is the one its 95% compares
//!   with.
//!
//! Raw = the same device's transfer of the same blocks, as the RAM-disk rows
//! ([`super::efficiency`]): each file's data blocks (the file system's block map once the
//! engine stopped) read and written back straight on the device in requests of at most
//! 1 MiB, 32 in flight, after one untimed pass; one device flush per file for the
//! per-file rows, one per batch for the batched rows. Reads: the file read whole through
//! the engine against the raw read of its blocks (the shortest over the files of a size).

use std::path::Path;
use std::time::Duration;

use flashpipe_device::{paced::DEFAULT_LAG_WARNING_NS, BlockDevice, PacedDevice};
use flashpipe_engine::{Command, EngineClient};
use flashpipe_flash::{FlashArray, FlashOptions};
use flashpipe_fs::{Filesystem, FormatOptions};
use flashpipe_ftl::{FlashBackend, Ftl, FtlOptions};
use serde::Serialize;

use super::efficiency::{
    expect_written, file_buffers, measure_raw, measure_through_engine, FileTimes,
    COMMANDS_IN_FLIGHT,
};
use super::store::{self, StoreShape};
use super::{BenchFsError, MIB};
use crate::pattern::DataPattern;

/// File sizes measured (the thesis's 95% holds from 100 KB up).
pub const FILE_SIZES_BYTES: [u64; 3] = [100 << 10, MIB, 10 * MIB];
/// File sizes of `--quick` runs.
const QUICK_FILE_SIZE_COUNT: usize = 2;
/// The smallest file size the 95% target covers.
pub const TARGET_MIN_FILE_BYTES: u64 = 100 << 10;
/// Size of the device file of the file-device rows.
const FILE_DEVICE_BYTES: u64 = 256 * MIB;
/// FS block size of the file-device rows (the store default).
const FILE_DEVICE_FS_BLOCK_BYTES: u32 = 4096;
/// The flash preset of the paced rows.
const FLASH_PRESET: &str = "minflash";
/// Erase blocks per plane of the paced flash (minflash has 4096): 64 chips x 16 blocks x
/// 256 pages x 8 KiB = 2 GiB, room for every file with the FTL's spare blocks, made in
/// well under a second.
const FLASH_BLOCKS_PER_PLANE: u32 = 16;
/// Seed of the flash model (program times, error draws).
const FLASH_SEED: u64 = 27;

/// Which devices the efficiency part measures besides the RAM disks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EfficiencyDevice {
    /// A device file in the benchmark's folder, `O_DIRECT` through io_uring.
    File,
    /// The minflash preset under the host FTL, paced against the wall clock.
    PacedFlash,
    /// Neither: the RAM-disk rows alone.
    None,
}

/// Files measured per size and per commit mode: 3 to 10, two in `--quick` runs.
fn repetitions(quick: bool, file_size_bytes: u64) -> u32 {
    match quick {
        true => 2,
        false => (MIB / file_size_bytes * 5).clamp(3, 10) as u32,
    }
}

/// One file size on one device.
#[derive(Debug, Clone, Serialize)]
pub struct DevicePoint {
    /// File size.
    pub file_size_bytes: u64,
    /// Files per commit mode (times are per file).
    pub repetitions: u32,
    /// Create + write + flush per file through the engine, the shortest over the files.
    pub write_commit_per_file_total_us: f64,
    /// The raw write of those blocks plus one device flush, the shortest.
    pub write_commit_per_file_raw_us: f64,
    /// write_commit_per_file_raw / write_commit_per_file_total.
    pub write_commit_per_file_efficiency_ratio: f64,
    /// Every file of the size created and written, then one flush: the batch's time over
    /// its files.
    pub write_batched_total_us: f64,
    /// The raw write of the batch's blocks plus one device flush, over its files.
    pub write_batched_raw_us: f64,
    /// write_batched_raw / write_batched_total.
    pub write_batched_efficiency_ratio: f64,
    /// The file read whole through the engine, the shortest over the files.
    pub read_total_us: f64,
    /// The raw read of its blocks, the shortest.
    pub read_raw_us: f64,
    /// read_raw / read_total.
    pub read_efficiency_ratio: f64,
}

/// The efficiency on one device.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceEfficiency {
    /// Which device.
    pub device: EfficiencyDevice,
    /// What it is, in words.
    pub description: String,
    /// FS block size.
    pub fs_block_size_bytes: u32,
    /// One point per file size (empty when the device could not be made).
    pub points: Vec<DevicePoint>,
    /// Why the device was not measured, when it was not.
    pub unavailable_reason: Option<String>,
    /// What opening the device noted (an engine fallback, for one).
    pub notes: Vec<String>,
}

/// How the device rows are measured, printed with them.
pub const METHOD: &str = "per-file commit = Create + Write commands (<= 1 MiB, 32 \
outstanding) + Flush per file; batched = every file of a size created and written, then one \
Flush, time over the files; raw = the same blocks read and written back straight on the \
device (<= 1 MiB requests, 32 in flight) + one device flush per file (per-file) or per batch \
(batched); efficiency = raw / total";

/// Measures every device of `devices` (in order, each once) for the file sizes of this
/// run; the file device lives in `folder`.
pub fn run(
    devices: &[EfficiencyDevice],
    quick: bool,
    folder: &Path,
) -> Result<Vec<DeviceEfficiency>, BenchFsError> {
    let sizes = match quick {
        true => &FILE_SIZES_BYTES[..QUICK_FILE_SIZE_COUNT],
        false => &FILE_SIZES_BYTES[..],
    };
    let mut measured: Vec<EfficiencyDevice> = Vec::new();
    let mut results = Vec::new();
    for &device in devices {
        if device == EfficiencyDevice::None || measured.contains(&device) {
            continue;
        }
        measured.push(device);
        results.push(measure_device(device, sizes, quick, folder)?);
    }
    Ok(results)
}

fn measure_device(
    device: EfficiencyDevice,
    sizes: &[u64],
    quick: bool,
    folder: &Path,
) -> Result<DeviceEfficiency, BenchFsError> {
    let (opened, description) = match device {
        EfficiencyDevice::File => (
            open_file_device(folder),
            format!(
                "one device file in {} ({} MiB, O_DIRECT)",
                folder.display(),
                FILE_DEVICE_BYTES / MIB
            ),
        ),
        EfficiencyDevice::PacedFlash => (
            open_paced_flash(),
            format!(
                "the {FLASH_PRESET} preset with {FLASH_BLOCKS_PER_PLANE} erase blocks per plane \
                 under the host FTL, paced against the wall clock"
            ),
        ),
        EfficiencyDevice::None => unreachable!("skipped by the caller"),
    };
    let mut result = DeviceEfficiency {
        device,
        description,
        fs_block_size_bytes: 0,
        points: Vec::new(),
        unavailable_reason: None,
        notes: Vec::new(),
    };
    match opened {
        Ok((filesystem, notes)) => {
            result.fs_block_size_bytes = filesystem.stats().fs_block_size_bytes;
            result.notes = notes;
            result.points = measure_sizes(filesystem, sizes, quick)?;
        }
        Err(reason) => result.unavailable_reason = Some(reason),
    }
    Ok(result)
}

/// A device file in `folder`, formatted; the notes opening it made. The file is removed
/// with the benchmark's folder.
fn open_file_device(folder: &Path) -> Result<(Filesystem, Vec<String>), String> {
    let shape = StoreShape::files(
        folder,
        "efficiency-file",
        1,
        FILE_DEVICE_BYTES,
        u64::from(FILE_DEVICE_FS_BLOCK_BYTES),
        FILE_DEVICE_FS_BLOCK_BYTES,
    );
    let fresh = shape
        .format(folder)
        .map_err(|error| format!("the file device could not be made: {error}"))?;
    Ok((fresh.filesystem, fresh.notes))
}

/// The paced flash device, formatted with FS blocks of one flash page.
fn open_paced_flash() -> Result<(Filesystem, Vec<String>), String> {
    let refused = |error: &dyn std::fmt::Display| {
        format!("the paced flash ({FLASH_PRESET}) could not be made: {error}")
    };
    let config = crate::precondition::preset_config(FLASH_PRESET, Some(FLASH_BLOCKS_PER_PLANE))
        .map_err(|error| refused(&error))?;
    let options = FlashOptions {
        seed: FLASH_SEED,
        ..FlashOptions::default()
    };
    let array = FlashArray::new(config, options).map_err(|error| refused(&error))?;
    let ftl = Ftl::format(
        Box::new(array) as Box<dyn FlashBackend>,
        FtlOptions::default(),
    )
    .map_err(|error| refused(&error))?;
    let paced = PacedDevice::new(ftl, DEFAULT_LAG_WARNING_NS);
    let fs_block_size_bytes = paced.info().block_size_bytes.max(4096);
    let format = FormatOptions {
        fs_block_size_bytes,
        store_identity: None,
    };
    let filesystem =
        Filesystem::format(Box::new(paced), &format).map_err(|error| refused(&error))?;
    Ok((filesystem, Vec::new()))
}

/// One file of a commit mode: its name, size and times.
struct Measured {
    name: String,
    size: u64,
    times: FileTimes,
}

/// The files of every size, both commit modes, then their raw transfers.
fn measure_sizes(
    filesystem: Filesystem,
    sizes: &[u64],
    quick: bool,
) -> Result<Vec<DevicePoint>, BenchFsError> {
    let pattern = DataPattern::new();
    let engine = store::start_engine(filesystem);
    let mut client = engine.client(64);
    let mut per_file = Vec::new();
    let mut batched = Vec::new();
    let mut batch_totals = Vec::new();
    for &size in sizes {
        let count = repetitions(quick, size);
        for index in 0..count {
            let name = format!("per-file-{size}-{index}");
            let times = measure_through_engine(&mut client, &name, size, &pattern)?;
            per_file.push(Measured { name, size, times });
        }
        let names: Vec<String> = (0..count)
            .map(|index| format!("batched-{size}-{index}"))
            .collect();
        let total = write_batch(&mut client, &names, size, &pattern)?;
        batch_totals.push((size, total));
        batched.extend(names.into_iter().map(|name| Measured {
            name,
            size,
            times: FileTimes::default(),
        }));
    }
    drop(client);
    let (core, mut device) = engine.shutdown()?.into_parts();
    for file in per_file.iter_mut().chain(&mut batched) {
        measure_raw(&core, &mut *device, &file.name, file.size, &mut file.times)?;
    }
    Ok(sizes
        .iter()
        .map(|&size| point(size, &per_file, &batched, &batch_totals))
        .collect())
}

/// Creates and writes every file of `names` (each `size_bytes`, each file's writes
/// answered before the next file starts), then one flush; the time of it all.
fn write_batch(
    client: &mut EngineClient,
    names: &[String],
    size_bytes: u64,
    pattern: &DataPattern,
) -> Result<Duration, BenchFsError> {
    let mut buffers: Vec<_> = names
        .iter()
        .map(|_| file_buffers(size_bytes, pattern))
        .collect();
    let started = std::time::Instant::now();
    for (name, buffers) in names.iter().zip(&mut buffers) {
        client.call(Command::Create { name: name.clone() })?;
        let mut offset_bytes = 0;
        for data in buffers.drain(..) {
            if client.outstanding() >= COMMANDS_IN_FLIGHT {
                expect_written(client)?;
            }
            let length = data.len() as u64;
            client.submit(Command::Write {
                name: name.clone(),
                offset_bytes,
                data,
            })?;
            offset_bytes += length;
        }
        while client.outstanding() > 0 {
            expect_written(client)?;
        }
    }
    client.call(Command::Flush)?;
    Ok(started.elapsed())
}

fn point(
    size: u64,
    per_file: &[Measured],
    batched: &[Measured],
    batch_totals: &[(u64, Duration)],
) -> DevicePoint {
    let micros = |duration: Duration| duration.as_secs_f64() * 1e6;
    let of_size = |files: &'static str, list: &[Measured]| -> Vec<FileTimes> {
        let found: Vec<FileTimes> = list
            .iter()
            .filter(|file| file.size == size)
            .map(|file| file.times)
            .collect();
        assert!(!found.is_empty(), "every size has {files} files");
        found
    };
    let singles = of_size("per-file", per_file);
    let shortest =
        |pick: fn(&FileTimes) -> Duration| singles.iter().map(pick).min().expect("files measured");
    let write_total = shortest(|times| times.write_total);
    let write_raw = shortest(|times| times.write_raw);
    let read_total = shortest(|times| times.read_total);
    let read_raw = shortest(|times| times.read_raw);
    let group = of_size("batched", batched);
    let count = group.len() as u32;
    let batch_total = batch_totals
        .iter()
        .find(|(batch_size, _)| *batch_size == size)
        .map(|(_, total)| *total)
        .expect("every size has a batch")
        / count;
    let batch_raw = batched_raw(&group) / count;
    DevicePoint {
        file_size_bytes: size,
        repetitions: count,
        write_commit_per_file_total_us: micros(write_total),
        write_commit_per_file_raw_us: micros(write_raw),
        write_commit_per_file_efficiency_ratio: ratio(write_raw, write_total),
        write_batched_total_us: micros(batch_total),
        write_batched_raw_us: micros(batch_raw),
        write_batched_efficiency_ratio: ratio(batch_raw, batch_total),
        read_total_us: micros(read_total),
        read_raw_us: micros(read_raw),
        read_efficiency_ratio: ratio(read_raw, read_total),
    }
}

/// The raw write of a batch's files with one device flush (the shortest flush measured
/// among them) instead of one per file.
fn batched_raw(group: &[FileTimes]) -> Duration {
    let writes: Duration = group
        .iter()
        .map(|times| times.write_raw.saturating_sub(times.raw_flush))
        .sum();
    let flush = group
        .iter()
        .map(|times| times.raw_flush)
        .min()
        .unwrap_or_default();
    writes + flush
}

fn ratio(raw: Duration, total: Duration) -> f64 {
    match total.is_zero() {
        true => 0.0,
        false => raw.as_secs_f64() / total.as_secs_f64(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn times(write_raw_us: u64, raw_flush_us: u64) -> FileTimes {
        FileTimes {
            write_raw: Duration::from_micros(write_raw_us),
            raw_flush: Duration::from_micros(raw_flush_us),
            ..FileTimes::default()
        }
    }

    #[test]
    fn a_batch_pays_one_flush_not_one_per_file() {
        let group = [times(110, 10), times(120, 20), times(130, 15)];
        assert_eq!(
            batched_raw(&group),
            Duration::from_micros(100 + 100 + 115 + 10)
        );
    }

    #[test]
    fn repetitions_stay_within_bounds() {
        assert_eq!(repetitions(false, 100 << 10), 10);
        assert_eq!(repetitions(false, MIB), 5);
        assert_eq!(repetitions(false, 10 * MIB), 3);
        assert_eq!(repetitions(true, 10 * MIB), 2);
    }

    #[test]
    fn none_and_repeats_measure_nothing_twice() {
        let results = run(
            &[EfficiencyDevice::None, EfficiencyDevice::None],
            true,
            Path::new("."),
        )
        .expect("nothing to measure");
        assert!(results.is_empty());
    }
}
