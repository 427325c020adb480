//! What the mount keeps between requests and how it speaks to the store: the tree of names,
//! the open handles, the writes in flight and whether anything is uncommitted.
//!
//! Writes are sent at once and answered later: up to a window of them are in flight (as
//! `put` streams a file), and every other command first waits for all of them, so a read,
//! a rename or a commit sees every byte written before it. Two writes touching one FS
//! block are never in flight together. A write that fails is remembered for its file and
//! reported by that file's next `fsync` or `close` (as NFS and most write-back file systems
//! do). `fsync`, `close` (FUSE flush and release) and unmount commit (`Flush`): the store's
//! all-or-nothing commit of every change so far.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use flashpipe_api::{
    CodedError, Command, ErrorCode, Limits, Reply, StreamPayloads, Ticket, TransportExt,
};

mod ahead;
#[cfg(test)]
mod io_tests;
mod pending;
mod staged;

use crate::tree::{StoreEntry, Stored, Tree};
use crate::MountTransport;

/// Writes in flight at most (the CLI's transfer window).
const WRITE_WINDOW: usize = 8;

/// Most bytes of one write command (FUSE's largest write, asked for in `init`).
pub const MOST_WRITE_BYTES: u64 = 1 << 20;

/// How many times a read refused for want of engine read buffers is tried again.
const READ_BUFFER_TRIES: u32 = 200;

/// A failure as the kernel gets it: an errno.
pub type Errno = i32;

/// The errno for a store error code.
pub fn errno_of(code: ErrorCode) -> Errno {
    match code {
        ErrorCode::NotFound => libc::ENOENT,
        ErrorCode::Exists => libc::EEXIST,
        ErrorCode::BadName | ErrorCode::BadAttributes => libc::EINVAL,
        ErrorCode::NoSpace => libc::ENOSPC,
        ErrorCode::FileTooLarge => libc::EFBIG,
        ErrorCode::ReadOnly => libc::EROFS,
        ErrorCode::StaleHandle => libc::ESTALE,
        _ => libc::EIO,
    }
}

/// A write in flight: its file and the FS blocks it touches.
struct InFlightWrite {
    inode: u64,
    first_block: u64,
    last_block: u64,
    /// Whether its buffer is a whole chunk long (kept for the next write when it comes back).
    whole_chunk: bool,
}

/// What a read gave, in order: the transport's read data or parts of it (one piece for a
/// read no longer than the transport's most bytes per read and answered by one read).
pub type ReadPieces<T> = Vec<ahead::Piece<T>>;

/// The mount's state (one lock around it; FUSE requests are served one at a time).
pub struct State<T: MountTransport> {
    pub(crate) transport: T,
    pub(crate) tree: Tree,
    limits: Limits,
    block_size_bytes: u64,
    window: usize,
    in_flight: HashMap<Ticket, InFlightWrite>,
    /// Reads sent ahead of a file read in order.
    ahead: ahead::ReadAhead<T>,
    /// A write one request short of a whole chunk, kept for the request that completes it.
    pending: Option<pending::PendingWrite<T>>,
    /// Short writes kept until their file's sync (`staged.rs`).
    staged: staged::Staged,
    /// Whether short writes are staged (a store no other client changes, the committer
    /// running to send them within their age bound).
    pub(crate) stage_small_writes: bool,
    /// Whole-chunk write buffers the transport gave back, filled again by later writes
    /// (at most `window`; a fresh buffer is zeroed memory, mapped anew past glibc's threshold).
    spare_writes: Vec<<T::P as flashpipe_api::Payloads>::Write>,
    write_errors: HashMap<u64, Errno>,
    uncommitted: bool,
    /// When the commit that closes asked for is due (wall-clock ns); `None`: none asked.
    commit_due_ns: Option<u64>,
    /// How long after a close its commit may wait (0: the close waits for it).
    pub(crate) commit_delay_ns: u64,
    pub(crate) wall_clock_times: bool,
    pub(crate) started_ns: u64,
    pub(crate) device_check: Option<crate::DeviceCheck>,
    /// What the device check found, once it found something.
    pub(crate) device_changed: Option<String>,
}

/// Nanoseconds since the epoch now.
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|since| since.as_nanos() as u64)
        .unwrap_or(0)
}

/// A time in ns since the epoch as a `SystemTime`.
pub fn system_time(ns: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(ns)
}

impl<T: MountTransport> State<T> {
    /// Reads the store's names and space into a new state.
    pub fn load(
        mut transport: T,
        wall_clock_times: bool,
        max_bytes_in_flight: u64,
    ) -> Result<State<T>, (T, String)> {
        let started_ns = now_ns();
        let listed = match transport.list() {
            Ok(files) => files,
            Err(error) => return Err((transport, format!("listing the store's files: {error}"))),
        };
        let stats = match transport.stats() {
            Ok(stats) => stats,
            Err(error) => return Err((transport, format!("reading the store's space: {error}"))),
        };
        let entries: Vec<StoreEntry> = listed
            .into_iter()
            .map(|file| StoreEntry {
                stored: Stored::of(&file),
                name: file.name,
                size_bytes: file.size_bytes,
                modified_ns: if wall_clock_times {
                    file.modified_clock_ns
                } else {
                    started_ns
                },
            })
            .collect();
        let limits = transport.limits();
        let write_bytes = limits.max_write_bytes.clamp(1, MOST_WRITE_BYTES);
        let by_bytes = usize::try_from(max_bytes_in_flight / write_bytes).unwrap_or(usize::MAX);
        Ok(State {
            tree: Tree::new(&entries),
            window: WRITE_WINDOW.min(limits.max_in_flight).min(by_bytes).max(1),
            limits,
            block_size_bytes: u64::from(stats.fs_block_size_bytes).max(1),
            transport,
            in_flight: HashMap::new(),
            ahead: ahead::ReadAhead::default(),
            pending: None,
            staged: staged::Staged::default(),
            stage_small_writes: false,
            spare_writes: Vec::new(),
            write_errors: HashMap::new(),
            uncommitted: false,
            commit_due_ns: None,
            commit_delay_ns: 0,
            wall_clock_times,
            started_ns,
            device_check: None,
            device_changed: None,
        })
    }

    /// A file time for a change made now (the mount's start on a virtual clock).
    pub fn change_time_ns(&self) -> u64 {
        if self.wall_clock_times {
            now_ns()
        } else {
            self.started_ns
        }
    }

    fn reap_one(&mut self) -> Result<(), Errno> {
        let (ticket, outcome) = self.transport.wait().map_err(|error| {
            report("waiting for a write", &error);
            errno_of(error.code())
        })?;
        let Some((ticket, outcome)) = self.keep_if_ahead(ticket, outcome) else {
            return Ok(());
        };
        let write = self
            .in_flight
            .remove(&ticket)
            .expect("only writes are left in flight between requests");
        match outcome {
            Ok(Reply::Written { buffer }) => {
                if write.whole_chunk && self.spare_writes.len() < self.window {
                    self.spare_writes
                        .extend(<T::P as StreamPayloads>::reuse_written(buffer));
                }
            }
            Ok(other) => {
                crate::say(&format!(
                    "a write was answered with a {} reply",
                    other.name()
                ));
                self.write_errors.insert(write.inode, libc::EIO);
            }
            Err(error) => {
                report("a write", &error);
                self.write_errors
                    .entry(write.inode)
                    .or_insert(errno_of(error.code()));
            }
        }
        Ok(())
    }

    /// Refuses a change of names or a commit once a device image of the store changed.
    fn check_devices(&mut self) -> Result<(), Errno> {
        if self.device_changed.is_some() {
            return Err(libc::EIO);
        }
        if let Some(Err(finding)) = self.device_check.as_ref().map(|check| check()) {
            crate::say(&format!("{finding} (for a mount: unmount it)"));
            self.device_changed = Some(finding);
            return Err(libc::EIO);
        }
        Ok(())
    }

    /// Sends the write kept back and the staged writes, then waits for every write in
    /// flight (their failures are kept for their files).
    pub fn drain(&mut self) -> Result<(), Errno> {
        self.send_pending();
        self.send_staged(None);
        while !self.in_flight.is_empty() {
            self.reap_one()?;
        }
        Ok(())
    }

    /// Reads up to `length_bytes` at `offset_bytes` of file `name`, whose size the mount
    /// believes is `size_bytes`; the read data (not copied) and the size learnt on the way.
    pub fn read(
        &mut self,
        (inode, name): (u64, &str),
        offset_bytes: u64,
        length_bytes: u64,
        mut size_bytes: u64,
    ) -> Result<(ReadPieces<T>, u64), Errno> {
        self.drain()?;
        let mut pieces = Vec::new();
        let mut position = offset_bytes;
        let end = offset_bytes.saturating_add(length_bytes);
        let mut tries = 0u32;
        let mut restatted = false;
        while position < end.min(size_bytes) {
            let asked = (end.min(size_bytes) - position).min(self.limits.max_read_bytes.max(1));
            let ahead = self.take_ahead(inode, position, asked).map(Ok);
            let read = ahead.unwrap_or_else(|| {
                self.transport
                    .read(name, position, asked)
                    .map(ahead::Piece::whole)
            });
            match read {
                Ok(piece) => {
                    let read_bytes = piece.bytes().len() as u64;
                    if read_bytes == 0 {
                        break;
                    }
                    pieces.push(piece);
                    position += read_bytes;
                }
                Err(error)
                    if error.code() == ErrorCode::ReadBuffersExhausted
                        && tries < READ_BUFFER_TRIES =>
                {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(error) if error.code() == ErrorCode::ReadPastEnd && !restatted => {
                    restatted = true;
                    size_bytes = self.stat_size(name)?;
                }
                Err(error) => {
                    report("a read", &error);
                    return Err(errno_of(error.code()));
                }
            }
        }
        self.read_ahead_after(
            inode,
            name,
            (offset_bytes, position),
            length_bytes,
            size_bytes,
        );
        Ok((pieces, size_bytes))
    }

    /// The size of file `name` in the store now.
    pub fn stat_size(&mut self, name: &str) -> Result<u64, Errno> {
        self.stat_file(name).map(|(size_bytes, _)| size_bytes)
    }

    /// The size of file `name` and what a user set of its attributes, asked of the store.
    pub fn stat_file(&mut self, name: &str) -> Result<(u64, Stored), Errno> {
        self.drain()?;
        self.transport
            .stat(name)
            .map(|stat| (stat.size_bytes, Stored::of(&stat)))
            .map_err(|error| quiet_or_report("a stat", &error))
    }

    /// Sends a command answered `Done` (create, delete, rename, truncate), after the writes
    /// in flight.
    pub fn call_done(&mut self, command: Command<T::P>) -> Result<(), Errno> {
        self.drop_reads_ahead();
        self.drain()?;
        self.check_devices()?;
        let what = command.kind().name();
        self.transport
            .call_done(command)
            .map_err(|error| quiet_or_report(what, &error))?;
        self.uncommitted = true;
        Ok(())
    }

    /// A commit point for file `inode` (`fsync`, `close`) or for everything (`None`):
    /// every write answered, the write failures of the file reported, then every change
    /// committed.
    pub fn commit(&mut self, inode: Option<u64>) -> Result<(), Errno> {
        if inode.is_none() {
            // the last commit before the transport is handed back: nothing left in flight
            self.drop_reads_ahead();
        }
        self.drain()?;
        let failed = match inode {
            Some(inode) => self.write_errors.remove(&inode),
            None => self.write_errors.drain().map(|(_, errno)| errno).next(),
        };
        self.commit_changes()?;
        match failed {
            Some(errno) => Err(errno),
            None => Ok(()),
        }
    }

    /// A close of file `inode` (FUSE's flush and release): every write answered and the
    /// file's write failures reported, as at a commit point; the commit itself is done now
    /// when `commit_delay_ns` is 0, else asked of the committer, due that long after the
    /// first close since the last commit.
    pub fn close_point(&mut self, inode: u64) -> Result<(), Errno> {
        if self.commit_delay_ns == 0 {
            return self.commit(Some(inode));
        }
        self.drain()?;
        let failed = self.write_errors.remove(&inode);
        if self.uncommitted && self.commit_due_ns.is_none() {
            self.commit_due_ns = Some(now_ns().saturating_add(self.commit_delay_ns));
        }
        match failed {
            Some(errno) => Err(errno),
            None => Ok(()),
        }
    }

    /// After a change no close follows (chmod, chown, utimens): committed now when
    /// `commit_delay_ns` is 0, else asked of the committer as a close's commit is.
    pub fn change_point(&mut self) -> Result<(), Errno> {
        if self.commit_delay_ns == 0 {
            self.drain()?;
            return self.commit_changes();
        }
        if self.uncommitted && self.commit_due_ns.is_none() {
            self.commit_due_ns = Some(now_ns().saturating_add(self.commit_delay_ns));
        }
        Ok(())
    }

    /// The committer's turn at `now_ns`: sends a write kept back (it waits a tick at most
    /// when no request follows) and the staged writes once the oldest has waited its
    /// longest, and commits when a close's commit is due. Write
    /// failures stay kept for their files' next fsync or close; a failed commit is reported
    /// on standard error and left to the next commit point.
    pub fn commit_if_due(&mut self, now_ns: u64) {
        self.send_pending();
        if self.staged.due(now_ns) {
            self.send_staged(None);
        }
        match self.commit_due_ns {
            Some(due_ns) if due_ns <= now_ns => {}
            _ => return,
        }
        // failures were reported where they happened; the next commit point tries again
        let _ = self.drain().and_then(|()| self.commit_changes());
    }

    /// Every change committed (a `Flush`), when there is one.
    fn commit_changes(&mut self) -> Result<(), Errno> {
        self.commit_due_ns = None;
        if !self.uncommitted {
            return Ok(());
        }
        self.check_devices()?;
        self.transport.flush().map_err(|error| {
            report("the commit", &error);
            errno_of(error.code())
        })?;
        self.uncommitted = false;
        Ok(())
    }

    /// The store's space and file count.
    pub fn stats(&mut self) -> Result<flashpipe_api::FsStats, Errno> {
        self.drain()?;
        self.transport
            .stats()
            .map_err(|error| quiet_or_report("a space query", &error))
    }

    /// The store's files now (for a listing that must see other clients' changes).
    pub fn list(&mut self) -> Result<Vec<StoreEntry>, Errno> {
        self.drain()?;
        let started_ns = self.started_ns;
        let wall = self.wall_clock_times;
        self.transport
            .list()
            .map(|files| {
                files
                    .into_iter()
                    .map(|file| StoreEntry {
                        stored: Stored::of(&file),
                        name: file.name,
                        size_bytes: file.size_bytes,
                        modified_ns: if wall {
                            file.modified_clock_ns
                        } else {
                            started_ns
                        },
                    })
                    .collect()
            })
            .map_err(|error| quiet_or_report("a listing", &error))
    }
}

/// Says on standard error what failed (the kernel gets only an errno).
fn report<E: std::fmt::Display>(what: &str, error: &E) {
    crate::say(&format!("{what} failed: {error}"));
}

/// The errno of `error`; failures an application expects (a missing name, a name that
/// exists) are not reported on standard error.
fn quiet_or_report<E: std::fmt::Display + CodedError>(what: &str, error: &E) -> Errno {
    if !matches!(error.code(), ErrorCode::NotFound | ErrorCode::Exists) {
        report(what, error);
    }
    errno_of(error.code())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_refusals_have_their_errno() {
        assert_eq!(errno_of(ErrorCode::ReadOnly), libc::EROFS);
        assert_eq!(errno_of(ErrorCode::BadAttributes), libc::EINVAL);
        assert_eq!(errno_of(ErrorCode::NotFound), libc::ENOENT);
    }
}
