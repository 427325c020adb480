//! The child `flashpipe` processes benchmarks start on this machine (the NBD server of the
//! cluster's NBD hop, `bench net`'s disk nodes, `bench cluster`'s nodes), started and
//! awaited one way.
//!
//! [`spawn_logged`] starts a child with its standard output piped (for its ready line), its
//! standard error in a log file, and the kernel told to kill it when this process dies
//! (`PR_SET_PDEATHSIG`), so a benchmark killed outright leaves none behind.
//! [`wait_until_ready`] reads that standard output on a thread of its own until the child
//! says it is ready, and the thread then drains the rest until the child ends.
//! [`stop`] kills and reaps a child, as every owner does on drop.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::error::{io_context, io_with, BenchError, BenchErrorKind};
use crate::BenchResult;

/// Starts `command` with standard input empty, standard output piped and standard error
/// in a new file at `log_path`, to die with this process; `what` names it in an error
/// (`starting PROGRAM WHAT`).
pub(crate) fn spawn_logged(
    command: &mut Command,
    log_path: &Path,
    what: &str,
) -> BenchResult<Child> {
    let log = std::fs::File::create(log_path)
        .map_err(io_with(format!("creating {}", log_path.display())))?;
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log);
    // SAFETY: the closure runs in the child between fork and exec and calls only prctl,
    // which is async-signal-safe; it allocates nothing and touches no lock.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let program = Path::new(command.get_program()).display().to_string();
    command
        .spawn()
        .map_err(|error| io_context(error, format!("starting {program} {what}")).into())
}

/// Hands each line of `stdout` to `on_line` until it answers (ready: `Ok`, or a failure it
/// names), or the child ends first, or `timeout` passes.
pub(crate) fn wait_until_ready<T: Send + 'static>(
    stdout: ChildStdout,
    timeout: Duration,
    mut on_line: impl FnMut(&str) -> Option<Result<T, &'static str>> + Send + 'static,
) -> Result<T, String> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(answer) = on_line(&line) {
                let _ = sender.send(answer);
            }
        }
        let _ = sender.send(Err("ended before it was ready"));
    });
    match receiver.recv_timeout(timeout) {
        Ok(result) => result.map_err(str::to_string),
        Err(_) => Err(format!("not ready within {} s", timeout.as_secs())),
    }
}

/// The error of a child that did not get ready: `WHO: ERROR; its log: LOG`.
pub(crate) fn not_ready(who: &str, error: &str, log_path: &Path) -> BenchError {
    BenchError::new(
        BenchErrorKind::Io(std::io::ErrorKind::ConnectionRefused),
        format!("{who}: {error}; its log: {}", log_path.display()),
    )
}

/// Kills and reaps `child`; one that ended already makes kill fail harmlessly, and wait
/// reaps it either way.
pub(crate) fn stop(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}
