//! Workloads for the flash array: fio-like synthetic jobs (sequential or random, read or
//! write, request size, queue depth, hosts) and trace replay (blkparse text output and
//! DiskSim ASCII traces), all driving the raw interface in virtual time.
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

/// Read or write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum AccessKind {
    /// Page reads.
    Read,
    /// Page writes (sequential writes only make sense on erased blocks).
    Write,
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
    /// Checks every option against its limit for an array of `config`.
    pub fn check(&self, config: &FlashConfig) -> Result<(), JobError> {
        let refuse = |field: &'static str, value: u64, limit: String| JobError {
            field,
            value,
            limit,
        };
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
#[derive(Debug, Clone, Copy)]
pub struct Striping {
    channels: u64,
    ways: u64,
    devices: u64,
    pages_per_block: u64,
    blocks_per_way: u64,
}

impl Striping {
    /// The striping of `array` over its first `devices` devices.
    pub fn new(array: &FlashArray, devices: u32) -> Striping {
        let config = array.config();
        Striping {
            channels: u64::from(config.geometry.channels),
            ways: u64::from(config.geometry.ways),
            devices: u64::from(devices.clamp(1, config.geometry.devices)),
            pages_per_block: u64::from(config.geometry.pages_per_block),
            blocks_per_way: u64::from(config.blocks_per_way()),
        }
    }

    /// Logical pages covered.
    pub fn page_count(&self) -> u64 {
        self.channels * self.ways * self.devices * self.pages_per_block * self.blocks_per_way
    }

    /// The address of logical page `logical_page` (wrapping at the capacity).
    pub fn address(&self, logical_page: u64) -> FlashAddress {
        let page = logical_page % self.page_count();
        let channel = page % self.channels;
        let way = (page / self.channels) % self.ways;
        let device = (page / (self.channels * self.ways)) % self.devices;
        let stripe = page / (self.channels * self.ways * self.devices);
        FlashAddress {
            device: device as u32,
            bus: channel as u32,
            chip: way as u32,
            block: (stripe / self.pages_per_block) as u32,
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
    let striping = Striping::new(array, array.config().geometry.devices);
    let stream: RequestStream = Box::new(requests.into_iter());
    drive(array, vec![stream], &striping, queue_depth, true)
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
    let mut latencies_ns = Vec::new();
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
                latencies_ns.push(ack.completed_ns - open.submitted_ns);
            }
        }
    }
    let elapsed_ns = (array.now_ns() - start_ns).max(1);
    let seconds = elapsed_ns as f64 / 1e9;
    let mut recorder = crate::stats::LatencyRecorder::default();
    for &latency_ns in &latencies_ns {
        recorder.record(crate::interface::CommandKind::Read, latency_ns, 0, true);
    }
    let request_stats = FlashStats::new(&recorder, elapsed_ns, Vec::new(), Vec::new(), Vec::new());
    WorkloadReport {
        requests: latencies_ns.len() as u64,
        page_operations,
        failed_page_operations: failed,
        bytes,
        elapsed_ns,
        megabytes_per_second: bytes as f64 / seconds / 1e6,
        requests_per_second: latencies_ns.len() as f64 / seconds,
        request_latency: request_stats.reads,
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

/// A trace line that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{source_name}:{line}: {message}")]
pub struct TraceError {
    /// File name.
    pub source_name: String,
    /// 1-based line.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// Parses blkparse's default text output: queue (`Q`) events become requests
/// (`dev cpu seq time pid Q rwbs sector + count [process]`); other actions, blank lines
/// and the closing summary are skipped.
pub fn parse_blkparse(text: &str, source_name: &str) -> Result<Vec<TraceRequest>, TraceError> {
    let mut requests = Vec::new();
    let mut first_ns = None;
    for (index, line) in text.lines().enumerate() {
        let error = |message: String| TraceError {
            source_name: source_name.to_string(),
            line: index + 1,
            message,
        };
        let fields: Vec<&str> = line.split_whitespace().collect();
        let Some(first) = fields.first() else {
            continue;
        };
        if !is_device_number(first) {
            if line.starts_with("CPU")
                || line.starts_with("Total")
                || line.starts_with(' ')
                || line.starts_with('\t')
            {
                continue;
            }
            return Err(error(format!("not a blkparse event line: {line:?}")));
        }
        if fields.len() < 7 {
            return Err(error(format!(
                "expected at least 7 fields, found {}",
                fields.len()
            )));
        }
        if fields[5] != "Q" {
            continue;
        }
        let rwbs = fields[6];
        let kind = if rwbs.contains('R') {
            AccessKind::Read
        } else if rwbs.contains('W') {
            AccessKind::Write
        } else {
            continue;
        };
        let seconds = parse_trace_time(fields[3], "time", TimeUnit::Seconds).map_err(&error)?;
        if fields.len() < 10 || fields[8] != "+" {
            return Err(error(
                "expected `sector + count` after the RWBS field".to_string(),
            ));
        }
        let sector = parse_trace_integer(fields[7], "sector").map_err(&error)?;
        let count = parse_trace_integer(fields[9], "sector count").map_err(&error)?;
        let time_ns = seconds_to_ns(seconds);
        let origin = *first_ns.get_or_insert(time_ns);
        let request = sectors_to_request(
            time_ns.saturating_sub(origin),
            kind,
            (sector, count),
            &BLKPARSE_FIELDS,
        )
        .map_err(&error)?;
        push_trace_request(&mut requests, request).map_err(&error)?;
    }
    Ok(requests)
}

fn is_device_number(field: &str) -> bool {
    field
        .split_once(',')
        .is_some_and(|(major, minor)| major.parse::<u32>().is_ok() && minor.parse::<u32>().is_ok())
}

/// Parses a DiskSim ASCII trace: `arrival_ms device block size_blocks flags` per line,
/// 512-byte blocks, flag bit 0 set for reads.
pub fn parse_disksim(text: &str, source_name: &str) -> Result<Vec<TraceRequest>, TraceError> {
    let mut requests = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let error = |message: String| TraceError {
            source_name: source_name.to_string(),
            line: index + 1,
            message,
        };
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.is_empty() {
            continue;
        }
        if fields.len() != 5 {
            return Err(error(format!(
                "expected 5 fields (time device block size flags), found {}",
                fields.len()
            )));
        }
        let milliseconds =
            parse_trace_time(fields[0], "arrival time", TimeUnit::Milliseconds).map_err(&error)?;
        let seconds = milliseconds / 1e3;
        parse_trace_integer(fields[1], "device").map_err(&error)?;
        let block = parse_trace_integer(fields[2], "block").map_err(&error)?;
        let size = parse_trace_integer(fields[3], "size").map_err(&error)?;
        let flags = parse_trace_integer(fields[4], "flags").map_err(&error)?;
        let kind = if flags & 1 == 1 {
            AccessKind::Read
        } else {
            AccessKind::Write
        };
        let request =
            sectors_to_request(seconds_to_ns(seconds), kind, (block, size), &DISKSIM_FIELDS)
                .map_err(&error)?;
        push_trace_request(&mut requests, request).map_err(&error)?;
    }
    Ok(requests)
}

/// Checks one trace request against the trace limits: offset, length and arrival time.
pub fn check_trace_request(request: &TraceRequest) -> Result<(), String> {
    if request.length_bytes > MAX_REQUEST_BYTES {
        return Err(format!(
            "request of {} bytes: above the limit of {MAX_REQUEST_BYTES} bytes (256 MiB)",
            request.length_bytes
        ));
    }
    if request.offset_bytes > MAX_TRACE_OFFSET_BYTES {
        return Err(format!(
            "offset {} bytes: above the limit of {MAX_TRACE_OFFSET_BYTES} bytes (1 PiB)",
            request.offset_bytes
        ));
    }
    if request.arrival_ns > seconds_to_ns(MAX_TRACE_ARRIVAL_SECONDS) {
        return Err(format!(
            "arrival {} ns: above the limit of {MAX_TRACE_ARRIVAL_SECONDS} s (30 days)",
            request.arrival_ns
        ));
    }
    Ok(())
}

/// The unit of a trace's time field.
#[derive(Clone, Copy)]
enum TimeUnit {
    Seconds,
    Milliseconds,
}

impl TimeUnit {
    fn per_second(self) -> f64 {
        match self {
            TimeUnit::Seconds => 1.0,
            TimeUnit::Milliseconds => 1e3,
        }
    }

    fn symbol(self) -> &'static str {
        match self {
            TimeUnit::Seconds => "s",
            TimeUnit::Milliseconds => "ms",
        }
    }
}

/// A time of a trace in `unit`: a finite, non-negative decimal number of at most
/// [`MAX_TRACE_ARRIVAL_SECONDS`].
fn parse_trace_time(text: &str, field: &str, unit: TimeUnit) -> Result<f64, String> {
    let value: f64 = text
        .parse()
        .map_err(|_| format!("field `{field}` {text:?}: not a number"))?;
    if !value.is_finite() || value < 0.0 {
        return Err(format!(
            "field `{field}` {text:?}: not a finite non-negative number"
        ));
    }
    let limit = MAX_TRACE_ARRIVAL_SECONDS * unit.per_second();
    if value > limit {
        return Err(format!(
            "field `{field}` {text:?}: above the limit of {limit} {} (30 days)",
            unit.symbol()
        ));
    }
    Ok(value)
}

/// A non-negative integer field of a trace.
fn parse_trace_integer(text: &str, field: &str) -> Result<u64, String> {
    text.parse::<u64>()
        .map_err(|_| format!("field `{field}` {text:?}: not a non-negative integer below 2^64"))
}

/// Whole nanoseconds of a checked time (at most 30 days, so the product is exact enough
/// and far from overflow).
fn seconds_to_ns(seconds: f64) -> u64 {
    assert!(
        (0.0..=MAX_TRACE_ARRIVAL_SECONDS).contains(&seconds),
        "times are checked before conversion"
    );
    (seconds * 1e9) as u64
}

/// The names a trace format gives its position and length fields, for errors.
struct SectorFieldNames {
    position: &'static str,
    count: &'static str,
}

const BLKPARSE_FIELDS: SectorFieldNames = SectorFieldNames {
    position: "sector",
    count: "sector count",
};

const DISKSIM_FIELDS: SectorFieldNames = SectorFieldNames {
    position: "block",
    count: "size",
};

/// A request of `count` 512-byte sectors from `sector`, within the trace limits.
fn sectors_to_request(
    arrival_ns: u64,
    kind: AccessKind,
    (sector, count): (u64, u64),
    names: &SectorFieldNames,
) -> Result<TraceRequest, String> {
    const SECTOR_BYTES: u64 = 512;
    let offset_bytes = sector
        .checked_mul(SECTOR_BYTES)
        .filter(|&offset| offset <= MAX_TRACE_OFFSET_BYTES)
        .ok_or_else(|| {
            format!(
                "field `{}` {sector}: above the limit of {} sectors ({MAX_TRACE_OFFSET_BYTES} bytes, 1 PiB)",
                names.position,
                MAX_TRACE_OFFSET_BYTES / SECTOR_BYTES
            )
        })?;
    let length_bytes = count
        .checked_mul(SECTOR_BYTES)
        .filter(|&length| length <= MAX_REQUEST_BYTES)
        .ok_or_else(|| {
            format!(
                "field `{}` {count}: above the limit of {} sectors ({MAX_REQUEST_BYTES} bytes, 256 MiB)",
                names.count,
                MAX_REQUEST_BYTES / SECTOR_BYTES
            )
        })?;
    let request = TraceRequest {
        arrival_ns,
        kind,
        offset_bytes,
        length_bytes,
    };
    check_trace_request(&request)?;
    Ok(request)
}

fn push_trace_request(
    requests: &mut Vec<TraceRequest>,
    request: TraceRequest,
) -> Result<(), String> {
    if requests.len() >= MAX_TRACE_REQUESTS {
        return Err(format!(
            "more than {MAX_TRACE_REQUESTS} requests: the limit of one trace"
        ));
    }
    requests.push(request);
    Ok(())
}
