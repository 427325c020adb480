//! The minFlash cluster's processes, driving the I/O-free cores of `flashpipe-cluster`
//! with threads and sockets:
//!
//! - [`hello`], [`auth`], [`conn`], [`words`]: the hello, the key proof, framed
//!   connections and statuses in words, defined in `flashpipe-cluster-host` (the host's
//!   device layer) and re-exported here at their old paths;
//! - [`node`]: the flash node: one router core and its output stages on one thread, the
//!   device (an emulated preset whose acks leave at the wall time the model says, its image
//!   persisted), links to neighbours (the lower id listens, the higher dials and redials),
//!   the attached host's port, the graceful stop;
//! - `bell`, `link`, `shm_node` (private): the node's doorbell, a port's link (TCP or
//!   shared-memory rings) as the router thread drives it, and the node's Unix socket for
//!   shared-memory links (listening, the set-up on either side);
//! - [`host`]: a one-shot host: connects to its node, sends one request, waits for its ack.
//!
//! Layer rule: a network-layer crate. It depends on `flashpipe-cluster` (the cores),
//! `flashpipe-flash` (the device model), `flashpipe-net` (signals and the accept loop),
//! `flashpipe-shm` (rings and the doorbell) and `flashpipe-base`, and on
//! `flashpipe-cluster-host` for what a node shares with a host;
//! only the CLI uses it.

pub use flashpipe_cluster_host::{auth, conn, hello, words};
mod bell;
pub mod host;
mod link;
pub mod node;
mod router_loop;
mod shm_node;
