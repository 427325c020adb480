//! A neighbour that says hello and then neither reads nor returns a token: the node closes
//! the link after its stall limit (10 s), answers every request it held for that link with
//! `Unreachable` naming the device, frees their tags, and goes on serving its own device.

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, Instant};

use common::{ack_of, assert_unreachable, connect_as, start_node};
use flashpipe_cluster::wire::Status;
use flashpipe_cluster_node::conn::read_frame;
use flashpipe_cluster_node::hello::Role;
use flashpipe_cluster_node::node::load_description;
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

    let mut stalled_peer = connect_as(ports[0], Role::Node, 1, loaded.crc);
    // The router takes the link a moment after the hello (no frame tells when); the
    // elapsed-time check below fails if the requests were answered without going out on it.
    std::thread::sleep(Duration::from_millis(500));

    let mut host = connect_as(ports[0], Role::Host, 0, loaded.crc);
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
        let ack = ack_of(frame);
        assert_unreachable(&ack, 1);
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

    common::assert_closed_by_node(
        &mut stalled_peer,
        Duration::from_secs(10),
        "the node closed the stalled link: reading its end ends",
    );
    common::assert_serves_and_stops_with_one_bad_peer(&description, node, "the stalled link");
}
