//! A neighbour that says hello and then neither reads nor returns a token: the node closes
//! the link after its stall limit (10 s), answers every request it held for that link with
//! `Unreachable` naming the device, frees their tags, and goes on serving its own device.

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{read_page, start_node};
use flashpipe_cluster::wire::{Message, Status};
use flashpipe_cluster_node::conn::{read_frame, read_hello, send_hello};
use flashpipe_cluster_node::hello::{Hello, Role};
use flashpipe_cluster_node::host::one_request;
use flashpipe_cluster_node::node::load_description;
use flashpipe_cluster_node::words::status_words;
use flashpipe_flash::AckStatus;
use flashpipe_testkit::scratch::TestFolder;

const REQUESTS: u64 = 40;
/// The node's stall limit, and the longest the test waits past it.
const STALL: Duration = Duration::from_secs(10);
const SLACK: Duration = Duration::from_secs(20);

#[test]
fn a_neighbour_that_stalls_is_closed_and_its_requests_answered() {
    let root = TestFolder::new("cluster-node-link-stall");
    let (description, ports) = common::two_node_description(&root, "");
    let loaded = load_description(&description).unwrap();
    let node = start_node(&description, 0, &root);

    let mut stalled_peer = TcpStream::connect(("127.0.0.1", ports[0])).unwrap();
    let hello = |role, id| Hello {
        role,
        refusal: None,
        id,
        description_crc: loaded.crc,
    };
    send_hello(&mut stalled_peer, &hello(Role::Node, 1)).unwrap();
    assert_eq!(read_hello(&mut stalled_peer).unwrap().refusal, None);
    // The router takes the link a moment after the hello (no frame tells when); the
    // elapsed-time check below fails if the requests were answered without going out on it.
    std::thread::sleep(Duration::from_millis(500));

    let mut host = TcpStream::connect(("127.0.0.1", ports[0])).unwrap();
    send_hello(&mut host, &hello(Role::Host, 0)).unwrap();
    assert_eq!(read_hello(&mut host).unwrap().refusal, None);
    let bytes = common::encoded_reads(REQUESTS, 0, 1, loaded.limits);
    let sent = Instant::now();
    host.write_all(&bytes).unwrap();
    host.set_read_timeout(Some(STALL + SLACK)).unwrap();
    let mut acks: BTreeMap<u64, Status> = BTreeMap::new();
    let mut buffer = Vec::new();
    while (acks.len() as u64) < REQUESTS {
        let frame = read_frame(&mut host, loaded.limits, &mut buffer)
            .unwrap_or_else(|error| {
                panic!(
                    "{} of {REQUESTS} requests answered, then none for {} s: the stalled link was not closed ({error})",
                    acks.len(),
                    (STALL + SLACK).as_secs()
                )
            })
            .expect("the node keeps the host's connection");
        let Message::Ack(ack) = frame.message else {
            panic!("a host gets acks only");
        };
        assert!(
            matches!(ack.status, Status::Unreachable { device: 1, .. }),
            "tag {}: {}",
            ack.tag,
            status_words(&ack.status)
        );
        assert!(
            acks.insert(ack.tag, ack.status).is_none(),
            "one ack per tag"
        );
    }
    let waited = sent.elapsed();
    assert!(
        waited >= STALL - Duration::from_secs(1),
        "the requests were answered after {} ms, before the stall limit: they never went out on the link",
        waited.as_millis()
    );

    stalled_peer
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut rest = Vec::new();
    let closed = stalled_peer.read_to_end(&mut rest);
    assert!(
        closed.is_ok(),
        "the node closed the stalled link: reading its end ends ({closed:?})"
    );

    let reply = one_request(&description, 0, read_page(0, 1)).unwrap();
    assert!(matches!(
        reply.ack.status,
        Status::Flash(AckStatus::Ok { .. })
    ));
    node.stopper().stop();
    let summary = node.wait().expect("every tag is free at the stop");
    assert_eq!(summary.bad_peers, 1, "only the stalled link was closed");
}
