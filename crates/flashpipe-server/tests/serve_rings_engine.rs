//! Ring connections served on the engine thread (protocol version 6): a version-5
//! client's request ring is still read by its connection's reading thread (it never
//! rings a doorbell), a version-6 client's by the engine, which it wakes with the
//! doorbell passed beside rings-opened; a client that floods requests and never drains
//! its reply ring is taken as gone without stalling another client's reads, and one that
//! forges the doorbell's words only delays the engine's wakes, by its park timeout at most.

mod common;

use std::os::fd::OwnedFd;
use std::os::unix::fs::FileExt;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use common::{connect, open_rings_by_hand, pattern, start_server, wait_until};

use flashpipe_client::{Client, TransportExt};
use flashpipe_protocol::{
    decode_frame, encode_frame, Frame, Request, Response, RingsOpened, WireCommand, WireReply,
    PROTOCOL_VERSION,
};
use flashpipe_shm::{
    attach_received_ring, Doorbell, FrameRing, PushOutcome, RingWait, RING_HEADER_BYTES,
};

/// A client that shook hands by hand and holds its rings (and the doorbell, if sent).
struct RawRings {
    _socket: UnixStream,
    requests: FrameRing,
    replies: FrameRing,
    doorbell: Option<Doorbell>,
    /// The doorbell page's memfd, to write its words by hand.
    doorbell_file: Option<std::fs::File>,
}

fn raw_rings(path: &std::path::Path, version: u16) -> RawRings {
    let (socket, rings, fds) = open_rings_by_hand(path, version, "raw rings");
    attach_all(socket, rings, fds)
}

fn attach_all(socket: UnixStream, rings: RingsOpened, fds: Vec<OwnedFd>) -> RawRings {
    let mut fds = fds.into_iter();
    let mut ring = |capacity: u32| {
        let fd = fds.next().expect("a ring's descriptor");
        attach_received_ring(fd, RING_HEADER_BYTES + capacity as usize).expect("attached")
    };
    let requests = ring(rings.request_ring_capacity_bytes);
    let replies = ring(rings.reply_ring_capacity_bytes);
    let doorbell_fd = fds.next();
    let doorbell_file = doorbell_fd
        .as_ref()
        .map(|fd| std::fs::File::from(fd.try_clone().expect("dup")));
    let doorbell = doorbell_fd.map(|fd| Doorbell::attach(fd).expect("doorbell attached"));
    assert_eq!(doorbell.is_some(), rings.engine_doorbell);
    assert!(fds.next().is_none(), "no more descriptors");
    RawRings {
        _socket: socket,
        requests,
        replies,
        doorbell,
        doorbell_file,
    }
}

fn stat_request(request_id: u64) -> Vec<u8> {
    encode_frame(&Frame::Request {
        request_id,
        request: Request::Command(WireCommand::Stat {
            name: "kept".to_string(),
        }),
    })
}

/// Pops one whole reply (a single record: small frames travel in one).
fn pop_reply(rings: &mut RawRings) -> Frame {
    let wait = RingWait::SpinThenPark {
        spin_us: 0,
        park_timeout_us: Some(5_000_000),
    };
    let record = rings
        .replies
        .pop(wait)
        .expect("a readable reply ring")
        .expect("a reply within 5 s");
    decode_frame(&record).expect("a whole frame")
}

#[test]
fn a_version_5_ring_client_is_served_by_its_reading_thread() {
    let test = start_server("serve-rings-engine-v5", |_| {});
    connect(&test.socket, true).create("kept").expect("create");
    let mut rings = raw_rings(&test.socket, 5);
    assert!(rings.doorbell.is_none(), "no doorbell for version 5");
    for request_id in 2..12 {
        let pushed = rings.requests.try_push(&stat_request(request_id));
        assert_eq!(pushed.expect("push"), PushOutcome::Pushed);
        let reply = pop_reply(&mut rings);
        assert!(
            matches!(reply, Frame::Response { request_id: id, response: Response::Reply(WireReply::Stat(_)) } if id == request_id),
            "request {request_id} answered with another frame"
        );
    }
}

#[test]
fn a_version_6_ring_client_rings_the_engine_and_is_answered() {
    let test = start_server("serve-rings-engine-v6", |_| {});
    connect(&test.socket, true).create("kept").expect("create");
    let mut rings = raw_rings(&test.socket, PROTOCOL_VERSION);
    for request_id in 2..12 {
        std::thread::sleep(Duration::from_millis(2));
        let pushed = rings.requests.try_push(&stat_request(request_id));
        assert_eq!(pushed.expect("push"), PushOutcome::Pushed);
        rings.doorbell.as_mut().expect("a doorbell").ring();
        let reply = pop_reply(&mut rings);
        assert!(
            matches!(reply, Frame::Response { request_id: id, .. } if id == request_id),
            "request {request_id} answered with another frame"
        );
    }
}

/// Reads with `client` until `stop` passes; the slowest read.
fn read_until(client: &mut Client, stop: Instant) -> (usize, Duration) {
    let (mut reads, mut slowest) = (0, Duration::ZERO);
    while Instant::now() < stop {
        let started = Instant::now();
        let view = client
            .read("kept", 0, 4096)
            .expect("the honest client's read");
        assert_eq!(&*view, &pattern(4096, 3)[..]);
        drop(view);
        slowest = slowest.max(started.elapsed());
        reads += 1;
    }
    (reads, slowest)
}

#[test]
fn a_client_that_never_drains_its_replies_does_not_stall_another_clients_reads() {
    let test = start_server("serve-rings-engine-flood", |config| {
        config.ring_capacity_bytes = 4096;
        config.send_timeout_ms = 60_000;
    });
    let mut honest = connect(&test.socket, true);
    honest.create("kept").expect("create");
    honest.write("kept", 0, &pattern(4096, 3)).expect("write");
    let mut flood = raw_rings(&test.socket, PROTOCOL_VERSION);
    let mut doorbell = flood.doorbell.take().expect("a doorbell");
    let flooding = std::thread::spawn(move || {
        let mut request_id = 2;
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            match flood.requests.try_push(&stat_request(request_id)) {
                Ok(PushOutcome::Pushed) => request_id += 1,
                Ok(PushOutcome::Full) => std::thread::yield_now(),
                Err(_) => return request_id,
            }
            doorbell.ring();
        }
        panic!("the server never gave up on a client that does not drain its replies");
    });
    let (reads, slowest) = read_until(&mut honest, Instant::now() + Duration::from_millis(500));
    let sent = flooding.join().expect("the flooding thread");
    assert!(sent > 64, "the flood got requests in before it was cut off");
    wait_until(|| test.server.counters().clients_now == 1);
    assert!(reads > 10, "the honest client read {reads} times in 0.5 s");
    assert!(
        slowest < Duration::from_secs(2),
        "an honest read took {slowest:?} beside the flood"
    );
    honest.stat("kept").expect("the honest client goes on");
}

#[test]
fn a_client_clearing_the_doorbell_s_sleeping_word_delays_wakes_by_the_park_timeout_at_most() {
    let test = start_server("serve-rings-engine-forged-doorbell", |_| {});
    let mut honest = connect(&test.socket, true);
    honest.create("kept").expect("create");
    honest.write("kept", 0, &pattern(4096, 3)).expect("write");
    let hostile = raw_rings(&test.socket, PROTOCOL_VERSION);
    let page = hostile.doorbell_file.expect("the doorbell's memfd");
    let stop = Instant::now() + Duration::from_millis(400);
    let forging = std::thread::spawn(move || {
        while Instant::now() < stop {
            page.write_at(&0u32.to_le_bytes(), 4)
                .expect("sleeping word written");
            std::thread::yield_now();
        }
    });
    let mut slowest = Duration::ZERO;
    while Instant::now() < stop {
        std::thread::sleep(Duration::from_millis(3));
        let started = Instant::now();
        let view = honest
            .read("kept", 0, 4096)
            .expect("a read beside the forger");
        assert_eq!(&*view, &pattern(4096, 3)[..]);
        slowest = slowest.max(started.elapsed());
    }
    forging.join().expect("the forging thread");
    assert!(
        slowest < Duration::from_secs(1),
        "a read took {slowest:?} while the doorbell was forged"
    );
}
