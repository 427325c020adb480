//! The client library of `flashpipe serve` (docs/protocol.md): connects to a server's
//! Unix socket, sends requests under its own request ids and takes the answers in any
//! order ([`Client::submit`], [`Client::wait`]). The client is a
//! [`flashpipe_api::Transport`]: every command's one-shot method comes
//! from [`TransportExt`], the same code as over the in-process engine. Read data comes back as a [`ReadView`]: bytes the frame carried (the copying
//! path) or a window of the server's shared read pool mapped into this process (by
//! reference), released when the view is dropped. Writes go inline, or from a
//! [`WriteBuffer`] granted in this client's own shared write pool. Kernel runs stream
//! their answers through [`Client::run_kernel`] ([`KernelRun`]).
//!
//! Hand-written over the protocol crate rather than an RPC framework: requests are
//! pipelined on one socket with file descriptors passed beside the welcome, which no
//! maintained RPC crate for Unix sockets does with shared-memory payloads.

mod client;
mod error;
mod run_kernel;
mod transport;
mod trust;
mod view;

pub use client::{
    server_socket_path, Client, ClientTransport, ConnectOptions, DestinationRegion, Response,
    ServerInfo, ENGINE_PATH_SPIN_US,
};
pub use error::{ClientError, ConnectError};
pub use flashpipe_api::{
    read_stream, write_stream, CopyMethod, CopyReport, FileStat, FsStats, Reply, StreamError,
    Transport, TransportExt,
};
pub use flashpipe_protocol::{
    CancelOutcome, CheckSummary, ClockKind, ErrorCode, KernelFileOutcome, KernelFileResult,
    KernelRunSummary, KernelStageFigures, RemoteError, RequestId, RunKernelRequest, ServerLimits,
    WireCommand, WireFloat, WriteGrant, WritePayload,
};

/// A command as [`Client::submit`] sends it: a command of the command set over the wire's
/// payloads (`Request::Read { .. }` builds a read). The requests about the connection
/// (`flashpipe_protocol::Request`: cancel, write grants, kernel runs, rings) have their
/// own methods, and [`Client::submit`] takes them too.
pub type Request = WireCommand;
pub use run_kernel::{KernelRun, KernelRunEvent};
pub use transport::{Remote, WriteSource};
pub use trust::{peer_uid, ServerExpectation};
pub use view::{ReadView, WriteBuffer};
