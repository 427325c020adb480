//! Writes to the store, and the one write kept back. A FUSE write is sent to the store as
//! chunks of the transport's largest write (1 MiB); a write that ends at least half a chunk
//! in but short of a whole one is kept back for the request that continues it. The kernel
//! splits a direct write from a buffer that does not start on a page (any `malloc`'d
//! buffer) into a request one page short and a small one (1 MiB from offset 16 of a page:
//! 1,048,560 bytes, then 16): sent as they come, the small one shares an FS block with the
//! large one still in flight and waited for every write in flight, at every MiB. Kept back,
//! the two go as one whole chunk.
//!
//! The write kept back counts as in flight: every command that waits for the writes in
//! flight sends it first (`State::drain`), and so does each tick of the commit thread, so it
//! waits for no more than the next request or a tick. A failure to send it is kept for its
//! file's next fsync or close, as a failed write in flight is. A write shorter than half a
//! chunk is staged instead (`staged.rs`) when the mount stages writes.

use flashpipe_api::{CodedError, Command, Payloads, StreamPayloads};

use super::{errno_of, report, Errno, InFlightWrite, State, MOST_WRITE_BYTES};
use crate::MountTransport;

/// A write kept back: `length_bytes` of `buffer` (a whole chunk long) for `offset_bytes` of
/// file `inode` (`name`).
pub struct PendingWrite<T: MountTransport> {
    inode: u64,
    name: String,
    offset_bytes: u64,
    buffer: <T::P as Payloads>::Write,
    length_bytes: usize,
}

impl<T: MountTransport> State<T> {
    /// Bytes of the largest write command.
    fn chunk_bytes(&self) -> usize {
        usize::try_from(self.limits.max_write_bytes.min(MOST_WRITE_BYTES))
            .unwrap_or(usize::MAX)
            .max(1)
    }

    /// Sends `data` to be written at `offset_bytes` of file `inode` (named `name`), or keeps
    /// it staged when it is short (`staged.rs`).
    pub fn write(
        &mut self,
        inode: u64,
        name: &str,
        offset_bytes: u64,
        data: &[u8],
    ) -> Result<(), Errno> {
        self.drop_reads_ahead();
        let chunk_bytes = self.chunk_bytes();
        let done = self.continue_pending(inode, offset_bytes, data, chunk_bytes);
        if done == data.len() {
            return Ok(());
        }
        let rest = &data[done..];
        let offset = offset_bytes + done as u64;
        if self.stage_small_writes && rest.len() * 2 < chunk_bytes {
            self.uncommitted = true;
            self.staged
                .keep((inode, name), offset, rest, super::now_ns());
            if self.staged.over_bounds() {
                self.send_staged(None);
            }
            return Ok(());
        }
        if self.staged.holds(inode) {
            self.send_staged(Some(inode));
        }
        self.send_pieces(inode, name, offset, rest, true)
    }

    /// Sends `data` for `offset_bytes` of `inode` (`name`) as writes of a chunk at most; a
    /// last piece of at least half a chunk and short of a whole one is kept back when
    /// `keep_back` (for the request that continues it).
    fn send_pieces(
        &mut self,
        inode: u64,
        name: &str,
        offset_bytes: u64,
        data: &[u8],
        keep_back: bool,
    ) -> Result<(), Errno> {
        let chunk_bytes = self.chunk_bytes();
        let mut done = 0;
        while done < data.len() {
            let piece = &data[done..(done + chunk_bytes).min(data.len())];
            let offset = offset_bytes + done as u64;
            let whole_chunk = piece.len() * 2 >= chunk_bytes;
            let mut buffer = self.write_buffer(whole_chunk, piece.len(), chunk_bytes)?;
            <T::P as StreamPayloads>::set_write_len(&mut buffer, piece.len());
            <T::P as StreamPayloads>::write_bytes_mut(&mut buffer).copy_from_slice(piece);
            self.uncommitted = true;
            done += piece.len();
            if keep_back && whole_chunk && piece.len() < chunk_bytes {
                self.pending = Some(PendingWrite {
                    inode,
                    name: name.to_string(),
                    offset_bytes: offset,
                    buffer,
                    length_bytes: piece.len(),
                });
            } else {
                self.send_write(inode, name, offset, buffer, whole_chunk)?;
            }
        }
        Ok(())
    }

    /// Sends the staged writes of file `inode`, or of every file (`None`); a failure is
    /// kept for its file's next fsync or close.
    pub(super) fn send_staged(&mut self, inode: Option<u64>) {
        let extents = match inode {
            Some(inode) => self.staged.take_file(inode),
            None => self.staged.take_all(),
        };
        for (inode, name, offset_bytes, bytes) in extents {
            if let Err(errno) = self.send_pieces(inode, &name, offset_bytes, &bytes, false) {
                self.keep_write_error(inode, errno);
            }
        }
    }

    /// Adds the start of `data` (for `offset_bytes` of `inode`) to the write kept back when
    /// it continues it, sending it once whole; sends it as it is otherwise. How many bytes
    /// of `data` it took.
    fn continue_pending(
        &mut self,
        inode: u64,
        offset_bytes: u64,
        data: &[u8],
        chunk_bytes: usize,
    ) -> usize {
        let Some(pending) = self.pending.as_mut() else {
            return 0;
        };
        let continues = pending.inode == inode
            && pending.offset_bytes + pending.length_bytes as u64 == offset_bytes;
        if !continues {
            self.send_pending();
            return 0;
        }
        let taken = (chunk_bytes - pending.length_bytes).min(data.len());
        let start = pending.length_bytes;
        pending.length_bytes += taken;
        <T::P as StreamPayloads>::set_write_len(&mut pending.buffer, pending.length_bytes);
        <T::P as StreamPayloads>::write_bytes_mut(&mut pending.buffer)[start..]
            .copy_from_slice(&data[..taken]);
        if pending.length_bytes == chunk_bytes {
            self.send_pending();
        }
        taken
    }

    /// Keeps `errno` for file `inode`'s next fsync or close (the first failure wins).
    pub fn keep_write_error(&mut self, inode: u64, errno: Errno) {
        self.write_errors.entry(inode).or_insert(errno);
    }

    /// Sends the write kept back, when there is one; a failure is kept for its file.
    pub(super) fn send_pending(&mut self) {
        let Some(pending) = self.pending.take() else {
            return;
        };
        let PendingWrite {
            inode,
            name,
            offset_bytes,
            buffer,
            ..
        } = pending;
        if let Err(errno) = self.send_write(inode, &name, offset_bytes, buffer, true) {
            self.keep_write_error(inode, errno);
        }
    }

    /// A write buffer for `length_bytes`: a spare whole chunk when `whole_chunk`, else a new
    /// one (a whole chunk long when `whole_chunk`, so that it can be kept back and filled).
    fn write_buffer(
        &mut self,
        whole_chunk: bool,
        length_bytes: usize,
        chunk_bytes: usize,
    ) -> Result<<T::P as Payloads>::Write, Errno> {
        if let Some(buffer) = self.spare_writes.pop().filter(|_| whole_chunk) {
            return Ok(buffer);
        }
        self.transport
            .write_buffer(if whole_chunk {
                chunk_bytes
            } else {
                length_bytes
            })
            .map_err(|error| {
                report("getting a write buffer", &error);
                errno_of(error.code())
            })
    }

    /// Sends `buffer` to be written at `offset_bytes` of `inode` (`name`), after the writes
    /// in flight on the same FS blocks and within the window.
    fn send_write(
        &mut self,
        inode: u64,
        name: &str,
        offset_bytes: u64,
        buffer: <T::P as Payloads>::Write,
        whole_chunk: bool,
    ) -> Result<(), Errno> {
        let mut buffer = buffer;
        let length = <T::P as StreamPayloads>::write_bytes_mut(&mut buffer).len() as u64;
        let first_block = offset_bytes / self.block_size_bytes;
        let last_block = (offset_bytes + length.max(1) - 1) / self.block_size_bytes;
        let overlaps = self.in_flight.values().any(|write| {
            write.inode == inode
                && write.first_block <= last_block
                && first_block <= write.last_block
        });
        if overlaps {
            self.drain()?;
        }
        while self.in_flight.len() >= self.window {
            self.reap_one()?;
        }
        let ticket = self
            .transport
            .submit(Command::Write {
                name: name.to_string(),
                offset_bytes,
                data: buffer,
            })
            .map_err(|error| {
                report("sending a write", &error);
                errno_of(error.code())
            })?;
        self.in_flight.insert(
            ticket,
            InFlightWrite {
                inode,
                first_block,
                last_block,
                whole_chunk,
            },
        );
        Ok(())
    }
}
