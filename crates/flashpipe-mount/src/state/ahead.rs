//! Read-ahead: when a file is read in order, the next reads are sent before the kernel asks
//! for them, so the store reads the next chunk while the mount answers this one. At most
//! [`AHEAD_READS`] reads are ahead (each holds one of the engine's read buffers, or a read
//! handle of the server); any change (a write, a create, delete, rename or truncate) or a
//! read elsewhere drops them (waiting for those in flight), so a read never answers with
//! bytes older than a change the mount made.

use std::collections::VecDeque;

use flashpipe_api::{Command, Payloads, Reply, Ticket, Transport};

use super::State;
use crate::MountTransport;

/// Reads sent ahead at most.
pub const AHEAD_READS: usize = 4;

/// What a completed command answered.
type Outcome<T> = Result<Reply<<T as Transport>::P>, <T as Transport>::Error>;

/// The data of a read sent ahead that completed; `None` when it was refused.
type Arrived<T> = Option<<<T as Transport>::P as Payloads>::Read>;

/// The data of a read's answer, when it is one.
fn data_of<T: Transport>(outcome: Outcome<T>) -> Arrived<T> {
    match outcome {
        Ok(Reply::Data(data)) => Some(data),
        _ => None,
    }
}

/// A read sent ahead, and its answer once it came.
pub struct AheadRead<T: Transport> {
    ticket: Ticket,
    inode: u64,
    offset_bytes: u64,
    length_bytes: u64,
    arrived: Option<Arrived<T>>,
}

/// The reads sent ahead, in file order, and where the last read of the kernel ended.
pub struct ReadAhead<T: Transport> {
    reads: VecDeque<AheadRead<T>>,
    last_end: Option<(u64, u64)>,
}

impl<T: Transport> Default for ReadAhead<T> {
    fn default() -> Self {
        ReadAhead {
            reads: VecDeque::new(),
            last_end: None,
        }
    }
}

impl<T: MountTransport> State<T> {
    /// Keeps a completion of a read sent ahead (`None`); gives any other back.
    pub(super) fn keep_if_ahead(
        &mut self,
        ticket: Ticket,
        outcome: Outcome<T>,
    ) -> Option<(Ticket, Outcome<T>)> {
        match self
            .ahead
            .reads
            .iter_mut()
            .find(|read| read.ticket == ticket && read.arrived.is_none())
        {
            Some(read) => {
                read.arrived = Some(data_of::<T>(outcome));
                None
            }
            None => Some((ticket, outcome)),
        }
    }

    /// Drops every read sent ahead (waiting for those still in flight: their tickets must
    /// be reaped) and forgets where the last read ended.
    pub(crate) fn drop_reads_ahead(&mut self) {
        while let Some(read) = self.ahead.reads.pop_front() {
            if read.arrived.is_none() {
                let _ = self.transport.wait_for(read.ticket);
            }
        }
        self.ahead.last_end = None;
    }

    /// The data of a read sent ahead at `offset_bytes` of `inode` no longer than
    /// `most_bytes`, when there is one; reads ahead of other places are dropped.
    pub(super) fn take_ahead(
        &mut self,
        inode: u64,
        offset_bytes: u64,
        most_bytes: u64,
    ) -> Option<<T::P as Payloads>::Read> {
        let front = self.ahead.reads.front()?;
        let fits = front.inode == inode
            && front.offset_bytes == offset_bytes
            && front.length_bytes <= most_bytes;
        if !fits {
            let last_end = self.ahead.last_end;
            self.drop_reads_ahead();
            self.ahead.last_end = last_end;
            return None;
        }
        let read = self.ahead.reads.pop_front().expect("the front just seen");
        let arrived = match read.arrived {
            Some(arrived) => arrived,
            None => data_of::<T>(self.transport.wait_for(read.ticket)),
        };
        if arrived.is_none() {
            // refused (no read buffer free, a change meanwhile): the caller reads it itself
            self.drop_reads_ahead();
        }
        arrived
    }

    /// After the kernel's read of `[start, end)` of `inode` (`name`, `size_bytes` long):
    /// when it follows the previous one, sends reads of `length_bytes` ahead up to
    /// [`AHEAD_READS`].
    pub(super) fn read_ahead_after(
        &mut self,
        inode: u64,
        name: &str,
        (start, end): (u64, u64),
        length_bytes: u64,
        size_bytes: u64,
    ) {
        let in_order = self.ahead.last_end == Some((inode, start));
        self.ahead.last_end = Some((inode, end));
        if !in_order || length_bytes == 0 {
            return;
        }
        let mut next = self
            .ahead
            .reads
            .back()
            .map_or(end, |read| read.offset_bytes + read.length_bytes);
        while self.ahead.reads.len() < AHEAD_READS && next < size_bytes {
            let length = length_bytes
                .min(size_bytes - next)
                .min(self.limits.max_read_bytes.max(1));
            let Ok(ticket) = self.transport.submit(Command::Read {
                name: name.to_string(),
                offset_bytes: next,
                length_bytes: length,
            }) else {
                return;
            };
            self.ahead.reads.push_back(AheadRead {
                ticket,
                inode,
                offset_bytes: next,
                length_bytes: length,
                arrived: None,
            });
            next += length;
        }
    }
}
