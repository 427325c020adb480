//! The host session against a scripted node in this test (a TCP listener that answers the
//! hello, then frames as each test says): an ack that never comes fails its request after
//! the ack timeout, `Busy` is sent again until answered, stray acks are counted and
//! dropped, and a node that closes the connection fails every request in flight at once.
//! No tag outlives its request in any case.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use flashpipe_base::wait::WaitPolicy;
use flashpipe_cluster::wire::{self, Frame, Message, Status, WireAck, WireLimits};
use flashpipe_cluster_host::conn::{read_frame, read_hello, send_hello};
use flashpipe_cluster_host::hello::{Hello, Role};
use flashpipe_cluster_host::loaded::{load_description, LoadedDescription};
use flashpipe_cluster_host::session::{HostSession, LocalFailure, SessionAck, SessionOptions};
use flashpipe_flash::{AckStatus, CommandKind, FlashAddress, FlashCommand, FlashRequest};
use flashpipe_testkit::scratch::TestFolder;

/// A one-node description in `root` whose node is a listener on a thread of its own: it
/// accepts the host, answers its hello and runs `script` over the connection. The loaded
/// description and the thread.
fn scripted_node(
    root: &Path,
    script: impl FnOnce(TcpStream, WireLimits) + Send + 'static,
) -> (LoadedDescription, JoinHandle<()>) {
    let (loaded, listener) = one_node_listener(root);
    let (crc, limits) = (loaded.crc, loaded.limits);
    let node = std::thread::spawn(move || script(accept(&listener, crc), limits));
    (loaded, node)
}

/// A one-node description whose node is the listener, and the listener.
fn one_node_listener(root: &Path) -> (LoadedDescription, TcpListener) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let description = root.join("one.toml");
    std::fs::write(
        &description,
        format!(
            "version = 1\n[[node]]\nid = 0\naddress = \"127.0.0.1:{port}\"\npreset = \"minflash\"\nimage = \"n0.img\"\n[[host]]\nid = 0\nnode = 0\n"
        ),
    )
    .unwrap();
    (load_description(&description).unwrap(), listener)
}

/// Accepts the host and answers its hello.
fn accept(listener: &TcpListener, crc: u32) -> TcpStream {
    let (mut stream, _) = listener.accept().unwrap();
    let hello = read_hello(&mut stream).unwrap();
    assert_eq!(hello.role, Role::Host);
    send_hello(
        &mut stream,
        &Hello {
            role: Role::Node,
            refusal: None,
            id: 0,
            description_crc: crc,
        },
    )
    .unwrap();
    stream
}

fn erase(tag: u64) -> FlashRequest {
    FlashRequest {
        tag,
        host: 0,
        command: FlashCommand::EraseBlock {
            address: FlashAddress {
                device: 0,
                bus: 0,
                chip: 0,
                block: tag as u32,
                page: 0,
            },
        },
    }
}

fn ack(tag: u64, kind: CommandKind, status: Status) -> Frame {
    Frame::from(WireAck {
        tag,
        host: 0,
        kind,
        status,
        payload: None,
    })
}

/// Submits erases of blocks `0..count` (tags alike) and waits for their `count` acks; the
/// acks and the time waited for them.
fn erase_and_wait(session: &mut HostSession, count: u64) -> (Vec<SessionAck>, Duration) {
    for tag in 0..count {
        session.submit(erase(tag)).unwrap();
    }
    let started = Instant::now();
    let mut acks = Vec::new();
    while acks.len() < count as usize {
        assert!(session.wait(&mut acks) > 0, "requests are in flight");
    }
    (acks, started.elapsed())
}

fn options(ack_timeout: Duration) -> SessionOptions {
    SessionOptions {
        in_flight_limit: 8,
        ack_timeout,
        wait: WaitPolicy::spin_us(10),
    }
}

#[test]
fn an_ack_that_never_comes_fails_its_request_after_the_timeout() {
    let root = TestFolder::new("cluster-host-timeout");
    let (loaded, node) = scripted_node(&root, |stream, _| {
        std::thread::sleep(Duration::from_secs(3));
        drop(stream);
    });
    let mut session = HostSession::open(&loaded, 0, options(Duration::from_millis(200))).unwrap();
    let (acks, waited) = erase_and_wait(&mut session, 3);
    assert!(
        waited >= Duration::from_millis(150) && waited < Duration::from_secs(2),
        "{waited:?}"
    );
    for ack in &acks {
        assert_eq!(ack.ack.status, Status::Unreachable { device: 0, hop: 0 });
        assert!(matches!(
            ack.failure,
            Some(LocalFailure::TimedOut { node: 0, .. })
        ));
    }
    assert_eq!(session.in_flight(), 0, "no tag leaked");
    assert_eq!(session.counters().failed, 3);
    drop(session);
    node.join().unwrap();
}

#[test]
fn busy_is_sent_again_and_stray_acks_are_dropped() {
    let root = TestFolder::new("cluster-host-busy");
    let (loaded, node) = scripted_node(&root, |mut stream, limits| {
        let mut buffer = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        let mut answered = 0;
        while answered < 4 {
            let Some(frame) = read_frame(&mut stream, limits, &mut buffer).unwrap() else {
                return;
            };
            let Message::Request(request) = frame.message else {
                continue;
            };
            let mut bytes = Vec::new();
            // A stray ack (a tag never sent) and one of the wrong kind come first.
            bytes.extend(
                wire::encode(
                    &ack(999, CommandKind::Erase, Status::Flash(AckStatus::CLEAN)),
                    limits,
                )
                .unwrap(),
            );
            bytes.extend(
                wire::encode(
                    &ack(
                        request.tag,
                        CommandKind::Write,
                        Status::Flash(AckStatus::CLEAN),
                    ),
                    limits,
                )
                .unwrap(),
            );
            let status = if seen.insert(request.tag) {
                Status::Busy { queue_limit: 64 }
            } else {
                answered += 1;
                Status::Flash(AckStatus::CLEAN)
            };
            bytes.extend(
                wire::encode(&ack(request.tag, CommandKind::Erase, status), limits).unwrap(),
            );
            stream.write_all(&bytes).unwrap();
        }
        std::thread::sleep(Duration::from_millis(200));
    });
    let mut session = HostSession::open(&loaded, 0, options(Duration::from_secs(10))).unwrap();
    let (acks, _) = erase_and_wait(&mut session, 4);
    let mut tags: Vec<u64> = acks.iter().map(|ack| ack.ack.tag).collect();
    tags.sort_unstable();
    assert_eq!(tags, [0, 1, 2, 3], "one ack per tag");
    assert!(acks
        .iter()
        .all(|ack| ack.ack.status.eq(&Status::Flash(AckStatus::CLEAN)) && ack.failure.is_none()));
    let counters = session.counters();
    assert_eq!(counters.busy_retries, 4);
    assert_eq!(counters.acked, 4);
    assert_eq!(
        counters.stray_acks, 16,
        "two strays before each of 8 answers"
    );
    assert_eq!(session.in_flight(), 0, "no tag leaked");
    drop(session);
    node.join().unwrap();
}

#[test]
fn a_node_that_closes_fails_every_request_in_flight_at_once() {
    let root = TestFolder::new("cluster-host-closed");
    let (loaded, node) = scripted_node(&root, |mut stream, limits| {
        let mut buffer = Vec::new();
        for _ in 0..5 {
            read_frame(&mut stream, limits, &mut buffer).unwrap();
        }
        drop(stream);
    });
    let mut session = HostSession::open(&loaded, 0, options(Duration::from_secs(30))).unwrap();
    let (acks, waited) = erase_and_wait(&mut session, 5);
    assert!(waited < Duration::from_secs(5), "no wait for the timeout");
    for ack in &acks {
        assert_eq!(ack.ack.status, Status::Unreachable { device: 0, hop: 0 });
        assert!(
            matches!(
                &ack.failure,
                Some(LocalFailure::ConnectionLost { node: 0, .. })
            ),
            "{:?}",
            ack.failure
        );
    }
    assert!(session.lost().is_some());
    session.submit(erase(9)).unwrap();
    let mut late = Vec::new();
    assert_eq!(
        session.poll(&mut late),
        1,
        "a request after the loss fails at once"
    );
    assert!(late[0].failure.is_some());
    assert_eq!(session.in_flight(), 0, "no tag leaked");
    node.join().unwrap();
}
