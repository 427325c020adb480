//! The minFlash cluster's I/O-free core (seed 004, sections II-III): what a flash node and
//! its hosts decide, without threads, sockets or clocks. Cores take inputs and return
//! outputs; the node process, the hosts and the simulation drive them.
//!
//! - [`wire`]: the raw flash interface on the wire (ReadPage, WritePage, EraseBlock, Ack,
//!   Credit), byte by byte in docs/cluster-wire.md, with a bound on every field;
//! - [`router`]: one node's router (paper Fig. 3): host tags renamed to controller tags
//!   from a bounded free queue, routing by device id over a general set of link ports,
//!   hop counts, links going down without leaking a tag;
//! - [`arbiter`]: rotating-priority arbitration, and weighted arbitration with request
//!   costs so a writer cannot starve readers;
//! - [`credits`]: token-based end-to-end flow control per virtual channel;
//! - [`output`]: one output port: queues per virtual channel and input, a rotating-priority
//!   arbiter per datapath, tokens on links;
//! - [`shares`]: which host may program or erase which blocks of which device;
//! - [`description`]: the cluster description file (TOML, docs/cluster.md) and its checks.
//!
//! Layer rule: this crate sits on the device layer. It depends on `flashpipe-base` and on
//! `flashpipe-flash` for the raw interface's types and the presets' geometry, and on no
//! crate above them.

pub mod arbiter;
pub mod credits;
pub mod description;
pub mod output;
pub mod router;
pub mod shares;
pub mod wire;
