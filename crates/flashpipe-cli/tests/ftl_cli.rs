//! `flashpipe ftl ...` end to end on a small array: the collection-wait experiment's
//! JSON (pacing keeps every wait within its bound), PNG plots, and a bad `--plot` path
//! refused with a clear error.

use std::process::{Command, Output};

const SMALL: [&str; 6] = [
    "--blocks-per-chip",
    "16",
    "--pages-per-block",
    "16",
    "--device-writes",
    "2",
];

fn flashpipe_ftl(arguments: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flashpipe"))
        .arg("ftl")
        .args(arguments)
        .output()
        .expect("run flashpipe")
}

#[test]
fn gc_wait_json_reports_waits_within_the_bound_when_paced() {
    let mut arguments = vec!["gc-wait", "--json"];
    arguments.extend(SMALL);
    let output = flashpipe_ftl(&arguments);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&output.stdout).expect("JSON rows");
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
        let output = flashpipe_ftl(&arguments);
        assert!(
            output.status.success(),
            "{experiment}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let bytes = std::fs::read(&path).expect("the plot");
        assert_eq!(&bytes[1..4], b"PNG", "{experiment}");
    }
    std::fs::remove_dir_all(&directory).ok();
}

#[test]
fn a_plot_path_that_is_not_png_is_refused() {
    let output = flashpipe_ftl(&["hotcold", "--plot", "chart.svg"]);
    assert!(!output.status.success());
    let message = String::from_utf8_lossy(&output.stderr);
    assert!(message.contains(".png"), "{message}");
    assert!(!std::path::Path::new("chart.svg").exists());
}
