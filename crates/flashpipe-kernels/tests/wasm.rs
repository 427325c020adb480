//! The `wasm` kernel: the repository's example modules against plain Rust references, and
//! hostile modules (infinite loops, huge allocations, traps, bad exports, imports, garbage)
//! refused or stopped with typed errors, never a panic.

use flashpipe_kernels::api::{Kernel, Summary};
use flashpipe_kernels::driver::{run_files_in_parallel, run_on_bytes, DrivePlan, MapOrder};
use flashpipe_kernels::error::KernelErrorKind;
use flashpipe_kernels::registry::build_kernel;
use flashpipe_kernels::throughput::synthetic_bytes;
use flashpipe_kernels::wasm::examples::{build_rust_example, histogram_wat, tools_required};
use flashpipe_kernels::wasm::runtime::Limits;
use flashpipe_kernels::wasm::{WasmError, WasmKernel, MAX_MODULE_BYTES};

const LIMITS: Limits = Limits {
    memory_bytes: 64 << 20,
    timeout_ms: 10_000,
    fuel: 0,
};

const PLANS: &[DrivePlan] = &[
    DrivePlan {
        chunk_size_bytes: 1,
        worker_count: 1,
        map_order: MapOrder::Forward,
    },
    DrivePlan {
        chunk_size_bytes: 7,
        worker_count: 3,
        map_order: MapOrder::Reverse,
    },
    DrivePlan {
        chunk_size_bytes: 4096,
        worker_count: 3,
        map_order: MapOrder::Reverse,
    },
    DrivePlan {
        chunk_size_bytes: 1 << 20,
        worker_count: 1,
        map_order: MapOrder::Forward,
    },
];

fn run(kernel: &dyn Kernel, data: &[u8], plan: DrivePlan) -> Summary {
    run_on_bytes(kernel, "in", data, plan, &mut Vec::new()).expect("the kernel runs")
}

fn digest(summary: &Summary) -> String {
    match summary {
        Summary::Digest { hex, .. } => hex.clone(),
        other => panic!("a digest, got {other:?}"),
    }
}

/// A Rust example, or `None` (with the reason printed) where the target is missing and
/// tools are not required.
fn rust_example(name: &str) -> Option<Vec<u8>> {
    match build_rust_example(name) {
        Ok(bytes) => Some(bytes),
        Err(error) if !tools_required() => {
            println!("skipped: {error}");
            None
        }
        Err(error) => panic!("{error}"),
    }
}

fn inputs() -> Vec<Vec<u8>> {
    let mut text = Vec::new();
    for index in 0..3000 {
        text.extend_from_slice(format!("word{index} \t and  more\nline {index}\r\n").as_bytes());
    }
    vec![
        Vec::new(),
        b"a".to_vec(),
        b"  hello   world \n".to_vec(),
        synthetic_bytes(100_003, 7),
        text,
    ]
}

#[test]
fn the_wat_histogram_matches_a_plain_histogram_on_every_schedule() {
    let kernel = WasmKernel::from_bytes(&histogram_wat().expect("the example"), LIMITS)
        .expect("the histogram loads");
    for data in inputs() {
        let mut counts = [0u64; 256];
        for &byte in &data {
            counts[byte as usize] += 1;
        }
        let expected: String = counts
            .iter()
            .flat_map(|count| count.to_le_bytes())
            .map(|byte| format!("{byte:02x}"))
            .collect();
        for plan in PLANS {
            assert_eq!(digest(&run(&kernel, &data, *plan)), expected, "{plan:?}");
        }
    }
}

#[test]
fn the_rust_crc32c_matches_the_built_in_kernel() {
    let Some(module) = rust_example("crc32c") else {
        return;
    };
    let kernel = WasmKernel::from_bytes(&module, LIMITS).expect("the module loads");
    let built_in = build_kernel("crc32c", &[]).expect("crc32c");
    assert_eq!(
        digest(&run(&kernel, b"123456789", PLANS[0])),
        "e3069283",
        "the check value"
    );
    for data in inputs() {
        let expected = digest(&run(built_in.as_ref(), &data, PLANS[2]));
        for plan in PLANS {
            assert_eq!(digest(&run(&kernel, &data, *plan)), expected);
        }
    }
    let files: Vec<(String, Vec<u8>)> = inputs()
        .into_iter()
        .enumerate()
        .map(|(index, data)| (format!("f{index}"), data))
        .collect();
    let together = run_files_in_parallel(&kernel, &files, 4096, 3).expect("files at once");
    for ((_, data), summary) in files.iter().zip(&together) {
        assert_eq!(
            digest(summary),
            format!("{:08x}", crc32c::crc32c(data)),
            "per-file state stays in its instance"
        );
    }
}

#[test]
fn the_rust_word_count_matches_a_plain_word_count() {
    let Some(module) = rust_example("wordcount") else {
        return;
    };
    let kernel = WasmKernel::from_bytes(&module, LIMITS).expect("the module loads");
    for data in inputs() {
        let text = String::from_utf8_lossy(&data);
        let expected = format!(
            "{} {} {}",
            data.iter().filter(|byte| **byte == b'\n').count(),
            data.split(|byte| byte.is_ascii_whitespace())
                .filter(|word| !word.is_empty())
                .count(),
            data.len()
        );
        if data.is_ascii() {
            assert_eq!(
                text.split_ascii_whitespace().count().to_string(),
                expected.split(' ').nth(1).expect("words")
            );
        }
        for plan in PLANS {
            assert_eq!(
                run(&kernel, &data, *plan),
                Summary::Text {
                    text: expected.clone()
                }
            );
        }
    }
}

/// The ABI's declarations and buffer for a module of schedule 0 whose chunk function is
/// `chunk_body`, and whose other parts are `extra`.
fn sequential_module(chunk_body: &str, extra: &str) -> String {
    format!(
        r#"(module
  (memory (export "memory") 2)
  (func (export "flashpipe_abi_version") (result i32) (i32.const 1))
  (func (export "flashpipe_schedule") (result i32) (i32.const 0))
  (func (export "flashpipe_result_kind") (result i32) (i32.const 1))
  (func (export "flashpipe_input_buffer") (param i32) (result i32)
    (if (i32.gt_u (local.get 0) (i32.const 65536)) (then (unreachable)))
    (i32.const 65536))
  (func (export "flashpipe_file_start") (param $size i64))
  (func (export "flashpipe_chunk") (param $offset i64) (param $length i32) (result i32)
    {chunk_body})
  (func (export "flashpipe_file_end") (result i64) (i64.const 2))
  (func $recurse (param i32) (result i32) (call $recurse (i32.add (local.get 0) (i32.const 1))))
  {extra}
)"#
    )
}

fn load(text: &str, limits: Limits) -> Result<WasmKernel, WasmError> {
    WasmKernel::from_bytes(text.as_bytes(), limits)
}

/// A module of [`sequential_module`] with `chunk_body` and no extra, loaded with `limits`.
fn sequential(chunk_body: &str, limits: Limits) -> WasmKernel {
    load(&sequential_module(chunk_body, ""), limits).expect("loads")
}

/// The load error of the trivial [`sequential_module`] with `from` replaced by `to`.
fn refused_edit(from: &str, to: &str, limits: Limits) -> WasmError {
    let module = sequential_module("(i32.const 0)", "").replace(from, to);
    load(&module, limits).expect_err("refused")
}

fn run_error(kernel: &WasmKernel, data: &[u8]) -> WasmError {
    let error = run_on_bytes(kernel, "in", data, DrivePlan::single(4096), &mut Vec::new())
        .expect_err("the run fails");
    match error.kind {
        KernelErrorKind::Wasm(wasm) => wasm,
        other => panic!("a WebAssembly error, got {other}"),
    }
}

#[test]
fn an_infinite_loop_times_out_and_other_files_still_run() {
    // Loops forever on a chunk whose first byte is 'x'.
    let kernel = sequential(
        "(if (i32.eq (i32.load8_u (i32.const 65536)) (i32.const 120)) (then (loop $spin (br $spin)))) (i32.const 0)",
        Limits {
            timeout_ms: 200,
            ..LIMITS
        },
    );
    let started = std::time::Instant::now();
    assert_eq!(
        run_error(&kernel, b"xyz"),
        WasmError::TimedOut { timeout_ms: 200 }
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert_eq!(
        run(&kernel, b"abc", PLANS[0]),
        Summary::Text {
            text: "\0\0".into()
        },
        "the next file runs on a fresh instance"
    );
    let fueled = sequential(
        "(loop $spin (br $spin)) (i32.const 0)",
        Limits {
            fuel: 100_000,
            ..LIMITS
        },
    );
    assert_eq!(
        run_error(&fueled, b"a"),
        WasmError::OutOfFuel { fuel: 100_000 }
    );
}

#[test]
fn memory_past_the_limit_is_out_of_memory() {
    let limits = Limits {
        memory_bytes: 1 << 20,
        ..LIMITS
    };
    let grows = sequential(
        "(drop (memory.grow (i32.const 1000))) (i32.const 0)",
        limits,
    );
    // memory.grow past the limit returns -1; the module goes on and succeeds.
    assert!(run_on_bytes(&grows, "in", b"a", DrivePlan::single(8), &mut Vec::new()).is_ok());
    let traps_on_failure = sequential(
        "(if (i32.eq (memory.grow (i32.const 1000)) (i32.const -1)) (then (unreachable))) (i32.const 0)",
        limits,
    );
    assert_eq!(
        run_error(&traps_on_failure, b"a"),
        WasmError::OutOfMemory {
            limit_bytes: 1 << 20
        }
    );
    assert_eq!(
        refused_edit(
            "(memory (export \"memory\") 2)",
            "(memory (export \"memory\") 1000)",
            limits
        ),
        WasmError::OutOfMemory {
            limit_bytes: 1 << 20
        }
    );
}

#[test]
fn traps_are_reported_with_their_message() {
    for (body, message) in [
        ("(unreachable)", "unreachable"),
        (
            "(i32.div_u (i32.const 1) (i32.sub (local.get $length) (local.get $length)))",
            "divide by zero",
        ),
        ("(i32.load (i32.const -1))", "out of bounds memory access"),
        ("(call $recurse (i32.const 0))", "call stack exhausted"),
    ] {
        let kernel = sequential(body, LIMITS);
        match run_error(&kernel, b"abc") {
            WasmError::Trap { message: found } => {
                assert!(found.contains(message), "{found} names {message}")
            }
            other => panic!("a trap for {body}, got {other}"),
        }
    }
}

#[test]
fn bad_exports_imports_and_garbage_are_refused_at_load() {
    match refused_edit("flashpipe_file_end", "something_else", LIMITS) {
        WasmError::BadExport { name, reason } => {
            assert_eq!(name, "flashpipe_file_end");
            assert!(reason.contains("missing"), "{reason}");
        }
        other => panic!("a bad export, got {other}"),
    }
    let error = refused_edit(
        "(param $offset i64) (param $length i32) (result i32)\n    (i32.const 0)",
        "(param $offset i32) (param $length i32) (result i32)\n    (i32.const 0)",
        LIMITS,
    );
    assert!(
        matches!(&error, WasmError::BadExport { name: "flashpipe_chunk", reason } if reason.contains("(i64, i32) -> (i32)")),
        "{error}"
    );
    assert!(matches!(
        refused_edit("(memory (export \"memory\") 2)", "(memory 2)", LIMITS),
        WasmError::BadExport { name: "memory", .. }
    ));
    assert!(matches!(
        refused_edit(
            "(func (export \"flashpipe_schedule\") (result i32) (i32.const 0))",
            "(func (export \"flashpipe_schedule\") (result i32) (i32.const 1))",
            LIMITS,
        ),
        WasmError::BadExport {
            name: "flashpipe_map",
            ..
        }
    ));
    assert_eq!(
        refused_edit(
            "(func (export \"flashpipe_abi_version\") (result i32) (i32.const 1))",
            "(func (export \"flashpipe_abi_version\") (result i32) (i32.const 7))",
            LIMITS,
        ),
        WasmError::AbiVersion {
            found: 7,
            supported: 1
        }
    );
    for (import, module, name) in [
        (
            r#"(import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32)))"#,
            "wasi_snapshot_preview1",
            "fd_write",
        ),
        (r#"(import "env" "memory" (memory 1))"#, "env", "memory"),
    ] {
        let text = format!("(module {import})");
        match load(&text, LIMITS).expect_err("refused") {
            WasmError::Import {
                module: found_module,
                name: found_name,
                ..
            } => assert_eq!((found_module.as_str(), found_name.as_str()), (module, name)),
            other => panic!("an import error, got {other}"),
        }
    }
    assert_eq!(
        WasmKernel::from_bytes(b"", LIMITS).expect_err("refused"),
        WasmError::Empty
    );
    for garbage in [
        &b"\0asm\x01\0\0\0\xff\xff"[..],
        &[0xffu8, 0xfe, 0x00, 0x13][..],
        b"not a module at all",
    ] {
        assert!(matches!(
            WasmKernel::from_bytes(garbage, LIMITS).expect_err("refused"),
            WasmError::NotWasm { .. }
        ));
    }
    let too_big = vec![0u8; MAX_MODULE_BYTES as usize + 1];
    assert!(matches!(
        WasmKernel::from_bytes(&too_big, LIMITS).expect_err("refused"),
        WasmError::TooBig { .. }
    ));
}

#[test]
fn results_outside_memory_and_failure_statuses_are_typed_errors() {
    for (written, instead, bad_function) in [
        (
            "(func (export \"flashpipe_file_end\") (result i64) (i64.const 2))",
            "(func (export \"flashpipe_file_end\") (result i64) (i64.const 0x00001ffff0000100))",
            "flashpipe_file_end",
        ),
        (
            "(i32.const 65536))\n  (func (export \"flashpipe_file_start\")",
            "(i32.const -16))\n  (func (export \"flashpipe_file_start\")",
            "flashpipe_input_buffer",
        ),
    ] {
        let module = sequential_module("(i32.const 0)", "").replace(written, instead);
        let kernel = load(&module, LIMITS).expect("loads");
        assert!(
            matches!(
                run_error(&kernel, b"a"),
                WasmError::BadResult { function, .. } if function == bad_function
            ),
            "{bad_function}"
        );
    }
    let failing = sequential("(i32.const 5)", LIMITS);
    assert_eq!(
        run_error(&failing, b"a"),
        WasmError::ModuleFailed {
            function: "flashpipe_chunk",
            status: 5
        }
    );
    let not_utf8 = sequential(
        "(i32.store8 (i32.const 0) (i32.const 255)) (i32.const 0)",
        LIMITS,
    );
    assert!(matches!(
        run_error(&not_utf8, b"a"),
        WasmError::BadResult { .. }
    ));
}

#[test]
fn options_choose_the_module_and_refuse_what_is_missing() {
    let folder = tempfile::tempdir().expect("a folder");
    let path = folder.path().join("histogram.wat");
    std::fs::write(&path, histogram_wat().expect("the example")).expect("written");
    let kernel = build_kernel("wasm", &[format!("module_path={}", path.display())])
        .expect("built from a host file");
    assert_eq!(kernel.name(), "wasm");
    for (arguments, wanted) in [
        (vec![], "exactly one"),
        (
            vec!["module=m.wasm".to_string()],
            "only flashpipe run reads",
        ),
        (
            vec![format!("module_path={}", folder.path().display())],
            "not a regular file",
        ),
        (
            vec!["module_path=/no/such/file".to_string()],
            "/no/such/file",
        ),
        (
            vec![
                format!("module_path={}", path.display()),
                "memory=1GB0".to_string(),
            ],
            "memory",
        ),
    ] {
        let Err(error) = build_kernel("wasm", &arguments) else {
            panic!("{arguments:?} is refused");
        };
        assert!(error.to_string().contains(wanted), "{error}");
    }
    let mut files = flashpipe_kernels::store_files::StoreFiles::new();
    files.insert("module", histogram_wat().expect("the example"));
    let spec = flashpipe_kernels::registry::find_kernel("wasm").expect("registered");
    spec.build_with_store_files(&["module=h.wat".to_string()], files)
        .expect("built from store bytes");
}

#[test]
fn time_waiting_between_calls_does_not_count_against_the_timeout() {
    use flashpipe_kernels::api::{Chunk, FileInfo, FileJob};
    let kernel = sequential(
        "(i32.const 0)",
        Limits {
            timeout_ms: 100,
            ..LIMITS
        },
    );
    let data = [7u8; 64];
    let FileJob::Sequential(mut job) = kernel
        .start_file(&FileInfo::new("slow", data.len() as u64))
        .expect("starts")
    else {
        panic!("a sequential module gives a sequential job");
    };
    let mut sink = Vec::new();
    for offset in [0usize, 32] {
        std::thread::sleep(std::time::Duration::from_millis(150));
        let chunk = Chunk {
            file: "slow",
            offset_bytes: offset as u64,
            data: &data[offset..offset + 32],
        };
        job.process_chunk(&chunk, &mut sink)
            .expect("storage waits are not the module's time");
    }
    job.finish(&mut sink).expect("finishes");
}

#[test]
fn a_stream_result_is_written_to_the_output() {
    let stream = sequential_module(
        "(i32.store16 (i32.const 0) (i32.const 0x6968)) (i32.const 0)",
        "",
    )
    .replace(
        "(func (export \"flashpipe_result_kind\") (result i32) (i32.const 1))",
        "(func (export \"flashpipe_result_kind\") (result i32) (i32.const 2))",
    );
    let kernel = load(&stream, LIMITS).expect("loads");
    assert_eq!(
        kernel.output_kind(),
        flashpipe_kernels::api::OutputKind::TransformedStream
    );
    let mut output = Vec::new();
    let summary =
        run_on_bytes(&kernel, "in", b"abc", DrivePlan::single(2), &mut output).expect("runs");
    assert_eq!(summary, Summary::Stream { output_bytes: 2 });
    assert_eq!(output, b"hi");
}

/// A stream module of schedule 0 that echoes each chunk through `flashpipe_take_output`
/// and ends each file with `!`.
fn echo_module() -> String {
    sequential_module(
        "(global.set $length (local.get $length)) (i32.const 0)",
        r#"(global $length (mut i32) (i32.const 0))
  (data (i32.const 16) "!")
  (func (export "flashpipe_take_output") (result i64)
    (i64.or (i64.shl (i64.const 65536) (i64.const 32)) (i64.extend_i32_u (global.get $length))))"#,
    )
    .replace(
        "(func (export \"flashpipe_result_kind\") (result i32) (i32.const 1))",
        "(func (export \"flashpipe_result_kind\") (result i32) (i32.const 2))",
    )
    .replace(
        "(func (export \"flashpipe_file_end\") (result i64) (i64.const 2))",
        "(func (export \"flashpipe_file_end\") (result i64) (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 1)))",
    )
}

#[test]
fn a_stream_module_writes_each_chunk_s_output_as_it_goes() {
    use flashpipe_kernels::api::{Chunk, FileInfo, FileJob, OutputSink};
    use flashpipe_kernels::error::KernelError;
    /// Each write the kernel made, in order.
    struct Writes(Vec<Vec<u8>>);
    impl OutputSink for Writes {
        fn write_output(&mut self, bytes: &[u8]) -> Result<(), KernelError> {
            self.0.push(bytes.to_vec());
            Ok(())
        }
    }
    let kernel = load(&echo_module(), LIMITS).expect("loads");
    let data = b"abcdefg";
    let FileJob::Sequential(mut job) = kernel
        .start_file(&FileInfo::new("in", data.len() as u64))
        .expect("starts")
    else {
        panic!("a sequential module gives a sequential job");
    };
    let mut sink = Writes(Vec::new());
    for offset in (0..data.len()).step_by(3) {
        let end = (offset + 3).min(data.len());
        let chunk = Chunk {
            file: "in",
            offset_bytes: offset as u64,
            data: &data[offset..end],
        };
        job.process_chunk(&chunk, &mut sink).expect("a chunk");
        assert_eq!(sink.0.last().map(Vec::as_slice), Some(&data[offset..end]));
    }
    let summary = job.finish(&mut sink).expect("finishes");
    assert_eq!(summary, Summary::Stream { output_bytes: 8 });
    assert_eq!(sink.0.concat(), b"abcdefg!");
    // the same through the driver, on every chunking
    for plan in PLANS {
        let mut output = Vec::new();
        let summary = run_on_bytes(&kernel, "in", data, *plan, &mut output).expect("runs");
        assert_eq!(summary, Summary::Stream { output_bytes: 8 });
        assert_eq!(output, b"abcdefg!");
    }
    // an output outside memory is a typed error, not a read past it
    let outside = echo_module().replace("(i64.const 65536)", "(i64.const 200000)");
    let kernel = load(&outside, LIMITS).expect("loads");
    assert!(matches!(
        run_error(&kernel, data),
        WasmError::BadResult {
            function: "flashpipe_take_output",
            ..
        }
    ));
}
