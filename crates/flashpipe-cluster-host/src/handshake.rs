//! A host's opening of its connection: TCP to the node its host is attached to (or its
//! Unix socket when the description says `link = "shm"`, the node's uid checked), the
//! hello (docs/cluster-wire.md, "Hello"), the node's reply checked (no refusal, the node
//! expected), then the key proof when the cluster has a key, then over a Unix socket the
//! rings' set-up (docs/cluster-wire.md, "Shared-memory link set-up, version 1"). The one-shot host of
//! `flashpipe cluster page` and the long-lived [`crate::session::HostSession`] both open
//! their connection here.

use std::net::TcpStream;
use std::os::unix::net::UnixStream;

use flashpipe_cluster::description::LinkKind;
use flashpipe_shm::Doorbell;

use crate::auth::{prove_key, End, ProofError};
use crate::conn::{self, HelloExchangeError, HELLO_TIMEOUT};
use crate::hello::{Hello, Refusal, Role};
use crate::host_stream::HostStream;
use crate::loaded::{node_address, LoadError, LoadedDescription};
use crate::shm_setup::{accept_offer, check_peer, socket_path, SetupError};
use crate::shm_stream::ShmStream;
use crate::stream::SetupStream;

/// Why a host could not open its connection.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    /// The node's address.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The host id is not in the description.
    #[error("host {host} is not in the cluster description (it has {count} hosts)")]
    NoSuchHost {
        /// The id.
        host: u32,
        /// Hosts in the description.
        count: usize,
    },
    /// No connection.
    #[error("cannot connect to node {node} at {address}: {detail} (is the node running?)")]
    Connect {
        /// The node.
        node: u32,
        /// Its address.
        address: String,
        /// Why.
        detail: String,
    },
    /// The hello failed.
    #[error("node {node}: {error}")]
    Hello {
        /// The node.
        node: u32,
        /// Why.
        error: HelloExchangeError,
    },
    /// The node refused the host.
    #[error("node {node} refused host {host}: {refusal}")]
    Refused {
        /// The node.
        node: u32,
        /// The host.
        host: u32,
        /// Why.
        refusal: Refusal,
    },
    /// The key proof failed: a wrong key on either side, or the node went away.
    #[error("node {node}: {error}")]
    Proof {
        /// The node.
        node: u32,
        /// Why.
        error: ProofError,
    },
    /// The node's socket or the rings' set-up failed (`link = "shm"`).
    #[error("node {node}: {error}")]
    Setup {
        /// The node.
        node: u32,
        /// Why.
        error: SetupError,
    },
    /// Something other than the node answered.
    #[error("the peer at node {node}'s address is not that node (it says it is {role} {id})")]
    WrongPeer {
        /// The node expected.
        node: u32,
        /// The role it gave.
        role: &'static str,
        /// The id it gave.
        id: u32,
    },
}

/// The node host `host` is attached to.
pub fn host_node(loaded: &LoadedDescription, host: u32) -> Result<u32, HandshakeError> {
    loaded
        .description
        .hosts
        .iter()
        .find(|entry| entry.id == host)
        .map(|entry| entry.node)
        .ok_or(HandshakeError::NoSuchHost {
            host,
            count: loaded.description.hosts.len(),
        })
}

/// Connects host `host` to node `node` (its attached node): hello, the reply checked, the
/// key proof when the cluster has a key, over TCP or (`link = "shm"`) the node's Unix
/// socket and then the rings. The stream comes back with no timeouts set.
pub fn connect_host(
    loaded: &LoadedDescription,
    host: u32,
    node: u32,
) -> Result<HostStream, HandshakeError> {
    if loaded.description.link == LinkKind::Shm {
        return connect_shm(loaded, host, node);
    }
    let address = node_address(&loaded.description, node)?;
    let mut stream = TcpStream::connect_timeout(&address, HELLO_TIMEOUT).map_err(|error| {
        HandshakeError::Connect {
            node,
            address: address.to_string(),
            detail: error.to_string(),
        }
    })?;
    let _ = stream.set_nodelay(true);
    open(loaded, &mut stream, host, node)?;
    Ok(HostStream::Tcp(stream))
}

/// [`connect_host`] over the node's Unix socket: the node's uid checked, the opening, then
/// the rings taken with a doorbell of this host's.
fn connect_shm(
    loaded: &LoadedDescription,
    host: u32,
    node: u32,
) -> Result<HostStream, HandshakeError> {
    let path = socket_path(&loaded.socket_dir, node);
    let connect_error = |detail: String| HandshakeError::Connect {
        node,
        address: path.display().to_string(),
        detail,
    };
    let setup_error = |error: SetupError| HandshakeError::Setup { node, error };
    let mut stream =
        UnixStream::connect(&path).map_err(|error| connect_error(error.to_string()))?;
    check_peer(&stream).map_err(setup_error)?;
    open(loaded, &mut stream, host, node)?;
    let own_bell =
        Doorbell::create("flashpipe-host-doorbell").map_err(|error| setup_error(error.into()))?;
    let rings = accept_offer(&stream, &own_bell).map_err(setup_error)?;
    let shm = ShmStream::new(stream, rings, own_bell).map_err(|error| setup_error(error.into()))?;
    Ok(HostStream::Shm(Box::new(shm)))
}

/// The hello, the node's reply checked, the key proof.
fn open(
    loaded: &LoadedDescription,
    stream: &mut impl SetupStream,
    host: u32,
    node: u32,
) -> Result<(), HandshakeError> {
    let hello = Hello {
        role: Role::Host,
        refusal: None,
        id: host,
        description_crc: loaded.crc,
    };
    let hello_error = |error: HelloExchangeError| HandshakeError::Hello { node, error };
    conn::send_hello(stream, &hello).map_err(|error| hello_error(error.into()))?;
    let reply = conn::read_hello(stream).map_err(hello_error)?;
    if let Some(refusal) = reply.refusal {
        return Err(HandshakeError::Refused {
            node,
            host,
            refusal,
        });
    }
    if reply.role != Role::Node || reply.id != node {
        return Err(HandshakeError::WrongPeer {
            node,
            role: reply.role.name(),
            id: reply.id,
        });
    }
    if let Some(key) = &loaded.key {
        let me = End {
            role: Role::Host,
            id: host,
        };
        let them = End {
            role: Role::Node,
            id: node,
        };
        prove_key(stream, key, me, them, loaded.crc)
            .map_err(|error| HandshakeError::Proof { node, error })?;
    }
    Ok(())
}
