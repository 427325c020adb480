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

mod pages;
mod report;
mod run;
mod throughput;

use flashpipe_device::{BlockDevice, Completion, Operation, Request};
use flashpipe_flash::workload::{AccessKind, TraceRequest};
use flashpipe_flash::{FlashArray, FlashConfig, FlashOptions};
use serde::Serialize;

use crate::backend::{FlashBackend, SharedFlash};
use crate::{Ftl, FtlError, FtlOptions};
use pages::{BufferShelf, PageBitmap, PageLayout};
pub use report::{CollectionSummary, KindLatencies, KindSummary, ReplayReport};
use run::Run;

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
    /// Preconditioning before the replay failed.
    #[error("cannot precondition the FTL before the replay: {0}")]
    Precondition(#[from] crate::PreconditionError),
    /// The source's passes disagreed (a trace file changed while it was replayed).
    #[error("the trace changed while it was replayed: a second pass over it ended early; replay a file nothing writes to")]
    SourceChanged,
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

/// One pass over a replay's requests, in arrival order.
pub type RequestPass<'a> = Box<dyn Iterator<Item = TraceRequest> + 'a>;

/// Where a replay's requests come from: passes over the same requests in arrival order,
/// as many as asked (the open loop reads two at once: one admits arrivals, one issues;
/// `--unwritten-reads precondition` reads one more first). A slice in memory is one; a
/// trace file read again for each pass is another (flashpipe-bench's `sim replay`), so
/// a replay's memory does not grow with its trace.
pub trait ReplaySource {
    /// A new pass from the first request.
    fn pass(&self) -> RequestPass<'_>;
}

impl ReplaySource for [TraceRequest] {
    fn pass(&self) -> RequestPass<'_> {
        Box::new(self.iter().copied())
    }
}

/// A flash array under an FTL, with the array reachable beside it (to advance virtual
/// time to an arrival and read its utilizations).
pub struct FtlReplay {
    ftl: Ftl,
    /// The array, shared by the FTL (as its backend) and the replayer.
    array: SharedFlash<FlashArray>,
    /// Logical pages written (and not trimmed since) by this replayer's runs.
    written: PageBitmap,
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
        let array = FlashArray::new(config.clone(), FlashOptions::timing_only(seed))?;
        let array = SharedFlash::from_box(Box::new(array));
        let options = FtlOptions {
            queue_depth: OPEN_LOOP_OUTSTANDING_LIMIT,
            ..ftl_options
        };
        let ftl = Ftl::format(Box::new(array.clone()) as Box<dyn FlashBackend>, options)?;
        let written = PageBitmap::new(ftl.info().block_count);
        Ok(FtlReplay {
            ftl,
            array,
            written,
        })
    }

    /// The FTL (for its statistics and device description).
    pub fn ftl(&self) -> &Ftl {
        &self.ftl
    }

    /// Brings the freshly formatted FTL to a steady state with
    /// [`crate::precondition`] (its first `fill_share` of logical pages written, then
    /// overwritten at random), and records those pages as written, so that a short trace
    /// replayed next meets garbage collection and reads of the filled pages go to flash.
    /// Refused (by `precondition`) once anything is mapped.
    pub fn precondition(
        &mut self,
        options: &crate::PreconditionOptions,
    ) -> Result<crate::PreconditionReport, ReplayError> {
        let report = crate::precondition(&mut self.ftl, options)?;
        assert!(
            report.filled_pages <= self.ftl.info().block_count,
            "preconditioning fills logical pages of the device only"
        );
        for page in 0..report.filled_pages {
            self.written.set(page);
        }
        Ok(report)
    }

    /// Replays `requests` (sorted by arrival, within the trace limits, as the parsers
    /// give them) and reports. Runs may follow each other on one device (a fill, then the
    /// measured trace): the FTL's state and the record of written pages carry over.
    pub fn run(
        &mut self,
        requests: &[TraceRequest],
        options: &ReplayOptions,
    ) -> Result<ReplayReport, ReplayError> {
        self.run_source(requests, options)
    }

    /// [`Self::run`] over passes of `source` instead of a slice: memory stays bounded
    /// whatever the number of requests (latencies in histograms, no request kept once
    /// issued).
    pub fn run_source<S: ReplaySource + ?Sized>(
        &mut self,
        source: &S,
        options: &ReplayOptions,
    ) -> Result<ReplayReport, ReplayError> {
        options.check()?;
        let layout = PageLayout::of(&self.ftl);
        let mut written = std::mem::replace(&mut self.written, PageBitmap::new(0));
        let precondition_pages_written = match options.unwritten_reads {
            UnwrittenReads::Zero => 0,
            UnwrittenReads::Precondition => {
                self.precondition_read_footprint(source.pass(), &layout, &mut written)?
            }
        };
        self.ftl.run_until_quiet();
        let stats_before = self.ftl.stats();
        self.array.lock().reset_stats();
        let arrivals =
            matches!(options.replay_loop, ReplayLoop::Open { .. }).then(|| source.pass());
        let start_ns = self.array.lock().now_ns();
        let mut run = Run::new(
            source.pass().peekable(),
            arrivals,
            options,
            layout,
            start_ns,
        );
        run.written = written;
        let driven = self.drive(&mut run);
        self.written = std::mem::replace(&mut run.written, PageBitmap::new(0));
        driven?;
        let collection = CollectionSummary::of(&self.ftl.stats().since(&stats_before));
        let array_stats = self.array.lock().stats();
        Ok(run.report(
            collection,
            array_stats.die_utilization,
            array_stats.channel_utilization,
            precondition_pages_written,
        ))
    }

    /// Writes every page the trace reads that is not written yet, in runs of consecutive
    /// pages; returns the count.
    fn precondition_read_footprint(
        &mut self,
        requests: RequestPass<'_>,
        layout: &PageLayout,
        written: &mut PageBitmap,
    ) -> Result<u64, ReplayError> {
        let mut footprint = PageBitmap::new(layout.logical_pages);
        for request in requests.filter(|request| request.kind == AccessKind::Read) {
            let pages = layout.pages_of(&request);
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
            if run.source_changed {
                return Err(ReplayError::SourceChanged);
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
