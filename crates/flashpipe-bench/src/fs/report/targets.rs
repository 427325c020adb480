//! The targets of `flashpipe bench fs`, each evaluated from the parts' measurements with the
//! figures it was judged on (or why it was not).

use super::{
    Measurement, Target, DEVICE_EFFICIENCY_REQUIRED_RATIO, FLOOR_REQUIRED_RATIO,
    LARGE_EFFICIENCY_MIN_FILE_BYTES, LARGE_EFFICIENCY_REQUIRED_RATIO, MEDIUM_EFFICIENCY_FILE_BYTES,
    MEDIUM_EFFICIENCY_REQUIRED_RATIO, PER_FILE_GOAL_TIME_RATIO, PER_FILE_REQUIRED_TIME_RATIO,
    PER_FILE_TARGET_SIZES_BYTES, RANDOM_QD1_LATENCY_REQUIRED_RATIO, RANDOM_QD32_REQUIRED_RATIO,
    SEQUENTIAL_READ_REQUIRED_RATIO, SEQUENTIAL_WRITE_REQUIRED_RATIO, SMALL_FILES_REQUIRED_RATIO,
};
use crate::fs::devices::{DevicePoint, EfficiencyDevice, TARGET_MIN_FILE_BYTES};
use crate::fs::efficiency::{EfficiencyPoint, EfficiencyResult, PerFileComparison};
use crate::fs::large_file::{LargeFileResult, LargeFileRow};
use crate::fs::reference::Measured;
use crate::fs::small_files::SmallFilesResult;
use crate::verdict::Bound;
use flashpipe_store::units::HumanBytes;

const PART_NOT_RUN: &str = "part not run";

/// The large-file row measured for `prefix`, fio raw's figures on it and `ratio` of it, or
/// why one of them is missing (`unmeasured` when fio measured no such figure).
fn row_against_fio<'a>(
    large_file: Option<&'a LargeFileResult>,
    prefix: &str,
    fio_missing: &str,
    ratio: fn(&LargeFileRow) -> Option<f64>,
    unmeasured: &str,
) -> Result<(&'a LargeFileRow, &'a Measured, f64), String> {
    let large_file = large_file.ok_or(format!("large-file {PART_NOT_RUN}"))?;
    let row = large_file
        .row(prefix)
        .ok_or(format!("no {prefix} row measured"))?;
    let fio = row.fio_raw_direct.as_ref().ok_or(fio_missing.to_string())?;
    Ok((row, fio, ratio(row).ok_or(unmeasured.to_string())?))
}

/// Large file vs fio raw: sequential write and read, 4 KiB random reads at QD32
/// (throughput ratios) and at QD1 (mean latency ratio).
pub(super) fn large_file_targets(
    large_file: Option<&LargeFileResult>,
    fio_missing: &str,
) -> Vec<Target> {
    let against_fio = |prefix: &str, ratio: fn(&LargeFileRow) -> Option<f64>, unmeasured| {
        row_against_fio(large_file, prefix, fio_missing, ratio, unmeasured)
    };
    let throughput = |prefix: &str| -> Measurement {
        let (row, fio, ratio) = against_fio(
            prefix,
            |row| row.throughput_ratio_to_fio_raw,
            "fio measured nothing",
        )?;
        let random = row.workload.starts_with("rand");
        Ok((
            ratio,
            format!(
                "flashpipe {}, fio {}",
                format_measured(Some(&row.flashpipe), random),
                format_measured(Some(fio), random)
            ),
        ))
    };
    let latency = |prefix: &str| -> Measurement {
        let (row, fio, ratio) = against_fio(
            prefix,
            |row| row.mean_latency_ratio_to_fio_raw,
            "fio measured no latency",
        )?;
        Ok((
            ratio,
            format!(
                "mean latency flashpipe {:.1} us, fio {:.1} us",
                row.flashpipe.latency_us_mean, fio.latency_us_mean
            ),
        ))
    };
    let at_least = |name: &str, required: f64, measurement: Measurement| {
        Target::evaluate(
            format!("large file vs fio raw: {name}"),
            Bound::AtLeast,
            required,
            None,
            measurement,
        )
    };
    vec![
        at_least(
            "sequential write",
            SEQUENTIAL_WRITE_REQUIRED_RATIO,
            throughput("seq-write"),
        ),
        at_least(
            "sequential read",
            SEQUENTIAL_READ_REQUIRED_RATIO,
            throughput("seq-read"),
        ),
        at_least(
            "4 KiB random read QD32",
            RANDOM_QD32_REQUIRED_RATIO,
            throughput("rand-read 4KiB QD32"),
        ),
        Target::evaluate(
            "large file vs fio raw: 4 KiB random read QD1, latency".to_string(),
            Bound::AtMost,
            RANDOM_QD1_LATENCY_REQUIRED_RATIO,
            None,
            latency("rand-read 4KiB QD1"),
        ),
    ]
}

/// Per file size (1 KiB..1 MiB), flashpipe's write + flush and read time over tmpfs's.
pub(super) fn per_file_targets(efficiency: Option<&EfficiencyResult>) -> Vec<Target> {
    let mut targets = Vec::new();
    for size in PER_FILE_TARGET_SIZES_BYTES {
        for write in [true, false] {
            let measurement = per_file_measurement(efficiency, size, write);
            targets.push(Target::evaluate(
                format!(
                    "per file vs tmpfs: {} {}",
                    HumanBytes(size),
                    if write { "write + flush" } else { "read" }
                ),
                Bound::AtMost,
                PER_FILE_REQUIRED_TIME_RATIO,
                Some(PER_FILE_GOAL_TIME_RATIO),
                measurement,
            ));
        }
    }
    targets
}

fn per_file_measurement(
    efficiency: Option<&EfficiencyResult>,
    size: u64,
    write: bool,
) -> Measurement {
    let efficiency = efficiency.ok_or(format!("efficiency {PART_NOT_RUN}"))?;
    let tmpfs_missing = || {
        efficiency
            .anchors
            .tmpfs
            .unavailable_reason
            .clone()
            .unwrap_or_else(|| "tmpfs not measured".to_string())
    };
    let comparison: &PerFileComparison = efficiency
        .per_file
        .iter()
        .find(|comparison| comparison.file_size_bytes == size)
        .ok_or(format!("{} files not measured", HumanBytes(size)))?;
    let (ours_us, theirs_us, ratio) = match write {
        true => (
            comparison.flashpipe_write_us,
            comparison.tmpfs_write_us,
            comparison.write_time_ratio_to_tmpfs,
        ),
        false => (
            comparison.flashpipe_read_us,
            comparison.tmpfs_read_us,
            comparison.read_time_ratio_to_tmpfs,
        ),
    };
    let (theirs_us, ratio) = theirs_us.zip(ratio).ok_or_else(tmpfs_missing)?;
    Ok((
        ratio,
        format!("flashpipe {ours_us:.1} us, tmpfs {theirs_us:.1} us per file"),
    ))
}

/// The thesis's efficiency: >= 95% for files of 10 MiB and more, >= 80% at 1 MiB,
/// writes and reads, the lowest over every RAM-disk count and FS block size.
pub(super) fn efficiency_targets(efficiency: Option<&EfficiencyResult>) -> Vec<Target> {
    let cases = [
        (
            "files >= 10 MiB",
            LARGE_EFFICIENCY_MIN_FILE_BYTES..=u64::MAX,
            LARGE_EFFICIENCY_REQUIRED_RATIO,
        ),
        (
            "files of 1 MiB",
            MEDIUM_EFFICIENCY_FILE_BYTES..=MEDIUM_EFFICIENCY_FILE_BYTES,
            MEDIUM_EFFICIENCY_REQUIRED_RATIO,
        ),
    ];
    let mut targets = Vec::new();
    for (label, file_sizes_bytes, required) in cases {
        for write in [true, false] {
            let measurement = lowest_efficiency(efficiency, &file_sizes_bytes, write);
            targets.push(Target::evaluate(
                format!(
                    "efficiency (raw / total), {label}, {}",
                    if write { "write" } else { "read" }
                ),
                Bound::AtLeast,
                required,
                None,
                measurement,
            ));
        }
    }
    targets
}

/// The file system's time over the floor (one memcpy plus one CRC32C pass of the same bytes on
/// one core), files of 1 MiB and more on one RAM disk, write and read: the highest over the
/// block sizes (at most [`FLOOR_REQUIRED_RATIO`]).
pub(super) fn floor_targets(efficiency: Option<&EfficiencyResult>) -> Vec<Target> {
    [true, false]
        .into_iter()
        .map(|write| {
            Target::evaluate(
                format!(
                    "time over the floor (memcpy + CRC32C), one RAM disk, files >= 1 MiB, {}",
                    if write { "write" } else { "read" }
                ),
                Bound::AtMost,
                FLOOR_REQUIRED_RATIO,
                None,
                highest_over_floor(efficiency, write),
            )
        })
        .collect()
}

fn highest_over_floor(efficiency: Option<&EfficiencyResult>, write: bool) -> Measurement {
    let efficiency = efficiency.ok_or(format!("efficiency {PART_NOT_RUN}"))?;
    let total_us = |point: &EfficiencyPoint| match write {
        true => point.write_total_us,
        false => point.read_total_us,
    };
    let over_floor = |point: &EfficiencyPoint| {
        efficiency
            .floors
            .iter()
            .find(|floor| floor.file_size_bytes == point.file_size_bytes && floor.floor_us > 0.0)
            .map(|floor| (total_us(point) / floor.floor_us, floor.floor_us))
    };
    let (point, (ratio, floor_us)) = efficiency
        .points
        .iter()
        .filter(|point| {
            point.disk_count == 1 && point.file_size_bytes >= MEDIUM_EFFICIENCY_FILE_BYTES
        })
        .filter_map(|point| over_floor(point).map(|over| (point, over)))
        .max_by(|left, right| left.1 .0.total_cmp(&right.1 .0))
        .ok_or("no file of 1 MiB or more measured".to_string())?;
    Ok((
        ratio,
        format!(
            "highest: {} blocks, {} files: file system {:.1} us / floor {floor_us:.1} us",
            HumanBytes(u64::from(point.fs_block_size_bytes)),
            HumanBytes(point.file_size_bytes),
            total_us(point)
        ),
    ))
}

fn lowest_efficiency(
    efficiency: Option<&EfficiencyResult>,
    file_sizes_bytes: &std::ops::RangeInclusive<u64>,
    write: bool,
) -> Measurement {
    let efficiency = efficiency.ok_or(format!("efficiency {PART_NOT_RUN}"))?;
    let ratio = |point: &EfficiencyPoint| match write {
        true => point.write_efficiency_ratio,
        false => point.read_efficiency_ratio,
    };
    let lowest = efficiency
        .points
        .iter()
        .filter(|point| file_sizes_bytes.contains(&point.file_size_bytes))
        .min_by(|left, right| ratio(left).total_cmp(&ratio(right)))
        .ok_or("no file of that size measured (--quick stops at 1 MiB)".to_string())?;
    let (raw_us, total_us) = match write {
        true => (lowest.write_raw_us, lowest.write_total_us),
        false => (lowest.read_raw_us, lowest.read_total_us),
    };
    Ok((
        ratio(lowest),
        format!(
            "lowest: {} disk(s), {} blocks, {} files: raw {raw_us:.1} us / total {total_us:.1} us",
            lowest.disk_count,
            HumanBytes(u64::from(lowest.fs_block_size_bytes)),
            HumanBytes(lowest.file_size_bytes)
        ),
    ))
}

/// The thesis's 95% where the raw transfer is a device's: on the file device and on paced
/// flash, files of 100 KiB and more, writes with commits batched (the thesis's
/// measurement has no per-file durability point) and reads; the lowest point counts.
pub(super) fn device_targets(efficiency: Option<&EfficiencyResult>) -> Vec<Target> {
    let devices = [
        (EfficiencyDevice::File, "the file device (O_DIRECT)"),
        (EfficiencyDevice::PacedFlash, "paced flash (minflash, FTL)"),
    ];
    devices
        .into_iter()
        .flat_map(|(device, label)| {
            [true, false].into_iter().map(move |write| {
                Target::evaluate(
                    format!(
                        "efficiency on {label}, files >= 100 KiB, {}",
                        match write {
                            true => "write, commits batched",
                            false => "read",
                        }
                    ),
                    Bound::AtLeast,
                    DEVICE_EFFICIENCY_REQUIRED_RATIO,
                    None,
                    lowest_device_efficiency(efficiency, device, write),
                )
            })
        })
        .collect()
}

fn lowest_device_efficiency(
    efficiency: Option<&EfficiencyResult>,
    device: EfficiencyDevice,
    write: bool,
) -> Measurement {
    let efficiency = efficiency.ok_or(format!("efficiency {PART_NOT_RUN}"))?;
    let measured = efficiency
        .devices
        .iter()
        .find(|measured| measured.device == device)
        .ok_or("device not measured (--efficiency-devices)".to_string())?;
    if let Some(reason) = &measured.unavailable_reason {
        return Err(reason.clone());
    }
    let ratio = |point: &DevicePoint| match write {
        true => point.write_batched_efficiency_ratio,
        false => point.read_efficiency_ratio,
    };
    let lowest = measured
        .points
        .iter()
        .filter(|point| point.file_size_bytes >= TARGET_MIN_FILE_BYTES)
        .min_by(|left, right| ratio(left).total_cmp(&ratio(right)))
        .ok_or("no file of 100 KiB or more measured".to_string())?;
    let (raw_us, total_us) = match write {
        true => (lowest.write_batched_raw_us, lowest.write_batched_total_us),
        false => (lowest.read_raw_us, lowest.read_total_us),
    };
    Ok((
        ratio(lowest),
        format!(
            "lowest: {} files: raw {raw_us:.1} us / total {total_us:.1} us per file",
            HumanBytes(lowest.file_size_bytes)
        ),
    ))
}

/// Small 2 KiB files: each phase at least the ordinary files' rate.
pub(super) fn small_file_targets(
    small_files: Option<&SmallFilesResult>,
    folder_file_system: &str,
) -> Vec<Target> {
    ["create", "write", "read", "delete"]
        .iter()
        .map(|phase_name| {
            let measurement = small_files
                .ok_or(format!("small-file {PART_NOT_RUN}"))
                .and_then(|small_files| {
                    small_files
                        .phases
                        .iter()
                        .find(|phase| phase.phase == *phase_name)
                        .ok_or(format!("phase {phase_name} not measured"))
                })
                .map(|phase| {
                    (
                        phase.files_per_s_ratio,
                        format!(
                            "flashpipe {:.0} files/s, ordinary {:.0} files/s",
                            phase.flashpipe_files_per_s, phase.ordinary_files_per_s
                        ),
                    )
                });
            Target::evaluate(
                format!("small 2 KiB files vs ordinary files ({folder_file_system}): {phase_name}"),
                Bound::AtLeast,
                SMALL_FILES_REQUIRED_RATIO,
                None,
                measurement,
            )
        })
        .collect()
}

pub(super) fn format_measured(measured: Option<&Measured>, random: bool) -> String {
    match measured {
        None => "n/a".to_string(),
        Some(measured) if random => format!("{:.0} IOPS", measured.iops),
        Some(measured) => format!("{:.0} MB/s", measured.mb_per_s),
    }
}
