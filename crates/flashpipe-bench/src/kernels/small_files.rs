//! Many small files (SISC 3.5, Fig. 8): 2 KiB files streamed through a kernel while sweeping
//! reader threads, slots (reads in flight per reader) and slot size (bytes per read); the target
//! is >= 50% of the large-file bandwidth of the same pipeline (SISC reached 270 of 513 MB/s).
//! The sweep runs on the comparison's store (16 KiB file-system blocks) and again on a store
//! made with 4 KiB blocks, where a 2 KiB file costs a 4 KiB device read instead of 16 KiB.

use std::path::Path;
use std::sync::Arc;

use flashpipe_kernels::registry::build_kernel;
use flashpipe_kernels::throughput::synthetic_bytes;
use flashpipe_pipeline::{OutputTarget, PipelineConfig};
use serde::Serialize;

use crate::kernels::store::KernelStore;

use crate::column_table::{fixed, ColumnTable};
use crate::BenchResult;

/// Bytes per small file (SISC's 2 KB files).
pub const SMALL_FILE_BYTES: usize = 2048;

/// One point of the sweep.
#[derive(Debug, Clone, Serialize)]
pub struct SweepPoint {
    /// Reader threads.
    pub reader_count: usize,
    /// Reads in flight per reader.
    pub slots_per_reader: usize,
    /// Bytes per read.
    pub slot_bytes: u64,
    /// Input bytes per second.
    pub bytes_per_second: f64,
    /// Files per second.
    pub files_per_second: f64,
    /// The stage that set the pace.
    pub slowest_stage: String,
}

/// The sweep.
#[derive(Debug, Clone, Serialize)]
pub struct SmallFilesReport {
    /// File-system block size of the store swept.
    pub fs_block_size_bytes: u32,
    /// The kernel streamed.
    pub kernel: String,
    /// Files.
    pub file_count: usize,
    /// Same pipeline, one large file.
    pub large_file_bytes_per_second: f64,
    /// Every point.
    pub points: Vec<SweepPoint>,
    /// The best point's share of the large-file bandwidth.
    pub best_fraction_of_large_file: f64,
    /// Best >= 50%.
    pub target_met: bool,
}

/// Writes `count` small files into the store and runs the sweep.
pub fn run_sweep(
    store: &KernelStore,
    fs_block_size_bytes: u32,
    count: usize,
    quick: bool,
) -> BenchResult<SmallFilesReport> {
    let mut client = store.engine.client(16);
    let mut names = Vec::with_capacity(count);
    for index in 0..count {
        let name = format!("small-{index:06}");
        let data = synthetic_bytes(SMALL_FILE_BYTES, index as u64);
        client.write_stream(
            &name,
            &mut data.as_slice(),
            SMALL_FILE_BYTES,
            1,
            &mut |_| {},
        )?;
        names.push(name);
    }
    client.call(flashpipe_engine::Command::Flush)?;
    let kernel = build_kernel("crc32c", &[])?;
    let large_config = PipelineConfig::for_engine(&store.engine_config, OutputTarget::Discard);
    let large = store.run(
        Arc::clone(&kernel),
        &["storage.probe".to_string()],
        &large_config,
    )?;
    let large_rate = large.report.input_bytes_per_second;
    let (readers, slots, sizes): (&[usize], &[usize], &[u64]) = if quick {
        (&[1, 2], &[4, 32], &[16384])
    } else {
        (&[1, 2, 4], &[1, 8, 32], &[1024, 16384])
    };
    let mut points = Vec::new();
    for &reader_count in readers {
        for &slots_per_reader in slots {
            for &slot_bytes in sizes {
                let credits = (reader_count * slots_per_reader * 2)
                    .min(store.engine_config.read_buffer_count as usize);
                let config = PipelineConfig {
                    reader_count,
                    reads_in_flight_per_reader: slots_per_reader,
                    chunk_bytes: slot_bytes,
                    chunk_credit_count: credits,
                    ..large_config.clone()
                };
                let result = store.run(Arc::clone(&kernel), &names, &config)?;
                points.push(SweepPoint {
                    reader_count,
                    slots_per_reader,
                    slot_bytes,
                    bytes_per_second: result.report.input_bytes_per_second,
                    files_per_second: count as f64 / result.report.elapsed_seconds.max(1e-9),
                    slowest_stage: result.report.slowest_stage.to_string(),
                });
            }
        }
    }
    let best = points
        .iter()
        .map(|point| point.bytes_per_second)
        .fold(0.0, f64::max);
    let fraction = if large_rate > 0.0 {
        best / large_rate
    } else {
        0.0
    };
    Ok(SmallFilesReport {
        fs_block_size_bytes,
        kernel: "crc32c".into(),
        file_count: count,
        large_file_bytes_per_second: large_rate,
        points,
        best_fraction_of_large_file: fraction,
        target_met: fraction >= 0.5,
    })
}

/// Prints the sweep.
pub fn print_sweep(report: &SmallFilesReport) {
    println!(
        "\nsmall files: {} files of {} B through {} on {} KiB file-system blocks; large file {:.1} MiB/s",
        report.file_count,
        SMALL_FILE_BYTES,
        report.kernel,
        report.fs_block_size_bytes / 1024,
        report.large_file_bytes_per_second / 1048576.0
    );
    ColumnTable::new(" ", &report.points)
        .right("readers", 7, |point| point.reader_count.to_string())
        .right("slots", 6, |point| point.slots_per_reader.to_string())
        .right("slot B", 10, |point| point.slot_bytes.to_string())
        .right("MiB/s", 10, |point| {
            fixed(point.bytes_per_second / 1048576.0, 1)
        })
        .right("files/s", 11, |point| fixed(point.files_per_second, 0))
        .right("slowest", 8, |point| point.slowest_stage.clone())
        .print();
    println!(
        "best = {:.0}% of the large-file bandwidth (target >= 50%): {}",
        report.best_fraction_of_large_file * 100.0,
        crate::verdict::Verdict::of(report.target_met)
    );
}

/// File-system block size of the second sweep's store: one 2 KiB file is one 4 KiB device read.
pub const SMALL_FS_BLOCK_BYTES: u32 = 4096;

const SMALL_BLOCK_STORE_FILES: [&str; 3] = [
    "bench-small-blocks.toml",
    "small-blocks-dev0.img",
    "small-blocks-dev1.img",
];

fn remove_small_block_store(dir: &Path) -> BenchResult<()> {
    for name in SMALL_BLOCK_STORE_FILES {
        let path = dir.join(name);
        if path.exists() {
            std::fs::remove_file(path)?;
        }
    }
    Ok(())
}

/// Makes a store of two device files with 4 KiB blocks in `dir`, puts a `large_file_bytes` probe
/// file and `count` small files in it, runs the same sweep, and removes the store.
pub fn run_sweep_on_small_block_store(
    dir: &Path,
    count: usize,
    large_file_bytes: usize,
    quick: bool,
) -> BenchResult<SmallFilesReport> {
    remove_small_block_store(dir)?;
    let store_bytes = (count as u64 * u64::from(SMALL_FS_BLOCK_BYTES) * 2)
        + large_file_bytes as u64 * 2
        + (256 << 20);
    let per_device = (store_bytes / 2).div_ceil(1 << 20) << 20;
    let store_file = dir.join(SMALL_BLOCK_STORE_FILES[0]);
    let store = KernelStore::create(
        &store_file,
        &SMALL_BLOCK_STORE_FILES[1..],
        per_device,
        SMALL_FS_BLOCK_BYTES,
    )?;
    let mut client = store.engine.client(16);
    let probe = synthetic_bytes(large_file_bytes, 3);
    client.write_stream(
        "storage.probe",
        &mut probe.as_slice(),
        1 << 20,
        8,
        &mut |_| {},
    )?;
    drop(client);
    let report = run_sweep(&store, SMALL_FS_BLOCK_BYTES, count, quick);
    store.close()?;
    remove_small_block_store(dir)?;
    report
}
