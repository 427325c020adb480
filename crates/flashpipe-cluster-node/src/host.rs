//! A one-shot host: connects to the node its host is attached to (TCP, or its Unix socket
//! and rings with `link = "shm"`), sends one tagged request and waits for its ack (what
//! `flashpipe cluster page` runs).

use std::path::Path;
use std::time::Duration;

use flashpipe_cluster::wire::{self, EncodeError, Frame, Message, WireAck};
use flashpipe_cluster_host::handshake::{self, connect_host, HandshakeError};
use flashpipe_flash::{FlashCommand, FlashRequest};

use crate::conn::{self, ReadError};
use flashpipe_cluster_host::loaded::{self, LoadedDescription};

/// The tag of a one-shot host's request.
pub const ONE_SHOT_TAG: u64 = 1;
/// How long a one-shot host waits for its ack.
pub const ACK_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a request got no ack.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The description, or the connection could not be opened (hello, key proof).
    #[error(transparent)]
    Handshake(#[from] HandshakeError),
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
    let loaded = loaded::load_description(description).map_err(HandshakeError::from)?;
    let node = host_node(&loaded, host)?;
    let mut stream = connect_host(&loaded, host, node)?;
    let frame = Frame::from(FlashRequest {
        tag: ONE_SHOT_TAG,
        host,
        command,
    });
    let bytes = wire::encode(&frame, loaded.limits)?;
    let read_error = |error: ReadError| HostError::Read { node, error };
    let mut reader = stream
        .reader(Some(ACK_TIMEOUT))
        .map_err(|error| read_error(error.into()))?;
    std::io::Write::write_all(&mut stream, &bytes).map_err(|error| read_error(error.into()))?;
    let mut buffer = Vec::new();
    let reply = loop {
        match conn::read_frame(&mut reader, loaded.limits, &mut buffer).map_err(read_error)? {
            None => break Err(HostError::Closed { node }),
            Some(Frame {
                hops,
                message: Message::Ack(ack),
            }) if ack.tag == ONE_SHOT_TAG => break Ok(HostReply { ack, hops }),
            Some(_) => {}
        }
    };
    stream.shutdown();
    reply
}
