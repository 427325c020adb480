//! Runs the `flashpipe` binary's `bench net --parts tls` at its smallest size: one row over
//! `nbd://` and one over `nbds://` (flashpipe's client and server, a certificate made by
//! openssl for the run), figures and no fio. The figures are printed, never compared: a
//! measurement belongs on an idle machine (docs/benchmarks.md), not in a test.

mod common;

use common::{array_at, check_fails, flashpipe, strings_at};
use serde_json::Value;

#[test]
fn the_tls_part_measures_nbds_beside_nbd() {
    if !flashpipe_testkit::tools::programs_or_skip("bench net --parts tls", &["openssl"]) {
        return;
    }
    let output = flashpipe(&[
        "bench", "net", "--parts", "tls", "--size", "64MiB", "--json",
    ]);
    assert!(
        output.status.success(),
        "bench net --parts tls failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).expect("stdout is JSON");
    let rows = array_at(&report["tls"], "tls rows");
    let transports = strings_at(rows, "transport");
    assert_eq!(transports, ["nbd", "nbds"], "{report}");
    for row in rows {
        for figure in ["write_bytes_per_second", "read_bytes_per_second"] {
            let value = row[figure].as_f64().expect("a figure");
            assert!(value.is_finite() && value > 0.0, "{figure} in {row}");
        }
    }
    assert_eq!(
        report["rows"].as_array().map(Vec::len),
        Some(0),
        "no fio rows"
    );
}

#[test]
fn the_tls_part_refuses_a_size_it_cannot_use() {
    check_fails(
        &["bench", "net", "--parts", "tls", "--size", "1MiB"],
        "at least 64 MiB",
    );
}
