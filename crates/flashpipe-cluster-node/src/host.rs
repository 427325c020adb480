//! A one-shot host: connects to the node its host is attached to, sends one tagged request
//! and waits for its ack (what `flashpipe cluster page` runs).

use std::path::Path;
use std::time::Duration;

use flashpipe_cluster::wire::{self, EncodeError, Frame, Message, WireAck};
use flashpipe_cluster_host::handshake::{self, connect_host, HandshakeError};
use flashpipe_flash::{FlashCommand, FlashRequest};

use crate::auth::ProofError;
use crate::conn::{self, HelloExchangeError, ReadError};
use crate::hello::Refusal;
use crate::node::{load_description, LoadedDescription, NodeError};

/// The tag of a one-shot host's request.
pub const ONE_SHOT_TAG: u64 = 1;
/// How long a one-shot host waits for its ack.
pub const ACK_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a request got no ack.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The description or the node's address.
    #[error(transparent)]
    Node(#[from] NodeError),
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
    /// The request cannot be framed.
    #[error("the request does not fit the cluster's frames: {0}")]
    Encode(#[from] EncodeError),
    /// Sending or receiving failed.
    #[error("node {node}: {error}")]
    Read {
        /// The node.
        node: u32,
        /// Why.
        error: ReadError,
    },
    /// The node closed the connection before the ack.
    #[error("node {node} closed the connection before answering")]
    Closed {
        /// The node.
        node: u32,
    },
}

/// An ack and the hops its request made.
#[derive(Debug, Clone)]
pub struct HostReply {
    /// The ack.
    pub ack: WireAck,
    /// Links the request crossed from the host to the device.
    pub hops: u8,
}

impl From<HandshakeError> for HostError {
    fn from(error: HandshakeError) -> HostError {
        match error {
            HandshakeError::Load(error) => HostError::Node(error.into()),
            HandshakeError::NoSuchHost { host, count } => HostError::NoSuchHost { host, count },
            HandshakeError::Connect {
                node,
                address,
                detail,
            } => HostError::Connect {
                node,
                address,
                detail,
            },
            HandshakeError::Hello { node, error } => HostError::Hello { node, error },
            HandshakeError::Refused {
                node,
                host,
                refusal,
            } => HostError::Refused {
                node,
                host,
                refusal,
            },
            HandshakeError::Proof { node, error } => HostError::Proof { node, error },
            HandshakeError::WrongPeer { node, role, id } => HostError::WrongPeer { node, role, id },
        }
    }
}

/// Finds the host's node in a loaded description.
pub fn host_node(loaded: &LoadedDescription, host: u32) -> Result<u32, HostError> {
    Ok(handshake::host_node(loaded, host)?)
}

/// Sends `command` as host `host` of the cluster in `description` and waits for the ack.
pub fn one_request(
    description: &Path,
    host: u32,
    command: FlashCommand,
) -> Result<HostReply, HostError> {
    let loaded = load_description(description)?;
    let node = host_node(&loaded, host)?;
    let mut stream = connect_host(&loaded, host, node)?;
    let frame = Frame {
        hops: 0,
        message: Message::Request(FlashRequest {
            tag: ONE_SHOT_TAG,
            host,
            command,
        }),
    };
    let bytes = wire::encode(&frame, loaded.limits)?;
    let read_error = |error: ReadError| HostError::Read { node, error };
    std::io::Write::write_all(&mut stream, &bytes).map_err(|error| read_error(error.into()))?;
    stream
        .set_read_timeout(Some(ACK_TIMEOUT))
        .map_err(|error| read_error(error.into()))?;
    let mut buffer = Vec::new();
    loop {
        match conn::read_frame(&mut stream, loaded.limits, &mut buffer).map_err(read_error)? {
            None => return Err(HostError::Closed { node }),
            Some(Frame {
                hops,
                message: Message::Ack(ack),
            }) if ack.tag == ONE_SHOT_TAG => return Ok(HostReply { ack, hops }),
            Some(_) => {}
        }
    }
}
