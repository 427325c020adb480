//! `fallocate`: the store has no unwritten extents and writes every block anew (copy-on-write;
//! on the flash-aware layout a block is a flash page programmed once), so a range cannot be
//! reserved ahead of its writes. As OpenZFS does, mode 0 checks that the store's free space
//! covers the range and extends the file's size over it (the new bytes a hole, read as
//! zeros, no block written); `FALLOC_FL_KEEP_SIZE` only checks the space. Other modes
//! (punching holes, zeroing, collapsing or inserting ranges) are refused with `EOPNOTSUPP`,
//! as before. Without it, `posix_fallocate` callers fall back to writing zeros over the
//! range: MariaDB writes its 12 MiB temporary tablespace in full at every start, and each
//! extension of a table's file.

use super::MountFs;
use crate::state::{Errno, State};
use crate::tree::NodeKind;
use crate::MountTransport;

/// The one mode flag served (mode 0, plain allocate, is the other mode).
const KEEP_SIZE: i32 = libc::FALLOC_FL_KEEP_SIZE;

impl<T: MountTransport> MountFs<T> {
    /// A `fallocate` of `length_bytes` at `offset_bytes` of file `inode` with `mode`.
    pub(super) fn do_fallocate(
        &self,
        state: &mut State<T>,
        inode: u64,
        (offset_bytes, length_bytes): (u64, u64),
        mode: i32,
    ) -> Result<(), Errno> {
        if mode & !KEEP_SIZE != 0 {
            return Err(libc::EOPNOTSUPP);
        }
        if length_bytes == 0 {
            return Err(libc::EINVAL);
        }
        let end = offset_bytes
            .checked_add(length_bytes)
            .filter(|&end| end <= i64::MAX as u64)
            .ok_or(libc::EFBIG)?;
        let size = self.current_size(state, inode)?;
        let stats = state.stats()?;
        let block_bytes = u64::from(stats.fs_block_size_bytes).max(1);
        let new_bytes = end.saturating_sub(size.max(offset_bytes));
        if new_bytes.div_ceil(block_bytes) > stats.free_blocks {
            return Err(libc::ENOSPC);
        }
        if mode & KEEP_SIZE != 0 || end <= size {
            return Ok(());
        }
        let name = Self::file_name(state, inode)?;
        // the file shows this change, as after a write
        Self::forget_wall_time(state, inode)?;
        state.call_done(flashpipe_api::Command::Truncate {
            name,
            size_bytes: end,
        })?;
        let now = state.change_time_ns();
        Self::set_size(state, inode, end, Some(now));
        Ok(())
    }

    /// File `inode`'s size: the mount's own on a store it alone changes, the store's on a
    /// shared one (another client may have grown the file since the mount last looked, and a
    /// truncation to a stale size would cut it).
    fn current_size(&self, state: &mut State<T>, inode: u64) -> Result<u64, Errno> {
        let size = match state.tree.node(inode).map(|node| &node.kind) {
            Some(NodeKind::File { size_bytes, .. }) => *size_bytes,
            Some(_) => return Err(libc::EISDIR),
            None => return Err(libc::ENOENT),
        };
        if !self.shared_store {
            return Ok(size);
        }
        let name = Self::file_name(state, inode)?;
        let (size, stored) = state.stat_file(&name)?;
        Self::set_size(state, inode, size, None);
        state.tree.set_stored(inode, stored);
        Ok(size)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use flashpipe_api::{
        ApiError, Command, ErrorCode, FileId, FileStat, FsStats, Reply, VecPayloads,
    };

    use super::*;
    use crate::instant_store::{Answers, Instant};
    use crate::tree::ROOT_INODE;
    use crate::MountOptions;

    /// One file `f` of `size_bytes` in a store of 4 KiB blocks with `free_blocks` free; the
    /// truncations it was sent.
    struct OneFile {
        size_bytes: u64,
        free_blocks: u64,
        truncations: Truncations,
    }

    impl Answers for OneFile {
        fn answer(
            &mut self,
            command: Command<VecPayloads>,
        ) -> Result<Reply<VecPayloads>, ApiError> {
            let file = FileStat {
                file_id: FileId(1),
                name: "f".to_string(),
                size_bytes: self.size_bytes,
                allocated_blocks: 0,
                shared_bytes: 0,
                modified_clock_ns: 0,
                mode: None,
                owner: None,
                modified_wall_ns: None,
            };
            match command {
                Command::List => Ok(Reply::List(vec![file])),
                Command::Stat { .. } => Ok(Reply::Stat(file)),
                Command::Stats => Ok(Reply::Stats(FsStats {
                    fs_block_size_bytes: 4096,
                    fs_block_count: 1 << 20,
                    used_blocks: (1 << 20) - self.free_blocks,
                    shared_blocks: 0,
                    saved_blocks: 0,
                    free_blocks: self.free_blocks,
                    pending_free_blocks: 0,
                    reserved_blocks: 0,
                    file_count: 1,
                    commit_sequence: 1,
                    unflushed_changes: false,
                })),
                Command::Truncate { size_bytes, .. } => {
                    self.truncations
                        .lock()
                        .expect("not poisoned")
                        .push(size_bytes);
                    self.size_bytes = size_bytes;
                    Ok(Reply::Done)
                }
                _ => Err(ApiError::new(ErrorCode::Internal, "not in this test")),
            }
        }
    }

    /// The truncations a [`OneFile`] store was sent.
    type Truncations = Arc<Mutex<Vec<u64>>>;

    /// A mount over [`OneFile`]; the inode of `f`; the truncations sent.
    fn mounted(size_bytes: u64, free_blocks: u64) -> (MountFs<Instant<OneFile>>, u64, Truncations) {
        mounted_over(size_bytes, free_blocks, false)
    }

    /// As [`mounted`], the store shared with other clients when `shared_store`.
    fn mounted_over(
        size_bytes: u64,
        free_blocks: u64,
        shared_store: bool,
    ) -> (MountFs<Instant<OneFile>>, u64, Truncations) {
        let truncations = Arc::new(Mutex::new(Vec::new()));
        let store = Instant::new(OneFile {
            size_bytes,
            free_blocks,
            truncations: Arc::clone(&truncations),
        });
        let state = State::load(store, false, 1 << 24).unwrap_or_else(|(_, why)| panic!("{why}"));
        let inode = state.tree.child(ROOT_INODE, "f").expect("f is listed");
        let options = MountOptions {
            mount_point: "/nonexistent".into(),
            source_name: "memory".into(),
            allow_other: false,
            others_may_write: false,
            shared_store,
            wall_clock_times: false,
            max_bytes_in_flight: 1 << 24,
            commit_delay_ms: 0,
            read_only: false,
            direct_reads: false,
        };
        let filesystem = MountFs::new(Arc::new(Mutex::new(state)), &options);
        (filesystem, inode, truncations)
    }

    fn allocate(
        filesystem: &MountFs<Instant<OneFile>>,
        inode: u64,
        range: (u64, u64),
        mode: i32,
    ) -> Result<(), Errno> {
        filesystem.do_fallocate(&mut filesystem.lock(), inode, range, mode)
    }

    fn size_of(filesystem: &MountFs<Instant<OneFile>>, inode: u64) -> u64 {
        match filesystem.lock().tree.node(inode).map(|node| &node.kind) {
            Some(NodeKind::File { size_bytes, .. }) => *size_bytes,
            _ => panic!("f is a file"),
        }
    }

    #[test]
    fn allocating_past_the_end_extends_the_size_writing_nothing() {
        let (filesystem, inode, truncations) = mounted(100, 4000);
        assert_eq!(allocate(&filesystem, inode, (0, 12 << 20), 0), Ok(()));
        assert_eq!(*truncations.lock().expect("not poisoned"), vec![12 << 20]);
        assert_eq!(size_of(&filesystem, inode), 12 << 20);
    }

    #[test]
    fn allocating_inside_the_file_or_keeping_the_size_changes_nothing() {
        let (filesystem, inode, truncations) = mounted(1 << 20, 1000);
        assert_eq!(allocate(&filesystem, inode, (4096, 8192), 0), Ok(()));
        assert_eq!(
            allocate(&filesystem, inode, (1 << 20, 1 << 20), KEEP_SIZE),
            Ok(())
        );
        assert!(truncations.lock().expect("not poisoned").is_empty());
        assert_eq!(size_of(&filesystem, inode), 1 << 20);
    }

    #[test]
    fn only_bytes_past_the_end_need_free_space() {
        let (filesystem, inode, truncations) = mounted(1 << 20, 10);
        assert_eq!(allocate(&filesystem, inode, (0, 1 << 20), 0), Ok(()));
        assert_eq!(
            allocate(&filesystem, inode, (0, (1 << 20) + 10 * 4096), 0),
            Ok(())
        );
        assert_eq!(
            allocate(&filesystem, inode, (0, (1 << 20) + 21 * 4096), 0),
            Err(libc::ENOSPC),
            "11 blocks past the new end, 10 free"
        );
        assert_eq!(
            *truncations.lock().expect("not poisoned"),
            vec![(1 << 20) + 10 * 4096]
        );
    }

    #[test]
    fn on_a_shared_store_the_stores_size_is_asked_and_never_cut() {
        let (filesystem, inode, truncations) = mounted_over(100, 4000, true);
        filesystem.lock().transport.store.size_bytes = 1 << 20;
        assert_eq!(allocate(&filesystem, inode, (0, 8192), 0), Ok(()));
        assert!(truncations.lock().expect("not poisoned").is_empty());
        assert_eq!(size_of(&filesystem, inode), 1 << 20);
        assert_eq!(allocate(&filesystem, inode, (0, 2 << 20), 0), Ok(()));
        assert_eq!(*truncations.lock().expect("not poisoned"), vec![2 << 20]);
    }

    #[test]
    fn refusals_change_nothing() {
        let (filesystem, inode, truncations) = mounted(100, 10);
        let refused = [
            ((0, 11 * 4096), 0, libc::ENOSPC),
            (
                (0, 4096),
                libc::FALLOC_FL_PUNCH_HOLE | KEEP_SIZE,
                libc::EOPNOTSUPP,
            ),
            ((0, 4096), libc::FALLOC_FL_ZERO_RANGE, libc::EOPNOTSUPP),
            ((0, 4096), libc::FALLOC_FL_COLLAPSE_RANGE, libc::EOPNOTSUPP),
            ((0, 0), 0, libc::EINVAL),
            ((u64::MAX - 10, 100), 0, libc::EFBIG),
            ((i64::MAX as u64, 1), 0, libc::EFBIG),
        ];
        for (range, mode, errno) in refused {
            assert_eq!(allocate(&filesystem, inode, range, mode), Err(errno));
        }
        assert_eq!(
            allocate(&filesystem, ROOT_INODE, (0, 1), 0),
            Err(libc::EISDIR)
        );
        assert_eq!(allocate(&filesystem, 999, (0, 1), 0), Err(libc::ENOENT));
        assert!(truncations.lock().expect("not poisoned").is_empty());
        assert_eq!(size_of(&filesystem, inode), 100);
        assert_eq!(allocate(&filesystem, inode, (0, 10 * 4096), 0), Ok(()));
    }
}
