//! What the error sweeps share: the documented exit status of each kind, running the
//! binary with a bound, the finder of Rust Debug text and issue numbers, one case and its
//! check, and the fixture store the cases run against.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

use crate::common::{succeed, text};

/// The documented exit status of each kind (docs/cli.md).
pub fn status_of(kind: &str) -> i32 {
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
pub const CASE_LIMIT_S: u32 = 120;

/// Runs the binary in `folder`, under coreutils' `timeout` so that a case which does not
/// fail (a server that starts and runs) ends with status 124 and a message instead of
/// hanging the suite.
pub fn run_in(folder: &Path, arguments: &[&str]) -> Output {
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
pub fn word_before(text: &str, end: usize) -> &str {
    let start = text[..end]
        .rfind(|character: char| !character.is_ascii_alphanumeric())
        .map_or(0, |index| index + 1);
    &text[start..end]
}

/// `[A-Z][a-zA-Z]+`
pub fn is_type_name(word: &str) -> bool {
    word.len() >= 2
        && word.starts_with(|character: char| character.is_ascii_uppercase())
        && word
            .chars()
            .all(|character| character.is_ascii_alphabetic())
}

/// `[A-Z][a-z]+[A-Z][A-Za-z]*`: a CamelCase name such as `OtherError`.
pub fn is_camel_case(word: &str) -> bool {
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
pub fn findings(output: &str) -> Vec<String> {
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
pub struct Case {
    pub arguments: Vec<&'static str>,
    pub kind: &'static str,
}

pub fn case(kind: &'static str, arguments: &[&'static str]) -> Case {
    Case {
        arguments: arguments.to_vec(),
        kind,
    }
}

/// The cases of a table written one a line: the kind a case fails with, then its command
/// line (words split at white space). Blank lines and `#` lines are passed over.
pub fn cases_of(table: &'static str) -> Vec<Case> {
    table
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| {
            let mut words = line.split_whitespace();
            let kind = words.next().expect("a kind");
            status_of(kind);
            case(kind, &words.collect::<Vec<_>>())
        })
        .collect()
}

/// Runs every case in `folder` and checks it (with `more_checks` besides [`check`]); prints
/// each case's exit and message, tagged with `label`, and returns a line for each case
/// that went wrong.
pub fn sweep(
    folder: &Path,
    cases: &[Case],
    label: &str,
    more_checks: impl Fn(&Output) -> Vec<String>,
) -> Vec<String> {
    let mut failures = Vec::new();
    for case in cases {
        let output = run_in(folder, &case.arguments);
        let mut problems = check(case, &output);
        problems.extend(more_checks(&output));
        println!(
            "{label}{:?}: exit {:?}: {}",
            case.arguments,
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).trim_end()
        );
        if !problems.is_empty() {
            failures.push(format!("{:?}: {}", case.arguments, problems.join("; ")));
        }
    }
    failures
}

/// Checks one case's output; returns what is wrong.
pub fn check(case: &Case, output: &Output) -> Vec<String> {
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
pub fn fixture(folder: &Path) {
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
