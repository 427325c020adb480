//! A [`FrameRing`] as a byte stream (#14): [`RingReader`] reads the records of a ring
//! as one stream of bytes (`std::io::Read`), and [`push_stream_bytes`] writes bytes
//! into a ring as records of at most a quarter of its data area, waiting while it is
//! full. Messages of a self-delimiting encoding (a frame header that states its body's
//! length) therefore cross a ring whatever their size: a frame larger than the ring
//! goes through in pieces while the consumer takes the earlier ones.
//!
//! Errors become `std::io::Error`s: a corrupt ring is `InvalidData` carrying the
//! [`FrameRingError`] (see [`ring_error_of`]), a closed ring is `BrokenPipe` for the
//! producer and the end of the stream (`Ok(0)`) for the consumer once it is drained.

use std::io::{Error, ErrorKind, Read};
use std::time::{Duration, Instant};

use flashpipe_base::wait::{WaitPolicy, Waiter};

use super::ring::{FrameRing, FrameRingError, PushOutcome, RingWait};
use crate::Doorbell;

/// Called by a waiting reader or writer between two waits; an error ends the wait with
/// it (the peer is gone, a deadline passed). Takes how long this wait has lasted.
pub type PeerCheck = Box<dyn FnMut(Duration) -> std::io::Result<()> + Send>;

/// Tries of a full ring with only a yield between them, before sleeping starts.
const YIELDS_BEFORE_SLEEPING: u32 = 64;
/// First sleep of a writer waiting on a full ring, in microseconds (doubled each time).
const FIRST_FULL_SLEEP_US: u64 = 20;
/// Longest sleep of a writer waiting on a full ring, in microseconds.
const MAX_FULL_SLEEP_US: u64 = 1000;

/// The consumer's side of a ring, read as a byte stream.
pub struct RingReader {
    ring: FrameRing,
    wait: RingWait,
    record: Vec<u8>,
    position: usize,
    peer_check: Option<PeerCheck>,
    waiting_since: Option<Instant>,
    room_bell: Option<Doorbell>,
}

impl RingReader {
    /// Reads `ring` waiting as `wait` says; when a wait ends without a record (a park
    /// timeout) `peer_check` says whether to wait on. Without a park timeout a reader
    /// waits until a record comes or the ring is closed.
    pub fn new(ring: FrameRing, wait: RingWait, peer_check: Option<PeerCheck>) -> RingReader {
        RingReader {
            ring,
            wait,
            record: Vec::new(),
            position: 0,
            peer_check,
            waiting_since: None,
            room_bell: None,
        }
    }

    /// Rings `bell` (the producer's doorbell) after each record taken from a crowded ring
    /// ([`FrameRing::is_crowded`]), so a producer parked on it while the ring was full
    /// learns at once that there is room, instead of at its next timeout.
    pub fn with_room_bell(mut self, bell: Doorbell) -> RingReader {
        self.room_bell = Some(bell);
        self
    }

    /// The ring read.
    pub fn ring(&self) -> &FrameRing {
        &self.ring
    }

    /// Bytes of the last record not yet read.
    pub fn buffered_bytes(&self) -> usize {
        self.record.len() - self.position
    }

    /// Takes the next record; false at the end of the stream (closed and drained).
    fn next_record(&mut self) -> std::io::Result<bool> {
        loop {
            let crowded = self.room_bell.is_some() && self.ring.is_crowded();
            match self.ring.pop_into(self.wait, &mut self.record) {
                Ok(true) => {
                    self.position = 0;
                    self.waiting_since = None;
                    if let Some(bell) = self.room_bell.as_mut().filter(|_| crowded) {
                        bell.ring();
                    }
                    return Ok(true);
                }
                Ok(false) => {}
                Err(error) => return Err(Error::new(ErrorKind::InvalidData, error)),
            }
            if self.ring.is_closed() {
                let came = self
                    .ring
                    .pop_into(RingWait::NoWait, &mut self.record)
                    .map_err(|error| Error::new(ErrorKind::InvalidData, error))?;
                if !came {
                    self.record.clear();
                }
                self.position = 0;
                return Ok(came);
            }
            let waited = self
                .waiting_since
                .get_or_insert_with(Instant::now)
                .elapsed();
            match &mut self.peer_check {
                Some(check) => check(waited)?,
                None if self.wait == RingWait::NoWait => {
                    return Err(Error::new(ErrorKind::WouldBlock, "the ring is empty"))
                }
                None => {}
            }
        }
    }
}

impl Read for RingReader {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        if buffer.is_empty() {
            return Ok(0);
        }
        while self.position == self.record.len() {
            if !self.next_record()? {
                return Ok(0);
            }
        }
        let count = buffer.len().min(self.record.len() - self.position);
        buffer[..count].copy_from_slice(&self.record[self.position..self.position + count]);
        self.position += count;
        Ok(count)
    }
}

impl std::fmt::Debug for RingReader {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("RingReader")
            .field("ring", &self.ring)
            .field("wait", &self.wait)
            .field("buffered_bytes", &self.buffered_bytes())
            .finish()
    }
}

/// Longest record [`push_stream_bytes`] pushes into `ring`: a quarter of its data area
/// (so the producer fills while the consumer drains), less the length prefix.
pub fn stream_record_bytes(ring: &FrameRing) -> usize {
    (ring.capacity_bytes() / 4).min(ring.max_record_bytes())
}

/// Pushes `bytes` into `ring` as records of at most [`stream_record_bytes`], in order,
/// waiting while the ring is full (a yield, then sleeps of 20 us doubling to 1 ms; a
/// full ring is backpressure, never a lost byte); `peer_check` is called between sleeps
/// and ends the wait with its error.
pub fn push_stream_bytes(
    ring: &mut FrameRing,
    bytes: &[u8],
    peer_check: &mut dyn FnMut(Duration) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let record_bytes = stream_record_bytes(ring).max(1);
    for record in bytes.chunks(record_bytes) {
        push_one_waiting(ring, record, peer_check)?;
    }
    Ok(())
}

/// Pushes one record, waiting while the ring is full. The producer has no futex to
/// park on, so this is the one wait strategy with a window of 0 whose park closure
/// backs off instead: it yields [`YIELDS_BEFORE_SLEEPING`] times, then sleeps from
/// [`FIRST_FULL_SLEEP_US`] doubling to [`MAX_FULL_SLEEP_US`], asking `peer_check`
/// before each sleep whether the consumer still lives.
fn push_one_waiting(
    ring: &mut FrameRing,
    record: &[u8],
    peer_check: &mut dyn FnMut(Duration) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let (pushed, _) = Waiter::new(WaitPolicy::PARK).wait_with(
        ring,
        |ring| try_push_once(ring, record),
        |ring| push_backing_off(ring, record, peer_check),
    );
    pushed
}

/// One push: `None` while the ring is full.
fn try_push_once(ring: &mut FrameRing, record: &[u8]) -> Option<std::io::Result<()>> {
    match ring.try_push(record) {
        Ok(PushOutcome::Pushed) => Some(Ok(())),
        Ok(PushOutcome::Full) => None,
        Err(error) => Some(Err(io_error(error))),
    }
}

fn push_backing_off(
    ring: &mut FrameRing,
    record: &[u8],
    peer_check: &mut dyn FnMut(Duration) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut full_tries = 1u32;
    let mut sleep_us = FIRST_FULL_SLEEP_US;
    let mut waiting_since = None;
    loop {
        if full_tries < YIELDS_BEFORE_SLEEPING {
            std::thread::yield_now();
        } else {
            peer_check(waiting_since.get_or_insert_with(Instant::now).elapsed())?;
            std::thread::sleep(Duration::from_micros(sleep_us));
            sleep_us = (sleep_us * 2).min(MAX_FULL_SLEEP_US);
        }
        if let Some(pushed) = try_push_once(ring, record) {
            return pushed;
        }
        full_tries += 1;
    }
}

/// The `std::io::Error` of a ring error: `BrokenPipe` for a closed ring, `InvalidData`
/// for anything else (the ring error inside).
pub fn io_error(error: FrameRingError) -> Error {
    match error {
        FrameRingError::Closed { .. } => Error::new(ErrorKind::BrokenPipe, error),
        other => Error::new(ErrorKind::InvalidData, other),
    }
}

/// The ring error inside an `std::io::Error` made here, if any (to tell a corrupt ring
/// from a socket's error).
pub fn ring_error_of(error: &Error) -> Option<&FrameRingError> {
    error.get_ref()?.downcast_ref::<FrameRingError>()
}
