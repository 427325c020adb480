//! `flashpipe cluster` with `link = "shm"` through the real binary: `cluster check` names
//! the link and the socket folder (text and JSON), a node address that is not loopback and
//! a bad link kind are refused by name, and a node or a host refuses to start on a
//! shared-memory description (the links are not carried yet) instead of falling back to
//! TCP.

mod common;

use common::{
    check_fails, cluster_page_read, command_line, fresh_folder, outcome, text,
    write_loopback_one_node, write_one_node,
};

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

#[test]
fn a_node_and_a_host_refuse_a_shm_description_they_cannot_carry() {
    let folder = fresh_folder("cluster-shm-refused");
    let shm = folder.path().join("shm.toml");
    write_loopback_one_node(&shm, "link = \"shm\"\n");
    let node = command_line(
        "cluster node --cluster {} --node 0 --image {}",
        &[text(&shm), text(folder.path())],
    );
    check_fails(&node, "set link = \"tcp\"");
    assert!(
        !folder.path().join("n0.img").exists(),
        "nothing is created before the refusal"
    );
    check_fails(&cluster_page_read(&shm, "0", "0"), "set link = \"tcp\"");
}
