//! A store striped over N loopback disk nodes beside the same store over N local RAM
//! disks (HWFS 3.3.2, the thesis's 4 and 8 disks): each disk node is flashpipe's NBD
//! server exporting a RAM disk over loopback TCP, reached by `NbdDevice`. For N = 1, 2,
//! 4, 8: a fresh store, one file written in 1 MiB writes and flushed, then read back in
//! 1 MiB reads; wall-clock MiB/s of each and the remote/local ratio.
//!
//! Run on an idle machine (figures taken on a shared one mean nothing):
//! `cargo run --release -p flashpipe-nbd --example disk_nodes -- [FILE_MIB] [NODE_MIB]
//! [CONNECTIONS]` (defaults 256, 128 and 1 connection per disk node; 4 uses multi-conn).
//! The design alternatives side by side: the same command with CONNECTIONS 1 and 4.

use std::path::Path;
use std::time::Instant;

use flashpipe_device::RamDisk;
use flashpipe_fs::{Filesystem, FormatOptions};
use flashpipe_nbd::server::{Export, InitialAllocation, NbdServer, ServerConfig};
use flashpipe_store::store::{open_store_device, DeviceCreation};
use flashpipe_store::store_config::{parse_device_list, STORE_FILE_VERSION};
use flashpipe_store::StoreConfig;

const MIB: u64 = 1 << 20;

fn disk_node(size_bytes: u64) -> NbdServer {
    let device = RamDisk::new("ram", 4096, size_bytes / 4096, 64).expect("RAM disk");
    let config = ServerConfig {
        tcp_address: Some("127.0.0.1:0".parse().expect("loopback")),
        ..ServerConfig::default()
    };
    let export = Export {
        name: "disk".to_string(),
        description: "disk node".to_string(),
        device: Box::new(device),
        read_only: false,
        trim_reads_zeroes: true,
        initial_allocation: InitialAllocation::AllHoles,
    };
    NbdServer::start(config, vec![export]).expect("disk node starts")
}

/// (write MiB/s, read MiB/s) of one file through a fresh store over `devices`.
fn measure(devices: &str, node_bytes: u64, file_bytes: u64, folder: &Path) -> (f64, f64) {
    let store_file = folder.join("store.toml");
    let config = StoreConfig {
        store_file_version: STORE_FILE_VERSION,
        identity: None,
        block_size_bytes: 64 << 10,
        stripe_unit_bytes: 256 << 10,
        queue_depth: 32,
        devices: parse_device_list(devices, Some(node_bytes)).expect("device list"),
    };
    let opened = open_store_device(&config, &store_file, DeviceCreation::CreateMissing)
        .expect("devices open");
    let options = FormatOptions {
        fs_block_size_bytes: config.block_size_bytes,
        store_identity: None,
    };
    let mut filesystem = Filesystem::format(opened.device, &options).expect("format");
    let chunk: Vec<u8> = (0..MIB).map(|index| (index * 7) as u8).collect();
    let file = filesystem.create("data").expect("create");
    let started = Instant::now();
    for offset in (0..file_bytes).step_by(MIB as usize) {
        filesystem.write(file, offset, &chunk).expect("write");
    }
    filesystem.flush().expect("flush");
    let write_seconds = started.elapsed().as_secs_f64();
    let started = Instant::now();
    for offset in (0..file_bytes).step_by(MIB as usize) {
        let read = filesystem.read(file, offset, MIB).expect("read");
        assert!(read[..] == chunk[..], "read back what was written");
    }
    let read_seconds = started.elapsed().as_secs_f64();
    let mib = (file_bytes / MIB) as f64;
    (mib / write_seconds, mib / read_seconds)
}

fn main() {
    let arguments: Vec<u64> = std::env::args()
        .skip(1)
        .map(|argument| argument.parse().expect("sizes in MiB"))
        .collect();
    let file_bytes = arguments.first().copied().unwrap_or(256) * MIB;
    let node_bytes = arguments.get(1).copied().unwrap_or(128) * MIB;
    let connections = arguments.get(2).copied().unwrap_or(1);
    println!("{connections} connection(s) per disk node");
    let folder = std::env::temp_dir().join(format!("fp-disk-nodes-{}", std::process::id()));
    std::fs::create_dir_all(&folder).expect("scratch folder");
    println!(
        "{:>5}  {:>12}  {:>12}  {:>12}  {:>12}  {:>7}  {:>7}",
        "nodes", "local w MiB/s", "remote w", "local r MiB/s", "remote r", "w ratio", "r ratio"
    );
    for nodes in [1u64, 2, 4, 8] {
        let file = file_bytes.min(nodes * node_bytes * 3 / 4);
        let local = vec![format!("ram:{node_bytes}"); nodes as usize].join(",");
        let (local_write, local_read) = measure(&local, node_bytes, file, &folder);
        let servers: Vec<NbdServer> = (0..nodes).map(|_| disk_node(node_bytes)).collect();
        let remote: Vec<String> = servers
            .iter()
            .map(|server| format!("{}?x-connections={connections}", server.uris("disk")[0]))
            .collect();
        let (remote_write, remote_read) = measure(&remote.join(","), node_bytes, file, &folder);
        println!(
            "{nodes:>5}  {local_write:>12.0}  {remote_write:>12.0}  {local_read:>12.0}  {remote_read:>12.0}  {:>7.2}  {:>7.2}",
            remote_write / local_write,
            remote_read / local_read
        );
        drop(servers);
    }
    let _ = std::fs::remove_dir_all(&folder);
}
