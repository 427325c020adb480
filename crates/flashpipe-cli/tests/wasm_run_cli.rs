//! `flashpipe run STORE wasm module=NAME`: a user's WebAssembly kernel stored in the store,
//! run in process and through `flashpipe serve`, through the real binary. The Rust CRC32C
//! example prints what the built-in `crc32c` prints; hostile modules (garbage, an infinite
//! loop, an import) fail with a clear message and a non-zero status, never a panic; a
//! server refuses `module_path=` from a client and keeps serving.

mod serve_support;

use flashpipe_kernels::wasm::examples::{
    build_rust_example, examples_folder, histogram_wat, tools_required,
};
use serve_support::*;

/// The Rust CRC32C example, or `None` (printed why) where its target is missing.
fn crc32c_module() -> Option<Vec<u8>> {
    match build_rust_example("crc32c") {
        Ok(module) => Some(module),
        Err(error) if !tools_required() => {
            println!("skipped: {error}");
            None
        }
        Err(error) => panic!("{error}"),
    }
}

/// A store holding inputs `data:a`, `data:b`, `data:c` and the module files given.
fn store_with(folder: &TestFolder, modules: &[(&str, &[u8])]) -> std::path::PathBuf {
    let store = file_store(folder, "64MiB");
    put_three_inputs(&store, folder, 100_000);
    for (index, (name, bytes)) in modules.iter().enumerate() {
        let local = folder.join(format!("module-{index}"));
        std::fs::write(&local, bytes).unwrap();
        succeed(&["put", text(&store), text(&local), "--as", name]);
    }
    store
}

/// A kernel module of ABI version 1 whose chunk call is `chunk` (with any functions it
/// calls): 32 pages of memory, a 64 KiB input buffer, 4 bytes of output a file.
fn kernel_module(chunk: &str) -> String {
    format!(
        r#"(module
  (memory (export "memory") 32)
  (func (export "flashpipe_abi_version") (result i32) (i32.const 1))
  (func (export "flashpipe_schedule") (result i32) (i32.const 0))
  (func (export "flashpipe_result_kind") (result i32) (i32.const 0))
  (func (export "flashpipe_input_buffer") (param i32) (result i32) (i32.const 65536))
  (func (export "flashpipe_file_start") (param i64))
  {chunk}
  (func (export "flashpipe_file_end") (result i64) (i64.const 4))
)"#
    )
}

/// Spins without end in its chunk call.
fn spin() -> String {
    kernel_module(
        r#"(func (export "flashpipe_chunk") (param i64 i32) (result i32) (loop $spin (br $spin)) (i32.const 0))"#,
    )
}

/// Recurses without end in its chunk call: the wasm stack limit stops it.
fn recurse() -> String {
    kernel_module(
        r#"(func $deeper (param i32) (result i32) (call $deeper (i32.add (local.get 0) (i32.const 1))))
  (func (export "flashpipe_chunk") (param i64 i32) (result i32) (call $deeper (i32.const 0)))"#,
    )
}

const WASI: &str = r#"(module
  (import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
)"#;

/// `flashpipe run STORE wasm OPTIONS...`.
fn run_wasm<'a>(store: &'a std::path::Path, options: &[&'a str]) -> Vec<&'a str> {
    [&["run", text(store), "wasm"][..], options].concat()
}

#[test]
fn a_stored_module_runs_in_process_and_hostile_ones_fail_cleanly() {
    let Some(crc) = crc32c_module() else {
        return;
    };
    let folder = TestFolder::new("wasm-run-in-process");
    let histogram = histogram_wat().expect("the example");
    let store = store_with(
        &folder,
        &[
            ("k:crc.wasm", &crc),
            ("k:hist.wat", &histogram),
            ("k:garbage", b"\xff\xfe not a module"),
            ("k:spin.wat", spin().as_bytes()),
            ("k:wasi.wat", WASI.as_bytes()),
            ("k:recurse.wat", recurse().as_bytes()),
        ],
    );
    let built_in = succeed(&["run", text(&store), "crc32c", "data:*"]);
    let wasm = succeed(&["run", text(&store), "wasm", "module=k:crc.wasm", "data:*"]);
    assert_eq!(wasm, built_in, "the module prints what crc32c prints");
    assert_eq!(wasm.lines().count(), 3);
    let histogram_line = succeed(&["run", text(&store), "wasm", "module=k:hist.wat", "data:a"]);
    let (hex, name) = histogram_line
        .trim_end()
        .split_once("  ")
        .expect("HEX  NAME");
    assert_eq!((hex.len(), name), (4096, "data:a"));
    let module_path = format!(
        "module_path={}",
        examples_folder().join("histogram.wat").display()
    );
    let by_path = succeed(&run_wasm(&store, &[&module_path, "data:a"]));
    assert_eq!(
        by_path, histogram_line,
        "module_path= reads the same module"
    );

    for (arguments, wanted) in [
        (vec!["module=k:absent.wasm"], "k:absent.wasm"),
        (vec!["module=k:garbage"], "not a valid WebAssembly module"),
        (vec!["module=k:wasi.wat"], "wasi_snapshot_preview1.fd_write"),
        (vec!["module=k:spin.wat", "timeout_ms=300"], "timed out"),
        (vec!["module=k:recurse.wat"], "call stack exhausted"),
        (vec![], "exactly one of module="),
        (vec!["module=k:crc.wasm", "memory=12"], "memory"),
    ] {
        let mut command = vec!["run", text(&store), "wasm"];
        command.extend(arguments.iter().copied());
        command.push("data:a");
        let stderr = fail_stderr(&command);
        assert!(stderr.contains(wanted), "{arguments:?}: {stderr}");
    }
    let after = succeed(&["run", text(&store), "wasm", "module=k:crc.wasm", "data:*"]);
    assert_eq!(after, built_in, "nothing changed: the store still runs");
}

#[test]
fn a_stored_module_runs_through_the_server_and_module_path_is_refused() {
    let Some(crc) = crc32c_module() else {
        return;
    };
    let folder = TestFolder::new("wasm-run-served");
    let store = store_with(
        &folder,
        &[("k:crc.wasm", &crc), ("k:spin.wat", spin().as_bytes())],
    );
    let crc_of_all = run_wasm(&store, &["module=k:crc.wasm", "data:*"]);
    let in_process = succeed(&crc_of_all);
    let server = ServerProcess::start(&store, &["--max-kernel-runs", "1"]);
    let stderr = succeed_stderr(&run_wasm(&store, &["module=k:crc.wasm", "data:*", "-v"]));
    assert!(stderr.contains("through the server"), "{stderr}");
    let served = succeed(&crc_of_all);
    assert_eq!(served, in_process, "the same lines through the server");
    let host_file = examples_folder().join("histogram.wat");
    let module_path = format!("module_path={}", host_file.display());
    let refused = fail_stderr(&run_wasm(&store, &[&module_path, "data:a"]));
    assert!(refused.contains("module_path="), "{refused}");
    let timed_out = fail_stderr(&run_wasm(
        &store,
        &["module=k:spin.wat", "timeout_ms=300", "data:a"],
    ));
    assert!(timed_out.contains("timed out"), "{timed_out}");
    let again = succeed(&crc_of_all);
    assert_eq!(again, in_process, "the server keeps serving");
    server.stop_cleanly();
}

#[test]
fn a_stored_module_over_the_limit_is_refused() {
    let (folder, store) = folder_with_store("wasm-run-too-big", "160MiB");
    let local = folder.join("big.wasm");
    let limit = flashpipe_kernels::wasm::MAX_MODULE_BYTES;
    std::fs::File::create(&local)
        .and_then(|file| file.set_len(limit + 1))
        .unwrap();
    succeed(&["put", text(&store), text(&local), "--as", "big.wasm"]);
    std::fs::write(folder.join("in.txt"), b"some input").unwrap();
    succeed(&[
        "put",
        text(&store),
        text(&folder.join("in.txt")),
        "--as",
        "in.txt",
    ]);
    let stderr = fail_stderr(&["run", text(&store), "wasm", "module=big.wasm", "in.txt"]);
    assert!(
        stderr.contains("big.wasm") && stderr.contains(&limit.to_string()),
        "{stderr}"
    );
}
