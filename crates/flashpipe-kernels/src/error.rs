//! Error types: kernel failures (always naming the file and the byte offset) and option errors.

use std::sync::Arc;

/// A kernel failed on a file at a byte offset.
#[derive(Debug, thiserror::Error)]
#[error("{file} at byte {offset_bytes}: {kind}")]
pub struct KernelError {
    /// The file being processed.
    pub file: Arc<str>,
    /// Where in the file the problem was found.
    pub offset_bytes: u64,
    /// What went wrong.
    pub kind: KernelErrorKind,
}

impl KernelError {
    /// An error in `file` at `offset_bytes`.
    pub fn new(file: &str, offset_bytes: u64, kind: KernelErrorKind) -> Self {
        Self {
            file: Arc::from(file),
            offset_bytes,
            kind,
        }
    }
}

/// The ways a kernel can fail.
#[derive(Debug, thiserror::Error)]
pub enum KernelErrorKind {
    /// The input is not in the format the kernel reads (a text file given to Sobel, ...).
    #[error("wrong input format: {0}")]
    WrongFormat(String),
    /// The input length does not fit the kernel (not a whole number of blocks or records).
    #[error("wrong input length: {0}")]
    WrongLength(String),
    /// Decryption found invalid PKCS#7 padding (wrong key, or not ciphertext).
    #[error("invalid PKCS#7 padding (wrong key or not ciphertext)")]
    InvalidPadding,
    /// A line longer than the kernel's carry limit.
    #[error("line longer than {limit_bytes} bytes (raise max_line_bytes)")]
    LineTooLong {
        /// The configured limit.
        limit_bytes: usize,
    },
    /// Temporary storage or output failed.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// A user's WebAssembly kernel failed (a trap, a limit, a bad result).
    #[error("WebAssembly kernel: {0}")]
    Wasm(crate::wasm::WasmError),
    /// A broken invariant inside the kernel (a bug, never bad input).
    #[error("internal error: {0}")]
    Internal(String),
}

/// Bad kernel name or options (nothing has run yet).
#[derive(Debug, thiserror::Error)]
pub enum OptionsError {
    /// No kernel of that name.
    #[error("unknown kernel '{name}'; known kernels: {known}")]
    UnknownKernel {
        /// The name asked for.
        name: String,
        /// The registry's names, comma-separated.
        known: String,
    },
    /// An argument that is not `key=value`.
    #[error("option '{argument}' is not of the form key=value")]
    NotKeyValue {
        /// The argument as given.
        argument: String,
    },
    /// A key the kernel does not take.
    #[error("kernel '{kernel}' has no option '{key}'; its options: {known}")]
    UnknownOption {
        /// The kernel.
        kernel: String,
        /// The key as given.
        key: String,
        /// The kernel's option names, comma-separated.
        known: String,
    },
    /// The same key twice.
    #[error("option '{key}' given more than once")]
    Duplicate {
        /// The repeated key.
        key: String,
    },
    /// A required option is missing.
    #[error("kernel '{kernel}' needs option '{key}' ({help})")]
    Missing {
        /// The kernel.
        kernel: String,
        /// The missing key.
        key: String,
        /// What the value should be.
        help: String,
    },
    /// A value that does not parse or is out of range.
    #[error("option {key}={value}: {reason}")]
    BadValue {
        /// The key.
        key: String,
        /// The value as given.
        value: String,
        /// Why it is refused.
        reason: String,
    },
    /// A file named by an option could not be used (profiles, queries).
    #[error("option {key}: {reason}")]
    BadFile {
        /// The key naming the file.
        key: String,
        /// What went wrong with it.
        reason: String,
    },
}
