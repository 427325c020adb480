//! `flashpipe ftl fs`: the file system on the minflash preset (issue #5, experiments).
//!
//! In the model's virtual time (the device clock; the wall clock only for the simulator's
//! own speed) it measures:
//! 1. the raw array: sequential page writes then reads with every die busy, through the
//!    raw tagged interface, and one-page random reads one at a time;
//! 2. the same stack a store runs (engine -> file system -> FTL -> flash model): a large
//!    file written then read sequentially, as a fraction of the raw bandwidth;
//! 3. 4 KiB random reads through the engine one at a time, against the raw page latency
//!    (minFlash Table I: about 128 us for one 8 KiB page).
//!
//! Prints a table (or `--json`) and draws the transfers' progress in virtual time
//! (`--plot`): bytes done (x) against virtual milliseconds (y) for the raw write, the
//! file-system write, the raw read and the file-system read, each named in the legend;
//! a line's slope is the inverse of its bandwidth.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::error::{internal, invalid_input, BenchError, BenchErrorKind};
use crate::plot::{check_plot_path, Series};
use flashpipe_bench_harness::option_range::check_within;
use flashpipe_bench_harness::output::print_json_or_text;
use flashpipe_device::{Clock, SplitMix64};
use flashpipe_engine::{Command, Engine, EngineClient, EngineConfig, Reply};
use flashpipe_flash::{Ack, FlashConfig};
use flashpipe_fs::{Filesystem, FormatOptions};
use flashpipe_ftl::FtlStats;
use flashpipe_store::flash_store::{open_flash_device, FlashDeviceSpec};
use flashpipe_store::store::DeviceCreation;
use flashpipe_store::units::{parse_size_bytes, HumanBytes};
use serde::Serialize;

use crate::pattern::{DataPattern, DataPatternReader};
use crate::BenchResult;

mod raw;
use raw::{measure_raw, raw_operation_count};

mod output;
use output::{draw, print_table};

/// The preset the experiment runs on.
const PRESET: &str = "minflash";
/// Bytes of one random read through the file system.
const RANDOM_READ_BYTES: u64 = 4096;
/// Points of each progress line in the plot.
const PLOT_POINTS: u64 = 100;

/// `flashpipe ftl fs`: the file system on the minflash preset against the raw array.
#[derive(Debug, clap::Args)]
pub struct FtlFsArgs {
    /// Size of the file written and read sequentially (e.g. 256MiB).
    #[arg(long, default_value = "256MiB")]
    size: String,
    /// File-system block size: a multiple of the 8 KiB flash page.
    #[arg(long, default_value = "16KiB")]
    block_size: String,
    /// Bytes per engine command in the sequential phases.
    #[arg(long, default_value = "1MiB")]
    chunk: String,
    /// Engine commands in flight in the sequential phases.
    #[arg(long, default_value_t = 32)]
    in_flight: usize,
    /// Random 4 KiB reads, one at a time, for the latency figures.
    #[arg(long, default_value_t = 2000)]
    random_reads: u32,
    /// Erase blocks per chip (minflash has 4096; the FTL keeps its map in memory).
    #[arg(long, default_value_t = 64)]
    blocks_per_chip: u32,
    /// FTL requests in flight.
    #[arg(long, default_value_t = 128)]
    queue_depth: u32,
    /// Host pages between FTL checkpoints (0: only when the log fills; the store default).
    #[arg(long, default_value_t = 0)]
    checkpoint_interval_pages: u64,
    /// Seed of the array and of the random offsets.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Draw the transfers' progress in virtual time into this PNG (MiB done against
    /// virtual milliseconds: raw write, file-system write, raw read, file-system read).
    #[arg(long)]
    plot: Option<PathBuf>,
}

/// The checked arguments.
struct Plan {
    size_bytes: u64,
    block_size_bytes: u32,
    chunk_bytes: usize,
    in_flight: usize,
    random_reads: u32,
    queue_depth: u32,
    checkpoint_interval_pages: u64,
    seed: u64,
    config: FlashConfig,
}

fn plan(arguments: &FtlFsArgs) -> BenchResult<Plan> {
    let mut config = FlashConfig::preset(PRESET)?;
    let preset_blocks = config.geometry.blocks_per_plane;
    if !(8..=preset_blocks).contains(&arguments.blocks_per_chip) {
        return Err(invalid_input(format!(
            "--blocks-per-chip {} is not within 8..={preset_blocks}",
            arguments.blocks_per_chip
        ))
        .into());
    }
    config.geometry.blocks_per_plane = arguments.blocks_per_chip;
    let page_bytes = u64::from(config.geometry.page_data_bytes);
    let size_bytes = parse_size_bytes(&arguments.size)?;
    let raw_bytes = config.total_pages() * page_bytes;
    if size_bytes < 1 << 20 || size_bytes % page_bytes != 0 || size_bytes > raw_bytes / 2 {
        return Err(invalid_input(format!(
            "--size {} is not a whole number of 8 KiB pages from 1 MiB to half the array ({})",
            arguments.size,
            HumanBytes(raw_bytes / 2)
        ))
        .into());
    }
    let block_size_bytes = parse_size_bytes(&arguments.block_size)?;
    if block_size_bytes % page_bytes != 0 || block_size_bytes > 1 << 20 {
        return Err(invalid_input(format!(
            "--block-size {} is not a multiple of the 8 KiB flash page up to 1 MiB",
            arguments.block_size
        ))
        .into());
    }
    let chunk_bytes = parse_size_bytes(&arguments.chunk)?;
    if chunk_bytes == 0 || chunk_bytes % 4096 != 0 || chunk_bytes > 1 << 20 {
        return Err(invalid_input(format!(
            "--chunk {} is not a multiple of 4 KiB up to 1 MiB (the engine's largest read)",
            arguments.chunk
        ))
        .into());
    }
    check_range("--in-flight", arguments.in_flight as u64, 1, 256)?;
    check_range(
        "--random-reads",
        u64::from(arguments.random_reads),
        1,
        1_000_000,
    )?;
    check_range("--queue-depth", u64::from(arguments.queue_depth), 1, 256)?;
    Ok(Plan {
        size_bytes,
        block_size_bytes: block_size_bytes as u32,
        chunk_bytes: chunk_bytes as usize,
        in_flight: arguments.in_flight,
        random_reads: arguments.random_reads,
        queue_depth: arguments.queue_depth,
        checkpoint_interval_pages: arguments.checkpoint_interval_pages,
        seed: arguments.seed,
        config,
    })
}

fn check_range(flag: &str, value: u64, low: u64, high: u64) -> Result<(), BenchError> {
    check_within(flag, value, low..=high).map_err(invalid_input)
}

/// Latency figures of one-at-a-time reads, in virtual microseconds.
#[derive(Debug, Clone, Serialize)]
struct LatencyFigures {
    reads: usize,
    latency_us_mean: f64,
    latency_us_p50: f64,
    latency_us_p99: f64,
    latency_us_max: f64,
}

impl LatencyFigures {
    fn from_ns(latencies_ns: &[u64]) -> LatencyFigures {
        let mut sorted_us: Vec<f64> = latencies_ns.iter().map(|&ns| ns as f64 / 1e3).collect();
        sorted_us.sort_by(f64::total_cmp);
        let quantile = |share: f64| {
            let index =
                ((sorted_us.len() as f64 * share).ceil() as usize).clamp(1, sorted_us.len());
            sorted_us[index - 1]
        };
        LatencyFigures {
            reads: sorted_us.len(),
            latency_us_mean: sorted_us.iter().sum::<f64>() / sorted_us.len() as f64,
            latency_us_p50: quantile(0.5),
            latency_us_p99: quantile(0.99),
            latency_us_max: quantile(1.0),
        }
    }
}

/// Bytes done against virtual time during one transfer, kept at about [`PLOT_POINTS`]
/// evenly spaced marks.
#[derive(Debug, Clone, Default)]
struct Progress {
    points: Vec<(f64, f64)>,
    next_mark_bytes: u64,
}

impl Progress {
    fn record(&mut self, total_bytes: u64, done_bytes: u64, elapsed_ns: u64) {
        if done_bytes < self.next_mark_bytes {
            return;
        }
        self.points.push((
            done_bytes as f64 / (1 << 20) as f64,
            elapsed_ns as f64 / 1e6,
        ));
        self.next_mark_bytes = done_bytes + (total_bytes / PLOT_POINTS).max(1);
    }

    fn from_acks(acks: &[Ack], started_ns: u64, page_bytes: u64) -> Progress {
        let mut completed_ns: Vec<u64> = acks.iter().map(|ack| ack.completed_ns).collect();
        completed_ns.sort_unstable();
        let total_bytes = completed_ns.len() as u64 * page_bytes;
        let mut progress = Progress::default();
        for (index, &at_ns) in completed_ns.iter().enumerate() {
            progress.record(
                total_bytes,
                (index as u64 + 1) * page_bytes,
                at_ns - started_ns,
            );
        }
        progress
    }

    fn series(&self, name: &str) -> Series {
        Series::new(name, self.points.iter().copied())
    }
}

/// The raw array's figures.
#[derive(Debug, Clone, Serialize)]
struct RawFigures {
    sequential_write_mib_per_s: f64,
    sequential_read_mib_per_s: f64,
    page_read: LatencyFigures,
    #[serde(skip)]
    write_progress: Progress,
    #[serde(skip)]
    read_progress: Progress,
}

/// What the FTL wrote besides the host's pages during a phase.
#[derive(Debug, Clone, Serialize)]
struct FtlWork {
    host_pages_written: u64,
    checkpoint_pages_written: u64,
    log_pages_written: u64,
    gc_pages_copied: u64,
    erases: u64,
}

impl FtlWork {
    fn between(before: &FtlStats, after: &FtlStats) -> FtlWork {
        let delta = after.since(before);
        FtlWork {
            host_pages_written: delta.host_pages_written,
            checkpoint_pages_written: delta.checkpoint_pages_written,
            log_pages_written: delta.log_pages_written,
            gc_pages_copied: delta.gc_pages_copied,
            erases: delta.erases,
        }
    }
}

/// The file system's figures.
#[derive(Debug, Clone, Serialize)]
struct FsFigures {
    file_bytes: u64,
    sequential_write_mib_per_s: f64,
    sequential_read_mib_per_s: f64,
    write_share_of_raw: f64,
    read_share_of_raw: f64,
    write_ftl_work: FtlWork,
    random_read: LatencyFigures,
    random_read_mean_over_raw_page: f64,
    #[serde(skip)]
    write_progress: Progress,
    #[serde(skip)]
    read_progress: Progress,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
struct Report {
    preset: String,
    blocks_per_chip: u32,
    dies: u64,
    page_bytes: u32,
    fs_block_size_bytes: u32,
    ftl_queue_depth: u32,
    ftl_checkpoint_interval_pages: u64,
    engine_commands_in_flight: usize,
    raw: RawFigures,
    fs: FsFigures,
    raw_flash_operations: u64,
    raw_wall_seconds: f64,
    raw_flash_operations_per_wall_second: f64,
    stack_flash_operations: u64,
    stack_wall_seconds: f64,
    stack_flash_operations_per_wall_second: f64,
}

/// Runs `flashpipe ftl fs`.
pub fn run(arguments: FtlFsArgs) -> BenchResult {
    if let Some(path) = &arguments.plot {
        let path_text = path
            .to_str()
            .ok_or_else(|| invalid_input(format!("--plot {}: not UTF-8", path.display())))?;
        check_plot_path(path_text).map_err(|error| BenchError::from(error).prefixed("--plot"))?;
    }
    let plan = plan(&arguments)?;
    let progress = crate::progress::Progress::spinner("ftl fs: raw flash commands");
    let wall_started = Instant::now();
    let raw = measure_raw(&plan)?;
    let raw_operations = raw_operation_count(&plan);
    let raw_wall_seconds = wall_started.elapsed().as_secs_f64();
    progress.set_message("ftl fs: the file system over the FTL");
    let (fs, stack_operations) = measure_fs(&plan, &raw)?;
    let stack_wall_seconds = wall_started.elapsed().as_secs_f64() - raw_wall_seconds;
    let geometry = &plan.config.geometry;
    let report = Report {
        preset: PRESET.to_string(),
        blocks_per_chip: geometry.blocks_per_plane,
        dies: plan.config.total_pages()
            / u64::from(geometry.blocks_per_plane)
            / u64::from(geometry.pages_per_block),
        page_bytes: geometry.page_data_bytes,
        fs_block_size_bytes: plan.block_size_bytes,
        ftl_queue_depth: plan.queue_depth,
        ftl_checkpoint_interval_pages: plan.checkpoint_interval_pages,
        engine_commands_in_flight: plan.in_flight,
        raw,
        fs,
        raw_flash_operations: raw_operations,
        raw_wall_seconds,
        raw_flash_operations_per_wall_second: raw_operations as f64 / raw_wall_seconds,
        stack_flash_operations: stack_operations,
        stack_wall_seconds,
        stack_flash_operations_per_wall_second: stack_operations as f64 / stack_wall_seconds,
    };
    progress.finish();
    if let Some(path) = &arguments.plot {
        draw(path, &report)?;
    }
    Ok(print_json_or_text(arguments.json, &report, print_table)?)
}

fn mib_per_s(bytes: u64, elapsed_ns: u64) -> f64 {
    assert!(elapsed_ns > 0, "a transfer took no virtual time");
    bytes as f64 / (1 << 20) as f64 / (elapsed_ns as f64 / 1e9)
}

const FILE_NAME: &str = "sequential.bin";

/// The store the experiment runs on: minflash in memory under the FTL, the file system,
/// the engine.
struct FlashStack {
    engine: Engine,
    clock: Arc<dyn Clock>,
    ftl_stats: Arc<Mutex<FtlStats>>,
}

impl FlashStack {
    fn start(plan: &Plan) -> BenchResult<FlashStack> {
        let mut spec = FlashDeviceSpec::new(PRESET, None);
        spec.blocks_per_plane = Some(plan.config.geometry.blocks_per_plane);
        spec.seed = plan.seed;
        spec.checkpoint_interval_pages = Some(plan.checkpoint_interval_pages);
        let device = open_flash_device(
            &spec,
            Path::new("."),
            "flash0",
            plan.queue_depth,
            DeviceCreation::CreateMissing,
        )?;
        let ftl_stats = device.stats_handle();
        let options = FormatOptions {
            fs_block_size_bytes: plan.block_size_bytes,
            store_identity: None,
        };
        let filesystem = Filesystem::format(Box::new(device), &options)?;
        let clock = filesystem.clock();
        assert!(clock.is_virtual(), "the flash store runs in virtual time");
        Ok(FlashStack {
            engine: Engine::start(
                filesystem,
                EngineConfig {
                    write_path: crate::fs::write_path_from_environment(),
                    ..EngineConfig::default()
                },
            ),
            clock,
            ftl_stats,
        })
    }

    fn ftl_stats(&self) -> FtlStats {
        self.ftl_stats
            .lock()
            .expect("the FTL statistics lock is never poisoned")
            .clone()
    }
}

fn flush(client: &mut EngineClient) -> BenchResult {
    client.call(Command::Flush)?;
    Ok(())
}

/// Measures the stack; returns its figures and the flash operations it simulated.
fn measure_fs(plan: &Plan, raw: &RawFigures) -> BenchResult<(FsFigures, u64)> {
    let stack = FlashStack::start(plan)?;
    let mut client = stack.engine.client(plan.in_flight.max(2));
    let pattern = DataPattern::with_seed(plan.seed);
    let stats_before = stack.ftl_stats();
    let started_ns = stack.clock.now_ns();
    let mut source = DataPatternReader::new(&pattern, plan.size_bytes);
    let mut write_progress = Progress::default();
    let clock = Arc::clone(&stack.clock);
    client.write_stream(
        FILE_NAME,
        &mut source,
        plan.chunk_bytes,
        plan.in_flight,
        &mut |done_bytes| {
            write_progress.record(plan.size_bytes, done_bytes, clock.now_ns() - started_ns)
        },
    )?;
    flush(&mut client)?;
    let write_ns = stack.clock.now_ns() - started_ns;
    write_progress.record(plan.size_bytes, plan.size_bytes, write_ns);
    let stats_after_write = stack.ftl_stats();
    let started_ns = stack.clock.now_ns();
    let mut delivered_bytes = 0u64;
    let mut sink = |bytes: &[u8]| {
        let intact = pattern.matches(delivered_bytes, bytes);
        delivered_bytes += bytes.len() as u64;
        if intact {
            Ok(())
        } else {
            Err(std::io::Error::other(format!(
                "the file read back differs near byte {delivered_bytes}"
            )))
        }
    };
    let mut read_progress = Progress::default();
    let read_bytes = client.read_stream(
        FILE_NAME,
        &mut sink,
        plan.chunk_bytes as u64,
        plan.in_flight,
        &mut |done_bytes| {
            read_progress.record(plan.size_bytes, done_bytes, clock.now_ns() - started_ns)
        },
    )?;
    let read_ns = stack.clock.now_ns() - started_ns;
    assert_eq!(read_bytes, plan.size_bytes, "the whole file was read back");
    let random_read = random_reads(plan, &mut client, &stack.clock, &pattern)?;
    drop(client);
    stack.engine.shutdown()?;
    let write_ftl_work = FtlWork::between(&stats_before, &stats_after_write);
    let page_bytes = u64::from(plan.config.geometry.page_data_bytes);
    let flash_operations = write_ftl_work.host_pages_written
        + write_ftl_work.checkpoint_pages_written
        + write_ftl_work.log_pages_written
        + write_ftl_work.gc_pages_copied
        + write_ftl_work.erases
        + plan.size_bytes / page_bytes
        + u64::from(plan.random_reads);
    let sequential_write_mib_per_s = mib_per_s(plan.size_bytes, write_ns);
    let sequential_read_mib_per_s = mib_per_s(plan.size_bytes, read_ns);
    let figures = FsFigures {
        file_bytes: plan.size_bytes,
        sequential_write_mib_per_s,
        sequential_read_mib_per_s,
        write_share_of_raw: sequential_write_mib_per_s / raw.sequential_write_mib_per_s,
        read_share_of_raw: sequential_read_mib_per_s / raw.sequential_read_mib_per_s,
        write_ftl_work,
        random_read_mean_over_raw_page: random_read.latency_us_mean / raw.page_read.latency_us_mean,
        random_read,
        write_progress,
        read_progress,
    };
    Ok((figures, flash_operations))
}

/// 4 KiB reads at random 4 KiB-aligned offsets of the file, one at a time, each checked.
fn random_reads(
    plan: &Plan,
    client: &mut EngineClient,
    clock: &Arc<dyn Clock>,
    pattern: &DataPattern,
) -> BenchResult<LatencyFigures> {
    let mut generator = SplitMix64::new(plan.seed ^ 0x4ead);
    let slots = plan.size_bytes / RANDOM_READ_BYTES;
    let mut latencies_ns = Vec::with_capacity(plan.random_reads as usize);
    for _ in 0..plan.random_reads {
        let offset_bytes = generator.below(slots) * RANDOM_READ_BYTES;
        let started_ns = clock.now_ns();
        let reply = client.call(Command::Read {
            name: FILE_NAME.to_string(),
            offset_bytes,
            length_bytes: RANDOM_READ_BYTES,
        })?;
        latencies_ns.push(clock.now_ns() - started_ns);
        let Reply::Data(data) = reply else {
            return Err(internal("the engine answered a read with no data").into());
        };
        if !pattern.matches(offset_bytes, data.bytes()) {
            return Err(BenchError::new(
                BenchErrorKind::Io(std::io::ErrorKind::InvalidData),
                format!("the 4 KiB read at {offset_bytes} differs from what was written"),
            )
            .into());
        }
    }
    Ok(LatencyFigures::from_ns(&latencies_ns))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Harness {
        #[command(flatten)]
        arguments: FtlFsArgs,
    }

    fn arguments(line: &[&str]) -> FtlFsArgs {
        let mut words = vec!["ftl-fs"];
        words.extend_from_slice(line);
        Harness::try_parse_from(words).unwrap().arguments
    }

    #[test]
    fn a_small_run_measures_both_sides_and_draws_the_plot() {
        let plot =
            std::env::temp_dir().join(format!("flashpipe-ftl-fs-{}.png", std::process::id()));
        let small = [
            "--size",
            "8MiB",
            "--random-reads",
            "50",
            "--blocks-per-chip",
            "16",
        ];
        let plan = plan(&arguments(&small)).unwrap();
        let raw = measure_raw(&plan).unwrap();
        assert!(raw.sequential_read_mib_per_s > 100.0, "{raw:?}");
        assert!(raw.sequential_write_mib_per_s > 100.0, "{raw:?}");
        assert!(
            (100.0..200.0).contains(&raw.page_read.latency_us_mean),
            "{raw:?}"
        );
        let (fs, operations) = measure_fs(&plan, &raw).unwrap();
        assert!(fs.sequential_read_mib_per_s > 0.0 && fs.sequential_write_mib_per_s > 0.0);
        assert!(
            fs.random_read.latency_us_mean >= raw.page_read.latency_us_mean * 0.9,
            "{fs:?}"
        );
        assert!(operations >= 2 * 1024, "{operations}");
        let mut with_plot = small.to_vec();
        with_plot.extend(["--plot", plot.to_str().unwrap(), "--json"]);
        run(arguments(&with_plot)).unwrap();
        assert_eq!(&std::fs::read(&plot).unwrap()[1..4], b"PNG");
        std::fs::remove_file(&plot).unwrap();
    }

    #[test]
    fn bad_arguments_are_refused_clearly() {
        for (line, fragment) in [
            (vec!["--size", "1000"], "--size 1000"),
            (vec!["--size", "64GiB"], "half the array"),
            (
                vec!["--block-size", "4KiB"],
                "multiple of the 8 KiB flash page",
            ),
            (vec!["--chunk", "3MiB"], "--chunk 3MiB"),
            (vec!["--blocks-per-chip", "9000"], "--blocks-per-chip 9000"),
            (vec!["--in-flight", "0"], "--in-flight 0"),
            (vec!["--size", "lots"], "lots"),
        ] {
            let error = run(arguments(&line)).unwrap_err().to_string();
            assert!(
                error.contains(fragment),
                "{line:?}: {error:?} lacks {fragment:?}"
            );
        }
    }
}
