//! The error sweep of the benchmark, experiment and simulation commands (`bench`, `ftl`,
//! `sim`, `demo`): each error path's exit status and `--json` kind, no Debug text, and a
//! hostile trace line quoted short and without its control characters.

mod common;
mod error_sweep_support;

use common::fresh_folder;
use error_sweep_support::*;

/// The cases, one a line: the kind each fails with, then its command line (words split at
/// white space; `--json` is added).
const CASES: &str = "
    not_found     sim replay missing.txt --format blkparse
    invalid_input sim replay bad.txt --format blkparse
    invalid_input sim replay latin1.txt --format blkparse
    invalid_input sim replay . --format blkparse
    invalid_input sim replay t.txt --format blkparse --queue-depth 0
    invalid_input sim replay t.txt --format blkparse --time-unit us
    invalid_input sim replay t.txt --format blkparse --over-provisioning 0.99
    invalid_input sim replay t.txt --format blkparse --plot notes.txt
    not_found     sim replay t.txt --format blkparse --plot nodir/sub
    not_found     sim job missing.toml
    invalid_input sim job bad.toml
    invalid_input sim job notes.txt
    invalid_input sim job --rw randrw --rwmixread 101
    invalid_input sim job --rw randrw --hosts 2
    invalid_input sim speed --queue-depth 0
    invalid_input ftl wa --blocks-per-chip 1
    invalid_input ftl hotcold --device-writes 0
    invalid_input ftl wa --plot chart.txt
    not_found     ftl wear --plot nodir/chart.png
    invalid_input ftl fs --queue-depth 0
    invalid_input ftl copy --size 0
    invalid_input ftl emulate --qd 0
    invalid_input ftl emulate --seconds 0
    invalid_input demo --dir notes.txt/store
    invalid_input bench mount --size-mib 0
    invalid_input bench mount --folder notes.txt
    invalid_input bench cluster --preset notes.txt
    invalid_input bench cluster --preset missing.toml
    not_found     bench chart --panel missing.tsv --plot out.png
    invalid_input bench chart --panel notes.txt --plot out.png
";

fn bench_cases() -> Vec<Case> {
    let mut cases = cases_of(CASES);
    for case in &mut cases {
        case.arguments.push("--json");
    }
    cases
}

#[test]
fn bench_ftl_sim_and_demo_errors_have_their_kinds_and_no_debug_text() {
    let folder = fresh_folder("error-sweep-bench");
    let good = "8,0 1 1 0.000001000 100 Q W 2048 + 8 [fio]\n";
    let garbage = format!("{good}garbage \u{1b}[31m {}\n", "x".repeat(200));
    std::fs::write(folder.join("t.txt"), good).unwrap();
    std::fs::write(folder.join("bad.txt"), &garbage).unwrap();
    std::fs::write(folder.join("latin1.txt"), b"8,0 caf\xe9\n").unwrap();
    std::fs::write(folder.join("bad.toml"), "[[job]\nname = 1\n").unwrap();
    std::fs::write(folder.join("notes.txt"), "shopping list\n").unwrap();
    let cases = bench_cases();
    assert!(cases.len() >= 15, "{} cases", cases.len());
    let failures = sweep(&folder, &cases, "", |output| {
        let stderr = String::from_utf8_lossy(&output.stderr);
        if stderr.contains('\u{1b}') || stderr.contains(&"x".repeat(100)) {
            vec!["the bad line is quoted whole or raw".to_string()]
        } else {
            Vec::new()
        }
    });
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
