//! Which server a client trusts: the user the kernel says runs it (`SO_PEERCRED`, read
//! before a byte is sent, so a squatter learns nothing, not even the client's name) and
//! the store identity its welcome tells, both checked against what the caller expects
//! ([`ServerExpectation`], from the store file: its owner and its identity).

use std::os::unix::net::UnixStream;
use std::path::Path;

use flashpipe_api::store_identity_text;

use crate::error::ConnectError;

/// What the client expects of the server it reaches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerExpectation {
    /// The user who may run the server besides root: the store file's owner.
    pub owner_uid: u32,
    /// The identity of the store the server must hold (`None`: the store file has none
    /// yet, and any server identity is taken).
    pub store_identity: Option<[u8; 16]>,
}

/// The uid of the process at the other end of `socket` (`SO_PEERCRED`).
pub fn peer_uid(socket: &UnixStream) -> std::io::Result<u32> {
    flashpipe_protocol::peer_credentials(socket).map(|peer| peer.uid)
}

/// Refuses a server run by neither root nor the expected owner.
pub(crate) fn check_server_user(
    socket: &UnixStream,
    path: &Path,
    expected: &ServerExpectation,
) -> Result<(), ConnectError> {
    let server_uid = peer_uid(socket).map_err(|error| {
        ConnectError::Handshake(format!("cannot read the server's credentials: {error}"))
    })?;
    if server_uid == 0 || server_uid == expected.owner_uid {
        return Ok(());
    }
    Err(ConnectError::ForeignServer {
        path: path.to_path_buf(),
        server_uid,
        owner_uid: expected.owner_uid,
    })
}

/// Refuses a server that holds another store than the expected one.
pub(crate) fn check_store_identity(
    path: &Path,
    expected: &ServerExpectation,
    told: Option<[u8; 16]>,
) -> Result<(), ConnectError> {
    let Some(wanted) = expected.store_identity else {
        return Ok(());
    };
    if told == Some(wanted) {
        return Ok(());
    }
    Err(ConnectError::OtherStore {
        path: path.to_path_buf(),
        expected: store_identity_text(&wanted),
        server: told
            .map(|identity| store_identity_text(&identity))
            .unwrap_or_else(|| "none".to_string()),
    })
}
