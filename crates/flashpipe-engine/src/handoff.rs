//! How the engine thread and its clients wait for each other's messages.
//!
//! A thread that parks on an empty queue (a futex sleep) costs its peer a wake: on a
//! 2-vCPU virtual machine a sleep/wake round trip between two threads costs about 50 us,
//! where a spin round trip costs about 0.1 us, so an engine that parks on every command
//! cannot answer faster than a park. [`Handoff::SpinThenPark`] polls the queue for a
//! bounded window of wall time first and parks only when nothing came in that window; the
//! polling is the one wait strategy of [`flashpipe_base::wait`] (a `spin_loop` hint between
//! polls; after the first few microseconds a `yield_now` every few polls, so a peer sharing
//! the core can run). A client issuing commands back to back and an engine answering them
//! then never sleep while work keeps coming, and neither burns a core for longer than
//! one window once the work stops. The classic bound for spin-then-block waiting is a
//! window of one park's cost (never more than twice the cost of the better choice made
//! with hindsight); the default is longer, to cover one device read ([`DEFAULT_SPIN_US`]).
//!
//! A sender never pays a wake to a receiver that is spinning: the queue's wake-up path
//! only makes a system call for a receiver registered as parked. A burst of replies
//! to a parked client therefore costs one wake at most (the first reply unregisters it;
//! the rest are taken from the queue without waiting).
//!
//! Spin windows are wall time (`flashpipe_base::RealClock`), never a device's
//! clock: they bound how long a thread polls, they are not part of what the engine
//! measures. The deterministic [`crate::SteppedEngine`] never waits at all, so
//! nothing here runs in simulation.

use crossbeam_channel::{Receiver, RecvError};
use flashpipe_base::wait::{WaitPolicy, Waited, Waiter};

/// Spin window of [`Handoff::DEFAULT`], in microseconds: longer than one 4 KiB read of a
/// device file (50-60 us on the machine measured), so a client waiting on one read is
/// still spinning when its answer comes. With 50 us (one futex round trip, the classic
/// bound) a client at queue depth 1 parked before every answer and paid the wake: 4 KiB
/// random reads took 1.30x and 1.32x fio's mean latency in two idle runs of `bench fs`,
/// against 0.98x and 1.21x with 200 us (and 1.44x parking at once); the kernels and the
/// per-command costs measured no worse (docs/benchmarks.md, issue #13). Waiting threads yield while they spin, so a busy peer
/// on the same core still runs.
pub const DEFAULT_SPIN_US: u32 = 200;

/// Longest spin window an engine accepts, in microseconds (the one bound of every wait).
pub const MAX_SPIN_US: u32 = flashpipe_base::wait::MAX_SPIN_US;

/// How a thread waits on an empty queue (the engine's inbox, a client's replies).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handoff {
    /// Park at once (a futex sleep; the sender pays a wake): the engine's first design.
    Park,
    /// Poll the queue for up to `spin_us` microseconds of wall time, then park.
    SpinThenPark {
        /// The spin window, at most [`MAX_SPIN_US`].
        spin_us: u32,
    },
}

impl Handoff {
    /// The default: spin for [`DEFAULT_SPIN_US`], then park.
    pub const DEFAULT: Handoff = Handoff::SpinThenPark {
        spin_us: DEFAULT_SPIN_US,
    };

    /// The spin window in microseconds (0 for [`Handoff::Park`]).
    pub fn spin_us(self) -> u32 {
        match self {
            Handoff::Park => 0,
            Handoff::SpinThenPark { spin_us } => spin_us,
        }
    }

    /// The one wait strategy's policy for this hand-off (a window of 0 for
    /// [`Handoff::Park`]).
    pub fn policy(self) -> WaitPolicy {
        WaitPolicy::spin_us(self.spin_us())
    }

    /// The hand-off of a wait policy: [`Handoff::Park`] for a window of 0.
    pub fn from_policy(policy: WaitPolicy) -> Handoff {
        match policy.window_us() {
            0 => Handoff::Park,
            spin_us => Handoff::SpinThenPark { spin_us },
        }
    }
}

impl Default for Handoff {
    fn default() -> Handoff {
        Handoff::DEFAULT
    }
}

/// How the receives of one queue ended: counts for benchmarks and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WaitCounts {
    /// A message was already there.
    pub ready: u64,
    /// A message came while spinning.
    pub spun: u64,
    /// The receiver parked (and was woken, or the queue closed).
    pub parked: u64,
}

impl WaitCounts {
    /// Receives counted.
    pub fn total(&self) -> u64 {
        self.ready + self.spun + self.parked
    }

    pub(crate) fn count(&mut self, waited: Waited) {
        match waited {
            Waited::Ready => self.ready += 1,
            Waited::Spun => self.spun += 1,
            Waited::Parked => self.parked += 1,
        }
    }
}

/// Receives the next message of `queue`, waiting as `handoff` says; `Err` when the
/// queue is empty and every sender has gone.
pub(crate) fn receive<T>(
    queue: &Receiver<T>,
    handoff: Handoff,
    counts: &mut WaitCounts,
) -> Result<T, RecvError> {
    let (result, waited) = Waiter::new(handoff.policy()).receive(queue);
    counts.count(waited);
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossbeam_channel::bounded;

    #[test]
    fn a_ready_message_is_taken_without_waiting() {
        let (sender, queue) = bounded(4);
        sender.send(7u32).unwrap();
        let mut counts = WaitCounts::default();
        assert_eq!(receive(&queue, Handoff::DEFAULT, &mut counts), Ok(7));
        assert_eq!(counts.ready, 1);
    }

    #[test]
    fn an_empty_queue_spins_then_parks_until_a_message_comes() {
        let (sender, queue) = bounded(4);
        let handoff = Handoff::SpinThenPark { spin_us: 1 };
        let sending = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            sender.send(9u32).unwrap();
        });
        let mut counts = WaitCounts::default();
        assert_eq!(receive(&queue, handoff, &mut counts), Ok(9));
        sending.join().unwrap();
        assert_eq!(counts.total(), 1);
    }

    #[test]
    fn a_closed_queue_ends_every_kind_of_wait() {
        for handoff in [Handoff::Park, Handoff::SpinThenPark { spin_us: 5 }] {
            let (sender, queue) = bounded::<u32>(1);
            drop(sender);
            let mut counts = WaitCounts::default();
            assert_eq!(receive(&queue, handoff, &mut counts), Err(RecvError));
        }
    }

    #[test]
    fn the_spin_window_is_reported() {
        assert_eq!(Handoff::Park.spin_us(), 0);
        assert_eq!(Handoff::default().spin_us(), DEFAULT_SPIN_US);
    }
}
