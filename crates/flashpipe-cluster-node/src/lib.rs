//! The minFlash cluster's processes, driving the I/O-free cores of `flashpipe-cluster`
//! with threads and sockets:
//!
//! - [`hello`]: the 16-byte hello every cluster connection opens with (role, id, the
//!   description's checksum), byte by byte in docs/cluster-wire.md;
//! - [`conn`]: framed TCP connections: a reader thread and a writer thread each, bounded
//!   channels to and from the router thread;
//! - [`node`]: the flash node: one router core and its output stages on one thread, the
//!   device (an emulated preset whose acks leave at the wall time the model says, its image
//!   persisted), links to neighbours (the lower id listens, the higher dials and redials),
//!   the attached host's port, the graceful stop;
//! - [`host`]: a one-shot host: connects to its node, sends one request, waits for its ack;
//! - [`words`]: statuses in words, for people.
//!
//! Layer rule: a network-layer crate. It depends on `flashpipe-cluster` (the cores),
//! `flashpipe-flash` (the device model), `flashpipe-net` (signals and the accept loop) and
//! `flashpipe-base`; only the CLI uses it.

pub mod auth;
pub mod conn;
pub mod hello;
pub mod host;
pub mod node;
mod router_loop;
pub mod words;
