//! The client's side of the fixed newstyle handshake (doc/proto.md, "Handshake"):
//! greeting, client flags, `NBD_OPT_STARTTLS` and the TLS handshake when the URI requires
//! TLS, `NBD_OPT_STRUCTURED_REPLY` (used when the server accepts it),
//! then `NBD_OPT_GO` with an `NBD_INFO_BLOCK_SIZE` request, falling back to
//! `NBD_OPT_EXPORT_NAME` only when the server answers `NBD_REP_ERR_UNSUP` to `NBD_OPT_GO`.
//!
//! Every reply is checked: magic, the option it answers, lengths (bounded by
//! `wire::MAX_OPTION_REPLY_BYTES`), exactly one final reply per option, the
//! `NBD_INFO_EXPORT` item present before `NBD_REP_ACK`, the size constraints as the
//! specification bounds them. A server that breaks a rule gets a hard disconnect (the
//! connection is dropped) and the error names the rule.

use std::io::{Read, Write};

use flashpipe_nbd_wire::{self as wire, InfoReply, InfoRequest, WireError};

use crate::tls::{self, ClientTlsSetup};
use crate::transport::Stream;

/// The second magic of the oldstyle handshake (`cliserv_magic`), recognised to name it.
const OLDSTYLE_MAGIC: u64 = 0x0000_4202_8186_1253;

/// What the server said about the export, and what was agreed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NbdExport {
    /// Export size in bytes.
    pub size_bytes: u64,
    /// Transmission flags (`wire::TRANSMISSION_FLAG_*`).
    pub transmission_flags: u16,
    /// Minimum block size (1 when the server advertised none).
    pub minimum_block_bytes: u32,
    /// Preferred block size (4096 when the server advertised none).
    pub preferred_block_bytes: u32,
    /// Maximum payload (32 MiB when the server advertised none).
    pub maximum_payload_bytes: u32,
    /// Whether structured replies were negotiated.
    pub structured_replies: bool,
    /// Whether the export was entered with `NBD_OPT_GO` (false: the `NBD_OPT_EXPORT_NAME`
    /// fallback for servers without it).
    pub entered_with_go: bool,
}

impl NbdExport {
    /// Whether a transmission flag is set.
    pub fn has_flag(&self, flag: u16) -> bool {
        self.transmission_flags & flag != 0
    }
}

fn wire_error(error: WireError) -> String {
    format!("handshake: {error}")
}

/// Runs the handshake on a fresh connection and enters transmission on `export_name`;
/// with `tls`, upgrades the connection to TLS first (`stream` becomes the TLS stream).
pub(crate) fn negotiate(
    stream: &mut Stream,
    export_name: &str,
    tls: Option<&ClientTlsSetup>,
) -> Result<NbdExport, String> {
    let handshake_flags = read_greeting(stream)?;
    let mut client_flags = wire::CLIENT_FLAG_FIXED_NEWSTYLE;
    let no_zeroes = handshake_flags & wire::HANDSHAKE_FLAG_NO_ZEROES != 0;
    if no_zeroes {
        client_flags |= wire::CLIENT_FLAG_NO_ZEROES;
    }
    write_all(stream, &client_flags.to_be_bytes())?;
    if let Some(setup) = tls {
        start_tls(stream, setup)?;
    }
    let structured_replies = negotiate_structured_replies(stream)?;
    match go(stream, export_name)? {
        Some(mut export) => {
            export.structured_replies = structured_replies;
            Ok(export)
        }
        None => {
            let mut export = export_name_fallback(stream, export_name, no_zeroes)?;
            export.structured_replies = structured_replies;
            Ok(export)
        }
    }
}

fn write_all(stream: &mut Stream, bytes: &[u8]) -> Result<(), String> {
    stream
        .write_all(bytes)
        .and_then(|()| stream.flush())
        .map_err(|error| format!("handshake: sending to the server failed: {error}"))
}

fn read_greeting(stream: &mut Stream) -> Result<u16, String> {
    let mut greeting = [0u8; wire::SERVER_GREETING_BYTES];
    wire::read_exact_or(stream, &mut greeting, "server greeting").map_err(wire_error)?;
    let second_magic = u64::from_be_bytes(greeting[8..16].try_into().expect("8 bytes"));
    if second_magic == OLDSTYLE_MAGIC {
        return Err(
            "handshake: the server speaks the oldstyle handshake, which this client does not (fixed newstyle only)"
                .to_string(),
        );
    }
    let flags = wire::decode_server_greeting(&greeting).map_err(wire_error)?;
    if flags & wire::HANDSHAKE_FLAG_FIXED_NEWSTYLE == 0 {
        return Err(
            "handshake: the server does not offer the fixed newstyle handshake (NBD_FLAG_FIXED_NEWSTYLE)"
                .to_string(),
        );
    }
    Ok(flags)
}

/// Reads one option reply and checks that it answers `option`.
fn read_reply(stream: &mut Stream, option: u32) -> Result<(u32, Vec<u8>), String> {
    let (header, data) = wire::read_option_reply(stream).map_err(wire_error)?;
    if header.option != option {
        return Err(format!(
            "handshake: a reply for {} came while {} was pending",
            wire::option_name(header.option),
            wire::option_name(option)
        ));
    }
    Ok((header.reply_type, data))
}

/// The text an error reply carries, for a person.
fn error_text(data: &[u8]) -> String {
    let text = String::from_utf8_lossy(data);
    let text = wire::truncate_to_char_boundary(&text, 512);
    if text.is_empty() {
        String::new()
    } else {
        format!(": {text}")
    }
}

fn reply_error_name(reply_type: u32) -> &'static str {
    match reply_type {
        wire::REP_ERR_UNSUP => "NBD_REP_ERR_UNSUP",
        wire::REP_ERR_POLICY => "NBD_REP_ERR_POLICY",
        wire::REP_ERR_INVALID => "NBD_REP_ERR_INVALID",
        wire::REP_ERR_PLATFORM => "NBD_REP_ERR_PLATFORM",
        wire::REP_ERR_TLS_REQD => "NBD_REP_ERR_TLS_REQD",
        wire::REP_ERR_UNKNOWN => "NBD_REP_ERR_UNKNOWN",
        wire::REP_ERR_SHUTDOWN => "NBD_REP_ERR_SHUTDOWN",
        wire::REP_ERR_BLOCK_SIZE_REQD => "NBD_REP_ERR_BLOCK_SIZE_REQD",
        wire::REP_ERR_TOO_BIG => "NBD_REP_ERR_TOO_BIG",
        _ => "an unknown error reply",
    }
}

/// `NBD_OPT_STARTTLS`, then the TLS handshake on `NBD_REP_ACK`; any other answer is a
/// server that will not speak TLS (the connection is left with `NBD_OPT_ABORT`).
fn start_tls(stream: &mut Stream, setup: &ClientTlsSetup) -> Result<(), String> {
    let mut option = Vec::new();
    wire::encode_option(&mut option, wire::OPT_STARTTLS, &[]);
    write_all(stream, &option)?;
    let (reply_type, data) = read_reply(stream, wire::OPT_STARTTLS)?;
    match reply_type {
        wire::REP_ACK if data.is_empty() => {
            tls::upgrade(stream, setup).map_err(|error| format!("handshake: {error}"))
        }
        wire::REP_ACK => Err(format!(
            "handshake: NBD_REP_ACK to NBD_OPT_STARTTLS with {} bytes of data, which it has none",
            data.len()
        )),
        wire::REP_ERR_UNSUP | wire::REP_ERR_POLICY | wire::REP_ERR_INVALID => {
            abort(stream);
            Err(format!(
                "handshake: the server refused NBD_OPT_STARTTLS with {} (a server without TLS? use nbd:// for a plaintext server on a trusted network){}",
                reply_error_name(reply_type),
                error_text(&data)
            ))
        }
        reply if reply & wire::REP_FLAG_ERROR != 0 => {
            abort(stream);
            Err(format!(
                "handshake: the server refused NBD_OPT_STARTTLS with {}{}",
                reply_error_name(reply),
                error_text(&data)
            ))
        }
        reply => Err(format!(
            "handshake: reply type {reply} to NBD_OPT_STARTTLS, which has only NBD_REP_ACK or an error"
        )),
    }
}

/// Asks for structured replies: true on `NBD_REP_ACK`, false on any error but
/// `NBD_REP_ERR_SHUTDOWN` (then simple replies are used).
fn negotiate_structured_replies(stream: &mut Stream) -> Result<bool, String> {
    let mut option = Vec::new();
    wire::encode_option(&mut option, wire::OPT_STRUCTURED_REPLY, &[]);
    write_all(stream, &option)?;
    let (reply_type, data) = read_reply(stream, wire::OPT_STRUCTURED_REPLY)?;
    match reply_type {
        wire::REP_ACK => Ok(true),
        wire::REP_ERR_SHUTDOWN => {
            abort(stream);
            Err(format!(
                "handshake: the server is shutting down{}",
                error_text(&data)
            ))
        }
        reply if reply & wire::REP_FLAG_ERROR != 0 => Ok(false),
        reply => Err(format!(
            "handshake: reply type {reply} to NBD_OPT_STRUCTURED_REPLY, which has only NBD_REP_ACK or an error"
        )),
    }
}

/// A soft disconnect during the handshake (`NBD_OPT_ABORT`), as the specification asks
/// of a client leaving; the server's answer is not awaited.
fn abort(stream: &mut Stream) {
    let mut option = Vec::new();
    wire::encode_option(&mut option, wire::OPT_ABORT, &[]);
    let _ = stream.write_all(&option);
}

/// `NBD_OPT_GO`; `None` when the server does not know the option (the caller falls back
/// to `NBD_OPT_EXPORT_NAME`).
fn go(stream: &mut Stream, export_name: &str) -> Result<Option<NbdExport>, String> {
    let mut data = Vec::new();
    InfoRequest {
        export_name: export_name.to_string(),
        info_types: vec![wire::INFO_BLOCK_SIZE],
    }
    .encode(&mut data);
    let mut option = Vec::new();
    wire::encode_option(&mut option, wire::OPT_GO, &data);
    write_all(stream, &option)?;
    let mut export: Option<(u64, u16)> = None;
    let mut block_size: Option<(u32, u32, u32)> = None;
    loop {
        let (reply_type, data) = read_reply(stream, wire::OPT_GO)?;
        match reply_type {
            wire::REP_INFO => match InfoReply::decode(&data).map_err(wire_error)? {
                InfoReply::Export {
                    size_bytes,
                    transmission_flags,
                } => export = Some((size_bytes, transmission_flags)),
                InfoReply::BlockSize {
                    minimum_bytes,
                    preferred_bytes,
                    maximum_payload_bytes,
                } => {
                    block_size = Some(check_block_size_constraints(
                        minimum_bytes,
                        preferred_bytes,
                        maximum_payload_bytes,
                    )?)
                }
                InfoReply::Name(_) | InfoReply::Description(_) | InfoReply::Unknown { .. } => {}
            },
            wire::REP_ACK => {
                let (size_bytes, transmission_flags) = export.ok_or_else(|| {
                    "handshake: NBD_REP_ACK to NBD_OPT_GO without the mandatory NBD_INFO_EXPORT"
                        .to_string()
                })?;
                return Ok(Some(build_export(
                    size_bytes,
                    transmission_flags,
                    block_size,
                    true,
                )?));
            }
            wire::REP_ERR_UNSUP => return Ok(None),
            reply_type if reply_type & wire::REP_FLAG_ERROR != 0 => {
                abort(stream);
                return Err(go_refusal(reply_type, export_name, &data));
            }
            other => {
                return Err(format!(
                    "handshake: reply type {other} to NBD_OPT_GO, which has NBD_REP_INFO, NBD_REP_ACK or an error"
                ))
            }
        }
    }
}

fn go_refusal(reply_type: u32, export_name: &str, data: &[u8]) -> String {
    let what = match reply_type {
        wire::REP_ERR_UNKNOWN => format!("export {export_name:?} does not exist on the server"),
        wire::REP_ERR_TLS_REQD => {
            "the server requires TLS: use an nbds:// (or nbds+unix://) URI".to_string()
        }
        wire::REP_ERR_POLICY => format!("the server's policy refuses export {export_name:?}"),
        wire::REP_ERR_SHUTDOWN => "the server is shutting down".to_string(),
        other => format!(
            "the server refused export {export_name:?} with {}",
            reply_error_name(other)
        ),
    };
    format!("handshake: {what}{}", error_text(data))
}

/// The specification's bounds on `NBD_INFO_BLOCK_SIZE` ("Size constraints").
fn check_block_size_constraints(
    minimum_bytes: u32,
    preferred_bytes: u32,
    maximum_payload_bytes: u32,
) -> Result<(u32, u32, u32), String> {
    let bad = |rule: &str| {
        format!(
            "handshake: the server's NBD_INFO_BLOCK_SIZE (minimum {minimum_bytes}, preferred {preferred_bytes}, maximum payload {maximum_payload_bytes}) breaks the rule: {rule}"
        )
    };
    if !minimum_bytes.is_power_of_two() || minimum_bytes > 1 << 16 {
        return Err(bad("the minimum is a power of two up to 65536"));
    }
    if !preferred_bytes.is_power_of_two() || preferred_bytes < minimum_bytes.max(512) {
        return Err(bad(
            "the preferred size is a power of two at least the minimum and 512",
        ));
    }
    if maximum_payload_bytes < preferred_bytes {
        return Err(bad("the maximum payload is at least the preferred size"));
    }
    Ok((minimum_bytes, preferred_bytes, maximum_payload_bytes))
}

fn build_export(
    size_bytes: u64,
    transmission_flags: u16,
    block_size: Option<(u32, u32, u32)>,
    entered_with_go: bool,
) -> Result<NbdExport, String> {
    if transmission_flags & wire::TRANSMISSION_FLAG_HAS_FLAGS == 0 {
        return Err(format!(
            "handshake: transmission flags {transmission_flags:#x} lack NBD_FLAG_HAS_FLAGS, which MUST always be set"
        ));
    }
    let (minimum_block_bytes, preferred_block_bytes, maximum_payload_bytes) =
        block_size.unwrap_or((1, 4096, wire::MAX_PAYLOAD_BYTES));
    Ok(NbdExport {
        size_bytes,
        transmission_flags,
        minimum_block_bytes,
        preferred_block_bytes,
        maximum_payload_bytes,
        structured_replies: false,
        entered_with_go,
    })
}

/// `NBD_OPT_EXPORT_NAME`, for servers that do not know `NBD_OPT_GO`: size, flags and,
/// unless `NO_ZEROES` was agreed, 124 bytes of zeroes; a server that cannot serve the
/// export closes the connection.
fn export_name_fallback(
    stream: &mut Stream,
    export_name: &str,
    no_zeroes: bool,
) -> Result<NbdExport, String> {
    let mut option = Vec::new();
    wire::encode_option(&mut option, wire::OPT_EXPORT_NAME, export_name.as_bytes());
    write_all(stream, &option)?;
    let mut answer = vec![
        0u8;
        10 + if no_zeroes {
            0
        } else {
            wire::EXPORT_NAME_PADDING_BYTES
        }
    ];
    stream.read_exact(&mut answer).map_err(|error| {
        format!(
            "handshake: the server closed the connection after NBD_OPT_EXPORT_NAME {export_name:?} (no such export?): {error}"
        )
    })?;
    let size_bytes = u64::from_be_bytes(answer[0..8].try_into().expect("8 bytes"));
    let transmission_flags = u16::from_be_bytes(answer[8..10].try_into().expect("2 bytes"));
    build_export(size_bytes, transmission_flags, None, false)
}
