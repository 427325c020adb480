//! The frames of reads into a client's own memory (protocol version
//! [`REGION_PROTOCOL_VERSION`]): a client hands the server a destination region (a sealed
//! memfd, its descriptor beside the register-region frame), then asks for file ranges to
//! be read straight into it. Three requests (register-region, read-into,
//! unregister-region) and two answers (region-registered, read-into-done; unregister is
//! answered done). Byte layouts are in docs/protocol.md ("Reads into a client region").

use crate::error::DecodeError;
use crate::wire::{Reader, Writer};
use crate::MAX_NAME_BYTES;

/// The first protocol version whose peers may send the region frames: the one place a
/// client or a server asks whether a connection may use them.
pub const REGION_PROTOCOL_VERSION: u16 = 6;

/// What a read-into's place in its region must be a multiple of (the device's direct
/// I/O alignment).
pub const REGION_OFFSET_ALIGNMENT_BYTES: u64 = 4096;

/// True when a connection that negotiated `version` may send the region frames.
pub fn regions_supported(version: u16) -> bool {
    version >= REGION_PROTOCOL_VERSION
}

/// A request about destination regions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegionRequest {
    /// Register the memfd that rides beside this frame as a destination region of
    /// `length_bytes` bytes (the descriptor must hold at least this many).
    Register {
        /// The region's size in bytes.
        length_bytes: u64,
    },
    /// Read a file range straight into a registered region.
    ReadInto(ReadInto),
    /// Forget a registered region (the server unmaps it once no read into it is left).
    Unregister {
        /// The region's id, as region-registered gave it.
        region: u64,
    },
}

/// A read of `length_bytes` bytes of `name` from `offset_bytes`, written into region
/// `region` from `region_offset_bytes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadInto {
    /// The file.
    pub name: String,
    /// Where in the file the range starts (a multiple of the store's block size).
    pub offset_bytes: u64,
    /// Bytes to read.
    pub length_bytes: u64,
    /// The destination region's id.
    pub region: u64,
    /// Where in the region the bytes land (a multiple of
    /// [`REGION_OFFSET_ALIGNMENT_BYTES`]).
    pub region_offset_bytes: u64,
}

/// An answer about destination regions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegionResponse {
    /// The region is registered under `region`.
    Registered {
        /// The region's id, for read-into and unregister-region.
        region: u64,
        /// The store's block size: a read-into's file offset is a multiple of it, and it
        /// writes its length rounded up to it into the region.
        block_bytes: u32,
    },
    /// A read into a region completed: this many bytes are in it, checksums verified.
    ReadIntoDone {
        /// Bytes of the file now in the region.
        length_bytes: u64,
    },
}

pub(crate) fn encode_region_request(request: &RegionRequest, writer: &mut Writer) {
    match request {
        RegionRequest::Register { length_bytes } => writer.u64(*length_bytes),
        RegionRequest::ReadInto(read) => {
            writer.string(&read.name);
            writer.u64(read.offset_bytes);
            writer.u64(read.length_bytes);
            writer.u64(read.region);
            writer.u64(read.region_offset_bytes);
        }
        RegionRequest::Unregister { region } => writer.u64(*region),
    }
}

pub(crate) fn decode_register(reader: &mut Reader<'_>) -> Result<RegionRequest, DecodeError> {
    Ok(RegionRequest::Register {
        length_bytes: reader.u64("register_region.length")?,
    })
}

pub(crate) fn decode_read_into(reader: &mut Reader<'_>) -> Result<RegionRequest, DecodeError> {
    Ok(RegionRequest::ReadInto(ReadInto {
        name: reader.string("read_into.name", MAX_NAME_BYTES)?,
        offset_bytes: reader.u64("read_into.offset")?,
        length_bytes: reader.u64("read_into.length")?,
        region: reader.u64("read_into.region")?,
        region_offset_bytes: reader.u64("read_into.region_offset")?,
    }))
}

pub(crate) fn decode_unregister(reader: &mut Reader<'_>) -> Result<RegionRequest, DecodeError> {
    Ok(RegionRequest::Unregister {
        region: reader.u64("unregister_region.region")?,
    })
}

pub(crate) fn encode_region_response(response: &RegionResponse, writer: &mut Writer) {
    match response {
        RegionResponse::Registered {
            region,
            block_bytes,
        } => {
            writer.u64(*region);
            writer.u32(*block_bytes);
        }
        RegionResponse::ReadIntoDone { length_bytes } => writer.u64(*length_bytes),
    }
}

pub(crate) fn decode_registered(reader: &mut Reader<'_>) -> Result<RegionResponse, DecodeError> {
    Ok(RegionResponse::Registered {
        region: reader.u64("region_registered.region")?,
        block_bytes: reader.u32("region_registered.block_bytes")?,
    })
}

pub(crate) fn decode_read_into_done(
    reader: &mut Reader<'_>,
) -> Result<RegionResponse, DecodeError> {
    Ok(RegionResponse::ReadIntoDone {
        length_bytes: reader.u64("read_into_done.length")?,
    })
}
