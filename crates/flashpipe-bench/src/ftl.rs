//! `flashpipe ftl ...`: experiments with the host flash translation layer (issue #5) on
//! the NAND model in virtual time: write amplification against over-provisioning beside
//! the closed-form estimate, greedy against cost-benefit on skewed workloads, the
//! program/erase spread with and without static wear leveling, the bound on how long a
//! host write waits for collection against the longest wait observed, and the speed of
//! the simulated stack. Tables by default, `--json` for machines.

use crate::error::{internal, invalid_input, BenchError};
use crate::plot::{check_plot_path, draw_chart, Chart, ChartKind, Series};
use clap::{Args, Subcommand};
use flashpipe_bench_harness::option_range::check_within;
use flashpipe_device::{run_batch, IoBuf, Operation, SplitMix64};
use flashpipe_flash::{FlashArray, FlashConfig, FlashOptions, StorageMode};
use flashpipe_ftl::{write_distinct_pages, FlashBackend, Ftl, FtlOptions, FtlStats, VictimPolicy};

use crate::BenchResult;
use flashpipe_bench_harness::column_table::ColumnTable;
use flashpipe_bench_harness::output::print_json_or_text;

mod amplification;
use amplification::{run_hot_cold, run_write_amplification};

mod wear;
use wear::run_wear;

mod timing;
use timing::{run_gc_wait, run_speed};

/// The FTL experiments.
#[derive(Debug, Subcommand)]
pub enum FtlCommand {
    /// Write amplification vs over-provisioning, uniform random page writes, greedy GC.
    Wa(ExperimentArgs),
    /// Hot/cold workloads (80/20 and zipfian): greedy vs cost-benefit.
    Hotcold(ExperimentArgs),
    /// Program/erase spread after a skewed workload, with and without static leveling.
    Wear(ExperimentArgs),
    /// Simulated host operations per wall-clock second through the FTL.
    Speed(ExperimentArgs),
    /// Host write waits for collection: the pacing bound against the longest wait, and
    /// write amplification with pacing on and off.
    GcWait(ExperimentArgs),
    /// Copying a file by reference vs by bytes on the same store (target: 1000x less time).
    Copy(crate::ftl_copy::FtlCopyArgs),
    /// The file system on the minflash preset against the raw array (virtual time).
    Fs(crate::ftl_fs::FtlFsArgs),
    /// Fill a preset's FTL and bring it to a steady state, directly or the slow way.
    Precondition(crate::precondition::PreconditionArgs),
    /// The FTL over a preset paced against the wall clock: latency measured from outside.
    Emulate(crate::emulate::EmulateArgs),
}

/// Options shared by the experiments.
#[derive(Debug, Args)]
pub struct ExperimentArgs {
    /// Erase blocks per chip of the experiment's array (8 chips on 2 channels).
    #[arg(long, default_value_t = 64)]
    blocks_per_chip: u32,
    /// Pages per erase block.
    #[arg(long, default_value_t = 64)]
    pages_per_block: u32,
    /// Full-device writes after the initial fill (half are measured).
    #[arg(long, default_value_t = 4)]
    device_writes: u32,
    // The seed, `--json`, and `--plot`: the experiment's chart.
    #[command(flatten)]
    run: RunArgs,
}

/// The options every FTL command that draws a chart takes: the seed, JSON instead of the
/// text, and where the chart goes.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Seed of the flash model and of the workload.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print JSON instead of the text.
    #[arg(long)]
    pub json: bool,
    /// Also draw the command's chart into this PNG (title, labelled axes, legend; its
    /// folder must exist).
    #[arg(long, value_name = "PATH.png")]
    pub plot: Option<String>,
}

impl RunArgs {
    /// Refuses a `--plot` path that cannot be written, before any work is done.
    pub(crate) fn check_plot(&self) -> Result<(), BenchError> {
        match &self.plot {
            Some(path) => {
                check_plot_path(path).map_err(|error| BenchError::from(error).prefixed("--plot"))
            }
            None => Ok(()),
        }
    }

    /// Draws into the `--plot` path with `draw`, if one was given.
    pub(crate) fn draw(&self, draw: impl FnOnce(&str) -> BenchResult) -> BenchResult {
        match &self.plot {
            Some(path) => draw(path),
            None => Ok(()),
        }
    }
}

/// Runs an FTL subcommand.
pub fn run(command: FtlCommand) -> BenchResult {
    match command {
        FtlCommand::Wa(arguments) => run_write_amplification(&arguments),
        FtlCommand::Hotcold(arguments) => run_hot_cold(&arguments),
        FtlCommand::Wear(arguments) => run_wear(&arguments),
        FtlCommand::Speed(arguments) => run_speed(&arguments),
        FtlCommand::GcWait(arguments) => run_gc_wait(&arguments),
        FtlCommand::Copy(arguments) => crate::ftl_copy::run(arguments),
        FtlCommand::Fs(arguments) => crate::ftl_fs::run(arguments),
        FtlCommand::Precondition(arguments) => crate::precondition::run(arguments),
        FtlCommand::Emulate(arguments) => crate::emulate::run(arguments),
    }
}

fn check_arguments(arguments: &ExperimentArgs) -> Result<(), BenchError> {
    check_within("--blocks-per-chip", arguments.blocks_per_chip, 8..=4096)
        .map_err(invalid_input)?;
    check_within("--pages-per-block", arguments.pages_per_block, 4..=1024)
        .map_err(invalid_input)?;
    check_within("--device-writes", arguments.device_writes, 1..=200).map_err(invalid_input)?;
    arguments.run.check_plot()?;
    Ok(())
}

/// Draws the chart `make_chart` makes to the `--plot` path, if one was given.
fn plot_if_asked(arguments: &ExperimentArgs, make_chart: impl FnOnce() -> Chart) -> BenchResult {
    arguments
        .run
        .draw(|path| Ok(draw_chart(path, &make_chart())?))
}

/// Prints an experiment's rows: as JSON with `--json`, else as the table `columns` lays
/// out over them.
fn print_rows<'a, R: serde::Serialize>(
    arguments: &ExperimentArgs,
    rows: &'a [R],
    columns: impl FnOnce(&'a [R]) -> ColumnTable<'a, R>,
) -> BenchResult {
    Ok(print_json_or_text(arguments.run.json, rows, |_| {
        columns(rows).print()
    })?)
}

/// A share as a whole percentage (`0.1` reads `10%`), the over-provisioning columns' cell.
fn percent(share: f64) -> String {
    format!("{:.0}%", share * 100.0)
}

/// Whole microseconds with their unit, the wait columns' cell.
fn microseconds(value_us: f64) -> String {
    format!("{value_us:.0} us")
}

/// The bound on a host write's wait in whole microseconds, or `none` without pacing.
fn wait_bound(bound_us: Option<f64>) -> String {
    bound_us.map_or("none".to_string(), |bound| format!("{bound:.0}"))
}

/// A chart of the experiments: no paper's points.
fn experiment_chart(
    title: String,
    (x_label, y_label): (&str, &str),
    kind: ChartKind,
    series: Vec<Series>,
) -> Chart {
    Chart {
        title,
        x_label: x_label.to_string(),
        y_label: y_label.to_string(),
        kind,
        series,
        reference_points: Vec::new(),
        reference_name: String::new(),
    }
}

/// Category names for a bar chart.
fn categories(names: &[&str]) -> ChartKind {
    ChartKind::GroupedBars {
        categories: names.iter().map(|name| name.to_string()).collect(),
    }
}

/// The experiments' array: minFlash timing, 2 channels x 4 ways, 4 KiB pages.
fn experiment_config(arguments: &ExperimentArgs) -> Result<FlashConfig, BenchError> {
    let mut config = FlashConfig::preset("minflash")
        .map_err(|error| internal(format!("the minflash preset: {error}")))?;
    config.name = "ftl-experiment".to_string();
    config.geometry.channels = 2;
    config.geometry.ways = 4;
    config.geometry.blocks_per_plane = arguments.blocks_per_chip;
    config.geometry.pages_per_block = arguments.pages_per_block;
    config.geometry.page_data_bytes = 4096;
    config.geometry.page_spare_bytes = 256;
    config.reliability.grown_bad_probability_at_rated = 0.0;
    Ok(config)
}

fn experiment_ftl(
    arguments: &ExperimentArgs,
    storage: StorageMode,
    options: FtlOptions,
) -> BenchResult<Ftl> {
    check_arguments(arguments)?;
    let array = FlashArray::new(
        experiment_config(arguments)?,
        FlashOptions {
            seed: arguments.run.seed,
            storage,
            ..FlashOptions::default()
        },
    )?;
    Ok(Ftl::format(
        Box::new(array) as Box<dyn FlashBackend>,
        options,
    )?)
}

fn experiment_options(over_provisioning: f64, policy: VictimPolicy) -> FtlOptions {
    FtlOptions {
        name: "ftl".to_string(),
        over_provisioning,
        victim_policy: policy,
        checkpoint_interval_pages: 0,
        static_wear_leveling_spread: None,
        queue_depth: 32,
        ..FtlOptions::default()
    }
}

/// Builds a workload for a device of so many logical pages.
type WorkloadMaker = fn(u64) -> Workload;

/// Which logical page the next write goes to.
enum Workload {
    Uniform,
    HotCold { hot_share: f64, hot_fraction: f64 },
    Zipf { cumulative: Vec<f64> },
}

impl Workload {
    fn zipf(pages: u64, exponent: f64) -> Workload {
        let mut cumulative = Vec::with_capacity(pages as usize);
        let mut total = 0.0;
        for rank in 1..=pages {
            total += 1.0 / (rank as f64).powf(exponent);
            cumulative.push(total);
        }
        cumulative.iter_mut().for_each(|value| *value /= total);
        Workload::Zipf { cumulative }
    }

    fn next_page(&self, generator: &mut SplitMix64, pages: u64) -> u64 {
        match self {
            Workload::Uniform => generator.below(pages),
            Workload::HotCold {
                hot_share,
                hot_fraction,
            } => generator.hot_cold_below(pages, *hot_share, *hot_fraction),
            Workload::Zipf { cumulative } => {
                let draw = (generator.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                let rank = cumulative.partition_point(|&value| value < draw) as u64;
                // Scatter ranks over the device so hot pages do not share blocks by address.
                (rank.min(pages - 1) * flashpipe_base::random::GOLDEN_GAMMA % pages + pages) % pages
            }
        }
    }
}

/// Writes `count` single pages chosen by `workload`, 32 in flight.
fn write_pages(
    ftl: &mut Ftl,
    workload: &Workload,
    generator: &mut SplitMix64,
    count: u64,
) -> BenchResult {
    let pages = ftl.info().block_count;
    let mut written = 0;
    while written < count {
        if written % PROGRESS_EVERY_PAGES == 0 {
            crate::progress::set_count(written, count, "page writes");
        }
        let batch = (count - written).min(32);
        write_distinct_pages(ftl, batch, || workload.next_page(generator, pages))?;
        written += batch;
    }
    Ok(())
}

/// How often the long page loops update the spinner's count (a multiple of their batch
/// sizes, 16 and 32 pages).
const PROGRESS_EVERY_PAGES: u64 = 8192;

fn fill(ftl: &mut Ftl) -> BenchResult {
    let pages = ftl.info().block_count;
    let page_bytes = ftl.info().block_size_bytes as usize;
    let chunk = 16u64;
    for first in (0..pages).step_by(chunk as usize) {
        if first % PROGRESS_EVERY_PAGES == 0 {
            crate::progress::set_count(first, pages, "pages filled");
        }
        let count = chunk.min(pages - first);
        run_batch(
            ftl,
            vec![Operation::Write {
                first_block: first,
                buffer: IoBuf::zeroed(count as usize * page_bytes),
            }],
        )?;
    }
    Ok(())
}

/// Fills the device, writes `device_writes` x its size, measures the second half.
fn steady_state_stats(
    arguments: &ExperimentArgs,
    ftl: &mut Ftl,
    workload: &Workload,
) -> BenchResult<FtlStats> {
    let mut generator = SplitMix64::new(arguments.run.seed);
    fill(ftl)?;
    let pages = ftl.info().block_count;
    let total = pages * u64::from(arguments.device_writes);
    write_pages(ftl, workload, &mut generator, total / 2)?;
    let before = ftl.stats();
    write_pages(ftl, workload, &mut generator, total - total / 2)?;
    Ok(ftl.stats().since(&before))
}
