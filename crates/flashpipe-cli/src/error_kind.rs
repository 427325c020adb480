//! The one table of error kinds and exit statuses of the `flashpipe` binary
//! (documented in docs/cli.md), and how a failure gets its kind: from its type, never from
//! its text.
//!
//! Every command returns `Box<dyn Error>`. [`classify`] looks at the typed error inside
//! (the CLI's own [`Failure`], which carries its kind, or the typed errors of the crates
//! below: store opening, the engine, the server's error codes, devices, kernels, NBD,
//! the operating system's `io::Error`) and names its [`ErrorKind`]; `main` prints the
//! kind with `--json` and exits with the kind's status. An error of no known type is
//! `internal`.
//!
//! Statuses follow grep and clap where those fix them (`no_match` 1, `usage` 2) and BSD's
//! sysexits.h elsewhere (`EX_DATAERR` 65 for damaged data, `EX_NOINPUT` 66 for a missing
//! file, ...); the two kinds sysexits has no word for (`kernel`, `no_space`) take 3 and 4.

mod classify;

pub use classify::classify;

/// What kind of failure ended a command; its name and exit status are stable (scripts
/// rely on them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The command line is wrong (unknown option, missing argument); from clap.
    Usage,
    /// A pattern or name matched nothing (grep's status 1).
    NoMatch,
    /// A named file, store file, device or folder does not exist.
    NotFound,
    /// The target exists already (give --force where the command has it).
    Exists,
    /// Another process holds the store or device; try again, or give --wait.
    StoreInUse,
    /// An argument or option value is wrong, or a file given is not what it should be.
    InvalidInput,
    /// The user may not do this (file modes, the server's access rule and per-user
    /// limit, a read-only store).
    Permission,
    /// Stored data or metadata failed a checksum or format check (fsck finding damage).
    Corrupt,
    /// An operating-system or device I/O failure.
    Io,
    /// The store or a device is full.
    NoSpace,
    /// A kernel refused its options or failed on its input.
    Kernel,
    /// A network peer (an NBD server, a TLS handshake, `flashpipe serve`) failed or
    /// could not be reached.
    Network,
    /// Anything unclassified: a bug or an unforeseen condition.
    Internal,
}

impl ErrorKind {
    /// Every kind, in the table's order.
    #[cfg(test)]
    pub const ALL: [ErrorKind; 13] = [
        ErrorKind::Usage,
        ErrorKind::NoMatch,
        ErrorKind::NotFound,
        ErrorKind::Exists,
        ErrorKind::StoreInUse,
        ErrorKind::InvalidInput,
        ErrorKind::Permission,
        ErrorKind::Corrupt,
        ErrorKind::Io,
        ErrorKind::NoSpace,
        ErrorKind::Kernel,
        ErrorKind::Network,
        ErrorKind::Internal,
    ];

    /// The kind's name in `--json` errors (`"kind"`).
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Usage => "usage",
            ErrorKind::NoMatch => "no_match",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Exists => "exists",
            ErrorKind::StoreInUse => "store_in_use",
            ErrorKind::InvalidInput => "invalid_input",
            ErrorKind::Permission => "permission",
            ErrorKind::Corrupt => "corrupt",
            ErrorKind::Io => "io",
            ErrorKind::NoSpace => "no_space",
            ErrorKind::Kernel => "kernel",
            ErrorKind::Network => "network",
            ErrorKind::Internal => "internal",
        }
    }

    /// The process's exit status for the kind.
    pub fn exit_status(self) -> u8 {
        match self {
            ErrorKind::NoMatch => 1,
            ErrorKind::Usage => 2,
            ErrorKind::Kernel => 3,
            ErrorKind::NoSpace => 4,
            ErrorKind::InvalidInput => 64, // EX_USAGE: a bad argument value
            ErrorKind::Corrupt => 65,      // EX_DATAERR
            ErrorKind::NotFound => 66,     // EX_NOINPUT
            ErrorKind::Network => 69,      // EX_UNAVAILABLE
            ErrorKind::Internal => 70,     // EX_SOFTWARE
            ErrorKind::Exists => 73,       // EX_CANTCREAT
            ErrorKind::Io => 74,           // EX_IOERR
            ErrorKind::StoreInUse => 75,   // EX_TEMPFAIL
            ErrorKind::Permission => 77,   // EX_NOPERM
        }
    }
}

/// A failure the CLI itself finds (a refused argument, a name matching nothing), or a
/// lower error given context in words: the message the user reads and the kind decided
/// where the failure is known.
#[derive(Debug)]
pub struct Failure {
    kind: ErrorKind,
    message: String,
}

impl Failure {
    /// A failure of `kind` told by `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Failure {
        Failure {
            kind,
            message: message.into(),
        }
    }

    /// A wrong argument or option value.
    pub fn invalid_input(message: impl Into<String>) -> Failure {
        Failure::new(ErrorKind::InvalidInput, message)
    }

    /// A name, file or pattern that does not exist or matches nothing in the store.
    pub fn not_found(message: impl Into<String>) -> Failure {
        Failure::new(ErrorKind::NotFound, message)
    }

    /// A pattern matching nothing.
    pub fn no_match(message: impl Into<String>) -> Failure {
        Failure::new(ErrorKind::NoMatch, message)
    }

    /// `message` for `error`, keeping `error`'s kind.
    pub fn context(
        error: &(dyn std::error::Error + 'static),
        message: impl Into<String>,
    ) -> Failure {
        Failure::new(classify(error), message)
    }

    /// The failure's kind.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_statuses_are_distinct_and_sysexits_like() {
        let mut names: Vec<_> = ErrorKind::ALL.iter().map(|kind| kind.name()).collect();
        let mut statuses: Vec<_> = ErrorKind::ALL
            .iter()
            .map(|kind| kind.exit_status())
            .collect();
        names.sort_unstable();
        names.dedup();
        statuses.sort_unstable();
        statuses.dedup();
        assert_eq!(names.len(), ErrorKind::ALL.len());
        assert_eq!(statuses.len(), ErrorKind::ALL.len());
        assert_eq!(ErrorKind::Usage.exit_status(), 2);
        assert_eq!(ErrorKind::NoMatch.exit_status(), 1);
        for kind in ErrorKind::ALL {
            if !matches!(kind, ErrorKind::Usage | ErrorKind::NoMatch) {
                assert!(kind.exit_status() >= 3, "{}", kind.name());
            }
        }
    }

    #[test]
    fn an_io_error_keeps_its_class() {
        let missing = std::io::Error::from(std::io::ErrorKind::NotFound);
        assert_eq!(classify(&missing), ErrorKind::NotFound);
        let refused = std::io::Error::from_raw_os_error(libc::EACCES);
        assert_eq!(classify(&refused), ErrorKind::Permission);
        let full = std::io::Error::from_raw_os_error(libc::ENOSPC);
        assert_eq!(classify(&full), ErrorKind::NoSpace);
        let wrapped = Failure::context(&full, "writing x");
        assert_eq!(wrapped.kind(), ErrorKind::NoSpace);
    }
}
