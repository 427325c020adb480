//! The simulated disk in virtual time, with seeded faults and crashes.
//!
//! A [`SimWorld`] is one discrete-event simulation: a [`VirtualClock`], one event queue
//! ordered by (virtual time, sequence number), and any number of disks. Each disk is a
//! [`SimDisk`] handle implementing [`BlockDevice`]; `wait_completions` on any handle runs
//! the world's events in time order (delivering completions to whichever disk they belong
//! to) until that handle has one. Nothing reads the wall clock, starts a thread or
//! iterates a hash map, so a seed fixes the whole history: the same seed and the same
//! calls give the same completions at the same virtual times.
//!
//! Timing follows [`SimDiskConfig`]: a latency per request (with seeded jitter) spent in
//! one of `parallelism` service slots, then a transfer over the disk's channel at its
//! bandwidth.
//!
//! Durability: a completed write is visible to later reads at once but stays volatile
//! until a flush submitted after it completes. A crash ([`SimWorld::crash_now`] or
//! [`SimWorld::crash_after_requests`]) is instantaneous:
//! - every request in flight on every disk completes with [`DeviceErrorKind::Crashed`]
//!   (its buffer handed back, unchanged for reads); completions already ready stay as
//!   they were;
//! - every block written or trimmed since its last flush, and every block of a write or
//!   trim still in flight (which may have been partly applied), independently keeps its
//!   newest contents or reverts to its durable contents, by a seeded coin (probability
//!   [`SimWorld::set_crash_survival_probability`], 0.5 by default): that is how
//!   multi-block writes tear. Survivors become durable; no other block changes;
//! - until [`SimWorld::restart`], and forever on handles opened before the crash, every
//!   accepted request completes at once with `Crashed`.
//!
//! After `restart`, [`SimWorld::open_disk`] gives a fresh handle over the durable image.
//!
//! The event queue is `flashpipe_sim`'s [`Timeline`](flashpipe_sim::Timeline). A
//! `SimWorld` stands alone (its own clock) or joins a [`flashpipe_sim::World`]
//! ([`SimWorld::join`]): it then shares the world's clock, draws its seed from the world
//! and runs as one of its components, beside flash arrays and networks.
//!
//! Written by hand because no crate offers a deterministic simulated block device with
//! this crash model; it is the ground the file system's crash tests stand on.

mod config;
mod storage;
mod world;

#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

pub use config::{FaultConfig, SimDiskConfig};

use crate::clock::{Clock, VirtualClock};
use crate::error::{DeviceError, DeviceErrorKind, Rejected};
use crate::request::{BlockDevice, Completion, DeviceInfo, Request};
use world::WorldState;

/// One simulated world: a virtual clock, an event queue and its disks. Clones share it.
#[derive(Clone)]
pub struct SimWorld {
    state: Arc<Mutex<WorldState>>,
}

impl fmt::Debug for SimWorld {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.lock();
        formatter
            .debug_struct("SimWorld")
            .field("now_ns", &state.clock().now_ns())
            .field("disk_count", &state.disk_count())
            .field("crashed", &state.is_crashed())
            .finish()
    }
}

impl SimWorld {
    /// An empty world at virtual time zero whose every random choice derives from `seed`.
    pub fn new(seed: u64) -> SimWorld {
        SimWorld::with_clock(seed, VirtualClock::new())
    }

    /// An empty world of disks on a shared clock (which it only moves forward).
    pub fn with_clock(seed: u64, clock: VirtualClock) -> SimWorld {
        SimWorld {
            state: Arc::new(Mutex::new(WorldState::new(seed, clock))),
        }
    }

    /// A world of disks that lives in `world`: on its clock, seeded from its seed, and
    /// registered as one of its components (so [`flashpipe_sim::World::step`] runs its
    /// events in time order with every other component's).
    pub fn join(world: &mut flashpipe_sim::World) -> SimWorld {
        let disks = SimWorld::with_clock(world.draw_seed(), world.clock().clone());
        world.register(Box::new(disks.clone()));
        disks
    }

    /// The time of the earliest pending event, if any.
    pub fn next_event_ns(&self) -> Option<u64> {
        self.lock().next_due_ns()
    }

    fn lock(&self) -> MutexGuard<'_, WorldState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The world's virtual clock, shared by all its disks.
    pub fn clock(&self) -> VirtualClock {
        self.lock().clock().clone()
    }

    /// The current virtual time.
    pub fn now_ns(&self) -> u64 {
        self.lock().clock().now_ns()
    }

    /// Adds a disk (all zeros) and returns a handle to it; its index is
    /// `disk_count() - 1` afterwards. Refuses bad settings with an `Open` error.
    pub fn add_disk(&self, config: SimDiskConfig) -> Result<SimDisk, DeviceError> {
        let disk_index = self.lock().add_disk(config)?;
        self.open_disk(disk_index)
    }

    /// A new handle on disk `disk_index` (for remounting after [`SimWorld::restart`]).
    pub fn open_disk(&self, disk_index: usize) -> Result<SimDisk, DeviceError> {
        let opened = self.lock().open_handle(disk_index)?;
        Ok(SimDisk {
            world: self.clone(),
            disk_index,
            handle_id: opened.handle_id,
            info: opened.info,
            clock: self.clock().as_clock(),
        })
    }

    /// Runs the world's earliest pending event, advancing virtual time to it, and
    /// returns false when nothing is pending. For layers over several disks (striping)
    /// that must see completions exactly in virtual-time order: step, then poll the
    /// disks.
    pub fn run_next_event(&self) -> bool {
        self.lock().run_next_event()
    }

    /// Number of disks in the world.
    pub fn disk_count(&self) -> usize {
        self.lock().disk_count()
    }

    /// Crashes the world right after `request_count` more requests are accepted (counted
    /// over all disks; 0 crashes now). The last of them is in flight at the crash.
    pub fn crash_after_requests(&self, request_count: u64) {
        self.lock().crash_after_requests(request_count);
    }

    /// Crashes the world now (see the module doc for what survives).
    pub fn crash_now(&self) {
        self.lock().crash_now();
    }

    /// True between a crash and [`SimWorld::restart`].
    pub fn is_crashed(&self) -> bool {
        self.lock().is_crashed()
    }

    /// Leaves the crashed state. Disks keep their durable images; handles opened before
    /// the crash stay dead (their requests complete with `Crashed`); open new ones.
    pub fn restart(&self) {
        self.lock().restart();
    }

    /// Sets the chance (0.0..=1.0) that an unflushed block keeps its newest contents at a
    /// crash (default 0.5).
    ///
    /// # Panics
    /// When `probability` lies outside 0.0..=1.0.
    pub fn set_crash_survival_probability(&self, probability: f64) {
        self.lock().set_crash_survival_probability(probability);
    }

    /// What the last crash decided, per disk: each block it considered, in block order,
    /// with whether it kept its newest contents. Empty before any crash.
    pub fn last_crash_decisions(&self) -> Vec<Vec<(u64, bool)>> {
        self.lock().crash_decisions().to_vec()
    }

    /// The durable contents of one block (what a crash now could not take away).
    ///
    /// # Panics
    /// When `disk_index` is not a disk of this world.
    pub fn durable_block(&self, disk_index: usize, block: u64) -> Vec<u8> {
        self.lock().durable_contents(disk_index, block)
    }
}

impl flashpipe_sim::Component for SimWorld {
    fn name(&self) -> &'static str {
        "simulated disks"
    }

    fn next_due_ns(&self) -> Option<u64> {
        self.next_event_ns()
    }

    fn run_due(&mut self, _now_ns: u64) {
        self.lock().run_due_events();
    }
}

/// A handle on one disk of a [`SimWorld`]; a [`BlockDevice`] in virtual time.
pub struct SimDisk {
    world: SimWorld,
    disk_index: usize,
    handle_id: u64,
    info: DeviceInfo,
    clock: Arc<dyn Clock>,
}

impl fmt::Debug for SimDisk {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("SimDisk")
            .field("name", &self.info.name)
            .field("disk_index", &self.disk_index)
            .field("handle_id", &self.handle_id)
            .finish()
    }
}

impl SimDisk {
    /// The disk's index in its world (for [`SimWorld::open_disk`]).
    pub fn disk_index(&self) -> usize {
        self.disk_index
    }

    /// The world this disk belongs to.
    pub fn world(&self) -> &SimWorld {
        &self.world
    }
}

impl BlockDevice for SimDisk {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.clock)
    }

    fn submit(&mut self, request: Request) -> Result<(), Rejected> {
        self.world
            .lock()
            .submit(self.disk_index, self.handle_id, request)
    }

    fn poll_completions(&mut self, completions: &mut Vec<Completion>) -> usize {
        let mut state = self.world.lock();
        state.run_due_events();
        state.drain_ready(self.disk_index, self.handle_id, completions)
    }

    fn wait_completions(
        &mut self,
        completions: &mut Vec<Completion>,
    ) -> Result<usize, DeviceError> {
        let mut state = self.world.lock();
        state.run_due_events();
        state.wait_for_completion(self.disk_index, self.handle_id)?;
        let count = state.drain_ready(self.disk_index, self.handle_id, completions);
        assert!(count > 0, "a wait returns at least one completion");
        Ok(count)
    }

    fn in_flight(&self) -> usize {
        self.world.lock().in_flight(self.disk_index, self.handle_id)
    }
}

impl Drop for SimDisk {
    /// Forgets the handle; its requests still in flight run on and their completions
    /// (with their buffers) are dropped when they come.
    fn drop(&mut self) {
        self.world
            .lock()
            .close_handle(self.disk_index, self.handle_id);
    }
}

/// True when `error` says a simulated device crashed.
pub fn is_crash(error: &DeviceError) -> bool {
    error.kind == DeviceErrorKind::Crashed
}
