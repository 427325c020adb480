//! Runs the `flashpipe` binary's `bench flash --quick`: its JSON carries the put, the
//! whole stack's flash operations and the raw model, each with its #13 target and a
//! verdict (never asserted: wall-clock rates mean nothing on a test machine), its work
//! folder is removed, and a bad size fails clearly.

mod common;

use common::{absent_folder, check_fails, flashpipe, quick_bench_json};

#[test]
fn quick_run_reports_every_target_and_cleans_up() {
    let folder = absent_folder("bench-flash");
    let report = quick_bench_json("flash", &folder);
    assert_eq!(report["put"]["file_bytes"], 32 << 20);
    let operations = report["put"]["flash_operations"].as_u64().unwrap();
    let programs_at_least = (32u64 << 20) / 8192;
    assert!(
        operations >= programs_at_least,
        "{operations} flash operations for {programs_at_least} pages of data"
    );
    assert_eq!(report["ftl_alone"]["written_bytes"], 32 << 20);
    let ftl_operations = report["ftl_alone"]["flash_operations"].as_u64().unwrap();
    assert!(
        ftl_operations >= programs_at_least,
        "FTL alone: {ftl_operations} flash operations for {programs_at_least} pages of data"
    );
    assert_eq!(report["raw"]["page_operations"], 200_000);
    for (key, target) in [
        ("put_wall_seconds_per_gib", 5.0),
        ("stack_flash_operations_per_wall_second", 300_000.0),
        ("raw_page_operations_per_wall_second", 2_000_000.0),
    ] {
        assert_eq!(report[key]["target"].as_f64(), Some(target), "{key}");
        assert!(report[key]["met"].is_boolean(), "{key}");
        assert!(report[key]["value"].as_f64().unwrap() > 0.0, "{key}");
    }
    let left: Vec<_> = std::fs::read_dir(&folder).unwrap().collect();
    assert!(left.is_empty(), "the work folder is removed: {left:?}");
}

#[test]
fn a_bad_size_is_refused_with_its_name() {
    check_fails(&["bench", "flash", "--size", "lots"], "--size");
}

#[test]
fn sim_speed_prints_its_target() {
    let output = flashpipe(&["sim", "speed", "--operations", "20000"]);
    assert!(output.status.success());
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("target                      at least 2000000"),
        "{text}"
    );
}
