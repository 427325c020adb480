//! CLI tests of `flashpipe bench engine`: a `--quick --json` run measures every operation
//! directly and through every hand-off mode asked for, with its ratio to direct and its
//! parks, group commit under every grouping, and both commit policies per store size
//! (device blocks per flush: flat with the log, growing with the file count with a
//! checkpoint at every commit) with the mount after a long log; the tables print; bad
//! spin windows and store sizes are refused with a clear message and a non-zero exit.

mod common;

use common::{check_fails, command_line, succeed, succeed_json};

use serde_json::Value;

#[test]
fn a_quick_json_run_measures_every_operation_in_every_mode() {
    let report = succeed_json(&["bench", "engine", "--quick", "--json", "--spin-us", "5,50"]);
    assert_eq!(report["quick"], Value::Bool(true));
    let rows = report["operations"].as_array().expect("operation rows");
    assert_eq!(
        rows.len(),
        3 * 4,
        "3 operations x (direct, park, 2 spin windows)"
    );
    for row in rows {
        let ratio = row["over_direct_ratio"].as_f64().expect("a ratio");
        assert!(ratio.is_finite() && ratio > 0.0, "{row}");
        assert!(
            row["us_per_operation"].as_f64().expect("a time") > 0.0,
            "{row}"
        );
        let direct = row["mode"].as_str().expect("a mode").starts_with("direct");
        assert_eq!(row["engine_parks_per_operation"].is_null(), direct, "{row}");
    }
    let groups = report["group_commit"]
        .as_array()
        .expect("group-commit rows");
    assert_eq!(groups.len(), 3 * 3, "3 groupings x 3 hand-off modes");
    for row in groups {
        for field in [
            "commit_calls_per_flush_ratio",
            "commits_with_changes_per_flush_ratio",
        ] {
            let commits = row[field].as_f64().expect("a ratio");
            assert!((0.0..=1.0).contains(&commits), "{field}: {row}");
        }
    }
    check_commit_policy_rows(&report);
    check_mount_rows(&report);
}

/// The `--quick` store sizes.
const QUICK_STORE_FILES: [u64; 3] = [0, 100, 1_000];

fn policy_row<'a>(rows: &'a [Value], store_files: u64, policy: &str) -> &'a Value {
    rows.iter()
        .find(|row| row["store_files"] == store_files && row["policy"] == policy)
        .unwrap_or_else(|| panic!("no {policy} row for {store_files} files"))
}

/// Both policies per store size; blocks counted, never timed: the log's per-flush
/// blocks do not grow with the store, the checkpoint's do.
fn check_commit_policy_rows(report: &Value) {
    let rows = report["commit_policy"]
        .as_array()
        .expect("commit-policy rows");
    assert_eq!(
        rows.len(),
        2 * QUICK_STORE_FILES.len(),
        "2 policies x 3 sizes"
    );
    for row in rows {
        assert!(row["us_per_file"].as_f64().expect("a time") > 0.0, "{row}");
        assert!(
            row["over_log_ratio"].as_f64().expect("a ratio") > 0.0,
            "{row}"
        );
        let blocks = row["device_blocks_per_flush"].as_f64().expect("blocks");
        assert!(
            blocks >= 2.0,
            "a commit writes at least its metadata and a super block: {row}"
        );
    }
    let blocks = |store_files, policy| {
        policy_row(rows, store_files, policy)["device_blocks_per_flush"]
            .as_f64()
            .expect("blocks")
    };
    let largest = QUICK_STORE_FILES[2];
    assert!(
        blocks(largest, "CheckpointEveryCommit") > 2.0 * blocks(largest, "LogWhenItFits"),
        "{rows:#?}"
    );
    assert!(
        blocks(largest, "CheckpointEveryCommit") > blocks(0, "CheckpointEveryCommit"),
        "checkpoints grow with the store: {rows:#?}"
    );
    let checkpoint_row = policy_row(rows, largest, "CheckpointEveryCommit");
    assert_eq!(
        checkpoint_row["checkpoints"], checkpoint_row["measured_files"],
        "every commit a checkpoint: {checkpoint_row}"
    );
}

/// The first mount replays a log that fills its region, the second one nothing.
fn check_mount_rows(report: &Value) {
    let rows = report["mount"].as_array().expect("mount rows");
    assert_eq!(rows.len(), QUICK_STORE_FILES.len());
    for row in rows {
        let records = row["log_records_replayed"].as_u64().expect("records");
        let region = row["log_region_blocks"].as_u64().expect("region");
        assert!(records >= 1 && records < region, "{row}");
        for field in ["mount_after_log_us", "mount_after_checkpoint_us"] {
            assert!(row[field].as_f64().expect("a time") > 0.0, "{field}: {row}");
        }
    }
}

#[test]
fn chosen_store_sizes_are_measured_and_too_large_ones_refused() {
    let report = succeed_json(&command_line(
        "bench engine --quick --json --store-files 0,50",
        &[],
    ));
    let sizes: Vec<u64> = report["mount"]
        .as_array()
        .expect("mount rows")
        .iter()
        .map(|row| row["store_files"].as_u64().expect("a size"))
        .collect();
    assert_eq!(sizes, vec![0, 50]);
    check_fails(
        &["bench", "engine", "--quick", "--store-files", "1000000000"],
        "at most 200000 files",
    );
}

#[test]
fn a_quick_run_prints_both_tables() {
    let text = succeed(&["bench", "engine", "--quick", "--clients", "2"]);
    assert!(text.contains("engine hand-off"), "{text}");
    assert!(text.contains("create+write 1 KiB+flush"), "{text}");
    assert!(text.contains("UntilIdle"), "{text}");
    assert!(text.contains("CheckpointEveryCommit"), "{text}");
    assert!(text.contains("mount after log"), "{text}");
}

#[test]
fn bad_spin_windows_are_refused_clearly() {
    check_fails(
        &["bench", "engine", "--quick", "--spin-us", "0"],
        "--spin-us 0",
    );
    check_fails(
        &["bench", "engine", "--quick", "--spin-us", "20000"],
        "1 to 10000 microseconds",
    );
    check_fails(&["bench", "engine", "--quick", "--clients", "0"], "clients");
}
