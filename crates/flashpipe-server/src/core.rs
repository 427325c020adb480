//! [`StoreServerCore`]: the store server's request rules for one connection, with no
//! socket, no thread and no clock. A command frame goes in; the core checks it against
//! the connection's limits (requests in flight, bytes in flight, the write size), records
//! it in the in-flight table and hands back the engine command (its write payload mapped
//! by the host: bytes from the frame, or a granted slot); an engine reply goes in and
//! the answer frame comes out, the request's bytes and read reservation given back.
//!
//! What is memory or shared between connections stays with the host ([`CoreHost`]): the
//! read handles and write grants of a mapping client, and the server-wide byte budget.
//! The real connection (`connection.rs`, `replies.rs`) drives a core behind one lock
//! shared by its reading and answering threads; the campaign runner (`flashpipe-vopr`)
//! drives one over the stepped engine, so both run this code.

use std::collections::HashMap;

use flashpipe_api::{Command, Payloads, Reply};
use flashpipe_engine::Reply as EngineReply;
use flashpipe_fs::FsckReport;
use flashpipe_protocol::{
    CheckSummary, DataPayload, ErrorCode, Frame, RemoteError, RequestId, Response, WireCommand,
    WireReply, WritePayload,
};

/// One connection's limits, as the server announced them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoreLimits {
    /// Most requests in flight.
    pub max_in_flight: usize,
    /// Most bytes one write may carry.
    pub max_write_bytes: u64,
    /// Most bytes this connection's requests may hold in flight.
    pub max_bytes_in_flight: u64,
    /// The largest read one command may ask for.
    pub max_read_bytes: u64,
    /// Most bytes one read-files command may ask for.
    pub max_read_files_bytes: u64,
}

/// One request handed to the engine and not yet answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InFlight {
    /// Bytes it holds of the connection's and the server's budgets.
    pub bytes: u64,
    /// A read answered by reference: a read handle is reserved for its answer.
    pub holds_handle: bool,
    /// A write from this granted slot of the client's write pool.
    pub granted_slot: Option<u32>,
    /// A read into a client's region (version 6): answered read-into-done, no handle.
    pub into_region: bool,
}

/// What a core needs of the connection it serves: its shared memory (read handles,
/// write grants) and the server-wide byte budget.
pub trait CoreHost {
    /// The engine's payloads (the commands the core hands out carry its writes).
    type Engine: Payloads;

    /// Reserves a read handle for a read answered by reference: `Ok(true)` when
    /// reserved, `Ok(false)` when reads go inline (a copying connection), or why not.
    fn reserve_read_handle(&self) -> Result<bool, RemoteError>;
    /// Gives back a reservation made by [`CoreHost::reserve_read_handle`].
    fn cancel_read_handle(&self);
    /// A write by grant was refused: the slot is no longer the client's.
    fn forfeit_grant(&self, slot: u32);
    /// Takes `bytes` of the server-wide budget, or names its limit.
    fn take_server_bytes(&self, bytes: u64) -> Result<(), RemoteError>;
    /// Gives back bytes taken with [`CoreHost::take_server_bytes`].
    fn give_back_server_bytes(&self, bytes: u64);
    /// The engine's write payload of a wire write (bytes copied in, or the granted slot
    /// taken back from the client), or why it cannot be had (a write by grant on a
    /// connection without grants, a slot not granted, more than `max_write_bytes`; the
    /// inline bytes were checked against it already).
    fn engine_write(
        &self,
        data: WritePayload,
        max_write_bytes: u64,
    ) -> Result<<Self::Engine as Payloads>::Write, RemoteError>;
}

/// Why a request was not admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// Answer this request with the error; the connection goes on.
    Request(RemoteError),
    /// The client broke the protocol: end the connection with the error.
    Connection(RemoteError),
}

/// The request rules of one connection (module doc).
#[derive(Debug)]
pub struct StoreServerCore {
    limits: CoreLimits,
    in_flight: HashMap<RequestId, InFlight>,
    bytes_in_flight: u64,
}

impl StoreServerCore {
    /// A core with nothing in flight.
    pub fn new(limits: CoreLimits) -> StoreServerCore {
        StoreServerCore {
            limits,
            in_flight: HashMap::new(),
            bytes_in_flight: 0,
        }
    }

    /// Requests in flight now.
    pub fn in_flight_count(&self) -> usize {
        self.in_flight.len()
    }

    /// True while request `request_id` is in flight.
    pub fn is_in_flight(&self, request_id: RequestId) -> bool {
        self.in_flight.contains_key(&request_id)
    }

    /// Bytes this connection's requests hold now.
    pub fn bytes_in_flight(&self) -> u64 {
        self.bytes_in_flight
    }

    /// Admits `command` under `request_id` and hands back the engine's command, its
    /// write payload mapped by `host`. A command refused before the engine holds
    /// nothing (a refused write by grant has given up its grant).
    pub fn admit_command<H: CoreHost>(
        &mut self,
        host: &H,
        request_id: RequestId,
        command: WireCommand,
    ) -> Result<Command<H::Engine>, Refused> {
        let granted_slot = granted_slot(&command);
        if let Err(refused) = self.admit(host, request_id, Some(&command)) {
            if let (Refused::Request(_), Some(slot)) = (&refused, granted_slot) {
                host.forfeit_grant(slot);
            }
            return Err(refused);
        }
        command
            .map_write(|data| host.engine_write(data, self.limits.max_write_bytes))
            .map_err(|error| {
                self.abandon(host, request_id);
                Refused::Request(error)
            })
    }

    /// Admits a read into a client's region under `request_id`: a read for the limits
    /// (in flight, bytes) that reserves no read handle; hands back the engine's read.
    pub fn admit_read_into<H: CoreHost>(
        &mut self,
        host: &H,
        request_id: RequestId,
        command: WireCommand,
    ) -> Result<Command<H::Engine>, Refused> {
        assert!(
            matches!(command, Command::Read { .. }),
            "a read into a region is a read"
        );
        self.admit_as(host, request_id, Some(&command), true)?;
        command
            .map_write(|data| host.engine_write(data, self.limits.max_write_bytes))
            .map_err(|error| {
                self.abandon(host, request_id);
                Refused::Request(error)
            })
    }

    /// Admits a kernel run under `request_id` (it counts as one request in flight and
    /// holds no bytes).
    pub fn admit_kernel_run<H: CoreHost>(
        &mut self,
        host: &H,
        request_id: RequestId,
    ) -> Result<(), Refused> {
        self.admit(host, request_id, None)
    }

    /// Removes an answered request, giving back its bytes; `None` when it was not in
    /// flight.
    pub fn finish<H: CoreHost>(&mut self, host: &H, request_id: RequestId) -> Option<InFlight> {
        let entry = self.in_flight.remove(&request_id)?;
        assert!(
            self.bytes_in_flight >= entry.bytes,
            "connection bytes in flight went below zero"
        );
        self.bytes_in_flight -= entry.bytes;
        host.give_back_server_bytes(entry.bytes);
        Some(entry)
    }

    /// Forgets a request that never reached the engine (or never will answer): its
    /// bytes and its reserved read handle go back.
    pub fn abandon<H: CoreHost>(&mut self, host: &H, request_id: RequestId) {
        if let Some(entry) = self.finish(host, request_id) {
            if entry.holds_handle {
                host.cancel_read_handle();
            }
        }
    }

    /// The answer frame of an engine completion of request `request_id`: its reply with
    /// the payloads mapped by `map` (given the request's in-flight entry), or its error
    /// (a reserved read handle given back). `None` when the request is not in flight
    /// (the engine answered something never admitted: a bug of the host).
    pub fn answer<H: CoreHost, E>(
        &mut self,
        host: &H,
        request_id: RequestId,
        result: Result<Reply<H::Engine>, E>,
        to_api: impl FnOnce(E) -> RemoteError,
        map: impl FnOnce(Reply<H::Engine>, &InFlight) -> WireReply,
    ) -> Option<Frame> {
        let entry = self.finish(host, request_id)?;
        Some(match result {
            Ok(reply) => Frame::Response {
                request_id,
                response: Response::Reply(map(reply, &entry)),
            },
            Err(error) => {
                if entry.holds_handle {
                    host.cancel_read_handle();
                }
                Frame::Error {
                    request_id,
                    error: to_api(error),
                }
            }
        })
    }

    /// Checks the in-flight, byte and read-handle limits and records the request
    /// (`None`: a kernel run) as in flight.
    fn admit<H: CoreHost>(
        &mut self,
        host: &H,
        request_id: RequestId,
        command: Option<&WireCommand>,
    ) -> Result<(), Refused> {
        self.admit_as(host, request_id, command, false)
    }

    /// [`StoreServerCore::admit`], for a read into a client's region when `into_region`
    /// (no read handle reserved).
    fn admit_as<H: CoreHost>(
        &mut self,
        host: &H,
        request_id: RequestId,
        command: Option<&WireCommand>,
        into_region: bool,
    ) -> Result<(), Refused> {
        if let Some(Command::Write {
            data: WritePayload::Inline(bytes),
            ..
        }) = command
        {
            self.check_write_length(bytes.len() as u64)
                .map_err(Refused::Request)?;
        }
        if self.in_flight.contains_key(&request_id) {
            return Err(Refused::Connection(RemoteError::new(
                ErrorCode::MalformedFrame,
                format!("request id {request_id} is already in flight on this connection"),
            )));
        }
        let limit = self.limits.max_in_flight;
        if self.in_flight.len() >= limit {
            return Err(Refused::Request(RemoteError::limit(
                ErrorCode::TooManyInFlight,
                format!("this client already has {limit} requests in flight, its limit; wait for answers first"),
                limit as u64,
            )));
        }
        let is_read = matches!(
            command,
            Some(Command::Read { .. } | Command::ReadFiles { .. })
        );
        let holds_handle =
            is_read && !into_region && host.reserve_read_handle().map_err(Refused::Request)?;
        let bytes = command.map_or(0, |command| self.command_bytes(command));
        if let Err(error) = self.take_bytes(host, bytes) {
            if holds_handle {
                host.cancel_read_handle();
            }
            return Err(Refused::Request(error));
        }
        self.in_flight.insert(
            request_id,
            InFlight {
                bytes,
                holds_handle,
                granted_slot: command.and_then(granted_slot),
                into_region,
            },
        );
        Ok(())
    }

    /// Bytes a command holds while in flight: its write data, or what its read may
    /// bring.
    fn command_bytes(&self, command: &WireCommand) -> u64 {
        match command {
            Command::Write { data, .. } => data.length_bytes(),
            Command::Read { length_bytes, .. } => (*length_bytes).min(self.limits.max_read_bytes),
            Command::ReadFiles { names } => (names.len() as u64)
                .saturating_mul(self.limits.max_read_bytes)
                .min(self.limits.max_read_files_bytes),
            _ => 0,
        }
    }

    fn check_write_length(&self, length_bytes: u64) -> Result<(), RemoteError> {
        check_write_length(length_bytes, self.limits.max_write_bytes)
    }

    /// Takes `bytes` of the connection's and the server's budgets, or names the limit.
    fn take_bytes<H: CoreHost>(&mut self, host: &H, bytes: u64) -> Result<(), RemoteError> {
        let limit = self.limits.max_bytes_in_flight;
        if self.bytes_in_flight + bytes > limit {
            return Err(RemoteError::limit(
                ErrorCode::ClientBytesInFlight,
                format!(
                    "request of {bytes} bytes refused: this client already has {} bytes in flight, its limit is {limit}",
                    self.bytes_in_flight
                ),
                limit,
            ));
        }
        host.take_server_bytes(bytes)?;
        self.bytes_in_flight += bytes;
        Ok(())
    }
}

/// Refuses a write of more than `limit` bytes, naming the limit.
pub fn check_write_length(length_bytes: u64, limit: u64) -> Result<(), RemoteError> {
    if length_bytes > limit {
        return Err(RemoteError::limit(
            ErrorCode::WriteTooLarge,
            format!(
                "write of {length_bytes} bytes exceeds the server's limit of {limit} bytes per request"
            ),
            limit,
        ));
    }
    Ok(())
}

/// The write-pool slot a write by grant names.
pub fn granted_slot(command: &WireCommand) -> Option<u32> {
    match command {
        Command::Write {
            data: WritePayload::Granted { slot, .. },
            ..
        } => Some(*slot),
        _ => None,
    }
}

/// The wire reply of an engine reply on the copying path: read data inline (copied once),
/// a write's length, a check's summary.
pub fn inline_reply(reply: EngineReply) -> WireReply {
    match reply {
        Reply::Done => Reply::Done,
        Reply::Written { buffer } => Reply::Written {
            buffer: buffer.len() as u64,
        },
        Reply::Data(data) => Reply::Data(DataPayload::Inline(data.bytes().to_vec())),
        Reply::Files(files) => Reply::Files(
            files
                .into_iter()
                .map(|file| {
                    file.map(|data| DataPayload::Inline(data.bytes().to_vec()))
                        .map_err(|error| error.to_api())
                })
                .collect(),
        ),
        Reply::Stat(stat) => Reply::Stat(stat),
        Reply::List(stats) => Reply::List(stats),
        Reply::Stats(stats) => Reply::Stats(stats),
        Reply::Check(report) => Reply::Check(check_summary(&report)),
        Reply::Copied(report) => Reply::Copied(report),
    }
}

/// What a client is told of a check.
fn check_summary(report: &FsckReport) -> CheckSummary {
    CheckSummary {
        clean: report.is_clean(),
        commit_sequence: report.commit_sequence,
        file_count: report.file_count,
        findings: report.findings.iter().map(ToString::to_string).collect(),
        report_text: report.to_string(),
    }
}
