//! A store made on a minFlash cluster, through the real binary: two `flashpipe cluster
//! node` processes with a cluster key, host 0 on node 0 owning blocks of both devices;
//! mkfs over the cluster (`--size` honoured, a share holding an FTL refused without
//! `--force`), files put, listed, read back and checked, the store reopened by every
//! command and served by `flashpipe serve`; node 1 killed with SIGKILL during a put: the
//! put fails with an error naming the device, a non-zero exit and no hang; node 1
//! restarted: every file acknowledged before is there and fsck passes. Hostile: a missing
//! description, a host without shares, a host the description does not have, a bad entry
//! and a node down at mkfs are refused by name, with nothing created.

mod common;

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{fresh_folder, outcome, spawn_flashpipe, start_cluster_node, start_flashpipe, text};
use flashpipe_testkit::ports::free_loopback_port;

/// Two linked minflash nodes; host 0 on node 0 owns blocks 0..16 of every chip of both.
fn two_nodes(ports: [u16; 2]) -> String {
    format!(
        "version = 1\n\
         [[node]]\nid = 0\naddress = \"127.0.0.1:{}\"\npreset = \"minflash\"\nimage = \"node0.img\"\nlinks = [1]\n\
         [[node]]\nid = 1\naddress = \"127.0.0.1:{}\"\npreset = \"minflash\"\nimage = \"node1.img\"\n\
         [[host]]\nid = 0\nnode = 0\n\
         shares = [{{ device = 0, start = 0, end = 16 }}, {{ device = 1, start = 0, end = 16 }}]\n",
        ports[0], ports[1]
    )
}

/// The node processes; any still running are killed when the test ends.
struct Nodes {
    description: PathBuf,
    images: PathBuf,
    children: [Option<Child>; 2],
}

impl Nodes {
    fn start(&mut self, node: u32) {
        let (child, _lines) = start_cluster_node(&self.description, node, &self.images);
        self.children[node as usize] = Some(child);
    }

    fn kill(&mut self, node: u32) {
        let mut child = self.children[node as usize]
            .take()
            .expect("the node is running");
        child.kill().expect("SIGKILL the node");
        child.wait().expect("the node is reaped");
    }

    /// Waits until host 0 reaches device 1 (the link is up), for at most 20 s.
    fn wait_linked(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let (ok, stdout, stderr) = outcome(&[
                "cluster",
                "page",
                "--cluster",
                text(&self.description),
                "--host",
                "0",
                "read",
                "--device",
                "1",
                "--bus",
                "0",
                "--chip",
                "0",
                "--block",
                "40",
            ]);
            if ok {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the link never came up: {stdout} {stderr}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
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

fn sample(length: usize, seed: usize) -> Vec<u8> {
    (0..length)
        .map(|index| (index * 7 + index / 251 + seed) as u8)
        .collect()
}

fn succeed(arguments: &[&str]) -> String {
    let (ok, stdout, stderr) = outcome(arguments);
    assert!(ok, "flashpipe {arguments:?} failed: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stdout
}

/// Waits for `child` at most `limit`; its success and standard error.
fn finish_within(mut child: Child, limit: Duration) -> (bool, String) {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("the child can be waited on") {
            let output = child.wait_with_output().expect("its output");
            return (
                status.success(),
                String::from_utf8_lossy(&output.stderr).into_owned(),
            );
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let output = child.wait_with_output().expect("its output");
            panic!(
                "the command hung past {limit:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn check_files(store: &str, folder: &Path, files: &[(&str, Vec<u8>)]) {
    for (name, bytes) in files {
        let copy = folder.join(format!("{name}.copy"));
        succeed(&["get", store, name, text(&copy)]);
        assert!(
            std::fs::read(&copy).unwrap() == *bytes,
            "{name} came back different"
        );
        std::fs::remove_file(&copy).unwrap();
    }
}

#[test]
fn a_store_on_two_nodes_keeps_what_it_acknowledged_when_a_node_dies_mid_put() {
    let folder = fresh_folder("cluster-store");
    let ports = [free_loopback_port(), free_loopback_port()];
    let description = folder.path().join("cluster.toml");
    let key = folder.path().join("cluster.key");
    std::fs::write(&key, sample(32, 9)).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(
        &description,
        format!("key_file = \"cluster.key\"\n{}", two_nodes(ports)),
    )
    .unwrap();
    let mut nodes = Nodes {
        description: description.clone(),
        images: folder.path().join("images"),
        children: [None, None],
    };
    nodes.start(0);
    nodes.start(1);
    nodes.wait_linked();

    let store_path = folder.path().join("s.toml");
    let store = text(&store_path).to_string();
    let device = format!("cluster:{}#0", text(&description));
    // --size sets the store's size; a second mkfs on the same share meets the FTL the
    // first left there and is refused unless --force.
    let first = folder.path().join("first.toml");
    succeed(&[
        "mkfs",
        "--devices",
        &device,
        "--size",
        "64MiB",
        text(&first),
    ]);
    let df = succeed(&["df", text(&first)]);
    assert!(df.contains("MiB total"), "--size is the store's size: {df}");
    let (ok, _, stderr) = outcome(&["mkfs", "--devices", &device, &store]);
    assert!(!ok, "a second mkfs on the same share is refused");
    assert!(
        stderr.contains("flash translation layer") && stderr.contains("--force"),
        "{stderr}"
    );
    assert!(!store_path.exists(), "the refused mkfs wrote no store file");
    succeed(&["mkfs", "--force", "--devices", &device, &store]);
    let store_text = std::fs::read_to_string(&store_path).unwrap();
    assert!(store_text.contains("kind = \"cluster\""), "{store_text}");
    assert!(store_text.contains("blocks_per_chip = 8"), "{store_text}");

    let files = [
        ("small.txt", b"hello cluster\n".to_vec()),
        ("big.bin", sample(3 << 20, 1)),
    ];
    for (name, bytes) in &files {
        let path = folder.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        succeed(&["put", &store, text(&path)]);
    }
    let listing = succeed(&["ls", &store]);
    for (name, _) in &files {
        assert!(listing.contains(name), "{listing}");
    }
    check_files(&store, folder.path(), &files);
    let fsck: serde_json::Value =
        serde_json::from_str(&succeed(&["fsck", &store, "--json"])).unwrap();
    assert_eq!(fsck["clean"], serde_json::Value::Bool(true), "{fsck}");

    // `serve` runs the store; commands reach it through the server.
    let (mut server, lines) = start_flashpipe(&["serve", &store]);
    assert!(
        lines.last().is_some_and(|line| line.contains("ready")),
        "serve printed no readiness line: {lines:?}"
    );
    let served = succeed(&["ls", &store]);
    assert!(served.contains("big.bin"), "{served}");
    check_files(&store, folder.path(), &files[..1]);
    let pid = i32::try_from(server.id()).expect("a process id");
    // SAFETY: kill with a valid pid and signal has no memory effects.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let stopped = server.wait().expect("the server stops");
    assert!(stopped.success(), "serve stopped with {stopped}");

    // Node 1 (device 1) dies while a put is writing: the put streams standard input a
    // chunk at a time, so once it has taken 24 MiB its store is open and pages are being
    // programmed on both devices.
    let mut put = Command::new(env!("CARGO_BIN_EXE_flashpipe"))
        .args(["put", &store, "-", "--as", "doomed.bin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("flashpipe starts");
    let mut input = put.stdin.take().expect("a piped stdin");
    let taken = Arc::new(AtomicU64::new(0));
    let writer = {
        let taken = Arc::clone(&taken);
        std::thread::spawn(move || {
            let chunk = sample(1 << 20, 2);
            for _ in 0..512 {
                if input.write_all(&chunk).is_err() {
                    return;
                }
                taken.fetch_add(chunk.len() as u64, Ordering::SeqCst);
            }
        })
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while taken.load(Ordering::SeqCst) < 24 << 20 {
        assert!(Instant::now() < deadline, "the put took no data");
        std::thread::sleep(Duration::from_millis(5));
    }
    nodes.kill(1);
    let (mut put_ok, mut stderr) = finish_within(put, Duration::from_secs(60));
    writer.join().expect("the writer ends");
    eprintln!("the put during the kill: succeeded {put_ok}; {stderr}");
    if put_ok {
        // The put was done before the kill: the next one meets the dead node.
        let late = folder.path().join("late.bin");
        std::fs::write(&late, sample(1 << 20, 3)).unwrap();
        let put = spawn_flashpipe(&["put", &store, text(&late)]);
        (put_ok, stderr) = finish_within(put, Duration::from_secs(60));
    }
    assert!(!put_ok, "a put with device 1 down must fail");
    assert!(
        stderr.contains("device 1"),
        "the error names the device: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");

    // Node 1 restarts from its image: everything acknowledged before is there.
    nodes.start(1);
    nodes.wait_linked();
    check_files(&store, folder.path(), &files);
    let fsck = outcome(&["fsck", &store, "--json"]);
    assert!(fsck.0, "fsck after the restart: {} {}", fsck.1, fsck.2);
    let report: serde_json::Value = serde_json::from_str(&fsck.1).unwrap();
    assert_eq!(report["clean"], serde_json::Value::Bool(true), "{report}");
}

#[test]
fn bad_cluster_devices_are_refused_by_name_and_nothing_is_created() {
    let folder = fresh_folder("cluster-store-refused");
    let ports = [free_loopback_port(), free_loopback_port()];
    let description = folder.path().join("cluster.toml");
    std::fs::write(&description, two_nodes(ports)).unwrap();
    let store_path = folder.path().join("s.toml");
    let store = text(&store_path).to_string();
    let missing = folder.path().join("missing.toml");
    let no_shares = folder.path().join("no-shares.toml");
    let text_without_shares = two_nodes(ports);
    let cut = text_without_shares
        .find("shares = ")
        .expect("the description has shares");
    std::fs::write(&no_shares, &text_without_shares[..cut]).unwrap();
    let cases: [(String, &[&str]); 5] = [
        (
            format!("cluster:{}#0", text(&no_shares)),
            &["host 0 holds no share of any device"],
        ),
        (
            format!("cluster:{}#0", text(&missing)),
            &["missing.toml", "cannot read"],
        ),
        (
            format!("cluster:{}#7", text(&description)),
            &["host 7 is not in the cluster description"],
        ),
        (
            format!("cluster:{}", text(&description)),
            &["cluster:DESCRIPTION.toml#HOST"],
        ),
        (
            format!("cluster:{}#0", text(&description)),
            &["cannot connect to node 0", "is the node running?"],
        ),
    ];
    for (device, fragments) in &cases {
        let before: Vec<_> = std::fs::read_dir(folder.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        let started = Instant::now();
        let (ok, _, stderr) = outcome(&["mkfs", "--devices", device, &store]);
        assert!(!ok, "mkfs on {device} must fail");
        assert!(started.elapsed() < Duration::from_secs(30), "no hang");
        for fragment in *fragments {
            assert!(
                stderr.contains(fragment),
                "mkfs on {device}: {stderr:?} lacks {fragment:?}"
            );
        }
        assert!(!stderr.contains("panicked"), "{stderr}");
        let after: Vec<_> = std::fs::read_dir(folder.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(before, after, "mkfs on {device} created something");
    }
}
