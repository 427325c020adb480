//! Trace replay through the host FTL in virtual time: every request of a trace goes to the
//! [`Ftl`] as a [`BlockDevice`] request (one logical block = one flash page), so mapping,
//! garbage collection, wear leveling and bad blocks act under the trace.
//!
//! Open loop (default): request `i` arrives at `start + (arrival_i - arrival_0) / speed`
//! and is issued then; its latency runs from its arrival to its completion, so time spent
//! waiting behind an optional bound on outstanding requests counts. Closed loop: at most
//! `queue_depth` requests in flight, each issued as soon as a slot frees, latency from
//! issue. Time advances event by event (the array's next event or the next arrival,
//! whichever is first) and the FTL is pumped at each instant, so a completion is seen at
//! the instant the FTL completes it.
//!
//! Reads of pages never written (or trimmed) are answered with zeros by the FTL at once;
//! they are counted. With [`UnwrittenReads::Precondition`] the replayer first writes
//! every page the trace reads, outside the measurement (statistics start after it).
//!
//! A byte range maps to the pages it touches: a write of part of a page is a whole-page
//! write (counted as `partial_page_requests`, no read-modify-write is modelled); ranges
//! past the device's logical capacity wrap to `first_page % capacity` (counted).

use std::sync::{Arc, Mutex, MutexGuard};

use flashpipe_device::{BlockDevice, Completion, IoBuf, Operation, Request};
use flashpipe_flash::workload::{AccessKind, TraceRequest};
use flashpipe_flash::{
    Ack, FlashAddress, FlashArray, FlashConfig, FlashOptions, FlashRequest, StorageMode,
    SubmitError,
};
use serde::Serialize;

use crate::backend::FlashBackend;
use crate::{Ftl, FtlError, FtlOptions, FtlStats};

/// Most requests the open loop keeps outstanding when no bound is given (the FTL's queue
/// depth; later arrivals wait, and the wait is reported like a bound's).
pub const OPEN_LOOP_OUTSTANDING_LIMIT: u32 = 65_536;
/// Slowest and fastest `speed` (arrival times are divided by it).
pub const REPLAY_SPEED_RANGE: std::ops::RangeInclusive<f64> = 1e-6..=1e6;
/// Buckets of the throughput-over-time series.
pub const THROUGHPUT_BUCKETS: u64 = 100;
/// Pages one preconditioning write covers at most.
const PRECONDITION_PAGES_PER_REQUEST: u64 = 64;

/// Why a replay could not run or finish.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// An option out of range.
    #[error("replay option `{field}` = {value}: {limit}")]
    InvalidOption {
        /// The option.
        field: &'static str,
        /// The value given.
        value: String,
        /// The limit.
        limit: String,
    },
    /// The array could not be built.
    #[error("cannot build the flash array: {0}")]
    Flash(#[from] flashpipe_flash::FlashError),
    /// The FTL could not be formatted.
    #[error("cannot format the FTL: {0}")]
    Ftl(#[from] FtlError),
    /// Requests wait for space garbage collection cannot make.
    #[error("the replay stalled with {outstanding} requests outstanding: {detail}")]
    Stalled {
        /// Requests issued and not completed.
        outstanding: usize,
        /// The FTL's account.
        detail: String,
    },
}

/// Open or closed loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ReplayLoop {
    /// Each request issued at its arrival time, latency from arrival; at most
    /// `max_outstanding` in flight (None: [`OPEN_LOOP_OUTSTANDING_LIMIT`]).
    Open {
        /// Bound on requests issued and not completed.
        max_outstanding: Option<u32>,
    },
    /// At most `queue_depth` in flight, arrival times ignored, latency from issue.
    Closed {
        /// Requests in flight.
        queue_depth: u32,
    },
}

/// What reads of never-written pages see.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum UnwrittenReads {
    /// Zeros at once (the FTL's answer for an unmapped page); counted.
    Zero,
    /// The trace's read footprint is written first, outside the measurement.
    Precondition,
}

/// How to replay.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ReplayOptions {
    /// Open or closed loop.
    pub replay_loop: ReplayLoop,
    /// Arrival times are divided by this (2.0: twice as fast).
    pub speed: f64,
    /// Reads of never-written pages.
    pub unwritten_reads: UnwrittenReads,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            replay_loop: ReplayLoop::Open {
                max_outstanding: None,
            },
            speed: 1.0,
            unwritten_reads: UnwrittenReads::Zero,
        }
    }
}

impl ReplayOptions {
    /// Checks every option against its limit.
    pub fn check(&self) -> Result<(), ReplayError> {
        if !REPLAY_SPEED_RANGE.contains(&self.speed) {
            return Err(ReplayError::InvalidOption {
                field: "speed",
                value: self.speed.to_string(),
                limit: format!(
                    "must be within {}..={}",
                    REPLAY_SPEED_RANGE.start(),
                    REPLAY_SPEED_RANGE.end()
                ),
            });
        }
        let (field, depth) = match self.replay_loop {
            ReplayLoop::Open { max_outstanding } => ("max_outstanding", max_outstanding),
            ReplayLoop::Closed { queue_depth } => ("queue_depth", Some(queue_depth)),
        };
        if let Some(depth) =
            depth.filter(|depth| !(1..=OPEN_LOOP_OUTSTANDING_LIMIT).contains(depth))
        {
            return Err(ReplayError::InvalidOption {
                field,
                value: depth.to_string(),
                limit: format!("must be within 1..={OPEN_LOOP_OUTSTANDING_LIMIT}"),
            });
        }
        Ok(())
    }

    /// Requests in flight at most.
    pub fn outstanding_bound(&self) -> u32 {
        match self.replay_loop {
            ReplayLoop::Open { max_outstanding } => {
                max_outstanding.unwrap_or(OPEN_LOOP_OUTSTANDING_LIMIT)
            }
            ReplayLoop::Closed { queue_depth } => queue_depth,
        }
    }
}

/// Latency figures of one request type, in microseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct KindSummary {
    /// Requests completed (failed ones included).
    pub count: u64,
    /// Of those, completed with an error.
    pub failed: u64,
    /// Bytes the trace asked for (completed requests).
    pub bytes: u64,
    /// `bytes` over the measured span, decimal megabytes per second.
    pub megabytes_per_second: f64,
    /// Mean latency.
    pub latency_us_mean: f64,
    /// Median.
    pub latency_us_p50: f64,
    /// 99th percentile.
    pub latency_us_p99: f64,
    /// 99.9th percentile.
    pub latency_us_p999: f64,
    /// Largest.
    pub latency_us_max: f64,
}

/// Garbage collection and wear during the measured part of the replay.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CollectionSummary {
    /// Host pages programmed.
    pub host_pages_written: u64,
    /// Valid pages collection copied.
    pub gc_pages_copied: u64,
    /// Victim blocks collected.
    pub gc_victims: u64,
    /// Block erases.
    pub erases: u64,
    /// (host + collection pages) / host pages.
    pub write_amplification: f64,
    /// The same counting log and checkpoint pages.
    pub write_amplification_with_metadata: f64,
    /// Host pages that waited for collection.
    pub host_write_stalls: u64,
    /// Longest such wait, microseconds.
    pub host_write_wait_us_max: f64,
    /// Blocks moved by static wear leveling.
    pub static_wear_leveling_moves: u64,
    /// Blocks retired (factory and grown bad) at the end.
    pub retired_blocks: u32,
    /// Blocks retired during the replay.
    pub grown_bad_blocks: u64,
    /// Reads the ECC could not correct.
    pub uncorrectable_reads: u64,
    /// Fewest and most erases of a good block at the end.
    pub erase_count_min: u32,
    /// Most erases of a good block at the end.
    pub erase_count_max: u32,
}

impl CollectionSummary {
    fn of(stats: &FtlStats) -> CollectionSummary {
        CollectionSummary {
            host_pages_written: stats.host_pages_written,
            gc_pages_copied: stats.gc_pages_copied,
            gc_victims: stats.gc_victims,
            erases: stats.erases,
            write_amplification: stats.write_amplification(),
            write_amplification_with_metadata: stats.write_amplification_with_metadata(),
            host_write_stalls: stats.host_write_stalls,
            host_write_wait_us_max: stats.host_write_wait_ns_max as f64 / 1000.0,
            static_wear_leveling_moves: stats.static_wear_leveling_moves,
            retired_blocks: stats.retired_blocks,
            grown_bad_blocks: stats.grown_bad_blocks,
            uncorrectable_reads: stats.uncorrectable_reads,
            erase_count_min: stats.erase_count_min,
            erase_count_max: stats.erase_count_max,
        }
    }
}

/// The outcome of a replay through the FTL.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayReport {
    /// Requests in the trace.
    pub requests: u64,
    /// Reads.
    pub reads: KindSummary,
    /// Writes.
    pub writes: KindSummary,
    /// Trims.
    pub trims: KindSummary,
    /// All requests together.
    pub all: KindSummary,
    /// Requests the FTL refused at submission (out of range; never with a checked trace).
    pub rejected_requests: u64,
    /// Reads that touched a page never written (or trimmed), and such pages.
    pub unwritten_read_requests: u64,
    /// Pages of those reads that were never written.
    pub unwritten_read_pages: u64,
    /// Pages written before the measurement (`--unwritten-reads precondition`).
    pub precondition_pages_written: u64,
    /// Requests whose range reached past the logical capacity and was wrapped.
    pub wrapped_requests: u64,
    /// Requests not aligned to whole pages (modelled as whole-page operations).
    pub partial_page_requests: u64,
    /// Open loop: requests that arrived while the outstanding bound was reached.
    pub outstanding_bound_hits: u64,
    /// Their summed wait before issue, microseconds.
    pub outstanding_bound_wait_us_total: f64,
    /// Most requests outstanding at once.
    pub outstanding_max: u64,
    /// Virtual time from the first arrival to the last completion.
    pub elapsed_ns: u64,
    /// Arrival span of the trace after scaling by `speed`.
    pub trace_span_ns: u64,
    /// Collection and wear during the measurement.
    pub collection: CollectionSummary,
    /// Busy share of each die over the measurement.
    pub die_utilization: Vec<f64>,
    /// Busy share of each channel.
    pub channel_utilization: Vec<f64>,
    /// Logical pages of the FTL device and its page size.
    pub logical_pages: u64,
    /// Bytes per logical page.
    pub page_bytes: u64,
    /// Completed bytes per interval of `throughput_interval_ns`, from the first arrival.
    pub throughput_bytes: Vec<u64>,
    /// Width of one throughput interval.
    pub throughput_interval_ns: u64,
    /// Latency of every completed request, ns, by kind (for CDFs; not serialized).
    #[serde(skip)]
    pub latencies_ns: KindLatencies,
}

/// Raw latencies by request kind.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KindLatencies {
    /// Reads.
    pub reads: Vec<u64>,
    /// Writes.
    pub writes: Vec<u64>,
    /// Trims.
    pub trims: Vec<u64>,
}

impl ReplayReport {
    /// Writes that failed or were refused: any makes a replay's result unusable.
    pub fn failed_writes(&self) -> u64 {
        self.writes.failed + self.rejected_requests
    }
}

/// A flash array under an FTL, with the array reachable beside it (to advance virtual
/// time to an arrival and read its utilizations).
pub struct FtlReplay {
    ftl: Ftl,
    array: SharedArray,
}

/// The array, shared by the FTL (as its backend) and the replayer.
#[derive(Clone)]
struct SharedArray {
    array: Arc<Mutex<FlashArray>>,
    config: FlashConfig,
}

impl SharedArray {
    fn lock(&self) -> MutexGuard<'_, FlashArray> {
        self.array.lock().expect("flash array lock")
    }
}

impl FlashBackend for SharedArray {
    fn config(&self) -> &FlashConfig {
        &self.config
    }
    fn host_spare_bytes(&self) -> usize {
        self.lock().host_spare_bytes()
    }
    fn keeps_data(&self) -> bool {
        self.lock().keeps_data()
    }
    fn clock(&self) -> Arc<dyn flashpipe_device::Clock> {
        self.lock().shared_clock()
    }
    fn now_ns(&self) -> u64 {
        self.lock().now_ns()
    }
    fn submit(&mut self, request: FlashRequest) -> Result<(), SubmitError> {
        self.lock().submit(request)
    }
    fn poll_acks(&mut self, acks: &mut Vec<Ack>) -> usize {
        self.lock().poll_acks(acks)
    }
    fn wait_acks(&mut self, acks: &mut Vec<Ack>) -> usize {
        self.lock().wait_acks(acks)
    }
    fn factory_bad_without_data(&self, address: FlashAddress) -> bool {
        self.lock().is_factory_bad(address)
    }
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }
}

impl FtlReplay {
    /// A timing-only array of `config` (seeded with `seed`) under a freshly formatted FTL
    /// with `ftl_options`; its queue depth is raised to [`OPEN_LOOP_OUTSTANDING_LIMIT`]
    /// so that the replayer alone bounds what is outstanding.
    pub fn format(
        config: FlashConfig,
        seed: u64,
        ftl_options: FtlOptions,
    ) -> Result<FtlReplay, ReplayError> {
        let array = FlashArray::new(
            config.clone(),
            FlashOptions {
                seed,
                storage: StorageMode::TimingOnly,
                ..FlashOptions::default()
            },
        )?;
        let array = SharedArray {
            array: Arc::new(Mutex::new(array)),
            config,
        };
        let options = FtlOptions {
            queue_depth: OPEN_LOOP_OUTSTANDING_LIMIT,
            ..ftl_options
        };
        let ftl = Ftl::format(Box::new(array.clone()) as Box<dyn FlashBackend>, options)?;
        Ok(FtlReplay { ftl, array })
    }

    /// The FTL (for its statistics and device description).
    pub fn ftl(&self) -> &Ftl {
        &self.ftl
    }

    /// Replays `requests` (sorted by arrival, within the trace limits, as the parsers
    /// give them) and reports.
    pub fn run(
        &mut self,
        requests: &[TraceRequest],
        options: &ReplayOptions,
    ) -> Result<ReplayReport, ReplayError> {
        options.check()?;
        assert!(
            requests
                .windows(2)
                .all(|pair| pair[0].arrival_ns <= pair[1].arrival_ns),
            "replay takes requests sorted by arrival only (the parsers sort or refuse)"
        );
        let layout = PageLayout::of(&self.ftl);
        let mut written = PageBitmap::new(layout.logical_pages);
        let precondition_pages_written = match options.unwritten_reads {
            UnwrittenReads::Zero => 0,
            UnwrittenReads::Precondition => {
                self.precondition_read_footprint(requests, &layout, &mut written)?
            }
        };
        self.ftl.run_until_quiet();
        let stats_before = self.ftl.stats();
        self.array.lock().reset_stats();
        let mut run = Run::new(requests, options, layout, self.array.lock().now_ns());
        run.written = written;
        self.drive(&mut run)?;
        let collection = CollectionSummary::of(&self.ftl.stats().since(&stats_before));
        let array_stats = self.array.lock().stats();
        Ok(run.report(
            collection,
            array_stats.die_utilization,
            array_stats.channel_utilization,
            precondition_pages_written,
        ))
    }

    /// Writes every page the trace reads, in runs of consecutive pages; returns the count.
    fn precondition_read_footprint(
        &mut self,
        requests: &[TraceRequest],
        layout: &PageLayout,
        written: &mut PageBitmap,
    ) -> Result<u64, ReplayError> {
        let mut footprint = PageBitmap::new(layout.logical_pages);
        for request in requests
            .iter()
            .filter(|request| request.kind == AccessKind::Read)
        {
            let pages = layout.pages_of(request);
            for page in pages.first..pages.first + pages.count {
                footprint.set(page);
            }
        }
        let mut runs = Vec::new();
        let mut page = 0;
        while page < layout.logical_pages {
            if !footprint.get(page) {
                page += 1;
                continue;
            }
            let first = page;
            while page < layout.logical_pages
                && footprint.get(page)
                && page - first < PRECONDITION_PAGES_PER_REQUEST
            {
                written.set(page);
                page += 1;
            }
            runs.push((first, page - first));
        }
        let total: u64 = runs.iter().map(|&(_, count)| count).sum();
        let mut in_flight = 0usize;
        let mut completions = Vec::new();
        let mut buffers = BufferShelf::default();
        for (index, &(first_block, count)) in runs.iter().enumerate() {
            while in_flight >= 256 {
                in_flight -= self.reap_blocking(&mut completions, &mut buffers)?;
            }
            let buffer = buffers.take((count * layout.page_bytes) as usize);
            let request = Request {
                tag: index as u64,
                operation: Operation::Write {
                    first_block,
                    buffer,
                },
            };
            self.ftl
                .submit(request)
                .map_err(|rejected| ReplayError::Stalled {
                    outstanding: in_flight,
                    detail: format!("preconditioning write refused: {}", rejected.error),
                })?;
            in_flight += 1;
        }
        while in_flight > 0 {
            in_flight -= self.reap_blocking(&mut completions, &mut buffers)?;
        }
        Ok(total)
    }

    /// Waits for at least one completion and shelves the buffers; returns the count.
    fn reap_blocking(
        &mut self,
        completions: &mut Vec<Completion>,
        buffers: &mut BufferShelf,
    ) -> Result<usize, ReplayError> {
        completions.clear();
        let count =
            self.ftl
                .wait_completions(completions)
                .map_err(|error| ReplayError::Stalled {
                    outstanding: self.ftl.in_flight(),
                    detail: error.to_string(),
                })?;
        for completion in completions.drain(..) {
            if let Err(error) = completion.status {
                return Err(ReplayError::Stalled {
                    outstanding: self.ftl.in_flight(),
                    detail: format!("preconditioning write failed: {error}"),
                });
            }
            buffers.give_back(completion.buffer);
        }
        Ok(count)
    }

    /// The event loop: admit arrivals, issue within the bound, reap, advance time.
    fn drive(&mut self, run: &mut Run) -> Result<(), ReplayError> {
        let mut completions = Vec::new();
        loop {
            let now_ns = self.array.lock().now_ns();
            run.admit_arrivals(now_ns);
            while let Some(request) = run.next_to_issue(now_ns) {
                if let Err(rejected) = self.ftl.submit(request) {
                    run.rejected(rejected.request.tag, rejected.request.operation);
                }
            }
            completions.clear();
            self.ftl.poll_completions(&mut completions);
            let now_ns = self.array.lock().now_ns();
            for completion in completions.drain(..) {
                run.completed(completion, now_ns);
            }
            if run.finished() {
                return Ok(());
            }
            let next_arrival_ns = run.next_arrival_ns();
            let next_event_ns = self.array.lock().next_event_ns();
            match (next_event_ns, next_arrival_ns) {
                (Some(event_ns), Some(arrival_ns)) => {
                    self.array.lock().run_until(event_ns.min(arrival_ns));
                }
                (Some(event_ns), None) => self.array.lock().run_until(event_ns),
                (None, Some(arrival_ns)) => self.array.lock().run_until(arrival_ns),
                (None, None) if run.outstanding() > 0 => {
                    return Err(self.stalled(run));
                }
                (None, None) => {}
            }
        }
    }

    /// The error for requests the FTL holds with nothing left to happen in the array.
    fn stalled(&mut self, run: &Run) -> ReplayError {
        let mut completions = Vec::new();
        let detail = match self.ftl.wait_completions(&mut completions) {
            Err(error) => error.to_string(),
            Ok(_) => self.ftl.describe_state(),
        };
        ReplayError::Stalled {
            outstanding: run.outstanding(),
            detail,
        }
    }
}

/// The FTL device's page size and capacity, and how a byte range maps to its pages.
#[derive(Debug, Clone, Copy)]
struct PageLayout {
    page_bytes: u64,
    logical_pages: u64,
}

/// The pages one request covers.
#[derive(Debug, Clone, Copy)]
struct PageRange {
    first: u64,
    count: u64,
    wrapped: bool,
    partial: bool,
}

impl PageLayout {
    fn of(ftl: &Ftl) -> PageLayout {
        let info = ftl.info();
        PageLayout {
            page_bytes: u64::from(info.block_size_bytes),
            logical_pages: info.block_count,
        }
    }

    fn pages_of(&self, request: &TraceRequest) -> PageRange {
        let first = request.offset_bytes / self.page_bytes;
        let end = (request.offset_bytes + request.length_bytes).div_ceil(self.page_bytes);
        let count = (end - first).clamp(1, self.logical_pages);
        let partial = request.offset_bytes % self.page_bytes != 0
            || request.length_bytes % self.page_bytes != 0;
        if first + count <= self.logical_pages {
            return PageRange {
                first,
                count,
                wrapped: false,
                partial,
            };
        }
        let wrapped_first = (first % self.logical_pages).min(self.logical_pages - count);
        PageRange {
            first: wrapped_first,
            count,
            wrapped: true,
            partial,
        }
    }
}

/// One bit per logical page.
struct PageBitmap {
    words: Vec<u64>,
}

impl PageBitmap {
    fn new(pages: u64) -> PageBitmap {
        PageBitmap {
            words: vec![0; pages.div_ceil(64) as usize],
        }
    }
    fn get(&self, page: u64) -> bool {
        self.words[(page / 64) as usize] >> (page % 64) & 1 == 1
    }
    fn set(&mut self, page: u64) {
        self.words[(page / 64) as usize] |= 1 << (page % 64);
    }
    fn clear(&mut self, page: u64) {
        self.words[(page / 64) as usize] &= !(1 << (page % 64));
    }
}

/// Buffers handed back by completions, reused for the next requests.
#[derive(Default)]
struct BufferShelf {
    free: Vec<IoBuf>,
}

impl BufferShelf {
    /// Most buffers kept for reuse.
    const KEPT_MAX: usize = 1024;

    fn take(&mut self, length_bytes: usize) -> IoBuf {
        match self.free.pop() {
            Some(mut buffer) if buffer.capacity() >= length_bytes => {
                buffer.set_len(length_bytes);
                buffer
            }
            _ => IoBuf::zeroed(length_bytes),
        }
    }

    fn give_back(&mut self, buffer: Option<IoBuf>) {
        if let Some(buffer) = buffer.filter(|buffer| buffer.capacity() > 0) {
            if self.free.len() < Self::KEPT_MAX {
                self.free.push(buffer);
            }
        }
    }
}

/// A request issued and not completed.
#[derive(Debug, Clone, Copy)]
struct Outstanding {
    kind: AccessKind,
    /// Where its latency starts: arrival (open loop) or issue (closed loop).
    latency_from_ns: u64,
    length_bytes: u64,
}

/// The state of one replay: arrivals, the wait queue, requests in flight, results.
struct Run<'a> {
    requests: &'a [TraceRequest],
    layout: PageLayout,
    open_loop: bool,
    bound: usize,
    speed: f64,
    start_ns: u64,
    first_arrival_ns: u64,
    next_index: usize,
    /// Arrived (open loop) or all (closed loop) and not yet issued, with arrival times.
    waiting: std::collections::VecDeque<(usize, u64)>,
    in_flight: std::collections::HashMap<u64, Outstanding>,
    buffers: BufferShelf,
    written: PageBitmap,
    latencies: KindLatencies,
    failed: [u64; 3],
    bytes: [u64; 3],
    rejected: u64,
    unwritten_read_requests: u64,
    unwritten_read_pages: u64,
    wrapped_requests: u64,
    partial_page_requests: u64,
    bound_hits: u64,
    bound_wait_ns_total: u64,
    outstanding_max: usize,
    last_completion_ns: u64,
    throughput: Vec<(u64, u64)>,
}

fn kind_index(kind: AccessKind) -> usize {
    match kind {
        AccessKind::Read => 0,
        AccessKind::Write => 1,
        AccessKind::Trim => 2,
    }
}

impl<'a> Run<'a> {
    fn new(
        requests: &'a [TraceRequest],
        options: &ReplayOptions,
        layout: PageLayout,
        start_ns: u64,
    ) -> Run<'a> {
        let open_loop = matches!(options.replay_loop, ReplayLoop::Open { .. });
        let mut run = Run {
            requests,
            layout,
            open_loop,
            bound: options.outstanding_bound() as usize,
            speed: options.speed,
            start_ns,
            first_arrival_ns: requests.first().map_or(0, |request| request.arrival_ns),
            next_index: 0,
            waiting: std::collections::VecDeque::new(),
            in_flight: std::collections::HashMap::new(),
            buffers: BufferShelf::default(),
            written: PageBitmap::new(0),
            latencies: KindLatencies::default(),
            failed: [0; 3],
            bytes: [0; 3],
            rejected: 0,
            unwritten_read_requests: 0,
            unwritten_read_pages: 0,
            wrapped_requests: 0,
            partial_page_requests: 0,
            bound_hits: 0,
            bound_wait_ns_total: 0,
            outstanding_max: 0,
            last_completion_ns: start_ns,
            throughput: Vec::new(),
        };
        if !open_loop {
            run.waiting = (0..requests.len()).map(|index| (index, start_ns)).collect();
            run.next_index = requests.len();
        }
        run
    }

    /// The virtual instant request `index` arrives (open loop).
    fn arrival_ns(&self, index: usize) -> u64 {
        let offset_ns = self.requests[index].arrival_ns - self.first_arrival_ns;
        self.start_ns + (offset_ns as f64 / self.speed).round() as u64
    }

    fn admit_arrivals(&mut self, now_ns: u64) {
        while self.next_index < self.requests.len() {
            let arrival_ns = self.arrival_ns(self.next_index);
            if arrival_ns > now_ns {
                break;
            }
            if self.in_flight.len() + self.waiting.len() >= self.bound {
                self.bound_hits += 1;
            }
            self.waiting.push_back((self.next_index, arrival_ns));
            self.next_index += 1;
        }
    }

    /// The next request to hand the FTL now, if the bound allows one.
    fn next_to_issue(&mut self, now_ns: u64) -> Option<Request> {
        if self.in_flight.len() >= self.bound {
            return None;
        }
        let (index, arrival_ns) = self.waiting.pop_front()?;
        self.bound_wait_ns_total += now_ns - arrival_ns;
        let request = self.requests[index];
        let pages = self.layout.pages_of(&request);
        self.wrapped_requests += u64::from(pages.wrapped);
        self.partial_page_requests += u64::from(pages.partial);
        let page_bytes = self.layout.page_bytes as usize;
        let operation = match request.kind {
            AccessKind::Read => {
                let unwritten = (pages.first..pages.first + pages.count)
                    .filter(|&page| !self.written.get(page))
                    .count() as u64;
                self.unwritten_read_pages += unwritten;
                self.unwritten_read_requests += u64::from(unwritten > 0);
                Operation::Read {
                    first_block: pages.first,
                    buffer: self.buffers.take(pages.count as usize * page_bytes),
                }
            }
            AccessKind::Write => {
                (pages.first..pages.first + pages.count).for_each(|page| self.written.set(page));
                Operation::Write {
                    first_block: pages.first,
                    buffer: self.buffers.take(pages.count as usize * page_bytes),
                }
            }
            AccessKind::Trim => {
                (pages.first..pages.first + pages.count).for_each(|page| self.written.clear(page));
                Operation::Trim {
                    first_block: pages.first,
                    block_count: pages.count,
                }
            }
        };
        let latency_from_ns = if self.open_loop { arrival_ns } else { now_ns };
        self.in_flight.insert(
            index as u64,
            Outstanding {
                kind: request.kind,
                latency_from_ns,
                length_bytes: request.length_bytes,
            },
        );
        self.outstanding_max = self.outstanding_max.max(self.in_flight.len());
        Some(Request {
            tag: index as u64,
            operation,
        })
    }

    fn rejected(&mut self, tag: u64, operation: Operation) {
        let outstanding = self
            .in_flight
            .remove(&tag)
            .expect("a refused request was issued");
        self.rejected += 1;
        self.failed[kind_index(outstanding.kind)] += 1;
        if let Operation::Read { buffer, .. } | Operation::Write { buffer, .. } = operation {
            self.buffers.give_back(Some(buffer));
        }
    }

    fn completed(&mut self, completion: Completion, now_ns: u64) {
        let outstanding = self
            .in_flight
            .remove(&completion.tag)
            .expect("a completion for an issued request");
        let kind = kind_index(outstanding.kind);
        if completion.status.is_err() {
            self.failed[kind] += 1;
        }
        self.bytes[kind] += outstanding.length_bytes;
        let latency_ns = now_ns - outstanding.latency_from_ns;
        match outstanding.kind {
            AccessKind::Read => self.latencies.reads.push(latency_ns),
            AccessKind::Write => self.latencies.writes.push(latency_ns),
            AccessKind::Trim => self.latencies.trims.push(latency_ns),
        }
        self.last_completion_ns = self.last_completion_ns.max(now_ns);
        if outstanding.kind != AccessKind::Trim {
            self.throughput.push((now_ns, outstanding.length_bytes));
        }
        self.buffers.give_back(completion.buffer);
    }

    fn outstanding(&self) -> usize {
        self.in_flight.len()
    }

    fn finished(&self) -> bool {
        self.next_index == self.requests.len()
            && self.waiting.is_empty()
            && self.in_flight.is_empty()
    }

    /// The next arrival the loop must wake for (open loop).
    fn next_arrival_ns(&self) -> Option<u64> {
        (self.next_index < self.requests.len()).then(|| self.arrival_ns(self.next_index))
    }

    fn report(
        mut self,
        collection: CollectionSummary,
        die_utilization: Vec<f64>,
        channel_utilization: Vec<f64>,
        precondition_pages_written: u64,
    ) -> ReplayReport {
        let elapsed_ns = (self.last_completion_ns - self.start_ns).max(1);
        let trace_span_ns = self
            .requests
            .len()
            .checked_sub(1)
            .map_or(0, |last| self.arrival_ns(last) - self.start_ns);
        let interval_ns = elapsed_ns.div_ceil(THROUGHPUT_BUCKETS).max(1);
        let mut throughput_bytes = vec![0u64; THROUGHPUT_BUCKETS as usize];
        for &(at_ns, bytes) in &self.throughput {
            let bucket = ((at_ns - self.start_ns) / interval_ns).min(THROUGHPUT_BUCKETS - 1);
            throughput_bytes[bucket as usize] += bytes;
        }
        let summary = |latencies: &mut Vec<u64>, failed: u64, bytes: u64| {
            summarize(latencies, failed, bytes, elapsed_ns)
        };
        let mut all_latencies: Vec<u64> = [
            &self.latencies.reads,
            &self.latencies.writes,
            &self.latencies.trims,
        ]
        .into_iter()
        .flatten()
        .copied()
        .collect();
        let all = summary(
            &mut all_latencies,
            self.failed.iter().sum(),
            self.bytes.iter().sum(),
        );
        let reads = summary(&mut self.latencies.reads, self.failed[0], self.bytes[0]);
        let writes = summary(&mut self.latencies.writes, self.failed[1], self.bytes[1]);
        let trims = summary(&mut self.latencies.trims, self.failed[2], self.bytes[2]);
        ReplayReport {
            requests: self.requests.len() as u64,
            reads,
            writes,
            trims,
            all,
            rejected_requests: self.rejected,
            unwritten_read_requests: self.unwritten_read_requests,
            unwritten_read_pages: self.unwritten_read_pages,
            precondition_pages_written,
            wrapped_requests: self.wrapped_requests,
            partial_page_requests: self.partial_page_requests,
            outstanding_bound_hits: self.bound_hits,
            outstanding_bound_wait_us_total: if self.open_loop {
                self.bound_wait_ns_total as f64 / 1000.0
            } else {
                0.0
            },
            outstanding_max: self.outstanding_max as u64,
            elapsed_ns,
            trace_span_ns,
            collection,
            die_utilization,
            channel_utilization,
            logical_pages: self.layout.logical_pages,
            page_bytes: self.layout.page_bytes,
            throughput_bytes,
            throughput_interval_ns: interval_ns,
            latencies_ns: self.latencies,
        }
    }
}

/// Sorts `latencies_ns` in place and summarizes them (nearest-rank percentiles).
fn summarize(latencies_ns: &mut [u64], failed: u64, bytes: u64, elapsed_ns: u64) -> KindSummary {
    latencies_ns.sort_unstable();
    let count = latencies_ns.len();
    let megabytes_per_second = bytes as f64 / (elapsed_ns as f64 / 1e9) / 1e6;
    if count == 0 {
        return KindSummary {
            failed,
            megabytes_per_second,
            ..KindSummary::default()
        };
    }
    let percentile = |fraction: f64| {
        let rank = ((count as f64 * fraction).ceil() as usize).clamp(1, count);
        latencies_ns[rank - 1] as f64 / 1000.0
    };
    let total_ns: u128 = latencies_ns.iter().map(|&value| u128::from(value)).sum();
    KindSummary {
        count: count as u64,
        failed,
        bytes,
        megabytes_per_second,
        latency_us_mean: total_ns as f64 / count as f64 / 1000.0,
        latency_us_p50: percentile(0.5),
        latency_us_p99: percentile(0.99),
        latency_us_p999: percentile(0.999),
        latency_us_max: latencies_ns[count - 1] as f64 / 1000.0,
    }
}
