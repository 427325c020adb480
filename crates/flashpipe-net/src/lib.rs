//! flashpipe-net: the network runtime both of flashpipe's servers share.
//!
//! - [`accept`]: the accept loop over TCP and Unix listeners (the connection limit, the
//!   absolute handshake deadline, the peer check before any byte is read, a thread per
//!   connection, the graceful stop), serving any [`Protocol`].
//! - [`peer`]: who is at the other end ([`PeerInfo`]: `SO_PEERCRED` or the address).
//! - [`signals`]: SIGINT and SIGTERM ask a server to stop (signal-hook: the first one
//!   calls the server's stop, a second one ends the process with status 130); SIGPIPE
//!   ignored, so a write to a gone peer is an `EPIPE` error on that one write.
//! - [`logging`]: the process's `tracing` subscriber on standard error, as text or as one
//!   JSON object a line, at `info`, `debug` (`-v`) or `trace` (`-vv`).
//!
//! `flashpipe serve` (the store server, and its NBD exports) and `flashpipe nbd serve`
//! both start through these, so a stop and a log line mean the same for both.
//!
//! Layer rule: a service-layer crate. It names no flashpipe crate (sends without SIGPIPE
//! and the wait strategy are `flashpipe-base`'s); the servers and the CLI use it, it
//! uses none of them. Readiness lines and `sd_notify` stay with the CLI, which prints
//! them.

pub mod accept;
pub mod logging;
pub mod peer;
pub mod signals;

pub use accept::{AcceptStopper, Accepted, Admitted, Limits, Listener, Protocol, Server};
pub use logging::{install_logging, level_for_verbosity, LogFormat, LoggingError};
pub use peer::PeerInfo;
pub use signals::{ignore_closed_pipes, signal_name, StopSignalThread, StopSignals};
