//! What `flashpipe ftl fs` prints: the table beside the raw ceiling, and the chart.

use super::Report;
use crate::error::invalid_input;
use crate::plot::{draw_chart, Chart, ChartKind};
use crate::table::Table;
use crate::BenchResult;
use flashpipe_store::units::HumanBytes;
use std::path::Path;

pub(super) fn draw(path: &Path, report: &Report) -> BenchResult {
    let path_text = path
        .to_str()
        .ok_or_else(|| invalid_input(format!("--plot {}: not UTF-8", path.display())))?;
    let chart = Chart {
        title: format!(
            "File system on {} vs the raw array: transfers in virtual time",
            report.preset
        ),
        x_label: "data done (MiB)".to_string(),
        y_label: "virtual time (ms)".to_string(),
        kind: ChartKind::Lines,
        series: vec![
            report.raw.write_progress.series("raw array write"),
            report.fs.write_progress.series("file system write"),
            report.raw.read_progress.series("raw array read"),
            report.fs.read_progress.series("file system read"),
        ],
        reference_points: Vec::new(),
        reference_name: String::new(),
    };
    draw_chart(path_text, &chart)?;
    Ok(())
}

pub(super) fn print_table(report: &Report) {
    let raw = &report.raw;
    let fs = &report.fs;
    println!(
        "file system on {} ({} dies, {} blocks per chip, {} B pages), {} FS blocks, FTL queue depth {}, checkpoint every {} host pages (0: when the log fills), {} engine commands in flight; virtual time",
        report.preset,
        report.dies,
        report.blocks_per_chip,
        report.page_bytes,
        HumanBytes(u64::from(report.fs_block_size_bytes)),
        report.ftl_queue_depth,
        report.ftl_checkpoint_interval_pages,
        report.engine_commands_in_flight
    );
    let mut table = Table::new(" ")
        .left("measure", 34)
        .right("raw array", 12)
        .right("file system", 12)
        .right("share", 8);
    let mut row = |name: &str, raw_value: f64, fs_value: f64| {
        table.row(vec![
            name.to_string(),
            format!("{raw_value:.1}"),
            format!("{fs_value:.1}"),
            format!("{:.1}%", 100.0 * fs_value / raw_value),
        ]);
    };
    row(
        "sequential write (MiB/s)",
        raw.sequential_write_mib_per_s,
        fs.sequential_write_mib_per_s,
    );
    row(
        "sequential read (MiB/s)",
        raw.sequential_read_mib_per_s,
        fs.sequential_read_mib_per_s,
    );
    row(
        "random read latency mean (us)",
        raw.page_read.latency_us_mean,
        fs.random_read.latency_us_mean,
    );
    row(
        "random read latency p99 (us)",
        raw.page_read.latency_us_p99,
        fs.random_read.latency_us_p99,
    );
    table.print();
    let work = &fs.write_ftl_work;
    println!(
        "FTL during the {} write: {} host pages, {} checkpoint pages, {} log pages, {} pages copied by GC, {} erases",
        HumanBytes(fs.file_bytes),
        work.host_pages_written,
        work.checkpoint_pages_written,
        work.log_pages_written,
        work.gc_pages_copied,
        work.erases
    );
    println!(
        "simulator speed: whole stack (engine, file system, FTL, flash model with data and ECC) {} flash operations in {:.2} wall seconds ({:.0} per wall-second); raw array (timing only) {} in {:.2} s ({:.0} per wall-second)",
        report.stack_flash_operations,
        report.stack_wall_seconds,
        report.stack_flash_operations_per_wall_second,
        report.raw_flash_operations,
        report.raw_wall_seconds,
        report.raw_flash_operations_per_wall_second
    );
}
