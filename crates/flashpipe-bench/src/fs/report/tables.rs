//! The human tables of `flashpipe bench fs`: one per part, cells formatted as the JSON
//! figures are named.

use super::targets::format_measured;
use crate::column_table::{fixed, fixed_or, ColumnTable};
use crate::fs::efficiency::EfficiencyResult;
use crate::fs::large_file::{LargeFileResult, LargeFileRow};
use crate::fs::small_files::SmallFilesResult;
use crate::table::Align;
use flashpipe_store::units::HumanBytes;

pub(super) fn format_ratio(ratio: Option<f64>) -> String {
    fixed_or(ratio, 3, "n/a")
}

pub(super) fn print_large_file(large_file: &LargeFileResult) {
    println!(
        "\n1. Large file: {} on {} device files (stripe {}, FS block {}); ordinary file {}; page cache {}",
        HumanBytes(large_file.size_bytes),
        large_file.device_files.len(),
        HumanBytes(large_file.stripe_unit_bytes),
        HumanBytes(u64::from(large_file.fs_block_size_bytes)),
        large_file.ordinary_file,
        large_file.page_cache,
    );
    let random = |row: &LargeFileRow| row.workload.starts_with("rand");
    ColumnTable::new(" ", &large_file.rows)
        .indent("  ")
        .left("workload", 22, |row| row.workload.clone())
        .right("flashpipe", 12, |row| {
            format_measured(Some(&row.flashpipe), random(row))
        })
        .right("fio raw", 12, |row| {
            format_measured(row.fio_raw_direct.as_ref(), random(row))
        })
        .right("ratio", 8, |row| {
            format_ratio(row.throughput_ratio_to_fio_raw)
        })
        .right("ord. syscalls", 14, |row| {
            format_measured(row.ordinary_file_syscalls.as_ref(), random(row))
        })
        .right("ratio", 8, |row| {
            format_ratio(row.throughput_ratio_to_ordinary_file_syscalls)
        })
        .right("ord. fio", 14, |row| {
            format_measured(row.ordinary_file_fio.as_ref(), random(row))
        })
        .right("ratio", 8, |row| {
            format_ratio(row.throughput_ratio_to_ordinary_file_fio)
        })
        .column_after("  ", "ordinary-file fio job", 0, Align::Left, |row| {
            row.ordinary_file_fio_job
                .as_deref()
                .unwrap_or("-")
                .to_string()
        })
        .print();
    for row in large_file
        .rows
        .iter()
        .filter(|row| row.workload.starts_with("rand"))
    {
        if let Some(fio) = &row.fio_raw_direct {
            println!(
                "  mean latency, {}: flashpipe {:.1} us, fio raw {:.1} us (ratio {})",
                row.workload,
                row.flashpipe.latency_us_mean,
                fio.latency_us_mean,
                format_ratio(row.mean_latency_ratio_to_fio_raw)
            );
        }
    }
    for note in &large_file.notes {
        println!("  note: {note}");
    }
}

pub(super) fn print_efficiency(efficiency: &EfficiencyResult) {
    println!(
        "\n2. Efficiency on RAM disks (HWFS 4.2.1.1): {}",
        efficiency.method
    );
    println!("  times per file in µs; eff = raw / total; 'direct' = the file system called on the calling thread, no engine");
    let percent = |ratio: f64| format!("{:.1}%", ratio * 100.0);
    let thesis = |us: Option<f64>| us.map_or("-".to_string(), |us| format!("{us}"));
    let micros = |us: f64| fixed(us, 1);
    ColumnTable::new(" ", &efficiency.points)
        .indent("  ")
        .right("disks", 5, |point| point.disk_count.to_string())
        .right("FS block", 8, |point| {
            HumanBytes(u64::from(point.fs_block_size_bytes)).to_string()
        })
        .right("file", 8, |point| {
            HumanBytes(point.file_size_bytes).to_string()
        })
        .right_after(" | ", "write", 9, |point| micros(point.write_total_us))
        .right("raw", 8, |point| micros(point.write_raw_us))
        .right("eff", 6, |point| percent(point.write_efficiency_ratio))
        .right_after(" | ", "read", 9, |point| micros(point.read_total_us))
        .right("raw", 8, |point| micros(point.read_raw_us))
        .right("eff", 6, |point| percent(point.read_efficiency_ratio))
        .right_after(" | ", "dir.write", 9, |point| {
            micros(point.write_direct_total_us)
        })
        .right("eff", 6, |point| {
            percent(point.write_direct_efficiency_ratio)
        })
        .right_after(" | ", "dir.read", 9, |point| {
            micros(point.read_direct_total_us)
        })
        .right("eff", 6, |point| {
            percent(point.read_direct_efficiency_ratio)
        })
        .right_after(" | ", "thesis wr", 9, |point| {
            thesis(point.thesis_write_us_1024_byte_blocks)
        })
        .right("thesis rd", 9, |point| {
            thesis(point.thesis_read_us_1024_byte_blocks)
        })
        .print();
    println!("  thesis wr/rd: HWFS with 1024 B blocks at 100 MHz (Table 4.1: one RAM disk, Table 4.3: two).");
    for statement in &efficiency.thesis.statements {
        println!("  thesis: {statement}");
    }
    print_anchors(efficiency);
    print_devices(efficiency);
}

/// The device rows: one commit per file and commits batched side by side, and the read.
fn print_devices(efficiency: &EfficiencyResult) {
    if efficiency.devices.is_empty() {
        return;
    }
    println!(
        "\n  Efficiency on devices (the thesis's 95% where the raw transfer is a device's): {}",
        efficiency.devices_method
    );
    println!("  times per file in µs; eff = raw / total; 'per-file commit': one Flush per file; 'batched': one Flush per size's files (the thesis's measurement, no per-file durability point)");
    let percent = |ratio: f64| format!("{:.1}%", ratio * 100.0);
    let micros = |us: f64| fixed(us, 1);
    for device in &efficiency.devices {
        println!("  {}", device.description);
        if let Some(reason) = &device.unavailable_reason {
            println!("    n/a: {reason}");
            continue;
        }
        for note in &device.notes {
            println!("    note: {note}");
        }
        ColumnTable::new(" ", &device.points)
            .indent("    ")
            .right("FS block", 8, |_| {
                HumanBytes(u64::from(device.fs_block_size_bytes)).to_string()
            })
            .right("file", 8, |point| {
                HumanBytes(point.file_size_bytes).to_string()
            })
            .right("files", 5, |point| point.repetitions.to_string())
            .right_after(" | ", "per-file commit", 15, |point| {
                micros(point.write_commit_per_file_total_us)
            })
            .right("raw", 9, |point| micros(point.write_commit_per_file_raw_us))
            .right("eff", 6, |point| {
                percent(point.write_commit_per_file_efficiency_ratio)
            })
            .right_after(" | ", "batched", 9, |point| {
                micros(point.write_batched_total_us)
            })
            .right("raw", 9, |point| micros(point.write_batched_raw_us))
            .right("eff", 6, |point| {
                percent(point.write_batched_efficiency_ratio)
            })
            .right_after(" | ", "read", 9, |point| micros(point.read_total_us))
            .right("raw", 9, |point| micros(point.read_raw_us))
            .right("eff", 6, |point| percent(point.read_efficiency_ratio))
            .print();
    }
}

fn print_anchors(efficiency: &EfficiencyResult) {
    let anchors = &efficiency.anchors;
    println!(
        "\n  Per file beside tmpfs and ext4-RAM: flashpipe = {} RAM disk(s), {} FS blocks, through the engine; times per file in µs; ratio = flashpipe time / theirs (target <= 1.0 against tmpfs at 1 KiB..1 MiB, goal 0.5)",
        efficiency.anchor_disk_count,
        HumanBytes(u64::from(efficiency.anchor_fs_block_size_bytes))
    );
    println!("  anchors: {}", anchors.method);
    for column in [&anchors.tmpfs, &anchors.ext4_ram] {
        match (&column.location, &column.unavailable_reason) {
            (Some(location), _) => println!("  {}: {location}", column.file_system),
            (None, Some(reason)) => println!("  {}: n/a: {reason}", column.file_system),
            (None, None) => println!("  {}: n/a", column.file_system),
        }
    }
    let micros = |us: f64| fixed(us, 1);
    let maybe_micros = |us: Option<f64>| fixed_or(us, 1, "n/a");
    let ratio = |ratio: Option<f64>| fixed_or(ratio, 2, "n/a");
    ColumnTable::new(" ", &efficiency.per_file)
        .indent("  ")
        .right("file", 8, |row| HumanBytes(row.file_size_bytes).to_string())
        .right_after(" | ", "fp write", 9, |row| micros(row.flashpipe_write_us))
        .right("tmpfs", 8, |row| maybe_micros(row.tmpfs_write_us))
        .right("ext4-RAM", 8, |row| maybe_micros(row.ext4_ram_write_us))
        .right("/tmpfs", 7, |row| ratio(row.write_time_ratio_to_tmpfs))
        .right("/ext4", 7, |row| ratio(row.write_time_ratio_to_ext4_ram))
        .right_after(" | ", "fp read", 9, |row| micros(row.flashpipe_read_us))
        .right("tmpfs", 8, |row| maybe_micros(row.tmpfs_read_us))
        .right("ext4-RAM", 8, |row| maybe_micros(row.ext4_ram_read_us))
        .right("/tmpfs", 7, |row| ratio(row.read_time_ratio_to_tmpfs))
        .right("/ext4", 7, |row| ratio(row.read_time_ratio_to_ext4_ram))
        .right_after(" | ", "dir.wr", 8, |row| {
            micros(row.flashpipe_direct_write_us)
        })
        .right("dir.rd", 8, |row| micros(row.flashpipe_direct_read_us))
        .right_after(" | ", "raw wr", 8, |row| micros(row.raw_write_us))
        .right("raw rd", 8, |row| micros(row.raw_read_us))
        .print();
    println!("  dir.wr/dir.rd: the file system called on the calling thread (no engine); raw: the efficiency's raw transfer of the same blocks");
}

pub(super) fn print_small_files(small_files: &SmallFilesResult) {
    println!(
        "\n3. Small files: {} files of {} B (FS block {}); ordinary-file page cache {}",
        small_files.file_count,
        small_files.file_size_bytes,
        HumanBytes(u64::from(small_files.fs_block_size_bytes)),
        small_files.page_cache
    );
    ColumnTable::new(" ", &small_files.phases)
        .indent("  ")
        .left("phase", 8, |phase| phase.phase.to_string())
        .right("flashpipe files/s", 16, |phase| {
            fixed(phase.flashpipe_files_per_s, 0)
        })
        .right("ordinary files/s", 18, |phase| {
            fixed(phase.ordinary_files_per_s, 0)
        })
        .right("ratio", 8, |phase| fixed(phase.files_per_s_ratio, 3))
        .print();
}
