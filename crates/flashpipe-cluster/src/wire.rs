//! The raw flash interface on the cluster's wire, version 1 (docs/cluster-wire.md spells
//! every byte): a 16-byte header (magic `FPCL`, version, kind, flags, hops, body length,
//! CRC-32C over header and body), then the body of one of five messages: ReadPage,
//! WritePage, EraseBlock, Ack and Credit. Little endian throughout.
//!
//! Decoding bounds every field before it allocates: page data and spare bytes by the
//! [`WireLimits`] taken from the device's configuration, the body by the largest frame
//! those limits allow, every status value by its type. Each way a frame can be bad has its
//! own [`WireError`]; nothing a peer sends makes the decoder panic.

use flashpipe_flash::{CommandKind, FlashAddress, FlashCommand, FlashConfig, FlashRequest};

mod status;

use status::{decode_status, status_fields};
pub use status::{Status, StatusCode};

/// The four bytes every frame starts with.
pub const MAGIC: [u8; 4] = *b"FPCL";
/// The one version this code speaks.
pub const VERSION: u8 = 1;
/// Bytes of the fixed header.
pub const HEADER_BYTES: usize = 16;

/// A virtual channel: one per datapath of the paper's router.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Channel {
    /// Reads and erases (requests without data).
    Request,
    /// Writes (requests with a page of data).
    WriteData,
    /// Acks of reads (with a page of data).
    ReadData,
    /// Acks without data.
    Ack,
}

impl Channel {
    /// Every channel, in code order.
    pub const ALL: [Channel; 4] = [
        Channel::Request,
        Channel::WriteData,
        Channel::ReadData,
        Channel::Ack,
    ];

    /// The channel's code on the wire.
    pub fn code(self) -> u8 {
        match self {
            Channel::Request => 0,
            Channel::WriteData => 1,
            Channel::ReadData => 2,
            Channel::Ack => 3,
        }
    }

    /// The channel of a code, if any.
    pub fn from_code(code: u8) -> Option<Channel> {
        Channel::ALL.get(usize::from(code)).copied()
    }

    /// The datapath a message travels on (credits travel outside the channels).
    pub fn of(message: &Message) -> Option<Channel> {
        match message {
            Message::Request(request) => Some(match request.command {
                FlashCommand::WritePage { .. } => Channel::WriteData,
                _ => Channel::Request,
            }),
            Message::Ack(ack) => Some(if ack.payload.is_some() {
                Channel::ReadData
            } else {
                Channel::Ack
            }),
            Message::Credit(_) => None,
        }
    }
}

/// A read's page: data and the host's spare bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PagePayload {
    /// Page data.
    pub data: Vec<u8>,
    /// Spare bytes.
    pub spare: Vec<u8>,
}

/// Ack(tag, host, status), with a read's data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireAck {
    /// The tag of the request, as the receiver of this ack knows it.
    pub tag: u64,
    /// The request's host.
    pub host: u32,
    /// What kind of command it answers.
    pub kind: CommandKind,
    /// The outcome.
    pub status: Status,
    /// A read's page (only acks of reads carry one).
    pub payload: Option<PagePayload>,
}

/// Credit(channel, count): the receiver gives back `count` tokens of a virtual channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Credit {
    /// The channel.
    pub channel: Channel,
    /// Tokens given back.
    pub count: u32,
}

/// One message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// ReadPage, WritePage or EraseBlock.
    Request(FlashRequest),
    /// An ack.
    Ack(WireAck),
    /// Tokens given back.
    Credit(Credit),
}

/// A frame: a message and the hops it has made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Links crossed so far (a request) or from the host to the device (an ack).
    pub hops: u8,
    /// The message.
    pub message: Message,
}

impl Frame {
    /// A device's ack as the frame a node's router takes from its device port (the
    /// controller tag; hops filled in by the router on the way back).
    pub fn from_device_ack(ack: flashpipe_flash::Ack) -> Frame {
        let payload = ack.data.map(|data| PagePayload {
            data,
            spare: ack.spare.unwrap_or_default(),
        });
        Frame::from(WireAck {
            tag: ack.tag,
            host: ack.host,
            kind: ack.kind,
            status: Status::Flash(ack.status),
            payload,
        })
    }
}

impl From<FlashRequest> for Frame {
    /// A request as it leaves its host: no hop made yet.
    fn from(request: FlashRequest) -> Frame {
        Frame {
            hops: 0,
            message: Message::Request(request),
        }
    }
}

impl From<WireAck> for Frame {
    /// An ack as it leaves its device: no hop made yet.
    fn from(ack: WireAck) -> Frame {
        Frame {
            hops: 0,
            message: Message::Ack(ack),
        }
    }
}

/// Bytes of a ReadPage, WritePage or EraseBlock body before a write's lengths.
pub const REQUEST_BODY_BYTES: usize = 32;
/// Bytes of an Ack body before a read's lengths.
pub const ACK_BODY_BYTES: usize = 36;
/// Bytes of a Credit body.
pub const CREDIT_BODY_BYTES: usize = 8;

/// The bounds a decoder holds every frame to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireLimits {
    /// Most page data bytes.
    pub max_page_bytes: u32,
    /// Most spare bytes.
    pub max_spare_bytes: u32,
}

impl WireLimits {
    /// The limits of a flash configuration: its page and spare sizes.
    pub fn of_config(config: &FlashConfig) -> WireLimits {
        WireLimits {
            max_page_bytes: config.geometry.page_data_bytes,
            max_spare_bytes: config.geometry.page_spare_bytes,
        }
    }

    /// The longest body these limits allow (a WritePage or a read's Ack with a full page).
    pub fn max_body_bytes(&self) -> usize {
        ACK_BODY_BYTES.max(REQUEST_BODY_BYTES)
            + 8
            + self.max_page_bytes as usize
            + self.max_spare_bytes as usize
    }

    /// The longest frame these limits allow.
    pub fn max_frame_bytes(&self) -> usize {
        HEADER_BYTES + self.max_body_bytes()
    }
}

/// Why a frame could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// Fewer bytes than the frame needs; read more and try again.
    #[error("frame truncated: {needed} bytes needed, {available} available")]
    Truncated {
        /// Bytes the frame needs.
        needed: usize,
        /// Bytes there are.
        available: usize,
    },
    /// Not a cluster frame.
    #[error("bad magic: the peer does not speak the cluster protocol")]
    BadMagic,
    /// A version this code does not speak.
    #[error("unsupported wire version {version} (this node speaks {VERSION}); run the same release on every node")]
    BadVersion {
        /// The version sent.
        version: u8,
    },
    /// A kind this version does not define.
    #[error("unknown frame kind {kind}")]
    UnknownKind {
        /// The kind sent.
        kind: u8,
    },
    /// Flags this kind does not define.
    #[error("flags {flags:#04x} are not defined for frame kind {kind}")]
    BadFlags {
        /// The kind.
        kind: u8,
        /// The flags sent.
        flags: u8,
    },
    /// A body longer than the limits allow.
    #[error("frame body of {length} bytes is over the limit of {limit}")]
    Oversize {
        /// The length announced.
        length: u64,
        /// The limit.
        limit: u64,
    },
    /// The checksum does not match: the frame was damaged.
    #[error("checksum mismatch: frame says {sent:#010x}, bytes give {computed:#010x}")]
    BadCrc {
        /// The checksum in the header.
        sent: u32,
        /// The checksum of the bytes.
        computed: u32,
    },
    /// The body's length does not fit its kind.
    #[error("frame kind {kind} with a body of {length} bytes; its fields say {expected}")]
    BadLength {
        /// The kind.
        kind: u8,
        /// The body's length.
        length: usize,
        /// What the kind and its lengths add up to.
        expected: usize,
    },
    /// A field past its bound.
    #[error("{field} of {value} is over the limit of {limit}")]
    FieldTooLarge {
        /// The field.
        field: &'static str,
        /// Its value.
        value: u64,
        /// The limit.
        limit: u64,
    },
    /// A field holds a code this version does not define.
    #[error("{field} holds unknown code {value}")]
    UnknownCode {
        /// The field.
        field: &'static str,
        /// Its value.
        value: u64,
    },
    /// A reserved or unused field is not zero.
    #[error("{field} must be zero, holds {value}")]
    NotZero {
        /// The field.
        field: &'static str,
        /// Its value.
        value: u64,
    },
}

/// Why a message could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// A page or spare longer than the limits allow.
    #[error("{field} of {length} bytes is over the limit of {limit}")]
    TooLong {
        /// `data` or `spare`.
        field: &'static str,
        /// Its length.
        length: usize,
        /// The limit.
        limit: u32,
    },
    /// A status naming a field the wire has no code for.
    #[error("status names field {field}, which the wire cannot carry")]
    UnknownField {
        /// The field.
        field: &'static str,
    },
    /// A payload on an ack that is not a read's.
    #[error("only acks of reads carry a page")]
    PayloadOnNonRead,
    /// A copy-back request or refusal: version 1 of the wire has no frame for it.
    #[error("the cluster wire does not carry copy-back; read and program the page instead")]
    CopyBackNotCarried,
}

fn command_code(kind: CommandKind) -> u8 {
    match kind {
        CommandKind::Read => 1,
        CommandKind::Write => 2,
        CommandKind::Erase => 3,
    }
}

fn command_of_code(code: u8) -> Option<CommandKind> {
    match code {
        1 => Some(CommandKind::Read),
        2 => Some(CommandKind::Write),
        3 => Some(CommandKind::Erase),
        _ => None,
    }
}

fn check_length(field: &'static str, bytes: &[u8], limit: u32) -> Result<(), EncodeError> {
    if bytes.len() > limit as usize {
        return Err(EncodeError::TooLong {
            field,
            length: bytes.len(),
            limit,
        });
    }
    Ok(())
}

fn put_u32(out: &mut Vec<u8>, value: u32) {
    out.extend_from_slice(&value.to_le_bytes());
}

fn put_address(out: &mut Vec<u8>, tag: u64, host: u32, address: FlashAddress) {
    out.extend_from_slice(&tag.to_le_bytes());
    for value in [
        host,
        address.device,
        address.bus,
        address.chip,
        address.block,
        address.page,
    ] {
        put_u32(out, value);
    }
}

/// Frame kinds (header byte 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum FrameKind {
    /// ReadPage.
    ReadPage = 1,
    /// WritePage.
    WritePage,
    /// EraseBlock.
    EraseBlock,
    /// Ack.
    Ack,
    /// Credit.
    Credit,
}

impl FrameKind {
    /// The kind of a code, if any.
    pub fn from_code(code: u8) -> Option<FrameKind> {
        [
            FrameKind::ReadPage,
            FrameKind::WritePage,
            FrameKind::EraseBlock,
            FrameKind::Ack,
            FrameKind::Credit,
        ]
        .into_iter()
        .find(|kind| *kind as u8 == code)
    }
}

/// Encodes one frame, held to `limits`.
pub fn encode(frame: &Frame, limits: WireLimits) -> Result<Vec<u8>, EncodeError> {
    let mut body = Vec::new();
    let mut flags = 0u8;
    let frame_kind = match &frame.message {
        Message::Request(request) => {
            put_address(
                &mut body,
                request.tag,
                request.host,
                request.command.address(),
            );
            match &request.command {
                FlashCommand::ReadPage { .. } => FrameKind::ReadPage,
                FlashCommand::EraseBlock { .. } => FrameKind::EraseBlock,
                FlashCommand::WritePage { data, spare, .. } => {
                    check_length("data", data, limits.max_page_bytes)?;
                    check_length("spare", spare, limits.max_spare_bytes)?;
                    put_u32(&mut body, data.len() as u32);
                    put_u32(&mut body, spare.len() as u32);
                    body.extend_from_slice(data);
                    body.extend_from_slice(spare);
                    FrameKind::WritePage
                }
                FlashCommand::CopyBack { .. } => return Err(EncodeError::CopyBackNotCarried),
            }
        }
        Message::Ack(ack) => {
            let (status, field, a, b) = status_fields(&ack.status)?;
            body.extend_from_slice(&ack.tag.to_le_bytes());
            put_u32(&mut body, ack.host);
            body.extend_from_slice(&[command_code(ack.kind), 0, 0, 0]);
            body.extend_from_slice(&(status as u16).to_le_bytes());
            body.extend_from_slice(&field.to_le_bytes());
            body.extend_from_slice(&a.to_le_bytes());
            body.extend_from_slice(&b.to_le_bytes());
            if let Some(payload) = &ack.payload {
                if ack.kind != CommandKind::Read {
                    return Err(EncodeError::PayloadOnNonRead);
                }
                check_length("data", &payload.data, limits.max_page_bytes)?;
                check_length("spare", &payload.spare, limits.max_spare_bytes)?;
                flags |= FLAG_PAYLOAD;
                put_u32(&mut body, payload.data.len() as u32);
                put_u32(&mut body, payload.spare.len() as u32);
                body.extend_from_slice(&payload.data);
                body.extend_from_slice(&payload.spare);
            }
            FrameKind::Ack
        }
        Message::Credit(credit) => {
            body.extend_from_slice(&[credit.channel.code(), 0, 0, 0]);
            put_u32(&mut body, credit.count);
            FrameKind::Credit
        }
    };
    debug_assert!(body.len() <= limits.max_body_bytes());
    let mut out = Vec::with_capacity(HEADER_BYTES + body.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&[VERSION, frame_kind as u8, flags, frame.hops]);
    put_u32(&mut out, body.len() as u32);
    let crc = crc32c::crc32c_append(crc32c::crc32c(&out), &body);
    put_u32(&mut out, crc);
    out.extend_from_slice(&body);
    Ok(out)
}

/// A cursor over a body whose length was checked.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, count: usize) -> &[u8] {
        let slice = &self.bytes[self.at..self.at + count];
        self.at += count;
        slice
    }

    /// Three reserved bytes, which must be zero.
    fn reserved(&mut self, field: &'static str) -> Result<(), WireError> {
        let bytes = self.take(3);
        zero(
            field,
            u64::from_le_bytes([bytes[0], bytes[1], bytes[2], 0, 0, 0, 0, 0]),
        )
    }

    fn u8(&mut self) -> u8 {
        self.take(1)[0]
    }

    fn u16(&mut self) -> u16 {
        let mut bytes = [0u8; 2];
        bytes.copy_from_slice(self.take(2));
        u16::from_le_bytes(bytes)
    }

    fn u32(&mut self) -> u32 {
        let mut bytes = [0u8; 4];
        bytes.copy_from_slice(self.take(4));
        u32::from_le_bytes(bytes)
    }

    fn u64(&mut self) -> u64 {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(self.take(8));
        u64::from_le_bytes(bytes)
    }
}

/// Flag bit of an Ack that carries a read's data and spare bytes.
pub const FLAG_PAYLOAD: u8 = 1;

/// The length of the frame whose header starts `bytes`, checked against the limits, so a
/// stream reader knows how much to read before [`decode`].
pub fn frame_length(bytes: &[u8], limits: WireLimits) -> Result<usize, WireError> {
    if bytes.len() < HEADER_BYTES {
        return Err(WireError::Truncated {
            needed: HEADER_BYTES,
            available: bytes.len(),
        });
    }
    if bytes[0..4] != MAGIC {
        return Err(WireError::BadMagic);
    }
    if bytes[4] != VERSION {
        return Err(WireError::BadVersion { version: bytes[4] });
    }
    let frame_kind = bytes[5];
    let Some(kind) = FrameKind::from_code(frame_kind) else {
        return Err(WireError::UnknownKind { kind: frame_kind });
    };
    let allowed_flags = if kind == FrameKind::Ack {
        FLAG_PAYLOAD
    } else {
        0
    };
    if bytes[6] & !allowed_flags != 0 {
        return Err(WireError::BadFlags {
            kind: frame_kind,
            flags: bytes[6],
        });
    }
    let length = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize;
    if length > limits.max_body_bytes() {
        return Err(WireError::Oversize {
            length: length as u64,
            limit: limits.max_body_bytes() as u64,
        });
    }
    Ok(HEADER_BYTES + length)
}

fn expect_length(frame_kind: u8, length: usize, expected: usize) -> Result<(), WireError> {
    if length != expected {
        return Err(WireError::BadLength {
            kind: frame_kind,
            length,
            expected,
        });
    }
    Ok(())
}

pub(crate) fn bounded_u32(field: &'static str, value: u64) -> Result<u32, WireError> {
    u32::try_from(value).map_err(|_| WireError::FieldTooLarge {
        field,
        value,
        limit: u64::from(u32::MAX),
    })
}

pub(crate) fn zero(field: &'static str, value: u64) -> Result<(), WireError> {
    if value != 0 {
        return Err(WireError::NotZero { field, value });
    }
    Ok(())
}

/// Reads a write's or a read ack's lengths and bytes, after checking them against the limits
/// and the body's length.
fn read_page(
    reader: &mut Reader<'_>,
    frame_kind: u8,
    limits: WireLimits,
) -> Result<PagePayload, WireError> {
    let length = reader.bytes.len();
    if length < reader.at + 8 {
        return Err(WireError::BadLength {
            kind: frame_kind,
            length,
            expected: reader.at + 8,
        });
    }
    let data_bytes = reader.u32();
    let spare_bytes = reader.u32();
    for (field, value, limit) in [
        ("data length", data_bytes, limits.max_page_bytes),
        ("spare length", spare_bytes, limits.max_spare_bytes),
    ] {
        if value > limit {
            return Err(WireError::FieldTooLarge {
                field,
                value: u64::from(value),
                limit: u64::from(limit),
            });
        }
    }
    expect_length(
        frame_kind,
        length,
        reader.at + data_bytes as usize + spare_bytes as usize,
    )?;
    let data = reader.take(data_bytes as usize).to_vec();
    let spare = reader.take(spare_bytes as usize).to_vec();
    Ok(PagePayload { data, spare })
}

/// Decodes the frame at the start of `bytes`; returns it and the bytes it took.
pub fn decode(bytes: &[u8], limits: WireLimits) -> Result<(Frame, usize), WireError> {
    let total = frame_length(bytes, limits)?;
    if bytes.len() < total {
        return Err(WireError::Truncated {
            needed: total,
            available: bytes.len(),
        });
    }
    let sent = u32::from_le_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]);
    let computed = crc32c::crc32c_append(crc32c::crc32c(&bytes[..12]), &bytes[HEADER_BYTES..total]);
    if sent != computed {
        return Err(WireError::BadCrc { sent, computed });
    }
    let frame_kind = bytes[5];
    let flags = bytes[6];
    let hops = bytes[7];
    let body = &bytes[HEADER_BYTES..total];
    let mut reader = Reader { bytes: body, at: 0 };
    let kind =
        FrameKind::from_code(frame_kind).ok_or(WireError::UnknownKind { kind: frame_kind })?;
    let message = match kind {
        FrameKind::ReadPage | FrameKind::WritePage | FrameKind::EraseBlock => {
            if kind == FrameKind::WritePage {
                if body.len() < REQUEST_BODY_BYTES + 8 {
                    return Err(WireError::BadLength {
                        kind: frame_kind,
                        length: body.len(),
                        expected: REQUEST_BODY_BYTES + 8,
                    });
                }
            } else {
                expect_length(frame_kind, body.len(), REQUEST_BODY_BYTES)?;
            }
            let tag = reader.u64();
            let host = reader.u32();
            let address = FlashAddress {
                device: reader.u32(),
                bus: reader.u32(),
                chip: reader.u32(),
                block: reader.u32(),
                page: reader.u32(),
            };
            let command = match kind {
                FrameKind::ReadPage => FlashCommand::ReadPage { address },
                FrameKind::EraseBlock => FlashCommand::EraseBlock { address },
                _ => {
                    let page = read_page(&mut reader, frame_kind, limits)?;
                    FlashCommand::WritePage {
                        address,
                        data: page.data,
                        spare: page.spare,
                    }
                }
            };
            Message::Request(FlashRequest { tag, host, command })
        }
        FrameKind::Ack => {
            let fixed = ACK_BODY_BYTES + if flags & FLAG_PAYLOAD != 0 { 8 } else { 0 };
            if flags & FLAG_PAYLOAD == 0 {
                expect_length(frame_kind, body.len(), fixed)?;
            } else if body.len() < fixed {
                return Err(WireError::BadLength {
                    kind: frame_kind,
                    length: body.len(),
                    expected: fixed,
                });
            }
            let tag = reader.u64();
            let host = reader.u32();
            let command = reader.u8();
            let command_kind = command_of_code(command).ok_or(WireError::UnknownCode {
                field: "command",
                value: u64::from(command),
            })?;
            reader.reserved("ack reserved bytes")?;
            let status_code = reader.u16();
            let field = reader.u16();
            let a = reader.u64();
            let b = reader.u64();
            let status = decode_status(status_code, field, a, b)?;
            let payload = if flags & FLAG_PAYLOAD != 0 {
                if command_kind != CommandKind::Read {
                    return Err(WireError::BadFlags {
                        kind: frame_kind,
                        flags,
                    });
                }
                Some(read_page(&mut reader, frame_kind, limits)?)
            } else {
                None
            };
            Message::Ack(WireAck {
                tag,
                host,
                kind: command_kind,
                status,
                payload,
            })
        }
        FrameKind::Credit => {
            expect_length(frame_kind, body.len(), CREDIT_BODY_BYTES)?;
            let channel_code = reader.u8();
            let channel = Channel::from_code(channel_code).ok_or(WireError::UnknownCode {
                field: "channel",
                value: u64::from(channel_code),
            })?;
            reader.reserved("credit reserved bytes")?;
            let count = reader.u32();
            Message::Credit(Credit { channel, count })
        }
    };
    assert_eq!(reader.at, body.len(), "every body byte is read");
    Ok((Frame { hops, message }, total))
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
