//! flashpipe-nbd-wire: the NBD wire format (constants, and the encoding and decoding of
//! every message of the fixed newstyle handshake and the transmission phase; doc/proto.md
//! of the NBD project), and what both NBD sides share around TLS:
//!
//! - [`tls_pump`]: the thread relaying plaintext between a rustls connection and a
//!   socketpair, used by the server's and the client's TLS;
//! - [`tls_words`]: every rustls, webpki and PEM error as a sentence for a user.
//!
//! Layer rule: a leaf among the NBD crates. It depends on no flashpipe crate but
//! `flashpipe-base` (send without SIGPIPE, for the pump). `flashpipe-nbd-client` stands on
//! it; `flashpipe-nbd` (the server and the simulated disk nodes) stands on both; the store
//! depends on the client alone.
//!
//! Every field is big-endian ("network byte order"). Decoders take byte slices and never
//! panic: a short, oversized or malformed message is a [`WireError`] naming the field and
//! the limit. Every variable length is bounded before anything is allocated for it:
//! strings by [`MAX_STRING_BYTES`] (the specification's 4096), option data by
//! [`MAX_OPTION_DATA_BYTES`], request and reply payloads by [`MAX_PAYLOAD_BYTES`]
//! (32 MiB, the specification's "SHOULD NOT be considered a denial of service").
//!
//! The `read_*` helpers read one whole message from a [`Read`] with those bounds
//! applied before the payload is read; the `encode_*` functions append to a `Vec<u8>`
//! so a caller can gather several messages into one `write_all`.

pub mod tls_pump;
pub mod tls_words;

use std::io::Read;

use thiserror::Error;

/// `NBDMAGIC`: the first 8 bytes the server sends.
pub const NBD_MAGIC: u64 = 0x4e42_444d_4147_4943;
/// `IHAVEOPT`: the newstyle magic, sent by the server after [`NBD_MAGIC`] and by the
/// client before every option.
pub const IHAVEOPT_MAGIC: u64 = 0x4948_4156_454F_5054;
/// The magic of every option reply.
pub const OPTION_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
/// `NBD_REQUEST_MAGIC`.
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
/// `NBD_SIMPLE_REPLY_MAGIC`.
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
/// `NBD_STRUCTURED_REPLY_MAGIC`.
pub const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;

/// The IANA port of NBD.
pub const NBD_DEFAULT_PORT: u16 = 10809;

/// Handshake flag `NBD_FLAG_FIXED_NEWSTYLE` (bit 0).
pub const HANDSHAKE_FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
/// Handshake flag `NBD_FLAG_NO_ZEROES` (bit 1).
pub const HANDSHAKE_FLAG_NO_ZEROES: u16 = 1 << 1;
/// Client flag `NBD_FLAG_C_FIXED_NEWSTYLE` (bit 0).
pub const CLIENT_FLAG_FIXED_NEWSTYLE: u32 = 1 << 0;
/// Client flag `NBD_FLAG_C_NO_ZEROES` (bit 1).
pub const CLIENT_FLAG_NO_ZEROES: u32 = 1 << 1;

/// Transmission flag `NBD_FLAG_HAS_FLAGS` (bit 0, always set).
pub const TRANSMISSION_FLAG_HAS_FLAGS: u16 = 1 << 0;
/// Transmission flag `NBD_FLAG_READ_ONLY`.
pub const TRANSMISSION_FLAG_READ_ONLY: u16 = 1 << 1;
/// Transmission flag `NBD_FLAG_SEND_FLUSH`.
pub const TRANSMISSION_FLAG_SEND_FLUSH: u16 = 1 << 2;
/// Transmission flag `NBD_FLAG_SEND_FUA`.
pub const TRANSMISSION_FLAG_SEND_FUA: u16 = 1 << 3;
/// Transmission flag `NBD_FLAG_ROTATIONAL`.
pub const TRANSMISSION_FLAG_ROTATIONAL: u16 = 1 << 4;
/// Transmission flag `NBD_FLAG_SEND_TRIM`.
pub const TRANSMISSION_FLAG_SEND_TRIM: u16 = 1 << 5;
/// Transmission flag `NBD_FLAG_SEND_WRITE_ZEROES` (also exposes `NBD_CMD_FLAG_NO_HOLE`).
pub const TRANSMISSION_FLAG_SEND_WRITE_ZEROES: u16 = 1 << 6;
/// Transmission flag `NBD_FLAG_SEND_DF`.
pub const TRANSMISSION_FLAG_SEND_DF: u16 = 1 << 7;
/// Transmission flag `NBD_FLAG_CAN_MULTI_CONN`.
pub const TRANSMISSION_FLAG_CAN_MULTI_CONN: u16 = 1 << 8;
/// Transmission flag `NBD_FLAG_SEND_RESIZE` (experimental extension; never set here).
pub const TRANSMISSION_FLAG_SEND_RESIZE: u16 = 1 << 9;
/// Transmission flag `NBD_FLAG_SEND_CACHE`.
pub const TRANSMISSION_FLAG_SEND_CACHE: u16 = 1 << 10;
/// Transmission flag `NBD_FLAG_SEND_FAST_ZERO`.
pub const TRANSMISSION_FLAG_SEND_FAST_ZERO: u16 = 1 << 11;

/// `NBD_OPT_EXPORT_NAME`.
pub const OPT_EXPORT_NAME: u32 = 1;
/// `NBD_OPT_ABORT`.
pub const OPT_ABORT: u32 = 2;
/// `NBD_OPT_LIST`.
pub const OPT_LIST: u32 = 3;
/// `NBD_OPT_PEEK_EXPORT` (withdrawn).
pub const OPT_PEEK_EXPORT: u32 = 4;
/// `NBD_OPT_STARTTLS`.
pub const OPT_STARTTLS: u32 = 5;
/// `NBD_OPT_INFO`.
pub const OPT_INFO: u32 = 6;
/// `NBD_OPT_GO`.
pub const OPT_GO: u32 = 7;
/// `NBD_OPT_STRUCTURED_REPLY`.
pub const OPT_STRUCTURED_REPLY: u32 = 8;
/// `NBD_OPT_LIST_META_CONTEXT`.
pub const OPT_LIST_META_CONTEXT: u32 = 9;
/// `NBD_OPT_SET_META_CONTEXT`.
pub const OPT_SET_META_CONTEXT: u32 = 10;
/// `NBD_OPT_EXTENDED_HEADERS` (experimental extension; answered unsupported here).
pub const OPT_EXTENDED_HEADERS: u32 = 11;

/// `NBD_REP_ACK`.
pub const REP_ACK: u32 = 1;
/// `NBD_REP_SERVER`.
pub const REP_SERVER: u32 = 2;
/// `NBD_REP_INFO`.
pub const REP_INFO: u32 = 3;
/// `NBD_REP_META_CONTEXT`.
pub const REP_META_CONTEXT: u32 = 4;
/// Bit 31: every error reply type has it.
pub const REP_FLAG_ERROR: u32 = 1 << 31;
/// `NBD_REP_ERR_UNSUP`.
pub const REP_ERR_UNSUP: u32 = REP_FLAG_ERROR | 1;
/// `NBD_REP_ERR_POLICY`.
pub const REP_ERR_POLICY: u32 = REP_FLAG_ERROR | 2;
/// `NBD_REP_ERR_INVALID`.
pub const REP_ERR_INVALID: u32 = REP_FLAG_ERROR | 3;
/// `NBD_REP_ERR_PLATFORM`.
pub const REP_ERR_PLATFORM: u32 = REP_FLAG_ERROR | 4;
/// `NBD_REP_ERR_TLS_REQD`.
pub const REP_ERR_TLS_REQD: u32 = REP_FLAG_ERROR | 5;
/// `NBD_REP_ERR_UNKNOWN`.
pub const REP_ERR_UNKNOWN: u32 = REP_FLAG_ERROR | 6;
/// `NBD_REP_ERR_SHUTDOWN`.
pub const REP_ERR_SHUTDOWN: u32 = REP_FLAG_ERROR | 7;
/// `NBD_REP_ERR_BLOCK_SIZE_REQD`.
pub const REP_ERR_BLOCK_SIZE_REQD: u32 = REP_FLAG_ERROR | 8;
/// `NBD_REP_ERR_TOO_BIG`.
pub const REP_ERR_TOO_BIG: u32 = REP_FLAG_ERROR | 9;

/// `NBD_INFO_EXPORT`.
pub const INFO_EXPORT: u16 = 0;
/// `NBD_INFO_NAME`.
pub const INFO_NAME: u16 = 1;
/// `NBD_INFO_DESCRIPTION`.
pub const INFO_DESCRIPTION: u16 = 2;
/// `NBD_INFO_BLOCK_SIZE`.
pub const INFO_BLOCK_SIZE: u16 = 3;

/// `NBD_CMD_READ`.
pub const CMD_READ: u16 = 0;
/// `NBD_CMD_WRITE`.
pub const CMD_WRITE: u16 = 1;
/// `NBD_CMD_DISC`.
pub const CMD_DISC: u16 = 2;
/// `NBD_CMD_FLUSH`.
pub const CMD_FLUSH: u16 = 3;
/// `NBD_CMD_TRIM`.
pub const CMD_TRIM: u16 = 4;
/// `NBD_CMD_CACHE`.
pub const CMD_CACHE: u16 = 5;
/// `NBD_CMD_WRITE_ZEROES`.
pub const CMD_WRITE_ZEROES: u16 = 6;
/// `NBD_CMD_BLOCK_STATUS`.
pub const CMD_BLOCK_STATUS: u16 = 7;

/// Command flag `NBD_CMD_FLAG_FUA`.
pub const CMD_FLAG_FUA: u16 = 1 << 0;
/// Command flag `NBD_CMD_FLAG_NO_HOLE`.
pub const CMD_FLAG_NO_HOLE: u16 = 1 << 1;
/// Command flag `NBD_CMD_FLAG_DF`.
pub const CMD_FLAG_DF: u16 = 1 << 2;
/// Command flag `NBD_CMD_FLAG_REQ_ONE`.
pub const CMD_FLAG_REQ_ONE: u16 = 1 << 3;
/// Command flag `NBD_CMD_FLAG_FAST_ZERO`.
pub const CMD_FLAG_FAST_ZERO: u16 = 1 << 4;

/// Structured reply flag `NBD_REPLY_FLAG_DONE`.
pub const REPLY_FLAG_DONE: u16 = 1 << 0;

/// `NBD_REPLY_TYPE_NONE`.
pub const REPLY_TYPE_NONE: u16 = 0;
/// `NBD_REPLY_TYPE_OFFSET_DATA`.
pub const REPLY_TYPE_OFFSET_DATA: u16 = 1;
/// `NBD_REPLY_TYPE_OFFSET_HOLE`.
pub const REPLY_TYPE_OFFSET_HOLE: u16 = 2;
/// `NBD_REPLY_TYPE_BLOCK_STATUS`.
pub const REPLY_TYPE_BLOCK_STATUS: u16 = 5;
/// Bit 15: every error chunk type has it.
pub const REPLY_TYPE_FLAG_ERROR: u16 = 1 << 15;
/// `NBD_REPLY_TYPE_ERROR`.
pub const REPLY_TYPE_ERROR: u16 = REPLY_TYPE_FLAG_ERROR | 1;
/// `NBD_REPLY_TYPE_ERROR_OFFSET`.
pub const REPLY_TYPE_ERROR_OFFSET: u16 = REPLY_TYPE_FLAG_ERROR | 2;

/// `NBD_STATE_HOLE` of `base:allocation`.
pub const STATE_HOLE: u32 = 1 << 0;
/// `NBD_STATE_ZERO` of `base:allocation`.
pub const STATE_ZERO: u32 = 1 << 1;

/// The one metadata context defined by the specification.
pub const META_CONTEXT_BASE_ALLOCATION: &str = "base:allocation";

/// `NBD_EPERM`.
pub const NBD_EPERM: u32 = 1;
/// `NBD_EIO`.
pub const NBD_EIO: u32 = 5;
/// `NBD_ENOMEM`.
pub const NBD_ENOMEM: u32 = 12;
/// `NBD_EINVAL`.
pub const NBD_EINVAL: u32 = 22;
/// `NBD_ENOSPC`.
pub const NBD_ENOSPC: u32 = 28;
/// `NBD_EOVERFLOW`.
pub const NBD_EOVERFLOW: u32 = 75;
/// `NBD_ENOTSUP`.
pub const NBD_ENOTSUP: u32 = 95;
/// `NBD_ESHUTDOWN`.
pub const NBD_ESHUTDOWN: u32 = 108;

/// Longest string (export name, description, query, error message): the specification's
/// "MUST be no longer than 4096 bytes".
pub const MAX_STRING_BYTES: usize = 4096;
/// Longest option data accepted (an option is skipped whole only within this bound; a
/// longer one ends the connection, a denial of service by the specification's rule).
pub const MAX_OPTION_DATA_BYTES: usize = 64 * 1024;
/// Longest option reply data accepted by a client.
pub const MAX_OPTION_REPLY_BYTES: usize = 64 * 1024;
/// Most information requests in one `NBD_OPT_INFO`/`NBD_OPT_GO`.
pub const MAX_INFO_REQUESTS: usize = 64;
/// Most queries in one `NBD_OPT_LIST_META_CONTEXT`/`NBD_OPT_SET_META_CONTEXT`.
pub const MAX_META_CONTEXT_QUERIES: usize = 128;
/// Largest request or reply payload: 2^25 bytes (32 MiB), the size the specification
/// says SHOULD NOT be considered a denial of service.
pub const MAX_PAYLOAD_BYTES: u32 = 32 * 1024 * 1024;
/// Most extents in one block status chunk (the specification's 2^20).
pub const MAX_BLOCK_STATUS_EXTENTS: usize = 1 << 20;
/// Length of a transmission request header.
pub const REQUEST_HEADER_BYTES: usize = 28;
/// Length of a simple reply header.
pub const SIMPLE_REPLY_HEADER_BYTES: usize = 16;
/// Length of a structured reply chunk header.
pub const STRUCTURED_REPLY_HEADER_BYTES: usize = 20;
/// Length of an option header (magic, option, length).
pub const OPTION_HEADER_BYTES: usize = 16;
/// Length of an option reply header (magic, option, type, length).
pub const OPTION_REPLY_HEADER_BYTES: usize = 20;
/// Length of the server's first message (NBDMAGIC, IHAVEOPT, handshake flags).
pub const SERVER_GREETING_BYTES: usize = 18;
/// Bytes of zeroes after an `NBD_OPT_EXPORT_NAME` answer unless `NO_ZEROES` was agreed.
pub const EXPORT_NAME_PADDING_BYTES: usize = 124;

/// What is wrong with a message, named by the field and the limit it broke.
#[derive(Debug, Error)]
pub enum WireError {
    /// Fewer bytes than the message needs.
    #[error("{message}: {length_bytes} bytes, at least {needed_bytes} needed")]
    TooShort {
        /// The message or field.
        message: &'static str,
        /// Bytes there were.
        length_bytes: usize,
        /// Bytes needed.
        needed_bytes: usize,
    },
    /// A length beyond its bound.
    #[error("{field}: {length_bytes} bytes, limit {limit_bytes}")]
    TooLong {
        /// The field.
        field: &'static str,
        /// The length sent.
        length_bytes: u64,
        /// The limit.
        limit_bytes: u64,
    },
    /// A count beyond its bound.
    #[error("{field}: {count}, limit {limit}")]
    TooMany {
        /// The field.
        field: &'static str,
        /// The count sent.
        count: u64,
        /// The limit.
        limit: u64,
    },
    /// A magic number other than the expected one.
    #[error("{field}: magic {found:#x}, expected {expected:#x}")]
    BadMagic {
        /// The field.
        field: &'static str,
        /// The expected magic.
        expected: u64,
        /// What came.
        found: u64,
    },
    /// Bytes left over after the last field of a fixed-layout message.
    #[error("{message}: {extra_bytes} bytes after its last field")]
    TrailingBytes {
        /// The message.
        message: &'static str,
        /// How many bytes were left.
        extra_bytes: usize,
    },
    /// A string that is not UTF-8 or holds a NUL.
    #[error("{field}: not a valid string (UTF-8 without NUL)")]
    BadString {
        /// The field.
        field: &'static str,
    },
    /// A field whose value the specification forbids.
    #[error("{field}: {detail}")]
    BadValue {
        /// The field.
        field: &'static str,
        /// What is wrong.
        detail: String,
    },
    /// The stream failed or ended.
    #[error("{message}: {source}")]
    Io {
        /// The message being read.
        message: &'static str,
        /// The operating system's error.
        source: std::io::Error,
    },
}

/// Reads big-endian fields off a byte slice, each read bounded, never panicking.
#[derive(Debug)]
pub struct FieldReader<'a> {
    bytes: &'a [u8],
    message: &'static str,
}

impl<'a> FieldReader<'a> {
    /// A reader over `bytes`, naming `message` in its errors.
    pub fn new(bytes: &'a [u8], message: &'static str) -> FieldReader<'a> {
        FieldReader { bytes, message }
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.bytes.len()
    }

    /// The next `length_bytes` bytes.
    pub fn take(&mut self, length_bytes: usize) -> Result<&'a [u8], WireError> {
        if length_bytes > self.bytes.len() {
            return Err(WireError::TooShort {
                message: self.message,
                length_bytes: self.bytes.len(),
                needed_bytes: length_bytes,
            });
        }
        let (head, tail) = self.bytes.split_at(length_bytes);
        self.bytes = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let mut array = [0u8; N];
        array.copy_from_slice(self.take(N)?);
        Ok(array)
    }

    /// The next big-endian u16.
    pub fn u16(&mut self) -> Result<u16, WireError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    /// The next big-endian u32.
    pub fn u32(&mut self) -> Result<u32, WireError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    /// The next big-endian u64.
    pub fn u64(&mut self) -> Result<u64, WireError> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    /// A string of `length_bytes` bytes, checked against [`MAX_STRING_BYTES`].
    pub fn string(
        &mut self,
        length_bytes: usize,
        field: &'static str,
    ) -> Result<String, WireError> {
        check_string_length(length_bytes, field)?;
        let bytes = self.take(length_bytes)?;
        decode_string(bytes, field)
    }

    /// A string of a 32-bit length prefix.
    pub fn prefixed_string(&mut self, field: &'static str) -> Result<String, WireError> {
        let length_bytes = self.u32()? as usize;
        self.string(length_bytes, field)
    }

    /// The rest of the bytes as a string.
    pub fn rest_as_string(&mut self, field: &'static str) -> Result<String, WireError> {
        let length_bytes = self.remaining();
        self.string(length_bytes, field)
    }

    /// Fails if any bytes are left.
    pub fn finish(self) -> Result<(), WireError> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(WireError::TrailingBytes {
                message: self.message,
                extra_bytes: self.bytes.len(),
            })
        }
    }
}

fn check_string_length(length_bytes: usize, field: &'static str) -> Result<(), WireError> {
    if length_bytes > MAX_STRING_BYTES {
        return Err(WireError::TooLong {
            field,
            length_bytes: length_bytes as u64,
            limit_bytes: MAX_STRING_BYTES as u64,
        });
    }
    Ok(())
}

/// Checks a string's bytes: UTF-8, no NUL.
pub fn decode_string(bytes: &[u8], field: &'static str) -> Result<String, WireError> {
    match std::str::from_utf8(bytes) {
        Ok(text) if !text.contains('\0') => Ok(text.to_string()),
        _ => Err(WireError::BadString { field }),
    }
}

fn put_u16(output: &mut Vec<u8>, value: u16) {
    output.extend_from_slice(&value.to_be_bytes());
}

fn put_u32(output: &mut Vec<u8>, value: u32) {
    output.extend_from_slice(&value.to_be_bytes());
}

fn put_u64(output: &mut Vec<u8>, value: u64) {
    output.extend_from_slice(&value.to_be_bytes());
}

/// A string's length as a 32-bit field; strings are bounded by [`MAX_STRING_BYTES`]
/// when built, so this cannot overflow for the strings this module encodes.
fn string_length_u32(text: &str) -> u32 {
    u32::try_from(text.len()).unwrap_or(u32::MAX)
}

fn put_prefixed_string(output: &mut Vec<u8>, text: &str) {
    put_u32(output, string_length_u32(text));
    output.extend_from_slice(text.as_bytes());
}

/// Reads exactly `buffer.len()` bytes, naming `message` when the stream fails or ends.
pub fn read_exact_or(
    reader: &mut impl Read,
    buffer: &mut [u8],
    message: &'static str,
) -> Result<(), WireError> {
    reader
        .read_exact(buffer)
        .map_err(|source| WireError::Io { message, source })
}

fn read_bounded(
    reader: &mut impl Read,
    length_bytes: usize,
    limit_bytes: usize,
    field: &'static str,
) -> Result<Vec<u8>, WireError> {
    if length_bytes > limit_bytes {
        return Err(WireError::TooLong {
            field,
            length_bytes: length_bytes as u64,
            limit_bytes: limit_bytes as u64,
        });
    }
    let mut data = vec![0u8; length_bytes];
    read_exact_or(reader, &mut data, field)?;
    Ok(data)
}

// ---------------------------------------------------------------------------------------
// Handshake: greeting and client flags.

/// The server's first message: `NBDMAGIC`, `IHAVEOPT`, 16 bits of handshake flags.
pub fn encode_server_greeting(output: &mut Vec<u8>, handshake_flags: u16) {
    put_u64(output, NBD_MAGIC);
    put_u64(output, IHAVEOPT_MAGIC);
    put_u16(output, handshake_flags);
}

/// Decodes the server's greeting into its handshake flags; refuses the oldstyle
/// handshake (its second magic is not `IHAVEOPT`).
pub fn decode_server_greeting(bytes: &[u8; SERVER_GREETING_BYTES]) -> Result<u16, WireError> {
    let mut reader = FieldReader::new(bytes, "server greeting");
    expect_u64(&mut reader, NBD_MAGIC, "server greeting NBDMAGIC")?;
    expect_u64(&mut reader, IHAVEOPT_MAGIC, "server greeting IHAVEOPT")?;
    reader.u16()
}

fn expect_u64(
    reader: &mut FieldReader<'_>,
    expected: u64,
    field: &'static str,
) -> Result<(), WireError> {
    let found = reader.u64()?;
    if found != expected {
        return Err(WireError::BadMagic {
            field,
            expected,
            found,
        });
    }
    Ok(())
}

fn expect_u32(
    reader: &mut FieldReader<'_>,
    expected: u32,
    field: &'static str,
) -> Result<(), WireError> {
    let found = reader.u32()?;
    if found != expected {
        return Err(WireError::BadMagic {
            field,
            expected: u64::from(expected),
            found: u64::from(found),
        });
    }
    Ok(())
}

/// The client's flags, checked against what the server advertised: an unknown flag, or
/// `NO_ZEROES` the server did not offer, is refused (the specification: the server MUST
/// drop the connection).
pub fn check_client_flags(client_flags: u32, handshake_flags: u16) -> Result<(), WireError> {
    let mut known = CLIENT_FLAG_FIXED_NEWSTYLE;
    if handshake_flags & HANDSHAKE_FLAG_NO_ZEROES != 0 {
        known |= CLIENT_FLAG_NO_ZEROES;
    }
    if client_flags & !known != 0 {
        return Err(WireError::BadValue {
            field: "client flags",
            detail: format!(
                "{client_flags:#x} sets bits the server did not offer (offered {known:#x})"
            ),
        });
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Options (client to server).

/// An option header: `IHAVEOPT`, option, length of its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionHeader {
    /// The option (`OPT_*`).
    pub option: u32,
    /// Bytes of data after the header.
    pub data_length_bytes: u32,
}

/// Appends an option with its data.
pub fn encode_option(output: &mut Vec<u8>, option: u32, data: &[u8]) {
    put_u64(output, IHAVEOPT_MAGIC);
    put_u32(output, option);
    put_u32(output, u32::try_from(data.len()).unwrap_or(u32::MAX));
    output.extend_from_slice(data);
}

/// Decodes an option header (magic checked).
pub fn decode_option_header(bytes: &[u8; OPTION_HEADER_BYTES]) -> Result<OptionHeader, WireError> {
    let mut reader = FieldReader::new(bytes, "option header");
    expect_u64(&mut reader, IHAVEOPT_MAGIC, "option header IHAVEOPT")?;
    Ok(OptionHeader {
        option: reader.u32()?,
        data_length_bytes: reader.u32()?,
    })
}

/// Reads one option: header and data, the data bounded by [`MAX_OPTION_DATA_BYTES`].
pub fn read_option(reader: &mut impl Read) -> Result<(OptionHeader, Vec<u8>), WireError> {
    let mut header_bytes = [0u8; OPTION_HEADER_BYTES];
    read_exact_or(reader, &mut header_bytes, "option header")?;
    let header = decode_option_header(&header_bytes)?;
    let data = read_bounded(
        reader,
        header.data_length_bytes as usize,
        MAX_OPTION_DATA_BYTES,
        "option data",
    )?;
    Ok((header, data))
}

/// The data of `NBD_OPT_INFO` and `NBD_OPT_GO`: an export name and information requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InfoRequest {
    /// Export name (empty: the default export).
    pub export_name: String,
    /// `INFO_*` types asked for.
    pub info_types: Vec<u16>,
}

impl InfoRequest {
    /// Appends the option data.
    pub fn encode(&self, output: &mut Vec<u8>) {
        put_prefixed_string(output, &self.export_name);
        put_u16(
            output,
            u16::try_from(self.info_types.len()).unwrap_or(u16::MAX),
        );
        for info_type in &self.info_types {
            put_u16(output, *info_type);
        }
    }

    /// Decodes the option data; the export name length must leave room for the count.
    pub fn decode(data: &[u8]) -> Result<InfoRequest, WireError> {
        let mut reader = FieldReader::new(data, "NBD_OPT_INFO/GO data");
        let export_name = reader.prefixed_string("export name")?;
        let count = usize::from(reader.u16()?);
        if count > MAX_INFO_REQUESTS {
            return Err(WireError::TooMany {
                field: "information requests",
                count: count as u64,
                limit: MAX_INFO_REQUESTS as u64,
            });
        }
        let mut info_types = Vec::with_capacity(count);
        for _ in 0..count {
            info_types.push(reader.u16()?);
        }
        reader.finish()?;
        Ok(InfoRequest {
            export_name,
            info_types,
        })
    }
}

/// The data of `NBD_OPT_LIST_META_CONTEXT` and `NBD_OPT_SET_META_CONTEXT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaContextRequest {
    /// Export name.
    pub export_name: String,
    /// Queries (`namespace:leaf`).
    pub queries: Vec<String>,
}

impl MetaContextRequest {
    /// Appends the option data.
    pub fn encode(&self, output: &mut Vec<u8>) {
        put_prefixed_string(output, &self.export_name);
        put_u32(
            output,
            u32::try_from(self.queries.len()).unwrap_or(u32::MAX),
        );
        for query in &self.queries {
            put_prefixed_string(output, query);
        }
    }

    /// Decodes the option data.
    pub fn decode(data: &[u8]) -> Result<MetaContextRequest, WireError> {
        let mut reader = FieldReader::new(data, "NBD_OPT_*_META_CONTEXT data");
        let export_name = reader.prefixed_string("export name")?;
        let count = reader.u32()? as usize;
        if count > MAX_META_CONTEXT_QUERIES {
            return Err(WireError::TooMany {
                field: "metadata context queries",
                count: count as u64,
                limit: MAX_META_CONTEXT_QUERIES as u64,
            });
        }
        let mut queries = Vec::with_capacity(count);
        for _ in 0..count {
            queries.push(reader.prefixed_string("metadata context query")?);
        }
        reader.finish()?;
        Ok(MetaContextRequest {
            export_name,
            queries,
        })
    }
}

// ---------------------------------------------------------------------------------------
// Option replies (server to client).

/// An option reply header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionReplyHeader {
    /// The option answered.
    pub option: u32,
    /// `REP_*`.
    pub reply_type: u32,
    /// Bytes of data after the header.
    pub data_length_bytes: u32,
}

impl OptionReplyHeader {
    /// Whether the reply type is an error (bit 31).
    pub fn is_error(&self) -> bool {
        self.reply_type & REP_FLAG_ERROR != 0
    }
}

/// Appends an option reply with its data.
pub fn encode_option_reply(output: &mut Vec<u8>, option: u32, reply_type: u32, data: &[u8]) {
    put_u64(output, OPTION_REPLY_MAGIC);
    put_u32(output, option);
    put_u32(output, reply_type);
    put_u32(output, u32::try_from(data.len()).unwrap_or(u32::MAX));
    output.extend_from_slice(data);
}

/// Decodes an option reply header (magic checked).
pub fn decode_option_reply_header(
    bytes: &[u8; OPTION_REPLY_HEADER_BYTES],
) -> Result<OptionReplyHeader, WireError> {
    let mut reader = FieldReader::new(bytes, "option reply header");
    expect_u64(&mut reader, OPTION_REPLY_MAGIC, "option reply magic")?;
    Ok(OptionReplyHeader {
        option: reader.u32()?,
        reply_type: reader.u32()?,
        data_length_bytes: reader.u32()?,
    })
}

/// Reads one option reply: header and data, bounded by [`MAX_OPTION_REPLY_BYTES`].
pub fn read_option_reply(
    reader: &mut impl Read,
) -> Result<(OptionReplyHeader, Vec<u8>), WireError> {
    let mut header_bytes = [0u8; OPTION_REPLY_HEADER_BYTES];
    read_exact_or(reader, &mut header_bytes, "option reply header")?;
    let header = decode_option_reply_header(&header_bytes)?;
    let data = read_bounded(
        reader,
        header.data_length_bytes as usize,
        MAX_OPTION_REPLY_BYTES,
        "option reply data",
    )?;
    Ok((header, data))
}

/// `NBD_REP_SERVER` data: an export's name and an optional description.
pub fn encode_server_entry(output: &mut Vec<u8>, export_name: &str, description: &str) {
    put_prefixed_string(output, export_name);
    output.extend_from_slice(description.as_bytes());
}

/// Decodes `NBD_REP_SERVER` data into (name, description).
pub fn decode_server_entry(data: &[u8]) -> Result<(String, String), WireError> {
    let mut reader = FieldReader::new(data, "NBD_REP_SERVER data");
    let export_name = reader.prefixed_string("export name")?;
    let description = reader.rest_as_string("export description")?;
    Ok((export_name, description))
}

/// One `NBD_REP_INFO` item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InfoReply {
    /// `NBD_INFO_EXPORT`: size and transmission flags.
    Export {
        /// Export size in bytes.
        size_bytes: u64,
        /// Transmission flags.
        transmission_flags: u16,
    },
    /// `NBD_INFO_NAME`: the canonical name.
    Name(String),
    /// `NBD_INFO_DESCRIPTION`: text for a human.
    Description(String),
    /// `NBD_INFO_BLOCK_SIZE`: size constraints.
    BlockSize {
        /// Minimum block size (power of 2, at most 64 KiB).
        minimum_bytes: u32,
        /// Preferred block size.
        preferred_bytes: u32,
        /// Maximum payload.
        maximum_payload_bytes: u32,
    },
    /// A type this side does not know (the client MUST ignore it).
    Unknown {
        /// Its type.
        info_type: u16,
    },
}

impl InfoReply {
    /// Appends the `NBD_REP_INFO` data (type and payload).
    pub fn encode(&self, output: &mut Vec<u8>) {
        match self {
            InfoReply::Export {
                size_bytes,
                transmission_flags,
            } => {
                put_u16(output, INFO_EXPORT);
                put_u64(output, *size_bytes);
                put_u16(output, *transmission_flags);
            }
            InfoReply::Name(name) => {
                put_u16(output, INFO_NAME);
                output.extend_from_slice(name.as_bytes());
            }
            InfoReply::Description(description) => {
                put_u16(output, INFO_DESCRIPTION);
                output.extend_from_slice(description.as_bytes());
            }
            InfoReply::BlockSize {
                minimum_bytes,
                preferred_bytes,
                maximum_payload_bytes,
            } => {
                put_u16(output, INFO_BLOCK_SIZE);
                put_u32(output, *minimum_bytes);
                put_u32(output, *preferred_bytes);
                put_u32(output, *maximum_payload_bytes);
            }
            InfoReply::Unknown { info_type } => put_u16(output, *info_type),
        }
    }

    /// Decodes `NBD_REP_INFO` data; fixed-size items must have their exact lengths.
    pub fn decode(data: &[u8]) -> Result<InfoReply, WireError> {
        let mut reader = FieldReader::new(data, "NBD_REP_INFO data");
        let info_type = reader.u16()?;
        let reply = match info_type {
            INFO_EXPORT => InfoReply::Export {
                size_bytes: reader.u64()?,
                transmission_flags: reader.u16()?,
            },
            INFO_NAME => InfoReply::Name(reader.rest_as_string("NBD_INFO_NAME")?),
            INFO_DESCRIPTION => {
                InfoReply::Description(reader.rest_as_string("NBD_INFO_DESCRIPTION")?)
            }
            INFO_BLOCK_SIZE => InfoReply::BlockSize {
                minimum_bytes: reader.u32()?,
                preferred_bytes: reader.u32()?,
                maximum_payload_bytes: reader.u32()?,
            },
            _ => return Ok(InfoReply::Unknown { info_type }),
        };
        reader.finish()?;
        Ok(reply)
    }
}

/// `NBD_REP_META_CONTEXT` data: a context id and name.
pub fn encode_meta_context_reply(output: &mut Vec<u8>, context_id: u32, context_name: &str) {
    put_u32(output, context_id);
    output.extend_from_slice(context_name.as_bytes());
}

/// Decodes `NBD_REP_META_CONTEXT` data into (id, name).
pub fn decode_meta_context_reply(data: &[u8]) -> Result<(u32, String), WireError> {
    let mut reader = FieldReader::new(data, "NBD_REP_META_CONTEXT data");
    let context_id = reader.u32()?;
    let context_name = reader.rest_as_string("metadata context name")?;
    Ok((context_id, context_name))
}

/// The answer to `NBD_OPT_EXPORT_NAME`: size, transmission flags, and 124 zero bytes
/// unless `NO_ZEROES` was agreed.
pub fn encode_export_name_reply(
    output: &mut Vec<u8>,
    size_bytes: u64,
    transmission_flags: u16,
    no_zeroes: bool,
) {
    put_u64(output, size_bytes);
    put_u16(output, transmission_flags);
    if !no_zeroes {
        output.extend_from_slice(&[0u8; EXPORT_NAME_PADDING_BYTES]);
    }
}

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
fn chunk_length_limit_bytes(reply_type: u16) -> u64 {
    match reply_type {
        REPLY_TYPE_OFFSET_DATA => u64::from(MAX_PAYLOAD_BYTES) + 8,
        REPLY_TYPE_BLOCK_STATUS => 4 + 8 * MAX_BLOCK_STATUS_EXTENTS as u64,
        _ => 8 + 2 + MAX_STRING_BYTES as u64 + 16,
    }
}

fn check_chunk_length(header: &StructuredReplyHeader) -> Result<(), WireError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn greeting_round_trips_and_refuses_oldstyle() {
        let mut bytes = Vec::new();
        encode_server_greeting(&mut bytes, HANDSHAKE_FLAG_FIXED_NEWSTYLE);
        let array: [u8; SERVER_GREETING_BYTES] = bytes.clone().try_into().unwrap();
        assert_eq!(decode_server_greeting(&array).unwrap(), 1);
        bytes[8] ^= 0xff;
        let array: [u8; SERVER_GREETING_BYTES] = bytes.try_into().unwrap();
        assert!(matches!(
            decode_server_greeting(&array),
            Err(WireError::BadMagic { .. })
        ));
    }

    #[test]
    fn client_flags_must_match_the_offer() {
        let both = HANDSHAKE_FLAG_FIXED_NEWSTYLE | HANDSHAKE_FLAG_NO_ZEROES;
        check_client_flags(3, both).unwrap();
        assert!(check_client_flags(2, HANDSHAKE_FLAG_FIXED_NEWSTYLE).is_err());
        assert!(check_client_flags(4, both).is_err());
    }

    #[test]
    fn info_request_round_trips() {
        let request = InfoRequest {
            export_name: "disk0".into(),
            info_types: vec![INFO_BLOCK_SIZE, INFO_NAME],
        };
        let mut data = Vec::new();
        request.encode(&mut data);
        assert_eq!(InfoRequest::decode(&data).unwrap(), request);
        data.push(0);
        assert!(InfoRequest::decode(&data).is_err());
    }

    #[test]
    fn meta_context_request_round_trips() {
        let request = MetaContextRequest {
            export_name: String::new(),
            queries: vec!["base:allocation".into(), "qemu:dirty".into()],
        };
        let mut data = Vec::new();
        request.encode(&mut data);
        assert_eq!(MetaContextRequest::decode(&data).unwrap(), request);
    }

    #[test]
    fn info_replies_round_trip() {
        for reply in [
            InfoReply::Export {
                size_bytes: 1 << 30,
                transmission_flags: 0x1ed,
            },
            InfoReply::Name("n".into()),
            InfoReply::Description("a RAM disk".into()),
            InfoReply::BlockSize {
                minimum_bytes: 512,
                preferred_bytes: 4096,
                maximum_payload_bytes: MAX_PAYLOAD_BYTES,
            },
        ] {
            let mut data = Vec::new();
            reply.encode(&mut data);
            assert_eq!(InfoReply::decode(&data).unwrap(), reply);
        }
    }

    #[test]
    fn request_header_round_trips() {
        let header = RequestHeader {
            flags: CMD_FLAG_FUA,
            command: CMD_WRITE,
            cookie: 0xdead_beef,
            offset_bytes: 4096,
            length_bytes: 512,
        };
        let mut bytes = Vec::new();
        header.encode(&mut bytes);
        let array: [u8; REQUEST_HEADER_BYTES] = bytes.try_into().unwrap();
        assert_eq!(RequestHeader::decode(&array).unwrap(), header);
    }

    #[test]
    fn replies_read_back() {
        let mut bytes = Vec::new();
        encode_simple_reply(&mut bytes, NBD_EIO, 7);
        encode_chunk_block_status(
            &mut bytes,
            9,
            1,
            &[BlockStatusExtent {
                length_bytes: 4096,
                flags: STATE_HOLE | STATE_ZERO,
            }],
            true,
        );
        encode_chunk_error(&mut bytes, 11, NBD_EINVAL, "bad");
        let mut reader = &bytes[..];
        assert_eq!(
            read_reply_header(&mut reader).unwrap(),
            ReplyHeader::Simple {
                error: NBD_EIO,
                cookie: 7
            }
        );
        let ReplyHeader::Structured(header) = read_reply_header(&mut reader).unwrap() else {
            panic!("structured chunk expected");
        };
        let (payload, rest) = reader.split_at(header.length_bytes as usize);
        reader = rest;
        let (context_id, extents) = decode_block_status_payload(payload).unwrap();
        assert_eq!((context_id, extents.len()), (1, 1));
        let ReplyHeader::Structured(header) = read_reply_header(&mut reader).unwrap() else {
            panic!("structured chunk expected");
        };
        let error = decode_error_payload(header.reply_type, reader).unwrap();
        assert_eq!(error.message, "bad");
    }

    proptest! {
        #[test]
        fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = InfoRequest::decode(&bytes);
            let _ = MetaContextRequest::decode(&bytes);
            let _ = InfoReply::decode(&bytes);
            let _ = decode_server_entry(&bytes);
            let _ = decode_meta_context_reply(&bytes);
            let _ = decode_block_status_payload(&bytes);
            let _ = decode_offset_hole_payload(&bytes);
            let _ = decode_error_payload(REPLY_TYPE_ERROR_OFFSET, &bytes);
            let _ = read_reply_header(&mut &bytes[..]);
            let _ = read_option(&mut &bytes[..]);
            let _ = read_option_reply(&mut &bytes[..]);
        }
    }
}
