//! Real-time emulation (issue #16): [`PacedDevice`] wraps a device that runs in virtual
//! time (the simulated disk, the FTL over the flash model) and hands each completion to
//! its caller only when the wall clock reaches the completion's modeled time, so whoever
//! sits above sees the model's latencies and bandwidth in real time.
//!
//! Mapping: virtual instant `v` is released at wall instant
//! `start + (v - virtual_start) + idle_offset`. The inner model runs ahead freely (a wait
//! with nothing due steps it to its next completion, which is then held); when the inner
//! device is idle and the wall clock has passed the mapped virtual "now", the offset
//! grows by the difference, which is how idle wall time passes in the model without
//! moving its clock (only the model's own event loop moves a virtual clock). So a
//! request never enters the model earlier than the wall instant it was submitted at,
//! and no completion is released before its modeled instant. Known approximations: a
//! request submitted while others are in flight enters at the model's current instant,
//! which may lie before or after the wall clock; background work of an idle FTL does
//! not advance during the idle gap; a completion's modeled time is the inner clock when
//! it was reaped (exact for devices that hand out completions as their events run).
//!
//! Waiting: the device sleeps while the release is more than [`SPIN_WINDOW_NS`] away and
//! spins after that. Each release records its lag (wall release minus modeled
//! instant); lags above `lag_warning_ns` are counted as warnings: the model (or the
//! machine) could not keep up. Lags are kept in a histogram of fixed size ([`LagHistogram`],
//! about 30 KiB however long the device runs: a mount of a store paced for hours keeps
//! no list of every completion), exact below 64 ns and within 1/64 above. This is the only module above `clock.rs` that reads the
//! operating-system clock, and it is in the device layer.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::buffer::BufferPool;
use crate::clock::{Clock, RealClock};
use crate::error::DeviceError;
use crate::request::{BlockDevice, Completion, DeviceInfo, Request};
use crate::Rejected;

/// Below this distance to a release the device spins instead of sleeping.
pub const SPIN_WINDOW_NS: u64 = 200_000;

/// Lag above which a release counts as a warning, by default (50 us).
pub const DEFAULT_LAG_WARNING_NS: u64 = 50_000;

/// How far behind their modeled instants completions were released.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LagReport {
    /// Completions released.
    pub released: u64,
    /// Mean lag.
    pub lag_ns_mean: f64,
    /// 99th percentile lag.
    pub lag_ns_p99: u64,
    /// Largest lag.
    pub lag_ns_max: u64,
    /// Releases that lagged more than the warning threshold.
    pub warnings: u64,
    /// The warning threshold.
    pub lag_warning_ns: u64,
}

/// Sub-buckets per power of two of the lag histogram (and the lags below which each
/// nanosecond has its own bucket): 2^6 = 64, so a bucket spans at most 1/64 of its lags.
const LAG_SUB_BUCKET_BITS: u32 = 6;

/// Sub-buckets per power of two.
const LAG_SUB_BUCKETS: u64 = 1 << LAG_SUB_BUCKET_BITS;

/// Buckets in all: the exact ones below 64 ns, then 64 per power of two up to 2^64.
const LAG_BUCKETS: usize = (LAG_SUB_BUCKETS * (64 - LAG_SUB_BUCKET_BITS as u64 + 1)) as usize;

/// The lags of every release, in buckets of fixed number (log-linear, as HdrHistogram):
/// the mean and the largest exact, a percentile within 1/64 of its true value (the top of
/// its bucket, never above the largest lag).
#[derive(Debug, Clone)]
pub struct LagHistogram {
    counts: Vec<u64>,
    released: u64,
    sum_ns: u128,
    max_ns: u64,
}

impl Default for LagHistogram {
    fn default() -> LagHistogram {
        LagHistogram {
            counts: vec![0; LAG_BUCKETS],
            released: 0,
            sum_ns: 0,
            max_ns: 0,
        }
    }
}

impl LagHistogram {
    /// Counts one release `lag_ns` late.
    pub fn record(&mut self, lag_ns: u64) {
        self.counts[lag_bucket(lag_ns)] += 1;
        self.released += 1;
        self.sum_ns += u128::from(lag_ns);
        self.max_ns = self.max_ns.max(lag_ns);
    }

    /// Releases counted.
    pub fn released(&self) -> u64 {
        self.released
    }

    /// The mean lag (0 with none).
    pub fn mean_ns(&self) -> f64 {
        match self.released {
            0 => 0.0,
            released => self.sum_ns as f64 / released as f64,
        }
    }

    /// The largest lag (0 with none).
    pub fn max_ns(&self) -> u64 {
        self.max_ns
    }

    /// The lag at `share` (0 to 1) of the releases in order, as the element at rank
    /// `round((released - 1) * share)` of the sorted lags: the top of its bucket, at most
    /// the largest lag; 0 with none.
    pub fn percentile_ns(&self, share: f64) -> u64 {
        if self.released == 0 {
            return 0;
        }
        let rank = ((self.released - 1) as f64 * share.clamp(0.0, 1.0)).round() as u64;
        let mut seen = 0;
        for (bucket, &count) in self.counts.iter().enumerate() {
            seen += count;
            if seen > rank {
                return lag_bucket_top(bucket).min(self.max_ns);
            }
        }
        self.max_ns
    }
}

/// The bucket of a lag: itself below 64 ns, else 64 sub-buckets per power of two.
fn lag_bucket(lag_ns: u64) -> usize {
    if lag_ns < LAG_SUB_BUCKETS {
        return lag_ns as usize;
    }
    let magnitude = 63 - lag_ns.leading_zeros();
    let shift = magnitude - LAG_SUB_BUCKET_BITS;
    let sub_bucket = (lag_ns >> shift) - LAG_SUB_BUCKETS;
    (LAG_SUB_BUCKETS * (u64::from(shift) + 1) + sub_bucket) as usize
}

/// The largest lag of a bucket.
fn lag_bucket_top(bucket: usize) -> u64 {
    let bucket = bucket as u64;
    if bucket < LAG_SUB_BUCKETS {
        return bucket;
    }
    let shift = bucket / LAG_SUB_BUCKETS - 1;
    let sub_bucket = bucket % LAG_SUB_BUCKETS;
    let bottom = (LAG_SUB_BUCKETS + sub_bucket) << shift;
    bottom + ((1u64 << shift) - 1)
}

/// A completion reaped from the inner device and held until its instant.
struct HeldCompletion {
    completion: Completion,
    modeled_virtual_ns: u64,
}

/// A virtual-time device paced against the wall clock (see the module doc).
pub struct PacedDevice<D: BlockDevice> {
    inner: D,
    inner_clock: Arc<dyn Clock>,
    wall_start: Instant,
    virtual_start_ns: u64,
    idle_offset_ns: u64,
    held: VecDeque<HeldCompletion>,
    lags: LagHistogram,
    lag_warning_ns: u64,
    warnings: u64,
}

impl<D: BlockDevice> PacedDevice<D> {
    /// Paces `inner` from now; lags above `lag_warning_ns` count as warnings.
    pub fn new(inner: D, lag_warning_ns: u64) -> PacedDevice<D> {
        let inner_clock = inner.clock();
        let virtual_start_ns = inner_clock.now_ns();
        PacedDevice {
            inner,
            inner_clock,
            wall_start: Instant::now(),
            virtual_start_ns,
            idle_offset_ns: 0,
            held: VecDeque::new(),
            lags: LagHistogram::default(),
            lag_warning_ns,
            warnings: 0,
        }
    }

    /// The wrapped device.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// The wrapped device, to reach what it offers beyond `BlockDevice` (a flash image's
    /// sync); requests must still go through the paced device.
    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.inner
    }

    /// Hands the wrapped device back.
    pub fn into_inner(self) -> D {
        self.inner
    }

    /// The lags of every release so far.
    pub fn lag_report(&self) -> LagReport {
        LagReport {
            released: self.lags.released(),
            lag_ns_mean: self.lags.mean_ns(),
            lag_ns_p99: self.lags.percentile_ns(0.99),
            lag_ns_max: self.lags.max_ns(),
            warnings: self.warnings,
            lag_warning_ns: self.lag_warning_ns,
        }
    }

    /// The wall instant at which virtual instant `virtual_ns` is released.
    pub fn release_instant(&self, virtual_ns: u64) -> Instant {
        let since_start_ns = virtual_ns.saturating_sub(self.virtual_start_ns) + self.idle_offset_ns;
        self.wall_start + Duration::from_nanos(since_start_ns)
    }

    fn wall_elapsed_ns(&self) -> u64 {
        self.wall_start.elapsed().as_nanos() as u64
    }

    /// Lets idle wall time pass in the model: when nothing is in flight or held, the
    /// mapped "now" catches up with the wall clock.
    fn catch_up_when_idle(&mut self) {
        if self.inner.in_flight() > 0 || !self.held.is_empty() {
            return;
        }
        let mapped_now_ns = self
            .inner_clock
            .now_ns()
            .saturating_sub(self.virtual_start_ns)
            + self.idle_offset_ns;
        let wall_ns = self.wall_elapsed_ns();
        if wall_ns > mapped_now_ns {
            self.idle_offset_ns += wall_ns - mapped_now_ns;
        }
    }

    fn hold(&mut self, completions: Vec<Completion>) {
        let modeled_virtual_ns = self.inner_clock.now_ns();
        for completion in completions {
            self.held.push_back(HeldCompletion {
                completion,
                modeled_virtual_ns,
            });
        }
    }

    /// Moves every held completion whose instant has come to `completions`.
    fn release_due(&mut self, completions: &mut Vec<Completion>) -> usize {
        let now = Instant::now();
        let mut released = 0;
        let mut index = 0;
        while index < self.held.len() {
            let due = self.release_instant(self.held[index].modeled_virtual_ns);
            if due > now {
                index += 1;
                continue;
            }
            let held = self.held.remove(index).expect("index in range");
            let lag_ns = now.duration_since(due).as_nanos() as u64;
            assert!(
                now >= due,
                "a completion released before its modeled instant"
            );
            self.lags.record(lag_ns);
            if lag_ns > self.lag_warning_ns {
                self.warnings += 1;
            }
            completions.push(held.completion);
            released += 1;
        }
        released
    }

    fn earliest_held_instant(&self) -> Option<Instant> {
        self.held
            .iter()
            .map(|held| self.release_instant(held.modeled_virtual_ns))
            .min()
    }

    /// Lets the model run to its next completion when nothing is held.
    fn run_model_ahead(&mut self) -> Result<(), DeviceError> {
        let mut reaped = Vec::new();
        self.inner.poll_completions(&mut reaped);
        if reaped.is_empty() && self.held.is_empty() && self.inner.in_flight() > 0 {
            self.inner.wait_completions(&mut reaped)?;
        }
        self.hold(reaped);
        Ok(())
    }
}

/// Sleeps while `deadline` is far, then spins until it has come.
fn wait_until(deadline: Instant) {
    loop {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        let remaining = deadline - now;
        if remaining > Duration::from_nanos(SPIN_WINDOW_NS) {
            std::thread::sleep(remaining - Duration::from_nanos(SPIN_WINDOW_NS / 2));
        } else {
            std::hint::spin_loop();
        }
    }
}

impl<D: BlockDevice> BlockDevice for PacedDevice<D> {
    fn info(&self) -> &DeviceInfo {
        self.inner.info()
    }

    /// The wall clock: a paced device takes real time.
    fn clock(&self) -> Arc<dyn Clock> {
        RealClock::shared()
    }

    fn submit(&mut self, request: Request) -> Result<(), Rejected> {
        self.catch_up_when_idle();
        self.inner.submit(request)
    }

    fn poll_completions(&mut self, completions: &mut Vec<Completion>) -> usize {
        let mut reaped = Vec::new();
        self.inner.poll_completions(&mut reaped);
        self.hold(reaped);
        self.release_due(completions)
    }

    fn wait_completions(
        &mut self,
        completions: &mut Vec<Completion>,
    ) -> Result<usize, DeviceError> {
        loop {
            self.run_model_ahead()?;
            let Some(deadline) = self.earliest_held_instant() else {
                return self.inner.wait_completions(completions);
            };
            wait_until(deadline);
            let released = self.release_due(completions);
            if released > 0 {
                return Ok(released);
            }
        }
    }

    fn in_flight(&self) -> usize {
        self.inner.in_flight() + self.held.len()
    }

    fn copies_by_reference(&self) -> bool {
        self.inner.copies_by_reference()
    }

    fn copy_alignment_blocks(&self) -> u64 {
        self.inner.copy_alignment_blocks()
    }

    fn preferred_block_size_bytes(&self) -> u32 {
        self.inner.preferred_block_size_bytes()
    }

    fn register_buffer_pool(&mut self, pool: &BufferPool) -> Result<(), DeviceError> {
        self.inner.register_buffer_pool(pool)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{SimDiskConfig, SimWorld};
    use crate::{IoBuf, Operation};

    const LATENCY_NS: u64 = 300_000;

    fn paced_disk(seed: u64) -> PacedDevice<crate::sim::SimDisk> {
        let world = SimWorld::new(seed);
        let mut config = SimDiskConfig::default_for_tests("paced", 4096, 1024);
        config.latency_ns = LATENCY_NS;
        config.latency_jitter_ns = 100_000;
        let disk = world.add_disk(config).expect("disk");
        PacedDevice::new(disk, DEFAULT_LAG_WARNING_NS)
    }

    fn read(tag: u64, block: u64) -> Request {
        Request {
            tag,
            operation: Operation::Read {
                first_block: block,
                buffer: IoBuf::zeroed(4096),
            },
        }
    }

    #[test]
    fn no_completion_is_released_before_its_modeled_latency_at_queue_depth_one() {
        let mut device = paced_disk(7);
        let mut completions = Vec::new();
        for tag in 0..20 {
            let submitted = Instant::now();
            device.submit(read(tag, tag)).expect("submit");
            completions.clear();
            device.wait_completions(&mut completions).expect("wait");
            let waited_ns = submitted.elapsed().as_nanos() as u64;
            assert_eq!(completions.len(), 1);
            assert!(completions[0].status.is_ok());
            assert!(
                waited_ns >= LATENCY_NS,
                "request {tag} came back after {waited_ns} ns, before its {LATENCY_NS} ns"
            );
        }
        let report = device.lag_report();
        assert_eq!(report.released, 20);
    }

    #[test]
    fn the_lag_histogram_is_exact_below_64_ns_and_within_a_sixty_fourth_above() {
        let mut random = crate::random::SplitMix64::new(29);
        for round in 0..50 {
            let mut histogram = LagHistogram::default();
            let count = 1 + round * 37;
            let mut lags: Vec<u64> = (0..count)
                .map(|_| random.next_u64() >> (random.next_u64() % 64))
                .collect();
            for &lag in &lags {
                histogram.record(lag);
            }
            lags.sort_unstable();
            assert_eq!(histogram.released(), count as u64);
            assert_eq!(histogram.max_ns(), *lags.last().unwrap());
            for share in [0.0, 0.5, 0.9, 0.99, 1.0] {
                let exact = lags[((lags.len() - 1) as f64 * share).round() as usize];
                let kept = histogram.percentile_ns(share);
                assert!(kept >= exact, "{share}: {kept} below {exact}");
                assert!(
                    kept - exact <= exact / LAG_SUB_BUCKETS,
                    "{share}: {kept} too far above {exact}"
                );
            }
        }
        for lag in [0, 1, 63, 64, 65, 127, 128, 1 << 40, u64::MAX] {
            let top = lag_bucket_top(lag_bucket(lag));
            assert!(
                top >= lag && top - lag <= lag / LAG_SUB_BUCKETS,
                "{lag}: {top}"
            );
            assert!(lag_bucket(lag) < LAG_BUCKETS);
        }
        assert_eq!(LagHistogram::default().percentile_ns(0.99), 0);
    }

    #[test]
    fn deep_queues_release_every_completion_no_earlier_than_its_instant() {
        let mut device = paced_disk(11);
        let mut completions = Vec::new();
        let started = Instant::now();
        for tag in 0..16 {
            device.submit(read(tag, tag)).expect("submit");
        }
        while completions.len() < 16 {
            device.wait_completions(&mut completions).expect("wait");
        }
        assert!(started.elapsed().as_nanos() as u64 >= LATENCY_NS);
        assert_eq!(device.in_flight(), 0);
        assert_eq!(device.lag_report().released, 16);
        let mut tags: Vec<u64> = completions
            .iter()
            .map(|completion| completion.tag)
            .collect();
        tags.sort_unstable();
        assert_eq!(tags, (0..16).collect::<Vec<u64>>());
    }
}
