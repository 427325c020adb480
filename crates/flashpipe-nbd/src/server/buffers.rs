//! Recycled payload buffers: read replies and write payloads reuse aligned buffers
//! instead of allocating (and, above the allocator's mmap threshold, mapping, faulting
//! in and unmapping) a fresh one per request.
//!
//! Buffers are kept in size classes (powers of two from 4 KiB to the 32 MiB payload
//! limit); a taken buffer has the length asked for and unspecified contents, which every
//! user overwrites whole (a device read fills it; a write payload is read into it; a
//! buffer whose fill failed is dropped, never handed out). Bounded: at most
//! `max_kept_bytes` are kept over all classes; a returned buffer beyond it is freed.

use std::sync::Mutex;

use flashpipe_device::IoBuf;

use crate::wire::MAX_PAYLOAD_BYTES;

/// The smallest class.
const SMALLEST_CLASS_BYTES: usize = 4096;
/// Number of classes: 4 KiB .. 32 MiB.
const CLASS_COUNT: usize = 14;
/// Default bound on bytes kept.
pub const DEFAULT_MAX_KEPT_BYTES: usize = 256 * 1024 * 1024;

/// A bounded pool of buffers by size class, shared by a server's threads.
#[derive(Debug)]
pub struct BufferRecycler {
    classes: Mutex<RecyclerState>,
    max_kept_bytes: usize,
}

#[derive(Debug, Default)]
struct RecyclerState {
    free: Vec<Vec<IoBuf>>,
    kept_bytes: usize,
}

fn class_of(length_bytes: usize) -> Option<usize> {
    let capacity = length_bytes.max(SMALLEST_CLASS_BYTES).next_power_of_two();
    let class = (capacity / SMALLEST_CLASS_BYTES).trailing_zeros() as usize;
    (class < CLASS_COUNT).then_some(class)
}

fn class_capacity_bytes(class: usize) -> usize {
    SMALLEST_CLASS_BYTES << class
}

impl BufferRecycler {
    /// A recycler keeping at most `max_kept_bytes`.
    pub fn new(max_kept_bytes: usize) -> BufferRecycler {
        assert_eq!(
            class_capacity_bytes(CLASS_COUNT - 1),
            MAX_PAYLOAD_BYTES as usize,
            "the largest class holds the largest payload"
        );
        BufferRecycler {
            classes: Mutex::new(RecyclerState {
                free: (0..CLASS_COUNT).map(|_| Vec::new()).collect(),
                kept_bytes: 0,
            }),
            max_kept_bytes,
        }
    }

    /// A buffer of `length_bytes` (contents unspecified: the caller overwrites it whole).
    pub fn take(&self, length_bytes: usize) -> IoBuf {
        let Some(class) = class_of(length_bytes) else {
            return IoBuf::zeroed(length_bytes);
        };
        let recycled = {
            let mut state = self
                .classes
                .lock()
                .unwrap_or_else(|poison| poison.into_inner());
            let buffer = state.free[class].pop();
            if let Some(buffer) = &buffer {
                state.kept_bytes -= buffer.capacity();
            }
            buffer
        };
        let mut buffer = recycled.unwrap_or_else(|| IoBuf::zeroed(class_capacity_bytes(class)));
        buffer.set_len(length_bytes);
        buffer
    }

    /// Hands a buffer back for reuse (freed if the pool is full or it is not one of ours).
    pub fn give_back(&self, mut buffer: IoBuf) {
        let capacity = buffer.capacity();
        if buffer.pool_slot().is_some() || !capacity.is_power_of_two() {
            return;
        }
        let Some(class) = class_of(capacity) else {
            return;
        };
        if class_capacity_bytes(class) != capacity {
            return;
        }
        let mut state = self
            .classes
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if state.kept_bytes + capacity > self.max_kept_bytes {
            return;
        }
        buffer.set_len(capacity);
        state.kept_bytes += capacity;
        state.free[class].push(buffer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_in_their_class_and_the_bound_holds() {
        let recycler = BufferRecycler::new(64 * 1024);
        let buffer = recycler.take(5000);
        assert_eq!((buffer.len(), buffer.capacity()), (5000, 8192));
        let address = buffer.as_ptr();
        recycler.give_back(buffer);
        let again = recycler.take(8192);
        assert_eq!(again.as_ptr(), address);
        let large = recycler.take(128 * 1024);
        recycler.give_back(large);
        assert_eq!(
            recycler.classes.lock().unwrap().kept_bytes,
            0,
            "over the bound: freed"
        );
        assert_eq!(
            recycler.take(MAX_PAYLOAD_BYTES as usize).len(),
            MAX_PAYLOAD_BYTES as usize
        );
        assert_eq!(recycler.take(0).len(), 0);
    }
}
