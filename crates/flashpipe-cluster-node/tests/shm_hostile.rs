//! Hostile peers of a node's Unix socket and ring links: a bad frame in a ring closes that
//! link only; a wrong set-up answer or a hello of another description is refused and the
//! socket closed; a file that is not a stale socket of this user at the socket's path, or a
//! node already listening there, stops a node from starting. The node serves its host after
//! each.

mod common;
mod shm_peer;

use std::io::Read;
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::Duration;

use common::{address, read_page, request_until_linked};
use flashpipe_cluster::wire::Status;
use flashpipe_cluster_host::shm_setup::{encode_setup, socket_path, OFFER_FDS};
use flashpipe_cluster_node::conn::{read_hello, send_hello};
use flashpipe_cluster_node::hello::{Hello, Refusal, Role};
use flashpipe_cluster_node::node::{
    start_with_limits, LoadedDescription, NodeLimits, NodeOptions, RunningNode,
};
use flashpipe_flash::{AckStatus, FlashCommand};
use flashpipe_shm::{receive_with_fds, send_with_fds, Doorbell};
use flashpipe_testkit::scratch::TestFolder;
use shm_peer::{
    first_of_two_shm_nodes, line_description, loaded, open_peer, start_shm_node, start_shm_nodes,
    ShmPeer,
};

/// The node's own device answers its host (the node is still serving).
/// The node still answers a host's read over shared memory, then stops with every tag free.
fn serves_a_host_then_stops(loaded: &LoadedDescription, node: RunningNode) {
    let mut host = open_peer(loaded, 0, Role::Host, 0);
    assert_serves(&mut host, 1);
    drop(host);
    node.stopper().stop();
    node.wait().expect("every tag is free at the stop");
}

fn assert_serves(host: &mut ShmPeer, tag: u64) {
    let read = FlashCommand::ReadPage {
        address: address(0, 1, 0),
    };
    let (status, _, _) = host.request_until_linked(tag, read);
    assert!(matches!(status, Status::Flash(AckStatus::Ok { .. })));
}

/// Reads `socket` to its end: the node closed it (a timeout fails the test).
fn assert_closed(socket: &mut UnixStream) {
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut rest = Vec::new();
    let ended = socket.read_to_end(&mut rest);
    assert!(ended.is_ok(), "the node closed the socket ({ended:?})");
}

#[test]
fn a_bad_frame_in_a_ring_closes_that_link_only() {
    let (_root, loaded, node) = first_of_two_shm_nodes("cluster-node-shm-bad-frame");
    let mut neighbour = open_peer(&loaded, 0, Role::Node, 1);
    neighbour.send(&[0xff; 32]);
    assert!(
        neighbour.next_frame().is_none(),
        "the node closes the ring link that carried a bad frame"
    );
    assert_closed(&mut neighbour.socket);
    serves_a_host_then_stops(&loaded, node);
}

#[test]
fn a_wrong_set_up_or_hello_is_refused() {
    let (_root, loaded, node) = first_of_two_shm_nodes("cluster-node-shm-bad-setup");
    let path = socket_path(&loaded.socket_dir, 0);
    let hello = |description_crc| Hello {
        role: Role::Host,
        refusal: None,
        id: 0,
        description_crc,
    };

    let mut other = UnixStream::connect(&path).unwrap();
    send_hello(&mut other, &hello(loaded.crc ^ 1)).unwrap();
    let answer = read_hello(&mut other).unwrap();
    assert_eq!(answer.refusal, Some(Refusal::DescriptionMismatch));
    assert_closed(&mut other);

    let mut wrong = UnixStream::connect(&path).unwrap();
    send_hello(&mut wrong, &hello(loaded.crc)).unwrap();
    assert_eq!(read_hello(&mut wrong).unwrap().refusal, None);
    let mut offer = [0u8; 16];
    let (received, fds) = receive_with_fds(&wrong, &mut offer, OFFER_FDS).unwrap();
    assert_eq!((received, fds.len()), (16, OFFER_FDS));
    let bell = Doorbell::create("test-wrong-answer").unwrap();
    let answer = encode_setup(8192);
    assert_ne!(answer, offer, "the answer must differ from the offer");
    send_with_fds(&wrong, &answer, &[bell.as_fd()]).unwrap();
    assert_closed(&mut wrong);

    serves_a_host_then_stops(&loaded, node);
}

#[test]
fn only_a_stale_socket_of_this_user_is_replaced() {
    let root = TestFolder::new("cluster-node-shm-stale");
    let description = line_description(&root, 2);
    let loaded = loaded(&description);
    let options = NodeOptions {
        description: description.clone(),
        node: 0,
        image_folder: root.join("images"),
        spin: None,
    };
    let sockets = &loaded.socket_dir;
    std::fs::create_dir(sockets).unwrap();
    std::fs::set_permissions(sockets, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let path = socket_path(sockets, 0);
    std::fs::write(&path, b"not a socket").unwrap();
    let refused = start_with_limits(&options, NodeLimits::default())
        .err()
        .expect("a file at the socket's path is refused");
    assert!(
        refused.to_string().contains("not a socket of this user"),
        "{refused}"
    );
    assert!(path.exists(), "the file is left as it was");

    std::fs::remove_file(&path).unwrap();
    drop(UnixListener::bind(&path).unwrap());
    let node = start_shm_node(&description, 0, &root.join("images"));
    let twice = start_with_limits(&options, NodeLimits::default())
        .err()
        .expect("a second node 0 is refused");
    assert!(
        twice
            .to_string()
            .contains("a process accepts on this socket"),
        "{twice}"
    );
    serves_a_host_then_stops(&loaded, node);
}

#[test]
fn the_key_proof_runs_on_the_socket_before_any_ring() {
    use flashpipe_cluster_host::handshake::HandshakeError;
    use flashpipe_cluster_node::host::{one_request, HostError};
    use std::os::unix::fs::PermissionsExt;

    let root = TestFolder::new("cluster-node-shm-key");
    let line = line_description(&root, 2);
    let sockets = root.join("sockets");
    let text = std::fs::read_to_string(&line).unwrap().replace(
        "socket_dir = \"sockets\"\n",
        &format!(
            "socket_dir = \"{}\"\nkey_file = \"cluster.key\"\n",
            sockets.display()
        ),
    );
    let keyed = |folder: &str, key: u8| {
        let folder = root.join(folder);
        std::fs::create_dir(&folder).unwrap();
        let description = folder.join("cluster.toml");
        std::fs::write(&description, &text).unwrap();
        let key_path = folder.join("cluster.key");
        std::fs::write(&key_path, [key; 32]).unwrap();
        std::fs::set_permissions(&key_path, std::fs::Permissions::from_mode(0o600)).unwrap();
        description
    };
    let right = keyed("right", 7);
    let wrong = keyed("wrong", 8);
    let nodes = start_shm_nodes(&right, 2, &root.join("images"));
    let status = request_until_linked(&right, read_page(1, 0));
    assert!(matches!(status, Status::Flash(AckStatus::Ok { .. })));
    let refused = one_request(&wrong, 0, read_page(1, 0)).expect_err("a wrong key is refused");
    assert!(
        matches!(
            refused,
            HostError::Handshake(HandshakeError::Proof { node: 0, .. })
        ),
        "{refused}"
    );
    for node in nodes {
        node.stopper().stop();
        node.wait().expect("every tag is free at the stop");
    }
}
