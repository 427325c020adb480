//! The filesystem core of flashpipe (HWFS ch. 1, 3.3.1).
//!
//! The [`Engine`] is a dedicated thread that owns a mounted file system and its device;
//! clients ([`EngineClient`]) submit [`Command`]s through bounded queues and receive
//! completions, read data arriving in engine-owned aligned buffers without a copy and
//! whole blocks of a write leaving from the client's own buffer without one. The
//! engine knows nothing of store files, locks or device kinds: `flashpipe-store` opens a
//! store's devices, mounts them and starts an engine on the file system. Rule: this crate
//! depends only on the command set (`flashpipe-api`), the file system and the device layer.
//!
//! No sleep and wake per command ([`handoff`]): the engine thread and its clients wait on
//! their queues by spinning for a bounded window of wall time, then parking
//! ([`Handoff::SpinThenPark`], the default; [`Handoff::Park`] parks at once), so commands
//! issued back to back and their answers pass without a futex wake, and a burst of replies
//! wakes a parked client once. Group commit ([`group_commit`]): flushes queued together,
//! from one client or many, are answered after one file-system commit
//! ([`FlushGrouping`]). Both are chosen in [`EngineConfig`] so they can be run side by
//! side (`flashpipe bench engine`). Alternatives considered, and why not (yet): reads on
//! the caller's thread from a shared snapshot of the block map (no hand-off for reads, but
//! a second owner of file-system state); rings of our own instead of crossbeam's channels
//! (their non-blocking operations are already a few atomics, the wake was the cost); a
//! pure busy-polling engine (a core burned while idle); completion rings with eventfd
//! wake-ups (still one wake per idle-to-busy transition).

pub mod client;
pub mod command;
pub mod engine;
pub mod group_commit;
pub mod handoff;
pub mod inbound;
mod inputs;
mod reads;
pub mod stepped;
pub mod submitter;
mod writes;

pub use client::{Completion, EngineClient, StreamError, Ticket};
pub use command::{Command, EngineError, Local, ReadData, Reply};
pub use engine::{
    Engine, EngineConfig, EngineCounters, PoolMemory, WritePath, READ_POOL_MEMORY_NAME,
};
pub use group_commit::FlushGrouping;
pub use handoff::{Handoff, WaitCounts};
pub use inbound::{
    CompletionSink, InboundSource, ReplyTo, SourceState, Submission, MAX_INBOUND_SOURCES,
    QUEUE_BUDGET, SOURCE_BUDGET,
};
pub use inputs::{DOORBELL_MEMORY_NAME, DOORBELL_PARK_TIMEOUT_US, QUEUE_LOOK_EVERY};
pub use stepped::{StepOutcome, SteppedEngine};
pub use submitter::{CommandSender, ReadInto};
