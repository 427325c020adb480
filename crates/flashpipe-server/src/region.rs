//! A connection's destination regions (protocol version 6, docs/protocol.md "Reads into
//! a client region"): memfds a client passes beside register-region frames, mapped once
//! read-write, and read-into requests whose bytes the engine reads straight into them.
//!
//! Descriptors ride on the socket's bytes (`SCM_RIGHTS`), so the connection reads its
//! socket through [`RequestSocket`], which keeps every descriptor that came in
//! [`ReceivedFds`] (bounded); a register-region frame takes the oldest one. A region is
//! checked before it is mapped (`flashpipe_shm::SharedMapping::map`: a memfd sealed
//! against shrinking and growing, at least the size asked) and counted against the
//! client's limits ([`crate::ServerConfig::max_regions_per_client`], `..._bytes_...`).
//! Each read-into is checked against its region's size, the device alignment and the
//! block size before the engine sees it; its destination buffer holds the region's
//! mapping (`Arc`), so a region unregistered or a connection closed with reads in flight
//! stays mapped until they complete.

use std::collections::{HashMap, VecDeque};
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};

use flashpipe_api::Command;
use flashpipe_device::IoBuf;
use flashpipe_protocol::{
    regions_supported, ErrorCode, Frame, ReadInto, RegionRequest, RegionResponse, RemoteError,
    RequestId, Response, REGION_OFFSET_ALIGNMENT_BYTES, REGION_PROTOCOL_VERSION,
};
use flashpipe_shm::{receive_with_fds, MapAccess, SharedMapping, MAX_FDS_PER_MESSAGE};

use crate::connection::{Connection, ToEngine};
use crate::core::Refused;

/// Most descriptors a connection keeps waiting for their register-region frames; more
/// are closed as they come.
pub(crate) const MAX_PENDING_FDS: usize = 16;

/// Descriptors received on a connection's socket and not yet taken by a register frame.
#[derive(Debug, Default, Clone)]
pub(crate) struct ReceivedFds {
    fds: Arc<Mutex<VecDeque<OwnedFd>>>,
}

impl ReceivedFds {
    fn push(&self, received: Vec<OwnedFd>) {
        let mut fds = self.fds.lock().expect("no panic holding received fds");
        for fd in received {
            if fds.len() < MAX_PENDING_FDS {
                fds.push_back(fd);
            } else {
                tracing::debug!(
                    "descriptor beyond {MAX_PENDING_FDS} waiting for register frames; closed"
                );
            }
        }
    }

    fn take(&self) -> Option<OwnedFd> {
        self.fds
            .lock()
            .expect("no panic holding received fds")
            .pop_front()
    }
}

/// A connection's socket as the requests' byte stream: each read keeps the descriptors
/// that came with its bytes.
pub(crate) struct RequestSocket {
    stream: UnixStream,
    fds: ReceivedFds,
}

impl RequestSocket {
    /// Reads `stream`, keeping its descriptors in `fds`.
    pub(crate) fn new(stream: UnixStream, fds: ReceivedFds) -> RequestSocket {
        RequestSocket { stream, fds }
    }

    /// The socket, for reading without descriptors (the rings' watcher).
    pub(crate) fn into_stream(self) -> UnixStream {
        self.stream
    }
}

impl Read for RequestSocket {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        let (count, fds) = receive_with_fds(&self.stream, buffer, MAX_FDS_PER_MESSAGE)?;
        if !fds.is_empty() {
            self.fds.push(fds);
        }
        Ok(count)
    }
}

/// One registered region.
struct Region {
    mapping: Arc<SharedMapping>,
}

/// A connection's registered regions and its limits.
pub(crate) struct Regions {
    received: ReceivedFds,
    max_regions: usize,
    max_bytes: u64,
    table: Mutex<RegionTable>,
}

#[derive(Default)]
struct RegionTable {
    next_id: u64,
    regions: HashMap<u64, Region>,
    bytes: u64,
}

impl Regions {
    /// No region yet; descriptors come through `received`.
    pub(crate) fn new(received: ReceivedFds, max_regions: usize, max_bytes: u64) -> Regions {
        Regions {
            received,
            max_regions,
            max_bytes,
            table: Mutex::new(RegionTable::default()),
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, RegionTable> {
        self.table
            .lock()
            .expect("no panic holding the region table")
    }

    /// Registers the oldest received descriptor as a region of `length_bytes`.
    fn register(&self, length_bytes: u64) -> Result<u64, RemoteError> {
        let fd = self.received.take().ok_or_else(|| {
            bad_buffer(
                "register-region came without a descriptor: send the memfd beside the frame \
                 (SCM_RIGHTS) on the socket"
                    .to_string(),
            )
        })?;
        self.check_room(length_bytes)?;
        let size_bytes = usize::try_from(length_bytes)
            .map_err(|_| bad_buffer(format!("a region of {length_bytes} bytes is too large")))?;
        let mapping = SharedMapping::map(fd, size_bytes, MapAccess::ReadWrite)
            .map_err(|error| bad_buffer(format!("region refused: {error}")))?;
        let mut table = self.table();
        if table.regions.len() >= self.max_regions || table.bytes + length_bytes > self.max_bytes {
            drop(table);
            return Err(self.room_error(length_bytes));
        }
        table.next_id += 1;
        let id = table.next_id;
        table.bytes += length_bytes;
        table.regions.insert(
            id,
            Region {
                mapping: Arc::new(mapping),
            },
        );
        Ok(id)
    }

    /// Refuses a region past the client's count or byte limit (checked again under the
    /// lock when it is kept).
    fn check_room(&self, length_bytes: u64) -> Result<(), RemoteError> {
        let table = self.table();
        let fits = table.regions.len() < self.max_regions
            && table
                .bytes
                .checked_add(length_bytes)
                .is_some_and(|bytes| bytes <= self.max_bytes);
        drop(table);
        if fits {
            Ok(())
        } else {
            Err(self.room_error(length_bytes))
        }
    }

    fn room_error(&self, length_bytes: u64) -> RemoteError {
        let table = self.table();
        if table.regions.len() >= self.max_regions {
            return RemoteError::limit(
                ErrorCode::BadBuffer,
                format!(
                    "this client has {} regions registered, its limit; unregister one first",
                    self.max_regions
                ),
                self.max_regions as u64,
            );
        }
        RemoteError::limit(
            ErrorCode::BadBuffer,
            format!(
                "a region of {length_bytes} bytes would take this client's registered bytes \
                 from {} past its limit of {}; unregister regions or register a smaller one",
                table.bytes, self.max_bytes
            ),
            self.max_bytes,
        )
    }

    /// Forgets region `id`; a read into it in flight keeps its mapping until it is done.
    fn unregister(&self, id: u64) -> Result<(), RemoteError> {
        let mut table = self.table();
        let region = table
            .regions
            .remove(&id)
            .ok_or_else(|| unknown_region(id))?;
        table.bytes -= region.mapping.size_bytes() as u64;
        Ok(())
    }

    /// The destination buffer of `read` in its region: `span_bytes` from its region
    /// offset, checked to lie inside the region.
    fn destination(&self, read: &ReadInto, span_bytes: u64) -> Result<IoBuf, RemoteError> {
        let table = self.table();
        let region = table
            .regions
            .get(&read.region)
            .ok_or_else(|| unknown_region(read.region))?;
        let size_bytes = region.mapping.size_bytes() as u64;
        let end = read.region_offset_bytes.checked_add(span_bytes);
        if end.is_none_or(|end| end > size_bytes) {
            return Err(RemoteError::limit(
                ErrorCode::BadBuffer,
                format!(
                    "read-into of {} bytes ({span_bytes} with its last block) at offset {} \
                     leaves region {} of {size_bytes} bytes; read less or into a larger region",
                    read.length_bytes, read.region_offset_bytes, read.region
                ),
                size_bytes,
            ));
        }
        let mapping = Arc::clone(&region.mapping);
        let start = mapping.as_ptr().cast_mut();
        // SAFETY: the window lies inside the mapping (checked above), which the buffer
        // keeps alive through its `Arc`; the start is page-aligned plus a multiple of
        // the I/O alignment (checked by the caller); the client promises not to give the
        // server overlapping ranges in flight (docs/protocol.md), and the server itself
        // touches a region only through these buffers.
        Ok(unsafe {
            IoBuf::foreign(
                start.add(read.region_offset_bytes as usize),
                span_bytes as usize,
                mapping,
            )
        })
    }
}

fn bad_buffer(message: String) -> RemoteError {
    RemoteError::new(ErrorCode::BadBuffer, message)
}

fn unknown_region(id: u64) -> RemoteError {
    bad_buffer(format!(
        "region {id} is not registered on this connection; register it first"
    ))
}

/// What the connection does after a region request: go on, or close with the error
/// (a request id already in flight).
pub(crate) type RegionOutcome = Result<(), RemoteError>;

/// Answers or starts one region request.
pub(crate) fn take_region_request(
    connection: &Arc<Connection>,
    request_id: RequestId,
    request: RegionRequest,
    to_engine: &mut ToEngine<'_>,
) -> RegionOutcome {
    if !regions_supported(connection.version) {
        let version = connection.version;
        let error = RemoteError::limit(
            ErrorCode::UnsupportedVersion,
            format!(
                "region requests need protocol version {REGION_PROTOCOL_VERSION}; this \
                 connection speaks version {version}: upgrade the client"
            ),
            u64::from(REGION_PROTOCOL_VERSION),
        );
        connection.refuse(request_id, error);
        return Ok(());
    }
    let answer = match request {
        RegionRequest::Register { length_bytes } => connection
            .regions
            .register(length_bytes)
            .map(|region| RegionResponse::Registered {
                region,
                block_bytes: connection.state.commands.block_bytes() as u32,
            })
            .map(Response::Region),
        RegionRequest::Unregister { region } => connection
            .regions
            .unregister(region)
            .map(|()| Response::Reply(flashpipe_api::Reply::Done)),
        RegionRequest::ReadInto(read) => {
            return start_read_into(connection, request_id, read, to_engine)
        }
    };
    match answer {
        Ok(response) => connection.send(&Frame::Response {
            request_id,
            response,
        }),
        Err(error) => connection.refuse(request_id, error),
    }
    Ok(())
}

/// Checks a read-into, admits it and hands it to the engine with its destination.
fn start_read_into(
    connection: &Arc<Connection>,
    request_id: RequestId,
    read: ReadInto,
    to_engine: &mut ToEngine<'_>,
) -> RegionOutcome {
    let destination = match checked_destination(connection, &read) {
        Ok(destination) => destination,
        Err(error) => {
            connection.refuse(request_id, error);
            return Ok(());
        }
    };
    let command = Command::Read {
        name: read.name.clone(),
        offset_bytes: read.offset_bytes,
        length_bytes: read.length_bytes,
    };
    match connection.admit_read_into(request_id, command) {
        Ok(()) => {}
        Err(Refused::Request(error)) => {
            connection.refuse(request_id, error);
            return Ok(());
        }
        Err(Refused::Connection(error)) => return Err(error),
    }
    let engine_read = flashpipe_engine::Command::Read {
        name: read.name,
        offset_bytes: read.offset_bytes,
        length_bytes: read.length_bytes,
    };
    let submitted = to_engine(request_id, engine_read, Some(destination));
    if let Err(error) = submitted {
        connection.abandon(request_id);
        connection.refuse(request_id, error.to_api());
    }
    Ok(())
}

/// The destination of a read-into after its checks: a read no longer than the server's
/// read limit, a file offset on a block, a region offset on the I/O alignment, and the
/// length rounded up to whole blocks inside the region.
fn checked_destination(connection: &Connection, read: &ReadInto) -> Result<IoBuf, RemoteError> {
    let max_read_bytes = connection.state.limits.max_read_bytes;
    if read.length_bytes > max_read_bytes {
        return Err(RemoteError::limit(
            ErrorCode::ReadTooLarge,
            format!(
                "read-into of {} bytes exceeds the server's limit of {max_read_bytes} bytes \
                 per read; split it",
                read.length_bytes
            ),
            max_read_bytes,
        ));
    }
    let block_bytes = connection.state.commands.block_bytes();
    if read.offset_bytes % block_bytes != 0 {
        return Err(RemoteError::limit(
            ErrorCode::BadBuffer,
            format!(
                "read-into at file offset {} does not start on a block of {block_bytes} \
                 bytes; start it on a multiple of the block size",
                read.offset_bytes
            ),
            block_bytes,
        ));
    }
    if read.region_offset_bytes % REGION_OFFSET_ALIGNMENT_BYTES != 0 {
        return Err(RemoteError::limit(
            ErrorCode::BadBuffer,
            format!(
                "read-into at region offset {} is not a multiple of \
                 {REGION_OFFSET_ALIGNMENT_BYTES} bytes; align it",
                read.region_offset_bytes
            ),
            REGION_OFFSET_ALIGNMENT_BYTES,
        ));
    }
    let span_bytes = read.length_bytes.div_ceil(block_bytes) * block_bytes;
    connection.regions.destination(read, span_bytes)
}
