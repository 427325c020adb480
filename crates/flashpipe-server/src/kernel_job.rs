//! One kernel run next to the server's engine (issue #14): the same job `flashpipe run`
//! runs in its own process (crates/flashpipe-cli/src/run_cmd.rs), on the engine the
//! server owns. Outputs are atomic as there (`flashpipe_pipeline::staged`, shared with
//! it): the pipeline writes them under temporary names, which are renamed to their names
//! and committed together (one flush) when the whole job succeeded; a failed or cancelled
//! job removes its temporaries and flushes nothing, so it commits nothing. Outputs that
//! exist are refused before anything runs, unless the request replaces them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use flashpipe_kernels::registry::find_kernel;
use flashpipe_pipeline::config::{MAX_READER_COUNT, MAX_WORKER_COUNT};
use flashpipe_pipeline::run::PipelineJob;
use flashpipe_pipeline::store_file_options::build_reading_store_files;
use flashpipe_pipeline::{
    output_target, run_pipeline_observed, FileObserver, FileOutcome, PipelineConfig, PipelineError,
    PipelineResult, StagedOutputs, StagingError,
};
use flashpipe_protocol::{ErrorCode, RemoteError, RunKernelRequest};
use flashpipe_store::RunningStore;

/// Runs `run` on `store`'s engine; `run_number` makes its temporary names unique among
/// the server's runs; `cancel` stops it at the next file boundary; `on_file_done` is told
/// each file's outcome (output names as they will be committed) as the file completes.
/// The run takes `1 / runs_at_once` of the engine's read buffers as its credits, so runs
/// going on together never empty the read pool for each other.
pub(crate) fn run_kernel_job(
    store: &RunningStore,
    run: &RunKernelRequest,
    runs_at_once: usize,
    run_number: u64,
    cancel: &Arc<AtomicBool>,
    on_file_done: FileObserver,
) -> Result<PipelineResult, RemoteError> {
    let (reader_count, worker_count) = thread_counts(run)?;
    let spec = find_kernel(&run.kernel).map_err(|error| bad_run(error.to_string()))?;
    let kernel = build_reading_store_files(spec, &run.options, &mut store.engine.client(4))
        .map_err(|error| bad_run(error.to_string()))?;
    if run.inputs.is_empty() {
        return Err(bad_run(
            "no input files given (arguments with '=' are kernel options)",
        ));
    }
    let mut seen = std::collections::HashSet::new();
    if let Some(twice) = run.inputs.iter().find(|name| !seen.insert(name.as_str())) {
        return Err(bad_run(format!(
            "input file {twice} is named twice; name each input once"
        )));
    }
    let output = output_target(kernel.as_ref(), run.output.as_deref(), &run.inputs)
        .map_err(staging_error)?;
    let temporary_prefix = format!(".flashpipe-serve-run-{}-{run_number}", std::process::id());
    let staged = StagedOutputs::new(&output, &temporary_prefix);
    let mut config = PipelineConfig::for_engine(&store.engine_config, staged.pipeline_target());
    config.reader_count = reader_count;
    config.chunk_credit_count = (config.chunk_credit_count / runs_at_once.max(1)).max(1);
    config.reads_in_flight_per_reader = config
        .reads_in_flight_per_reader
        .min(config.chunk_credit_count);
    if let Some(workers) = worker_count {
        config.worker_count = workers;
    }
    let mut client = store.engine.client(4);
    staged
        .check(&mut client, &run.inputs, run.replace_outputs)
        .map_err(staging_error)?;
    let observer = observer(&staged, on_file_done);
    let result = run_pipeline_observed(
        PipelineJob {
            engine: &store.engine,
            engine_config: &store.engine_config,
            kernel,
            files: &run.inputs,
            config: &config,
            cancel: Arc::clone(cancel),
        },
        observer,
    );
    let outcome = match result {
        Ok(_) if cancel.load(Ordering::Acquire) => Err(cancelled()),
        Ok(result) => staged
            .install(&mut client, run.replace_outputs)
            .map(|()| result)
            .map_err(staging_error),
        Err(error) => Err(pipeline_error(&error)),
    };
    match outcome {
        Ok(mut result) => {
            for file in &mut result.files {
                staged.rename_reported(file);
            }
            Ok(result)
        }
        Err(error) => {
            for (temporary, removal_error) in staged.remove_temporaries(&mut client) {
                tracing::warn!(%temporary, error = %removal_error, "cannot remove a failed run's temporary output");
            }
            Err(error)
        }
    }
}

fn bad_run(message: impl Into<String>) -> RemoteError {
    RemoteError::new(ErrorCode::BadKernelRun, message)
}

fn cancelled() -> RemoteError {
    RemoteError::new(
        ErrorCode::Cancelled,
        "the kernel run was cancelled; it committed nothing",
    )
}

/// The reader count (0: one) and worker count (0: the pipeline's default), checked.
fn thread_counts(run: &RunKernelRequest) -> Result<(usize, Option<usize>), RemoteError> {
    let readers = (run.reader_count as usize).max(1);
    let workers = Some(run.worker_count as usize).filter(|workers| *workers > 0);
    for (option, value, maximum) in [
        ("--readers", Some(readers), MAX_READER_COUNT),
        ("--workers", workers, MAX_WORKER_COUNT),
    ] {
        if let Some(value) = value.filter(|value| *value > maximum) {
            return Err(RemoteError::limit(
                ErrorCode::BadKernelRun,
                format!("{option} {value}: must be within 1..={maximum}"),
                maximum as u64,
            ));
        }
    }
    Ok((readers, workers))
}

/// The wire error of a failed pipeline: the engine's code where the engine failed, with
/// the pipeline's message (which names the file and offset).
fn pipeline_error(error: &PipelineError) -> RemoteError {
    let code = match error {
        PipelineError::Open { source, .. }
        | PipelineError::Read { source, .. }
        | PipelineError::Output { source, .. }
        | PipelineError::Write { source, .. } => source.to_api().code,
        PipelineError::Kernel(_) | PipelineError::KernelPanicked { .. } => ErrorCode::KernelFailed,
        PipelineError::Config(_) => ErrorCode::BadKernelRun,
        PipelineError::Cancelled => return cancelled(),
        PipelineError::Stream { .. } => ErrorCode::Internal,
    };
    RemoteError::new(code, error.to_string())
}

/// A staging refusal as the client sees it: naming refusals are a bad run, names taken
/// are `Exists`, engine errors keep their code.
fn staging_error(error: StagingError) -> RemoteError {
    let message = error.to_string();
    match error {
        StagingError::OutputForSummary { .. }
        | StagingError::BadOutputName { .. }
        | StagingError::OutputIsInput { .. } => bad_run(message),
        StagingError::OutputExists { .. } | StagingError::TemporaryTaken { .. } => {
            RemoteError::new(ErrorCode::Exists, message)
        }
        StagingError::Install { error, .. } => RemoteError::new(error.to_api().code, message),
        StagingError::Engine(error) => error.to_api(),
    }
}

/// An observer telling `on_file_done` each outcome with its output's name.
fn observer(staged: &StagedOutputs, on_file_done: FileObserver) -> FileObserver {
    let staged = staged.clone();
    Arc::new(move |index, outcome: &FileOutcome| {
        let mut outcome = outcome.clone();
        staged.rename_reported(&mut outcome);
        on_file_done(index, &outcome);
    })
}
