//! The typed errors of WebAssembly kernels: what went wrong with a module when it was
//! loaded (not a module, too big, an import, a missing or mistyped export) and when it ran
//! (a trap, out of memory, out of time or fuel, a result outside its memory).

/// A WebAssembly kernel failed to load or to run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WasmError {
    /// The module file is empty.
    #[error("the module is empty (0 bytes); give a WebAssembly module (.wasm) or its text (.wat)")]
    Empty,
    /// The module file is larger than the limit.
    #[error("the module is {size_bytes} bytes, above the limit of {limit_bytes} bytes")]
    TooBig {
        /// The module's size.
        size_bytes: u64,
        /// The limit.
        limit_bytes: u64,
    },
    /// The bytes are not a valid WebAssembly module (nor its text format).
    #[error("not a valid WebAssembly module: {reason}")]
    NotWasm {
        /// The parser's or validator's message.
        reason: String,
    },
    /// The module imports something; the sandbox gives a module no imports at all.
    #[error(
        "the module imports {module}.{name} ({kind}); a kernel module may import nothing (no WASI, no host functions): build it for wasm32-unknown-unknown without imports"
    )]
    Import {
        /// The import's module name.
        module: String,
        /// The import's field name.
        name: String,
        /// What is imported (function, memory, table, global, ...).
        kind: &'static str,
    },
    /// A required export is missing or has the wrong type.
    #[error("export {name}: {reason} (docs/wasm-kernels.md lists the exports and their types)")]
    BadExport {
        /// The export's name.
        name: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The module speaks another version of the ABI.
    #[error("the module speaks ABI version {found}; this flashpipe runs version {supported}")]
    AbiVersion {
        /// The version the module returned.
        found: i32,
        /// The version this build supports.
        supported: i32,
    },
    /// The module trapped (unreachable, division by zero, an access outside its memory, a
    /// call stack exhausted, ...).
    #[error("the module trapped: {message}")]
    Trap {
        /// The trap's message.
        message: String,
    },
    /// The module tried to grow its memory past the limit.
    #[error(
        "the module ran out of memory: it asked for more than the limit of {limit_bytes} bytes (raise memory=)"
    )]
    OutOfMemory {
        /// The memory limit.
        limit_bytes: u64,
    },
    /// The module ran past the file's wall-clock budget.
    #[error(
        "the module timed out: it ran longer than {timeout_ms} ms on this file (raise timeout=)"
    )]
    TimedOut {
        /// The budget.
        timeout_ms: u64,
    },
    /// The module used up its fuel (an instruction budget per call).
    #[error("the module ran out of fuel: more than {fuel} units in one call (raise fuel=)")]
    OutOfFuel {
        /// The budget per call.
        fuel: u64,
    },
    /// A pointer and length the module returned lie outside its memory or above a limit.
    #[error("bad result from {function}: {reason}")]
    BadResult {
        /// The function that returned it.
        function: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The module returned a non-zero status from a chunk call.
    #[error("the module reported failure: {function} returned status {status}")]
    ModuleFailed {
        /// The function that failed.
        function: &'static str,
        /// The status it returned.
        status: i32,
    },
    /// The runtime could not be set up (a bug or the host out of resources, never the module).
    #[error("the WebAssembly runtime failed: {reason}")]
    Runtime {
        /// The runtime's message.
        reason: String,
    },
}
