//! Tools a test drives but the project does not build (fio, nbdkit, qemu, openssl, a second
//! uid), and what a test does when one is missing.
//!
//! On a developer's machine a missing tool skips the test with a line saying what is missing
//! (`SKIPPED test: reason`). Under `FLASHPIPE_REQUIRE_TOOLS=1`, which `.ci/run` sets, the same
//! call fails the test instead: in CI a missing tool is a broken install step, never a silent
//! pass.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::Command;
use std::sync::mpsc;

/// The environment variable that turns a missing tool into a failure.
pub const REQUIRE_TOOLS_VARIABLE: &str = "FLASHPIPE_REQUIRE_TOOLS";

/// True when a missing tool must fail the test (`FLASHPIPE_REQUIRE_TOOLS=1`).
pub fn tools_required() -> bool {
    std::env::var(REQUIRE_TOOLS_VARIABLE).is_ok_and(|value| value == "1")
}

/// Says that `test` cannot run because of `reason`: prints the skip line, or panics when tools
/// are required. The caller returns from the test after it.
pub fn skip(test: &str, reason: &str) {
    assert!(
        !tools_required(),
        "{test} cannot run: {reason} ({REQUIRE_TOOLS_VARIABLE}=1 makes this a failure)"
    );
    eprintln!("SKIPPED {test}: {reason}");
}

/// True when `program` is a file in a folder of `PATH`.
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|folder| folder.join(program).is_file())
    })
}

/// True when every one of `programs` is on `PATH`; otherwise [`skip`]s `test`, naming the first
/// missing one, and returns false.
pub fn programs_or_skip(test: &str, programs: &[&str]) -> bool {
    match programs.iter().find(|program| !on_path(program)) {
        None => true,
        Some(missing) => {
            skip(
                test,
                &format!(
                    "`{missing}` is not installed (scripts/install-test-packages installs it)"
                ),
            );
            false
        }
    }
}

/// Runs `command` (named `what` in failure messages), which must start and succeed; returns
/// its standard output.
pub fn stdout_of(command: &mut Command, what: &str) -> Vec<u8> {
    let output = command
        .output()
        .unwrap_or_else(|error| panic!("{what} does not start: {error}"));
    assert!(
        output.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

/// The lines `reader` gives (a child's piped standard output), read on a thread of their
/// own until its end or a bad line; dropping the receiver ends the thread at its next line.
pub fn line_channel(reader: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (sender, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(reader).lines() {
            let Ok(line) = line else { break };
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    lines
}

/// Makes the NCBI BLAST nucleotide database `db` of `folder/db.fa` with `makeblastdb`.
pub fn make_blast_db(folder: &Path) {
    stdout_of(
        Command::new("makeblastdb")
            .args(["-in", "db.fa", "-dbtype", "nucl", "-out", "db"])
            .current_dir(folder),
        "makeblastdb",
    );
}

/// NCBI `blastn -task TASK` of `folder/queries.fa` against the database `folder/db`: its
/// tabular lines (`-outfmt 6`), E-value 1e-5 at most, no dust filter, one thread, at most
/// `max_target_seqs` subjects a query.
pub fn blastn_tabular(folder: &Path, task: &str, max_target_seqs: u32) -> String {
    let output = stdout_of(
        Command::new("blastn")
            .args([
                "-task",
                task,
                "-query",
                "queries.fa",
                "-db",
                "db",
                "-outfmt",
                "6",
            ])
            .args(["-evalue", "1e-5", "-dust", "no", "-num_threads", "1"])
            .args(["-max_target_seqs", &max_target_seqs.to_string()])
            .current_dir(folder),
        "blastn",
    );
    String::from_utf8(output).expect("blastn's tabular output is text")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shell_is_on_the_path_and_a_made_up_program_is_not() {
        assert!(on_path("sh"));
        assert!(!on_path("flashpipe-no-such-program-7f3a"));
    }
}
