//! [`BenchError`]: the one typed error of the benchmarks, experiments and reproductions,
//! so that a script can tell a wrong option value from a missing file, a refused one, a
//! full disk or a bug. The CLI names its kind from its type (never from its text).
//!
//! Make one with [`invalid_input`] (an option value or a given file is not what it should
//! be), [`not_found`], [`io_context`] (an operating-system error given words, its
//! `io::Error` kept so that its number still decides: ENOENT is not found, EACCES is
//! permission, ENOSPC is no space) or [`internal`] (a state that cannot happen).

use std::fmt;

/// What kind of failure a [`BenchError`] is (defined in the harness, whose charts fail
/// with the same kinds).
pub use flashpipe_bench_harness::kind::BenchErrorKind;

/// A failure of a benchmark or experiment: what happened in words, and its kind.
#[derive(Debug)]
pub struct BenchError {
    kind: BenchErrorKind,
    message: String,
    source: Option<std::io::Error>,
}

impl BenchError {
    /// A failure of `kind` told by `message`.
    pub fn new(kind: BenchErrorKind, message: impl Into<String>) -> BenchError {
        BenchError {
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// The same failure told as `prefix: message` (an option's name, a file's).
    pub fn prefixed(mut self, prefix: impl fmt::Display) -> BenchError {
        self.message = format!("{prefix}: {}", self.message);
        self
    }

    /// The same failure told as `message (note)`.
    pub fn suffixed(mut self, note: impl fmt::Display) -> BenchError {
        self.message = format!("{} ({note})", self.message);
        self
    }

    /// The failure's kind.
    pub fn kind(&self) -> BenchErrorKind {
        self.kind
    }

    /// The operating-system error behind an [`BenchErrorKind::Io`] failure, when kept.
    pub fn io_source(&self) -> Option<&std::io::Error> {
        self.source.as_ref()
    }
}

impl fmt::Display for BenchError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.message)
    }
}

impl std::error::Error for BenchError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_ref()
            .map(|error| error as &(dyn std::error::Error + 'static))
    }
}

/// A wrong option value or input file.
pub fn invalid_input(message: impl Into<String>) -> BenchError {
    BenchError::new(BenchErrorKind::InvalidInput, message)
}

/// A named file or folder that does not exist.
pub fn not_found(message: impl Into<String>) -> BenchError {
    BenchError::new(BenchErrorKind::NotFound, message)
}

/// A state that cannot happen.
pub fn internal(message: impl Into<String>) -> BenchError {
    BenchError::new(BenchErrorKind::Internal, message)
}

/// `error` told as `message: error`, its kind (and number) kept.
pub fn io_context(error: std::io::Error, message: impl fmt::Display) -> BenchError {
    BenchError {
        kind: BenchErrorKind::Io(error.kind()),
        message: format!("{message}: {error}"),
        source: Some(error),
    }
}

/// A closure for `map_err` giving an `io::Error` the words `message`.
pub fn io_with(message: impl fmt::Display) -> impl FnOnce(std::io::Error) -> BenchError {
    move |error| io_context(error, message)
}

impl From<flashpipe_bench_harness::plot::PlotError> for BenchError {
    fn from(error: flashpipe_bench_harness::plot::PlotError) -> BenchError {
        BenchError::new(error.kind, error.to_string())
    }
}

impl From<flashpipe_flash::workload::TraceError> for BenchError {
    fn from(error: flashpipe_flash::workload::TraceError) -> BenchError {
        invalid_input(error.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_io_error_keeps_its_kind_number_and_words() {
        let error = io_context(
            std::io::Error::from_raw_os_error(libc::EACCES),
            "cannot read trace t.txt",
        );
        assert_eq!(
            error.kind(),
            BenchErrorKind::Io(std::io::ErrorKind::PermissionDenied)
        );
        assert_eq!(
            error.io_source().unwrap().raw_os_error(),
            Some(libc::EACCES)
        );
        assert!(error.to_string().starts_with("cannot read trace t.txt: "));
        assert!(std::error::Error::source(&error).is_some());
    }

    #[test]
    fn helpers_name_their_kinds() {
        assert_eq!(invalid_input("x").kind(), BenchErrorKind::InvalidInput);
        assert_eq!(not_found("x").kind(), BenchErrorKind::NotFound);
        assert_eq!(internal("x").kind(), BenchErrorKind::Internal);
        assert_eq!(invalid_input("--qd 0").to_string(), "--qd 0");
    }
}
