//! Read-ahead: when a file is read in order, the next reads are sent before the kernel asks
//! for them, so the store reads the next chunk while the mount answers this one. At most
//! [`AHEAD_READS`] reads are ahead (each holds one of the engine's read buffers, or a read
//! handle of the server); any change (a write, a create, delete, rename or truncate) or a
//! read elsewhere drops them (waiting for those in flight), so a read never answers with
//! bytes older than a change the mount made.
//!
//! The reads sent ahead are as long as the longest request of the run in order, and a
//! request may take part of one: the kernel splits a direct read into a buffer that does
//! not start on a page (any `malloc`'d buffer) into a request one page short and a small
//! one (1 MiB at offset 16 of a page: 1,048,560 bytes, then 16), which must not drop the
//! reads ahead. The part a request takes is answered from the store's buffer without a
//! copy when it ends the read ahead; otherwise the smaller side is copied (the request's
//! part, or what is left for the next request).

use std::collections::VecDeque;
use std::ops::Range;

use flashpipe_api::{Command, Payloads, Reply, StreamPayloads, Ticket, Transport};

use super::State;
use crate::MountTransport;

/// Reads sent ahead at most.
pub const AHEAD_READS: usize = 4;

/// What a completed command answered.
type Outcome<T> = Result<Reply<<T as Transport>::P>, <T as Transport>::Error>;

/// Bytes read: the store's read data as it came, or a copy of part of it.
pub enum Held<T: Transport> {
    /// The transport's read data.
    Store(<T::P as Payloads>::Read),
    /// Bytes copied out of it.
    Copied(Vec<u8>),
}

impl<T: MountTransport> Held<T> {
    fn bytes(&self) -> &[u8] {
        match self {
            Held::Store(data) => <T::P as StreamPayloads>::read_bytes(data),
            Held::Copied(bytes) => bytes,
        }
    }
}

/// Part of a read's answer: `range` of `held`.
pub struct Piece<T: Transport> {
    held: Held<T>,
    range: Range<usize>,
}

impl<T: MountTransport> Piece<T> {
    /// All of the store's read data `data`.
    pub fn whole(data: <T::P as Payloads>::Read) -> Piece<T> {
        let length = <T::P as StreamPayloads>::read_bytes(&data).len();
        Piece {
            held: Held::Store(data),
            range: 0..length,
        }
    }

    /// The piece's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.held.bytes()[self.range.clone()]
    }
}

/// The data of a read sent ahead that completed; `None` when it was refused.
type Arrived<T> = Option<Held<T>>;

/// The data of a read's answer, when it is one.
fn data_of<T: Transport>(outcome: Outcome<T>) -> Arrived<T> {
    match outcome {
        Ok(Reply::Data(data)) => Some(Held::Store(data)),
        _ => None,
    }
}

/// A read sent ahead, and its answer once it came; the kernel's requests took its first
/// `used_bytes`.
pub struct AheadRead<T: Transport> {
    ticket: Ticket,
    inode: u64,
    offset_bytes: u64,
    length_bytes: u64,
    arrived: Option<Arrived<T>>,
    used_bytes: usize,
}

/// The reads sent ahead, in file order, where the last read of the kernel ended, and the
/// longest request of the run in order (the length of the reads sent ahead).
pub struct ReadAhead<T: Transport> {
    reads: VecDeque<AheadRead<T>>,
    last_end: Option<(u64, u64)>,
    piece_bytes: u64,
}

impl<T: Transport> Default for ReadAhead<T> {
    fn default() -> Self {
        ReadAhead {
            reads: VecDeque::new(),
            last_end: None,
            piece_bytes: 0,
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

    /// Up to `most_bytes` at `offset_bytes` of `inode` from the reads sent ahead, when the
    /// next of them continues there; reads ahead of other places are dropped.
    pub(super) fn take_ahead(
        &mut self,
        inode: u64,
        offset_bytes: u64,
        most_bytes: u64,
    ) -> Option<Piece<T>> {
        let front = self.ahead.reads.front()?;
        let continues =
            front.inode == inode && front.offset_bytes + front.used_bytes as u64 == offset_bytes;
        if !continues {
            let last_end = self.ahead.last_end;
            self.drop_reads_ahead();
            self.ahead.last_end = last_end;
            return None;
        }
        let front = self.ahead.reads.front_mut().expect("the front just seen");
        if front.arrived.is_none() {
            front.arrived = Some(data_of::<T>(self.transport.wait_for(front.ticket)));
        }
        let front = self.ahead.reads.front_mut().expect("the front just seen");
        let available = match front.arrived.as_ref().and_then(Option::as_ref) {
            Some(held) => held.bytes().len().saturating_sub(front.used_bytes),
            None => 0,
        };
        if available == 0 {
            // refused (no read buffer free, a change meanwhile), or short at the file's end:
            // the caller reads it itself
            self.drop_reads_ahead();
            return None;
        }
        let taken = usize::try_from(most_bytes).map_or(available, |most| most.min(available));
        let start = front.used_bytes;
        let left = available - taken;
        if left == 0 {
            let read = self.ahead.reads.pop_front().expect("the front just seen");
            let held = read.arrived.flatten().expect("arrived with data");
            return Some(Piece {
                held,
                range: start..start + taken,
            });
        }
        if taken <= left {
            let held = front
                .arrived
                .as_ref()
                .and_then(Option::as_ref)
                .expect("arrived with data");
            let copy = held.bytes()[start..start + taken].to_vec();
            front.used_bytes += taken;
            return Some(Piece {
                held: Held::Copied(copy),
                range: 0..taken,
            });
        }
        // the request takes most of it: its part answered from the store's buffer, what is
        // left copied for the next request
        let read = self.ahead.reads.pop_front().expect("the front just seen");
        let held = read.arrived.flatten().expect("arrived with data");
        let rest = held.bytes()[start + taken..].to_vec();
        self.ahead.reads.push_front(AheadRead {
            ticket: read.ticket,
            inode,
            offset_bytes: offset_bytes + taken as u64,
            length_bytes: rest.len() as u64,
            arrived: Some(Some(Held::Copied(rest))),
            used_bytes: 0,
        });
        Some(Piece {
            held,
            range: start..start + taken,
        })
    }

    /// After the kernel's read of `length_bytes` asked at `start` of `inode` (`name`,
    /// `size_bytes` long), answered up to `end`: when it follows the previous one, sends
    /// reads ahead up to [`AHEAD_READS`], as long as the longest request of the run.
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
        if !in_order {
            self.ahead.piece_bytes = length_bytes;
            return;
        }
        self.ahead.piece_bytes = self.ahead.piece_bytes.max(length_bytes);
        if self.ahead.piece_bytes == 0 {
            return;
        }
        let mut next = self
            .ahead
            .reads
            .back()
            .map_or(end, |read| read.offset_bytes + read.length_bytes);
        while self.ahead.reads.len() < AHEAD_READS && next < size_bytes {
            let length = self
                .ahead
                .piece_bytes
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
                used_bytes: 0,
            });
            next += length;
        }
    }
}
