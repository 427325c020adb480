//! The server's side of the fixed newstyle handshake and option haggling.
//!
//! Served: `NBD_OPT_EXPORT_NAME`, `NBD_OPT_ABORT`, `NBD_OPT_LIST`, `NBD_OPT_INFO`,
//! `NBD_OPT_GO`, `NBD_OPT_STRUCTURED_REPLY`, `NBD_OPT_LIST_META_CONTEXT`,
//! `NBD_OPT_SET_META_CONTEXT` (`base:allocation`), and `NBD_OPT_STARTTLS` when TLS is
//! configured ([`StartTls`]; without it `NBD_REP_ERR_UNSUP`). With TLS required
//! (FORCEDTLS), every option but `NBD_OPT_STARTTLS` and `NBD_OPT_ABORT` before TLS is
//! answered `NBD_REP_ERR_TLS_REQD` and `NBD_OPT_EXPORT_NAME` ends the connection.
//! Every other option is answered `NBD_REP_ERR_UNSUP` and haggling goes on.
//! A syntactically bad option is answered `NBD_REP_ERR_INVALID`; a broken option header
//! (wrong magic, data beyond [`MAX_OPTION_DATA_BYTES`]) or more options than the limit
//! ends the connection.

use std::io::{Read, Write};
use std::sync::Arc;

use thiserror::Error;

use super::export::ExportHandle;
use crate::wire::*;

/// Context id given to `base:allocation` by `NBD_OPT_SET_META_CONTEXT`.
pub const BASE_ALLOCATION_CONTEXT_ID: u32 = 1;

/// What the handshake agreed.
#[derive(Debug)]
pub struct Negotiated {
    /// The export chosen.
    pub export: Arc<ExportHandle>,
    /// Structured replies negotiated.
    pub structured_replies: bool,
    /// The `base:allocation` context id, when selected for this export.
    pub base_allocation_context: Option<u32>,
    /// The transmission flags sent.
    pub transmission_flags: u16,
}

/// How a handshake ended without entering transmission.
#[derive(Debug, Error)]
pub enum HandshakeEnd {
    /// The client sent `NBD_OPT_ABORT` (answered) or closed the connection.
    #[error("the client ended the handshake")]
    ClientLeft,
    /// The client broke the protocol; the connection is dropped.
    #[error("handshake refused: {0}")]
    Malformed(#[from] WireError),
    /// `NBD_OPT_EXPORT_NAME` named an unknown export (the specification: terminate).
    #[error("NBD_OPT_EXPORT_NAME asked for unknown export `{name}`")]
    UnknownExport {
        /// The name asked for.
        name: String,
    },
    /// More options than the limit.
    #[error("more than {limit} options in one handshake")]
    TooManyOptions {
        /// The limit.
        limit: usize,
    },
    /// The server is shutting down.
    #[error("the server is shutting down")]
    Shutdown,
    /// `NBD_OPT_EXPORT_NAME` before TLS while TLS is required (the specification:
    /// terminate).
    #[error("NBD_OPT_EXPORT_NAME before NBD_OPT_STARTTLS while TLS is required")]
    TlsRequired,
    /// The TLS upgrade after `NBD_OPT_STARTTLS` failed (a bad certificate, a plaintext
    /// client that went on without TLS).
    #[error("{0}")]
    TlsFailed(String),
}

/// How `NBD_OPT_STARTTLS` is served on a server with TLS.
pub struct StartTls<'a, S> {
    /// FORCEDTLS: options before TLS are refused.
    pub required: bool,
    /// Runs the TLS handshake on the stream and replaces it with the plaintext end.
    pub upgrade: &'a dyn Fn(&mut S) -> Result<(), String>,
}

/// The exports a handshake may choose from; the empty name picks the first.
pub struct ExportTable<'a> {
    /// Exports, in the order given to the server.
    pub exports: &'a [Arc<ExportHandle>],
}

impl ExportTable<'_> {
    fn find(&self, name: &str) -> Option<&Arc<ExportHandle>> {
        if name.is_empty() {
            return self.exports.first();
        }
        self.exports.iter().find(|export| export.name == name)
    }
}

/// The transmission flags of an export, given what was negotiated.
pub fn transmission_flags(export: &ExportHandle, structured_replies: bool) -> u16 {
    let mut flags = TRANSMISSION_FLAG_HAS_FLAGS
        | TRANSMISSION_FLAG_SEND_FLUSH
        | TRANSMISSION_FLAG_SEND_FUA
        | TRANSMISSION_FLAG_SEND_TRIM
        | TRANSMISSION_FLAG_SEND_WRITE_ZEROES
        | TRANSMISSION_FLAG_SEND_FAST_ZERO
        | TRANSMISSION_FLAG_SEND_CACHE
        | TRANSMISSION_FLAG_CAN_MULTI_CONN;
    if structured_replies {
        flags |= TRANSMISSION_FLAG_SEND_DF;
    }
    if export.read_only {
        flags |= TRANSMISSION_FLAG_READ_ONLY;
    }
    flags
}

struct Haggling<'a, S> {
    stream: &'a mut S,
    table: ExportTable<'a>,
    structured_replies: bool,
    /// (export name, context id) of the last `NBD_OPT_SET_META_CONTEXT`.
    meta_context: Option<(String, u32)>,
    no_zeroes: bool,
    start_tls: Option<StartTls<'a, S>>,
    tls_active: bool,
}

/// Runs the handshake on `stream` until transmission begins or the handshake ends.
pub fn negotiate<S: Read + Write>(
    stream: &mut S,
    table: ExportTable<'_>,
    option_limit: usize,
    shutting_down: &dyn Fn() -> bool,
    start_tls: Option<StartTls<'_, S>>,
) -> Result<Negotiated, HandshakeEnd> {
    let handshake_flags = HANDSHAKE_FLAG_FIXED_NEWSTYLE | HANDSHAKE_FLAG_NO_ZEROES;
    let mut greeting = Vec::with_capacity(SERVER_GREETING_BYTES);
    encode_server_greeting(&mut greeting, handshake_flags);
    write_all(stream, &greeting)?;
    let mut client_flag_bytes = [0u8; 4];
    read_or_left(stream, &mut client_flag_bytes, "client flags")?;
    let client_flags = u32::from_be_bytes(client_flag_bytes);
    check_client_flags(client_flags, handshake_flags)?;
    let mut haggling = Haggling {
        stream,
        table,
        structured_replies: false,
        meta_context: None,
        no_zeroes: client_flags & CLIENT_FLAG_NO_ZEROES != 0,
        start_tls,
        tls_active: false,
    };
    for _ in 0..option_limit {
        let (header, data) = match read_option(haggling.stream) {
            Ok(option) => option,
            Err(WireError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::UnexpectedEof =>
            {
                return Err(HandshakeEnd::ClientLeft)
            }
            Err(error) => return Err(error.into()),
        };
        if shutting_down() && header.option != OPT_ABORT {
            haggling.reply_error(
                header.option,
                REP_ERR_SHUTDOWN,
                "the server is shutting down",
            )?;
            return Err(HandshakeEnd::Shutdown);
        }
        if let Some(negotiated) = haggling.serve_option(header.option, &data)? {
            return Ok(negotiated);
        }
    }
    Err(HandshakeEnd::TooManyOptions {
        limit: option_limit,
    })
}

fn write_all(stream: &mut impl Write, bytes: &[u8]) -> Result<(), HandshakeEnd> {
    stream
        .write_all(bytes)
        .and_then(|()| stream.flush())
        .map_err(|_| HandshakeEnd::ClientLeft)
}

fn read_or_left(
    stream: &mut impl Read,
    buffer: &mut [u8],
    message: &'static str,
) -> Result<(), HandshakeEnd> {
    read_exact_or(stream, buffer, message).map_err(|_| HandshakeEnd::ClientLeft)
}

impl<S: Read + Write> Haggling<'_, S> {
    /// Serves one option; `Some` when transmission begins.
    fn serve_option(
        &mut self,
        option: u32,
        data: &[u8],
    ) -> Result<Option<Negotiated>, HandshakeEnd> {
        if option == OPT_STARTTLS {
            return self.serve_start_tls(data).map(|()| None);
        }
        let tls_required_now =
            !self.tls_active && self.start_tls.as_ref().is_some_and(|start| start.required);
        if tls_required_now && option != OPT_ABORT {
            if option == OPT_EXPORT_NAME {
                return Err(HandshakeEnd::TlsRequired);
            }
            return self
                .reply_error(
                    option,
                    REP_ERR_TLS_REQD,
                    "TLS is required: send NBD_OPT_STARTTLS first",
                )
                .map(|()| None);
        }
        match option {
            OPT_EXPORT_NAME => self.export_name(data).map(Some),
            OPT_ABORT => {
                self.reply(option, REP_ACK, &[])?;
                Err(HandshakeEnd::ClientLeft)
            }
            OPT_LIST => self.list(data).map(|()| None),
            OPT_INFO | OPT_GO => self.info_or_go(option, data),
            OPT_STRUCTURED_REPLY => {
                if !data.is_empty() {
                    return self
                        .reply_error(
                            option,
                            REP_ERR_INVALID,
                            "NBD_OPT_STRUCTURED_REPLY takes no data",
                        )
                        .map(|()| None);
                }
                self.structured_replies = true;
                self.reply(option, REP_ACK, &[]).map(|()| None)
            }
            OPT_LIST_META_CONTEXT | OPT_SET_META_CONTEXT => {
                self.meta_context(option, data).map(|()| None)
            }
            _ => self
                .reply_error(
                    option,
                    REP_ERR_UNSUP,
                    &format!("option {option} ({}) is not supported", option_name(option)),
                )
                .map(|()| None),
        }
    }

    /// `NBD_OPT_STARTTLS`: acknowledged once when TLS is configured, then the stream is
    /// upgraded; state negotiated before TLS is forgotten.
    fn serve_start_tls(&mut self, data: &[u8]) -> Result<(), HandshakeEnd> {
        if self.start_tls.is_none() {
            return self.reply_error(
                OPT_STARTTLS,
                REP_ERR_UNSUP,
                "TLS is not configured on this server",
            );
        }
        if !data.is_empty() {
            return self.reply_error(
                OPT_STARTTLS,
                REP_ERR_INVALID,
                "NBD_OPT_STARTTLS takes no data",
            );
        }
        if self.tls_active {
            return self.reply_error(OPT_STARTTLS, REP_ERR_INVALID, "TLS is already active");
        }
        self.reply(OPT_STARTTLS, REP_ACK, &[])?;
        let Some(start_tls) = &self.start_tls else {
            return Err(HandshakeEnd::TlsFailed("TLS is not configured".to_string()));
        };
        (start_tls.upgrade)(self.stream).map_err(HandshakeEnd::TlsFailed)?;
        self.tls_active = true;
        self.structured_replies = false;
        self.meta_context = None;
        Ok(())
    }

    fn reply(&mut self, option: u32, reply_type: u32, data: &[u8]) -> Result<(), HandshakeEnd> {
        let mut bytes = Vec::with_capacity(OPTION_REPLY_HEADER_BYTES + data.len());
        encode_option_reply(&mut bytes, option, reply_type, data);
        write_all(self.stream, &bytes)
    }

    fn reply_error(
        &mut self,
        option: u32,
        reply_type: u32,
        message: &str,
    ) -> Result<(), HandshakeEnd> {
        let message = truncate_to_char_boundary(message, MAX_STRING_BYTES);
        self.reply(option, reply_type, message.as_bytes())
    }

    fn export_name(&mut self, data: &[u8]) -> Result<Negotiated, HandshakeEnd> {
        let name = decode_string(data, "NBD_OPT_EXPORT_NAME name")?;
        let Some(export) = self.table.find(&name).cloned() else {
            return Err(HandshakeEnd::UnknownExport { name });
        };
        let flags = transmission_flags(&export, self.structured_replies);
        let mut bytes = Vec::new();
        encode_export_name_reply(&mut bytes, export.size_bytes, flags, self.no_zeroes);
        write_all(self.stream, &bytes)?;
        Ok(self.negotiated(export, flags))
    }

    fn negotiated(&self, export: Arc<ExportHandle>, transmission_flags: u16) -> Negotiated {
        let base_allocation_context = match &self.meta_context {
            Some((name, context_id))
                if self
                    .table
                    .find(name)
                    .is_some_and(|chosen| Arc::ptr_eq(chosen, &export)) =>
            {
                Some(*context_id)
            }
            _ => None,
        };
        Negotiated {
            export,
            structured_replies: self.structured_replies,
            base_allocation_context,
            transmission_flags,
        }
    }

    fn list(&mut self, data: &[u8]) -> Result<(), HandshakeEnd> {
        if !data.is_empty() {
            return self.reply_error(OPT_LIST, REP_ERR_INVALID, "NBD_OPT_LIST takes no data");
        }
        let exports: Vec<Arc<ExportHandle>> = self.table.exports.to_vec();
        for export in exports {
            let mut entry = Vec::new();
            encode_server_entry(&mut entry, &export.name, &export.description);
            self.reply(OPT_LIST, REP_SERVER, &entry)?;
        }
        self.reply(OPT_LIST, REP_ACK, &[])
    }

    fn info_or_go(&mut self, option: u32, data: &[u8]) -> Result<Option<Negotiated>, HandshakeEnd> {
        let request = match InfoRequest::decode(data) {
            Ok(request) => request,
            Err(error) => {
                self.reply_error(option, REP_ERR_INVALID, &error.to_string())?;
                return Ok(None);
            }
        };
        let Some(export) = self.table.find(&request.export_name).cloned() else {
            self.reply_error(
                option,
                REP_ERR_UNKNOWN,
                &format!("no export named `{}`", request.export_name),
            )?;
            return Ok(None);
        };
        let flags = transmission_flags(&export, self.structured_replies);
        let mut items = vec![
            InfoReply::Export {
                size_bytes: export.size_bytes,
                transmission_flags: flags,
            },
            InfoReply::BlockSize {
                minimum_bytes: export.block_size_bytes,
                preferred_bytes: preferred_block_size_bytes(&export),
                maximum_payload_bytes: MAX_PAYLOAD_BYTES,
            },
        ];
        if request.info_types.contains(&INFO_NAME) {
            items.push(InfoReply::Name(export.name.clone()));
        }
        if request.info_types.contains(&INFO_DESCRIPTION) && !export.description.is_empty() {
            items.push(InfoReply::Description(export.description.clone()));
        }
        for item in items {
            let mut bytes = Vec::new();
            item.encode(&mut bytes);
            self.reply(option, REP_INFO, &bytes)?;
        }
        self.reply(option, REP_ACK, &[])?;
        if option == OPT_GO {
            return Ok(Some(self.negotiated(export, flags)));
        }
        Ok(None)
    }

    fn meta_context(&mut self, option: u32, data: &[u8]) -> Result<(), HandshakeEnd> {
        let setting = option == OPT_SET_META_CONTEXT;
        if setting {
            self.meta_context = None;
            if !self.structured_replies {
                return self.reply_error(
                    option,
                    REP_ERR_INVALID,
                    "NBD_OPT_SET_META_CONTEXT needs structured replies first",
                );
            }
        }
        let request = match MetaContextRequest::decode(data) {
            Ok(request) => request,
            Err(error) => return self.reply_error(option, REP_ERR_INVALID, &error.to_string()),
        };
        if self.table.find(&request.export_name).is_none() {
            return self.reply_error(
                option,
                REP_ERR_UNKNOWN,
                &format!("no export named `{}`", request.export_name),
            );
        }
        if let Some(query) = request.queries.iter().find(|query| !query.contains(':')) {
            return self.reply_error(
                option,
                REP_ERR_INVALID,
                &format!("metadata context query `{query}` has no namespace"),
            );
        }
        let matches_base_allocation = |query: &String| {
            query == META_CONTEXT_BASE_ALLOCATION || (!setting && query == "base:")
        };
        let selected = if request.queries.is_empty() {
            !setting
        } else {
            request.queries.iter().any(matches_base_allocation)
        };
        if selected {
            let context_id = if setting {
                BASE_ALLOCATION_CONTEXT_ID
            } else {
                0
            };
            let mut bytes = Vec::new();
            encode_meta_context_reply(&mut bytes, context_id, META_CONTEXT_BASE_ALLOCATION);
            self.reply(option, REP_META_CONTEXT, &bytes)?;
            if setting {
                self.meta_context = Some((request.export_name.clone(), context_id));
            }
        }
        self.reply(option, REP_ACK, &[])
    }
}

/// The preferred block size advertised: the device's preferred request size, at least
/// 4 KiB and the minimum block, and a power of two (`doc/proto.md`, block size
/// constraints); a size that is not one is rounded up.
fn preferred_block_size_bytes(export: &ExportHandle) -> u32 {
    export
        .preferred_block_size_bytes
        .max(export.block_size_bytes)
        .max(4096)
        .checked_next_power_of_two()
        .unwrap_or(1 << 31)
}
