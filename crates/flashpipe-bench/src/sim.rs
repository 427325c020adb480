//! `flashpipe sim ...`: the NAND flash array model from the command line: the speed
//! benchmark of the simulator, fio-like synthetic jobs, trace replay, and the RAD and
//! minFlash reproductions (table by default, `--json` for machines).

/// Prints a line on standard output; a closed pipe (`| head`) drops the rest quietly
/// instead of panicking as `println!` does.
macro_rules! say {
    ($($argument:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($argument)*);
    }};
}

mod job;
mod replay;
mod repro;
pub(crate) use repro::minflash_model_points;

use std::time::Instant;

use clap::{Args, Subcommand};
use flashpipe_flash::workload::{self, AccessKind, AccessPattern, SyntheticJob, WorkloadReport};
use flashpipe_flash::{FlashArray, FlashConfig, FlashOptions, StorageMode};

use crate::error::{invalid_input, io_context, io_with};
use crate::flash_speed::RAW_TARGET_PAGE_OPERATIONS_PER_WALL_SECOND;
use crate::progress::Progress;
use crate::BenchResult;
use flashpipe_bench_harness::option_range::check_within;

/// The simulator's subcommands.
#[derive(Debug, Subcommand)]
pub enum SimCommand {
    /// Simulated page operations per wall-clock second (4 KiB random reads by default).
    Speed(SpeedArgs),
    /// A fio-like synthetic job (`--rw randrw --rwmixread 70`), or the jobs of a job
    /// file run one after another.
    Job(job::JobArgs),
    /// Replays a trace (blkparse, DiskSim, MQSim-style nanosecond ASCII) through the host
    /// FTL (default) or onto the raw array by fixed striping.
    Replay(replay::ReplayArgs),
    /// Reproduces a figure or table of RAD (seed 001) or minFlash (seed 004).
    Repro(repro::ReproArgs),
}

/// Options of `sim speed`.
#[derive(Debug, Args)]
pub struct SpeedArgs {
    /// Preset name or TOML file.
    #[arg(long, default_value = "minflash")]
    preset: String,
    /// Page operations to simulate.
    #[arg(long, default_value_t = 2_000_000)]
    operations: u64,
    /// Requests in flight.
    #[arg(long, default_value_t = 128)]
    queue_depth: u32,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// What `sim speed` measured, as `--json` prints it (the figures of its table).
#[derive(Debug, serde::Serialize)]
struct SpeedReport {
    preset: String,
    workload: &'static str,
    queue_depth: u32,
    page_operations: u64,
    wall_seconds: f64,
    page_operations_per_wall_second: f64,
    cpu_seconds: Option<f64>,
    page_operations_per_cpu_second: Option<f64>,
    simulated_megabytes_per_second: f64,
    simulated_read_latency_us_p99: f64,
    /// The target for the wall-clock rate on an idle machine.
    target_page_operations_per_wall_second: f64,
    target_met: bool,
}

/// Runs one simulator subcommand.
pub fn run(command: SimCommand) -> BenchResult {
    match command {
        SimCommand::Speed(arguments) => run_speed(arguments),
        SimCommand::Job(arguments) => job::run(arguments),
        SimCommand::Replay(arguments) => replay::run(arguments),
        SimCommand::Repro(arguments) => repro::run(arguments),
    }
}

/// A timing-only array for `config` with `hosts` hosts of `host_queue_depth` tags.
pub fn timing_array(
    config: FlashConfig,
    hosts: u32,
    host_queue_depth: u32,
    seed: u64,
) -> BenchResult<FlashArray> {
    Ok(FlashArray::new(
        config,
        FlashOptions {
            seed,
            storage: StorageMode::TimingOnly,
            host_count: hosts,
            host_queue_depth,
        },
    )?)
}

fn run_speed(arguments: SpeedArgs) -> BenchResult {
    let config = FlashConfig::preset_or_file(&arguments.preset)?;
    check_within(
        "--queue-depth",
        arguments.queue_depth,
        1..=workload::MAX_JOB_QUEUE_DEPTH,
    )
    .map_err(invalid_input)?;
    let (report, elapsed) = random_read_run(
        config,
        (arguments.operations, "--operations"),
        arguments.queue_depth,
        arguments.seed,
        "sim speed",
    )?;
    let Elapsed {
        wall_seconds,
        cpu_seconds,
    } = elapsed;
    let wall_rate = report.page_operations as f64 / wall_seconds;
    if arguments.json {
        let cpu_seconds = cpu_seconds.filter(|&seconds| seconds > 0.0);
        let speed = SpeedReport {
            preset: arguments.preset.clone(),
            workload: "4 KiB random reads of a full array",
            queue_depth: arguments.queue_depth,
            page_operations: report.page_operations,
            wall_seconds,
            page_operations_per_wall_second: wall_rate,
            cpu_seconds,
            page_operations_per_cpu_second: cpu_seconds
                .map(|seconds| report.page_operations as f64 / seconds),
            simulated_megabytes_per_second: report.megabytes_per_second,
            simulated_read_latency_us_p99: report.array.reads.latency_us_p99,
            target_page_operations_per_wall_second: RAW_TARGET_PAGE_OPERATIONS_PER_WALL_SECOND,
            target_met: wall_rate >= RAW_TARGET_PAGE_OPERATIONS_PER_WALL_SECOND,
        };
        say!("{}", serde_json::to_string_pretty(&speed)?);
        return Ok(());
    }
    say!("preset                      {}", arguments.preset);
    say!(
        "workload                    4 KiB random reads of a full array, queue depth {}",
        arguments.queue_depth
    );
    say!("page operations             {}", report.page_operations);
    say!("wall seconds                {wall_seconds:.3}");
    say!("page operations per second  {wall_rate:.0} (simulated per wall-clock second, one core)");
    say!(
        "target                      at least {RAW_TARGET_PAGE_OPERATIONS_PER_WALL_SECOND:.0} per wall-clock second (an idle machine): {}",
        crate::verdict::Verdict::of(wall_rate >= RAW_TARGET_PAGE_OPERATIONS_PER_WALL_SECOND)
    );
    if let Some(cpu_seconds) = cpu_seconds.filter(|&seconds| seconds > 0.0) {
        say!("cpu seconds                 {cpu_seconds:.3}");
        say!(
            "page operations per cpu s   {:.0} (differs from the wall figure on a loaded machine)",
            report.page_operations as f64 / cpu_seconds
        );
    }
    say!(
        "simulated bandwidth MB/s    {:.1}",
        report.megabytes_per_second
    );
    say!(
        "simulated read p99 us       {:.1}",
        report.array.reads.latency_us_p99
    );
    Ok(())
}

/// `sim speed`'s run, timed: `operations` random 4 KiB reads, `queue_depth` in flight,
/// of a timing-only array of `config` written whole first. `option` names the count in a
/// refusal, `label` starts the spinner's messages.
pub(crate) fn random_read_run(
    config: FlashConfig,
    (operations, option): (u64, &str),
    queue_depth: u32,
    seed: u64,
    label: &str,
) -> BenchResult<(WorkloadReport, Elapsed)> {
    let job = SyntheticJob {
        pattern: AccessPattern::Random,
        kind: AccessKind::Read,
        request_bytes: 4096,
        queue_depth: queue_depth.max(1),
        hosts: 1,
        requests_per_host: operations,
        devices: 1,
        seed,
    };
    job.check(&config)
        .map_err(|error| invalid_input(format!("{option} {operations}: {}", error.limit)))?;
    let progress = Progress::spinner(format!("{label}: writing the whole array once"));
    let mut array = timing_array(config, 1, queue_depth, seed)?;
    array.precondition_full()?;
    progress.set_message(format!(
        "{label}: simulating {} page reads",
        crate::progress::thousands(operations)
    ));
    let timed_run = timed(|| workload::run_job(&mut array, &job));
    progress.finish();
    Ok(timed_run)
}

/// The text of a trace: a regular file of at most [`workload::MAX_TRACE_FILE_BYTES`].
fn read_trace_file(path: &str) -> BenchResult<String> {
    let metadata = std::fs::metadata(path).map_err(io_with(format!("cannot read trace {path}")))?;
    if !metadata.is_file() {
        return Err(invalid_input(format!("trace {path}: not a regular file")).into());
    }
    if metadata.len() > workload::MAX_TRACE_FILE_BYTES {
        return Err(invalid_input(format!(
            "trace {path}: {} bytes, above the limit of {} bytes (1 GiB)",
            metadata.len(),
            workload::MAX_TRACE_FILE_BYTES
        ))
        .into());
    }
    std::fs::read_to_string(path).map_err(|error| {
        if error.kind() == std::io::ErrorKind::InvalidData {
            invalid_input(format!("trace {path}: not a text file (not UTF-8)")).into()
        } else {
            io_context(error, format!("cannot read trace {path}")).into()
        }
    })
}

fn print_report(report: &WorkloadReport, json: bool) -> BenchResult {
    if json {
        say!("{}", serde_json::to_string_pretty(report)?);
        return Ok(());
    }
    say!("requests                 {}", report.requests);
    say!(
        "page operations          {} ({} failed)",
        report.page_operations,
        report.failed_page_operations
    );
    say!(
        "virtual seconds          {:.6}",
        report.elapsed_ns as f64 / 1e9
    );
    say!(
        "bandwidth MB/s           {:.1}",
        report.megabytes_per_second
    );
    say!("requests per second      {:.0}", report.requests_per_second);
    let latency = &report.request_latency;
    say!(
        "request latency us       p50 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1}",
        latency.latency_us_p50,
        latency.latency_us_p99,
        latency.latency_us_p999,
        latency.latency_us_max
    );
    say!(
        "channel utilization      {:.3}",
        report.array.mean_channel_utilization()
    );
    say!(
        "chip utilization         {:.3}",
        report.array.mean_die_utilization()
    );
    Ok(())
}

/// How long a piece of work took: wall-clock seconds and this process's CPU seconds
/// (`None` where /proc cannot be read).
pub(crate) struct Elapsed {
    pub wall_seconds: f64,
    pub cpu_seconds: Option<f64>,
}

/// Runs `work`, timing it by the wall clock and by this process's CPU time.
pub(crate) fn timed<T>(work: impl FnOnce() -> T) -> (T, Elapsed) {
    let cpu_before = process_cpu_seconds();
    let started = Instant::now();
    let value = work();
    let wall_seconds = started.elapsed().as_secs_f64();
    let cpu_seconds = process_cpu_seconds()
        .zip(cpu_before)
        .map(|(end, start)| end - start);
    (
        value,
        Elapsed {
            wall_seconds,
            cpu_seconds,
        },
    )
}

/// User plus system CPU time of this process from /proc/self/stat (Linux), if readable.
fn process_cpu_seconds() -> Option<f64> {
    const CLOCK_TICKS_PER_SECOND: f64 = 100.0;
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after_name = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let user_ticks: f64 = fields.get(11)?.parse().ok()?;
    let system_ticks: f64 = fields.get(12)?.parse().ok()?;
    Some((user_ticks + system_ticks) / CLOCK_TICKS_PER_SECOND)
}
