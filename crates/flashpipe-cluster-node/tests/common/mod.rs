//! What the node tests share: a two-node description, nodes started in this process, page
//! addresses, and a request retried while the links come up. Each test file uses some of them.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use flashpipe_cluster::wire::Status;
use flashpipe_cluster_node::host::one_request;
use flashpipe_cluster_node::node::{start, NodeOptions, RunningNode};
use flashpipe_flash::{FlashAddress, FlashCommand};

/// Writes `two.toml` into `root`: nodes 0 and 1 (minflash) on free loopback ports, linked,
/// and host 0 on node 0 with `host_extra` appended to its table (shares, say). Returns the
/// file and the two ports.
pub fn two_node_description(root: &Path, host_extra: &str) -> (PathBuf, [u16; 2]) {
    let ports = [
        flashpipe_testkit::ports::free_loopback_port(),
        flashpipe_testkit::ports::free_loopback_port(),
    ];
    let description = root.join("two.toml");
    std::fs::write(
        &description,
        format!(
            "version = 1\n\
             [[node]]\nid = 0\naddress = \"127.0.0.1:{}\"\npreset = \"minflash\"\nimage = \"n0.img\"\nlinks = [1]\n\
             [[node]]\nid = 1\naddress = \"127.0.0.1:{}\"\npreset = \"minflash\"\nimage = \"n1.img\"\n\
             [[host]]\nid = 0\nnode = 0\n{host_extra}",
            ports[0], ports[1]
        ),
    )
    .expect("the test folder takes the description");
    (description, ports)
}

/// `count` page reads (tags `0..count`, bus `tag % 8`, chip 0, block 1, page 0) of host 0
/// to `device`, encoded as frames that have made `hops` hops, back to back.
pub fn encoded_reads(
    count: u64,
    hops: u8,
    device: u32,
    limits: flashpipe_cluster::wire::WireLimits,
) -> Vec<u8> {
    use flashpipe_cluster::wire::{self, Frame, Message};
    let mut bytes = Vec::new();
    for tag in 0..count {
        let frame = Frame {
            hops,
            message: Message::Request(flashpipe_flash::FlashRequest {
                tag,
                host: 0,
                command: FlashCommand::ReadPage {
                    address: FlashAddress {
                        device,
                        bus: (tag % 8) as u32,
                        chip: 0,
                        block: 1,
                        page: 0,
                    },
                },
            }),
        };
        bytes.extend(wire::encode(&frame, limits).expect("a page read fits the frames"));
    }
    bytes
}

/// Starts nodes `0..count` of `description`, their images in `images`.
pub fn start_nodes(description: &Path, count: u32, images: &Path) -> Vec<RunningNode> {
    (0..count)
        .map(|node| start_node(description, node, images))
        .collect()
}

/// Starts node `node` of `description`, its image in `images`.
pub fn start_node(description: &Path, node: u32, images: &Path) -> RunningNode {
    start(&NodeOptions {
        description: description.to_path_buf(),
        node,
        image_folder: images.to_path_buf(),
    })
    .unwrap()
}

/// Page `page` of block `block` on bus 0, chip 0 of `device`.
pub fn address(device: u32, block: u32, page: u32) -> FlashAddress {
    FlashAddress {
        device,
        bus: 0,
        chip: 0,
        block,
        page,
    }
}

/// A read of page 0 of block `block` on `device`.
pub fn read_page(device: u32, block: u32) -> FlashCommand {
    FlashCommand::ReadPage {
        address: address(device, block, 0),
    }
}

/// Sends `command` as host 0 until it is not answered `Unreachable` (links come up within
/// a second of both nodes running), for at most 10 s; its last status.
pub fn request_until_linked(description: &Path, command: FlashCommand) -> Status {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let reply = one_request(description, 0, command.clone()).unwrap();
        match reply.ack.status {
            Status::Unreachable { .. } if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            status => return status,
        }
    }
}
