//! The Network Block Device protocol, as specified by `doc/proto.md` of the NBD project
//! (<https://github.com/NetworkBlockDevice/nbd>): fixed newstyle handshake, options,
//! simple and structured replies, `base:allocation` block status.
//!
//! - [`wire`]: the protocol's constants and the encoding and decoding of every message
//!   either side sends, with every length bounded and decoding that never panics (the
//!   `flashpipe-nbd-wire` crate, re-exported here);
//! - [`server`]: exports of any [`flashpipe_device::BlockDevice`] over TCP and Unix
//!   sockets, many requests in flight per connection mapped to device tags;
//! - [`client`]: a remote export (an `nbd://`, `nbd+unix://` URI, or `nbds://`,
//!   `nbds+unix://` over TLS) as a
//!   [`flashpipe_device::BlockDevice`], many requests in flight, reconnecting on a lost
//!   connection, so a store can stripe over disks on other machines;
//! - `wire::tls_pump`: the thread relaying plaintext between a rustls connection and a
//!   socketpair, shared by the server's and the client's TLS.
//!
//! Written by hand: no maintained Rust crate implements an NBD server over a
//! completion-based device interface (the crates that exist either speak only the
//! oldstyle/baseline handshake, or serve a synchronous `Read + Write + Seek` object one
//! request at a time, without structured replies, block status or multi-conn).

pub mod client;
pub mod server;

/// The protocol's constants and message encodings, the TLS pump and the TLS words: the
/// `flashpipe-nbd-wire` crate, at this crate's old path.
pub use flashpipe_nbd_wire as wire;
