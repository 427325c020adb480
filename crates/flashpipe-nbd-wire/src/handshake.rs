//! Handshake messages: the server's greeting and the client's flags, options (client to
//! server) with their info and meta context requests, and option replies (server to
//! client).

use std::io::Read;

use crate::codec::*;
use crate::constants::*;

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
