//! Credit frames are read past a paused link: with 2 tokens per channel and 2 frames per
//! stage queue, two hosts at the ends of a line of three nodes read each other's device at
//! once, and the middle node's two links each wait for tokens whose Credit frame arrives on
//! the other one. Every request is answered (`Ok` or `Busy`), within a bound; a hang fails
//! the test with a message instead of holding CI.

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

use common::{address, connect_as};
use flashpipe_cluster::wire::{self, Frame, Message, Status};
use flashpipe_cluster_node::conn::read_frame;
use flashpipe_cluster_node::hello::Role;
use flashpipe_cluster_node::host::one_request;
use flashpipe_cluster_node::node::{
    load_description, start_with_limits, NodeLimits, NodeOptions, RunningNode,
};
use flashpipe_cluster_node::words::status_words;
use flashpipe_flash::{AckStatus, FlashCommand, FlashRequest};
use flashpipe_testkit::ports::free_loopback_port;
use flashpipe_testkit::scratch::TestFolder;

/// The sizes the simulation campaign hung with.
const SMALL: NodeLimits = NodeLimits {
    link_window: 2,
    credit_batch: 1,
    stage_frames: 2,
};
const ROUNDS: u64 = 4;
const PER_ROUND: u64 = 96;
/// How long a host waits for its next ack before calling it a hang.
const ACK_WAIT: Duration = Duration::from_secs(20);

fn line_of_three(ports: [u16; 3]) -> String {
    format!(
        "version = 1\n\
         [[node]]\nid = 0\naddress = \"127.0.0.1:{}\"\npreset = \"minflash\"\nimage = \"n0.img\"\nlinks = [1]\n\
         [[node]]\nid = 1\naddress = \"127.0.0.1:{}\"\npreset = \"minflash\"\nimage = \"n1.img\"\nlinks = [2]\n\
         [[node]]\nid = 2\naddress = \"127.0.0.1:{}\"\npreset = \"minflash\"\nimage = \"n2.img\"\n\
         [[host]]\nid = 0\nnode = 0\n\
         [[host]]\nid = 1\nnode = 2\n",
        ports[0], ports[1], ports[2]
    )
}

fn start_small(description: &Path, node: u32, images: &Path) -> RunningNode {
    let options = NodeOptions {
        description: description.to_path_buf(),
        node,
        image_folder: images.to_path_buf(),
        spin: None,
    };
    start_with_limits(&options, SMALL).unwrap()
}

/// Reads as `host` until the far `device` answers something else than `Unreachable`.
fn wait_linked(description: &Path, host: u32, device: u32) {
    for _ in 0..200 {
        let command = FlashCommand::ReadPage {
            address: address(device, 1, 0),
        };
        let reply = one_request(description, host, command).unwrap();
        if !matches!(reply.ack.status, Status::Unreachable { .. }) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("host {host} never reached device {device}: the links did not come up in 10 s");
}

/// Host `host` on its node at `port` sends rounds of reads to `device`; returns how many
/// were answered `Ok`, or why it stopped.
fn hammer(description: &Path, port: u16, host: u32, device: u32) -> Result<u64, String> {
    let loaded = load_description(description).unwrap();
    let mut stream = connect_as(port, Role::Host, host, loaded.crc);
    stream.set_read_timeout(Some(ACK_WAIT)).unwrap();
    let mut ok = 0;
    let mut buffer = Vec::new();
    for round in 0..ROUNDS {
        let mut bytes = Vec::new();
        for index in 0..PER_ROUND {
            let tag = round * PER_ROUND + index;
            let frame = Frame::from(FlashRequest {
                tag,
                host,
                command: FlashCommand::ReadPage {
                    address: flashpipe_flash::FlashAddress {
                        device,
                        bus: (tag % 8) as u32,
                        chip: 0,
                        block: 1,
                        page: 0,
                    },
                },
            });
            bytes.extend(wire::encode(&frame, loaded.limits).unwrap());
        }
        stream.write_all(&bytes).unwrap();
        let mut acks: BTreeMap<u64, Status> = BTreeMap::new();
        while (acks.len() as u64) < PER_ROUND {
            let frame = match read_frame(&mut stream, loaded.limits, &mut buffer) {
                Ok(Some(frame)) => frame,
                Ok(None) => return Err(format!("host {host}: the node closed the connection")),
                Err(error) => {
                    return Err(format!(
                        "host {host}: round {round}, {} of {PER_ROUND} acks, then none for {} s \
                         (a credit hang: a link waits for tokens it is never given): {error}",
                        acks.len(),
                        ACK_WAIT.as_secs()
                    ))
                }
            };
            let Message::Ack(ack) = frame.message else {
                return Err(format!("host {host}: a host gets acks only"));
            };
            if matches!(ack.status, Status::Flash(AckStatus::Ok { .. })) {
                ok += 1;
            } else if !matches!(ack.status, Status::Busy { .. }) {
                return Err(format!(
                    "host {host}: tag {} answered {}",
                    ack.tag,
                    status_words(&ack.status)
                ));
            }
            if acks.insert(ack.tag, ack.status).is_some() {
                return Err(format!("host {host}: tag {} answered twice", ack.tag));
            }
        }
    }
    Ok(ok)
}

#[test]
fn crossing_reads_through_a_middle_node_with_two_tokens_never_hang() {
    let root = TestFolder::new("cluster-node-credit-hang");
    let ports = [
        free_loopback_port(),
        free_loopback_port(),
        free_loopback_port(),
    ];
    let description = root.join("line.toml");
    std::fs::write(&description, line_of_three(ports)).unwrap();
    let nodes: Vec<RunningNode> = (0..3)
        .map(|node| start_small(&description, node, &root))
        .collect();
    wait_linked(&description, 0, 2);
    wait_linked(&description, 1, 0);
    let threads: Vec<_> = [(ports[0], 0, 2), (ports[2], 1, 0)]
        .into_iter()
        .map(|(port, host, device)| {
            let description = description.clone();
            std::thread::spawn(move || hammer(&description, port, host, device))
        })
        .collect();
    let results: Vec<Result<u64, String>> = threads
        .into_iter()
        .map(|thread| thread.join().unwrap())
        .collect();
    for result in &results {
        match result {
            Ok(ok) => assert!(*ok > 0, "some reads went through"),
            Err(reason) => panic!("{reason}"),
        }
    }
    for node in nodes {
        node.stopper().stop();
        node.wait().unwrap();
    }
}
