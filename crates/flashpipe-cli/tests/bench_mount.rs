//! Runs the `flashpipe` binary's `bench mount` on a few MiB and files: the report's shape
//! (JSON keys, three large-file rows, three metadata rows, a verdict each), nothing left
//! mounted and the scratch folder removed; hostile options refused before anything starts.
//! Nothing here looks at a time or a rate. Needs FUSE (fusermount3) and bindfs: without
//! them it prints why and returns, and fails under `FLASHPIPE_REQUIRE_TOOLS=1`.

mod common;

use std::path::Path;

use common::{check_fails, flashpipe, fresh_folder, succeeded_json, text};

fn tools_available(test: &str) -> bool {
    if !Path::new("/dev/fuse").exists() {
        flashpipe_testkit::tools::skip(test, "/dev/fuse is absent (no FUSE here)");
        return false;
    }
    flashpipe_testkit::tools::programs_or_skip(test, &["fusermount3", "bindfs"])
}

#[test]
fn a_small_run_reports_every_row_and_leaves_nothing_behind() {
    if !tools_available("bench mount") {
        return;
    }
    let folder = fresh_folder("bench-mount");
    let output = flashpipe(&[
        "bench",
        "mount",
        "--folder",
        text(&folder),
        "--size-mib",
        "4",
        "--files",
        "20",
        "--rounds",
        "1",
        "--json",
    ]);
    let report = succeeded_json(&output, "bench mount");
    for key in ["cpus", "folder", "size_mib", "files", "rounds"] {
        assert!(!report[key].is_null(), "{key} missing: {report:#}");
    }
    let large = report["large"].as_array().expect("large rows");
    assert_eq!(large.len(), 3, "{report:#}");
    for (row, direction) in large.iter().zip(["write", "read", "read, --direct-reads"]) {
        assert_eq!(row["direction"], direction);
        for key in ["mount_mib_s", "cli_mib_s", "ratio"] {
            assert!(
                row[key].as_f64().is_some_and(|value| value > 0.0),
                "{row:#}"
            );
        }
        assert!(row["met"].is_boolean());
    }
    let metadata = report["metadata"].as_array().expect("metadata rows");
    assert_eq!(metadata.len(), 3, "{report:#}");
    for (row, operation) in metadata.iter().zip(["create", "stat", "unlink"]) {
        assert_eq!(row["operation"], operation);
        for key in ["mount_us", "bindfs_us", "folder_us", "ratio"] {
            assert!(
                row[key].as_f64().is_some_and(|value| value > 0.0),
                "{row:#}"
            );
        }
        assert!(row["met"].is_boolean());
    }
    let left: Vec<_> = std::fs::read_dir(&folder).expect("folder").collect();
    assert!(left.is_empty(), "the scratch folder is removed: {left:?}");
    let mounts = std::fs::read_to_string("/proc/self/mounts").expect("mounts");
    assert!(
        !mounts.contains(text(&folder)),
        "nothing left mounted: {mounts}"
    );
}

#[test]
fn hostile_options_are_refused_before_anything_starts() {
    let folder = fresh_folder("bench-mount-hostile");
    let base = ["bench", "mount", "--folder", text(&folder)];
    for (option, value, named) in [
        ("--size-mib", "0", "--size-mib"),
        ("--size-mib", "70000", "--size-mib"),
        ("--files", "0", "--files"),
        ("--rounds", "21", "--rounds"),
        ("--commit-delay-ms", "60001", "--commit-delay-ms"),
    ] {
        let mut arguments = base.to_vec();
        arguments.extend_from_slice(&[option, value]);
        check_fails(&arguments, named);
    }
    check_fails(
        &["bench", "mount", "--folder", text(&folder.join("missing"))],
        "not a folder",
    );
    let left: Vec<_> = std::fs::read_dir(&folder).expect("folder").collect();
    assert!(left.is_empty(), "nothing made: {left:?}");
}
