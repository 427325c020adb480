//! `flashpipe run` over a store of files (results against sha256sum-free references computed
//! here, edge images written back, clear errors for bad options and wrong input formats) and
//! `flashpipe bench kernels --quick --json`.

mod common;

use std::path::{Path, PathBuf};

use common::{
    array_at, check_fails, command_line, flashpipe, fresh_folder, mkfs, quick_bench_json,
    strings_at, succeed, succeeded_json, text,
};
use serde_json::Value;

/// A store with a text file, an image, and a vector file whose length is not whole vectors.
fn sample_store(folder: &Path) -> PathBuf {
    let store = folder.join("store.toml");
    std::fs::write(
        folder.join("words.txt"),
        b"alpha\nbeta needle\ngamma\nneedle two\n",
    )
    .expect("text");
    std::fs::write(folder.join("vectors.bin"), [0u8; 10]).expect("vectors");
    let image = flashpipe_kernels::throughput::synthetic_png(64, 48).expect("png");
    std::fs::write(folder.join("image.png"), image).expect("png");
    mkfs(&store, "dev.img", &["--size", "64MiB"]);
    for file in ["words.txt", "vectors.bin", "image.png"] {
        succeed(&["put", text(&store), text(&folder.join(file))]);
    }
    store
}

#[test]
fn run_gives_results_and_clear_errors() {
    let folder = fresh_folder("run-kernels");
    let store = sample_store(&folder);
    let store = text(&store);
    let grep = succeed(&command_line(
        "run {} grep pattern=needle words.txt --json",
        &[store],
    ));
    let grep: Value = serde_json::from_str(&grep).expect("JSON");
    assert_eq!(grep["files"][0]["summary"]["matching_line_count"], 2);
    assert!(grep["report"]["slowest_stage"].is_string());
    let sha = succeed(&["run", store, "sha256", "words.txt"]);
    assert!(sha.trim_end().ends_with("  words.txt"), "{sha}");
    succeed(&["run", store, "sobel", "image.png", "--output", "edges.png"]);
    let listing = succeed(&["ls", store]);
    assert!(listing.contains("edges.png"), "{listing}");
    check_fails(&["run", store, "sobel", "words.txt"], "wrong input format");
    check_fails(&["run", store, "nope", "words.txt"], "unknown kernel");
    check_fails(
        &["run", store, "des-ecb", "key=zz", "words.txt"],
        "not hexadecimal",
    );
    check_fails(
        &["run", store, "grep", "pattern=x", "missing.txt"],
        "missing.txt",
    );
    check_fails(
        &["run", store, "crc32c", "words.txt", "--output", "x"],
        "summary",
    );
    let queries = folder.join("queries.bin");
    std::fs::write(&queries, [0u8; 8]).expect("queries");
    let queries_option = format!("queries={}", text(&queries));
    check_fails(
        &command_line(
            "run {} knn dimensions=2 {} vectors.bin",
            &[store, &queries_option],
        ),
        "vectors.bin",
    );
    let _ = std::fs::remove_dir_all(&folder);
}

#[test]
fn bench_kernels_quick_json_has_every_column() {
    let folder = fresh_folder("bench-kernels");
    let report = quick_bench_json("kernels", &folder);
    let rows = array_at(&report["rows"], "rows");
    let labels = strings_at(rows, "kernel");
    for expected in [
        "des-ecb",
        "des-cbc",
        "aes128-ctr",
        "sha256",
        "crc32c",
        "grep (regex)",
        "grep (literal)",
        "sort",
        "sobel",
        "knn",
        "search-index",
    ] {
        assert!(
            labels.iter().any(|label| label.starts_with(expected)),
            "{expected} missing from {labels:?}"
        );
    }
    for row in rows {
        for key in [
            "near_data_bytes_per_second",
            "near_data_cold_bytes_per_second",
            "read_then_compute_bytes_per_second",
            "read_then_compute_cold_bytes_per_second",
            "single_thread_bytes_per_second",
            "single_thread_cold_bytes_per_second",
            "kernel_in_memory_bytes_per_second",
        ] {
            assert!(
                row[key].as_f64().is_some_and(|rate| rate > 0.0),
                "{key}: {row}"
            );
        }
        assert!(row["bandwidth_target_met"].is_boolean());
        assert_eq!(
            row["tool_bytes_per_second"].is_null(),
            row["tool_cold_bytes_per_second"].is_null(),
            "a tool runs cold and warm: {row}"
        );
        assert_eq!(
            row["tool_cold_bytes_per_second"].is_null(),
            row["tool_target_met_cold"].is_null(),
            "{row}"
        );
    }
    let caches = &report["caches"];
    assert_eq!(
        caches["cold_figures_are_warm"],
        Value::Bool(true),
        "--quick never drops the page cache, so its cold figures are warm: {caches}"
    );
    assert!(caches["not_dropped_reason"].is_string(), "{caches}");
    let search = rows
        .iter()
        .find(|row| {
            row["kernel"]
                .as_str()
                .is_some_and(|label| label.starts_with("search-index"))
        })
        .expect("search-index row");
    let lookups = &search["search_lookups"];
    assert!(
        lookups["found_count"]
            .as_u64()
            .is_some_and(|found| found > 0),
        "{lookups}"
    );
    assert!(
        lookups["near_data_lookups_per_second"]
            .as_f64()
            .is_some_and(|rate| rate > 0.0),
        "{lookups}"
    );
    let sizing = report["sizing"].as_array().expect("sizing");
    assert_eq!(
        sizing.len(),
        rows.len() * 2,
        "one sizing row per kernel and preset"
    );
    check_fails(
        &["bench", "kernels", "--size", "1KiB", "--dir", text(&folder)],
        "--size",
    );
    check_fails(
        &[
            "bench",
            "kernels",
            "--parts",
            "nope",
            "--dir",
            text(&folder),
        ],
        "--parts",
    );
    // one part alone: no kernel rows, no BLAST section
    let wasm_only = flashpipe(&[
        "bench",
        "kernels",
        "--quick",
        "--json",
        "--parts",
        "wasm",
        "--dir",
        text(&folder),
    ]);
    let wasm_only = succeeded_json(&wasm_only, "bench kernels --parts wasm");
    assert!(
        wasm_only["rows"].as_array().is_some_and(Vec::is_empty),
        "no kernel rows without rad: {wasm_only}"
    );
    let _ = std::fs::remove_dir_all(&folder);
}
