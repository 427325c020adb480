//! The server's structured logs: a `tracing` subscriber writing to standard error, as
//! text (colours only when standard error is a terminal) or as one JSON object a line
//! (`--log-format json`), at `info` by default, `debug` with `-v`, `trace` with `-vv`.
//! Standard output stays for the readiness line and the summary line. Both servers of
//! the CLI install it (`flashpipe serve --log-format`, `flashpipe nbd serve --json`), so
//! the events of the NBD server and of the store server land in one stream.
//!
//! A standard error that went away (the terminal closed, a pipe's reader gone) loses the
//! log lines and nothing else: the subscriber's own report of a failed write is off, since
//! it prints with `eprint!`, which panics on such a stream and took down the thread that
//! logged (the signal thread, so SIGTERM no longer stopped the server).

use std::io::IsTerminal;

use tracing::Level;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum LogFormat {
    /// Human-readable lines: time, level, message, fields.
    Text,
    /// One JSON object a line: `timestamp`, `level`, `fields` (`message` among them), `target`.
    Json,
}

/// Why logging could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("cannot install the log subscriber: {detail}")]
pub struct LoggingError {
    /// What `tracing` said.
    detail: String,
}

/// The most detailed level logged for `verbosity` (`-v` count).
pub fn level_for_verbosity(verbosity: u8) -> Level {
    match verbosity {
        0 => Level::INFO,
        1 => Level::DEBUG,
        _ => Level::TRACE,
    }
}

/// Installs the process's global subscriber (once, before anything is logged).
pub fn install_logging(format: LogFormat, verbosity: u8) -> Result<(), LoggingError> {
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .log_internal_errors(false)
        .with_max_level(level_for_verbosity(verbosity))
        .with_target(verbosity > 0);
    let installed = match format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        LogFormat::Json => builder.json().with_ansi(false).try_init(),
    };
    installed.map_err(|error| LoggingError {
        detail: error.to_string(),
    })
}
