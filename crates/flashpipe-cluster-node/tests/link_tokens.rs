//! A neighbour that sends past its tokens while its input waits for room (1 token per
//! channel, 1 frame per stage queue, 200 reads at once) is closed as a bad peer at once,
//! not held in memory, and the node goes on serving its host.

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use common::connect_as;
use flashpipe_cluster_node::hello::Role;
use flashpipe_cluster_node::node::{load_description, start_with_limits, NodeLimits, NodeOptions};
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
        spin: None,
    };
    let node = start_with_limits(&options, TINY).unwrap();

    let mut peer = connect_as(ports[0], Role::Node, 1, loaded.crc);
    let bytes = common::encoded_reads(200, 1, 0, loaded.limits);
    let sent = Instant::now();
    peer.write_all(&bytes).unwrap();
    common::assert_closed_by_node(
        &mut peer,
        Duration::from_secs(20),
        "the node closes a peer past its tokens",
    );
    assert!(
        sent.elapsed() < Duration::from_secs(5),
        "closed for its tokens, not by the 10 s stall limit ({} ms)",
        sent.elapsed().as_millis()
    );

    common::assert_serves_and_stops_with_one_bad_peer(
        &description,
        node,
        "the peer past its tokens",
    );
}
