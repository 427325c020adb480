//! Typed errors on the wire ([`ErrorCode`], [`RemoteError`], defined once in
//! flashpipe-api and re-exported here) and why a frame could not be decoded
//! ([`DecodeError`]).

pub use flashpipe_api::error::{ApiError as RemoteError, ErrorCode, ALL_KNOWN_CODES};

/// Why bytes are not a frame; every variant names what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The header does not start with `FPSV`.
    #[error("bad magic {found:02x?}: not a flashpipe serve frame (expected \"FPSV\")")]
    BadMagic {
        /// The first four bytes.
        found: [u8; 4],
    },
    /// The header's version is not one this code speaks.
    #[error("frame of protocol version {found}; this side speaks version {supported}")]
    UnsupportedVersion {
        /// Version in the header.
        found: u16,
        /// Version spoken here.
        supported: u16,
    },
    /// The header's frame kind is unknown.
    #[error("unknown frame kind {kind:#06x}")]
    UnknownKind {
        /// The kind in the header.
        kind: u16,
    },
    /// The header's body length exceeds the limit.
    #[error("frame body of {length_bytes} bytes exceeds the limit of {limit_bytes} bytes")]
    BodyTooLarge {
        /// Body length in the header.
        length_bytes: u64,
        /// The limit.
        limit_bytes: u64,
    },
    /// The header's flags are not zero (none are defined).
    #[error("frame flags {flags:#010x} are not zero (this version defines none)")]
    NonZeroFlags {
        /// The flags.
        flags: u32,
    },
    /// The body length does not match the bytes given.
    #[error("frame body is {available_bytes} bytes; the header says {length_bytes}")]
    LengthMismatch {
        /// Body length in the header.
        length_bytes: u64,
        /// Bytes after the header.
        available_bytes: u64,
    },
    /// A field runs past the end of the body.
    #[error("field {field} needs {needed_bytes} bytes; {available_bytes} are left in the body")]
    Truncated {
        /// The field.
        field: &'static str,
        /// Bytes it needs.
        needed_bytes: u64,
        /// Bytes left.
        available_bytes: u64,
    },
    /// Bytes are left after the last field.
    #[error("{count} bytes left after the last field of a {kind} frame")]
    TrailingBytes {
        /// The frame kind's name.
        kind: &'static str,
        /// Bytes left.
        count: u64,
    },
    /// A text field is not UTF-8.
    #[error("field {field} is not UTF-8")]
    BadUtf8 {
        /// The field.
        field: &'static str,
    },
    /// A length field exceeds its limit.
    #[error("field {field} is {length_bytes} bytes; the limit is {limit_bytes}")]
    TooLong {
        /// The field.
        field: &'static str,
        /// Its length.
        length_bytes: u64,
        /// The limit.
        limit_bytes: u64,
    },
    /// A count field exceeds its limit.
    #[error("field {field} counts {count} items; the limit is {limit}")]
    TooMany {
        /// The field.
        field: &'static str,
        /// The count.
        count: u64,
        /// The limit.
        limit: u64,
    },
    /// A field holds a value outside its range (an enum tag, a boolean).
    #[error("field {field} holds {value}, which is not a valid value")]
    BadValue {
        /// The field.
        field: &'static str,
        /// The value.
        value: u64,
    },
    /// A frame that must carry request id zero does not, or one that must not does.
    #[error("a {kind} frame carries request id {request_id}; {rule}")]
    BadRequestId {
        /// The frame kind's name.
        kind: &'static str,
        /// The id.
        request_id: u64,
        /// The rule broken.
        rule: &'static str,
    },
}
