//! flashpipe-base: the few things every layer shares, defined once.
//!
//! - [`clock`]: the one source of time ([`Clock`], [`RealClock`], [`VirtualClock`]); code
//!   above the devices never reads the wall clock itself.
//! - [`random`]: the one seeded generator ([`SplitMix64`]); every simulation, fault
//!   injector and seeded test draws from it, so a seed means the same run forever.
//! - [`wait`]: the one wait strategy ([`WaitPolicy`], one knob: `spin_us`; [`Waiter`]:
//!   poll, spin, yield, then the caller's park), used by the engine's hand-off, the NBD
//!   server's threads, the store server's answering thread and the shared-memory rings.
//! - [`socket`]: the one send without SIGPIPE (`MSG_NOSIGNAL`): [`send_all_nosignal`],
//!   [`SendNoSignal`]; a write to a gone peer is an `EPIPE` error, never a signal.
//! - [`histogram`]: the one latency histogram ([`LatencyHistogram`]): exact while few
//!   distinct values, bounded buckets (`hdrhistogram`) past that, so a replay's memory does
//!   not grow with its trace.
//! - [`peer`]: the one reading of a Unix socket peer's credentials (`SO_PEERCRED`):
//!   [`peer_credentials`], for the servers' accept loop and the client's trust check.
//!
//! A leaf crate: it depends on no other flashpipe crate (only on crossbeam's channel
//! type, which [`Waiter::receive`] polls, hdrhistogram and libc), so the device layer, the
//! simulator, the network runtime and the tests can all stand on it.

pub mod clock;
pub mod histogram;
pub mod peer;
pub mod random;
pub mod socket;
pub mod wait;

pub use clock::{Clock, RealClock, VirtualClock};
pub use histogram::LatencyHistogram;
pub use peer::{peer_credentials, PeerCredentials};
pub use random::SplitMix64;
pub use socket::{send_all_nosignal, send_nosignal, send_vectored_nosignal, SendNoSignal};
pub use wait::{WaitPolicy, WaitPolicyError, Waited, Waiter};
