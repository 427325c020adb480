//! Aligned I/O buffers and bounded buffer pools.
//!
//! Every request that moves data carries an [`IoBuf`]: a memory region aligned to
//! [`IO_ALIGNMENT_BYTES`] so that it can go straight to `O_DIRECT` I/O. The buffer is
//! moved into the device with the request and handed back in the completion, so the
//! device owns it while the request is in flight and nobody copies it.
//!
//! A [`BufferPool`] carves a fixed number of equal buffers out of one region (an anonymous
//! mapping, its pages zero until first touched). Its
//! buffers go back to the pool when dropped, and a device may register the pool's region
//! with the kernel (io_uring fixed buffers); [`IoBuf::pool_slot`] tells the device
//! which registered slot a buffer occupies. A pool may instead live in a memfd
//! ([`BufferPool::in_shared_memory`]) that other processes map: slot `s` lies at byte
//! offset `s * buffer_size_bytes` of the region (`flashpipe_shm`).
//!
//! To hand one buffer to devices as several requests without a copy, split it with
//! [`crate::split::SplitBuffer`]: its views are `IoBuf`s too.

use std::alloc::{self, Layout};
use std::fmt;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::split::SplitParent;
use flashpipe_shm::{SharedMemory, SharedMemoryError};

/// Alignment of every [`IoBuf`], in bytes: the largest logical block size of the
/// devices we drive with direct I/O.
pub const IO_ALIGNMENT_BYTES: usize = 4096;

/// An owned, aligned, fixed-capacity byte buffer for device requests.
pub struct IoBuf {
    pointer: NonNull<u8>,
    length_bytes: usize,
    capacity_bytes: usize,
    origin: Origin,
}

enum Origin {
    Heap,
    /// No bytes and no allocation ([`IoBuf::empty`]).
    Empty,
    /// A view of a [`crate::split::SplitBuffer`]'s parent, which the `Arc` keeps alive.
    View {
        split: Arc<SplitParent>,
    },
    Pool {
        pool: Arc<PoolShared>,
        slot: u32,
    },
    /// Memory that another owner holds (a client's shared region, mapped by a server),
    /// kept alive by the `Arc` until this buffer drops ([`IoBuf::foreign`]). Boxed so that
    /// the variant is one thin pointer: an `IoBuf` stays 40 bytes, as without it.
    Foreign {
        _owner: Box<Arc<dyn Send + Sync + std::panic::RefUnwindSafe>>,
    },
}

// SAFETY: an IoBuf is the unique owner of its region (heap allocation or pool slot);
// nothing else aliases it while the IoBuf lives.
unsafe impl Send for IoBuf {}
// SAFETY: shared references only give out `&[u8]`.
unsafe impl Sync for IoBuf {}

impl IoBuf {
    /// A zero-filled heap buffer of `length_bytes` (capacity rounded up to the alignment).
    pub fn zeroed(length_bytes: usize) -> IoBuf {
        let capacity_bytes = round_up(length_bytes.max(1), IO_ALIGNMENT_BYTES);
        let layout = Layout::from_size_align(capacity_bytes, IO_ALIGNMENT_BYTES)
            .expect("I/O buffer layout is valid for any size that fits in memory");
        // SAFETY: layout has non-zero size.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let pointer = NonNull::new(raw).unwrap_or_else(|| alloc::handle_alloc_error(layout));
        IoBuf {
            pointer,
            length_bytes,
            capacity_bytes,
            origin: Origin::Heap,
        }
    }

    /// A heap buffer holding a copy of `bytes`.
    pub fn from_slice(bytes: &[u8]) -> IoBuf {
        let mut buffer = IoBuf::zeroed(bytes.len());
        buffer.as_mut_slice().copy_from_slice(bytes);
        buffer
    }

    /// A buffer of no bytes that allocates nothing: a placeholder while a buffer is
    /// elsewhere (its capacity is zero, so it cannot grow).
    pub fn empty() -> IoBuf {
        IoBuf {
            pointer: NonNull::dangling(),
            length_bytes: 0,
            capacity_bytes: 0,
            origin: Origin::Empty,
        }
    }

    /// A view of `length_bytes` at `pointer` inside the parent `split` owns; dropping it
    /// frees nothing (the `Arc` keeps the parent alive). Only [`crate::split::SplitBuffer::view`]
    /// builds one.
    ///
    /// # Safety
    /// `pointer..pointer + length_bytes` must lie inside the region of the parent `split`
    /// owns, and no other view or code may touch those bytes while this view lives (the
    /// argument is in the `split` module's doc).
    pub(crate) unsafe fn view_of_split(
        pointer: *mut u8,
        length_bytes: usize,
        split: Arc<SplitParent>,
    ) -> IoBuf {
        IoBuf {
            pointer: NonNull::new(pointer).expect("a view's pointer lies inside its parent"),
            length_bytes,
            capacity_bytes: length_bytes,
            origin: Origin::View { split },
        }
    }

    /// A buffer of `length_bytes` at `pointer`, in memory `owner` keeps mapped (a
    /// client's destination region a server reads into); dropping it frees nothing but
    /// its hold on `owner`.
    ///
    /// # Safety
    /// `pointer..pointer + length_bytes` must be writable memory that stays valid while
    /// `owner` lives, `pointer` aligned to [`IO_ALIGNMENT_BYTES`] and non-null, and no
    /// other buffer or code of this process may touch those bytes while this buffer
    /// lives (another process may: the bytes are `u8`, see `flashpipe_shm`'s safety
    /// argument, point 4).
    pub unsafe fn foreign(
        pointer: *mut u8,
        length_bytes: usize,
        owner: Arc<dyn Send + Sync + std::panic::RefUnwindSafe>,
    ) -> IoBuf {
        assert_eq!(
            pointer as usize % IO_ALIGNMENT_BYTES,
            0,
            "a foreign buffer starts on the I/O alignment"
        );
        IoBuf {
            pointer: NonNull::new(pointer).expect("a foreign buffer's pointer is not null"),
            length_bytes,
            capacity_bytes: length_bytes,
            origin: Origin::Foreign {
                _owner: Box::new(owner),
            },
        }
    }

    /// The split whose parent this buffer views, when it is a view.
    pub(crate) fn split_parent(&self) -> Option<&Arc<SplitParent>> {
        match &self.origin {
            Origin::View { split } => Some(split),
            Origin::Heap | Origin::Empty | Origin::Pool { .. } | Origin::Foreign { .. } => None,
        }
    }

    /// Number of valid bytes: what a request reads into or writes from.
    pub fn len(&self) -> usize {
        self.length_bytes
    }

    /// True when the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.length_bytes == 0
    }

    /// Bytes allocated; `len` may grow up to this.
    pub fn capacity(&self) -> usize {
        self.capacity_bytes
    }

    /// Sets the number of valid bytes. Bytes newly exposed keep their old contents.
    ///
    /// # Panics
    /// When `length_bytes` exceeds the capacity (a programming error, not user input).
    pub fn set_len(&mut self, length_bytes: usize) {
        assert!(
            length_bytes <= self.capacity_bytes,
            "IoBuf length {length_bytes} exceeds capacity {}",
            self.capacity_bytes
        );
        self.length_bytes = length_bytes;
    }

    /// The valid bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: pointer is valid for capacity_bytes >= length_bytes and uniquely owned.
        unsafe { std::slice::from_raw_parts(self.pointer.as_ptr(), self.length_bytes) }
    }

    /// The valid bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and we hold &mut self.
        unsafe { std::slice::from_raw_parts_mut(self.pointer.as_ptr(), self.length_bytes) }
    }

    /// Raw pointer for handing the region to the kernel.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.pointer.as_ptr()
    }

    /// Raw pointer for handing the region to the kernel.
    pub fn as_ptr(&self) -> *const u8 {
        self.pointer.as_ptr()
    }

    /// `(pool id, slot)` when the buffer comes from a [`BufferPool`], for devices that
    /// registered that pool's region.
    pub fn pool_slot(&self) -> Option<(u64, u32)> {
        match &self.origin {
            Origin::Heap | Origin::Empty | Origin::View { .. } | Origin::Foreign { .. } => None,
            Origin::Pool { pool, slot } => Some((pool.pool_id, *slot)),
        }
    }

    /// `(pool id, slot)` of the pool slot whose memory holds this buffer: its own for a
    /// pool buffer, its parent's for a view of a split pool buffer (`None` otherwise). A
    /// device that registered the pool's region may do registered-buffer I/O on any
    /// buffer inside it; unlike [`IoBuf::pool_slot`], this says nothing about who gives
    /// the slot back.
    pub fn pool_region(&self) -> Option<(u64, u32)> {
        match &self.origin {
            Origin::View { split } => split.pool_region(),
            Origin::Heap | Origin::Empty | Origin::Foreign { .. } | Origin::Pool { .. } => {
                self.pool_slot()
            }
        }
    }
}

impl Drop for IoBuf {
    fn drop(&mut self) {
        match &self.origin {
            Origin::Heap => {
                let layout = Layout::from_size_align(self.capacity_bytes, IO_ALIGNMENT_BYTES)
                    .expect("layout was valid at allocation");
                // SAFETY: allocated with exactly this layout in `zeroed`.
                unsafe { alloc::dealloc(self.pointer.as_ptr(), layout) };
            }
            Origin::Empty | Origin::View { .. } | Origin::Foreign { .. } => {}
            Origin::Pool { pool, slot } => pool.give_back(*slot),
        }
    }
}

impl std::ops::Deref for IoBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl std::ops::DerefMut for IoBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.as_mut_slice()
    }
}

impl fmt::Debug for IoBuf {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("IoBuf")
            .field("len", &self.length_bytes)
            .field("capacity", &self.capacity_bytes)
            .field("pool_slot", &self.pool_slot())
            .finish()
    }
}

/// Rounds `value` up to a multiple of `multiple` (a power of two or any non-zero value).
pub fn round_up(value: usize, multiple: usize) -> usize {
    value.div_ceil(multiple) * multiple
}

/// The pool is empty: every buffer is in use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "buffer pool exhausted: all {buffer_count} buffers of {buffer_size_bytes} bytes are in use"
)]
pub struct PoolExhausted {
    /// Buffers the pool holds in all.
    pub buffer_count: u32,
    /// Size of each buffer.
    pub buffer_size_bytes: usize,
}

/// A bounded set of equal aligned buffers carved from one allocation.
#[derive(Clone)]
pub struct BufferPool {
    shared: Arc<PoolShared>,
}

struct PoolShared {
    pool_id: u64,
    region: NonNull<u8>,
    buffer_size_bytes: usize,
    buffer_count: u32,
    free_slots: Mutex<Vec<u32>>,
    /// The memfd holding the region, for a pool in shared memory; `None` for an anonymous
    /// mapping (unmapped in drop).
    shared_memory: Option<SharedMemory>,
}

// SAFETY: the region is only touched through IoBufs, each owning one distinct slot.
unsafe impl Send for PoolShared {}
// SAFETY: the free list is behind a mutex; the region pointer itself is immutable.
unsafe impl Sync for PoolShared {}

static NEXT_POOL_ID: AtomicU64 = AtomicU64::new(1);

impl BufferPool {
    /// A pool of `buffer_count` buffers of `buffer_size_bytes` each (rounded up to the
    /// alignment).
    ///
    /// # Panics
    /// When `buffer_count` is zero.
    pub fn new(buffer_count: u32, buffer_size_bytes: usize) -> BufferPool {
        assert!(buffer_count > 0, "a buffer pool needs at least one buffer");
        let buffer_size_bytes = round_up(buffer_size_bytes.max(1), IO_ALIGNMENT_BYTES);
        let region_bytes = (buffer_count as usize)
            .checked_mul(buffer_size_bytes)
            .expect("a pool's region fits in memory");
        let region = map_zeroed(region_bytes);
        Self::over_region(region, buffer_count, buffer_size_bytes, None)
    }

    /// A pool of `buffer_count` buffers of `buffer_size_bytes` each (rounded up to the
    /// alignment) whose region is a [`SharedMemory`] named `name`: slot `s` lies at byte
    /// offset `s * buffer_size_bytes()` of it, so a process that maps the region
    /// ([`flashpipe_shm::SharedMapping::map`] on [`BufferPool::shared_memory`]'s
    /// descriptor) sees every buffer's bytes. The region lives while the pool or any of
    /// its buffers does.
    ///
    /// # Panics
    /// When `buffer_count` is zero.
    pub fn in_shared_memory(
        name: &str,
        buffer_count: u32,
        buffer_size_bytes: usize,
    ) -> Result<BufferPool, SharedMemoryError> {
        assert!(buffer_count > 0, "a buffer pool needs at least one buffer");
        let buffer_size_bytes = round_up(buffer_size_bytes.max(1), IO_ALIGNMENT_BYTES);
        let region_bytes = (buffer_count as usize).saturating_mul(buffer_size_bytes);
        let memory = SharedMemory::create(name, region_bytes)?;
        let region = NonNull::new(memory.as_mut_ptr()).expect("a mapping is never at address 0");
        assert_eq!(
            region.as_ptr() as usize % IO_ALIGNMENT_BYTES,
            0,
            "mappings are page-aligned"
        );
        Ok(Self::over_region(
            region,
            buffer_count,
            buffer_size_bytes,
            Some(memory),
        ))
    }

    fn over_region(
        region: NonNull<u8>,
        buffer_count: u32,
        buffer_size_bytes: usize,
        shared_memory: Option<SharedMemory>,
    ) -> BufferPool {
        let free_slots = (0..buffer_count).rev().collect();
        BufferPool {
            shared: Arc::new(PoolShared {
                pool_id: NEXT_POOL_ID.fetch_add(1, Ordering::Relaxed),
                region,
                buffer_size_bytes,
                buffer_count,
                free_slots: Mutex::new(free_slots),
                shared_memory,
            }),
        }
    }

    /// The shared region holding the pool's buffers, for a pool made by
    /// [`BufferPool::in_shared_memory`]; `None` for a heap pool.
    pub fn shared_memory(&self) -> Option<&SharedMemory> {
        self.shared.shared_memory.as_ref()
    }

    /// Takes a free buffer with `len` equal to the buffer size, or says the pool is empty.
    pub fn try_take(&self) -> Result<IoBuf, PoolExhausted> {
        let slot = self
            .shared
            .free_slots
            .lock()
            .expect("pool free list lock is never poisoned")
            .pop()
            .ok_or(PoolExhausted {
                buffer_count: self.shared.buffer_count,
                buffer_size_bytes: self.shared.buffer_size_bytes,
            })?;
        let offset = slot as usize * self.shared.buffer_size_bytes;
        // SAFETY: slot < buffer_count, so the offset is inside the region.
        let pointer = unsafe { NonNull::new_unchecked(self.shared.region.as_ptr().add(offset)) };
        Ok(IoBuf {
            pointer,
            length_bytes: self.shared.buffer_size_bytes,
            capacity_bytes: self.shared.buffer_size_bytes,
            origin: Origin::Pool {
                pool: Arc::clone(&self.shared),
                slot,
            },
        })
    }

    /// Unique id of this pool, as reported by [`IoBuf::pool_slot`].
    pub fn pool_id(&self) -> u64 {
        self.shared.pool_id
    }

    /// Size of each buffer in bytes.
    pub fn buffer_size_bytes(&self) -> usize {
        self.shared.buffer_size_bytes
    }

    /// Number of buffers in the pool.
    pub fn buffer_count(&self) -> u32 {
        self.shared.buffer_count
    }

    /// Number of buffers free right now.
    pub fn free_count(&self) -> usize {
        self.shared
            .free_slots
            .lock()
            .expect("pool free list lock is never poisoned")
            .len()
    }

    /// Start address and length of slot `slot`, for registering with the kernel.
    pub fn slot_region(&self, slot: u32) -> (*mut u8, usize) {
        assert!(slot < self.shared.buffer_count, "slot {slot} out of range");
        let offset = slot as usize * self.shared.buffer_size_bytes;
        // SAFETY: in range, checked above.
        let start = unsafe { self.shared.region.as_ptr().add(offset) };
        (start, self.shared.buffer_size_bytes)
    }
}

impl PoolShared {
    fn give_back(&self, slot: u32) {
        let mut free_slots = self
            .free_slots
            .lock()
            .expect("pool free list lock is never poisoned");
        debug_assert!(!free_slots.contains(&slot), "slot {slot} returned twice");
        free_slots.push(slot);
        assert!(free_slots.len() <= self.buffer_count as usize);
    }
}

impl Drop for PoolShared {
    fn drop(&mut self) {
        if self.shared_memory.is_some() {
            // The SharedMemory unmaps the region when it drops, after this.
            return;
        }
        let region_bytes = self.buffer_count as usize * self.buffer_size_bytes;
        // SAFETY: mapped with this length by `map_zeroed` in BufferPool::new; every IoBuf
        // holds an Arc, so none is alive now.
        let unmapped = unsafe { libc::munmap(self.region.as_ptr().cast(), region_bytes) };
        debug_assert_eq!(unmapped, 0, "a pool's own mapping unmaps");
    }
}

/// `bytes` of private anonymous memory: page-aligned (so [`IO_ALIGNMENT_BYTES`]-aligned)
/// and zero, each page faulted in when first touched. A pool's region is tens of MiB
/// (the engine's read pool: 64 buffers of 1 MiB) that an over-aligned `alloc_zeroed`
/// would write whole at once, faulting every page in on each open of a store, whether or
/// not a read ever uses the buffer.
fn map_zeroed(bytes: usize) -> NonNull<u8> {
    // SAFETY: a fresh anonymous mapping: no address hint, no file, nothing aliased.
    let raw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        let layout =
            Layout::from_size_align(bytes, IO_ALIGNMENT_BYTES).expect("pool layout fits in memory");
        alloc::handle_alloc_error(layout);
    }
    NonNull::new(raw.cast()).expect("a mapping is never at address 0")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_is_five_words_whatever_its_origin() {
        // it travels in every command and completion: a larger origin grows them all
        assert_eq!(size_of::<IoBuf>(), 40);
    }

    #[test]
    fn heap_buffers_are_aligned_and_zeroed() {
        for length in [0, 1, 511, 4096, 4097, 1 << 20] {
            let buffer = IoBuf::zeroed(length);
            assert_eq!(buffer.as_ptr() as usize % IO_ALIGNMENT_BYTES, 0);
            assert_eq!(buffer.len(), length);
            assert!(buffer.iter().all(|&byte| byte == 0));
        }
    }

    #[test]
    fn empty_buffers_hold_nothing_and_cannot_grow() {
        let mut buffer = IoBuf::empty();
        assert!(buffer.is_empty());
        assert_eq!(buffer.capacity(), 0);
        assert!(buffer.as_mut_slice().is_empty());
        let grow = std::panic::catch_unwind(move || buffer.set_len(1));
        assert!(grow.is_err());
    }

    #[test]
    fn pool_is_bounded_and_recycles() {
        let pool = BufferPool::new(2, 1000);
        assert_eq!(pool.buffer_size_bytes(), 4096);
        let first = pool.try_take().unwrap();
        let second = pool.try_take().unwrap();
        assert_eq!(first.as_ptr() as usize % IO_ALIGNMENT_BYTES, 0);
        assert_ne!(first.pool_slot(), second.pool_slot());
        let error = pool.try_take().unwrap_err();
        assert_eq!(error.buffer_count, 2);
        drop(first);
        assert_eq!(pool.free_count(), 1);
        assert!(pool.try_take().is_ok());
    }

    #[test]
    fn a_fresh_pool_reads_zero_and_its_writes_stay_in_their_slot() {
        let pool = BufferPool::new(64, 1 << 20);
        let mut buffers: Vec<IoBuf> = (0..64).map(|_| pool.try_take().unwrap()).collect();
        assert!(buffers
            .iter()
            .all(|buffer| buffer.iter().all(|&byte| byte == 0)));
        for (index, buffer) in buffers.iter_mut().enumerate() {
            buffer.as_mut_slice().fill(index as u8);
        }
        for (index, buffer) in buffers.iter().enumerate() {
            assert!(
                buffer.iter().all(|&byte| byte == index as u8),
                "slot {index}"
            );
        }
    }

    #[test]
    fn pool_outlives_its_handle_while_buffers_live() {
        let pool = BufferPool::new(1, 4096);
        let mut buffer = pool.try_take().unwrap();
        drop(pool);
        buffer.as_mut_slice()[0] = 7;
        assert_eq!(buffer[0], 7);
    }

    #[test]
    fn a_shared_pool_lays_slots_out_in_its_region() {
        use flashpipe_shm::{MapAccess, SharedMapping};
        let pool = BufferPool::in_shared_memory("test-pool", 3, 5000).unwrap();
        assert_eq!(pool.buffer_size_bytes(), 8192);
        let memory = pool.shared_memory().expect("a shared pool has its region");
        assert_eq!(memory.size_bytes(), 3 * 8192);
        let fd = memory.as_fd().try_clone_to_owned().unwrap();
        let mapping = SharedMapping::map(fd, 3 * 8192, MapAccess::ReadOnly).unwrap();
        let mut buffers: Vec<IoBuf> = (0..3).map(|_| pool.try_take().unwrap()).collect();
        for buffer in &mut buffers {
            let (_, slot) = buffer.pool_slot().unwrap();
            buffer.as_mut_slice()[10..14].copy_from_slice(&slot.to_le_bytes());
        }
        drop(pool);
        for slot in 0..3u32 {
            let offset = slot as usize * 8192 + 10;
            assert_eq!(mapping.bytes(offset, 4).unwrap(), slot.to_le_bytes());
        }
        assert!(BufferPool::new(1, 4096).shared_memory().is_none());
    }
}
