//! The error sweep: every subcommand's common error paths through the real binary, each
//! checked for its exit status and, with `--json`, its kind and `exit_status` (the table
//! of docs/cli.md, repeated here so that a change to it is a deliberate one), and every
//! output (standard output and error) checked for Rust Debug text and issue numbers.
//! The help of every command and the kernels listing are swept for the same text.

mod common;
mod serve_support;

use std::path::Path;
use std::process::{Command, Output};

use common::{fresh_folder, succeed, text};

/// The documented exit status of each kind (docs/cli.md).
fn status_of(kind: &str) -> i32 {
    match kind {
        "no_match" => 1,
        "usage" => 2,
        "kernel" => 3,
        "no_space" => 4,
        "invalid_input" => 64,
        "corrupt" => 65,
        "not_found" => 66,
        "network" => 69,
        "internal" => 70,
        "exists" => 73,
        "io" => 74,
        "store_in_use" => 75,
        "permission" => 77,
        other => panic!("no kind {other} in the table"),
    }
}

/// Seconds one error case may run before it is stopped (no case waits on anything).
const CASE_LIMIT_S: u32 = 120;

/// Runs the binary in `folder`, under coreutils' `timeout` so that a case which does not
/// fail (a server that starts and runs) ends with status 124 and a message instead of
/// hanging the suite.
fn run_in(folder: &Path, arguments: &[&str]) -> Output {
    Command::new("timeout")
        .arg(CASE_LIMIT_S.to_string())
        .arg(env!("CARGO_BIN_EXE_flashpipe"))
        .args(arguments)
        .current_dir(folder)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("the flashpipe binary runs")
}

/// The word ending at byte `end` of `text` (ASCII letters and digits).
fn word_before(text: &str, end: usize) -> &str {
    let start = text[..end]
        .rfind(|character: char| !character.is_ascii_alphanumeric())
        .map_or(0, |index| index + 1);
    &text[start..end]
}

/// `[A-Z][a-zA-Z]+`
fn is_type_name(word: &str) -> bool {
    word.len() >= 2
        && word.starts_with(|character: char| character.is_ascii_uppercase())
        && word
            .chars()
            .all(|character| character.is_ascii_alphabetic())
}

/// `[A-Z][a-z]+[A-Z][A-Za-z]*`: a CamelCase name such as `OtherError`.
fn is_camel_case(word: &str) -> bool {
    let mut characters = word.chars();
    if !characters
        .next()
        .is_some_and(|first| first.is_ascii_uppercase())
    {
        return false;
    }
    let rest: Vec<char> = characters.collect();
    let lower_run = rest
        .iter()
        .take_while(|character| character.is_ascii_lowercase())
        .count();
    lower_run >= 1
        && rest.len() > lower_run
        && rest[lower_run].is_ascii_uppercase()
        && rest.iter().all(|character| character.is_ascii_alphabetic())
}

/// What in `output` looks like Rust Debug text or an issue number: the sweep's
/// patterns `[A-Z][a-zA-Z]+ \{`, `Some\(`, `Os \{`, `[A-Z][a-z]+[A-Z][A-Za-z]*\(`,
/// `kind: `, `#[0-9]+` (not inside a word, so `PKCS#7` is a name, not an issue) and
/// `issue [0-9]+`.
fn findings(output: &str) -> Vec<String> {
    let mut found = Vec::new();
    for fixed in ["Some(", "Os {", "kind: "] {
        if output.contains(fixed) {
            found.push(format!("{fixed:?}"));
        }
    }
    for (index, _) in output.match_indices(" {") {
        let word = word_before(output, index);
        if is_type_name(word) {
            found.push(format!("{word} {{"));
        }
    }
    for (index, _) in output.match_indices('(') {
        let word = word_before(output, index);
        if is_camel_case(word) {
            found.push(format!("{word}("));
        }
    }
    for (index, _) in output.match_indices('#') {
        let after_digit = output[index + 1..].starts_with(|c: char| c.is_ascii_digit());
        let inside_word = output[..index]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_alphanumeric());
        if after_digit && !inside_word {
            found.push(format!("issue number at byte {index}"));
        }
    }
    let lower = output.to_lowercase();
    for (index, _) in lower.match_indices("issue ") {
        if lower[index + 6..].starts_with(|c: char| c.is_ascii_digit()) {
            found.push("issue N".to_string());
        }
    }
    found
}

/// One error path: the arguments and the kind expected. With `--json` among the
/// arguments the JSON error object is checked too.
struct Case {
    arguments: Vec<&'static str>,
    kind: &'static str,
}

fn case(kind: &'static str, arguments: &[&'static str]) -> Case {
    Case {
        arguments: arguments.to_vec(),
        kind,
    }
}

/// Checks one case's output; returns what is wrong.
fn check(case: &Case, output: &Output) -> Vec<String> {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let mut problems = Vec::new();
    let expected = status_of(case.kind);
    if output.status.code() != Some(expected) {
        problems.push(format!(
            "exit status {:?}, expected {expected} ({})",
            output.status.code(),
            case.kind
        ));
    }
    for finding in findings(&format!("{stdout}\n{stderr}")) {
        problems.push(format!("output holds {finding}"));
    }
    if stderr.contains("panicked") {
        problems.push("panicked".to_string());
    }
    let silent_no_match = case.kind == "no_match" && case.arguments.first() == Some(&"run");
    if case.arguments.contains(&"--json") && !silent_no_match {
        let last = stderr.lines().last().unwrap_or_default();
        match serde_json::from_str::<serde_json::Value>(last) {
            Ok(object) => {
                if object["kind"] != case.kind {
                    problems.push(format!("kind {}, expected {}", object["kind"], case.kind));
                }
                if object["exit_status"] != expected {
                    problems.push(format!("exit_status {}", object["exit_status"]));
                }
                if !object["error"].is_string() {
                    problems.push("no error message".to_string());
                }
            }
            Err(_) => problems.push("standard error's last line is no JSON object".to_string()),
        }
    } else if !silent_no_match && !stderr.contains("error") {
        problems.push("standard error says no error".to_string());
    }
    problems
}

/// The folder the cases run in: a store `s.toml` holding `h.txt` and `h2.txt`, a text
/// file and a binary file that are no store files, a store file damaged, a store whose
/// image was zeroed, a store whose device is missing, a tiny store and a file too big for
/// it, and a store `locked.toml` (locked by the caller).
fn fixture(folder: &Path) {
    let write = |name: &str, bytes: &[u8]| std::fs::write(folder.join(name), bytes).unwrap();
    write("h.txt", b"hello\n");
    write("h2.txt", b"hello again\n");
    write("notes.txt", b"shopping list\n");
    write("blob.bin", &[0xff, 0xfe, 0x00, 0x80, 0x81]);
    write("big.bin", &vec![7u8; 24 << 20]);
    write(
        "damaged.toml",
        b"store_file_version = 1\nblock_size_bytes = [\n",
    );
    for (store, image, size) in [
        ("s.toml", "a.img", "64MiB"),
        ("z.toml", "z.img", "16MiB"),
        ("m.toml", "m.img", "16MiB"),
        ("tiny.toml", "t.img", "8MiB"),
        ("locked.toml", "l.img", "16MiB"),
    ] {
        let store = folder.join(store);
        succeed(&["mkfs", "--devices", image, "--size", size, text(&store)]);
    }
    let store = folder.join("s.toml");
    for name in ["h.txt", "h2.txt"] {
        succeed(&["put", text(&store), text(&folder.join(name))]);
    }
    std::fs::write(folder.join("z.img"), vec![0u8; 16 << 20]).unwrap();
    std::fs::remove_file(folder.join("m.img")).unwrap();
}

/// Every case of the sweep.
fn cases() -> Vec<Case> {
    vec![
        // usage: the command line itself is wrong (clap, and the CLI's own checks).
        case("usage", &["nosuchcommand"]),
        case("usage", &["put", "s.toml", "--json"]),
        case("usage", &["ls", "s.toml", "--bogus", "--json"]),
        case("usage", &["mkfs", "x.toml", "--json"]),
        case("usage", &["get", "s.toml", "h.txt", "--json"]),
        case("usage", &["cat", "s.toml", "h.txt", "--json"]),
        case("usage", &["rm", "s.toml", "--json"]),
        case("usage", &["stat", "s.toml", "--json"]),
        case("usage", &["run", "s.toml", "grep", "pattern=x", "--json"]),
        case("usage", &["completions", "tcsh"]),
        case("usage", &["serve", "s.toml", "--no-such-option"]),
        // no_match: a pattern matching nothing (grep's 1).
        case("no_match", &["ls", "s.toml", "zz*", "--json"]),
        case("no_match", &["cat", "s.toml", "zz*"]),
        case("no_match", &["stat", "s.toml", "zz*", "--json"]),
        case("no_match", &["rm", "s.toml", "zz*", "--json"]),
        case("no_match", &["get", "s.toml", "zz*", ".", "--json"]),
        case(
            "no_match",
            &["run", "s.toml", "grep", "pattern=zzz", "h.txt"],
        ),
        // not_found: store files, names, local files and folders that do not exist.
        case("not_found", &["ls", "missing.toml", "--json"]),
        case("not_found", &["put", "missing.toml", "h.txt", "--json"]),
        case("not_found", &["df", "missing.toml", "--json"]),
        case("not_found", &["fsck", "missing.toml", "--json"]),
        case("not_found", &["get", "s.toml", "nope", "out.txt", "--json"]),
        case("not_found", &["stat", "s.toml", "nope", "--json"]),
        case("not_found", &["rm", "s.toml", "nope", "--json"]),
        case("not_found", &["mv", "s.toml", "nope", "x", "--json"]),
        case("not_found", &["cp", "s.toml", "nope", "x", "--json"]),
        case("not_found", &["cat", "s.toml", "nope"]),
        case("not_found", &["put", "s.toml", "nofile.txt", "--json"]),
        case("not_found", &["put", "s.toml", "nodir/", "--json"]),
        case("not_found", &["get", "s.toml", "h.txt", "nodir/", "--json"]),
        case("not_found", &["run", "s.toml", "sha256", "nope", "--json"]),
        case("not_found", &["ls", "m.toml", "--json"]),
        case("not_found", &["serve", "missing.toml"]),
        case(
            "not_found",
            &[
                "kernels",
                "train-langid",
                "--out",
                "p.bin",
                "--corpus",
                "/nonexistent",
                "--json",
            ],
        ),
        // exists: the target is there already.
        case(
            "exists",
            &[
                "mkfs",
                "--devices",
                "b.img",
                "--size",
                "16MiB",
                "s.toml",
                "--json",
            ],
        ),
        case("exists", &["put", "s.toml", "h.txt", "--json"]),
        case("exists", &["mv", "s.toml", "h.txt", "h2.txt", "--json"]),
        case("exists", &["cp", "s.toml", "h.txt", "h2.txt", "--json"]),
        case(
            "exists",
            &[
                "mkfs",
                "--devices",
                "a.img",
                "--size",
                "64MiB",
                "new.toml",
                "--json",
            ],
        ),
        // store_in_use: another process holds the store.
        case("store_in_use", &["put", "locked.toml", "h.txt", "--json"]),
        case("store_in_use", &["ls", "locked.toml", "--json"]),
        case("store_in_use", &["fsck", "locked.toml", "--json"]),
        case("store_in_use", &["rm", "locked.toml", "x", "--json"]),
        // invalid_input: wrong values, wrong files in the store's place.
        case(
            "invalid_input",
            &[
                "mkfs",
                "--devices",
                "b.img",
                "--size",
                "2GB",
                "b.toml",
                "--json",
            ],
        ),
        case(
            "invalid_input",
            &["mkfs", "--devices", "tape:1", "b.toml", "--json"],
        ),
        case(
            "invalid_input",
            &[
                "mkfs",
                "--devices",
                "b.img",
                "--size",
                "16MiB",
                "--mode",
                "999",
                "b.toml",
                "--json",
            ],
        ),
        case(
            "invalid_input",
            &[
                "mkfs",
                "--devices",
                "b.img",
                "--size",
                "lots",
                "b.toml",
                "--json",
            ],
        ),
        case(
            "invalid_input",
            &[
                "mkfs",
                "--devices",
                "b.img",
                "--size",
                "16MiB",
                "--stripe-unit",
                "1000",
                "b.toml",
                "--json",
            ],
        ),
        case(
            "invalid_input",
            &[
                "mkfs",
                "--devices",
                "b.img",
                "--size",
                "16MiB",
                "--block-size",
                "3KiB",
                "b.toml",
                "--json",
            ],
        ),
        case(
            "invalid_input",
            &[
                "mkfs",
                "--devices",
                "b.img",
                "--size",
                "16MiB",
                "--flash-over-provisioning",
                "0.1",
                "b.toml",
                "--json",
            ],
        ),
        case("invalid_input", &["put", "h.txt", "s.toml", "--json"]),
        case("invalid_input", &["ls", "blob.bin", "--json"]),
        case("invalid_input", &["ls", "notes.txt", "--json"]),
        case("invalid_input", &["get", "s.toml", "h*", "h.txt", "--json"]),
        case(
            "invalid_input",
            &["rm", "s.toml", "h.txt", "h.txt", "--json"],
        ),
        case(
            "invalid_input",
            &["put", "s.toml", "h.txt", "--as", "bad/name", "--json"],
        ),
        case(
            "invalid_input",
            &[
                "run",
                "s.toml",
                "sha256",
                "h.txt",
                "--workers",
                "0",
                "--json",
            ],
        ),
        case("invalid_input", &["nbd", "serve", "--export", "nonsense"]),
        case("invalid_input", &["nbd", "serve", "--export", "d=tape:1"]),
        case(
            "invalid_input",
            &[
                "nbd",
                "serve",
                "--export",
                "d=ram:1MiB",
                "--listen",
                "0.0.0.0:0",
            ],
        ),
        case(
            "invalid_input",
            &["nbd", "serve", "--export", "d=ram:1MiB", "--realtime"],
        ),
        case(
            "invalid_input",
            &[
                "nbd",
                "serve",
                "--export",
                "d=ram:1MiB",
                "--socket",
                "n.sock",
                "--tls-certificate",
                "nocert.pem",
                "--tls-key",
                "nokey.pem",
            ],
        ),
        case(
            "invalid_input",
            &[
                "nbd",
                "serve",
                "--export",
                "d=ram:1MiB",
                "--socket",
                "n.sock",
                "--tls-certificate",
                "notes.txt",
                "--tls-key",
                "notes.txt",
            ],
        ),
        case("invalid_input", &["serve", "s.toml", "--max-clients", "0"]),
        case(
            "invalid_input",
            &["sim", "speed", "--preset", "nope", "--json"],
        ),
        case(
            "invalid_input",
            &["ftl", "copy", "--size", "bogus", "--json"],
        ),
        // corrupt: damaged store files and images.
        case("corrupt", &["ls", "damaged.toml", "--json"]),
        case("corrupt", &["ls", "z.toml", "--json"]),
        case("corrupt", &["fsck", "z.toml", "--json"]),
        // no_space: more data than the store holds.
        case("no_space", &["put", "tiny.toml", "big.bin", "--json"]),
        // kernel: hostile and wrong kernel options.
        case("kernel", &["run", "s.toml", "nokernel", "h.txt", "--json"]),
        case(
            "kernel",
            &["run", "s.toml", "grep", "bogus=1", "h.txt", "--json"],
        ),
        case("kernel", &["run", "s.toml", "grep", "h.txt", "--json"]),
        case(
            "kernel",
            &["run", "s.toml", "des-ecb", "key=zz", "h.txt", "--json"],
        ),
        case(
            "kernel",
            &[
                "run",
                "s.toml",
                "grep",
                "pattern=a",
                "max_line_bytes=-1",
                "h.txt",
                "--json",
            ],
        ),
        case(
            "kernel",
            &[
                "run",
                "s.toml",
                "grep",
                "pattern=a",
                "pattern=b",
                "h.txt",
                "--json",
            ],
        ),
        case(
            "kernel",
            &[
                "run",
                "s.toml",
                "des-ecb",
                "key=0123456789abcdef",
                "decrypt=true",
                "h.txt",
                "--json",
            ],
        ),
        // network: an NBD device nobody serves.
        case(
            "network",
            &[
                "mkfs",
                "--devices",
                "nbd://127.0.0.1:1/x",
                "--size",
                "1MiB",
                "n.toml",
                "--json",
            ],
        ),
    ]
}

#[test]
fn every_error_path_has_its_kind_and_status_and_no_debug_text() {
    let folder = fresh_folder("error-sweep");
    fixture(&folder);
    let locked = std::fs::File::open(folder.join("locked.toml")).unwrap();
    // SAFETY: flock on a descriptor this test owns; no memory is shared.
    let status = unsafe {
        libc::flock(
            std::os::fd::AsRawFd::as_raw_fd(&locked),
            libc::LOCK_EX | libc::LOCK_NB,
        )
    };
    assert_eq!(status, 0, "the test locks locked.toml");
    let cases = cases();
    assert!(cases.len() >= 60, "{} cases", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let output = run_in(&folder, &case.arguments);
        let problems = check(case, &output);
        println!(
            "{:?}: exit {:?}: {}",
            case.arguments,
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).trim_end()
        );
        if !problems.is_empty() {
            failures.push(format!("{:?}: {}", case.arguments, problems.join("; ")));
        }
    }
    drop(locked);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The benchmark, experiment and simulation commands' error paths, each a command line
/// split at spaces, run in a folder holding `t.txt` (a good blkparse trace), `bad.txt` (a
/// trace whose second line is long garbage with a control character), `bad.toml` (no
/// TOML) and `notes.txt`.
fn bench_cases() -> Vec<Case> {
    [
        ("not_found", "sim replay missing.txt --format blkparse"),
        ("invalid_input", "sim replay bad.txt --format blkparse"),
        ("invalid_input", "sim replay latin1.txt --format blkparse"),
        ("invalid_input", "sim replay . --format blkparse"),
        (
            "invalid_input",
            "sim replay t.txt --format blkparse --queue-depth 0",
        ),
        (
            "invalid_input",
            "sim replay t.txt --format blkparse --time-unit us",
        ),
        (
            "invalid_input",
            "sim replay t.txt --format blkparse --over-provisioning 0.99",
        ),
        (
            "invalid_input",
            "sim replay t.txt --format blkparse --plot notes.txt",
        ),
        (
            "not_found",
            "sim replay t.txt --format blkparse --plot nodir/sub",
        ),
        ("not_found", "sim job missing.toml"),
        ("invalid_input", "sim job bad.toml"),
        ("invalid_input", "sim job notes.txt"),
        ("invalid_input", "sim job --rw randrw --rwmixread 101"),
        ("invalid_input", "sim job --rw randrw --hosts 2"),
        ("invalid_input", "sim speed --queue-depth 0"),
        ("invalid_input", "ftl wa --blocks-per-chip 1"),
        ("invalid_input", "ftl hotcold --device-writes 0"),
        ("invalid_input", "ftl wa --plot chart.txt"),
        ("not_found", "ftl wear --plot nodir/chart.png"),
        ("invalid_input", "ftl fs --queue-depth 0"),
        ("invalid_input", "ftl copy --size 0"),
        ("invalid_input", "ftl emulate --qd 0"),
        ("invalid_input", "ftl emulate --seconds 0"),
        ("invalid_input", "demo --dir notes.txt/store"),
    ]
    .into_iter()
    .map(|(kind, line)| {
        let mut arguments: Vec<&'static str> = line.split(' ').collect();
        arguments.push("--json");
        Case { arguments, kind }
    })
    .collect()
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
    let mut failures = Vec::new();
    for case in &cases {
        let output = run_in(&folder, &case.arguments);
        let stderr = String::from_utf8_lossy(&output.stderr);
        println!("{:?}: {}", case.arguments, stderr.trim_end());
        let mut problems = check(case, &output);
        if stderr.contains('\u{1b}') || stderr.contains(&"x".repeat(100)) {
            problems.push("the bad line is quoted whole or raw".to_string());
        }
        if !problems.is_empty() {
            failures.push(format!("{:?}: {}", case.arguments, problems.join("; ")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn through_a_server_the_kinds_are_the_same_and_its_logs_hold_no_debug_text() {
    let folder = fresh_folder("error-sweep-served");
    std::fs::write(folder.join("h.txt"), b"hello\n").unwrap();
    let store = common::file_store(&folder, "64MiB");
    succeed(&["put", text(&store), text(&folder.join("h.txt"))]);
    let server = serve_support::ServerProcess::start(&store, &["--log-format", "json"]);
    let served_cases = [
        case("no_match", &["ls", "s.toml", "zz*", "--json"]),
        case("not_found", &["get", "s.toml", "nope", "out.txt", "--json"]),
        case("not_found", &["stat", "s.toml", "nope", "--json"]),
        case("not_found", &["mv", "s.toml", "nope", "x", "--json"]),
        case("exists", &["put", "s.toml", "h.txt", "--json"]),
        case("exists", &["cp", "s.toml", "h.txt", "h.txt", "--json"]),
        case(
            "invalid_input",
            &["put", "s.toml", "h.txt", "--as", "bad/name", "--json"],
        ),
        case("store_in_use", &["fsck", "s.toml", "--repair", "--json"]),
        case("kernel", &["run", "s.toml", "nokernel", "h.txt", "--json"]),
        case(
            "kernel",
            &["run", "s.toml", "grep", "bogus=1", "h.txt", "--json"],
        ),
        case("not_found", &["run", "s.toml", "sha256", "nope", "--json"]),
        case(
            "no_match",
            &["run", "s.toml", "grep", "pattern=zzz", "h.txt"],
        ),
    ];
    let mut failures = Vec::new();
    for case in &served_cases {
        let output = run_in(&folder, &case.arguments);
        let problems = check(case, &output);
        println!(
            "served {:?}: exit {:?}: {}",
            case.arguments,
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).trim_end()
        );
        if !problems.is_empty() {
            failures.push(format!("{:?}: {}", case.arguments, problems.join("; ")));
        }
    }
    let exit = server.stop_with(libc::SIGTERM);
    for finding in findings(&format!("{}\n{}", exit.stdout, exit.stderr)) {
        failures.push(format!("the server's output holds {finding}"));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_user_without_access_gets_permission() {
    if !flashpipe_testkit::tools::programs_or_skip("error sweep permission", &["runuser"]) {
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        flashpipe_testkit::tools::skip(
            "error sweep permission",
            "not root, so no second user can be had with runuser",
        );
        return;
    }
    let folder = fresh_folder("error-sweep-permission");
    std::fs::set_permissions(&folder, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let store = common::file_store(&folder, "16MiB");
    let as_nobody = || {
        Command::new("runuser")
            .args(["-u", "nobody", "--", env!("CARGO_BIN_EXE_flashpipe")])
            .args(["ls", text(&store), "--json"])
            .current_dir(&folder)
            .output()
            .unwrap()
    };
    let expected = case("permission", &["ls", "s.toml", "--json"]);
    // The store file is the owner's alone (mode 600).
    let output = as_nobody();
    let problems = check(&expected, &output);
    assert!(
        problems.is_empty(),
        "{problems:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    // A trace the user may not read, and a plot folder it may not make (the folder is
    // the owner's, mode 755): permission, from the operating system's error.
    let trace = "8,0 1 1 0.000001000 100 Q W 2048 + 8 [fio]\n";
    for (name, mode) in [("private.txt", 0o600), ("t.txt", 0o644)] {
        std::fs::write(folder.join(name), trace).unwrap();
        let permissions = std::os::unix::fs::PermissionsExt::from_mode(mode);
        std::fs::set_permissions(folder.join(name), permissions).unwrap();
    }
    for line in [
        "sim replay private.txt --format blkparse --json",
        "sim replay t.txt --format blkparse --plot plots --json",
    ] {
        let arguments: Vec<&'static str> = line.split(' ').collect();
        let output = Command::new("runuser")
            .args(["-u", "nobody", "--", env!("CARGO_BIN_EXE_flashpipe")])
            .args(&arguments)
            .current_dir(&folder)
            .output()
            .unwrap();
        let problems = check(&case("permission", &arguments), &output);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(problems.is_empty(), "{line}: {problems:?}: {stderr}");
    }
    // Through a server: its private socket refuses the user (the store file readable).
    let server = serve_support::ServerProcess::start(&store, &[]);
    std::fs::set_permissions(&store, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let output = as_nobody();
    println!("{}", String::from_utf8_lossy(&output.stderr));
    let problems = check(&expected, &output);
    assert!(
        problems.is_empty(),
        "{problems:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    // The socket widened by hand: the server's access rule (AccessDenied) refuses the user.
    for path in [store.as_path(), server.socket.as_path()] {
        std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o666))
            .unwrap();
    }
    let output = as_nobody();
    println!("{}", String::from_utf8_lossy(&output.stderr));
    let problems = check(&expected, &output);
    drop(server.stop_with(libc::SIGTERM));
    assert!(
        problems.is_empty(),
        "{problems:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn help_and_listings_hold_no_debug_text_or_issue_numbers() {
    let folder = fresh_folder("error-sweep-help");
    let mut failures = Vec::new();
    let commands: Vec<Vec<&str>> = vec![
        vec!["--help"],
        vec!["bench", "--help"],
        vec!["demo", "--help"],
        vec!["kernels", "--help"],
        vec!["run", "--help"],
        vec!["sim", "--help"],
        vec!["nbd", "serve", "--help"],
        vec!["mkfs", "--help"],
        vec!["put", "--help"],
        vec!["get", "--help"],
        vec!["cat", "--help"],
        vec!["ls", "--help"],
        vec!["stat", "--help"],
        vec!["rm", "--help"],
        vec!["mv", "--help"],
        vec!["cp", "--help"],
        vec!["df", "--help"],
        vec!["fsck", "--help"],
        vec!["serve", "--help"],
        vec!["ftl", "--help"],
        vec!["completions", "--help"],
        vec!["man", "--help"],
        vec!["kernels"],
        vec!["sim", "presets"],
    ];
    for arguments in &commands {
        let output = run_in(&folder, arguments);
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let mut found = findings(&all);
        if arguments == &["kernels"] {
            found.extend(
                all.split(|c: char| !c.is_ascii_alphanumeric())
                    .filter(|word| is_camel_case(word))
                    .map(|word| format!("type name {word}")),
            );
        }
        if !output.status.success() {
            found.push(format!("exit {:?}", output.status.code()));
        }
        if !found.is_empty() {
            failures.push(format!("{arguments:?}: {}", found.join(", ")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_finder_knows_debug_text_from_words() {
    for debug in [
        "Other(OtherError(CaUsedAsEndEntity))",
        "ServerCounters { clients: 1 }",
        "Some(3)",
        "Os { code: 2 }",
        "see issue 14",
        "rings (#14)",
    ] {
        assert!(!findings(debug).is_empty(), "{debug}");
    }
    for words in [
        "DES in ECB mode; PKCS#7 padding by default",
        "no such file: \"nope\"",
        "{\"error\":\"x\",\"kind\":\"io\"}",
        "a store of 64 MiB (RAID-0)",
    ] {
        assert!(findings(words).is_empty(), "{words}: {:?}", findings(words));
    }
}
