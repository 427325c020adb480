//! Frames to bytes and back (docs/protocol.md): the 24-byte header, then each kind's
//! body. Decoding checks every field against its limit and never panics.

use flashpipe_api::{
    Command, CommandKind, CopyMethod, CopyReport, FileId, FileStat, FsStats, Reply,
};

use crate::attributes::{
    decode_set_attributes, decode_stat_attributes, encode_set_attributes, encode_stat_attributes,
    has_attributes,
};
use crate::error::{DecodeError, ErrorCode, RemoteError};
use crate::frame::{
    CancelOutcome, CheckSummary, DataPayload, FileData, Frame, FrameKind, Request, Response,
    RingsOpened, SharedWindow, WireCommand, WireReply, WriteGrant, WritePayload,
};
use crate::handshake;
use crate::kernel_run::{
    decode_kernel_file, decode_kernel_summary, decode_run_kernel, encode_kernel_file,
    encode_kernel_summary, encode_run_kernel,
};
use crate::region;
use crate::wire::{Reader, Writer};
use crate::{
    RequestId, FRAME_VERSION, HEADER_BYTES, MAGIC, MAX_BODY_BYTES, MAX_LIST_ENTRIES,
    MAX_NAME_BYTES, MAX_READ_FILES_COUNT, MAX_RELEASE_HANDLES, MAX_TEXT_BYTES,
};

/// A decoded frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// The frame's kind.
    pub kind: FrameKind,
    /// The frame's request id.
    pub request_id: RequestId,
    /// Bytes of body that follow.
    pub body_length_bytes: u32,
}

/// The 24 header bytes of a frame.
pub fn encode_header(
    kind: FrameKind,
    request_id: RequestId,
    body_length_bytes: u32,
) -> [u8; HEADER_BYTES] {
    let mut header = [0u8; HEADER_BYTES];
    header[0..4].copy_from_slice(&MAGIC);
    header[4..6].copy_from_slice(&FRAME_VERSION.to_le_bytes());
    header[6..8].copy_from_slice(&(kind as u16).to_le_bytes());
    header[8..16].copy_from_slice(&request_id.to_le_bytes());
    header[16..20].copy_from_slice(&body_length_bytes.to_le_bytes());
    header
}

/// Decodes a header, refusing a body longer than `max_body_bytes` (at most
/// [`MAX_BODY_BYTES`]).
pub fn decode_header(
    bytes: &[u8; HEADER_BYTES],
    max_body_bytes: u32,
) -> Result<Header, DecodeError> {
    let mut reader = Reader::new(bytes);
    let magic = [
        reader.u8("magic")?,
        reader.u8("magic")?,
        reader.u8("magic")?,
        reader.u8("magic")?,
    ];
    if magic != MAGIC {
        return Err(DecodeError::BadMagic { found: magic });
    }
    let version = reader.u16("version")?;
    if version != FRAME_VERSION {
        return Err(DecodeError::UnsupportedVersion {
            found: version,
            supported: FRAME_VERSION,
        });
    }
    let kind_value = reader.u16("kind")?;
    let kind =
        FrameKind::from_wire(kind_value).ok_or(DecodeError::UnknownKind { kind: kind_value })?;
    let request_id = reader.u64("request_id")?;
    let body_length_bytes = reader.u32("body_length")?;
    let limit = max_body_bytes.min(MAX_BODY_BYTES);
    if body_length_bytes > limit {
        return Err(DecodeError::BodyTooLarge {
            length_bytes: u64::from(body_length_bytes),
            limit_bytes: u64::from(limit),
        });
    }
    let flags = reader.u32("flags")?;
    if flags != 0 {
        return Err(DecodeError::NonZeroFlags { flags });
    }
    check_request_id(kind, request_id)?;
    Ok(Header {
        kind,
        request_id,
        body_length_bytes,
    })
}

fn check_request_id(kind: FrameKind, request_id: RequestId) -> Result<(), DecodeError> {
    let connection_frame = matches!(
        kind,
        FrameKind::Hello | FrameKind::Welcome | FrameKind::Release
    );
    if connection_frame && request_id != 0 {
        return Err(DecodeError::BadRequestId {
            kind: kind.name(),
            request_id,
            rule: "hello, welcome and release frames carry id 0",
        });
    }
    if !connection_frame && kind != FrameKind::Error && request_id == 0 {
        return Err(DecodeError::BadRequestId {
            kind: kind.name(),
            request_id,
            rule: "requests and their answers carry a non-zero id",
        });
    }
    Ok(())
}

/// Decodes a frame's body under its (already decoded) header.
pub fn decode_body(header: &Header, body: &[u8]) -> Result<Frame, DecodeError> {
    let mut reader = Reader::new(body);
    let request_id = header.request_id;
    let frame = match header.kind {
        FrameKind::Hello => Frame::Hello(handshake::decode_hello(&mut reader)?),
        FrameKind::Welcome => Frame::Welcome(handshake::decode_welcome(&mut reader)?),
        FrameKind::Release => Frame::Release {
            handles: decode_release(&mut reader)?,
        },
        FrameKind::Error => Frame::Error {
            request_id,
            error: decode_remote_error(&mut reader)?,
        },
        kind => match decode_request(kind, &mut reader)? {
            Some(request) => Frame::Request {
                request_id,
                request,
            },
            None => Frame::Response {
                request_id,
                response: decode_response(kind, &mut reader)?,
            },
        },
    };
    reader.finish(header.kind.name())?;
    Ok(frame)
}

pub(crate) fn encode_body(frame: &Frame, writer: &mut Writer) {
    match frame {
        Frame::Hello(hello) => handshake::encode_hello(hello, writer),
        Frame::Welcome(welcome) => handshake::encode_welcome(welcome, writer),
        Frame::Release { handles } => {
            writer.count(handles.len());
            handles.iter().for_each(|handle| writer.u64(*handle));
        }
        Frame::Error { error, .. } => encode_remote_error(error, writer),
        Frame::Request { request, .. } => encode_request(request, writer),
        Frame::Response { response, .. } => encode_response(response, writer),
    }
}

fn decode_release(reader: &mut Reader<'_>) -> Result<Vec<u64>, DecodeError> {
    let mut handles = Vec::new();
    decode_release_into(reader, &mut handles)?;
    Ok(handles)
}

/// A release body's handles, appended to `handles` (which keeps its allocation).
pub(crate) fn decode_release_into(
    reader: &mut Reader<'_>,
    handles: &mut Vec<u64>,
) -> Result<(), DecodeError> {
    let count = reader.count("release.count", MAX_RELEASE_HANDLES, 8)?;
    handles.reserve(count);
    for _ in 0..count {
        handles.push(reader.u64("release.handle")?);
    }
    Ok(())
}

fn encode_remote_error(error: &RemoteError, writer: &mut Writer) {
    writer.u16(error.code.to_wire());
    writer.optional_u64(error.limit);
    writer.string(&error.message);
}

fn decode_remote_error(reader: &mut Reader<'_>) -> Result<RemoteError, DecodeError> {
    Ok(RemoteError {
        code: ErrorCode::from_wire(reader.u16("error.code")?),
        limit: reader.optional_u64("error.limit")?,
        message: reader.string("error.message", MAX_TEXT_BYTES)?,
    })
}

fn encode_request(request: &Request, writer: &mut Writer) {
    match request {
        Request::Command(command) => (command_codec(command.kind()).encode)(command, writer),
        Request::Cancel { target } => writer.u64(*target),
        Request::RunKernel(run) => encode_run_kernel(run, writer),
        Request::GrantWrite | Request::OpenRings => {}
        Request::Region(region) => region::encode_region_request(region, writer),
    }
}

/// Decodes a request body, or `None` when `kind` is not a request.
fn decode_request(
    kind: FrameKind,
    reader: &mut Reader<'_>,
) -> Result<Option<Request>, DecodeError> {
    if let Some(command_kind) = CommandKind::from_wire(kind as u16) {
        let command = (command_codec(command_kind).decode)(reader)?;
        return Ok(Some(Request::Command(command)));
    }
    let request = match kind {
        FrameKind::WriteGranted => Request::Command(Command::Write {
            name: name(reader, "write_granted.name")?,
            offset_bytes: reader.u64("write_granted.offset")?,
            data: WritePayload::Granted {
                slot: reader.u32("write_granted.slot")?,
                length_bytes: reader.u32("write_granted.length")?,
            },
        }),
        FrameKind::Cancel => Request::Cancel {
            target: reader.u64("cancel.target")?,
        },
        FrameKind::GrantWrite => Request::GrantWrite,
        FrameKind::RunKernel => Request::RunKernel(decode_run_kernel(reader)?),
        FrameKind::OpenRings => Request::OpenRings,
        FrameKind::RegisterRegion => Request::Region(region::decode_register(reader)?),
        FrameKind::ReadInto => Request::Region(region::decode_read_into(reader)?),
        FrameKind::UnregisterRegion => Request::Region(region::decode_unregister(reader)?),
        _ => return Ok(None),
    };
    Ok(Some(request))
}

/// How one kind of command is written into a request body and read back from one.
pub struct CommandCodec {
    /// The command kind (its frame kind is the kind's wire number).
    pub kind: CommandKind,
    encode: fn(&WireCommand, &mut Writer),
    decode: fn(&mut Reader<'_>) -> Result<WireCommand, DecodeError>,
}

/// Every command's codec, one entry per [`CommandKind`] in [`CommandKind::ALL`] order
/// (`protocol/tests/command_kinds.rs` fails when a kind has none). A write's entry
/// encodes both of its payloads (the header says which); a write by grant is decoded
/// under its own frame kind in `decode_request`.
pub const COMMAND_CODECS: [CommandCodec; 15] = [
    codec(CommandKind::Create, encode_name, |reader| {
        Ok(Command::Create {
            name: name(reader, "create.name")?,
        })
    }),
    codec(CommandKind::Write, encode_write, |reader| {
        Ok(Command::Write {
            name: name(reader, "write.name")?,
            offset_bytes: reader.u64("write.offset")?,
            data: WritePayload::Inline(
                reader
                    .bytes("write.data", MAX_BODY_BYTES as usize)?
                    .to_vec(),
            ),
        })
    }),
    codec(CommandKind::Read, encode_read, |reader| {
        Ok(Command::Read {
            name: name(reader, "read.name")?,
            offset_bytes: reader.u64("read.offset")?,
            length_bytes: reader.u64("read.length")?,
        })
    }),
    codec(CommandKind::ReadFiles, encode_read_files, |reader| {
        let count = reader.count("read_files.count", MAX_READ_FILES_COUNT, 4)?;
        let names = (0..count)
            .map(|_| name(reader, "read_files.name"))
            .collect::<Result<_, _>>()?;
        Ok(Command::ReadFiles { names })
    }),
    codec(CommandKind::Truncate, encode_truncate, |reader| {
        Ok(Command::Truncate {
            name: name(reader, "truncate.name")?,
            size_bytes: reader.u64("truncate.size")?,
        })
    }),
    codec(CommandKind::Delete, encode_name, |reader| {
        Ok(Command::Delete {
            name: name(reader, "delete.name")?,
        })
    }),
    codec(CommandKind::Rename, encode_rename, |reader| {
        Ok(Command::Rename {
            from: name(reader, "rename.from")?,
            to: name(reader, "rename.to")?,
            replace: false,
        })
    }),
    codec(CommandKind::RenameReplacing, encode_rename, |reader| {
        Ok(Command::Rename {
            from: name(reader, "rename_replacing.from")?,
            to: name(reader, "rename_replacing.to")?,
            replace: true,
        })
    }),
    codec(CommandKind::Copy, encode_copy, |reader| {
        Ok(Command::Copy {
            from: name(reader, "copy.from")?,
            to: name(reader, "copy.to")?,
            method: copy_method_from_wire(reader.u8("copy.method")?)?,
        })
    }),
    codec(CommandKind::Stat, encode_name, |reader| {
        Ok(Command::Stat {
            name: name(reader, "stat.name")?,
        })
    }),
    codec(CommandKind::List, encode_nothing, |_| Ok(Command::List)),
    codec(CommandKind::Stats, encode_nothing, |_| Ok(Command::Stats)),
    codec(CommandKind::Flush, encode_nothing, |_| Ok(Command::Flush)),
    codec(CommandKind::Check, encode_nothing, |_| Ok(Command::Check)),
    codec(
        CommandKind::SetAttributes,
        encode_set_attributes,
        |reader| {
            let name = name(reader, "set_attributes.name")?;
            decode_set_attributes(reader, name)
        },
    ),
];

const fn codec(
    kind: CommandKind,
    encode: fn(&WireCommand, &mut Writer),
    decode: fn(&mut Reader<'_>) -> Result<WireCommand, DecodeError>,
) -> CommandCodec {
    CommandCodec {
        kind,
        encode,
        decode,
    }
}

/// The codec of `kind`: its entry in [`COMMAND_CODECS`] (the table is in
/// [`CommandKind::ALL`] order, checked by a test).
fn command_codec(kind: CommandKind) -> &'static CommandCodec {
    let index = CommandKind::ALL
        .iter()
        .position(|other| *other == kind)
        .expect("every command kind is in CommandKind::ALL");
    let entry = &COMMAND_CODECS[index];
    assert!(
        entry.kind == kind,
        "COMMAND_CODECS is in CommandKind::ALL order"
    );
    entry
}

fn name(reader: &mut Reader<'_>, field: &'static str) -> Result<String, DecodeError> {
    reader.string(field, MAX_NAME_BYTES)
}

/// Create, delete, stat: the name alone.
fn encode_name(command: &WireCommand, writer: &mut Writer) {
    match command {
        Command::Create { name } | Command::Delete { name } | Command::Stat { name } => {
            writer.string(name)
        }
        other => unreachable_codec(other),
    }
}

fn encode_write(command: &WireCommand, writer: &mut Writer) {
    let Command::Write {
        name,
        offset_bytes,
        data,
    } = command
    else {
        return unreachable_codec(command);
    };
    writer.string(name);
    writer.u64(*offset_bytes);
    match data {
        WritePayload::Inline(bytes) => writer.bytes(bytes),
        WritePayload::Granted { slot, length_bytes } => {
            writer.u32(*slot);
            writer.u32(*length_bytes);
        }
    }
}

fn encode_read(command: &WireCommand, writer: &mut Writer) {
    let Command::Read {
        name,
        offset_bytes,
        length_bytes,
    } = command
    else {
        return unreachable_codec(command);
    };
    writer.string(name);
    writer.u64(*offset_bytes);
    writer.u64(*length_bytes);
}

fn encode_read_files(command: &WireCommand, writer: &mut Writer) {
    let Command::ReadFiles { names } = command else {
        return unreachable_codec(command);
    };
    writer.count(names.len());
    names.iter().for_each(|name| writer.string(name));
}

fn encode_truncate(command: &WireCommand, writer: &mut Writer) {
    let Command::Truncate { name, size_bytes } = command else {
        return unreachable_codec(command);
    };
    writer.string(name);
    writer.u64(*size_bytes);
}

/// Both renames: the replace flag is the frame kind, not a body byte.
fn encode_rename(command: &WireCommand, writer: &mut Writer) {
    let Command::Rename { from, to, .. } = command else {
        return unreachable_codec(command);
    };
    writer.string(from);
    writer.string(to);
}

fn encode_copy(command: &WireCommand, writer: &mut Writer) {
    let Command::Copy { from, to, method } = command else {
        return unreachable_codec(command);
    };
    writer.string(from);
    writer.string(to);
    writer.u8(copy_method_to_wire(*method));
}

/// List, stats, flush, check: no body.
fn encode_nothing(_command: &WireCommand, _writer: &mut Writer) {}

/// A codec entry handed a command of another kind: `command_codec` picks entries by the
/// command's own kind, so this is a bug in this file, not input.
fn unreachable_codec(command: &WireCommand) {
    unreachable!(
        "the codec of another kind was handed a {} command",
        command.kind().name()
    )
}

fn copy_method_to_wire(method: CopyMethod) -> u8 {
    match method {
        CopyMethod::ReferenceOrFail => 0,
        CopyMethod::ReferenceOrBytes => 1,
        CopyMethod::Bytes => 2,
        CopyMethod::Share => 3,
    }
}

fn copy_method_from_wire(value: u8) -> Result<CopyMethod, DecodeError> {
    match value {
        0 => Ok(CopyMethod::ReferenceOrFail),
        1 => Ok(CopyMethod::ReferenceOrBytes),
        2 => Ok(CopyMethod::Bytes),
        3 => Ok(CopyMethod::Share),
        value => Err(DecodeError::BadValue {
            field: "copy.method",
            value: u64::from(value),
        }),
    }
}

fn encode_response(response: &Response, writer: &mut Writer) {
    match response {
        Response::Reply(reply) => encode_reply(reply, writer),
        Response::Granted(grant) => {
            writer.u32(grant.slot);
            writer.u32(grant.slot_size_bytes);
        }
        Response::Cancel(outcome) => writer.u8(match outcome {
            CancelOutcome::NotInFlight => 0,
            CancelOutcome::Running => 1,
            CancelOutcome::Stopping => 2,
        }),
        Response::KernelFile(outcome) => encode_kernel_file(outcome, writer, encode_remote_error),
        Response::KernelSummary(summary) => encode_kernel_summary(summary, writer),
        Response::RingsOpened(rings) => {
            writer.u32(rings.request_ring_capacity_bytes);
            writer.u32(rings.reply_ring_capacity_bytes);
            if rings.engine_doorbell {
                writer.u8(RINGS_OPENED_DOORBELL);
            }
        }
        Response::Region(region) => region::encode_region_response(region, writer),
    }
}

/// The flag byte of a rings-opened body that carries the engine's doorbell.
const RINGS_OPENED_DOORBELL: u8 = 1;

/// A rings-opened body: two capacities, then (version 6) an optional flag byte that
/// must be [`RINGS_OPENED_DOORBELL`].
fn decode_rings_opened(reader: &mut Reader<'_>) -> Result<RingsOpened, DecodeError> {
    let request_ring_capacity_bytes = reader.u32("rings_opened.request_ring_capacity")?;
    let reply_ring_capacity_bytes = reader.u32("rings_opened.reply_ring_capacity")?;
    let engine_doorbell = if reader.is_at_end() {
        false
    } else {
        let flag = reader.u8("rings_opened.doorbell")?;
        if flag != RINGS_OPENED_DOORBELL {
            return Err(DecodeError::BadValue {
                field: "rings_opened.doorbell",
                value: u64::from(flag),
            });
        }
        true
    };
    Ok(RingsOpened {
        request_ring_capacity_bytes,
        reply_ring_capacity_bytes,
        engine_doorbell,
    })
}

fn encode_reply(reply: &WireReply, writer: &mut Writer) {
    match reply {
        Reply::Done => {}
        Reply::Written { buffer } => writer.u64(*buffer),
        Reply::Data(payload) => encode_payload(payload, writer),
        Reply::Files(files) => {
            writer.count(files.len());
            files.iter().for_each(|file| encode_file_data(file, writer));
        }
        Reply::Stat(stat) => encode_stat(stat, has_attributes(stat), writer),
        Reply::List(stats) => {
            let attributed = stats.iter().any(has_attributes);
            writer.count(stats.len());
            stats
                .iter()
                .for_each(|stat| encode_stat(stat, attributed, writer));
        }
        Reply::Stats(stats) => encode_fs_stats(stats, writer),
        Reply::Check(summary) => encode_check(summary, writer),
        Reply::Copied(report) => {
            writer.u64(report.blocks_by_reference);
            writer.u64(report.bytes_by_bytes);
        }
    }
}

fn decode_response(kind: FrameKind, reader: &mut Reader<'_>) -> Result<Response, DecodeError> {
    let reply = match kind {
        FrameKind::Done => Reply::Done,
        FrameKind::Written => Reply::Written {
            buffer: reader.u64("written.length")?,
        },
        FrameKind::Data => Reply::Data(decode_payload(reader)?),
        FrameKind::Files => {
            let count = reader.count("files.count", MAX_READ_FILES_COUNT, 1)?;
            let files = (0..count)
                .map(|_| decode_file_data(reader))
                .collect::<Result<_, _>>()?;
            Reply::Files(files)
        }
        FrameKind::StatReply => Reply::Stat(decode_stat(reader, false)?),
        FrameKind::StatAttributesReply => Reply::Stat(decode_stat(reader, true)?),
        FrameKind::ListReply => Reply::List(decode_list(reader, false)?),
        FrameKind::ListAttributesReply => Reply::List(decode_list(reader, true)?),
        FrameKind::StatsReply => Reply::Stats(decode_fs_stats(reader)?),
        FrameKind::CheckReply => Reply::Check(decode_check(reader)?),
        FrameKind::Copied => Reply::Copied(CopyReport {
            blocks_by_reference: reader.u64("copied.blocks_by_reference")?,
            bytes_by_bytes: reader.u64("copied.bytes_by_bytes")?,
        }),
        FrameKind::Granted => {
            return Ok(Response::Granted(WriteGrant {
                slot: reader.u32("granted.slot")?,
                slot_size_bytes: reader.u32("granted.slot_size")?,
            }))
        }
        FrameKind::CancelReply => {
            return Ok(Response::Cancel(
                match reader.u8("cancel_reply.outcome")? {
                    0 => CancelOutcome::NotInFlight,
                    1 => CancelOutcome::Running,
                    2 => CancelOutcome::Stopping,
                    value => {
                        return Err(DecodeError::BadValue {
                            field: "cancel_reply.outcome",
                            value: u64::from(value),
                        })
                    }
                },
            ))
        }
        FrameKind::KernelFile => {
            return Ok(Response::KernelFile(decode_kernel_file(
                reader,
                decode_remote_error,
            )?))
        }
        FrameKind::KernelSummary => {
            return Ok(Response::KernelSummary(decode_kernel_summary(reader)?))
        }
        FrameKind::RingsOpened => return Ok(Response::RingsOpened(decode_rings_opened(reader)?)),
        FrameKind::RegionRegistered => {
            return Ok(Response::Region(region::decode_registered(reader)?))
        }
        FrameKind::ReadIntoDone => {
            return Ok(Response::Region(region::decode_read_into_done(reader)?))
        }
        other => return Err(DecodeError::UnknownKind { kind: other as u16 }),
    };
    Ok(Response::Reply(reply))
}

fn encode_payload(payload: &DataPayload, writer: &mut Writer) {
    match payload {
        DataPayload::Inline(bytes) => {
            writer.u8(0);
            writer.bytes(bytes);
        }
        DataPayload::Shared(window) => {
            writer.u8(1);
            writer.u64(window.handle);
            writer.u32(window.slot);
            writer.u64(window.window_start);
            writer.u64(window.length_bytes);
        }
    }
}

fn decode_payload(reader: &mut Reader<'_>) -> Result<DataPayload, DecodeError> {
    match reader.u8("data.tag")? {
        0 => Ok(DataPayload::Inline(
            reader
                .bytes("data.bytes", MAX_BODY_BYTES as usize)?
                .to_vec(),
        )),
        1 => Ok(DataPayload::Shared(SharedWindow {
            handle: reader.u64("data.handle")?,
            slot: reader.u32("data.slot")?,
            window_start: reader.u64("data.window_start")?,
            length_bytes: reader.u64("data.length")?,
        })),
        value => Err(DecodeError::BadValue {
            field: "data.tag",
            value: u64::from(value),
        }),
    }
}

fn encode_file_data(file: &FileData, writer: &mut Writer) {
    match file {
        Ok(payload) => encode_payload(payload, writer),
        Err(error) => {
            writer.u8(2);
            encode_remote_error(error, writer);
        }
    }
}

fn decode_file_data(reader: &mut Reader<'_>) -> Result<FileData, DecodeError> {
    match reader.u8("files.tag")? {
        0 => Ok(Ok(DataPayload::Inline(
            reader
                .bytes("files.bytes", MAX_BODY_BYTES as usize)?
                .to_vec(),
        ))),
        1 => Ok(Ok(DataPayload::Shared(SharedWindow {
            handle: reader.u64("files.handle")?,
            slot: reader.u32("files.slot")?,
            window_start: reader.u64("files.window_start")?,
            length_bytes: reader.u64("files.length")?,
        }))),
        2 => Ok(Err(decode_remote_error(reader)?)),
        value => Err(DecodeError::BadValue {
            field: "files.tag",
            value: u64::from(value),
        }),
    }
}

/// A stat entry: the version-4 fields, then the attribute tail under the attribute
/// reply kinds.
fn encode_stat(stat: &FileStat, attributed: bool, writer: &mut Writer) {
    writer.u64(stat.file_id.0);
    writer.string(&stat.name);
    writer.u64(stat.size_bytes);
    writer.u64(stat.allocated_blocks);
    writer.u64(stat.shared_bytes);
    writer.u64(stat.modified_clock_ns);
    if attributed {
        encode_stat_attributes(stat, writer);
    }
}

fn decode_stat(reader: &mut Reader<'_>, attributed: bool) -> Result<FileStat, DecodeError> {
    let mut stat = FileStat {
        file_id: FileId(reader.u64("stat.file_id")?),
        name: reader.string("stat.name", MAX_NAME_BYTES)?,
        size_bytes: reader.u64("stat.size")?,
        allocated_blocks: reader.u64("stat.allocated_blocks")?,
        shared_bytes: reader.u64("stat.shared_bytes")?,
        modified_clock_ns: reader.u64("stat.modified_clock_ns")?,
        mode: None,
        owner: None,
        modified_wall_ns: None,
    };
    if attributed {
        decode_stat_attributes(reader, &mut stat)?;
    }
    Ok(stat)
}

fn decode_list(reader: &mut Reader<'_>, attributed: bool) -> Result<Vec<FileStat>, DecodeError> {
    let count = reader.count("list.count", MAX_LIST_ENTRIES, 36)?;
    (0..count)
        .map(|_| decode_stat(reader, attributed))
        .collect()
}

fn encode_fs_stats(stats: &FsStats, writer: &mut Writer) {
    writer.u32(stats.fs_block_size_bytes);
    writer.u64(stats.fs_block_count);
    writer.u64(stats.used_blocks);
    writer.u64(stats.shared_blocks);
    writer.u64(stats.saved_blocks);
    writer.u64(stats.free_blocks);
    writer.u64(stats.pending_free_blocks);
    writer.u64(stats.reserved_blocks);
    writer.u64(stats.file_count);
    writer.u64(stats.commit_sequence);
    writer.bool(stats.unflushed_changes);
}

fn decode_fs_stats(reader: &mut Reader<'_>) -> Result<FsStats, DecodeError> {
    Ok(FsStats {
        fs_block_size_bytes: reader.u32("stats.fs_block_size")?,
        fs_block_count: reader.u64("stats.fs_block_count")?,
        used_blocks: reader.u64("stats.used_blocks")?,
        shared_blocks: reader.u64("stats.shared_blocks")?,
        saved_blocks: reader.u64("stats.saved_blocks")?,
        free_blocks: reader.u64("stats.free_blocks")?,
        pending_free_blocks: reader.u64("stats.pending_free_blocks")?,
        reserved_blocks: reader.u64("stats.reserved_blocks")?,
        file_count: reader.u64("stats.file_count")?,
        commit_sequence: reader.u64("stats.commit_sequence")?,
        unflushed_changes: reader.bool("stats.unflushed_changes")?,
    })
}

fn encode_check(summary: &CheckSummary, writer: &mut Writer) {
    writer.bool(summary.clean);
    writer.optional_u64(summary.commit_sequence);
    writer.u64(summary.file_count);
    writer.count(summary.findings.len());
    summary
        .findings
        .iter()
        .for_each(|finding| writer.string(finding));
    writer.string(&summary.report_text);
}

fn decode_check(reader: &mut Reader<'_>) -> Result<CheckSummary, DecodeError> {
    let clean = reader.bool("check.clean")?;
    let commit_sequence = reader.optional_u64("check.commit_sequence")?;
    let file_count = reader.u64("check.file_count")?;
    let count = reader.count("check.findings", MAX_LIST_ENTRIES, 4)?;
    let findings = (0..count)
        .map(|_| reader.string("check.finding", MAX_TEXT_BYTES))
        .collect::<Result<_, _>>()?;
    Ok(CheckSummary {
        clean,
        commit_sequence,
        file_count,
        findings,
        report_text: reader.string("check.report_text", MAX_TEXT_BYTES)?,
    })
}

/// The data response of request `request_id` carrying `bytes` inline: the same bytes as
/// [`encode_frame`] of `Response::Reply(Reply::Data(DataPayload::Inline(bytes.to_vec())))`, with the
/// data copied once (a server's copying path answers every read with one).
pub fn encode_inline_data(request_id: RequestId, bytes: &[u8]) -> Vec<u8> {
    let body_length = 1 + 4 + bytes.len();
    assert!(
        body_length <= MAX_BODY_BYTES as usize,
        "a data frame of {body_length} bytes exceeds the protocol's body limit"
    );
    let mut frame = Vec::with_capacity(HEADER_BYTES + body_length);
    frame.extend_from_slice(&encode_header(
        FrameKind::Data,
        request_id,
        body_length as u32,
    ));
    frame.push(0);
    frame.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    frame.extend_from_slice(bytes);
    frame
}
