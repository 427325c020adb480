//! An ordinary Linux file system on a flashpipe NBD export, and fio's own `nbd` ioengine
//! (libnbd) as a client: `nbdfuse` exposes the export as a file, `mkfs.ext4` formats
//! it, `mount -o loop` mounts it, files are written and read back, `umount`, and
//! `fsck.ext4 -f -n` finds it clean; fio writes random 4 KiB blocks many in flight and
//! verifies every one. Skips, with a printed message, without the tools, without root,
//! or without `/dev/fuse`.

mod common;

use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

use common::{pattern_bytes, run_ok, run_tool, tool_or_skip, wait_until, TestServer};

const MIB: u64 = 1024 * 1024;

/// How long nbdfuse may take to write its pid file (to bring its mount up).
const NBDFUSE_READY: Duration = Duration::from_secs(30);

struct FuseMount {
    mount_point: std::path::PathBuf,
    child: Child,
}

impl Drop for FuseMount {
    fn drop(&mut self) {
        let _ = Command::new("fusermount3")
            .arg("-u")
            .arg(&self.mount_point)
            .status();
        let _ = self.child.wait();
    }
}

struct LoopMount {
    mount_point: std::path::PathBuf,
    mounted: bool,
}

impl Drop for LoopMount {
    fn drop(&mut self) {
        if self.mounted {
            let _ = Command::new("umount").arg(&self.mount_point).status();
        }
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn start_nbdfuse(server: &TestServer, uri: &str) -> FuseMount {
    let mount_point = server.scratch("fuse");
    std::fs::create_dir_all(&mount_point).unwrap();
    let pid_file = server.scratch("nbdfuse.pid");
    let child = Command::new("nbdfuse")
        .arg("-P")
        .arg(&pid_file)
        .arg(&mount_point)
        .arg(uri)
        .spawn()
        .expect("nbdfuse starts");
    let mount = FuseMount { mount_point, child };
    assert!(
        wait_until(NBDFUSE_READY, || pid_file.exists()),
        "nbdfuse never wrote its pid file {}",
        pid_file.display()
    );
    mount
}

#[test]
fn ext4_on_a_flashpipe_export_through_nbdfuse_is_clean_after_files_are_written() {
    let tools = [
        "nbdfuse",
        "fusermount3",
        "mkfs.ext4",
        "fsck.ext4",
        "mount",
        "umount",
        "timeout",
    ];
    if !tool_or_skip("ext4_on_an_export", &tools) {
        return;
    }
    if !is_root() || !Path::new("/dev/fuse").exists() || !Path::new("/dev/loop-control").exists() {
        flashpipe_testkit::tools::skip(
            "ext4_on_an_export",
            "needs root, /dev/fuse and /dev/loop-control",
        );
        return;
    }
    let server = TestServer::ram(&[("fs", 48 * MIB)]);
    let fuse = start_nbdfuse(&server, &server.unix_uri("fs"));
    let image = fuse.mount_point.join("nbd");
    let image_text = image.to_str().unwrap();
    assert_eq!(std::fs::metadata(&image).unwrap().len(), 48 * MIB);
    run_ok("mkfs.ext4", &["-q", "-F", image_text]);
    let mount_point = server.scratch("ext4");
    std::fs::create_dir_all(&mount_point).unwrap();
    let mount_text = mount_point.to_str().unwrap().to_string();
    let mut loop_mount = LoopMount {
        mount_point: mount_point.clone(),
        mounted: false,
    };
    run_ok("mount", &["-o", "loop", image_text, &mount_text]);
    loop_mount.mounted = true;
    let mut files = Vec::new();
    for index in 0..8u64 {
        let bytes = pattern_bytes(100 + index, (index as usize + 1) * 300_000);
        let path = mount_point.join(format!("file{index}"));
        std::fs::write(&path, &bytes).unwrap();
        files.push((path, bytes));
    }
    std::fs::create_dir(mount_point.join("folder")).unwrap();
    std::fs::write(mount_point.join("folder/small"), b"flashpipe over NBD\n").unwrap();
    run_ok("sync", &[]);
    run_ok("umount", &[&mount_text]);
    loop_mount.mounted = false;
    let fsck = run_tool("fsck.ext4", &["-f", "-n", image_text]);
    assert_eq!(
        fsck.status.code(),
        Some(0),
        "fsck.ext4 -f -n: {}{}",
        String::from_utf8_lossy(&fsck.stdout),
        String::from_utf8_lossy(&fsck.stderr)
    );
    run_ok("mount", &["-o", "loop,ro", image_text, &mount_text]);
    loop_mount.mounted = true;
    for (path, bytes) in &files {
        assert!(
            std::fs::read(path).unwrap() == *bytes,
            "{} reads back",
            path.display()
        );
    }
    run_ok("umount", &[&mount_text]);
    loop_mount.mounted = false;
    drop(fuse);
}

#[test]
fn fio_nbd_engine_writes_and_verifies_random_blocks() {
    if !tool_or_skip("fio_nbd_verify", &["fio"]) {
        return;
    }
    let engines = run_tool("fio", &["--enghelp"]);
    if !String::from_utf8_lossy(&engines.stdout).contains("nbd") {
        flashpipe_testkit::tools::skip(
            "fio_nbd_verify",
            "this fio was built without the nbd ioengine",
        );
        return;
    }
    let server = TestServer::ram(&[("disk", 16 * MIB)]);
    for uri in [server.tcp_uri("disk"), server.unix_uri("disk")] {
        let uri_argument = format!("--uri={uri}");
        let output = run_ok(
            "fio",
            &[
                "--name=verify",
                "--ioengine=nbd",
                &uri_argument,
                "--rw=randwrite",
                "--bs=4k",
                "--size=8m",
                "--iodepth=32",
                "--verify=crc32c",
                "--do_verify=1",
                "--verify_fatal=1",
                "--verify_state_save=0",
                "--randseed=15",
                "--output-format=terse",
            ],
        );
        let fields: Vec<&str> = output.trim().split(';').collect();
        assert!(fields.len() > 5, "fio's terse output: {output}");
        assert_eq!(fields[4], "0", "fio reports error 0: {output}");
    }
}
