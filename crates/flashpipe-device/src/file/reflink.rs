//! Copy by reference on real files: Linux `FICLONERANGE` makes a range of a file share
//! the extents of another range (reflink), which XFS (with `reflink=1`, the default since
//! xfsprogs 5.1) and btrfs support. No data moves; a later write to either range gets new
//! extents (copy-on-write in the host file system), exactly the semantics of
//! [`crate::Operation::CopyByReference`].
//!
//! The ioctl is synchronous and has no io_uring opcode, so the device runs it at submit
//! and hands the completion back at the next poll. The kernel refuses ranges of one file
//! that overlap (`EINVAL`), so an overlapping copy is cut into pieces as memmove would do
//! it ([`memmove_pieces`]).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// `statfs` magic numbers of the file systems that clone ranges.
const XFS_SUPER_MAGIC: i64 = 0x5846_5342;
const BTRFS_SUPER_MAGIC: i64 = 0x9123_683e;

/// Whether `file` is a regular file on a file system that clones ranges (XFS, btrfs). A
/// file system of those kinds made without reflink support still refuses each clone with
/// `EOPNOTSUPP`, which the device reports as `Unsupported`.
pub(crate) fn file_system_clones_ranges(file: &File) -> bool {
    let is_regular = file.metadata().is_ok_and(|metadata| metadata.is_file());
    // SAFETY: `statfs` is plain old data; fstatfs fills it for a valid descriptor.
    let mut stats: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: the descriptor is owned by `file` and valid for the call; `stats` is a
    // writable statfs.
    let result = unsafe { libc::fstatfs(file.as_raw_fd(), &mut stats) };
    if result != 0 || !is_regular {
        return false;
    }
    let kind = stats.f_type as i64;
    kind == XFS_SUPER_MAGIC || kind == BTRFS_SUPER_MAGIC
}

/// Makes `length_bytes` at `destination_offset_bytes` of `file` share the extents of the
/// same length at `source_offset_bytes` (the ranges must not overlap).
pub(crate) fn clone_range(
    file: &File,
    source_offset_bytes: u64,
    destination_offset_bytes: u64,
    length_bytes: u64,
) -> io::Result<()> {
    assert!(
        source_offset_bytes + length_bytes <= destination_offset_bytes
            || destination_offset_bytes + length_bytes <= source_offset_bytes,
        "clone_range needs ranges that do not overlap"
    );
    let range = libc::file_clone_range {
        src_fd: i64::from(file.as_raw_fd()),
        src_offset: source_offset_bytes,
        src_length: length_bytes,
        dest_offset: destination_offset_bytes,
    };
    // SAFETY: FICLONERANGE reads a file_clone_range; `range` lives across the call and
    // both descriptors are `file`'s, valid for the call.
    let result = unsafe { libc::ioctl(file.as_raw_fd(), libc::FICLONERANGE, &range) };
    if result == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Cuts a copy of `count` blocks from `source` to `destination` into (source, destination,
/// count) pieces whose ranges do not overlap, in an order that gives memmove semantics:
/// one piece when the ranges are apart; otherwise pieces of the distance between them,
/// from the far end when the destination is above the source.
pub(crate) fn memmove_pieces(source: u64, destination: u64, count: u64) -> Vec<(u64, u64, u64)> {
    let distance = source.abs_diff(destination);
    if distance >= count {
        return vec![(source, destination, count)];
    }
    if distance == 0 {
        return Vec::new();
    }
    let mut pieces: Vec<(u64, u64, u64)> = (0..count.div_ceil(distance))
        .map(|index| {
            let offset = index * distance;
            let length = distance.min(count - offset);
            (source + offset, destination + offset, length)
        })
        .collect();
    if destination > source {
        pieces.reverse();
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::memmove_pieces;

    /// Applies the pieces to a vector one after another, as the ioctls are.
    fn apply(values: &mut [u64], pieces: &[(u64, u64, u64)]) {
        for &(source, destination, count) in pieces {
            let (source, destination, count) =
                (source as usize, destination as usize, count as usize);
            assert!(source + count <= destination || destination + count <= source);
            values.copy_within(source..source + count, destination);
        }
    }

    #[test]
    fn pieces_give_memmove_semantics() {
        for (source, destination, count) in [
            (0, 6, 3),
            (2, 4, 5),
            (4, 2, 5),
            (3, 3, 4),
            (0, 1, 9),
            (9, 0, 9),
            (1, 0, 9),
        ] {
            let mut expected: Vec<u64> = (0..20).collect();
            expected.copy_within(source..source + count, destination);
            let mut found: Vec<u64> = (0..20).collect();
            apply(
                &mut found,
                &memmove_pieces(source as u64, destination as u64, count as u64),
            );
            assert_eq!(found, expected, "copy {source}->{destination} x{count}");
        }
    }
}
