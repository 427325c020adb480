//! `flashpipe cluster` with `link = "shm"` through the real binary: `cluster check` names
//! the link and the socket folder (text and JSON), a node address that is not loopback and
//! a bad link kind are refused by name, and a four-node line runs over shared memory (node
//! processes, `cluster page` as the host: pages across three hops, another user kept out,
//! a node killed with SIGKILL with reads in flight through it: each answered, `Ok` or
//! `Unreachable`, the reads after it `Unreachable`, node 0 stopping cleanly with every tag
//! free).

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Child;

use common::{
    check_fails, cluster_page_until, flashpipe_as_nobody, fresh_folder, outcome,
    page_round_trip_three_hops, second_user_available, start_flashpipe, text, write_one_node,
};
use flashpipe_cluster::wire::Status;
use flashpipe_cluster_host::loaded::load_description;
use flashpipe_cluster_host::session::{HostSession, SessionOptions};
use flashpipe_cluster_host::words::status_words;
use flashpipe_flash::{AckStatus, FlashAddress, FlashCommand, FlashRequest};
use flashpipe_testkit::ports::free_loopback_port;

const NODES: u32 = 4;
/// Reads in flight when a node is killed.
const IN_FLIGHT: u64 = 32;

#[test]
fn check_names_the_link_and_the_socket_folder() {
    let folder = fresh_folder("cluster-shm-check");
    let shm = folder.path().join("shm.toml");
    let top = "link = \"shm\"\nsocket_dir = \"sockets\"\n";
    write_one_node(&shm, top, "127.0.0.1:7400");
    let (ok, stdout, stderr) = outcome(&["cluster", "check", text(&shm)]);
    assert!(ok, "{stderr}");
    let sockets = folder.path().join("sockets");
    let expected = format!("link: shm (sockets in {})", sockets.display());
    assert!(stdout.contains(&expected), "{stdout}");
    let (ok, json, stderr) = outcome(&["cluster", "check", text(&shm), "--json"]);
    assert!(ok, "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&json).expect("check --json");
    assert_eq!(json["link"], "shm");
    assert_eq!(json["socket_dir"], sockets.display().to_string());

    let tcp = folder.path().join("tcp.toml");
    write_one_node(&tcp, "", "127.0.0.1:7400");
    let (ok, stdout, stderr) = outcome(&["cluster", "check", text(&tcp)]);
    assert!(ok && stdout.contains("link: tcp\n"), "{stdout}{stderr}");
}

#[test]
fn bad_shm_descriptions_are_refused_by_name() {
    let folder = fresh_folder("cluster-shm-bad");
    let remote = folder.path().join("remote.toml");
    write_one_node(&remote, "link = \"shm\"\n", "192.0.2.1:7400");
    check_fails(
        &["cluster", "check", text(&remote)],
        "node 0's address 192.0.2.1:7400 is not a loopback address",
    );
    let unknown = folder.path().join("unknown.toml");
    write_one_node(&unknown, "link = \"rdma\"\n", "127.0.0.1:7400");
    check_fails(&["cluster", "check", text(&unknown)], "rdma");
}

/// A four-node line over shared memory, host 0 on node 0 owning blocks 0-1023 of every
/// device, sockets in `sockets`.
fn shm_line_description() -> String {
    let mut text = String::from("version = 1\nlink = \"shm\"\nsocket_dir = \"sockets\"\n");
    for node in 0..NODES {
        text += &format!(
            "[[node]]\nid = {node}\naddress = \"127.0.0.1:{}\"\npreset = \"minflash\"\nimage = \"node{node}.img\"\n",
            free_loopback_port()
        );
        if node + 1 < NODES {
            text += &format!("links = [{}]\n", node + 1);
        }
    }
    let shares: Vec<String> = (0..NODES)
        .map(|device| format!("{{ device = {device}, start = 0, end = 1024 }}"))
        .collect();
    text + &format!(
        "[[host]]\nid = 0\nnode = 0\nshares = [{}]\n",
        shares.join(", ")
    )
}

/// The node processes; any still running are killed when the test ends.
struct Nodes(Vec<Option<Child>>);

impl Drop for Nodes {
    fn drop(&mut self) {
        for child in self.0.iter_mut().flatten() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `cluster page` as host 0 on block 5, bus 1, chip 2 of `device`, repeated until `done`
/// holds (links come up, or go down, within seconds).
fn page_until(
    description: &Path,
    op: &str,
    device: u32,
    done: impl Fn(&(bool, String, String)) -> bool,
) -> (bool, String, String) {
    cluster_page_until(description, (0, op, device, 5, &[]), done)
}

#[test]
fn a_four_node_line_runs_over_shared_memory() {
    let folder = fresh_folder("cluster-shm-line");
    let description = folder.path().join("line.toml");
    std::fs::write(&description, shm_line_description()).unwrap();
    let images = folder.path().join("images");
    let mut nodes = Nodes((0..NODES).map(|_| None).collect());
    for node in 0..NODES {
        let (child, lines) = start_flashpipe(&[
            "cluster",
            "node",
            "--cluster",
            text(&description),
            "--node",
            &node.to_string(),
            "--image",
            text(&images),
        ]);
        assert!(
            lines.last().is_some_and(|line| line.contains("ready")),
            "node {node} printed no readiness line: {lines:?}"
        );
        let socket = format!(
            "ready on {}",
            folder
                .path()
                .join("sockets")
                .join(format!("node-{node}.sock"))
                .display()
        );
        assert!(
            lines
                .last()
                .is_some_and(|line| line.contains(&socket) && line.contains("(shared memory)")),
            "node {node}'s readiness line names its socket: {lines:?}"
        );
        nodes.0[node as usize] = Some(child);
    }
    let sockets = folder.path().join("sockets");
    let mode = std::fs::metadata(&sockets).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700, "the socket folder is the owner's only");
    assert!(sockets.join("node-3.sock").exists());

    page_round_trip_three_hops(
        &description,
        folder.path(),
        b"a page over three shared-memory links",
    );

    if second_user_available("a_four_node_line_runs_over_shared_memory (another user)") {
        let other = flashpipe_as_nobody(
            &[
                "cluster",
                "page",
                "--cluster",
                text(&description),
                "--host",
                "0",
                "read",
                "--device",
                "0",
                "--bus",
                "0",
                "--chip",
                "0",
                "--block",
                "0",
            ],
            folder.path(),
        );
        assert!(
            !other.status.success(),
            "another user cannot reach a node's socket"
        );
    }

    // Reads in flight to device 3 when its node is killed: each answered, none lost.
    let loaded = load_description(&description).unwrap();
    let mut session = HostSession::open(&loaded, 0, SessionOptions::default()).unwrap();
    for tag in 0..IN_FLIGHT {
        let address = FlashAddress {
            device: 3,
            bus: (tag % 8) as u32,
            chip: 0,
            block: 5,
            page: 0,
        };
        let command = FlashCommand::ReadPage { address };
        let request = FlashRequest {
            tag,
            host: 0,
            command,
        };
        session.submit(request).unwrap();
    }
    let mut killed = signal(&mut nodes, 3, libc::SIGKILL);
    let _ = killed.wait();
    let mut acks = Vec::new();
    while (acks.len() as u64) < IN_FLIGHT {
        session.wait(&mut acks);
    }
    for ack in &acks {
        assert!(ack.failure.is_none(), "the host's own link stays up");
        assert!(
            matches!(
                ack.ack.status,
                Status::Flash(AckStatus::Ok { .. }) | Status::Unreachable { device: 3, .. }
            ),
            "tag {}: {}",
            ack.ack.tag,
            status_words(&ack.ack.status)
        );
    }
    drop(session);
    let unreachable = page_until(&description, "read", 3, |result| {
        result.2.contains("Unreachable")
    });
    assert!(
        !unreachable.0 && unreachable.2.contains("Unreachable"),
        "{}{}",
        unreachable.1,
        unreachable.2
    );
    let near = page_until(&description, "erase", 2, |result| result.0);
    assert!(near.0, "the rest of the line still serves: {}", near.2);
    let mut first = signal(&mut nodes, 0, libc::SIGTERM);
    let status = first.wait().unwrap();
    assert!(
        status.success(),
        "node 0 stops cleanly, every tag free after the kill: {status}"
    );
}

/// Sends `signal` to node `node` and hands its process back.
fn signal(nodes: &mut Nodes, node: usize, signal: i32) -> Child {
    let child = nodes.0[node].take().expect("the node runs");
    let pid = i32::try_from(child.id()).expect("a process id");
    // SAFETY: kill with a valid pid and signal has no memory effects.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
    child
}

#[test]
fn bench_cluster_runs_over_shared_memory() {
    let folder = fresh_folder("cluster-shm-bench");
    let output = common::flashpipe_in_env(
        &[
            "bench",
            "cluster",
            "--seconds",
            "0.1",
            "--link",
            "shm",
            "--parts",
            "fig7",
            "--json",
        ],
        &[("TMPDIR", text(folder.path()))],
    );
    let report = common::succeeded_json(&output, "bench cluster --link shm --parts fig7");
    assert_eq!(report["link"], "shm", "{report:#}");
    let rows = report["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 4, "one row per hop count: {report:#}");
    let left: Vec<_> = std::fs::read_dir(folder.path()).unwrap().collect();
    assert!(
        left.is_empty(),
        "the scratch folder (sockets included) is removed: {left:?}"
    );
}
