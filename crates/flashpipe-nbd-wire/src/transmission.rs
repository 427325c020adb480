//! Transmission messages: request headers, simple replies, structured reply chunks
//! (data, hole, block status, error) and their decoders, and the readable names of
//! commands, options and errors.

use std::io::Read;

use crate::codec::*;
use crate::constants::*;

// ---------------------------------------------------------------------------------------
// Transmission: requests.

/// A transmission request header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestHeader {
    /// Command flags (`CMD_FLAG_*`).
    pub flags: u16,
    /// Command (`CMD_*`).
    pub command: u16,
    /// The client's cookie, echoed in the reply.
    pub cookie: u64,
    /// Byte offset into the export.
    pub offset_bytes: u64,
    /// Length in bytes (of the payload for writes, of the effect otherwise).
    pub length_bytes: u32,
}

impl RequestHeader {
    /// A header from its fields, in wire order.
    pub const fn new(
        flags: u16,
        command: u16,
        cookie: u64,
        offset_bytes: u64,
        length_bytes: u32,
    ) -> RequestHeader {
        RequestHeader {
            flags,
            command,
            cookie,
            offset_bytes,
            length_bytes,
        }
    }

    /// The 28-byte header in a new buffer.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(REQUEST_HEADER_BYTES);
        self.encode(&mut bytes);
        bytes
    }

    /// Appends the 28-byte header (the write payload, if any, follows separately).
    pub fn encode(&self, output: &mut Vec<u8>) {
        put_u32(output, REQUEST_MAGIC);
        put_u16(output, self.flags);
        put_u16(output, self.command);
        put_u64(output, self.cookie);
        put_u64(output, self.offset_bytes);
        put_u32(output, self.length_bytes);
    }

    /// Decodes a header (magic checked). A write's payload length is the caller's to
    /// bound (see [`MAX_PAYLOAD_BYTES`]) before it reads the payload.
    pub fn decode(bytes: &[u8; REQUEST_HEADER_BYTES]) -> Result<RequestHeader, WireError> {
        let mut reader = FieldReader::new(bytes, "request header");
        expect_u32(&mut reader, REQUEST_MAGIC, "request magic")?;
        Ok(RequestHeader {
            flags: reader.u16()?,
            command: reader.u16()?,
            cookie: reader.u64()?,
            offset_bytes: reader.u64()?,
            length_bytes: reader.u32()?,
        })
    }

    /// Whether a payload of `length_bytes` follows the header (writes only).
    pub fn has_payload(&self) -> bool {
        self.command == CMD_WRITE
    }
}

/// The command's name, for errors and logs.
pub fn command_name(command: u16) -> &'static str {
    match command {
        CMD_READ => "NBD_CMD_READ",
        CMD_WRITE => "NBD_CMD_WRITE",
        CMD_DISC => "NBD_CMD_DISC",
        CMD_FLUSH => "NBD_CMD_FLUSH",
        CMD_TRIM => "NBD_CMD_TRIM",
        CMD_CACHE => "NBD_CMD_CACHE",
        CMD_WRITE_ZEROES => "NBD_CMD_WRITE_ZEROES",
        CMD_BLOCK_STATUS => "NBD_CMD_BLOCK_STATUS",
        _ => "unknown command",
    }
}

/// The option's name, for errors and logs.
pub fn option_name(option: u32) -> &'static str {
    match option {
        OPT_EXPORT_NAME => "NBD_OPT_EXPORT_NAME",
        OPT_ABORT => "NBD_OPT_ABORT",
        OPT_LIST => "NBD_OPT_LIST",
        OPT_PEEK_EXPORT => "NBD_OPT_PEEK_EXPORT",
        OPT_STARTTLS => "NBD_OPT_STARTTLS",
        OPT_INFO => "NBD_OPT_INFO",
        OPT_GO => "NBD_OPT_GO",
        OPT_STRUCTURED_REPLY => "NBD_OPT_STRUCTURED_REPLY",
        OPT_LIST_META_CONTEXT => "NBD_OPT_LIST_META_CONTEXT",
        OPT_SET_META_CONTEXT => "NBD_OPT_SET_META_CONTEXT",
        OPT_EXTENDED_HEADERS => "NBD_OPT_EXTENDED_HEADERS",
        _ => "unknown option",
    }
}

// ---------------------------------------------------------------------------------------
// Transmission: replies.

/// Appends a simple reply header (a read's data, if any, follows separately).
pub fn encode_simple_reply(output: &mut Vec<u8>, error: u32, cookie: u64) {
    put_u32(output, SIMPLE_REPLY_MAGIC);
    put_u32(output, error);
    put_u64(output, cookie);
}

/// A structured reply chunk header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StructuredReplyHeader {
    /// Reply flags (`REPLY_FLAG_DONE`).
    pub flags: u16,
    /// Chunk type (`REPLY_TYPE_*`).
    pub reply_type: u16,
    /// The request's cookie.
    pub cookie: u64,
    /// Bytes of payload after the header.
    pub length_bytes: u32,
}

impl StructuredReplyHeader {
    /// Appends the 20-byte chunk header.
    pub fn encode(&self, output: &mut Vec<u8>) {
        put_u32(output, STRUCTURED_REPLY_MAGIC);
        put_u16(output, self.flags);
        put_u16(output, self.reply_type);
        put_u64(output, self.cookie);
        put_u32(output, self.length_bytes);
    }

    /// Whether this chunk ends its reply.
    pub fn is_done(&self) -> bool {
        self.flags & REPLY_FLAG_DONE != 0
    }
}

/// A reply header as read by a client: which magic came decides the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyHeader {
    /// A simple reply (16 bytes); a successful read's data follows, its length known
    /// only from the request.
    Simple {
        /// Error (`NBD_E*`), 0 for success.
        error: u32,
        /// The request's cookie.
        cookie: u64,
    },
    /// A structured reply chunk (20 bytes); `length_bytes` of payload follow.
    Structured(StructuredReplyHeader),
}

/// Reads one reply header (simple or structured); a structured chunk's payload length
/// is checked against [`MAX_PAYLOAD_BYTES`] plus its fixed overhead, but not read.
pub fn read_reply_header(reader: &mut impl Read) -> Result<ReplyHeader, WireError> {
    let mut magic_bytes = [0u8; 4];
    read_exact_or(reader, &mut magic_bytes, "reply magic")?;
    match u32::from_be_bytes(magic_bytes) {
        SIMPLE_REPLY_MAGIC => {
            let mut rest = [0u8; SIMPLE_REPLY_HEADER_BYTES - 4];
            read_exact_or(reader, &mut rest, "simple reply header")?;
            let mut fields = FieldReader::new(&rest, "simple reply header");
            Ok(ReplyHeader::Simple {
                error: fields.u32()?,
                cookie: fields.u64()?,
            })
        }
        STRUCTURED_REPLY_MAGIC => {
            let mut rest = [0u8; STRUCTURED_REPLY_HEADER_BYTES - 4];
            read_exact_or(reader, &mut rest, "structured reply header")?;
            let mut fields = FieldReader::new(&rest, "structured reply header");
            let header = StructuredReplyHeader {
                flags: fields.u16()?,
                reply_type: fields.u16()?,
                cookie: fields.u64()?,
                length_bytes: fields.u32()?,
            };
            check_chunk_length(&header)?;
            Ok(ReplyHeader::Structured(header))
        }
        found => Err(WireError::BadMagic {
            field: "reply magic",
            expected: u64::from(SIMPLE_REPLY_MAGIC),
            found: u64::from(found),
        }),
    }
}

/// The most payload bytes a chunk of this type may carry: data chunks the maximum
/// payload plus their 8-byte offset, block status its extent limit.
pub(crate) fn chunk_length_limit_bytes(reply_type: u16) -> u64 {
    match reply_type {
        REPLY_TYPE_OFFSET_DATA => u64::from(MAX_PAYLOAD_BYTES) + 8,
        REPLY_TYPE_BLOCK_STATUS => 4 + 8 * MAX_BLOCK_STATUS_EXTENTS as u64,
        _ => 8 + 2 + MAX_STRING_BYTES as u64 + 16,
    }
}

pub(crate) fn check_chunk_length(header: &StructuredReplyHeader) -> Result<(), WireError> {
    let limit_bytes = chunk_length_limit_bytes(header.reply_type);
    if u64::from(header.length_bytes) > limit_bytes {
        return Err(WireError::TooLong {
            field: "structured reply chunk payload",
            length_bytes: u64::from(header.length_bytes),
            limit_bytes,
        });
    }
    Ok(())
}

/// Appends an `NBD_REPLY_TYPE_NONE` chunk (always final).
pub fn encode_chunk_none(output: &mut Vec<u8>, cookie: u64) {
    StructuredReplyHeader {
        flags: REPLY_FLAG_DONE,
        reply_type: REPLY_TYPE_NONE,
        cookie,
        length_bytes: 0,
    }
    .encode(output);
}

/// Appends the header and offset of an `NBD_REPLY_TYPE_OFFSET_DATA` chunk; the caller
/// writes `data_length_bytes` of data after it.
pub fn encode_chunk_offset_data_header(
    output: &mut Vec<u8>,
    cookie: u64,
    offset_bytes: u64,
    data_length_bytes: u32,
    done: bool,
) {
    StructuredReplyHeader {
        flags: if done { REPLY_FLAG_DONE } else { 0 },
        reply_type: REPLY_TYPE_OFFSET_DATA,
        cookie,
        length_bytes: data_length_bytes.saturating_add(8),
    }
    .encode(output);
    put_u64(output, offset_bytes);
}

/// Appends an `NBD_REPLY_TYPE_OFFSET_HOLE` chunk.
pub fn encode_chunk_offset_hole(
    output: &mut Vec<u8>,
    cookie: u64,
    offset_bytes: u64,
    hole_size_bytes: u32,
    done: bool,
) {
    StructuredReplyHeader {
        flags: if done { REPLY_FLAG_DONE } else { 0 },
        reply_type: REPLY_TYPE_OFFSET_HOLE,
        cookie,
        length_bytes: 12,
    }
    .encode(output);
    put_u64(output, offset_bytes);
    put_u32(output, hole_size_bytes);
}

/// One block status descriptor: an extent's length and its status flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockStatusExtent {
    /// Length of the extent in bytes (nonzero).
    pub length_bytes: u32,
    /// Status flags (`STATE_HOLE`, `STATE_ZERO` for `base:allocation`).
    pub flags: u32,
}

/// Appends an `NBD_REPLY_TYPE_BLOCK_STATUS` chunk for one context.
pub fn encode_chunk_block_status(
    output: &mut Vec<u8>,
    cookie: u64,
    context_id: u32,
    extents: &[BlockStatusExtent],
    done: bool,
) {
    assert!(
        !extents.is_empty() && extents.len() <= MAX_BLOCK_STATUS_EXTENTS,
        "a block status chunk holds 1..={MAX_BLOCK_STATUS_EXTENTS} extents, not {}",
        extents.len()
    );
    StructuredReplyHeader {
        flags: if done { REPLY_FLAG_DONE } else { 0 },
        reply_type: REPLY_TYPE_BLOCK_STATUS,
        cookie,
        length_bytes: (4 + 8 * extents.len()) as u32,
    }
    .encode(output);
    put_u32(output, context_id);
    for extent in extents {
        put_u32(output, extent.length_bytes);
        put_u32(output, extent.flags);
    }
}

/// Decodes an `NBD_REPLY_TYPE_BLOCK_STATUS` payload into (context id, extents).
pub fn decode_block_status_payload(
    payload: &[u8],
) -> Result<(u32, Vec<BlockStatusExtent>), WireError> {
    let mut reader = FieldReader::new(payload, "NBD_REPLY_TYPE_BLOCK_STATUS payload");
    let context_id = reader.u32()?;
    if reader.remaining() == 0 || reader.remaining() % 8 != 0 {
        return Err(WireError::BadValue {
            field: "block status payload",
            detail: format!(
                "{} bytes of descriptors, must be a positive multiple of 8",
                reader.remaining()
            ),
        });
    }
    let count = reader.remaining() / 8;
    if count > MAX_BLOCK_STATUS_EXTENTS {
        return Err(WireError::TooMany {
            field: "block status extents",
            count: count as u64,
            limit: MAX_BLOCK_STATUS_EXTENTS as u64,
        });
    }
    let mut extents = Vec::with_capacity(count);
    for _ in 0..count {
        let length_bytes = reader.u32()?;
        let flags = reader.u32()?;
        if length_bytes == 0 {
            return Err(WireError::BadValue {
                field: "block status extent length",
                detail: "zero (MUST be nonzero)".to_string(),
            });
        }
        extents.push(BlockStatusExtent {
            length_bytes,
            flags,
        });
    }
    Ok((context_id, extents))
}

/// Decodes an `NBD_REPLY_TYPE_OFFSET_HOLE` payload into (offset, hole size).
pub fn decode_offset_hole_payload(payload: &[u8]) -> Result<(u64, u32), WireError> {
    let mut reader = FieldReader::new(payload, "NBD_REPLY_TYPE_OFFSET_HOLE payload");
    let offset_bytes = reader.u64()?;
    let hole_size_bytes = reader.u32()?;
    reader.finish()?;
    if hole_size_bytes == 0 {
        return Err(WireError::BadValue {
            field: "hole size",
            detail: "zero (MUST be nonzero)".to_string(),
        });
    }
    Ok((offset_bytes, hole_size_bytes))
}

/// An error chunk's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkError {
    /// The error (`NBD_E*`, nonzero).
    pub error: u32,
    /// The message for a human (may be empty).
    pub message: String,
    /// The offset, for `NBD_REPLY_TYPE_ERROR_OFFSET`.
    pub offset_bytes: Option<u64>,
}

/// Appends an `NBD_REPLY_TYPE_ERROR` chunk (final) with a message (cut to
/// [`MAX_STRING_BYTES`] at a character boundary).
pub fn encode_chunk_error(output: &mut Vec<u8>, cookie: u64, error: u32, message: &str) {
    assert!(error != 0, "an error chunk carries a nonzero error");
    let message = truncate_to_char_boundary(message, MAX_STRING_BYTES);
    StructuredReplyHeader {
        flags: REPLY_FLAG_DONE,
        reply_type: REPLY_TYPE_ERROR,
        cookie,
        length_bytes: (6 + message.len()) as u32,
    }
    .encode(output);
    put_u32(output, error);
    put_u16(output, message.len() as u16);
    output.extend_from_slice(message.as_bytes());
}

/// Cuts `text` to at most `limit_bytes` bytes at a character boundary.
pub fn truncate_to_char_boundary(text: &str, limit_bytes: usize) -> &str {
    if text.len() <= limit_bytes {
        return text;
    }
    let mut end = limit_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Decodes an error chunk's payload (`NBD_REPLY_TYPE_ERROR`, `..._ERROR_OFFSET`, or an
/// unknown type with bit 15 set, whose trailing fields are ignored).
pub fn decode_error_payload(reply_type: u16, payload: &[u8]) -> Result<ChunkError, WireError> {
    let mut reader = FieldReader::new(payload, "error chunk payload");
    let error = reader.u32()?;
    let message_length_bytes = usize::from(reader.u16()?);
    let message = reader.string(message_length_bytes, "error chunk message")?;
    let offset_bytes = if reply_type == REPLY_TYPE_ERROR_OFFSET {
        let offset_bytes = reader.u64()?;
        reader.finish()?;
        Some(offset_bytes)
    } else {
        None
    };
    Ok(ChunkError {
        error,
        message,
        offset_bytes,
    })
}

/// A readable name for an `NBD_E*` error value.
pub fn error_name(error: u32) -> &'static str {
    match error {
        0 => "success",
        NBD_EPERM => "NBD_EPERM (operation not permitted)",
        NBD_EIO => "NBD_EIO (input/output error)",
        NBD_ENOMEM => "NBD_ENOMEM (cannot allocate memory)",
        NBD_EINVAL => "NBD_EINVAL (invalid argument)",
        NBD_ENOSPC => "NBD_ENOSPC (no space left on device)",
        NBD_EOVERFLOW => "NBD_EOVERFLOW (value too large)",
        NBD_ENOTSUP => "NBD_ENOTSUP (operation not supported)",
        NBD_ESHUTDOWN => "NBD_ESHUTDOWN (server shutting down)",
        _ => "unknown NBD error",
    }
}
