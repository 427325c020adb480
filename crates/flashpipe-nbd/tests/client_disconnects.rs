//! Connections cut at seeded random points: a proxy between the client and `qemu-nbd`
//! (on a raw file) ends each connection after a drawn number of bytes (in either
//! direction, so mid-request, mid-reply and mid-handshake) and delivers what it passes in
//! fragments of drawn sizes, while a random workload of writes and reads runs with many
//! requests in flight. The server stays up, so every write must complete and every read
//! must match the model: the client reconnects through the proxy and re-issues whatever
//! was not answered, over one connection and over four (multi-conn, each connection
//! cut and recovered on its own). A failure prints its seed.
//!
//! Not `nbdkit`: version 1.32.5 (Debian's) aborts on an assertion (`raw_send_socket:
//! sock >= 0`) when connections are cut this way mid-request, which would end the test's
//! server, not test the client.

mod client_support;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use client_support::{have, zero_file, AcceptLoop, Scratch, Server};
use flashpipe_device::{BlockDevice, Completion, IoBuf, Request, SplitMix64};
use flashpipe_nbd::client::{NbdDevice, NbdDeviceConfig, NbdUri, ReconnectDurability};

const BLOCK: usize = 4096;
const BLOCKS: u64 = 2048;

/// A proxy that cuts every connection after a drawn number of bytes.
struct CuttingProxy {
    accepting: AcceptLoop,
}

/// Copies `from` to `to` until the shared budget runs out, then cuts the client's side
/// at once and half-closes the server's, so the server sees an ordinary end of the
/// connection; the server-to-client pump (`drain_after_cut`) then reads and drops what
/// the server still sends until it closes.
fn pump(
    (mut from, mut to): (UnixStream, UnixStream),
    budget: Arc<AtomicI64>,
    (client, server): (UnixStream, UnixStream),
    drain_after_cut: bool,
    fragment_seed: u64,
) {
    let mut buffer = vec![0u8; 64 << 10];
    let mut fragments = SplitMix64::new(fragment_seed);
    loop {
        let read = match from.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        let left = budget.fetch_sub(read as i64, Ordering::SeqCst);
        let allowed = left.clamp(0, read as i64) as usize;
        if write_in_fragments(&mut to, &buffer[..allowed], &mut fragments).is_err() {
            break;
        }
        if allowed < read {
            break;
        }
    }
    budget.store(i64::MIN / 2, Ordering::SeqCst);
    let _ = client.shutdown(std::net::Shutdown::Both);
    let _ = server.shutdown(std::net::Shutdown::Write);
    if drain_after_cut {
        while matches!(from.read(&mut buffer), Ok(read) if read > 0) {}
    }
}

/// Writes `bytes` in pieces of 1 to 4096 bytes (headers and payloads split at drawn
/// points, so the client reassembles every message from fragments), yielding between
/// some pieces.
fn write_in_fragments(
    to: &mut UnixStream,
    bytes: &[u8],
    fragments: &mut SplitMix64,
) -> std::io::Result<()> {
    let mut rest = bytes;
    while !rest.is_empty() {
        let piece = (1 + fragments.below(4096) as usize).min(rest.len());
        to.write_all(&rest[..piece])?;
        rest = &rest[piece..];
        if fragments.chance(0.05) {
            std::thread::yield_now();
        }
    }
    Ok(())
}

impl CuttingProxy {
    fn start(
        folder: &Path,
        upstream: PathBuf,
        seed: u64,
        budget_range: (u64, u64),
    ) -> CuttingProxy {
        let mut generator = SplitMix64::new(seed);
        let accepting = AcceptLoop::start(folder.join("proxy.sock"), move |client| {
            let Ok(server) = UnixStream::connect(&upstream) else {
                return;
            };
            let budget = budget_range.0 + generator.below(budget_range.1 - budget_range.0);
            let fragment_seed = generator.next_u64();
            let budget = Arc::new(AtomicI64::new(budget as i64));
            let clone = |stream: &UnixStream| stream.try_clone().unwrap();
            let ends = || (clone(&client), clone(&server));
            let (upward, downward) = (
                (clone(&client), clone(&server)),
                (clone(&server), clone(&client)),
            );
            let (upward_ends, downward_ends) = (ends(), ends());
            let upward_budget = Arc::clone(&budget);
            std::thread::spawn(move || {
                pump(upward, upward_budget, upward_ends, false, fragment_seed)
            });
            std::thread::spawn(move || pump(downward, budget, downward_ends, true, !fragment_seed));
            drop((client, server));
        });
        CuttingProxy { accepting }
    }
}

fn fill(buffer: &mut [u8], generator: &mut SplitMix64) {
    for chunk in buffer.chunks_mut(8) {
        let bytes = generator.next_u64().to_le_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
}

fn reap_all(device: &mut NbdDevice, seed: u64) -> Vec<Completion> {
    let mut completions = Vec::new();
    while device.in_flight() > 0 {
        device
            .wait_completions(&mut completions)
            .unwrap_or_else(|error| panic!("seed {seed}: wait: {error}"));
    }
    completions
}

fn run_workload(device: &mut NbdDevice, seed: u64) {
    let mut generator = SplitMix64::new(seed ^ 0x5eed);
    let mut model = vec![0u8; BLOCKS as usize * BLOCK];
    for round in 0..30 {
        let mut written: Vec<(u64, u64)> = Vec::new();
        for tag in 0..16u64 {
            let blocks = 1 + generator.below(16);
            let first = generator.below(BLOCKS - blocks + 1);
            if written
                .iter()
                .any(|&(start, end)| first < end && start < first + blocks)
            {
                continue;
            }
            written.push((first, first + blocks));
            let mut buffer = IoBuf::zeroed(blocks as usize * BLOCK);
            fill(&mut buffer, &mut generator);
            let start = first as usize * BLOCK;
            model[start..start + buffer.len()].copy_from_slice(&buffer);
            device.submit(Request::write(tag, first, buffer)).unwrap();
        }
        if round % 5 == 4 {
            device.submit(Request::flush(99)).unwrap();
        }
        for completion in reap_all(device, seed) {
            assert!(
                completion.status.is_ok(),
                "seed {seed} round {round}: tag {} failed: {:?}",
                completion.tag,
                completion.status
            );
        }
        let mut reads = Vec::new();
        for tag in 0..16u64 {
            let blocks = 1 + generator.below(16);
            let first = generator.below(BLOCKS - blocks + 1);
            reads.push(first);
            device
                .submit(Request::read(
                    tag,
                    first,
                    IoBuf::zeroed(blocks as usize * BLOCK),
                ))
                .unwrap();
        }
        for completion in reap_all(device, seed) {
            assert!(
                completion.status.is_ok(),
                "seed {seed}: read failed: {:?}",
                completion.status
            );
            let buffer = completion.buffer.unwrap();
            let start = reads[completion.tag as usize] as usize * BLOCK;
            assert!(
                buffer[..] == model[start..start + buffer.len()],
                "seed {seed} round {round}: read of tag {} differs from the model",
                completion.tag
            );
        }
    }
}

#[test]
fn connections_cut_at_random_points_lose_nothing() {
    if !have("qemu-nbd") {
        return;
    }
    for (seed, connections) in [(1u64, 1u32), (2, 1), (3, 4)] {
        let scratch = Scratch::new("cuts");
        let image = scratch.path.join("disk.img");
        zero_file(&image, BLOCKS * BLOCK as u64);
        let server = Server::start(
            "qemu-nbd",
            &[
                "-k".to_string(),
                scratch.path.join("upstream.sock").display().to_string(),
                "-f".to_string(),
                "raw".to_string(),
                "--persistent".to_string(),
                "--shared=16".to_string(),
                image.display().to_string(),
            ],
            &scratch.path.join("upstream.sock"),
        );
        let proxy = CuttingProxy::start(
            &scratch.path,
            server.socket.clone(),
            seed,
            (16 << 10, 768 << 10),
        );
        let uri = format!("nbd+unix:///?socket={}", proxy.accepting.socket.display());
        let mut config = NbdDeviceConfig::new(NbdUri::parse(&uri).unwrap());
        config.queue_depth = 32;
        config.connections = connections;
        config.reconnect_attempts = 20;
        config.reconnect_first_delay_ms = 2;
        config.reconnect_durability = ReconnectDurability::TrustServer;
        let mut device =
            NbdDevice::open(config).unwrap_or_else(|error| panic!("seed {seed}: open: {error}"));
        run_workload(&mut device, seed);
        let counters = device.counters();
        assert!(
            counters.reconnects > 0,
            "seed {seed}: the proxy cut nothing: {counters:?}"
        );
        eprintln!("seed {seed}, {connections} connection(s): {counters:?}");
        drop(device);
        drop(proxy);
    }
}
