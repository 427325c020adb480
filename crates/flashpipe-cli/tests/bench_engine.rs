//! CLI tests of `flashpipe bench engine`: a `--quick --json` run measures every operation
//! directly and through every hand-off mode asked for, with its ratio to direct and its
//! parks, and group commit under every grouping; the tables print; bad spin windows are
//! refused with a clear message and a non-zero exit.

mod common;

use common::{check_fails, flashpipe, succeed};

use serde_json::Value;

#[test]
fn a_quick_json_run_measures_every_operation_in_every_mode() {
    let output = flashpipe(&["bench", "engine", "--quick", "--json", "--spin-us", "5,50"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "bench engine failed: {stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).expect("the output is JSON");
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
}

#[test]
fn a_quick_run_prints_both_tables() {
    let text = succeed(&["bench", "engine", "--quick", "--clients", "2"]);
    assert!(text.contains("engine hand-off"), "{text}");
    assert!(text.contains("create+write 1 KiB+flush"), "{text}");
    assert!(text.contains("UntilIdle"), "{text}");
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
