//! Runs the `flashpipe` binary's `bench device` on a tiny size: its JSON carries every
//! ratio, its files are cleaned up, and bad arguments fail clearly without side effects.

mod common;

use std::path::Path;
use std::process::Command;

use common::{absent_folder, check_fails, command_line, flashpipe, succeed_json};

use serde_json::Value;

fn fio_available() -> bool {
    Command::new("fio")
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success())
}

/// Every object key in `value` whose name contains "ratio", with its value.
fn ratio_fields(value: &Value, found: &mut Vec<(String, Value)>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                if key.contains("ratio") {
                    found.push((key.clone(), child.clone()));
                }
                ratio_fields(child, found);
            }
        }
        Value::Array(items) => items.iter().for_each(|item| ratio_fields(item, found)),
        _ => {}
    }
}

fn run_json(folder: &Path, extra: &[&str]) -> Value {
    let mut arguments = command_line(
        "bench device --size 4MiB --runtime-seconds 0.1 --json --dir {}",
        &[folder.to_str().unwrap()],
    );
    arguments.extend_from_slice(extra);
    succeed_json(&arguments)
}

#[test]
fn bench_device_without_fio_reports_every_ratio_and_cleans_up() {
    let folder = absent_folder("bench-no-fio");
    let report = run_json(&folder, &["--no-fio"]);
    let mut found = Vec::new();
    ratio_fields(&report, &mut found);
    for expected in [
        "throughput_ratio_to_fio",
        "iops_ratio_to_fio",
        "latency_mean_ratio_to_fio",
        "latency_p99_ratio_to_fio",
        "throughput_ratio_to_memcpy",
        "measured_ratio",
        "bound_ratio",
    ] {
        assert!(
            found.iter().any(|(key, _)| key == expected),
            "no {expected} in {report:#}"
        );
    }
    for (key, value) in &found {
        if key.ends_with("_to_fio") {
            assert!(value.is_null(), "{key} must be n/a without fio");
        }
    }
    assert_eq!(report["single_file"].as_array().unwrap().len(), 6);
    assert_eq!(report["stripes"].as_array().unwrap().len(), 8);
    assert!(report["fio_unavailable_reason"].is_string());
    assert!(!folder.exists(), "the folder it made is removed");
}

#[test]
fn bench_device_with_fio_gives_ratios_to_fio() {
    if !fio_available() {
        flashpipe_testkit::tools::skip("the side-by-side run", "fio is not installed");
        return;
    }
    let folder = absent_folder("bench-fio");
    let report = run_json(&folder, &["--no-stripes", "--keep", "--only", "rand-read"]);
    assert_eq!(report["single_file"].as_array().unwrap().len(), 2);
    for result in report["single_file"].as_array().unwrap() {
        let ratio = result["throughput_ratio_to_fio"].as_f64().unwrap();
        assert!(ratio > 0.0, "{result:#}");
    }
    assert!(
        folder.join("bench-single.img").exists(),
        "--keep keeps the file"
    );
}

#[test]
fn bad_arguments_fail_clearly_and_create_nothing() {
    let folder = absent_folder("bench-bad");
    let folder_text = folder.to_str().unwrap().to_string();
    let cases: [(&[&str], &str); 10] = [
        (&["--size", "banana"], "--size"),
        (&["--size", "3000000"], "multiple of 1 MiB"),
        (&["--size", "1MiB"], "at least 2 MiB"),
        (&["--runtime-seconds", "0"], "--runtime-seconds"),
        (&["--runtime-seconds", "soon"], "not a number"),
        (&["--qd", "0"], "--qd"),
        (&["--qd", "32,5000"], "--qd"),
        (&["--engine", "warp"], "--engine"),
        (&["--frobnicate"], "--frobnicate"),
        (&["--only", "seq-read,sideways"], "--only"),
    ];
    for (extra, expected) in cases {
        let mut arguments = vec!["bench", "device", "--no-fio", "--dir", &folder_text];
        arguments.extend_from_slice(extra);
        let output = flashpipe(&arguments);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{extra:?} should fail");
        assert!(stderr.contains(expected), "{extra:?}: {stderr}");
        assert!(!folder.exists(), "{extra:?} created the folder");
    }
}

#[test]
fn a_folder_that_is_a_file_is_a_clear_error() {
    let path = std::env::temp_dir().join(format!("flashpipe-not-a-folder-{}", std::process::id()));
    std::fs::write(&path, b"x").unwrap();
    check_fails(
        &command_line(
            "bench device --no-fio --size 4MiB --dir {}",
            &[path.to_str().unwrap()],
        ),
        "cannot create folder",
    );
    std::fs::remove_file(&path).unwrap();
}
