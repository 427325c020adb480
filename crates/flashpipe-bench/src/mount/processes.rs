//! The processes `bench mount` drives: the `flashpipe` binary itself (mkfs, put, cat, rm and
//! a foreground `mount`, [`std::env::current_exe`]) and bindfs, the other FUSE file system
//! the metadata rows compare with.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{io_context, io_with, BenchError, BenchErrorKind};
use crate::BenchResult;

/// How long a mount may take to come up or to end.
const MOUNT_DEADLINE: Duration = Duration::from_secs(120);

/// The running `flashpipe` binary.
pub fn flashpipe_program() -> BenchResult<PathBuf> {
    Ok(std::env::current_exe().map_err(io_with("finding the flashpipe binary"))?)
}

/// `program` with no input, its standard output thrown away and its standard error piped
/// (what a failure says).
fn quiet_command(program: &Path) -> Command {
    let mut command = Command::new(program);
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    command
}

/// Runs `flashpipe ARGUMENTS` to its end, its output thrown away; how long it took.
pub fn run_flashpipe(program: &Path, arguments: &[&str]) -> BenchResult<Duration> {
    let started = Instant::now();
    let output = quiet_command(program)
        .args(arguments)
        .output()
        .map_err(io_with(format!("starting {}", program.display())))?;
    let took = started.elapsed();
    if !output.status.success() {
        return Err(BenchError::new(
            BenchErrorKind::Internal,
            format!(
                "flashpipe {} failed ({}): {}",
                arguments.join(" "),
                output.status,
                String::from_utf8_lossy(&output.stderr).trim_end()
            ),
        )
        .into());
    }
    Ok(took)
}

/// `flashpipe mount STORE DIR --foreground`, up until stopped; detached and killed when
/// dropped before [`FlashpipeMount::stop`].
pub struct FlashpipeMount {
    child: Option<Child>,
    directory: PathBuf,
}

impl FlashpipeMount {
    /// Mounts `store` on `directory` with `extra` options and waits for its "mounted on"
    /// line.
    pub fn start(
        program: &Path,
        store: &Path,
        directory: &Path,
        extra: &[String],
    ) -> BenchResult<FlashpipeMount> {
        let mut child = quiet_command(program)
            .arg("mount")
            .arg(store)
            .arg(directory)
            .arg("--foreground")
            .args(extra)
            .spawn()
            .map_err(io_with(format!("starting {} mount", program.display())))?;
        let stderr = child.stderr.take().expect("standard error was piped");
        let mut mount = FlashpipeMount {
            child: Some(child),
            directory: directory.to_path_buf(),
        };
        let said = wait_for_line(stderr, "mounted on");
        if let Err(said) = said {
            let status = mount.child.as_mut().and_then(|child| child.wait().ok());
            mount.child = None;
            return Err(BenchError::new(
                BenchErrorKind::Io(std::io::ErrorKind::Other),
                format!(
                    "flashpipe mount ended before its mount was up ({}): {}; FUSE needs /dev/fuse and fusermount3 (Debian package fuse3)",
                    status.map_or("not waited for".to_string(), |status| status.to_string()),
                    said.trim_end()
                ),
            )
            .into());
        }
        Ok(mount)
    }

    /// Unmounts (SIGTERM: every change committed) and waits for the process to end well.
    pub fn stop(mut self) -> BenchResult<()> {
        let mut child = self.child.take().expect("a mount not stopped yet");
        let pid = i32::try_from(child.id()).expect("a process id fits an i32");
        // SAFETY: kill with a valid pid and signal has no memory effects.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + MOUNT_DEADLINE;
        loop {
            if let Some(status) = child
                .try_wait()
                .map_err(io_with("waiting for the mount to end"))?
            {
                if status.success() {
                    return Ok(());
                }
                return Err(BenchError::new(
                    BenchErrorKind::Internal,
                    format!(
                        "the mount on {} ended with {status}",
                        self.directory.display()
                    ),
                )
                .into());
            }
            if Instant::now() > deadline {
                return Err(BenchError::new(
                    BenchErrorKind::Io(std::io::ErrorKind::TimedOut),
                    format!(
                        "the mount on {} did not end within {} s of SIGTERM",
                        self.directory.display(),
                        MOUNT_DEADLINE.as_secs()
                    ),
                )
                .into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for FlashpipeMount {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            detach(&self.directory);
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Reads `stream` until a line holding `needle` (Ok) or its end (Err: what it said); then
/// keeps draining it on a thread so that the writer never blocks on a full pipe.
fn wait_for_line(stream: impl std::io::Read + Send + 'static, needle: &str) -> Result<(), String> {
    let mut reader = BufReader::new(stream);
    let mut said = String::new();
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return Err(said),
            Ok(_) => {}
        }
        said.push_str(&line);
        if line.contains(needle) {
            break;
        }
    }
    std::thread::spawn(move || {
        let mut rest = String::new();
        while reader.read_line(&mut rest).unwrap_or(0) > 0 {
            rest.clear();
        }
    });
    Ok(())
}

/// bindfs mirroring `source` on `directory`, unmounted when dropped.
pub struct BindfsMount {
    directory: PathBuf,
}

impl BindfsMount {
    /// Mounts `source` on `directory` with bindfs (which returns once mounted).
    pub fn start(source: &Path, directory: &Path) -> BenchResult<BindfsMount> {
        let output = Command::new("bindfs")
            .arg(source)
            .arg(directory)
            .stdin(Stdio::null())
            .output()
            .map_err(|error| {
                if error.kind() == std::io::ErrorKind::NotFound {
                    BenchError::new(
                        BenchErrorKind::NotFound,
                        "bindfs is not installed; bench mount compares the mount's metadata operations with it (Debian package bindfs: apt-get install bindfs)",
                    )
                } else {
                    io_context(error, "starting bindfs")
                }
            })?;
        if !output.status.success() {
            return Err(BenchError::new(
                BenchErrorKind::Io(std::io::ErrorKind::Other),
                format!(
                    "bindfs {} {} failed ({}): {}",
                    source.display(),
                    directory.display(),
                    output.status,
                    String::from_utf8_lossy(&output.stderr).trim_end()
                ),
            )
            .into());
        }
        Ok(BindfsMount {
            directory: directory.to_path_buf(),
        })
    }
}

impl Drop for BindfsMount {
    fn drop(&mut self) {
        detach(&self.directory);
    }
}

/// Unmounts a FUSE mount on `directory`, lazily, ignoring failures.
fn detach(directory: &Path) {
    let _ = Command::new("fusermount3")
        .arg("-u")
        .arg("-z")
        .arg(directory)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}
