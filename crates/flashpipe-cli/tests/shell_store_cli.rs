//! The store commands and kernels at the shell, through the binary: folders kept by
//! `put`, `get -r` and `rm -r`; glob patterns in `ls`, `cat`, `get`, `rm` and `run`;
//! `ls -1`/`-l`/`-h` with the summary on standard error; JSON errors; digests that
//! `sha256sum --check` reads; kernel options spelled alike in `run` and `kernels run`;
//! `sim presets`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{
    check_fails, command_line, file_store, flashpipe, folder_with_store, fresh_folder, succeed,
    text,
};
use flashpipe_kernels::shared_data::optional_shared_folder;
use serde_json::Value;

/// A one-device store in `folder` holding `photos/README`, `photos/sub/x.txt` and
/// `notes/README`, put in one command (so `photos:README`, `photos:sub:x.txt`,
/// `notes:README`).
fn store_with_folders(folder: &Path) -> PathBuf {
    let store = file_store(folder, "16MiB");
    std::fs::create_dir_all(folder.join("photos").join("sub")).unwrap();
    std::fs::create_dir_all(folder.join("notes")).unwrap();
    std::fs::write(folder.join("photos").join("README"), b"photos readme\n").unwrap();
    std::fs::write(folder.join("photos").join("sub").join("x.txt"), b"x\n").unwrap();
    std::fs::write(folder.join("notes").join("README"), b"notes readme\n").unwrap();
    succeed(&[
        "put",
        text(&store),
        text(&folder.join("photos")),
        text(&folder.join("notes")),
    ]);
    store
}

fn names(listing: &str) -> Vec<&str> {
    listing.lines().collect()
}

fn stderr_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn folders_round_trip_through_put_get_r_and_rm_r() {
    let folder = fresh_folder("shell-folders");
    let store = store_with_folders(&folder);
    let store_text = text(&store);
    assert_eq!(
        names(&succeed(&["ls", "-1", store_text])),
        ["notes:README", "photos:README", "photos:sub:x.txt"]
    );
    assert_eq!(
        names(&succeed(&["ls", "-1", store_text, "photos"])),
        ["photos:README", "photos:sub:x.txt"]
    );

    let out = folder.join("out");
    succeed(&["get", "-r", store_text, "photos", text(&out)]);
    assert_eq!(
        std::fs::read(out.join("photos").join("README")).unwrap(),
        b"photos readme\n"
    );
    assert_eq!(
        std::fs::read(out.join("photos").join("sub").join("x.txt")).unwrap(),
        b"x\n"
    );
    assert!(!out.join("notes").exists());

    // A file fetched into a folder keeps the last component of its name.
    succeed(&["get", store_text, "photos:sub:x.txt", text(&out)]);
    assert_eq!(std::fs::read(out.join("x.txt")).unwrap(), b"x\n");

    check_fails(&["rm", store_text, "photos"], "-r");
    assert_eq!(names(&succeed(&["ls", "-1", store_text])).len(), 3);
    succeed(&["rm", "-r", store_text, "photos"]);
    assert_eq!(names(&succeed(&["ls", "-1", store_text])), ["notes:README"]);
}

#[test]
fn patterns_work_in_every_command_and_a_pattern_matching_nothing_is_named() {
    let folder = fresh_folder("shell-globs");
    let store = store_with_folders(&folder);
    let store_text = text(&store);
    assert_eq!(
        names(&succeed(&["ls", "-1", store_text, "*README"])),
        ["notes:README", "photos:README"]
    );
    assert_eq!(succeed(&["cat", store_text, "n?tes:*"]), "notes readme\n");
    let fetched = folder.join("fetched");
    std::fs::create_dir_all(&fetched).unwrap();
    succeed(&["get", store_text, "photos:[rR]*", text(&fetched)]);
    assert_eq!(
        std::fs::read(fetched.join("README")).unwrap(),
        b"photos readme\n"
    );
    let digests = succeed(&["run", store_text, "sha256", "photos:*"]);
    assert_eq!(digests.lines().count(), 2, "{digests}");
    for command in ["ls", "cat", "rm"] {
        check_fails(&[command, store_text, "zz*"], "\"zz*\"");
    }
    check_fails(&["get", store_text, "zz*", text(&fetched)], "\"zz*\"");
    check_fails(&["run", store_text, "sha256", "zz*"], "\"zz*\"");
    succeed(&["rm", store_text, "*:README"]);
    assert_eq!(
        names(&succeed(&["ls", "-1", store_text])),
        ["photos:sub:x.txt"]
    );
}

#[test]
fn ls_prints_data_on_stdout_and_its_summary_on_stderr() {
    let folder = fresh_folder("shell-ls");
    let store = store_with_folders(&folder);
    let store_text = text(&store);
    std::fs::write(folder.join("big.bin"), vec![7u8; 5000]).unwrap();
    let put = flashpipe(&["put", store_text, text(&folder.join("big.bin"))]);
    assert!(put.status.success() && put.stdout.is_empty(), "{put:?}");
    assert!(stderr_of(&put).contains("stored 1 file(s)"), "{put:?}");
    for summary_only in [
        vec!["cp", store_text, "big.bin", "big-2.bin"],
        vec!["mv", store_text, "big-2.bin", "big-3.bin"],
        vec!["get", store_text, "big.bin", text(&folder)],
        vec!["rm", store_text, "big-3.bin"],
    ] {
        let output = flashpipe(&summary_only);
        assert!(output.status.success(), "{summary_only:?}: {output:?}");
        assert!(
            output.stdout.is_empty(),
            "{summary_only:?} wrote on stdout: {output:?}"
        );
    }

    let output = flashpipe(&["ls", store_text]);
    let stdout = String::from_utf8(output.stdout.clone()).unwrap();
    assert!(!stdout.contains("file(s)"), "{stdout}");
    assert_eq!(stdout.lines().count(), 4);
    assert!(stderr_of(&output).contains("4 file(s)"));

    let long = succeed(&["ls", "-l", store_text, "big.bin"]);
    assert!(
        long.contains(" 5000 ") && long.trim_end().ends_with("big.bin"),
        "{long}"
    );
    let human = succeed(&["ls", "-lh", store_text, "big.bin"]);
    assert!(human.contains("KiB"), "{human}");
}

#[test]
fn errors_are_json_with_json_and_cat_refuses_it() {
    let folder = fresh_folder("shell-json-errors");
    let store = store_with_folders(&folder);
    let store_text = text(&store);
    for arguments in [
        vec!["ls", store_text, "absent", "--json"],
        vec!["ls", "--json"],
        vec!["get", store_text, "zz*", "x", "--json"],
    ] {
        let output = flashpipe(&arguments);
        assert!(!output.status.success(), "{arguments:?}");
        let error: Value = serde_json::from_str(stderr_of(&output).trim())
            .unwrap_or_else(|_| panic!("{arguments:?}: {}", stderr_of(&output)));
        assert!(error["error"].is_string() && error["kind"].is_string());
    }
    check_fails(&["cat", store_text, "notes:README", "--json"], "--json");
}

#[test]
fn digests_from_run_are_checked_by_sha256sum_against_fetched_files() {
    let (folder, store) = folder_with_store("shell-sha256sum", "16MiB");
    for (name, contents) in [("one.txt", "first\n"), ("two.bin", "second file\n")] {
        std::fs::write(folder.join(name), contents).unwrap();
        succeed(&["put", text(&store), text(&folder.join(name))]);
    }
    let sums = succeed(&["run", text(&store), "sha256", "one.txt", "two.bin"]);
    let crcs = succeed(&["run", text(&store), "crc32c", "one.txt"]);
    assert!(crcs.trim_end().ends_with("  one.txt"), "{crcs}");
    let fetched = folder.join("fetched");
    std::fs::create_dir_all(&fetched).unwrap();
    succeed(&["get", text(&store), "*", text(&fetched)]);
    std::fs::write(fetched.join("SUMS"), &sums).unwrap();
    match std::process::Command::new("sha256sum")
        .args(["--check", "SUMS"])
        .current_dir(&fetched)
        .output()
    {
        Ok(check) => assert!(
            check.status.success(),
            "sha256sum --check: {}{}",
            String::from_utf8_lossy(&check.stdout),
            stderr_of(&check)
        ),
        Err(error) => eprintln!("sha256sum not available ({error}); format checked only"),
    }
    for line in sums.lines() {
        let (hash, _) = line.split_once("  ").unwrap();
        assert_eq!(hash.len(), 64, "{line}");
    }
}

#[test]
fn digests_named_as_paths_check_after_a_recursive_get() {
    let (folder, store) = folder_with_store("shell-sha256sum-paths", "16MiB");
    let pictures = folder.join("pics");
    std::fs::create_dir_all(pictures.join("sub")).unwrap();
    std::fs::write(pictures.join("img1.jpg"), "one\n").unwrap();
    std::fs::write(pictures.join("sub").join("img2.jpg"), "two\n").unwrap();
    succeed(&["put", text(&store), text(&pictures)]);
    let store_names = succeed(&["run", text(&store), "sha256", "pics:*"]);
    assert!(store_names.contains("  pics:sub:img2.jpg"), "{store_names}");
    let sums = succeed(&["run", text(&store), "sha256", "--names", "path", "pics:*"]);
    assert!(sums.contains("  pics/sub/img2.jpg"), "{sums}");
    let fetched = folder.join("fetched");
    std::fs::create_dir_all(&fetched).unwrap();
    succeed(&["get", "-r", text(&store), "pics", text(&fetched)]);
    std::fs::write(fetched.join("SUMS"), &sums).unwrap();
    if !flashpipe_testkit::tools::programs_or_skip(
        "digests_named_as_paths_check_after_a_recursive_get",
        &["sha256sum"],
    ) {
        return;
    }
    let check = std::process::Command::new("sha256sum")
        .args(["--check", "SUMS"])
        .current_dir(&fetched)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "sha256sum --check: {}{}",
        String::from_utf8_lossy(&check.stdout),
        stderr_of(&check)
    );
}

#[test]
fn kernel_options_are_spelled_alike_in_run_and_kernels_run() {
    let (folder, store) = folder_with_store("shell-options", "16MiB");
    let local = folder.join("lines.txt");
    std::fs::write(&local, "apple\nbanana\napricot\n").unwrap();
    succeed(&["put", text(&store), text(&local)]);
    for options in [
        vec!["pattern=ap", "literal=true"],
        vec!["-o", "pattern=ap", "-o", "literal=true"],
    ] {
        let mut run = vec!["run", text(&store), "grep"];
        run.extend(&options);
        run.push("lines.txt");
        assert_eq!(
            succeed(&run),
            "lines.txt:1:apple\nlines.txt:3:apricot\n",
            "{run:?}"
        );
        let mut kernels = vec!["kernels", "run", "grep"];
        kernels.extend(&options);
        kernels.push(text(&local));
        assert!(
            succeed(&kernels).contains("\"matching_line_count\":2"),
            "{kernels:?}"
        );
    }
    let nothing = flashpipe(&["run", text(&store), "grep", "pattern=cherry", "lines.txt"]);
    assert_eq!(nothing.status.code(), Some(1), "no match exits 1, as grep");
    assert!(nothing.stdout.is_empty());
    assert!(!String::from_utf8_lossy(&nothing.stderr).contains("error"));
    check_fails(
        &["run", text(&store), "no-such-kernel", "lines.txt"],
        "sha256",
    );
}

#[test]
fn sim_presets_lists_every_preset_with_its_source() {
    let listing = succeed(&["sim", "presets"]);
    for name in ["minflash", "minflash-rack", "rad", "tlc"] {
        assert!(
            listing.lines().any(|line| line.starts_with(name)),
            "{listing}"
        );
    }
    assert!(listing.contains("Li et al."), "{listing}");
    let json: Value = serde_json::from_str(&succeed(&["sim", "presets", "--json"])).unwrap();
    assert_eq!(json.as_array().unwrap().len(), 4);
}

#[test]
fn mkfs_reads_device_paths_relative_to_the_working_directory() {
    let folder = fresh_folder("shell-mkfs-paths");
    std::fs::create_dir_all(folder.join("s7")).unwrap();
    std::fs::create_dir_all(folder.join("elsewhere")).unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_flashpipe"))
        .args(command_line(
            "mkfs --devices s7/a.img,elsewhere/b.img --size 8MiB s7/st.toml",
            &[],
        ))
        .current_dir(&folder)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr_of(&output));
    assert!(folder.join("s7").join("a.img").exists());
    assert!(folder.join("elsewhere").join("b.img").exists());
    assert!(!folder.join("s7").join("s7").exists());
    let recorded = std::fs::read_to_string(folder.join("s7").join("st.toml")).unwrap();
    assert!(recorded.contains("\"a.img\""), "{recorded}");
    assert!(
        recorded.contains(text(&folder.join("elsewhere").join("b.img"))),
        "{recorded}"
    );
    // The store file is read from anywhere: its paths are relative to itself.
    let store = folder.join("s7").join("st.toml");
    std::fs::write(folder.join("f.txt"), b"f\n").unwrap();
    succeed(&["put", text(&store), text(&folder.join("f.txt"))]);
    assert_eq!(succeed(&["cat", text(&store), "f.txt"]), "f\n");
}

#[test]
#[ignore = "data test: needs ../shared/data/udhr (scripts/test-data runs it)"]
fn train_langid_takes_all_the_data_and_json() {
    let Some(udhr) = optional_shared_folder(env!("CARGO_MANIFEST_DIR"), "udhr") else {
        return;
    };
    let folder = fresh_folder("shell-train-all");
    let profiles = folder.join("profiles.bin");
    let report: Value = serde_json::from_str(&succeed(&command_line(
        "kernels train-langid --udhr {} --max-languages 3 --train-fraction 1.0 --out {} --json",
        &[text(&udhr), text(&profiles)],
    )))
    .unwrap();
    assert_eq!(report["languages"], 3);
    assert!(profiles.exists());
    check_fails(
        &command_line(
            "kernels eval-langid --udhr {} --train-fraction 1",
            &[text(&udhr)],
        ),
        "held out",
    );
}
