//! `flashpipe kernels`: listing, running a kernel over files, language-profile training and
//! evaluation, and clear errors for bad kernels, options and inputs.

mod common;

use std::process::Output;

use common::{check_fails, check_fails_naming, flashpipe, fresh_folder, succeed_bytes};
use flashpipe_kernels::shared_data::optional_shared_folder;

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `flashpipe kernels run ARGUMENTS`.
fn kernels_run(arguments: &[&str]) -> Vec<u8> {
    succeed_bytes(&[&["kernels", "run"], arguments].concat())
}

/// `flashpipe kernels run ARGUMENTS`, expected to fail naming each of `expected_fragments`.
fn kernels_run_fails(arguments: &[&str], expected_fragments: &[&str]) {
    check_fails_naming(
        &[&["kernels", "run"], arguments].concat(),
        expected_fragments,
    );
}

#[test]
fn kernels_lists_every_kernel_as_text_and_json() {
    let output = flashpipe(&["kernels"]);
    assert!(output.status.success(), "{}", stderr(&output));
    for name in [
        "des-ecb",
        "des-cbc",
        "aes128-ctr",
        "sobel",
        "langid",
        "grep",
        "crc32c",
        "sha256",
        "knn",
        "sort",
        "search-index",
    ] {
        assert!(stdout(&output).contains(name), "{name} listed");
    }
    let output = flashpipe(&["kernels", "--json"]);
    let listing: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON listing");
    assert_eq!(
        listing.as_array().expect("array").len(),
        flashpipe_kernels::registry::KERNELS.len()
    );
}

#[test]
fn kernels_run_transforms_and_summarises_files_and_refuses_bad_input() {
    let directory = fresh_folder("kernels-cli-run");
    let text = directory.join("notes.txt");
    std::fs::write(&text, "alpha\nneedle here\nomega\n").expect("write");
    let text_path = text.to_str().expect("utf-8 path");
    let results = kernels_run(&["grep", "-o", "pattern=needle", text_path, "--json"]);
    let results: serde_json::Value = serde_json::from_slice(&results).expect("JSON");
    assert_eq!(results[0]["summary"]["matches"][0]["line_number"], 2);
    let out_dir = directory.join("out");
    std::fs::create_dir(&out_dir).expect("out dir");
    let out = ["--out-dir", out_dir.to_str().expect("utf-8 path")];
    let sobel = [&["sobel", text_path][..], &out].concat();
    kernels_run_fails(&sobel, &["not a PNG", "notes.txt"]);
    let des = ["des-ecb", "-o"];
    kernels_run(&[&des[..], &["key=0123456789abcdef", text_path], &out].concat());
    assert_eq!(
        std::fs::read(out_dir.join("notes.txt"))
            .expect("ciphertext")
            .len(),
        32
    );
    kernels_run_fails(
        &[&des[..], &["key=12", text_path], &out].concat(),
        &["16 hex digits"],
    );
    kernels_run_fails(&["rot13", text_path], &["unknown kernel 'rot13'"]);
}

#[test]
#[ignore = "data test: needs ../shared/data/udhr (scripts/test-data runs it)"]
fn langid_profiles_train_evaluate_and_refuse_corruption() {
    let Some(udhr) = optional_shared_folder(env!("CARGO_MANIFEST_DIR"), "udhr") else {
        return;
    };
    let udhr_path = udhr.to_str().expect("utf-8 path");
    let directory = fresh_folder("kernels-cli-langid");
    let profiles = directory.join("profiles.bin");
    let profiles_path = profiles.to_str().expect("utf-8 path");
    let languages = ["--udhr", udhr_path, "--max-languages", "8"];
    succeed_bytes(
        &[
            &["kernels", "train-langid"],
            &languages[..],
            &["--out", profiles_path],
        ]
        .concat(),
    );
    let evaluate = [
        &["kernels", "eval-langid"],
        &languages[..],
        &["--profiles", profiles_path],
    ]
    .concat();
    let stdout = succeed_bytes(&[&evaluate[..], &["--json"]].concat());
    let report: serde_json::Value = serde_json::from_slice(&stdout).expect("JSON report");
    assert_eq!(report["languages"], 8);
    assert_eq!(report["rows"].as_array().expect("rows").len(), 5);
    let mut bytes = std::fs::read(&profiles).expect("profile");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&profiles, &bytes).expect("corrupt it");
    check_fails(&evaluate, "corrupt");
}
