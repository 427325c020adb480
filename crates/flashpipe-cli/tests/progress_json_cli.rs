//! Issue 12, items 1 and 4 through the binary: every command takes `--json` (or, for
//! `completions` and `man`, refuses it with the reason), `sim speed --json` prints one
//! JSON object, and the commands with a progress spinner print none of it when standard
//! error is a pipe (as it is for these tests).

mod common;

use common::{check_fails, command_line, flashpipe, fresh_folder, succeed};

/// Every leaf command that prints results; each must list `--json` in its help.
const COMMANDS_WITH_RESULTS: [&[&str]; 33] = [
    &["bench", "device"],
    &["bench", "fs"],
    &["bench", "kernels"],
    &["demo"],
    &["kernels"],
    &["kernels", "run"],
    &["kernels", "train-langid"],
    &["kernels", "eval-langid"],
    &["run"],
    &["sim", "presets"],
    &["sim", "speed"],
    &["sim", "job"],
    &["sim", "replay"],
    &["sim", "repro"],
    &["mkfs"],
    &["put"],
    &["get"],
    &["cat"],
    &["ls"],
    &["stat"],
    &["rm"],
    &["mv"],
    &["cp"],
    &["df"],
    &["info"],
    &["fsck"],
    &["ftl", "wa"],
    &["ftl", "hotcold"],
    &["ftl", "wear"],
    &["ftl", "speed"],
    &["ftl", "gc-wait"],
    &["ftl", "copy"],
    &["ftl", "fs"],
];

/// The characters indicatif draws a spinner with, and the controls it redraws with.
fn spinner_noise_in(stderr: &str) -> Option<char> {
    const SPINNER_CHARACTERS: &str = "⠁⠂⠄⡀⢀⠠⠐⠈⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏";
    stderr.chars().find(|&character| {
        character == '\x1b' || character == '\r' || SPINNER_CHARACTERS.contains(character)
    })
}

fn assert_no_spinner_noise(arguments: &[&str]) -> String {
    let output = flashpipe(arguments);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "flashpipe {arguments:?} failed: {stderr}"
    );
    if let Some(character) = spinner_noise_in(&stderr) {
        panic!("flashpipe {arguments:?} drew a spinner ({character:?}) into a pipe: {stderr:?}");
    }
    String::from_utf8(output.stdout).expect("standard output is UTF-8")
}

#[test]
fn every_command_that_prints_results_takes_json() {
    for command in COMMANDS_WITH_RESULTS {
        let mut arguments = command.to_vec();
        arguments.push("--help");
        let help = succeed(&arguments);
        assert!(
            help.contains("--json"),
            "flashpipe {command:?} does not take --json: {help}"
        );
    }
}

#[test]
fn sim_speed_json_prints_one_object() {
    let stdout = assert_no_spinner_noise(&["sim", "speed", "--operations", "2000", "--json"]);
    let value: serde_json::Value =
        serde_json::from_str(&stdout).unwrap_or_else(|error| panic!("{error}: {stdout}"));
    let object = value.as_object().expect("one JSON object");
    assert_eq!(object["page_operations"], 2000, "{stdout}");
    assert_eq!(object["preset"], "minflash", "{stdout}");
    for field in [
        "wall_seconds",
        "page_operations_per_wall_second",
        "simulated_megabytes_per_second",
        "simulated_read_latency_us_p99",
    ] {
        assert!(object[field].is_number(), "{field} missing: {stdout}");
    }
}

#[test]
fn completions_and_man_refuse_json_with_the_reason() {
    check_fails(
        &["completions", "bash", "--json"],
        "completions writes a shell script; --json does not apply",
    );
    check_fails(
        &["man", "--json"],
        "man writes manual pages as roff; --json does not apply",
    );
    let output = flashpipe(&["completions", "zsh", "--json"]);
    assert!(output.stdout.is_empty(), "a refused command wrote output");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let error: serde_json::Value = serde_json::from_str(stderr.trim())
        .unwrap_or_else(|error| panic!("with --json the error is JSON ({error}): {stderr}"));
    assert_eq!(error["kind"], "usage", "{stderr}");
}

#[test]
fn spinners_stay_off_a_piped_standard_error() {
    let small_ftl = [
        "--blocks-per-chip",
        "16",
        "--pages-per-block",
        "16",
        "--device-writes",
        "1",
    ];
    let mut write_amplification = vec!["ftl", "wa"];
    write_amplification.extend(small_ftl);
    assert_no_spinner_noise(&write_amplification);
    assert_no_spinner_noise(&["sim", "speed", "--operations", "2000"]);
    assert_no_spinner_noise(&["sim", "job", "--requests", "200"]);
}

#[test]
fn fsck_draws_no_spinner_into_a_pipe() {
    let folder = fresh_folder("progress-fsck");
    let store = folder.join("s.toml");
    let device = folder.join("a.img");
    succeed(&command_line(
        "mkfs --devices {} --size 32MiB {}",
        &[device.to_str().unwrap(), store.to_str().unwrap()],
    ));
    let report = assert_no_spinner_noise(&["fsck", store.to_str().unwrap()]);
    assert!(!report.is_empty(), "fsck printed no report");
    let _ = std::fs::remove_dir_all(&folder);
}
