//! `flashpipe ftl ...`: experiments with the host flash translation layer (issue #5) on
//! the NAND model in virtual time: write amplification against over-provisioning beside
//! the closed-form estimate, greedy against cost-benefit on skewed workloads, the
//! program/erase spread with and without static wear leveling, the bound on how long a
//! host write waits for collection against the longest wait observed, and the speed of
//! the simulated stack. Tables by default, `--json` for machines.

use std::time::Instant;

use crate::error::{internal, invalid_input, BenchError};
use crate::plot::{check_plot_path, draw_chart, Chart, ChartKind, Series};
use clap::{Args, Subcommand};
use flashpipe_device::{run_batch, BlockDevice, IoBuf, Operation, SplitMix64};
use flashpipe_flash::{FlashArray, FlashConfig, FlashOptions, StorageMode};
use flashpipe_ftl::{FlashBackend, Ftl, FtlOptions, FtlStats, VictimPolicy};
use serde::Serialize;

use crate::progress::Progress;
use crate::table::{Align, Table};
use crate::BenchResult;

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
    /// Seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Also draw the result as a PNG chart here (title, labelled axes, legend).
    #[arg(long, value_name = "PATH.png")]
    plot: Option<String>,
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
    if !(8..=4096).contains(&arguments.blocks_per_chip) {
        return Err(invalid_input(format!(
            "--blocks-per-chip {} is not within 8..=4096",
            arguments.blocks_per_chip
        )));
    }
    if !(4..=1024).contains(&arguments.pages_per_block) {
        return Err(invalid_input(format!(
            "--pages-per-block {} is not within 4..=1024",
            arguments.pages_per_block
        )));
    }
    if !(1..=200).contains(&arguments.device_writes) {
        return Err(invalid_input(format!(
            "--device-writes {} is not within 1..=200",
            arguments.device_writes
        )));
    }
    if let Some(path) = &arguments.plot {
        check_plot_path(path).map_err(|error| BenchError::from(error).prefixed("--plot"))?;
    }
    Ok(())
}

/// Draws the chart `make_chart` makes to the `--plot` path, if one was given.
fn plot_if_asked(arguments: &ExperimentArgs, make_chart: impl FnOnce() -> Chart) -> BenchResult {
    if let Some(path) = &arguments.plot {
        draw_chart(path, &make_chart())?;
    }
    Ok(())
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
            seed: arguments.seed,
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
            } => {
                let hot_pages = ((pages as f64 * hot_fraction) as u64).max(1);
                if generator.chance(*hot_share) {
                    generator.below(hot_pages)
                } else {
                    hot_pages + generator.below(pages - hot_pages)
                }
            }
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
    let page_bytes = ftl.info().block_size_bytes as usize;
    let mut written = 0;
    while written < count {
        if written % PROGRESS_EVERY_PAGES == 0 {
            crate::progress::set_count(written, count, "page writes");
        }
        let batch = (count - written).min(32);
        let mut chosen: Vec<u64> = Vec::with_capacity(batch as usize);
        while (chosen.len() as u64) < batch {
            let page = workload.next_page(generator, pages);
            if !chosen.contains(&page) {
                chosen.push(page);
            }
        }
        let operations = chosen
            .into_iter()
            .map(|page| Operation::Write {
                first_block: page,
                buffer: IoBuf::zeroed(page_bytes),
            })
            .collect();
        run_batch(ftl, operations)?;
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
    let mut generator = SplitMix64::new(arguments.seed);
    fill(ftl)?;
    let pages = ftl.info().block_count;
    let total = pages * u64::from(arguments.device_writes);
    write_pages(ftl, workload, &mut generator, total / 2)?;
    let before = ftl.stats();
    write_pages(ftl, workload, &mut generator, total - total / 2)?;
    Ok(ftl.stats().since(&before))
}

/// The principal branch of Lambert's W for x in [-1/e, 0], by Halley's iteration.
fn lambert_w0(x: f64) -> f64 {
    let mut w = if x < -0.25 { -0.5 } else { x };
    for _ in 0..100 {
        let exponential = w.exp();
        let value = w * exponential - x;
        let step = value / (exponential * (w + 1.0) - (w + 2.0) * value / (2.0 * w + 2.0));
        w -= step;
        if step.abs() < 1e-14 {
            break;
        }
    }
    w
}

/// Closed-form write amplification of uniform random writes with physical/logical ratio
/// `alpha` (Hu et al. 2009, Desnoyers 2012: exact for FIFO cleaning, the large-block
/// limit of greedy).
fn closed_form_write_amplification(alpha: f64) -> f64 {
    alpha / (alpha + lambert_w0(-alpha * (-alpha).exp()))
}

#[derive(Debug, Serialize)]
struct WriteAmplificationRow {
    over_provisioning: f64,
    logical_pages: u64,
    physical_data_pages: u64,
    physical_over_logical: f64,
    write_amplification: f64,
    write_amplification_closed_form: f64,
    gc_pages_copied: u64,
    gc_busy_seconds_virtual: f64,
    host_write_wait_us_max: f64,
    host_write_wait_bound_us: Option<f64>,
}

/// Pages that can hold data in steady state: good blocks less the checkpoint and log
/// blocks and the free blocks garbage collection keeps.
fn physical_data_pages(ftl: &Ftl) -> u64 {
    let config = ftl.backend().config();
    let stats = ftl.stats();
    let good_blocks = config.total_blocks() - u64::from(stats.retired_blocks);
    let checkpoint_blocks = (ftl.info().block_count * 8).div_ceil(u64::from(
        config.geometry.page_data_bytes * config.geometry.pages_per_block,
    )) + 1;
    let held_back = 2 * checkpoint_blocks + 2 + u64::from(ftl.free_block_target());
    (good_blocks - held_back) * u64::from(config.geometry.pages_per_block)
}

fn run_write_amplification(arguments: &ExperimentArgs) -> BenchResult {
    let progress = Progress::spinner("write amplification");
    let mut rows = Vec::new();
    for over_provisioning in [0.07, 0.10, 0.15, 0.20, 0.28, 0.35, 0.50] {
        progress.set_message(format!(
            "write amplification, {:.0}% over-provisioned",
            over_provisioning * 100.0
        ));
        let options = experiment_options(over_provisioning, VictimPolicy::Greedy);
        let mut ftl = experiment_ftl(arguments, StorageMode::TimingOnly, options)?;
        let stats = steady_state_stats(arguments, &mut ftl, &Workload::Uniform)?;
        let logical = ftl.info().block_count;
        let physical = physical_data_pages(&ftl);
        let alpha = physical as f64 / logical as f64;
        rows.push(WriteAmplificationRow {
            over_provisioning,
            logical_pages: logical,
            physical_data_pages: physical,
            physical_over_logical: alpha,
            write_amplification: stats.write_amplification(),
            write_amplification_closed_form: closed_form_write_amplification(alpha),
            gc_pages_copied: stats.gc_pages_copied,
            gc_busy_seconds_virtual: stats.gc_busy_ns as f64 / 1e9,
            host_write_wait_us_max: ftl.stats().host_write_wait_ns_max as f64 / 1e3,
            host_write_wait_bound_us: ftl
                .host_write_wait_bound_ns()
                .map(|bound_ns| bound_ns as f64 / 1e3),
        });
    }
    progress.finish();
    plot_if_asked(arguments, || {
        experiment_chart(
            "FTL write amplification vs over-provisioning (uniform random page writes, greedy GC)"
                .to_string(),
            (
                "over-provisioning (% of the logical space)",
                "write amplification (flash page writes / host page writes)",
            ),
            ChartKind::Lines,
            vec![
                Series::new(
                    "measured (simulated FTL)",
                    rows.iter()
                        .map(|row| (row.over_provisioning * 100.0, row.write_amplification)),
                ),
                Series::new(
                    "closed form (uniform writes, greedy)",
                    rows.iter().map(|row| {
                        (
                            row.over_provisioning * 100.0,
                            row.write_amplification_closed_form,
                        )
                    }),
                ),
            ],
        )
    })?;
    if arguments.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    let mut table = Table::new("  ")
        .right("over-prov", 9)
        .right("physical/logical", 16)
        .right("WA measured", 11)
        .right("WA closed form", 14)
        .right("GC copied", 9)
        .right("max host wait", 13)
        .right("wait bound", 10);
    for row in &rows {
        let bound = row
            .host_write_wait_bound_us
            .map_or("none".to_string(), |bound| format!("{bound:.0}"));
        table.row(vec![
            format!("{:.0}%", row.over_provisioning * 100.0),
            format!("{:.3}", row.physical_over_logical),
            format!("{:.2}", row.write_amplification),
            format!("{:.2}", row.write_amplification_closed_form),
            row.gc_pages_copied.to_string(),
            format!("{:.0} us", row.host_write_wait_us_max),
            format!("{bound:>7} us"),
        ]);
    }
    table.print();
    Ok(())
}

#[derive(Debug, Serialize)]
struct PolicyRow {
    workload: &'static str,
    policy: &'static str,
    write_amplification: f64,
    gc_pages_copied: u64,
    gc_victims: u64,
}

fn run_hot_cold(arguments: &ExperimentArgs) -> BenchResult {
    let mut rows = Vec::new();
    let workloads: [(&'static str, WorkloadMaker); 3] = [
        ("uniform", |_| Workload::Uniform),
        ("80/20", |_| Workload::HotCold {
            hot_share: 0.8,
            hot_fraction: 0.2,
        }),
        ("zipf(0.99)", |pages| Workload::zipf(pages, 0.99)),
    ];
    let progress = Progress::spinner("hot and cold data");
    for (name, make_workload) in workloads {
        for (policy_name, policy) in [
            ("greedy", VictimPolicy::Greedy),
            ("cost-benefit", VictimPolicy::CostBenefit),
        ] {
            progress.set_message(format!(
                "hot and cold data: {name} writes, {policy_name} GC"
            ));
            let options = experiment_options(0.10, policy);
            let mut ftl = experiment_ftl(arguments, StorageMode::TimingOnly, options)?;
            let workload = make_workload(ftl.info().block_count);
            let stats = steady_state_stats(arguments, &mut ftl, &workload)?;
            rows.push(PolicyRow {
                workload: name,
                policy: policy_name,
                write_amplification: stats.write_amplification(),
                gc_pages_copied: stats.gc_pages_copied,
                gc_victims: stats.gc_victims,
            });
        }
    }
    let by_policy = |policy: &str| {
        Series::new(
            format!("{policy} victim choice"),
            rows.iter()
                .filter(|row| row.policy == policy)
                .enumerate()
                .map(|(index, row)| (index as f64, row.write_amplification)),
        )
    };
    progress.finish();
    plot_if_asked(arguments, || {
        experiment_chart(
            "FTL garbage collection policies on skewed workloads (over-provisioning 10%)"
                .to_string(),
            (
                "workload (share of writes to the hot pages)",
                "write amplification (flash / host page writes)",
            ),
            categories(&["uniform", "80/20", "zipf(0.99)"]),
            vec![by_policy("greedy"), by_policy("cost-benefit")],
        )
    })?;
    if arguments.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    let mut table = Table::new(" ")
        .caption("workload     policy        WA     GC copied  victims   (over-provisioning 10%)")
        .left("workload", 12)
        .left("policy", 12)
        .right("WA", 5)
        .column_after("  ", "GC copied", 10, Align::Right)
        .column_after("  ", "victims", 7, Align::Right);
    for row in &rows {
        table.row(vec![
            row.workload.to_string(),
            row.policy.to_string(),
            format!("{:.2}", row.write_amplification),
            row.gc_pages_copied.to_string(),
            row.gc_victims.to_string(),
        ]);
    }
    table.print();
    Ok(())
}

#[derive(Debug, Serialize)]
struct WearRow {
    static_wear_leveling_spread: Option<u32>,
    device_writes: u32,
    erase_count_min: u32,
    erase_count_mean: f64,
    erase_count_max: u32,
    static_moves: u64,
    write_amplification: f64,
}

fn run_wear(arguments: &ExperimentArgs) -> BenchResult {
    let progress = Progress::spinner("wear");
    let mut rows = Vec::new();
    for spread in [None, Some(16)] {
        progress.set_message(match spread {
            None => "wear: without static wear leveling".to_string(),
            Some(spread) => format!("wear: static wear leveling, spread {spread}"),
        });
        let options = FtlOptions {
            static_wear_leveling_spread: spread,
            ..experiment_options(0.10, VictimPolicy::Greedy)
        };
        let mut ftl = experiment_ftl(arguments, StorageMode::TimingOnly, options)?;
        let workload = Workload::zipf(ftl.info().block_count, 0.99);
        steady_state_stats(arguments, &mut ftl, &workload)?;
        let stats = ftl.stats();
        rows.push(WearRow {
            static_wear_leveling_spread: spread,
            device_writes: arguments.device_writes,
            erase_count_min: stats.erase_count_min,
            erase_count_mean: stats.erase_count_mean,
            erase_count_max: stats.erase_count_max,
            static_moves: stats.static_wear_leveling_moves,
            write_amplification: stats.write_amplification(),
        });
    }
    progress.finish();
    plot_if_asked(arguments, || {
        experiment_chart(
            format!(
                "FTL program/erase spread, zipf(0.99) writes, {} device writes",
                arguments.device_writes
            ),
            (
                "erase count over all blocks",
                "program/erase cycles per block",
            ),
            categories(&["least worn block", "mean", "most worn block"]),
            rows.iter()
                .map(|row| {
                    let name = row
                        .static_wear_leveling_spread
                        .map_or("static wear leveling off".to_string(), |spread| {
                            format!("static wear leveling on (spread > {spread})")
                        });
                    Series::new(
                        name,
                        [
                            (0.0, f64::from(row.erase_count_min)),
                            (1.0, row.erase_count_mean),
                            (2.0, f64::from(row.erase_count_max)),
                        ],
                    )
                })
                .collect(),
        )
    })?;
    if arguments.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    let caption = format!(
        "static leveling   P/E min   mean    max   moves   WA   (zipf 0.99, {} device writes)",
        arguments.device_writes
    );
    let mut table = Table::new(" ")
        .caption(&caption)
        .left("static leveling", 16)
        .right("P/E min", 7)
        .right("mean", 7)
        .right("max", 6)
        .right("moves", 7)
        .right("WA", 5);
    for row in &rows {
        let label = row
            .static_wear_leveling_spread
            .map_or("off".to_string(), |spread| format!("spread > {spread}"));
        table.row(vec![
            label,
            row.erase_count_min.to_string(),
            format!("{:.1}", row.erase_count_mean),
            row.erase_count_max.to_string(),
            row.static_moves.to_string(),
            format!("{:.2}", row.write_amplification),
        ]);
    }
    table.print();
    Ok(())
}

#[derive(Debug, Serialize)]
struct SpeedRow {
    storage: &'static str,
    host_operations: u64,
    wall_seconds: f64,
    host_operations_per_wall_second: f64,
    virtual_seconds: f64,
}

fn run_speed(arguments: &ExperimentArgs) -> BenchResult {
    let progress = Progress::spinner("speed");
    let mut rows = Vec::new();
    for (name, storage) in [
        ("timing only", StorageMode::TimingOnly),
        ("data in memory", StorageMode::Memory),
    ] {
        progress.set_message(format!("speed: measuring the FTL with {name}"));
        let options = experiment_options(0.10, VictimPolicy::Greedy);
        let mut ftl = experiment_ftl(arguments, storage, options)?;
        let clock = ftl.clock();
        let started_virtual_ns = clock.now_ns();
        let started = Instant::now();
        let mut generator = SplitMix64::new(arguments.seed);
        fill(&mut ftl)?;
        let pages = ftl.info().block_count;
        let total = pages * u64::from(arguments.device_writes);
        write_pages(&mut ftl, &Workload::Uniform, &mut generator, total)?;
        let wall_seconds = started.elapsed().as_secs_f64();
        let operations = pages + total;
        rows.push(SpeedRow {
            storage: name,
            host_operations: operations,
            wall_seconds,
            host_operations_per_wall_second: operations as f64 / wall_seconds,
            virtual_seconds: (clock.now_ns() - started_virtual_ns) as f64 / 1e9,
        });
    }
    progress.finish();
    plot_if_asked(arguments, || {
        experiment_chart(
            "Speed of the simulated FTL stack (wall clock of this machine)".to_string(),
            (
                "where the simulated flash keeps page data",
                "host 4 KiB writes per wall-clock second",
            ),
            categories(&["timing only (no data)", "data in memory"]),
            vec![Series::new(
                "simulated host writes per wall-clock second",
                rows.iter()
                    .enumerate()
                    .map(|(index, row)| (index as f64, row.host_operations_per_wall_second)),
            )],
        )
    })?;
    if arguments.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    let mut table = Table::new(" ")
        .caption("storage          host 4 KiB writes   wall s   ops per wall s   virtual s")
        .left("storage", 16)
        .right("host 4 KiB writes", 17)
        .right("wall s", 8)
        .right("ops per wall s", 16)
        .right("virtual s", 11);
    for row in &rows {
        table.row(vec![
            row.storage.to_string(),
            row.host_operations.to_string(),
            format!("{:.2}", row.wall_seconds),
            format!("{:.0}", row.host_operations_per_wall_second),
            format!("{:.2}", row.virtual_seconds),
        ]);
    }
    table.print();
    Ok(())
}

#[derive(Debug, Serialize)]
struct GcWaitRow {
    workload: &'static str,
    over_provisioning: f64,
    pacing: &'static str,
    migrations_per_host_page_max: u32,
    host_write_wait_bound_us: Option<f64>,
    host_write_wait_us_max: f64,
    host_write_wait_us_mean: f64,
    host_pages_held: u64,
    host_write_wait_bound_exceeded: u64,
    write_amplification: f64,
    virtual_seconds: f64,
}

fn gc_wait_row(
    arguments: &ExperimentArgs,
    (workload_name, make_workload): (&'static str, WorkloadMaker),
    over_provisioning: f64,
    paced: bool,
) -> BenchResult<GcWaitRow> {
    let options = FtlOptions {
        gc_migrations_per_host_page_max: if paced { None } else { Some(0) },
        ..experiment_options(over_provisioning, VictimPolicy::Greedy)
    };
    let mut ftl = experiment_ftl(arguments, StorageMode::TimingOnly, options)?;
    let workload = make_workload(ftl.info().block_count);
    let clock = ftl.clock();
    let started_ns = clock.now_ns();
    let stats = steady_state_stats(arguments, &mut ftl, &workload)?;
    let whole_run = ftl.stats();
    Ok(GcWaitRow {
        workload: workload_name,
        over_provisioning,
        pacing: if paced { "on" } else { "off" },
        migrations_per_host_page_max: ftl.gc_migrations_per_host_page_max(),
        host_write_wait_bound_us: ftl
            .host_write_wait_bound_ns()
            .map(|bound_ns| bound_ns as f64 / 1e3),
        host_write_wait_us_max: whole_run.host_write_wait_ns_max as f64 / 1e3,
        host_write_wait_us_mean: whole_run.host_write_wait_ns_total as f64
            / 1e3
            / whole_run.host_write_stalls.max(1) as f64,
        host_pages_held: whole_run.host_write_stalls,
        host_write_wait_bound_exceeded: whole_run.host_write_wait_bound_exceeded,
        write_amplification: stats.write_amplification(),
        virtual_seconds: (clock.now_ns() - started_ns) as f64 / 1e9,
    })
}

fn run_gc_wait(arguments: &ExperimentArgs) -> BenchResult {
    let uniform: (&'static str, WorkloadMaker) = ("uniform", |_| Workload::Uniform);
    let hot_cold: (&'static str, WorkloadMaker) = ("80/20", |_| Workload::HotCold {
        hot_share: 0.8,
        hot_fraction: 0.2,
    });
    let progress = Progress::spinner("GC waits");
    let mut rows = Vec::new();
    for (workload, over_provisioning) in [
        (uniform, 0.07),
        (uniform, 0.20),
        (uniform, 0.50),
        (hot_cold, 0.07),
        (hot_cold, 0.20),
    ] {
        for paced in [false, true] {
            progress.set_message(format!(
                "GC waits, {} writes, {:.0}% over-provisioned, {}",
                workload.0,
                over_provisioning * 100.0,
                if paced { "paced" } else { "unpaced" }
            ));
            rows.push(gc_wait_row(arguments, workload, over_provisioning, paced)?);
        }
    }
    let uniform_rows = |pacing: &'static str| {
        rows.iter()
            .filter(move |row| row.workload == "uniform" && row.pacing == pacing)
    };
    let longest_wait_ms = |pacing: &'static str| {
        uniform_rows(pacing).map(|row| {
            (
                row.over_provisioning * 100.0,
                row.host_write_wait_us_max / 1e3,
            )
        })
    };
    progress.finish();
    plot_if_asked(arguments, || {
        experiment_chart(
            "FTL host write waits for garbage collection (uniform writes, greedy GC)".to_string(),
            (
                "over-provisioning (% of the logical space)",
                "longest host write wait (ms, virtual time)",
            ),
            ChartKind::Lines,
            vec![
                Series::new("longest wait, pacing off", longest_wait_ms("off")),
                Series::new("longest wait, pacing on", longest_wait_ms("on")),
                Series::new(
                    "bound with pacing on",
                    uniform_rows("on").filter_map(|row| {
                        let bound_us = row.host_write_wait_bound_us?;
                        Some((row.over_provisioning * 100.0, bound_us / 1e3))
                    }),
                ),
            ],
        )
    })?;
    if arguments.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    let mut table = Table::new(" ")
        .caption("workload  over-prov  pacing   K   wait bound   longest wait   mean wait   pages held  over bound    WA   virtual s   (greedy)")
        .left("workload", 8)
        .right("over-prov", 10)
        .column_after("  ", "pacing", 6, Align::Left)
        .right("K", 3)
        .right("wait bound", 13)
        .right("longest wait", 14)
        .right("mean wait", 11)
        .right("pages held", 12)
        .right("over bound", 11)
        .right("WA", 5)
        .right("virtual s", 11);
    for row in &rows {
        let bound = row
            .host_write_wait_bound_us
            .map_or("none".to_string(), |bound| format!("{bound:.0}"));
        table.row(vec![
            row.workload.to_string(),
            format!("{:.0}%", row.over_provisioning * 100.0),
            row.pacing.to_string(),
            row.migrations_per_host_page_max.to_string(),
            format!("{bound:>10} us"),
            format!("{:.0} us", row.host_write_wait_us_max),
            format!("{:.0} us", row.host_write_wait_us_mean),
            row.host_pages_held.to_string(),
            row.host_write_wait_bound_exceeded.to_string(),
            format!("{:.2}", row.write_amplification),
            format!("{:.2}", row.virtual_seconds),
        ]);
    }
    table.print();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_form_matches_known_points() {
        for (alpha, expected) in [(1.07, 7.82), (1.5, 1.72), (2.0, 1.255)] {
            let value = closed_form_write_amplification(alpha);
            assert!((value - expected).abs() < 0.02, "alpha {alpha}: {value}");
        }
        assert!((lambert_w0(-0.2) - (-0.259_171)).abs() < 1e-5);
    }
}
