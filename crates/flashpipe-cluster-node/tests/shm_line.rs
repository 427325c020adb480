//! Nodes linked over shared memory (`link = "shm"`), in this process: a page written on the
//! far end of a four-node line crosses three ring links and comes back; the far node
//! stopping turns a read into `Unreachable`; a neighbour whose process ends mid-traffic
//! (its socket closed, its rings left as they were) has every request it held answered
//! `Unreachable`, and the node's tags are all free at its stop.

mod common;
mod shm_peer;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{ack_of, address, assert_unreachable, read_page, reply_until_linked};
use flashpipe_cluster::wire::{Message, Status};
use flashpipe_cluster_node::hello::Role;
use flashpipe_cluster_node::words::status_words;
use flashpipe_flash::{AckStatus, FlashCommand};
use flashpipe_testkit::scratch::TestFolder;
use shm_peer::{
    line_description, loaded, open_peer, request_bytes, start_shm_node, start_shm_nodes,
};

#[test]
fn a_page_crosses_a_four_node_line_over_shared_memory() {
    let root = TestFolder::new("cluster-node-shm-line");
    let description = line_description(&root, 4);
    let nodes = start_shm_nodes(&description, 4, &root.join("images"));
    let loaded = loaded(&description);
    let socket = nodes[3].ready().socket.clone();
    assert_eq!(socket, Some(loaded.socket_dir.join("node-3.sock")));
    let mut host = open_peer(&loaded, 0, Role::Host, 0);
    let erase = FlashCommand::EraseBlock {
        address: address(3, 3, 0),
    };
    let (status, _, _) = host.request_until_linked(1, erase);
    assert!(
        matches!(status, Status::Flash(AckStatus::Ok { .. })),
        "{}",
        status_words(&status)
    );
    let data = vec![0xa5; 8192];
    let write = FlashCommand::WritePage {
        address: address(3, 3, 0),
        data: data.clone(),
        spare: Vec::new(),
    };
    let (status, _, hops) = host.request_until_linked(2, write);
    assert!(matches!(status, Status::Flash(AckStatus::Ok { .. })));
    assert_eq!(hops, 3, "host node 0 to device 3 is three links");
    let read = FlashCommand::ReadPage {
        address: address(3, 3, 0),
    };
    let (status, payload, _) = host.request_until_linked(3, read.clone());
    assert!(matches!(status, Status::Flash(AckStatus::Ok { .. })));
    assert_eq!(payload.expect("a read carries its page"), data);

    let mut nodes = nodes.into_iter();
    let first: Vec<_> = nodes.by_ref().take(3).collect();
    let last = nodes.next().unwrap();
    last.stopper().stop();
    last.wait().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    host.send(&request_bytes(4, read, loaded.limits));
    let frame = host.next_frame().expect("the host's link stays");
    let ack = ack_of(frame);
    assert_unreachable(&ack, 3);
    drop(host);
    for node in first {
        node.stopper().stop();
        node.wait().expect("every tag is free at the stop");
    }
}

#[test]
fn a_neighbour_that_ends_mid_traffic_fails_its_requests_unreachable() {
    const REQUESTS: u64 = 24;
    let root = TestFolder::new("cluster-node-shm-ends");
    let description = line_description(&root, 2);
    let node = start_shm_node(&description, 0, &root.join("images"));
    let loaded = loaded(&description);
    let mut neighbour = open_peer(&loaded, 0, Role::Node, 1);
    let mut host = open_peer(&loaded, 0, Role::Host, 0);
    // The router takes the link a moment after the set-up (no frame tells when).
    std::thread::sleep(Duration::from_millis(300));
    let mut bytes = Vec::new();
    for tag in 0..REQUESTS {
        let read = FlashCommand::ReadPage {
            address: address(1, 1, 0),
        };
        bytes.extend(request_bytes(tag, read, loaded.limits));
    }
    host.send(&bytes);
    let forwarded = neighbour
        .next_frame()
        .expect("the node forwards the host's requests on the ring link");
    assert!(matches!(forwarded.message, Message::Request(_)));
    // The neighbour's process ends: its socket closes, nobody closes its rings.
    drop(neighbour);
    let mut acks = BTreeMap::new();
    while (acks.len() as u64) < REQUESTS {
        let frame = host.next_frame().expect("the node keeps the host's link");
        let ack = ack_of(frame);
        assert_unreachable(&ack, 1);
        assert!(acks.insert(ack.tag, ()).is_none(), "one ack per tag");
    }
    drop(host);
    node.stopper().stop();
    let summary = node.wait().expect("every tag is free at the stop");
    assert_eq!(summary.device_requests, 0);
}

#[test]
fn the_one_shot_host_and_a_session_run_over_shared_memory() {
    use flashpipe_cluster_host::session::{HostSession, SessionOptions};
    use flashpipe_flash::FlashRequest;

    const READS: u64 = 48;
    let root = TestFolder::new("cluster-node-shm-hosts");
    let description = line_description(&root, 2);
    let nodes = start_shm_nodes(&description, 2, &root.join("images"));
    let reply = reply_until_linked(&description, read_page(1, 2));
    assert!(
        matches!(reply.ack.status, Status::Flash(AckStatus::Ok { .. })),
        "{}",
        status_words(&reply.ack.status)
    );
    assert_eq!(reply.hops, 1);

    let loaded = loaded(&description);
    let mut session = HostSession::open(&loaded, 0, SessionOptions::default()).unwrap();
    for tag in 0..READS {
        let request = FlashRequest {
            tag,
            host: 0,
            command: FlashCommand::ReadPage {
                address: flashpipe_flash::FlashAddress {
                    bus: (tag % 8) as u32,
                    ..address(1, 2, 0)
                },
            },
        };
        session.submit(request).unwrap();
    }
    let mut acks = Vec::new();
    while (acks.len() as u64) < READS {
        session.wait(&mut acks);
    }
    for ack in &acks {
        assert!(
            ack.failure.is_none(),
            "tag {}: {:?}",
            ack.ack.tag,
            ack.failure
        );
        assert!(matches!(
            ack.ack.status,
            Status::Flash(AckStatus::Ok { .. })
        ));
        assert_eq!(ack.hops, 1);
    }
    drop(session);
    for node in nodes {
        node.stopper().stop();
        node.wait().expect("every tag is free at the stop");
    }
}
