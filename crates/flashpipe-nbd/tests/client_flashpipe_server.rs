//! flashpipe's NBD client against flashpipe's NBD server (`flashpipe_nbd::server`), both
//! ways of reaching it (a Unix socket, loopback TCP): the device conformance suite over a
//! RAM-disk export (one connection, and four: multi-conn), and a store striped over three
//! such disk nodes (HWFS 3.3.2).

mod client_support;

use client_support::{check_store, fill_store, striped_store_config, Scratch};
use flashpipe_device::conformance;
use flashpipe_device::{BlockDevice, RamDisk};
use flashpipe_nbd::client::{NbdDevice, NbdDeviceConfig, NbdUri};
use flashpipe_nbd::server::{Export, InitialAllocation, NbdServer, ServerConfig};
use flashpipe_store::create_store;

/// A server exporting one zeroed RAM disk of `size_bytes` as `disk`.
fn ram_disk_node(size_bytes: u64, tcp: bool, socket: Option<std::path::PathBuf>) -> NbdServer {
    let device = RamDisk::new("ram", 4096, size_bytes / 4096, 64).expect("RAM disk");
    let config = ServerConfig {
        tcp_address: tcp.then(|| "127.0.0.1:0".parse().unwrap()),
        unix_socket_path: socket,
        ..ServerConfig::default()
    };
    NbdServer::start(
        config,
        vec![Export {
            name: "disk".to_string(),
            description: "a RAM disk".to_string(),
            device: Box::new(device),
            read_only: false,
            trim_reads_zeroes: true,
            initial_allocation: InitialAllocation::AllHoles,
        }],
    )
    .expect("server starts")
}

fn open(uri: &str, queue_depth: u32) -> NbdDevice {
    let mut config = NbdDeviceConfig::new(NbdUri::parse(uri).unwrap());
    config.queue_depth = queue_depth;
    NbdDevice::open(config).unwrap_or_else(|error| panic!("{uri}: {error}"))
}

/// Runs the device conformance suite on clients of flashpipe's server: each device the
/// suite asks for is opened at `uri_of(node)` on a new node from `new_node` (64 MiB RAM
/// disk), kept up until the suite ends, and has negotiated structured replies.
fn conformance_over(
    mut new_node: impl FnMut() -> NbdServer,
    uri_of: impl Fn(&NbdServer) -> String,
) {
    let mut servers = Vec::new();
    conformance::check_all(&mut |queue_depth| {
        let server = new_node();
        let device = open(&uri_of(&server), queue_depth);
        assert!(device.export().structured_replies);
        servers.push(server);
        Box::new(device) as Box<dyn BlockDevice>
    });
}

#[test]
fn flashpipe_s_server_over_a_unix_socket_passes_the_conformance_suite() {
    let scratch = Scratch::new("fp-unix");
    let mut serial = 0;
    let new_node = || {
        serial += 1;
        let socket = scratch.path.join(format!("s{serial}.sock"));
        ram_disk_node(64 << 20, false, Some(socket))
    };
    conformance_over(new_node, |server| server.uris("disk")[0].clone());
}

#[test]
fn flashpipe_s_server_over_loopback_tcp_passes_the_conformance_suite() {
    let new_node = || ram_disk_node(64 << 20, true, None);
    conformance_over(new_node, |server| {
        let uri = server.uris("disk")[0].clone();
        assert!(uri.starts_with("nbd://127.0.0.1:"), "{uri}");
        uri
    });
}

#[test]
fn four_connections_to_flashpipe_s_server_pass_the_conformance_suite() {
    let new_node = || ram_disk_node(64 << 20, true, None);
    conformance_over(new_node, |server| {
        format!("{}?x-connections=4", server.uris("disk")[0])
    });
}

#[test]
fn a_store_stripes_over_three_flashpipe_disk_nodes() {
    let scratch = Scratch::new("fp-striped");
    let servers: Vec<NbdServer> = (0..3)
        .map(|_| ram_disk_node(32 << 20, true, None))
        .collect();
    let list: Vec<String> = servers
        .iter()
        .map(|server| server.uris("disk")[0].clone())
        .collect();
    let store_file = scratch.path.join("store.toml");
    let config = striped_store_config(&list);
    create_store(&config, &store_file, &mut |_| {}).expect("mkfs");
    let contents = |index: usize| -> Vec<u8> {
        (0..(5000 + index * 40_009) % 400_000)
            .map(|byte| (byte as u8).wrapping_mul(index as u8 | 1))
            .collect()
    };
    let files: Vec<(String, Vec<u8>)> = (0..30)
        .map(|index| (format!("f{index}"), contents(index)))
        .collect();
    fill_store(&config, &store_file, &files);
    check_store(&config, &store_file, &files);
}
