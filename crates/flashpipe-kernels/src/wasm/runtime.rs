//! The sandbox: one wasmtime engine and compiled module per kernel build, a ticker thread
//! that drives epoch interruption (the wall-clock limit), a resource limiter (the memory
//! limit), optional fuel, and a pool of instances (a wasmtime `Store` is not `Sync`, so each
//! worker takes its own instance and gives it back when the call sequence succeeded; an
//! instance that failed is dropped, never reused).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wasmtime::{
    Config, Engine, ExternType, Instance, Memory, Module, ResourceLimiter, Store, Trap, TypedFunc,
    ValType,
};

use super::error::WasmError;

/// The ABI version this build speaks (`flashpipe_abi_version`).
pub const ABI_VERSION: i32 = 1;
/// Period of the ticker that advances the engine's epoch.
pub const TICK_MS: u64 = 2;
/// Most table elements an instance may have.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

/// The limits a kernel build runs its module under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most linear memory one instance may have, in bytes.
    pub memory_bytes: u64,
    /// Wall-clock budget of the module's calls per file (summed), in milliseconds.
    pub timeout_ms: u64,
    /// Fuel per call (0: no fuel metering).
    pub fuel: u64,
}

/// The module's functions, by role, with their names and wasm types.
pub(crate) struct ExportSpec {
    pub name: &'static str,
    pub params: &'static [ValType],
    pub results: &'static [ValType],
}

pub(crate) const ABI_VERSION_EXPORT: ExportSpec =
    spec("flashpipe_abi_version", &[], &[ValType::I32]);
pub(crate) const SCHEDULE_EXPORT: ExportSpec = spec("flashpipe_schedule", &[], &[ValType::I32]);
pub(crate) const RESULT_KIND_EXPORT: ExportSpec =
    spec("flashpipe_result_kind", &[], &[ValType::I32]);
pub(crate) const INPUT_BUFFER_EXPORT: ExportSpec =
    spec("flashpipe_input_buffer", &[ValType::I32], &[ValType::I32]);
pub(crate) const FILE_START_EXPORT: ExportSpec = spec("flashpipe_file_start", &[ValType::I64], &[]);
pub(crate) const CHUNK_EXPORT: ExportSpec = spec(
    "flashpipe_chunk",
    &[ValType::I64, ValType::I32],
    &[ValType::I32],
);
pub(crate) const MAP_EXPORT: ExportSpec = spec(
    "flashpipe_map",
    &[ValType::I64, ValType::I32],
    &[ValType::I64],
);
pub(crate) const REDUCE_EXPORT: ExportSpec = spec(
    "flashpipe_reduce",
    &[ValType::I64, ValType::I64, ValType::I32],
    &[ValType::I32],
);
pub(crate) const FILE_END_EXPORT: ExportSpec = spec("flashpipe_file_end", &[], &[ValType::I64]);
pub(crate) const TAKE_OUTPUT_EXPORT: ExportSpec =
    spec("flashpipe_take_output", &[], &[ValType::I64]);

const fn spec(
    name: &'static str,
    params: &'static [ValType],
    results: &'static [ValType],
) -> ExportSpec {
    ExportSpec {
        name,
        params,
        results,
    }
}

/// The resource limiter of one instance: refuses memory growth past the limit and notes
/// that it did (a trap that follows is then reported as out of memory).
struct Limiter {
    memory_limit_bytes: usize,
    memory_denied: bool,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_limit_bytes {
            self.memory_denied = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }

    fn instances(&self) -> usize {
        1
    }

    fn tables(&self) -> usize {
        4
    }

    fn memories(&self) -> usize {
        1
    }
}

/// Advances an engine's epoch every [`TICK_MS`] until dropped.
struct Ticker {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Ticker {
    fn start(engine: &Engine) -> Result<Self, WasmError> {
        let stop = Arc::new(AtomicBool::new(false));
        let thread_stop = Arc::clone(&stop);
        let engine = engine.clone();
        let thread = std::thread::Builder::new()
            .name("wasm-epoch".into())
            .spawn(move || {
                while !thread_stop.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(TICK_MS));
                    engine.increment_epoch();
                }
            })
            .map_err(|error| WasmError::Runtime {
                reason: format!("cannot start the epoch ticker thread: {error}"),
            })?;
        Ok(Self {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A compiled module with its engine, limits and pool of idle instances.
pub struct Program {
    engine: Engine,
    module: Module,
    limits: Limits,
    pool: Mutex<Vec<Runner>>,
    _ticker: Ticker,
}

impl std::fmt::Debug for Program {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Program")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Program {
    /// Compiles `bytes` (a binary module, or its text when it does not start with the
    /// binary magic) and checks its imports and the exports every schedule needs.
    pub fn compile(bytes: &[u8], limits: Limits) -> Result<Self, WasmError> {
        if bytes.is_empty() {
            return Err(WasmError::Empty);
        }
        let mut config = Config::new();
        config.epoch_interruption(true);
        config.consume_fuel(limits.fuel > 0);
        let engine = Engine::new(&config).map_err(|error| WasmError::Runtime {
            reason: error.to_string(),
        })?;
        let module = compile_module(&engine, bytes)?;
        if let Some(import) = module.imports().next() {
            return Err(WasmError::Import {
                module: import.module().to_string(),
                name: import.name().to_string(),
                kind: extern_kind(&import.ty()),
            });
        }
        check_memory_export(&module)?;
        for export in [
            &ABI_VERSION_EXPORT,
            &SCHEDULE_EXPORT,
            &RESULT_KIND_EXPORT,
            &INPUT_BUFFER_EXPORT,
            &FILE_START_EXPORT,
            &FILE_END_EXPORT,
        ] {
            check_function_export(&module, export)?;
        }
        for export in [&CHUNK_EXPORT, &MAP_EXPORT, &REDUCE_EXPORT] {
            if module.get_export(export.name).is_some() {
                check_function_export(&module, export)?;
            }
        }
        let ticker = Ticker::start(&engine)?;
        Ok(Self {
            engine,
            module,
            limits,
            pool: Mutex::new(Vec::new()),
            _ticker: ticker,
        })
    }

    /// Checks that the module exports `export` with its ABI type.
    pub(crate) fn require(&self, export: &ExportSpec) -> Result<(), WasmError> {
        check_function_export(&self.module, export)
    }

    /// The limits the module runs under.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// An idle instance from the pool, or a new one.
    pub(crate) fn take(&self) -> Result<Runner, WasmError> {
        let idle = self
            .pool
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .pop();
        match idle {
            Some(runner) => Ok(runner),
            None => Runner::new(self),
        }
    }

    /// Returns an instance whose last calls succeeded to the pool.
    pub(crate) fn give_back(&self, runner: Runner) {
        self.pool
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(runner);
    }
}

fn compile_module(engine: &Engine, bytes: &[u8]) -> Result<Module, WasmError> {
    // The binary format, or (through wasmtime's `wat` feature) the text format.
    Module::new(engine, bytes).map_err(|error| WasmError::NotWasm {
        reason: first_line(&error.to_string()),
    })
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or("").to_string()
}

fn extern_kind(ty: &ExternType) -> &'static str {
    match ty {
        ExternType::Func(_) => "a function",
        ExternType::Global(_) => "a global",
        ExternType::Table(_) => "a table",
        ExternType::Memory(_) => "a memory",
        ExternType::Tag(_) => "a tag",
    }
}

fn check_memory_export(module: &Module) -> Result<(), WasmError> {
    let bad = |reason: &str| WasmError::BadExport {
        name: "memory",
        reason: reason.to_string(),
    };
    match module.get_export("memory") {
        None => Err(bad(
            "missing: the module must export its linear memory as \"memory\"",
        )),
        Some(ExternType::Memory(memory)) if memory.is_64() => {
            Err(bad("a 64-bit memory; the ABI uses a 32-bit memory"))
        }
        Some(ExternType::Memory(memory)) if memory.is_shared() => {
            Err(bad("a shared memory; the ABI uses an unshared memory"))
        }
        Some(ExternType::Memory(_)) => Ok(()),
        Some(other) => Err(bad(&format!("{}, not a memory", extern_kind(&other)))),
    }
}

fn check_function_export(module: &Module, export: &ExportSpec) -> Result<(), WasmError> {
    let bad = |reason: String| WasmError::BadExport {
        name: export.name,
        reason,
    };
    let expected = signature(export.params, export.results);
    match module.get_export(export.name) {
        None => Err(bad(format!("missing; it must be a function {expected}"))),
        Some(ExternType::Func(func)) => {
            let params: Vec<ValType> = func.params().collect();
            let results: Vec<ValType> = func.results().collect();
            let same = |found: &[ValType], wanted: &[ValType]| {
                found.len() == wanted.len()
                    && found
                        .iter()
                        .zip(wanted)
                        .all(|(found, wanted)| ValType::eq(found, wanted))
            };
            if same(&params, export.params) && same(&results, export.results) {
                Ok(())
            } else {
                Err(bad(format!(
                    "the function is {}, the ABI's is {expected}",
                    signature(&params, &results)
                )))
            }
        }
        Some(other) => Err(bad(format!(
            "{}, not a function {expected}",
            extern_kind(&other)
        ))),
    }
}

fn signature(params: &[ValType], results: &[ValType]) -> String {
    let names = |types: &[ValType]| {
        types
            .iter()
            .map(|ty| ty.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!("({}) -> ({})", names(params), names(results))
}

/// The wall-clock budget of one file: the time spent inside the module's calls for it,
/// summed (time waiting for storage is not counted). The mappers of a parallel file run at
/// once: each call's deadline is what was left when it began.
#[derive(Debug)]
pub(crate) struct FileClock {
    used_ns: AtomicU64,
    timeout: Duration,
}

impl FileClock {
    pub(crate) fn new(timeout_ms: u64) -> Self {
        Self {
            used_ns: AtomicU64::new(0),
            timeout: Duration::from_millis(timeout_ms),
        }
    }

    /// Time left of the budget.
    fn remaining(&self) -> Duration {
        self.timeout
            .saturating_sub(Duration::from_nanos(self.used_ns.load(Ordering::Acquire)))
    }

    /// Counts `spent` against the budget.
    fn charge(&self, spent: Duration) {
        let nanos = u64::try_from(spent.as_nanos()).unwrap_or(u64::MAX);
        self.used_ns.fetch_add(nanos, Ordering::AcqRel);
    }
}

/// One instance with its store and the ABI's functions.
pub(crate) struct Runner {
    store: Store<Limiter>,
    memory: Memory,
    input_buffer: TypedFunc<i32, i32>,
    file_start: TypedFunc<i64, ()>,
    file_end: TypedFunc<(), i64>,
    chunk: Option<TypedFunc<(i64, i32), i32>>,
    map: Option<TypedFunc<(i64, i32), i64>>,
    reduce: Option<TypedFunc<(i64, i64, i32), i32>>,
    take_output: Option<TypedFunc<(), i64>>,
    abi_version: TypedFunc<(), i32>,
    schedule: TypedFunc<(), i32>,
    result_kind: TypedFunc<(), i32>,
    /// The input buffer the module handed out: (pointer, capacity).
    buffer: Option<(u32, u32)>,
    limits: Limits,
}

impl Runner {
    fn new(program: &Program) -> Result<Self, WasmError> {
        let limits = program.limits;
        let memory_limit_bytes = usize::try_from(limits.memory_bytes).unwrap_or(usize::MAX);
        let mut store = Store::new(
            &program.engine,
            Limiter {
                memory_limit_bytes,
                memory_denied: false,
            },
        );
        store.limiter(|limiter| limiter);
        let clock = FileClock::new(limits.timeout_ms);
        arm(&mut store, &limits, &clock)?;
        let instance = Instance::new(&mut store, &program.module, &[])
            .map_err(|error| classify(&store, &limits, error))?;
        let memory = instance
            .get_memory(&mut store, "memory")
            .ok_or(WasmError::BadExport {
                name: "memory",
                reason: "missing".into(),
            })?;
        fn typed<P, R>(
            instance: &Instance,
            store: &mut Store<Limiter>,
            export: &ExportSpec,
        ) -> Result<TypedFunc<P, R>, WasmError>
        where
            P: wasmtime::WasmParams,
            R: wasmtime::WasmResults,
        {
            instance
                .get_typed_func::<P, R>(&mut *store, export.name)
                .map_err(|error| WasmError::BadExport {
                    name: export.name,
                    reason: first_line(&error.to_string()),
                })
        }
        let optional = |store: &mut Store<Limiter>, export: &ExportSpec| {
            instance.get_export(&mut *store, export.name).is_some()
        };
        let chunk = if optional(&mut store, &CHUNK_EXPORT) {
            Some(typed(&instance, &mut store, &CHUNK_EXPORT)?)
        } else {
            None
        };
        let map = if optional(&mut store, &MAP_EXPORT) {
            Some(typed(&instance, &mut store, &MAP_EXPORT)?)
        } else {
            None
        };
        let reduce = if optional(&mut store, &REDUCE_EXPORT) {
            Some(typed(&instance, &mut store, &REDUCE_EXPORT)?)
        } else {
            None
        };
        let take_output = if optional(&mut store, &TAKE_OUTPUT_EXPORT) {
            Some(typed(&instance, &mut store, &TAKE_OUTPUT_EXPORT)?)
        } else {
            None
        };
        Ok(Self {
            input_buffer: typed(&instance, &mut store, &INPUT_BUFFER_EXPORT)?,
            file_start: typed(&instance, &mut store, &FILE_START_EXPORT)?,
            file_end: typed(&instance, &mut store, &FILE_END_EXPORT)?,
            abi_version: typed(&instance, &mut store, &ABI_VERSION_EXPORT)?,
            schedule: typed(&instance, &mut store, &SCHEDULE_EXPORT)?,
            result_kind: typed(&instance, &mut store, &RESULT_KIND_EXPORT)?,
            chunk,
            map,
            reduce,
            take_output,
            store,
            memory,
            buffer: None,
            limits,
        })
    }

    /// `flashpipe_abi_version`, `flashpipe_schedule` and `flashpipe_result_kind`.
    pub(crate) fn declarations(&mut self, clock: &FileClock) -> Result<(i32, i32, i32), WasmError> {
        let (abi, schedule, kind) = (
            self.abi_version.clone(),
            self.schedule.clone(),
            self.result_kind.clone(),
        );
        let version = self.call(clock, |store| abi.call(store, ()))?;
        let schedule = self.call(clock, |store| schedule.call(store, ()))?;
        let kind = self.call(clock, |store| kind.call(store, ()))?;
        Ok((version, schedule, kind))
    }

    /// `flashpipe_file_start(size)`.
    pub(crate) fn file_start(
        &mut self,
        clock: &FileClock,
        size_bytes: u64,
    ) -> Result<(), WasmError> {
        let function = self.file_start.clone();
        let size = i64::try_from(size_bytes).unwrap_or(i64::MAX);
        self.call(clock, |store| function.call(store, size))
    }

    /// Copies `bytes` into the module's input buffer (asking for a larger one when needed).
    fn load_input(&mut self, clock: &FileClock, bytes: &[u8]) -> Result<u32, WasmError> {
        let length = u32::try_from(bytes.len()).map_err(|_| WasmError::BadResult {
            function: INPUT_BUFFER_EXPORT.name,
            reason: format!(
                "an input of {} bytes does not fit a 32-bit memory",
                bytes.len()
            ),
        })?;
        let pointer = match self.buffer {
            Some((pointer, capacity)) if capacity >= length => pointer,
            _ => {
                let function = self.input_buffer.clone();
                let asked = length.max(64 * 1024);
                let pointer = self.call(clock, |store| function.call(store, asked as i32))? as u32;
                self.check_span(INPUT_BUFFER_EXPORT.name, pointer, asked)?;
                self.buffer = Some((pointer, asked));
                pointer
            }
        };
        self.check_span(INPUT_BUFFER_EXPORT.name, pointer, length)?;
        self.memory
            .write(&mut self.store, pointer as usize, bytes)
            .map_err(|_| WasmError::BadResult {
                function: INPUT_BUFFER_EXPORT.name,
                reason: "the input buffer lies outside the module's memory".into(),
            })?;
        Ok(length)
    }

    /// `flashpipe_chunk(offset, length)` on `data`.
    pub(crate) fn chunk(
        &mut self,
        clock: &FileClock,
        offset_bytes: u64,
        data: &[u8],
    ) -> Result<(), WasmError> {
        let function = self.chunk.clone().ok_or(missing(&CHUNK_EXPORT))?;
        let length = self.load_input(clock, data)?;
        let offset = offset_bytes as i64;
        let status = self.call(clock, |store| function.call(store, (offset, length as i32)))?;
        status_ok(CHUNK_EXPORT.name, status)
    }

    /// `flashpipe_map(offset, length)` on `data`: the part's bytes.
    pub(crate) fn map(
        &mut self,
        clock: &FileClock,
        offset_bytes: u64,
        data: &[u8],
        max_part_bytes: u32,
    ) -> Result<Vec<u8>, WasmError> {
        let function = self.map.clone().ok_or(missing(&MAP_EXPORT))?;
        let length = self.load_input(clock, data)?;
        let offset = offset_bytes as i64;
        let packed = self.call(clock, |store| function.call(store, (offset, length as i32)))?;
        self.read_packed(MAP_EXPORT.name, packed, max_part_bytes)
    }

    /// `flashpipe_reduce(offset, chunk length, part length)` with `part` in the input buffer.
    pub(crate) fn reduce(
        &mut self,
        clock: &FileClock,
        offset_bytes: u64,
        chunk_length_bytes: u64,
        part: &[u8],
    ) -> Result<(), WasmError> {
        let function = self.reduce.clone().ok_or(missing(&REDUCE_EXPORT))?;
        let length = self.load_input(clock, part)?;
        let arguments = (
            offset_bytes as i64,
            chunk_length_bytes as i64,
            length as i32,
        );
        let status = self.call(clock, |store| function.call(store, arguments))?;
        status_ok(REDUCE_EXPORT.name, status)
    }

    /// `flashpipe_file_end()`: the result's bytes.
    pub(crate) fn file_end(
        &mut self,
        clock: &FileClock,
        max_result_bytes: u32,
    ) -> Result<Vec<u8>, WasmError> {
        let function = self.file_end.clone();
        let packed = self.call(clock, |store| function.call(store, ()))?;
        self.read_packed(FILE_END_EXPORT.name, packed, max_result_bytes)
    }

    /// `flashpipe_take_output()`, when the module exports it: the output its last chunk or
    /// part made, to be written out now (`None` without the export).
    pub(crate) fn take_output(
        &mut self,
        clock: &FileClock,
        max_bytes: u32,
    ) -> Result<Option<Vec<u8>>, WasmError> {
        let Some(function) = self.take_output.clone() else {
            return Ok(None);
        };
        let packed = self.call(clock, |store| function.call(store, ()))?;
        self.read_packed(TAKE_OUTPUT_EXPORT.name, packed, max_bytes)
            .map(Some)
    }

    /// The bytes at `(pointer << 32) | length`, checked against memory and `max_bytes`.
    fn read_packed(
        &mut self,
        function: &'static str,
        packed: i64,
        max_bytes: u32,
    ) -> Result<Vec<u8>, WasmError> {
        let packed = packed as u64;
        let pointer = (packed >> 32) as u32;
        let length = packed as u32;
        if length > max_bytes {
            return Err(WasmError::BadResult {
                function,
                reason: format!("{length} bytes, above the limit of {max_bytes} bytes"),
            });
        }
        self.check_span(function, pointer, length)?;
        let mut bytes = vec![0u8; length as usize];
        self.memory
            .read(&self.store, pointer as usize, &mut bytes)
            .map_err(|_| WasmError::BadResult {
                function,
                reason: "outside the module's memory".into(),
            })?;
        Ok(bytes)
    }

    fn check_span(
        &self,
        function: &'static str,
        pointer: u32,
        length: u32,
    ) -> Result<(), WasmError> {
        let end = u64::from(pointer) + u64::from(length);
        let size = self.memory.data_size(&self.store) as u64;
        if end > size {
            return Err(WasmError::BadResult {
                function,
                reason: format!(
                    "bytes {pointer}..{end} lie outside the module's memory of {size} bytes"
                ),
            });
        }
        Ok(())
    }

    /// Runs one call under the limits and names what stopped it.
    fn call<R>(
        &mut self,
        clock: &FileClock,
        call: impl FnOnce(&mut Store<Limiter>) -> wasmtime::Result<R>,
    ) -> Result<R, WasmError> {
        arm(&mut self.store, &self.limits, clock)?;
        let started = Instant::now();
        let result = call(&mut self.store);
        clock.charge(started.elapsed());
        result.map_err(|error| classify(&self.store, &self.limits, error))
    }
}

fn missing(export: &ExportSpec) -> WasmError {
    WasmError::BadExport {
        name: export.name,
        reason: "missing; the module's schedule needs it".into(),
    }
}

fn status_ok(function: &'static str, status: i32) -> Result<(), WasmError> {
    if status == 0 {
        Ok(())
    } else {
        Err(WasmError::ModuleFailed { function, status })
    }
}

/// Sets the fuel and the epoch deadline of the next call; a file out of time fails here.
fn arm(store: &mut Store<Limiter>, limits: &Limits, clock: &FileClock) -> Result<(), WasmError> {
    let remaining = clock.remaining();
    if remaining.is_zero() {
        return Err(WasmError::TimedOut {
            timeout_ms: limits.timeout_ms,
        });
    }
    let ticks = (remaining.as_millis() as u64).div_ceil(TICK_MS).max(1);
    store.set_epoch_deadline(ticks);
    if limits.fuel > 0 {
        store
            .set_fuel(limits.fuel)
            .map_err(|error| WasmError::Runtime {
                reason: error.to_string(),
            })?;
    }
    store.data_mut().memory_denied = false;
    Ok(())
}

/// Names what stopped a call: the epoch deadline, fuel, the memory limit, or a trap.
fn classify(store: &Store<Limiter>, limits: &Limits, error: wasmtime::Error) -> WasmError {
    let trap = error.downcast_ref::<Trap>().copied();
    match trap {
        Some(Trap::Interrupt) => WasmError::TimedOut {
            timeout_ms: limits.timeout_ms,
        },
        Some(Trap::OutOfFuel) => WasmError::OutOfFuel { fuel: limits.fuel },
        _ if store.data().memory_denied => WasmError::OutOfMemory {
            limit_bytes: limits.memory_bytes,
        },
        Some(trap) => WasmError::Trap {
            message: trap
                .to_string()
                .trim_start_matches("wasm trap: ")
                .to_string(),
        },
        None => WasmError::Trap {
            message: first_line(&error.to_string()),
        },
    }
}
