//! [`VecPayloads`]: payloads that are owned byte vectors, for transports that keep files in
//! memory (the test doubles of the API, the mount and any crate that drives the command
//! set without an engine). Writes are filled in place, a completed write hands its vector
//! back to be filled again, reads are their bytes; a check's summary is a plain verdict.

use crate::command::Payloads;
use crate::error::ApiError;
use crate::streams::StreamPayloads;

/// Owned byte vectors as every payload (module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VecPayloads;

impl Payloads for VecPayloads {
    type Write = Vec<u8>;
    type Written = Vec<u8>;
    type Read = Vec<u8>;
    type Check = bool;
    type FileError = ApiError;
}

impl StreamPayloads for VecPayloads {
    fn write_bytes_mut(write: &mut Vec<u8>) -> &mut [u8] {
        write
    }
    fn set_write_len(write: &mut Vec<u8>, length_bytes: usize) {
        write.resize(length_bytes, 0);
    }
    fn written_bytes(written: &Vec<u8>) -> u64 {
        written.len() as u64
    }
    fn reuse_written(written: Vec<u8>) -> Option<Vec<u8>> {
        Some(written)
    }
    fn read_bytes(read: &Vec<u8>) -> &[u8] {
        read
    }
}
