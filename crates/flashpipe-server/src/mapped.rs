//! What a connection that maps memory holds: windows of the engine's shared read pool
//! under read handles (kept from the client until it releases them), and its own
//! shared write pool with the slots granted to it.
//!
//! Read handles: each read answered by reference keeps its [`ReadData`] (and so its
//! pool buffer) here under a fresh handle, so the engine does not reuse the buffer
//! while the client reads it in its mapping; a release frame drops it. A request that
//! may take a handle reserves one when admitted, so the limit holds for answers still
//! to come. Write grants: a slot of the client's pool is granted as an [`IoBuf`] kept
//! here; a write by grant takes it out (checked: granted to this client, length within
//! the slot) and hands it to the engine without a copy; the write's answer gives it back
//! to the grants (the slot stays the client's), an error answer returns it to the pool.
//! Everything here is dropped with the connection, so a client that dies holds nothing.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use flashpipe_device::{BufferPool, IoBuf};
use flashpipe_engine::ReadData;
use flashpipe_protocol::{ErrorCode, RemoteError, SharedRegion, WriteGrant};

/// Name of each client's write-pool memfd (seen in `/proc/<pid>/fd`).
pub(crate) const WRITE_POOL_MEMORY_NAME: &str = "flashpipe-client-write-pool";

/// A mapping connection's holds.
pub(crate) struct Mapped {
    handles: Mutex<Handles>,
    write_pool: Option<BufferPool>,
    grants: Mutex<HashMap<u32, IoBuf>>,
    max_handles: usize,
    /// Handles held and reserved by every client of the server, and their limit.
    server_handles: Arc<AtomicUsize>,
    max_server_handles: usize,
}

#[derive(Default)]
struct Handles {
    next_handle: u64,
    held: HashMap<u64, Held>,
    reserved: usize,
}

/// What one read handle keeps: a read's data, or every file of a batch read (kept for
/// its drop, which gives the pool buffers back).
#[expect(dead_code, reason = "held only to be dropped at release")]
pub(crate) enum Held {
    /// One read's data (a read answered by reference: no vector to allocate).
    One(ReadData),
    /// The files of a batch read.
    Many(Vec<ReadData>),
}

impl Mapped {
    pub(crate) fn new(
        write_pool: Option<BufferPool>,
        max_handles: usize,
        server_handles: Arc<AtomicUsize>,
        max_server_handles: usize,
    ) -> Mapped {
        Mapped {
            server_handles,
            max_server_handles,
            handles: Mutex::new(Handles {
                next_handle: 1,
                ..Handles::default()
            }),
            write_pool,
            grants: Mutex::new(HashMap::new()),
            max_handles,
        }
    }

    /// The client's write pool as the welcome describes it.
    pub(crate) fn write_region(&self) -> Option<SharedRegion> {
        self.write_pool.as_ref().map(|pool| SharedRegion {
            slot_count: pool.buffer_count(),
            slot_size_bytes: pool.buffer_size_bytes() as u64,
        })
    }

    /// The write pool (its memfd goes beside the welcome).
    pub(crate) fn write_pool(&self) -> Option<&BufferPool> {
        self.write_pool.as_ref()
    }

    fn lock_handles(&self) -> std::sync::MutexGuard<'_, Handles> {
        self.handles
            .lock()
            .expect("no panic holding the read handles")
    }

    /// Reserves a handle for a read's answer, or names the limit.
    pub(crate) fn reserve_handle(&self) -> Result<(), RemoteError> {
        let mut handles = self.lock_handles();
        if handles.held.len() + handles.reserved >= self.max_handles {
            return Err(RemoteError::limit(
                ErrorCode::TooManyReadHandles,
                format!(
                    "this client holds {} read handles and awaits {} more, its limit is {}; drop read views first",
                    handles.held.len(),
                    handles.reserved,
                    self.max_handles
                ),
                self.max_handles as u64,
            ));
        }
        self.take_server_handle()?;
        handles.reserved += 1;
        Ok(())
    }

    /// Counts one more handle server-wide, or names the server's limit.
    fn take_server_handle(&self) -> Result<(), RemoteError> {
        let limit = self.max_server_handles;
        self.server_handles
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
                Some(now + 1).filter(|after| *after <= limit)
            })
            .map(drop)
            .map_err(|now| {
                RemoteError::limit(
                    ErrorCode::ServerReadHandles,
                    format!(
                        "the server's clients hold {now} read handles together, its limit is {limit}; retry when others drop read views"
                    ),
                    limit as u64,
                )
            })
    }

    fn give_back_server_handles(&self, count: usize) {
        let before = self.server_handles.fetch_sub(count, Ordering::AcqRel);
        assert!(before >= count, "server read handles went below zero");
    }

    /// Gives back a reservation that no answer used.
    pub(crate) fn cancel_reservation(&self) {
        let mut handles = self.lock_handles();
        assert!(handles.reserved > 0, "a reservation to cancel");
        handles.reserved -= 1;
        self.give_back_server_handles(1);
    }

    /// Turns a reservation into a handle holding `data` until released.
    pub(crate) fn hold(&self, data: Held) -> u64 {
        let mut handles = self.lock_handles();
        assert!(handles.reserved > 0, "a reservation to hold under");
        handles.reserved -= 1;
        let handle = handles.next_handle;
        handles.next_handle += 1;
        handles.held.insert(handle, data);
        handle
    }

    /// Drops the holds of `handles`; returns how many were not held (ignored).
    pub(crate) fn release(&self, released: &[u64]) -> usize {
        let mut handles = self.lock_handles();
        let unknown = released
            .iter()
            .filter(|handle| handles.held.remove(handle).is_none())
            .count();
        self.give_back_server_handles(released.len() - unknown);
        unknown
    }

    fn lock_grants(&self) -> std::sync::MutexGuard<'_, HashMap<u32, IoBuf>> {
        self.grants.lock().expect("no panic holding the grants")
    }

    /// Grants a free slot of the write pool.
    pub(crate) fn grant(&self) -> Result<WriteGrant, RemoteError> {
        let Some(pool) = &self.write_pool else {
            return Err(RemoteError::new(
                ErrorCode::NotMapped,
                "this connection has no shared write pool: send data inline with write frames",
            ));
        };
        let mut buffer = pool.try_take().map_err(|_| {
            RemoteError::limit(
                ErrorCode::NoWriteSlots,
                format!(
                    "every one of this client's {} write slots is granted; use or drop write buffers first",
                    pool.buffer_count()
                ),
                u64::from(pool.buffer_count()),
            )
        })?;
        let (_, slot) = buffer.pool_slot().expect("a pool buffer has a slot");
        buffer.set_len(buffer.capacity());
        self.lock_grants().insert(slot, buffer);
        Ok(WriteGrant {
            slot,
            slot_size_bytes: pool.buffer_size_bytes() as u32,
        })
    }

    /// Takes the granted slot `slot` for a write of `length_bytes`, or refuses: a slot
    /// not granted to this client, or a length past the slot (the grant is then
    /// returned to the pool).
    pub(crate) fn take_granted(&self, slot: u32, length_bytes: u32) -> Result<IoBuf, RemoteError> {
        let mut buffer = self.lock_grants().remove(&slot).ok_or_else(|| {
            RemoteError::new(
                ErrorCode::NotGranted,
                format!("write from write-pool slot {slot}, which is not granted to this client"),
            )
        })?;
        let capacity = buffer.capacity();
        if length_bytes as usize > capacity {
            return Err(RemoteError::limit(
                ErrorCode::NotGranted,
                format!(
                    "write of {length_bytes} bytes from write-pool slot {slot} of {capacity} bytes"
                ),
                capacity as u64,
            ));
        }
        buffer.set_len(length_bytes as usize);
        Ok(buffer)
    }

    /// Takes a grant back (its slot returns to the pool); nothing when `slot` is not
    /// granted.
    pub(crate) fn forfeit(&self, slot: u32) {
        drop(self.lock_grants().remove(&slot));
    }

    /// Gives a written slot back to the client's grants.
    pub(crate) fn regrant(&self, mut buffer: IoBuf) {
        let (_, slot) = buffer.pool_slot().expect("a granted buffer has a slot");
        buffer.set_len(buffer.capacity());
        self.lock_grants().insert(slot, buffer);
    }
}

impl Drop for Mapped {
    /// A connection that ends gives its read handles back to the server-wide count.
    fn drop(&mut self) {
        let handles = self.lock_handles();
        let count = handles.held.len() + handles.reserved;
        drop(handles);
        self.give_back_server_handles(count);
    }
}
