//! Reads into this process's own memory (protocol version 6, docs/protocol.md "Reads
//! into a client region"): the client creates a sealed memfd ([`SharedMemory`]), passes
//! it to the server beside a register-region frame ([`Client::register_region`]) and
//! asks for file ranges to be read straight into it ([`Client::read_into`]); the bytes
//! land in this process's mapping of the memfd with no copy on either side.
//!
//! Only a connection on the socket registers (a descriptor rides on socket bytes; a
//! connection on rings cannot send one), and only with a server of version 6 or later
//! ([`Client::supports_regions`]); everything else reads through the pool or inline.

use std::sync::Arc;

use flashpipe_protocol::{
    encode_frame, regions_supported, Frame, ReadInto, RegionRequest, RegionResponse, Request,
    RequestId, REGION_OFFSET_ALIGNMENT_BYTES, REGION_PROTOCOL_VERSION,
};
use flashpipe_shm::{send_with_fds, SharedMemory};

use super::{Client, Link, Response};
use crate::error::ClientError;

/// A region of this process's memory registered with the server: reads into it land
/// in [`SharedMemory::as_mut_ptr`]'s bytes. Unregister it with
/// [`Client::unregister_region`]; dropping it without leaves it registered until the
/// connection closes.
#[derive(Debug, Clone)]
pub struct DestinationRegion {
    memory: Arc<SharedMemory>,
    id: u64,
    block_bytes: u64,
}

impl DestinationRegion {
    /// The server's id of the region.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The store's block size: a read into the region starts on a multiple of it and
    /// needs its length rounded up to it of room.
    pub fn block_bytes(&self) -> u64 {
        self.block_bytes
    }

    /// The memory (its mapping in this process).
    pub fn memory(&self) -> &Arc<SharedMemory> {
        &self.memory
    }

    /// Bytes in the region.
    pub fn size_bytes(&self) -> usize {
        self.memory.size_bytes()
    }
}

impl Client {
    /// True when this connection may register regions: the server speaks protocol
    /// version 6 or later and the connection's frames go on the socket.
    pub fn supports_regions(&self) -> bool {
        regions_supported(self.info.version) && matches!(self.link, Link::Socket(_))
    }

    /// Registers `memory` (a [`SharedMemory`], sealed at creation) as a destination
    /// region. Refused before sending when the connection cannot
    /// ([`Client::supports_regions`]); the server refuses a region past its per-client
    /// limits (`BadBuffer` with the limit).
    pub fn register_region(
        &mut self,
        memory: Arc<SharedMemory>,
    ) -> Result<DestinationRegion, ClientError> {
        self.check_regions()?;
        let request = Request::Region(RegionRequest::Register {
            length_bytes: memory.size_bytes() as u64,
        });
        let request_id = self.next_request_id;
        self.next_request_id += 1;
        self.release_now()?;
        let bytes = encode_frame(&Frame::Request {
            request_id,
            request,
        });
        send_with_fds(&self.socket, &bytes, &[memory.as_fd()])
            .map_err(ClientError::ConnectionLost)?;
        self.in_flight.insert(request_id);
        match self.wait_for(request_id)? {
            Response::Region(RegionResponse::Registered {
                region,
                block_bytes,
            }) => Ok(DestinationRegion {
                memory,
                id: region,
                block_bytes: u64::from(block_bytes).max(1),
            }),
            other => Err(unexpected(other)),
        }
    }

    /// Sends a read of `length_bytes` of `name` from `offset_bytes` into `region` at
    /// `region_offset_bytes`; the answer ([`Client::wait`]) is
    /// `Response::Region(RegionResponse::ReadIntoDone { .. })` or the server's error.
    /// The range's bytes must not be read before the answer. Checked before sending: the
    /// file offset on a block, the region offset on 4096 bytes, and the length rounded
    /// up to whole blocks inside the region.
    pub fn submit_read_into(
        &mut self,
        region: &DestinationRegion,
        name: &str,
        offset_bytes: u64,
        length_bytes: u64,
        region_offset_bytes: u64,
    ) -> Result<RequestId, ClientError> {
        self.check_regions()?;
        check_read_into(region, offset_bytes, length_bytes, region_offset_bytes)?;
        self.submit(Request::Region(RegionRequest::ReadInto(ReadInto {
            name: name.to_string(),
            offset_bytes,
            length_bytes,
            region: region.id,
            region_offset_bytes,
        })))
    }

    /// [`Client::submit_read_into`] and its answer: the bytes read.
    pub fn read_into(
        &mut self,
        region: &DestinationRegion,
        name: &str,
        offset_bytes: u64,
        length_bytes: u64,
        region_offset_bytes: u64,
    ) -> Result<u64, ClientError> {
        let request_id = self.submit_read_into(
            region,
            name,
            offset_bytes,
            length_bytes,
            region_offset_bytes,
        )?;
        read_into_done(self.wait_for(request_id)?)
    }

    /// Forgets `region` on the server (its memory stays this process's).
    pub fn unregister_region(&mut self, region: &DestinationRegion) -> Result<(), ClientError> {
        self.check_regions()?;
        let request = Request::Region(RegionRequest::Unregister { region: region.id });
        match self.call(request)? {
            Response::Reply(flashpipe_api::Reply::Done) => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    pub(super) fn check_regions(&self) -> Result<(), ClientError> {
        if !regions_supported(self.info.version) {
            let version = self.info.version;
            return Err(ClientError::LimitReached {
                what: format!(
                    "reads into a region need protocol version {REGION_PROTOCOL_VERSION} and \
                     the server speaks version {version} (nothing sent; read through the \
                     pool); the oldest version that has them"
                ),
                limit: u64::from(REGION_PROTOCOL_VERSION),
            });
        }
        if !matches!(self.link, Link::Socket(_)) {
            return Err(ClientError::Protocol(
                "a connection on rings cannot pass a region's descriptor; connect with \
                 ClientTransport::Socket to read into regions"
                    .to_string(),
            ));
        }
        Ok(())
    }
}

/// The bytes of a read-into answer.
pub(crate) fn read_into_done(response: Response) -> Result<u64, ClientError> {
    match response {
        Response::Region(RegionResponse::ReadIntoDone { length_bytes }) => Ok(length_bytes),
        other => Err(unexpected(other)),
    }
}

fn unexpected(response: Response) -> ClientError {
    ClientError::Protocol(format!("a {} answer to a region request", response.name()))
}

/// The server's rules for a read-into, checked before sending.
fn check_read_into(
    region: &DestinationRegion,
    offset_bytes: u64,
    length_bytes: u64,
    region_offset_bytes: u64,
) -> Result<(), ClientError> {
    let block_bytes = region.block_bytes;
    let refuse = |what: String, limit: u64| Err(ClientError::LimitReached { what, limit });
    if offset_bytes % block_bytes != 0 {
        return refuse(
            format!("read-into at file offset {offset_bytes} does not start on a block"),
            block_bytes,
        );
    }
    if region_offset_bytes % REGION_OFFSET_ALIGNMENT_BYTES != 0 {
        return refuse(
            format!("read-into at region offset {region_offset_bytes} is not aligned"),
            REGION_OFFSET_ALIGNMENT_BYTES,
        );
    }
    let span_bytes = length_bytes
        .div_ceil(block_bytes)
        .saturating_mul(block_bytes);
    let size_bytes = region.size_bytes() as u64;
    if region_offset_bytes
        .checked_add(span_bytes)
        .is_none_or(|end| end > size_bytes)
    {
        return refuse(
            format!(
                "read-into of {length_bytes} bytes at region offset {region_offset_bytes} \
                 leaves the region (whole blocks)"
            ),
            size_bytes,
        );
    }
    Ok(())
}
