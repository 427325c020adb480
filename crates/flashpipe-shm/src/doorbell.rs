//! [`Doorbell`]: one futex word a consumer with several input rings parks on, which
//! every producer of those rings rings after each push (an event count).
//!
//! A consumer of one ring parks on the ring's own `consumer_parked` word. A consumer of
//! several (a cluster node's router thread: one input ring per shared-memory link) cannot
//! sleep on several futex words at once, so it waits on the one doorbell instead, polling
//! all its inputs during the waiter's spin and yield phases (`flashpipe_base::wait`, the
//! same one wait strategy the rings use) and parking here only after they all came up
//! empty. Its rings' own `consumer_parked` words stay 0, so a push there makes no
//! system call; the producer then calls [`Doorbell::ring`].
//!
//! # Layout (a 4096-byte sealed memfd, all little-endian, the rest zero)
//! | offset | size | field |
//! |-------:|-----:|-------|
//! | 0      | 4    | `sequence`: bumped (wrapping) by every ring; the futex word |
//! | 4      | 4    | `sleeping`: 1 while the consumer is parked or about to park |
//!
//! # Protocol (no wake is lost)
//! Producer, after its record is published (the ring's `head` stored with release):
//! `sequence.fetch_add(1, SeqCst)`, then `sleeping.load(SeqCst)`, and `FUTEX_WAKE` only
//! when it reads 1. Consumer, to park: `s = sequence.load(SeqCst)`, `sleeping.store(1,
//! SeqCst)`, one more poll of every input, and `FUTEX_WAIT(sequence, s)` only if all are
//! empty; then `sleeping.store(0)`. Why nothing is lost: if the consumer's load of `s`
//! read the producer's bump, the bump (a release) carries the `head` store with it and
//! the last poll sees the record. Otherwise the bump comes after that load; if the
//! producer's `sleeping` load reads 0, it comes before the consumer's store of 1 in the
//! single SeqCst order, so the bump does too, and the kernel's compare in `FUTEX_WAIT`
//! (after that store) finds `sequence != s` and returns at once. In every other case
//! the producer reads 1 and wakes. `tests::model` checks this exhaustively on the
//! interleavings of one producer and one consumer.
//!
//! # What a peer can do
//! Every producer maps the page read-write, so a hostile one can write any value into
//! either word. That only costs wakes or sleeps: the consumer never trusts the words for
//! data (it always polls its rings, whose indices are checked), a forged `sleeping` of 0
//! can only delay a wake, which the consumer's park timeout (the caller's liveness
//! check) bounds, and a forged `sequence` makes a `FUTEX_WAIT` return early (a peer that
//! keeps changing it keeps the consumer polling: CPU time, not correctness).

use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};

use flashpipe_base::wait::{WaitPolicy, Waited, Waiter};

use super::error::SharedMemoryError;
use super::futex;
use super::{MapAccess, SharedMapping, SharedMemory};

/// Bytes of a doorbell region (one page).
pub const DOORBELL_BYTES: usize = 4096;

/// Default wait window of a doorbell's consumer (a cluster node's router thread), in
/// microseconds: the waiter's first [`flashpipe_base::wait::POLLS_BEFORE_YIELDING`] polls
/// spin (a few microseconds with a handful of rings to look at), the rest of the window
/// yields (`sched_yield` every [`flashpipe_base::wait::POLLS_PER_YIELD`] polls), then it
/// parks. Why these numbers, for 4 node processes and their hosts on 2 vCPUs: a pure spin
/// steals the core from the process that has the work, so the spin part stays a few
/// microseconds; a yield hands the core to whoever is runnable (most often the peer whose
/// answer is awaited) and costs about a microsecond when nobody is, so the yield part is
/// long: 100 us covers a hop's device-free round trip and stays under the ~50 us futex
/// wake twice over, so a parked consumer is the idle case, not the busy one.
pub const DEFAULT_DOORBELL_WINDOW_US: u32 = 100;

const SEQUENCE_OFFSET: usize = 0;
const SLEEPING_OFFSET: usize = 4;

/// Counters of one doorbell handle: what its waits and rings cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DoorbellCounters {
    /// Waits whose first poll had something.
    pub waits_ready: u64,
    /// Waits whose input came while spinning or yielding.
    pub waits_spun: u64,
    /// Times the consumer announced it was parking.
    pub parks: u64,
    /// Rings that found the consumer parked and made a `FUTEX_WAKE`.
    pub wakes: u64,
}

enum Region {
    Owned(SharedMemory),
    Mapped(SharedMapping),
}

/// A handle on a doorbell page: the consumer's (who creates it) or a producer's (who
/// maps the descriptor it received).
pub struct Doorbell {
    region: Region,
    counters: DoorbellCounters,
}

impl Doorbell {
    /// A new doorbell; `name` shows in `/proc/<pid>/fd`.
    pub fn create(name: &str) -> Result<Doorbell, SharedMemoryError> {
        Ok(Doorbell {
            region: Region::Owned(SharedMemory::create(name, DOORBELL_BYTES)?),
            counters: DoorbellCounters::default(),
        })
    }

    /// Maps a doorbell received as `fd`, refusing anything smaller than a doorbell or
    /// unsealed (as [`SharedMapping::map`]).
    pub fn attach(fd: OwnedFd) -> Result<Doorbell, SharedMemoryError> {
        Ok(Doorbell {
            region: Region::Mapped(SharedMapping::map(
                fd,
                DOORBELL_BYTES,
                MapAccess::ReadWrite,
            )?),
            counters: DoorbellCounters::default(),
        })
    }

    /// The region's descriptor, to pass to a producer.
    pub fn as_fd(&self) -> BorrowedFd<'_> {
        match &self.region {
            Region::Owned(memory) => memory.as_fd(),
            Region::Mapped(mapping) => mapping.as_fd(),
        }
    }

    /// What this handle's waits and rings cost so far.
    pub fn counters(&self) -> DoorbellCounters {
        self.counters
    }

    /// How many times the doorbell was rung, wrapping (through any handle): for tests
    /// and diagnostics.
    pub fn rings_so_far(&self) -> u32 {
        self.sequence_word().load(Ordering::SeqCst)
    }

    /// The producer's side: call after publishing a record (or closing a ring) this
    /// doorbell's consumer polls. Wakes the consumer if it is parked; true when that took
    /// a system call.
    pub fn ring(&mut self) -> bool {
        self.sequence_word().fetch_add(1, Ordering::SeqCst);
        if self.sleeping_word().load(Ordering::SeqCst) == 0 {
            return false;
        }
        self.counters.wakes += 1;
        futex::wake_all(self.sequence_word());
        true
    }

    /// The consumer's side: polls `poll` (which looks at every input once) as `policy`
    /// says (first poll, spin, yield), then parks on the doorbell until a producer rings
    /// or `park_timeout_us` passes (`None`: no timeout), polling again after each wake.
    /// `None` only with a timeout, when a park ended (timed out, or woken by a ring whose
    /// record an earlier poll already took) with nothing come: the caller checks its
    /// peers' liveness and waits again.
    pub fn wait<T>(
        &mut self,
        policy: WaitPolicy,
        park_timeout_us: Option<u64>,
        mut poll: impl FnMut() -> Option<T>,
    ) -> Option<T> {
        let mut state = (&mut *self, &mut poll);
        let (value, waited) = Waiter::new(policy).wait_with(
            &mut state,
            |state| (state.1)().map(Some),
            |state| state.0.park_until(park_timeout_us, &mut *state.1),
        );
        match waited {
            Waited::Ready => self.counters.waits_ready += 1,
            Waited::Spun => self.counters.waits_spun += 1,
            Waited::Parked => {}
        }
        value
    }

    fn park_until<T>(
        &mut self,
        park_timeout_us: Option<u64>,
        poll: &mut impl FnMut() -> Option<T>,
    ) -> Option<T> {
        loop {
            self.counters.parks += 1;
            let seen = self.sequence_word().load(Ordering::SeqCst);
            self.sleeping_word().store(1, Ordering::SeqCst);
            if let Some(value) = poll() {
                self.sleeping_word().store(0, Ordering::SeqCst);
                return Some(value);
            }
            futex::wait_while_equal(self.sequence_word(), seen, park_timeout_us);
            self.sleeping_word().store(0, Ordering::SeqCst);
            if let Some(value) = poll() {
                return Some(value);
            }
            if park_timeout_us.is_some() {
                return None;
            }
        }
    }

    fn base(&self) -> *mut u8 {
        match &self.region {
            Region::Owned(memory) => memory.as_mut_ptr(),
            // A doorbell is always mapped read-write (`attach`).
            Region::Mapped(mapping) => mapping.as_ptr().cast_mut(),
        }
    }

    fn sequence_word(&self) -> &AtomicU32 {
        self.atomic_u32(SEQUENCE_OFFSET)
    }

    fn sleeping_word(&self) -> &AtomicU32 {
        self.atomic_u32(SLEEPING_OFFSET)
    }

    fn atomic_u32(&self, offset: usize) -> &AtomicU32 {
        assert!(offset + 4 <= DOORBELL_BYTES && offset % 4 == 0);
        // SAFETY: offset is a layout constant, 4-aligned inside the page-aligned,
        // read-write mapping `self.region` owns for as long as `self` lives (module
        // safety argument, point 1); the words are only ever accessed atomically.
        unsafe { AtomicU32::from_ptr(self.base().add(offset).cast()) }
    }
}

impl std::fmt::Debug for Doorbell {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Doorbell")
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
#[path = "doorbell_tests.rs"]
mod tests;
