//! `flashpipe ftl ...` end to end on a small array: the collection-wait experiment's
//! JSON (pacing keeps every wait within its bound), PNG plots, and a bad `--plot` path
//! refused with a clear error.

mod common;

use common::{check_fails, succeed_ftl};

const SMALL: [&str; 6] = [
    "--blocks-per-chip",
    "16",
    "--pages-per-block",
    "16",
    "--device-writes",
    "2",
];

#[test]
fn gc_wait_json_reports_waits_within_the_bound_when_paced() {
    let mut arguments = vec!["gc-wait", "--json"];
    arguments.extend(SMALL);
    let stdout = succeed_ftl(&arguments);
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&stdout).expect("JSON rows");
    assert_eq!(rows.len(), 10);
    for row in rows.iter().filter(|row| row["pacing"] == "on") {
        let bound = row["host_write_wait_bound_us"].as_f64().expect("a bound");
        let longest = row["host_write_wait_us_max"].as_f64().expect("a wait");
        assert!(longest <= bound, "{row}");
        assert_eq!(row["host_write_wait_bound_exceeded"], 0, "{row}");
    }
    for row in rows.iter().filter(|row| row["pacing"] == "off") {
        assert!(row["host_write_wait_bound_us"].is_null(), "{row}");
    }
}

#[test]
fn experiments_draw_png_plots() {
    let directory = std::env::temp_dir().join(format!("flashpipe-ftl-cli-{}", std::process::id()));
    std::fs::create_dir_all(&directory).expect("temporary directory");
    for experiment in ["wa", "wear"] {
        let path = directory.join(format!("{experiment}.png"));
        let path_text = path.to_str().expect("UTF-8 path");
        let mut arguments = vec![experiment, "--plot", path_text];
        arguments.extend(SMALL);
        succeed_ftl(&arguments);
        let bytes = std::fs::read(&path).expect("the plot");
        assert_eq!(&bytes[1..4], b"PNG", "{experiment}");
    }
    std::fs::remove_dir_all(&directory).ok();
}

#[test]
fn a_plot_path_that_is_not_png_is_refused() {
    check_fails(&["ftl", "hotcold", "--plot", "chart.svg"], ".png");
    assert!(!std::path::Path::new("chart.svg").exists());
}

/// Pages a copy by reference of a 64 MiB file may program on the minflash preset (8 KiB
/// pages, 16 KiB FS blocks): the new file's indirect chain (4,096 pointers of 12 bytes, 1,362
/// per block: 3 blocks of 2 pages) plus the commit's fixed cost (a metadata-log record and the
/// super block: 5 pages today, bounded at 8). A copy that moved data would program 8,192.
const REFERENCE_COPY_PAGES_MAX: u64 = 3 * 2 + 8;

#[test]
fn a_copy_by_reference_programs_only_the_new_files_metadata() {
    let stdout = succeed_ftl(&["copy", "--size", "64MiB", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&stdout).expect("JSON");
    let by_reference = &report["by_reference"];
    assert_eq!(by_reference["blocks_by_reference"], 4096, "{report}");
    assert_eq!(by_reference["bytes_by_bytes"], 0, "{report}");
    assert_eq!(by_reference["copy_matches_source"], true, "{report}");
    let programmed = by_reference["flash_pages_programmed"]
        .as_u64()
        .expect("a page count");
    assert!(
        (1..=REFERENCE_COPY_PAGES_MAX).contains(&programmed),
        "a copy by reference programmed {programmed} pages (at most {REFERENCE_COPY_PAGES_MAX}): {report}"
    );
    assert_eq!(report["by_bytes"]["copy_matches_source"], true, "{report}");
}
