//! The filesystem core of flashpipe (HWFS ch. 1, 3.3.1) and the store it runs.
//!
//! A *store* is a file system over one or more devices striped together, described by a
//! small TOML file ([`store_config`], opened by [`store`]). The [`Engine`] is a dedicated
//! thread that owns the store's file system; clients ([`EngineClient`]) submit
//! [`Command`]s through bounded queues and receive completions, read data arriving in
//! engine-owned aligned buffers without a copy.

pub mod client;
pub mod command;
pub mod engine;
pub mod flash_store;
mod reads;
pub mod stepped;
pub mod store;
pub mod store_config;
pub mod store_lock;
pub mod units;

pub use client::{EngineClient, StreamError, Ticket};
pub use command::{Command, EngineError, ReadData, Reply};
pub use engine::{Engine, EngineConfig};
pub use stepped::{StepOutcome, SteppedEngine};
