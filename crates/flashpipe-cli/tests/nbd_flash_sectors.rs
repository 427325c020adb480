//! An emulated flash export takes what every SSD takes: 512-byte and 4 KiB requests
//! (the FTL's read-merge-write), advertised as a 512-byte minimum block with the page
//! as the preferred one; fio's 4 KiB random read/write with verification passes over
//! `flashpipe nbd serve`, qemu-io's 512-byte writes read back, and mkfs.ext4 formats
//! the export through nbdfuse (the kernel's NBD client is not on this machine's path),
//! the result checked by e2fsck after a restart of the server. A `store:` export of a
//! flash store takes 512-byte requests too. At its stop the server reports each flash
//! export's FTL counters.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{command_line, fresh_folder, stop_with, TestFolder};
use flashpipe_testkit::tools;

/// A folder of the test's own, removed when the test passed.
fn folder(test: &str) -> TestFolder {
    fresh_folder(&format!("nbd-sectors-{test}"))
}

/// Starts `flashpipe nbd serve` exporting `f=flash:minflash:IMAGE` on `socket`.
fn serve(image: &Path, socket: &Path) -> Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_flashpipe"))
        .args(["nbd", "serve", "--export"])
        .arg(format!("f=flash:minflash:{}", image.display()))
        .arg("--socket")
        .arg(socket)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("flashpipe starts");
    let stdout = child.stdout.take().unwrap();
    for line in BufReader::new(stdout).lines() {
        if line.unwrap().contains("ready") {
            break;
        }
    }
    child
}

fn stop(child: Child) {
    stop_with(child, libc::SIGTERM);
}

fn uri(socket: &Path) -> String {
    format!("nbd+unix:///f?socket={}", socket.display())
}

fn run(command: &mut Command) -> String {
    let output = command.output().expect("the tool starts");
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{command:?}: {text}");
    text
}

#[test]
fn the_flash_export_advertises_512_byte_blocks_and_prefers_its_page() {
    if !tools::programs_or_skip("flash export block sizes", &["nbdinfo"]) {
        return;
    }
    let folder = folder("info");
    let socket = folder.join("nbd.sock");
    let server = serve(&folder.join("flash.img"), &socket);
    let text = run(Command::new("nbdinfo").arg(uri(&socket)));
    stop(server);
    assert!(text.contains("block_size_minimum: 512"), "{text}");
    // minflash's page is 8 KiB.
    assert!(text.contains("block_size_preferred: 8192"), "{text}");
}

#[test]
fn a_flash_store_export_takes_512_byte_requests() {
    if !tools::programs_or_skip("flash store export block sizes", &["nbdinfo", "qemu-io"]) {
        return;
    }
    let folder = folder("store");
    let store = folder.join("s.toml");
    tools::stdout_of(
        Command::new(env!("CARGO_BIN_EXE_flashpipe"))
            .current_dir(&folder)
            .args(command_line(
                "mkfs --devices flash:minflash:f.img --size 256MiB",
                &[],
            ))
            .arg(&store),
        "mkfs",
    );
    let socket = folder.join("nbd.sock");
    let mut server = Command::new(env!("CARGO_BIN_EXE_flashpipe"))
        .args(["nbd", "serve", "--export"])
        .arg(format!("f=store:{},rw", store.display()))
        .arg("--socket")
        .arg(&socket)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("flashpipe starts");
    let stdout = server.stdout.take().unwrap();
    for line in BufReader::new(stdout).lines() {
        if line.unwrap().contains("ready") {
            break;
        }
    }
    let info = run(Command::new("nbdinfo").arg(uri(&socket)));
    // The store's first blocks hold its super block: write and read back near the end.
    let text = run(Command::new("qemu-io")
        .args(["-f", "raw"])
        .args([
            "-c",
            "write -P 0x5a 200M 512",
            "-c",
            "read -P 0x5a 200M 512",
        ])
        .arg(uri(&socket)));
    stop(server);
    assert!(info.contains("block_size_minimum: 512"), "{info}");
    assert!(info.contains("block_size_preferred: 8192"), "{info}");
    assert!(!text.contains("failed"), "{text}");
}

#[test]
fn fio_4k_random_read_write_with_verification_passes_on_a_flash_export() {
    if !tools::programs_or_skip("fio on a flash export", &["fio"]) {
        return;
    }
    let folder = folder("fio");
    let socket = folder.join("nbd.sock");
    let server = serve(&folder.join("flash.img"), &socket);
    let text = run(Command::new("fio")
        .args(command_line(
            "--name=sectors --ioengine=nbd --rw=randrw --bs=4k --size=16m \
             --iodepth=8 --verify=crc32c --do_verify=1 --verify_fatal=1",
            &[],
        ))
        .arg(format!("--uri={}", uri(&socket)))
        // fio leaves its verify state file in its working folder: the test's, not the checkout.
        .current_dir(&folder));
    stop(server);
    assert!(text.contains("err= 0"), "{text}");
}

#[test]
fn qemu_io_512_byte_writes_merge_into_pages_and_survive_a_restart() {
    if !tools::programs_or_skip("512-byte writes on a flash export", &["qemu-io"]) {
        return;
    }
    let folder = folder("qemu-io");
    let socket = folder.join("nbd.sock");
    let image = folder.join("flash.img");
    let steps: [&[&str]; 2] = [
        &[
            "-c",
            "write -P 0x11 0 16k",
            "-c",
            "write -P 0x22 512 512",
            "-c",
            "write -P 0x33 7680 1k",
            "-c",
            "discard 12k 512",
            "-c",
            "flush",
        ],
        &[
            "-c",
            "read -P 0x11 0 512",
            "-c",
            "read -P 0x22 512 512",
            "-c",
            "read -P 0x11 1k 6656",
            "-c",
            "read -P 0x33 7680 1k",
            "-c",
            "read -P 0x11 8704 3584",
            "-c",
            "read -P 0 12k 512",
            "-c",
            "read -P 0x11 12800 3584",
        ],
    ];
    for arguments in steps {
        let server = serve(&image, &socket);
        let text = run(Command::new("qemu-io")
            .args(["-f", "raw"])
            .args(arguments)
            .arg(uri(&socket)));
        stop(server);
        assert!(!text.contains("failed"), "{text}");
        assert!(!text.contains("Pattern verification"), "{text}");
    }
}

#[test]
fn the_server_reports_each_flash_exports_ftl_counters_when_it_stops() {
    if !tools::programs_or_skip("flash counters of a flash export", &["qemu-io"]) {
        return;
    }
    let folder = folder("counters");
    let socket = folder.join("nbd.sock");
    let image = folder.join("flash.img");
    let phases: [(&[&str], &str); 2] = [
        (&["-c", "write -P 0x44 0 64k", "-c", "flush"], "(8 pages)"),
        (&["-c", "read -P 0x44 0 64k"], "(0 pages)"),
    ];
    for (arguments, pages_written) in phases {
        let server = serve(&image, &socket);
        run(Command::new("qemu-io")
            .args(["-f", "raw"])
            .args(arguments)
            .arg(uri(&socket)));
        let stderr = stop_with(server, libc::SIGTERM);
        let line = stderr
            .lines()
            .find(|line| line.contains("nbd: export f: flash:"))
            .unwrap_or_else(|| panic!("no counters line: {stderr}"));
        // 64 KiB is 8 minflash pages; the read phase writes none and reads some.
        assert!(line.contains(pages_written), "{line}");
        assert!(line.contains("pages programmed"), "{line}");
        assert!(line.contains("write amplification"), "{line}");
        assert!(!line.contains("{"), "no Debug text: {line}");
        if pages_written == "(0 pages)" {
            assert!(!line.contains(" 0 host reads"), "{line}");
        }
    }
}

/// Waits for nbdfuse's file to appear; false after a few seconds.
fn fuse_file_appears(file: &Path) -> bool {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(10) {
        if file.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[test]
fn mkfs_ext4_formats_a_flash_export_through_nbdfuse() {
    if !tools::programs_or_skip(
        "mkfs.ext4 on a flash export",
        &["nbdfuse", "fusermount3", "mkfs.ext4", "e2fsck"],
    ) {
        return;
    }
    if !Path::new("/dev/fuse").exists() {
        tools::skip("mkfs.ext4 on a flash export", "/dev/fuse is absent");
        return;
    }
    let folder = folder("mkfs");
    let socket = folder.join("nbd.sock");
    let image = folder.join("flash.img");
    let mount = folder.join("mnt");
    std::fs::create_dir_all(&mount).unwrap();
    let fuse_file = mount.join("nbd");
    for (round, program) in [(0, "mkfs.ext4"), (1, "e2fsck")] {
        let server = serve(&image, &socket);
        let mut fuse = Command::new("nbdfuse")
            .arg(&mount)
            .arg(uri(&socket))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("nbdfuse starts");
        if !fuse_file_appears(&fuse_file) {
            let _ = fuse.kill();
            let output = fuse.wait_with_output().unwrap();
            stop(server);
            tools::skip(
                "mkfs.ext4 on a flash export",
                &format!(
                    "nbdfuse could not mount: {}",
                    String::from_utf8_lossy(&output.stderr)
                ),
            );
            return;
        }
        let mut command = Command::new(program);
        if round == 0 {
            command.args(["-F", "-q"]);
        } else {
            command.args(["-f", "-n"]);
        }
        let output = command.arg(&fuse_file).output().unwrap();
        run(Command::new("fusermount3").arg("-u").arg(&mount));
        fuse.wait().unwrap();
        stop(server);
        let text = String::from_utf8_lossy(&output.stdout).into_owned()
            + &String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{program}: {text}");
    }
}
