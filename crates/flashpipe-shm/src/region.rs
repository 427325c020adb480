//! [`SharedMemory`]: the owner's side of a region, a sealed memfd mapped read-write.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;

use super::error::SharedMemoryError;
use super::{map_region, unmap_region, MapAccess, MAX_SHARED_MEMORY_BYTES, REQUIRED_SEALS};

/// Longest memfd name the kernel accepts (`MFD_NAME_MAX_LEN`: 255 less the `memfd:`
/// prefix).
pub const MAX_MEMFD_NAME_BYTES: usize = 249;

/// A memfd region (`memfd_create` with `MFD_CLOEXEC | MFD_ALLOW_SEALING`), sized, its
/// pages reserved, sealed against shrinking and growing, and mapped `MAP_SHARED`
/// read-write in the process that created it. Pass [`SharedMemory::as_fd`] over a Unix
/// socket ([`super::send_with_fds`]) and map it on the other side with
/// [`super::SharedMapping::map`]. The mapping and the descriptor close on drop.
#[derive(Debug)]
pub struct SharedMemory {
    fd: OwnedFd,
    region: NonNull<u8>,
    size_bytes: usize,
    name: String,
}

// SAFETY: the struct holds a descriptor and the address of a mapping that stays valid
// until drop; it gives out only raw pointers and the descriptor, and what happens to the
// bytes behind them is the business of whoever dereferences them (module safety
// argument, points 1 and 4).
unsafe impl Send for SharedMemory {}
// SAFETY: as for Send: no method reads or writes the region's bytes through `&self`.
unsafe impl Sync for SharedMemory {}

impl SharedMemory {
    /// A new region of `size_bytes` named `name` (the name shows in `/proc/<pid>/fd` as
    /// `/memfd:<name>`), zero-filled.
    pub fn create(name: &str, size_bytes: usize) -> Result<SharedMemory, SharedMemoryError> {
        let c_name = checked_name(name)?;
        check_size(name, size_bytes)?;
        // SAFETY: c_name is a valid NUL-terminated string; memfd_create touches nothing else.
        let raw_fd = unsafe {
            libc::memfd_create(c_name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING)
        };
        if raw_fd < 0 {
            return Err(SharedMemoryError::last_os_error(name, "memfd_create"));
        }
        // SAFETY: raw_fd is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw_fd) };
        size_and_seal(&fd, name, size_bytes)?;
        let region = map_region(fd.as_fd(), size_bytes, MapAccess::ReadWrite, name)?;
        Ok(SharedMemory {
            fd,
            region,
            size_bytes,
            name: name.to_string(),
        })
    }

    /// Bytes in the region.
    pub fn size_bytes(&self) -> usize {
        self.size_bytes
    }

    /// The name it was created with.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The memfd, to pass over a socket; the receiver maps it with
    /// [`super::SharedMapping::map`].
    pub fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Start of the mapping in this process (valid for [`SharedMemory::size_bytes`]
    /// bytes while `self` lives). Reading or writing through it is the caller's
    /// `unsafe`, under the module's safety argument.
    pub fn as_mut_ptr(&self) -> *mut u8 {
        self.region.as_ptr()
    }
}

impl Drop for SharedMemory {
    fn drop(&mut self) {
        unmap_region(self.region, self.size_bytes);
    }
}

fn checked_name(name: &str) -> Result<CString, SharedMemoryError> {
    let refuse = |reason| SharedMemoryError::NameInvalid {
        name: name.to_string(),
        reason,
        max_name_bytes: MAX_MEMFD_NAME_BYTES,
    };
    if name.len() > MAX_MEMFD_NAME_BYTES {
        return Err(refuse("too long"));
    }
    CString::new(name).map_err(|_| refuse("holds a NUL byte"))
}

pub(super) fn check_size(region: &str, size_bytes: usize) -> Result<(), SharedMemoryError> {
    if size_bytes == 0 || size_bytes > MAX_SHARED_MEMORY_BYTES {
        return Err(SharedMemoryError::SizeInvalid {
            region: region.to_string(),
            size_bytes,
            max_size_bytes: MAX_SHARED_MEMORY_BYTES,
        });
    }
    Ok(())
}

/// Sizes the memfd, reserves its pages (so a later touch cannot fault for want of
/// memory, which would be a SIGBUS in every process mapping it) and seals its size.
fn size_and_seal(fd: &OwnedFd, name: &str, size_bytes: usize) -> Result<(), SharedMemoryError> {
    let length = libc::off_t::try_from(size_bytes).expect("sizes are checked below off_t's range");
    // SAFETY: fd is an open memfd owned by the caller; ftruncate only changes its size.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), length) } != 0 {
        return Err(SharedMemoryError::last_os_error(name, "ftruncate"));
    }
    // SAFETY: as above; fallocate with mode 0 allocates pages inside the file's size.
    if unsafe { libc::fallocate(fd.as_raw_fd(), 0, 0, length) } != 0 {
        return Err(SharedMemoryError::last_os_error(name, "fallocate"));
    }
    // SAFETY: as above; F_ADD_SEALS takes an int argument.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, REQUIRED_SEALS) } != 0 {
        return Err(SharedMemoryError::last_os_error(name, "F_ADD_SEALS"));
    }
    Ok(())
}
