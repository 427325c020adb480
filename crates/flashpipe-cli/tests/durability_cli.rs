//! Nothing acknowledged is lost, and a failed command changes nothing (issue #10), through
//! the `flashpipe` binary: one owner per store (two commands at once: one fails naming the
//! holder, or both run with `--wait`), atomic put, rm, mv, cp and `run --output`, mkfs that
//! refuses a device named twice or holding a store and cleans up after itself, and a FIFO
//! refused by `put` without blocking. Every failure case checks that the store's device
//! files are byte-identical before and after (where the command fails before writing) or
//! that the committed state is unchanged (a put that ran out of space had written data
//! blocks into free space, which no commit references).

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Child;

use common::{
    check_fails, command_line, file_names, flashpipe, fresh_folder, mkfs, spawn_flashpipe, succeed,
    text, TestFolder,
};

const DEVICES: [&str; 2] = ["a.img", "b.img"];

/// A store of two 8 MiB file devices in `folder`.
fn make_store(folder: &Path) -> PathBuf {
    let store = folder.join("s.toml");
    mkfs(&store, &DEVICES.join(","), &["--size", "8MiB"]);
    store
}

/// A fresh folder named `name` and the store [`make_store`] makes in it.
fn folder_and_store(name: &str) -> (TestFolder, PathBuf) {
    let folder = fresh_folder(name);
    let store = make_store(&folder);
    (folder, store)
}

/// Every device file of a store in `folder`, byte for byte.
fn device_bytes(folder: &Path) -> Vec<Vec<u8>> {
    DEVICES
        .iter()
        .map(|name| std::fs::read(folder.join(name)).unwrap())
        .collect()
}

fn assert_devices_unchanged(folder: &Path, before: &[Vec<u8>], what: &str) {
    assert!(
        device_bytes(folder) == before,
        "{what} changed the store's device files"
    );
}

/// A file of `size_bytes` whose bytes depend on `seed`.
fn pattern(size_bytes: usize, seed: u8) -> Vec<u8> {
    (0..size_bytes)
        .map(|index| {
            (index as u32)
                .wrapping_mul(31)
                .wrapping_add(u32::from(seed)) as u8
        })
        .collect()
}

fn write_local(folder: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = folder.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Writes `bytes` to the local file `name` of `folder` and puts it into `store`.
fn put_local(folder: &Path, store: &Path, name: &str, bytes: &[u8]) {
    let local = write_local(folder, name, bytes);
    succeed(&["put", text(store), text(&local)]);
}

fn stored_bytes(store: &Path, name: &str) -> Vec<u8> {
    common::succeed_bytes(&["cat", text(store), name])
}

fn commit_sequence(store: &Path) -> u64 {
    let json: serde_json::Value =
        serde_json::from_str(&succeed(&["df", text(store), "--json"])).unwrap();
    json["commit_sequence"].as_u64().unwrap()
}

fn assert_fsck_clean(store: &Path) {
    let report = succeed(&["fsck", text(store)]);
    assert!(report.contains("clean"), "{report}");
}

/// Waits for a child; returns whether it succeeded and its standard error.
fn finish(child: Child) -> (bool, String) {
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{stderr}");
    (output.status.success(), stderr)
}

/// A command that lost the race must say who holds the store, and change nothing.
fn assert_refused_for_holder(stderr: &str) {
    assert!(
        stderr.contains("is in use by pid") && stderr.contains("--wait"),
        "a refused opener names the holder: {stderr}"
    );
}

#[test]
fn two_puts_at_once_lose_nothing() {
    let (folder, store) = folder_and_store("durability-two-puts");
    let mut expected: Vec<(String, Vec<u8>)> = Vec::new();
    for round in 0..4u8 {
        let first_name = format!("first-{round}");
        let second_name = format!("second-{round}");
        let first = write_local(&folder, &first_name, &pattern(300_000, round));
        let second = write_local(&folder, &second_name, &pattern(200_000, round + 100));
        let wait = round % 2 == 1;
        let spawn_put = |path: &Path| {
            let mut arguments = vec!["put", text(&store), text(path)];
            if wait {
                arguments.push("--wait");
            }
            spawn_flashpipe(&arguments)
        };
        let first_child = spawn_put(&first);
        let second_child = spawn_put(&second);
        for ((succeeded, stderr), (name, path)) in [finish(first_child), finish(second_child)]
            .into_iter()
            .zip([(first_name, first), (second_name, second)])
        {
            if succeeded {
                expected.push((name, std::fs::read(path).unwrap()));
            } else {
                assert!(!wait, "with --wait both puts succeed: {stderr}");
                assert_refused_for_holder(&stderr);
            }
        }
        let names = file_names(&store);
        for (name, bytes) in &expected {
            assert!(names.contains(name), "round {round}: {name} was lost");
            assert!(
                stored_bytes(&store, name) == *bytes,
                "round {round}: {name}"
            );
        }
        assert_eq!(names.len(), expected.len(), "round {round}: {names:?}");
        assert_fsck_clean(&store);
    }
}

#[test]
fn put_and_rm_at_once_leave_one_of_the_two_orders() {
    let (folder, store) = folder_and_store("durability-put-rm");
    for round in 0..3u8 {
        let old = write_local(&folder, "old", &pattern(100_000, round));
        let new_name = format!("new-{round}");
        let new = write_local(&folder, &new_name, &pattern(150_000, round));
        succeed(&["put", text(&store), text(&old), "--force"]);
        let put = spawn_flashpipe(&["put", text(&store), text(&new), "--wait"]);
        let rm = spawn_flashpipe(&["rm", text(&store), "old", "--wait"]);
        let (put_ok, put_stderr) = finish(put);
        let (rm_ok, rm_stderr) = finish(rm);
        assert!(put_ok && rm_ok, "{put_stderr} {rm_stderr}");
        let names = file_names(&store);
        assert!(!names.contains(&"old".to_string()), "{names:?}");
        assert!(stored_bytes(&store, &new_name) == std::fs::read(&new).unwrap());
        assert_fsck_clean(&store);
    }
}

/// `put --special FIFO` holds the store's lock while it waits for a writer: a second
/// opener is refused naming it, or waits with `--wait`.
#[test]
fn a_second_opener_is_refused_naming_the_holder_or_waits() {
    let (folder, store) = folder_and_store("durability-holder");
    let fifo = folder.join("fifo");
    make_fifo(&fifo);
    let before = device_bytes(&folder);
    let holder = spawn_flashpipe(&command_line(
        "put {} {} --special --as piped",
        &[text(&store), text(&fifo)],
    ));
    let (holder, mut writer) = open_fifo_writer(holder, &fifo);
    let refused = flashpipe(&["ls", text(&store)]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert_refused_for_holder(&stderr);
    assert!(
        stderr.contains("put"),
        "the holder's command is named: {stderr}"
    );
    check_fails(&["rm", text(&store), "anything"], "is in use by pid");
    assert_devices_unchanged(&folder, &before, "a refused opener");
    let waiting = spawn_flashpipe(&["ls", text(&store), "--wait"]);
    writer.write_all(b"through the pipe").unwrap();
    drop(writer);
    let (holder_ok, holder_stderr) = finish(holder);
    assert!(holder_ok, "{holder_stderr}");
    let (waited_ok, waited_stderr) = finish(waiting);
    assert!(waited_ok, "{waited_stderr}");
    assert_eq!(stored_bytes(&store, "piped"), b"through the pipe");
}

fn make_fifo(path: &Path) {
    let name = std::ffi::CString::new(text(path)).unwrap();
    // SAFETY: mkfifo with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
}

/// Opens `fifo` for writing once `child` has opened it for reading (without blocking: a
/// child that exits first fails the test instead of hanging it).
fn open_fifo_writer(mut child: Child, fifo: &Path) -> (Child, std::fs::File) {
    use std::os::unix::fs::OpenOptionsExt;
    loop {
        let opened = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(fifo);
        if let Ok(file) = opened {
            return (child, file);
        }
        if let Some(status) = child.try_wait().unwrap() {
            let (_, stderr) = finish(child);
            panic!("the FIFO's reader exited ({status}) before opening it: {stderr}");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[test]
fn put_of_a_fifo_is_refused_without_blocking() {
    let (folder, store) = folder_and_store("durability-fifo");
    let fifo = folder.join("fifo");
    make_fifo(&fifo);
    let before = device_bytes(&folder);
    let mut child = spawn_flashpipe(&["put", text(&store), text(&fifo)]);
    // A hang guard, not a timing assertion: a put that blocks on the FIFO is killed
    // after a generous while so the suite fails instead of hanging.
    let mut polls = 0;
    while child.try_wait().unwrap().is_none() {
        polls += 1;
        if polls > 6000 {
            child.kill().unwrap();
            panic!("put of a FIFO blocked");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let (succeeded, stderr) = finish(child);
    assert!(!succeeded);
    assert!(
        stderr.contains("FIFO") && stderr.contains("--special"),
        "{stderr}"
    );
    assert_devices_unchanged(&folder, &before, "put of a FIFO");
}

#[test]
fn a_put_that_runs_out_of_space_commits_nothing() {
    let (folder, store) = folder_and_store("durability-full");
    let old = pattern(3_000_000, 1);
    put_local(&folder, &store, "kept", &old);
    let commit_before = commit_sequence(&store);
    let huge = write_local(&folder, "huge", &pattern(14_000_000, 2));
    check_fails(
        &["put", text(&store), text(&huge), "--as", "kept", "--force"],
        "no space",
    );
    let small = write_local(&folder, "small", &pattern(1000, 3));
    check_fails(
        &["put", text(&store), text(&small), text(&huge)],
        "no space",
    );
    assert_eq!(
        file_names(&store),
        ["kept"],
        "no partial file, no temporary"
    );
    assert!(stored_bytes(&store, "kept") == old, "the old file is whole");
    assert_eq!(commit_sequence(&store), commit_before, "nothing committed");
    assert_fsck_clean(&store);
}

#[test]
fn put_replaces_an_existing_file_only_with_force() {
    let (folder, store) = folder_and_store("durability-force");
    put_local(&folder, &store, "file", &pattern(50_000, 1));
    let before = device_bytes(&folder);
    let second = write_local(&folder, "file", &pattern(70_000, 2));
    check_fails(&["put", text(&store), text(&second)], "--force");
    assert_devices_unchanged(&folder, &before, "a put refused for an existing name");
    assert!(stored_bytes(&store, "file") == pattern(50_000, 1));
    succeed(&["put", text(&store), text(&second), "--force"]);
    assert!(stored_bytes(&store, "file") == pattern(70_000, 2));
    assert_eq!(file_names(&store), ["file"]);
    assert_fsck_clean(&store);
}

#[test]
fn rm_with_a_repeated_or_missing_name_removes_nothing() {
    let (folder, store) = folder_and_store("durability-rm");
    for name in ["x", "y"] {
        put_local(&folder, &store, name, name.as_bytes());
    }
    let before = device_bytes(&folder);
    check_fails(&["rm", text(&store), "x", "y", "x"], "named more than once");
    assert_devices_unchanged(&folder, &before, "rm x y x");
    check_fails(&["rm", text(&store), "x", "missing", "y"], "missing");
    assert_devices_unchanged(&folder, &before, "rm with a missing name");
    assert_eq!(file_names(&store), ["x", "y"]);
    succeed(&["rm", text(&store), "x", "y"]);
    assert!(file_names(&store).is_empty());
}

#[test]
fn mv_and_cp_replace_only_with_force() {
    let (folder, store) = folder_and_store("durability-mv-cp");
    for (name, seed) in [("a", 1), ("b", 2)] {
        put_local(&folder, &store, name, &pattern(40_000, seed));
    }
    let before = device_bytes(&folder);
    check_fails(&["mv", text(&store), "a", "b"], "--force");
    check_fails(&["cp", text(&store), "a", "b"], "--force");
    check_fails(&["mv", text(&store), "missing", "c"], "missing");
    assert_devices_unchanged(&folder, &before, "a refused mv or cp");
    succeed(&["cp", text(&store), "a", "b", "--force"]);
    assert!(stored_bytes(&store, "b") == pattern(40_000, 1));
    put_local(&folder, &store, "c", &pattern(10_000, 3));
    succeed(&["mv", text(&store), "c", "a", "--force"]);
    assert_eq!(file_names(&store), ["a", "b"]);
    assert!(stored_bytes(&store, "a") == pattern(10_000, 3));
    assert_fsck_clean(&store);
}

#[test]
fn run_output_commits_whole_or_not_at_all() {
    let (folder, store) = folder_and_store("durability-run");
    put_local(&folder, &store, "text.txt", b"not a picture\n");
    let before = device_bytes(&folder);
    check_fails(
        &["run", "--output", "e1", text(&store), "sobel", "text.txt"],
        "wrong input format",
    );
    assert_devices_unchanged(&folder, &before, "a failed run");
    assert_eq!(file_names(&store), ["text.txt"]);
    let key = "key=0011223344556677";
    check_fails(
        &command_line(
            "run --output text.txt {} des-ecb {} text.txt",
            &[text(&store), key],
        ),
        "input",
    );
    put_local(&folder, &store, "data", &pattern(20_000, 4));
    let before = device_bytes(&folder);
    check_fails(
        &command_line(
            "run --output text.txt {} des-ecb {} data",
            &[text(&store), key],
        ),
        "--force",
    );
    assert_devices_unchanged(&folder, &before, "a run refused for an existing output");
    assert_eq!(stored_bytes(&store, "text.txt"), b"not a picture\n");
    let ran = succeed(&command_line(
        "run --output sealed {} des-ecb {} data",
        &[text(&store), key],
    ));
    assert!(ran.contains("-> sealed"), "{ran}");
    succeed(&command_line(
        "run --output text.txt --force {} des-ecb {} data",
        &[text(&store), key],
    ));
    assert!(stored_bytes(&store, "text.txt") == stored_bytes(&store, "sealed"));
    assert_eq!(file_names(&store), ["data", "sealed", "text.txt"]);
    assert_fsck_clean(&store);
}

#[test]
fn mkfs_refuses_a_device_named_twice() {
    let folder = fresh_folder("durability-mkfs-twice");
    let store = folder.join("s.toml");
    for list in ["a.img,a.img", "a.img,./a.img"] {
        check_fails(
            &["mkfs", "--devices", list, "--size", "8MiB", text(&store)],
            "same file",
        );
    }
    std::fs::write(folder.join("real.img"), b"").unwrap();
    std::os::unix::fs::symlink(folder.join("real.img"), folder.join("link.img")).unwrap();
    check_fails(
        &command_line(
            "mkfs --devices real.img,link.img --size 8MiB {}",
            &[text(&store)],
        ),
        "same file",
    );
    assert!(!store.exists() && !folder.join("a.img").exists());
    assert_eq!(std::fs::metadata(folder.join("real.img")).unwrap().len(), 0);
}

#[test]
fn mkfs_refuses_a_device_holding_a_store_unless_forced() {
    let (folder, store) = folder_and_store("durability-mkfs-over");
    put_local(&folder, &store, "kept", b"precious");
    let before = device_bytes(&folder);
    let other = folder.join("other.toml");
    check_fails(
        &["mkfs", "--devices", "b.img", "--size", "8MiB", text(&other)],
        "holds a flashpipe store",
    );
    assert_devices_unchanged(&folder, &before, "a refused mkfs");
    assert!(!other.exists());
    assert_eq!(stored_bytes(&store, "kept"), b"precious");
    succeed(&["mkfs", "--devices", "c.img", "--size", "8MiB", text(&other)]);
    std::fs::remove_file(&other).unwrap();
    mkfs(&other, "c.img", &["--size", "8MiB", "--force"]);
}

#[test]
fn a_failed_mkfs_removes_what_it_created_and_the_retry_works() {
    let folder = fresh_folder("durability-mkfs-retry");
    let store = folder.join("s.toml");
    std::fs::write(folder.join("kept.img"), vec![0u8; 2 << 20]).unwrap();
    check_fails(
        &command_line(
            "mkfs --devices kept.img,new.img --size 2MiB --block-size 1MiB --stripe-unit 1MiB {}",
            &[text(&store)],
        ),
        "too small",
    );
    assert!(
        !folder.join("new.img").exists(),
        "the created device is removed"
    );
    assert!(
        folder.join("kept.img").exists(),
        "a device that was there stays"
    );
    assert!(!store.exists());
    mkfs(&store, "kept.img,new.img", &["--size", "2MiB"]);
    assert_fsck_clean(&store);
}

#[test]
fn read_only_commands_write_nothing_and_run_together() {
    let (folder, store) = folder_and_store("durability-read-only");
    put_local(&folder, &store, "file", &pattern(90_000, 5));
    let before = device_bytes(&folder);
    let fetched = folder.join("fetched");
    let readers: Vec<Child> = [
        vec!["ls", text(&store)],
        vec!["stat", text(&store), "file"],
        vec!["cat", text(&store), "file"],
        vec!["get", text(&store), "file", text(&fetched)],
        vec!["df", text(&store)],
        vec!["fsck", text(&store)],
    ]
    .iter()
    .map(|arguments| spawn_flashpipe(arguments))
    .collect();
    for reader in readers {
        let (succeeded, stderr) = finish(reader);
        assert!(succeeded, "shared locks let readers run together: {stderr}");
    }
    assert!(std::fs::read(&fetched).unwrap() == pattern(90_000, 5));
    assert_devices_unchanged(&folder, &before, "read-only commands");
}
