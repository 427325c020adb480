//! End-to-end tests of `flashpipe sim`: reproductions as JSON, and clear errors (with
//! line numbers) for malformed presets and traces.

mod common;

use common::{command_line, outcome};

fn rows(which: &str) -> Vec<serde_json::Value> {
    let (success, stdout, stderr) = outcome(&["sim", "repro", which, "--json"]);
    assert!(success, "{stderr}");
    serde_json::from_str(&stdout).expect("JSON rows")
}

fn ours(rows: &[serde_json::Value], point: &str) -> f64 {
    rows.iter()
        .find(|row| row["point"] == point)
        .unwrap_or_else(|| panic!("no row {point}"))["ours"]
        .as_f64()
        .unwrap()
}

#[test]
fn table_one_totals_match_the_paper() {
    let rows = rows("minflash-table1");
    assert!((ours(&rows, "read: total (simulated)") - 128.0).abs() < 1.0);
    assert!((ours(&rows, "write: total (simulated)") - 476.0).abs() < 1.0);
}

#[test]
fn rad_sizing_formula_gives_the_papers_matrices() {
    let rows = rows("rad-table2");
    assert_eq!(ours(&rows, "DES: rows N from paper's 1x1 write 7.54"), 10.0);
    assert_eq!(
        ours(&rows, "Sobel: rows N from paper's 1x1 write 7.54"),
        18.0
    );
}

#[test]
fn malformed_preset_file_is_refused_with_its_line() {
    let directory = std::env::temp_dir().join(format!("flashpipe-sim-cli-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    let preset = directory.join("bad.toml");
    std::fs::write(&preset, "name = \"x\"\n[geometry]\ndevices = \"two\"\n").unwrap();
    let (success, _, stderr) = outcome(&["sim", "job", "--preset", preset.to_str().unwrap()]);
    assert!(!success);
    assert!(stderr.contains("bad.toml:3:"), "{stderr}");
    let trace = directory.join("trace.txt");
    std::fs::write(&trace, "0.0 0 0 8 1\n0.1 0 8 eight 1\n").unwrap();
    let (success, _, stderr) = outcome(&command_line(
        "sim replay --format disksim {}",
        &[trace.to_str().unwrap()],
    ));
    assert!(!success);
    assert!(stderr.contains("trace.txt:2:"), "{stderr}");
    std::fs::remove_dir_all(&directory).unwrap();
}
