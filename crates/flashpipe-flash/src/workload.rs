//! Workloads for the flash array: fio-like synthetic jobs (sequential or random, read or
//! write, request size, queue depth, hosts) and the raw striped trace replay, all driving
//! the raw interface in virtual time; the trace formats are parsed in [`trace`]. Replay
//! through the host FTL (the default of `flashpipe sim replay`) is `flashpipe_ftl::replay`.
//!
//! A host request covers whole pages; logical page `L` lives at a fixed place (the
//! pre-FTL mapping): channel `L % C`, way `(L / C) % W`, device `(L / (C W)) % D`, page
//! `(L / (C W D)) % P`, block `L / (C W D P)`, so sequential writes program each block's
//! pages in order.

use flashpipe_device::SplitMix64;
use serde::Serialize;

use crate::array::FlashArray;
use crate::config::FlashConfig;
use crate::interface::{Ack, FlashAddress, FlashCommand, FlashRequest, SubmitError};
use crate::stats::{FlashStats, LatencySummary};

pub mod trace;

pub use trace::{
    check_trace_request, parse_blkparse, parse_disksim, parse_trace, ParsedTrace, TraceError,
    TraceFormat, TraceOptions, TraceReader, TraceSummary, TraceTimeUnit, MAX_TRACE_LINE_BYTES,
    PLAUSIBLE_MEAN_INTERARRIVAL_NS_MIN, PLAUSIBLE_TRACE_SPAN_SECONDS_MAX,
};

/// Largest host request of a job or trace: 256 MiB, so a request spans fewer than 2^20
/// pages even with the smallest (512-byte) page.
pub const MAX_REQUEST_BYTES: u64 = 1 << 28;
/// Largest byte offset a trace may name: 1 PiB (sector 2^41).
pub const MAX_TRACE_OFFSET_BYTES: u64 = 1 << 50;
/// Latest arrival time a trace may give: 30 days after its first request.
pub const MAX_TRACE_ARRIVAL_SECONDS: f64 = 30.0 * 86_400.0;
/// Most requests one trace may hold.
pub const MAX_TRACE_REQUESTS: usize = 1 << 24;
/// Largest trace file read: 1 GiB.
pub const MAX_TRACE_FILE_BYTES: u64 = 1 << 30;
/// Most requests of a trace streamed from its file (never held in memory at once).
pub const MAX_STREAMED_TRACE_REQUESTS: u64 = 1 << 36;
/// Largest trace file streamed: 1 TiB.
pub const MAX_STREAMED_TRACE_FILE_BYTES: u64 = 1 << 40;
/// Most hosts of a synthetic job.
pub const MAX_JOB_HOSTS: u32 = 1024;
/// Most requests one host of a job keeps in flight.
pub const MAX_JOB_QUEUE_DEPTH: u32 = 4096;
/// Most page operations of a whole job (hosts x requests x pages per request), which keeps
/// the simulator's event counter far from its 2^36 limit.
pub const MAX_JOB_PAGE_OPERATIONS: u64 = 1 << 32;

/// A job option out of its range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("job option `{field}` = {value}: {limit}")]
pub struct JobError {
    /// The option's name.
    pub field: &'static str,
    /// The value given.
    pub value: u64,
    /// The limit it breaks.
    pub limit: String,
}

/// Sequential or random offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum AccessPattern {
    /// Each request follows the previous one (per host, from its own start).
    Sequential,
    /// Each request starts at a random request-aligned offset.
    Random,
}

/// Read, write or trim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum AccessKind {
    /// Page reads.
    Read,
    /// Page writes (sequential writes only make sense on erased blocks).
    Write,
    /// Trims (discards): traces only; the raw striped replay skips and counts them.
    Trim,
}

/// A synthetic job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SyntheticJob {
    /// Offsets.
    pub pattern: AccessPattern,
    /// Reads or writes.
    pub kind: AccessKind,
    /// Bytes per request (rounded up to whole pages).
    pub request_bytes: u64,
    /// Requests each host keeps in flight.
    pub queue_depth: u32,
    /// Hosts issuing (each its own stream).
    pub hosts: u32,
    /// Requests per host.
    pub requests_per_host: u64,
    /// Devices the job spreads over (1..=devices); requests address all of them.
    pub devices: u32,
    /// Seed of the random offsets.
    pub seed: u64,
}

impl SyntheticJob {
    /// `requests` sequential requests of `request_bytes`, one at a time, from one host to
    /// one device.
    pub fn sequential_one_at_a_time(
        kind: AccessKind,
        request_bytes: u64,
        requests: u64,
        seed: u64,
    ) -> SyntheticJob {
        SyntheticJob {
            pattern: AccessPattern::Sequential,
            kind,
            request_bytes,
            queue_depth: 1,
            hosts: 1,
            requests_per_host: requests,
            devices: 1,
            seed,
        }
    }

    /// Checks every option against its limit for an array of `config`.
    pub fn check(&self, config: &FlashConfig) -> Result<(), JobError> {
        let refuse = |field: &'static str, value: u64, limit: String| JobError {
            field,
            value,
            limit,
        };
        if self.kind == AccessKind::Trim {
            return Err(refuse(
                "kind",
                2,
                "a synthetic job reads or writes; trims come from traces".to_string(),
            ));
        }
        if !(1..=MAX_REQUEST_BYTES).contains(&self.request_bytes) {
            return Err(refuse(
                "request_bytes",
                self.request_bytes,
                format!("must be within 1..={MAX_REQUEST_BYTES} (256 MiB)"),
            ));
        }
        let bounded = [
            ("queue_depth", self.queue_depth, MAX_JOB_QUEUE_DEPTH),
            ("hosts", self.hosts, MAX_JOB_HOSTS),
            ("devices", self.devices, config.geometry.devices),
        ];
        for (field, value, maximum) in bounded {
            if !(1..=maximum).contains(&value) {
                return Err(refuse(
                    field,
                    u64::from(value),
                    format!("must be within 1..={maximum}"),
                ));
            }
        }
        let page_bytes = u64::from(config.geometry.page_data_bytes);
        let pages_per_request = self.request_bytes.div_ceil(page_bytes);
        let page_operations = u64::from(self.hosts)
            .checked_mul(self.requests_per_host)
            .and_then(|requests| requests.checked_mul(pages_per_request));
        if page_operations.is_none_or(|operations| operations > MAX_JOB_PAGE_OPERATIONS) {
            return Err(refuse(
                "requests",
                self.requests_per_host,
                format!(
                    "hosts x requests x pages per request must be at most {MAX_JOB_PAGE_OPERATIONS} page operations"
                ),
            ));
        }
        Ok(())
    }
}

/// One host request of a trace or job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceRequest {
    /// Arrival time (open loop); 0 for all in a closed-loop job.
    pub arrival_ns: u64,
    /// Read or write.
    pub kind: AccessKind,
    /// First byte.
    pub offset_bytes: u64,
    /// Length in bytes.
    pub length_bytes: u64,
}

/// The outcome of a job or replay.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkloadReport {
    /// Host requests completed.
    pub requests: u64,
    /// Page operations completed.
    pub page_operations: u64,
    /// Page operations that did not end `Ok`.
    pub failed_page_operations: u64,
    /// Trims of a trace, skipped (the raw array has no trim).
    pub trims_skipped: u64,
    /// Bad blocks (factory or grown) the striping stepped over (the raw trace replay,
    /// as a raw-flash user would); 0 for synthetic jobs, which stripe over every block.
    pub bad_blocks_skipped: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Virtual time from the first submission to the last ack.
    pub elapsed_ns: u64,
    /// Bandwidth in decimal megabytes per second.
    pub megabytes_per_second: f64,
    /// Host requests per second.
    pub requests_per_second: f64,
    /// Latency of whole host requests.
    pub request_latency: LatencySummary,
    /// The array's figures (page latencies, utilizations).
    pub array: FlashStats,
}

/// Maps logical pages to flash addresses by fixed striping.
#[derive(Debug, Clone)]
pub struct Striping {
    channels: u64,
    ways: u64,
    devices: u64,
    pages_per_block: u64,
    blocks_per_way: u64,
    /// Per way (index `(device x channels + channel) x ways + way`), its bad blocks in
    /// ascending order, stepped over; empty when the striping covers every block.
    bad_blocks: Vec<Vec<u32>>,
}

impl Striping {
    /// The striping of `array` over its first `devices` devices, every block included.
    pub fn new(array: &FlashArray, devices: u32) -> Striping {
        let config = array.config();
        Striping {
            channels: u64::from(config.geometry.channels),
            ways: u64::from(config.geometry.ways),
            devices: u64::from(devices.clamp(1, config.geometry.devices)),
            pages_per_block: u64::from(config.geometry.pages_per_block),
            blocks_per_way: u64::from(config.blocks_per_way()),
            bad_blocks: Vec::new(),
        }
    }

    /// The striping of `array` over its first `devices` devices stepping over bad blocks
    /// (factory bad, or grown bad already), as a raw-flash user does: the `k`-th block
    /// of a way is its `k`-th good block, and every way offers as many blocks as the way
    /// with the fewest good ones.
    pub fn skipping_bad_blocks(array: &FlashArray, devices: u32) -> Striping {
        let mut striping = Striping::new(array, devices);
        let blocks_per_way = striping.blocks_per_way as u32;
        let mut fewest_good = blocks_per_way;
        for device in 0..striping.devices as u32 {
            for channel in 0..striping.channels as u32 {
                for way in 0..striping.ways as u32 {
                    let address = |block| FlashAddress {
                        device,
                        bus: channel,
                        chip: way,
                        block,
                        page: 0,
                    };
                    let bad: Vec<u32> = (0..blocks_per_way)
                        .filter(|&block| {
                            array.is_factory_bad(address(block))
                                || array
                                    .block_state(address(block))
                                    .is_some_and(|state| state.grown_bad)
                        })
                        .collect();
                    fewest_good = fewest_good.min(blocks_per_way - bad.len() as u32);
                    striping.bad_blocks.push(bad);
                }
            }
        }
        striping.blocks_per_way = u64::from(fewest_good);
        striping
    }

    /// Bad blocks the striping steps over.
    pub fn bad_blocks_skipped(&self) -> u64 {
        self.bad_blocks.iter().map(|bad| bad.len() as u64).sum()
    }

    /// Logical pages covered.
    pub fn page_count(&self) -> u64 {
        self.channels * self.ways * self.devices * self.pages_per_block * self.blocks_per_way
    }

    /// The address of logical page `logical_page` (wrapping at the capacity). When some
    /// way has no good block at all the capacity is empty and every page maps to a bad
    /// (or missing) block of its way, whose operations fail.
    pub fn address(&self, logical_page: u64) -> FlashAddress {
        let page = logical_page % self.page_count().max(1);
        let channel = page % self.channels;
        let way = (page / self.channels) % self.ways;
        let device = (page / (self.channels * self.ways)) % self.devices;
        let stripe = page / (self.channels * self.ways * self.devices);
        let mut block = (stripe / self.pages_per_block) as u32;
        if !self.bad_blocks.is_empty() {
            let way_index = ((device * self.channels + channel) * self.ways + way) as usize;
            for &bad in &self.bad_blocks[way_index] {
                if bad > block {
                    break;
                }
                block += 1;
            }
        }
        FlashAddress {
            device: device as u32,
            bus: channel as u32,
            chip: way as u32,
            block,
            page: (stripe % self.pages_per_block) as u32,
        }
    }
}

/// A host's requests, generated as they are needed.
type RequestStream = Box<dyn Iterator<Item = TraceRequest>>;

struct OpenHostRequest {
    submitted_ns: u64,
    pages_left: u64,
}

struct HostStream {
    requests: std::iter::Peekable<RequestStream>,
    open: Vec<Option<OpenHostRequest>>,
    free_open_slots: Vec<u64>,
    open_count: usize,
    backlog: std::collections::VecDeque<FlashRequest>,
}

/// Runs `job` on `array` (closed loop: each host keeps `queue_depth` requests in flight).
/// The job must pass [`SyntheticJob::check`].
pub fn run_job(array: &mut FlashArray, job: &SyntheticJob) -> WorkloadReport {
    if let Err(error) = job.check(array.config()) {
        panic!("run_job takes checked jobs only: {error}");
    }
    let striping = Striping::new(array, job.devices);
    let page_bytes = u64::from(array.config().geometry.page_data_bytes);
    let pages_per_request = job.request_bytes.div_ceil(page_bytes).max(1);
    let slots = (striping.page_count() / pages_per_request).max(1);
    let streams: Vec<RequestStream> = (0..job.hosts)
        .map(|host| {
            let start = u64::from(host) * slots / u64::from(job.hosts.max(1));
            let mut generator =
                SplitMix64::new(job.seed ^ u64::from(host).wrapping_mul(0x2545_F491_4F6C_DD1D));
            let job = job.clone();
            let requests = (0..job.requests_per_host).map(move |index| {
                let slot = match job.pattern {
                    AccessPattern::Sequential => (start + index) % slots,
                    AccessPattern::Random => generator.below(slots),
                };
                TraceRequest {
                    arrival_ns: 0,
                    kind: job.kind,
                    offset_bytes: slot * pages_per_request * page_bytes,
                    length_bytes: pages_per_request * page_bytes,
                }
            });
            Box::new(requests) as RequestStream
        })
        .collect();
    drive(array, streams, &striping, job.queue_depth, false)
}

/// Replays `requests` from one host in open loop (each at its arrival time, at most
/// `queue_depth` in flight; later ones wait). Each request must be within the trace limits,
/// as the parsers guarantee ([`check_trace_request`]).
pub fn replay(
    array: &mut FlashArray,
    requests: Vec<TraceRequest>,
    queue_depth: u32,
) -> WorkloadReport {
    assert!(
        requests
            .iter()
            .all(|request| check_trace_request(request).is_ok()),
        "replay takes requests within the trace limits only"
    );
    let striping = Striping::skipping_bad_blocks(array, array.config().geometry.devices);
    let trims_skipped = requests
        .iter()
        .filter(|request| request.kind == AccessKind::Trim)
        .count() as u64;
    let stream: RequestStream = Box::new(
        requests
            .into_iter()
            .filter(|request| request.kind != AccessKind::Trim),
    );
    let mut report = drive(array, vec![stream], &striping, queue_depth, true);
    report.trims_skipped = trims_skipped;
    report.bad_blocks_skipped = striping.bad_blocks_skipped();
    report
}

fn drive(
    array: &mut FlashArray,
    streams: Vec<RequestStream>,
    striping: &Striping,
    queue_depth: u32,
    open_loop: bool,
) -> WorkloadReport {
    array.reset_stats();
    let start_ns = array.now_ns();
    let page_bytes = u64::from(array.config().geometry.page_data_bytes);
    let keeps_data = array.keeps_data();
    let mut hosts: Vec<HostStream> = streams
        .into_iter()
        .map(|requests| HostStream {
            requests: requests.peekable(),
            open: Vec::new(),
            free_open_slots: Vec::new(),
            open_count: 0,
            backlog: std::collections::VecDeque::new(),
        })
        .collect();
    let mut latencies_ns = flashpipe_base::LatencyHistogram::default();
    let mut acks: Vec<Ack> = Vec::new();
    let mut page_operations = 0u64;
    let mut failed = 0u64;
    let mut bytes = 0u64;
    loop {
        let now_ns = array.now_ns();
        for (host_index, host) in hosts.iter_mut().enumerate() {
            while host.open_count < queue_depth as usize {
                let Some(next) = host.requests.peek() else {
                    break;
                };
                if open_loop && start_ns + next.arrival_ns > now_ns {
                    break;
                }
                let request = host.requests.next().expect("peeked");
                open_request(
                    host,
                    host_index as u32,
                    request,
                    striping,
                    page_bytes,
                    keeps_data,
                    now_ns,
                );
            }
            submit_backlog(array, host);
            prefetch_next(array, host, striping, page_bytes);
        }
        acks.clear();
        let moved = array.poll_acks(&mut acks);
        if moved == 0 {
            let next_arrival = hosts
                .iter_mut()
                .filter(|host| host.open_count < queue_depth as usize)
                .filter_map(|host| host.requests.peek())
                .map(|request| start_ns + request.arrival_ns)
                .min();
            let next_event = array.next_event_ns();
            match (next_event, next_arrival) {
                (None, None) => break,
                (Some(event_ns), Some(arrival_ns)) if open_loop && arrival_ns < event_ns => {
                    array.run_until(arrival_ns)
                }
                (None, Some(arrival_ns)) => array.run_until(arrival_ns),
                _ => {
                    array.wait_acks(&mut acks);
                }
            }
        }
        for ack in acks.drain(..) {
            page_operations += 1;
            bytes += page_bytes;
            if !ack.status.is_ok() {
                failed += 1;
            }
            let host = &mut hosts[ack.host as usize];
            let request_id = ack.tag >> 20;
            let entry = &mut host.open[request_id as usize];
            let open = entry.as_mut().expect("an ack for an open request");
            open.pages_left -= 1;
            if open.pages_left == 0 {
                let open = entry.take().expect("present");
                host.free_open_slots.push(request_id);
                host.open_count -= 1;
                latencies_ns.record(ack.completed_ns - open.submitted_ns);
            }
        }
    }
    let elapsed_ns = (array.now_ns() - start_ns).max(1);
    let seconds = elapsed_ns as f64 / 1e9;
    WorkloadReport {
        requests: latencies_ns.count(),
        page_operations,
        failed_page_operations: failed,
        trims_skipped: 0,
        bad_blocks_skipped: 0,
        bytes,
        elapsed_ns,
        megabytes_per_second: bytes as f64 / seconds / 1e6,
        requests_per_second: latencies_ns.count() as f64 / seconds,
        request_latency: LatencySummary::of(&latencies_ns),
        array: array.stats(),
    }
}

fn open_request(
    host: &mut HostStream,
    host_index: u32,
    request: TraceRequest,
    striping: &Striping,
    page_bytes: u64,
    keeps_data: bool,
    now_ns: u64,
) {
    let request_id = host.free_open_slots.pop().unwrap_or_else(|| {
        host.open.push(None);
        (host.open.len() - 1) as u64
    });
    let first_page = request.offset_bytes / page_bytes;
    let last_page = (request.offset_bytes + request.length_bytes.max(1)).div_ceil(page_bytes);
    let pages = last_page - first_page;
    assert!(pages < (1 << 20), "a request spans fewer than 2^20 pages");
    for (index, logical_page) in (first_page..last_page).enumerate() {
        let address = striping.address(logical_page);
        let command = match request.kind {
            AccessKind::Read => FlashCommand::ReadPage { address },
            AccessKind::Trim => unreachable!("trims are filtered out before the raw replay"),
            AccessKind::Write => FlashCommand::WritePage {
                address,
                data: if keeps_data {
                    vec![0xA5; page_bytes as usize]
                } else {
                    Vec::new()
                },
                spare: Vec::new(),
            },
        };
        host.backlog.push_back(FlashRequest {
            tag: request_id << 20 | index as u64,
            host: host_index,
            command,
        });
    }
    host.open[request_id as usize] = Some(OpenHostRequest {
        submitted_ns: now_ns,
        pages_left: pages,
    });
    host.open_count += 1;
}

/// Lets the array bring the block state of the host's next request into the cache while
/// the current ones run (the next submission then finds it there).
fn prefetch_next(array: &FlashArray, host: &mut HostStream, striping: &Striping, page_bytes: u64) {
    let next_offset_bytes = match host.backlog.front() {
        Some(_) => return,
        None => match host.requests.peek() {
            Some(request) => request.offset_bytes,
            None => return,
        },
    };
    array.prefetch_block_state(striping.address(next_offset_bytes / page_bytes));
}

fn submit_backlog(array: &mut FlashArray, host: &mut HostStream) {
    while let Some(request) = host.backlog.pop_front() {
        if let Err(error) = array.submit(request) {
            match error {
                SubmitError::QueueFull { request, .. }
                | SubmitError::UnknownHost { request, .. } => {
                    host.backlog.push_front(*request);
                }
            }
            return;
        }
    }
}
