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
//!
//! What is protocol rather than I/O (cookies, frame encoding, reply decoding and its
//! checks) is `crate::core`'s, shared with the simulated client.

// Requests in flight move as boxes between the writer's channel, the table and these
// lists (a `Box<Parent>` is moved, never copied), so lists of boxes are meant.
#![allow(clippy::vec_box)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use flashpipe_device::Completion;

use flashpipe_nbd_wire::{self as wire, RequestHeader};

use crate::core::{
    cookie_of_reply, describe_reply_header_error, parent_id_of_cookie, part_header, part_headers,
    pending_part, read_reply_body, silence_ends_connection, write_part_payload, Parent, ReplyRules,
};

use crate::handshake::NbdExport;
use crate::transport::Stream;

/// Bytes the reader buffers from the socket.
const READ_BUFFER_BYTES: usize = 256 << 10;

/// Bytes the writer gathers before a system call (headers of many small requests).
const WRITE_BUFFER_BYTES: usize = 64 << 10;

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
    /// Reply timeouts that passed with nothing in flight (the connection was kept).
    idle_timeouts: u64,
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

    /// Reply timeouts this connection let pass with nothing in flight (it stays open).
    pub(crate) fn idle_timeouts(&self) -> u64 {
        self.shared.lock().idle_timeouts
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

fn write_parts(output: &mut BufWriter<Stream>, parent: &Parent) -> std::io::Result<()> {
    let mut header = Vec::with_capacity(wire::REQUEST_HEADER_BYTES);
    for index in 0..parent.part_count() {
        header.clear();
        part_header(parent, index).encode(&mut header);
        output.write_all(&header)?;
        output.write_all(write_part_payload(parent, index))?;
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
                let mut table = shared.lock();
                if let Some(reason) = &table.lost {
                    return Err(stop(reason.clone()));
                }
                let waiting = table.in_flight.len() + usize::from(table.writer_holds.is_some());
                if waiting == 0 {
                    table.idle_timeouts += 1;
                }
                let quiet_since = table
                    .last_sent
                    .map_or(*last_received, |sent| sent.max(*last_received));
                let quiet_for_ns = quiet_since.elapsed().as_nanos() as u64;
                let timeout_ns = timeout.as_nanos() as u64;
                if let Some(reason) =
                    silence_ends_connection(name, waiting, quiet_for_ns, timeout_ns)
                {
                    return Err(stop(reason));
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
    let id = parent_id_of_cookie(cookie);
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
    let header = wire::read_reply_header(input)
        .map_err(|error| stop(describe_reply_header_error(name, error)))?;
    let cookie = cookie_of_reply(&header);
    let mut parent = take_parent(shared, cookie)?;
    let part = match pending_part(&parent, cookie, name) {
        Ok(part) => part,
        Err(reason) => {
            return Err(Stop {
                reason,
                held: Some(parent),
            })
        }
    };
    let rules = ReplyRules {
        device_name: name,
        structured_replies: settings.export.structured_replies,
    };
    match read_reply_body(input, &mut parent, part, &header, &rules) {
        Ok(true) => Ok(Some(parent)),
        Ok(false) => {
            shared.lock().in_flight.insert(parent.id, parent);
            Ok(None)
        }
        Err(reason) => Err(Stop {
            reason,
            held: Some(parent),
        }),
    }
}
