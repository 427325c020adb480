//! The io_uring engine: one ring per device, the file registered as fixed file 0, and
//! buffer pools optionally registered as fixed buffers.
//!
//! `submit` only writes a submission entry; the next poll or wait pushes every queued
//! entry to the kernel in one `io_uring_enter`. Each accepted job waits in a slot of the
//! in-flight table whose index is the entry's `user_data`, so its buffer stays owned
//! (and alive) until the kernel is done with it.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::Arc;

use io_uring::{opcode, squeue, types, IoUring};

use super::job::{Action, Job};
use super::open;
use crate::buffer::BufferPool;
use crate::request::Completion;

/// The most fixed buffers a ring holds (the kernel's `IORING_MAX_REG_BUFFERS`).
pub const MOST_REGISTERED_BUFFERS: usize = 1 << 14;

/// Counters for profiling: how the engine talked to the kernel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UringCounters {
    /// `io_uring_enter` calls.
    pub enter_calls: u64,
    /// Reads and writes issued on registered (fixed) buffers.
    pub fixed_buffer_requests: u64,
    /// Reads and writes issued on plain buffers.
    pub plain_buffer_requests: u64,
}

/// Sets up a ring of at least `entries` submission entries, cooperative task running
/// where the kernel has it (fewer interrupts), plain otherwise.
pub fn setup_ring(entries: u32) -> io::Result<IoUring> {
    let entries = entries.next_power_of_two();
    match IoUring::builder()
        .setup_coop_taskrun()
        .setup_taskrun_flag()
        .build(entries)
    {
        Ok(ring) => Ok(ring),
        Err(error) if error.raw_os_error() == Some(libc::EINVAL) => IoUring::new(entries),
        Err(error) => Err(error),
    }
}

struct RegisteredPool {
    pool: BufferPool,
    first_index: u16,
}

/// In-flight jobs by slot; the slot index is the submission's `user_data`.
///
/// Hand-written: a vector with a free list is all it takes, and the file backend may
/// not pull in a slab crate for ten lines.
struct InFlightTable {
    slots: Vec<Option<Job>>,
    free_slots: Vec<u32>,
}

impl InFlightTable {
    fn with_capacity(capacity: u32) -> InFlightTable {
        InFlightTable {
            slots: (0..capacity).map(|_| None).collect(),
            free_slots: (0..capacity).rev().collect(),
        }
    }

    fn insert(&mut self, job: Job) -> u32 {
        let slot = self
            .free_slots
            .pop()
            .expect("the device checks the queue depth before the table fills");
        assert!(self.slots[slot as usize].is_none(), "slot {slot} is taken");
        self.slots[slot as usize] = Some(job);
        slot
    }

    fn get_mut(&mut self, slot: u32) -> &mut Job {
        self.slots[slot as usize]
            .as_mut()
            .expect("a slot just filled holds its job")
    }

    fn remove(&mut self, slot: u64) -> Job {
        let job = self
            .slots
            .get_mut(slot as usize)
            .and_then(Option::take)
            .unwrap_or_else(|| panic!("completion for empty slot {slot}"));
        self.free_slots.push(slot as u32);
        job
    }

    fn len(&self) -> usize {
        self.slots.len() - self.free_slots.len()
    }
}

/// One ring driving one file.
pub struct UringEngine {
    ring: IoUring,
    file: Arc<File>,
    name: Arc<str>,
    table: InFlightTable,
    ready: Vec<Completion>,
    registered_pools: Vec<RegisteredPool>,
    counters: UringCounters,
}

const FIXED_FILE: types::Fixed = types::Fixed(0);

impl UringEngine {
    /// An engine on `ring` driving `file`, with room for `queue_depth` jobs.
    pub fn new(
        ring: IoUring,
        file: Arc<File>,
        name: Arc<str>,
        queue_depth: u32,
    ) -> io::Result<UringEngine> {
        assert!(ring.params().sq_entries() >= queue_depth);
        ring.submitter().register_files(&[file.as_raw_fd()])?;
        Ok(UringEngine {
            ring,
            file,
            name,
            table: InFlightTable::with_capacity(queue_depth),
            ready: Vec::new(),
            registered_pools: Vec::new(),
            counters: UringCounters::default(),
        })
    }

    /// Queues a job's submission entry (block-device discards run right away).
    pub fn submit(&mut self, job: Job) {
        if let Action::Discard {
            offset_bytes,
            length_bytes,
        } = job.action
        {
            let result = open::discard(self.file.as_raw_fd(), offset_bytes, length_bytes);
            self.ready
                .push(job.complete(&self.name, result.map(|()| 0)));
            return;
        }
        let slot = self.table.insert(job);
        let entry = self.entry_for(slot).user_data(u64::from(slot));
        if self.ring.submission().is_full() {
            self.enter(0)
                .expect("io_uring_enter to make room in the ring");
        }
        // SAFETY: the entry's buffer belongs to the job in the in-flight table, which
        // keeps it alive and untouched until its completion is reaped.
        unsafe {
            self.ring
                .submission()
                .push(&entry)
                .expect("the ring has room for the queue depth");
        }
    }

    fn entry_for(&mut self, slot: u32) -> squeue::Entry {
        let action = self.table.get_mut(slot).action;
        match action {
            Action::Read { offset_bytes } => self.transfer_entry(slot, offset_bytes, true),
            Action::Write { offset_bytes } => self.transfer_entry(slot, offset_bytes, false),
            Action::Flush => opcode::Fsync::new(FIXED_FILE).build(),
            Action::PunchHole {
                offset_bytes,
                length_bytes,
            } => opcode::Fallocate::new(FIXED_FILE, length_bytes)
                .offset(offset_bytes)
                .mode(libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE)
                .build(),
            Action::Discard { .. } => unreachable!("discards run synchronously"),
        }
    }

    fn transfer_entry(&mut self, slot: u32, offset_bytes: u64, is_read: bool) -> squeue::Entry {
        let fixed_index = self.fixed_buffer_index(slot);
        let buffer = self
            .table
            .get_mut(slot)
            .buffer
            .as_mut()
            .expect("transfers carry a buffer");
        let length_bytes =
            u32::try_from(buffer.len()).expect("the device refuses buffers of 4 GiB or more");
        let pointer = buffer.as_mut_ptr();
        match (fixed_index, is_read) {
            (Some(index), true) => {
                self.counters.fixed_buffer_requests += 1;
                opcode::ReadFixed::new(FIXED_FILE, pointer, length_bytes, index)
                    .offset(offset_bytes)
                    .build()
            }
            (Some(index), false) => {
                self.counters.fixed_buffer_requests += 1;
                opcode::WriteFixed::new(FIXED_FILE, pointer, length_bytes, index)
                    .offset(offset_bytes)
                    .build()
            }
            (None, true) => {
                self.counters.plain_buffer_requests += 1;
                opcode::Read::new(FIXED_FILE, pointer, length_bytes)
                    .offset(offset_bytes)
                    .build()
            }
            (None, false) => {
                self.counters.plain_buffer_requests += 1;
                opcode::Write::new(FIXED_FILE, pointer, length_bytes)
                    .offset(offset_bytes)
                    .build()
            }
        }
    }

    /// The registered-buffer index of the job's buffer, when it lies in a slot of a
    /// registered pool (a pool buffer, or a view of one handed out by a split).
    fn fixed_buffer_index(&mut self, slot: u32) -> Option<u16> {
        let buffer = self.table.get_mut(slot).buffer.as_ref()?;
        let (pool_id, pool_slot) = buffer.pool_region()?;
        let registered = self
            .registered_pools
            .iter()
            .find(|registered| registered.pool.pool_id() == pool_id)?;
        let (slot_start, slot_length_bytes) = registered.pool.slot_region(pool_slot);
        let start = buffer.as_ptr() as usize;
        let slot_first = slot_start as usize;
        assert!(
            start >= slot_first && start + buffer.len() <= slot_first + slot_length_bytes,
            "a pool buffer or a view of one lies inside its registered slot"
        );
        Some(registered.first_index + pool_slot as u16)
    }

    /// Registers `pool`'s buffers as fixed buffers (with every pool registered before).
    /// Needs an idle engine: the kernel swaps the whole table.
    pub fn register_buffer_pool(&mut self, pool: &BufferPool) -> io::Result<()> {
        assert_eq!(self.in_flight(), 0, "register pools on an idle device");
        if self
            .registered_pools
            .iter()
            .any(|registered| registered.pool.pool_id() == pool.pool_id())
        {
            return Ok(());
        }
        let registered_count: usize = self
            .registered_pools
            .iter()
            .map(|registered| registered.pool.buffer_count() as usize)
            .sum();
        let total = registered_count + pool.buffer_count() as usize;
        if total > MOST_REGISTERED_BUFFERS {
            return Err(io::Error::other(format!(
                "{total} registered buffers exceed the kernel's limit of {MOST_REGISTERED_BUFFERS}"
            )));
        }
        let mut candidates: Vec<BufferPool> = self
            .registered_pools
            .iter()
            .map(|registered| registered.pool.clone())
            .collect();
        candidates.push(pool.clone());
        let iovecs: Vec<libc::iovec> = candidates
            .iter()
            .flat_map(|pool| (0..pool.buffer_count()).map(|slot| pool.slot_region(slot)))
            .map(|(start, length)| libc::iovec {
                iov_base: start.cast(),
                iov_len: length,
            })
            .collect();
        if !self.registered_pools.is_empty() {
            self.ring.submitter().unregister_buffers()?;
            self.registered_pools.clear();
        }
        // SAFETY: every iovec covers a pool slot; we keep a clone of each pool, so the
        // memory outlives the registration (dropped with the ring, after it).
        unsafe { self.ring.submitter().register_buffers(&iovecs)? };
        let mut first_index = 0u16;
        for pool in candidates {
            let count = pool.buffer_count() as u16;
            self.registered_pools
                .push(RegisteredPool { pool, first_index });
            first_index += count;
        }
        Ok(())
    }

    fn enter(&mut self, wait_for: usize) -> io::Result<()> {
        loop {
            self.counters.enter_calls += 1;
            match self.ring.submitter().submit_and_wait(wait_for) {
                Ok(_) => return Ok(()),
                Err(error) if error.raw_os_error() == Some(libc::EINTR) => continue,
                Err(error) => return Err(error),
            }
        }
    }

    fn needs_enter(&mut self) -> bool {
        let submission = self.ring.submission();
        !submission.is_empty() || submission.taskrun()
    }

    fn drain(&mut self, completions: &mut Vec<Completion>) -> usize {
        let mut moved = self.ready.len();
        completions.append(&mut self.ready);
        for entry in self.ring.completion() {
            let job = self.table.remove(entry.user_data());
            let result = match entry.result() {
                negative if negative < 0 => Err(io::Error::from_raw_os_error(-negative)),
                moved_bytes => Ok(moved_bytes as usize),
            };
            completions.push(job.complete(&self.name, result));
            moved += 1;
        }
        moved
    }

    /// Pushes queued entries to the kernel and moves every ready completion.
    pub fn poll(&mut self, completions: &mut Vec<Completion>) -> usize {
        if self.needs_enter() {
            // An error here leaves the entries queued; the next wait reports it.
            let _ = self.enter(0);
        }
        self.drain(completions)
    }

    /// Pushes queued entries and blocks until at least one completion is ready.
    pub fn wait(&mut self, completions: &mut Vec<Completion>) -> io::Result<usize> {
        assert!(self.in_flight() > 0, "wait needs a job in flight");
        loop {
            let nothing_ready = self.ready.is_empty() && self.ring.completion().is_empty();
            if nothing_ready {
                self.enter(1)?;
            } else if self.needs_enter() {
                self.enter(0)?;
            }
            let moved = self.drain(completions);
            if moved > 0 {
                return Ok(moved);
            }
        }
    }

    /// Jobs accepted and not yet reaped.
    pub fn in_flight(&self) -> usize {
        self.table.len() + self.ready.len()
    }

    /// How the engine talked to the kernel so far.
    pub fn counters(&self) -> UringCounters {
        self.counters
    }
}

impl Drop for UringEngine {
    fn drop(&mut self) {
        let mut discarded: Vec<Completion> = Vec::new();
        while self.table.len() > 0 {
            if self.enter(1).is_err() {
                // The kernel may still write into these buffers: leak them rather than
                // free memory under a running transfer.
                for job in self.table.slots.iter_mut().filter_map(Option::take) {
                    std::mem::forget(job);
                }
                return;
            }
            self.drain(&mut discarded);
            discarded.clear();
        }
    }
}
