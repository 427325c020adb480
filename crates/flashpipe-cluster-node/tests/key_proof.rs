//! The key proof (docs/cluster-wire.md, "Key proof"): with a `key_file` in the description,
//! a host holding the key reaches a node on the same key, two nodes on the same key link and
//! route; a host whose key differs (the same description beside another key file) is
//! refused before any frame; a key file open to others is refused before anything connects.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use common::{read_page, request_until_linked, start_nodes};
use flashpipe_cluster::wire::Status;
use flashpipe_cluster_host::handshake::HandshakeError;
use flashpipe_cluster_host::loaded::LoadError;
use flashpipe_cluster_node::auth::{KeyError, ProofError};
use flashpipe_cluster_node::host::{one_request, HostError};
use flashpipe_flash::AckStatus;
use flashpipe_testkit::ports::free_loopback_port;
use flashpipe_testkit::scratch::TestFolder;

/// Writes the two-node description and a key file of `key` (mode `mode`) in `folder`.
fn keyed_cluster(folder: &Path, ports: [u16; 2], key: &[u8], mode: u32) -> PathBuf {
    std::fs::create_dir_all(folder).unwrap();
    let text = format!(
        "version = 1\nkey_file = \"cluster.key\"\n\
         [[node]]\nid = 0\naddress = \"127.0.0.1:{}\"\npreset = \"minflash\"\nimage = \"n0.img\"\nlinks = [1]\n\
         [[node]]\nid = 1\naddress = \"127.0.0.1:{}\"\npreset = \"minflash\"\nimage = \"n1.img\"\n\
         [[host]]\nid = 0\nnode = 0\n",
        ports[0], ports[1]
    );
    let description = folder.join("cluster.toml");
    std::fs::write(&description, text).unwrap();
    let key_path = folder.join("cluster.key");
    std::fs::write(&key_path, key).unwrap();
    std::fs::set_permissions(&key_path, std::fs::Permissions::from_mode(mode)).unwrap();
    description
}

#[test]
fn only_holders_of_the_key_get_past_the_hello() {
    let root = TestFolder::new("cluster-node-key");
    let ports = [free_loopback_port(), free_loopback_port()];
    let description = keyed_cluster(&root.join("right"), ports, &[7; 32], 0o600);
    let nodes = start_nodes(&description, 2, &root.join("images"));
    let status = request_until_linked(&description, read_page(1, 0));
    assert!(
        matches!(status, Status::Flash(AckStatus::Ok { .. })),
        "the keyed nodes link and the keyed host reads across: {status:?}"
    );

    let other = keyed_cluster(&root.join("wrong"), ports, &[8; 32], 0o600);
    match one_request(&other, 0, read_page(1, 0)) {
        Err(HostError::Handshake(HandshakeError::Proof {
            error: ProofError::WrongKey,
            ..
        })) => {}
        other => panic!("a host with another key is refused: {other:?}"),
    }

    let open = keyed_cluster(&root.join("open"), ports, &[7; 32], 0o644);
    match one_request(&open, 0, read_page(1, 0)) {
        Err(HostError::Handshake(HandshakeError::Load(LoadError::Key(KeyError::Open {
            mode: 0o644,
            ..
        })))) => {}
        other => panic!("a key file others may read is refused: {other:?}"),
    }
    let short = keyed_cluster(&root.join("short"), ports, &[7; 8], 0o600);
    assert!(matches!(
        one_request(&short, 0, read_page(1, 0)),
        Err(HostError::Handshake(HandshakeError::Load(LoadError::Key(
            KeyError::Shape { .. }
        ))))
    ));

    let reply = one_request(&description, 0, read_page(1, 0)).unwrap();
    assert!(
        matches!(reply.ack.status, Status::Flash(AckStatus::Ok { .. })),
        "the node goes on serving the holders of the key"
    );
    for node in nodes {
        node.stopper().stop();
        node.wait().unwrap();
    }
}
