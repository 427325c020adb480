//! What the node tests share: a two-node description, nodes started in this process, page
//! addresses and reads, a connection past its hello, and a request retried while the links
//! come up. Each test file uses some of them.
#![allow(dead_code)]

use std::io::Read;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use flashpipe_cluster::wire::{self, Frame, Message, Status, WireAck};
use flashpipe_cluster_node::conn::{read_hello, send_hello};
use flashpipe_cluster_node::hello::{Hello, Role};
use flashpipe_cluster_node::host::{one_request, HostReply};
use flashpipe_cluster_node::node::{start, NodeOptions, RunningNode};
use flashpipe_flash::{AckStatus, FlashAddress, FlashCommand, FlashRequest};

/// Writes `two.toml` into `root`: [`two_node_text`] on free loopback ports. Returns the
/// file and the two ports.
pub fn two_node_description(root: &Path, host_extra: &str) -> (PathBuf, [u16; 2]) {
    let ports = [
        flashpipe_testkit::ports::free_loopback_port(),
        flashpipe_testkit::ports::free_loopback_port(),
    ];
    let description = root.join("two.toml");
    std::fs::write(&description, two_node_text(ports, host_extra))
        .expect("the test folder takes the description");
    (description, ports)
}

/// A description of nodes 0 and 1 (minflash) on `ports`, linked, and host 0 on node 0 with
/// `host_extra` appended to its table (shares, say).
pub fn two_node_text(ports: [u16; 2], host_extra: &str) -> String {
    format!(
        "version = 1\n\
         [[node]]\nid = 0\naddress = \"127.0.0.1:{}\"\npreset = \"minflash\"\nimage = \"n0.img\"\nlinks = [1]\n\
         [[node]]\nid = 1\naddress = \"127.0.0.1:{}\"\npreset = \"minflash\"\nimage = \"n1.img\"\n\
         [[host]]\nid = 0\nnode = 0\n{host_extra}",
        ports[0], ports[1]
    )
}

/// `count` page reads (tags `0..count`, see [`page_read_frame`]) to `device`, encoded as
/// frames that have made `hops` hops, back to back.
pub fn encoded_reads(count: u64, hops: u8, device: u32, limits: wire::WireLimits) -> Vec<u8> {
    let mut bytes = Vec::new();
    for tag in 0..count {
        let frame = page_read_frame(tag, hops, device);
        bytes.extend(wire::encode(&frame, limits).expect("a page read fits the frames"));
    }
    bytes
}

/// A read by host 0, tag `tag`, of page 0 of block 1 on bus `tag % 8`, chip 0 of `device`,
/// as a frame that has made `hops` hops.
pub fn page_read_frame(tag: u64, hops: u8, device: u32) -> Frame {
    Frame {
        hops,
        message: Message::Request(page_read_request(tag, device, 0, 1)),
    }
}

/// A read by host 0, tag `tag`, of page 0 of block `block` on bus `tag % 8`, chip `chip` of
/// `device`.
pub fn page_read_request(tag: u64, device: u32, chip: u32, block: u32) -> FlashRequest {
    FlashRequest {
        tag,
        host: 0,
        command: FlashCommand::ReadPage {
            address: FlashAddress {
                device,
                bus: (tag % 8) as u32,
                chip,
                block,
                page: 0,
            },
        },
    }
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
        spin: None,
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

/// Connects to the node listening on loopback `port` as `role` `id`, running the
/// description whose CRC-32C is `description_crc`; the node's hello refuses nothing.
pub fn connect_as(port: u16, role: Role, id: u32, description_crc: u32) -> TcpStream {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let hello = Hello {
        role,
        refusal: None,
        id,
        description_crc,
    };
    send_hello(&mut stream, &hello).unwrap();
    assert_eq!(read_hello(&mut stream).unwrap().refusal, None);
    stream
}

/// Reads `stream` to its end, waiting at most `limit` for each read: the node closed it
/// (`closing` says why it should have, in the failure).
pub fn assert_closed_by_node(stream: &mut TcpStream, limit: Duration, closing: &str) {
    stream.set_read_timeout(Some(limit)).unwrap();
    let mut rest = Vec::new();
    let closed = stream.read_to_end(&mut rest);
    assert!(closed.is_ok(), "{closing} ({closed:?})");
}

/// The node goes on serving host 0 after closing one bad peer (`which`), and stops with
/// every tag free and that one peer counted bad.
pub fn assert_serves_and_stops_with_one_bad_peer(
    description: &Path,
    node: RunningNode,
    which: &str,
) {
    let reply = one_request(description, 0, read_page(0, 1)).unwrap();
    assert!(matches!(
        reply.ack.status,
        Status::Flash(AckStatus::Ok { .. })
    ));
    node.stopper().stop();
    let summary = node.wait().expect("every tag is free at the stop");
    assert_eq!(summary.bad_peers, 1, "only {which} was closed");
}

/// Sends `command` as host 0 until it is not answered `Unreachable` (links come up within
/// a second of both nodes running), for at most 10 s; its last status.
pub fn request_until_linked(description: &Path, command: FlashCommand) -> Status {
    reply_until_linked(description, command).ack.status
}

/// [`request_until_linked`], the whole last reply.
pub fn reply_until_linked(description: &Path, command: FlashCommand) -> HostReply {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let reply = one_request(description, 0, command.clone()).unwrap();
        match reply.ack.status {
            Status::Unreachable { .. } if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            _ => return reply,
        }
    }
}

/// The ack a host got in `frame` (a host gets nothing else).
pub fn ack_of(frame: Frame) -> WireAck {
    let Message::Ack(ack) = frame.message else {
        panic!("a host gets acks only");
    };
    ack
}

/// Checks that `ack` says device `device` cannot be reached.
pub fn assert_unreachable(ack: &WireAck, device: u32) {
    assert!(
        matches!(ack.status, Status::Unreachable { device: found, .. } if found == device),
        "tag {}: {}",
        ack.tag,
        flashpipe_cluster_node::words::status_words(&ack.status)
    );
}
