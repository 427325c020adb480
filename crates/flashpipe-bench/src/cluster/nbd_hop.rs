//! The NBD hop beside Fig. 7: an emulated `minflash` device under the host FTL, exported by
//! a child `flashpipe nbd serve --export disk=flash:minflash` on loopback, read at queue
//! depth 1 by flashpipe's NBD client in this process. The pages read are written first
//! (reads of never-written sectors would not reach the flash). The child is killed on drop
//! and dies with this process (`PR_SET_PDEATHSIG`); its standard error goes to `nbd.log`.

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use flashpipe_base::random::SplitMix64;
use flashpipe_device::{BlockDevice, Completion, IoBuf, Request};
use flashpipe_nbd::client::{NbdDevice, NbdDeviceConfig, NbdUri};

use crate::child;
use crate::error::{io_with, BenchError, BenchErrorKind};
use crate::BenchResult;

/// Pages written before the reads, then read at random.
const FILL_PAGES: u64 = 64;
/// How long the server may take to print its ready line.
const SERVER_READY_TIMEOUT: Duration = Duration::from_secs(30);

/// The server process, killed on drop.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        child::stop(&mut self.0);
    }
}

/// QD1 latencies in microseconds of `page_bytes` reads for `duration` through one NBD hop.
pub fn nbd_read_latencies_us(
    scratch: &Path,
    page_bytes: u32,
    duration: Duration,
    seed: u64,
) -> BenchResult<Vec<f64>> {
    let log_path = scratch.join("nbd.log");
    let (server, uri) = start_server(&log_path)?;
    let failed = |what: String| -> Box<dyn std::error::Error> {
        BenchError::new(
            BenchErrorKind::Io(std::io::ErrorKind::Other),
            format!(
                "the NBD hop: {what}; the server's log: {}",
                log_path.display()
            ),
        )
        .into()
    };
    let parsed = NbdUri::parse(&uri).map_err(|error| failed(format!("{uri}: {error}")))?;
    let mut config = NbdDeviceConfig::new(parsed);
    config.queue_depth = 1;
    let mut device = NbdDevice::open(config).map_err(|error| failed(format!("{uri}: {error}")))?;
    let block_bytes = device.info().block_size_bytes;
    assert!(block_bytes > 0, "a device has blocks");
    if page_bytes % block_bytes != 0 {
        return Err(failed(format!(
            "its block size {block_bytes} does not divide the page size {page_bytes}"
        )));
    }
    let blocks_per_page = u64::from(page_bytes / block_bytes);
    let mut completions = Vec::new();
    for page in 0..FILL_PAGES {
        let buffer = IoBuf::from_slice(&vec![page as u8; page_bytes as usize]);
        one(
            &mut device,
            Request::write(page, page * blocks_per_page, buffer),
            &mut completions,
        )
        .map_err(failed)?;
    }
    let mut random = SplitMix64::new(seed);
    let mut latencies = Vec::new();
    let end = Instant::now() + duration;
    let mut tag = FILL_PAGES;
    while Instant::now() < end {
        let page = random.below(FILL_PAGES);
        let buffer = IoBuf::zeroed(page_bytes as usize);
        let sent = Instant::now();
        one(
            &mut device,
            Request::read(tag, page * blocks_per_page, buffer),
            &mut completions,
        )
        .map_err(failed)?;
        latencies.push(sent.elapsed().as_secs_f64() * 1e6);
        tag += 1;
    }
    drop(device);
    drop(server);
    Ok(latencies)
}

/// Submits `request` and waits for its completion, which must be a success.
fn one(
    device: &mut NbdDevice,
    request: Request,
    completions: &mut Vec<Completion>,
) -> Result<(), String> {
    device
        .submit(request)
        .map_err(|rejected| rejected.error.to_string())?;
    while device.in_flight() > 0 {
        device
            .wait_completions(completions)
            .map_err(|error| error.to_string())?;
    }
    for completion in completions.drain(..) {
        completion
            .status
            .map_err(|error| format!("request {} failed: {error}", completion.tag))?;
    }
    Ok(())
}

fn start_server(log_path: &Path) -> BenchResult<(Server, String)> {
    let program = std::env::current_exe()
        .map_err(io_with("finding the flashpipe binary for the NBD server"))?;
    let mut command = Command::new(&program);
    command.args([
        "nbd",
        "serve",
        "--export",
        "disk=flash:minflash",
        "--listen",
        "127.0.0.1:0",
    ]);
    let mut child = child::spawn_logged(&mut command, log_path, "nbd serve")?;
    let stdout = child.stdout.take().expect("stdout was piped");
    let server = Server(child);
    let mut uri = None;
    let uri = child::wait_until_ready(stdout, SERVER_READY_TIMEOUT, move |line| {
        if let Some(rest) = line.strip_prefix("nbd: serving disk at ") {
            uri = rest
                .split_whitespace()
                .find(|word| word.starts_with("nbd://"))
                .map(str::to_string);
        }
        line.starts_with("nbd: ready")
            .then(|| uri.take().ok_or("ready, but no nbd:// URI printed"))
    })
    .map_err(|error| {
        let who = format!("the NBD server ({} nbd serve)", program.display());
        child::not_ready(&who, &error, log_path)
    })?;
    Ok((server, uri))
}
