//! Device arrays for flashpipe: striping (RAID-0) over any [`BlockDevice`]s.
//!
//! [`StripedDevice`] makes one device out of several members (files through io_uring,
//! RAM disks, simulated disks) by splitting every request at stripe-unit boundaries into
//! per-member pieces issued in parallel, without copying: the pieces are views into the
//! caller's buffer. Completions come back in submission order (the HWFS thesis 3.2.3
//! rule, [`CompletionOrder::Submission`]) or as they complete
//! ([`CompletionOrder::AsCompleted`]). [`StripeLayout`] holds the geometry.
//!
//! Written by hand: RAID crates drive kernel md devices or whole volumes; none splits
//! tagged completion-based requests over arbitrary user-space backends.
//!
//! [`BlockDevice`]: flashpipe_device::BlockDevice

pub mod layout;
pub mod striped;

pub use layout::{Segment, StripeLayout};
pub use striped::{CompletionOrder, StripedDevice};
