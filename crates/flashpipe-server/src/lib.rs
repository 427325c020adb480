//! The service behind `flashpipe serve`: one running store's engine shared by many
//! client processes over a Unix stream socket (docs/protocol.md).
//!
//! [`Server::start`] takes a [`flashpipe_store::RunningStore`] (its lock stays held),
//! binds the socket (refusing one a live server answers on, removing a stale one) and
//! accepts clients. Each connection has two threads: one reads frames and hands requests
//! to the engine under the client's request ids, the other sends the answers back as the
//! engine completes them, so many clients' commands are in flight at once and each
//! client's answers come out of order. Threads rather than a poll loop: the engine's
//! answers arrive on a crossbeam queue, which a poll loop cannot wait on beside sockets
//! without a wake-up pipe per answer; two threads per client keep every wait a plain
//! blocking one, and the clients a server holds at once are bounded
//! ([`ServerConfig::max_clients`]). A mapping client may move its frames into two
//! shared-memory rings (#14, docs/protocol.md): its reading thread then pops the request
//! ring (spin, then park on the ring's futex), answers are pushed into the reply ring,
//! and a third thread blocks reading the socket, whose end closes the rings.
//!
//! Limits, each refused with a typed error naming it: clients and clients per local
//! user (a connection past either gets an error frame and is closed, once the oldest
//! connection that never sent its hello was closed to make room; `admission`), the
//! time a connection may take to send its hello, requests in flight per client, bytes in
//! flight per client and in all, read handles held per client, bytes per write. A
//! malformed frame ends only its own connection, with the reason logged. Everything a
//! connection held (answers still coming, read handles, write grants) is dropped when it
//! ends. Kernel runs (`flashpipe run` through a server) go on threads of their own
//! next to the engine, bounded server-wide, and stop at a file boundary when cancelled.
//! [`Server::run_until_stopped`] stops gracefully: no new clients, no new requests,
//! in-flight commands finished, the store flushed and closed, the socket removed.
//! Who may connect is checked by the peer's credentials before the handshake
//! ([`AccessRule`]: root, the store file's owner, a group when allowed), and the socket
//! is created 0600 (0660 with a group) whatever the umask.
//! Logs go through `tracing`; the subscriber is the caller's.

mod access;
mod admission;
mod config;
mod connection;
pub mod core;
mod device_watch;
mod kernel_job;
mod kernel_paths;
mod kernel_runs;
mod mapped;
mod region;
mod replies;
mod ring_source;
mod rings;
mod server;
mod state;
mod welcome;

pub use access::{group_by_name, peer_credentials, AccessRule, AllowedGroup, PeerCredentials};
pub use config::{
    ServerConfig, DEFAULT_HANDSHAKE_TIMEOUT_MS, DEFAULT_MAX_REGIONS_PER_CLIENT,
    DEFAULT_MAX_REGION_BYTES_PER_CLIENT, DEFAULT_RING_CAPACITY_BYTES,
};
pub use core::{inline_reply, CoreHost, CoreLimits, InFlight, Refused, StoreServerCore};
pub use kernel_paths::KernelPathsError;
pub use server::{ServeError, ServeReport, Server, ServerCounters, StopHandle};
