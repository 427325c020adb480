//! Disk nodes on this machine for `bench net`'s striping part: each a child process
//! `flashpipe serve --export disk=ram:SIZE --nbd 127.0.0.1:0` (the binary running now,
//! [`std::env::current_exe`]), its URI read from the line it prints.
//!
//! Every child is killed and reaped when [`DiskNodes`] is dropped, so an error anywhere in
//! the measurement ends them too; each is also told by the kernel to die with this process
//! (`PR_SET_PDEATHSIG`), so a benchmark killed outright leaves none behind. Their standard
//! error (connection logs, any failure) goes to `disk-node-N.log` in the scratch folder.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::error::{invalid_input, io_context, io_with, BenchError, BenchErrorKind};
use crate::BenchResult;

/// The export name of every disk node.
const DISK_NODE_EXPORT: &str = "disk";
/// How long a disk node may take to print its URI and its ready line.
const DISK_NODE_READY_TIMEOUT: Duration = Duration::from_secs(30);
/// Most disk nodes one store is striped over.
pub const MOST_DISK_NODES: u32 = 64;

/// Running disk nodes, killed on drop.
pub struct DiskNodes {
    children: Vec<Child>,
    uris: Vec<String>,
}

impl DiskNodes {
    /// Starts `count` disk nodes exporting a RAM disk of `size_bytes` each; their logs go
    /// to `log_folder`.
    pub fn start(count: u32, size_bytes: u64, log_folder: &Path) -> BenchResult<DiskNodes> {
        if count == 0 || count > MOST_DISK_NODES {
            return Err(invalid_input(format!(
                "disk nodes: {count} is not within 1..={MOST_DISK_NODES}"
            ))
            .into());
        }
        let program = std::env::current_exe()
            .map_err(io_with("finding the flashpipe binary for the disk nodes"))?;
        let mut nodes = DiskNodes {
            children: Vec::with_capacity(count as usize),
            uris: Vec::with_capacity(count as usize),
        };
        for index in 0..count {
            let log_path = log_folder.join(format!("disk-node-{index}.log"));
            let mut child = spawn_disk_node(&program, size_bytes, &log_path)?;
            let stdout = child.stdout.take().expect("stdout was piped");
            nodes.children.push(child);
            let uri = wait_for_uri(stdout).map_err(|error| {
                BenchError::new(
                    BenchErrorKind::Io(std::io::ErrorKind::ConnectionRefused),
                    format!(
                        "disk node {index} ({} serve): {error}; its log: {}",
                        program.display(),
                        log_path.display()
                    ),
                )
            })?;
            nodes.uris.push(uri);
        }
        Ok(nodes)
    }

    /// Each node's `nbd://127.0.0.1:PORT/disk`, in order.
    pub fn uris(&self) -> &[String] {
        &self.uris
    }
}

impl Drop for DiskNodes {
    fn drop(&mut self) {
        for child in &mut self.children {
            // A node that ended already makes kill fail harmlessly; wait reaps it either way.
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn spawn_disk_node(program: &Path, size_bytes: u64, log_path: &Path) -> BenchResult<Child> {
    let log = std::fs::File::create(log_path)
        .map_err(io_with(format!("creating {}", log_path.display())))?;
    let mut command = Command::new(program);
    command
        .args(["serve", "--export"])
        .arg(format!("{DISK_NODE_EXPORT}=ram:{size_bytes}"))
        .args(["--nbd", "127.0.0.1:0"])
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
    command
        .spawn()
        .map_err(|error| io_context(error, format!("starting {} serve", program.display())).into())
}

/// Reads the node's standard output on a thread of its own until its ready line, returning
/// the URI of its export; the thread then drains the rest until the node ends.
fn wait_for_uri(stdout: std::process::ChildStdout) -> Result<String, String> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut uri = None;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(found) = export_uri(&line) {
                uri = Some(found);
            }
            if line.contains("ready:") {
                let _ = sender.send(uri.take().ok_or("ready, but no export URI printed"));
            }
        }
        let _ = sender.send(Err("ended before it was ready"));
    });
    match receiver.recv_timeout(DISK_NODE_READY_TIMEOUT) {
        Ok(result) => result.map_err(str::to_string),
        Err(_) => Err(format!(
            "not ready within {} s",
            DISK_NODE_READY_TIMEOUT.as_secs()
        )),
    }
}

/// The `nbd://` URI in `flashpipe serve: nbd export disk at nbd://...`.
fn export_uri(line: &str) -> Option<String> {
    let rest = line.strip_prefix(&format!(
        "flashpipe serve: nbd export {DISK_NODE_EXPORT} at "
    ))?;
    rest.split_whitespace()
        .find(|uri| uri.starts_with("nbd://"))
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn export_uri_is_read_from_the_serve_line() {
        assert_eq!(
            export_uri("flashpipe serve: nbd export disk at nbd://127.0.0.1:40123/disk").as_deref(),
            Some("nbd://127.0.0.1:40123/disk")
        );
        assert_eq!(
            export_uri("flashpipe serve: nbd export other at nbd://127.0.0.1:1/other"),
            None
        );
        assert_eq!(export_uri("flashpipe serve: ready: disk node"), None);
    }
}
