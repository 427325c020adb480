//! Runs the `flashpipe` binary's `bench net` at tiny sizes (issue #15): the "same file" rows
//! (flashpipe, qemu-nbd and nbdkit serving one file, with ratios), the store striped over
//! loopback disk nodes beside the same store over RAM disks, and bad arguments refused
//! before anything starts. The server rows need fio and skip with a message without it
//! (scripts/install-test-packages installs fio, qemu-nbd and nbdkit).

mod common;

use std::process::Command;

use common::{check_fails, command_line, fresh_folder, succeed_json, text};

fn program_runs(program: &str, version_argument: &str) -> bool {
    Command::new(program)
        .arg(version_argument)
        .output()
        .is_ok_and(|output| output.status.success())
}

#[test]
fn same_file_rows_compare_every_installed_server_on_one_file() {
    if !program_runs("fio", "--version") {
        flashpipe_testkit::tools::skip("bench net's server rows", "fio is not installed");
        return;
    }
    let folder = fresh_folder("bench-net-file");
    let report = succeed_json(&command_line(
        "bench net --parts servers --disks file --file-dir {} --size 64MiB --transports unix \
         --connections 1 --workloads rand-read-4k-qd1 --runtime-seconds 1 --json",
        &[text(&folder)],
    ));
    let rows = report["rows"].as_array().expect("rows");
    let others_installed = ["qemu-nbd", "nbdkit"]
        .iter()
        .filter(|program| program_runs(program, "--version"))
        .count();
    assert_eq!(rows.len(), 1 + others_installed, "{report:#}");
    for row in rows {
        assert_eq!(row["disk"], "file", "{row:#}");
        assert!(row["bytes_per_second"].as_f64().unwrap() > 0.0, "{row:#}");
    }
    let flashpipe_row = rows
        .iter()
        .find(|row| row["server"] == "flashpipe")
        .expect("a flashpipe row");
    match others_installed {
        0 => assert!(flashpipe_row["ratio_to_best_other"].is_null()),
        _ => assert!(flashpipe_row["ratio_to_best_other"].as_f64().unwrap() > 0.0),
    }
    assert!(report["file"]["file_system"].is_string(), "{report:#}");
    assert!(report["stripe"]["rows"].as_array().unwrap().is_empty());
    let left: Vec<_> = std::fs::read_dir(&*folder).unwrap().collect();
    assert!(left.is_empty(), "the served file is removed: {left:?}");
}

#[test]
fn stripe_over_disk_nodes_sits_beside_the_same_store_over_ram_disks() {
    let report = succeed_json(&command_line(
        "bench net --parts stripe --disk-nodes 1,2 --stripe-file-size 8MiB \
         --stripe-small-files 40 --runtime-seconds 1 --json",
        &[],
    ));
    let rows = report["stripe"]["rows"].as_array().expect("stripe rows");
    assert_eq!(rows.len(), 2 * (4 + 4), "{report:#}");
    for row in rows {
        assert!(row["local_ram"].as_f64().unwrap() > 0.0, "{row:#}");
        assert!(row["remote_disk_nodes"].as_f64().unwrap() > 0.0, "{row:#}");
        assert!(
            row["ratio_remote_to_local"].as_f64().unwrap() > 0.0,
            "{row:#}"
        );
    }
    let node_counts: Vec<u64> = rows
        .iter()
        .map(|row| row["disk_nodes"].as_u64().unwrap())
        .collect();
    assert!(node_counts.contains(&1) && node_counts.contains(&2));
    assert!(report["rows"].as_array().unwrap().is_empty());
}

#[test]
fn bad_arguments_are_refused_before_anything_starts() {
    let cases: [(&[&str], &str); 9] = [
        (&["--disk-nodes", "0"], "--disk-nodes"),
        (&["--disk-nodes", "2,65"], "--disk-nodes"),
        (&["--workloads", "sideways"], "--workloads"),
        (&["--stripe-file-size", "1MiB"], "--stripe-file-size"),
        (&["--disks", "tape"], "--disks"),
        (&["--file-cache", "maybe"], "--file-cache"),
        (&["--reader-window-us", "10001"], "at most 10000"),
        (&["--reader-window-us", "auto,soon"], "--reader-window-us"),
        (&["--reader-window-us=-1"], "--reader-window-us"),
    ];
    for (extra, expected) in cases {
        let mut arguments = vec!["bench", "net"];
        arguments.extend_from_slice(extra);
        check_fails(&arguments, expected);
    }
}
