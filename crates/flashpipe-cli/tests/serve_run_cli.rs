//! `flashpipe run` through `flashpipe serve` (issue #14), two processes: the kernel runs next
//! to the server's engine and prints exactly what the run without a server prints (`sha256`
//! lines that `sha256sum --check` reads), `-v` says it went through the server, transformed
//! outputs are the same bytes under the same names, and an existing output is refused as in
//! process.

mod serve_support;

use serve_support::*;

const DES_KEY: &str = "key=0123456789abcdef";

fn put_inputs(store: &std::path::Path, folder: &TestFolder) {
    put_three_inputs(store, folder, 150_000);
}

/// `sha256sum --check` reads the lines and agrees with them (skipped where the tool is
/// missing, a failure under `FLASHPIPE_REQUIRE_TOOLS=1`).
fn check_with_sha256sum(folder: &TestFolder, lines: &str) {
    if !flashpipe_testkit::tools::programs_or_skip("sha256sum --check", &["sha256sum"]) {
        return;
    }
    let sums = folder.join("sums.txt");
    std::fs::write(&sums, lines).unwrap();
    let output = std::process::Command::new("sha256sum")
        .args(["--check", "sums.txt"])
        .current_dir(folder.path())
        .output()
        .expect("sha256sum runs");
    assert!(
        output.status.success(),
        "sha256sum --check: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn run_through_the_server_prints_what_the_run_in_process_prints() {
    let (folder, store) = folder_with_store("serve-run-sha256", "64MiB");
    put_inputs(&store, &folder);
    let in_process = succeed(&["run", text(&store), "sha256", "data:*"]);
    succeed(&command_line(
        "run {} des-ecb {} data:a --output enc-local",
        &[text(&store), DES_KEY],
    ));
    let server = ServerProcess::start(
        &store,
        &["--max-kernel-runs", "1", "--max-read-handles", "64"],
    );
    let stderr = succeed_stderr(&["run", text(&store), "sha256", "data:*", "-v"]);
    assert!(
        stderr.contains("through the server") && stderr.contains(&server.pid.to_string()),
        "-v names the server and its pid: {stderr}"
    );
    assert!(
        stderr.contains("slowest stage"),
        "the stage table: {stderr}"
    );
    let served = succeed(&["run", text(&store), "sha256", "data:*"]);
    assert_eq!(served, in_process, "stdout is the same through the server");
    assert_eq!(served.lines().count(), 3);
    for line in served.lines() {
        let (hex, name) = line.split_once("  ").expect("HASH  NAME");
        assert_eq!(hex.len(), 64, "{line}");
        assert!(name.starts_with("data:"), "{line}");
        std::fs::write(folder.join(name), read_back(&store, name)).unwrap();
    }
    check_with_sha256sum(&folder, &served);
    let json = succeed(&["run", text(&store), "sha256", "data:a", "--json"]);
    assert!(json.contains("\"slowest_stage\""), "{json}");
    let transformed = succeed(&command_line(
        "run {} des-ecb {} data:a --output enc-served",
        &[text(&store), DES_KEY],
    ));
    assert!(transformed.contains("-> enc-served"), "{transformed}");
    let refused = fail_stderr(&command_line(
        "run {} des-ecb {} data:a --output enc-served",
        &[text(&store), DES_KEY],
    ));
    assert!(
        refused.contains("--force"),
        "an existing output is refused: {refused}"
    );
    succeed(&command_line(
        "run {} des-ecb {} data:a --output enc-served --force",
        &[text(&store), DES_KEY],
    ));
    let listing = succeed(&["ls", text(&store), "-1"]);
    assert!(
        !listing.contains(".flashpipe"),
        "no temporary is left: {listing}"
    );
    server.stop_cleanly();
    assert_eq!(
        read_back(&store, "enc-served"),
        read_back(&store, "enc-local")
    );
    assert_eq!(
        succeed(&["run", text(&store), "sha256", "data:*"]),
        in_process,
        "the store's inputs are unchanged"
    );
    assert_fsck_clean(&store);
}
