//! NBD exports of `flashpipe serve --export` with TLS, and exports of a store's device
//! stack (`--export NAME=store:STORE.toml[,rw]`), as processes read through flashpipe's
//! own NBD client: the export equals the member files striped by hand, the store is
//! locked while exported (a `put` is refused, then works after the stop), writes are
//! refused on a read-only export and land in the member files with `,rw`; a store of two
//! emulated flash members (under their FTL) exported and mounted over NBD with its file;
//! `flashpipe serve STORE` refuses to export the store it serves; TLS options without
//! `--export` and plaintext beyond loopback without `--insecure` are refused.

mod common;

use std::path::Path;
use std::process::Child;

use common::{
    check_fails, command_line, fresh_folder, mkfs, start_flashpipe, stop_with, succeed, text,
};
use flashpipe_device::{BlockDevice, Completion, IoBuf, Request};
use flashpipe_nbd::client::{NbdDevice, NbdDeviceConfig, NbdUri};
use flashpipe_store::StoreConfig;

const MIB: u64 = 1024 * 1024;

fn stop(child: Child) {
    stop_with(child, libc::SIGTERM);
}

fn open_device(uri: &str) -> NbdDevice {
    let mut config = NbdDeviceConfig::new(NbdUri::parse(uri).expect("a valid URI"));
    config.queue_depth = 16;
    NbdDevice::open(config).unwrap_or_else(|error| panic!("open {uri}: {error}"))
}

fn complete(device: &mut NbdDevice, request: Request) -> Completion {
    device.submit(request).expect("request accepted");
    let mut completions = Vec::new();
    while completions.is_empty() {
        device.wait_completions(&mut completions).expect("wait");
    }
    completions.pop().unwrap()
}

/// Reads the whole device, block by block.
fn read_all(device: &mut NbdDevice) -> Vec<u8> {
    let block_bytes = device.info().block_size_bytes as usize;
    let mut all = Vec::new();
    for block in 0..device.info().block_count {
        let completion = complete(
            device,
            Request::read(block, block, IoBuf::zeroed(block_bytes)),
        );
        assert!(completion.status.is_ok(), "{:?}", completion.status);
        all.extend_from_slice(&completion.buffer.unwrap()[..]);
    }
    all
}

/// What the striped device holds, from the member files (stripe unit `k` on member
/// `k % members` at `(k / members) * unit`).
fn striped_by_hand(members: &[Vec<u8>], stripe_unit_bytes: usize, size_bytes: usize) -> Vec<u8> {
    let mut all = Vec::with_capacity(size_bytes);
    let mut unit = 0;
    while all.len() < size_bytes {
        let member = &members[unit % members.len()];
        let start = (unit / members.len()) * stripe_unit_bytes;
        all.extend_from_slice(&member[start..start + stripe_unit_bytes]);
        unit += 1;
    }
    all
}

fn make_store(folder: &Path) -> std::path::PathBuf {
    let store = folder.join("s.toml");
    mkfs(&store, "a.img,b.img", &["--size", "16MiB"]);
    let source = folder.join("source.bin");
    let bytes: Vec<u8> = (0..300_000u32)
        .map(|index| (index * 7 % 251) as u8)
        .collect();
    std::fs::write(&source, bytes).unwrap();
    succeed(&["put", text(&store), text(&source)]);
    store
}

/// Serves `store` as the export `s` (`options` after its path, such as `,rw`) with
/// `flashpipe serve --nbd-socket` in `folder`; returns the server and the export's URI
/// (with the store's block size).
fn serve_export(folder: &Path, store: &Path, options: &str) -> (Child, String) {
    let config = StoreConfig::load(store).unwrap();
    let socket = folder.join("nbd.sock");
    let export = format!("s=store:{}{options}", text(store));
    let (child, _lines) =
        start_flashpipe(&["serve", "--export", &export, "--nbd-socket", text(&socket)]);
    let uri = format!(
        "nbd+unix:///s?socket={}&x-block-size={}",
        text(&socket),
        config.block_size_bytes
    );
    (child, uri)
}

#[test]
fn a_store_device_stack_is_exported_read_only_under_the_store_lock() {
    let folder = fresh_folder("nbd-store-export");
    let store = make_store(&folder);
    let config = StoreConfig::load(&store).unwrap();
    let socket = folder.join("nbd.sock");
    let export = format!("s=store:{}", text(&store));
    let (child, lines) = start_flashpipe(&command_line(
        "nbd serve --export {} --socket {}",
        &[&export, text(&socket)],
    ));
    assert!(lines.last().unwrap().contains("ready"), "{lines:?}");
    let uri = format!(
        "nbd+unix:///s?socket={}&x-block-size={}",
        text(&socket),
        config.block_size_bytes
    );
    let mut device = open_device(&uri);
    let exported = read_all(&mut device);
    let members = [
        std::fs::read(folder.join("a.img")).unwrap(),
        std::fs::read(folder.join("b.img")).unwrap(),
    ];
    let expected = striped_by_hand(&members, config.stripe_unit_bytes as usize, exported.len());
    // --size is each member's size.
    assert_eq!(exported.len() as u64, 2 * 16 * MIB);
    assert!(
        exported == expected,
        "the export differs from the members striped by hand"
    );
    let block_bytes = config.block_size_bytes as usize;
    // The server says the export is read-only; the client refuses the write at submit.
    let refused = device
        .submit(Request::write(
            1,
            0,
            IoBuf::from_slice(&vec![0xAB; block_bytes]),
        ))
        .expect_err("a write to a read-only export is refused");
    assert!(
        format!("{:?}", refused.error).contains("ReadOnly"),
        "{refused:?}"
    );
    let source = folder.join("source.bin");
    check_fails(
        &["put", text(&store), text(&source), "--as", "again"],
        "nbd serve --export s=store:",
    );
    drop(device);
    stop(child);
    succeed(&["put", text(&store), text(&source), "--as", "again"]);
}

#[test]
fn a_flash_store_exported_through_its_ftl_mounts_over_nbd_with_its_files() {
    let folder = fresh_folder("nbd-store-export-flash");
    let store = folder.join("s.toml");
    mkfs(&store, "flash:minflash:f0.img,flash:minflash:f1.img", &[]);
    let source = folder.join("source.bin");
    let bytes: Vec<u8> = (0..700_000u32)
        .map(|index| (index * 13 % 249) as u8)
        .collect();
    std::fs::write(&source, &bytes).unwrap();
    succeed(&["put", text(&store), text(&source)]);
    let (child, uri) = serve_export(&folder, &store, "");
    let device: Box<dyn BlockDevice> = Box::new(open_device(&uri));
    let mut filesystem = flashpipe_fs::Filesystem::mount_read_only(device).unwrap();
    let file = filesystem.open("source.bin").expect("the file is there");
    let read = filesystem.read(file, 0, bytes.len() as u64).unwrap();
    assert!(read[..] == bytes[..], "the file read over NBD differs");
    drop(filesystem);
    stop(child);
}

#[test]
fn a_writable_store_export_writes_the_member_files() {
    let folder = fresh_folder("nbd-store-export-rw");
    let store = make_store(&folder);
    let config = StoreConfig::load(&store).unwrap();
    let (child, uri) = serve_export(&folder, &store, ",rw");
    let mut device = open_device(&uri);
    let block_bytes = config.block_size_bytes as usize;
    // The last block of the device: the last stripe unit, on member (units - 1) % 2.
    let last_block = device.info().block_count - 1;
    let size_bytes = device.info().size_bytes();
    let pattern = vec![0x5A; block_bytes];
    let write = complete(
        &mut device,
        Request::write(1, last_block, IoBuf::from_slice(&pattern)),
    );
    assert!(write.status.is_ok(), "{:?}", write.status);
    assert!(complete(&mut device, Request::flush(2)).status.is_ok());
    drop(device);
    stop(child);
    let units = size_bytes / config.stripe_unit_bytes;
    let member = if (units - 1) % 2 == 0 {
        "a.img"
    } else {
        "b.img"
    };
    let member_bytes = std::fs::read(folder.join(member)).unwrap();
    let offset = ((units - 1) / 2 * config.stripe_unit_bytes) as usize
        + config.stripe_unit_bytes as usize
        - block_bytes;
    assert!(member_bytes[offset..offset + block_bytes] == pattern[..]);
}

#[test]
fn serve_refuses_to_export_the_store_it_serves_and_tls_without_export() {
    let folder = fresh_folder("nbd-store-export-self");
    let store = make_store(&folder);
    let export = format!("s=store:{}", text(&store));
    let socket = folder.join("nbd.sock");
    check_fails(
        &command_line(
            "serve {} --export {} --nbd-socket {}",
            &[text(&store), &export, text(&socket)],
        ),
        "which this `flashpipe serve` serves",
    );
    check_fails(
        &command_line(
            "serve {} --tls-certificate c.pem --tls-key k.pem",
            &[text(&store)],
        ),
        "no --export",
    );
    check_fails(
        &["nbd", "serve", "--export", "s=store:s.toml,wr"],
        "unknown store export option",
    );
    check_fails(
        &["nbd", "serve", "--export", "s=store:/nonexistent/s.toml"],
        "/nonexistent/s.toml",
    );
}

#[test]
fn serve_export_speaks_tls_beyond_loopback_and_needs_insecure_without() {
    let test = "serve_export_tls";
    let folder = fresh_folder(test);
    let Some((certificate, key)) = common::self_signed_certificate(&folder, test) else {
        return;
    };
    let (child, lines) = start_flashpipe(&command_line(
        "serve --export d=ram:4MiB --nbd 0.0.0.0:0 --tls-certificate {} --tls-key {}",
        &[text(&certificate), text(&key)],
    ));
    let line = lines
        .iter()
        .find(|line| line.contains("nbd export d at"))
        .unwrap_or_else(|| panic!("{lines:?}"));
    let port = line
        .split_whitespace()
        .find_map(|word| word.strip_prefix("nbds://0.0.0.0:"))
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("an nbds URI in {line}"));
    // The self-signed certificate is no CA: encryption without verifying the server.
    let uri = format!("nbds://localhost:{port}/d?tls-verify-peer=false");
    let mut device = open_device(&uri);
    let pattern: Vec<u8> = (0..4096u32).map(|index| (index % 253) as u8).collect();
    let write = complete(
        &mut device,
        Request::write(1, 7, IoBuf::from_slice(&pattern)),
    );
    assert!(write.status.is_ok(), "{:?}", write.status);
    let read = complete(&mut device, Request::read(2, 7, IoBuf::zeroed(4096)));
    assert!(read.buffer.unwrap()[..] == pattern[..]);
    drop(device);
    let plaintext = format!("nbd://localhost:{port}/d");
    let mut config = NbdDeviceConfig::new(NbdUri::parse(&plaintext).unwrap());
    config.reconnect_attempts = 0;
    let error = NbdDevice::open(config).unwrap_err().to_string();
    assert!(error.contains("requires TLS"), "{error}");
    stop(child);
    check_fails(
        &["serve", "--export", "d=ram:1MiB", "--nbd", "0.0.0.0:0"],
        "--insecure",
    );
}
