//! [`Region`]: memory mapped for the destination of one large read, owned by the
//! [`crate::buffer::ReadBuffer`] that exports it, so a numpy array keeps it alive and it is
//! unmapped when the last view of it dies.
//!
//! Why not a `Vec`: `vec![0; n]` (or `resize`) writes every byte before the first read is
//! sent, faulting the fresh memory in 4 KiB pages on the client's one thread; measured,
//! that was most of a whole-file `read_array`'s time (docs/design/26-python.md, "Fourth
//! part"). An anonymous mapping is zero already (the kernel zeroes a page on its first
//! touch, which here is the copy of the bytes read, overlapping the server's next reads);
//! it is aligned to 2 MiB and marked `MADV_HUGEPAGE`, so where the kernel has transparent
//! huge pages that first touch faults 512 times fewer pages. A kernel without them
//! answers the advice with an error, which is ignored (the mapping works in 4 KiB pages).
//!
//! # Safety argument (the only `unsafe` of this file)
//! 1. *Owned*: the mapping is made by [`Region::new`] (private, anonymous, read-write) and
//!    unmapped only by `Drop`, once; nothing else in the process knows its address.
//! 2. *In range*: [`Region::as_slice`] and [`Region::as_mut_slice`] cover
//!    `start..start + length`, inside the `mapped` bytes kept mapped from `start`.
//! 3. *Aliasing*: a mutable slice needs `&mut Region`, a shared one `&Region`, so Rust's
//!    borrow rules hold for the bytes as for any owned buffer; once the region is inside
//!    a frozen `ReadBuffer` only shared slices are made.
//! 4. *Threads*: the region is plain memory with one owner, so sending it or sharing
//!    `&Region` between threads is as safe as for a `Vec<u8>`.

use std::ffi::c_void;
use std::ptr::NonNull;

use crate::error::StoreError;

/// The size of a transparent huge page on x86-64 and arm64 (4 KiB base pages).
const HUGE_PAGE_BYTES: usize = 2 << 20;

/// Zeroed, private, anonymous memory of a fixed length, unmapped when dropped.
pub struct Region {
    start: NonNull<u8>,
    length: usize,
    /// Bytes mapped from `start` (`length` rounded up to the page).
    mapped: usize,
}

// SAFETY: see the module's point 4: one owner, plain memory.
unsafe impl Send for Region {}
// SAFETY: see the module's point 4: shared access only reads.
unsafe impl Sync for Region {}

impl Region {
    /// `length_bytes` (1 or more) of zeroed memory; an error that says so when the
    /// process cannot map that much.
    pub fn new(length_bytes: usize) -> Result<Region, StoreError> {
        assert!(length_bytes > 0, "a region holds at least one byte");
        let too_large = |reason: String| {
            StoreError::Invalid(format!(
                "{length_bytes} bytes cannot be allocated in this process ({reason}); read less at a time"
            ))
        };
        let page = page_bytes();
        let mapped = length_bytes
            .checked_next_multiple_of(page)
            .ok_or_else(|| too_large("larger than the address space".to_string()))?;
        let huge = mapped >= HUGE_PAGE_BYTES;
        let reserved = if huge {
            mapped
                .checked_add(HUGE_PAGE_BYTES)
                .ok_or_else(|| too_large("larger than the address space".to_string()))?
        } else {
            mapped
        };
        let base = map_anonymous(reserved).map_err(|error| too_large(error.to_string()))?;
        let start = if huge {
            trim_to_huge_page(base, reserved, mapped)
        } else {
            base
        };
        if huge {
            advise_huge_pages(start, mapped);
        }
        Ok(Region {
            start,
            length: length_bytes,
            mapped,
        })
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: points 2 and 3 of the module: in range, shared borrow of self.
        unsafe { std::slice::from_raw_parts(self.start.as_ptr(), self.length) }
    }

    /// The bytes, to fill.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: points 2 and 3 of the module: in range, exclusive borrow of self.
        unsafe { std::slice::from_raw_parts_mut(self.start.as_ptr(), self.length) }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: point 1 of the module: our own mapping of `mapped` bytes, unmapped once;
        // no slice of it outlives `self` (they borrow it).
        unsafe { unmap(self.start, self.mapped) };
    }
}

fn page_bytes() -> usize {
    // SAFETY: sysconf reads a constant of the system; no pointer is passed.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(page)
        .ok()
        .filter(|page| *page > 0)
        .unwrap_or(4096)
}

/// A fresh private anonymous read-write mapping of `length` bytes.
fn map_anonymous(length: usize) -> std::io::Result<NonNull<u8>> {
    // SAFETY: a new anonymous mapping at an address the kernel picks: no existing memory
    // is touched; the result is checked before use.
    let address = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            length,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if address == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    Ok(NonNull::new(address.cast()).expect("mmap never answers a null mapping"))
}

/// Unmaps the head of `base..base + reserved` before the first 2 MiB boundary and the tail
/// past `mapped` bytes from there; returns that boundary.
fn trim_to_huge_page(base: NonNull<u8>, reserved: usize, mapped: usize) -> NonNull<u8> {
    let address = base.as_ptr() as usize;
    let head = address.next_multiple_of(HUGE_PAGE_BYTES) - address;
    let tail = reserved - head - mapped;
    // SAFETY: `head + mapped + tail == reserved`: both windows lie inside the mapping just
    // made (page-aligned: the base, the 2 MiB boundary and `mapped` are) and nothing uses
    // them; the kept window starts at `base + head`, inside the same mapping.
    unsafe {
        let start = base.add(head);
        if head > 0 {
            unmap(base, head);
        }
        if tail > 0 {
            unmap(start.add(mapped), tail);
        }
        start
    }
}

/// Asks for transparent huge pages over the region (ignored where the kernel has none).
fn advise_huge_pages(start: NonNull<u8>, length: usize) {
    // SAFETY: advice over our own mapping; it changes no byte and no access right.
    let _ = unsafe { libc::madvise(start.as_ptr().cast(), length, libc::MADV_HUGEPAGE) };
}

/// Unmaps `length` bytes at `start`.
///
/// # Safety
/// `start..start + length` is a page-aligned part of a mapping this file made, and no
/// reference into it is used afterwards.
unsafe fn unmap(start: NonNull<u8>, length: usize) {
    // SAFETY: the caller's promise.
    let status = unsafe { libc::munmap(start.as_ptr().cast::<c_void>(), length) };
    debug_assert_eq!(status, 0, "unmapping our own mapping succeeds");
}
