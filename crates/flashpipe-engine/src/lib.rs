//! The filesystem core of flashpipe (HWFS ch. 1, 3.3.1).
//!
//! The [`Engine`] is a dedicated thread that owns a mounted file system and its device;
//! clients ([`EngineClient`]) submit [`Command`]s through bounded queues and receive
//! completions, read data arriving in engine-owned aligned buffers without a copy and
//! whole blocks of a write leaving from the client's own buffer without one. The
//! engine knows nothing of store files, locks or device kinds: `flashpipe-store` opens a
//! store's devices, mounts them and starts an engine on the file system. Rule: this crate
//! depends only on the file system and the device layer.

pub mod client;
pub mod command;
pub mod engine;
mod reads;
pub mod stepped;
mod writes;

pub use client::{EngineClient, StreamError, Ticket};
pub use command::{Command, EngineError, ReadData, Reply};
pub use engine::{Engine, EngineConfig, WritePath};
pub use stepped::{StepOutcome, SteppedEngine};
