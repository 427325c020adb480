//! Disk nodes on this machine for `bench net`'s striping part: each a child process
//! `flashpipe serve --export disk=ram:SIZE --nbd 127.0.0.1:0` (the binary running now,
//! [`std::env::current_exe`]), its URI read from the line it prints.
//!
//! Every child is killed and reaped when [`DiskNodes`] is dropped, so an error anywhere in
//! the measurement ends them too; each is also told by the kernel to die with this process
//! (`PR_SET_PDEATHSIG`), so a benchmark killed outright leaves none behind. Their standard
//! error (connection logs, any failure) goes to `disk-node-N.log` in the scratch folder.

use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

use crate::child;
use crate::error::{invalid_input, io_with};
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
                let who = format!("disk node {index} ({} serve)", program.display());
                child::not_ready(&who, &error, &log_path)
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
        self.children.iter_mut().for_each(child::stop);
    }
}

fn spawn_disk_node(program: &Path, size_bytes: u64, log_path: &Path) -> BenchResult<Child> {
    let mut command = Command::new(program);
    command
        .args(["serve", "--export"])
        .arg(format!("{DISK_NODE_EXPORT}=ram:{size_bytes}"))
        .args(["--nbd", "127.0.0.1:0"]);
    child::spawn_logged(&mut command, log_path, "serve")
}

/// Reads the node's standard output until its ready line, returning the URI of its export.
fn wait_for_uri(stdout: std::process::ChildStdout) -> Result<String, String> {
    let mut uri = None;
    child::wait_until_ready(stdout, DISK_NODE_READY_TIMEOUT, move |line| {
        if let Some(found) = export_uri(line) {
            uri = Some(found);
        }
        line.contains("ready:")
            .then(|| uri.take().ok_or("ready, but no export URI printed"))
    })
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
