//! One kernel run next to the server's engine (issue #14): the same job `flashpipe run`
//! runs in its own process (crates/flashpipe-cli/src/run_cmd.rs), on the engine the
//! server owns. Outputs are atomic as there: the pipeline writes them under temporary
//! names, which are renamed to their names and committed together (one flush) when the
//! whole job succeeded; a failed or cancelled job removes its temporaries and flushes
//! nothing, so it commits nothing. Outputs that exist are refused before anything runs,
//! unless the request replaces them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use flashpipe_engine::{Command, EngineClient, EngineError, Reply};
use flashpipe_fs::NamespaceError;
use flashpipe_kernels::api::{Kernel, OutputKind};
use flashpipe_kernels::registry::find_kernel;
use flashpipe_pipeline::config::{MAX_READER_COUNT, MAX_WORKER_COUNT};
use flashpipe_pipeline::run::PipelineJob;
use flashpipe_pipeline::{
    run_pipeline_observed, FileObserver, FileOutcome, OutputTarget, PipelineConfig, PipelineError,
    PipelineResult,
};
use flashpipe_protocol::{ErrorCode, RemoteError, RunKernelRequest};
use flashpipe_store::RunningStore;

use crate::engine_errors::remote_error;

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
    let kernel = find_kernel(&run.kernel)
        .and_then(|spec| spec.build(&run.options))
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
    let staged = StagedOutputs::new(&output_target(run, kernel.as_ref())?, run_number);
    let mut config = PipelineConfig::for_engine(&store.engine_config, staged.target.clone());
    config.reader_count = reader_count;
    config.chunk_credit_count = (config.chunk_credit_count / runs_at_once.max(1)).max(1);
    config.reads_in_flight_per_reader = config
        .reads_in_flight_per_reader
        .min(config.chunk_credit_count);
    if let Some(workers) = worker_count {
        config.worker_count = workers;
    }
    let mut client = store.engine.client(4);
    staged.check(&mut client, &run.inputs, run.replace_outputs)?;
    let observer = staged.observer(on_file_done);
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
            .map(|()| result),
        Err(error) => Err(pipeline_error(&error)),
    };
    match outcome {
        Ok(mut result) => {
            staged.rename_reported(&mut result);
            Ok(result)
        }
        Err(error) => {
            staged.remove_temporaries(&mut client);
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
        | PipelineError::Write { source, .. } => remote_error(source).code,
        PipelineError::Kernel(_) | PipelineError::KernelPanicked { .. } => ErrorCode::KernelFailed,
        PipelineError::Config(_) => ErrorCode::BadKernelRun,
        PipelineError::Cancelled => return cancelled(),
        PipelineError::Stream { .. } => ErrorCode::Internal,
    };
    RemoteError::new(code, error.to_string())
}

/// The output files of a run (none for a kernel that summarises): `--output` for one
/// input, `NAME-<input>` for several, `<input>.<kernel>` without `--output`.
fn output_target(run: &RunKernelRequest, kernel: &dyn Kernel) -> Result<OutputTarget, RemoteError> {
    if kernel.output_kind() == OutputKind::Summary {
        if run.output.is_some() {
            return Err(bad_run(format!(
                "kernel {} produces a summary, not a stream; --output does not apply",
                kernel.name()
            )));
        }
        return Ok(OutputTarget::Discard);
    }
    let names: Vec<String> = match (&run.output, run.inputs.len()) {
        (Some(name), 1) => vec![name.clone()],
        (Some(prefix), _) => run
            .inputs
            .iter()
            .map(|file| format!("{prefix}-{file}"))
            .collect(),
        (None, _) => run
            .inputs
            .iter()
            .map(|file| format!("{file}.{}", kernel.name()))
            .collect(),
    };
    for name in &names {
        if let Some(reason) = flashpipe_fs::name_problem(name) {
            return Err(bad_run(format!("output name {name:?}: {reason}")));
        }
    }
    Ok(OutputTarget::StoreFiles(names))
}

/// A run's output names and the temporary names the pipeline writes them under.
struct StagedOutputs {
    names: Vec<String>,
    temporaries: Vec<String>,
    target: OutputTarget,
}

impl StagedOutputs {
    fn new(output: &OutputTarget, run_number: u64) -> StagedOutputs {
        let names = match output {
            OutputTarget::StoreFiles(names) => names.clone(),
            OutputTarget::Discard | OutputTarget::ReturnToCaller => Vec::new(),
        };
        let pid = std::process::id();
        let temporaries: Vec<String> = (0..names.len())
            .map(|index| format!(".flashpipe-serve-run-{pid}-{run_number}-{index}"))
            .collect();
        let target = match output {
            OutputTarget::StoreFiles(_) => OutputTarget::StoreFiles(temporaries.clone()),
            other => other.clone(),
        };
        StagedOutputs {
            names,
            temporaries,
            target,
        }
    }

    /// Refuses an output that is an input, one that exists (unless `replace`) and a
    /// temporary name that is taken, before the job runs.
    fn check(
        &self,
        client: &mut EngineClient,
        inputs: &[String],
        replace: bool,
    ) -> Result<(), RemoteError> {
        for name in &self.names {
            if inputs.contains(name) {
                return Err(bad_run(format!(
                    "output file {name} is also an input; choose another output name"
                )));
            }
            if !replace && file_exists(client, name)? {
                return Err(RemoteError::new(
                    ErrorCode::Exists,
                    format!("output file {name} exists in the store; give --force to replace it"),
                ));
            }
        }
        for temporary in &self.temporaries {
            if file_exists(client, temporary)? {
                return Err(RemoteError::new(
                    ErrorCode::Exists,
                    format!(
                        "temporary name {temporary:?} is taken in the store; remove that file first"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Renames every temporary to its output name and commits them together.
    fn install(&self, client: &mut EngineClient, replace: bool) -> Result<(), RemoteError> {
        for (temporary, name) in self.temporaries.iter().zip(&self.names) {
            let (from, to) = (temporary.clone(), name.clone());
            let command = if replace {
                Command::RenameReplacing { from, to }
            } else {
                Command::Rename { from, to }
            };
            client.call(command).map_err(|error| {
                let wire = remote_error(&error);
                RemoteError::new(wire.code, format!("output file {name}: {error}"))
            })?;
        }
        client
            .call(Command::Flush)
            .map(drop)
            .map_err(|error| remote_error(&error))
    }

    /// Removes the temporaries of a failed run (uncommitted; a missing one is fine).
    fn remove_temporaries(&self, client: &mut EngineClient) {
        for temporary in &self.temporaries {
            let removed = client.call(Command::Delete {
                name: temporary.clone(),
            });
            if let Err(error) = removed {
                if !is_not_found(&error) {
                    tracing::warn!(%temporary, %error, "cannot remove a failed run's temporary output");
                }
            }
        }
    }

    /// Puts the output names where the pipeline reported temporaries.
    fn rename_reported(&self, result: &mut PipelineResult) {
        for file in &mut result.files {
            rename_output(&self.temporaries, &self.names, file);
        }
    }

    /// An observer telling `on_file_done` each outcome with its output's name.
    fn observer(&self, on_file_done: FileObserver) -> FileObserver {
        let (temporaries, names) = (self.temporaries.clone(), self.names.clone());
        Arc::new(move |index, outcome: &FileOutcome| {
            let mut outcome = outcome.clone();
            rename_output(&temporaries, &names, &mut outcome);
            on_file_done(index, &outcome);
        })
    }
}

/// Puts the output name in `file` where the pipeline reported a temporary.
fn rename_output(temporaries: &[String], names: &[String], file: &mut FileOutcome) {
    let index = file.output_file.as_ref().and_then(|reported| {
        temporaries
            .iter()
            .position(|temporary| temporary == reported)
    });
    if let Some(name) = index.and_then(|index| names.get(index)) {
        file.output_file = Some(name.clone());
    }
}

fn is_not_found(error: &EngineError) -> bool {
    matches!(
        error,
        EngineError::Namespace(NamespaceError::NotFound { .. })
    )
}

fn file_exists(client: &mut EngineClient, name: &str) -> Result<bool, RemoteError> {
    match client.call(Command::Stat {
        name: name.to_string(),
    }) {
        Ok(Reply::Stat(_)) => Ok(true),
        Ok(other) => Err(RemoteError::new(
            ErrorCode::Internal,
            format!("stat of {name} answered {other:?}"),
        )),
        Err(error) if is_not_found(&error) => Ok(false),
        Err(error) => Err(remote_error(&error)),
    }
}
