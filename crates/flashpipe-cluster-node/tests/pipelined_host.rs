//! A host that sends 300 reads at once on one connection gets exactly one ack per tag,
//! `Ok` or `Busy` (the node holds 64 tags and 64 requests per host, never more), and the
//! node goes on serving; two nodes running different description files never link, and
//! requests across are answered `Unreachable`.

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use common::{ack_of, connect_as, page_read_frame, read_page, start_node, two_node_text};
use flashpipe_cluster::wire::{self, Message, Status};
use flashpipe_cluster_node::conn::read_frame;
use flashpipe_cluster_node::hello::Role;
use flashpipe_cluster_node::host::one_request;
use flashpipe_cluster_node::node::{load_description, NODE_QUEUE_LIMIT};
use flashpipe_flash::AckStatus;
use flashpipe_testkit::ports::free_loopback_port;
use flashpipe_testkit::scratch::TestFolder;

#[test]
fn a_pipelined_host_gets_one_ack_per_request_and_no_queue_grows() {
    let root = TestFolder::new("cluster-node-pipelined");
    let port = free_loopback_port();
    let description = root.join("one.toml");
    std::fs::write(
        &description,
        format!("version = 1\n[[node]]\nid = 0\naddress = \"127.0.0.1:{port}\"\npreset = \"minflash\"\nimage = \"n0.img\"\n[[host]]\nid = 0\nnode = 0\n"),
    )
    .unwrap();
    let loaded = load_description(&description).unwrap();
    let node = start_node(&description, 0, &root);
    let mut stream = connect_as(port, Role::Host, 0, loaded.crc);
    let requests = 300u64;
    let mut bytes = Vec::new();
    for tag in 0..requests {
        bytes.extend(wire::encode(&page_read_frame(tag, 0, 0), loaded.limits).unwrap());
    }
    stream.write_all(&bytes).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut acks: BTreeMap<u64, Status> = BTreeMap::new();
    let mut buffer = Vec::new();
    while (acks.len() as u64) < requests {
        let frame = read_frame(&mut stream, loaded.limits, &mut buffer)
            .unwrap()
            .expect("the node answers every request");
        let ack = ack_of(frame);
        assert!(
            acks.insert(ack.tag, ack.status).is_none(),
            "one ack per tag"
        );
    }
    let busy = acks
        .values()
        .filter(|status| matches!(status, Status::Busy { queue_limit } if *queue_limit == NODE_QUEUE_LIMIT))
        .count();
    let ok = acks
        .values()
        .filter(|status| matches!(status, Status::Flash(AckStatus::Ok { .. })))
        .count();
    assert_eq!(ok + busy, requests as usize, "{acks:?}");
    assert!(ok >= 128, "the tags and the hold queue were used: {ok} ok");
    drop(stream);
    let reply = one_request(&description, 0, read_page(0, 1)).unwrap();
    assert!(matches!(
        reply.ack.status,
        Status::Flash(AckStatus::Ok { .. })
    ));

    let mut spoofing = connect_as(port, Role::Host, 0, loaded.crc);
    let mut spoofed = page_read_frame(1, 0, 0);
    if let Message::Request(request) = &mut spoofed.message {
        request.host = 1;
    }
    spoofing
        .write_all(&wire::encode(&spoofed, loaded.limits).unwrap())
        .unwrap();
    spoofing
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert!(
        matches!(
            read_frame(&mut spoofing, loaded.limits, &mut buffer),
            Ok(None) | Err(_)
        ),
        "a request claiming another host than the connection's closes it, unanswered"
    );
    node.stopper().stop();
    let summary = node.wait().unwrap();
    assert_eq!(summary.busy as usize, busy);
}

#[test]
fn nodes_running_different_descriptions_never_link() {
    let root = TestFolder::new("cluster-node-mismatch");
    let ports = [free_loopback_port(), free_loopback_port()];
    let first = root.join("first.toml");
    let second = root.join("second.toml");
    std::fs::write(&first, two_node_text(ports, "")).unwrap();
    std::fs::write(&second, two_node_text(ports, "weight = 2\n")).unwrap();
    let zero = start_node(&first, 0, &root.join("a"));
    let one = start_node(&second, 1, &root.join("b"));
    std::thread::sleep(Duration::from_millis(300));
    let reply = one_request(&first, 0, read_page(1, 0)).unwrap();
    assert_eq!(reply.ack.status, Status::Unreachable { device: 1, hop: 0 });
    for node in [zero, one] {
        node.stopper().stop();
        node.wait().unwrap();
    }
}
