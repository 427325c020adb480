//! [`FrameRing`]: a bounded single-producer single-consumer ring of length-prefixed
//! records in a shared-memory region, so two processes on one machine pass frames
//! without a socket round trip.
//!
//! # Layout (version 1, little-endian, in the region's first page and after it)
//! | offset | size | field |
//! |-------:|-----:|-------|
//! | 0      | 8    | magic `FPRING01` |
//! | 8      | 4    | version (1) |
//! | 12     | 4    | capacity of the data area in bytes (a power of two) |
//! | 64     | 8    | `head`: bytes ever pushed (written by the producer only) |
//! | 128    | 8    | `tail`: bytes ever popped (written by the consumer only) |
//! | 192    | 4    | `consumer_parked`: 1 while the consumer sleeps (the futex word) |
//! | 256    | 4    | `closed`: 1 once either side closed the ring |
//! | 4096   | capacity | data: records at `position % capacity`, wrapping |
//!
//! A record is a 4-byte length then its bytes, wrapping around the end of the data area
//! as one byte stream. The indices live on cache lines of their own so the two sides do
//! not contend for one line.
//!
//! # Waiting
//! The consumer polls `head` for a spin window (the one wait strategy,
//! `flashpipe_base::wait`: a `spin_loop` hint between polls, `yield_now` after the first
//! few; by default the engine's hand-off window), then parks on a futex (the waiter's park
//! closure, the ring's own): it stores 1 in `consumer_parked`, looks at `head` once more and sleeps only if
//! nothing came (`FUTEX_WAIT` while the word is 1). The producer, after publishing a
//! record, reads `consumer_parked` and makes a system call only when it finds 1: it swaps
//! in 0 and wakes (`FUTEX_WAKE`). Both sides use sequentially consistent order for those
//! two pairs (store `head`, load the word; store the word, load `head`), so one of them
//! sees the other: no wake is lost, and a consumer that is spinning costs the producer
//! no system call. The futex is a shared one (no `FUTEX_PRIVATE_FLAG`): the two sides
//! are different processes.
//!
//! # Trust
//! The other side may be a buggy or hostile process. Every index and length read from
//! the shared page is checked against the capacity before it is used (a corrupt ring is
//! an error naming the region, never an out-of-bounds access), and records are copied
//! out before they are returned, so the peer cannot change a record the caller holds.
//! Pushes and pops take `&mut self`, so one handle is used by one thread at a time; one
//! producer and one consumer (each its own handle) is the protocol, as it is between two
//! processes, where no type reaches (the module safety argument, point 4).

use std::os::fd::BorrowedFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::error::SharedMemoryError;
use super::futex;
use super::{MapAccess, SharedMapping, SharedMemory};
use flashpipe_base::wait::{WaitPolicy, Waited, Waiter, MAX_SPIN_US};

const MAGIC: u64 = u64::from_le_bytes(*b"FPRING01");
const VERSION: u32 = 1;
const HEAD_OFFSET: usize = 64;
const TAIL_OFFSET: usize = 128;
const CONSUMER_PARKED_OFFSET: usize = 192;
const CLOSED_OFFSET: usize = 256;
/// Bytes before the data area (one page).
pub const RING_HEADER_BYTES: usize = 4096;
/// Smallest data area of a ring, in bytes.
pub const MIN_RING_CAPACITY_BYTES: usize = 4096;
/// Largest data area of a ring, in bytes (1 GiB).
pub const MAX_RING_CAPACITY_BYTES: usize = 1 << 30;
/// Bytes of a record's length prefix.
pub const RECORD_PREFIX_BYTES: usize = 4;
/// Default spin window of a waiting pop, in microseconds (the engine's default hand-off
/// window, `flashpipe_engine::handoff::DEFAULT_SPIN_US`).
pub const DEFAULT_RING_SPIN_US: u32 = 200;
/// Default spin window of the rings of `flashpipe serve` (server and client), in
/// microseconds: 0, park at once. Measured on the 2-vCPU guest (docs/benchmarks.md, issue
/// #14): spinning 200 us made the QD1 round trip slower (18.4 against 15.7 us) and equal
/// clients less equal (Jain 0.93-0.97 against 1.000), since a spinning client and a
/// spinning server thread take the cores the engine needs. Raise it where cores are spare.
pub const DEFAULT_SERVE_RING_SPIN_US: u32 = 0;
/// Name of the memfd a ring lives in.
pub const RING_MEMORY_NAME: &str = "flashpipe-frame-ring";

/// Why a ring could not be made, attached or used.
#[derive(Debug, thiserror::Error)]
pub enum FrameRingError {
    /// The region could not be created or checked.
    #[error(transparent)]
    Memory(#[from] SharedMemoryError),
    /// The capacity is not a power of two within the limits.
    #[error("frame ring capacity of {capacity_bytes} bytes refused: a power of two from {min_bytes} to {max_bytes}")]
    CapacityInvalid {
        /// Capacity asked for.
        capacity_bytes: usize,
        /// [`MIN_RING_CAPACITY_BYTES`].
        min_bytes: usize,
        /// [`MAX_RING_CAPACITY_BYTES`].
        max_bytes: usize,
    },
    /// The mapped region does not hold a ring this code reads.
    #[error("shared memory region {region:?} is not a frame ring: {detail}")]
    NotARing {
        /// The region.
        region: String,
        /// What its header says instead.
        detail: String,
    },
    /// The peer left indices or a record length that cannot be.
    #[error("frame ring {region:?} is corrupt: {detail}")]
    Corrupt {
        /// The region.
        region: String,
        /// What is out of range, with the limit.
        detail: String,
    },
    /// A record longer than the ring can ever hold.
    #[error("record of {length_bytes} bytes refused by frame ring {region:?}: at most {max_record_bytes} bytes")]
    RecordTooLarge {
        /// The region.
        region: String,
        /// The record's length.
        length_bytes: usize,
        /// Longest record the ring holds (capacity less the length prefix).
        max_record_bytes: usize,
    },
    /// A push into a ring either side has closed.
    #[error("frame ring {region:?} is closed")]
    Closed {
        /// The region.
        region: String,
    },
}

/// What a [`FrameRing::try_push`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushOutcome {
    /// The record is in the ring.
    Pushed,
    /// Not enough free space now; nothing was written (retry after the consumer pops).
    Full,
}

/// How a [`FrameRing::pop`] waits on an empty ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RingWait {
    /// Return at once.
    NoWait,
    /// Poll for `spin_us` microseconds, then sleep on the futex until a record comes, the
    /// ring is closed, or `park_timeout_us` passes (forever for `None`; a timeout lets a
    /// caller check that its peer still lives).
    SpinThenPark {
        /// The spin window.
        spin_us: u32,
        /// Longest sleep, in microseconds.
        park_timeout_us: Option<u64>,
    },
}

impl RingWait {
    /// Spin [`DEFAULT_RING_SPIN_US`], then park without a timeout.
    pub const DEFAULT: RingWait = RingWait::SpinThenPark {
        spin_us: DEFAULT_RING_SPIN_US,
        park_timeout_us: None,
    };
}

/// What one handle of a ring did (this process's side only).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RingCounters {
    /// Records pushed.
    pub pushes: u64,
    /// Pushes that found the ring full.
    pub pushes_full: u64,
    /// Wakes sent to a parked consumer (one system call each).
    pub wakes_sent: u64,
    /// Pops that found a record at once.
    pub pops_ready: u64,
    /// Pops whose record came while spinning.
    pub pops_spun: u64,
    /// Times the consumer announced it was parking (each may take one wake).
    pub parks: u64,
}

#[derive(Debug)]
enum Backing {
    Owner(SharedMemory),
    Attached(SharedMapping),
}

/// A bounded SPSC ring of length-prefixed records in shared memory; see the module doc.
#[derive(Debug)]
pub struct FrameRing {
    backing: Backing,
    base: NonNull<u8>,
    capacity_bytes: usize,
    region: String,
    counters: RingCounters,
}

// SAFETY: the handle owns its mapping (kept alive by `backing`); every access to the
// shared page goes through atomics or through `&mut self` methods (module doc, Trust).
unsafe impl Send for FrameRing {}

impl FrameRing {
    /// A new empty ring with a data area of `capacity_bytes` (a power of two) in a fresh
    /// memfd; pass [`FrameRing::as_fd`] and [`FrameRing::region_size_bytes`] to the peer,
    /// which maps it read-write and calls [`FrameRing::attach`].
    pub fn create(capacity_bytes: usize) -> Result<FrameRing, FrameRingError> {
        check_capacity(capacity_bytes)?;
        let memory = SharedMemory::create(RING_MEMORY_NAME, RING_HEADER_BYTES + capacity_bytes)?;
        let base = NonNull::new(memory.as_mut_ptr()).expect("a mapping is never at address 0");
        let header = [
            MAGIC.to_le_bytes().as_slice(),
            &VERSION.to_le_bytes(),
            &(capacity_bytes as u32).to_le_bytes(),
        ]
        .concat();
        // SAFETY: the region is fresh (nobody else has its descriptor yet) and at least
        // RING_HEADER_BYTES long; the rest of the header is already zero (a new memfd).
        unsafe { std::ptr::copy_nonoverlapping(header.as_ptr(), base.as_ptr(), header.len()) };
        Ok(FrameRing {
            region: memory.name().to_string(),
            backing: Backing::Owner(memory),
            base,
            capacity_bytes,
            counters: RingCounters::default(),
        })
    }

    /// The peer's side: a ring received as a read-write [`SharedMapping`], its header
    /// checked (magic, version, capacity, the mapping large enough).
    pub fn attach(mapping: SharedMapping) -> Result<FrameRing, FrameRingError> {
        let region = mapping.name().to_string();
        let not_a_ring = |detail: String| FrameRingError::NotARing {
            region: region.clone(),
            detail,
        };
        if mapping.access() != MapAccess::ReadWrite {
            return Err(not_a_ring(
                "mapped read-only; both sides of a ring write".into(),
            ));
        }
        let header = mapping.bytes(0, RING_HEADER_BYTES)?;
        let magic = u64::from_le_bytes(header[0..8].try_into().expect("8 bytes"));
        let version = u32::from_le_bytes(header[8..12].try_into().expect("4 bytes"));
        let capacity_bytes =
            u32::from_le_bytes(header[12..16].try_into().expect("4 bytes")) as usize;
        if magic != MAGIC {
            return Err(not_a_ring(format!(
                "magic {magic:#018x}, not {MAGIC:#018x}"
            )));
        }
        if version != VERSION {
            return Err(not_a_ring(format!(
                "version {version}, this code reads {VERSION}"
            )));
        }
        check_capacity(capacity_bytes)?;
        if mapping.size_bytes() < RING_HEADER_BYTES + capacity_bytes {
            return Err(not_a_ring(format!(
                "{} bytes mapped, its capacity needs {}",
                mapping.size_bytes(),
                RING_HEADER_BYTES + capacity_bytes
            )));
        }
        let base =
            NonNull::new(mapping.as_ptr().cast_mut()).expect("a mapping is never at address 0");
        Ok(FrameRing {
            region,
            backing: Backing::Attached(mapping),
            base,
            capacity_bytes,
            counters: RingCounters::default(),
        })
    }

    /// The ring's memfd, to pass to the peer.
    pub fn as_fd(&self) -> BorrowedFd<'_> {
        match &self.backing {
            Backing::Owner(memory) => memory.as_fd(),
            Backing::Attached(mapping) => mapping.as_fd(),
        }
    }

    /// Another handle on the same ring (its descriptor duplicated and mapped again), for
    /// a thread that only closes it or looks whether it is closed (#14: the watcher of a
    /// connection's socket). Pushing or popping through it as well breaks the protocol
    /// of one producer and one consumer.
    pub fn attach_again(&self) -> Result<FrameRing, FrameRingError> {
        let fd = self
            .as_fd()
            .try_clone_to_owned()
            .map_err(|source| SharedMemoryError::System {
                region: self.region.clone(),
                operation: "dup",
                source,
            })?;
        attach_received_ring(fd, self.region_size_bytes())
    }

    /// Bytes the peer maps: the header page and the data area.
    pub fn region_size_bytes(&self) -> usize {
        RING_HEADER_BYTES + self.capacity_bytes
    }

    /// Bytes of the data area.
    pub fn capacity_bytes(&self) -> usize {
        self.capacity_bytes
    }

    /// Longest record the ring holds.
    pub fn max_record_bytes(&self) -> usize {
        self.capacity_bytes - RECORD_PREFIX_BYTES
    }

    /// What this handle did so far.
    pub fn counters(&self) -> RingCounters {
        self.counters
    }

    /// True when a pop would not find the ring empty and open: a record is pending or the
    /// ring is closed (two loads; for a consumer that polls several rings before parking
    /// on one doorbell).
    pub fn has_input(&self) -> bool {
        self.is_readable()
    }

    /// True once either side closed the ring.
    pub fn is_closed(&self) -> bool {
        self.closed_word().load(Ordering::Acquire) != 0
    }

    /// Closes the ring for both sides: pushes fail, pops return what is left and then
    /// `None`; a parked consumer is woken.
    pub fn close(&self) {
        self.closed_word().store(1, Ordering::SeqCst);
        if self.parked_word().swap(0, Ordering::SeqCst) != 0 {
            futex::wake_one(self.parked_word());
        }
    }

    /// True when a producer may be waiting for room: records fill more than half of the
    /// data area. A stream producer's records are at most a quarter of it
    /// ([`crate::ring_stream::stream_record_bytes`]), so a push of one that found the ring full saw more
    /// than three quarters used; a consumer that pops from a crowded ring wakes the
    /// producer's doorbell, where it has one. A damaged header reads as crowded (the pop
    /// reports the damage).
    pub fn is_crowded(&self) -> bool {
        let head = self.head_word().load(Ordering::Acquire);
        let tail = self.tail_word().load(Ordering::Relaxed);
        self.checked_used_bytes(head, tail)
            .map_or(true, |used| used > self.capacity_bytes / 2)
    }

    /// Appends `record` when there is room (the producer's side); never waits. Wakes the
    /// consumer only when it announced it is parked.
    pub fn try_push(&mut self, record: &[u8]) -> Result<PushOutcome, FrameRingError> {
        if record.len() > self.max_record_bytes() || record.len() > u32::MAX as usize {
            return Err(FrameRingError::RecordTooLarge {
                region: self.region.clone(),
                length_bytes: record.len(),
                max_record_bytes: self.max_record_bytes(),
            });
        }
        if self.is_closed() {
            return Err(FrameRingError::Closed {
                region: self.region.clone(),
            });
        }
        let head = self.head_word().load(Ordering::Relaxed);
        let tail = self.tail_word().load(Ordering::Acquire);
        let used_bytes = self.checked_used_bytes(head, tail)?;
        let needed_bytes = RECORD_PREFIX_BYTES + record.len();
        if self.capacity_bytes - used_bytes < needed_bytes {
            self.counters.pushes_full += 1;
            return Ok(PushOutcome::Full);
        }
        self.write_wrapped(head, &(record.len() as u32).to_le_bytes());
        self.write_wrapped(head + RECORD_PREFIX_BYTES as u64, record);
        self.head_word()
            .store(head + needed_bytes as u64, Ordering::SeqCst);
        self.counters.pushes += 1;
        if self.parked_word().load(Ordering::SeqCst) != 0
            && self.parked_word().swap(0, Ordering::SeqCst) != 0
        {
            futex::wake_one(self.parked_word());
            self.counters.wakes_sent += 1;
        }
        Ok(PushOutcome::Pushed)
    }

    /// Takes the next record (the consumer's side), waiting as `wait` says; `None` when
    /// the ring is empty and closed, or the wait ended without a record.
    pub fn pop(&mut self, wait: RingWait) -> Result<Option<Vec<u8>>, FrameRingError> {
        let mut record = Vec::new();
        Ok(self.pop_into(wait, &mut record)?.then_some(record))
    }

    /// As [`FrameRing::pop`], into `record` (its allocation reused; replaced by the
    /// record's bytes): true when a record came.
    pub fn pop_into(
        &mut self,
        wait: RingWait,
        record: &mut Vec<u8>,
    ) -> Result<bool, FrameRingError> {
        if self.try_pop_into(record)? {
            self.counters.pops_ready += 1;
            return Ok(true);
        }
        let RingWait::SpinThenPark {
            spin_us,
            park_timeout_us,
        } = wait
        else {
            return Ok(false);
        };
        // A window over the bound is a caller's setting taken at its longest.
        let policy =
            WaitPolicy::checked(u64::from(spin_us)).unwrap_or(WaitPolicy::spin_us(MAX_SPIN_US));
        let (came, waited) = Waiter::new(policy).wait_with(
            &mut (&mut *self, &mut *record),
            |(ring, record)| ring.is_readable().then(|| ring.try_pop_into(record)),
            |(ring, record)| ring.park_until_readable(park_timeout_us, record),
        );
        if waited != Waited::Parked {
            let came = came?;
            self.counters.pops_spun += u64::from(came);
            return Ok(came);
        }
        came
    }

    /// The park closure of a waiting pop: sleeps on the futex until a record comes, the
    /// ring is closed, or (with a timeout) the sleep ends; true when a record came.
    fn park_until_readable(
        &mut self,
        park_timeout_us: Option<u64>,
        record: &mut Vec<u8>,
    ) -> Result<bool, FrameRingError> {
        loop {
            if self.is_closed() {
                return self.try_pop_into(record);
            }
            self.park(park_timeout_us);
            if self.try_pop_into(record)? {
                return Ok(true);
            }
            if park_timeout_us.is_some() {
                return Ok(false);
            }
        }
    }

    /// Takes the next record into `record` if one is there.
    fn try_pop_into(&mut self, record: &mut Vec<u8>) -> Result<bool, FrameRingError> {
        let tail = self.tail_word().load(Ordering::Relaxed);
        let head = self.head_word().load(Ordering::Acquire);
        let used_bytes = self.checked_used_bytes(head, tail)?;
        if used_bytes == 0 {
            return Ok(false);
        }
        if used_bytes < RECORD_PREFIX_BYTES {
            return Err(self.corrupt(format!(
                "{used_bytes} bytes pending, less than a length prefix"
            )));
        }
        let mut prefix = [0u8; RECORD_PREFIX_BYTES];
        self.read_wrapped(tail, &mut prefix);
        let length_bytes = u32::from_le_bytes(prefix) as usize;
        if length_bytes > used_bytes - RECORD_PREFIX_BYTES {
            return Err(self.corrupt(format!(
                "record of {length_bytes} bytes, but only {} bytes pending",
                used_bytes - RECORD_PREFIX_BYTES
            )));
        }
        record.clear();
        record.resize(length_bytes, 0);
        self.read_wrapped(tail + RECORD_PREFIX_BYTES as u64, record);
        let new_tail = tail + (RECORD_PREFIX_BYTES + length_bytes) as u64;
        self.tail_word().store(new_tail, Ordering::Release);
        Ok(true)
    }

    /// A record is pending, or the ring is closed (either ends a wait).
    fn is_readable(&self) -> bool {
        self.head_word().load(Ordering::Acquire) != self.tail_word().load(Ordering::Relaxed)
            || self.is_closed()
    }

    /// Announces the park, looks once more, and sleeps only if nothing came.
    fn park(&mut self, park_timeout_us: Option<u64>) {
        self.counters.parks += 1;
        self.parked_word().store(1, Ordering::SeqCst);
        let nothing_came = self.head_word().load(Ordering::SeqCst)
            == self.tail_word().load(Ordering::Relaxed)
            && self.closed_word().load(Ordering::SeqCst) == 0;
        if nothing_came {
            futex::wait_while_equal(self.parked_word(), 1, park_timeout_us);
        }
        self.parked_word().store(0, Ordering::SeqCst);
    }

    /// `head - tail`, checked to lie within the capacity (the peer wrote one of them).
    fn checked_used_bytes(&self, head: u64, tail: u64) -> Result<usize, FrameRingError> {
        match head.checked_sub(tail) {
            Some(used) if used <= self.capacity_bytes as u64 => Ok(used as usize),
            _ => Err(self.corrupt(format!(
                "head {head} and tail {tail} are not within {} bytes of each other",
                self.capacity_bytes
            ))),
        }
    }

    fn corrupt(&self, detail: String) -> FrameRingError {
        FrameRingError::Corrupt {
            region: self.region.clone(),
            detail,
        }
    }

    fn write_wrapped(&mut self, position: u64, bytes: &[u8]) {
        let (first, second) = self.wrapped_ranges(position, bytes.len());
        // SAFETY: both ranges lie in the data area (wrapped_ranges), which is free space
        // of the ring: the consumer reads only below `head`, which has not moved past it.
        unsafe {
            let data = self.base.as_ptr().add(RING_HEADER_BYTES);
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), data.add(first.0), first.1);
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr().add(first.1),
                data.add(second.0),
                second.1,
            );
        }
    }

    fn read_wrapped(&self, position: u64, bytes: &mut [u8]) {
        let (first, second) = self.wrapped_ranges(position, bytes.len());
        // SAFETY: both ranges lie in the data area (wrapped_ranges), published by the
        // producer (below `head`, acquired) and not reused until `tail` moves past them.
        unsafe {
            let data = self.base.as_ptr().add(RING_HEADER_BYTES);
            std::ptr::copy_nonoverlapping(data.add(first.0), bytes.as_mut_ptr(), first.1);
            std::ptr::copy_nonoverlapping(
                data.add(second.0),
                bytes.as_mut_ptr().add(first.1),
                second.1,
            );
        }
    }

    /// `(offset, length)` of the part before the end of the data area and of the part
    /// wrapped to its start.
    fn wrapped_ranges(&self, position: u64, length: usize) -> ((usize, usize), (usize, usize)) {
        assert!(length <= self.capacity_bytes, "a record fits the data area");
        let offset = (position % self.capacity_bytes as u64) as usize;
        let first_length = length.min(self.capacity_bytes - offset);
        ((offset, first_length), (0, length - first_length))
    }

    fn head_word(&self) -> &AtomicU64 {
        self.atomic_u64(HEAD_OFFSET)
    }

    fn tail_word(&self) -> &AtomicU64 {
        self.atomic_u64(TAIL_OFFSET)
    }

    fn parked_word(&self) -> &AtomicU32 {
        self.atomic_u32(CONSUMER_PARKED_OFFSET)
    }

    fn closed_word(&self) -> &AtomicU32 {
        self.atomic_u32(CLOSED_OFFSET)
    }

    fn atomic_u64(&self, offset: usize) -> &AtomicU64 {
        // SAFETY: offset is a header constant, 8-aligned inside the page-aligned header;
        // the mapping lives as long as `self`; the word is only ever accessed atomically.
        unsafe { AtomicU64::from_ptr(self.base.as_ptr().add(offset).cast()) }
    }

    fn atomic_u32(&self, offset: usize) -> &AtomicU32 {
        // SAFETY: as in atomic_u64, 4-aligned.
        unsafe { AtomicU32::from_ptr(self.base.as_ptr().add(offset).cast()) }
    }
}

fn check_capacity(capacity_bytes: usize) -> Result<(), FrameRingError> {
    if !capacity_bytes.is_power_of_two()
        || !(MIN_RING_CAPACITY_BYTES..=MAX_RING_CAPACITY_BYTES).contains(&capacity_bytes)
    {
        return Err(FrameRingError::CapacityInvalid {
            capacity_bytes,
            min_bytes: MIN_RING_CAPACITY_BYTES,
            max_bytes: MAX_RING_CAPACITY_BYTES,
        });
    }
    Ok(())
}

/// Maps a ring's descriptor received from its creator and attaches to it.
pub fn attach_received_ring(
    fd: std::os::fd::OwnedFd,
    region_size_bytes: usize,
) -> Result<FrameRing, FrameRingError> {
    let mapping = SharedMapping::map(fd, region_size_bytes, MapAccess::ReadWrite)?;
    FrameRing::attach(mapping)
}
