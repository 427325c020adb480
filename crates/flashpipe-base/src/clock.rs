//! Clocks: the one source of time for every layer above the devices.
//!
//! "One stack, two clocks": code above the device layer never reads the wall clock. It
//! asks its device for a [`Clock`] and gets either [`RealClock`] (monotonic wall time,
//! for real devices) or a [`VirtualClock`] (nanoseconds of simulated time, advanced only
//! by a simulator's event loop). The same code thus measures real runs in real time and
//! simulated runs in virtual time, deterministically.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// A monotonic time source measured in nanoseconds from an origin of its own (the Unix
/// epoch for [`RealClock`], the start of the simulation for [`VirtualClock`]).
pub trait Clock: Send + Sync {
    /// Nanoseconds since this clock's origin; never decreases.
    fn now_ns(&self) -> u64;

    /// True for simulated time.
    fn is_virtual(&self) -> bool;
}

/// Real time in nanoseconds since the Unix epoch: read from the system clock once at
/// construction, then advanced by the monotonic clock, so it never runs backwards and
/// timestamps it gives (file modification times) mean something across runs.
#[derive(Debug, Clone, Copy)]
pub struct RealClock {
    origin: Instant,
    origin_since_epoch_ns: u64,
}

impl RealClock {
    /// A clock anchored to the system clock now.
    pub fn new() -> RealClock {
        let origin_since_epoch_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|since| since.as_nanos() as u64)
            .unwrap_or(0);
        RealClock {
            origin: Instant::now(),
            origin_since_epoch_ns,
        }
    }

    /// The process-wide real clock, shared by real devices.
    pub fn shared() -> Arc<dyn Clock> {
        static SHARED: std::sync::OnceLock<Arc<RealClock>> = std::sync::OnceLock::new();
        SHARED.get_or_init(|| Arc::new(RealClock::new())).clone()
    }
}

impl Default for RealClock {
    fn default() -> Self {
        RealClock::new()
    }
}

impl Clock for RealClock {
    fn now_ns(&self) -> u64 {
        self.origin_since_epoch_ns + self.origin.elapsed().as_nanos() as u64
    }

    fn is_virtual(&self) -> bool {
        false
    }
}

/// Simulated time: a counter of nanoseconds that only its simulator moves forward.
///
/// Cloning shares the counter, so every device of one simulated world and every layer
/// above them see the same instant.
#[derive(Debug, Clone, Default)]
pub struct VirtualClock {
    now_ns: Arc<AtomicU64>,
}

impl VirtualClock {
    /// A virtual clock at time zero.
    pub fn new() -> VirtualClock {
        VirtualClock::default()
    }

    /// Moves time forward to `instant_ns`.
    ///
    /// # Panics
    /// When `instant_ns` lies in the past: virtual time never runs backwards.
    #[inline]
    pub fn advance_to(&self, instant_ns: u64) {
        // One simulator thread moves a clock, so a load and a store (no read-modify-write
        // instruction) suffice; the simulators' event loops call this once per event time.
        let previous_ns = self.now_ns.load(Ordering::Relaxed);
        assert!(
            previous_ns <= instant_ns,
            "virtual time ran backwards: {previous_ns} -> {instant_ns}"
        );
        self.now_ns.store(instant_ns, Ordering::Relaxed);
    }

    /// This clock as a shared trait object.
    pub fn as_clock(&self) -> Arc<dyn Clock> {
        Arc::new(self.clone())
    }
}

impl Clock for VirtualClock {
    #[inline]
    fn now_ns(&self) -> u64 {
        self.now_ns.load(Ordering::Relaxed)
    }

    fn is_virtual(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn virtual_clock_is_shared_and_monotonic() {
        let clock = VirtualClock::new();
        let view = clock.as_clock();
        clock.advance_to(10);
        clock.advance_to(10);
        assert_eq!(view.now_ns(), 10);
        assert!(view.is_virtual());
    }

    #[test]
    #[should_panic(expected = "virtual time ran backwards")]
    fn virtual_clock_refuses_to_run_backwards() {
        let clock = VirtualClock::new();
        clock.advance_to(10);
        clock.advance_to(9);
    }

    #[test]
    fn real_clock_counts_from_the_unix_epoch() {
        let since_epoch_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        let clock_ns = RealClock::new().now_ns();
        assert!(
            clock_ns.abs_diff(since_epoch_ns) < 5_000_000_000,
            "{clock_ns} vs {since_epoch_ns}"
        );
    }

    #[test]
    fn real_clock_moves_forward() {
        let clock = RealClock::new();
        let first = clock.now_ns();
        assert!(clock.now_ns() >= first);
        assert!(!clock.is_virtual());
    }
}
