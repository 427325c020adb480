//! The binary at the shell: completions for bash, zsh and fish and the manual pages come
//! from the clap definitions, and a listing written into a closed pipe ends quietly (no
//! "Broken pipe" panic, no exit 101) as coreutils do.

mod common;

use std::fs::File;
use std::os::fd::FromRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{fresh_folder, mkfs, succeed, text};

#[test]
fn completions_for_each_shell_name_the_subcommands() {
    for shell in ["bash", "zsh", "fish"] {
        let script = succeed(&["completions", shell]);
        assert!(!script.is_empty(), "{shell}: empty completions");
        for subcommand in ["mkfs", "put", "repro"] {
            assert!(
                script.contains(subcommand),
                "{shell} completions do not name {subcommand}"
            );
        }
    }
}

#[test]
fn completions_refuse_an_unknown_shell() {
    common::check_fails(&["completions", "tcsh"], "bash");
}

#[test]
fn the_manual_page_is_roff_with_a_title_line() {
    let page = succeed(&["man"]);
    let title = page
        .lines()
        .take(5)
        .find(|line| line.starts_with(".TH "))
        .unwrap_or_else(|| panic!("no .TH line at the top of {page:.300}"));
    assert!(title.contains("flashpipe"), "{title}");
    assert!(page.contains("mkfs"), "the page does not list mkfs");
}

#[test]
fn the_manual_folder_has_one_page_per_subcommand() {
    let folder = fresh_folder("man-pages");
    let pages = folder.join("man1");
    succeed(&["man", "--out", text(&pages)]);
    for name in ["flashpipe.1", "flashpipe-mkfs.1", "flashpipe-sim-repro.1"] {
        let page = std::fs::read_to_string(pages.join(name))
            .unwrap_or_else(|error| panic!("{name}: {error}"));
        assert!(page.lines().any(|line| line.starts_with(".TH ")), "{name}");
    }
}

/// A pipe whose reading end is already closed: every write to it fails with EPIPE.
fn closed_pipe() -> File {
    let mut ends = [0i32; 2];
    // SAFETY: `ends` has room for the two descriptors pipe(2) writes.
    let made = unsafe { libc::pipe(ends.as_mut_ptr()) };
    assert_eq!(made, 0, "pipe(2) failed");
    // SAFETY: both descriptors were just made by pipe(2) and are owned here alone.
    let (reading, writing) = unsafe { (File::from_raw_fd(ends[0]), File::from_raw_fd(ends[1])) };
    drop(reading);
    writing
}

/// Runs flashpipe with standard output a closed pipe and checks it ends quietly.
fn check_quiet_on_closed_pipe(arguments: &[&str]) {
    let output = Command::new(env!("CARGO_BIN_EXE_flashpipe"))
        .args(arguments)
        .stdout(Stdio::from(closed_pipe()))
        .stderr(Stdio::piped())
        .output()
        .expect("the flashpipe binary runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
        "flashpipe {arguments:?} into a closed pipe: {stderr}"
    );
    assert_ne!(
        output.status.code(),
        Some(101),
        "flashpipe {arguments:?} into a closed pipe exited 101: {stderr}"
    );
}

fn store_with_files(folder: &Path) -> PathBuf {
    let store = folder.join("s.toml");
    let device = folder.join("a.img");
    mkfs(&store, text(&device), &["--size", "32MiB"]);
    let source = folder.join("files");
    std::fs::create_dir_all(&source).unwrap();
    for index in 0..20 {
        std::fs::write(source.join(format!("f{index:02}.txt")), b"line\n").unwrap();
    }
    let names: Vec<String> = (0..20)
        .map(|index| text(&source.join(format!("f{index:02}.txt"))).to_string())
        .collect();
    let mut put = vec!["put", text(&store)];
    put.extend(names.iter().map(String::as_str));
    succeed(&put);
    store
}

#[test]
fn listings_into_a_closed_pipe_end_quietly() {
    let folder = fresh_folder("closed-pipe");
    let store = store_with_files(&folder);
    check_quiet_on_closed_pipe(&["ls", text(&store)]);
    check_quiet_on_closed_pipe(&["ls", text(&store), "--json"]);
    check_quiet_on_closed_pipe(&["cat", text(&store), "f00.txt"]);
    check_quiet_on_closed_pipe(&["kernels"]);
    check_quiet_on_closed_pipe(&["completions", "bash"]);
    check_quiet_on_closed_pipe(&["man"]);
}
