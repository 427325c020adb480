//! The store tools a new user looks for first, through the real binary: `put STORE -
//! --as NAME` from standard input (streamed in bounded memory, committed at end of file,
//! nothing kept when killed, refused when empty, through a server too), `get NAME -`,
//! `flashpipe info` (file and flash stores, through a server, on hostile inputs), and
//! sparse image files (`mkfs` sparse by default, `--preallocate` full).

mod serve_support;

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serve_support::*;

/// Starts `flashpipe ARGUMENTS` with standard input a pipe this test writes.
fn spawn_with_piped_input(arguments: &[&str]) -> Child {
    Command::new(flashpipe_binary())
        .args(arguments)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the flashpipe binary runs")
}

/// Runs `flashpipe ARGUMENTS` with `input` on standard input; returns the output.
fn run_with_input(arguments: &[&str], input: &[u8]) -> std::process::Output {
    let mut child = spawn_with_piped_input(arguments);
    let mut stdin = child.stdin.take().expect("piped standard input");
    let bytes = input.to_vec();
    let writer = std::thread::spawn(move || {
        // A refused command may close its end before reading: that is not this test's error.
        let _ = stdin.write_all(&bytes);
    });
    let output = child.wait_with_output().expect("flashpipe ends");
    writer.join().expect("the writer thread");
    output
}

fn listing(store: &Path) -> Vec<String> {
    succeed(&["ls", text(store), "-1"])
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn put_from_standard_input_round_trips_and_refuses_hostile_input() {
    let (folder, store) = folder_with_store("stdin-put", "64MiB");
    let store_text = text(&store);
    let contents = file_contents(1, 5 << 20);
    let output = run_with_input(&["put", store_text, "-", "--as", "logs:one.bin"], &contents);
    assert_succeeded(&output, "mkfs");
    assert_eq!(read_back(&store, "logs:one.bin"), contents);
    let catted = flashpipe(&["cat", store_text, "logs:one.bin"]);
    assert_eq!(catted.stdout, contents);

    // An existing name is refused without --force, replaced whole with it.
    let again = run_with_input(&["put", store_text, "-", "--as", "logs:one.bin"], b"short");
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("--force"));
    assert_eq!(read_back(&store, "logs:one.bin"), contents);
    let forced = run_with_input(
        &["put", store_text, "-", "--as", "logs:one.bin", "--force"],
        b"short",
    );
    assert!(forced.status.success());
    assert_eq!(read_back(&store, "logs:one.bin"), b"short");

    // Hostile inputs: each refused with a clear message, nothing stored.
    for (arguments, input, expected) in [
        (
            vec!["put", store_text, "-", "--as", "empty"],
            &b""[..],
            "standard input is empty",
        ),
        (vec!["put", store_text, "-"], &b"x"[..], "--as NAME"),
        (
            vec!["put", store_text, "-", "other.txt", "--as", "x"],
            &b"x"[..],
            "stored alone",
        ),
        (
            vec!["put", store_text, "-", "--as", "a/b"],
            &b"x"[..],
            "not valid in a store",
        ),
        (
            vec!["put", store_text, "-", "--as", ""],
            &b"x"[..],
            "not valid in a store",
        ),
    ] {
        let output = run_with_input(&arguments, input);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{arguments:?} should fail");
        assert!(stderr.contains(expected), "{arguments:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{arguments:?}: {stderr}");
    }
    // Standard input closed: the runtime opens /dev/null in its place, so it reads empty.
    let closed = Command::new(flashpipe_binary())
        .args(["put", store_text, "-", "--as", "closed"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!closed.status.success());
    assert!(String::from_utf8_lossy(&closed.stderr).contains("standard input is empty"));
    // A folder as standard input cannot be read.
    let folder_input = Command::new(flashpipe_binary())
        .args(["put", store_text, "-", "--as", "folder"])
        .stdin(std::fs::File::open(folder.path()).unwrap())
        .output()
        .unwrap();
    assert!(!folder_input.status.success());
    assert!(String::from_utf8_lossy(&folder_input.stderr).contains("cannot read standard input"));
    assert_eq!(listing(&store), ["logs:one.bin"]);
    assert_fsck_clean(&store);
}

/// The peak resident memory of a finished child, from `wait4`, in bytes.
fn wait_for_peak_memory_bytes(child: &Child) -> (i32, u64) {
    let mut status = 0;
    // SAFETY: `rusage` is a plain C struct of integers, for which all zero bytes are valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 writes the status and the usage through pointers to locals we own; the
    // pid is our own child's, not yet reaped.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32, "wait4 reaps the child");
    (status, usage.ru_maxrss as u64 * 1024)
}

#[test]
fn put_from_standard_input_streams_in_bounded_memory() {
    const STREAM_BYTES: u64 = 768 << 20;
    const MEMORY_BOUND_BYTES: u64 = 256 << 20;
    let (_folder, store) = folder_with_store("stdin-memory", "1GiB");
    #[allow(
        clippy::zombie_processes,
        reason = "wait4 reaps it, to read its peak memory"
    )]
    let mut child = spawn_with_piped_input(&["put", text(&store), "-", "--as", "big"]);
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let chunk = file_contents(7, 1 << 20);
        for _ in 0..STREAM_BYTES >> 20 {
            stdin
                .write_all(&chunk)
                .expect("the put reads its standard input");
        }
    });
    let (status, peak_bytes) = wait_for_peak_memory_bytes(&child);
    writer.join().unwrap();
    assert_eq!(status, 0, "the put succeeds");
    assert!(
        peak_bytes < MEMORY_BOUND_BYTES,
        "a put of {STREAM_BYTES} bytes from a pipe peaked at {peak_bytes} bytes resident"
    );
    let stat = succeed(&["stat", text(&store), "big", "--json"]);
    assert!(
        stat.contains(&format!("\"size_bytes\":{STREAM_BYTES}")),
        "{stat}"
    );
}

#[test]
fn get_and_cat_to_standard_output_stream_in_bounded_memory() {
    const FILE_BYTES: u64 = 768 << 20;
    const MEMORY_BOUND_BYTES: u64 = 256 << 20;
    let (folder, store) = folder_with_store("stdout-memory", "1GiB");
    let source = folder.join("big.bin");
    let chunk = file_contents(9, 1 << 20);
    let mut file = std::fs::File::create(&source).unwrap();
    for _ in 0..FILE_BYTES >> 20 {
        file.write_all(&chunk).unwrap();
    }
    drop(file);
    succeed(&["put", text(&store), text(&source), "--as", "big"]);
    std::fs::remove_file(&source).unwrap();
    for arguments in [
        vec!["get", text(&store), "big", "-"],
        vec!["cat", text(&store), "big"],
    ] {
        #[allow(
            clippy::zombie_processes,
            reason = "wait4 reaps it, to read its peak memory"
        )]
        let mut child = Command::new(flashpipe_binary())
            .args(&arguments)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let chunk = chunk.clone();
        let reader = std::thread::spawn(move || {
            let mut buffer = vec![0u8; 1 << 20];
            let (mut total, mut matches) = (0u64, true);
            loop {
                let read = std::io::Read::read(&mut stdout, &mut buffer).unwrap();
                if read == 0 {
                    return (total, matches);
                }
                for (index, byte) in buffer[..read].iter().enumerate() {
                    let at = (total as usize + index) % chunk.len();
                    matches &= *byte == chunk[at];
                }
                total += read as u64;
            }
        });
        let (status, peak_bytes) = wait_for_peak_memory_bytes(&child);
        let (total, matches) = reader.join().unwrap();
        assert_eq!(status, 0, "{arguments:?} succeeds");
        assert_eq!(total, FILE_BYTES, "{arguments:?} writes the whole file");
        assert!(matches, "{arguments:?} writes the file's bytes");
        assert!(
            peak_bytes < MEMORY_BOUND_BYTES,
            "{arguments:?} of {FILE_BYTES} bytes peaked at {peak_bytes} bytes resident"
        );
    }
}

#[test]
fn a_put_from_standard_input_killed_mid_stream_leaves_nothing() {
    let (_folder, store) = folder_with_store("stdin-kill", "256MiB");
    succeed(&["put", text(&store), text(&store), "--as", "kept"]);
    let mut child = spawn_with_piped_input(&["put", text(&store), "-", "--as", "partial"]);
    let mut stdin = child.stdin.take().unwrap();
    let chunk = file_contents(3, 1 << 20);
    for _ in 0..16 {
        stdin.write_all(&chunk).expect("the put reads");
    }
    child.kill().expect("SIGKILL");
    child.wait().unwrap();
    drop(stdin);
    assert_eq!(listing(&store), ["kept"]);
    assert_fsck_clean(&store);
    // The next read-write command finds the store as it was, and the name free.
    let output = run_with_input(&["put", text(&store), "-", "--as", "partial"], b"whole");
    assert!(output.status.success());
    assert_eq!(read_back(&store, "partial"), b"whole");
}

#[test]
fn put_from_standard_input_and_info_work_through_a_server() {
    let (_folder, store) = folder_with_store("stdin-served", "64MiB");
    let server = ServerProcess::start(&store, &[]);
    let contents = file_contents(5, 3 << 20);
    let output = run_with_input(
        &["put", text(&store), "-", "--as", "served", "-v"],
        &contents,
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("through the server"), "{stderr}");
    assert_eq!(read_back(&store, "served"), contents);
    let empty = run_with_input(&["put", text(&store), "-", "--as", "nothing"], b"");
    assert!(!empty.status.success());
    let info = succeed(&["info", text(&store), "--json"]);
    let info: serde_json::Value = serde_json::from_str(&info).unwrap();
    assert_eq!(info["server_pid"], serde_json::json!(server.pid));
    assert_eq!(info["filesystem"]["file_count"], 1);
    assert!(info["filesystem"]["format_version"].is_null());
    assert_eq!(info["members"][0]["label"], "ok");
    let text_info = succeed(&["info", text(&store)]);
    assert!(text_info.contains("served by"), "{text_info}");
    drop(server);
    assert_fsck_clean(&store);
}

#[test]
fn info_summarizes_a_file_store() {
    let folder = TestFolder::new("info-file");
    let store = folder.join("s.toml");
    let output = Command::new(flashpipe_binary())
        .args(command_line(
            "mkfs --devices a.img,b.img --size 32MiB {}",
            &[text(&store)],
        ))
        .current_dir(folder.path())
        .output()
        .unwrap();
    assert!(output.status.success());
    succeed(&["put", text(&store), text(&store), "--as", "one"]);
    let info: serde_json::Value =
        serde_json::from_str(&succeed(&["info", text(&store), "--json"])).unwrap();
    assert_eq!(info["block_size_bytes"], 16384);
    assert_eq!(info["members"].as_array().unwrap().len(), 2);
    for (index, member) in info["members"].as_array().unwrap().iter().enumerate() {
        assert_eq!(member["index"], index);
        assert_eq!(member["kind"], "file");
        assert_eq!(member["label"], "ok");
        assert_eq!(member["size_bytes"], 32 << 20);
        assert!(member["allocated_bytes"].as_u64().unwrap() < 32 << 20);
    }
    let filesystem = &info["filesystem"];
    assert_eq!(filesystem["format_version"], 6);
    assert_eq!(filesystem["file_count"], 1);
    assert_eq!(filesystem["identity"], info["identity"]);
    assert_eq!(filesystem["total_bytes"], 64 << 20);
    assert!(
        filesystem["metadata_log"]["region_blocks"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert!(info["server_pid"].is_null());
    let text_info = succeed(&["info", text(&store)]);
    for expected in ["format version 6", "1 file(s)", "metadata log:", "label ok"] {
        assert!(text_info.contains(expected), "{text_info}");
    }
}

#[test]
fn info_shows_the_wear_of_emulated_flash() {
    let folder = TestFolder::new("info-flash");
    let store = folder.join("f.toml");
    flashpipe_testkit::tools::stdout_of(
        Command::new(flashpipe_binary())
            .args(command_line(
                "mkfs --devices flash:minflash:f.img --flash-blocks-per-plane 16 {}",
                &[text(&store)],
            ))
            .current_dir(folder.path()),
        "mkfs",
    );
    let info: serde_json::Value =
        serde_json::from_str(&succeed(&["info", text(&store), "--json"])).unwrap();
    let member = &info["members"][0];
    assert_eq!(member["kind"], "flash");
    let flash = &member["flash"];
    assert_eq!(flash["preset"], "minflash");
    assert!(flash["raw_bytes"].as_u64().unwrap() > flash["exported_bytes"].as_u64().unwrap());
    assert!(
        flash["erase_count_min"].as_u64().unwrap() <= flash["erase_count_max"].as_u64().unwrap()
    );
    assert!(
        flash["erase_count_max"].as_u64().unwrap() >= 1,
        "mkfs erased blocks: {flash}"
    );
    assert!(flash["bad_blocks"].as_u64().unwrap() < flash["block_count"].as_u64().unwrap());
    assert!((flash["over_provisioning"].as_f64().unwrap() - 0.1).abs() < 1e-9);
    assert_eq!(member["size_bytes"], flash["exported_bytes"]);
    let text_info = succeed(&["info", text(&store)]);
    assert!(text_info.contains("wear: erases min"), "{text_info}");
}

#[test]
fn info_refuses_hostile_inputs_clearly() {
    let (folder, store) = folder_with_store("info-hostile", "32MiB");
    let not_a_store = folder.join("a.img");
    let stderr = fail_stderr(&["info", text(&not_a_store)]);
    assert!(stderr.contains("not a store file"), "{stderr}");
    let stderr = fail_stderr(&["info", text(&folder.join("missing.toml"))]);
    assert!(stderr.contains("missing.toml"), "{stderr}");
    // A store whose member is gone: its rows, then the error naming the member.
    let moved = folder.join("moved.img");
    std::fs::rename(folder.join("a.img"), &moved).unwrap();
    let output = flashpipe(&["info", text(&store)]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stdout.contains("PROBLEM: does not exist"), "{stdout}");
    assert!(
        stderr.contains("member 0") && stderr.contains("a.img"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"));
    std::fs::rename(&moved, folder.join("a.img")).unwrap();
    // A damaged label is shown as such, and the store is not opened past it unchecked.
    let image = folder.join("a.img");
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&image)
        .unwrap();
    use std::os::unix::fs::FileExt;
    file.write_all_at(b"XXXXXXXX", 32 << 20).unwrap();
    let output = flashpipe(&["info", text(&store), "--json"]);
    let info: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(info["members"][0]["label"], "damaged");
}

/// Bytes `path` takes on disk.
fn allocated_bytes(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().blocks() * 512
}

fn mkfs_in(folder: &Path, arguments: &[&str]) -> std::process::Output {
    Command::new(flashpipe_binary())
        .args(arguments)
        .current_dir(folder)
        .output()
        .unwrap()
}

#[test]
fn images_are_sparse_unless_preallocated() {
    const SIZE_BYTES: u64 = 1 << 30;
    let folder = TestFolder::new("sparse-images");
    let store = folder.join("s.toml");
    let output = mkfs_in(
        folder.path(),
        &["mkfs", "--devices", "a.img", "--size", "1GiB", text(&store)],
    );
    assert_succeeded(&output, "mkfs");
    let image: PathBuf = folder.join("a.img");
    assert!(std::fs::metadata(&image).unwrap().len() > SIZE_BYTES);
    assert!(
        allocated_bytes(&image) < 16 << 20,
        "a fresh 1 GiB image takes {} bytes on disk",
        allocated_bytes(&image)
    );
    // A round trip on the sparse image: put, get, rm, fsck clean.
    let contents = file_contents(11, 4 << 20);
    let source = folder.join("source.bin");
    std::fs::write(&source, &contents).unwrap();
    succeed(&["put", text(&store), text(&source), "--as", "data"]);
    assert_eq!(read_back(&store, "data"), contents);
    assert!(allocated_bytes(&image) >= 4 << 20);
    succeed(&["rm", text(&store), "data"]);
    assert!(listing(&store).is_empty());
    assert_fsck_clean(&store);

    let full_store = folder.join("full.toml");
    let output = mkfs_in(
        folder.path(),
        &[
            "mkfs",
            "--devices",
            "full.img",
            "--size",
            "1GiB",
            "--preallocate",
            text(&full_store),
        ],
    );
    assert_succeeded(&output, "mkfs");
    assert!(
        allocated_bytes(&folder.join("full.img")) >= SIZE_BYTES,
        "a preallocated 1 GiB image takes {} bytes on disk",
        allocated_bytes(&folder.join("full.img"))
    );
    assert_fsck_clean(&full_store);

    // --preallocate with no image file to allocate is refused, nothing made.
    let flash_store = folder.join("flash.toml");
    let output = mkfs_in(
        folder.path(),
        &[
            "mkfs",
            "--devices",
            "flash:minflash:f.img",
            "--preallocate",
            text(&flash_store),
        ],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("--preallocate applies to image files"),
        "{stderr}"
    );
    assert!(!flash_store.exists() && !folder.join("f.img").exists());
}

/// What a full file system does to a sparse image and to `--preallocate`, on a 24 MiB
/// tmpfs mounted in a private mount namespace (`unshare -m`, gone with the shell): a put
/// past the room fails saying the file system is full and the store keeps its last
/// commit (fsck clean); `mkfs --preallocate` of an image larger than the room fails at
/// once and leaves no image behind.
#[test]
fn a_full_file_system_fails_the_write_of_a_sparse_image_and_mkfs_preallocate() {
    const TEST: &str = "the full file system test";
    if !flashpipe_testkit::tools::programs_or_skip(TEST, &["unshare", "mount", "head"]) {
        return;
    }
    let folder = TestFolder::new("full-file-system");
    let script = r#"
        mount -t tmpfs -o size=24m tmpfs "$1" || exit 99
        cd "$1" || exit 98
        "$2" mkfs --devices a.img --size 64MiB s.toml 2>/dev/null || exit 97
        head -c 40000000 /dev/urandom | "$2" put s.toml - --as big
        echo "put=$?"
        "$2" fsck s.toml
        "$2" ls s.toml -1
        "$2" mkfs --devices b.img --size 64MiB --preallocate t.toml
        echo "preallocate=$?"
        ls
    "#;
    let output = Command::new("unshare")
        .args(["-m", "sh", "-c", script, "sh"])
        .arg(folder.path())
        .arg(flashpipe_binary())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if output.status.code() == Some(99) || !output.status.success() && stdout.is_empty() {
        flashpipe_testkit::tools::skip(
            TEST,
            &format!("a tmpfs cannot be mounted in a private mount namespace here: {stderr}"),
        );
        return;
    }
    assert!(
        stdout.contains("put=4"),
        "a full file system is no_space (4): {stdout}{stderr}"
    );
    assert!(
        stderr.contains("a sparse image takes its space as it is written"),
        "{stderr}"
    );
    assert!(stdout.contains("clean: 0 file(s)"), "{stdout}");
    assert!(stdout.contains("preallocate=4"), "{stdout}");
    assert!(stderr.contains("cannot preallocate 64 MiB"), "{stderr}");
    assert!(
        !stdout.contains("b.img") && !stdout.contains("t.toml"),
        "{stdout}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}
