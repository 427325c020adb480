//! Mode, owner and modification time through `flashpipe mount`: `chmod`, `chown` and
//! `touch -m -d` are stored in the store and shown again after a remount, opened here and
//! through the store's server; a directory's are kept on its marker; hostile changes
//! (setuid or sticky bits, times before 1970 or past 2262) are refused with nothing changed;
//! a create's or mkdir's mode other than the default is kept; `flashpipe stat` and `ls -l`
//! show what the mount stored.
//!
//! They need /dev/fuse and `fusermount3` (Debian fuse3): without them each test prints why
//! and returns, and fails instead under `FLASHPIPE_REQUIRE_TOOLS=1`.

mod common;
mod mount_support;

use std::path::Path;

use common::{fresh_folder, start_flashpipe, stop_with, succeed, text};
use mount_support::{fuse_available, shell, shell_ok, store_and_mount_point, Mounted};

/// `stat`'s mode (octal), owner ids and modification time (seconds) of `path`.
fn shown(root: &Path, path: &str) -> String {
    shell_ok(root, &format!("stat -c '%a %u:%g %Y' {path}"))
        .trim()
        .to_string()
}

/// The mounting user's ids, as the mount shows an owner never set.
fn own_ids() -> String {
    // SAFETY: getuid and getgid only read the process's credentials.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    format!("{uid}:{gid}")
}

/// Makes file `f` and directory `d` and sets their attributes through the mount.
fn set_attributes(root: &Path) {
    shell_ok(
        root,
        "echo data > m/f && mkdir m/d && chmod 600 m/f && chown 1000:1000 m/f \
         && touch -m -d @1700000000 m/f && chmod 700 m/d && touch -m -d @1600000000 m/d",
    );
}

/// Checks what `set_attributes` set, as `stat` and `ls` show it.
fn assert_attributes(root: &Path) {
    assert_eq!(shown(root, "m/f"), "600 1000:1000 1700000000");
    assert_eq!(shown(root, "m/d"), format!("700 {} 1600000000", own_ids()));
    let listing = shell_ok(root, "ls -ln m");
    assert!(
        listing.contains("-rw------- 1 1000 1000"),
        "the listing shows the stored mode and owner: {listing}"
    );
    assert!(listing.contains("drwx------"), "{listing}");
}

#[test]
fn attributes_survive_a_remount_of_a_store_opened_here() {
    if !fuse_available("attributes through a mount") {
        return;
    }
    let folder = fresh_folder("mount-attributes");
    let (store, directory) = store_and_mount_point(folder.path());
    let root = folder.path();
    let mount = Mounted::start(&store, &directory, &[]);
    set_attributes(root);
    assert_attributes(root);
    // a write forgets a stored time: the file shows its last change again
    shell_ok(
        root,
        "echo x > m/g && touch -m -d @1700000000 m/g && echo more >> m/g",
    );
    let written = shown(root, "m/g");
    assert!(!written.ends_with(" 1700000000"), "{written}");
    // a create's and a mkdir's mode (less the umask) is kept where it is not the default
    shell_ok(
        root,
        "(umask 077 && echo secret > m/secret) && mkdir -m 700 m/private && echo x > m/plain",
    );
    mount.stop(libc::SIGTERM);
    let mount = Mounted::start(&store, &directory, &[]);
    assert_attributes(root);
    assert!(shown(root, "m/secret").starts_with("600 "));
    assert!(shown(root, "m/private").starts_with("700 "));
    assert!(shown(root, "m/plain").starts_with("644 "));
    assert_eq!(shell_ok(root, "cat m/f"), "data\n");
    mount.stop(libc::SIGTERM);
    assert!(succeed(&["fsck", text(&store)]).contains("clean"));
    // the CLI shows what the mount stored, and `-` where nothing is set
    let stat = succeed(&["stat", text(&store), "f", "g"]);
    assert!(
        stat.contains("mode 0600, owner 1000:1000, modified 2023-11-14 22:13:20"),
        "{stat}"
    );
    assert!(stat.contains("mode -, owner -, modified -"), "{stat}");
    let plain = succeed(&["stat", text(&store), "plain"]);
    assert!(
        plain.contains("mode -,"),
        "a default mode is not stored: {plain}"
    );
    let long = succeed(&["ls", "-l", text(&store), "f"]);
    assert!(
        long.contains(" 0600 ") && long.contains(" 1000:1000 ") && long.contains("2023-11-14"),
        "{long}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&succeed(&["stat", text(&store), "f", "--json"])).expect("json");
    assert_eq!(json[0]["mode"], 0o600);
    assert_eq!(json[0]["owner"]["uid"], 1000);
    assert_eq!(json[0]["modified_wall_ns"], 1_700_000_000_000_000_000_i64);
}

#[test]
fn attributes_survive_a_remount_through_the_server() {
    if !fuse_available("attributes through a served mount") {
        return;
    }
    let folder = fresh_folder("mount-attributes-served");
    let (store, directory) = store_and_mount_point(folder.path());
    let root = folder.path();
    let (server, _lines) = start_flashpipe(&["serve", text(&store)]);
    let mount = Mounted::start(&store, &directory, &["--verbose"]);
    set_attributes(root);
    assert_attributes(root);
    mount.stop(libc::SIGTERM);
    let mount = Mounted::start(&store, &directory, &["--verbose"]);
    assert_attributes(root);
    mount.stop(libc::SIGTERM);
    stop_with(server, libc::SIGTERM);
    // what the server committed at its stop, opened here
    let mount = Mounted::start(&store, &directory, &[]);
    assert_attributes(root);
    mount.stop(libc::SIGTERM);
}

#[test]
fn hostile_attribute_changes_are_refused_with_nothing_changed() {
    if !fuse_available("hostile attribute changes") {
        return;
    }
    let folder = fresh_folder("mount-attributes-hostile");
    let (store, directory) = store_and_mount_point(folder.path());
    let root = folder.path();
    let mount = Mounted::start(&store, &directory, &[]);
    set_attributes(root);
    for (line, refusal) in [
        ("chmod 4755 m/f", "Operation not permitted"),
        ("chmod 2700 m/f", "Operation not permitted"),
        ("chmod 1777 m/d", "Operation not permitted"),
        ("touch -m -d @-1 m/f", "Invalid argument"),
        ("touch -m -d @-86400 m/d", "Invalid argument"),
        ("touch -m -d @99999999999 m/f", "Invalid argument"),
        ("chmod 700 m", "Operation not permitted"),
    ] {
        let output = shell(root, line);
        let said = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "`{line}` was let through");
        assert!(said.contains(refusal), "`{line}` said: {said}");
        assert_attributes(root);
    }
    mount.stop(libc::SIGTERM);
    let mount = Mounted::start(&store, &directory, &[]);
    assert_attributes(root);
    mount.stop(libc::SIGTERM);
    assert!(succeed(&["fsck", text(&store)]).contains("clean"));
}
