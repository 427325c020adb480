//! A job's output files staged under temporary names, so that a job commits all its outputs
//! or none: the pipeline writes each output under a temporary name; when the whole job has
//! succeeded the temporaries are renamed to their names and committed together (one flush);
//! a failed job's temporaries are removed, unflushed. `flashpipe run` in process and a kernel
//! run through `flashpipe serve` both stage their outputs here.

use flashpipe_engine::{Command, EngineClient, EngineError, Reply};
use flashpipe_fs::NamespaceError;
use flashpipe_kernels::api::{Kernel, OutputKind};

use crate::config::OutputTarget;
use crate::report::FileOutcome;

/// Why a job's outputs cannot be named, staged or installed.
#[derive(Debug, thiserror::Error)]
pub enum StagingError {
    /// `--output` was given to a kernel that writes no file.
    #[error("kernel {kernel} produces a summary, not a stream; --output does not apply")]
    OutputForSummary {
        /// The kernel.
        kernel: String,
    },
    /// An output name the file system refuses.
    #[error("output name {name:?}: {reason}")]
    BadOutputName {
        /// The name.
        name: String,
        /// Why the file system refuses it.
        reason: &'static str,
    },
    /// An output that is also one of the job's inputs.
    #[error("output file {name} is also an input; choose another output name")]
    OutputIsInput {
        /// The name.
        name: String,
    },
    /// An output that exists, the job not asked to replace it.
    #[error("output file {name} exists in the store; give --force to replace it")]
    OutputExists {
        /// The name.
        name: String,
    },
    /// A temporary name another file already has.
    #[error("temporary name {name:?} is taken in the store; remove that file first")]
    TemporaryTaken {
        /// The temporary name.
        name: String,
    },
    /// Renaming a temporary to its output name failed.
    #[error("output file {name}: {error}")]
    Install {
        /// The output name.
        name: String,
        /// The engine's error.
        error: EngineError,
    },
    /// The engine refused a stat or the commit.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// The output files of a job over `inputs`: none for a kernel that summarises; for one that
/// transforms, `output` for a single input, `OUTPUT-<input>` for several, and
/// `<input>.<kernel>` when `output` is not given.
pub fn output_target(
    kernel: &dyn Kernel,
    output: Option<&str>,
    inputs: &[String],
) -> Result<OutputTarget, StagingError> {
    if kernel.output_kind() == OutputKind::Summary {
        if output.is_some() {
            return Err(StagingError::OutputForSummary {
                kernel: kernel.name().to_string(),
            });
        }
        return Ok(OutputTarget::Discard);
    }
    let names: Vec<String> = match (output, inputs.len()) {
        (Some(name), 1) => vec![name.to_string()],
        (Some(prefix), _) => inputs
            .iter()
            .map(|file| format!("{prefix}-{file}"))
            .collect(),
        (None, _) => inputs
            .iter()
            .map(|file| format!("{file}.{}", kernel.name()))
            .collect(),
    };
    for name in &names {
        if let Some(reason) = flashpipe_fs::new_name_problem(name) {
            return Err(StagingError::BadOutputName {
                name: name.clone(),
                reason,
            });
        }
    }
    Ok(OutputTarget::StoreFiles(names))
}

/// A job's output names and the temporary names the pipeline writes them under.
#[derive(Debug, Clone)]
pub struct StagedOutputs {
    names: Vec<String>,
    temporaries: Vec<String>,
    target: OutputTarget,
}

impl StagedOutputs {
    /// Stages `output`'s files under `TEMPORARY_PREFIX-<index>` (the prefix names the
    /// process and the job, so concurrent jobs never share a temporary).
    pub fn new(output: &OutputTarget, temporary_prefix: &str) -> StagedOutputs {
        let names = match output {
            OutputTarget::StoreFiles(names) => names.clone(),
            OutputTarget::Discard | OutputTarget::ReturnToCaller => Vec::new(),
        };
        let temporaries: Vec<String> = (0..names.len())
            .map(|index| format!("{temporary_prefix}-{index}"))
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

    /// Where the pipeline writes: the temporaries (or no file at all).
    pub fn pipeline_target(&self) -> OutputTarget {
        self.target.clone()
    }

    /// Refuses, before the job runs, an output that is an input, one that exists (unless
    /// `replace`) and a temporary name that is taken.
    pub fn check(
        &self,
        client: &mut EngineClient,
        inputs: &[String],
        replace: bool,
    ) -> Result<(), StagingError> {
        for name in &self.names {
            if inputs.contains(name) {
                return Err(StagingError::OutputIsInput { name: name.clone() });
            }
            if !replace && file_exists(client, name)? {
                return Err(StagingError::OutputExists { name: name.clone() });
            }
        }
        for temporary in &self.temporaries {
            if file_exists(client, temporary)? {
                return Err(StagingError::TemporaryTaken {
                    name: temporary.clone(),
                });
            }
        }
        Ok(())
    }

    /// Renames every temporary to its output name and commits them together.
    pub fn install(&self, client: &mut EngineClient, replace: bool) -> Result<(), StagingError> {
        for (temporary, name) in self.temporaries.iter().zip(&self.names) {
            let command = Command::Rename {
                from: temporary.clone(),
                to: name.clone(),
                replace,
            };
            client
                .call(command)
                .map_err(|error| StagingError::Install {
                    name: name.clone(),
                    error,
                })?;
        }
        client.call(Command::Flush)?;
        Ok(())
    }

    /// Removes a failed job's temporaries (uncommitted; a missing one is fine); returns
    /// those that could not be removed, with the engine's error.
    pub fn remove_temporaries(&self, client: &mut EngineClient) -> Vec<(String, EngineError)> {
        let mut failures = Vec::new();
        for temporary in &self.temporaries {
            let removed = client.call(Command::Delete {
                name: temporary.clone(),
            });
            match removed {
                Err(error) if !is_not_found(&error) => failures.push((temporary.clone(), error)),
                _ => {}
            }
        }
        failures
    }

    /// Puts the output's name in `file` where the pipeline reported its temporary.
    pub fn rename_reported(&self, file: &mut FileOutcome) {
        let index = file.output_file.as_ref().and_then(|reported| {
            self.temporaries
                .iter()
                .position(|temporary| temporary == reported)
        });
        if let Some(name) = index.and_then(|index| self.names.get(index)) {
            file.output_file = Some(name.clone());
        }
    }
}

fn is_not_found(error: &EngineError) -> bool {
    matches!(
        error,
        EngineError::Namespace(NamespaceError::NotFound { .. })
    )
}

fn file_exists(client: &mut EngineClient, name: &str) -> Result<bool, EngineError> {
    match client.call(Command::Stat {
        name: name.to_string(),
    }) {
        Ok(Reply::Stat(_)) => Ok(true),
        Ok(other) => unreachable!("the engine answered a stat with {other:?}"),
        Err(error) if is_not_found(&error) => Ok(false),
        Err(error) => Err(error),
    }
}
