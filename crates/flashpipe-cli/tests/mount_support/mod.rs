//! What the mount tests share: whether FUSE is here, running shell lines in a folder, a
//! foreground `flashpipe mount` held by the test (stopped by a signal or killed, its dead
//! mount detached), and a fresh file store with an empty mount point.

#![allow(dead_code)] // each test file uses the helpers it needs

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::{file_store, text};

/// True when FUSE mounts can be made here; otherwise prints why `test` is skipped.
pub fn fuse_available(test: &str) -> bool {
    if !Path::new("/dev/fuse").exists() {
        flashpipe_testkit::tools::skip(
            test,
            "/dev/fuse is absent (no FUSE in this kernel or container)",
        );
        return false;
    }
    flashpipe_testkit::tools::programs_or_skip(test, &["fusermount3"])
}

/// Runs a shell command line in `folder`; its output.
pub fn shell(folder: &Path, line: &str) -> Output {
    Command::new("sh")
        .args(["-c", line])
        .current_dir(folder)
        .output()
        .expect("sh runs")
}

/// Runs a shell command line in `folder` that must succeed; its standard output.
pub fn shell_ok(folder: &Path, line: &str) -> String {
    let output = shell(folder, line);
    assert!(
        output.status.success(),
        "`{line}` failed ({}): {}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A mount in the foreground, its process held by the test.
pub struct Mounted {
    pub child: Option<Child>,
    pub directory: PathBuf,
    /// What the mount wrote on its standard error after its "mounted on" line.
    pub said: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Mounted {
    /// Mounts `store` on `directory` (`--foreground`, with `extra` options) and waits for
    /// its "mounted on" line.
    pub fn start(store: &Path, directory: &Path, extra: &[&str]) -> Mounted {
        let mut child = Command::new(env!("CARGO_BIN_EXE_flashpipe"))
            .args(["mount", text(store), text(directory), "--foreground"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("flashpipe mount starts");
        let mut stderr = BufReader::new(child.stderr.take().expect("piped"));
        let mut said = String::new();
        loop {
            let mut line = String::new();
            let read = stderr.read_line(&mut line).expect("stderr is text");
            said.push_str(&line);
            if read == 0 {
                let status = child.wait().expect("waited");
                panic!("the mount ended before it was up ({status}): {said}");
            }
            if line.contains("mounted on") {
                break;
            }
        }
        // keep draining its standard error so that it never blocks on a full pipe
        let said = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let kept = std::sync::Arc::clone(&said);
        std::thread::spawn(move || {
            let mut line = String::new();
            while stderr.read_line(&mut line).unwrap_or(0) > 0 {
                kept.lock().expect("not poisoned").push_str(&line);
                line.clear();
            }
        });
        Mounted {
            child: Some(child),
            directory: directory.to_path_buf(),
            said,
        }
    }

    /// Ends the mount with `signal` and checks that the process exits with status 0.
    pub fn stop(mut self, signal: i32) {
        let mut child = self.child.take().expect("running");
        let pid = i32::try_from(child.id()).expect("a pid");
        // SAFETY: kill with a valid pid and signal has no memory effects.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
        let status = wait_with_deadline(&mut child, Duration::from_secs(60));
        assert!(
            status.success(),
            "the mount exited with {status}; it said: {}",
            self.said.lock().expect("not poisoned")
        );
    }

    /// Kills the mount process with SIGKILL and detaches its dead mount.
    pub fn kill(mut self) {
        let mut child = self.child.take().expect("running");
        child.kill().expect("SIGKILL");
        let _ = child.wait();
        detach(&self.directory);
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            detach(&self.directory);
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Detaches a background mount when dropped (a failed test leaves no mount behind).
pub struct DetachOnDrop(pub PathBuf);

impl Drop for DetachOnDrop {
    fn drop(&mut self) {
        detach(&self.0);
    }
}

/// Lazily unmounts `directory` (a dead or leftover mount), ignoring failures.
pub fn detach(directory: &Path) {
    let _ = Command::new("fusermount3")
        .args(["-u", "-z", text(directory)])
        .stderr(Stdio::null())
        .status();
}

pub fn wait_with_deadline(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "the mount did not end in {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A store of 256 MiB and an empty mount point in a fresh folder.
pub fn store_and_mount_point(folder: &Path) -> (PathBuf, PathBuf) {
    let store = file_store(folder, "256M");
    let directory = folder.join("m");
    std::fs::create_dir(&directory).expect("mount point");
    (store, directory)
}
