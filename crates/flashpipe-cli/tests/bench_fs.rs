//! CLI tests of `flashpipe bench fs`: a `--quick --json` run produces every part with
//! its ratios and targets (fio parts skipped with a note when fio is absent), and bad
//! arguments are refused with a clear message and a non-zero exit.

mod common;

use std::path::PathBuf;

use common::flashpipe;

use serde_json::Value;

fn scratch_folder(name: &str) -> PathBuf {
    let folder = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("bench-fs-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&folder).expect("scratch folder");
    folder
}

fn is_ratio_or_null(value: &Value) -> bool {
    value.is_null()
        || value
            .as_f64()
            .is_some_and(|ratio| ratio.is_finite() && ratio >= 0.0)
}

/// Every field whose name contains "ratio", anywhere in `value`.
fn ratio_fields<'a>(value: &'a Value, found: &mut Vec<(String, &'a Value)>) {
    match value {
        Value::Object(fields) => {
            for (name, field) in fields {
                if name.contains("ratio") {
                    found.push((name.clone(), field));
                }
                ratio_fields(field, found);
            }
        }
        Value::Array(items) => items.iter().for_each(|item| ratio_fields(item, found)),
        _ => {}
    }
}

#[test]
fn a_quick_json_run_reports_every_part_ratio_and_target() {
    let folder = scratch_folder("quick");
    let output = flashpipe(&[
        "bench",
        "fs",
        "--quick",
        "--json",
        "--dir",
        folder.to_str().expect("utf-8 path"),
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "bench fs failed: {stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).expect("the output is JSON");
    assert_eq!(report["quick"], Value::Bool(true));
    let rows = report["large_file"]["rows"]
        .as_array()
        .expect("large-file rows");
    assert_eq!(rows.len(), 4);
    for row in rows {
        assert!(
            row["flashpipe"]["mb_per_s"].as_f64().unwrap() > 0.0,
            "{row}"
        );
    }
    if report["fio_version"].is_null() {
        let reason = report["fio_unavailable_reason"].as_str().expect("a reason");
        eprintln!("fio parts skipped: {reason}");
    } else {
        assert!(
            rows[1]["throughput_ratio_to_fio_raw"].as_f64().is_some(),
            "{}",
            rows[1]
        );
    }
    let points = report["efficiency"]["points"]
        .as_array()
        .expect("efficiency points");
    assert_eq!(
        points.len(),
        2 * 3 * 4,
        "disks x block sizes x quick file sizes"
    );
    let phases = report["small_files"]["phases"]
        .as_array()
        .expect("small-file phases");
    assert_eq!(phases.len(), 4);
    for phase in phases {
        assert!(
            phase["flashpipe_files_per_s"].as_f64().unwrap() > 0.0,
            "{phase}"
        );
    }
    let mut ratios = Vec::new();
    ratio_fields(&report, &mut ratios);
    assert!(ratios.len() > 20, "ratios found: {}", ratios.len());
    for (name, value) in ratios {
        assert!(is_ratio_or_null(value), "{name} = {value}");
    }
    let targets = report["targets"].as_array().expect("targets");
    assert_eq!(targets.len(), 8);
    let leftovers = std::fs::read_dir(&folder).expect("folder").count();
    assert_eq!(leftovers, 0, "the benchmark removes its subfolder");
    let _ = std::fs::remove_dir_all(&folder);
}

#[test]
fn bad_arguments_are_refused_clearly() {
    let check = |arguments: &[&str], expected: &str| {
        let output = flashpipe(arguments);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{arguments:?} succeeded");
        assert!(stderr.contains(expected), "{arguments:?}: {stderr}");
    };
    check(
        &["bench", "fs", "--size", "3MiB"],
        "multiple of 1 MiB and at least 8 MiB",
    );
    check(&["bench", "fs", "--size", "lots"], "lots");
    check(&["bench", "fs", "--block-size", "6KiB"], "power of two");
    check(&["bench", "fs", "--runtime-seconds", "0"], "outside");
    check(&["bench", "fs", "--small-files", "0"], "0");
    check(&["bench", "fs", "--parts", "everything"], "everything");
}
