//! CLI tests of `flashpipe bench fs`: a `--quick --json` run produces every part with
//! its ratios, the tmpfs and ext4-RAM anchors (each measured, or n/a with its reason:
//! ext4-RAM needs root, which the tests do not), and every issue #13 target with its
//! figures (fio parts skipped with a note when fio is absent), leaving no mount behind;
//! bad arguments are refused with a clear message and a non-zero exit. Nothing here
//! asserts on a time.

mod common;

use std::path::PathBuf;

use common::{array_at, assert_positive_in_each, flashpipe, quick_bench_json, strings_at};

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
    let report = quick_bench_json("fs", &folder);
    assert_eq!(report["quick"], Value::Bool(true));
    let rows = array_at(&report["large_file"]["rows"], "large-file rows");
    assert_eq!(rows.len(), 4);
    assert_positive_in_each(rows, "/flashpipe/mb_per_s");
    if report["fio_version"].is_null() {
        let reason = report["fio_unavailable_reason"].as_str().expect("a reason");
        flashpipe_testkit::tools::skip("bench fs's fio parts", reason);
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
    check_anchors(&report["efficiency"]);
    check_devices(&report["efficiency"]);
    let phases = array_at(&report["small_files"]["phases"], "small-file phases");
    assert_eq!(phases.len(), 4);
    assert_positive_in_each(phases, "/flashpipe_files_per_s");
    let mut ratios = Vec::new();
    ratio_fields(&report, &mut ratios);
    assert!(ratios.len() > 20, "ratios found: {}", ratios.len());
    for (name, value) in ratios {
        assert!(is_ratio_or_null(value), "{name} = {value}");
    }
    check_targets(&report["targets"]);
    let leftovers = std::fs::read_dir(&folder).expect("folder").count();
    assert_eq!(leftovers, 0, "the benchmark removes its subfolder");
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let folder_text = folder.to_str().expect("utf-8 path");
    assert!(
        !mounts.contains(folder_text),
        "a mount under {folder_text} was left: {mounts}"
    );
    let _ = std::fs::remove_dir_all(&folder);
}

/// Quick runs measure files of 1 KiB, 10 KiB, 100 KiB and 1 MiB.
const QUICK_FILE_SIZES_BYTES: [u64; 4] = [1 << 10, 10 << 10, 100 << 10, 1 << 20];

/// Each anchor is measured at every quick size or says why it is n/a; the per-file
/// comparison has a row per size whose ratios are there exactly when the anchor is.
fn check_anchors(efficiency: &Value) {
    let anchors = &efficiency["anchors"];
    for column in ["tmpfs", "ext4_ram"] {
        let column = &anchors[column];
        let points = column["points"].as_array().expect("anchor points");
        match column["unavailable_reason"].as_str() {
            Some(reason) => {
                eprintln!("{} n/a: {reason}", column["file_system"]);
                assert!(!reason.is_empty());
                assert!(points.is_empty(), "{column}");
            }
            None => {
                assert!(column["location"].is_string(), "{column}");
                let sizes: Vec<u64> = points
                    .iter()
                    .map(|point| point["file_size_bytes"].as_u64().expect("size"))
                    .collect();
                assert_eq!(sizes, QUICK_FILE_SIZES_BYTES, "{column}");
                for point in points {
                    assert!(point["write_us"].as_f64().unwrap() > 0.0, "{point}");
                    assert!(point["read_us"].as_f64().unwrap() > 0.0, "{point}");
                }
            }
        }
    }
    let floors = efficiency["floors"].as_array().expect("copy floors");
    let floor_sizes: Vec<u64> = floors
        .iter()
        .map(|floor| floor["file_size_bytes"].as_u64().expect("a floor's size"))
        .collect();
    assert_eq!(floor_sizes, QUICK_FILE_SIZES_BYTES, "one floor a file size");
    assert!(
        floors.iter().all(|floor| floor["floor_us"].is_f64()),
        "{floors:?}"
    );
    let per_file = efficiency["per_file"].as_array().expect("per-file rows");
    assert_eq!(per_file.len(), QUICK_FILE_SIZES_BYTES.len());
    for row in per_file {
        assert!(row["flashpipe_write_us"].as_f64().unwrap() > 0.0, "{row}");
        assert!(row["flashpipe_read_us"].as_f64().unwrap() > 0.0, "{row}");
        for (column, ratios) in [
            (
                "tmpfs",
                ["write_time_ratio_to_tmpfs", "read_time_ratio_to_tmpfs"],
            ),
            (
                "ext4_ram",
                [
                    "write_time_ratio_to_ext4_ram",
                    "read_time_ratio_to_ext4_ram",
                ],
            ),
        ] {
            let measured = anchors[column]["unavailable_reason"].is_null();
            for ratio in ratios {
                assert_eq!(row[ratio].is_f64(), measured, "{ratio}: {row}");
            }
        }
    }
}

/// The efficiency on the file device and on paced flash: each measured at the quick sizes
/// from 100 KiB, or n/a with the reason; one commit per file and batched side by side.
fn check_devices(efficiency: &Value) {
    let devices = array_at(&efficiency["devices"], "device rows");
    assert_eq!(strings_at(devices, "device"), ["file", "paced_flash"]);
    for device in devices {
        if let Some(reason) = device["unavailable_reason"].as_str() {
            eprintln!("{} n/a: {reason}", device["device"]);
            continue;
        }
        let points = array_at(&device["points"], "device points");
        let sizes: Vec<u64> = points
            .iter()
            .map(|point| point["file_size_bytes"].as_u64().expect("size"))
            .collect();
        assert_eq!(sizes, QUICK_FILE_SIZES_BYTES[2..], "{device}");
        assert_positive_in_each(points, "/write_commit_per_file_total_us");
        assert_positive_in_each(points, "/write_batched_total_us");
        assert_positive_in_each(points, "/read_raw_us");
    }
}

/// The targets: 4 large-file, 8 per-file, 4 efficiency, 2 over the copy floor, 4 on
/// devices, 4 small-file; each with its bound and figures, judged exactly when measured.
fn check_targets(targets: &Value) {
    let targets = targets.as_array().expect("targets");
    assert_eq!(targets.len(), 26, "{targets:?}");
    for target in targets {
        let bound = target["bound"].as_str().expect("bound");
        assert!(["at_least", "at_most"].contains(&bound), "{target}");
        assert!(target["required_ratio"].as_f64().is_some(), "{target}");
        assert!(
            !target["figures"].as_str().expect("figures").is_empty(),
            "{target}"
        );
        assert_eq!(
            target["measured_ratio"].is_null(),
            target["met"].is_null(),
            "{target}"
        );
    }
    let names = strings_at(targets, "name");
    for expected in [
        "large file vs fio raw: sequential write",
        "large file vs fio raw: 4 KiB random read QD1, latency",
        "per file vs tmpfs: 1 KiB write + flush",
        "per file vs tmpfs: 1 MiB read",
        "efficiency (raw / total), files >= 10 MiB, write",
        "efficiency (raw / total), files of 1 MiB, read",
        "efficiency on the file device (O_DIRECT), files >= 100 KiB, write, commits batched",
        "efficiency on paced flash (minflash, FTL), files >= 100 KiB, read",
    ] {
        assert!(names.contains(&expected), "{expected} missing: {names:?}");
    }
    let ten_mib = targets
        .iter()
        .find(|target| target["name"] == "efficiency (raw / total), files >= 10 MiB, read")
        .expect("10 MiB efficiency target");
    assert!(
        ten_mib["met"].is_null(),
        "quick runs stop at 1 MiB: {ten_mib}"
    );
    let small_file_targets = names
        .iter()
        .filter(|name| name.starts_with("small 2 KiB files"))
        .count();
    assert_eq!(small_file_targets, 4, "{names:?}");
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
    check(
        &["bench", "fs", "--efficiency-devices", "file,none"],
        "none alone",
    );
    check(&["bench", "fs", "--efficiency-devices", "tape"], "tape");
}

fn flashpipe_in(
    folder: &std::path::Path,
    variables: &[(&str, &str)],
    arguments: &[&str],
) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_flashpipe"))
        .current_dir(folder)
        .envs(variables.iter().copied())
        .args(arguments)
        .output()
        .expect("flashpipe runs")
}

#[test]
fn bad_engine_choices_in_the_environment_are_refused_before_anything_is_made() {
    let folder = scratch_folder("bad-environment");
    let arguments = ["bench", "fs", "--quick", "--parts", "small", "--no-fio"];
    for (variable, value, expected) in [
        ("FLASHPIPE_SPIN_US", "soon", "FLASHPIPE_SPIN_US"),
        ("FLASHPIPE_SPIN_US", "99999999", "at most"),
        ("FLASHPIPE_WRITE_PATH", "sideways", "names no write path"),
    ] {
        let output = flashpipe_in(&folder, &[(variable, value)], &arguments);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{variable}={value}: {stderr}"
        );
        assert!(stderr.contains(expected), "{variable}={value}: {stderr}");
        let left: Vec<_> = std::fs::read_dir(&folder).expect("folder").collect();
        assert!(left.is_empty(), "{variable}={value} left {left:?}");
    }
    std::fs::remove_dir_all(&folder).expect("scratch folder removed");
}

#[test]
fn without_dir_it_works_in_the_current_directory_and_cleans_up() {
    let folder = scratch_folder("no-dir");
    let output = flashpipe_in(
        &folder,
        &[("FLASHPIPE_SPIN_US", "0")],
        &["bench", "fs", "--quick", "--parts", "small", "--no-fio"],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "bench fs without --dir failed: {stderr}"
    );
    let left: Vec<_> = std::fs::read_dir(&folder).expect("folder").collect();
    assert!(left.is_empty(), "bench fs left {left:?}");
    std::fs::remove_dir_all(&folder).expect("scratch folder removed");
}
