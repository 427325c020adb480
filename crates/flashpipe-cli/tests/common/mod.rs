//! Helpers shared by the CLI's tests: run the `flashpipe` binary, expect a success or a
//! clear failure (a message naming the problem, a non-zero exit, no panic), and make
//! scratch folders.

#![allow(dead_code)] // each test file uses the helpers it needs

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

/// Runs the `flashpipe` binary built for these tests. `mkfs` runs in the folder of its
/// store file (its last argument), so the tests' bare device names (`a.img`), which
/// `mkfs` reads relative to the working directory, land beside the store.
pub fn flashpipe(arguments: &[&str]) -> Output {
    flashpipe_in_env(arguments, &[])
}

/// [`flashpipe`] with the variables of `environment` set.
pub fn flashpipe_in_env(arguments: &[&str], environment: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_flashpipe"));
    command.args(arguments).envs(environment.iter().copied());
    if let Some(folder) = mkfs_store_folder(arguments) {
        command.current_dir(folder);
    }
    command.output().expect("the flashpipe binary runs")
}

/// The folder of the store file of a `mkfs` command line naming it by an absolute path.
pub fn mkfs_store_folder(arguments: &[&str]) -> Option<PathBuf> {
    if arguments.first() != Some(&"mkfs") {
        return None;
    }
    let store = Path::new(arguments.last()?);
    store
        .is_absolute()
        .then(|| store.parent().map(PathBuf::from))
        .flatten()
}

/// Runs a command expected to succeed and returns its standard output as bytes.
pub fn succeed_bytes(arguments: &[&str]) -> Vec<u8> {
    let output = flashpipe(arguments);
    assert!(
        output.status.success(),
        "flashpipe {arguments:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

/// Runs a command expected to succeed and returns its standard output.
pub fn succeed(arguments: &[&str]) -> String {
    String::from_utf8(succeed_bytes(arguments)).expect("UTF-8 output")
}

/// Runs a command expected to succeed and returns its standard output read as JSON.
pub fn succeed_json(arguments: &[&str]) -> serde_json::Value {
    serde_json::from_slice(&succeed_bytes(arguments)).expect("the standard output is JSON")
}

/// The JSON report of `flashpipe bench KIND --quick --json --dir FOLDER`.
pub fn quick_bench_json(kind: &str, folder: &Path) -> serde_json::Value {
    let line = format!("bench {kind} --quick --json --dir {{}}");
    succeed_json(&command_line(&line, &[text(folder)]))
}

/// The array `value` holds (`what` names it when it is not one).
pub fn array_at<'a>(value: &'a serde_json::Value, what: &str) -> &'a [serde_json::Value] {
    value
        .as_array()
        .unwrap_or_else(|| panic!("{what}: not an array: {value}"))
}

/// The string field `field` of each of `rows`.
pub fn strings_at<'a>(rows: &'a [serde_json::Value], field: &str) -> Vec<&'a str> {
    let string_of = |row: &'a serde_json::Value| {
        row[field]
            .as_str()
            .unwrap_or_else(|| panic!("no string {field} in {row}"))
    };
    rows.iter().map(string_of).collect()
}

/// Checks that the number at `pointer` (a JSON pointer) is positive in each of `rows`.
pub fn assert_positive_in_each(rows: &[serde_json::Value], pointer: &str) {
    for row in rows {
        let number = row.pointer(pointer).and_then(serde_json::Value::as_f64);
        assert!(
            number.is_some_and(|number| number > 0.0),
            "{pointer} in {row}"
        );
    }
}

/// Checks that `output`, of the command that did `what`, succeeded; its standard error is
/// the failure message.
pub fn assert_succeeded(output: &Output, what: &str) {
    assert!(
        output.status.success(),
        "{what} failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The standard output of `output`, of the command that did `what` and succeeded, read as
/// JSON.
pub fn succeeded_json(output: &Output, what: &str) -> serde_json::Value {
    assert_succeeded(output, what);
    serde_json::from_slice(&output.stdout).expect("the standard output is JSON")
}

/// A folder path of its own for one test, not yet there (the command under test makes
/// it), removed when the test passed (see [`TestFolder`]).
pub fn absent_folder(name: &str) -> TestFolder {
    let folder = fresh_folder(name);
    std::fs::remove_dir(folder.path()).expect("the fresh folder is empty");
    folder
}

/// Runs a command expected to fail and checks that its message names the problem and
/// that it did not panic.
pub fn check_fails(arguments: &[&str], expected_fragment: &str) {
    check_fails_in_env(arguments, &[], expected_fragment);
}

/// [`check_fails`], and every file of `folder` is left as it was.
pub fn check_fails_unchanged(
    folder: &flashpipe_testkit::scratch::ScratchFolder,
    arguments: &[&str],
    expected_fragment: &str,
) {
    let before = folder.listing();
    check_fails(arguments, expected_fragment);
    assert_eq!(
        folder.listing(),
        before,
        "flashpipe {arguments:?} changed files"
    );
}

/// Runs a command expected to fail and checks that its message names every one of
/// `expected_fragments` and that it did not panic.
pub fn check_fails_naming(arguments: &[&str], expected_fragments: &[&str]) {
    let output = flashpipe(arguments);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "flashpipe {arguments:?} should fail"
    );
    for fragment in expected_fragments {
        assert!(
            stderr.contains(fragment),
            "flashpipe {arguments:?}: {stderr:?} lacks {fragment:?}"
        );
    }
    assert!(
        !stderr.contains("panicked"),
        "flashpipe {arguments:?} panicked: {stderr}"
    );
}

/// [`check_fails`] with the variables of `environment` set.
pub fn check_fails_in_env(
    arguments: &[&str],
    environment: &[(&str, &str)],
    expected_fragment: &str,
) {
    let output = flashpipe_in_env(arguments, environment);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "flashpipe {arguments:?} with {environment:?} should fail"
    );
    assert!(
        stderr.contains(expected_fragment),
        "flashpipe {arguments:?} with {environment:?}: {stderr:?} lacks {expected_fragment:?}"
    );
    assert!(
        !stderr.contains("panicked"),
        "flashpipe {arguments:?} with {environment:?} panicked: {stderr}"
    );
}

#[allow(unused_imports)] // each test file uses the helpers it needs
pub use flashpipe_testkit::cli_args::command_line;
pub use flashpipe_testkit::scratch::TestFolder;

/// An empty folder of its own for one test (`name` and the process id make it unique),
/// removed when the guard is dropped after the test passed, kept with its path printed
/// when the test fails (dropped while panicking), to look at.
pub fn fresh_folder(name: &str) -> TestFolder {
    TestFolder::new(name)
}

/// A path as the `&str` argument the binary takes (test folders are UTF-8).
pub fn text(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 test path")
}

/// Makes a store of one file device `a.img` of `size` in `folder`; returns its store file.
pub fn file_store(folder: &Path, size: &str) -> PathBuf {
    let store = folder.join("s.toml");
    succeed(&["mkfs", "--devices", "a.img", "--size", size, text(&store)]);
    store
}

/// A fresh test folder named `name` holding a file store of `size` (`s.toml` on `a.img`).
pub fn folder_with_store(name: &str, size: &str) -> (TestFolder, PathBuf) {
    let folder = fresh_folder(name);
    let store = file_store(&folder, size);
    (folder, store)
}

/// A self-signed certificate for `localhost` (`cert.pem`, `key.pem` in `folder`, made by
/// the `openssl` command), or `None` after printing why `test` is skipped.
pub fn self_signed_certificate(folder: &Path, test: &str) -> Option<(PathBuf, PathBuf)> {
    let openssl = Command::new("openssl")
        .current_dir(folder)
        .args(command_line(
            "req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout key.pem \
             -out cert.pem -days 3650 -subj /CN=localhost",
            &[],
        ))
        .output();
    if !openssl.is_ok_and(|output| output.status.success()) {
        flashpipe_testkit::tools::skip(test, "the `openssl` command is missing or failed");
        return None;
    }
    Some((folder.join("cert.pem"), folder.join("key.pem")))
}

/// Makes the store file `store` over `devices` (a `--devices` list) with the other `mkfs`
/// options in `options`; the command must succeed.
pub fn mkfs(store: &Path, devices: &str, options: &[&str]) {
    let mut arguments = vec!["mkfs", "--devices", devices];
    arguments.extend_from_slice(options);
    arguments.push(text(store));
    succeed(&arguments);
}

/// Runs `flashpipe ftl ARGUMENTS`.
pub fn flashpipe_ftl(arguments: &[&str]) -> Output {
    let mut all = vec!["ftl"];
    all.extend_from_slice(arguments);
    flashpipe(&all)
}

/// `flashpipe ftl ARGUMENTS`, expected to succeed: its standard output as bytes.
pub fn succeed_ftl(arguments: &[&str]) -> Vec<u8> {
    succeed_bytes(&[&["ftl"], arguments].concat())
}

/// Runs a command and returns whether it succeeded, its standard output and its standard
/// error (both as text).
pub fn outcome(arguments: &[&str]) -> (bool, String, String) {
    let output = flashpipe(arguments);
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Starts `flashpipe ARGUMENTS` in the background, its standard output and error piped.
pub fn spawn_flashpipe(arguments: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_flashpipe"))
        .args(arguments)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the flashpipe binary starts")
}

/// A cluster description of one node at `address` with host 0 on it; `top` goes before the
/// node (a `key_file` or `link` line).
pub fn one_node_description(top: &str, address: &str) -> String {
    format!(
        "version = 1\n{top}[[node]]\nid = 0\naddress = \"{address}\"\npreset = \"minflash\"\nimage = \"n0.img\"\n[[host]]\nid = 0\nnode = 0\n"
    )
}

/// Writes [`one_node_description`] at `path`.
pub fn write_one_node(path: &Path, top: &str, address: &str) {
    std::fs::write(path, one_node_description(top, address))
        .expect("the test folder takes the description");
}

/// Writes [`one_node_description`] at `path`, the node on a free loopback port.
pub fn write_loopback_one_node(path: &Path, top: &str) {
    let port = flashpipe_testkit::ports::free_loopback_port();
    write_one_node(path, top, &format!("127.0.0.1:{port}"));
}

/// `cluster page --cluster DESCRIPTION --host HOST read` of block 0, bus 0, chip 0 of
/// `device`.
pub fn cluster_page_read<'a>(
    description: &'a Path,
    host: &'a str,
    device: &'a str,
) -> Vec<&'a str> {
    let page = [
        "cluster",
        "page",
        "--cluster",
        text(description),
        "--host",
        host,
    ];
    let address = [
        "--device", device, "--bus", "0", "--chip", "0", "--block", "0",
    ];
    [&page[..], &["read"], &address].concat()
}

/// Starts node `node` of the cluster `description` (`flashpipe cluster node`), its image in
/// `images`, and reads up to its readiness line; returns the child and the lines read.
pub fn start_cluster_node(description: &Path, node: u32, images: &Path) -> (Child, Vec<String>) {
    let (child, lines) = start_flashpipe(&[
        "cluster",
        "node",
        "--cluster",
        text(description),
        "--node",
        &node.to_string(),
        "--image",
        text(images),
    ]);
    assert!(
        lines.last().is_some_and(|line| line.contains("ready")),
        "node {node} printed no readiness line: {lines:?}"
    );
    (child, lines)
}

/// Starts `flashpipe ARGUMENTS` and reads standard output up to its readiness line (a
/// line with `ready`); returns the child and the lines read.
pub fn start_flashpipe(arguments: &[&str]) -> (Child, Vec<String>) {
    let mut child = spawn_flashpipe(arguments);
    let stdout = BufReader::new(child.stdout.take().expect("a piped stdout"));
    let mut lines = Vec::new();
    for line in stdout.lines() {
        let line = line.expect("a line of text");
        let ready = line.contains("ready");
        lines.push(line);
        if ready {
            break;
        }
    }
    (child, lines)
}

/// The names of the files in `store`, from `ls --json`.
pub fn file_names(store: &Path) -> Vec<String> {
    let json: serde_json::Value =
        serde_json::from_str(&succeed(&["ls", text(store), "--json"])).expect("ls JSON");
    json.as_array()
        .expect("a list of files")
        .iter()
        .map(|file| file["name"].as_str().expect("a name").to_string())
        .collect()
}

/// Turns the store file `store` back into version 1, as made before store identities (no
/// `identity` lines); returns the text written.
pub fn downgrade_to_version_1(store: &Path) -> String {
    let version_1: String = std::fs::read_to_string(store)
        .expect("store file")
        .lines()
        .filter(|line| !line.starts_with("identity = "))
        .map(|line| line.replace("store_file_version = 2", "store_file_version = 1") + "\n")
        .collect();
    std::fs::write(store, &version_1).expect("a store file made before identities");
    version_1
}

/// Stops `child` with `signal`, waits for it and checks that it exited with status 0;
/// returns its standard error.
pub fn stop_with(mut child: Child, signal: i32) -> String {
    let pid = i32::try_from(child.id()).expect("a process id");
    // SAFETY: kill with a valid pid and signal has no memory effects.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
    let status = child.wait().expect("the child is waited for");
    let stderr = read_stderr(&mut child);
    assert!(status.success(), "status {status}, stderr: {stderr}");
    stderr
}

/// All of the piped standard error of `child` (read to its end: call it once the child
/// has exited or is about to).
pub fn read_stderr(child: &mut Child) -> String {
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("a piped stderr")
        .read_to_string(&mut stderr)
        .expect("stderr is text");
    stderr
}

/// True when commands can run as `nobody`; otherwise prints why `test` is skipped (or
/// panics under `FLASHPIPE_REQUIRE_TOOLS=1`).
pub fn second_user_available(test: &str) -> bool {
    // SAFETY: geteuid takes no argument and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let runuser = Command::new("runuser")
        .args(["-u", "nobody", "--", "true"])
        .output()
        .map(|output| output.status.success())
        .unwrap_or(false);
    if root && runuser {
        return true;
    }
    flashpipe_testkit::tools::skip(
        test,
        &format!(
            "needs root and `runuser -u nobody` to run a second uid (root: {root}, runuser \
             works: {runuser})"
        ),
    );
    false
}

/// Runs the binary as `nobody` under `umask`.
pub fn flashpipe_as_nobody(arguments: &[&str], folder: &Path) -> Output {
    let mut command = Command::new("runuser");
    command
        .args(["-u", "nobody", "--", env!("CARGO_BIN_EXE_flashpipe")])
        .args(arguments)
        .current_dir(folder);
    command.output().expect("runuser runs")
}

/// `cluster page --cluster DESCRIPTION --host HOST OP` on block `block`, bus 1, chip 2 of
/// `device`, `extra` after it; the outcome.
pub fn cluster_page(
    description: &Path,
    host: u32,
    op: &str,
    device: u32,
    block: u32,
    extra: &[&str],
) -> (bool, String, String) {
    let host = host.to_string();
    let device = device.to_string();
    let block = block.to_string();
    let mut arguments = vec![
        "cluster",
        "page",
        "--cluster",
        text(description),
        "--host",
        &host,
        op,
        "--device",
        &device,
        "--bus",
        "1",
        "--chip",
        "2",
        "--block",
        &block,
    ];
    arguments.extend_from_slice(extra);
    outcome(&arguments)
}

/// Repeats a page command until `done` holds for its outcome (links come up, or go down,
/// within a few seconds).
pub fn cluster_page_until(
    description: &Path,
    arguments: (u32, &str, u32, u32, &[&str]),
    done: impl Fn(&(bool, String, String)) -> bool,
) -> (bool, String, String) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let result = cluster_page(
            description,
            arguments.0,
            arguments.1,
            arguments.2,
            arguments.3,
            arguments.4,
        );
        if done(&result) || std::time::Instant::now() > deadline {
            return result;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Host 0 erases block 5 of device 3, three hops away (once the links are up), writes page
/// 0 with `message` and reads it back through `folder`: what the read printed and the page
/// read, checked to start with `message`.
pub fn page_round_trip_three_hops(
    description: &Path,
    folder: &Path,
    message: &[u8],
) -> (String, Vec<u8>) {
    let erased = cluster_page_until(description, (0, "erase", 3, 5, &[]), |result| result.0);
    assert!(erased.0, "erase failed: {}", erased.2);
    assert!(
        erased.1.contains("Ok") && erased.1.contains("3 hops"),
        "{}",
        erased.1
    );
    let input = folder.join("page.bin");
    std::fs::write(&input, message).unwrap();
    let written = cluster_page(
        description,
        0,
        "write",
        3,
        5,
        &["--page", "0", "--input", text(&input)],
    );
    assert!(written.0, "{}", written.2);
    let output = folder.join("read.bin");
    let read = cluster_page(
        description,
        0,
        "read",
        3,
        5,
        &["--page", "0", "--output", text(&output)],
    );
    assert!(read.0 && read.1.contains("3 hops"), "{}{}", read.1, read.2);
    let data = std::fs::read(&output).unwrap();
    assert!(
        data.starts_with(message),
        "the page read back starts with what was written"
    );
    (read.1, data)
}

/// A DiskSim trace (times in ms) of `count` writes of 16 sectors (8 KiB), 100 us apart, each
/// at a random one of the first `places` 8 KiB places (seed 1).
pub fn disksim_random_writes(count: u64, places: u64) -> String {
    let mut random = flashpipe_base::SplitMix64::new(1);
    (0..count)
        .map(|index| {
            let sector = (random.next_u64() % places) * 16;
            format!("{:.3} 0 {sector} 16 0\n", index as f64 * 0.1)
        })
        .collect()
}
