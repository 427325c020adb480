//! `flashpipe sim replay`: a trace replayed through the host FTL (default, `--mode ftl`,
//! `flashpipe_ftl::replay`) or straight onto the raw array by fixed striping
//! (`--mode raw-striped`, the pre-FTL path, `flashpipe_flash::workload::replay`).
//!
//! Prints the configuration and seed first (and the command that repeats the run), then
//! per request type counts, bandwidth and latency, garbage collection and write
//! amplification during the trace, per-die utilization, and every request that failed or
//! was refused; exits non-zero when any write failed. `--json` prints one object,
//! `--plot DIR` draws the latency CDF and the throughput over time (DIR is made if
//! missing, inside a folder that must exist). `--precondition` starts the FTL from a
//! garbage-collection steady state (`flashpipe_ftl::precondition`), so a short trace
//! meets collection; its write amplification is reported beside the trace's. Reads of
//! never-written pages only are answered with zeros without flash: they are counted
//! apart and left out of the latency figures and the CDF.

mod plots;
mod trace_file;

use clap::{Args, ValueEnum};
use flashpipe_flash::workload::{self, TraceOptions, TraceTimeUnit, WorkloadReport};
use flashpipe_flash::FlashConfig;
use flashpipe_ftl::replay::{
    FtlReplay, KindSummary, ReplayLoop, ReplayOptions, ReplayReport, ReplaySource, UnwrittenReads,
    OPEN_LOOP_OUTSTANDING_LIMIT,
};
use flashpipe_ftl::{FtlOptions, PreconditionMethod, PreconditionOptions};
use serde::Serialize;

use super::timing_array;
use crate::error::{invalid_input, BenchError, BenchErrorKind};
use crate::precondition::preset_config;
use crate::progress::Progress;
use crate::BenchResult;
use flashpipe_bench_harness::option_range::check_within;
use plots::draw_ftl_plots;
use std::ops::Bound;
use trace_file::TraceFile;

/// Options of `sim replay`.
#[derive(Debug, Clone, Args)]
pub struct ReplayArgs {
    /// The trace file.
    file: String,
    /// Its format (docs/flash-model.md, "Trace formats").
    #[arg(long, value_enum)]
    format: FormatArg,
    /// Unit of DiskSim's time field (the other formats fix their own).
    #[arg(long, value_enum)]
    time_unit: Option<TimeUnitArg>,
    /// Sort requests by arrival instead of refusing times that go backwards.
    #[arg(long)]
    sort: bool,
    /// Accept a trace spanning over a day or with a mean interarrival under 10 ns.
    #[arg(long)]
    allow_implausible: bool,
    /// Through the host FTL (default) or by fixed striping onto the raw array.
    #[arg(long, value_enum, default_value_t = ModeArg::Ftl)]
    mode: ModeArg,
    /// Open loop: each request issued at its arrival time, latency from arrival.
    /// Closed loop: `--queue-depth` in flight, latency from issue.
    #[arg(long = "loop", value_enum, default_value_t = LoopArg::Open)]
    replay_loop: LoopArg,
    /// Requests in flight (closed loop, and the raw-striped mode's bound); default 32.
    #[arg(long)]
    queue_depth: Option<u32>,
    /// Open loop: most requests outstanding; later arrivals wait (counted).
    #[arg(long)]
    max_outstanding: Option<u32>,
    /// Time scaling: arrival times divided by this (`2x`, `0.5x`, `3`).
    #[arg(long, default_value = "1x", value_parser = parse_speed)]
    speed: f64,
    /// What reads of never-written pages see: zeros at once, or the pages written
    /// before the measurement.
    #[arg(long, value_enum, default_value_t = UnwrittenArg::Zero)]
    unwritten_reads: UnwrittenArg,
    /// Preset name or TOML file.
    #[arg(long, default_value = "minflash")]
    preset: String,
    /// Override the preset's erase blocks per plane (a smaller device fills sooner).
    #[arg(long)]
    blocks_per_plane: Option<u32>,
    /// FTL over-provisioning share.
    #[arg(long, default_value_t = 0.1)]
    over_provisioning: f64,
    /// Seed of the array (factory bad blocks, slow programs, bit errors).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Start from a preconditioned steady state: the first `--precondition-fill` of the
    /// logical pages written, then overwritten at random `--precondition-passes` times
    /// over (through the FTL only).
    #[arg(long)]
    precondition: bool,
    /// Share of the logical pages `--precondition` fills (0 < share <= 1).
    #[arg(long, default_value_t = 0.9, requires = "precondition")]
    precondition_fill: f64,
    /// Random overwrites after the fill, in multiples of the filled pages.
    #[arg(long, default_value_t = 1.0, requires = "precondition")]
    precondition_passes: f64,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Draw `latency-cdf.png` and `throughput.png` into this folder (created if missing).
    #[arg(long, value_name = "DIR")]
    plot: Option<String>,
}

/// Trace formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
enum FormatArg {
    /// blkparse default text output (Q events).
    Blkparse,
    /// DiskSim ASCII (`--time-unit`, default ms).
    Disksim,
    /// `time_ns device lba size_sectors type` (MQSim's ASCII trace in nanoseconds).
    #[value(alias = "mqsim")]
    AsciiNs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
enum TimeUnitArg {
    Ms,
    Us,
    Ns,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
enum ModeArg {
    /// Through the host FTL: mapping, garbage collection, wear leveling, bad blocks.
    Ftl,
    /// Fixed striping onto the raw array, no FTL (random writes break the
    /// program-in-order rule and fail).
    RawStriped,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
enum LoopArg {
    Open,
    Closed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
enum UnwrittenArg {
    Zero,
    Precondition,
}

/// `2x`, `0.5x` or a plain number, within the replayer's range.
fn parse_speed(text: &str) -> Result<f64, String> {
    let number = text.strip_suffix(['x', 'X']).unwrap_or(text);
    let speed: f64 = number
        .parse()
        .map_err(|_| format!("\"{text}\" is not a speed such as 2x or 0.5x"))?;
    let range = flashpipe_ftl::replay::REPLAY_SPEED_RANGE;
    if !range.contains(&speed) {
        return Err(format!(
            "{text}: must be within {}x..={}x",
            range.start(),
            range.end()
        ));
    }
    Ok(speed)
}

/// Everything that fixes a run's result, echoed so that it can be repeated.
#[derive(Debug, Serialize)]
struct ReplayConfiguration {
    trace: String,
    format: FormatArg,
    time_unit: Option<&'static str>,
    sort: bool,
    allow_implausible: bool,
    mode: ModeArg,
    replay_loop: LoopArg,
    queue_depth: u32,
    max_outstanding: Option<u32>,
    speed: f64,
    unwritten_reads: UnwrittenArg,
    preset: String,
    blocks_per_plane: u32,
    page_bytes: u32,
    dies: u32,
    over_provisioning: f64,
    precondition: Option<PreconditionFacts>,
    seed: u64,
    flashpipe_version: &'static str,
    command: String,
}

/// The steady state a `--precondition` run started from.
#[derive(Debug, Clone, Serialize)]
struct PreconditionFacts {
    fill: f64,
    passes: f64,
    filled_pages: u64,
    host_pages_written: u64,
    gc_pages_copied: u64,
    write_amplification: f64,
}

/// What the trace parser skipped or moved.
#[derive(Debug, Serialize)]
struct TraceFacts {
    requests: u64,
    comment_lines: u64,
    out_of_order_requests_sorted: u64,
}

/// What `--json` prints: the configuration, the trace, and the result of either mode.
#[derive(Serialize)]
struct ReplayJson<'a, R> {
    configuration: &'a ReplayConfiguration,
    trace: &'a TraceFacts,
    result: &'a R,
}

/// Prints a replay's result: the JSON object with `--json`, else the configuration and
/// then the mode's own lines, `text`.
fn print_replay<R: Serialize>(
    arguments: &ReplayArgs,
    configuration: &ReplayConfiguration,
    trace: &TraceFacts,
    result: &R,
    text: impl FnOnce() -> BenchResult,
) -> BenchResult {
    if arguments.json {
        let json = ReplayJson {
            configuration,
            trace,
            result,
        };
        say!("{}", serde_json::to_string_pretty(&json)?);
        return Ok(());
    }
    print_configuration(configuration, trace);
    text()
}

/// Requests in flight when `--queue-depth` is not given.
const DEFAULT_QUEUE_DEPTH: u32 = 32;

impl ReplayArgs {
    fn queue_depth(&self) -> u32 {
        self.queue_depth.unwrap_or(DEFAULT_QUEUE_DEPTH)
    }

    fn trace_options(&self) -> BenchResult<TraceOptions> {
        let time_unit = match (self.format, self.time_unit) {
            (FormatArg::Disksim, unit) => match unit.unwrap_or(TimeUnitArg::Ms) {
                TimeUnitArg::Ms => TraceTimeUnit::Milliseconds,
                TimeUnitArg::Us => TraceTimeUnit::Microseconds,
                TimeUnitArg::Ns => TraceTimeUnit::Nanoseconds,
            },
            (_, None) => TraceTimeUnit::Milliseconds,
            (format, Some(_)) => {
                return Err(invalid_input(format!(
                    "--time-unit applies to --format disksim only ({} fixes its own unit)",
                    possible_value(format)
                ))
                .into())
            }
        };
        Ok(TraceOptions {
            time_unit,
            sort: self.sort,
            allow_implausible: self.allow_implausible,
        })
    }

    fn check(&self) -> BenchResult {
        let queue_depth = self.queue_depth();
        check_within(
            "--queue-depth",
            queue_depth,
            1..=OPEN_LOOP_OUTSTANDING_LIMIT,
        )
        .map_err(invalid_input)?;
        if self.mode == ModeArg::RawStriped
            && !(1..=workload::MAX_JOB_QUEUE_DEPTH).contains(&queue_depth)
        {
            return Err(invalid_input(format!(
                "--queue-depth {queue_depth}: the raw-striped mode takes values within 1..={}",
                workload::MAX_JOB_QUEUE_DEPTH
            ))
            .into());
        }
        if self.queue_depth.is_some()
            && self.mode == ModeArg::Ftl
            && self.replay_loop == LoopArg::Open
        {
            return Err(invalid_input(
                "--queue-depth applies to --loop closed and --mode raw-striped; \
                        the open loop issues at arrival times (bound them with --max-outstanding)",
            )
            .into());
        }
        let ftl_only_options_changed = self.replay_loop != LoopArg::Open
            || self.speed != 1.0
            || self.unwritten_reads != UnwrittenArg::Zero;
        if self.mode == ModeArg::RawStriped && (ftl_only_options_changed || self.precondition) {
            return Err(invalid_input(
                "--loop, --speed, --unwritten-reads and --precondition apply to --mode ftl only \
                        (the raw-striped mode replays as it always did)",
            )
            .into());
        }
        let fill_range = (Bound::Excluded(0.0), Bound::Included(1.0));
        check_within("--precondition-fill", self.precondition_fill, fill_range)
            .map_err(invalid_input)?;
        check_within(
            "--precondition-passes",
            self.precondition_passes,
            0.0..=100.0,
        )
        .map_err(invalid_input)?;
        if let Some(bound) = self.max_outstanding {
            if self.replay_loop == LoopArg::Closed || self.mode == ModeArg::RawStriped {
                return Err(invalid_input(
                    "--max-outstanding applies to the open loop through the FTL only",
                )
                .into());
            }
            check_within("--max-outstanding", bound, 1..=OPEN_LOOP_OUTSTANDING_LIMIT)
                .map_err(invalid_input)?;
        }
        check_within("--over-provisioning", self.over_provisioning, 0.0..0.95)
            .map_err(invalid_input)?;
        if let Some(path) = &self.plot {
            let folder = std::path::Path::new(path);
            if folder.exists() && !folder.is_dir() {
                return Err(
                    invalid_input(format!("--plot {path}: exists and is not a folder")).into(),
                );
            }
            let parent = folder
                .parent()
                .filter(|parent| !parent.as_os_str().is_empty())
                .unwrap_or(std::path::Path::new("."));
            if !folder.exists() && !parent.is_dir() {
                let kind = if parent.exists() {
                    BenchErrorKind::InvalidInput
                } else {
                    BenchErrorKind::NotFound
                };
                return Err(BenchError::new(kind, format!(
                    "--plot {path}: the folder {} does not exist; --plot makes one folder in an existing one, so create it first or name another",
                    parent.display()
                ))
                .into());
            }
        }
        Ok(())
    }

    fn replay_options(&self) -> ReplayOptions {
        ReplayOptions {
            replay_loop: match self.replay_loop {
                LoopArg::Open => ReplayLoop::Open {
                    max_outstanding: self.max_outstanding,
                },
                LoopArg::Closed => ReplayLoop::Closed {
                    queue_depth: self.queue_depth(),
                },
            },
            speed: self.speed,
            unwritten_reads: match self.unwritten_reads {
                UnwrittenArg::Zero => UnwrittenReads::Zero,
                UnwrittenArg::Precondition => UnwrittenReads::Precondition,
            },
        }
    }

    /// The command that repeats this run, every option that changes the result spelled out.
    fn command_line(&self) -> String {
        let mut words = vec![
            "flashpipe sim replay".to_string(),
            self.file.clone(),
            format!("--format {}", possible_value(self.format)),
            format!("--mode {}", possible_value(self.mode)),
            format!("--preset {}", self.preset),
            format!("--seed {}", self.seed),
        ];
        if self.format == FormatArg::Disksim {
            let unit = self.time_unit.unwrap_or(TimeUnitArg::Ms);
            words.push(format!("--time-unit {}", possible_value(unit)));
        }
        if self.sort {
            words.push("--sort".to_string());
        }
        if self.allow_implausible {
            words.push("--allow-implausible".to_string());
        }
        if let Some(blocks) = self.blocks_per_plane {
            words.push(format!("--blocks-per-plane {blocks}"));
        }
        if self.mode == ModeArg::Ftl {
            words.push(format!("--loop {}", possible_value(self.replay_loop)));
            words.push(format!("--speed {}x", self.speed));
            words.push(format!(
                "--unwritten-reads {}",
                possible_value(self.unwritten_reads)
            ));
            words.push(format!("--over-provisioning {}", self.over_provisioning));
        }
        if self.precondition {
            words.push(format!(
                "--precondition --precondition-fill {} --precondition-passes {}",
                self.precondition_fill, self.precondition_passes
            ));
        }
        if let Some(bound) = self.max_outstanding {
            words.push(format!("--max-outstanding {bound}"));
        }
        if self.mode == ModeArg::RawStriped || self.replay_loop == LoopArg::Closed {
            words.push(format!("--queue-depth {}", self.queue_depth()));
        }
        words.join(" ")
    }

    fn configuration(&self, config: &FlashConfig) -> ReplayConfiguration {
        let geometry = &config.geometry;
        let command = self.command_line();
        ReplayConfiguration {
            trace: self.file.clone(),
            format: self.format,
            time_unit: (self.format == FormatArg::Disksim).then(|| {
                self.trace_options()
                    .map_or("ms", |options| options.time_unit.symbol())
            }),
            sort: self.sort,
            allow_implausible: self.allow_implausible,
            mode: self.mode,
            replay_loop: self.replay_loop,
            queue_depth: self.queue_depth(),
            max_outstanding: self.max_outstanding,
            speed: self.speed,
            unwritten_reads: self.unwritten_reads,
            preset: self.preset.clone(),
            blocks_per_plane: geometry.blocks_per_plane,
            page_bytes: geometry.page_data_bytes,
            dies: geometry.devices * geometry.channels * geometry.ways * geometry.dies,
            over_provisioning: self.over_provisioning,
            precondition: None,
            seed: self.seed,
            flashpipe_version: env!("CARGO_PKG_VERSION"),
            command,
        }
    }
}

fn possible_value(value: impl ValueEnum) -> String {
    value
        .to_possible_value()
        .map(|possible| possible.get_name().to_string())
        .unwrap_or_default()
}

/// Runs `sim replay`.
pub fn run(arguments: ReplayArgs) -> BenchResult {
    arguments.check()?;
    let options = arguments.trace_options()?;
    let config = preset_config(&arguments.preset, arguments.blocks_per_plane)?;
    let mut configuration = arguments.configuration(&config);
    let progress = Progress::spinner(format!("sim replay: reading {}", arguments.file));
    let format = match arguments.format {
        FormatArg::Blkparse => workload::TraceFormat::Blkparse,
        FormatArg::Disksim => workload::TraceFormat::Disksim,
        FormatArg::AsciiNs => workload::TraceFormat::AsciiNanoseconds,
    };
    if arguments.mode == ModeArg::Ftl && !options.sort {
        let (file, summary) = TraceFile::check(&arguments.file, format, &options)?;
        let facts = TraceFacts {
            requests: summary.requests,
            comment_lines: summary.comment_lines,
            out_of_order_requests_sorted: 0,
        };
        progress.set_message(replaying(&facts));
        let replayed = replay_through_ftl(&arguments, config, &file);
        if let Some(error) = file.take_error() {
            return Err(error);
        }
        let (report, precondition) = replayed?;
        configuration.precondition = precondition;
        progress.finish();
        return finish_ftl(&arguments, &configuration, &facts, &report);
    }
    let text = super::read_trace_file(&arguments.file)?;
    let trace = workload::parse_trace(&text, &arguments.file, format, &options)
        .map_err(BenchError::from)?;
    drop(text);
    let facts = TraceFacts {
        requests: trace.requests.len() as u64,
        comment_lines: trace.comment_lines,
        out_of_order_requests_sorted: trace.out_of_order_requests,
    };
    progress.set_message(replaying(&facts));
    match arguments.mode {
        ModeArg::Ftl => {
            let (report, precondition) =
                replay_through_ftl(&arguments, config, trace.requests.as_slice())?;
            configuration.precondition = precondition;
            progress.finish();
            finish_ftl(&arguments, &configuration, &facts, &report)
        }
        ModeArg::RawStriped => {
            let mut array = timing_array(config, 1, workload::MAX_JOB_QUEUE_DEPTH, arguments.seed)?;
            let report = workload::replay(&mut array, trace.requests, arguments.queue_depth());
            progress.finish();
            finish_raw(&arguments, &configuration, &facts, &report)
        }
    }
}

fn replaying(facts: &TraceFacts) -> String {
    format!(
        "sim replay: replaying {} requests",
        crate::progress::thousands(facts.requests)
    )
}

fn replay_through_ftl<S: ReplaySource + ?Sized>(
    arguments: &ReplayArgs,
    config: FlashConfig,
    source: &S,
) -> BenchResult<(ReplayReport, Option<PreconditionFacts>)> {
    let ftl_options = FtlOptions {
        name: "replay".to_string(),
        over_provisioning: arguments.over_provisioning,
        checkpoint_interval_pages: 0,
        ..FtlOptions::default()
    };
    let mut replay = FtlReplay::format(config, arguments.seed, ftl_options)?;
    let precondition = if arguments.precondition {
        let report = replay.precondition(&PreconditionOptions {
            fill_share: arguments.precondition_fill,
            overwrite_passes: arguments.precondition_passes,
            method: PreconditionMethod::Direct,
            seed: arguments.seed,
        })?;
        Some(PreconditionFacts {
            fill: arguments.precondition_fill,
            passes: arguments.precondition_passes,
            filled_pages: report.filled_pages,
            host_pages_written: report.host_pages_written,
            gc_pages_copied: report.gc_pages_copied,
            write_amplification: report.write_amplification,
        })
    } else {
        None
    };
    let report = replay.run_source(source, &arguments.replay_options())?;
    Ok((report, precondition))
}

fn finish_ftl(
    arguments: &ReplayArgs,
    configuration: &ReplayConfiguration,
    facts: &TraceFacts,
    report: &ReplayReport,
) -> BenchResult {
    if let Some(folder) = &arguments.plot {
        draw_ftl_plots(folder, report)?;
    }
    print_replay(arguments, configuration, facts, report, || {
        if let Some(steady) = &configuration.precondition {
            say!(
                "preconditioned           {} pages filled (share {}), {} passes: {} host pages, {} copied by collection, write amplification {:.3}",
                steady.filled_pages,
                steady.fill,
                steady.passes,
                steady.host_pages_written,
                steady.gc_pages_copied,
                steady.write_amplification
            );
        }
        print_ftl_report(report, &arguments.replay_options());
        Ok(())
    })?;
    let failed_writes = report.failed_writes();
    if failed_writes > 0 {
        return Err(BenchError::new(
            BenchErrorKind::Io(std::io::ErrorKind::Other),
            format!(
                "{failed_writes} write requests failed or were refused: the result is not usable"
            ),
        )
        .into());
    }
    Ok(())
}

fn finish_raw(
    arguments: &ReplayArgs,
    configuration: &ReplayConfiguration,
    facts: &TraceFacts,
    report: &WorkloadReport,
) -> BenchResult {
    print_replay(arguments, configuration, facts, report, || {
        say!("mode                     raw-striped (no FTL: fixed striping onto the raw array)");
        if report.trims_skipped > 0 {
            say!("trims skipped            {}", report.trims_skipped);
        }
        say!(
            "bad blocks skipped       {} (the striping steps over them; every way offers as \
             many blocks as the one with the fewest good ones)",
            report.bad_blocks_skipped
        );
        super::print_report(report, false)
    })?;
    if report.failed_page_operations > 0 {
        return Err(invalid_input(format!(
            "{} page operations failed in the raw-striped mode (random writes break the \
             program-in-order rule there): the result is not usable; replay through the FTL \
             (--mode ftl)",
            report.failed_page_operations
        ))
        .into());
    }
    Ok(())
}

fn print_configuration(configuration: &ReplayConfiguration, facts: &TraceFacts) {
    say!("command                  {}", configuration.command);
    say!(
        "device                   {} ({} dies, {} blocks per plane, {} B pages), seed {}",
        configuration.preset,
        configuration.dies,
        configuration.blocks_per_plane,
        configuration.page_bytes,
        configuration.seed
    );
    say!(
        "trace                    {} requests ({} comment lines skipped, {} out of order sorted)",
        facts.requests,
        facts.comment_lines,
        facts.out_of_order_requests_sorted
    );
}

fn print_ftl_report(report: &ReplayReport, options: &ReplayOptions) {
    say!("mode                     ftl (host FTL: mapping, GC, wear leveling, bad blocks)");
    say!(
        "virtual seconds          {:.6} (trace span {:.6} after --speed)",
        report.elapsed_ns as f64 / 1e9,
        report.trace_span_ns as f64 / 1e9
    );
    say!(
        "type      count    failed  MB/s       mean us    p50 us     p99 us     p99.9 us   max us"
    );
    for (name, summary) in [
        ("read", &report.reads),
        ("write", &report.writes),
        ("trim", &report.trims),
        ("all", &report.all),
    ] {
        say!("{}", kind_row(name, summary));
    }
    let collection = &report.collection;
    say!(
        "garbage collection       {} victims, {} pages copied ({} by copy-back), {} erases, {} host pages written",
        collection.gc_victims,
        collection.gc_pages_copied,
        collection.gc_copy_backs,
        collection.erases,
        collection.host_pages_written
    );
    say!(
        "write amplification      {:.3} ({:.3} with log and checkpoint pages)",
        collection.write_amplification,
        collection.write_amplification_with_metadata
    );
    say!(
        "host writes held for GC  {} (longest {:.1} us)",
        collection.host_write_stalls,
        collection.host_write_wait_us_max
    );
    say!(
        "blocks                   {} retired, {} grown bad, erases per block {}..{}, {} static wear-leveling moves",
        collection.retired_blocks,
        collection.grown_bad_blocks,
        collection.erase_count_min,
        collection.erase_count_max,
        collection.static_wear_leveling_moves
    );
    say!(
        "unwritten reads          {} requests touched {} never-written pages; {} of them read nothing else (zero-filled without flash: not in the read figures above); {} pages written first (--unwritten-reads precondition)",
        report.unwritten_read_requests,
        report.unwritten_read_pages,
        report.zero_filled_reads,
        report.precondition_pages_written
    );
    let bound = match options.replay_loop {
        ReplayLoop::Open {
            max_outstanding: Some(bound),
        } => format!("--max-outstanding {bound}"),
        ReplayLoop::Open {
            max_outstanding: None,
        } => format!("no --max-outstanding: the FTL's queue depth {OPEN_LOOP_OUTSTANDING_LIMIT}"),
        ReplayLoop::Closed { queue_depth } => format!("closed loop, --queue-depth {queue_depth}"),
    };
    say!(
        "outstanding              at most {} ({bound}); bound reached by {} arrivals (waited {:.1} us in all)",
        report.outstanding_max,
        report.outstanding_bound_hits,
        report.outstanding_bound_wait_us_total
    );
    say!(
        "address mapping          {} requests wrapped past {} logical pages, {} not page-aligned",
        report.wrapped_requests,
        report.logical_pages,
        report.partial_page_requests
    );
    say!("rejected requests        {}", report.rejected_requests);
    say!(
        "die utilization          {}",
        utilization_line(&report.die_utilization)
    );
    say!(
        "channel utilization      {}",
        utilization_line(&report.channel_utilization)
    );
}

/// One row of the latency table; a type with no request measured shows "-" for its
/// latencies rather than a 0.0 that reads as a measurement.
fn kind_row(name: &str, summary: &KindSummary) -> String {
    let latencies = [
        summary.latency_us_mean,
        summary.latency_us_p50,
        summary.latency_us_p99,
        summary.latency_us_p999,
        summary.latency_us_max,
    ]
    .map(|value| {
        if summary.count == 0 {
            "-".to_string()
        } else {
            format!("{value:.1}")
        }
    });
    format!(
        "{name:<9} {:<8} {:<7} {:<10.1} {:<10} {:<10} {:<10} {:<10} {}",
        summary.count,
        summary.failed,
        summary.megabytes_per_second,
        latencies[0],
        latencies[1],
        latencies[2],
        latencies[3],
        latencies[4]
    )
}

/// Mean, least and most of per-unit utilizations.
fn utilization_line(values: &[f64]) -> String {
    if values.is_empty() {
        return "-".to_string();
    }
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    let least = values.iter().copied().fold(f64::INFINITY, f64::min);
    let most = values.iter().copied().fold(0.0, f64::max);
    format!(
        "mean {mean:.3}, least {least:.3}, most {most:.3} over {}",
        values.len()
    )
}
