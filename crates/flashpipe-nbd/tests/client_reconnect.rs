//! A lost connection: the server killed with SIGKILL mid-run. Restarted in time, the
//! client reconnects and re-issues every request not yet answered (data intact); left
//! down, every request fails with an error naming the member (its URI) after the
//! bounded tries; writes acknowledged but not flushed before the loss are reported by
//! the next flush.

mod client_support;

use std::os::unix::net::UnixListener;
use std::thread;
use std::time::{Duration, Instant};

use client_support::{have, reap, zero_file, Scratch, Server};
use flashpipe_device::{BlockDevice, IoBuf, Request};
use flashpipe_nbd::client::{NbdDevice, NbdDeviceConfig, NbdUri, ReconnectDurability};

const BLOCK: usize = 4096;

fn open_with(server: &Server, durability: ReconnectDurability, attempts: u32) -> NbdDevice {
    let mut config = NbdDeviceConfig::new(NbdUri::parse(&server.uri()).unwrap());
    config.queue_depth = 64;
    config.reconnect_attempts = attempts;
    config.reconnect_first_delay_ms = 50;
    config.reconnect_durability = durability;
    NbdDevice::open(config).expect("open")
}

/// Waits (up to 30 s) until a client connects to `listener`, and closes that connection.
fn wait_for_a_connection(listener: &UnixListener) {
    listener.set_nonblocking(true).expect("nonblocking");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match listener.accept() {
            Ok((stream, _)) => return drop(stream),
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                assert!(Instant::now() < deadline, "the client never reconnected");
                thread::sleep(Duration::from_millis(5));
            }
            Err(error) => panic!("accept: {error}"),
        }
    }
}

fn block_pattern(block: u64, round: u8) -> Vec<u8> {
    (0..BLOCK)
        .map(|index| (index as u64 ^ block.wrapping_mul(31)) as u8 ^ round)
        .collect()
}

fn write_blocks(device: &mut NbdDevice, blocks: std::ops::Range<u64>, round: u8) {
    for block in blocks {
        device
            .submit(Request::write(
                block,
                block,
                IoBuf::from_slice(&block_pattern(block, round)),
            ))
            .expect("write accepted");
    }
}

fn check_blocks(device: &mut NbdDevice, blocks: std::ops::Range<u64>, round: u8) {
    for block in blocks {
        device
            .submit(Request::read(block, block, IoBuf::zeroed(BLOCK)))
            .expect("read accepted");
        let completion = reap(device).pop().unwrap();
        assert!(completion.status.is_ok(), "{:?}", completion.status);
        assert!(
            completion.buffer.unwrap()[..] == block_pattern(block, round)[..],
            "block {block} differs"
        );
    }
}

/// `nbdkit` serving a zeroed image of `size_bytes` as export `disk` from a scratch
/// folder named after `name` (the server first: it stops before its folder goes); `None`
/// (the test skipped) without `nbdkit`.
fn nbdkit_disk(name: &str, size_bytes: u64) -> Option<(Server, Scratch)> {
    if !have("nbdkit") {
        return None;
    }
    let scratch = Scratch::new(name);
    let image = scratch.path.join("disk.img");
    zero_file(&image, size_bytes);
    Some((Server::nbdkit_file(&scratch.path, "disk", &image), scratch))
}

#[test]
fn a_killed_server_restarted_in_time_gets_every_unanswered_request_again() {
    let Some((mut server, _scratch)) = nbdkit_disk("reconnect", 16 << 20) else {
        return;
    };
    let mut device = open_with(&server, ReconnectDurability::TrustServer, 12);
    write_blocks(&mut device, 0..32, 1);
    device.submit(Request::flush(1000)).unwrap();
    assert!(reap(&mut device)
        .iter()
        .all(|completion| completion.status.is_ok()));

    server.kill();
    // Holds the server's socket so the client's first reconnect attempt is seen (and fails)
    // before the server comes back: the restart waits on that attempt, not on a clock.
    let gate = UnixListener::bind(&server.socket).expect("the socket path is free");
    // nbdkit --exit-with-parent follows the thread that started it, so the restarting
    // thread lives until the test is done with the server.
    let (done, wait_done) = std::sync::mpsc::channel::<()>();
    let restarter = thread::spawn(move || {
        wait_for_a_connection(&gate);
        drop(gate);
        server.restart();
        let _ = wait_done.recv();
        server
    });
    write_blocks(&mut device, 32..64, 2);
    device.submit(Request::flush(1001)).unwrap();
    let completions = reap(&mut device);
    assert_eq!(completions.len(), 33);
    for completion in &completions {
        assert!(
            completion.status.is_ok(),
            "tag {}: {:?}",
            completion.tag,
            completion.status
        );
    }
    let counters = device.counters();
    assert_eq!(counters.connections_lost, 1, "{counters:?}");
    assert_eq!(counters.reconnects, 1, "{counters:?}");
    assert!(counters.requests_reissued >= 1, "{counters:?}");
    check_blocks(&mut device, 0..32, 1);
    check_blocks(&mut device, 32..64, 2);
    drop(device);
    drop(done);
    drop(restarter.join().unwrap());
}

#[test]
fn a_server_that_stays_down_fails_every_request_naming_the_member() {
    let Some(scratch) = Scratch::if_tool("nbdkit", "down") else {
        return;
    };
    let mut server = Server::nbdkit_memory(&scratch.path, "gone", "4M");
    let uri = server.uri();
    let mut device = open_with(&server, ReconnectDurability::default(), 2);
    server.kill();
    device
        .submit(Request::read(7, 0, IoBuf::zeroed(BLOCK)))
        .unwrap();
    device
        .submit(Request::write(8, 1, IoBuf::zeroed(BLOCK)))
        .unwrap();
    let completions = reap(&mut device);
    assert_eq!(completions.len(), 2);
    for completion in completions {
        let error = completion.status.expect_err("the server is gone");
        assert_eq!(&*error.device, uri);
        let text = error.to_string();
        assert!(text.contains(&uri), "{text}");
        assert!(
            text.contains("reconnecting failed (2 attempts at most)"),
            "{text}"
        );
    }
    let rejected = device
        .submit(Request::read(9, 0, IoBuf::zeroed(BLOCK)))
        .expect_err("a failed device refuses new requests");
    assert!(rejected.to_string().contains(&uri), "{rejected}");
}

#[test]
fn writes_acknowledged_but_unflushed_before_a_loss_fail_the_next_flush() {
    let Some((mut server, _scratch)) = nbdkit_disk("unflushed", 4 << 20) else {
        return;
    };
    let mut device = open_with(&server, ReconnectDurability::ReportUnflushedWrites, 8);
    write_blocks(&mut device, 0..4, 3);
    assert!(reap(&mut device)
        .iter()
        .all(|completion| completion.status.is_ok()));
    server.restart();
    device.submit(Request::flush(50)).unwrap();
    let flush = reap(&mut device).pop().unwrap();
    let error = flush
        .status
        .expect_err("the first flush after the loss reports it");
    assert!(
        error.to_string().contains("acknowledged 4 writes"),
        "{error}"
    );
    device.submit(Request::flush(51)).unwrap();
    assert!(
        reap(&mut device).pop().unwrap().status.is_ok(),
        "reported once"
    );
    check_blocks(&mut device, 0..4, 3);
}
