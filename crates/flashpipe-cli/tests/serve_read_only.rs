//! `flashpipe serve --read-only` with the real binary: the readiness line and its JSON say
//! so; reads go through the server; every change (put, rm, a write, chmod or unlink through
//! a mount) is refused as read-only with nothing changed, down to the device image's bytes;
//! a read-write server beside it is refused naming its pid, and it is refused beside a
//! writer; `--read-only` without a store is a usage error. A mount of such a server is
//! read-only (the kernel answers `EROFS`, so no write is accepted and then lost), and so is
//! `flashpipe mount --read-only` of a store opened in its own process, which holds the
//! store's shared lock: readers run beside it, a writer is refused.
//!
//! The mount tests need /dev/fuse and `fusermount3` (Debian fuse3): without them it prints
//! why and returns, and fails instead under `FLASHPIPE_REQUIRE_TOOLS=1`.

mod common;
mod mount_support;
mod serve_support;

use std::path::Path;

use common::{
    file_store, flashpipe, fresh_folder, start_flashpipe, stop_with, succeed, succeed_bytes, text,
};
use mount_support::{fuse_available, shell, shell_ok, store_and_mount_point, Mounted};

/// Every byte of the store file and of every file in its folder but the server's socket,
/// by name, to compare before and after.
fn folder_bytes(folder: &Path) -> Vec<(String, Vec<u8>)> {
    let mut entries: Vec<(String, Vec<u8>)> = std::fs::read_dir(folder)
        .expect("the test folder")
        .map(|entry| entry.expect("an entry").path())
        .filter(|path| path.is_file())
        .map(|path| {
            let name = path.file_name().expect("a name").to_string_lossy().into();
            (name, std::fs::read(&path).expect("a readable file"))
        })
        .collect();
    entries.sort();
    entries
}

/// A store in `folder` holding `a.txt` ("hello\n").
fn store_with_one_file(folder: &Path) -> std::path::PathBuf {
    let store = file_store(folder, "64MiB");
    let source = folder.join("a.txt");
    std::fs::write(&source, b"hello\n").expect("a source file");
    succeed(&["put", text(&store), text(&source)]);
    std::fs::remove_file(&source).expect("the source removed");
    store
}

/// Runs `arguments`, which must fail as refused because the store is read-only.
fn assert_refused_read_only(arguments: &[&str]) {
    let output = flashpipe(arguments);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(77),
        "{arguments:?} is refused as not permitted: {stderr}"
    );
    assert!(
        stderr.contains("read-only") && stderr.contains("nothing changed"),
        "{arguments:?}: {stderr}"
    );
    assert!(!stderr.contains("{ "), "no Debug text: {stderr}");
}

#[test]
fn a_read_only_server_reads_and_refuses_every_change_with_nothing_written() {
    let folder = fresh_folder("serve-read-only");
    let store = store_with_one_file(folder.path());
    let other = folder.path().join("b.txt");
    std::fs::write(&other, b"other\n").expect("a second source");
    let before = folder_bytes(folder.path());
    let server = serve_support::ServerProcess::start(&store, &["--read-only"]);
    assert!(
        server.readiness_line.contains("(read-only)"),
        "the readiness line says read-only: {}",
        server.readiness_line
    );
    assert_eq!(
        succeed_bytes(&["get", text(&store), "a.txt", "-"]),
        b"hello\n"
    );
    assert!(succeed(&["ls", text(&store)]).contains("a.txt"));
    assert_refused_read_only(&["put", text(&store), text(&other)]);
    assert_refused_read_only(&["rm", text(&store), "a.txt"]);
    let beside_socket = folder.path().join("beside.sock");
    let beside = flashpipe(&["serve", text(&store), "--socket", text(&beside_socket)]);
    assert!(!beside.status.success(), "a second server is refused");
    let stderr = String::from_utf8_lossy(&beside.stderr);
    assert!(stderr.contains(&server.pid.to_string()), "{stderr}");
    let exit = server.stop_cleanly();
    assert!(exit.stdout.contains("nothing written"), "{}", exit.stdout);
    assert_eq!(
        folder_bytes(folder.path()),
        before,
        "the store file and the device image are byte for byte as before"
    );
}

#[test]
fn the_json_readiness_line_says_read_only() {
    let folder = fresh_folder("serve-read-only-json");
    let store = store_with_one_file(folder.path());
    let (server, lines) = start_flashpipe(&["serve", "--read-only", "--json", text(&store)]);
    let ready: serde_json::Value =
        serde_json::from_str(lines.last().expect("a readiness line")).expect("JSON");
    assert_eq!(ready["read_only"], true);
    stop_with(server, libc::SIGTERM);
    let (server, lines) = start_flashpipe(&["serve", "--json", text(&store)]);
    let ready: serde_json::Value =
        serde_json::from_str(lines.last().expect("a readiness line")).expect("JSON");
    assert!(ready.get("read_only").is_none(), "{ready}");
    stop_with(server, libc::SIGTERM);
}

#[test]
fn a_read_only_server_is_refused_beside_a_writer_and_needs_a_store() {
    let folder = fresh_folder("serve-read-only-writer");
    let store = store_with_one_file(folder.path());
    let (writer, _lines) = start_flashpipe(&["serve", text(&store)]);
    let refused = flashpipe(&[
        "serve",
        "--read-only",
        text(&store),
        "--socket",
        text(&folder.path().join("r.sock")),
    ]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(stderr.contains(&writer.id().to_string()), "{stderr}");
    stop_with(writer, libc::SIGTERM);
    let usage = flashpipe(&["serve", "--read-only", "--export", "x=ram:1MiB"]);
    assert_eq!(usage.status.code(), Some(2), "{usage:?}");
}

#[test]
fn a_mount_of_a_read_only_server_answers_erofs_with_nothing_changed() {
    if !fuse_available("a mount of a read-only server") {
        return;
    }
    let folder = fresh_folder("serve-read-only-mount");
    let (store, directory) = store_and_mount_point(folder.path());
    let root = folder.path();
    std::fs::write(root.join("d"), b"data\n").expect("a source file");
    succeed(&["put", text(&store), text(&root.join("d"))]);
    let (server, _lines) = start_flashpipe(&["serve", "--read-only", text(&store)]);
    let mount = Mounted::start(&store, &directory, &[]);
    assert_eq!(shell_ok(root, "cat m/d"), "data\n");
    assert_every_change_refused(root);
    mount.stop(libc::SIGTERM);
    stop_with(server, libc::SIGTERM);
    assert_eq!(succeed_bytes(&["get", text(&store), "d", "-"]), b"data\n");
}

/// Each change through the mount at `root`/m is refused with `EROFS`; the tree stays `d`.
fn assert_every_change_refused(root: &Path) {
    for change in [
        "echo x > m/new",
        "echo x >> m/d",
        "chmod 600 m/d",
        "rm m/d",
        "mkdir m/sub",
        "mv m/d m/e",
    ] {
        let output = shell(root, change);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{change} is refused");
        assert!(
            stderr.contains("Read-only file system"),
            "{change}: {stderr}"
        );
    }
    assert_eq!(shell_ok(root, "ls m"), "d\n");
}

#[test]
fn a_read_only_mount_opened_here_holds_the_shared_lock() {
    if !fuse_available("a read-only mount") {
        return;
    }
    let folder = fresh_folder("mount-read-only");
    let (store, directory) = store_and_mount_point(folder.path());
    let root = folder.path();
    std::fs::write(root.join("d"), b"data\n").expect("a source file");
    succeed(&["put", text(&store), text(&root.join("d"))]);
    let before = folder_bytes(root);
    let mount = Mounted::start(&store, &directory, &["--read-only"]);
    assert_eq!(shell_ok(root, "cat m/d"), "data\n");
    assert_every_change_refused(root);
    assert_eq!(succeed_bytes(&["get", text(&store), "d", "-"]), b"data\n");
    let writer = flashpipe(&["rm", text(&store), "d"]);
    assert!(
        !writer.status.success(),
        "a writer is refused beside the mount"
    );
    mount.stop(libc::SIGTERM);
    assert_eq!(folder_bytes(root), before, "nothing written");
}
