//! flashpipe-nbd-wire: the NBD wire format (constants, and the encoding and decoding of
//! every message of the fixed newstyle handshake and the transmission phase; doc/proto.md
//! of the NBD project), and what both NBD sides share around TLS:
//!
//! - [`tls_pump`]: the thread relaying plaintext between a rustls connection and a
//!   socketpair, used by the server's and the client's TLS;
//! - [`tls_words`]: every rustls, webpki and PEM error as a sentence for a user.
//!
//! Layer rule: a leaf among the NBD crates. It depends on no flashpipe crate but
//! `flashpipe-base` (send without SIGPIPE, for the pump). `flashpipe-nbd-client` stands on
//! it; `flashpipe-nbd` (the server and the simulated disk nodes) stands on both; the store
//! depends on the client alone.
//!
//! Every field is big-endian ("network byte order"). Decoders take byte slices and never
//! panic: a short, oversized or malformed message is a [`WireError`] naming the field and
//! the limit. Every variable length is bounded before anything is allocated for it:
//! strings by [`MAX_STRING_BYTES`] (the specification's 4096), option data by
//! [`MAX_OPTION_DATA_BYTES`], request and reply payloads by [`MAX_PAYLOAD_BYTES`]
//! (32 MiB, the specification's "SHOULD NOT be considered a denial of service").
//!
//! The `read_*` helpers read one whole message from a [`std::io::Read`] with those bounds
//! applied before the payload is read; the `encode_*` functions append to a `Vec<u8>`
//! so a caller can gather several messages into one `write_all`.

mod codec;
mod constants;
mod handshake;
#[cfg(test)]
mod tests;
pub mod tls_pump;
pub mod tls_words;
mod transmission;

pub use codec::*;
pub use constants::*;
pub use handshake::*;
pub use transmission::*;
