//! User kernels in a WebAssembly sandbox: the registry's `wasm` kernel runs a module the
//! user ships (docs/wasm-kernels.md is its ABI) on wasmtime, beside the data.
//!
//! The runtime lives here, in the kernels crate, because the module is one more kernel: it
//! is listed in the one registry, built from `key=value` options, scheduled by the same
//! pipeline (chunks in order, or mapped in parallel and reduced in offset order), and its
//! errors are kernel errors naming the file and the byte offset. The crate already holds
//! the heavy kernel dependencies; wasmtime is built with its compiler and runtime only (no
//! WASI, component model, async, cache or GC).
//!
//! The module comes from the store (`module=NAME`: the run layer reads the store file and
//! hands its bytes over, [`crate::options::KernelOptions::store_file`]) or from a host file
//! (`module_path=PATH`, in process only: listed in [`crate::host_paths`], so a server refuses
//! it from clients). It is compiled once per build (one engine and module shared by every
//! worker) and instantiated per worker from a pool ([`runtime`]). The sandbox: no imports at
//! all, a memory limit, a wall-clock limit per file (epoch interruption), optional fuel.

pub mod error;
pub mod examples;
pub mod runtime;

use std::io::Read;
use std::sync::Arc;

use crate::api::{
    Chunk, ChunkMapper, ChunkPart, FileInfo, FileJob, Kernel, OutputKind, OutputSink, PartReducer,
    Schedule, SequentialJob, Summary,
};
use crate::error::{KernelError, KernelErrorKind, OptionsError};
use crate::options::{encode_hex, KernelOptions, OptionSpec};
pub use error::WasmError;
use runtime::{
    FileClock, Limits, Program, Runner, ABI_VERSION, CHUNK_EXPORT, MAP_EXPORT, REDUCE_EXPORT,
};

/// Largest module, read whole (from the store or a host file): 64 MiB.
pub const MAX_MODULE_BYTES: u64 = 64 << 20;
/// Default memory limit of one instance: 256 MiB.
pub const DEFAULT_MEMORY_BYTES: u64 = 256 << 20;
/// Highest memory limit: 4 GiB, all a 32-bit memory can address.
pub const MAX_MEMORY_BYTES: u64 = 4 << 30;
/// Default wall-clock budget of the module's calls per file: 60 s.
pub const DEFAULT_TIMEOUT_MS: u64 = 60_000;
/// Highest wall-clock budget per file: one day.
pub const MAX_TIMEOUT_MS: u64 = 86_400_000;
/// Highest fuel per call.
pub const MAX_FUEL: u64 = 1 << 62;
/// Largest digest or text result of one file: 64 KiB.
pub const MAX_SUMMARY_RESULT_BYTES: u32 = 64 << 10;
/// Largest part one parallel map call returns: 1 MiB.
pub const MAX_PART_BYTES: u32 = 1 << 20;

/// The `wasm` kernel's options.
pub const WASM_OPTIONS: &[OptionSpec] = &[
    OptionSpec::optional(
        "module",
        "",
        "name of the store file holding the module (.wasm, or .wat text), read by flashpipe run",
    ),
    OptionSpec::optional(
        "module_path",
        "",
        "file on this host holding the module (in process only; a server refuses it)",
    ),
    OptionSpec::optional(
        "memory",
        "256MiB",
        "most linear memory of one instance (at most 4GiB)",
    ),
    OptionSpec::optional(
        "timeout_ms",
        "60000",
        "wall-clock time the module may spend on one file (its calls summed), in milliseconds",
    ),
    OptionSpec::optional(
        "fuel",
        "0",
        "instruction budget (wasmtime fuel) per call; 0 turns metering off",
    ),
];

/// What a module's per-file result becomes (`flashpipe_result_kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultKind {
    /// 0: bytes shown in hexadecimal as a digest.
    Digest,
    /// 1: UTF-8 text.
    Text,
    /// 2: the transformed output stream.
    Stream,
}

/// A kernel that runs a user's WebAssembly module.
#[derive(Debug)]
pub struct WasmKernel {
    program: Arc<Program>,
    schedule: Schedule,
    result_kind: ResultKind,
}

impl WasmKernel {
    /// Builds from options: the module from the store (`module`) or a host file
    /// (`module_path`), and the limits.
    pub fn from_options(options: &KernelOptions) -> Result<Arc<dyn Kernel>, OptionsError> {
        let limits = Limits {
            memory_bytes: options.integer("memory", 64 << 10, MAX_MEMORY_BYTES)?,
            timeout_ms: options.integer("timeout_ms", 1, MAX_TIMEOUT_MS)?,
            fuel: options.integer("fuel", 0, MAX_FUEL)?,
        };
        let store_name = options.text("module")?;
        let host_path = options.text("module_path")?;
        let (key, bytes) = match (store_name.is_empty(), host_path.is_empty()) {
            (true, true) | (false, false) => {
                return Err(OptionsError::BadValue {
                    key: "module".into(),
                    value: store_name.into(),
                    reason: "give exactly one of module=NAME (a store file) and module_path=PATH (a host file)".into(),
                })
            }
            (false, true) => {
                let bytes = options.store_file("module").ok_or_else(|| OptionsError::BadFile {
                    key: "module".into(),
                    reason: format!(
                        "{store_name} names a file in the store, which only flashpipe run reads; here give module_path=PATH"
                    ),
                })?;
                ("module", bytes.to_vec())
            }
            (true, false) => ("module_path", read_host_module(host_path)?),
        };
        let kernel = Self::from_bytes(&bytes, limits).map_err(|error| OptionsError::BadFile {
            key: key.into(),
            reason: error.to_string(),
        })?;
        Ok(Arc::new(kernel))
    }

    /// Compiles `bytes`, instantiates it once under `limits` and reads its declarations.
    pub fn from_bytes(bytes: &[u8], limits: Limits) -> Result<Self, WasmError> {
        if bytes.len() as u64 > MAX_MODULE_BYTES {
            return Err(WasmError::TooBig {
                size_bytes: bytes.len() as u64,
                limit_bytes: MAX_MODULE_BYTES,
            });
        }
        let program = Program::compile(bytes, limits)?;
        let clock = FileClock::new(limits.timeout_ms);
        let mut runner = program.take()?;
        let (version, schedule, kind) = runner.declarations(&clock)?;
        if version != ABI_VERSION {
            return Err(WasmError::AbiVersion {
                found: version,
                supported: ABI_VERSION,
            });
        }
        let schedule = match schedule {
            0 => Schedule::ChunksInOrder,
            1 => Schedule::ChunksInParallel,
            other => {
                return Err(WasmError::BadResult {
                    function: "flashpipe_schedule",
                    reason: format!("{other}; 0 (chunks in order) or 1 (chunks in parallel)"),
                })
            }
        };
        let result_kind = match kind {
            0 => ResultKind::Digest,
            1 => ResultKind::Text,
            2 => ResultKind::Stream,
            other => {
                return Err(WasmError::BadResult {
                    function: "flashpipe_result_kind",
                    reason: format!("{other}; 0 (digest), 1 (text) or 2 (output stream)"),
                })
            }
        };
        match schedule {
            Schedule::ChunksInOrder => program.require(&CHUNK_EXPORT)?,
            Schedule::ChunksInParallel => {
                program.require(&MAP_EXPORT)?;
                program.require(&REDUCE_EXPORT)?;
            }
        }
        program.give_back(runner);
        Ok(Self {
            program: Arc::new(program),
            schedule,
            result_kind,
        })
    }

    /// What the module's per-file result becomes.
    pub fn result_kind(&self) -> ResultKind {
        self.result_kind
    }
}

/// Reads a module from a host file: a regular file of at most [`MAX_MODULE_BYTES`].
fn read_host_module(path: &str) -> Result<Vec<u8>, OptionsError> {
    let bad = |reason: String| OptionsError::BadFile {
        key: "module_path".into(),
        reason: format!("{path}: {reason}"),
    };
    let file = std::fs::File::open(path).map_err(|error| bad(error.to_string()))?;
    let metadata = file.metadata().map_err(|error| bad(error.to_string()))?;
    if !metadata.is_file() {
        return Err(bad("not a regular file".into()));
    }
    let mut bytes = Vec::new();
    file.take(MAX_MODULE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| bad(error.to_string()))?;
    if bytes.len() as u64 > MAX_MODULE_BYTES {
        return Err(bad(WasmError::TooBig {
            size_bytes: metadata.len().max(bytes.len() as u64),
            limit_bytes: MAX_MODULE_BYTES,
        }
        .to_string()));
    }
    Ok(bytes)
}

impl Kernel for WasmKernel {
    fn name(&self) -> &'static str {
        "wasm"
    }

    fn schedule(&self) -> Schedule {
        self.schedule
    }

    fn output_kind(&self) -> OutputKind {
        match self.result_kind {
            ResultKind::Stream => OutputKind::TransformedStream,
            ResultKind::Digest | ResultKind::Text => OutputKind::Summary,
        }
    }

    fn start_file(&self, file: &FileInfo) -> Result<FileJob, KernelError> {
        let clock = Arc::new(FileClock::new(self.program.limits().timeout_ms));
        let fail = |error: WasmError| file.error_at(0, KernelErrorKind::Wasm(error));
        let mut runner = self.program.take().map_err(fail)?;
        runner.file_start(&clock, file.size_bytes).map_err(fail)?;
        let finisher = Finisher {
            program: Arc::clone(&self.program),
            runner,
            clock: Arc::clone(&clock),
            file: file.clone(),
            result_kind: self.result_kind,
            next_offset_bytes: 0,
            streamed_bytes: 0,
        };
        Ok(match self.schedule {
            Schedule::ChunksInOrder => FileJob::Sequential(Box::new(finisher)),
            Schedule::ChunksInParallel => FileJob::Parallel {
                mapper: Arc::new(WasmMapper {
                    program: Arc::clone(&self.program),
                    clock,
                }),
                reducer: Box::new(finisher),
            },
        })
    }
}

/// Maps chunks on instances from the pool.
struct WasmMapper {
    program: Arc<Program>,
    clock: Arc<FileClock>,
}

impl ChunkMapper for WasmMapper {
    fn map_chunk(&self, chunk: &Chunk<'_>) -> Result<ChunkPart, KernelError> {
        let fail =
            |error: WasmError| chunk.error_at(chunk.offset_bytes, KernelErrorKind::Wasm(error));
        let mut runner = self.program.take().map_err(fail)?;
        let part = runner
            .map(&self.clock, chunk.offset_bytes, chunk.data, MAX_PART_BYTES)
            .map_err(fail)?;
        self.program.give_back(runner);
        Ok(ChunkPart::new(chunk, part))
    }
}

/// The instance that holds one file's state: fed chunks in order (a sequential module) or
/// parts in order (a parallel module), then asked for the file's result.
struct Finisher {
    program: Arc<Program>,
    runner: Runner,
    clock: Arc<FileClock>,
    file: FileInfo,
    result_kind: ResultKind,
    next_offset_bytes: u64,
    /// Output bytes written before the file's end (`flashpipe_take_output`).
    streamed_bytes: u64,
}

impl Finisher {
    fn fail(&self, offset_bytes: u64, error: WasmError) -> KernelError {
        self.file
            .error_at(offset_bytes, KernelErrorKind::Wasm(error))
    }

    /// After a chunk or part of a stream module: the output it made, written out now, so
    /// a file's output never waits in linear memory for the file's end.
    fn stream_output(
        &mut self,
        offset_bytes: u64,
        sink: &mut dyn OutputSink,
    ) -> Result<(), KernelError> {
        if self.result_kind != ResultKind::Stream {
            return Ok(());
        }
        let taken = self
            .runner
            .take_output(&self.clock, u32::MAX)
            .map_err(|error| self.fail(offset_bytes, error))?;
        if let Some(bytes) = taken {
            sink.write_output(&bytes)?;
            self.streamed_bytes += bytes.len() as u64;
        }
        Ok(())
    }

    fn finish_file(mut self, sink: &mut dyn OutputSink) -> Result<Summary, KernelError> {
        let end = self.next_offset_bytes;
        let max_bytes = match self.result_kind {
            ResultKind::Stream => u32::MAX,
            ResultKind::Digest | ResultKind::Text => MAX_SUMMARY_RESULT_BYTES,
        };
        let bytes = self
            .runner
            .file_end(&self.clock, max_bytes)
            .map_err(|error| self.fail(end, error))?;
        let summary = match self.result_kind {
            ResultKind::Digest => Summary::Digest {
                algorithm: "wasm".into(),
                hex: encode_hex(&bytes),
            },
            ResultKind::Text => Summary::Text {
                text: String::from_utf8(bytes).map_err(|_| {
                    self.fail(
                        end,
                        WasmError::BadResult {
                            function: runtime::FILE_END_EXPORT.name,
                            reason: "a text result that is not UTF-8".into(),
                        },
                    )
                })?,
            },
            ResultKind::Stream => {
                sink.write_output(&bytes)?;
                Summary::Stream {
                    output_bytes: self.streamed_bytes + bytes.len() as u64,
                }
            }
        };
        self.program.give_back(self.runner);
        Ok(summary)
    }
}

impl SequentialJob for Finisher {
    fn process_chunk(
        &mut self,
        chunk: &Chunk<'_>,
        sink: &mut dyn OutputSink,
    ) -> Result<(), KernelError> {
        chunk.advance_in_order(&mut self.next_offset_bytes);
        self.runner
            .chunk(&self.clock, chunk.offset_bytes, chunk.data)
            .map_err(|error| chunk.error_at(chunk.offset_bytes, KernelErrorKind::Wasm(error)))?;
        self.stream_output(chunk.offset_bytes, sink)
    }

    fn finish(self: Box<Self>, sink: &mut dyn OutputSink) -> Result<Summary, KernelError> {
        (*self).finish_file(sink)
    }
}

impl PartReducer for Finisher {
    fn reduce_part(
        &mut self,
        part: ChunkPart,
        sink: &mut dyn OutputSink,
    ) -> Result<(), KernelError> {
        let offset_bytes = part.offset_bytes;
        let length_bytes = part.length_bytes as u64;
        assert_eq!(
            offset_bytes, self.next_offset_bytes,
            "parts arrive in order"
        );
        let bytes: Vec<u8> = part.into_partial(&self.file)?;
        self.runner
            .reduce(&self.clock, offset_bytes, length_bytes, &bytes)
            .map_err(|error| self.fail(offset_bytes, error))?;
        self.next_offset_bytes += length_bytes;
        self.stream_output(offset_bytes, sink)
    }

    fn finish(self: Box<Self>, sink: &mut dyn OutputSink) -> Result<Summary, KernelError> {
        (*self).finish_file(sink)
    }
}
