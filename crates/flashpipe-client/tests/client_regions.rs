//! `Client::register_region` and `Client::read_into` against a real server in this
//! process: the bytes a read-into lands are the bytes a read by reference returns, reads
//! into one region pipelined, the checks made before sending, and unregistering.

use std::sync::Arc;

use flashpipe_client::{
    Client, ClientError, ClientTransport, ConnectOptions, Response, TransportExt,
};
use flashpipe_device::RamDisk;
use flashpipe_engine::{EngineConfig, PoolMemory};
use flashpipe_fs::{Filesystem, FormatOptions};
use flashpipe_protocol::RegionResponse;
use flashpipe_server::{Server, ServerConfig};
use flashpipe_shm::SharedMemory;
use flashpipe_store::RunningStore;
use flashpipe_testkit::scratch::ScratchFolder;

const MIB: u64 = 1 << 20;

/// A server of a fresh 32 MiB RAM store with 16 KiB blocks, and a mapping client on
/// the socket.
fn served(folder: &ScratchFolder) -> (Server, Client) {
    let disk = RamDisk::new("ram0", 4096, 8192, 32).expect("RAM disk");
    let options = FormatOptions {
        fs_block_size_bytes: 16384,
        store_identity: None,
    };
    let filesystem = Filesystem::format(Box::new(disk), &options).expect("format");
    let config = EngineConfig {
        read_pool_memory: PoolMemory::Shared,
        ..EngineConfig::default()
    };
    let socket = folder.path().join("serve.sock");
    let server_config = ServerConfig {
        socket_path: socket.clone(),
        ..ServerConfig::default()
    };
    let server = Server::start(RunningStore::start(filesystem, config), server_config)
        .expect("server started");
    let options = ConnectOptions {
        transport: ClientTransport::Socket,
        ..ConnectOptions::default()
    };
    let client = Client::connect(&socket, options).expect("connected");
    (server, client)
}

fn contents(length: usize) -> Vec<u8> {
    (0..length).map(|index| (index * 7 % 253) as u8).collect()
}

fn bytes_of(memory: &SharedMemory, length: usize) -> Vec<u8> {
    // SAFETY: this process's mapping of `memory`, no read into it in flight.
    unsafe { std::slice::from_raw_parts(memory.as_mut_ptr(), length) }.to_vec()
}

#[test]
fn reads_into_a_region_land_the_bytes_a_read_by_reference_returns() {
    let folder = ScratchFolder::new("client-regions-bytes");
    let (_server, mut client) = served(&folder);
    let size = 3 * MIB as usize + 5000;
    let data = contents(size);
    client.create("f").expect("create");
    for (index, chunk) in data.chunks(MIB as usize).enumerate() {
        client.write("f", index as u64 * MIB, chunk).expect("write");
    }
    let memory = Arc::new(SharedMemory::create("fp-test-client-region", 4 * MIB as usize).unwrap());
    let region = client
        .register_region(Arc::clone(&memory))
        .expect("registered");
    assert_eq!(region.block_bytes(), 16384);
    assert_eq!(region.size_bytes(), 4 * MIB as usize);
    let ids: Vec<_> = (0..4u64)
        .map(|chunk| {
            let length = (size as u64 - chunk * MIB).min(MIB);
            client
                .submit_read_into(&region, "f", chunk * MIB, length, chunk * MIB)
                .expect("sent")
        })
        .collect();
    for id in ids {
        let answer = client.wait_for(id).expect("answered");
        assert!(matches!(
            answer,
            Response::Region(RegionResponse::ReadIntoDone { .. })
        ));
    }
    assert_eq!(bytes_of(&memory, size), data);
    let by_reference = client.read("f", 2 * MIB, MIB).expect("read");
    assert_eq!(
        &bytes_of(&memory, 3 * MIB as usize)[2 * MIB as usize..],
        &*by_reference
    );
    client.unregister_region(&region).expect("unregistered");
}

#[test]
fn a_read_into_off_a_block_or_past_the_region_is_refused_before_sending() {
    let folder = ScratchFolder::new("client-regions-checks");
    let (_server, mut client) = served(&folder);
    client.create("f").expect("create");
    client.write("f", 0, &contents(65536)).expect("write");
    let memory = Arc::new(SharedMemory::create("fp-test-client-checks", 65536).unwrap());
    let region = client.register_region(memory).expect("registered");
    let refusals = [
        (4096, 4096, 0, 16384),
        (0, 4096, 100, 4096),
        (0, 4096, 61440, 65536),
    ];
    for (offset, length, at, limit) in refusals {
        let error = client
            .read_into(&region, "f", offset, length, at)
            .expect_err("refused");
        assert!(matches!(error, ClientError::LimitReached { .. }), "{error}");
        assert_eq!(error.limit(), Some(limit), "{error}");
    }
    assert_eq!(client.in_flight(), 0, "nothing was sent");
    assert_eq!(
        client
            .read_into(&region, "f", 16384, 20000, 0)
            .expect("read"),
        20000
    );
}
