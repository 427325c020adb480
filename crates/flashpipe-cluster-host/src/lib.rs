//! A host of the minFlash cluster (seed 004, section III) as the host FTL's raw flash:
//!
//! - [`hello`], [`auth`], [`conn`]: how every cluster connection opens (the 16-byte hello,
//!   the key proof) and carries frames; the node process uses them from here;
//! - [`loaded`]: a description file loaded (its checksum, frame limits, key) and a node's
//!   address;
//! - [`handshake`]: a host's connection to the node it is attached to (TCP, or its Unix
//!   socket and rings with `link = "shm"`);
//! - [`session`]: [`session::HostSession`], a long-lived pipelined connection with many
//!   tags in flight, bounded waits and named failures;
//! - [`view`]: [`view::ClusterView`], the devices a host owns blocks on presented as one
//!   array (RAID-0 over devices; only the host's share of each);
//! - [`backend`]: [`backend::ClusterFlash`], the [`flashpipe_ftl::FlashBackend`] the FTL
//!   drives, fail-stop on a fault of the cluster;
//! - [`words`]: statuses in words, for people;
//! - [`shm_setup`]: the set-up of a shared-memory link over a node's Unix socket (the
//!   socket folder, the peer's uid, the `FPSHM` message handing over rings and doorbells);
//! - [`stream`]: TCP and Unix sockets as one trait, for the hello and the key proof;
//! - [`host_stream`], [`shm_stream`]: a host's open connection, TCP or shared-memory
//!   rings (the node's socket watched for its end).
//!
//! Layer rule: a device-layer crate. It depends on `flashpipe-cluster` (the wire and the
//! description), `flashpipe-flash` (the raw interface's types), `flashpipe-ftl` (the
//! backend trait), `flashpipe-device` and `flashpipe-base`, on `ring` for the key proof
//! and on `flashpipe-shm` for shared-memory links; never on the network layer
//! (`flashpipe-cluster-node` uses this crate, and `flashpipe-store` opens stores over it).

pub mod auth;
pub mod backend;
pub mod conn;
pub mod handshake;
pub mod hello;
pub mod host_stream;
pub mod loaded;
pub mod session;
pub mod shm_setup;
pub mod shm_stream;
pub mod stream;
pub mod view;
pub mod words;
