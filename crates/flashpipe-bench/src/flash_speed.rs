//! `flashpipe bench flash`: emulated flash at wall speed (issue #13, item 5).
//!
//! Three figures, each printed against its target (met / NOT MET). They are wall-clock
//! rates of this machine: they mean something only on an idle machine.
//! 1. **put**: a file of `--size` (default 1 GiB) put into a fresh minflash store in a
//!    temporary folder, the way `flashpipe mkfs --devices flash:minflash:IMAGE` then
//!    `flashpipe put` do it: the store opened, the file streamed through the engine, the
//!    store closed (commit, FTL unmount, image synced). The input file is written before
//!    the clock starts; the store's creation is timed apart. Target: at most 5 s of wall
//!    time per GiB.
//! 2. **whole stack**: the flash operations (reads, programs, erases the array admitted:
//!    the operation counter of its `.meta`, synced at close) of that put, per wall-second
//!    of the put: FS -> FTL -> flash model -> image file. Target: 300,000.
//!    The same put into a minflash store kept in memory (no image file: FS -> FTL -> flash
//!    model) is reported beside it, its flash operations counted from the FTL's statistics
//!    (programs, collection copies as a read and a program, reads, erases), to show what
//!    the image file costs.
//!    The FTL layer alone is reported too: the same number of bytes written straight to a
//!    minflash device kept in memory (FTL -> flash model, no file system, no engine), as
//!    sequential 1 MiB requests, its flash operations counted as for the memory put; so
//!    the per-layer ceilings (raw model, FTL, FTL + fs + engine, + image file) stand side
//!    by side in one run.
//! 3. **raw model**: `sim speed`'s workload (4 KiB random reads of a full minflash array,
//!    queue depth 128, timing only), page operations per wall-second. Target: 2,000,000.
//!
//! `--quick` shrinks the put and the raw run so a test can run the whole benchmark;
//! `--json` prints the report for machines. The folder is removed afterwards.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use flashpipe_device::{BlockDevice, IoBuf, Request};
use flashpipe_engine::EngineConfig;
use flashpipe_flash::store::synced_operation_count;
use flashpipe_flash::FlashConfig;
use flashpipe_fs::{Filesystem, FormatOptions};
use flashpipe_ftl::FtlStats;
use flashpipe_store::create::{
    FILE_STORE_BLOCK_SIZE_BYTES, FILE_STORE_QUEUE_DEPTH, FILE_STORE_STRIPE_UNIT_BYTES,
};
use flashpipe_store::flash_store::{open_flash_device, FlashDeviceSpec, FlashStoreDevice};
use flashpipe_store::store_config::STORE_FILE_VERSION;
use flashpipe_store::units::parse_size_bytes;
use flashpipe_store::{
    create_store, DeviceCreation, DeviceSpec, LockWait, RunningStore, StoreAccess, StoreConfig,
};
use serde::Serialize;

use crate::error::{invalid_input, io_with};
use crate::pattern::{DataPattern, DataPatternReader};
use crate::progress::Progress;
use crate::sim::{random_read_run, timed, Elapsed};
use crate::BenchResult;
use flashpipe_bench_harness::output::print_json_or_text;

/// Target: wall seconds of a 1 GiB put into a minflash store (scaled by size).
pub const PUT_TARGET_WALL_SECONDS_PER_GIB: f64 = 5.0;
/// Target: flash operations per wall-second through the whole stack during the put.
pub const STACK_TARGET_FLASH_OPERATIONS_PER_WALL_SECOND: f64 = 300_000.0;
/// Target: page operations per wall-second of the raw model (`sim speed`).
pub const RAW_TARGET_PAGE_OPERATIONS_PER_WALL_SECOND: f64 = 2_000_000.0;

/// The preset every figure runs on.
const PRESET: &str = "minflash";
/// Bytes per engine command of the put (as `flashpipe put`).
const PUT_CHUNK_BYTES: usize = 1 << 20;
/// Engine commands in flight during the put (as `flashpipe put`).
const PUT_IN_FLIGHT: usize = 8;
/// The raw run: `sim speed`'s defaults.
const RAW_QUEUE_DEPTH: u32 = 128;
const RAW_SEED: u64 = 1;
/// `--quick`: the put's size and the raw run's operations.
const QUICK_SIZE_BYTES: u64 = 32 << 20;
const QUICK_RAW_OPERATIONS: u64 = 200_000;
const GIB: f64 = (1u64 << 30) as f64;
/// The input file's name in the work folder and in the store.
const INPUT_NAME: &str = "input.bin";

/// `flashpipe bench flash`: emulated flash at wall speed against the #13 targets.
#[derive(Debug, clap::Args)]
pub struct BenchFlashArgs {
    /// Size of the file put into the store (e.g. 1GiB).
    #[arg(long, default_value = "1GiB")]
    size: String,
    /// Page operations of the raw-model run (`sim speed`).
    #[arg(long, default_value_t = 2_000_000)]
    raw_operations: u64,
    /// Folder to work in (a fresh subfolder is made and removed); default: the system's
    /// temporary folder.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// A 32 MiB put and 200,000 raw operations (for tests; the targets are still shown).
    #[arg(long)]
    quick: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// One figure against its target.
#[derive(Debug, Clone, Serialize)]
struct Verdict {
    value: f64,
    target: f64,
    /// "at most" or "at least".
    direction: &'static str,
    met: bool,
}

impl Verdict {
    fn at_most(value: f64, target: f64) -> Verdict {
        Verdict {
            value,
            target,
            direction: "at most",
            met: value <= target,
        }
    }

    fn at_least(value: f64, target: f64) -> Verdict {
        Verdict {
            value,
            target,
            direction: "at least",
            met: value >= target,
        }
    }

    fn word(&self) -> &'static str {
        crate::verdict::Verdict::of(self.met).label()
    }
}

/// The put's figures.
#[derive(Debug, Clone, Serialize)]
struct PutFigures {
    file_bytes: u64,
    mkfs_wall_seconds: f64,
    put_wall_seconds: f64,
    put_cpu_seconds: Option<f64>,
    put_wall_seconds_per_gib: f64,
    flash_operations: u64,
    flash_operations_per_wall_second: f64,
}

/// The same put into a store kept in memory (no image file).
#[derive(Debug, Clone, Serialize)]
struct MemoryPutFigures {
    put_wall_seconds: f64,
    put_cpu_seconds: Option<f64>,
    flash_operations: u64,
    flash_operations_per_wall_second: f64,
}

/// The same bytes written straight to the FTL (no file system, no engine, no image file).
#[derive(Debug, Clone, Serialize)]
struct FtlAloneFigures {
    written_bytes: u64,
    wall_seconds: f64,
    cpu_seconds: Option<f64>,
    flash_operations: u64,
    flash_operations_per_wall_second: f64,
}

/// The raw model's figures.
#[derive(Debug, Clone, Serialize)]
struct RawFigures {
    page_operations: u64,
    wall_seconds: f64,
    cpu_seconds: Option<f64>,
    page_operations_per_wall_second: f64,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
struct Report {
    preset: &'static str,
    quick: bool,
    put: PutFigures,
    memory_put: MemoryPutFigures,
    ftl_alone: FtlAloneFigures,
    raw: RawFigures,
    put_wall_seconds_per_gib: Verdict,
    stack_flash_operations_per_wall_second: Verdict,
    raw_page_operations_per_wall_second: Verdict,
}

/// Runs `flashpipe bench flash`.
pub fn run(arguments: BenchFlashArgs) -> BenchResult {
    let size_bytes = if arguments.quick {
        QUICK_SIZE_BYTES
    } else {
        parse_size_bytes(&arguments.size)
            .map_err(|error| invalid_input(format!("--size: {error}")))?
    };
    if size_bytes == 0 {
        return Err(invalid_input(format!(
            "--size {}: the file must not be empty",
            arguments.size
        ))
        .into());
    }
    let raw_operations = if arguments.quick {
        QUICK_RAW_OPERATIONS
    } else {
        arguments.raw_operations
    };
    let parent = arguments.dir.clone().unwrap_or_else(std::env::temp_dir);
    let folder = parent.join(format!("flashpipe-bench-flash-{}", std::process::id()));
    std::fs::create_dir_all(&folder)
        .map_err(io_with(format!("work folder {}", folder.display())))?;
    let puts = measure_put_in(&folder, size_bytes).and_then(|put| {
        let memory_put = measure_memory_put(&folder.join(INPUT_NAME), size_bytes)?;
        Ok((put, memory_put))
    });
    let removed = std::fs::remove_dir_all(&folder);
    let (put, memory_put) = puts?;
    removed.map_err(io_with(format!("removing {}", folder.display())))?;
    let ftl_alone = measure_ftl_alone(size_bytes)?;
    let raw = measure_raw(raw_operations)?;
    let report = Report {
        preset: PRESET,
        quick: arguments.quick,
        put_wall_seconds_per_gib: Verdict::at_most(
            put.put_wall_seconds_per_gib,
            PUT_TARGET_WALL_SECONDS_PER_GIB,
        ),
        stack_flash_operations_per_wall_second: Verdict::at_least(
            put.flash_operations_per_wall_second,
            STACK_TARGET_FLASH_OPERATIONS_PER_WALL_SECOND,
        ),
        raw_page_operations_per_wall_second: Verdict::at_least(
            raw.page_operations_per_wall_second,
            RAW_TARGET_PAGE_OPERATIONS_PER_WALL_SECOND,
        ),
        put,
        memory_put,
        ftl_alone,
        raw,
    };
    Ok(print_json_or_text(arguments.json, &report, print_report)?)
}

/// Writes `size_bytes` of the data pattern to `path` (not timed).
fn write_input(path: &Path, size_bytes: u64) -> BenchResult {
    let pattern = DataPattern::with_seed(RAW_SEED);
    let mut reader = DataPatternReader::new(&pattern, size_bytes);
    let file = File::create(path).map_err(io_with(path.display()))?;
    let mut writer = BufWriter::with_capacity(PUT_CHUNK_BYTES, file);
    std::io::copy(&mut reader, &mut writer)?;
    writer.flush()?;
    Ok(())
}

fn store_config() -> StoreConfig {
    StoreConfig {
        store_file_version: STORE_FILE_VERSION,
        identity: None,
        block_size_bytes: FILE_STORE_BLOCK_SIZE_BYTES,
        stripe_unit_bytes: FILE_STORE_STRIPE_UNIT_BYTES,
        queue_depth: FILE_STORE_QUEUE_DEPTH,
        devices: vec![DeviceSpec::Flash(FlashDeviceSpec::new(
            PRESET,
            Some(PathBuf::from("flash.img")),
        ))],
    }
}

/// mkfs, then the timed put, in `folder`.
fn measure_put_in(folder: &Path, size_bytes: u64) -> BenchResult<PutFigures> {
    let progress = Progress::spinner("bench flash: writing the input file");
    let input = folder.join(INPUT_NAME);
    write_input(&input, size_bytes)?;
    progress.set_message("bench flash: making the minflash store");
    let store = folder.join("store.toml");
    let image = folder.join("flash.img");
    let mkfs_started = Instant::now();
    create_store(&store_config(), &store, &mut |_| {})?;
    let mkfs_wall_seconds = mkfs_started.elapsed().as_secs_f64();
    let operations_before = synced_operation_count(&image)?;
    progress.set_message("bench flash: putting the file");
    let (put_wall_seconds, put_cpu_seconds) = timed_put(&input, size_bytes, || {
        Ok(RunningStore::open(
            &store,
            StoreAccess::ReadWrite,
            LockWait::Fail,
        )?)
    })?;
    progress.finish();
    let flash_operations = synced_operation_count(&image)? - operations_before;
    Ok(PutFigures {
        file_bytes: size_bytes,
        mkfs_wall_seconds,
        put_wall_seconds,
        put_cpu_seconds,
        put_wall_seconds_per_gib: put_wall_seconds / (size_bytes as f64 / GIB),
        flash_operations,
        flash_operations_per_wall_second: flash_operations as f64 / put_wall_seconds,
    })
}

/// Opens a store with `open` and puts `input` (of `size_bytes`) into it as one file, then
/// closes it: wall seconds and process CPU seconds, the open and the close included.
fn timed_put(
    input: &Path,
    size_bytes: u64,
    open: impl FnOnce() -> BenchResult<RunningStore>,
) -> BenchResult<(f64, Option<f64>)> {
    let (written, elapsed) = timed(|| -> BenchResult<u64> {
        let running = open()?;
        let mut client = running.client(PUT_IN_FLIGHT);
        let mut file = File::open(input).map_err(io_with(input.display()))?;
        let written = client.write_stream(
            INPUT_NAME,
            &mut file,
            PUT_CHUNK_BYTES,
            PUT_IN_FLIGHT,
            &mut |_| {},
        )?;
        drop(client);
        running.close()?;
        Ok(written)
    });
    assert_eq!(written?, size_bytes, "the whole file was put");
    Ok((elapsed.wall_seconds, elapsed.cpu_seconds))
}

/// Flash operations the FTL's statistics account for: every program (host, collection,
/// log, checkpoint), the read of each collection copy, host reads, erases.
fn flash_operations_of(work: &FtlStats) -> u64 {
    work.host_pages_written
        + 2 * work.gc_pages_copied
        + work.log_pages_written
        + work.checkpoint_pages_written
        + work.host_reads
        + work.erases
}

/// A fresh minflash device kept in memory, `FILE_STORE_QUEUE_DEPTH` requests deep.
fn memory_flash_device() -> BenchResult<FlashStoreDevice> {
    Ok(open_flash_device(
        &FlashDeviceSpec::new(PRESET, None),
        Path::new("."),
        "flash0",
        FILE_STORE_QUEUE_DEPTH,
        DeviceCreation::CreateMissing,
    )?)
}

/// The same put into a minflash store kept in memory (format not timed).
fn measure_memory_put(input: &Path, size_bytes: u64) -> BenchResult<MemoryPutFigures> {
    let progress = Progress::spinner("bench flash: putting the file into a store in memory");
    let device = memory_flash_device()?;
    let stats = device.stats_handle();
    let options = FormatOptions {
        fs_block_size_bytes: FILE_STORE_BLOCK_SIZE_BYTES,
        store_identity: None,
    };
    let filesystem = Filesystem::format(Box::new(device), &options)?;
    let before = read_stats(&stats);
    let (put_wall_seconds, put_cpu_seconds) = timed_put(input, size_bytes, || {
        Ok(RunningStore::start(filesystem, EngineConfig::default()))
    })?;
    progress.finish();
    let flash_operations = flash_operations_of(&read_stats(&stats).since(&before));
    Ok(MemoryPutFigures {
        put_wall_seconds,
        put_cpu_seconds,
        flash_operations,
        flash_operations_per_wall_second: flash_operations as f64 / put_wall_seconds,
    })
}

/// Bytes per request of the FTL-alone run.
const FTL_ALONE_REQUEST_BYTES: u64 = 1 << 20;

/// The FTL layer alone: `size_bytes` (at most the device's size) written sequentially
/// straight to a minflash device kept in memory, `FILE_STORE_QUEUE_DEPTH` requests in flight,
/// then the device closed (an FTL checkpoint), as the memory put closes its store.
fn measure_ftl_alone(size_bytes: u64) -> BenchResult<FtlAloneFigures> {
    let progress = Progress::spinner("bench flash: writing straight to the FTL in memory");
    let mut device = memory_flash_device()?;
    let stats = device.stats_handle();
    let block_size_bytes = u64::from(device.info().block_size_bytes);
    let request_blocks = (FTL_ALONE_REQUEST_BYTES / block_size_bytes).max(1);
    let request_count = size_bytes
        .div_ceil(request_blocks * block_size_bytes)
        .min(device.info().block_count / request_blocks);
    let queue_depth = u64::from(device.info().queue_depth).max(1);
    let before = read_stats(&stats);
    let (
        written_bytes,
        Elapsed {
            wall_seconds,
            cpu_seconds,
        },
    ) = timed(|| -> BenchResult<u64> {
        let written_bytes =
            write_sequentially(&mut device, request_blocks, request_count, queue_depth)?;
        device.close()?;
        Ok(written_bytes)
    });
    let written_bytes = written_bytes?;
    progress.finish();
    let flash_operations = flash_operations_of(&read_stats(&stats).since(&before));
    Ok(FtlAloneFigures {
        written_bytes,
        wall_seconds,
        cpu_seconds,
        flash_operations,
        flash_operations_per_wall_second: flash_operations as f64 / wall_seconds,
    })
}

/// Writes `request_count` requests of `request_blocks` blocks from block 0 on, at most
/// `queue_depth` in flight; returns the bytes written.
fn write_sequentially(
    device: &mut dyn BlockDevice,
    request_blocks: u64,
    request_count: u64,
    queue_depth: u64,
) -> BenchResult<u64> {
    let request_bytes = request_blocks * u64::from(device.info().block_size_bytes);
    let mut free_buffers: Vec<IoBuf> = (0..queue_depth.min(request_count))
        .map(|_| {
            let mut buffer = IoBuf::zeroed(request_bytes as usize);
            buffer.fill(0xA5);
            buffer
        })
        .collect();
    let mut completions = Vec::with_capacity(queue_depth as usize);
    let mut submitted = 0u64;
    let mut written_bytes = 0u64;
    while submitted < request_count || device.in_flight() > 0 {
        while submitted < request_count {
            let Some(buffer) = free_buffers.pop() else {
                break;
            };
            device
                .submit(Request::write(
                    submitted,
                    submitted * request_blocks,
                    buffer,
                ))
                .map_err(|rejected| rejected.error)?;
            submitted += 1;
        }
        device.wait_completions(&mut completions)?;
        for completion in completions.drain(..) {
            completion.status?;
            let buffer = completion.buffer.expect("a write hands its buffer back");
            written_bytes += buffer.len() as u64;
            free_buffers.push(buffer);
        }
    }
    Ok(written_bytes)
}

fn read_stats(stats: &std::sync::Mutex<FtlStats>) -> FtlStats {
    stats
        .lock()
        .expect("the FTL statistics lock is never poisoned")
        .clone()
}

/// `sim speed`'s run: random 4 KiB reads of a full timing-only minflash array.
fn measure_raw(operations: u64) -> BenchResult<RawFigures> {
    let (report, elapsed) = random_read_run(
        FlashConfig::preset(PRESET)?,
        (operations, "--raw-operations"),
        RAW_QUEUE_DEPTH,
        RAW_SEED,
        "bench flash: the raw model (sim speed)",
    )?;
    Ok(RawFigures {
        page_operations: report.page_operations,
        wall_seconds: elapsed.wall_seconds,
        cpu_seconds: elapsed.cpu_seconds,
        page_operations_per_wall_second: report.page_operations as f64 / elapsed.wall_seconds,
    })
}

fn cpu_text(seconds: Option<f64>) -> String {
    seconds.map_or("unknown".to_string(), |seconds| format!("{seconds:.2}"))
}

fn print_report(report: &Report) {
    let put = &report.put;
    let raw = &report.raw;
    println!(
        "emulated flash at wall speed ({} preset; wall-clock figures of this machine)",
        report.preset
    );
    println!(
        "put                {} bytes; mkfs {:.2} s; put {:.2} s wall, {} s cpu",
        put.file_bytes,
        put.mkfs_wall_seconds,
        put.put_wall_seconds,
        cpu_text(put.put_cpu_seconds)
    );
    println!(
        "whole stack        {} flash operations during the put",
        put.flash_operations
    );
    let memory = &report.memory_put;
    println!(
        "same put, memory   {:.2} s wall, {} s cpu, {} flash operations: {:.0} per wall s (no image file)",
        memory.put_wall_seconds,
        cpu_text(memory.put_cpu_seconds),
        memory.flash_operations,
        memory.flash_operations_per_wall_second
    );
    let ftl = &report.ftl_alone;
    println!(
        "FTL alone, memory  {} bytes in {:.2} s wall, {} s cpu, {} flash operations: {:.0} per wall s (no fs, no engine)",
        ftl.written_bytes,
        ftl.wall_seconds,
        cpu_text(ftl.cpu_seconds),
        ftl.flash_operations,
        ftl.flash_operations_per_wall_second
    );
    println!(
        "raw model          {} page operations in {:.2} s wall, {} s cpu",
        raw.page_operations,
        raw.wall_seconds,
        cpu_text(raw.cpu_seconds)
    );
    for (name, verdict, decimals) in [
        ("put wall s per GiB", &report.put_wall_seconds_per_gib, 2),
        (
            "stack flash ops per wall s",
            &report.stack_flash_operations_per_wall_second,
            0,
        ),
        (
            "raw page ops per wall s",
            &report.raw_page_operations_per_wall_second,
            0,
        ),
    ] {
        println!(
            "{name:<28} {:>12.decimals$}   target {} {:.decimals$}: {}",
            verdict.value,
            verdict.direction,
            verdict.target,
            verdict.word()
        );
    }
    if report.quick {
        println!("(--quick: small sizes; the verdicts are for the record only)");
    }
}
