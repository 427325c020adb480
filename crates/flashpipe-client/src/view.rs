//! Read data as the client sees it ([`ReadView`]) and buffers to write from
//! ([`WriteBuffer`]).

use std::fmt;
use std::ops::{Deref, DerefMut};

/// Bytes read: carried in the answer (the copying path), or a window of the server's
/// shared read pool, released (the server may reuse the buffer) when dropped.
pub struct ReadView {
    pub(crate) bytes: ViewBytes,
}

pub(crate) enum ViewBytes {
    Owned(Vec<u8>),
}

impl ReadView {
    pub(crate) fn owned(bytes: Vec<u8>) -> ReadView {
        ReadView {
            bytes: ViewBytes::Owned(bytes),
        }
    }

    /// True when the bytes are a window of shared memory (by reference).
    pub fn is_shared(&self) -> bool {
        !matches!(self.bytes, ViewBytes::Owned(_))
    }
}

impl Deref for ReadView {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.bytes {
            ViewBytes::Owned(bytes) => bytes,
        }
    }
}

impl fmt::Debug for ReadView {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("ReadView")
            .field("length_bytes", &self.len())
            .field("shared", &self.is_shared())
            .finish()
    }
}

/// A buffer to fill and hand to [`crate::Client::submit_write`]: a granted slot of this
/// client's shared write pool (by reference), or memory of its own (the copying path).
/// Dropping it unsent gives a granted slot back (the server reclaims it when the
/// connection ends).
pub struct WriteBuffer {
    pub(crate) storage: WriteStorage,
}

pub(crate) enum WriteStorage {
    Owned(Vec<u8>),
}

impl WriteBuffer {
    pub(crate) fn owned(capacity_bytes: usize) -> WriteBuffer {
        WriteBuffer {
            storage: WriteStorage::Owned(vec![0u8; capacity_bytes]),
        }
    }

    /// True when the buffer is a granted slot of shared memory.
    pub fn is_shared(&self) -> bool {
        !matches!(self.storage, WriteStorage::Owned(_))
    }
}

impl Deref for WriteBuffer {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.storage {
            WriteStorage::Owned(bytes) => bytes,
        }
    }
}

impl DerefMut for WriteBuffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        match &mut self.storage {
            WriteStorage::Owned(bytes) => bytes,
        }
    }
}

impl fmt::Debug for WriteBuffer {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("WriteBuffer")
            .field("capacity_bytes", &self.len())
            .field("shared", &self.is_shared())
            .finish()
    }
}
