//! Runs the `flashpipe` binary's `bench cluster` for a fraction of a second per row, one
//! part at a time (fig7 with the NBD hop beside it): the output's shape (table columns, JSON
//! keys, one row per point), no node process left behind and the scratch folder removed;
//! hostile options refused before anything starts. Nothing here looks at a time or a rate.

mod common;

use std::path::Path;

use common::{check_fails, flashpipe_in_env, fresh_folder, succeeded_json, text};

/// Runs `bench cluster` with `arguments` and its scratch folder under `folder`.
fn bench_cluster(folder: &Path, arguments: &[&str]) -> std::process::Output {
    let mut all = vec!["bench", "cluster", "--seconds", "0.1"];
    all.extend_from_slice(arguments);
    flashpipe_in_env(&all, &[("TMPDIR", text(folder))])
}

/// Processes whose command line names `folder` (the nodes run the description in it).
fn processes_naming(folder: &Path) -> Vec<String> {
    let needle = text(folder).as_bytes().to_vec();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter_map(|entry| {
            let line = std::fs::read(entry.path().join("cmdline")).ok()?;
            line.windows(needle.len())
                .any(|window| window == needle.as_slice())
                .then(|| String::from_utf8_lossy(&line).replace('\0', " "))
        })
        .collect()
}

fn assert_nothing_left(folder: &Path) {
    let left = processes_naming(folder);
    assert!(left.is_empty(), "node processes left behind: {left:?}");
    let files: Vec<_> = std::fs::read_dir(folder).unwrap().collect();
    assert!(files.is_empty(), "the scratch folder is removed: {files:?}");
}

#[test]
fn fig7_prints_latency_over_hops_beside_the_model_the_paper_and_an_nbd_hop() {
    let folder = fresh_folder("bench-cluster-fig7");
    let output = bench_cluster(&folder, &["--parts", "fig7,nbd", "--json"]);
    let report = succeeded_json(&output, "bench cluster --parts fig7,nbd");
    for key in [
        "cpus",
        "nodes",
        "preset",
        "seconds",
        "depth",
        "parts",
        "reflex_remote_us",
    ] {
        assert!(!report[key].is_null(), "{key} missing: {report:#}");
    }
    let rows = report["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 5, "{report:#}");
    for (hops, row) in rows[..4].iter().enumerate() {
        assert_eq!(row["part"], "fig7");
        assert_eq!(row["point"], format!("8 KiB read over {hops} hops"));
        assert_eq!(row["unit"], "us");
        for key in ["real", "p99", "model", "paper", "samples"] {
            assert!(row[key].is_number(), "{key} of row {hops}: {row:#}");
        }
        assert_eq!(row["increment"].is_number(), hops > 0, "{row:#}");
        assert_eq!(row["anchor"].is_number(), hops > 0, "{row:#}");
    }
    let nbd = &rows[4];
    assert_eq!(nbd["part"], "nbd", "{nbd:#}");
    assert_eq!(nbd["unit"], "us", "{nbd:#}");
    assert!(nbd["real"].is_number() && nbd["p99"].is_number(), "{nbd:#}");
    assert!(nbd["model"].is_null(), "{nbd:#}");
    assert_nothing_left(&folder);
}

#[test]
fn fig6b_prints_a_table_with_per_host_rows_and_jain_index() {
    let folder = fresh_folder("bench-cluster-fig6b");
    let output = bench_cluster(&folder, &["--parts", "fig6b", "--depth", "4"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for word in [
        "point", "real", "model", "paper", "unit", "reads", "note", "CPUs",
    ] {
        assert!(stdout.contains(word), "{word} missing:\n{stdout}");
    }
    for hosts in 1..=4 {
        assert!(
            stdout.contains(&format!("{hosts} hosts, 1 device, total")),
            "{stdout}"
        );
    }
    assert_eq!(stdout.matches("Jain's index").count(), 3, "{stdout}");
    assert!(
        !stdout.contains("fig7") && !stdout.contains("Fig. 7"),
        "{stdout}"
    );
    assert_nothing_left(&folder);
}

#[test]
fn fig6a_and_fig6c_rows_carry_their_keys() {
    let folder = fresh_folder("bench-cluster-fig6ac");
    let output = bench_cluster(
        &folder,
        &["--parts", "fig6a,fig6c", "--depth", "4", "--json"],
    );
    let report = succeeded_json(&output, "bench cluster --parts fig6a,fig6c");
    let rows = report["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 8, "{report:#}");
    for row in &rows[..4] {
        assert_eq!(row["part"], "fig6a", "{row:#}");
        assert_eq!(row["unit"], "MB/s", "{row:#}");
        assert!(row["model"].is_number(), "{row:#}");
    }
    for row in &rows[4..] {
        assert_eq!(row["part"], "fig6c", "{row:#}");
        assert!(row["model"].is_number(), "{row:#}");
        assert!(row.get("of_ideal_percent").is_some(), "{row:#}");
    }
    assert_nothing_left(&folder);
}

#[test]
fn hostile_options_are_refused_before_anything_starts() {
    let cases: [(&[&str], &str); 8] = [
        (&["--seconds", "0"], "--seconds"),
        (&["--seconds", "NaN"], "--seconds"),
        (&["--seconds", "1e12"], "--seconds"),
        (&["--seconds=-1"], "--seconds"),
        (&["--depth", "0"], "--depth"),
        (&["--depth", "65"], "--depth"),
        (&["--depth", "many"], "--depth"),
        (&["--parts", "fig9"], "fig9"),
    ];
    for (extra, named) in cases {
        let mut arguments = vec!["bench", "cluster"];
        arguments.extend_from_slice(extra);
        check_fails(&arguments, named);
    }
}
