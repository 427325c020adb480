//! Helpers shared by the `serve_*` tests: start `flashpipe serve` on a store and wait for
//! its readiness line, send it signals, count its open file descriptors, run CLI commands
//! as separate processes (the clients), and check a store after the server is gone.

#![allow(dead_code)] // each test file uses the helpers it needs

use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use flashpipe_testkit::tools::stdout_of;

/// How long a test waits for the readiness line before it gives up (a hang guard, not a
/// timing assertion: a healthy server is ready in milliseconds).
const READINESS_GUARD: Duration = Duration::from_secs(120);

/// Whether `flashpipe ls STORE` succeeds within about five seconds (tried every 25 ms): a
/// client refused for a limit is admitted again once a connection has gone.
pub fn lists_again(store: &Path) -> bool {
    (0..200).any(|_| {
        let listed = flashpipe(&["ls", text(store)]).status.success();
        if !listed {
            std::thread::sleep(Duration::from_millis(25));
        }
        listed
    })
}

/// The `flashpipe` binary built for these tests.
pub fn flashpipe_binary() -> &'static str {
    env!("CARGO_BIN_EXE_flashpipe")
}

/// Runs one CLI command to its end (a client process when a server holds the store).
pub fn flashpipe(arguments: &[&str]) -> Output {
    Command::new(flashpipe_binary())
        .args(arguments)
        .stdin(Stdio::null())
        .output()
        .expect("the flashpipe binary runs")
}

/// Runs one CLI command with environment variables set.
pub fn flashpipe_with_environment(arguments: &[&str], environment: &[(&str, &str)]) -> Output {
    let mut command = Command::new(flashpipe_binary());
    command.args(arguments).stdin(Stdio::null());
    for (name, value) in environment {
        command.env(name, value);
    }
    command.output().expect("the flashpipe binary runs")
}

/// Runs a command expected to succeed; returns its standard output.
pub fn succeed(arguments: &[&str]) -> String {
    let output = flashpipe(arguments);
    assert!(
        output.status.success(),
        "flashpipe {arguments:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8 output")
}

/// Runs a command expected to succeed; returns its standard error.
pub fn succeed_stderr(arguments: &[&str]) -> String {
    let output = flashpipe(arguments);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "flashpipe {arguments:?} failed: {stderr}"
    );
    stderr
}

/// Runs a command expected to fail; returns its standard error (checked for no panic).
pub fn fail_stderr(arguments: &[&str]) -> String {
    let output = flashpipe(arguments);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        !output.status.success(),
        "flashpipe {arguments:?} should fail"
    );
    assert!(
        !stderr.contains("panicked"),
        "{arguments:?} panicked: {stderr}"
    );
    stderr
}

/// A path as the `&str` argument the binary takes (test folders are UTF-8).
pub fn text(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 test path")
}

#[allow(unused_imports)] // each test file uses the helpers it needs
pub use flashpipe_testkit::cli_args::command_line;
pub use flashpipe_testkit::scratch::TestFolder;

/// A fresh test folder named `name` holding a file store of `size` (`s.toml` on `a.img`).
pub fn folder_with_store(name: &str, size: &str) -> (TestFolder, PathBuf) {
    let folder = TestFolder::new(name);
    let store = file_store(&folder, size);
    (folder, store)
}

/// Makes a store of one file device `a.img` of `size` in `folder`; returns its store file.
pub fn file_store(folder: &TestFolder, size: &str) -> PathBuf {
    let store = folder.join("s.toml");
    stdout_of(
        Command::new(flashpipe_binary())
            .args(["mkfs", "--devices", "a.img", "--size", size, text(&store)])
            .current_dir(folder.path()),
        "mkfs",
    );
    store
}

/// A running `flashpipe serve`, killed with SIGKILL if still running when dropped.
pub struct ServerProcess {
    child: Option<Child>,
    /// The server's process id.
    pub pid: u32,
    /// The socket its readiness line names.
    pub socket: PathBuf,
    /// The readiness line.
    pub readiness_line: String,
    rest_of_stdout: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<String>,
}

/// How a server process ended: its status and what it printed after the readiness line.
#[derive(Debug)]
pub struct ServerExit {
    /// The exit status.
    pub status: ExitStatus,
    /// Standard output after the readiness line.
    pub stdout: String,
    /// Standard error (the logs).
    pub stderr: String,
}

impl ServerProcess {
    /// Starts `flashpipe serve STORE -v EXTRA...` and waits for its readiness line.
    pub fn start(store: &Path, extra_arguments: &[&str]) -> ServerProcess {
        ServerProcess::start_with_environment(store, extra_arguments, &[])
    }

    /// As [`ServerProcess::start`], with environment variables set for the server.
    pub fn start_with_environment(
        store: &Path,
        extra_arguments: &[&str],
        environment: &[(&str, &str)],
    ) -> ServerProcess {
        let mut command = Command::new(flashpipe_binary());
        command
            .args(["serve", text(store), "-v"])
            .args(extra_arguments)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (name, value) in environment {
            command.env(name, value);
        }
        let mut child = command.spawn().expect("flashpipe serve starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        let lines = flashpipe_testkit::tools::line_channel(stdout);
        let (stderr_sender, stderr_text) = mpsc::channel();
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = BufReader::new(stderr).read_to_string(&mut text);
            let _ = stderr_sender.send(text);
        });
        let readiness_line = match lines.recv_timeout(READINESS_GUARD) {
            Ok(line) => line,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                let logs = stderr_text.recv().unwrap_or_default();
                panic!("flashpipe serve printed no readiness line; its logs:\n{logs}");
            }
        };
        let (socket, pid) = parse_readiness_line(&readiness_line);
        assert_eq!(pid, child.id(), "the readiness line names the server's pid");
        ServerProcess {
            child: Some(child),
            pid,
            socket,
            readiness_line,
            rest_of_stdout: lines,
            stderr: stderr_text,
        }
    }

    /// Sends `signal` (libc's number) to the server.
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on the pid of a child this test started and has not reaped.
        let status = unsafe { libc::kill(self.pid as libc::pid_t, signal) };
        assert_eq!(status, 0, "kill({}, {signal})", self.pid);
    }

    /// Sends `signal` and waits for the server to exit.
    pub fn stop_with(mut self, signal: i32) -> ServerExit {
        self.signal(signal);
        self.wait()
    }

    /// Sends SIGTERM and checks that the server exited with status 0; returns how it ended.
    pub fn stop_cleanly(self) -> ServerExit {
        let exit = self.stop_with(libc::SIGTERM);
        assert!(exit.status.success(), "{exit:?}");
        exit
    }

    /// Waits for the server to exit by itself.
    pub fn wait(&mut self) -> ServerExit {
        let mut child = self
            .child
            .take()
            .expect("the server was not waited for yet");
        let status = child.wait().expect("waiting for flashpipe serve");
        let stdout: Vec<String> = self.rest_of_stdout.iter().collect();
        let stderr = self.stderr.recv().unwrap_or_default();
        ServerExit {
            status,
            stdout: stdout.join("\n"),
            stderr,
        }
    }

    /// Threads of the server now (entries of `/proc/PID/task`).
    pub fn thread_count(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/task", self.pid))
            .expect("the server's /proc/PID/task is readable")
            .count()
    }

    /// The server's resident memory now, in bytes (`VmRSS` of `/proc/PID/status`).
    pub fn resident_bytes(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid))
            .expect("the server's /proc/PID/status is readable");
        let kib: u64 = status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|value| value.split_whitespace().next())
            .and_then(|number| number.parse().ok())
            .expect("VmRSS in /proc/PID/status");
        kib * 1024
    }

    /// Open file descriptors of the server now (entries of `/proc/PID/fd`).
    pub fn open_file_descriptors(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid))
            .expect("the server's /proc/PID/fd is readable")
            .count()
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The socket and pid a readiness line names:
/// `flashpipe serve: ready: store S on socket P (pid N)`.
pub fn parse_readiness_line(line: &str) -> (PathBuf, u32) {
    let after_socket = line
        .split(" on socket ")
        .nth(1)
        .unwrap_or_else(|| panic!("readiness line {line:?} names no socket"));
    let (socket, pid_part) = after_socket
        .rsplit_once(" (pid ")
        .unwrap_or_else(|| panic!("readiness line {line:?} names no pid"));
    let pid = pid_part
        .trim_end_matches(')')
        .parse()
        .unwrap_or_else(|_| panic!("readiness line {line:?}: bad pid"));
    (PathBuf::from(socket), pid)
}

/// Asserts that `fsck` (run with no server, in this process's CLI) finds the store clean.
pub fn assert_fsck_clean(store: &Path) {
    let output = flashpipe(&["fsck", text(store)]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("clean"),
        "fsck of {} is not clean: {stdout}{}",
        store.display(),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Deterministic contents of `length` bytes for file number `index` of a test.
pub fn file_contents(index: u64, length: usize) -> Vec<u8> {
    let mut random = flashpipe_base::SplitMix64::for_case(1, index);
    (0..length)
        .map(|_| (random.next_u64() >> 24) as u8)
        .collect()
}

/// Reads file `name` of `store` to bytes with `get NAME -`.
pub fn read_back(store: &Path, name: &str) -> Vec<u8> {
    let output = flashpipe(&["get", text(store), name, "-"]);
    assert!(
        output.status.success(),
        "get {name} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

/// Checks that a command succeeded; the failure message is `what` and its standard error.
pub fn assert_succeeded(output: &Output, what: &str) {
    assert!(
        output.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Puts inputs `data:a`, `data:b` and `data:c` into `store`: `least_bytes`,
/// `least_bytes + 70001` and `least_bytes + 140002` bytes of [`file_contents`], written
/// through local files in `folder`.
pub fn put_three_inputs(store: &Path, folder: &TestFolder, least_bytes: usize) {
    for (index, name) in ["data:a", "data:b", "data:c"].iter().enumerate() {
        let local = folder.join(format!("local-{index}.bin"));
        std::fs::write(
            &local,
            file_contents(index as u64, least_bytes + index * 70_001),
        )
        .unwrap();
        succeed(&["put", text(store), text(&local), "--as", name]);
    }
}
