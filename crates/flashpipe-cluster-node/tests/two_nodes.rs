//! Two nodes and a host in this process on loopback: a page written on the far device is
//! read back across one hop; a block outside the host's share is refused `NotOwner`; the
//! far node stopping turns a read into `Unreachable`.

mod common;

use std::time::Duration;

use common::{address, request_until_linked, start_nodes};
use flashpipe_cluster::wire::Status;
use flashpipe_cluster_node::host::one_request;
use flashpipe_flash::{AckStatus, FlashCommand};
use flashpipe_testkit::ports::free_loopback_port;
use flashpipe_testkit::scratch::TestFolder;

#[test]
fn a_page_crosses_one_hop_and_back() {
    let root = TestFolder::new("cluster-node-two");
    let ports = [free_loopback_port(), free_loopback_port()];
    let text = format!(
        "version = 1\n\
         [[node]]\nid = 0\naddress = \"127.0.0.1:{}\"\npreset = \"minflash\"\nimage = \"n0.img\"\nlinks = [1]\n\
         [[node]]\nid = 1\naddress = \"127.0.0.1:{}\"\npreset = \"minflash\"\nimage = \"n1.img\"\n\
         [[host]]\nid = 0\nnode = 0\nshares = [{{ device = 1, start = 0, end = 16 }}]\n",
        ports[0], ports[1]
    );
    let description = root.join("cluster.toml");
    std::fs::write(&description, text).unwrap();
    let nodes = start_nodes(&description, 2, &root.join("images"));
    let erase = FlashCommand::EraseBlock {
        address: address(1, 3, 0),
    };
    assert!(matches!(
        request_until_linked(&description, erase),
        Status::Flash(AckStatus::Ok { .. })
    ));
    let data = vec![0x5a; 8192];
    let write = FlashCommand::WritePage {
        address: address(1, 3, 0),
        data: data.clone(),
        spare: Vec::new(),
    };
    let reply = one_request(&description, 0, write).unwrap();
    assert!(matches!(
        reply.ack.status,
        Status::Flash(AckStatus::Ok { .. })
    ));
    assert_eq!(reply.hops, 1);
    let read = FlashCommand::ReadPage {
        address: address(1, 3, 0),
    };
    let reply = one_request(&description, 0, read.clone()).unwrap();
    assert!(matches!(
        reply.ack.status,
        Status::Flash(AckStatus::Ok { .. })
    ));
    assert_eq!(reply.ack.payload.unwrap().data, data);
    let outside = FlashCommand::EraseBlock {
        address: address(1, 100, 0),
    };
    let reply = one_request(&description, 0, outside).unwrap();
    assert_eq!(
        reply.ack.status,
        Status::NotOwner {
            device: 1,
            block: 100
        }
    );
    let mut nodes = nodes.into_iter();
    let first = nodes.next().unwrap();
    let second = nodes.next().unwrap();
    second.stopper().stop();
    second.wait().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let reply = one_request(&description, 0, read).unwrap();
    assert_eq!(reply.ack.status, Status::Unreachable { device: 1, hop: 0 });
    first.stopper().stop();
    first.wait().unwrap();
}
