//! Everything the engine thread takes messages from: its command queue and its inbound
//! sources ([`crate::inbound`]), taken in rounds (each input its budget per round), and
//! the one [`Doorbell`] the thread parks on when all of them are empty.
//!
//! Every producer rings the doorbell after it puts something where the engine looks:
//! an [`crate::EngineClient`] or [`crate::CommandSender`] after a send on the queue
//! ([`Bell`]), a ring client after a push on its request ring (it maps the same doorbell
//! page, passed to it as a descriptor), a server after it closes a ring. So the engine has
//! one park for every input; the doorbell's protocol loses no wake (flashpipe-shm's
//! doorbell module). When the doorbell cannot be made (no memfd), the engine waits on its
//! queue as before and refuses sources (they are dropped on arrival).

use std::collections::VecDeque;
use std::os::fd::BorrowedFd;
use std::sync::{Arc, Mutex};

use crossbeam_channel::{Receiver, TryRecvError};
use flashpipe_base::wait::{WaitPolicy, Waited};
use flashpipe_shm::{Doorbell, DoorbellCounters};

use crate::engine::Message;
use crate::handoff::{self, Handoff, WaitCounts};
use crate::inbound::{InboundSource, Sources, QUEUE_BUDGET};

/// Name of the engine's doorbell memfd (shown in `/proc/<pid>/fd`).
pub const DOORBELL_MEMORY_NAME: &str = "flashpipe-engine-doorbell";

/// Longest park on the doorbell before the engine polls its inputs again, in
/// microseconds. Every ring client maps the doorbell page read-write, so a hostile one
/// can clear its `sleeping` word and so keep the others' rings from waking the engine:
/// this bounds what that costs (a wake that comes this late), and costs an idle engine
/// one poll of its inputs per period.
pub const DOORBELL_PARK_TIMEOUT_US: u64 = 10_000;

/// The producers' side of the engine's doorbell: rung after every send on its queue.
/// Cheap to clone; a bell without a doorbell (a stepped engine, or none could be made)
/// rings nothing.
#[derive(Clone, Default)]
pub(crate) struct Bell(Option<Arc<Mutex<Doorbell>>>);

impl Bell {
    /// Wakes the engine thread if it is parked.
    pub(crate) fn ring(&self) {
        if let Some(doorbell) = &self.0 {
            doorbell
                .lock()
                .expect("nothing panics holding the engine's doorbell")
                .ring();
        }
    }

    /// A bell of its own mapping of the same doorbell (for one client thread, so clients
    /// never contend for one handle); this one's clone when the page cannot be mapped
    /// again.
    pub(crate) fn own_handle(&self) -> Bell {
        let attached = self
            .with_fd(|fd| fd.try_clone_to_owned().ok())
            .flatten()
            .and_then(|fd| Doorbell::attach(fd).ok());
        match attached {
            Some(doorbell) => Bell(Some(Arc::new(Mutex::new(doorbell)))),
            None => self.clone(),
        }
    }

    /// True when there is a doorbell (the engine takes inbound sources).
    pub(crate) fn is_present(&self) -> bool {
        self.0.is_some()
    }

    /// Runs `with` on the doorbell's descriptor (to pass to a ring client), if any.
    pub(crate) fn with_fd<T>(&self, with: impl FnOnce(BorrowedFd<'_>) -> T) -> Option<T> {
        let doorbell = self.0.as_ref()?;
        let doorbell = doorbell
            .lock()
            .expect("nothing panics holding the engine's doorbell");
        Some(with(doorbell.as_fd()))
    }
}

/// The engine's doorbell, its consumer's handle and the producers' [`Bell`]; `None`
/// when the page cannot be made or mapped twice.
pub(crate) fn make_doorbell() -> Option<(Doorbell, Bell)> {
    let consumer = Doorbell::create(DOORBELL_MEMORY_NAME).ok()?;
    let fd = consumer.as_fd().try_clone_to_owned().ok()?;
    let producers = Doorbell::attach(fd).ok()?;
    Some((consumer, Bell(Some(Arc::new(Mutex::new(producers))))))
}

/// Rounds in a row may pass over the command queue while the sources hand over work:
/// the queue is looked at in at least one round of this many (its clients wait this many
/// rounds of the sources' turns at most), and in every round whose sources hand over
/// nothing, so the engine never parks with a message in its queue. A look at an empty
/// queue costs the engine thread about 3% of a served read; most rounds of a busy ring
/// client find the queue empty.
pub const QUEUE_LOOK_EVERY: u32 = 4;

/// The engine thread's inputs.
pub(crate) struct Inputs {
    inbox: Receiver<Message>,
    pending: VecDeque<Message>,
    sources: Sources,
    doorbell: Option<Doorbell>,
    takes_sources: bool,
    /// Rounds in a row that passed over the queue (fewer than [`QUEUE_LOOK_EVERY`]).
    queue_passed: u32,
}

impl Inputs {
    /// The inputs of a threaded engine: it takes sources only when it has a doorbell.
    pub(crate) fn threaded(inbox: Receiver<Message>, doorbell: Option<Doorbell>) -> Inputs {
        let takes_sources = doorbell.is_some();
        Inputs::new(inbox, doorbell, takes_sources)
    }

    /// The inputs of a stepped engine: it never waits, so it takes sources without one.
    pub(crate) fn stepped(inbox: Receiver<Message>) -> Inputs {
        Inputs::new(inbox, None, true)
    }

    fn new(inbox: Receiver<Message>, doorbell: Option<Doorbell>, takes_sources: bool) -> Inputs {
        Inputs {
            inbox,
            pending: VecDeque::new(),
            sources: Sources::default(),
            doorbell,
            takes_sources,
            queue_passed: 0,
        }
    }

    /// Registers a source; dropped (its owner sees it go) when this engine takes none or
    /// has as many as it may.
    pub(crate) fn add_source(&mut self, source: Box<dyn InboundSource>) {
        if self.takes_sources {
            self.sources.add(source);
        }
    }

    /// Sources registered now.
    pub(crate) fn source_count(&self) -> usize {
        self.sources.len()
    }

    /// The next message without waiting: the rest of the current round, else a new
    /// round (each source's turn, then up to [`QUEUE_BUDGET`] from the queue, which a
    /// round may pass over as [`QUEUE_LOOK_EVERY`] says).
    /// `Disconnected` only when the queue has no sender left and nothing is pending.
    pub(crate) fn try_next(&mut self) -> Result<Message, TryRecvError> {
        if let Some(message) = self.pending.pop_front() {
            return Ok(message);
        }
        let disconnected = self.fill_round();
        match self.pending.pop_front() {
            Some(message) => Ok(message),
            None if disconnected => Err(TryRecvError::Disconnected),
            None => Err(TryRecvError::Empty),
        }
    }

    /// One round into `pending`; true when the queue has no sender left.
    fn fill_round(&mut self) -> bool {
        let round = Round {
            inbox: &self.inbox,
            sources: &mut self.sources,
            queue_passed: &mut self.queue_passed,
        };
        round.fill(&mut self.pending)
    }

    /// Waits for the next message as `handoff` says (spin, then park on the doorbell, or
    /// on the queue without one); `None` when the queue has no sender left.
    pub(crate) fn wait(&mut self, handoff: Handoff, counts: &mut WaitCounts) -> Option<Message> {
        let Some(doorbell) = self.doorbell.as_mut() else {
            return handoff::receive(&self.inbox, handoff, counts).ok();
        };
        let before = doorbell.counters();
        let (inbox, pending, sources) = (&self.inbox, &mut self.pending, &mut self.sources);
        let queue_passed = &mut self.queue_passed;
        let mut poll = || {
            let round = Round {
                inbox,
                sources: &mut *sources,
                queue_passed: &mut *queue_passed,
            };
            let disconnected = round.fill(pending);
            match pending.pop_front() {
                Some(message) => Some(Some(message)),
                None if disconnected => Some(None),
                None => None,
            }
        };
        let timeout = Some(DOORBELL_PARK_TIMEOUT_US);
        // The spin window once; after a park that timed out, park again at once.
        let mut policy = handoff.policy();
        let woke = loop {
            if let Some(woke) = doorbell.wait(policy, timeout, &mut poll) {
                break woke;
            }
            policy = WaitPolicy::PARK;
        };
        counts.count(how_waited(before, doorbell.counters()));
        woke
    }
}

/// One round over the engine's inputs.
struct Round<'a> {
    inbox: &'a Receiver<Message>,
    sources: &'a mut Sources,
    queue_passed: &'a mut u32,
}

impl Round<'_> {
    /// Each source's turn, then up to [`QUEUE_BUDGET`] messages from the queue unless
    /// this round may pass over it ([`QUEUE_LOOK_EVERY`]), onto `pending`; true when the
    /// queue has no sender left.
    fn fill(self, pending: &mut VecDeque<Message>) -> bool {
        let before = pending.len();
        self.sources.poll_round(pending);
        let sources_worked = pending.len() > before;
        if sources_worked && *self.queue_passed + 1 < QUEUE_LOOK_EVERY {
            *self.queue_passed += 1;
            return false;
        }
        *self.queue_passed = 0;
        take_from_queue(self.inbox, pending)
    }
}

/// Up to [`QUEUE_BUDGET`] messages from the queue onto `pending`; true when the queue
/// has no sender left.
fn take_from_queue(inbox: &Receiver<Message>, pending: &mut VecDeque<Message>) -> bool {
    for _ in 0..QUEUE_BUDGET {
        match inbox.try_recv() {
            Ok(message) => pending.push_back(message),
            Err(TryRecvError::Empty) => return false,
            Err(TryRecvError::Disconnected) => return true,
        }
    }
    false
}

/// How one doorbell wait ended, from its counters before and after.
fn how_waited(before: DoorbellCounters, after: DoorbellCounters) -> Waited {
    if after.waits_ready > before.waits_ready {
        Waited::Ready
    } else if after.waits_spun > before.waits_spun {
        Waited::Spun
    } else {
        Waited::Parked
    }
}
