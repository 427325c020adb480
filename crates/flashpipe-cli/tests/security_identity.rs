//! Who may reach a store and which store a server holds, through the real binary: a
//! server run by another user on a store's socket is refused by the client, a server
//! holding another store (renamed, a new one under the old name) is refused naming both
//! identities, the socket is 0600 whatever the umask and a second user is refused
//! (by the socket's mode, and by its credentials where the mode lets it through), a
//! group given with `--allow-group` gets in, mkfs makes its files 0600 (`--mode` to
//! choose), fsck warns about images open to others, and a store file made before
//! identities opens read-only unchanged and gets one at its first read-write command.
//!
//! The other-user cases run the binary as `nobody` (uid 65534) with `runuser`; where no
//! second uid can be had they print why and return, or fail under
//! `FLASHPIPE_REQUIRE_TOOLS=1`.

mod common;

use std::io::Read;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{
    check_fails, command_line, downgrade_to_version_1, file_store, flashpipe, flashpipe_as_nobody,
    folder_with_store, fresh_folder, mkfs, second_user_available, succeed, succeed_bytes, text,
    TestFolder,
};
use flashpipe_testkit::tools::stdout_of;

const NOBODY_UID: u32 = 65534;

/// A `flashpipe serve` started for a test, killed when dropped.
struct Served {
    child: Child,
    socket: PathBuf,
}

impl Drop for Served {
    fn drop(&mut self) {
        // SAFETY: kill(2) on a child this test started and has not reaped yet.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

/// Starts `flashpipe serve ARGUMENTS` (as `nobody` when asked, under `umask 000` when
/// asked) and waits for its readiness line.
fn serve(arguments: &[&str], as_nobody: bool, umask_zero: bool) -> Served {
    let binary = env!("CARGO_BIN_EXE_flashpipe");
    let mut line = String::from(if umask_zero {
        "umask 000; exec "
    } else {
        "exec "
    });
    if as_nobody {
        line.push_str("runuser -u nobody -- ");
    }
    line.push_str(binary);
    line.push_str(" serve");
    for argument in arguments {
        line.push_str(" '");
        line.push_str(argument);
        line.push('\'');
    }
    let mut child = Command::new("sh")
        .args(["-c", &line])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sh starts");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let lines = flashpipe_testkit::tools::line_channel(stdout);
    std::thread::spawn(move || {
        let mut sink = String::new();
        let _ = stderr.read_to_string(&mut sink);
    });
    let ready = lines
        .recv_timeout(Duration::from_secs(120))
        .expect("flashpipe serve printed its readiness line");
    let socket = ready
        .split(" on socket ")
        .nth(1)
        .and_then(|rest| rest.rsplit_once(" (pid "))
        .map(|(socket, _)| PathBuf::from(socket))
        .unwrap_or_else(|| panic!("readiness line {ready} names no socket"));
    Served { child, socket }
}

fn mode_of(path: &Path) -> u32 {
    std::fs::metadata(path).expect("metadata").mode() & 0o7777
}

/// The names `ls` lists (one a line, the size then the name).
fn names(listing: &str) -> Vec<String> {
    listing
        .lines()
        .filter_map(|line| line.split_whitespace().last().map(String::from))
        .collect()
}

/// The identity line of a store file.
fn identity_of(store: &Path) -> String {
    std::fs::read_to_string(store)
        .expect("store file")
        .lines()
        .find_map(|line| line.strip_prefix("identity = \""))
        .map(|rest| rest.trim_end_matches('"').to_string())
        .expect("the store file has an identity")
}

/// Swaps the member images `a.img` and `b.img` of `folder` (through `t.img`).
fn swap_members(folder: &Path) {
    let (a, b, t) = (
        folder.join("a.img"),
        folder.join("b.img"),
        folder.join("t.img"),
    );
    std::fs::rename(&a, &t).expect("swap");
    std::fs::rename(&b, &a).expect("swap");
    std::fs::rename(&t, &b).expect("swap");
}

/// A fresh folder `name` of mode `mode` holding a 64 MiB file store.
fn store_in_folder_of_mode(name: &str, mode: u32) -> (TestFolder, PathBuf) {
    let folder = fresh_folder(name);
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(mode)).expect("chmod");
    let store = file_store(&folder, "64MiB");
    (folder, store)
}

/// `flashpipe put` of `/etc/hostname` into `store` as the user nobody, which must fail
/// (`what` names the way in); its standard error.
fn nobodys_put_refused(store: &Path, folder: &Path, what: &str) -> String {
    let refused = flashpipe_as_nobody(
        &["put", text(store), "/etc/hostname", "--as", "pwned"],
        folder,
    );
    assert!(!refused.status.success(), "{what}");
    String::from_utf8_lossy(&refused.stderr).into_owned()
}

#[test]
fn a_server_of_another_user_on_the_stores_socket_is_refused() {
    if !second_user_available("a_server_of_another_user_on_the_stores_socket_is_refused") {
        return;
    }
    let (folder, store) = store_in_folder_of_mode("sec-squatter", 0o1777);
    let theirs = folder.join("nob");
    std::fs::create_dir(&theirs).expect("their folder");
    std::os::unix::fs::chown(&theirs, Some(NOBODY_UID), Some(NOBODY_UID)).expect("chown");
    let evil = theirs.join("evil.toml");
    let made = flashpipe_as_nobody(
        &["mkfs", "--devices", "e.img", "--size", "64MiB", text(&evil)],
        &theirs,
    );
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let squatter_socket = text(&store).to_string() + ".sock";
    let server = serve(&[text(&evil), "--socket", &squatter_socket], true, false);
    assert_eq!(server.socket, PathBuf::from(&squatter_socket));

    let secret = folder.join("secret.txt");
    std::fs::write(&secret, b"root's secret").expect("secret");
    check_fails(&["put", text(&store), text(&secret)], "uid 65534");
    check_fails(&["ls", text(&store)], "only its owner or root may serve it");
    drop(server);

    assert!(
        names(&succeed(&["ls", text(&store)])).is_empty(),
        "root's store holds nothing"
    );
    let theirs_listing = flashpipe_as_nobody(&["ls", text(&evil)], &theirs);
    assert!(theirs_listing.status.success());
    assert!(
        names(&String::from_utf8_lossy(&theirs_listing.stdout)).is_empty(),
        "nobody's store received nothing of root's"
    );
}

#[test]
fn a_server_holding_a_renamed_store_is_refused_naming_both_identities() {
    let (folder, store) = folder_with_store("sec-renamed", "64MiB");
    let old_identity = identity_of(&store);
    let server = serve(&[text(&store)], false, false);
    let renamed = folder.join("old.toml");
    std::fs::rename(&store, &renamed).expect("rename the served store");
    mkfs(&store, "b.img", &["--size", "64MiB"]);
    let new_identity = identity_of(&store);
    assert_ne!(old_identity, new_identity);

    let output = flashpipe(&["ls", text(&store)]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "ls of the new store through the old server"
    );
    assert!(stderr.contains(&old_identity), "{stderr}");
    assert!(stderr.contains(&new_identity), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    drop(server);
    assert!(names(&succeed(&["ls", text(&store)])).is_empty());
}

#[test]
fn the_socket_is_private_whatever_the_umask_and_a_group_widens_it() {
    if !second_user_available("the_socket_is_private_whatever_the_umask_and_a_group_widens_it") {
        return;
    }
    let (folder, store) = store_in_folder_of_mode("sec-umask", 0o755);

    let server = serve(&[text(&store)], false, true);
    assert_eq!(
        mode_of(&server.socket) & 0o777,
        0o600,
        "socket mode under umask 000"
    );
    let stderr = nobodys_put_refused(&store, &folder, "nobody's put through a private socket");
    assert!(stderr.contains("ermission"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    // A socket made wider by hand still refuses by the client's credentials.
    std::fs::set_permissions(&server.socket, std::fs::Permissions::from_mode(0o666))
        .expect("chmod");
    let stderr = nobodys_put_refused(&store, &folder, "nobody's put through a widened socket");
    assert!(
        stderr.contains("uid 65534 may not use this store"),
        "{stderr}"
    );
    drop(server);
    assert!(
        names(&succeed(&["ls", text(&store)])).is_empty(),
        "the store is unchanged"
    );

    let server = serve(&[text(&store), "--allow-group", "nogroup"], false, true);
    assert_eq!(
        mode_of(&server.socket) & 0o777,
        0o660,
        "socket mode with a group"
    );
    assert_eq!(
        std::fs::metadata(&server.socket).expect("socket").gid(),
        NOBODY_UID,
        "the socket belongs to the group"
    );
    let admitted = flashpipe_as_nobody(
        &["put", text(&store), "/etc/hostname", "--as", "member"],
        &folder,
    );
    assert!(
        admitted.status.success(),
        "a member of the group gets in: {}",
        String::from_utf8_lossy(&admitted.stderr)
    );
    drop(server);
    assert_eq!(
        names(&succeed(&["ls", text(&store)])),
        vec!["member".to_string()]
    );
    check_fails(
        &["serve", text(&store), "--allow-group", "no-such-group-here"],
        "no group is named no-such-group-here",
    );
}

#[test]
fn mkfs_makes_private_files_and_fsck_warns_about_open_ones() {
    let folder = fresh_folder("sec-mode");
    let store = folder.join("s.toml");
    let binary = env!("CARGO_BIN_EXE_flashpipe");
    stdout_of(
        Command::new("sh")
            .args([
                "-c",
                &format!("umask 022; exec {binary} mkfs --devices a.img,b.img --size 64MiB s.toml"),
            ])
            .current_dir(&folder),
        "mkfs under umask 022",
    );
    for name in ["a.img", "b.img", "s.toml"] {
        assert_eq!(mode_of(&folder.join(name)), 0o600, "{name} under umask 022");
    }
    let wider = folder.join("w.toml");
    mkfs(&wider, "w.img", &["--size", "64MiB", "--mode", "640"]);
    assert_eq!(mode_of(&folder.join("w.img")), 0o640);
    assert_eq!(mode_of(&wider), 0o640);
    check_fails(
        &command_line(
            "mkfs --devices x.img --size 64MiB --mode 999 {}",
            &[text(&folder.join("x.toml"))],
        ),
        "not an octal mode",
    );
    check_fails(
        &command_line(
            "mkfs --devices x.img --size 64MiB --mode 044 {}",
            &[text(&folder.join("x.toml"))],
        ),
        "leaves the owner without read and write",
    );
    assert!(!folder.join("x.img").exists() && !folder.join("x.toml").exists());

    let clean = flashpipe(&["fsck", text(&store)]);
    assert!(clean.status.success());
    assert!(!String::from_utf8_lossy(&clean.stderr).contains("warning"));
    std::fs::set_permissions(folder.join("a.img"), std::fs::Permissions::from_mode(0o644))
        .expect("chmod");
    let warned = flashpipe(&["fsck", text(&store)]);
    let stderr = String::from_utf8_lossy(&warned.stderr);
    assert!(
        warned.status.success(),
        "a warning is not a failure: {stderr}"
    );
    assert!(
        stderr.contains("a.img is readable by users other than its owner (mode 644)"),
        "{stderr}"
    );
}

#[test]
fn a_store_file_without_identity_opens_read_only_unchanged_and_gets_one_when_written() {
    let (folder, store) = folder_with_store("sec-old-store", "64MiB");
    let made_identity = identity_of(&store);
    let made = std::fs::read_to_string(&store).expect("store file");
    let old: String = made
        .lines()
        .filter(|line| !line.starts_with("identity = "))
        .map(|line| {
            if line.starts_with("store_file_version") {
                "store_file_version = 1\n".to_string()
            } else {
                format!("{line}\n")
            }
        })
        .collect();
    std::fs::write(&store, &old).expect("a version-1 store file");

    succeed(&["ls", text(&store)]);
    succeed(&["fsck", text(&store)]);
    assert_eq!(
        std::fs::read_to_string(&store).expect("store file"),
        old,
        "read-only opens change nothing"
    );

    let data = folder.join("d.txt");
    std::fs::write(&data, b"data").expect("data");
    succeed_bytes(&["put", text(&store), text(&data)]);
    let upgraded = std::fs::read_to_string(&store).expect("store file");
    assert!(upgraded.contains("store_file_version = 2"), "{upgraded}");
    let identity = identity_of(&store);
    assert_eq!(
        identity, made_identity,
        "the identity comes back from the member's label"
    );
    assert!(!folder.join("s.toml.identity-upgrade").exists());

    let server = serve(&[text(&store)], false, false);
    assert_eq!(
        names(&succeed(&["ls", text(&store)])),
        vec!["d.txt".to_string()]
    );
    drop(server);
    assert_eq!(identity_of(&store), identity, "the identity stays");
}

#[test]
fn swapped_members_and_a_member_of_another_store_are_named() {
    let folder = fresh_folder("sec-members");
    let store = folder.join("s.toml");
    mkfs(&store, "a.img,b.img", &["--size", "64MiB"]);
    let data = folder.join("d.txt");
    std::fs::write(&data, b"kept").expect("data");
    succeed(&["put", text(&store), text(&data)]);

    swap_members(&folder);
    check_fails(
        &["ls", text(&store)],
        "members out of order: a.img is member 1, b.img is member 0; list them as b.img,a.img",
    );
    check_fails(
        &["put", text(&store), text(&data), "--as", "x"],
        "members out of order",
    );
    swap_members(&folder);
    assert_eq!(
        names(&succeed(&["ls", text(&store)])),
        vec!["d.txt".to_string()]
    );

    let other = folder.join("o.toml");
    mkfs(&other, "c.img,e.img", &["--size", "64MiB"]);
    let text_of_store = std::fs::read_to_string(&store).expect("store file");
    let mixed = folder.join("mixed.toml");
    std::fs::write(&mixed, text_of_store.replace("\"b.img\"", "\"c.img\"")).expect("mixed");
    check_fails(&["ls", text(&mixed)], "c.img is member 0 of another store");
    check_fails(&["ls", text(&mixed)], &identity_of(&other));
}

#[test]
fn a_store_without_member_labels_gets_them_at_its_first_read_write_command() {
    let folder = fresh_folder("sec-unlabelled");
    let store = folder.join("s.toml");
    mkfs(&store, "a.img,b.img", &["--size", "64MiB"]);
    let size = 64u64 << 20;
    for name in ["a.img", "b.img"] {
        let image = folder.join(name);
        assert_eq!(std::fs::metadata(&image).expect("image").len(), size + 4096);
        std::fs::OpenOptions::new()
            .write(true)
            .open(&image)
            .expect("image")
            .set_len(size)
            .expect("an image as made before labels");
    }
    downgrade_to_version_1(&store);
    succeed(&["ls", text(&store)]);
    for name in ["a.img", "b.img"] {
        assert_eq!(
            std::fs::metadata(folder.join(name)).expect("image").len(),
            size,
            "read-only opens write no label"
        );
    }
    let data = folder.join("d.txt");
    std::fs::write(&data, b"data").expect("data");
    succeed(&["put", text(&store), text(&data)]);
    for name in ["a.img", "b.img"] {
        assert_eq!(
            std::fs::metadata(folder.join(name)).expect("image").len(),
            size + 4096,
            "labelled at the first write"
        );
    }
    assert_eq!(identity_of(&store).len(), 36, "a new identity");
    swap_members(&folder);
    check_fails(&["ls", text(&store)], "list them as b.img,a.img");
}
