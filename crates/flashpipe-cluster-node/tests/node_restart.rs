//! A node stopped with a host's requests in flight at its neighbour: the neighbour answers
//! each of them once, `Ok` (done before the stop) or `Unreachable` naming the device and the
//! hop; the restarted node serves its image again, and a full round of requests through the
//! same link goes through (no controller tag of the link was left behind).

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use common::{ack_of, address, connect_as, read_page, request_until_linked, start_node};
use flashpipe_cluster::wire::{self, Frame, Status, WireLimits};
use flashpipe_cluster_node::conn::read_frame;
use flashpipe_cluster_node::hello::Role;
use flashpipe_cluster_node::node::{load_description, NODE_TAGS};
use flashpipe_cluster_node::words::status_words;
use flashpipe_flash::{AckStatus, FlashCommand, FlashRequest};
use flashpipe_testkit::scratch::TestFolder;

const ACK_WAIT: Duration = Duration::from_secs(20);

fn host_connection(description: &Path, port: u16) -> (TcpStream, WireLimits) {
    let loaded = load_description(description).unwrap();
    let stream = connect_as(port, Role::Host, 0, loaded.crc);
    stream.set_read_timeout(Some(ACK_WAIT)).unwrap();
    (stream, loaded.limits)
}

/// Erases of blocks `0..count` of one chip of device 1 (they take turns on the chip).
fn send_erases(stream: &mut TcpStream, limits: WireLimits, count: u64) {
    let mut bytes = Vec::new();
    for tag in 0..count {
        let frame = Frame::from(FlashRequest {
            tag,
            host: 0,
            command: FlashCommand::EraseBlock {
                address: address(1, tag as u32, 0),
            },
        });
        bytes.extend(wire::encode(&frame, limits).unwrap());
    }
    stream.write_all(&bytes).unwrap();
}

fn acks(stream: &mut TcpStream, limits: WireLimits, count: u64) -> BTreeMap<u64, Status> {
    let mut acks = BTreeMap::new();
    let mut buffer = Vec::new();
    while (acks.len() as u64) < count {
        let frame = read_frame(stream, limits, &mut buffer)
            .unwrap_or_else(|error| {
                panic!(
                    "{} of {count} requests answered, then none for {} s ({error})",
                    acks.len(),
                    ACK_WAIT.as_secs()
                )
            })
            .expect("the node keeps the host's connection");
        let ack = ack_of(frame);
        assert!(
            acks.insert(ack.tag, ack.status).is_none(),
            "one ack per tag"
        );
    }
    acks
}

#[test]
fn a_node_stopped_with_requests_in_flight_fails_them_at_its_neighbour() {
    let root = TestFolder::new("cluster-node-restart");
    let (description, ports) =
        common::two_node_description(&root, "shares = [{ device = 1, start = 0, end = 128 }]\n");
    let images = root.join("images");
    let first = start_node(&description, 0, &images);
    let second = start_node(&description, 1, &images);
    assert!(matches!(
        request_until_linked(&description, read_page(1, 1)),
        Status::Flash(AckStatus::Ok { .. })
    ));

    // The link's tags and as many again in the host's queue: 3 ms per erase on one chip,
    // so the last are still waiting well after the stop.
    let count = 2 * u64::from(NODE_TAGS);
    let (mut stream, limits) = host_connection(&description, ports[0]);
    send_erases(&mut stream, limits, count);
    std::thread::sleep(Duration::from_millis(5));
    second.stopper().stop();
    second.wait().unwrap();
    let answered = acks(&mut stream, limits, count);
    let mut failed = 0;
    for (tag, status) in &answered {
        match status {
            Status::Flash(AckStatus::Ok { .. }) => {}
            Status::Unreachable { device: 1, hop: 0 } => failed += 1,
            other => panic!("tag {tag}: {}", status_words(other)),
        }
    }
    assert!(
        failed > 0,
        "the erases take turns on one chip: some were in flight at the stop"
    );

    // A host has one connection: the one-shot requests below replace this one.
    drop(stream);
    let restarted = start_node(&description, 1, &images);
    assert!(
        restarted.ready().image_reopened,
        "the image is served again"
    );
    assert!(matches!(
        request_until_linked(&description, read_page(1, 1)),
        Status::Flash(AckStatus::Ok { .. })
    ));
    let (mut stream, limits) = host_connection(&description, ports[0]);
    send_erases(&mut stream, limits, count);
    for (tag, status) in acks(&mut stream, limits, count) {
        assert!(
            matches!(status, Status::Flash(AckStatus::Ok { .. })),
            "after the restart, tag {tag}: {}",
            status_words(&status)
        );
    }
    drop(stream);
    for node in [restarted, first] {
        node.stopper().stop();
        node.wait().expect("every tag is free at the stop");
    }
}
