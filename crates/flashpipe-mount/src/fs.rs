//! The FUSE requests, each turned into store commands on the mount's state and the tree
//! updated after the store said yes: lookup, getattr, setattr (size; mode, owner and
//! modification time stored, `attributes.rs`), readdir, open, read, write, create, unlink,
//! rename, mkdir, rmdir, flush, release, fsync, fsyncdir, fallocate (`allocate.rs`),
//! statfs. Links, symbolic links, device nodes and extended attributes are refused.

mod allocate;
mod attributes;
mod rename;

use std::ffi::OsStr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use flashpipe_api::Command;
use fuser::{
    FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    OpenAccMode, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};

use crate::state::{system_time, Errno, State};
use crate::tree::{checked_component, ComponentRefusal, NodeKind, Tree, ROOT_INODE};
use crate::{MountOptions, MountTransport};

/// How long the kernel may keep names and attributes in a store only this mount changes.
const PRIVATE_TTL: Duration = Duration::from_secs(1);

/// The I/O size files show as preferred (`st_blksize`): the mount's largest write, as NFS
/// shows its write size. Programs size their buffers by it (C's stdio, Python's `open`,
/// coreutils `cp`), and each of their writes is one request to the mount: at 4096 bytes a
/// buffered writer crawls at a request per 4 KiB.
const PREFERRED_IO_BYTES: u32 = crate::state::MOST_WRITE_BYTES as u32;

/// The file system FUSE calls.
pub struct MountFs<T: MountTransport> {
    state: Arc<Mutex<State<T>>>,
    uid: u32,
    gid: u32,
    others_write_bit: u16,
    shared_store: bool,
    direct_reads: bool,
}

fn errno(value: Errno) -> fuser::Errno {
    fuser::Errno::from_i32(value)
}

/// Answers an empty reply: done, or the error's errno.
fn answer_empty(reply: ReplyEmpty, result: Result<(), Errno>) {
    match result {
        Ok(()) => reply.ok(),
        Err(value) => reply.error(errno(value)),
    }
}

/// How the kernel is to treat a file opened with `flags`: a descriptor opened for writing
/// only bypasses the page cache (`FOPEN_DIRECT_IO`), so the kernel hands the writer's own
/// pages to the mount instead of first copying them into cached pages that no read through
/// this descriptor can use; one opened for reading only does too with `direct_reads`
/// (`MountOptions::direct_reads`); one opened for both keeps the page cache. Nothing is
/// lost: a write-only descriptor cannot be mapped, the kernel drops cached pages of the
/// range a direct write changes, and direct reads always ask the mount.
pub(crate) fn open_flags_for(flags: OpenFlags, direct_reads: bool) -> FopenFlags {
    match flags.acc_mode() {
        OpenAccMode::O_WRONLY => FopenFlags::FOPEN_DIRECT_IO,
        OpenAccMode::O_RDONLY if direct_reads => FopenFlags::FOPEN_DIRECT_IO,
        _ => FopenFlags::empty(),
    }
}

fn refusal_errno(refusal: ComponentRefusal) -> Errno {
    match refusal {
        ComponentRefusal::TooLong => libc::ENAMETOOLONG,
        ComponentRefusal::Reserved => libc::EPERM,
        ComponentRefusal::HoldsSeparator | ComponentRefusal::NotUtf8 => libc::EINVAL,
    }
}

impl<T: MountTransport> MountFs<T> {
    /// The file system over `state`.
    pub fn new(state: Arc<Mutex<State<T>>>, options: &MountOptions) -> MountFs<T> {
        // SAFETY: getuid and getgid only read the process's credentials.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        // the kernel lets no one else in without allow_other, whatever the modes say
        let others_write_bit = if options.allow_other && options.others_may_write {
            0o002
        } else {
            0
        };
        MountFs {
            state,
            uid,
            gid,
            others_write_bit,
            shared_store: options.shared_store,
            direct_reads: options.direct_reads,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn ttl(&self) -> Duration {
        if self.shared_store {
            Duration::ZERO
        } else {
            PRIVATE_TTL
        }
    }

    /// The mode a file (or a directory) shows when none is stored.
    fn default_mode(&self, directory: bool) -> u16 {
        let base = if directory { 0o755 } else { 0o644 };
        base | self.others_write_bit
    }

    /// The attributes of `inode`.
    fn attributes(&self, state: &State<T>, inode: u64) -> Option<FileAttr> {
        let node = state.tree.node(inode)?;
        let (kind, size, default_mode, modified_ns, links) = match &node.kind {
            NodeKind::File {
                size_bytes,
                modified_ns,
            } => (
                FileType::RegularFile,
                *size_bytes,
                self.default_mode(false),
                *modified_ns,
                1,
            ),
            NodeKind::Directory { .. } => (
                FileType::Directory,
                0,
                self.default_mode(true),
                state.started_ns,
                2 + state.tree.subdirectory_count(inode),
            ),
        };
        let modified = match node.stored.modified_wall_ns {
            Some(wall_ns) => attributes::system_time_of(wall_ns),
            None => system_time(modified_ns),
        };
        let owner = node.stored.owner;
        Some(FileAttr {
            ino: INodeNo(inode),
            size,
            blocks: size.div_ceil(512),
            atime: modified,
            mtime: modified,
            ctime: modified,
            crtime: modified,
            kind,
            perm: node
                .stored
                .mode
                .map_or(default_mode, |mode| (mode & 0o7777) as u16),
            nlink: links,
            uid: owner.map_or(self.uid, |owner| owner.uid),
            gid: owner.map_or(self.gid, |owner| owner.gid),
            rdev: 0,
            blksize: PREFERRED_IO_BYTES,
            flags: 0,
        })
    }

    /// A file another client of the server made since the tree was read: asked of the store
    /// by name, and added when there.
    fn look_in_store(state: &mut State<T>, parent: u64, name: &OsStr) -> Option<u64> {
        if !state.tree.is_directory(parent) {
            return None;
        }
        let name = checked_component(&state.tree, parent, name, false).ok()?;
        let store_name = state.tree.store_name(parent, Some(&name));
        let (size_bytes, stored) = state.stat_file(&store_name).ok()?;
        let modified_ns = state.change_time_ns();
        let inode = state.tree.add(
            parent,
            &name,
            NodeKind::File {
                size_bytes,
                modified_ns,
            },
        );
        state.tree.set_stored(inode, stored);
        Some(inode)
    }

    /// A commit point of file `inode` (fsync, and close when `close`: then the commit may
    /// be left to the committer). When one of its writes failed, its size is asked of the
    /// store again: the size the mount counted on is not the file's.
    fn commit_file(&self, inode: u64, close: bool) -> Result<(), Errno> {
        let mut state = self.lock();
        let result = if close {
            state.close_point(inode)
        } else {
            state.commit(Some(inode))
        };
        if result.is_err() {
            if let Ok(name) = Self::file_name(&state, inode) {
                if let Ok(size) = state.stat_size(&name) {
                    Self::set_size(&mut state, inode, size, None);
                }
            }
        }
        result
    }

    /// After an entry left directory `parent`: a directory left empty keeps existing through
    /// its marker (the root needs none).
    fn keep_directory(state: &mut State<T>, parent: u64) -> Result<(), Errno> {
        if parent == ROOT_INODE
            || state.tree.has_children(parent)
            || state.tree.has_marker(parent)
            || state.tree.node(parent).is_none()
        {
            return Ok(());
        }
        let marker = state.tree.marker_name(parent);
        state.call_done(Command::Create { name: marker })?;
        state.tree.set_marker(parent, true);
        Ok(())
    }

    /// The checked name of a new child `name` of directory `parent` (a directory when
    /// `directory`): ENOTDIR, the component's refusal or EEXIST otherwise.
    fn new_child_name(
        state: &State<T>,
        parent: u64,
        name: &OsStr,
        directory: bool,
    ) -> Result<String, Errno> {
        if !state.tree.is_directory(parent) {
            return Err(libc::ENOTDIR);
        }
        let name =
            checked_component(&state.tree, parent, name, directory).map_err(refusal_errno)?;
        if state.tree.child(parent, &name).is_some() {
            return Err(libc::EEXIST);
        }
        Ok(name)
    }

    fn file_name(state: &State<T>, inode: u64) -> Result<String, Errno> {
        match state.tree.node(inode).map(|node| &node.kind) {
            Some(NodeKind::File { .. }) => Ok(state.tree.store_name(inode, None)),
            Some(NodeKind::Directory { .. }) => Err(libc::EISDIR),
            None => Err(libc::ENOENT),
        }
    }

    fn set_size(state: &mut State<T>, inode: u64, size: u64, modified_ns: Option<u64>) {
        if let Some(node) = state.tree.node_mut(inode) {
            if let NodeKind::File {
                size_bytes,
                modified_ns: modified,
            } = &mut node.kind
            {
                *size_bytes = size;
                if let Some(now) = modified_ns {
                    *modified = now;
                }
            }
        }
    }
}

impl<T: MountTransport> Filesystem for MountFs<T> {
    fn init(
        &mut self,
        _request: &Request,
        config: &mut fuser::KernelConfig,
    ) -> std::io::Result<()> {
        // 1 MiB writes and readahead, as `put` and `get` move data; the kernel's own limit
        // where it is lower
        if let Err(nearest) = config.set_max_write(crate::state::MOST_WRITE_BYTES as u32) {
            let _ = config.set_max_write(nearest);
        }
        if let Err(nearest) = config.set_max_readahead(crate::READ_AHEAD_KIB * 1024) {
            let _ = config.set_max_readahead(nearest);
        }
        if self.direct_reads {
            // shared maps of a direct-I/O descriptor (Linux 6.6 and later)
            if config
                .add_capabilities(fuser::InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP)
                .is_err()
            {
                crate::say("this kernel cannot map files read directly: mmap(MAP_SHARED) of a file opened read-only fails (ENODEV); mount without --direct-reads for programs that map files");
            }
        }
        Ok(())
    }

    fn lookup(&self, _request: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let mut state = self.lock();
        let mut found = name
            .to_str()
            .and_then(|name| state.tree.child(parent.0, name));
        if found.is_none() && self.shared_store {
            found = Self::look_in_store(&mut state, parent.0, name);
        }
        match found.and_then(|inode| self.attributes(&state, inode)) {
            Some(attributes) => reply.entry(&self.ttl(), &attributes, Generation(0)),
            None => reply.error(errno(libc::ENOENT)),
        }
    }

    fn getattr(
        &self,
        _request: &Request,
        inode: INodeNo,
        _handle: Option<FileHandle>,
        reply: ReplyAttr,
    ) {
        let mut state = self.lock();
        if self.shared_store && !state.tree.is_directory(inode.0) {
            if let Ok(name) = Self::file_name(&state, inode.0) {
                if let Ok((size, stored)) = state.stat_file(&name) {
                    Self::set_size(&mut state, inode.0, size, None);
                    state.tree.set_stored(inode.0, stored);
                }
            }
        }
        match self.attributes(&state, inode.0) {
            Some(attributes) => reply.attr(&self.ttl(), &attributes),
            None => reply.error(errno(libc::ENOENT)),
        }
    }

    fn setattr(
        &self,
        _request: &Request,
        inode: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _handle: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let mut state = self.lock();
        let asked = attributes::Asked {
            mode,
            uid,
            gid,
            modified: mtime,
        };
        match self.do_setattr(&mut state, inode.0, &asked, size) {
            Ok(attributes) => reply.attr(&self.ttl(), &attributes),
            Err(value) => reply.error(errno(value)),
        }
    }

    fn mkdir(
        &self,
        _request: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let mut state = self.lock();
        let result = (|| {
            let name = Self::new_child_name(&state, parent.0, name, true)?;
            let marker = format!(
                "{}{}{}",
                state.tree.store_name(parent.0, Some(&name)),
                crate::SEPARATOR,
                crate::DIRECTORY_MARKER
            );
            state.call_done(Command::Create { name: marker })?;
            let inode = state.tree.add(
                parent.0,
                &name,
                NodeKind::Directory {
                    children: Default::default(),
                    marker: true,
                },
            );
            self.keep_creation_mode(&mut state, inode, mode & !umask)?;
            self.attributes(&state, inode).ok_or(libc::ENOENT)
        })();
        match result {
            Ok(attributes) => reply.entry(&self.ttl(), &attributes, Generation(0)),
            Err(value) => reply.error(errno(value)),
        }
    }

    fn unlink(&self, _request: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let mut state = self.lock();
        let result = (|| {
            let inode = name
                .to_str()
                .and_then(|name| state.tree.child(parent.0, name))
                .ok_or(libc::ENOENT)?;
            let store_name = Self::file_name(&state, inode)?;
            state.call_done(Command::Delete { name: store_name })?;
            state.tree.remove(inode);
            Self::keep_directory(&mut state, parent.0)
        })();
        answer_empty(reply, result)
    }

    fn rmdir(&self, _request: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let mut state = self.lock();
        let result = (|| {
            let inode = name
                .to_str()
                .and_then(|name| state.tree.child(parent.0, name))
                .ok_or(libc::ENOENT)?;
            if !state.tree.is_directory(inode) {
                return Err(libc::ENOTDIR);
            }
            if state.tree.has_children(inode) {
                return Err(libc::ENOTEMPTY);
            }
            if state.tree.has_marker(inode) {
                let marker = state.tree.marker_name(inode);
                state.call_done(Command::Delete { name: marker })?;
            }
            state.tree.remove(inode);
            Self::keep_directory(&mut state, parent.0)
        })();
        answer_empty(reply, result)
    }

    fn rename(
        &self,
        _request: &Request,
        parent: INodeNo,
        name: &OsStr,
        new_parent: INodeNo,
        new_name: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let mut state = self.lock();
        let result = Self::do_rename(
            &mut state,
            (parent.0, name),
            (new_parent.0, new_name),
            flags,
        );
        answer_empty(reply, result);
    }

    fn link(
        &self,
        _request: &Request,
        _inode: INodeNo,
        _new_parent: INodeNo,
        _new_name: &OsStr,
        reply: ReplyEntry,
    ) {
        reply.error(errno(libc::EPERM));
    }

    fn open(&self, _request: &Request, inode: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let state = self.lock();
        match Self::file_name(&state, inode.0) {
            Ok(_) => reply.opened(FileHandle(0), open_flags_for(flags, self.direct_reads)),
            Err(value) => reply.error(errno(value)),
        }
    }

    fn read(
        &self,
        _request: &Request,
        inode: INodeNo,
        _handle: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let result = (|| {
            let mut state = self.lock();
            let name = Self::file_name(&state, inode.0)?;
            let known_size = match state.tree.node(inode.0).map(|node| &node.kind) {
                Some(NodeKind::File { size_bytes, .. }) => *size_bytes,
                _ => 0,
            };
            let (pieces, size) =
                state.read((inode.0, &name), offset, u64::from(size), known_size)?;
            Self::set_size(&mut state, inode.0, size, None);
            Ok(pieces)
        })();
        match result {
            Ok(pieces) if pieces.len() == 1 => reply.data(pieces[0].bytes()),
            Ok(pieces) => reply.data(
                &pieces
                    .iter()
                    .map(|piece| piece.bytes())
                    .collect::<Vec<&[u8]>>()
                    .concat(),
            ),
            Err(value) => reply.error(errno(value)),
        }
    }

    fn write(
        &self,
        _request: &Request,
        inode: INodeNo,
        _handle: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let mut state = self.lock();
        let checked = (|| {
            let name = Self::file_name(&state, inode.0)?;
            let size = match state.tree.node(inode.0).map(|node| &node.kind) {
                Some(NodeKind::File { size_bytes, .. }) => *size_bytes,
                _ => 0,
            };
            let end = offset.checked_add(data.len() as u64).ok_or(libc::EFBIG)?;
            Self::forget_wall_time(&mut state, inode.0)?;
            Ok((name, size.max(end)))
        })();
        let name = match checked {
            Ok((name, size)) => {
                let now = state.change_time_ns();
                Self::set_size(&mut state, inode.0, size, Some(now));
                name
            }
            Err(value) => return reply.error(errno(value)),
        };
        // answered before the bytes are copied and sent, the lock held: the writer prepares
        // its next write (and the kernel copies it to the other serving thread) meanwhile,
        // and no request is served before this write is in flight. `data` is this thread's
        // buffer until we return; a failure is kept for the file's next fsync or close, as
        // for a write that fails in flight.
        reply.written(data.len() as u32);
        if let Err(value) = state.write(inode.0, &name, offset, data) {
            state.keep_write_error(inode.0, value);
        }
    }

    fn flush(
        &self,
        _request: &Request,
        inode: INodeNo,
        _handle: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        answer_empty(reply, self.commit_file(inode.0, true))
    }

    fn release(
        &self,
        _request: &Request,
        inode: INodeNo,
        _handle: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        answer_empty(reply, self.commit_file(inode.0, true))
    }

    fn fsync(
        &self,
        _request: &Request,
        inode: INodeNo,
        _handle: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        answer_empty(reply, self.commit_file(inode.0, false))
    }

    fn fallocate(
        &self,
        _request: &Request,
        inode: INodeNo,
        _handle: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let mut state = self.lock();
        answer_empty(
            reply,
            self.do_fallocate(&mut state, inode.0, (offset, length), mode),
        )
    }

    fn fsyncdir(
        &self,
        _request: &Request,
        _inode: INodeNo,
        _handle: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        answer_empty(reply, self.lock().commit(None))
    }

    fn readdir(
        &self,
        _request: &Request,
        inode: INodeNo,
        _handle: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let mut state = self.lock();
        if !state.tree.is_directory(inode.0) {
            reply.error(errno(libc::ENOTDIR));
            return;
        }
        if self.shared_store && offset == 0 {
            match state.list() {
                Ok(entries) => {
                    let fresh = Tree::new(&entries);
                    state.tree.refresh_directory(inode.0, &fresh);
                }
                Err(value) => {
                    reply.error(errno(value));
                    return;
                }
            }
        }
        let parent = state
            .tree
            .node(inode.0)
            .map(|node| node.parent)
            .unwrap_or(ROOT_INODE);
        // entry k (from 1) is answered with offset k; the kernel asks again from the
        // offset of the last entry it took, so each call walks only past those
        let skip = usize::try_from(offset).unwrap_or(usize::MAX);
        let dots = [(inode.0, "."), (parent, "..")];
        let dots = dots
            .iter()
            .map(|(child, name)| (*child, FileType::Directory, *name));
        let children = state.tree.children_iter(inode.0).map(|(name, child)| {
            let kind = if state.tree.is_directory(child) {
                FileType::Directory
            } else {
                FileType::RegularFile
            };
            (child, kind, name)
        });
        for (index, (child, kind, name)) in dots.chain(children).enumerate().skip(skip) {
            if reply.add(INodeNo(child), index as u64 + 1, kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn statfs(&self, _request: &Request, _inode: INodeNo, reply: ReplyStatfs) {
        let mut state = self.lock();
        match state.stats() {
            Ok(stats) => {
                let available = stats.free_blocks.saturating_sub(stats.reserved_blocks);
                reply.statfs(
                    stats.fs_block_count,
                    stats.free_blocks,
                    available,
                    stats.file_count + available,
                    available,
                    stats.fs_block_size_bytes,
                    crate::tree::MAX_NAME_BYTES as u32,
                    stats.fs_block_size_bytes,
                );
            }
            Err(value) => reply.error(errno(value)),
        }
    }

    fn create(
        &self,
        _request: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let mut state = self.lock();
        let result = (|| {
            let name = Self::new_child_name(&state, parent.0, name, false)?;
            let store_name = state.tree.store_name(parent.0, Some(&name));
            state.call_done(Command::Create { name: store_name })?;
            let now = state.change_time_ns();
            let inode = state.tree.add(
                parent.0,
                &name,
                NodeKind::File {
                    size_bytes: 0,
                    modified_ns: now,
                },
            );
            self.keep_creation_mode(&mut state, inode, mode & !umask)?;
            self.attributes(&state, inode).ok_or(libc::ENOENT)
        })();
        match result {
            Ok(attributes) => reply.created(
                &self.ttl(),
                &attributes,
                Generation(0),
                FileHandle(0),
                open_flags_for(OpenFlags(flags), self.direct_reads),
            ),
            Err(value) => reply.error(errno(value)),
        }
    }
}
