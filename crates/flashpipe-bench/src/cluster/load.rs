//! Hosts driving the cluster: one [`HostSession`] per host, each on a thread of its own in
//! this process, sending page reads of random pages of the devices it is given, at a fixed
//! queue depth, for a fixed time; what each host read and, at queue depth 1, each read's
//! latency.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use flashpipe_base::random::SplitMix64;
use flashpipe_base::wait::WaitPolicy;
use flashpipe_cluster::wire::Status;
use flashpipe_cluster_host::loaded::LoadedDescription;
use flashpipe_cluster_host::session::{HostSession, SessionAck, SessionOptions};
use flashpipe_cluster_host::words::status_words;
use flashpipe_flash::{AckStatus, FlashAddress, FlashCommand, FlashGeometry, FlashRequest};

use crate::error::{internal, io_context, BenchError, BenchErrorKind};
use crate::BenchResult;

/// How long the links may take to come up before the first measurement.
const LINK_UP_TIMEOUT: Duration = Duration::from_secs(20);

/// What one host did in one measurement.
#[derive(Debug, Clone, Default)]
pub struct HostTally {
    /// Pages read.
    pub pages: u64,
    /// Seconds from the first request to the last ack.
    pub elapsed_seconds: f64,
    /// Each read's latency in microseconds (kept at queue depth 1 only).
    pub latencies_us: Vec<f64>,
}

/// One host's job: which devices it reads, how many reads in flight, for how long.
#[derive(Debug, Clone)]
pub struct HostJob {
    /// The host (attached to node `host`).
    pub host: u32,
    /// Devices read, each request a random page of one of them.
    pub devices: Vec<u32>,
    /// Reads in flight.
    pub depth: usize,
    /// How long requests are sent.
    pub duration: Duration,
    /// The seed of the addresses.
    pub seed: u64,
}

/// Runs `jobs` at once, one thread per host; their tallies in the jobs' order.
pub fn run_hosts(
    loaded: &LoadedDescription,
    geometry: &FlashGeometry,
    jobs: &[HostJob],
) -> BenchResult<Vec<HostTally>> {
    let results: Vec<Result<HostTally, BenchError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = jobs
            .iter()
            .map(|job| scope.spawn(move || drive(loaded, geometry, job)))
            .collect();
        handles
            .into_iter()
            .map(|handle| {
                handle
                    .join()
                    .unwrap_or_else(|_| Err(internal("a host thread panicked")))
            })
            .collect()
    });
    results
        .into_iter()
        .map(|result| result.map_err(Into::into))
        .collect()
}

/// Reads one page of every device as every host until none is answered `Unreachable`
/// (the nodes' links come up within a few seconds of the last node's start).
pub fn wait_for_links(loaded: &LoadedDescription, hosts: u32, devices: u32) -> BenchResult {
    let deadline = Instant::now() + LINK_UP_TIMEOUT;
    for host in 0..hosts {
        let mut session = open_session(loaded, host, 1)?;
        let mut acks = Vec::new();
        for device in 0..devices {
            loop {
                let request = FlashRequest {
                    tag: 0,
                    host,
                    command: read_command(device, FlashAddressParts::default()),
                };
                session.submit(request).map_err(|error| {
                    internal(format!("host {host} could not send a read: {error}"))
                })?;
                acks.clear();
                while acks.is_empty() {
                    session.wait(&mut acks);
                }
                match &acks[0].ack.status {
                    Status::Unreachable { .. } if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    status => {
                        check_ok(host, &acks[0], status)?;
                        break;
                    }
                }
            }
        }
    }
    Ok(())
}

fn open_session(loaded: &LoadedDescription, host: u32, depth: usize) -> BenchResult<HostSession> {
    let options = SessionOptions {
        in_flight_limit: depth,
        wait: WaitPolicy::spin_us(flashpipe_cluster_host::session::DEFAULT_SPIN_US),
        ..SessionOptions::default()
    };
    HostSession::open(loaded, host, options).map_err(|error| {
        io_context(
            std::io::Error::new(std::io::ErrorKind::ConnectionRefused, error.to_string()),
            format!("host {host} could not connect to its node"),
        )
        .into()
    })
}

fn check_ok(host: u32, ack: &SessionAck, status: &Status) -> Result<(), BenchError> {
    if matches!(status, Status::Flash(AckStatus::Ok { .. })) {
        return Ok(());
    }
    let failure = ack
        .failure
        .as_ref()
        .map_or_else(String::new, |failure| format!(" ({failure})"));
    Err(BenchError::new(
        BenchErrorKind::Io(std::io::ErrorKind::Other),
        format!(
            "host {host}: a read of device {} failed: {}{failure}; the nodes' logs are in the scratch folder",
            ack.device,
            status_words(status)
        ),
    ))
}

/// A page's place on a device, below the device's node id.
#[derive(Debug, Clone, Copy, Default)]
struct FlashAddressParts {
    bus: u32,
    chip: u32,
    block: u32,
    page: u32,
}

fn random_parts(random: &mut SplitMix64, geometry: &FlashGeometry) -> FlashAddressParts {
    let blocks = geometry.dies * geometry.planes * geometry.blocks_per_plane;
    FlashAddressParts {
        bus: random.below(u64::from(geometry.channels)) as u32,
        chip: random.below(u64::from(geometry.ways)) as u32,
        block: random.below(u64::from(blocks)) as u32,
        page: random.below(u64::from(geometry.pages_per_block)) as u32,
    }
}

fn read_command(device: u32, parts: FlashAddressParts) -> FlashCommand {
    FlashCommand::ReadPage {
        address: FlashAddress {
            device,
            bus: parts.bus,
            chip: parts.chip,
            block: parts.block,
            page: parts.page,
        },
    }
}

fn drive(
    loaded: &LoadedDescription,
    geometry: &FlashGeometry,
    job: &HostJob,
) -> Result<HostTally, BenchError> {
    assert!(
        !job.devices.is_empty() && job.depth > 0,
        "a job reads something"
    );
    let mut session = open_session(loaded, job.host, job.depth).map_err(|error| {
        BenchError::new(
            BenchErrorKind::Io(std::io::ErrorKind::ConnectionRefused),
            error.to_string(),
        )
    })?;
    let mut random = SplitMix64::for_case(job.seed, u64::from(job.host));
    let mut sent_at: HashMap<u64, Instant> = HashMap::with_capacity(job.depth);
    let mut tally = HostTally::default();
    let mut acks = Vec::with_capacity(job.depth);
    let mut next_tag = 0u64;
    let start = Instant::now();
    let end = start + job.duration;
    loop {
        let now = Instant::now();
        while now < end && session.in_flight() + session.ready() < job.depth {
            let device = job.devices[random.index_below(job.devices.len())];
            let request = FlashRequest {
                tag: next_tag,
                host: job.host,
                command: read_command(device, random_parts(&mut random, geometry)),
            };
            session.submit(request).map_err(|error| {
                internal(format!("host {} could not send a read: {error}", job.host))
            })?;
            sent_at.insert(next_tag, Instant::now());
            next_tag += 1;
        }
        if sent_at.is_empty() {
            break;
        }
        acks.clear();
        session.wait(&mut acks);
        let answered = Instant::now();
        for ack in &acks {
            check_ok(job.host, ack, &ack.ack.status)?;
            let sent = sent_at.remove(&ack.ack.tag).ok_or_else(|| {
                internal(format!(
                    "host {} got an ack for tag {} it never sent",
                    job.host, ack.ack.tag
                ))
            })?;
            tally.pages += 1;
            if job.depth == 1 {
                tally
                    .latencies_us
                    .push(answered.duration_since(sent).as_secs_f64() * 1e6);
            }
        }
    }
    tally.elapsed_seconds = start.elapsed().as_secs_f64();
    Ok(tally)
}
