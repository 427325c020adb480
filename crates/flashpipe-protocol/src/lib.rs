//! The wire protocol of `flashpipe serve` (docs/protocol.md specifies every byte).
//!
//! A connection carries frames both ways: a fixed 24-byte header (magic `FPSV`, protocol
//! version, frame kind, request id, body length, flags) and a bounded body. The client
//! opens with [`Hello`], the server answers [`Welcome`] (passing its shared regions as
//! file descriptors beside it when the client maps memory), then the client sends
//! [`Request`]s under request ids of its choosing and the server answers each with a
//! [`Response`] or a [`RemoteError`] under the same id, in any order. A request is a
//! command of the one command set (`flashpipe_api::Command` over the wire's payloads,
//! [`Wire`]) or a request about the connection; [`COMMAND_CODECS`] holds every
//! command's body layout once.
//!
//! Written by hand rather than with serde and a binary format crate: the format is a
//! spec (docs/protocol.md), every length and count is checked against a named limit
//! before anything is allocated, and decoding names the field that is wrong; no
//! maintained crate gives byte-exact layouts with bounded, field-naming decoding.
//! Decoding never panics on any input (a property test feeds it arbitrary bytes).

pub mod attributes;
pub mod codec;
pub mod error;
pub mod frame;
pub mod handshake;
pub mod kernel_run;
pub mod region;
pub use flashpipe_base::peer;
pub mod stream;
mod whole;
mod wire;

pub use attributes::{has_attributes, stat_for_version, ATTRIBUTES_VERSION};
pub use codec::{
    decode_body, decode_header, encode_header, encode_inline_data, CommandCodec, Header,
    COMMAND_CODECS,
};
pub use error::{DecodeError, ErrorCode, RemoteError};
pub use frame::{
    CancelOutcome, CheckSummary, ClockKind, DataPayload, FileData, Frame, FrameKind, Hello,
    Request, Response, RingsOpened, ServerLimits, SharedRegion, SharedWindow, Welcome, Wire,
    WireCommand, WireReply, WriteGrant, WritePayload,
};
pub use handshake::{STORE_CLOCK_VERSION, WELCOME_FLAGS_VERSION};
pub use kernel_run::{
    KernelFileOutcome, KernelFileResult, KernelRunSummary, KernelStageFigures, RunKernelRequest,
    WireFloat,
};
pub use peer::{peer_credentials, PeerCredentials};
pub use region::{
    regions_supported, ReadInto, RegionRequest, RegionResponse, REGION_OFFSET_ALIGNMENT_BYTES,
    REGION_PROTOCOL_VERSION,
};
pub use stream::{
    read_frame, read_frame_body, read_header, send_all, send_frame, write_frame, ReadFrameError,
};
pub use whole::{
    decode_frame, decode_frame_keeping, encode_frame, encode_frame_into, encode_release_into,
    KeptBuffers,
};

/// A request's id, chosen by the client; its answer carries it back. Zero is reserved
/// for frames about the whole connection (hello, welcome, release, a closing error).
pub type RequestId = u64;

/// The four bytes every frame starts with.
pub const MAGIC: [u8; 4] = *b"FPSV";

/// The newest protocol version this code speaks (docs/protocol.md, "Versioning"):
/// version 2 added the welcome's store identity and the `AccessDenied` error, version 3
/// the copy method `share` and the shared block counts of `file_stat` and `stats`,
/// version 4 the welcome's store clock kind, version 5 file attributes (the
/// `set-attributes` request and the attribute reply kinds), version 6 the welcome's flags
/// byte (the store served read-only), reads into a client's own memory (the region
/// frames, [`REGION_PROTOCOL_VERSION`]) and the engine's doorbell beside rings-opened
/// ([`ENGINE_DOORBELL_VERSION`]).
pub const PROTOCOL_VERSION: u16 = 6;

/// The first protocol version whose rings-opened may carry the engine's doorbell: the
/// client rings it after each push and the engine polls the request ring itself
/// (docs/protocol.md, "Frames through shared-memory rings").
pub const ENGINE_DOORBELL_VERSION: u16 = 6;

/// The oldest protocol version this code speaks: a hello whose range ends below it is
/// refused, and a welcome of version 3 (no clock kind) is understood.
pub const MIN_PROTOCOL_VERSION: u16 = 3;

/// The version every frame's header carries, whichever version the connection speaks:
/// the frame layout is version 3's (version 4 changed only the welcome's body, whose own
/// `version` field tells its layout), so a version-3 peer reads every frame it gets.
pub const FRAME_VERSION: u16 = 3;

/// Bytes of a frame header.
pub const HEADER_BYTES: usize = 24;

/// Largest body any frame may have: 16 MiB (a server announces its own, smaller,
/// limits in [`ServerLimits`]).
pub const MAX_BODY_BYTES: u32 = 16 << 20;

/// Longest name (file name, client name, store path) in bytes.
pub const MAX_NAME_BYTES: usize = 4096;

/// Most names one read-files request may carry.
pub const MAX_READ_FILES_COUNT: usize = 256;

/// Most read handles one release frame may carry.
pub const MAX_RELEASE_HANDLES: usize = 4096;

/// Longest error message or check text in bytes.
pub const MAX_TEXT_BYTES: usize = 1 << 20;

/// Most file entries one list reply may carry (bounded by [`MAX_BODY_BYTES`] too).
pub const MAX_LIST_ENTRIES: usize = 1 << 20;
