//! The NBD client at this crate's old path: everything of `flashpipe-nbd-client`
//! (re-exported, so `flashpipe_nbd::client::NbdDevice` and the rest keep working), and
//! the simulated client, which needs both the client's core and the server's:
//!
//! - `sim_network` and `sim`: [`SimNetwork`], seeded disk nodes over simulated links in
//!   virtual time (delays, drops, resets, partitions, refused reconnects), each node's
//!   connections served by the server's I/O-free core (`crate::server::core`), and
//!   [`SimNbdDevice`], the client's core (`flashpipe_nbd_client::core`) over it, for the
//!   deterministic simulation.

pub use flashpipe_nbd_client::*;

mod sim;
mod sim_network;

pub use sim::{SimNbdDevice, SimNbdDeviceConfig};
pub use sim_network::{sim_node_uri, SimLinkConfig, SimNetwork, SimNetworkCounters, SimNodeConfig};
