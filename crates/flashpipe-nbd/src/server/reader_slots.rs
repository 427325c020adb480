//! Who may spin on a socket: the reader window's slots, counted in this process and on
//! this machine.
//!
//! A reader spinning through its window ([`super::spin_read`]) pays only where a core
//! would otherwise be idle, so spinning is bounded twice:
//!
//! 1. **In this process** ([`SpinSlots::for_this_process`], one count shared by every
//!    [`NbdServer`](super::NbdServer) of the process, so several disk nodes in one process
//!    share it): at most `limit` readers (half the cores, at least one) hold a slot, and
//!    none spins while more connections are in transmission than there are slots: the
//!    cores then have work and a spinner only takes it away.
//! 2. **On this machine**: a slot also holds one of `limit` machine-wide names, an
//!    abstract Unix socket bound to `flashpipe-nbd-reader-slot-N` (Linux's abstract
//!    namespace: no file, released by the kernel when the process ends, however it ends).
//!    Several server processes on one machine (disk nodes started one by one, `flashpipe
//!    nbd serve` twice) so spin on at most `limit` cores together. The names are per
//!    network namespace: containers with a network of their own count apart.
//!
//! A reader keeps its slot while its windows catch requests (a queue-depth-1 client keeps
//! it for its whole run, with no system call per request) and gives it back when a window
//! passes with nothing, before it blocks. A reader refused a machine-wide name does not ask
//! again for [`MACHINE_SLOT_RETRY`], so a busy machine costs no system calls per request.
//! Any local user can bind the names first; a reader then blocks as with no window (slower,
//! never wrong: docs/security.md).

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr as UnixAddress, UnixDatagram};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// The machine-wide names' prefix; slot N is this followed by N.
pub const MACHINE_SLOT_PREFIX: &str = "flashpipe-nbd-reader-slot-";

/// How long a reader refused a machine-wide slot waits before it asks again.
pub const MACHINE_SLOT_RETRY: Duration = Duration::from_millis(50);

/// How many readers may spin at once.
#[derive(Debug)]
pub struct SpinSlots {
    taken: AtomicUsize,
    /// Connections in transmission (each holds a `SpinningReader`).
    connections: AtomicUsize,
    limit: usize,
    /// The machine-wide names' prefix.
    machine_prefix: String,
}

impl SpinSlots {
    /// `limit` slots (at least one) whose machine-wide names are this instance's own, so
    /// that it counts apart from every other (tests).
    pub fn new(limit: usize) -> SpinSlots {
        static INSTANCES: AtomicUsize = AtomicUsize::new(0);
        let instance = INSTANCES.fetch_add(1, Ordering::Relaxed);
        let prefix = format!("{MACHINE_SLOT_PREFIX}{}-{instance}-", std::process::id());
        SpinSlots::with_machine_prefix(limit, prefix)
    }

    fn with_machine_prefix(limit: usize, machine_prefix: String) -> SpinSlots {
        SpinSlots {
            taken: AtomicUsize::new(0),
            connections: AtomicUsize::new(0),
            limit: limit.max(1),
            machine_prefix,
        }
    }

    /// The slots every server of this process shares: half the machine's cores, at least
    /// one, under the machine-wide names.
    pub fn for_this_process() -> Arc<SpinSlots> {
        static SLOTS: OnceLock<Arc<SpinSlots>> = OnceLock::new();
        Arc::clone(SLOTS.get_or_init(|| {
            Arc::new(SpinSlots::with_machine_prefix(
                half_the_cores(),
                MACHINE_SLOT_PREFIX.to_string(),
            ))
        }))
    }

    /// Slots in all.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Counts one more connection in transmission until the guard drops.
    pub fn connection(self: &Arc<Self>) -> ConnectionCount {
        self.connections.fetch_add(1, Ordering::AcqRel);
        ConnectionCount {
            slots: Arc::clone(self),
        }
    }

    /// Whether readers may spin: no more connections in transmission than slots.
    pub fn spinning_allowed(&self) -> bool {
        self.connections.load(Ordering::Acquire) <= self.limit
    }

    /// A slot, held until the guard drops; `None` when spinning is not allowed, every slot
    /// of the process is taken, or every machine-wide name is bound.
    pub fn try_take(self: &Arc<Self>) -> Option<SpinSlot> {
        if !self.spinning_allowed() {
            return None;
        }
        self.taken
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |taken| {
                (taken < self.limit).then_some(taken + 1)
            })
            .ok()?;
        match (0..self.limit).find_map(|index| self.bind_name(index)) {
            Some(name) => Some(SpinSlot {
                slots: Arc::clone(self),
                _name: name,
            }),
            None => {
                self.taken.fetch_sub(1, Ordering::AcqRel);
                None
            }
        }
    }

    /// The machine-wide name `index`, when no other holder has it bound.
    fn bind_name(&self, index: usize) -> Option<UnixDatagram> {
        let name = format!("{}{index}", self.machine_prefix);
        let address = UnixAddress::from_abstract_name(name.as_bytes()).ok()?;
        UnixDatagram::bind_addr(&address).ok()
    }
}

/// Half this machine's cores, at least one.
pub fn half_the_cores() -> usize {
    (cores() / 2).max(1)
}

/// This machine's cores (as the scheduler lets this process use them), at least one.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// A reader's permission to spin: a slot of the process and a machine-wide name, given
/// back on drop.
#[derive(Debug)]
pub struct SpinSlot {
    slots: Arc<SpinSlots>,
    /// The bound machine-wide name, held only to be closed (which frees the name).
    _name: UnixDatagram,
}

impl Drop for SpinSlot {
    fn drop(&mut self) {
        self.slots.taken.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One connection in transmission, counted until dropped.
#[derive(Debug)]
pub struct ConnectionCount {
    slots: Arc<SpinSlots>,
}

impl ConnectionCount {
    /// The slots this connection is counted in.
    pub fn slots(&self) -> &Arc<SpinSlots> {
        &self.slots
    }
}

impl Drop for ConnectionCount {
    fn drop(&mut self) {
        self.slots.connections.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A reader's hold on a slot across reads, and when it may ask again after a refusal.
#[derive(Debug)]
pub struct SlotHolder {
    count: ConnectionCount,
    held: Option<SpinSlot>,
    refused_at: Option<Instant>,
}

impl SlotHolder {
    /// A connection counted in `slots`, holding no slot yet.
    pub fn new(slots: &Arc<SpinSlots>) -> SlotHolder {
        SlotHolder {
            count: slots.connection(),
            held: None,
            refused_at: None,
        }
    }

    /// Whether this reader may spin now: it keeps the slot it holds while spinning is
    /// allowed, else takes one, unless it was refused within [`MACHINE_SLOT_RETRY`].
    pub fn may_spin(&mut self) -> bool {
        let slots = self.count.slots();
        if !slots.spinning_allowed() {
            self.held = None;
            return false;
        }
        if self.held.is_some() {
            return true;
        }
        if self
            .refused_at
            .is_some_and(|refused| refused.elapsed() < MACHINE_SLOT_RETRY)
        {
            return false;
        }
        self.held = slots.try_take();
        self.refused_at = self.held.is_none().then(Instant::now);
        self.held.is_some()
    }

    /// Gives the slot back (a window passed with nothing; the reader blocks next).
    pub fn release(&mut self) {
        self.held = None;
    }

    /// Whether a slot is held.
    pub fn holds(&self) -> bool {
        self.held.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_bound_the_spinners_and_come_back_when_dropped() {
        let slots = Arc::new(SpinSlots::new(2));
        let first = slots.try_take().expect("a first slot");
        let second = slots.try_take().expect("a second slot");
        assert!(slots.try_take().is_none(), "a third spinner is refused");
        drop(first);
        assert!(
            slots.try_take().is_some(),
            "a slot given back is taken again"
        );
        drop(second);
        assert_eq!(SpinSlots::new(0).limit(), 1, "at least one slot");
        assert_eq!(SpinSlots::for_this_process().limit(), half_the_cores());
        assert!(Arc::ptr_eq(
            &SpinSlots::for_this_process(),
            &SpinSlots::for_this_process()
        ));
    }

    #[test]
    fn more_connections_than_slots_spin_none() {
        let slots = Arc::new(SpinSlots::new(1));
        let one = slots.connection();
        assert!(
            slots.try_take().is_some(),
            "one connection, one slot: it spins"
        );
        let two = slots.connection();
        assert!(
            slots.try_take().is_none(),
            "two connections, one slot: none spins"
        );
        drop(two);
        assert!(slots.try_take().is_some(), "back to one connection");
        drop(one);
    }

    #[test]
    fn a_machine_wide_name_bound_elsewhere_refuses_the_slot_and_frees_the_process_slot() {
        let slots = Arc::new(SpinSlots::new(1));
        let squatter = slots.bind_name(0).expect("the name is free");
        assert!(slots.try_take().is_none(), "the only name is bound");
        assert_eq!(
            slots.taken.load(Ordering::Acquire),
            0,
            "the process slot is back"
        );
        drop(squatter);
        let slot = slots.try_take().expect("the name is free again");
        assert!(slots.bind_name(0).is_none(), "the slot holds the name");
        drop(slot);
        assert!(
            slots.bind_name(0).is_some(),
            "dropping the slot frees the name"
        );
    }

    #[test]
    fn a_holder_keeps_its_slot_until_released_or_outnumbered() {
        let slots = Arc::new(SpinSlots::new(1));
        let mut holder = SlotHolder::new(&slots);
        assert!(holder.may_spin() && holder.holds());
        assert!(slots.try_take().is_none(), "held across reads");
        holder.release();
        assert!(!holder.holds());
        assert!(holder.may_spin(), "taken again after a release");
        let second = slots.connection();
        assert!(
            !holder.may_spin() && !holder.holds(),
            "outnumbered: given back"
        );
        drop(second);
        assert!(holder.may_spin());
    }

    #[test]
    fn a_refused_holder_waits_before_asking_again() {
        let slots = Arc::new(SpinSlots::new(1));
        let squatter = slots.bind_name(0).expect("the name is free");
        let mut holder = SlotHolder::new(&slots);
        assert!(!holder.may_spin(), "the name is bound elsewhere");
        drop(squatter);
        assert!(!holder.may_spin(), "no new try within the retry time");
        std::thread::sleep(MACHINE_SLOT_RETRY + Duration::from_millis(5));
        assert!(holder.may_spin(), "asks again after it");
    }
}
