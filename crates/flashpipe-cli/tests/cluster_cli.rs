//! `flashpipe cluster` through the real binary: a four-node line on loopback ports with a
//! host on every node; pages written and read back across three hops; the flash rules and
//! the shares refused by name; a node killed with SIGKILL (reads through it fail
//! `Unreachable`, naming the device and the hop) and restarted (its image persisted); a
//! bad hello and a bad frame sent raw to a node, which closes only that connection; bad
//! description files and options refused with clear messages.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Child;
use std::time::Duration;

use common::{
    check_fails, check_fails_naming, cluster_page, cluster_page_read, cluster_page_until,
    command_line, flashpipe, flashpipe_as_nobody, fresh_folder, outcome,
    page_round_trip_three_hops, second_user_available, start_cluster_node, text,
    write_loopback_one_node, write_one_node,
};
use flashpipe_cluster::description::line_text;
use flashpipe_testkit::ports::free_loopback_port;

const NODES: u32 = 4;

/// A four-node line, host `h` on node `h`, owning blocks `1024 h` to `1024 h + 1023` of
/// every device.
fn line_description(ports: &[u16]) -> String {
    let hosts: Vec<u32> = (0..NODES).collect();
    line_text(ports, "minflash", "node", &hosts, 1024)
}

/// The node processes; any still running are killed when the test ends.
struct Nodes {
    description: PathBuf,
    images: PathBuf,
    children: Vec<Option<Child>>,
}

impl Nodes {
    fn start(&mut self, node: u32) -> Vec<String> {
        let (child, lines) = start_cluster_node(&self.description, node, &self.images);
        self.children[node as usize] = Some(child);
        lines
    }

    fn signal(&mut self, node: u32, signal: i32) -> Child {
        let child = self.children[node as usize]
            .take()
            .expect("the node is running");
        let pid = i32::try_from(child.id()).expect("a process id");
        // SAFETY: kill with a valid pid and signal has no memory effects.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
        child
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for child in self.children.iter_mut().flatten() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn hello(role: u8, id: u32, crc: u32) -> [u8; 16] {
    let mut bytes = [0u8; 16];
    bytes[0..4].copy_from_slice(b"FPCH");
    bytes[4..6].copy_from_slice(&1u16.to_le_bytes());
    bytes[6] = role;
    bytes[8..12].copy_from_slice(&id.to_le_bytes());
    bytes[12..16].copy_from_slice(&crc.to_le_bytes());
    bytes
}

fn raw_hello(port: u16, bytes: &[u8]) -> (TcpStream, [u8; 16]) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("the node listens");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(bytes).unwrap();
    let mut reply = [0u8; 16];
    stream
        .read_exact(&mut reply)
        .expect("the node answers the hello");
    (stream, reply)
}

#[test]
fn a_four_node_line_serves_pages_across_hops_and_survives_a_killed_node() {
    let folder = fresh_folder("cluster-line");
    let ports: Vec<u16> = (0..NODES).map(|_| free_loopback_port()).collect();
    let description = folder.path().join("cluster.toml");
    let description_text = line_description(&ports);
    std::fs::write(&description, &description_text).unwrap();
    let crc = crc32c::crc32c(description_text.as_bytes());

    let (ok, stdout, stderr) = outcome(&["cluster", "check", text(&description)]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("4 nodes, 4 hosts, 3 links"), "{stdout}");
    assert!(stdout.contains("link 2 - 3"), "{stdout}");
    assert!(
        stdout.contains("not authenticated"),
        "check says there is no key: {stdout}"
    );
    let (ok, json, _) = outcome(&["cluster", "check", text(&description), "--json"]);
    assert!(ok);
    let json: serde_json::Value = serde_json::from_str(&json).expect("check --json");
    assert_eq!(json["nodes"].as_array().map(Vec::len), Some(4));

    let mut nodes = Nodes {
        description: description.clone(),
        images: folder.path().join("images"),
        children: (0..NODES).map(|_| None).collect(),
    };
    for node in 0..NODES {
        let lines = nodes.start(node);
        assert!(lines.last().unwrap().contains("created"), "{lines:?}");
    }

    // Host 0 erases block 5 of device 3 (three hops away) once the links are up.
    let (read, data) = page_round_trip_three_hops(
        &description,
        folder.path(),
        b"a page from host 0, three hops away",
    );
    assert!(read.contains("8192 bytes"), "{read}");
    assert_eq!(data.len(), 8192);
    let input = folder.path().join("page.bin");
    let output = folder.path().join("read.bin");
    let read_json = cluster_page(&description, 0, "read", 3, 5, &["--json"]);
    let object: serde_json::Value = serde_json::from_str(&read_json.1).expect("page --json");
    assert_eq!(
        (object["status"].as_str(), object["hops"].as_u64()),
        (Some("Ok"), Some(3))
    );

    // The flash's rules and the shares, refused by name.
    let again = cluster_page(
        &description,
        0,
        "write",
        3,
        5,
        &["--page", "0", "--input", text(&input)],
    );
    assert!(!again.0 && again.2.contains("NotErased"), "{}", again.2);
    let skipped = cluster_page(
        &description,
        0,
        "write",
        3,
        5,
        &["--page", "2", "--input", text(&input)],
    );
    assert!(
        !skipped.0 && skipped.2.contains("OutOfOrder"),
        "{}",
        skipped.2
    );
    let foreign = cluster_page(&description, 0, "erase", 3, 2000, &[]);
    assert!(
        !foreign.0 && foreign.2.contains("NotOwner"),
        "{}",
        foreign.2
    );
    assert!(
        foreign.2.contains("block 2000 of device 3"),
        "{}",
        foreign.2
    );
    assert!(!foreign.2.contains("panicked"));
    let shared_read = cluster_page(&description, 0, "read", 3, 2000, &[]);
    assert!(
        !shared_read.2.contains("NotOwner"),
        "reads are never refused by the shares"
    );

    // A page on device 2, whose node is killed and restarted below.
    let on_two = cluster_page_until(&description, (2, "erase", 2, 2048, &[]), |result| result.0);
    assert!(on_two.0, "{}", on_two.2);
    let written = cluster_page(
        &description,
        2,
        "write",
        2,
        2048,
        &["--input", text(&input)],
    );
    assert!(written.0, "{}", written.2);

    // A bad hello, a hello with another description, and a bad frame after a good hello:
    // each closes only its own connection.
    let (_, reply) = raw_hello(ports[1], b"GET / HTTP/1.1\r\n");
    assert_eq!(reply[7], 1, "a bad hello is refused as such");
    let (_, reply) = raw_hello(ports[1], &hello(1, 1, crc ^ 1));
    assert_eq!(reply[7], 2, "another description is refused as such");
    let (mut raw, reply) = raw_hello(ports[1], &hello(1, 1, crc));
    assert_eq!(reply[7], 0, "host 1's hello is taken");
    raw.write_all(&[0xff; 64]).unwrap();
    let mut rest = Vec::new();
    let _ = raw.read_to_end(&mut rest);
    let through = cluster_page(&description, 0, "read", 3, 5, &[]);
    assert!(through.0, "node 1 goes on routing: {}", through.2);
    let own = cluster_page(&description, 1, "read", 1, 5, &[]);
    assert!(own.0, "host 1 connects again: {}", own.2);

    // SIGKILL of node 2: host 0's read of device 3 fails naming the device and the hop.
    let mut killed = nodes.signal(2, libc::SIGKILL);
    killed.wait().unwrap();
    let unreachable = cluster_page_until(&description, (0, "read", 3, 5, &[]), |result| {
        result.2.contains("Unreachable")
    });
    assert!(!unreachable.0, "{}", unreachable.1);
    assert!(
        unreachable.2.contains("Unreachable")
            && unreachable.2.contains("device 3")
            && unreachable.2.contains("hop 1"),
        "{}",
        unreachable.2
    );

    // Restarted, node 2 serves its image: the page written on it before is read back.
    let lines = nodes.start(2);
    assert!(lines.last().unwrap().contains("reopened"), "{lines:?}");
    let back = cluster_page_until(
        &description,
        (0, "read", 2, 2048, &["--output", text(&output)]),
        |result| result.0,
    );
    assert!(back.0, "{}", back.2);
    assert!(std::fs::read(&output)
        .unwrap()
        .starts_with(b"a page from host 0, three hops away"));
    let far = cluster_page_until(&description, (0, "read", 3, 5, &[]), |result| result.0);
    assert!(far.0 && far.1.contains("3 hops"), "{}", far.2);

    // SIGTERM stops every node cleanly.
    for node in 0..NODES {
        let mut child = nodes.signal(node, libc::SIGTERM);
        let status = child.wait().unwrap();
        let stderr = common::read_stderr(&mut child);
        assert!(status.success(), "node {node}: {status}, {stderr}");
        assert!(stderr.contains("stopping"), "node {node}: {stderr}");
        assert!(!stderr.contains("panicked"), "node {node}: {stderr}");
        if node == 1 {
            assert!(
                stderr.contains("bad frame"),
                "node 1 logs the bad frame: {stderr}"
            );
        }
    }
}

#[test]
fn bad_descriptions_and_options_are_refused_clearly() {
    let folder = fresh_folder("cluster-bad");
    let garbage = folder.path().join("garbage.toml");
    std::fs::write(&garbage, "this is not [toml").unwrap();
    check_fails(&["cluster", "check", text(&garbage)], "garbage.toml");
    let unknown_link = folder.path().join("link.toml");
    std::fs::write(
        &unknown_link,
        "version = 1\n[[node]]\nid = 0\naddress = \"127.0.0.1:7400\"\npreset = \"minflash\"\nimage = \"a.img\"\nlinks = [5]\n",
    )
    .unwrap();
    check_fails(&["cluster", "check", text(&unknown_link)], "5");
    check_fails(
        &["cluster", "check", text(&folder.path().join("absent.toml"))],
        "cannot read",
    );

    let remote = folder.path().join("remote.toml");
    write_one_node(&remote, "", "192.0.2.1:7400");
    let good = folder.path().join("good.toml");
    write_loopback_one_node(&good, "");
    let images = text(folder.path());
    let nested = folder.path().join("missing/images");
    for (description, node, image_folder, expected) in [
        (text(&remote), "0", images, "loopback"),
        (
            text(&good),
            "9",
            images,
            "node 9 is not in the cluster description",
        ),
        (text(&good), "0", text(&good), "not a folder"),
        (text(&good), "0", text(&nested), "does not exist"),
    ] {
        check_fails(
            &command_line(
                "cluster node --cluster {} --node {} --image {}",
                &[description, node, image_folder],
            ),
            expected,
        );
    }
    check_fails(
        &command_line(
            "cluster node --cluster {} --node 0 --image {} --spin-us 20000",
            &[text(&good), images],
        ),
        "--spin-us",
    );
    let arguments = ["cluster", "page", "--cluster", text(&good), "--host", "0"];
    let address = ["--device", "0", "--bus", "0", "--chip", "0", "--block", "0"];
    let with = |op: &str, extra: &[&str]| -> Vec<String> {
        arguments
            .iter()
            .chain([op].iter())
            .chain(address.iter())
            .chain(extra.iter())
            .map(|s| s.to_string())
            .collect()
    };
    let run = |list: Vec<String>, fragment: &str| {
        let list: Vec<&str> = list.iter().map(String::as_str).collect();
        check_fails(&list, fragment);
    };
    run(with("write", &[]), "--input");
    run(
        with("read", &["--input", text(&good)]),
        "--input is for write only",
    );
    run(with("read", &[]), "cannot connect to node 0");
    check_fails(
        &cluster_page_read(&good, "0", "7"),
        "device 7 is not in the cluster description (its devices: 0)",
    );
    check_fails_naming(
        &cluster_page_read(&good, "3", "0"),
        &["host 3 is not in the cluster description"],
    );
}

#[test]
fn a_keyed_cluster_lets_in_only_holders_of_its_key() {
    if !second_user_available("a_keyed_cluster_lets_in_only_holders_of_its_key") {
        return;
    }
    let folder = fresh_folder("cluster-key");
    std::fs::set_permissions(folder.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let description = folder.path().join("cluster.toml");
    write_loopback_one_node(&description, "key_file = \"cluster.key\"\n");
    std::fs::set_permissions(&description, std::fs::Permissions::from_mode(0o644)).unwrap();
    let key = folder.path().join("cluster.key");
    std::fs::write(&key, [0x42u8; 32]).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut nodes = Nodes {
        description: description.clone(),
        images: folder.path().join("images"),
        children: vec![None],
    };
    let (ok, stdout, _) = outcome(&["cluster", "check", text(&description)]);
    assert!(
        ok && stdout.contains("key cluster.key"),
        "check names the key: {stdout}"
    );
    nodes.start(0);
    let (ok, _, stderr) = cluster_page(&description, 0, "read", 0, 0, &["--page", "0"]);
    assert!(ok, "the key's owner reads a page: {stderr}");

    let as_nobody = flashpipe_as_nobody(
        &command_line(
            "cluster page --cluster {} --host 0 read --device 0 --bus 1 --chip 2 --block 0 --page 0",
            &[text(&description)],
        ),
        folder.path(),
    );
    let stderr = String::from_utf8_lossy(&as_nobody.stderr);
    assert!(!as_nobody.status.success(), "another user gets no page");
    assert!(
        stderr.contains("cannot read the cluster key"),
        "another user is stopped at the key it cannot read: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");

    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (ok, _, stderr) = cluster_page(&description, 0, "read", 0, 0, &["--page", "0"]);
    assert!(
        !ok && stderr.contains("chmod 600"),
        "a key open to others is refused: {stderr}"
    );
    let refused = flashpipe(&command_line(
        "cluster page --cluster {} --host 0 read --device 0 --bus 1 --chip 2 --block 0 --page 0",
        &[text(&description)],
    ));
    assert_eq!(
        refused.status.code(),
        Some(77),
        "a key open to others is a permission failure"
    );
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let elsewhere = folder.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let other_description = elsewhere.join("cluster.toml");
    std::fs::copy(&description, &other_description).unwrap();
    let other_key = elsewhere.join("cluster.key");
    std::fs::write(&other_key, [0x43u8; 32]).unwrap();
    std::fs::set_permissions(&other_key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let wrong = flashpipe(&command_line(
        "cluster page --cluster {} --host 0 read --device 0 --bus 1 --chip 2 --block 0 --page 0",
        &[text(&other_description)],
    ));
    let stderr = String::from_utf8_lossy(&wrong.stderr);
    assert_eq!(wrong.status.code(), Some(77), "another key: {stderr}");
    assert!(
        stderr.contains("does not hold this cluster's key"),
        "{stderr}"
    );
    let (ok, _, stderr) = cluster_page(&description, 0, "read", 0, 0, &["--page", "0"]);
    assert!(ok, "the node still serves the key's owner: {stderr}");
}
