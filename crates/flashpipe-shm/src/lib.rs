//! Shared memory between processes: a server hands data to its clients by reference.
//!
//! The owner creates a [`SharedMemory`] (a memfd: `memfd_create` with `MFD_CLOEXEC |
//! MFD_ALLOW_SEALING`, sized with `ftruncate`, its pages reserved with `fallocate`, sealed
//! with `F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL`, mapped `MAP_SHARED` read-write),
//! passes its descriptor over a Unix socket ([`send_with_fds`], `SCM_RIGHTS`), and the
//! receiver maps it ([`SharedMapping::map`]: `fstat` says it is large enough, `F_GET_SEALS`
//! says it is sealed, then `mmap` read-only or read-write). The device layer's
//! `BufferPool` can live in one (`flashpipe_device::BufferPool::in_shared_memory`): slot
//! `s` lies at byte offset `s * buffer_size_bytes`, so a server names data by (slot,
//! offset, length) and the client reads it in its own mapping without a copy.
//!
//! [`ring::FrameRing`] is a bounded single-producer single-consumer ring of records in
//! such a region (spin, then park on a futex in the shared page), so two processes pass
//! frames without a socket round trip. [`doorbell::Doorbell`] is the one futex word a
//! consumer of several rings parks on (every producer rings it after a push).
//!
//! Hand-written on `libc` rather than taken from a crate: the maintained crates
//! (`memfd`, `nix`, `sendfd`) each cover one step; the checks that make the receiving
//! side sound (size and seals before mapping, truncated control data closing what came)
//! are the part that matters here, and they are a few lines each.
//!
//! # Safety argument
//! Every `unsafe` block of this module and its children rests on these points:
//! 1. *The mapping stays valid while its owner value lives.* [`SharedMemory`] and
//!    [`SharedMapping`] each own their `mmap` (and the descriptor) and unmap only in
//!    `drop`; every pointer or slice they give out borrows `self` (slices) or is
//!    documented as valid only while `self` lives (raw pointers, whose use is the
//!    caller's `unsafe`). A device-layer `BufferPool` in shared memory holds its
//!    `SharedMemory` inside the `Arc` every pool buffer holds, so the region outlives
//!    every `IoBuf` carved from it, exactly as a heap pool's allocation does.
//! 2. *No SIGBUS from the other process.* Touching a page of a `MAP_SHARED` mapping past
//!    the end of its file raises SIGBUS. The owner seals the size before anyone maps it
//!    (`F_SEAL_SHRINK | F_SEAL_GROW`, and `F_SEAL_SEAL` so no later seal changes the
//!    rules); seals cannot be removed, so the receiver checks them (refusing a region
//!    without them) and `fstat` the size before mapping only what is there. The owner
//!    reserves the pages at creation (`fallocate`), so a first touch does not fault for
//!    want of tmpfs memory either.
//! 3. *In bounds.* [`SharedMapping::bytes`] and [`SharedMapping::bytes_mut`] check
//!    `offset + length <= size_bytes` with overflow checked, in release builds.
//! 4. *Aliasing.* Inside one process the borrow rules hold: `bytes` borrows the
//!    mapping shared, `bytes_mut` exclusively, and a read-only mapping refuses
//!    `bytes_mut` (and is mapped `PROT_READ`, so a write through a stray pointer faults
//!    instead of corrupting). Across processes no type system reaches: another process
//!    may write bytes this one is reading. The bytes are `u8` (every bit pattern valid),
//!    so such a race can only tear *values*, never memory safety of this process's own
//!    data structures; the protocol above (the server's grants: a read window is not
//!    written by the engine until the client releases it, a write buffer is written only
//!    by the client holding its grant) is what keeps the values whole. Records that
//!    must be read consistently while the other side writes (the frame ring) go through
//!    atomics with acquire/release ordering instead of plain slices.
//! 5. *Descriptors.* Received descriptors become [`std::os::fd::OwnedFd`]s at once (so they close on
//!    every path, including truncated control data) and carry close-on-exec
//!    (`MSG_CMSG_CLOEXEC`, `MFD_CLOEXEC`), so no child inherits a region by accident.
//!
//! # Layer
//! A crate of the device layer's level: it depends on `flashpipe-base` (the ring's clock)
//! and `libc` alone, and on no other flashpipe crate. The device layer (for
//! `BufferPool::in_shared_memory`), the engine, the server, the client and the benchmarks
//! stand on it.

pub mod doorbell;
mod error;
mod fd_passing;
mod futex;
mod mapping;
mod region;
pub mod ring;
pub mod ring_stream;

use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;

pub use doorbell::{Doorbell, DoorbellCounters, DEFAULT_DOORBELL_WINDOW_US, DOORBELL_BYTES};
pub use error::SharedMemoryError;
pub use fd_passing::{receive_with_fds, send_with_fds, MAX_FDS_PER_MESSAGE};
pub use mapping::SharedMapping;
pub use region::{SharedMemory, MAX_MEMFD_NAME_BYTES};
pub use ring::{
    attach_received_ring, FrameRing, FrameRingError, PushOutcome, RingCounters, RingWait,
    DEFAULT_RING_SPIN_US, DEFAULT_SERVE_RING_SPIN_US, RING_HEADER_BYTES,
};
pub use ring_stream::{push_stream_bytes, ring_error_of, PeerCheck, RingReader};

/// Largest region created or mapped, in bytes (1 TiB).
pub const MAX_SHARED_MEMORY_BYTES: usize = 1 << 40;

/// Seals a region must carry to be mapped: its size can neither shrink (which would
/// make a mapper's accesses raise SIGBUS) nor grow, and no seal can be added later.
pub const REQUIRED_SEALS: i32 = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;

/// How a received region is mapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapAccess {
    /// `PROT_READ`: its bytes can be read, never written.
    ReadOnly,
    /// `PROT_READ | PROT_WRITE`.
    ReadWrite,
}

/// Maps `size_bytes` of `fd` shared, as `access` says.
fn map_region(
    fd: BorrowedFd<'_>,
    size_bytes: usize,
    access: MapAccess,
    region: &str,
) -> Result<NonNull<u8>, SharedMemoryError> {
    let protection = match access {
        MapAccess::ReadOnly => libc::PROT_READ,
        MapAccess::ReadWrite => libc::PROT_READ | libc::PROT_WRITE,
    };
    // SAFETY: a fresh mapping at an address the kernel chooses (no existing memory is
    // replaced); fd is open; size_bytes is non-zero (checked by the callers).
    let address = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size_bytes,
            protection,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        )
    };
    if address == libc::MAP_FAILED {
        return Err(SharedMemoryError::last_os_error(region, "mmap"));
    }
    Ok(NonNull::new(address.cast()).expect("mmap never maps at address 0"))
}

/// Unmaps what [`map_region`] mapped.
fn unmap_region(region: NonNull<u8>, size_bytes: usize) {
    // SAFETY: region..region+size_bytes is a mapping made by map_region, unmapped once,
    // by its owner's drop, when no borrow of it remains.
    let result = unsafe { libc::munmap(region.as_ptr().cast(), size_bytes) };
    assert_eq!(
        result, 0,
        "munmap of a mapping this process made cannot fail"
    );
}

#[cfg(test)]
mod tests;
