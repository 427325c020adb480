//! `flashpipe sim job`: fio-like synthetic jobs on the flash model.
//!
//! One job from the options (`--rw`, fio's words: `read`, `write`, `randread`,
//! `randwrite`, and the mixed `rw` and `randrw` with `--rwmixread`), or several from a
//! job file (TOML, [`JobFile`]). Jobs of a file run one after another, in file order, each
//! on an array of its own, built fresh: nothing one job writes is seen by the next.
//!
//! Reads and writes alone run on the raw array by fixed striping (as they always did);
//! a mixed job runs through the host FTL (`flashpipe_ftl::replay`), since random writes
//! on raw flash break the program-in-order rule: one host, the whole preset (or
//! `--blocks-per-plane` of it), the pages a read touches written before the measurement.

use clap::{Args, ValueEnum};
use flashpipe_device::SplitMix64;
use flashpipe_flash::workload::{
    self, AccessKind, AccessPattern, SyntheticJob, TraceRequest, WorkloadReport,
};
use flashpipe_flash::FlashConfig;
use flashpipe_ftl::replay::{
    FtlReplay, KindSummary, ReplayLoop, ReplayOptions, UnwrittenReads, OPEN_LOOP_OUTSTANDING_LIMIT,
};
use flashpipe_ftl::FtlOptions;
use serde::{Deserialize, Serialize};

use super::timing_array;
use crate::error::{invalid_input, io_context, io_with, BenchError, BenchErrorKind};
use crate::precondition::preset_config;
use crate::progress::Progress;
use crate::BenchResult;
use flashpipe_bench_harness::option_range::check_within;

/// Largest job file read (a job file is a few lines).
const MAX_JOB_FILE_BYTES: u64 = 1 << 20;
/// Most jobs in one file.
const MAX_JOBS_PER_FILE: usize = 64;

/// Options of `sim job`.
#[derive(Debug, Args)]
pub struct JobArgs {
    /// A job file (TOML: `[[job]]` tables, run one after another in file order, each on
    /// a fresh array); the job options below then come from the file.
    #[arg(value_name = "FILE.toml")]
    file: Option<String>,
    /// Preset name or TOML file.
    #[arg(long, default_value = "minflash", conflicts_with = "file")]
    preset: String,
    /// What the job does, in fio's words: read, write, randread, randwrite, or the mixed
    /// rw and randrw (through the host FTL; `--rwmixread` sets the share of reads).
    #[arg(long, value_enum, conflicts_with_all = ["file", "pattern", "kind"])]
    rw: Option<RwArg>,
    /// Percentage of reads in a mixed job (`--rw rw` or `randrw`), 0..=100.
    #[arg(long, default_value_t = 50, conflicts_with = "file")]
    rwmixread: u32,
    /// Offsets (older spelling; `--rw` says both offsets and kind).
    #[arg(long, value_enum, default_value_t = PatternArg::Random, conflicts_with = "file")]
    pattern: PatternArg,
    /// Reads or writes (older spelling; see `--rw`).
    #[arg(long, value_enum, default_value_t = KindArg::Read, conflicts_with = "file")]
    kind: KindArg,
    /// Bytes per request (a size: 8192, 8KiB, 1MiB).
    #[arg(long, default_value_t = 8192, value_parser = flashpipe_store::units::parse_size_bytes, conflicts_with = "file")]
    request_bytes: u64,
    /// Requests in flight per host.
    #[arg(long, default_value_t = 32, conflicts_with = "file")]
    queue_depth: u32,
    /// Hosts (1 for a mixed job).
    #[arg(long, default_value_t = 1, conflicts_with = "file")]
    hosts: u32,
    /// Devices to spread over (the preset's count at most; 1 for a mixed job, whose FTL
    /// spans the whole preset).
    #[arg(long, default_value_t = 1, conflicts_with = "file")]
    devices: u32,
    /// Requests per host.
    #[arg(long, default_value_t = 10_000, conflicts_with = "file")]
    requests: u64,
    /// Erase blocks per plane instead of the preset's (a mixed job: a smaller FTL,
    /// formatted faster; timing per request is the preset's either way).
    #[arg(long, conflicts_with = "file")]
    blocks_per_plane: Option<u32>,
    /// Seed.
    #[arg(long, default_value_t = 1, conflicts_with = "file")]
    seed: u64,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// Offsets of a job.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum PatternArg {
    Sequential,
    Random,
}

/// Kind of a job.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum KindArg {
    Read,
    Write,
}

/// fio's `rw`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RwArg {
    /// Sequential reads.
    Read,
    /// Sequential writes.
    Write,
    /// Random reads.
    Randread,
    /// Random writes.
    Randwrite,
    /// Sequential reads and writes mixed.
    Rw,
    /// Random reads and writes mixed.
    Randrw,
}

impl RwArg {
    fn pattern(self) -> AccessPattern {
        match self {
            RwArg::Read | RwArg::Write | RwArg::Rw => AccessPattern::Sequential,
            RwArg::Randread | RwArg::Randwrite | RwArg::Randrw => AccessPattern::Random,
        }
    }

    fn mixed(self) -> bool {
        matches!(self, RwArg::Rw | RwArg::Randrw)
    }
}

/// A job file: defaults for every job, then the jobs.
///
/// ```toml
/// preset = "minflash"   # optional, for every job that names none
/// seed = 1              # optional
///
/// [[job]]
/// name = "mixed"
/// rw = "randrw"
/// rwmixread = 70
/// request_bytes = "16KiB"
/// queue_depth = 8
/// requests = 2000
/// blocks_per_plane = 16
/// ```
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobFile {
    preset: Option<String>,
    seed: Option<u64>,
    #[serde(default)]
    job: Vec<JobEntry>,
}

/// One `[[job]]` table; absent keys take the command line's defaults.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JobEntry {
    name: String,
    rw: RwArg,
    rwmixread: Option<u32>,
    request_bytes: Option<SizeValue>,
    queue_depth: Option<u32>,
    hosts: Option<u32>,
    devices: Option<u32>,
    requests: Option<u64>,
    blocks_per_plane: Option<u32>,
    preset: Option<String>,
    seed: Option<u64>,
}

/// A size in a job file: a number of bytes or a size text (`16KiB`).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum SizeValue {
    Bytes(u64),
    Text(String),
}

/// One job, every option settled.
#[derive(Debug, Clone, Serialize)]
struct JobSpec {
    name: String,
    preset: String,
    rw: RwArg,
    rwmixread: u32,
    request_bytes: u64,
    queue_depth: u32,
    hosts: u32,
    devices: u32,
    requests: u64,
    blocks_per_plane: Option<u32>,
    seed: u64,
}

/// A mixed job's result through the FTL.
#[derive(Debug, Serialize)]
struct MixedReport {
    reads: KindSummary,
    writes: KindSummary,
    virtual_seconds: f64,
    megabytes_per_second: f64,
    write_amplification: f64,
    gc_pages_copied: u64,
    pages_written_before_the_measurement: u64,
}

#[derive(Serialize)]
#[serde(untagged)]
enum JobResult {
    Raw(WorkloadReport),
    Mixed(MixedReport),
}

#[derive(Serialize)]
struct JobJson<'a> {
    job: &'a JobSpec,
    result: &'a JobResult,
}

/// Runs `sim job`: the job of the options, or every job of the file in order.
pub fn run(arguments: JobArgs) -> BenchResult {
    let specs = match &arguments.file {
        Some(path) => read_job_file(path)?,
        None => vec![spec_of_arguments(&arguments)],
    };
    for spec in &specs {
        check_spec(spec)?;
    }
    let from_file = arguments.file.is_some();
    let mut results = Vec::with_capacity(specs.len());
    for spec in &specs {
        let result = run_spec(spec)?;
        if !arguments.json {
            if from_file {
                say!("job {} ({})", spec.name, rw_name(spec.rw));
            }
            print_result(&result)?;
        }
        results.push(result);
    }
    if arguments.json {
        if from_file {
            let documents: Vec<JobJson<'_>> = specs
                .iter()
                .zip(&results)
                .map(|(job, result)| JobJson { job, result })
                .collect();
            say!("{}", serde_json::to_string_pretty(&documents)?);
        } else {
            say!("{}", serde_json::to_string_pretty(&results[0])?);
        }
    }
    Ok(())
}

fn rw_name(rw: RwArg) -> String {
    rw.to_possible_value()
        .map(|value| value.get_name().to_string())
        .unwrap_or_default()
}

fn spec_of_arguments(arguments: &JobArgs) -> JobSpec {
    let rw = arguments
        .rw
        .unwrap_or(match (arguments.pattern, arguments.kind) {
            (PatternArg::Sequential, KindArg::Read) => RwArg::Read,
            (PatternArg::Sequential, KindArg::Write) => RwArg::Write,
            (PatternArg::Random, KindArg::Read) => RwArg::Randread,
            (PatternArg::Random, KindArg::Write) => RwArg::Randwrite,
        });
    JobSpec {
        name: "job".to_string(),
        preset: arguments.preset.clone(),
        rw,
        rwmixread: arguments.rwmixread,
        request_bytes: arguments.request_bytes,
        queue_depth: arguments.queue_depth,
        hosts: arguments.hosts,
        devices: arguments.devices,
        requests: arguments.requests,
        blocks_per_plane: arguments.blocks_per_plane,
        seed: arguments.seed,
    }
}

/// The jobs of a job file, each checked; the file's name in every refusal.
fn read_job_file(path: &str) -> BenchResult<Vec<JobSpec>> {
    let metadata =
        std::fs::metadata(path).map_err(io_with(format!("cannot read job file {path}")))?;
    if !metadata.is_file() {
        return Err(invalid_input(format!("job file {path}: not a regular file")).into());
    }
    if metadata.len() > MAX_JOB_FILE_BYTES {
        return Err(invalid_input(format!(
            "job file {path}: {} bytes, above the limit of {MAX_JOB_FILE_BYTES} bytes",
            metadata.len()
        ))
        .into());
    }
    let text = std::fs::read_to_string(path).map_err(|error| {
        if error.kind() == std::io::ErrorKind::InvalidData {
            invalid_input(format!("job file {path}: not a text file (not UTF-8)"))
        } else {
            io_context(error, format!("cannot read job file {path}"))
        }
    })?;
    let file: JobFile = toml::from_str(&text)
        .map_err(|error| invalid_input(format!("job file {path}: {}", error.message())))?;
    if file.job.is_empty() {
        return Err(invalid_input(format!(
            "job file {path}: no jobs; a job file lists at least one [[job]] table (name, rw, ...)"
        ))
        .into());
    }
    if file.job.len() > MAX_JOBS_PER_FILE {
        return Err(invalid_input(format!(
            "job file {path}: {} jobs, above the limit of {MAX_JOBS_PER_FILE}",
            file.job.len()
        ))
        .into());
    }
    let defaults = JobSpec {
        name: String::new(),
        preset: file
            .preset
            .clone()
            .unwrap_or_else(|| "minflash".to_string()),
        rw: RwArg::Randread,
        rwmixread: 50,
        request_bytes: 8192,
        queue_depth: 32,
        hosts: 1,
        devices: 1,
        requests: 10_000,
        blocks_per_plane: None,
        seed: file.seed.unwrap_or(1),
    };
    let mut names: Vec<String> = Vec::new();
    let mut specs = Vec::with_capacity(file.job.len());
    for entry in file.job {
        if entry.name.trim().is_empty() || entry.name.chars().any(char::is_control) {
            return Err(invalid_input(format!(
                "job file {path}: a job name must be printable text, not empty"
            ))
            .into());
        }
        if names.contains(&entry.name) {
            return Err(invalid_input(format!(
                "job file {path}: two jobs are named {}",
                entry.name
            ))
            .into());
        }
        names.push(entry.name.clone());
        let request_bytes = match entry.request_bytes {
            None => defaults.request_bytes,
            Some(SizeValue::Bytes(bytes)) => bytes,
            Some(SizeValue::Text(text)) => flashpipe_store::units::parse_size_bytes(&text)
                .map_err(|error| {
                    invalid_input(format!(
                        "job file {path}, job {}: request_bytes {text}: {error}",
                        entry.name
                    ))
                })?,
        };
        let spec = JobSpec {
            name: entry.name,
            preset: entry.preset.unwrap_or_else(|| defaults.preset.clone()),
            rw: entry.rw,
            rwmixread: entry.rwmixread.unwrap_or(defaults.rwmixread),
            request_bytes,
            queue_depth: entry.queue_depth.unwrap_or(defaults.queue_depth),
            hosts: entry.hosts.unwrap_or(defaults.hosts),
            devices: entry.devices.unwrap_or(defaults.devices),
            requests: entry.requests.unwrap_or(defaults.requests),
            blocks_per_plane: entry.blocks_per_plane,
            seed: entry.seed.unwrap_or(defaults.seed),
        };
        check_spec(&spec).map_err(|error| {
            invalid_input(format!("job file {path}, job {}: {error}", spec.name))
        })?;
        specs.push(spec);
    }
    Ok(specs)
}

/// The preset of `spec`, with its erase blocks per plane when set.
fn spec_config(spec: &JobSpec) -> BenchResult<FlashConfig> {
    preset_config(&spec.preset, spec.blocks_per_plane)
}

fn synthetic_job(spec: &JobSpec, kind: AccessKind) -> SyntheticJob {
    SyntheticJob {
        pattern: spec.rw.pattern(),
        kind,
        request_bytes: spec.request_bytes,
        queue_depth: spec.queue_depth,
        hosts: spec.hosts,
        requests_per_host: spec.requests,
        devices: spec.devices,
        seed: spec.seed,
    }
}

/// Every option of `spec` against its limit, before any array is built.
fn check_spec(spec: &JobSpec) -> BenchResult {
    let config = spec_config(spec)?;
    let kind = match spec.rw {
        RwArg::Write | RwArg::Randwrite => AccessKind::Write,
        _ => AccessKind::Read,
    };
    synthetic_job(spec, kind)
        .check(&config)
        .map_err(|error| invalid_input(format!("--{}: {error}", error.field.replace('_', "-"))))?;
    if spec.rw.mixed() {
        check_within("--rwmixread", spec.rwmixread, 0..=100).map_err(invalid_input)?;
        if spec.hosts != 1 || spec.devices != 1 {
            return Err(invalid_input(
                "a mixed job (rw, randrw) runs through the host FTL: one host, the whole preset; \
                 leave --hosts and --devices at 1",
            )
            .into());
        }
        if spec.queue_depth > OPEN_LOOP_OUTSTANDING_LIMIT {
            return Err(invalid_input(format!(
                "--queue-depth {}: a mixed job takes at most {OPEN_LOOP_OUTSTANDING_LIMIT}",
                spec.queue_depth
            ))
            .into());
        }
    }
    Ok(())
}

fn run_spec(spec: &JobSpec) -> BenchResult<JobResult> {
    if spec.rw.mixed() {
        return Ok(JobResult::Mixed(run_mixed(spec)?));
    }
    let reads = matches!(spec.rw, RwArg::Read | RwArg::Randread);
    let job = synthetic_job(
        spec,
        if reads {
            AccessKind::Read
        } else {
            AccessKind::Write
        },
    );
    let progress = Progress::spinner(format!("sim job {}: building the array", spec.name));
    let mut array = timing_array(
        spec_config(spec)?,
        spec.hosts,
        workload::MAX_JOB_QUEUE_DEPTH,
        spec.seed,
    )?;
    if reads {
        progress.set_message(format!(
            "sim job {}: writing the whole array once",
            spec.name
        ));
        array.precondition_full()?;
    }
    progress.set_message(format!(
        "sim job {}: simulating {} requests",
        spec.name,
        crate::progress::thousands(job.requests_per_host * u64::from(job.hosts))
    ));
    let report = workload::run_job(&mut array, &job);
    progress.finish();
    Ok(JobResult::Raw(report))
}

/// A mixed job through the FTL: `requests` requests, each a read with `rwmixread` percent
/// odds, at sequential or random slots of the logical pages, `queue_depth` in flight.
fn run_mixed(spec: &JobSpec) -> BenchResult<MixedReport> {
    let progress = Progress::spinner(format!("sim job {}: formatting the FTL", spec.name));
    let options = FtlOptions {
        name: "job".to_string(),
        checkpoint_interval_pages: 0,
        ..FtlOptions::default()
    };
    let mut replay = FtlReplay::format(spec_config(spec)?, spec.seed, options)?;
    let logical_pages = replay.ftl().info().block_count;
    let page_bytes = u64::from(replay.ftl().info().block_size_bytes);
    let pages_per_request = spec.request_bytes.div_ceil(page_bytes).max(1);
    let slots = (logical_pages / pages_per_request).max(1);
    let mut generator = SplitMix64::new(spec.seed ^ 0x6D17_3EAD);
    let requests: Vec<TraceRequest> = (0..spec.requests)
        .map(|index| {
            let kind = if generator.below(100) < u64::from(spec.rwmixread) {
                AccessKind::Read
            } else {
                AccessKind::Write
            };
            let slot = match spec.rw.pattern() {
                AccessPattern::Sequential => index % slots,
                AccessPattern::Random => generator.below(slots),
            };
            TraceRequest {
                arrival_ns: 0,
                kind,
                offset_bytes: slot * pages_per_request * page_bytes,
                length_bytes: pages_per_request * page_bytes,
            }
        })
        .collect();
    progress.set_message(format!(
        "sim job {}: simulating {} requests through the FTL",
        spec.name,
        crate::progress::thousands(spec.requests)
    ));
    let report = replay.run(
        &requests,
        &ReplayOptions {
            replay_loop: ReplayLoop::Closed {
                queue_depth: spec.queue_depth,
            },
            unwritten_reads: UnwrittenReads::Precondition,
            ..ReplayOptions::default()
        },
    )?;
    progress.finish();
    if report.failed_writes() > 0 {
        return Err(BenchError::new(
            BenchErrorKind::Io(std::io::ErrorKind::Other),
            format!(
                "job {}: {} writes failed or were refused: the result is not usable",
                spec.name,
                report.failed_writes()
            ),
        )
        .into());
    }
    Ok(MixedReport {
        virtual_seconds: report.elapsed_ns as f64 / 1e9,
        megabytes_per_second: report.all.megabytes_per_second,
        write_amplification: report.collection.write_amplification,
        gc_pages_copied: report.collection.gc_pages_copied,
        pages_written_before_the_measurement: report.precondition_pages_written,
        reads: report.reads,
        writes: report.writes,
    })
}

fn print_result(result: &JobResult) -> BenchResult {
    match result {
        JobResult::Raw(report) => super::print_report(report, false),
        JobResult::Mixed(report) => {
            say!("through the host FTL (a mixed job)");
            say!("virtual seconds          {:.6}", report.virtual_seconds);
            say!(
                "bandwidth MB/s           {:.1}",
                report.megabytes_per_second
            );
            for (name, summary) in [("reads", &report.reads), ("writes", &report.writes)] {
                say!(
                    "{name:<8} {:>8} requests ({} failed), {:.1} MB/s; latency us p50 {:.1}  p99 {:.1}  max {:.1}",
                    summary.count,
                    summary.failed,
                    summary.megabytes_per_second,
                    summary.latency_us_p50,
                    summary.latency_us_p99,
                    summary.latency_us_max
                );
            }
            say!(
                "write amplification      {:.3} ({} pages copied by collection; {} pages the reads touch written first)",
                report.write_amplification,
                report.gc_pages_copied,
                report.pages_written_before_the_measurement
            );
            Ok(())
        }
    }
}
