//! `flashpipe completions SHELL` and `flashpipe man`: shell completions and manual pages,
//! generated from the same clap definitions that parse the command line, so they never
//! drift from it.
//!
//! Completions go to standard output (e.g. `flashpipe completions bash >
//! /etc/bash_completion.d/flashpipe`). `man` writes the top page as roff to standard
//! output (`flashpipe man | man -l -`), or with `--out DIR` one page per command and
//! subcommand (`flashpipe.1`, `flashpipe-mkfs.1`, `flashpipe-sim-repro.1`, ...) into DIR.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, ValueEnum};

type CliResult = Result<(), Box<dyn std::error::Error>>;

/// The shells completions are written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompletionShell {
    /// GNU bash.
    Bash,
    /// Z shell.
    Zsh,
    /// fish.
    Fish,
}

/// Options of `flashpipe completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to write completions for.
    #[arg(value_enum)]
    shell: CompletionShell,
    /// Refused: completions are a shell script, not results (accepted only to say so).
    #[arg(long)]
    json: bool,
}

/// Options of `flashpipe man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write one page per command and subcommand into this folder (created if missing)
    /// instead of the top page to standard output.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Refused: manual pages are roff, not results (accepted only to say so).
    #[arg(long)]
    json: bool,
}

/// Why `--json` is refused by a command whose output is not results.
#[derive(Debug, thiserror::Error)]
#[error("{command} writes {output}; --json does not apply")]
pub struct JsonDoesNotApplyError {
    /// The command given `--json`.
    pub command: &'static str,
    /// What it writes instead of results.
    pub output: &'static str,
}

/// Why manual pages could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ManError {
    /// The output folder could not be made.
    #[error("cannot create the manual page folder {path}: {source}")]
    CreateFolder {
        /// The folder.
        path: String,
        /// What the system said.
        source: std::io::Error,
    },
    /// A page could not be written.
    #[error("cannot write manual pages into {path}: {source}")]
    WritePages {
        /// The folder or "standard output".
        path: String,
        /// What the system said.
        source: std::io::Error,
    },
}

/// Writes the completions of `command` for the chosen shell to standard output.
pub fn run_completions(arguments: CompletionsArgs, mut command: clap::Command) -> CliResult {
    if arguments.json {
        return Err(JsonDoesNotApplyError {
            command: "completions",
            output: "a shell script",
        }
        .into());
    }
    let name = command.get_name().to_string();
    let mut output = std::io::stdout().lock();
    match arguments.shell {
        CompletionShell::Bash => {
            clap_complete::generate(clap_complete::Shell::Bash, &mut command, name, &mut output)
        }
        CompletionShell::Zsh => {
            clap_complete::generate(clap_complete::Shell::Zsh, &mut command, name, &mut output)
        }
        CompletionShell::Fish => {
            clap_complete::generate(clap_complete::Shell::Fish, &mut command, name, &mut output)
        }
    }
    output.flush()?;
    Ok(())
}

/// Writes the manual of `command`: the top page to standard output, or every page into
/// `--out`.
pub fn run_man(arguments: ManArgs, command: clap::Command) -> CliResult {
    if arguments.json {
        return Err(JsonDoesNotApplyError {
            command: "man",
            output: "manual pages as roff",
        }
        .into());
    }
    match arguments.out {
        None => {
            let write_error = |source| ManError::WritePages {
                path: "standard output".to_string(),
                source,
            };
            let mut output = std::io::stdout().lock();
            clap_mangen::Man::new(command)
                .render(&mut output)
                .map_err(write_error)?;
            output.flush().map_err(write_error)?;
        }
        Some(folder) => {
            let path = folder.display().to_string();
            std::fs::create_dir_all(&folder).map_err(|source| ManError::CreateFolder {
                path: path.clone(),
                source,
            })?;
            clap_mangen::generate_to(command, &folder)
                .map_err(|source| ManError::WritePages { path, source })?;
        }
    }
    Ok(())
}
