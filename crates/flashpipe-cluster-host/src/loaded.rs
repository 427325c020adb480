//! A cluster description file, loaded for a process that joins the cluster (a node or a
//! host): the description checked as a whole, the CRC-32C of its bytes that every hello
//! carries, the frame limits of its presets, its key when it names one, and the address
//! of a node (loopback only), and the socket folder of shared-memory links resolved against
//! the description's folder.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};

use flashpipe_cluster::description::{ClusterDescription, DescriptionError};
use flashpipe_cluster::wire::WireLimits;

use crate::auth::{ClusterKey, KeyError};

/// Why a description could not be loaded or a node's address used.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The description file is bad.
    #[error("cluster description {path}: {error}")]
    Description {
        /// The file.
        path: String,
        /// What is wrong.
        error: DescriptionError,
    },
    /// The file could not be read.
    #[error("cannot read the cluster description {path}: {detail}")]
    Unreadable {
        /// The file.
        path: String,
        /// Why.
        detail: String,
    },
    /// The node id is not in the description.
    #[error("node {node} is not in the cluster description (its nodes: {known})")]
    NoSuchNode {
        /// The id asked for.
        node: u32,
        /// The ids there are.
        known: String,
    },
    /// The address does not resolve to a socket address.
    #[error("node {node}'s address {address} cannot be used: {detail}")]
    Address {
        /// The node.
        node: u32,
        /// Its address.
        address: String,
        /// Why.
        detail: String,
    },
    /// Not a loopback address.
    #[error("node {node}'s address {address} is not a loopback address; cluster links carry no authentication or encryption, so nodes bind to loopback only")]
    NotLoopback {
        /// The node.
        node: u32,
        /// Its address.
        address: String,
    },
    /// The cluster's key file was refused.
    #[error(transparent)]
    Key(#[from] KeyError),
}

/// A description file, checked, with the checksum the hellos carry.
#[derive(Debug, Clone)]
pub struct LoadedDescription {
    /// The description.
    pub description: ClusterDescription,
    /// CRC-32C of the file's bytes.
    pub crc: u32,
    /// The frame limits of the cluster: the largest page and spare of its presets.
    pub limits: WireLimits,
    /// The cluster's key, when the description names one (connections prove they hold it).
    pub key: Option<ClusterKey>,
    /// The folder of the nodes' Unix sockets for `shm` links: the description's
    /// `socket_dir` joined to the description's folder.
    pub socket_dir: PathBuf,
}

/// Reads and checks a description file.
pub fn load_description(path: &Path) -> Result<LoadedDescription, LoadError> {
    let shown = path.display().to_string();
    let description =
        ClusterDescription::from_file(path).map_err(|error| LoadError::Description {
            path: shown.clone(),
            error,
        })?;
    let bytes = std::fs::read(path).map_err(|error| LoadError::Unreadable {
        path: shown,
        detail: error.to_string(),
    })?;
    let mut limits = WireLimits {
        max_page_bytes: 0,
        max_spare_bytes: 0,
    };
    for node in &description.nodes {
        if let Ok(config) = description.preset_config(node) {
            let of = WireLimits::of_config(&config);
            limits.max_page_bytes = limits.max_page_bytes.max(of.max_page_bytes);
            limits.max_spare_bytes = limits.max_spare_bytes.max(of.max_spare_bytes);
        }
    }
    let folder = path.parent().unwrap_or(Path::new("."));
    let key = match &description.key_file {
        Some(file) => Some(ClusterKey::load(&folder.join(file))?),
        None => None,
    };
    let socket_dir = folder.join(description.socket_dir());
    Ok(LoadedDescription {
        description,
        crc: crc32c::crc32c(&bytes),
        limits,
        key,
        socket_dir,
    })
}

/// Resolves a node's address; refuses one that is not loopback. With `link = "shm"` the
/// address only names the node (its readiness line): nodes and hosts connect over its Unix
/// socket in the `socket_dir` instead, and never over TCP.
pub fn node_address(description: &ClusterDescription, node: u32) -> Result<SocketAddr, LoadError> {
    let Some(entry) = description.node(node) else {
        return Err(LoadError::NoSuchNode {
            node,
            known: description
                .nodes
                .iter()
                .map(|node| node.id.to_string())
                .collect::<Vec<_>>()
                .join(", "),
        });
    };
    let address_error = |detail: String| LoadError::Address {
        node,
        address: entry.address.clone(),
        detail,
    };
    let address = entry
        .address
        .to_socket_addrs()
        .map_err(|error| address_error(error.to_string()))?
        .next()
        .ok_or_else(|| address_error("it resolves to no address".to_string()))?;
    if !address.ip().is_loopback() {
        return Err(LoadError::NotLoopback {
            node,
            address: entry.address.clone(),
        });
    }
    Ok(address)
}
