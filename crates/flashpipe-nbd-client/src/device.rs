//! [`NbdDevice`]: a remote export as a [`BlockDevice`].
//!
//! Requests are checked at submission against the device's geometry, the export's
//! transmission flags (read-only, trim, flush) and the queue depth, then handed to the
//! connection's writer; completions come back from its reader and are reaped through
//! `poll_completions` / `wait_completions`. Tags stay the caller's: cookies carry the
//! device's own request numbers, so a tag may repeat once its request is reaped.
//!
//! With `connections` above 1 (multi-conn, only when the server offers
//! `NBD_FLAG_CAN_MULTI_CONN`) requests are dealt over several connections in turn, each
//! lost and recovered on its own.
//!
//! A connection is lost on an I/O error, a protocol violation, `NBD_ESHUTDOWN`, or
//! `reply_timeout_ms` of silence with requests in flight (an idle connection is never
//! timed out). A lost connection is handled inside `poll_completions` /
//! `wait_completions`: the
//! requests not yet answered are collected, the device reconnects (up to
//! `reconnect_attempts` times, waiting `reconnect_first_delay_ms` then twice as long each
//! time, at most one second), checks that the export kept its size and flags, and sends
//! them again in submission order (NBD writes are idempotent; flushes are re-issued).
//! When every attempt fails, or the connection is lost more than `reconnect_attempts`
//! times in a row without any request completing (a server that drops every
//! connection), each of them completes with an error naming the device (its URI), and so
//! does every later submission.
//!
//! Durability across a reconnect: writes the old connection acknowledged but no flush
//! covered may have died with the server. With
//! [`ReconnectDurability::ReportUnflushedWrites`] (the default) the next flush to
//! complete says so as an error, as `fsync` does after a lost write-back; with
//! [`ReconnectDurability::TrustServer`] they are taken as kept (a server whose process
//! died but whose host did not, over a file in the page cache).
//!
//! One hazard no client can close: a request the lost connection had delivered may still
//! be carried out by the server after the new connection's requests (the server finishes
//! what it read before it noticed the loss). The first reconnect attempt waits
//! `reconnect_first_delay_ms` (50 ms by default), far longer than a server takes to
//! finish one request, which makes this a matter of a server stalled for that long.
//!
//! The policy (admission, durability ledger, which requests are re-issued and in what
//! order, backoff, bounds, the final error) is `crate::core`'s [`ClientCore`], shared with
//! the simulated client; this file drives it over threads, sockets and the wall clock.

// Requests in flight move as boxes between the writer's channel, the table and these
// lists (a `Box<Parent>` is moved, never copied), so lists of boxes are meant.
#![allow(clippy::vec_box)]

use std::sync::mpsc::{channel, Receiver};
use std::sync::Arc;
use std::time::Duration;

use flashpipe_device::{
    BlockDevice, Clock, Completion, DeviceError, DeviceErrorKind, DeviceInfo, RealClock, Rejected,
    Request,
};

use flashpipe_nbd_wire as wire;

use crate::connection::{Connection, ConnectionSettings, Event, EventSender};
use crate::core::{ClientCore, ClientPolicy, Parent, RecoveryStep};
pub use crate::core::{NbdDeviceCounters, ReconnectDurability};
use crate::handshake::{negotiate, NbdExport};
use crate::tls::client_tls_for;
use crate::transport::Stream;
use crate::uri::NbdUri;

/// The device block size used when neither the caller nor the URI names one.
pub const DEFAULT_NBD_BLOCK_SIZE_BYTES: u32 = 4096;

/// How to open an NBD export as a device.
#[derive(Debug, Clone)]
pub struct NbdDeviceConfig {
    /// The export.
    pub uri: NbdUri,
    /// Most requests in flight.
    pub queue_depth: u32,
    /// Device block size; a multiple of the export's minimum block size and at most its
    /// maximum payload.
    pub block_size_bytes: u32,
    /// Send every write with `NBD_CMD_FLAG_FUA` (when the server offers FUA), so that an
    /// acknowledged write is durable without a flush.
    pub write_with_fua: bool,
    /// Reconnect attempts after a lost connection before requests fail.
    pub reconnect_attempts: u32,
    /// Wait before the first reconnect attempt; doubled each time, at most one second.
    pub reconnect_first_delay_ms: u64,
    /// Limit on connecting and on each handshake read.
    pub connect_timeout_ms: u64,
    /// How long requests in flight may go without a byte from the server before the
    /// connection counts as lost and the reconnect begins (a network partition sends no
    /// reset, so without it a request would wait forever); 0: no limit.
    pub reply_timeout_ms: u64,
    /// What a flush says after a reconnect.
    pub reconnect_durability: ReconnectDurability,
    /// Refuse writes and trims at submission (a store opened read-only), whatever the
    /// export allows.
    pub read_only: bool,
    /// Use at most this many bytes of the export (a store uses the size it recorded at
    /// mkfs even when the export has grown); the whole export when `None`.
    pub size_limit_bytes: Option<u64>,
    /// Connections to the export, requests dealt over them in turn (1 to
    /// [`MAX_NBD_CONNECTIONS`]); more than one needs a server that offers multi-conn
    /// (`NBD_FLAG_CAN_MULTI_CONN`: a flush on one connection covers writes answered on
    /// every one).
    pub connections: u32,
}

/// Most connections one device opens to its export.
pub const MAX_NBD_CONNECTIONS: u32 = 16;

impl NbdDeviceConfig {
    /// Defaults for `uri`: queue depth 32, its `x-block-size` or 4096-byte blocks, no
    /// FUA, 5 reconnect attempts from 50 ms, 10 s connect timeout, 30 s reply timeout, its
    /// `x-connections` or one connection.
    pub fn new(uri: NbdUri) -> NbdDeviceConfig {
        let block_size_bytes = uri.block_size_bytes.unwrap_or(DEFAULT_NBD_BLOCK_SIZE_BYTES);
        NbdDeviceConfig {
            uri: uri.clone(),
            queue_depth: 32,
            block_size_bytes,
            write_with_fua: false,
            reconnect_attempts: 5,
            reconnect_first_delay_ms: 50,
            connect_timeout_ms: 10_000,
            reply_timeout_ms: 30_000,
            reconnect_durability: ReconnectDurability::default(),
            read_only: false,
            size_limit_bytes: None,
            connections: uri.connections.unwrap_or(1),
        }
    }
}

/// A remote NBD export as a block device.
pub struct NbdDevice {
    core: ClientCore,
    config: NbdDeviceConfig,
    clock: Arc<dyn Clock>,
    /// One slot per connection; all `None` once the device has failed.
    connections: Vec<Option<Connection>>,
    /// Every connection's reader reports here (the device keeps a sender, so a receive
    /// never fails).
    events: Receiver<(usize, Event)>,
    event_sender: EventSender,
    next_connection: usize,
    unsent: Vec<Box<Parent>>,
}

impl std::fmt::Debug for NbdDevice {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("NbdDevice")
            .field("info", self.core.info())
            .field("export", self.core.export())
            .field("in_flight", &self.core.in_flight())
            .finish_non_exhaustive()
    }
}

fn open_error(name: &Arc<str>, detail: String) -> DeviceError {
    DeviceError::new(name, DeviceErrorKind::Open { detail })
}

fn reply_timeout(config: &NbdDeviceConfig) -> Option<Duration> {
    (config.reply_timeout_ms > 0).then(|| Duration::from_millis(config.reply_timeout_ms))
}

/// Connects and negotiates; the error says which step failed.
fn connect(config: &NbdDeviceConfig) -> Result<(Stream, NbdExport), String> {
    let tls = client_tls_for(&config.uri)?;
    let timeout = Duration::from_millis(config.connect_timeout_ms.max(1));
    let mut stream = Stream::connect(&config.uri.address, timeout)
        .map_err(|error| format!("cannot connect: {error}"))?;
    stream
        .set_read_timeout(Some(timeout))
        .map_err(|error| format!("cannot set the handshake timeout: {error}"))?;
    let export = negotiate(&mut stream, &config.uri.export_name, tls.as_ref())?;
    stream
        .set_read_timeout(None)
        .map_err(|error| format!("cannot clear the handshake timeout: {error}"))?;
    Ok((stream, export))
}

impl NbdDevice {
    /// Connects to the export, negotiates, and checks that the device block size suits
    /// it. Errors are [`DeviceErrorKind::Open`] naming the URI.
    pub fn open(config: NbdDeviceConfig) -> Result<NbdDevice, DeviceError> {
        let name: Arc<str> = Arc::from(config.uri.as_str());
        config
            .uri
            .require_supported()
            .map_err(|error| open_error(&name, error.reason))?;
        flashpipe_device::request::check_queue_depth(&name, config.queue_depth)?;
        if !(1..=MAX_NBD_CONNECTIONS).contains(&config.connections) {
            return Err(open_error(
                &name,
                format!(
                    "{} connections outside 1..={MAX_NBD_CONNECTIONS}",
                    config.connections
                ),
            ));
        }
        let (stream, export) = connect(&config).map_err(|detail| open_error(&name, detail))?;
        let block_count =
            check_export(&config, &export).map_err(|detail| open_error(&name, detail))?;
        if config.connections > 1 && !export.has_flag(wire::TRANSMISSION_FLAG_CAN_MULTI_CONN) {
            return Err(open_error(
                &name,
                format!(
                    "{} connections asked for, but the server does not offer multi-conn (NBD_FLAG_CAN_MULTI_CONN): use one",
                    config.connections
                ),
            ));
        }
        let (event_sender, events) = channel();
        let info = DeviceInfo {
            name: Arc::clone(&name),
            block_size_bytes: config.block_size_bytes,
            block_count,
            queue_depth: config.queue_depth,
        };
        let mut device = NbdDevice {
            core: ClientCore::new(info, export, policy_of(&config)),
            clock: RealClock::shared(),
            connections: Vec::with_capacity(config.connections as usize),
            events,
            event_sender,
            next_connection: 0,
            config,
            unsent: Vec::new(),
        };
        let first = device
            .start_connection(stream, export, 0)
            .map_err(|detail| open_error(&name, detail))?;
        device.connections.push(Some(first));
        for slot in 1..device.config.connections as usize {
            let connection = device
                .connect_again(slot)
                .map_err(|detail| open_error(&name, detail))?;
            device.connections.push(Some(connection));
        }
        Ok(device)
    }

    /// What the server said about the export.
    pub fn export(&self) -> &NbdExport {
        self.core.export()
    }

    /// Connections lost, reconnects, requests re-issued.
    pub fn counters(&self) -> NbdDeviceCounters {
        self.core.counters()
    }

    /// How many times the reply timeout passed on a live connection with nothing in flight,
    /// summed over the connections open now: an idle connection is kept, and this count is
    /// how a caller (a test) sees that the timeout ran without ending it.
    pub fn idle_reply_timeouts(&self) -> u64 {
        self.connections
            .iter()
            .flatten()
            .map(Connection::idle_timeouts)
            .sum()
    }

    /// Takes in one reader event: a completion (with the durability bookkeeping) or a
    /// lost connection (reconnect and re-issue, or fail everything).
    fn handle_event(&mut self, slot: usize, event: Event) {
        match event {
            Event::Completed {
                completion,
                command,
                flags,
                covers_acknowledged_writes,
            } => self
                .core
                .complete(completion, command, flags, covers_acknowledged_writes),
            // A connection closed after the device failed reports a loss no one recovers.
            Event::Lost { reason } => self.recover(slot, reason),
        }
    }

    /// After connection `slot` was lost: collect what it had not answered, reconnect it
    /// with backoff and send it again; or, when that fails, close every connection and
    /// complete every unanswered request with an error naming the device.
    fn recover(&mut self, slot: usize, reason: String) {
        let Some(connection) = self.connections[slot].take() else {
            return;
        };
        let mut pending = connection.close(false);
        pending.append(&mut self.unsent);
        let (mut pending, attempt) = match self.core.begin_recovery(pending) {
            RecoveryStep::GiveUp(pending, why) => (pending, Err(why)),
            RecoveryStep::Reconnect(pending) => (pending, self.reconnect(slot)),
        };
        match attempt {
            Ok(connection) => {
                for parent in self.core.reissue(pending) {
                    if let Err(parent) = connection.send(parent) {
                        // The new connection failed at once: its Lost event follows.
                        self.unsent.push(parent);
                    }
                }
                self.connections[slot] = Some(connection);
            }
            Err(last_attempt) => {
                for other in self.connections.iter_mut().filter_map(Option::take) {
                    pending.extend(other.close(false));
                }
                self.core.fail_everything(pending, &reason, &last_attempt);
            }
        }
    }

    fn reconnect(&mut self, slot: usize) -> Result<Connection, String> {
        let mut last_error = "no attempt made (reconnect_attempts is 0)".to_string();
        for attempt in 0..self.config.reconnect_attempts {
            let delay_ms = self.core.policy().reconnect_delay_ms(attempt);
            std::thread::sleep(Duration::from_millis(delay_ms));
            match self.connect_again(slot) {
                Ok(connection) => return Ok(connection),
                Err(error) => last_error = error,
            }
        }
        Err(last_error)
    }

    /// A new connection in `slot`, to the same export as the first.
    fn connect_again(&self, slot: usize) -> Result<Connection, String> {
        let (stream, export) = connect(&self.config)?;
        self.core.check_same_export(&export)?;
        self.start_connection(stream, export, slot)
    }

    fn start_connection(
        &self,
        stream: Stream,
        export: NbdExport,
        slot: usize,
    ) -> Result<Connection, String> {
        let settings = ConnectionSettings {
            device_name: Arc::clone(&self.core.info().name),
            export,
            reply_timeout: reply_timeout(&self.config),
        };
        Connection::start(stream, settings, slot, self.event_sender.clone())
            .map_err(|error| format!("cannot start the connection threads: {error}"))
    }

    /// Takes in every event already reported.
    fn drain_events(&mut self) {
        while let Ok((slot, event)) = self.events.try_recv() {
            self.handle_event(slot, event);
        }
    }
}

/// The driver-independent part of a configuration.
fn policy_of(config: &NbdDeviceConfig) -> ClientPolicy {
    ClientPolicy {
        write_with_fua: config.write_with_fua,
        read_only: config.read_only,
        reconnect_attempts: config.reconnect_attempts,
        reconnect_first_delay_ms: config.reconnect_first_delay_ms,
        reconnect_durability: config.reconnect_durability,
    }
}

/// Checks the device block size against the export; returns the device's block count.
fn check_export(config: &NbdDeviceConfig, export: &NbdExport) -> Result<u64, String> {
    let block = config.block_size_bytes;
    if !block.is_power_of_two() || block < 512 {
        return Err(format!(
            "device block size {block} is not a power of two of at least 512 bytes"
        ));
    }
    if block % export.minimum_block_bytes != 0 {
        return Err(format!(
            "the export's minimum block size {} does not divide the device block size {block} (choose one with ?x-block-size=)",
            export.minimum_block_bytes
        ));
    }
    if block > export.maximum_payload_bytes {
        return Err(format!(
            "the device block size {block} is above the export's maximum payload {}",
            export.maximum_payload_bytes
        ));
    }
    let usable_bytes = config
        .size_limit_bytes
        .map_or(export.size_bytes, |limit| limit.min(export.size_bytes));
    let block_count = usable_bytes / u64::from(block);
    if block_count == 0 {
        return Err(format!(
            "the export holds {} bytes, less than one {block}-byte block",
            export.size_bytes
        ));
    }
    Ok(block_count)
}

impl BlockDevice for NbdDevice {
    fn info(&self) -> &DeviceInfo {
        self.core.info()
    }

    fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.clock)
    }

    fn submit(&mut self, request: Request) -> Result<(), Rejected> {
        let Some(parent) = self.core.admit(request)? else {
            return Ok(());
        };
        let slot = self.next_connection % self.connections.len();
        self.next_connection = self.next_connection.wrapping_add(1);
        let connection = self.connections[slot]
            .as_ref()
            .expect("a device that has not failed has all its connections");
        if let Err(parent) = connection.send(parent) {
            // The writer has stopped: the reader's Lost event follows, and the recovery
            // it starts re-issues this request with the others.
            self.unsent.push(parent);
        }
        Ok(())
    }

    fn poll_completions(&mut self, completions: &mut Vec<Completion>) -> usize {
        self.drain_events();
        self.core.hand_over(completions)
    }

    fn wait_completions(
        &mut self,
        completions: &mut Vec<Completion>,
    ) -> Result<usize, DeviceError> {
        loop {
            self.drain_events();
            if let Some(answer) = self.core.hand_over_without_waiting(completions) {
                return answer;
            }
            // Requests in flight are on a connection, or completed in this channel.
            let (slot, event) = self
                .events
                .recv()
                .expect("the device holds a sender of its own event channel");
            self.handle_event(slot, event);
        }
    }

    fn in_flight(&self) -> usize {
        self.core.in_flight()
    }
}

impl Drop for NbdDevice {
    fn drop(&mut self) {
        let nothing_in_flight = self.core.in_flight() == self.core.ready_count();
        for connection in self.connections.iter_mut().filter_map(Option::take) {
            drop(connection.close(nothing_in_flight));
        }
    }
}
