//! [`SharedMapping`]: the receiving side of a region, a memfd received as a file
//! descriptor, checked (size, seals) and mapped read-only or read-write.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;

use super::error::SharedMemoryError;
use super::{map_region, unmap_region, MapAccess, REQUIRED_SEALS};

/// A shared region received from its owner and mapped in this process. Windows are
/// bounds-checked; writable ones only on a [`MapAccess::ReadWrite`] mapping.
#[derive(Debug)]
pub struct SharedMapping {
    fd: OwnedFd,
    region: NonNull<u8>,
    size_bytes: usize,
    access: MapAccess,
    name: String,
}

// SAFETY: a descriptor and the address of a mapping valid until drop; bytes are reached
// only through `bytes` (shared borrow) and `bytes_mut` (exclusive borrow), so Rust's
// borrow rules order this process's accesses (module safety argument, points 1 and 4).
unsafe impl Send for SharedMapping {}
// SAFETY: as for Send: `&self` gives out only `&[u8]`.
unsafe impl Sync for SharedMapping {}

impl SharedMapping {
    /// Maps the first `size_bytes` of the region `fd` after checking that it holds at
    /// least that many bytes and carries the seals that keep its owner from shrinking it
    /// ([`REQUIRED_SEALS`]); refuses anything else (a plain file, a pipe, an unsealed
    /// memfd) without mapping it.
    pub fn map(
        fd: OwnedFd,
        size_bytes: usize,
        access: MapAccess,
    ) -> Result<SharedMapping, SharedMemoryError> {
        let name = region_name(fd.as_fd());
        check_seals(fd.as_fd(), &name)?;
        check_size(fd.as_fd(), &name, size_bytes)?;
        let region = map_region(fd.as_fd(), size_bytes, access, &name)?;
        Ok(SharedMapping {
            fd,
            region,
            size_bytes,
            access,
            name,
        })
    }

    /// Bytes mapped.
    pub fn size_bytes(&self) -> usize {
        self.size_bytes
    }

    /// How the region is mapped.
    pub fn access(&self) -> MapAccess {
        self.access
    }

    /// The region's name as the kernel reports it (`/memfd:<name> (deleted)`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The region's descriptor (to pass it on).
    pub fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Start of the mapping in this process (valid for [`SharedMapping::size_bytes`]
    /// bytes while `self` lives). Reaching the bytes through it is the caller's `unsafe`.
    pub fn as_ptr(&self) -> *const u8 {
        self.region.as_ptr()
    }

    /// `length` bytes at `offset`, refused when the window leaves the mapping.
    pub fn bytes(&self, offset: usize, length: usize) -> Result<&[u8], SharedMemoryError> {
        self.check_window(offset, length)?;
        // SAFETY: the window lies inside the mapping (checked), which stays mapped and
        // cannot shrink while `self` lives (seals checked at map); see the module safety
        // argument for writes by the other process.
        Ok(unsafe { std::slice::from_raw_parts(self.region.as_ptr().add(offset), length) })
    }

    /// `length` writable bytes at `offset`; refused on a read-only mapping or when the
    /// window leaves the mapping.
    pub fn bytes_mut(
        &mut self,
        offset: usize,
        length: usize,
    ) -> Result<&mut [u8], SharedMemoryError> {
        if self.access == MapAccess::ReadOnly {
            return Err(SharedMemoryError::ReadOnly {
                region: self.name.clone(),
            });
        }
        self.check_window(offset, length)?;
        // SAFETY: as in `bytes`, the mapping is writable (checked above) and `&mut self`
        // excludes every other borrow of it in this process.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.region.as_ptr().add(offset), length) })
    }

    fn check_window(&self, offset: usize, length: usize) -> Result<(), SharedMemoryError> {
        match offset.checked_add(length) {
            Some(end) if end <= self.size_bytes => Ok(()),
            _ => Err(SharedMemoryError::OutOfBounds {
                region: self.name.clone(),
                offset_bytes: offset,
                length_bytes: length,
                size_bytes: self.size_bytes,
            }),
        }
    }
}

impl Drop for SharedMapping {
    fn drop(&mut self) {
        unmap_region(self.region, self.size_bytes);
    }
}

/// What `/proc/self/fd/<fd>` names the descriptor (`/memfd:<name> (deleted)`), or
/// `fd <n>` when that cannot be read.
fn region_name(fd: BorrowedFd<'_>) -> String {
    let raw_fd = fd.as_raw_fd();
    std::fs::read_link(format!("/proc/self/fd/{raw_fd}"))
        .map(|target| target.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("fd {raw_fd}"))
}

fn check_seals(fd: BorrowedFd<'_>, name: &str) -> Result<(), SharedMemoryError> {
    // SAFETY: fd is an open descriptor; F_GET_SEALS only reads its seals (EINVAL for a
    // file that is not a memfd).
    let present_seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
    if present_seals < 0 {
        return Err(SharedMemoryError::last_os_error(name, "F_GET_SEALS"));
    }
    let missing_seals = REQUIRED_SEALS & !present_seals;
    if missing_seals != 0 {
        return Err(SharedMemoryError::SealsMissing {
            region: name.to_string(),
            present_seals,
            missing_seals,
        });
    }
    Ok(())
}

fn check_size(fd: BorrowedFd<'_>, name: &str, size_bytes: usize) -> Result<(), SharedMemoryError> {
    super::region::check_size(name, size_bytes)?;
    let mut status = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: fd is open and `status` is writable memory of the size fstat fills.
    if unsafe { libc::fstat(fd.as_raw_fd(), status.as_mut_ptr()) } != 0 {
        return Err(SharedMemoryError::last_os_error(name, "fstat"));
    }
    // SAFETY: fstat succeeded, so it filled `status`.
    let actual_bytes = u64::try_from(unsafe { status.assume_init() }.st_size).unwrap_or(0);
    if actual_bytes < size_bytes as u64 {
        return Err(SharedMemoryError::TooSmall {
            region: name.to_string(),
            actual_bytes,
            expected_bytes: size_bytes,
        });
    }
    Ok(())
}
