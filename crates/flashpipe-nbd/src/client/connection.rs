//! One NBD connection in the transmission phase: a writer thread that sends requests as
//! they are submitted and a reader thread that decodes replies and hands completions
//! back, sharing one table of requests in flight.
//!
//! A device request (a *parent*) becomes one NBD request per *part*: reads, writes and
//! trims longer than the export's maximum payload are cut into parts, each with its own
//! cookie, `parent id << PART_BITS | part index`. The parent completes when every part
//! has; its status is the first error any part met.
//!
//! Ownership of a parent: the writer holds a write while it copies the payload onto the
//! socket and puts it into the table after; reads, flushes and trims go into the table
//! before their header is sent (their reply may come at once). The reader takes a parent
//! out of the table while it reads a chunk into its buffer and puts it back unless it is
//! finished. A reply for a parent the writer still holds waits on the table's condition
//! variable; a reply for a cookie that is nowhere is a protocol violation.
//!
//! When the connection fails (an I/O error, a protocol violation, `NBD_ESHUTDOWN`) the
//! reader reports [`Event::Lost`] as its last event; the device then stops both threads
//! and collects every parent not yet completed ([`Connection::close`]) to re-issue on a
//! new connection. Nothing is ever lost between the two: each parent is in exactly one
//! of the writer's queue, the writer's hands, the table or the reader's hands.

// Requests in flight move as boxes between the writer's channel, the table and these
// lists (a `Box<Parent>` is moved, never copied), so lists of boxes are meant.
#![allow(clippy::vec_box)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use flashpipe_device::{Completion, DeviceError, DeviceErrorKind, Operation, Request};

use crate::wire::{self, ReplyHeader, RequestHeader, StructuredReplyHeader};

use super::handshake::NbdExport;
use super::transport::Stream;

/// Bits of a cookie that number the part of its parent.
pub(crate) const PART_BITS: u32 = 20;

/// Most parts one device request may be cut into.
pub(crate) const MAX_PARTS: u64 = 1 << PART_BITS;

/// Bytes the reader buffers from the socket.
const READ_BUFFER_BYTES: usize = 256 << 10;

/// Bytes the writer gathers before a system call (headers of many small requests).
const WRITE_BUFFER_BYTES: usize = 64 << 10;

/// A device request in flight on the connection.
#[derive(Debug)]
pub(crate) struct Parent {
    /// The device's number for it (cookies carry it).
    pub(crate) id: u64,
    /// The caller's request, buffer included.
    pub(crate) request: Request,
    /// NBD command.
    pub(crate) command: u16,
    /// Command flags (FUA).
    pub(crate) flags: u16,
    /// First byte of the export it touches.
    pub(crate) offset_bytes: u64,
    /// Bytes it touches.
    pub(crate) length_bytes: u64,
    /// Bytes per part (the last may be shorter).
    pub(crate) part_bytes: u64,
    /// Parts whose reply is complete.
    pub(crate) parts_finished: Vec<bool>,
    /// The first error a part met.
    pub(crate) status: Option<DeviceError>,
    /// Byte ranges (relative to the parent) a structured read reply has filled.
    pub(crate) covered: Vec<(u64, u64)>,
    /// For a flush: how many writes had been acknowledged when it was submitted.
    pub(crate) covers_acknowledged_writes: u64,
}

impl Parent {
    pub(crate) fn part_count(&self) -> u64 {
        self.length_bytes.div_ceil(self.part_bytes).max(1)
    }

    /// Relative start and length of part `index`.
    fn part_range(&self, index: u64) -> (u64, u64) {
        let start = index * self.part_bytes;
        (start, self.part_bytes.min(self.length_bytes - start))
    }

    /// Forgets what a lost connection had done, so the whole request is sent again.
    pub(crate) fn reset_for_reissue(&mut self) {
        self.parts_finished
            .iter_mut()
            .for_each(|done| *done = false);
        self.status = None;
        self.covered.clear();
    }

    fn is_finished(&self) -> bool {
        self.parts_finished.iter().all(|&done| done)
    }

    /// The completion of a finished parent.
    pub(crate) fn into_completion(self: Box<Self>) -> Completion {
        Completion {
            tag: self.request.tag,
            status: self.status.map_or(Ok(()), Err),
            buffer: self.request.into_buffer(),
        }
    }
}

/// What the reader reports to the device.
#[derive(Debug)]
pub(crate) enum Event {
    /// A request completed (with its parent's bookkeeping).
    Completed {
        /// The completion.
        completion: Completion,
        /// The NBD command.
        command: u16,
        /// Its flags.
        flags: u16,
        /// For a flush, the acknowledged writes it covers.
        covers_acknowledged_writes: u64,
    },
    /// The connection ended; always the reader's last event.
    Lost {
        /// Why.
        reason: String,
    },
}

/// What the device sends the writer.
#[derive(Debug)]
pub(crate) enum WriterMessage {
    /// Send this request.
    Send(Box<Parent>),
    /// Send `NBD_CMD_DISC` and stop (nothing in flight).
    Disconnect,
}

#[derive(Debug, Default)]
struct Table {
    in_flight: HashMap<u64, Box<Parent>>,
    /// The write parent the writer holds while sending its payload.
    writer_holds: Option<u64>,
    /// Set by whichever thread saw the connection fail first.
    lost: Option<String>,
    /// When the writer last finished sending a request (the reply timeout counts from
    /// the later of this and the last byte received).
    last_sent: Option<Instant>,
}

#[derive(Debug, Default)]
struct Shared {
    table: Mutex<Table>,
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn mark_lost(&self, reason: String) {
        let mut table = self.lock();
        table.lost.get_or_insert(reason);
        self.changed.notify_all();
    }
}

/// The export facts both threads need.
#[derive(Debug, Clone)]
pub(crate) struct ConnectionSettings {
    /// The device's name (its URI), for errors.
    pub(crate) device_name: Arc<str>,
    /// The negotiated export.
    pub(crate) export: NbdExport,
    /// How long requests in flight may go without a byte from the server before the
    /// connection counts as lost (a network partition sends no reset); `None`: forever.
    pub(crate) reply_timeout: Option<Duration>,
}

/// Where a connection's reader reports: the connection's slot on its device, and the
/// event. Completions and the final [`Event::Lost`] of every connection of a device go
/// to one channel.
pub(crate) type EventSender = Sender<(usize, Event)>;

/// A live connection: its threads and the device's end of the writer's channel.
pub(crate) struct Connection {
    sender: Sender<WriterMessage>,
    shared: Arc<Shared>,
    stream: Stream,
    writer: JoinHandle<(Vec<Box<Parent>>, Receiver<WriterMessage>)>,
    reader: JoinHandle<Option<Box<Parent>>>,
}

impl Connection {
    /// Starts the two threads on a negotiated stream.
    pub(crate) fn start(
        stream: Stream,
        settings: ConnectionSettings,
        slot: usize,
        event_sender: EventSender,
    ) -> std::io::Result<Connection> {
        let shared = Arc::new(Shared::default());
        let (sender, requests) = channel();
        let write_half = stream.try_clone()?;
        let read_half = stream.try_clone()?;
        read_half.set_read_timeout(settings.reply_timeout)?;
        let writer = {
            let shared = Arc::clone(&shared);
            let settings = settings.clone();
            std::thread::Builder::new()
                .name("nbd-writer".to_string())
                .spawn(move || run_writer(write_half, requests, &shared, &settings))?
        };
        let reader = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("nbd-reader".to_string())
                .spawn(move || run_reader(read_half, &shared, &settings, slot, &event_sender))?
        };
        Ok(Connection {
            sender,
            shared,
            stream,
            writer,
            reader,
        })
    }

    /// Hands a request to the writer; gives it back when the writer has stopped.
    pub(crate) fn send(&self, parent: Box<Parent>) -> Result<(), Box<Parent>> {
        self.sender
            .send(WriterMessage::Send(parent))
            .map_err(|error| match error.0 {
                WriterMessage::Send(parent) => parent,
                WriterMessage::Disconnect => unreachable!("only requests are sent here"),
            })
    }

    /// Ends the connection (a soft disconnect first when `soft` and nothing is in
    /// flight) and returns every request not completed, in submission order.
    pub(crate) fn close(self, soft: bool) -> Vec<Box<Parent>> {
        if soft {
            let _ = self.sender.send(WriterMessage::Disconnect);
        } else {
            self.shared
                .mark_lost("the connection was closed by the client".to_string());
            self.stream.shutdown();
        }
        drop(self.sender);
        let mut pending = Vec::new();
        match self.writer.join() {
            Ok((unsent, requests)) => {
                pending.extend(unsent);
                pending.extend(requests.try_iter().filter_map(|message| match message {
                    WriterMessage::Send(parent) => Some(parent),
                    WriterMessage::Disconnect => None,
                }));
            }
            Err(_) => panic!("the NBD writer thread panicked"),
        }
        self.stream.shutdown();
        match self.reader.join() {
            Ok(held) => pending.extend(held),
            Err(_) => panic!("the NBD reader thread panicked"),
        }
        pending.extend(
            self.shared
                .lock()
                .in_flight
                .drain()
                .map(|(_, parent)| parent),
        );
        pending.sort_by_key(|parent| parent.id);
        pending
    }
}

// ---------------------------------------------------------------------------------------
// The writer.

fn run_writer(
    stream: Stream,
    requests: Receiver<WriterMessage>,
    shared: &Shared,
    settings: &ConnectionSettings,
) -> (Vec<Box<Parent>>, Receiver<WriterMessage>) {
    let shutdown_handle = stream.try_clone().ok();
    let mut output = BufWriter::with_capacity(WRITE_BUFFER_BYTES, stream);
    let mut unsent = Vec::new();
    let failure = loop {
        let Ok(first) = requests.recv() else {
            break output.flush().err().map(|error| error.to_string());
        };
        let mut outcome = send_message(&mut output, first, shared, &mut unsent);
        while outcome == Ok(true) {
            match requests.try_recv() {
                Ok(message) => outcome = send_message(&mut output, message, shared, &mut unsent),
                Err(_) => break,
            }
        }
        match outcome.and_then(|keep_going| {
            output
                .flush()
                .map(|()| keep_going)
                .map_err(|error| format!("sending to the server failed: {error}"))
        }) {
            Ok(true) => {}
            Ok(false) => break None,
            Err(reason) => break Some(reason),
        }
    };
    if let Some(reason) = failure {
        shared.mark_lost(format!("{}: {reason}", settings.device_name));
        if let Some(handle) = shutdown_handle {
            handle.shutdown();
        }
    }
    (unsent, requests)
}

/// Sends one message; `Ok(false)` after a disconnect, `Err` when the socket failed (the
/// request is then in `unsent` or in the table).
fn send_message(
    output: &mut BufWriter<Stream>,
    message: WriterMessage,
    shared: &Shared,
    unsent: &mut Vec<Box<Parent>>,
) -> Result<bool, String> {
    let parent = match message {
        WriterMessage::Send(parent) => parent,
        WriterMessage::Disconnect => {
            let mut header = Vec::with_capacity(wire::REQUEST_HEADER_BYTES);
            RequestHeader {
                flags: 0,
                command: wire::CMD_DISC,
                cookie: 0,
                offset_bytes: 0,
                length_bytes: 0,
            }
            .encode(&mut header);
            output
                .write_all(&header)
                .map_err(|error| format!("sending NBD_CMD_DISC failed: {error}"))?;
            return Ok(false);
        }
    };
    if shared.lock().lost.is_some() {
        unsent.push(parent);
        return Err("the connection is lost".to_string());
    }
    if parent.command == wire::CMD_WRITE {
        shared.lock().writer_holds = Some(parent.id);
        let result = write_parts(output, &parent);
        let mut table = shared.lock();
        table.writer_holds = None;
        if let Err(error) = result {
            // Lost is set before the reader can look for this request again, so a reply
            // to it is not taken for a reply to an unknown cookie.
            let reason = format!("sending to the server failed: {error}");
            table.lost.get_or_insert_with(|| reason.clone());
            shared.changed.notify_all();
            drop(table);
            unsent.push(parent);
            return Err(reason);
        }
        table.in_flight.insert(parent.id, parent);
        table.last_sent = Some(Instant::now());
        shared.changed.notify_all();
        return Ok(true);
    }
    let headers = part_headers(&parent);
    {
        let mut table = shared.lock();
        table.in_flight.insert(parent.id, parent);
        shared.changed.notify_all();
    }
    output
        .write_all(&headers)
        .map_err(|error| format!("sending to the server failed: {error}"))?;
    shared.lock().last_sent = Some(Instant::now());
    Ok(true)
}

fn part_header(parent: &Parent, index: u64) -> RequestHeader {
    let (start, length) = if parent.command == wire::CMD_FLUSH {
        (0, 0)
    } else {
        parent.part_range(index)
    };
    let offset_bytes = if parent.command == wire::CMD_FLUSH {
        0
    } else {
        parent.offset_bytes + start
    };
    RequestHeader {
        flags: parent.flags,
        command: parent.command,
        cookie: parent.id << PART_BITS | index,
        offset_bytes,
        length_bytes: u32::try_from(length).expect("a part fits the 32-bit length field"),
    }
}

fn part_headers(parent: &Parent) -> Vec<u8> {
    let mut headers = Vec::with_capacity(wire::REQUEST_HEADER_BYTES * parent.part_count() as usize);
    for index in 0..parent.part_count() {
        part_header(parent, index).encode(&mut headers);
    }
    headers
}

fn write_parts(output: &mut BufWriter<Stream>, parent: &Parent) -> std::io::Result<()> {
    let Operation::Write { buffer, .. } = &parent.request.operation else {
        panic!("write_parts is given writes only");
    };
    let mut header = Vec::with_capacity(wire::REQUEST_HEADER_BYTES);
    for index in 0..parent.part_count() {
        header.clear();
        part_header(parent, index).encode(&mut header);
        output.write_all(&header)?;
        let (start, length) = parent.part_range(index);
        output.write_all(&buffer[start as usize..(start + length) as usize])?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// The reader.

/// Why the reader stopped: the reason, and the parent it held.
struct Stop {
    reason: String,
    held: Option<Box<Parent>>,
}

fn stop(reason: impl Into<String>) -> Stop {
    Stop {
        reason: reason.into(),
        held: None,
    }
}

fn run_reader(
    stream: Stream,
    shared: &Shared,
    settings: &ConnectionSettings,
    slot: usize,
    events: &EventSender,
) -> Option<Box<Parent>> {
    let shutdown_handle = stream.try_clone().ok();
    let mut input = BufReader::with_capacity(READ_BUFFER_BYTES, stream);
    let mut last_received = Instant::now();
    let stopped = loop {
        if let Err(stopped) = wait_for_reply(&mut input, shared, settings, &mut last_received) {
            break stopped;
        }
        match read_one_reply(&mut input, shared, settings) {
            Ok(Some(parent)) => {
                let event = Event::Completed {
                    command: parent.command,
                    flags: parent.flags,
                    covers_acknowledged_writes: parent.covers_acknowledged_writes,
                    completion: parent.into_completion(),
                };
                if events.send((slot, event)).is_err() {
                    break stop("the device is gone");
                }
            }
            Ok(None) => {}
            Err(stopped) => break stopped,
        }
    };
    let reason = {
        let mut table = shared.lock();
        let reason = table.lost.get_or_insert(stopped.reason).clone();
        shared.changed.notify_all();
        reason
    };
    if let Some(handle) = shutdown_handle {
        handle.shutdown();
    }
    let _ = events.send((slot, Event::Lost { reason }));
    stopped.held
}

/// Waits at a message boundary until the server sends a byte. With a reply timeout
/// (the socket's read timeout), waking with requests in flight and nothing received or
/// sent for that long ends the connection; an idle connection waits on.
fn wait_for_reply(
    input: &mut BufReader<Stream>,
    shared: &Shared,
    settings: &ConnectionSettings,
    last_received: &mut Instant,
) -> Result<(), Stop> {
    let name = &settings.device_name;
    loop {
        match input.fill_buf() {
            Ok([]) => return Err(stop(format!("{name}: the server closed the connection"))),
            Ok(_) => {
                *last_received = Instant::now();
                return Ok(());
            }
            Err(error)
                if matches!(
                    error.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                let Some(timeout) = settings.reply_timeout else {
                    continue;
                };
                let table = shared.lock();
                if let Some(reason) = &table.lost {
                    return Err(stop(reason.clone()));
                }
                let waiting = table.in_flight.len() + usize::from(table.writer_holds.is_some());
                let quiet_since = table
                    .last_sent
                    .map_or(*last_received, |sent| sent.max(*last_received));
                if waiting > 0 && quiet_since.elapsed() >= timeout {
                    return Err(stop(format!(
                        "{name}: no reply from the server for {} ms with {waiting} requests in flight",
                        timeout.as_millis()
                    )));
                }
            }
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => {
                return Err(stop(format!(
                    "{name}: receiving from the server failed: {error}"
                )))
            }
        }
    }
}

/// Takes parent `id` out of the table, waiting while the writer still holds it.
fn take_parent(shared: &Shared, cookie: u64) -> Result<Box<Parent>, Stop> {
    let id = cookie >> PART_BITS;
    let mut table = shared.lock();
    loop {
        if let Some(parent) = table.in_flight.remove(&id) {
            return Ok(parent);
        }
        if let Some(reason) = &table.lost {
            return Err(stop(reason.clone()));
        }
        if table.writer_holds != Some(id) {
            return Err(stop(format!(
                "protocol violation: a reply for cookie {cookie:#x}, which no request in flight carries"
            )));
        }
        table = shared
            .changed
            .wait(table)
            .unwrap_or_else(|poisoned| poisoned.into_inner());
    }
}

/// Reads one reply message; returns the parent when it finished.
fn read_one_reply(
    input: &mut BufReader<Stream>,
    shared: &Shared,
    settings: &ConnectionSettings,
) -> Result<Option<Box<Parent>>, Stop> {
    let name = &settings.device_name;
    let header = wire::read_reply_header(input).map_err(|error| match error {
        wire::WireError::Io { source, .. }
            if source.kind() == std::io::ErrorKind::UnexpectedEof =>
        {
            stop(format!("{name}: the server closed the connection"))
        }
        wire::WireError::Io { source, .. } => stop(format!(
            "{name}: receiving from the server failed: {source}"
        )),
        other => stop(format!("{name}: protocol violation: {other}")),
    })?;
    let cookie = match header {
        ReplyHeader::Simple { cookie, .. } => cookie,
        ReplyHeader::Structured(chunk) => chunk.cookie,
    };
    let mut parent = take_parent(shared, cookie)?;
    let part = cookie & (MAX_PARTS - 1);
    if part >= parent.part_count() || parent.parts_finished[part as usize] {
        return Err(Stop {
            reason: format!("{name}: protocol violation: a reply for cookie {cookie:#x}, whose request has no such part pending"),
            held: Some(parent),
        });
    }
    let outcome = match header {
        ReplyHeader::Simple { error, .. } => {
            read_simple_reply(input, &mut parent, part, error, settings)
        }
        ReplyHeader::Structured(chunk) => read_chunk(input, &mut parent, part, &chunk, settings),
    };
    match outcome {
        Ok(part_done) => {
            if part_done {
                parent.parts_finished[part as usize] = true;
            }
            if parent.is_finished() {
                return Ok(Some(parent));
            }
            shared.lock().in_flight.insert(parent.id, parent);
            Ok(None)
        }
        Err(reason) => Err(Stop {
            reason: format!("{name}: {reason}"),
            held: Some(parent),
        }),
    }
}

/// Records a server error on the parent (the first one wins). `NBD_ESHUTDOWN` is not an
/// answer but the server leaving: the connection is treated as lost and the request
/// re-issued on the next one.
fn record_server_error(
    parent: &mut Parent,
    error: u32,
    message: &str,
    settings: &ConnectionSettings,
) -> Result<(), String> {
    if error == wire::NBD_ESHUTDOWN {
        return Err("the server is shutting down (NBD_ESHUTDOWN)".to_string());
    }
    let operation = parent.request.operation.name();
    let detail = if message.is_empty() {
        format!(
            "the server failed the {operation}: {}",
            wire::error_name(error)
        )
    } else {
        format!(
            "the server failed the {operation}: {}: {message}",
            wire::error_name(error)
        )
    };
    let kind = match error {
        wire::NBD_ENOSPC => DeviceErrorKind::OutOfSpace { detail },
        _ => DeviceErrorKind::IoFailed { detail },
    };
    parent
        .status
        .get_or_insert_with(|| DeviceError::new(&settings.device_name, kind));
    Ok(())
}

fn read_buffer_range(parent: &mut Parent, start: u64, length: u64) -> &mut [u8] {
    let Operation::Read { buffer, .. } = &mut parent.request.operation else {
        panic!("data is read into read requests only");
    };
    &mut buffer[start as usize..(start + length) as usize]
}

fn read_simple_reply(
    input: &mut BufReader<Stream>,
    parent: &mut Parent,
    part: u64,
    error: u32,
    settings: &ConnectionSettings,
) -> Result<bool, String> {
    let is_read = parent.command == wire::CMD_READ;
    if is_read && settings.export.structured_replies {
        return Err(
            "protocol violation: a simple reply to NBD_CMD_READ after structured replies were negotiated"
                .to_string(),
        );
    }
    if error != 0 {
        record_server_error(parent, error, "", settings)?;
        return Ok(true);
    }
    if is_read {
        let (start, length) = parent.part_range(part);
        input
            .read_exact(read_buffer_range(parent, start, length))
            .map_err(|error| format!("receiving read data failed: {error}"))?;
    }
    Ok(true)
}

fn read_payload(input: &mut BufReader<Stream>, length_bytes: u32) -> Result<Vec<u8>, String> {
    let mut payload = vec![0u8; length_bytes as usize];
    input
        .read_exact(&mut payload)
        .map_err(|error| format!("receiving a reply chunk failed: {error}"))?;
    Ok(payload)
}

/// Reads one structured chunk; `Ok(true)` when it ends its part's reply.
fn read_chunk(
    input: &mut BufReader<Stream>,
    parent: &mut Parent,
    part: u64,
    chunk: &StructuredReplyHeader,
    settings: &ConnectionSettings,
) -> Result<bool, String> {
    let is_read = parent.command == wire::CMD_READ;
    match chunk.reply_type {
        wire::REPLY_TYPE_NONE => {
            if chunk.length_bytes != 0 || !chunk.is_done() {
                return Err(format!(
                    "protocol violation: NBD_REPLY_TYPE_NONE with length {} and flags {:#x} (length 0 and the DONE flag required)",
                    chunk.length_bytes, chunk.flags
                ));
            }
        }
        wire::REPLY_TYPE_OFFSET_DATA if is_read => {
            if chunk.length_bytes < 9 {
                return Err(format!(
                    "protocol violation: NBD_REPLY_TYPE_OFFSET_DATA of {} bytes (at least 9)",
                    chunk.length_bytes
                ));
            }
            let mut offset = [0u8; 8];
            input
                .read_exact(&mut offset)
                .map_err(|error| format!("receiving a reply chunk failed: {error}"))?;
            let data_bytes = u64::from(chunk.length_bytes - 8);
            let start = claim_content(parent, part, u64::from_be_bytes(offset), data_bytes)?;
            input
                .read_exact(read_buffer_range(parent, start, data_bytes))
                .map_err(|error| format!("receiving read data failed: {error}"))?;
        }
        wire::REPLY_TYPE_OFFSET_HOLE if is_read => {
            let payload = read_payload(input, chunk.length_bytes)?;
            let (offset_bytes, hole_bytes) = wire::decode_offset_hole_payload(&payload)
                .map_err(|error| format!("protocol violation: {error}"))?;
            let start = claim_content(parent, part, offset_bytes, u64::from(hole_bytes))?;
            read_buffer_range(parent, start, u64::from(hole_bytes)).fill(0);
        }
        reply_type if reply_type & wire::REPLY_TYPE_FLAG_ERROR != 0 => {
            let payload = read_payload(input, chunk.length_bytes)?;
            let error = wire::decode_error_payload(reply_type, &payload)
                .map_err(|error| format!("protocol violation: {error}"))?;
            if error.error == 0 {
                return Err("protocol violation: an error chunk with error 0".to_string());
            }
            record_server_error(parent, error.error, &error.message, settings)?;
        }
        other => {
            return Err(format!(
                "protocol violation: structured reply type {other} to {}",
                wire::command_name(parent.command)
            ))
        }
    }
    if chunk.is_done() && parent.status.is_none() && is_read {
        check_part_covered(parent, part)?;
    }
    Ok(chunk.is_done())
}

/// Checks that a content chunk lies inside its part and overlaps nothing received
/// before; records it and returns its start relative to the parent.
fn claim_content(
    parent: &mut Parent,
    part: u64,
    offset_bytes: u64,
    length_bytes: u64,
) -> Result<u64, String> {
    let (part_start, part_length) = parent.part_range(part);
    let absolute_start = parent.offset_bytes + part_start;
    let inside = offset_bytes >= absolute_start
        && offset_bytes
            .checked_add(length_bytes)
            .is_some_and(|end| end <= absolute_start + part_length);
    if !inside {
        return Err(format!(
            "protocol violation: read data at bytes {offset_bytes}+{length_bytes}, outside the request's {absolute_start}+{part_length}"
        ));
    }
    let start = offset_bytes - parent.offset_bytes;
    let end = start + length_bytes;
    if parent
        .covered
        .iter()
        .any(|&(covered_start, covered_end)| start < covered_end && covered_start < end)
    {
        return Err(format!(
            "protocol violation: read data at bytes {offset_bytes}+{length_bytes} overlaps data already received"
        ));
    }
    parent.covered.push((start, end));
    Ok(start)
}

/// A successful read reply covers its whole part.
fn check_part_covered(parent: &Parent, part: u64) -> Result<(), String> {
    let (part_start, part_length) = parent.part_range(part);
    let part_end = part_start + part_length;
    let covered: u64 = parent
        .covered
        .iter()
        .map(|&(start, end)| end.min(part_end).saturating_sub(start.max(part_start)))
        .sum();
    if covered != part_length {
        return Err(format!(
            "protocol violation: a successful read reply covered {covered} of its {part_length} bytes"
        ));
    }
    Ok(())
}
