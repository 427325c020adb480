//! Opening a file or block device for the file backend: flags, creation, size and the
//! smallest block size the kernel accepts for direct I/O.
//!
//! Block devices report their logical block size through the `BLKSSZGET` ioctl and
//! their size through `BLKGETSIZE64`; regular files report their direct-I/O alignment
//! through `statx(STATX_DIOALIGN)` (Linux 6.1+; older kernels fall back to 512 bytes,
//! the smallest sector size Linux supports).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// `BLKGETSIZE64`: `_IOR(0x12, 114, size_t)` on the generic ioctl layout (x86-64, arm64,
/// riscv64); libc does not export it.
const BLKGETSIZE64_REQUEST: u64 = 0x8008_1272;
/// `BLKDISCARD`: `_IO(0x12, 119)`; libc does not export it.
const BLKDISCARD_REQUEST: u64 = 0x1277;

/// The smallest direct-I/O alignment Linux has: one 512-byte sector.
pub const SMALLEST_SECTOR_BYTES: u32 = 512;

/// How to open the path.
#[derive(Debug, Clone, Copy)]
pub struct OpenFlags {
    /// Ask for `O_DIRECT`.
    pub direct_io: bool,
    /// Create the file when it does not exist.
    pub create: bool,
    /// Open for reading only (`O_RDONLY`): the file is never written, not even its
    /// access bookkeeping beyond what the kernel does for any reader.
    pub read_only: bool,
}

/// Opens `path` with the given flags: read-write, or read-only (`O_RDONLY`, never
/// created) when `flags.read_only`.
pub fn open_read_write(path: &Path, flags: OpenFlags) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options
        .read(true)
        .write(!flags.read_only)
        .create(flags.create && !flags.read_only);
    if flags.direct_io {
        options.custom_flags(libc::O_DIRECT);
    }
    options.open(path)
}

/// What the kernel says about an open file or block device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// True for a block device, false for a regular file.
    pub is_block_device: bool,
    /// Size in bytes.
    pub size_bytes: u64,
    /// The smallest block size direct I/O accepts on it.
    pub minimum_block_size_bytes: u32,
}

/// Reads the geometry of an open file or block device.
pub fn geometry(file: &File) -> io::Result<Geometry> {
    let file_type = file.metadata()?.file_type();
    if file_type.is_block_device() {
        return Ok(Geometry {
            is_block_device: true,
            size_bytes: block_device_size_bytes(file)?,
            minimum_block_size_bytes: block_device_logical_block_size_bytes(file)?,
        });
    }
    if !file_type.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "neither a regular file nor a block device",
        ));
    }
    Ok(Geometry {
        is_block_device: false,
        size_bytes: file.metadata()?.len(),
        minimum_block_size_bytes: regular_file_direct_io_alignment_bytes(file),
    })
}

fn block_device_logical_block_size_bytes(file: &File) -> io::Result<u32> {
    let mut logical_block_size: libc::c_int = 0;
    // SAFETY: BLKSSZGET writes one int through the pointer, which is valid.
    let result = unsafe {
        libc::ioctl(
            file.as_raw_fd(),
            libc::BLKSSZGET,
            &mut logical_block_size as *mut libc::c_int,
        )
    };
    if result < 0 {
        return Err(io::Error::last_os_error());
    }
    u32::try_from(logical_block_size)
        .map_err(|_| io::Error::other(format!("BLKSSZGET said {logical_block_size}")))
}

fn block_device_size_bytes(file: &File) -> io::Result<u64> {
    let mut size_bytes: u64 = 0;
    // SAFETY: BLKGETSIZE64 writes one u64 through the pointer, which is valid.
    let result = unsafe {
        libc::ioctl(
            file.as_raw_fd(),
            BLKGETSIZE64_REQUEST as _,
            &mut size_bytes as *mut u64,
        )
    };
    if result < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(size_bytes)
}

fn regular_file_direct_io_alignment_bytes(file: &File) -> u32 {
    // SAFETY: `statx` is a plain C struct of integers, for which all zero bytes are valid.
    let mut status: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: statx only writes into the zeroed struct we own; the empty path with
    // AT_EMPTY_PATH refers to the descriptor itself, open for the call's duration.
    let result = unsafe {
        libc::statx(
            file.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_DIOALIGN,
            &mut status,
        )
    };
    let reported = status.stx_mask & libc::STATX_DIOALIGN != 0 && status.stx_dio_offset_align > 0;
    if result == 0 && reported {
        status.stx_dio_offset_align.max(SMALLEST_SECTOR_BYTES)
    } else {
        SMALLEST_SECTOR_BYTES
    }
}

/// Gives a new file its size, allocating its blocks so that later writes do not have
/// to (falls back to a sparse file where the file system cannot preallocate).
pub fn allocate(file: &File, size_bytes: u64) -> io::Result<()> {
    let length = libc::off_t::try_from(size_bytes)
        .map_err(|_| io::Error::other(format!("size {size_bytes} does not fit in off_t")))?;
    // SAFETY: plain syscall on a descriptor we own.
    let result = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, length) };
    if result == 0 {
        return Ok(());
    }
    let error = io::Error::last_os_error();
    match error.raw_os_error() {
        Some(libc::EOPNOTSUPP) => file.set_len(size_bytes),
        _ => Err(error),
    }
}

/// Allocates every block of the regular file at `path` (its size unchanged): a sparse
/// file made with `preallocate` off becomes a preallocated one, so a full file system
/// fails now rather than at a later write. Where the file system cannot preallocate
/// (`EOPNOTSUPP`) the file stays sparse and this succeeds, as [`allocate`] does.
pub fn allocate_existing(path: &Path) -> io::Result<()> {
    let file = OpenOptions::new().write(true).open(path)?;
    let size_bytes = file.metadata()?.len();
    if size_bytes == 0 {
        return Ok(());
    }
    allocate(&file, size_bytes)
}

/// Punches a hole (the range reads back as zeros; the file keeps its size).
pub fn punch_hole(file_descriptor: i32, offset_bytes: u64, length_bytes: u64) -> io::Result<()> {
    // SAFETY: plain syscall on a descriptor the caller keeps open.
    let result = unsafe {
        libc::fallocate(
            file_descriptor,
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            offset_bytes as libc::off_t,
            length_bytes as libc::off_t,
        )
    };
    if result < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Discards a range of a block device (`BLKDISCARD`).
pub fn discard(file_descriptor: i32, offset_bytes: u64, length_bytes: u64) -> io::Result<()> {
    let range: [u64; 2] = [offset_bytes, length_bytes];
    // SAFETY: BLKDISCARD reads two u64 through the pointer, which is valid.
    let result = unsafe { libc::ioctl(file_descriptor, BLKDISCARD_REQUEST as _, range.as_ptr()) };
    if result < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
