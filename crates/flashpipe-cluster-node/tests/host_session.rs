//! The host's pipelined session and the FTL's cluster backend against two nodes started in
//! this process: many tags in flight, each ack matched to its request, no tag leaked; an
//! FTL formatted over both devices keeps what it wrote across an unmount and a mount; a
//! node that stops fails the requests for its device with a status naming the device,
//! and the backend stops (fail-stop) instead of hanging.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{start_nodes, two_node_description};
use flashpipe_cluster::wire::Status;
use flashpipe_cluster_host::backend::ClusterFlash;
use flashpipe_cluster_host::loaded::load_description;
use flashpipe_cluster_host::session::{HostSession, SessionOptions, SessionSubmitError};
use flashpipe_cluster_node::node::RunningNode;
use flashpipe_device::{run_batch, IoBuf, Operation};
use flashpipe_flash::{AckStatus, CommandKind, FlashCommand, FlashRequest};
use flashpipe_ftl::{FlashBackend, Ftl, FtlOptions};
use flashpipe_testkit::scratch::TestFolder;

/// Two linked minflash nodes, host 0 on node 0 owning blocks 0..16 of both devices.
fn two_node_cluster(root: &Path) -> std::path::PathBuf {
    let shares =
        "shares = [{ device = 0, start = 0, end = 16 }, { device = 1, start = 0, end = 16 }]\n";
    two_node_description(root, shares).0
}

fn read_request(tag: u64, device: u32) -> FlashRequest {
    common::page_read_request(tag, device, ((tag / 8) % 8) as u32, 2)
}

/// Sends reads until the links are up (a read of device 1 answered other than
/// `Unreachable`), for at most 10 s.
fn until_linked(session: &mut HostSession) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut tag = 1_000_000u64;
    loop {
        session.submit(read_request(tag, 1)).unwrap();
        tag += 1;
        let mut acks = Vec::new();
        session.wait(&mut acks);
        if !matches!(acks[0].ack.status, Status::Unreachable { .. }) || Instant::now() > deadline {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn many_tags_in_flight_each_ack_matched_none_leaked() {
    let root = TestFolder::new("cluster-host-session");
    let description = two_node_cluster(&root);
    let nodes = start_nodes(&description, 2, &root);
    let loaded = load_description(&description).unwrap();
    let mut session = HostSession::open(&loaded, 0, SessionOptions::default()).unwrap();
    until_linked(&mut session);
    let before = session.counters();
    let total = 500u64;
    let mut sent = BTreeSet::new();
    let mut answered = BTreeSet::new();
    let mut next = 0u64;
    let mut acks = Vec::new();
    while answered.len() < total as usize {
        while next < total {
            match session.submit(read_request(next, (next % 2) as u32)) {
                Ok(()) => {
                    sent.insert(next);
                    next += 1;
                }
                Err(SessionSubmitError::Full { request, .. }) => {
                    assert_eq!(request.tag, next, "the request comes back whole");
                    break;
                }
                Err(error) => panic!("submit: {error}"),
            }
        }
        assert!(session.in_flight() <= 64, "the tag budget holds");
        acks.clear();
        assert!(session.wait(&mut acks) > 0, "requests are in flight");
        for ack in &acks {
            assert!(sent.contains(&ack.ack.tag), "an ack for a tag sent");
            assert!(answered.insert(ack.ack.tag), "one ack per tag");
            assert_eq!(ack.ack.kind, CommandKind::Read);
            assert_eq!(ack.device, (ack.ack.tag % 2) as u32);
            assert_eq!(ack.failure, None);
            assert!(
                matches!(ack.ack.status, Status::Flash(AckStatus::Ok { .. })),
                "tag {}: {}",
                ack.ack.tag,
                flashpipe_cluster_host::words::status_words(&ack.ack.status)
            );
            if ack.device == 1 {
                assert_eq!(ack.hops, 1, "device 1 is one link away");
            }
        }
    }
    let counters = session.counters();
    assert_eq!(counters.submitted - before.submitted, total);
    assert_eq!(counters.acked - before.acked, total);
    assert_eq!(counters.failed, 0);
    assert_eq!(session.in_flight(), 0, "no tag leaked");
    assert_eq!(session.wait(&mut acks), 0, "nothing in flight: no wait");
    drop(session);
    for node in nodes {
        node.stopper().stop();
        node.wait().unwrap();
    }
}

fn options() -> FtlOptions {
    FtlOptions {
        name: "cluster".to_string(),
        checkpoint_interval_pages: 0,
        ..FtlOptions::default()
    }
}

fn pattern(page: u64, page_bytes: usize) -> Vec<u8> {
    (0..page_bytes)
        .map(|index| (page as usize * 31 + index * 7) as u8)
        .collect()
}

#[test]
fn an_ftl_over_two_nodes_keeps_its_pages_and_stops_when_a_node_dies() {
    let root = TestFolder::new("cluster-host-ftl");
    let description = two_node_cluster(&root);
    let mut nodes = start_nodes(&description, 2, &root);
    let loaded = load_description(&description).unwrap();
    let mut probe = HostSession::open(&loaded, 0, SessionOptions::default()).unwrap();
    until_linked(&mut probe);
    drop(probe);

    let backend = ClusterFlash::open(&description, 0, None, SessionOptions::default()).unwrap();
    assert_eq!(backend.view().config().geometry.devices, 2);
    let page_bytes = backend.view().config().geometry.page_data_bytes as usize;
    let mut ftl = Ftl::format(Box::new(backend), options()).unwrap();
    let pages = 96u64;
    let mut data = Vec::new();
    for page in 0..pages {
        data.extend(pattern(page, page_bytes));
    }
    run_batch(
        &mut ftl,
        vec![
            Operation::Write {
                first_block: 0,
                buffer: IoBuf::from_slice(&data),
            },
            Operation::Flush,
        ],
    )
    .unwrap();
    let backend = ftl.unmount();
    let backend = backend.into_any().downcast::<ClusterFlash>().unwrap();
    let counters = backend.session().counters();
    assert_eq!(backend.session().in_flight(), 0, "no tag leaked");
    assert_eq!(counters.submitted, counters.acked);
    drop(backend);

    let backend = ClusterFlash::open(&description, 0, None, SessionOptions::default()).unwrap();
    let (mut ftl, _report) = Ftl::mount(Box::new(backend), options()).unwrap();
    let completions = run_batch(
        &mut ftl,
        vec![Operation::Read {
            first_block: 0,
            buffer: IoBuf::zeroed(data.len()),
        }],
    )
    .unwrap();
    assert!(
        completions[0].buffer.as_ref().unwrap().as_slice() == data.as_slice(),
        "the pages read back are the pages written"
    );
    drop(ftl);

    let words = fault_reading_after_stopping(&description, nodes.pop().unwrap(), 1);
    assert!(
        words.contains("device 1") && words.contains("Unreachable"),
        "{words}"
    );
    let words = fault_reading_after_stopping(&description, nodes.pop().unwrap(), 0);
    assert!(words.contains("connection to node 0 was lost"), "{words}");
}

/// Opens a backend, stops `node`, then reads block 1 of `device` eight times: the fault
/// the backend stopped on (of `device`, within 10 s), in words.
fn fault_reading_after_stopping(description: &Path, node: RunningNode, device: u32) -> String {
    let backend = ClusterFlash::open(description, 0, None, SessionOptions::default()).unwrap();
    let fault = backend.fault_handle();
    let mut backend: Box<dyn FlashBackend> = Box::new(backend);
    node.stopper().stop();
    node.wait().unwrap();
    let started = Instant::now();
    for tag in 0..8 {
        let mut request = read_request(tag, device);
        if let FlashCommand::ReadPage { address } = &mut request.command {
            address.block = 1;
        }
        backend.submit(request).unwrap();
    }
    let mut acks = Vec::new();
    while backend.wait_acks(&mut acks) > 0 {}
    assert!(started.elapsed() < Duration::from_secs(10), "no hang");
    let fault = fault
        .get()
        .expect("the backend stopped on the stopped node");
    assert_eq!(fault.device, device);
    fault.to_string()
}
