//! What a command may destroy or overwrite, through the real binary: `mkfs` refuses
//! devices holding other data (ext4, swap, a GPT, random bytes) unless `--force`, writing
//! nothing when it refuses; every NBD export of a device path takes the store's locks
//! (a served store's device is refused, naming the holder); `get` writes into a device
//! node or FIFO as `cp` does instead of replacing it (`--no-special` refuses); and the
//! smaller refusals: files named `.` and `..`, export names with control characters, a
//! trace without one request, `--plot` in a missing folder.

mod common;

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use common::{
    check_fails, command_line, flashpipe, fresh_folder, mkfs, read_stderr, start_flashpipe,
    stop_with, succeed, succeed_bytes, text,
};

/// Size of every device image of these tests.
const IMAGE_BYTES: u64 = 16 << 20;

/// Whether a test that needs `tool` runs: says why a part is skipped when the tool is
/// missing (a failure under `FLASHPIPE_REQUIRE_TOOLS=1`, as in CI).
fn tool_present(tool: &str, test: &str) -> bool {
    flashpipe_testkit::tools::programs_or_skip(test, &[tool])
}

/// A pseudo-random byte stream from the one seeded generator.
fn pseudo_random_bytes(length: usize) -> Vec<u8> {
    let mut random = flashpipe_base::SplitMix64::new(1);
    (0..length).map(|_| random.next_u64() as u8).collect()
}

/// An image of [`IMAGE_BYTES`] at `path` with `bytes` written at `offset`.
fn image_with(path: &Path, offset: u64, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::create(path).unwrap();
    file.set_len(IMAGE_BYTES).unwrap();
    file.write_all_at(bytes, offset).unwrap();
}

/// mkfs over `image` is refused naming `found` and changes nothing; with `--force` it
/// formats the image.
fn refused_then_forced(folder: &Path, image: &Path, found: &str) {
    let store = folder.join("s.toml");
    let before = std::fs::read(image).unwrap();
    let arguments = [
        "mkfs",
        "--devices",
        text(image),
        "--size",
        "16MiB",
        text(&store),
    ];
    let output = flashpipe(&arguments);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{found}: mkfs should refuse");
    assert!(stderr.contains(found), "{found}: {stderr}");
    assert!(stderr.contains("mkfs would destroy it"), "{stderr}");
    assert!(stderr.contains("--force"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!store.exists(), "{found}: no store file after a refusal");
    assert!(
        std::fs::read(image).unwrap() == before,
        "{found}: the image changed although mkfs refused"
    );
    let mut forced = arguments.to_vec();
    forced.insert(1, "--force");
    succeed(&forced);
    succeed(&["fsck", text(&store)]);
    std::fs::remove_file(&store).unwrap();
}

#[test]
fn mkfs_refuses_devices_holding_other_data_unless_forced() {
    let folder = fresh_folder("security-mkfs");
    let random = folder.join("random.img");
    image_with(&random, 0, &pseudo_random_bytes(1 << 20));
    refused_then_forced(
        &folder,
        &random,
        "unrecognised data (a non-zero byte at offset 0",
    );

    let late_byte = folder.join("late-byte.img");
    image_with(&late_byte, (1 << 20) - 1, &[1]);
    refused_then_forced(&folder, &late_byte, "offset 1048575");

    let mut gpt = vec![0u8; 1024];
    gpt[446 + 4] = 0xEE;
    gpt[510] = 0x55;
    gpt[511] = 0xAA;
    gpt[512..520].copy_from_slice(b"EFI PART");
    let gpt_image = folder.join("gpt.img");
    image_with(&gpt_image, 0, &gpt);
    refused_then_forced(&folder, &gpt_image, "a GPT partition table");

    let backup_only = folder.join("gpt-backup.img");
    image_with(&backup_only, IMAGE_BYTES - 512, b"EFI PART");
    refused_then_forced(&folder, &backup_only, "its backup header in the last");

    let mbr = folder.join("mbr.img");
    let mut sector = vec![0u8; 512];
    sector[446 + 4] = 0x83;
    sector[510] = 0x55;
    sector[511] = 0xAA;
    image_with(&mbr, 0, &sector);
    refused_then_forced(&folder, &mbr, "an MBR partition table");

    let luks = folder.join("luks.img");
    image_with(&luks, 0, b"LUKS\xBA\xBE\x00\x02");
    refused_then_forced(&folder, &luks, "a LUKS encrypted volume");

    let swap = folder.join("swap.img");
    if tool_present(
        "mkswap",
        "mkfs_refuses_devices_holding_other_data_unless_forced",
    ) {
        image_with(&swap, 0, &[]);
        let status = Command::new("mkswap")
            .arg(&swap)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "mkswap");
    } else {
        image_with(&swap, 4086, b"SWAPSPACE2");
    }
    refused_then_forced(&folder, &swap, "a Linux swap area");

    if tool_present(
        "mkfs.ext4",
        "mkfs_refuses_devices_holding_other_data_unless_forced",
    ) {
        let ext = folder.join("ext.img");
        image_with(&ext, 0, &[]);
        let status = Command::new("mkfs.ext4")
            .args(["-q", "-F"])
            .arg(&ext)
            .status()
            .unwrap();
        assert!(status.success(), "mkfs.ext4");
        refused_then_forced(&folder, &ext, "an ext4 file system");
    }

    let remote = folder.join("remote.img");
    image_with(&remote, 0, &pseudo_random_bytes(4096));
    let socket = folder.join("nbd.sock");
    let export = format!("d={}", text(&remote));
    let server = Running::start(&command_line(
        "nbd serve --export {} --socket {}",
        &[&export, text(&socket)],
    ));
    let uri = format!("nbd+unix:///d?socket={}", text(&socket));
    check_fails(
        &command_line(
            "mkfs --devices {} --size 16MiB {}",
            &[&uri, text(&folder.join("remote.toml"))],
        ),
        "holds unrecognised data",
    );
    server.stop();

    let store = folder.join("zeroes.toml");
    let zeroes = folder.join("zeroes.img");
    std::fs::write(&zeroes, vec![0u8; IMAGE_BYTES as usize]).unwrap();
    let sparse = folder.join("sparse.img");
    image_with(&sparse, 0, &[]);
    mkfs(
        &store,
        &format!("{},{}", text(&zeroes), text(&sparse)),
        &["--size", "16MiB"],
    );
    check_fails(
        &command_line(
            "mkfs --devices {} --size 16MiB {}",
            &[text(&zeroes), text(&folder.join("again.toml"))],
        ),
        "holds a flashpipe store",
    );
}

/// A process started by a test: stopped with SIGTERM by [`Running::stop`], killed when
/// dropped otherwise (a failing test leaves no server behind).
struct Running(Option<Child>);

impl Running {
    /// Starts `flashpipe ARGUMENTS` and reads standard output up to a line containing
    /// `ready`.
    fn start(arguments: &[&str]) -> Running {
        let (mut child, lines) = start_flashpipe(arguments);
        if lines.last().is_some_and(|line| line.contains("ready")) {
            return Running(Some(child));
        }
        let stderr = read_stderr(&mut child);
        let _ = child.wait();
        panic!("flashpipe {arguments:?} never became ready: {stderr}");
    }

    /// Stops the process with SIGTERM and waits for it to exit with status 0.
    fn stop(mut self) {
        stop_with(self.0.take().unwrap(), libc::SIGTERM);
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs a command expected to be refused at once: fails the test (killing it) when it is
/// still running after 20 s (it served instead of refusing); returns its standard error
/// after checking the exit status and that it did not panic.
fn refused_at_once(arguments: &[&str]) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_flashpipe"))
        .args(arguments)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("flashpipe starts");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("flashpipe {arguments:?} was not refused: it is still running");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let stderr = read_stderr(&mut child);
    assert!(!status.success(), "flashpipe {arguments:?} should fail");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

#[test]
fn an_export_of_a_device_path_takes_the_stores_locks() {
    let folder = fresh_folder("security-export-lock");
    let store = common::file_store(&folder, "16MiB");
    let image = folder.join("a.img");
    succeed(&["put", text(&store), text(&store), "--as", "kept"]);
    let served = Running::start(&["serve", text(&store)]);
    let raw = format!("raw={}", text(&image));
    let socket = folder.join("nbd.sock");
    for extra in [&[][..], &["--read-only"][..], &["--shared"][..]] {
        let mut arguments = vec!["nbd", "serve", "--export", &raw, "--socket", text(&socket)];
        arguments.extend_from_slice(extra);
        let stderr = refused_at_once(&arguments);
        assert!(stderr.contains("is in use by pid"), "{extra:?}: {stderr}");
        assert!(stderr.contains("flashpipe serve"), "{extra:?}: {stderr}");
        assert!(stderr.contains("store:STORE.toml"), "{extra:?}: {stderr}");
    }
    served.stop();

    let in_one_process = format!("x={}", text(&image));
    let stderr = refused_at_once(&command_line(
        "serve {} --export {} --nbd-socket {}",
        &[text(&store), &in_one_process, text(&socket)],
    ));
    assert!(stderr.contains("a device of store"), "{stderr}");

    let second_socket = folder.join("second.sock");
    let exported = Running::start(&["nbd", "serve", "--export", &raw, "--socket", text(&socket)]);
    check_fails(&["ls", text(&store)], "is in use by pid");
    let stderr = refused_at_once(&command_line(
        "nbd serve --shared --export {} --socket {}",
        &[&raw, text(&second_socket)],
    ));
    assert!(stderr.contains("is in use by pid"), "{stderr}");
    exported.stop();

    let first = Running::start(&command_line(
        "nbd serve --shared --export {} --socket {}",
        &[&raw, text(&socket)],
    ));
    let second = Running::start(&command_line(
        "nbd serve --shared --export {} --socket {}",
        &[&raw, text(&second_socket)],
    ));
    succeed(&["ls", text(&store)]);
    check_fails(
        &["put", text(&store), text(&store), "--as", "more"],
        "is in use by pid",
    );
    second.stop();
    first.stop();
    let listing = succeed(&["ls", text(&store)]);
    assert!(listing.contains("kept"), "{listing}");
    assert!(!listing.contains("more"), "{listing}");
}

/// Makes a node at `path` with `mknod`; `false` (after saying why) when not permitted.
fn make_node(path: &Path, mode: libc::mode_t, device: libc::dev_t) -> bool {
    let name = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: `name` is a NUL-terminated path that outlives the call.
    let status = unsafe { libc::mknod(name.as_ptr(), mode, device) };
    if status != 0 {
        let error = std::io::Error::last_os_error();
        flashpipe_testkit::tools::skip(
            "the special-file part",
            &format!("mknod {} failed: {error}", path.display()),
        );
        return false;
    }
    true
}

fn file_type_of(path: &Path) -> std::fs::FileType {
    std::fs::symlink_metadata(path).unwrap().file_type()
}

/// A fresh folder named `test` holding a 16 MiB store and a local file `source.txt` of
/// `abc`; returns the folder, the store file and the local file.
fn store_and_source(test: &str) -> (common::TestFolder, PathBuf, PathBuf) {
    let folder = fresh_folder(test);
    let store = common::file_store(&folder, "16MiB");
    let source = folder.join("source.txt");
    std::fs::write(&source, b"abc").unwrap();
    (folder, store, source)
}

#[test]
fn get_writes_into_device_nodes_and_fifos_as_cp_does() {
    let (folder, store, source) = store_and_source("security-get-special");
    succeed(&["put", text(&store), text(&source), "--as", "x"]);

    let standard_output = succeed_bytes(&["get", text(&store), "x", "-"]);
    assert_eq!(standard_output, b"abc");

    let null_clone = folder.join("null");
    if make_node(&null_clone, libc::S_IFCHR | 0o666, libc::makedev(1, 3)) {
        succeed(&["get", text(&store), "x", text(&null_clone)]);
        assert!(file_type_of(&null_clone).is_char_device(), "still a device");
        check_fails(
            &["get", text(&store), "x", text(&null_clone), "--no-special"],
            "is a character device, and --no-special refuses",
        );
        assert!(file_type_of(&null_clone).is_char_device(), "still a device");
        let partial = folder.join("null.flashpipe-partial");
        assert!(!partial.exists(), "no temporary beside the device");
    }

    let fifo = folder.join("fifo");
    if make_node(&fifo, libc::S_IFIFO | 0o600, 0) {
        let reader_path = fifo.clone();
        let reader = std::thread::spawn(move || std::fs::read(reader_path).unwrap());
        succeed(&["get", text(&store), "x", text(&fifo)]);
        // Checked before the reader is joined: a FIFO replaced by a file would leave the
        // reader waiting for a writer forever.
        assert!(file_type_of(&fifo).is_fifo(), "still a FIFO");
        assert_eq!(reader.join().unwrap(), b"abc");
        check_fails(
            &["get", text(&store), "x", text(&fifo), "--no-special"],
            "is a FIFO",
        );
        assert!(file_type_of(&fifo).is_fifo(), "still a FIFO");
    }

    let regular = folder.join("regular.txt");
    std::fs::write(&regular, b"old contents, longer").unwrap();
    succeed(&["get", text(&store), "x", text(&regular), "--no-special"]);
    assert_eq!(std::fs::read(&regular).unwrap(), b"abc");
}

#[test]
fn dot_names_control_characters_empty_traces_and_missing_plot_folders_are_refused() {
    let (folder, store, source) = store_and_source("security-small");
    for name in [".", ".."] {
        check_fails(
            &["put", text(&store), text(&source), "--as", name],
            "may not be `.` or `..`",
        );
    }
    succeed(&["put", text(&store), text(&source), "--as", "x"]);
    for name in [".", ".."] {
        check_fails(&["mv", text(&store), "x", name], "may not be `.` or `..`");
        check_fails(&["cp", text(&store), "x", name], "may not be `.` or `..`");
    }
    let listing = succeed(&["ls", text(&store)]);
    assert!(listing.contains('x'), "{listing}");
    succeed(&["fsck", text(&store)]);

    for name in ["a\nnbd: ready", "a\tb", "a\u{1b}[2J"] {
        let spec = format!("{name}=ram:1MiB");
        let socket = folder.join("n.sock");
        let stderr =
            refused_at_once(&["nbd", "serve", "--export", &spec, "--socket", text(&socket)]);
        assert!(stderr.contains("control character"), "{stderr}");
        assert!(!stderr.contains('\u{1b}'), "the name is escaped: {stderr}");
        assert!(!stderr.contains("a\nnbd"), "the name is escaped: {stderr}");
    }

    let trace = folder.join("malformed.blkparse");
    std::fs::write(
        &trace,
        "  this is not an event\n8,0 0 1 0.000001 7 C W 0 + 8 [0]\n8,0 0 2 0.000002 7 Q N 0 + 8 [x]\nCPU0 (sda):\n",
    )
    .unwrap();
    check_fails(
        &["sim", "replay", "--format", "blkparse", text(&trace)],
        "malformed.blkparse:1: the trace holds no request",
    );
    let comments = folder.join("comments.disksim");
    std::fs::write(&comments, "# nothing here\n\n").unwrap();
    check_fails(
        &["sim", "replay", "--format", "disksim", text(&comments)],
        "the trace holds no request (only blank or comment lines)",
    );

    let good = folder.join("good.disksim");
    std::fs::write(&good, "0.0 0 0 16 0\n0.1 0 16 16 0\n").unwrap();
    let missing_root = PathBuf::from(format!("/nonexistent-flashpipe-{}", std::process::id()));
    let plot = missing_root.join("dir").join("x");
    check_fails(
        &command_line(
            "sim replay --format disksim --plot {} {}",
            &[text(&plot), text(&good)],
        ),
        "does not exist",
    );
    assert!(
        !missing_root.exists(),
        "--plot created {}",
        missing_root.display()
    );
}
