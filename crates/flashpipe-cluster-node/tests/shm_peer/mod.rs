//! What the shared-memory node tests share: a line of nodes with `link = "shm"`, nodes
//! started for shared-memory links, and a peer in this process that opens a node's Unix
//! socket as a host or a node would (hello, rings taken) and then writes and reads frames
//! through the rings. Each test file uses some of them.
#![allow(dead_code)]

use std::io::{Error, ErrorKind};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use flashpipe_cluster::wire::{self, Frame, Message, Status, WireLimits};
use flashpipe_cluster_host::shm_setup::{accept_offer, socket_path};
use flashpipe_cluster_node::conn::{read_frame, read_hello, send_hello};
use flashpipe_cluster_node::hello::{Hello, Role};
use flashpipe_cluster_node::node::{
    load_description, start_with_limits, LoadedDescription, NodeLimits, NodeOptions, RunningNode,
};
use flashpipe_flash::{FlashCommand, FlashRequest};
use flashpipe_shm::{push_stream_bytes, Doorbell, FrameRing, RingReader, RingWait};
use flashpipe_testkit::scratch::TestFolder;

/// The longest a test peer waits for a frame.
pub const FRAME_WAIT: Duration = Duration::from_secs(20);

/// Writes `line.toml` into `root`: nodes `0..count` (minflash) in a line over shared
/// memory, sockets in `root/sockets`, host 0 on node 0 owning blocks 0-15 of every device.
pub fn line_description(root: &Path, count: u32) -> PathBuf {
    let mut text = String::from("version = 1\nlink = \"shm\"\nsocket_dir = \"sockets\"\n");
    for node in 0..count {
        let port = flashpipe_testkit::ports::free_loopback_port();
        text.push_str(&format!(
            "[[node]]\nid = {node}\naddress = \"127.0.0.1:{port}\"\npreset = \"minflash\"\nimage = \"n{node}.img\"\n"
        ));
        if node + 1 < count {
            text.push_str(&format!("links = [{}]\n", node + 1));
        }
    }
    let shares: Vec<String> = (0..count)
        .map(|device| format!("{{ device = {device}, start = 0, end = 16 }}"))
        .collect();
    text.push_str(&format!(
        "[[host]]\nid = 0\nnode = 0\nshares = [{}]\n",
        shares.join(", ")
    ));
    let description = root.join("line.toml");
    std::fs::write(&description, text).expect("the test folder takes the description");
    description
}

/// Starts node `node` of `description` (its links over shared memory), its image in `images`.
pub fn start_shm_node(description: &Path, node: u32, images: &Path) -> RunningNode {
    start_with_limits(
        &NodeOptions {
            description: description.to_path_buf(),
            node,
            image_folder: images.to_path_buf(),
            spin: None,
        },
        NodeLimits::default(),
    )
    .unwrap()
}

/// A request of host 0 as frame bytes.
pub fn request_bytes(tag: u64, command: FlashCommand, limits: WireLimits) -> Vec<u8> {
    let frame = Frame::from(FlashRequest {
        tag,
        host: 0,
        command,
    });
    wire::encode(&frame, limits).expect("the request fits the frames")
}

/// A peer of a node over its Unix socket, after the set-up.
pub struct ShmPeer {
    /// The set-up socket (dropping it is the peer ending).
    pub socket: UnixStream,
    /// The ring the node writes, read as a stream.
    pub reader: RingReader,
    /// The ring the peer writes.
    pub output: FrameRing,
    /// The node's doorbell.
    pub node_bell: Doorbell,
    /// The peer's own doorbell (the node rings it).
    pub own_bell: Doorbell,
    /// The description's frame limits.
    pub limits: WireLimits,
}

/// Opens node `node`'s socket as `role` `id`, passes the hello and takes the rings.
pub fn open_peer(loaded: &LoadedDescription, node: u32, role: Role, id: u32) -> ShmPeer {
    let mut socket = UnixStream::connect(socket_path(&loaded.socket_dir, node)).unwrap();
    let hello = Hello {
        role,
        refusal: None,
        id,
        description_crc: loaded.crc,
    };
    send_hello(&mut socket, &hello).unwrap();
    assert_eq!(read_hello(&mut socket).unwrap().refusal, None);
    let own_bell = Doorbell::create("test-peer-doorbell").unwrap();
    let rings = accept_offer(&socket, &own_bell).unwrap();
    let deadline = Instant::now() + FRAME_WAIT;
    let check: flashpipe_shm::PeerCheck = Box::new(move |_| {
        if Instant::now() > deadline {
            return Err(Error::new(ErrorKind::TimedOut, "no frame in time"));
        }
        Ok(())
    });
    let wait = RingWait::SpinThenPark {
        spin_us: 0,
        park_timeout_us: Some(20_000),
    };
    ShmPeer {
        socket,
        reader: RingReader::new(rings.input, wait, Some(check)),
        output: rings.output,
        node_bell: rings.peer_doorbell,
        own_bell,
        limits: loaded.limits,
    }
}

impl ShmPeer {
    /// Writes `bytes` into the node's input ring and rings its doorbell.
    pub fn send(&mut self, bytes: &[u8]) {
        push_stream_bytes(&mut self.output, bytes, &mut |_| Ok(())).unwrap();
        self.node_bell.ring();
    }

    /// The next frame from the node (`None`: the node closed the link).
    pub fn next_frame(&mut self) -> Option<Frame> {
        let mut buffer = Vec::new();
        read_frame(&mut self.reader, self.limits, &mut buffer).unwrap()
    }

    /// Sends `command` as host 0 with `tag` until it is not answered `Unreachable` (the
    /// links come up within a second of the nodes running), for at most 10 s; the ack's
    /// status, payload data and hops.
    pub fn request_until_linked(
        &mut self,
        tag: u64,
        command: FlashCommand,
    ) -> (Status, Option<Vec<u8>>, u8) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            self.send(&request_bytes(tag, command.clone(), self.limits));
            let frame = self.next_frame().expect("the node keeps the host's link");
            let Message::Ack(ack) = frame.message else {
                panic!("a host gets acks only");
            };
            assert_eq!(ack.tag, tag);
            match ack.status {
                Status::Unreachable { .. } if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                status => return (status, ack.payload.map(|payload| payload.data), frame.hops),
            }
        }
    }
}

/// Loads `description` (for its checksum, limits and socket folder).
pub fn loaded(description: &Path) -> LoadedDescription {
    load_description(description).unwrap()
}

/// Starts nodes `0..count` of `description` (links over shared memory), images in `images`.
pub fn start_shm_nodes(description: &Path, count: u32, images: &Path) -> Vec<RunningNode> {
    (0..count)
        .map(|node| start_shm_node(description, node, images))
        .collect()
}

/// A line of two shared-memory nodes in a fresh test folder named `name`, node 0 started:
/// the folder (kept while the test runs), the loaded description and the node.
pub fn first_of_two_shm_nodes(name: &str) -> (TestFolder, LoadedDescription, RunningNode) {
    let root = TestFolder::new(name);
    let description = line_description(&root, 2);
    let node = start_shm_node(&description, 0, &root.join("images"));
    let loaded = loaded(&description);
    (root, loaded, node)
}
