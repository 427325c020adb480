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
use crate::interface::{Ack, FlashAddress, FlashCommand, FlashRequest, SubmitError};
use crate::stats::{FlashStats, LatencySummary};

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
pub fn run_job(array: &mut FlashArray, job: &SyntheticJob) -> WorkloadReport {
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
/// `queue_depth` in flight; later ones wait).
pub fn replay(
    array: &mut FlashArray,
    requests: Vec<TraceRequest>,
    queue_depth: u32,
) -> WorkloadReport {
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
        let seconds: f64 = fields[3]
            .parse()
            .map_err(|_| error(format!("bad timestamp {:?}", fields[3])))?;
        if fields.len() < 10 || fields[8] != "+" {
            return Err(error(
                "expected `sector + count` after the RWBS field".to_string(),
            ));
        }
        let sector: u64 = fields[7]
            .parse()
            .map_err(|_| error(format!("bad sector {:?}", fields[7])))?;
        let count: u64 = fields[9]
            .parse()
            .map_err(|_| error(format!("bad sector count {:?}", fields[9])))?;
        let time_ns = (seconds * 1e9) as u64;
        let origin = *first_ns.get_or_insert(time_ns);
        requests.push(TraceRequest {
            arrival_ns: time_ns.saturating_sub(origin),
            kind,
            offset_bytes: sector * 512,
            length_bytes: count * 512,
        });
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
        let milliseconds: f64 = fields[0]
            .parse()
            .map_err(|_| error(format!("bad arrival time {:?}", fields[0])))?;
        if !milliseconds.is_finite() || milliseconds < 0.0 {
            return Err(error(format!("bad arrival time {:?}", fields[0])));
        }
        let numbers: Result<Vec<u64>, _> = fields[1..]
            .iter()
            .map(|field| field.parse::<u64>())
            .collect();
        let numbers = numbers.map_err(|_| {
            error(format!(
                "device, block, size and flags must be integers: {line:?}"
            ))
        })?;
        requests.push(TraceRequest {
            arrival_ns: (milliseconds * 1e6) as u64,
            kind: if numbers[3] & 1 == 1 {
                AccessKind::Read
            } else {
                AccessKind::Write
            },
            offset_bytes: numbers[1] * 512,
            length_bytes: numbers[2] * 512,
        });
    }
    Ok(requests)
}
