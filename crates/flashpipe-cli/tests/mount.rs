//! `flashpipe mount` through the real binary, used by programs no one here wrote: coreutils
//! (cp, cat, ls, mkdir, mv, rm, dd), `sqlite3`, `git` and `fio --verify`; a mount through the store's
//! server; SIGKILL of the mount process in the middle of a write (what `fsync` acknowledged
//! is there after a remount, fsck passes); a second local user (nobody) kept out without
//! `--allow-other`; hostile mount points and stores refused with nothing changed.
//!
//! They need /dev/fuse and `fusermount3` (Debian fuse3): without them each test prints why
//! and returns, and fails instead under `FLASHPIPE_REQUIRE_TOOLS=1`.

mod common;
mod mount_support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{
    flashpipe, fresh_folder, second_user_available, start_flashpipe, stop_with, succeed, text,
};
use mount_support::{
    fuse_available, shell, shell_ok, store_and_mount_point, wait_with_deadline, DetachOnDrop,
    Mounted,
};

#[test]
fn coreutils_work_on_a_mount_and_unmount_commits() {
    if !fuse_available("coreutils on a mount") {
        return;
    }
    let folder = fresh_folder("mount-coreutils");
    let (store, directory) = store_and_mount_point(folder.path());
    std::fs::write(folder.path().join("before.txt"), b"put before the mount\n").expect("write");
    succeed(&[
        "put",
        text(&store),
        text(&folder.path().join("before.txt")),
        "--as",
        "a:b:before.txt",
    ]);
    // the default: the command returns once the mount is up, the mount runs on
    let started = succeed(&["mount", text(&store), text(&directory)]);
    assert!(started.contains("mounted on"), "{started}");
    let _detach_on_failure = DetachOnDrop(directory.clone());
    let root = folder.path();
    assert_eq!(
        shell_ok(root, "cat m/a/b/before.txt"),
        "put before the mount\n"
    );
    shell_ok(root, "mkdir m/empty m/docs && cp before.txt m/docs/copy.txt && cp m/docs/copy.txt m/docs/again.txt");
    shell_ok(root, "dd if=/dev/urandom of=big bs=1M count=24 status=none && dd if=big of=m/docs/big bs=256k status=none");
    shell_ok(
        root,
        "cmp big m/docs/big && mv m/docs/again.txt m/docs/moved.txt && rm m/docs/copy.txt",
    );
    shell_ok(root, "mv m/docs m/papers");
    let listing = shell_ok(root, "ls -R m");
    for expected in ["empty", "papers", "moved.txt", "big", "before.txt"] {
        assert!(listing.contains(expected), "{expected} in {listing}");
    }
    assert!(
        !listing.contains("copy.txt") && !listing.contains("docs"),
        "{listing}"
    );
    assert!(
        shell(root, "rmdir m/papers").status.code() != Some(0),
        "a non-empty directory stays"
    );
    shell_ok(
        root,
        "printf 'x' | dd of=m/papers/moved.txt bs=1 seek=3 conv=notrunc status=none",
    );
    assert_eq!(
        shell_ok(root, "cat m/papers/moved.txt"),
        "putxbefore the mount\n"
    );
    shell_ok(root, "truncate -s 3 m/papers/moved.txt");
    assert_eq!(shell_ok(root, "cat m/papers/moved.txt"), "put");
    let refused = shell(root, "touch m/a:b");
    assert!(!refused.status.success(), "a `:` in a name is refused");
    shell_ok(root, "umount m");
    // the unmounted process commits and lets go of the store
    let deadline = Instant::now() + Duration::from_secs(60);
    let names = loop {
        let output = flashpipe(&["ls", text(&store)]);
        if output.status.success() {
            break String::from_utf8_lossy(&output.stdout).into_owned();
        }
        assert!(
            Instant::now() < deadline,
            "the store stays in use after umount"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    for expected in [
        "a:b:before.txt",
        "empty:.flashpipe-dir",
        "papers:big",
        "papers:moved.txt",
    ] {
        assert!(names.contains(expected), "{expected} in {names}");
    }
    assert!(succeed(&["fsck", text(&store)]).contains("clean"));
    let big = common::succeed_bytes(&["cat", text(&store), "papers:big"]);
    assert_eq!(big, std::fs::read(root.join("big")).expect("big"));
}

#[test]
fn sqlite_and_git_work_on_a_mount() {
    if !fuse_available("sqlite3 and git on a mount")
        || !flashpipe_testkit::tools::programs_or_skip(
            "sqlite3 and git on a mount",
            &["sqlite3", "git"],
        )
    {
        return;
    }
    let folder = fresh_folder("mount-programs");
    let (store, directory) = store_and_mount_point(folder.path());
    let root = folder.path();
    let mount = Mounted::start(&store, &directory, &[]);
    let mut inserts = String::from("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT);\nBEGIN;\n");
    for row in 0..1000 {
        inserts.push_str(&format!("INSERT INTO t (v) VALUES ('row {row}');\n"));
    }
    inserts.push_str("COMMIT;\n");
    std::fs::write(root.join("inserts.sql"), inserts).expect("sql");
    shell_ok(root, "sqlite3 m/db.sqlite < inserts.sql");
    assert_eq!(
        shell_ok(root, "sqlite3 m/db.sqlite 'SELECT count(*) FROM t;'").trim(),
        "1000"
    );
    shell_ok(root, "sqlite3 m/db.sqlite \"UPDATE t SET v = 'changed' WHERE id % 2 = 0; PRAGMA integrity_check;\"");
    let git = "git -c user.name=t -c user.email=t@example.com -c init.defaultBranch=main";
    shell_ok(root, &format!("mkdir m/repo && cd m/repo && {git} init -q && echo hello > a.txt && mkdir sub && echo there > sub/b.txt && {git} add . && {git} commit -q -m first"));
    shell_ok(
        root,
        &format!("cd m/repo && echo more >> a.txt && {git} commit -q -am second"),
    );
    assert_eq!(
        shell_ok(root, &format!("cd m/repo && {git} log --format=%s")),
        "second\nfirst\n"
    );
    shell_ok(root, "cd m/repo && git fsck --no-progress 2>&1");
    mount.stop(libc::SIGTERM);
    // reopened from the store, through a new mount
    let mount = Mounted::start(&store, &directory, &[]);
    assert_eq!(
        shell_ok(
            root,
            "sqlite3 m/db.sqlite 'SELECT count(*) FROM t WHERE v = \"changed\";'"
        )
        .trim(),
        "500"
    );
    assert_eq!(shell_ok(root, "cd m/repo && git status --porcelain"), "");
    mount.stop(libc::SIGINT);
    assert!(succeed(&["fsck", text(&store)]).contains("clean"));
}

#[test]
fn a_sigkill_mid_write_keeps_what_fsync_acknowledged() {
    if !fuse_available("SIGKILL of a mount") {
        return;
    }
    let folder = fresh_folder("mount-kill");
    let (store, directory) = store_and_mount_point(folder.path());
    let root = folder.path();
    // rounds killed at different moments of an unsynced write; each round's fsync'd file and
    // every earlier round's must be whole after the kill
    for (round, kill_after_ms) in [(0, 300u64), (1, 40), (2, 900)] {
        shell_ok(
            root,
            &format!("dd if=/dev/urandom of=kept{round} bs=1M count=4 status=none"),
        );
        let mount = Mounted::start(&store, &directory, &[]);
        // dd's conv=fsync: the data is acknowledged by fsync before dd returns
        shell_ok(
            root,
            &format!("dd if=kept{round} of=m/kept{round} bs=1M conv=fsync status=none"),
        );
        let mut writer = Command::new("dd")
            .args([
                "if=/dev/zero",
                "of=m/unsynced",
                "bs=64k",
                "count=100000",
                "status=none",
            ])
            .current_dir(root)
            .stderr(Stdio::null())
            .spawn()
            .expect("dd starts");
        std::thread::sleep(Duration::from_millis(kill_after_ms));
        mount.kill();
        let _ = writer.wait();
        let report = succeed(&["fsck", text(&store)]);
        assert!(report.contains("clean"), "round {round}: {report}");
        for earlier in 0..=round {
            assert_eq!(
                common::succeed_bytes(&["cat", text(&store), &format!("kept{earlier}")]),
                std::fs::read(root.join(format!("kept{earlier}"))).expect("kept"),
                "round {round}: kept{earlier}"
            );
        }
    }
    let mount = Mounted::start(&store, &directory, &[]);
    shell_ok(root, "cmp kept0 m/kept0 && cmp kept2 m/kept2");
    mount.stop(libc::SIGTERM);
}

#[test]
fn closes_share_a_commit_that_fsync_and_unmount_do_at_once() {
    if !fuse_available("commit delay of a mount") {
        return;
    }
    let folder = fresh_folder("mount-commit-delay");
    let (store, directory) = store_and_mount_point(folder.path());
    let root = folder.path();
    let names = || String::from_utf8_lossy(&flashpipe(&["ls", text(&store)]).stdout).into_owned();
    // a close leaves its commit to the committer (a minute away here): a SIGKILL before it
    // loses the closed file, not the one fsync acknowledged before it
    let mount = Mounted::start(&store, &directory, &["--commit-delay-ms", "60000"]);
    shell_ok(root, "echo synced > m/synced.txt && sync m/synced.txt");
    shell_ok(root, "echo closed > m/closed.txt && cat m/closed.txt");
    mount.kill();
    let listed = names();
    assert!(listed.contains("synced.txt"), "{listed}");
    assert!(!listed.contains("closed.txt"), "{listed}");
    assert!(succeed(&["fsck", text(&store)]).contains("clean"));
    // 0: each close commits before it returns
    let mount = Mounted::start(&store, &directory, &["--commit-delay-ms", "0"]);
    shell_ok(root, "echo closed > m/closed.txt");
    mount.kill();
    assert!(names().contains("closed.txt"));
    // the default delay: the unmount commits what closes left
    let mount = Mounted::start(&store, &directory, &[]);
    shell_ok(root, "echo unmounted > m/unmounted.txt");
    mount.stop(libc::SIGTERM);
    assert_eq!(
        succeed(&["cat", text(&store), "unmounted.txt"]),
        "unmounted\n"
    );
    // a delay past a minute, or not a number, is refused before anything is mounted
    for bad in ["60001", "-1", "soon"] {
        let option = format!("--commit-delay-ms={bad}");
        let output = flashpipe(&["mount", text(&store), text(&directory), &option]);
        assert_eq!(output.status.code(), Some(2), "{bad}");
        let message = String::from_utf8_lossy(&output.stderr);
        assert!(message.contains("commit-delay-ms"), "{message}");
        assert!(!message.contains("panicked"), "{message}");
    }
    assert!(shell(root, "mountpoint -q m").status.code() != Some(0));
}

/// Drops the page cache's pages of `file`, so that its next reads go to the mount.
fn drop_cached_pages(file: &std::fs::File) {
    use std::os::fd::AsRawFd;
    // SAFETY: posix_fadvise reads nothing of ours; the descriptor is open.
    let status = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(status, 0, "posix_fadvise");
}

#[test]
fn reads_in_order_see_a_write_made_meanwhile() {
    use std::io::Read;
    use std::os::unix::fs::FileExt;
    if !fuse_available("read-ahead and writes") {
        return;
    }
    let folder = fresh_folder("mount-read-ahead");
    let (store, directory) = store_and_mount_point(folder.path());
    let mount = Mounted::start(&store, &directory, &[]);
    let path = directory.join("f");
    let old: Vec<u8> = (0..16u32 << 20).map(|index| (index % 251) as u8).collect();
    std::fs::write(&path, &old).expect("write");
    let mut reader = std::fs::File::open(&path).expect("open");
    drop_cached_pages(&reader);
    let mut piece = vec![0u8; 1 << 20];
    // reads in order: the kernel's readahead grows to whole 1 MiB requests and the mount
    // sends the next ones ahead of them
    for index in 0..8 {
        reader.read_exact(&mut piece).expect("read");
        assert_eq!(piece, old[index << 20..(index + 1) << 20]);
    }
    // overwrite what lies at and past the reader's position (the mount has reads ahead
    // there, dropped at any change), then read on in order
    let written = 8usize << 20..10usize << 20;
    let writer = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("open");
    writer
        .write_all_at(&vec![b'X'; written.len()], written.start as u64)
        .expect("write");
    drop(writer);
    for index in 8..16usize {
        reader.read_exact(&mut piece).expect("read");
        let offset = index << 20;
        if written.contains(&offset) {
            assert!(
                piece.iter().all(|byte| *byte == b'X'),
                "the write's bytes at {offset}, not the old ones"
            );
        } else {
            assert_eq!(piece, old[offset..offset + (1 << 20)], "at {offset}");
        }
    }
    drop(reader);
    mount.stop(libc::SIGTERM);
    assert!(succeed(&["fsck", text(&store)]).contains("clean"));
}

#[test]
fn fio_verifies_what_it_wrote_on_a_mount() {
    if !fuse_available("fio verify on a mount")
        || !flashpipe_testkit::tools::programs_or_skip("fio verify on a mount", &["fio"])
    {
        return;
    }
    let folder = fresh_folder("mount-fio");
    let (store, directory) = store_and_mount_point(folder.path());
    let root = folder.path();
    let mount = Mounted::start(&store, &directory, &[]);
    // random 4 KiB and 12 KiB writes (unaligned to the FS block size too), then every block
    // read back and checked against its checksum
    for (job, block) in [("aligned", "4k"), ("odd", "12k")] {
        shell_ok(
            root,
            &format!(
                "fio --name={job} --filename=m/{job}.dat --size=16M --rw=randwrite --bs={block} \
                 --verify=crc32c --do_verify=1 --verify_fatal=1 --ioengine=psync --fsync=64 \
                 --output=/dev/null"
            ),
        );
    }
    mount.stop(libc::SIGTERM);
    assert!(succeed(&["fsck", text(&store)]).contains("clean"));
}

#[test]
fn a_mount_goes_through_the_running_server() {
    if !fuse_available("a mount through the server") {
        return;
    }
    let folder = fresh_folder("mount-served");
    let (store, directory) = store_and_mount_point(folder.path());
    let root = folder.path();
    let (server, _lines) = start_flashpipe(&["serve", text(&store)]);
    let mount = Mounted::start(&store, &directory, &["--verbose"]);
    shell_ok(root, "mkdir m/d && echo through the server > m/d/f.txt");
    // another client of the server sees the closed file at once
    assert_eq!(
        succeed(&["cat", text(&store), "d:f.txt"]),
        "through the server\n"
    );
    std::fs::write(root.join("other.txt"), b"from another client\n").expect("write");
    succeed(&[
        "put",
        text(&store),
        text(&root.join("other.txt")),
        "--as",
        "d:other.txt",
    ]);
    assert_eq!(shell_ok(root, "cat m/d/other.txt"), "from another client\n");
    // a SIGKILL of the mount with a file open and unsynced: what reached the server stays
    // in its engine, seen by its other clients, and its stop commits it
    let pid = mount.child.as_ref().expect("running").id();
    shell_ok(
        root,
        &format!("exec 3>m/d/open.txt && printf 'written, not closed' >&3 && kill -KILL {pid}"),
    );
    mount.kill();
    assert_eq!(
        succeed(&["cat", text(&store), "d:open.txt"]),
        "written, not closed"
    );
    stop_with(server, libc::SIGTERM);
    assert!(succeed(&["fsck", text(&store)]).contains("clean"));
    assert_eq!(
        succeed(&["cat", text(&store), "d:open.txt"]),
        "written, not closed"
    );
}

#[test]
fn another_user_is_kept_out_without_allow_other() {
    if !fuse_available("another user and a mount")
        || !second_user_available("another user and a mount")
    {
        return;
    }
    let folder = fresh_folder("mount-other-user");
    std::fs::set_permissions(folder.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let (store, directory) = store_and_mount_point(folder.path());
    let root = folder.path();
    let mount = Mounted::start(&store, &directory, &[]);
    shell_ok(root, "echo secret > m/secret.txt");
    let as_nobody = shell(root, "runuser -u nobody -- cat m/secret.txt");
    assert!(!as_nobody.status.success(), "nobody read the mount");
    mount.stop(libc::SIGTERM);
    // the store's files are 0600: --allow-other is refused, nothing mounted
    let refused = flashpipe(&["mount", text(&store), text(&directory), "--allow-other"]);
    assert_eq!(
        refused.status.code(),
        Some(77),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    assert!(String::from_utf8_lossy(&refused.stderr).contains("lets no one else read"));
    assert!(shell(root, "mountpoint -q m").status.code() != Some(0));
    // with the store's files readable by others, others may read (not write) the mount
    shell_ok(root, "chmod o+r s.toml a.img");
    let mount = Mounted::start(&store, &directory, &["--allow-other"]);
    assert_eq!(
        shell_ok(root, "runuser -u nobody -- cat m/secret.txt"),
        "secret\n"
    );
    assert!(!shell(root, "runuser -u nobody -- touch m/new.txt")
        .status
        .success());
    mount.stop(libc::SIGTERM);
}

/// Runs a mount expected to fail; checks its exit status and message, and that it left
/// `directory` and the store as they were.
fn check_refused(store: &Path, directory: &Path, status: i32, fragment: &str) {
    let before = flashpipe(&["ls", text(store)]);
    let output = flashpipe(&["mount", text(store), text(directory)]);
    let message = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(status), "{message}");
    assert!(message.contains(fragment), "{fragment} in {message}");
    assert!(!message.contains("panicked"), "{message}");
    assert_eq!(
        flashpipe(&["ls", text(store)]).stdout,
        before.stdout,
        "nothing changed"
    );
}

#[test]
fn hostile_mount_points_and_stores_are_refused() {
    if !fuse_available("hostile mounts") {
        return;
    }
    let folder = fresh_folder("mount-hostile");
    let (store, directory) = store_and_mount_point(folder.path());
    let root = folder.path();
    check_refused(&store, &root.join("missing"), 66, "does not exist");
    std::fs::write(root.join("file"), b"x").expect("file");
    check_refused(&store, &root.join("file"), 64, "is not a directory");
    std::fs::create_dir(root.join("full")).expect("dir");
    std::fs::write(root.join("full/inside"), b"x").expect("file");
    check_refused(&store, &root.join("full"), 64, "is not empty");
    assert!(root.join("full/inside").exists());
    let missing_store = flashpipe(&["mount", text(&root.join("none.toml")), text(&directory)]);
    assert!(!missing_store.status.success());
    assert!(String::from_utf8_lossy(&missing_store.stderr).contains("none.toml"));
    assert!(
        shell(root, "mountpoint -q m").status.code() != Some(0),
        "nothing mounted"
    );
    // twice: on the same directory, and the same store elsewhere
    let mount = Mounted::start(&store, &directory, &[]);
    let again = flashpipe(&["mount", text(&store), text(&directory)]);
    assert_eq!(
        again.status.code(),
        Some(73),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert!(String::from_utf8_lossy(&again.stderr).contains("a mount point already"));
    std::fs::create_dir(root.join("second")).expect("dir");
    let elsewhere = flashpipe(&["mount", text(&store), text(&root.join("second"))]);
    assert_eq!(
        elsewhere.status.code(),
        Some(75),
        "{}",
        String::from_utf8_lossy(&elsewhere.stderr)
    );
    assert!(shell(root, "mountpoint -q second").status.code() != Some(0));
    mount.stop(libc::SIGTERM);
}

#[test]
fn hostile_requests_on_a_mount_fail_cleanly() {
    if !fuse_available("hostile requests on a mount") {
        return;
    }
    let folder = fresh_folder("mount-hostile-requests");
    let (store, directory) = store_and_mount_point(folder.path());
    let root = folder.path();
    let mount = Mounted::start(&store, &directory, &[]);
    shell_ok(root, "mkdir -p m/d/e && echo kept > m/d/f");
    for (line, what) in [
        (
            "dd if=/dev/zero of=m/huge bs=1 seek=4611686018427387904 count=1 status=none",
            "a write past what the store holds",
        ),
        (
            "truncate -s 1P m/d/f",
            "a truncation past what the store holds",
        ),
        ("touch m/a:b", "a `:` in a name"),
        ("touch m/$(printf '\\377')", "a name that is not UTF-8"),
        ("mkdir m/.flashpipe-dir", "the marker's name"),
        (
            &format!("touch m/{}", "n".repeat(256)),
            "a name past 255 bytes",
        ),
        (
            &format!("mkdir m/d/{}", "n".repeat(245)),
            "a directory whose marker would pass 255 bytes",
        ),
        ("ln m/d/f m/hard", "a hard link"),
        ("ln -s f m/soft", "a symbolic link"),
        ("mkfifo m/fifo", "a FIFO"),
        ("mv m/d m/d/e/inside", "a directory moved into itself"),
        ("rmdir m/d", "a directory that is not empty"),
        ("chmod 4755 m/d/f", "a setuid bit"),
    ] {
        assert!(
            !shell(root, line).status.success(),
            "{what} was accepted: {line}"
        );
    }
    assert_eq!(
        shell_ok(root, "stat -c %s m/huge").trim(),
        "0",
        "the failed write left the size"
    );
    assert_eq!(shell_ok(root, "cat m/d/f"), "kept\n");
    assert_eq!(shell_ok(root, "ls m/d"), "e\nf\n");
    mount.stop(libc::SIGTERM);
    assert!(succeed(&["fsck", text(&store)]).contains("clean"));
}

#[test]
fn a_deleted_image_under_a_mount_stops_changes() {
    if !fuse_available("a deleted image under a mount") {
        return;
    }
    let folder = fresh_folder("mount-deleted-image");
    let (store, directory) = store_and_mount_point(folder.path());
    let root = folder.path();
    let mut child = Command::new(env!("CARGO_BIN_EXE_flashpipe"))
        .args(["mount", text(&store), text(&directory), "--foreground"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("flashpipe mount starts");
    let deadline = Instant::now() + Duration::from_secs(30);
    while shell(root, "mountpoint -q m").status.code() != Some(0) {
        assert!(Instant::now() < deadline, "the mount did not come up");
        std::thread::sleep(Duration::from_millis(20));
    }
    shell_ok(root, "echo before > m/before.txt");
    std::fs::remove_file(root.join("a.img")).expect("the image is deleted");
    assert!(
        !shell(root, "touch m/after.txt").status.success(),
        "a create after the image was deleted"
    );
    assert!(
        !shell(root, "mkdir m/dir").status.success(),
        "a mkdir after the image was deleted"
    );
    assert_eq!(
        shell_ok(root, "cat m/before.txt"),
        "before\n",
        "reads go on"
    );
    shell_ok(root, "fusermount3 -u m");
    let status = wait_with_deadline(&mut child, Duration::from_secs(60));
    let stderr = common::read_stderr(&mut child);
    assert_eq!(status.code(), Some(74), "{stderr}");
    assert!(stderr.contains("a.img was deleted"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
