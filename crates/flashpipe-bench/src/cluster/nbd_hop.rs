//! The NBD hop beside Fig. 7: an emulated `minflash` device under the host FTL, exported by
//! a child `flashpipe nbd serve --export disk=flash:minflash` on loopback, read at queue
//! depth 1 by flashpipe's NBD client in this process. The pages read are written first
//! (reads of never-written sectors would not reach the flash). The child is killed on drop
//! and dies with this process (`PR_SET_PDEATHSIG`); its standard error goes to `nbd.log`.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use flashpipe_base::random::SplitMix64;
use flashpipe_device::{BlockDevice, Completion, IoBuf, Request};
use flashpipe_nbd::client::{NbdDevice, NbdDeviceConfig, NbdUri};

use crate::error::{io_context, io_with, BenchError, BenchErrorKind};
use crate::BenchResult;

/// Pages written before the reads, then read at random.
const FILL_PAGES: u64 = 64;
/// How long the server may take to print its ready line.
const SERVER_READY_TIMEOUT: Duration = Duration::from_secs(30);

/// The server process, killed on drop.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        // A server that ended already makes kill fail harmlessly; wait reaps it either way.
        let _ = self.0.kill();
        let _ = self.0.wait();
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
    let log = std::fs::File::create(log_path)
        .map_err(io_with(format!("creating {}", log_path.display())))?;
    let mut command = Command::new(&program);
    command
        .args([
            "nbd",
            "serve",
            "--export",
            "disk=flash:minflash",
            "--listen",
            "127.0.0.1:0",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log);
    // SAFETY: the closure runs in the child between fork and exec and calls only prctl,
    // which is async-signal-safe; it allocates nothing and touches no lock.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command
        .spawn()
        .map_err(|error| io_context(error, format!("starting {} nbd serve", program.display())))?;
    let stdout = child.stdout.take().expect("stdout was piped");
    let server = Server(child);
    let uri = wait_for_uri(stdout).map_err(|error| {
        BenchError::new(
            BenchErrorKind::Io(std::io::ErrorKind::ConnectionRefused),
            format!(
                "the NBD server ({} nbd serve): {error}; its log: {}",
                program.display(),
                log_path.display()
            ),
        )
    })?;
    Ok((server, uri))
}

/// Reads the server's standard output on a thread of its own until its ready line; the
/// URI of its export.
fn wait_for_uri(stdout: std::process::ChildStdout) -> Result<String, String> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut uri = None;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(rest) = line.strip_prefix("nbd: serving disk at ") {
                uri = rest
                    .split_whitespace()
                    .find(|word| word.starts_with("nbd://"))
                    .map(str::to_string);
            }
            if line.starts_with("nbd: ready") {
                let _ = sender.send(uri.take().ok_or("ready, but no nbd:// URI printed"));
            }
        }
        let _ = sender.send(Err("ended before it was ready"));
    });
    match receiver.recv_timeout(SERVER_READY_TIMEOUT) {
        Ok(result) => result.map_err(str::to_string),
        Err(_) => Err(format!(
            "not ready within {} s",
            SERVER_READY_TIMEOUT.as_secs()
        )),
    }
}
