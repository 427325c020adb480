//! flashpipe's NAND flash array model.
//!
//! - [`config`]: geometry, timing and reliability from TOML presets (`minflash`, `rad`, `tlc`);
//! - [`interface`]: minFlash's raw tagged interface (ReadPage, WritePage, EraseBlock, Ack);
//! - [`array`]: the array itself, a deterministic discrete-event simulation on a
//!   `VirtualClock`: bus/die occupancy, the scoreboard scheduler, host links, chained
//!   devices, per-host queues; erase-before-write, in-order programming, wear, factory and
//!   grown bad blocks, raw bit errors injected into stored codewords at read time;
//! - [`ecc`]: RS(255,243) over the stored bytes: a table-driven encoder, a decoder, and the
//!   exact outcome model reads use by default;
//! - [`adapter`]: a `BlockDevice` over the array by fixed striping (the pre-FTL mode);
//! - [`workload`]: closed-loop synthetic jobs driving the raw interface;
//! - [`pool`]: the bounded free list of page buffers (steady-state I/O allocates nothing);
//! - [`stats`]: bandwidth, IOPS, latency percentiles, utilizations.
//!
//! The charts of the experiments are drawn in `flashpipe-bench`, so this model does not
//! depend on a drawing library.
//!
//! Crates do the generic work (TOML with `toml`/`serde`); the event core, the scheduler,
//! the error and wear models are written here because they are the model itself, and so is
//! the Reed-Solomon codec, because no maintained crate decodes errors at unknown positions
//! (they are erasure codes; see [`ecc::reed_solomon`]). The model and its
//! parameters are documented in docs/flash-model.md, the reproductions in
//! docs/reproductions.md.

pub mod adapter;
pub mod array;
pub mod config;
pub mod ecc;
pub mod interface;
pub mod pool;
pub mod reliability;
pub mod stats;
pub mod store;
pub mod workload;

pub use adapter::StripedFlashDevice;
pub use array::{FlashArray, FlashOptions};
pub use config::{ConfigError, FlashConfig, FlashGeometry, FlashReliability, FlashTiming};
pub use interface::{
    Ack, AckStatus, CommandKind, CopyBackRefusal, FlashAddress, FlashCommand, FlashRequest,
    RuleViolation, SubmitError,
};
pub use stats::{FlashStats, LatencySummary};
pub use store::{BlockState, FlashError, StorageMode};
