//! flashpipe-sim: the one simulated world every deterministic test and campaign runs in.
//!
//! - [`queue`]: [`EventQueue`], events ordered by (virtual time, sequence number), and
//!   [`Timeline`], a queue with the [`VirtualClock`] it moves. Every event core of the
//!   project (simulated disks, the simulated network) keeps its typed events in one; the
//!   flash array keeps its packed heap (no allocation per event) and joins the world as a
//!   component.
//! - [`world`]: [`World`], one virtual clock, per-component seeded [`SplitMix64`] streams
//!   drawn from the world seed, and the [`Component`] trait. The world runs the component
//!   with the smallest (due time, component id), one step at a time.
//! - [`link`]: [`Link`], the timing of an ordered, delayed byte pipe (each direction keeps
//!   its order, as a stream does) and [`LinkFaults`], its seeded failure chances.
//! - [`pipe`]: [`Pipe`], one direction of a link with a latency and a bandwidth
//!   (inter-controller cables, a host's PCIe link): messages hold it for their bytes in
//!   order, then arrive after the latency.
//! - [`faults`]: [`FaultPlan`], crashes, restarts, partitions, slow and failing devices
//!   drawn from a seed.
//!
//! Layer rule: this crate depends on `flashpipe-base` alone. Device, flash and network
//! crates depend on it, never the reverse. Nothing here reads the wall clock, starts a
//! thread or iterates a hash map, so a seed fixes a whole history.

pub mod faults;
pub mod link;
pub mod pipe;
pub mod queue;
pub mod world;

pub use faults::{Fault, FaultKind, FaultPlan, FaultPlanConfig};
pub use flashpipe_base::{Clock, SplitMix64, VirtualClock};
pub use link::{Link, LinkFaults, LinkFaultsError};
pub use pipe::Pipe;
pub use queue::{EventQueue, Timeline};
pub use world::{Component, ComponentId, World};
