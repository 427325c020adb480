//! The WebAssembly section of `flashpipe bench kernels`: the repository's Rust CRC32C module
//! (examples/wasm-kernels/crc32c, built for wasm32-unknown-unknown) against the built-in
//! `crc32c` kernel, both near the data (the pipeline over store files; the target is the
//! module at 0.8x the built-in rate or better, where storage is the bottleneck) and in memory
//! on every core (reported side by side; about 0.12x is expected, the module having no CRC
//! instruction), and the module's start-up (compile, instantiate, read its declarations; the
//! target is 10 ms or less).
//!
//! Where the module cannot be built (the wasm32 target missing) the section says what is
//! missing and how to install it, and fails under `FLASHPIPE_REQUIRE_TOOLS=1`.

use std::sync::Arc;
use std::time::Instant;

use flashpipe_kernels::api::Kernel;
use flashpipe_kernels::throughput::{measure_kernel, synthetic_bytes};
use flashpipe_kernels::wasm::examples::{build_rust_example, tools_required};
use flashpipe_kernels::wasm::runtime::Limits;
use flashpipe_kernels::wasm::{WasmKernel, DEFAULT_MEMORY_BYTES, DEFAULT_TIMEOUT_MS};
use flashpipe_pipeline::{OutputTarget, PipelineConfig};

use super::{put_files, BenchKernelsArgs, MIB};
use crate::error::not_found;
use crate::kernels::store::KernelStore;
use crate::BenchResult;

/// Near-data target: the module's rate over the built-in's, where storage is the bottleneck.
const NEAR_DATA_TARGET_RATIO: f64 = 0.8;
/// Start-up target, in milliseconds.
const STARTUP_TARGET_MS: f64 = 10.0;
/// Start-ups timed (the median is reported).
const STARTUP_RUNS: usize = 7;

/// Runs the section over `store`: prints its lines, or with `--json` adds them to `notes`
/// (which the JSON report carries).
pub fn run_section(
    store: &KernelStore,
    arguments: &BenchKernelsArgs,
    size_bytes: usize,
    storage_bytes_per_second: f64,
    notes: &mut Vec<String>,
) -> BenchResult {
    let module = match &arguments.wasm_module {
        Some(path) => std::fs::read(path)
            .map_err(|error| not_found(format!("--wasm-module {}: {error}", path.display())))?,
        None => match build_rust_example("crc32c") {
            Ok(module) => module,
            Err(error) if tools_required() => return Err(error.into()),
            Err(error) => {
                notes.push(format!("wasm section left out: {error}"));
                return Ok(());
            }
        },
    };
    let limits = Limits {
        memory_bytes: DEFAULT_MEMORY_BYTES,
        timeout_ms: DEFAULT_TIMEOUT_MS,
        fuel: 0,
    };
    let mut startup_ms = Vec::with_capacity(STARTUP_RUNS);
    for _ in 0..STARTUP_RUNS {
        let started = Instant::now();
        WasmKernel::from_bytes(&module, limits)?;
        startup_ms.push(started.elapsed().as_secs_f64() * 1e3);
    }
    startup_ms.sort_by(f64::total_cmp);
    let startup_median_ms = startup_ms[STARTUP_RUNS / 2];
    let wasm: Arc<dyn Kernel> = Arc::new(WasmKernel::from_bytes(&module, limits)?);
    let native = flashpipe_kernels::registry::build_kernel("crc32c", &[])?;

    let file_count = if arguments.quick { 4 } else { 16 };
    let per_file = (size_bytes / file_count).max(64 << 10);
    let files: Vec<(String, Vec<u8>)> = (0..file_count)
        .map(|index| {
            (
                format!("wasm-crc-{index}"),
                synthetic_bytes(per_file, 40 + index as u64),
            )
        })
        .collect();
    let mut client = store.engine.client(16);
    put_files(&mut client, &files)?;
    client.call(flashpipe_engine::Command::Flush)?;
    let names: Vec<String> = files.iter().map(|(name, _)| name.clone()).collect();
    let config = PipelineConfig::for_engine(&store.engine_config, OutputTarget::Discard);
    let near = |kernel: &Arc<dyn Kernel>| -> BenchResult<f64> {
        let result = store.run(Arc::clone(kernel), &names, &config)?;
        Ok(result.report.input_bytes_per_second)
    };
    // Warm both once (the first run pays for the store's first reads), then time.
    near(&native)?;
    near(&wasm)?;
    let native_near = near(&native)?;
    let wasm_near = near(&wasm)?;
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let seconds = if arguments.quick { 0.05 } else { 0.5 };
    let native_memory = measure_kernel(native.as_ref(), &files, cores, seconds)?.bytes_per_second;
    let wasm_memory = measure_kernel(wasm.as_ref(), &files, cores, seconds)?.bytes_per_second;

    let near_ratio = wasm_near / native_near.max(1.0);
    let storage_bound = storage_bytes_per_second < wasm_memory;
    let near_verdict = match (storage_bound, near_ratio >= NEAR_DATA_TARGET_RATIO) {
        (false, _) => "not judged: the module, not storage, is the bottleneck here",
        (true, true) => "MET",
        (true, false) => "NOT MET",
    };
    let startup_verdict = if startup_median_ms <= STARTUP_TARGET_MS {
        "MET"
    } else {
        "NOT MET"
    };
    let lines = vec![
        format!(
            "wasm crc32c near the data: {:.1} MiB/s, built-in {:.1} MiB/s: {near_ratio:.2}x (target >= {NEAR_DATA_TARGET_RATIO}x where storage, {:.1} MiB/s, is the bottleneck): {near_verdict}",
            wasm_near / MIB,
            native_near / MIB,
            storage_bytes_per_second / MIB
        ),
        format!(
            "wasm crc32c in memory on {cores} core(s): {:.1} MiB/s, built-in {:.1} MiB/s: {:.2}x (reported; about 0.12x expected)",
            wasm_memory / MIB,
            native_memory / MIB,
            wasm_memory / native_memory.max(1.0)
        ),
        format!(
            "wasm module start-up (compile + instantiate, median of {STARTUP_RUNS}): {startup_median_ms:.2} ms (target <= {STARTUP_TARGET_MS} ms): {startup_verdict}"
        ),
    ];
    if arguments.json {
        notes.extend(lines);
    } else {
        println!();
        println!("WebAssembly kernels ({file_count} files of {per_file} bytes)");
        for line in &lines {
            println!("  {line}");
        }
    }
    Ok(())
}
