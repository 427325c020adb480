//! flashpipe-api: the one command set every interface speaks, defined once.
//!
//! - [`values`]: the value types commands carry and answer with ([`FileId`], [`FileStat`],
//!   [`FsStats`], [`CopyMethod`], [`CopyReport`], [`CheckSummary`]) and
//!   [`store_identity_text`].
//! - [`error`]: [`ErrorCode`] (each with its number on the serve protocol's wire) and
//!   [`ApiError`], a command's failure as any transport reports it; [`error_class`]:
//!   [`ErrorClass`], what kind of failure each code is (the CLI and Python follow it).
//! - [`command`], [`kind`]: the command set once: [`Command`] and [`Reply`], generic over
//!   each transport's [`Payloads`], and [`CommandKind`] (every command with its wire
//!   number, name, and what it changes).
//! - [`transport`]: [`Transport`] (submit, wait), implemented by the engine's client (its
//!   thread or a stepped engine) and the served client, and [`TransportExt`], one method
//!   per command over any transport.
//! - [`streams`]: whole files written from a source and read into a sink over any
//!   transport, with several commands in flight.
//!
//! Layer rule: this crate does no I/O and names no other flashpipe crate (it may stand on
//! flashpipe-base alone). The file system, the engine, the protocol, the client and the
//! CLI all depend on it and re-export what they used to define.

pub mod command;
pub mod error;
pub mod error_class;
pub mod kind;
pub mod streams;
pub mod transport;
pub mod values;
pub mod vec_payloads;

pub use command::{Command, FileResult, Payloads, Reply, ReplyMap};
pub use error::{ApiError, ErrorCode, ALL_KNOWN_CODES};
pub use error_class::ErrorClass;
pub use kind::CommandKind;
pub use streams::{
    read_stream, read_stream_retrying, write_stream, NeverRetry, ReadRetry, ReadWindow,
    StreamError, StreamPayloads, WaitForReadBuffers,
};
pub use transport::{
    CodedError, Completion, Limits, MismatchedReply, Ticket, Transport, TransportExt,
};
pub use values::{
    store_identity_text, AttributeChange, CheckSummary, CopyMethod, CopyReport, FileId, FileOwner,
    FileStat, FsStats,
};
pub use vec_payloads::VecPayloads;
