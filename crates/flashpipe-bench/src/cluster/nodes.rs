//! The cluster `bench cluster` measures: a four-node line on loopback ports (a
//! description and a key file written to a scratch folder), each node a child process
//! `flashpipe cluster node` (the binary running now, [`std::env::current_exe`]).
//!
//! Every child is killed and reaped when [`ClusterNodes`] is dropped, so an error anywhere
//! in the measurement ends them too; each is also told by the kernel to die with this
//! process (`PR_SET_PDEATHSIG`), so a benchmark stopped by Ctrl-C or killed outright leaves
//! none behind. Each node's standard error goes to `node-N.log` in the scratch folder, and a
//! node that is not ready in time is an error naming that log.

use std::fmt::Write as _;
use std::io::Write as _;
use std::net::TcpListener;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use super::ClusterLink;
use crate::child;
use crate::error::io_with;
use crate::BenchResult;

/// Nodes (and devices, and hosts: host `h` sits on node `h`) of the measured line.
pub const NODES: u32 = 4;
/// The device preset of every node unless `--preset` names another.
pub const PRESET: &str = "minflash";
/// How long a node may take to print its ready line.
const NODE_READY_TIMEOUT: Duration = Duration::from_secs(30);
/// Bytes of the generated cluster key.
const KEY_BYTES: usize = 32;

/// Running node processes, killed on drop.
pub struct ClusterNodes {
    description: PathBuf,
    children: Vec<Child>,
}

impl ClusterNodes {
    /// Writes the description and key into `folder` and starts every node, one after the
    /// other, each waited for until it prints its ready line.
    /// `preset` is written into the description as it is (see [`preset_in_description`]).
    pub fn start(folder: &Path, link: ClusterLink, preset: &str) -> BenchResult<ClusterNodes> {
        let program = std::env::current_exe().map_err(io_with(
            "finding the flashpipe binary for the cluster nodes",
        ))?;
        write_key(&folder.join("cluster.key"))?;
        let ports = free_ports()?;
        let description = folder.join("cluster.toml");
        std::fs::write(&description, line_description(&ports, link, preset))
            .map_err(io_with(format!("writing {}", description.display())))?;
        let mut nodes = ClusterNodes {
            description,
            children: Vec::with_capacity(NODES as usize),
        };
        for node in 0..NODES {
            let log_path = folder.join(format!("node-{node}.log"));
            let mut child = spawn_node(&program, &nodes.description, node, folder, &log_path)?;
            let stdout = child.stdout.take().expect("stdout was piped");
            nodes.children.push(child);
            let ready = |line: &str| line.contains(": ready on ").then_some(Ok(()));
            child::wait_until_ready(stdout, NODE_READY_TIMEOUT, ready).map_err(|error| {
                let who = format!("cluster node {node} ({} cluster node)", program.display());
                child::not_ready(&who, &error, &log_path)
            })?;
        }
        Ok(nodes)
    }

    /// The description file the nodes run.
    pub fn description(&self) -> &Path {
        &self.description
    }
}

impl Drop for ClusterNodes {
    fn drop(&mut self) {
        self.children.iter_mut().for_each(child::stop);
    }
}

/// A line 0 - 1 - 2 - 3, host `h` on node `h`, reads only (no shares), with the key on;
/// with `shm` the sockets in `run` beside the description.
fn line_description(ports: &[u16], link: ClusterLink, preset: &str) -> String {
    assert_eq!(ports.len(), NODES as usize, "one port per node");
    let preset = toml::Value::String(preset.to_string()).to_string();
    let mut text = String::from("version = 1\nkey_file = \"cluster.key\"\n");
    let _ = writeln!(text, "link = \"{}\"", link.name());
    for (node, port) in (0..NODES).zip(ports) {
        let links = if node + 1 < NODES {
            format!("[{}]", node + 1)
        } else {
            "[]".to_string()
        };
        let _ = write!(
            text,
            "[[node]]\nid = {node}\naddress = \"127.0.0.1:{port}\"\npreset = {preset}\nimage = \"node{node}.img\"\nlinks = {links}\n"
        );
    }
    for host in 0..NODES {
        let _ = write!(text, "[[host]]\nid = {host}\nnode = {host}\n");
    }
    text
}

/// How `--preset` is named in the generated description: a shipped preset by its name, a
/// preset file by its absolute path (the description lives in a scratch folder).
pub fn preset_in_description(preset: &str) -> BenchResult<String> {
    if flashpipe_flash::config::PRESET_NAMES.contains(&preset) {
        return Ok(preset.to_string());
    }
    let path = std::fs::canonicalize(preset)
        .map_err(io_with(format!("finding the preset file {preset}")))?;
    path.to_str().map(str::to_string).ok_or_else(|| {
        crate::error::invalid_input(format!(
            "--preset: the path {} is not UTF-8; name the file by another path",
            path.display()
        ))
        .into()
    })
}

/// Ports the kernel hands out for loopback listeners, released again for the nodes.
fn free_ports() -> BenchResult<Vec<u16>> {
    let listeners = (0..NODES)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(io_with("finding free loopback ports for the cluster nodes"))?;
    let ports = listeners
        .iter()
        .map(|listener| listener.local_addr().map(|address| address.port()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(io_with("finding free loopback ports for the cluster nodes"))?;
    Ok(ports)
}

/// A fresh random key, readable by its owner alone.
fn write_key(path: &Path) -> BenchResult {
    let mut key = [0u8; KEY_BYTES];
    let mut source = std::fs::File::open("/dev/urandom")
        .map_err(io_with("opening /dev/urandom for the cluster key"))?;
    std::io::Read::read_exact(&mut source, &mut key)
        .map_err(io_with("reading /dev/urandom for the cluster key"))?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(io_with(format!("creating {}", path.display())))?;
    file.write_all(&key)
        .map_err(io_with(format!("writing {}", path.display())))?;
    Ok(())
}

fn spawn_node(
    program: &Path,
    description: &Path,
    node: u32,
    images: &Path,
    log_path: &Path,
) -> BenchResult<Child> {
    let mut command = Command::new(program);
    command
        .args(["cluster", "node", "--cluster"])
        .arg(description)
        .args(["--node", &node.to_string(), "--image"])
        .arg(images);
    child::spawn_logged(&mut command, log_path, &format!("cluster node {node}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_description_is_valid() {
        use flashpipe_cluster::description::{ClusterDescription, LinkKind};
        for (link, kind) in [
            (ClusterLink::Tcp, LinkKind::Tcp),
            (ClusterLink::Shm, LinkKind::Shm),
        ] {
            let text = line_description(&[7400, 7401, 7402, 7403], link, PRESET);
            let description = ClusterDescription::from_toml(&text).expect("a valid description");
            assert_eq!(description.hops(0, 3), Some(3));
            assert!(description.host_on(2).is_some());
            assert_eq!(description.link, kind);
        }
    }

    #[test]
    fn a_preset_file_is_named_by_its_absolute_path() {
        use flashpipe_cluster::description::ClusterDescription;
        let file = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/presets/minflash-2bus.toml"
        );
        let named = preset_in_description(file).unwrap();
        assert!(Path::new(&named).is_absolute());
        let text = line_description(&[7400, 7401, 7402, 7403], ClusterLink::Tcp, &named);
        let description = ClusterDescription::from_toml(&text).expect("a valid description");
        let node = description.node(0).unwrap();
        assert_eq!(
            description.preset_config(node).unwrap().geometry.channels,
            2
        );
        assert_eq!(preset_in_description(PRESET).unwrap(), PRESET);
        let missing = preset_in_description("/nonexistent/preset.toml").unwrap_err();
        assert!(
            missing.to_string().contains("/nonexistent/preset.toml"),
            "{missing}"
        );
    }
}
