//! `RunningStore`, the one way an interface opens a store: a store made like mkfs makes
//! one is opened read-write (lock, devices, mount, engine), changed and committed, opened
//! again read-only and read back; a second writer is refused naming the holder while the
//! first holds the store; a store closed without commit keeps its last commit; a store
//! file naming RAM devices is refused.

use std::path::{Path, PathBuf};

use flashpipe_device::IoBuf;
use flashpipe_engine::{Command, EngineClient, Reply};
use flashpipe_fs::{Filesystem, FormatOptions};
use flashpipe_store::store::{open_store_device, DeviceCreation};
use flashpipe_store::store_config::{
    parse_device_list, DeviceSpec, StoreConfig, STORE_FILE_VERSION,
};
use flashpipe_store::{LockWait, RunningStore, StoreAccess, StoreOpenError};
use flashpipe_testkit::scratch::ScratchFolder;

/// A store of `devices` with 4 KiB blocks, 64 KiB stripe units and queue depth 16.
fn store_config(devices: Vec<DeviceSpec>) -> StoreConfig {
    StoreConfig {
        store_file_version: STORE_FILE_VERSION,
        identity: None,
        block_size_bytes: 4096,
        stripe_unit_bytes: 64 << 10,
        queue_depth: 16,
        devices,
    }
}

/// Makes a store of two striped file devices in `folder`, as mkfs does; returns its file.
fn make_file_store(folder: &ScratchFolder, devices: &str) -> PathBuf {
    let store_file = folder.path().join("store.toml");
    let config = store_config(parse_device_list(devices, Some(4 << 20)).expect("device list"));
    config.validate(&store_file).expect("valid store");
    let opened = open_store_device(&config, &store_file, DeviceCreation::CreateMissing)
        .expect("devices created");
    let filesystem = Filesystem::format(
        opened.device,
        &FormatOptions {
            fs_block_size_bytes: 4096,
            store_identity: None,
        },
    )
    .expect("format");
    drop(filesystem.unmount().expect("unmount"));
    config.save_new(&store_file).expect("store file written");
    store_file
}

fn write_file(client: &mut EngineClient, name: &str, bytes: &[u8]) {
    client
        .call(Command::Create {
            name: name.to_string(),
        })
        .expect("create");
    client
        .call(Command::Write {
            name: name.to_string(),
            offset_bytes: 0,
            data: IoBuf::from_slice(bytes),
        })
        .expect("write");
}

fn read_whole(client: &mut EngineClient, name: &str, length_bytes: u64) -> Option<Vec<u8>> {
    match client.call(Command::Read {
        name: name.to_string(),
        offset_bytes: 0,
        length_bytes,
    }) {
        Ok(Reply::Data(data)) => Some(data.bytes().to_vec()),
        Ok(other) => panic!("read answered {other:?}"),
        Err(_) => None,
    }
}

fn open(store_file: &Path, access: StoreAccess) -> Result<RunningStore, StoreOpenError> {
    RunningStore::open(store_file, access, LockWait::Fail)
}

#[test]
fn a_store_opens_changes_commits_and_reads_back_read_only() {
    let folder = ScratchFolder::new("running-store-round-trip");
    let store_file = make_file_store(&folder, "a.img,b.img");
    let contents: Vec<u8> = (0..200_000u32).map(|index| (index % 251) as u8).collect();

    let store = open(&store_file, StoreAccess::ReadWrite).expect("opened read-write");
    assert_eq!(store.access(), StoreAccess::ReadWrite);
    let mut client = store.client(4);
    write_file(&mut client, "kept", &contents);
    drop(client);
    let second = open(&store_file, StoreAccess::ReadOnly)
        .err()
        .expect("held");
    assert!(
        matches!(second, StoreOpenError::Lock(_)) && second.to_string().contains("in use by"),
        "{second}"
    );
    store.close().expect("committed");

    let store = open(&store_file, StoreAccess::ReadWrite).expect("reopened");
    let mut client = store.client(4);
    write_file(&mut client, "dropped", b"never committed");
    drop(client);
    store.close_without_commit().expect("closed without commit");

    let reader = open(&store_file, StoreAccess::ReadOnly).expect("opened read-only");
    let other_reader = open(&store_file, StoreAccess::ReadOnly).expect("readers share");
    let mut client = reader.client(4);
    assert_eq!(
        read_whole(&mut client, "kept", contents.len() as u64),
        Some(contents)
    );
    assert_eq!(read_whole(&mut client, "dropped", 15), None);
    assert!(
        std::sync::Arc::ptr_eq(&reader.clock, &reader.engine.clock()),
        "the running store measures with the engine's clock"
    );
    drop(client);
    reader.close().expect("read-only close writes nothing");
    other_reader.close().expect("second reader closes");
}

#[test]
fn a_store_naming_ram_devices_is_refused() {
    let folder = ScratchFolder::new("running-store-ram");
    let store_file = folder.path().join("store.toml");
    let config = store_config(parse_device_list("ram:4MiB", None).expect("device list"));
    config.save_new(&store_file).expect("store file written");
    let error = open(&store_file, StoreAccess::ReadOnly)
        .err()
        .expect("refused");
    assert!(
        matches!(error, StoreOpenError::RamDevices { .. }),
        "{error}"
    );
}
