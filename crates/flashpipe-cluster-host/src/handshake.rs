//! A host's opening of its connection: TCP to the node its host is attached to, the
//! hello (docs/cluster-wire.md, "Hello"), the node's reply checked (no refusal, the node
//! expected), then the key proof when the cluster has a key. The one-shot host of
//! `flashpipe cluster page` and the long-lived [`crate::session::HostSession`] both open
//! their connection here.

use std::net::TcpStream;

use crate::auth::{prove_key, End, ProofError};
use crate::conn::{self, HelloExchangeError, HELLO_TIMEOUT};
use crate::hello::{Hello, Refusal, Role};
use crate::loaded::{node_address, LoadError, LoadedDescription};

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
/// key proof when the cluster has a key. The stream comes back with no timeouts set.
pub fn connect_host(
    loaded: &LoadedDescription,
    host: u32,
    node: u32,
) -> Result<TcpStream, HandshakeError> {
    let address = node_address(&loaded.description, node)?;
    let mut stream = TcpStream::connect_timeout(&address, HELLO_TIMEOUT).map_err(|error| {
        HandshakeError::Connect {
            node,
            address: address.to_string(),
            detail: error.to_string(),
        }
    })?;
    let _ = stream.set_nodelay(true);
    let hello = Hello {
        role: Role::Host,
        refusal: None,
        id: host,
        description_crc: loaded.crc,
    };
    let hello_error = |error: HelloExchangeError| HandshakeError::Hello { node, error };
    conn::send_hello(&mut stream, &hello).map_err(|error| hello_error(error.into()))?;
    let reply = conn::read_hello(&mut stream).map_err(hello_error)?;
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
        prove_key(&mut stream, key, me, them, loaded.crc)
            .map_err(|error| HandshakeError::Proof { node, error })?;
    }
    Ok(stream)
}
