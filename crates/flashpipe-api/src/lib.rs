//! flashpipe-api: the one command set every interface speaks, defined once.
//!
//! - [`values`]: the value types commands carry and answer with ([`FileId`], [`FileStat`],
//!   [`FsStats`], [`CopyMethod`], [`CopyReport`], [`CheckSummary`]) and
//!   [`store_identity_text`].
//! - [`error`]: [`ErrorCode`] (each with its number on the serve protocol's wire) and
//!   [`ApiError`], a command's failure as any transport reports it.
//!
//! Layer rule: this crate does no I/O and names no other flashpipe crate (it may stand on
//! flashpipe-base alone). The file system, the engine, the protocol, the client and the
//! CLI all depend on it and re-export what they used to define.

pub mod error;
pub mod values;

pub use error::{ApiError, ErrorCode, ALL_KNOWN_CODES};
pub use values::{
    store_identity_text, CheckSummary, CopyMethod, CopyReport, FileId, FileStat, FsStats,
};
