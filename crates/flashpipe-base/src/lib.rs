//! flashpipe-base: the few things every layer shares, defined once.
//!
//! - [`clock`]: the one source of time ([`Clock`], [`RealClock`], [`VirtualClock`]); code
//!   above the devices never reads the wall clock itself.
//! - [`random`]: the one seeded generator ([`SplitMix64`]); every simulation, fault
//!   injector and seeded test draws from it, so a seed means the same run forever.
//!
//! A leaf crate: it depends on no other flashpipe crate, so the device layer, the
//! simulator, the network runtime and the tests can all stand on it.

pub mod clock;
pub mod random;

pub use clock::{Clock, RealClock, VirtualClock};
pub use random::SplitMix64;
