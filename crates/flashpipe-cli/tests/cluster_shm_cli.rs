//! `flashpipe cluster` with `link = "shm"` through the real binary: `cluster check` names
//! the link and the socket folder (text and JSON), a node address that is not loopback and
//! a bad link kind are refused by name, and a node or a host refuses to start on a
//! shared-memory description (the links are not carried yet) instead of falling back to
//! TCP.

mod common;

use common::{check_fails, command_line, fresh_folder, outcome, text};
use flashpipe_testkit::ports::free_loopback_port;

/// One node at `address` with host 0 on it; `top` goes before the node.
fn one_node_description(top: &str, address: &str) -> String {
    format!(
        "version = 1\n{top}[[node]]\nid = 0\naddress = \"{address}\"\npreset = \"minflash\"\nimage = \"n0.img\"\n[[host]]\nid = 0\nnode = 0\n"
    )
}

#[test]
fn check_names_the_link_and_the_socket_folder() {
    let folder = fresh_folder("cluster-shm-check");
    let shm = folder.path().join("shm.toml");
    let top = "link = \"shm\"\nsocket_dir = \"sockets\"\n";
    std::fs::write(&shm, one_node_description(top, "127.0.0.1:7400")).unwrap();
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
    std::fs::write(&tcp, one_node_description("", "127.0.0.1:7400")).unwrap();
    let (ok, stdout, stderr) = outcome(&["cluster", "check", text(&tcp)]);
    assert!(ok && stdout.contains("link: tcp\n"), "{stdout}{stderr}");
}

#[test]
fn bad_shm_descriptions_are_refused_by_name() {
    let folder = fresh_folder("cluster-shm-bad");
    let remote = folder.path().join("remote.toml");
    std::fs::write(
        &remote,
        one_node_description("link = \"shm\"\n", "192.0.2.1:7400"),
    )
    .unwrap();
    check_fails(
        &["cluster", "check", text(&remote)],
        "node 0's address 192.0.2.1:7400 is not a loopback address",
    );
    let unknown = folder.path().join("unknown.toml");
    std::fs::write(
        &unknown,
        one_node_description("link = \"rdma\"\n", "127.0.0.1:7400"),
    )
    .unwrap();
    check_fails(&["cluster", "check", text(&unknown)], "rdma");
}

#[test]
fn a_node_and_a_host_refuse_a_shm_description_they_cannot_carry() {
    let folder = fresh_folder("cluster-shm-refused");
    let port = free_loopback_port();
    let shm = folder.path().join("shm.toml");
    std::fs::write(
        &shm,
        one_node_description("link = \"shm\"\n", &format!("127.0.0.1:{port}")),
    )
    .unwrap();
    let node = command_line(
        "cluster node --cluster {} --node 0 --image {}",
        &[text(&shm), text(folder.path())],
    );
    check_fails(&node, "set link = \"tcp\"");
    assert!(
        !folder.path().join("n0.img").exists(),
        "nothing is created before the refusal"
    );
    check_fails(
        &[
            "cluster",
            "page",
            "--cluster",
            text(&shm),
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
        "set link = \"tcp\"",
    );
}
