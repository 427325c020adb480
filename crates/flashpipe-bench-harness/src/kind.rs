//! [`BenchErrorKind`]: what kind of failure a benchmark's error is, so that a script can
//! tell a wrong option value from a missing file, a refused one, a full disk or a bug. The
//! experiments' `BenchError` and the harness's chart errors carry it; the CLI names an
//! error's kind from it (never from the text).

/// What kind of failure a benchmark's error (`BenchError`, a chart's `PlotError`) is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BenchErrorKind {
    /// An option value, or a file given (a trace, a job file), is wrong.
    InvalidInput,
    /// A file or folder named does not exist.
    NotFound,
    /// An operating-system failure, of this kind (its error, when kept, is the source).
    Io(std::io::ErrorKind),
    /// A disk or a store is full.
    NoSpace,
    /// A state that cannot happen: a bug.
    Internal,
}
