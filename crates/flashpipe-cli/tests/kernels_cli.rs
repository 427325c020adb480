//! `flashpipe kernels`: listing, running a kernel over files, language-profile training and
//! evaluation, and clear errors for bad kernels, options and inputs.

mod common;

use std::path::Path;
use std::process::Output;

use common::{check_fails, flashpipe, succeed_bytes};
use flashpipe_kernels::shared_data::optional_shared_folder;

/// A fresh scratch folder under the system temporary folder (the CLI crate has no tempfile).
struct ScratchFolder(std::path::PathBuf);

impl ScratchFolder {
    fn new(name: &str) -> Self {
        let path = std::env::temp_dir().join(format!(
            "flashpipe-kernels-cli-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("scratch folder");
        Self(path)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchFolder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
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
    assert_eq!(listing.as_array().expect("array").len(), 11);
}

#[test]
fn kernels_run_transforms_and_summarises_files_and_refuses_bad_input() {
    let directory = ScratchFolder::new("run");
    let text = directory.path().join("notes.txt");
    std::fs::write(&text, "alpha\nneedle here\nomega\n").expect("write");
    let text_path = text.to_str().expect("utf-8 path");
    let output = flashpipe(&[
        "kernels",
        "run",
        "grep",
        "-o",
        "pattern=needle",
        text_path,
        "--json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let results: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(results[0]["summary"]["matches"][0]["line_number"], 2);
    let out_dir = directory.path().join("out");
    std::fs::create_dir(&out_dir).expect("out dir");
    let out_dir_path = out_dir.to_str().expect("utf-8 path");
    let output = flashpipe(&[
        "kernels",
        "run",
        "sobel",
        text_path,
        "--out-dir",
        out_dir_path,
    ]);
    assert!(!output.status.success());
    assert!(stderr(&output).contains("not a PNG"), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("notes.txt"),
        "names the file: {}",
        stderr(&output)
    );
    succeed_bytes(&[
        "kernels",
        "run",
        "des-ecb",
        "-o",
        "key=0123456789abcdef",
        text_path,
        "--out-dir",
        out_dir_path,
    ]);
    assert_eq!(
        std::fs::read(out_dir.join("notes.txt"))
            .expect("ciphertext")
            .len(),
        32
    );
    check_fails(
        &[
            "kernels",
            "run",
            "des-ecb",
            "-o",
            "key=12",
            text_path,
            "--out-dir",
            out_dir_path,
        ],
        "16 hex digits",
    );
    check_fails(
        &["kernels", "run", "rot13", text_path],
        "unknown kernel 'rot13'",
    );
}

#[test]
#[ignore = "data test: needs ../shared/data/udhr (scripts/test-data runs it)"]
fn langid_profiles_train_evaluate_and_refuse_corruption() {
    let Some(udhr) = optional_shared_folder(env!("CARGO_MANIFEST_DIR"), "udhr") else {
        return;
    };
    let udhr_path = udhr.to_str().expect("utf-8 path");
    let directory = ScratchFolder::new("langid");
    let profiles = directory.path().join("profiles.bin");
    let profiles_path = profiles.to_str().expect("utf-8 path");
    succeed_bytes(&[
        "kernels",
        "train-langid",
        "--udhr",
        udhr_path,
        "--max-languages",
        "8",
        "--out",
        profiles_path,
    ]);
    let evaluate = [
        "kernels",
        "eval-langid",
        "--udhr",
        udhr_path,
        "--max-languages",
        "8",
        "--profiles",
        profiles_path,
    ];
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
