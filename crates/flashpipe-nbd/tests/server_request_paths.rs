//! The server's two request paths (issue #15's request-path work): a request served on
//! its connection's reader thread when the export's worker is free and the device
//! completes at submission, and a request handed to the worker thread when it is not.
//! A device that completes only when waited on forces every request through the worker
//! (the reader starts it, then wakes the worker to reap); several connections hammering
//! one RAM export at once mix both paths (whoever finds the worker busy hands over).
//! Every reply must come, once, with the right data, whichever path served it.

mod common;

use std::collections::HashMap;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{pattern_bytes, RawClient, TestServer};
use flashpipe_base::wait::MAX_SPIN_US;
use flashpipe_base::WaitPolicy;
use flashpipe_device::{BlockDevice, RamDisk};
use flashpipe_nbd::server::{Export, InitialAllocation, ReaderWindow, ServerLimits};
use flashpipe_nbd::wire::*;
use flashpipe_testkit::hooked::{Hooked, Hooks};

const MIB: u64 = 1 << 20;

/// Completions never ready at a poll, only when waited for: like a device whose hardware
/// completes later.
struct CompletesWhenWaited;

impl Hooks for CompletesWhenWaited {
    fn completes_at_poll(&self) -> bool {
        false
    }
}

fn export_of(device: Box<dyn BlockDevice>) -> Export {
    Export {
        name: "disk".to_string(),
        description: String::new(),
        device,
        read_only: false,
        trim_reads_zeroes: true,
        initial_allocation: InitialAllocation::AllHoles,
    }
}

/// Pipelines FUA writes and a write of zeroes on each client, then reads everything
/// back, pipelined, on another connection after a flush.
fn pipelined_writes_then_reads(server: &TestServer) {
    let mut clients: Vec<_> = [true, false, true]
        .into_iter()
        .map(|structured| RawClient::connect(server.connect_tcp(), "disk", structured))
        .collect();
    for (index, client) in clients.iter_mut().enumerate() {
        client.send_pipelined_writes(index as u64);
    }
    for client in &mut clients {
        let mut cookies: Vec<u64> = (0..17)
            .map(|_| {
                let (cookie, error, _) = client.receive(&HashMap::new());
                assert_eq!(error, 0, "request {cookie} failed");
                cookie
            })
            .collect();
        cookies.sort_unstable();
        let expected: Vec<u64> = (0..16).chain([99]).collect();
        assert_eq!(cookies, expected, "every request answered once");
    }
    let reader = &mut clients[1];
    assert_eq!(reader.request(CMD_FLUSH, 0, 0, 0, &[]).0, 0);
    let mut lengths = HashMap::new();
    for block in 0..48u64 {
        reader.send(CMD_READ, 0, block, block * 8192, 8192, &[]);
        lengths.insert(block, 8192);
    }
    for _ in 0..48 {
        let (cookie, error, data) = reader.receive(&lengths);
        assert_eq!(error, 0);
        assert!(data == pattern_bytes(cookie * 8192, 8192), "block {cookie}");
    }
    assert!(reader.request(CMD_READ, 0, 3 * MIB, MIB as u32, &[]).1 == vec![0u8; MIB as usize]);
}

#[test]
fn a_device_that_completes_later_is_served_through_the_worker() {
    let inner = RamDisk::new("completes when waited", 512, 16384, 8).unwrap();
    let device = Box::new(Hooked::new(inner, CompletesWhenWaited));
    let server = TestServer::with_exports(vec![export_of(device)], ServerLimits::default());
    pipelined_writes_then_reads(&server);
    let mut server = server;
    let devices = server.server.take().unwrap().shutdown();
    assert_eq!(devices.len(), 1, "the worker hands the device back");
}

#[test]
fn a_ram_export_serves_requests_on_the_readers_thread() {
    let device = Box::new(RamDisk::new("ram", 512, 16384, 8).unwrap());
    let server = TestServer::with_exports(vec![export_of(device)], ServerLimits::default());
    pipelined_writes_then_reads(&server);
}

/// Readers spinning on their sockets (`--reader-window-us`, here with `--spin-us`) serve both request paths the same,
/// and a stop ends a reader in the middle of its window (the longest there is).
#[test]
fn spinning_readers_serve_every_request_and_stop_with_the_server() {
    let spin = WaitPolicy::spin_us(MAX_SPIN_US);
    let ram = Box::new(RamDisk::new("ram", 512, 16384, 8).unwrap());
    let inner = RamDisk::new("completes when waited", 512, 16384, 8).unwrap();
    let later = Box::new(Hooked::new(inner, CompletesWhenWaited));
    for device in [ram as Box<dyn BlockDevice>, later] {
        let mut server =
            TestServer::with_spin(vec![export_of(device)], ServerLimits::default(), spin);
        pipelined_writes_then_reads(&server);
        let _idle = RawClient::connect(server.connect_tcp(), "disk", true);
        let started = Instant::now();
        let devices = server.server.take().unwrap().shutdown();
        assert_eq!(devices.len(), 1, "the worker hands the device back");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the stop waited on a spinning reader"
        );
    }
}

#[test]
fn connections_racing_for_one_export_get_every_reply_with_its_data() {
    let server = Arc::new(TestServer::ram(&[("disk", 8 * MIB)]));
    let threads: Vec<_> = (0..4u64)
        .map(|index| {
            let server = Arc::clone(&server);
            std::thread::spawn(move || {
                let mut client = RawClient::connect(server.connect_tcp(), "disk", index % 2 == 0);
                let base = index * 2 * MIB;
                for round in 0..8u64 {
                    let mut lengths = HashMap::new();
                    for block in 0..32u64 {
                        let offset = base + block * 4096;
                        let seed = offset + round;
                        client.send(
                            CMD_WRITE,
                            0,
                            block,
                            offset,
                            4096,
                            &pattern_bytes(seed, 4096),
                        );
                    }
                    for _ in 0..32 {
                        assert_eq!(client.receive(&HashMap::new()).1, 0);
                    }
                    for block in 0..32u64 {
                        client.send(CMD_READ, 0, 1000 + block, base + block * 4096, 4096, &[]);
                        lengths.insert(1000 + block, 4096);
                    }
                    for _ in 0..32 {
                        let (cookie, error, data) = client.receive(&lengths);
                        assert_eq!(error, 0);
                        let offset = base + (cookie - 1000) * 4096;
                        assert!(data == pattern_bytes(offset + round, 4096));
                    }
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("a client thread");
    }
}

/// One request at a time (queue depth 1), some after a pause longer than the window, over
/// TCP and a Unix socket: every read answers with what was written.
fn queue_depth_one_round_trips<S: std::io::Read + std::io::Write>(stream: S, seed: u64) {
    let mut client = RawClient::connect(stream, "disk", true);
    for block in 0..64u64 {
        let offset = block * 4096;
        let bytes = pattern_bytes(seed + offset, 4096);
        assert_eq!(client.request(CMD_WRITE, 0, offset, 4096, &bytes).0, 0);
        if block % 16 == 0 {
            std::thread::sleep(Duration::from_millis(2));
        }
        let (error, data) = client.request(CMD_READ, 0, offset, 4096, &[]);
        assert_eq!(error, 0);
        assert!(data == bytes, "block {block}");
    }
}

/// The reader window apart from the hand-off spin: queue-depth-1 reads work with the window
/// off, on, and automatic, with the hand-offs parking or spinning, on both request paths.
#[test]
fn queue_depth_one_reads_work_with_the_reader_window_on_and_off() {
    let windows = [
        ReaderWindow::Fixed(WaitPolicy::PARK),
        ReaderWindow::Fixed(WaitPolicy::spin_us(200)),
        ReaderWindow::Auto,
    ];
    for window in windows {
        for spin in [WaitPolicy::PARK, WaitPolicy::spin_us(200)] {
            let ram = Box::new(RamDisk::new("ram", 512, 16384, 8).unwrap());
            let inner = RamDisk::new("completes when waited", 512, 16384, 8).unwrap();
            let later = Box::new(Hooked::new(inner, CompletesWhenWaited));
            for device in [ram as Box<dyn BlockDevice>, later] {
                let server = TestServer::with_waits(
                    vec![export_of(device)],
                    ServerLimits::default(),
                    spin,
                    window,
                );
                assert_eq!(server.server().reader_window(), window.for_this_machine());
                queue_depth_one_round_trips(server.connect_tcp(), 1);
                let socket = server.server().unix_socket_path().unwrap();
                queue_depth_one_round_trips(UnixStream::connect(socket).unwrap(), 2);
            }
        }
    }
}
