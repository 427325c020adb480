//! Read data as the client sees it ([`ReadView`]) and buffers to write from
//! ([`WriteBuffer`]).
//!
//! A shared [`ReadView`] is a window of the server's read pool mapped read-only into
//! this process; the server keeps the pool buffer for it under a read handle until every
//! view of that handle is dropped, when the handle joins the client's release list
//! (sent with the next request, or by [`crate::Client::release_now`]). A granted
//! [`WriteBuffer`] is a slot of this client's own write pool, mapped read-write here and
//! granted to this client alone by the server; one buffer owns one slot, so its bytes
//! are borrowed exclusively.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex};

use flashpipe_shm::SharedMapping;

/// Bytes read: carried in the answer (the copying path), or a window of the server's
/// shared read pool, released (the server may reuse the buffer) when dropped.
pub struct ReadView {
    pub(crate) bytes: ViewBytes,
}

pub(crate) enum ViewBytes {
    Owned(Vec<u8>),
    Shared {
        hold: Arc<ReadHold>,
        offset_bytes: usize,
        length_bytes: usize,
    },
}

/// A read handle held for this client: released when its last view is dropped.
pub(crate) struct ReadHold {
    pub(crate) mapping: Arc<SharedMapping>,
    pub(crate) handle: u64,
    pub(crate) releases: Arc<Mutex<Vec<u64>>>,
}

impl Drop for ReadHold {
    fn drop(&mut self) {
        self.releases
            .lock()
            .expect("no panic holding the release list")
            .push(self.handle);
    }
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
            ViewBytes::Shared {
                hold,
                offset_bytes,
                length_bytes,
            } => hold
                .mapping
                .bytes(*offset_bytes, *length_bytes)
                .expect("a view's window was checked against the mapping when it was made"),
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
/// Dropping a granted buffer unsent keeps its slot for this client's next
/// [`crate::Client::write_buffer`].
pub struct WriteBuffer {
    pub(crate) storage: WriteStorage,
}

pub(crate) enum WriteStorage {
    Owned(Vec<u8>),
    Granted(GrantedSlot),
}

/// One granted slot of the write pool, owned by one buffer.
pub(crate) struct GrantedSlot {
    pub(crate) mapping: Arc<SharedMapping>,
    pub(crate) slot: u32,
    pub(crate) offset_bytes: usize,
    pub(crate) size_bytes: usize,
    /// Where the slot goes when the buffer is dropped unsent.
    pub(crate) spare_slots: Arc<Mutex<Vec<u32>>>,
    pub(crate) sent: bool,
}

impl Drop for GrantedSlot {
    fn drop(&mut self) {
        if !self.sent {
            self.spare_slots
                .lock()
                .expect("no panic holding the spare slots")
                .push(self.slot);
        }
    }
}

impl GrantedSlot {
    fn bytes_mut(&mut self) -> &mut [u8] {
        assert!(
            self.offset_bytes + self.size_bytes <= self.mapping.size_bytes(),
            "a granted slot lies inside the write mapping (checked when granted)"
        );
        // SAFETY: the write mapping is mapped read-write (MapAccess::ReadWrite, so the
        // pointer's provenance allows writes) and lives as long as `self.mapping`, which
        // this borrow cannot outlive; the range is inside it (asserted above); and this
        // slot's range is owned by this one GrantedSlot (the client refuses a slot
        // granted twice), so no other slice of this process overlaps it. The server does
        // not write a slot granted to the client.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.mapping.as_ptr().add(self.offset_bytes).cast_mut(),
                self.size_bytes,
            )
        }
    }

    fn bytes(&self) -> &[u8] {
        self.mapping
            .bytes(self.offset_bytes, self.size_bytes)
            .expect("a granted slot lies inside the write mapping")
    }
}

impl WriteBuffer {
    pub(crate) fn owned(capacity_bytes: usize) -> WriteBuffer {
        WriteBuffer {
            storage: WriteStorage::Owned(vec![0u8; capacity_bytes]),
        }
    }

    /// True when the buffer is a granted slot of shared memory.
    pub fn is_shared(&self) -> bool {
        matches!(self.storage, WriteStorage::Granted(_))
    }

    /// The granted slot, for a shared buffer.
    pub fn slot(&self) -> Option<u32> {
        match &self.storage {
            WriteStorage::Owned(_) => None,
            WriteStorage::Granted(granted) => Some(granted.slot),
        }
    }
}

impl Deref for WriteBuffer {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.storage {
            WriteStorage::Owned(bytes) => bytes,
            WriteStorage::Granted(granted) => granted.bytes(),
        }
    }
}

impl DerefMut for WriteBuffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        match &mut self.storage {
            WriteStorage::Owned(bytes) => bytes,
            WriteStorage::Granted(granted) => granted.bytes_mut(),
        }
    }
}

impl fmt::Debug for WriteBuffer {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("WriteBuffer")
            .field("capacity_bytes", &self.len())
            .field("slot", &self.slot())
            .finish()
    }
}
