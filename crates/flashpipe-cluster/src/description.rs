//! The cluster description file (TOML, documented in docs/cluster.md): the nodes (id,
//! address, device preset, image path, links) and the hosts (id, attached node, weight,
//! block shares per device), checked as a whole before anything runs: duplicate ids, links
//! to unknown nodes, a disconnected array, two hosts on one node, overlapping shares,
//! shares past the preset's geometry and unknown presets are refused with a message that
//! names the entry. A node's device id is its node id. The link kind (`tcp` or `shm`) and
//! the socket folder of shared-memory links are read here too; with `shm` every node's
//! address must be a loopback address. A node's preset is a shipped preset's name or the
//! path of a preset file (relative to the description's folder), read when the description
//! is checked.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io::Read;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use flashpipe_flash::config::PRESET_NAMES;
use flashpipe_flash::FlashConfig;
use serde::Deserialize;

use crate::arbiter::RequestCosts;
use crate::router::RouterConfig;
use crate::shares::{BlockRange, ShareError, Shares};

/// The one version of the file this code reads.
pub const DESCRIPTION_VERSION: u32 = 1;
/// The largest description file read.
pub const MAX_DESCRIPTION_BYTES: u64 = 1 << 20;
/// The socket folder of shared-memory links when the description names none (relative to
/// the description's folder).
pub const DEFAULT_SOCKET_DIR: &str = "run";
/// The longest `socket_dir` accepted, in bytes: a Unix socket path holds at most 107 bytes,
/// and `node-<id>.sock` takes up to 20 of them.
pub const MAX_SOCKET_DIR_BYTES: usize = 80;

/// How the nodes' links and host connections are carried.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkKind {
    /// TCP on loopback (the default).
    #[default]
    Tcp,
    /// Shared-memory rings set up over a Unix socket (nodes on one machine).
    Shm,
}

impl LinkKind {
    /// The name the description uses.
    pub fn name(self) -> &'static str {
        match self {
            LinkKind::Tcp => "tcp",
            LinkKind::Shm => "shm",
        }
    }
}

/// A flash node.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeDescription {
    /// Node id, which is also its device id.
    pub id: u32,
    /// Where the node listens (host:port).
    pub address: String,
    /// The device preset: a shipped preset's name (`flashpipe sim presets` lists them) or
    /// the path of a preset file in the same TOML form (relative to the description's
    /// folder unless absolute).
    pub preset: String,
    /// The device's image file.
    pub image: String,
    /// Neighbour node ids (a link is declared by either end or both).
    #[serde(default)]
    pub links: Vec<u32>,
}

/// A host's share of one device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShareDescription {
    /// The device (node id).
    pub device: u32,
    /// First block of every chip.
    pub start: u32,
    /// One past the last block.
    pub end: u32,
}

fn default_weight() -> u32 {
    1
}

/// A host.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostDescription {
    /// Host id: hosts are numbered 0, 1, 2, ...
    pub id: u32,
    /// The node it is attached to.
    pub node: u32,
    /// Its weight in the arbiters (default 1).
    #[serde(default = "default_weight")]
    pub weight: u32,
    /// Blocks it may program and erase.
    #[serde(default)]
    pub shares: Vec<ShareDescription>,
}

/// The whole file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterDescription {
    /// File version.
    pub version: u32,
    /// The cluster's key (relative to the description's folder): a file of 32 to 4096
    /// secret bytes, readable by its owner only, that every node and host proves it holds
    /// before a link or a host connection carries a frame (docs/cluster-wire.md, "Key
    /// proof"). Without it connections are not authenticated.
    #[serde(default)]
    pub key_file: Option<String>,
    /// How links and host connections are carried: `tcp` (default) or `shm`.
    #[serde(default)]
    pub link: LinkKind,
    /// The folder of the nodes' Unix sockets for `shm` links, relative to the description's
    /// folder (default [`DEFAULT_SOCKET_DIR`]).
    #[serde(default)]
    pub socket_dir: Option<String>,
    /// The nodes.
    #[serde(rename = "node", default)]
    pub nodes: Vec<NodeDescription>,
    /// The hosts.
    #[serde(rename = "host", default)]
    pub hosts: Vec<HostDescription>,
    /// The description's folder, against which preset files are found (not in the file:
    /// set by [`ClusterDescription::from_file`], the current folder for `from_toml`).
    #[serde(skip)]
    folder: PathBuf,
}

/// Why a description was refused.
#[derive(Debug, thiserror::Error)]
pub enum DescriptionError {
    /// The file could not be read.
    #[error("cannot read cluster description {path}: {detail}")]
    Unreadable {
        /// The path.
        path: String,
        /// Why.
        detail: String,
    },
    /// Not valid TOML or not the expected fields.
    #[error("cluster description is not valid: {detail}")]
    Syntax {
        /// The parser's message.
        detail: String,
    },
    /// A version this code does not read.
    #[error("cluster description version {version} is not supported (this release reads {DESCRIPTION_VERSION})")]
    Version {
        /// The version found.
        version: u32,
    },
    /// No node at all.
    #[error("cluster description names no node; add a [[node]] table")]
    NoNodes,
    /// Two nodes or two hosts with one id.
    #[error("{what} id {id} is used twice; give each {what} its own id")]
    DuplicateId {
        /// `node` or `host`.
        what: &'static str,
        /// The id.
        id: u32,
    },
    /// Host ids are not 0, 1, 2, ...
    #[error("host ids must be 0 to {last} with none missing; host {missing} is missing")]
    HostIdsNotDense {
        /// The highest id expected.
        last: u32,
        /// The first id missing.
        missing: u32,
    },
    /// A node whose address is not host:port.
    #[error("node {node}: address {address} is not host:port (a port from 1 to 65535)")]
    BadAddress {
        /// The node.
        node: u32,
        /// The address given.
        address: String,
    },
    /// A preset that is neither shipped nor a readable preset file.
    #[error("node {node}: device preset {preset}: {detail}")]
    UnknownPreset {
        /// The node.
        node: u32,
        /// The preset named.
        preset: String,
        /// Why it was refused (it names the shipped presets when the file does not exist).
        detail: String,
    },
    /// A link to a node that is not described.
    #[error("node {node} links to node {target}, which the description does not name")]
    LinkToUnknown {
        /// The node.
        node: u32,
        /// The unknown node.
        target: u32,
    },
    /// A link from a node to itself.
    #[error("node {node} links to itself; remove it from its own links")]
    LinkToSelf {
        /// The node.
        node: u32,
    },
    /// Some node cannot be reached from the others.
    #[error(
        "node {node} cannot be reached from node {from}: every node must be linked into one array"
    )]
    Disconnected {
        /// The first node.
        from: u32,
        /// A node it cannot reach.
        node: u32,
    },
    /// A host attached to a node that is not described.
    #[error("host {host} is attached to node {node}, which the description does not name")]
    HostOnUnknownNode {
        /// The host.
        host: u32,
        /// The node.
        node: u32,
    },
    /// Two hosts on one node (a node has one host port).
    #[error("hosts {first} and {second} are both attached to node {node}; a node takes one host")]
    NodeHasTwoHosts {
        /// The node.
        node: u32,
        /// One host.
        first: u32,
        /// The other.
        second: u32,
    },
    /// A host weight of 0.
    #[error("host {host} has weight 0; weights are at least 1")]
    ZeroWeight {
        /// The host.
        host: u32,
    },
    /// A share of a device that is not described.
    #[error("host {host} has a share of device {device}, which the description does not name")]
    ShareOfUnknownDevice {
        /// The host.
        host: u32,
        /// The device.
        device: u32,
    },
    /// A share that is empty, past the geometry, or overlapping another.
    #[error(transparent)]
    Share(#[from] ShareError),
    /// A shared-memory cluster with a node that is not on this machine.
    #[error("link = \"shm\" needs every node on this machine, but node {node}'s address {address} is not a loopback address; use 127.0.0.1 or link = \"tcp\"")]
    ShmNotLoopback {
        /// The node.
        node: u32,
        /// Its address.
        address: String,
    },
    /// A socket folder that is empty or too long for a Unix socket path.
    #[error("socket_dir \"{dir}\" must be 1 to {MAX_SOCKET_DIR_BYTES} bytes without a NUL byte; name a shorter folder")]
    BadSocketDir {
        /// The folder given.
        dir: String,
    },
}

impl ClusterDescription {
    /// Reads and checks a description file (at most [`MAX_DESCRIPTION_BYTES`]).
    pub fn from_file(path: &Path) -> Result<ClusterDescription, DescriptionError> {
        let unreadable = |detail: String| DescriptionError::Unreadable {
            path: path.display().to_string(),
            detail,
        };
        let file = std::fs::File::open(path).map_err(|error| unreadable(error.to_string()))?;
        let is_file = file.metadata().map(|metadata| metadata.is_file());
        if !is_file.map_err(|error| unreadable(error.to_string()))? {
            return Err(unreadable("not a regular file".to_string()));
        }
        let mut text = String::new();
        file.take(MAX_DESCRIPTION_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(|error| unreadable(error.to_string()))?;
        if text.len() as u64 > MAX_DESCRIPTION_BYTES {
            return Err(unreadable(format!(
                "over the limit of {MAX_DESCRIPTION_BYTES} bytes"
            )));
        }
        let folder = path.parent().unwrap_or(Path::new("."));
        ClusterDescription::from_toml_in(&text, folder)
    }

    /// Parses and checks a description whose preset files are found from the current folder.
    pub fn from_toml(text: &str) -> Result<ClusterDescription, DescriptionError> {
        ClusterDescription::from_toml_in(text, Path::new("."))
    }

    /// Parses and checks a description whose preset files are found from `folder`.
    pub fn from_toml_in(text: &str, folder: &Path) -> Result<ClusterDescription, DescriptionError> {
        let mut description: ClusterDescription =
            toml::from_str(text).map_err(|error| DescriptionError::Syntax {
                detail: error.message().to_string(),
            })?;
        description.folder = folder.to_path_buf();
        description.validate()?;
        Ok(description)
    }

    /// The device configuration of a node: its shipped preset, or its preset file read
    /// from the description's folder.
    pub fn preset_config(&self, node: &NodeDescription) -> Result<FlashConfig, DescriptionError> {
        let preset = if PRESET_NAMES.contains(&node.preset.as_str()) {
            FlashConfig::preset(&node.preset)
        } else {
            FlashConfig::preset_or_file(&self.folder.join(&node.preset).to_string_lossy())
        };
        preset.map_err(|error| DescriptionError::UnknownPreset {
            node: node.id,
            preset: node.preset.clone(),
            detail: error.to_string(),
        })
    }

    /// The socket folder of shared-memory links as written (relative to the description's
    /// folder unless absolute).
    pub fn socket_dir(&self) -> &str {
        self.socket_dir.as_deref().unwrap_or(DEFAULT_SOCKET_DIR)
    }

    /// The node with this id.
    pub fn node(&self, id: u32) -> Option<&NodeDescription> {
        self.nodes.iter().find(|node| node.id == id)
    }

    /// The host attached to a node, if any.
    pub fn host_on(&self, node: u32) -> Option<&HostDescription> {
        self.hosts.iter().find(|host| host.node == node)
    }

    /// A node's neighbours in link order (ascending ids; links count both ends' lists).
    pub fn neighbours(&self, node: u32) -> Vec<u32> {
        let mut found = BTreeSet::new();
        for other in &self.nodes {
            if other.id == node {
                found.extend(other.links.iter().copied());
            } else if other.links.contains(&node) {
                found.insert(other.id);
            }
        }
        found.into_iter().collect()
    }

    /// Shortest hop counts from `node` to every node, and the neighbour each path starts with.
    fn paths_from(&self, node: u32) -> BTreeMap<u32, (u32, Option<u32>)> {
        let mut seen = BTreeMap::from([(node, (0u32, None))]);
        let mut queue = VecDeque::from([node]);
        while let Some(at) = queue.pop_front() {
            let (hops, first) = seen[&at];
            for next in self.neighbours(at) {
                seen.entry(next).or_insert_with(|| {
                    queue.push_back(next);
                    (hops + 1, first.or(Some(next)))
                });
            }
        }
        seen
    }

    /// Hops from one node to another, if linked.
    pub fn hops(&self, from: u32, to: u32) -> Option<u32> {
        self.paths_from(from).get(&to).map(|&(hops, _)| hops)
    }

    /// The shares of one device.
    pub fn shares_of(&self, device: u32) -> Result<Shares, DescriptionError> {
        let node = self
            .node(device)
            .ok_or(DescriptionError::ShareOfUnknownDevice { host: 0, device })?;
        let blocks = self.preset_config(node)?.blocks_per_way();
        let declared = self.hosts.iter().flat_map(|host| {
            host.shares
                .iter()
                .filter(move |share| share.device == device)
                .map(move |share| {
                    (
                        host.id,
                        BlockRange {
                            start: share.start,
                            end: share.end,
                        },
                    )
                })
        });
        Ok(Shares::new(device, blocks, declared)?)
    }

    /// The router configuration of one node; `None` for a node not described.
    pub fn router_config(
        &self,
        node: u32,
        tags: u32,
        queue_limit: u32,
        costs: RequestCosts,
    ) -> Option<RouterConfig> {
        self.node(node)?;
        let neighbours = self.neighbours(node);
        let next_hop = self
            .paths_from(node)
            .into_iter()
            .filter_map(|(device, (_, first))| {
                let first = first?;
                let link = neighbours.iter().position(|&id| id == first)?;
                Some((device, link))
            })
            .collect();
        let mut host_weights: Vec<(u32, u32)> = self
            .hosts
            .iter()
            .map(|host| (host.id, host.weight))
            .collect();
        host_weights.sort();
        Some(RouterConfig {
            device: node,
            has_host: self.host_on(node).is_some(),
            links: neighbours.len(),
            next_hop,
            tags,
            queue_limit,
            host_weights: host_weights.into_iter().map(|(_, weight)| weight).collect(),
            costs,
            shares: self.shares_of(node).ok(),
        })
    }

    fn validate(&self) -> Result<(), DescriptionError> {
        if self.version != DESCRIPTION_VERSION {
            return Err(DescriptionError::Version {
                version: self.version,
            });
        }
        let first = self.nodes.first().ok_or(DescriptionError::NoNodes)?;
        let mut ids = BTreeSet::new();
        for node in &self.nodes {
            if !ids.insert(node.id) {
                return Err(DescriptionError::DuplicateId {
                    what: "node",
                    id: node.id,
                });
            }
            let port = node.address.rsplit_once(':').and_then(|(host, port)| {
                let port = port.parse::<u16>().ok().filter(|&port| port > 0)?;
                (!host.trim().is_empty()).then_some(port)
            });
            if port.is_none() {
                return Err(DescriptionError::BadAddress {
                    node: node.id,
                    address: node.address.clone(),
                });
            }
            self.preset_config(node)?;
        }
        for node in &self.nodes {
            for &target in &node.links {
                if target == node.id {
                    return Err(DescriptionError::LinkToSelf { node: node.id });
                }
                if !ids.contains(&target) {
                    return Err(DescriptionError::LinkToUnknown {
                        node: node.id,
                        target,
                    });
                }
            }
        }
        let reached = self.paths_from(first.id);
        if let Some(&node) = ids.iter().find(|id| !reached.contains_key(id)) {
            return Err(DescriptionError::Disconnected {
                from: first.id,
                node,
            });
        }
        self.validate_hosts(&ids)?;
        self.validate_link()?;
        for &device in &ids {
            self.shares_of(device)?;
        }
        Ok(())
    }

    fn validate_hosts(&self, nodes: &BTreeSet<u32>) -> Result<(), DescriptionError> {
        let mut hosts = BTreeSet::new();
        let mut attached: BTreeMap<u32, u32> = BTreeMap::new();
        for host in &self.hosts {
            if !hosts.insert(host.id) {
                return Err(DescriptionError::DuplicateId {
                    what: "host",
                    id: host.id,
                });
            }
            if !nodes.contains(&host.node) {
                return Err(DescriptionError::HostOnUnknownNode {
                    host: host.id,
                    node: host.node,
                });
            }
            if let Some(&first) = attached.get(&host.node) {
                return Err(DescriptionError::NodeHasTwoHosts {
                    node: host.node,
                    first,
                    second: host.id,
                });
            }
            attached.insert(host.node, host.id);
            if host.weight == 0 {
                return Err(DescriptionError::ZeroWeight { host: host.id });
            }
            if let Some(share) = host
                .shares
                .iter()
                .find(|share| !nodes.contains(&share.device))
            {
                return Err(DescriptionError::ShareOfUnknownDevice {
                    host: host.id,
                    device: share.device,
                });
            }
        }
        let count = hosts.len() as u32;
        if let Some(missing) = (0..count).find(|id| !hosts.contains(id)) {
            return Err(DescriptionError::HostIdsNotDense {
                last: count - 1,
                missing,
            });
        }
        Ok(())
    }
}

impl ClusterDescription {
    fn validate_link(&self) -> Result<(), DescriptionError> {
        let dir = self.socket_dir();
        if dir.is_empty() || dir.len() > MAX_SOCKET_DIR_BYTES || dir.contains('\0') {
            return Err(DescriptionError::BadSocketDir {
                dir: dir.to_string(),
            });
        }
        if self.link == LinkKind::Tcp {
            return Ok(());
        }
        match self.nodes.iter().find(|node| !is_loopback(&node.address)) {
            Some(node) => Err(DescriptionError::ShmNotLoopback {
                node: node.id,
                address: node.address.clone(),
            }),
            None => Ok(()),
        }
    }
}

/// Whether a `host:port` address names this machine without a name look-up: `localhost`
/// or a loopback IP literal (`[::1]` in brackets).
fn is_loopback(address: &str) -> bool {
    let Some((host, _)) = address.rsplit_once(':') else {
        return false;
    };
    let host = host.trim();
    let bare = host
        .strip_prefix('[')
        .and_then(|host| host.strip_suffix(']'))
        .unwrap_or(host);
    bare.eq_ignore_ascii_case("localhost")
        || bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
#[path = "description_tests.rs"]
mod tests;

/// The text of a TCP line of nodes: node `n` listening on loopback port `ports[n]`, preset
/// `preset`, image `{image_prefix}{n}.img`, linked to node `n + 1`; host `h` on node
/// `attachments[h]`, owning blocks `h * per_host .. (h + 1) * per_host` of every device.
/// The campaigns and the tests describe their clusters with it.
pub fn line_text(
    ports: &[u16],
    preset: &str,
    image_prefix: &str,
    attachments: &[u32],
    per_host: u32,
) -> String {
    let nodes = ports.len();
    let mut text = String::from("version = 1\n");
    for (node, port) in ports.iter().enumerate() {
        let links = if node + 1 < nodes {
            format!("[{}]", node + 1)
        } else {
            "[]".to_string()
        };
        text.push_str(&format!(
            "[[node]]\nid = {node}\naddress = \"127.0.0.1:{port}\"\npreset = \"{preset}\"\nimage = \"{image_prefix}{node}.img\"\nlinks = {links}\n"
        ));
    }
    for (host, node) in attachments.iter().enumerate() {
        let start = host as u32 * per_host;
        let shares: Vec<String> = (0..nodes)
            .map(|device| {
                format!(
                    "{{ device = {device}, start = {start}, end = {} }}",
                    start + per_host
                )
            })
            .collect();
        text.push_str(&format!(
            "[[host]]\nid = {host}\nnode = {node}\nshares = [{}]\n",
            shares.join(", ")
        ));
    }
    text
}
