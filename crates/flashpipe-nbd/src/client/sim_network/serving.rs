//! The NBD serving of a simulated disk node: a client message cut into requests, each
//! carried out on the node's RAM disk and answered with simple replies or structured
//! chunks; and the record of what a node restart reverts (unflushed, non-FUA changes).
//!
//! Kept apart from the network's events and links (`super`) so that the day the real
//! server's I/O-free transmission core runs inside the simulation, it replaces this file
//! alone.

use flashpipe_device::{run_one, IoBuf, Operation, RamDisk};

use crate::wire::{self, RequestHeader};

use super::{Node, NODE_DISK_BLOCK_BYTES};

/// Most requests one message from the client may carry (one device request's parts).
const MAX_REQUESTS_PER_MESSAGE: usize = 1 << 20;

impl Node {
    /// The blocks a request changes, when it is a change a restart may undo: a write
    /// without FUA, or a trim, inside the export.
    pub(super) fn volatile_blocks(&self, header: &RequestHeader) -> Option<std::ops::Range<u64>> {
        let volatile = match header.command {
            wire::CMD_WRITE => header.flags & wire::CMD_FLAG_FUA == 0,
            wire::CMD_TRIM => true,
            _ => false,
        };
        let block = u64::from(NODE_DISK_BLOCK_BYTES);
        let end = header
            .offset_bytes
            .checked_add(u64::from(header.length_bytes))?;
        let fits = end <= self.export.size_bytes && header.offset_bytes % block == 0;
        (volatile && fits).then(|| header.offset_bytes / block..end.div_ceil(block))
    }

    /// Before a volatile change: keeps each block's contents from before the first
    /// change since the last flush.
    pub(super) fn note_volatile_change(&mut self, header: &RequestHeader) {
        let Some(blocks) = self.volatile_blocks(header) else {
            return;
        };
        for block in blocks {
            if self.unflushed_originals.contains_key(&block) {
                continue;
            }
            let operation = Operation::Read {
                first_block: block,
                buffer: IoBuf::zeroed(NODE_DISK_BLOCK_BYTES as usize),
            };
            let completion =
                run_one(&mut self.disk, operation).expect("a RAM disk read inside its bounds");
            let contents = completion.buffer.expect("a read hands its buffer back");
            self.unflushed_originals
                .insert(block, contents.as_slice().to_vec());
        }
    }

    /// After a request succeeded: a flush makes everything durable, a FUA write its
    /// blocks.
    pub(super) fn note_durable(&mut self, header: &RequestHeader) {
        if header.command == wire::CMD_FLUSH {
            self.unflushed_originals.clear();
        } else if header.command == wire::CMD_WRITE && header.flags & wire::CMD_FLAG_FUA != 0 {
            let block = u64::from(NODE_DISK_BLOCK_BYTES);
            let first = header.offset_bytes / block;
            let end = (header.offset_bytes + u64::from(header.length_bytes)).div_ceil(block);
            for index in first..end {
                self.unflushed_originals.remove(&index);
            }
        }
    }
}

/// Cuts one client message into its requests (headers and write payloads).
pub(super) fn split_requests(bytes: &[u8]) -> Result<Vec<(RequestHeader, &[u8])>, String> {
    let mut requests = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        if requests.len() >= MAX_REQUESTS_PER_MESSAGE {
            return Err(format!(
                "more than {MAX_REQUESTS_PER_MESSAGE} requests in one message"
            ));
        }
        let Some((header_bytes, after)) =
            rest.split_first_chunk::<{ wire::REQUEST_HEADER_BYTES }>()
        else {
            return Err(format!(
                "{} bytes left, short of a request header",
                rest.len()
            ));
        };
        let header = RequestHeader::decode(header_bytes).map_err(|error| error.to_string())?;
        let payload_bytes = if header.has_payload() {
            header.length_bytes as usize
        } else {
            0
        };
        if after.len() < payload_bytes {
            return Err(format!(
                "a write of {payload_bytes} bytes with {} bytes of payload",
                after.len()
            ));
        }
        let (payload, after) = after.split_at(payload_bytes);
        requests.push((header, payload));
        rest = after;
    }
    Ok(requests)
}

/// What a request came to: its read data, or an NBD error.
pub(super) type Outcome = Result<Option<Vec<u8>>, u32>;

pub(super) fn execute(
    disk: &mut RamDisk,
    size_bytes: u64,
    header: &RequestHeader,
    payload: &[u8],
) -> Outcome {
    let block = u64::from(NODE_DISK_BLOCK_BYTES);
    let length = u64::from(header.length_bytes);
    let inside = header
        .offset_bytes
        .checked_add(length)
        .is_some_and(|end| end <= size_bytes);
    let aligned = header.offset_bytes % block == 0 && length % block == 0;
    let first_block = header.offset_bytes / block;
    let operation = match header.command {
        wire::CMD_FLUSH => Operation::Flush,
        _ if !inside => return Err(wire::NBD_EINVAL),
        _ if !aligned => return Err(wire::NBD_EINVAL),
        wire::CMD_READ => Operation::Read {
            first_block,
            buffer: IoBuf::zeroed(length as usize),
        },
        wire::CMD_WRITE => Operation::Write {
            first_block,
            buffer: IoBuf::from_slice(payload),
        },
        wire::CMD_TRIM => Operation::Trim {
            first_block,
            block_count: length / block,
        },
        _ => return Err(wire::NBD_EINVAL),
    };
    let is_read = header.command == wire::CMD_READ;
    match run_one(disk, operation) {
        Ok(completion) if completion.status.is_ok() => Ok(if is_read {
            completion.buffer.map(|buffer| buffer.as_slice().to_vec())
        } else {
            None
        }),
        _ => Err(wire::NBD_EIO),
    }
}

/// The reply messages for one request: a simple reply, or structured chunks (a read in
/// two chunks, second half first, when `split`; an all-zero chunk as a hole).
pub(super) fn encode_replies(
    header: &RequestHeader,
    outcome: Outcome,
    structured: bool,
    split: bool,
) -> Vec<Vec<u8>> {
    let cookie = header.cookie;
    let mut message = Vec::new();
    if !structured {
        let error = outcome.as_ref().err().copied().unwrap_or(0);
        wire::encode_simple_reply(&mut message, error, cookie);
        if let Ok(Some(data)) = outcome {
            message.extend_from_slice(&data);
        }
        return vec![message];
    }
    match outcome {
        Err(error) => {
            wire::encode_chunk_error(&mut message, cookie, error, "simulated server error");
            vec![message]
        }
        Ok(None) => {
            wire::encode_chunk_none(&mut message, cookie);
            vec![message]
        }
        Ok(Some(data)) => {
            let half = if split && data.len() >= 2 * NODE_DISK_BLOCK_BYTES as usize {
                data.len() / 2
            } else {
                0
            };
            if half == 0 {
                return vec![content_chunk(cookie, header.offset_bytes, &data, true)];
            }
            let (first, second) = data.split_at(half);
            let mut messages = Vec::with_capacity(2);
            let second_offset = header.offset_bytes + half as u64;
            messages.push(content_chunk(cookie, second_offset, second, false));
            messages.push(content_chunk(cookie, header.offset_bytes, first, true));
            messages
        }
    }
}

/// One `OFFSET_DATA` chunk, or `OFFSET_HOLE` when every byte is zero.
fn content_chunk(cookie: u64, offset_bytes: u64, data: &[u8], done: bool) -> Vec<u8> {
    let mut message = Vec::new();
    let length = u32::try_from(data.len()).expect("a part fits the 32-bit length field");
    if !data.is_empty() && data.iter().all(|&byte| byte == 0) {
        wire::encode_chunk_offset_hole(&mut message, cookie, offset_bytes, length, done);
    } else {
        wire::encode_chunk_offset_data_header(&mut message, cookie, offset_bytes, length, done);
        message.extend_from_slice(data);
    }
    message
}
