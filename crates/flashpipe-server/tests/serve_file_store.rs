//! A server over a store of two files opened as the CLI opens it: the lock held while
//! serving, every acknowledged write durable after a graceful stop, the socket removed
//! and the store reopened (and checked clean) by the next owner.

mod common;

use std::path::Path;

use common::{connect, pattern};
use flashpipe_client::{server_socket_path, TransportExt};
use flashpipe_engine::{EngineConfig, PoolMemory};
use flashpipe_server::{Server, ServerConfig};
use flashpipe_store::{format_file_store, LockWait, RunningStore, StoreAccess};
use flashpipe_testkit::scratch::ScratchFolder;

fn open(store_file: &Path) -> RunningStore {
    let config = EngineConfig {
        read_pool_memory: PoolMemory::Shared,
        ..EngineConfig::default()
    };
    RunningStore::open_with(store_file, StoreAccess::ReadWrite, LockWait::Fail, config)
        .expect("store opened")
}

#[test]
fn a_graceful_stop_leaves_every_write_durable_and_the_store_free() {
    let folder = ScratchFolder::new("serve-file-store");
    let store_file = folder.path().join("store.toml");
    let devices = [folder.join("a.img"), folder.join("b.img")];
    let devices: Vec<&str> = devices.iter().map(String::as_str).collect();
    format_file_store(&store_file, &devices, 16 << 20, &mut |_| {}).expect("store made");
    let socket = server_socket_path(&store_file);
    let server = Server::start(
        open(&store_file),
        ServerConfig {
            socket_path: socket.clone(),
            store_description: store_file.display().to_string(),
            ..ServerConfig::default()
        },
    )
    .expect("serving");
    let second_owner = RunningStore::open(&store_file, StoreAccess::ReadOnly, LockWait::Fail);
    assert!(second_owner.is_err(), "the server holds the store's lock");

    let writers: Vec<_> = [false, true]
        .into_iter()
        .enumerate()
        .map(|(index, map_memory)| {
            let socket = socket.clone();
            std::thread::spawn(move || {
                let mut client = connect(&socket, map_memory);
                assert_eq!(client.is_mapped(), map_memory);
                let name = format!("file-{index}");
                client.create(&name).expect("create");
                client
                    .write(&name, 0, &pattern(700_000, index as u64))
                    .expect("write");
            })
        })
        .collect();
    for writer in writers {
        writer.join().expect("writer");
    }
    server.stop_handle().stop();
    server.run_until_stopped().expect("clean stop");
    assert!(!socket.exists(), "socket removed");

    let reopened = open(&store_file);
    let mut engine = reopened.client(4);
    for index in 0..2u64 {
        let reply = engine
            .call(flashpipe_engine::Command::Read {
                name: format!("file-{index}"),
                offset_bytes: 0,
                length_bytes: 700_000,
            })
            .expect("read after reopening");
        match reply {
            flashpipe_engine::Reply::Data(data) => {
                assert_eq!(data.bytes(), &pattern(700_000, index)[..])
            }
            other => panic!("{other:?}"),
        }
    }
    match engine
        .call(flashpipe_engine::Command::Check)
        .expect("check")
    {
        flashpipe_engine::Reply::Check(report) => assert!(report.is_clean(), "{report}"),
        other => panic!("{other:?}"),
    }
    drop(engine);
    reopened.close().expect("closed");
}
