//! A bounded free list of page buffers, so a steady stream of programs, reads and erases
//! allocates nothing: the array takes a buffer for every raw page it reads or stores and
//! gives it back when the page is erased or overwritten, when an image write is done, and
//! when the FTL has copied a read's data out (through `FlashArray::recycle_page_buffer`).
//!
//! Invariants:
//! - at most [`PAGE_POOL_LIMIT`] buffers are kept (a buffer given back past it is freed),
//!   so the pool holds at most `PAGE_POOL_LIMIT * capacity` bytes besides the pages;
//! - a buffer leaves the pool empty (length 0) or filled whole with one byte value
//!   ([`PagePool::take_filled`]): the bytes of the page it held before can never be read
//!   through it.

/// The most buffers the pool keeps (1,024 buffers of one raw page: 8.4 MiB for the
/// 8,640-byte pages of the minFlash preset, 17 MiB for 17,280-byte pages).
pub const PAGE_POOL_LIMIT: usize = 1024;

/// Free page buffers of one capacity (the raw page of the array).
#[derive(Debug)]
pub struct PagePool {
    free: Vec<Vec<u8>>,
    capacity: usize,
    limit: usize,
}

impl PagePool {
    /// An empty pool of buffers of `capacity` bytes, keeping at most [`PAGE_POOL_LIMIT`].
    pub fn new(capacity: usize) -> PagePool {
        PagePool::with_limit(capacity, PAGE_POOL_LIMIT)
    }

    /// An empty pool keeping at most `limit` buffers (at most [`PAGE_POOL_LIMIT`]).
    pub fn with_limit(capacity: usize, limit: usize) -> PagePool {
        PagePool {
            free: Vec::new(),
            capacity,
            limit: limit.min(PAGE_POOL_LIMIT),
        }
    }

    /// An empty buffer (length 0) with room for one raw page.
    pub fn take(&mut self) -> Vec<u8> {
        match self.free.pop() {
            Some(mut buffer) => {
                buffer.clear();
                buffer
            }
            None => Vec::with_capacity(self.capacity),
        }
    }

    /// A buffer of `length` bytes, every one of them `byte`.
    pub fn take_filled(&mut self, length: usize, byte: u8) -> Vec<u8> {
        let mut buffer = self.take();
        buffer.resize(length, byte);
        buffer
    }

    /// Gives `buffer` back: kept when it has room for a raw page and the pool is not full,
    /// freed otherwise.
    pub fn give(&mut self, buffer: Vec<u8>) {
        if buffer.capacity() >= self.capacity && self.free.len() < self.limit {
            self.free.push(buffer);
        }
    }

    /// Buffers kept now.
    pub fn len(&self) -> usize {
        self.free.len()
    }

    /// True when no buffer is kept.
    pub fn is_empty(&self) -> bool {
        self.free.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reused_buffer_shows_none_of_its_old_bytes() {
        let mut pool = PagePool::new(64);
        let mut buffer = pool.take();
        buffer.extend_from_slice(&[0xAB; 64]);
        pool.give(buffer);
        let reused = pool.take();
        assert!(reused.is_empty());
        assert!(reused.capacity() >= 64);
        pool.give(reused);
        assert_eq!(pool.take_filled(64, 0xFF), vec![0xFF; 64]);
    }

    #[test]
    fn the_pool_keeps_at_most_its_limit() {
        let mut pool = PagePool::with_limit(16, 3);
        for _ in 0..10 {
            pool.give(vec![0; 16]);
        }
        assert_eq!(pool.len(), 3);
        assert_eq!(PagePool::with_limit(16, usize::MAX).limit, PAGE_POOL_LIMIT);
    }

    #[test]
    fn a_buffer_too_small_for_a_page_is_not_kept() {
        let mut pool = PagePool::new(16);
        pool.give(Vec::with_capacity(8));
        assert!(pool.is_empty());
    }
}
