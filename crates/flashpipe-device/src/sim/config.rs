//! Configuration of a simulated disk: geometry, timing model and injected faults, with
//! the checks that refuse unusable settings before a disk is built.

use std::sync::Arc;

use crate::error::{DeviceError, DeviceErrorKind};
use crate::ram::check_geometry;
use crate::request::check_queue_depth;

const NANOSECONDS_PER_SECOND: u128 = 1_000_000_000;

/// Seeded faults a simulated disk injects into its requests.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FaultConfig {
    /// Chance (0.0..=1.0) that a read completes with `InjectedFault` (buffer left as it was).
    pub read_failure_probability: f64,
    /// Chance (0.0..=1.0) that a write completes with `InjectedFault` (the disk unchanged).
    pub write_failure_probability: f64,
}

/// Everything that defines one simulated disk.
///
/// Timing model: each request first occupies one of `parallelism` service slots (the
/// others wait in FIFO order) for its latency (`latency_ns` plus a seeded jitter drawn
/// uniformly from `0..=latency_jitter_ns`); a read or write then moves its bytes over the
/// disk's one transfer channel of `bandwidth_bytes_per_second` (FIFO, one transfer at a
/// time, `ceil(size * 1e9 / bandwidth)` ns) and completes. Flushes and trims take the
/// latency only. A lone request of `S` bytes thus completes after exactly
/// `latency + S / bandwidth`, and `parallelism` requests overlap their latencies.
#[derive(Debug, Clone, PartialEq)]
pub struct SimDiskConfig {
    /// Name used in errors and reports.
    pub name: String,
    /// Block size; a power of two of at least 512 bytes.
    pub block_size_bytes: u32,
    /// Blocks on the disk.
    pub block_count: u64,
    /// Most requests one handle may hold in flight.
    pub queue_depth: u32,
    /// Fixed part of every request's service time.
    pub latency_ns: u64,
    /// Largest seeded extra latency added to a request (0: none).
    pub latency_jitter_ns: u64,
    /// Speed of the transfer channel; must be positive.
    pub bandwidth_bytes_per_second: u64,
    /// Requests serviced at once; at least 1.
    pub parallelism: u32,
    /// Injected faults.
    pub faults: FaultConfig,
}

impl SimDiskConfig {
    /// A small, fast, fault-free disk with some jitter (so that completions reorder), for
    /// tests: 20 us latency + up to 10 us jitter, 2 GB/s, 8-way parallel, queue depth 64.
    pub fn default_for_tests(name: &str, block_size_bytes: u32, block_count: u64) -> Self {
        SimDiskConfig {
            name: name.to_string(),
            block_size_bytes,
            block_count,
            queue_depth: 64,
            latency_ns: 20_000,
            latency_jitter_ns: 10_000,
            bandwidth_bytes_per_second: 2_000_000_000,
            parallelism: 8,
            faults: FaultConfig::default(),
        }
    }

    /// Checks every setting; the error names the disk and the bad setting.
    pub fn validate(&self) -> Result<(), DeviceError> {
        let name: Arc<str> = Arc::from(self.name.as_str());
        check_queue_depth(&name, self.queue_depth)?;
        check_geometry(&name, self.block_size_bytes, self.block_count)?;
        let open_error = |detail: String| DeviceError::new(&name, DeviceErrorKind::Open { detail });
        if self.parallelism == 0 {
            return Err(open_error("parallelism must be at least 1".to_string()));
        }
        if self.bandwidth_bytes_per_second == 0 {
            return Err(open_error("bandwidth must be positive".to_string()));
        }
        for (setting, probability) in [
            (
                "read failure probability",
                self.faults.read_failure_probability,
            ),
            (
                "write failure probability",
                self.faults.write_failure_probability,
            ),
        ] {
            if !(0.0..=1.0).contains(&probability) {
                return Err(open_error(format!(
                    "{setting} {probability} outside 0.0..=1.0"
                )));
            }
        }
        Ok(())
    }

    /// Time to move `size_bytes` over the transfer channel, rounded up to whole ns.
    pub fn transfer_time_ns(&self, size_bytes: u64) -> u64 {
        let numerator = u128::from(size_bytes) * NANOSECONDS_PER_SECOND;
        let time_ns = numerator.div_ceil(u128::from(self.bandwidth_bytes_per_second));
        u64::try_from(time_ns).unwrap_or(u64::MAX)
    }
}
