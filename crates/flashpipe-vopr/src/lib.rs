//! flashpipe-vopr: a campaign runner after TigerBeetle's VOPR (Viewstamped Operation
//! Replicator): one seed builds one simulated world and runs the storage stack in it under
//! faults; the same seed runs the same history, so a failing seed is a bug report.
//!
//! - [`campaign`]: [`Campaign::run`] builds, in one [`flashpipe_sim::World`], a
//!   simulated network of NBD disk nodes (`flashpipe_nbd::client::SimNetwork`), the NBD
//!   client over each (`SimNbdDevice`), striping over them (`flashpipe_array`), a file
//!   system, and the stepped engine (`flashpipe_engine::SteppedEngine`) with several
//!   clients, one of them served: its commands travel as encoded frames through the
//!   store server's request rules (`flashpipe_server::StoreServerCore`). A seeded [`flashpipe_sim::FaultPlan`] crashes everything, restarts nodes,
//!   partitions links, takes nodes down for a while, slows them and makes them fail
//!   requests. Every reply is checked against a model; after every crash the file system
//!   is remounted over fresh connections, must pass fsck and must hold what the last
//!   acknowledged flush held (or what a flush in progress held).
//! - [`workload`]: the commands drawn and what their replies must be.
//! - `served`: the served client (frames through a `StoreServerCore`, a perfect link).
//! - [`cluster`]: [`ClusterCampaign::run`], the minFlash cluster in one world: nodes in a
//!   line, each `flashpipe-cluster`'s router core over a flash array in virtual time,
//!   links with a hop's latency and bandwidth, hosts owning shares and issuing legal and
//!   illegal requests, under link drops, partitions, node crashes and restarts, outages,
//!   slow nodes and host restarts; every ack judged, nothing leaked at rest, every
//!   acknowledged page read back, fair shares among readers.
//! - [`planted`]: test-only fault hooks: bugs planted on purpose, which the campaign must
//!   find (a check of the checker).
//!
//! `FLASHPIPE_SEED=S` replays seed `S` (see `tests/campaign.rs`); a failure prints
//! `seed S failed; FLASHPIPE_SEED=S replays`.
//!
//! Layer rule: a check crate at the top of the stack; it depends on the simulator, the
//! devices, the NBD client, striping, the file system, the engine, the protocol, the
//! store server's core, the flash model and the cluster's core, and nothing depends on it. It reads no wall clock and starts no thread.

pub mod campaign;
pub mod cluster;
pub mod planted;
mod served;
pub mod workload;

pub use campaign::{Campaign, CampaignConfig, CampaignFailure, CampaignReport};
pub use cluster::{ClusterBug, ClusterCampaign, ClusterConfig, ClusterFailure, ClusterReport};
pub use planted::PlantedBug;
