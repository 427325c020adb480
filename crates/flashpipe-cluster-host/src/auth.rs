//! The key proof after the hello (docs/cluster-wire.md, "Key proof"): when the description
//! names a `key_file`, both ends of every connection prove they hold the cluster's key
//! before a frame passes. Each end sends a fresh 32-byte nonce, then an HMAC-SHA256 under
//! the key of what it claims and of both nonces; each checks the other's. A peer without the
//! key (another local user who can read the description but not the key file) gets no
//! further than the hello.
//!
//! The HMAC, its constant-time check and the random nonces are `ring`'s (already linked for
//! TLS); nothing here is hand-made cryptography.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};

use crate::conn::HELLO_TIMEOUT;
use crate::hello::Role;
use crate::stream::SetupStream;

/// Bytes of a nonce and of a proof.
pub const NONCE_BYTES: usize = 32;
/// Bytes of a proof (HMAC-SHA256).
pub const PROOF_BYTES: usize = 32;
/// Fewest and most bytes a key file may hold.
pub const KEY_BYTES_RANGE: std::ops::RangeInclusive<u64> = 32..=4096;
/// What every proof starts with (its domain and version).
const PROOF_LABEL: &[u8] = b"flashpipe cluster key proof v1";

/// The cluster's key, loaded from its file.
#[derive(Clone)]
pub struct ClusterKey(hmac::Key);

impl std::fmt::Debug for ClusterKey {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("ClusterKey(..)")
    }
}

/// Why a key file was refused.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The file could not be read.
    #[error("cannot read the cluster key {path}: {detail}")]
    Unreadable {
        /// The file.
        path: String,
        /// Why.
        detail: String,
    },
    /// Not a regular file, or the wrong size.
    #[error("the cluster key {path} must be a regular file of 32 to 4096 bytes ({detail}); make one with `head -c 32 /dev/urandom > {path} && chmod 600 {path}`")]
    Shape {
        /// The file.
        path: String,
        /// What it is.
        detail: String,
    },
    /// Others could read or change it.
    #[error("the cluster key {path} is open to others (mode {mode:o}, owner uid {owner}): it must belong to this user (uid {uid}) and be readable by it alone; run `chmod 600 {path}`")]
    Open {
        /// The file.
        path: String,
        /// Its permission bits.
        mode: u32,
        /// Its owner.
        owner: u32,
        /// This process's user.
        uid: u32,
    },
}

impl ClusterKey {
    /// Reads the key file at `path`: a regular file of 32 to 4096 bytes, owned by this
    /// process's user (or root) and readable by its owner alone.
    pub fn load(path: &Path) -> Result<ClusterKey, KeyError> {
        let shown = path.display().to_string();
        let unreadable = |error: io::Error| KeyError::Unreadable {
            path: shown.clone(),
            detail: error.to_string(),
        };
        let metadata = std::fs::metadata(path).map_err(unreadable)?;
        if !metadata.is_file() || !KEY_BYTES_RANGE.contains(&metadata.len()) {
            let detail = if metadata.is_file() {
                format!("it holds {} bytes", metadata.len())
            } else {
                "it is not a regular file".to_string()
            };
            return Err(KeyError::Shape {
                path: shown,
                detail,
            });
        }
        // SAFETY: geteuid has no preconditions and cannot fail.
        let uid = unsafe { libc::geteuid() };
        let mode = metadata.mode() & 0o7777;
        let owner = metadata.uid();
        if mode & 0o077 != 0 || (owner != uid && owner != 0) {
            return Err(KeyError::Open {
                path: shown,
                mode,
                owner,
                uid,
            });
        }
        let bytes = std::fs::read(path).map_err(unreadable)?;
        Ok(ClusterKey(hmac::Key::new(hmac::HMAC_SHA256, &bytes)))
    }
}

/// One end of a connection: what it says it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct End {
    /// Host or node.
    pub role: Role,
    /// Its id.
    pub id: u32,
}

/// Why the key proof failed.
#[derive(Debug, thiserror::Error)]
pub enum ProofError {
    /// The socket failed or timed out.
    #[error("the key proof could not be exchanged: {0}")]
    Io(#[from] io::Error),
    /// No randomness for the nonce.
    #[error("the system gave no random bytes for the key proof's nonce")]
    NoRandom,
    /// The peer's proof is not made with this cluster's key.
    #[error("the peer does not hold this cluster's key (its proof does not match)")]
    WrongKey,
}

/// Proves to the peer at the other end of `stream` that this end (`me`) holds `key`, and
/// checks the peer's proof that it is `peer` and holds it too; `description_crc` binds both
/// to the same description. Both ends run it at once, right after the hello.
pub fn prove_key(
    stream: &mut impl SetupStream,
    key: &ClusterKey,
    me: End,
    peer: End,
    description_crc: u32,
) -> Result<(), ProofError> {
    let mut mine = [0u8; NONCE_BYTES];
    SystemRandom::new()
        .fill(&mut mine)
        .map_err(|_| ProofError::NoRandom)?;
    stream.set_setup_timeout(Some(HELLO_TIMEOUT))?;
    stream.write_all(&mine)?;
    let mut theirs = [0u8; NONCE_BYTES];
    stream.read_exact(&mut theirs)?;
    let proof = hmac::sign(
        &key.0,
        &transcript(me, peer, &mine, &theirs, description_crc),
    );
    stream.write_all(proof.as_ref())?;
    let mut their_proof = [0u8; PROOF_BYTES];
    stream.read_exact(&mut their_proof)?;
    stream.set_setup_timeout(None)?;
    let expected = transcript(peer, me, &theirs, &mine, description_crc);
    hmac::verify(&key.0, &expected, &their_proof).map_err(|_| ProofError::WrongKey)
}

/// What a proof signs: the label, the sender, the receiver, the description's checksum, the
/// sender's nonce, then the receiver's.
fn transcript(
    sender: End,
    receiver: End,
    sender_nonce: &[u8; NONCE_BYTES],
    receiver_nonce: &[u8; NONCE_BYTES],
    description_crc: u32,
) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(PROOF_LABEL.len() + 14 + 2 * NONCE_BYTES);
    bytes.extend_from_slice(PROOF_LABEL);
    for end in [sender, receiver] {
        bytes.push(end.role.code());
        bytes.extend_from_slice(&end.id.to_le_bytes());
    }
    bytes.extend_from_slice(&description_crc.to_le_bytes());
    bytes.extend_from_slice(sender_nonce);
    bytes.extend_from_slice(receiver_nonce);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_binds_sender_receiver_and_both_nonces() {
        let host = End {
            role: Role::Host,
            id: 1,
        };
        let node = End {
            role: Role::Node,
            id: 1,
        };
        let base = transcript(host, node, &[1; 32], &[2; 32], 7);
        assert_ne!(base, transcript(node, host, &[1; 32], &[2; 32], 7));
        assert_ne!(base, transcript(host, node, &[2; 32], &[1; 32], 7));
        assert_ne!(base, transcript(host, node, &[1; 32], &[2; 32], 8));
        assert!(base.starts_with(PROOF_LABEL));
    }
}
