//! CLI tests of `flashpipe bench serve`: a tiny `--json` run over both stores measures
//! every row (in-process, the frame-ring floor, `read()` from tmpfs, clients by reference
//! and copying in client processes, concurrent clients with Jain's index), every ratio
//! finite; the tables print with client threads; bad values are refused.

mod common;

use common::{check_fails, command_line, flashpipe, succeed};

use serde_json::Value;

const TINY: [&str; 10] = [
    "--quick",
    "--clients",
    "1,2",
    "--operations",
    "50",
    "--file-mib",
    "2",
    "--seconds",
    "0.05",
    "--depth=2",
];

#[test]
fn a_tiny_json_run_measures_every_row_on_both_stores() {
    let mut arguments = vec!["bench", "serve", "--json"];
    arguments.extend(TINY);
    let output = flashpipe(&arguments);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "bench serve failed: {stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).expect("the output is JSON");
    let stores = report["stores"].as_array().expect("store reports");
    assert_eq!(stores.len(), 2, "ram and file");
    for store in stores {
        let latency = store["latency"].as_array().expect("latency rows");
        assert_eq!(
            latency.len(),
            6,
            "in-process, ring and socket floors, by reference over rings and socket, copying: \
             {store}"
        );
        let throughput = store["throughput"].as_array().expect("throughput rows");
        assert_eq!(
            throughput.len(),
            5,
            "in-process, tmpfs, by reference over rings and socket, copying: {store}"
        );
        for row in latency.iter().chain(throughput) {
            let ratio = row["over_in_process_ratio"].as_f64().expect("a ratio");
            assert!(ratio.is_finite() && ratio > 0.0, "{row}");
        }
        let targets = store["targets"].as_array().expect("target rows");
        assert_eq!(targets.len(), 7, "every target judged: {store}");
        for row in targets {
            assert!(row["met"].is_boolean(), "{row}");
            let measured = row["measured"].as_str().expect("a figure");
            assert!(
                measured.parse::<f64>().is_ok(),
                "every target measured: {row}"
            );
        }
        let small_reads = store["small_reads"]
            .as_array()
            .expect("4 KiB random-read rows");
        assert_eq!(
            small_reads.len(),
            2,
            "in process, 4 client processes: {store}"
        );
        for row in small_reads {
            let ratio = row["over_in_process_ratio"].as_f64().expect("a ratio");
            assert!(ratio.is_finite() && ratio > 0.0, "{row}");
            assert_eq!(row["depth"].as_u64(), Some(32), "{row}");
        }
        let concurrency = store["concurrency"].as_array().expect("concurrency rows");
        assert_eq!(concurrency.len(), 2, "1 and 2 clients");
        for row in concurrency {
            let jain = row["jain_fairness_ratio"].as_f64().expect("Jain's index");
            assert!((0.5..=1.0 + 1e-9).contains(&jain), "{row}");
        }
    }
}

#[test]
fn the_tables_print_with_client_threads() {
    let mut arguments = command_line("bench serve --stores ram --clients-as threads", &[]);
    arguments.extend(TINY);
    let text = succeed(&arguments);
    for expected in [
        "client threads of the bench process",
        "QD1 4 KiB read round trip",
        "frame rings",
        "read() from tmpfs",
        "client, copying",
        "frames through rings",
        "frames on socket",
        "Jain",
        "4 KiB random reads",
    ] {
        assert!(
            text.contains(expected),
            "{expected:?} missing from:\n{text}"
        );
    }
}

#[test]
fn bad_values_are_refused() {
    check_fails(&["bench", "serve", "--seconds", "0"], "--seconds");
    check_fails(&["bench", "serve", "--clients", "0"], "--clients");
    check_fails(&["bench", "serve", "--depth", "33"], "--depth");
}
