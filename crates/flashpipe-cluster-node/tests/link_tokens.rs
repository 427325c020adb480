//! A neighbour that sends past its tokens while its input waits for room (1 token per
//! channel, 1 frame per stage queue, 200 reads at once) is closed as a bad peer at once,
//! not held in memory, and the node goes on serving its host.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::read_page;
use flashpipe_cluster::wire::Status;
use flashpipe_cluster_node::conn::{read_hello, send_hello};
use flashpipe_cluster_node::hello::{Hello, Role};
use flashpipe_cluster_node::host::one_request;
use flashpipe_cluster_node::node::{load_description, start_with_limits, NodeLimits, NodeOptions};
use flashpipe_flash::AckStatus;
use flashpipe_testkit::scratch::TestFolder;

const TINY: NodeLimits = NodeLimits {
    link_window: 1,
    credit_batch: 1,
    stage_frames: 1,
};

#[test]
fn a_neighbour_past_its_tokens_is_closed() {
    let root = TestFolder::new("cluster-node-link-tokens");
    let (description, ports) = common::two_node_description(&root, "");
    let loaded = load_description(&description).unwrap();
    let options = NodeOptions {
        description: description.clone(),
        node: 0,
        image_folder: root.to_path_buf(),
    };
    let node = start_with_limits(&options, TINY).unwrap();

    let mut peer = TcpStream::connect(("127.0.0.1", ports[0])).unwrap();
    let hello = Hello {
        role: Role::Node,
        refusal: None,
        id: 1,
        description_crc: loaded.crc,
    };
    send_hello(&mut peer, &hello).unwrap();
    assert_eq!(read_hello(&mut peer).unwrap().refusal, None);
    let bytes = common::encoded_reads(200, 1, 0, loaded.limits);
    let sent = Instant::now();
    peer.write_all(&bytes).unwrap();
    peer.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut rest = Vec::new();
    let closed = peer.read_to_end(&mut rest);
    assert!(
        closed.is_ok(),
        "the node closes a peer past its tokens ({closed:?})"
    );
    assert!(
        sent.elapsed() < Duration::from_secs(5),
        "closed for its tokens, not by the 10 s stall limit ({} ms)",
        sent.elapsed().as_millis()
    );

    let reply = one_request(&description, 0, read_page(0, 1)).unwrap();
    assert!(matches!(
        reply.ack.status,
        Status::Flash(AckStatus::Ok { .. })
    ));
    node.stopper().stop();
    let summary = node.wait().expect("every tag is free at the stop");
    assert_eq!(
        summary.bad_peers, 1,
        "only the peer past its tokens was closed"
    );
}
