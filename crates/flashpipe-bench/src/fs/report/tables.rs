//! The human tables of `flashpipe bench fs`: one per part, cells formatted as the JSON
//! figures are named.

use super::targets::format_measured;
use crate::fs::efficiency::{EfficiencyPoint, EfficiencyResult, PerFileComparison};
use crate::fs::large_file::{LargeFileResult, LargeFileRow};
use crate::fs::small_files::SmallFilesResult;
use crate::table::{Align, Table};
use flashpipe_store::units::HumanBytes;

pub(super) fn format_ratio(ratio: Option<f64>) -> String {
    ratio.map_or("n/a".to_string(), |ratio| format!("{ratio:.3}"))
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
    let mut table = Table::new(" ")
        .indent("  ")
        .left("workload", 22)
        .right("flashpipe", 12)
        .right("fio raw", 12)
        .right("ratio", 8)
        .right("ord. syscalls", 14)
        .right("ratio", 8)
        .right("ord. fio", 14)
        .right("ratio", 8)
        .column_after("  ", "ordinary-file fio job", 0, Align::Left);
    for row in &large_file.rows {
        table.row(large_file_cells(row));
    }
    table.print();
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

fn large_file_cells(row: &LargeFileRow) -> Vec<String> {
    let random = row.workload.starts_with("rand");
    vec![
        row.workload.to_string(),
        format_measured(Some(&row.flashpipe), random),
        format_measured(row.fio_raw_direct.as_ref(), random),
        format_ratio(row.throughput_ratio_to_fio_raw),
        format_measured(row.ordinary_file_syscalls.as_ref(), random),
        format_ratio(row.throughput_ratio_to_ordinary_file_syscalls),
        format_measured(row.ordinary_file_fio.as_ref(), random),
        format_ratio(row.throughput_ratio_to_ordinary_file_fio),
        row.ordinary_file_fio_job
            .as_deref()
            .unwrap_or("-")
            .to_string(),
    ]
}

pub(super) fn print_efficiency(efficiency: &EfficiencyResult) {
    println!(
        "\n2. Efficiency on RAM disks (HWFS 4.2.1.1): {}",
        efficiency.method
    );
    println!("  times per file in µs; eff = raw / total; 'direct' = the file system called on the calling thread, no engine");
    let mut table = Table::new(" ")
        .indent("  ")
        .right("disks", 5)
        .right("FS block", 8)
        .right("file", 8)
        .column_after(" | ", "write", 9, Align::Right)
        .right("raw", 8)
        .right("eff", 6)
        .column_after(" | ", "read", 9, Align::Right)
        .right("raw", 8)
        .right("eff", 6)
        .column_after(" | ", "dir.write", 9, Align::Right)
        .right("eff", 6)
        .column_after(" | ", "dir.read", 9, Align::Right)
        .right("eff", 6)
        .column_after(" | ", "thesis wr", 9, Align::Right)
        .right("thesis rd", 9);
    for point in &efficiency.points {
        table.row(efficiency_cells(point));
    }
    table.print();
    println!("  thesis wr/rd: HWFS with 1024 B blocks at 100 MHz (Table 4.1: one RAM disk, Table 4.3: two).");
    for statement in &efficiency.thesis.statements {
        println!("  thesis: {statement}");
    }
    print_anchors(efficiency);
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
    let mut table = Table::new(" ")
        .indent("  ")
        .right("file", 8)
        .column_after(" | ", "fp write", 9, Align::Right)
        .right("tmpfs", 8)
        .right("ext4-RAM", 8)
        .right("/tmpfs", 7)
        .right("/ext4", 7)
        .column_after(" | ", "fp read", 9, Align::Right)
        .right("tmpfs", 8)
        .right("ext4-RAM", 8)
        .right("/tmpfs", 7)
        .right("/ext4", 7)
        .column_after(" | ", "dir.wr", 8, Align::Right)
        .right("dir.rd", 8)
        .column_after(" | ", "raw wr", 8, Align::Right)
        .right("raw rd", 8);
    for comparison in &efficiency.per_file {
        table.row(per_file_cells(comparison));
    }
    table.print();
    println!("  dir.wr/dir.rd: the file system called on the calling thread (no engine); raw: the efficiency's raw transfer of the same blocks");
}

fn per_file_cells(comparison: &PerFileComparison) -> Vec<String> {
    let micros = |us: f64| format!("{us:.1}");
    let maybe_micros = |us: Option<f64>| us.map_or("n/a".to_string(), micros);
    let ratio = |ratio: Option<f64>| ratio.map_or("n/a".to_string(), |ratio| format!("{ratio:.2}"));
    vec![
        HumanBytes(comparison.file_size_bytes).to_string(),
        micros(comparison.flashpipe_write_us),
        maybe_micros(comparison.tmpfs_write_us),
        maybe_micros(comparison.ext4_ram_write_us),
        ratio(comparison.write_time_ratio_to_tmpfs),
        ratio(comparison.write_time_ratio_to_ext4_ram),
        micros(comparison.flashpipe_read_us),
        maybe_micros(comparison.tmpfs_read_us),
        maybe_micros(comparison.ext4_ram_read_us),
        ratio(comparison.read_time_ratio_to_tmpfs),
        ratio(comparison.read_time_ratio_to_ext4_ram),
        micros(comparison.flashpipe_direct_write_us),
        micros(comparison.flashpipe_direct_read_us),
        micros(comparison.raw_write_us),
        micros(comparison.raw_read_us),
    ]
}

fn efficiency_cells(point: &EfficiencyPoint) -> Vec<String> {
    let percent = |ratio: f64| format!("{:.1}%", ratio * 100.0);
    let thesis = |us: Option<f64>| us.map_or("-".to_string(), |us| format!("{us}"));
    let micros = |us: f64| format!("{us:.1}");
    vec![
        point.disk_count.to_string(),
        HumanBytes(u64::from(point.fs_block_size_bytes)).to_string(),
        HumanBytes(point.file_size_bytes).to_string(),
        micros(point.write_total_us),
        micros(point.write_raw_us),
        percent(point.write_efficiency_ratio),
        micros(point.read_total_us),
        micros(point.read_raw_us),
        percent(point.read_efficiency_ratio),
        micros(point.write_direct_total_us),
        percent(point.write_direct_efficiency_ratio),
        micros(point.read_direct_total_us),
        percent(point.read_direct_efficiency_ratio),
        thesis(point.thesis_write_us_1024_byte_blocks),
        thesis(point.thesis_read_us_1024_byte_blocks),
    ]
}

pub(super) fn print_small_files(small_files: &SmallFilesResult) {
    println!(
        "\n3. Small files: {} files of {} B (FS block {}); ordinary-file page cache {}",
        small_files.file_count,
        small_files.file_size_bytes,
        HumanBytes(u64::from(small_files.fs_block_size_bytes)),
        small_files.page_cache
    );
    let mut table = Table::new(" ")
        .indent("  ")
        .left("phase", 8)
        .right("flashpipe files/s", 16)
        .right("ordinary files/s", 18)
        .right("ratio", 8);
    for phase in &small_files.phases {
        table.row(vec![
            phase.phase.to_string(),
            format!("{:.0}", phase.flashpipe_files_per_s),
            format!("{:.0}", phase.ordinary_files_per_s),
            format!("{:.3}", phase.files_per_s_ratio),
        ]);
    }
    table.print();
}
