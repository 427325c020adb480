//! A store striped over remote disks (HWFS 3.3.2): `nbdkit memory` servers as disk
//! nodes, the store created through `flashpipe-store` with `nbd+unix://` devices, files
//! written, the store closed, reopened, every file read back and fsck clean, a second
//! mkfs over the same exports refused; then a member lost for good: the error names it
//! by its URI.

mod client_support;

use std::path::Path;

use client_support::{have, striped_store_config, zero_file, Scratch, Server};
use flashpipe_fs::Filesystem;
use flashpipe_store::store::{open_store_device, DeviceCreation};
use flashpipe_store::{create_store, StoreConfig};

fn contents(index: usize) -> Vec<u8> {
    let length = 1000 + index * 37_111 % 300_000;
    (0..length)
        .map(|byte| ((byte as u64 * 2654435761) ^ (index as u64 * 97)) as u8)
        .collect()
}

const FILE_COUNT: usize = 40;

fn striped_store(servers: &[Server], store_file: &Path) -> StoreConfig {
    let list: Vec<String> = servers.iter().map(Server::uri).collect();
    let config = striped_store_config(&list);
    create_store(&config, store_file, &mut |note| eprintln!("note: {note}")).expect("mkfs");
    config
}

fn write_files(config: &StoreConfig, store_file: &Path) {
    let opened = open_store_device(config, store_file, DeviceCreation::MustExist).unwrap();
    let mut filesystem = Filesystem::mount(opened.device).unwrap();
    for index in 0..FILE_COUNT {
        let file = filesystem.create(&format!("file-{index:03}")).unwrap();
        filesystem.write(file, 0, &contents(index)).unwrap();
    }
    filesystem.flush().unwrap();
    drop(filesystem.unmount().unwrap());
}

#[test]
fn a_store_striped_over_four_nbdkit_servers_keeps_its_files() {
    let Some(scratch) = Scratch::if_tool("nbdkit", "striped") else {
        return;
    };
    let servers: Vec<Server> = (0..4)
        .map(|index| Server::nbdkit_memory(&scratch.path, &format!("node{index}"), "32M"))
        .collect();
    let store_file = scratch.path.join("store.toml");
    let config = striped_store(&servers, &store_file);
    let text = std::fs::read_to_string(&store_file).unwrap();
    assert_eq!(text.matches("kind = \"nbd\"").count(), 4, "{text}");
    write_files(&config, &store_file);

    let opened = open_store_device(&config, &store_file, DeviceCreation::ReadOnly).unwrap();
    assert_eq!(opened.device.info().size_bytes(), 4 * (32 << 20));
    let mut filesystem = Filesystem::mount_read_only(opened.device).unwrap();
    for index in 0..FILE_COUNT {
        let file = filesystem
            .open(&format!("file-{index:03}"))
            .expect("the file is there");
        let expected = contents(index);
        let read = filesystem.read(file, 0, expected.len() as u64).unwrap();
        assert!(read[..] == expected[..], "file {index} differs");
    }
    let report = filesystem.check().unwrap();
    assert!(report.is_clean(), "fsck: {report:?}");
    drop(filesystem);
    drop(opened.lock);
    let again = scratch.path.join("again.toml");
    let refused = create_store(&config, &again, &mut |_| {})
        .expect_err("mkfs over exports holding a store is refused");
    assert!(
        refused.to_string().contains("holds a flashpipe store"),
        "{refused}"
    );
    assert!(!again.exists());
    let entries: Vec<String> = std::fs::read_dir(&scratch.path)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        entries
            .iter()
            .all(|name| name.ends_with(".sock") || name == "store.toml"),
        "no local file stands for a remote device: {entries:?}"
    );
}

/// Three servers of two makers and three back ends under one store: `nbdkit memory`,
/// `nbdkit file`, `qemu-nbd` on a raw file.
#[test]
fn a_store_stripes_over_nbdkit_and_qemu_nbd_together() {
    if !have("nbdkit") || !have("qemu-nbd") {
        return;
    }
    let scratch = Scratch::new("mixed");
    let nbdkit_image = scratch.path.join("nbdkit.img");
    let qemu_image = scratch.path.join("qemu.img");
    zero_file(&nbdkit_image, 32 << 20);
    zero_file(&qemu_image, 32 << 20);
    let servers = vec![
        Server::nbdkit_memory(&scratch.path, "memory", "32M"),
        Server::nbdkit_file(&scratch.path, "file", &nbdkit_image),
        Server::qemu_nbd(&scratch.path, "qemu", &qemu_image),
    ];
    let store_file = scratch.path.join("store.toml");
    let config = striped_store(&servers, &store_file);
    write_files(&config, &store_file);
    let opened = open_store_device(&config, &store_file, DeviceCreation::ReadOnly).unwrap();
    let mut filesystem = Filesystem::mount_read_only(opened.device).unwrap();
    for index in 0..FILE_COUNT {
        let file = filesystem.open(&format!("file-{index:03}")).unwrap();
        let expected = contents(index);
        let read = filesystem.read(file, 0, expected.len() as u64).unwrap();
        assert!(read[..] == expected[..], "file {index} differs");
    }
    assert!(filesystem.check().unwrap().is_clean());
}

/// A member's server killed with SIGKILL after a flush and restarted over its file: the
/// store reads every file through the reconnect, takes more writes and a flush, and fsck
/// finds it clean (nothing acknowledged and flushed before the kill is lost).
#[test]
fn a_member_restarted_after_a_flush_loses_nothing() {
    let Some(scratch) = Scratch::if_tool("qemu-nbd", "restarted-member") else {
        return;
    };
    let images: Vec<_> = (0..2)
        .map(|index| {
            let image = scratch.path.join(format!("node{index}.img"));
            zero_file(&image, 32 << 20);
            image
        })
        .collect();
    let mut servers: Vec<Server> = images
        .iter()
        .enumerate()
        .map(|(index, image)| Server::qemu_nbd(&scratch.path, &format!("node{index}"), image))
        .collect();
    let store_file = scratch.path.join("store.toml");
    let config = striped_store(&servers, &store_file);
    let opened = open_store_device(&config, &store_file, DeviceCreation::MustExist).unwrap();
    let mut filesystem = Filesystem::mount(opened.device).unwrap();
    for index in 0..FILE_COUNT {
        let file = filesystem.create(&format!("file-{index:03}")).unwrap();
        filesystem.write(file, 0, &contents(index)).unwrap();
    }
    filesystem.flush().unwrap();
    servers[1].restart();
    for index in 0..FILE_COUNT {
        let file = filesystem.open(&format!("file-{index:03}")).unwrap();
        let expected = contents(index);
        let read = filesystem.read(file, 0, expected.len() as u64).unwrap();
        assert!(
            read[..] == expected[..],
            "file {index} differs after the restart"
        );
    }
    let file = filesystem.create("after-the-restart").unwrap();
    filesystem.write(file, 0, &contents(7)).unwrap();
    filesystem.flush().unwrap();
    assert!(filesystem.check().unwrap().is_clean());
    drop(filesystem.unmount().unwrap());
}

#[test]
fn a_member_lost_for_good_is_named_in_the_error() {
    let Some(scratch) = Scratch::if_tool("nbdkit", "lost-member") else {
        return;
    };
    let mut servers: Vec<Server> = (0..2)
        .map(|index| Server::nbdkit_memory(&scratch.path, &format!("node{index}"), "32M"))
        .collect();
    let store_file = scratch.path.join("store.toml");
    let config = striped_store(&servers, &store_file);
    write_files(&config, &store_file);
    let opened = open_store_device(&config, &store_file, DeviceCreation::MustExist).unwrap();
    let mut filesystem = Filesystem::mount(opened.device).unwrap();
    let lost_uri = servers[1].uri();
    servers[1].kill();
    let mut errors = Vec::new();
    for index in 0..FILE_COUNT {
        let file = filesystem.open(&format!("file-{index:03}")).unwrap();
        if let Err(error) = filesystem.read(file, 0, contents(index).len() as u64) {
            errors.push(error.to_string());
        }
    }
    assert!(!errors.is_empty(), "reads of a lost member fail");
    assert!(
        errors.iter().all(|error| error.contains(&lost_uri)),
        "every error names {lost_uri}: {errors:?}"
    );
    drop(filesystem);
    drop(opened.lock);
    let rejected = open_store_device(&config, &store_file, DeviceCreation::MustExist)
        .err()
        .expect("a store with a member gone does not open");
    assert!(rejected.to_string().contains(&lost_uri), "{rejected}");
}
