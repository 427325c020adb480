//! How connecting and requests fail on the client's side.

use std::path::PathBuf;

use flashpipe_protocol::{DecodeError, RemoteError};

/// Why a client could not connect.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// Nothing answers on the socket.
    #[error("cannot connect to the server at {path}: {source}")]
    Connect {
        /// The socket.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The server refused the connection (client limit, version), saying why.
    #[error("the server refused the connection: {0}")]
    Refused(RemoteError),
    /// The handshake went wrong.
    #[error("handshake with the server failed: {0}")]
    Handshake(String),
    /// The process answering on the socket runs as another user than the store's owner
    /// or root: someone else's server, not to be given the store's data.
    #[error("refusing the server at {path}: it runs as uid {server_uid}, but the store belongs to uid {owner_uid} and only its owner or root may serve it; nothing was sent to it (remove the socket if it is not yours to keep)")]
    ForeignServer {
        /// The socket.
        path: PathBuf,
        /// The server's uid.
        server_uid: u32,
        /// The store file's owner.
        owner_uid: u32,
    },
    /// The server holds another store than the one asked for.
    #[error("refusing the server at {path}: it holds the store with identity {server}, but the store file names identity {expected}; stop that server or give this store its own socket")]
    OtherStore {
        /// The socket.
        path: PathBuf,
        /// The identity the store file names.
        expected: String,
        /// The identity the server told ("none" when it told none).
        server: String,
    },
}

/// Why a request could not be carried out (beyond the server's own answer).
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server answered with an error.
    #[error(transparent)]
    Remote(#[from] RemoteError),
    /// The connection broke.
    #[error("connection to the server lost: {0}")]
    ConnectionLost(std::io::Error),
    /// The server closed the connection, saying why.
    #[error("the server closed the connection: {0}")]
    Closed(RemoteError),
    /// The server sent something the protocol does not allow here.
    #[error("protocol violation by the server: {0}")]
    Protocol(String),
    /// The server sent bytes that are not a frame.
    #[error("malformed frame from the server: {0}")]
    Malformed(#[from] DecodeError),
    /// A limit of this client or of the server (as told at connect) was reached before
    /// anything was sent.
    #[error("{what}: the limit is {limit}")]
    LimitReached {
        /// What was refused and which limit.
        what: String,
        /// The limit.
        limit: u64,
    },
    /// `wait` with no request in flight.
    #[error("no request is in flight")]
    NothingInFlight,
}

impl ClientError {
    /// The limit this error is about, where it is one (the client's own or the server's).
    pub fn limit(&self) -> Option<u64> {
        match self {
            ClientError::Remote(error) | ClientError::Closed(error) => error.limit,
            ClientError::LimitReached { limit, .. } => Some(*limit),
            _ => None,
        }
    }

    /// The server's error, where the server answered with one.
    pub fn remote(&self) -> Option<&RemoteError> {
        match self {
            ClientError::Remote(error) | ClientError::Closed(error) => Some(error),
            _ => None,
        }
    }
}
