//! `flashpipe run STORE.toml KERNEL [key=value ...] FILES... [--output NAME] [--json]`: runs a
//! kernel next to the data, as a pipeline inside the store's engine (crates/flashpipe-pipeline),
//! and prints each file's result on standard output; the totals and the stage table (which
//! pipeline stage set the pace) go to standard error. Digests (`sha256`, `crc32c`) print as
//! `HASH  NAME`, the format `sha256sum --check` reads.
//!
//! Kernel options are spelled as in `kernels run`: `key=value` arguments after the kernel,
//! or `-o key=value`, in any mix; the other arguments are input files in the store, or
//! patterns (`*`, `?`, `[...]`) standing for the files they match. A kernel that transforms its input (ciphers, Sobel, sort) writes one store
//! file per input: `--output NAME` for a single input, `NAME-<input>` for several, and
//! `<input>.<kernel>` when `--output` is not given.
//!
//! Outputs are atomic: the pipeline writes them under temporary names, which are renamed to
//! their names in one commit when the whole job succeeded; a failed job commits nothing. An
//! output name that exists in the store is refused before anything runs, unless `--force`
//! (then it is replaced in that same commit).
//!
//! When `flashpipe serve` holds the store, the run goes through the server
//! (`through_server`): the same job next to the server's engine, the same output (`-v` says
//! which way it went). Options naming host paths (`temp_dir=`, `queries=`, `profiles=`,
//! `module_path=`)
//! are then the server's to resolve in its own folders or refuse (docs/serve.md); in
//! this process they name the caller's files.

mod through_server;

use std::path::PathBuf;

use flashpipe_bench::progress::Progress;
use std::sync::Arc;

use flashpipe_kernels::api::{Kernel, Summary};
use flashpipe_kernels::host_paths::host_path_options;
use flashpipe_kernels::registry::find_kernel;
use flashpipe_pipeline::config::{MAX_READER_COUNT, MAX_WORKER_COUNT};
use flashpipe_pipeline::run::PipelineJob;
use flashpipe_pipeline::store_file_options::{build_reading_store_files, names_store_files};
use flashpipe_pipeline::{
    output_target, run_pipeline, PipelineConfig, PipelineResult, StagedOutputs,
};
use flashpipe_store::units::HumanBytes;

use crate::error_kind::{ErrorKind, Failure};
use crate::store_cmd::{CliResult, StoreAccess};
use flashpipe_store::store_lock::LockWait;

/// `flashpipe run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The store file written by `flashpipe mkfs`.
    pub store: PathBuf,
    /// The kernel (see `flashpipe kernels`).
    pub kernel: String,
    /// The kernel's `key=value` options, then the input files in the store (names or
    /// patterns such as 'lid:*', matched against whole names).
    #[arg(required = true, num_args = 1..)]
    pub arguments: Vec<String>,
    /// A kernel option as key=value (repeatable; the same as a `key=value` argument).
    #[arg(short = 'o', long = "option")]
    pub options: Vec<String>,
    /// Store file for the transformed output (a prefix `NAME-<input>` with several inputs).
    #[arg(long)]
    pub output: Option<String>,
    /// Kernel worker threads (default: one per core).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Reader threads (SISC's reader threads).
    #[arg(long, default_value_t = 1)]
    pub readers: usize,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Replace output files that exist in the store (in the commit that ends the job).
    #[arg(long)]
    pub force: bool,
    /// Wait for another command using the store to finish instead of failing.
    #[arg(long)]
    pub wait: bool,
    /// Say on standard error whether the run goes through a server or this process.
    #[arg(short, long)]
    pub verbose: bool,
    /// How result lines name files: `store` (`pics:img1.jpg`) or `path` (`pics/img1.jpg`,
    /// as `get -r` writes them, so `sha256sum --check` runs in the folder `get -r` filled).
    #[arg(long, value_enum, default_value_t = NameStyle::Store)]
    pub names: NameStyle,
}

/// How `run` names files in its result lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum NameStyle {
    /// The store's names, `:` between folders.
    Store,
    /// Local relative paths, `/` between folders, as `get -r` writes them.
    Path,
}

impl NameStyle {
    /// `name` as this style shows it; a store name that cannot be a local path is refused
    /// with `get -r`'s own message.
    fn show(self, name: &str) -> Result<String, Box<dyn std::error::Error>> {
        match self {
            NameStyle::Store => Ok(name.to_string()),
            NameStyle::Path => Ok(crate::store_cmd::local_components(name)?.join("/")),
        }
    }
}

/// A store opened for a pipeline: the store commands' opener, which keeps the engine's
/// configuration and the device clock the pipeline measures with.
pub type PipelineStore = crate::store_cmd::OpenStore;

impl PipelineStore {
    /// Runs `kernel` over `files` with `config`.
    pub fn run(
        &self,
        kernel: Arc<dyn Kernel>,
        files: &[String],
        config: &PipelineConfig,
    ) -> Result<PipelineResult, flashpipe_pipeline::PipelineError> {
        run_pipeline(PipelineJob::uncancelled(
            &self.engine,
            &self.engine_config,
            kernel,
            files,
            config,
        ))
    }
}

/// Runs `flashpipe run`.
pub fn run(arguments: RunArgs) -> CliResult {
    check_thread_options(&arguments)?;
    let spec = find_kernel(&arguments.kernel)?;
    let (mut options, patterns) = split_arguments(&arguments.arguments);
    options.extend(arguments.options.iter().cloned());
    if patterns.is_empty() {
        return Err(Failure::new(
            ErrorKind::Usage,
            "no input files given (arguments with '=' are kernel options)",
        )
        .into());
    }
    // A kernel whose options name host paths is built where it runs: through a server
    // those paths are the server's to resolve (or refuse), never read here.
    let names_host_paths = host_path_options(spec.name).next().is_some();
    if !names_host_paths {
        spec.build(&options)?;
    }
    let started = std::time::Instant::now();
    if let Some(server) = crate::session::LiveServer::find(&arguments.store)? {
        return through_server::run_through_server(server, &arguments, options, &patterns, started);
    }
    // A kernel whose options name store files (a WebAssembly module) is built once the
    // store is open: those files are read from it.
    let kernel = if names_store_files(spec) {
        None
    } else {
        Some(spec.build(&options)?)
    };
    let wait = if arguments.wait {
        LockWait::Wait
    } else {
        LockWait::Fail
    };
    let store = PipelineStore::open_with(&arguments.store, StoreAccess::ReadWrite, wait)?;
    if arguments.verbose {
        eprintln!(
            "flashpipe: {} opened in this process (no server holds it)",
            arguments.store.display()
        );
    }
    let device_time_is_simulated = store.clock.is_virtual();
    let kernel = match kernel {
        Some(kernel) => Ok(kernel),
        None => build_reading_store_files(spec, &options, &mut store.client(4))
            .map_err(Box::<dyn std::error::Error>::from),
    };
    let result = kernel.and_then(|kernel| {
        resolve_inputs(&store, &patterns)
            .and_then(|files| run_resolved(&store, &arguments, kernel, &files))
    });
    let result = store.finish(result)?;
    if arguments.json {
        println!("{}", serde_json::to_string_pretty(&result)?);
    } else {
        print_result(
            &result,
            arguments.names,
            device_time_is_simulated,
            started.elapsed().as_secs_f64(),
        )?;
    }
    Ok(no_match_status(&result)?)
}

/// The input files the names and patterns given stand for.
fn resolve_inputs(
    store: &PipelineStore,
    patterns: &[String],
) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let mut client = store.client(4);
    crate::store_cmd::resolve_input_names(&mut client, patterns)
}

/// Runs the job over resolved input files.
fn run_resolved(
    store: &PipelineStore,
    arguments: &RunArgs,
    kernel: Arc<dyn Kernel>,
    files: &[String],
) -> Result<PipelineResult, Box<dyn std::error::Error>> {
    let output = output_target(kernel.as_ref(), arguments.output.as_deref(), files)?;
    let staged = StagedOutputs::new(&output, &format!(".flashpipe-run-{}", std::process::id()));
    let mut config = PipelineConfig::for_engine(&store.engine_config, staged.pipeline_target());
    config.reader_count = arguments.readers;
    if let Some(workers) = arguments.workers {
        config.worker_count = workers;
    }
    run_staged(store, kernel, files, &config, &staged, arguments.force)
}

/// Runs the job with its outputs staged, then installs them (see the module's notes).
fn run_staged(
    store: &PipelineStore,
    kernel: Arc<dyn Kernel>,
    files: &[String],
    config: &PipelineConfig,
    staged: &StagedOutputs,
    replace: bool,
) -> Result<PipelineResult, Box<dyn std::error::Error>> {
    let mut client = store.client(4);
    staged.check(&mut client, files, replace)?;
    let progress = Progress::spinner(format!("running the kernel over {} file(s)", files.len()));
    let result = store.run(kernel, files, config);
    progress.finish();
    let mut result = result?;
    staged.install(&mut client, replace)?;
    for file in &mut result.files {
        staged.rename_reported(file);
    }
    Ok(result)
}

/// Refuses `--readers` and `--workers` outside their limits before anything is opened.
fn check_thread_options(arguments: &RunArgs) -> CliResult {
    for (option, value, maximum) in [
        ("--readers", Some(arguments.readers), MAX_READER_COUNT),
        ("--workers", arguments.workers, MAX_WORKER_COUNT),
    ] {
        if let Some(value) = value.filter(|value| !(1..=maximum).contains(value)) {
            return Err(Failure::invalid_input(format!(
                "{option} {value}: must be within 1..={maximum}"
            ))
            .into());
        }
    }
    Ok(())
}

/// Splits `key=value` options from file names.
pub fn split_arguments(arguments: &[String]) -> (Vec<String>, Vec<String>) {
    arguments
        .iter()
        .cloned()
        .partition(|argument| argument.contains('='))
}

/// A search that matched no line: `run` exits with status 1 and no message, as `grep` does
/// (its results, the totals and the stage table are printed as usual).
#[derive(Debug, thiserror::Error)]
#[error("no line matched")]
pub struct NoMatch;

/// `Err(NoMatch)` when every file's result is a search that matched nothing.
fn no_match_status(result: &PipelineResult) -> Result<(), NoMatch> {
    let searched_nothing_found = !result.files.is_empty()
        && result.files.iter().all(|file| {
            matches!(
                file.summary,
                Summary::Matches {
                    matching_line_count: 0,
                    ..
                }
            )
        });
    if searched_nothing_found {
        Err(NoMatch)
    } else {
        Ok(())
    }
}

/// Prints a search's matches as `grep -H -n` does (`NAME:LINE:TEXT`), and on standard error
/// how many matching lines were counted but not kept (`max_matches`).
fn print_matches(
    name: &str,
    matching_line_count: u64,
    matches: &[flashpipe_kernels::api::LineMatch],
) {
    for found in matches {
        println!("{name}:{}:{}", found.line_number, found.line);
    }
    let not_shown = matching_line_count.saturating_sub(matches.len() as u64);
    if not_shown > 0 {
        eprintln!(
            "flashpipe: {name}: {not_shown} more matching line(s) counted but not kept (raise max_matches= to see them)"
        );
    }
}

/// Prints each file's result on standard output (digests as `HASH  NAME`, the format
/// `sha256sum --check` reads; matches as `NAME:LINE:TEXT`, as `grep -H -n` prints them),
/// the totals and the stage table on standard error.
fn print_result(
    result: &PipelineResult,
    names: NameStyle,
    device_time_is_simulated: bool,
    wall_seconds: f64,
) -> CliResult {
    let shown = result
        .files
        .iter()
        .map(|file| names.show(&file.name))
        .collect::<Result<Vec<_>, _>>()?;
    for (file, name) in result.files.iter().zip(&shown) {
        match &file.summary {
            Summary::Digest { hex, .. } => {
                println!("{hex}  {name}");
                continue;
            }
            Summary::Matches {
                matching_line_count,
                matches,
            } => {
                print_matches(name, *matching_line_count, matches);
                continue;
            }
            Summary::Text { text } => {
                println!("{text}  {name}");
                continue;
            }
            _ => {}
        }
        println!(
            "{}  ({})  {}",
            name,
            HumanBytes(file.size_bytes),
            describe_summary(&file.summary)
        );
        if let Some(output) = &file.output_file {
            println!("    -> {output} ({})", HumanBytes(file.output_bytes));
        }
    }
    let report = &result.report;
    let clock = if device_time_is_simulated {
        "simulated device time"
    } else {
        "store clock"
    };
    eprintln!(
        "{} over {} files, {} in {:.3} s of {clock}: {:.1} MiB/s ({:.3} s wall for the whole command); slowest stage: {}",
        report.kernel,
        report.file_count,
        HumanBytes(report.input_bytes),
        report.elapsed_seconds,
        report.input_bytes_per_second / 1048576.0,
        wall_seconds,
        report.slowest_stage
    );
    eprintln!(
        "{:<8} {:>7} {:>9} {:>12} {:>10} {:>12}",
        "stage", "threads", "items", "busy s", "blocked s", "cap MiB/s"
    );
    for stage in &report.stages {
        eprintln!(
            "{:<8} {:>7} {:>9} {:>12.3} {:>10.3} {:>12.1}",
            stage.stage,
            stage.thread_count,
            stage.item_count,
            stage.busy_seconds,
            stage.blocked_downstream_seconds,
            stage.capacity_bytes_per_second / 1048576.0
        );
    }
    Ok(())
}

/// One line describing a summary.
pub fn describe_summary(summary: &Summary) -> String {
    match summary {
        Summary::Stream { output_bytes } => format!("{output_bytes} bytes out"),
        Summary::Digest { algorithm, hex } => format!("{algorithm} {hex}"),
        Summary::Matches {
            matching_line_count,
            matches,
        } => {
            let shown: Vec<String> = matches
                .iter()
                .take(5)
                .map(|found| format!("{}:{}", found.line_number, found.line))
                .collect();
            format!(
                "{matching_line_count} matching lines; {}",
                shown.join(" | ")
            )
        }
        Summary::Labels { labels } => {
            let mut counts = std::collections::BTreeMap::<&str, usize>::new();
            for label in labels {
                *counts.entry(label.language.as_str()).or_default() += 1;
            }
            let listed: Vec<String> = counts
                .iter()
                .map(|(language, count)| format!("{language} x{count}"))
                .collect();
            format!("{} pieces: {}", labels.len(), listed.join(", "))
        }
        Summary::Neighbours { queries } => {
            let first: Vec<String> = queries
                .iter()
                .take(3)
                .map(|query| {
                    let records: Vec<String> = query
                        .neighbours
                        .iter()
                        .map(|neighbour| neighbour.record_index.to_string())
                        .collect();
                    format!("query {}: {}", query.query_index, records.join(","))
                })
                .collect();
            format!("{} queries; {}", queries.len(), first.join("; "))
        }
        Summary::Sorted {
            record_count,
            spilled_run_count,
        } => format!("{record_count} records sorted, {spilled_run_count} runs spilled"),
        Summary::Index {
            record_count,
            entry_count,
        } => format!("{record_count} records, {entry_count} index entries"),
        Summary::Text { text } => text.clone(),
    }
}
