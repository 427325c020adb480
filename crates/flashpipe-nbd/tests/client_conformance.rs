//! flashpipe's NBD client against servers no one here wrote: the device conformance
//! suite (the `BlockDevice` contract every backend meets) over `nbdkit memory` and
//! `qemu-nbd` on a raw file, each check on a fresh zero-filled export.

mod client_support;

use client_support::{open, zero_file, Scratch, Server};
use flashpipe_device::conformance;
use flashpipe_device::{BlockDevice, IoBuf, Request};
use flashpipe_nbd::client::{NbdDevice, NbdDeviceConfig, NbdUri};

#[test]
fn nbdkit_memory_passes_the_conformance_suite() {
    let Some(scratch) = Scratch::if_tool("nbdkit", "conf-nbdkit") else {
        return;
    };
    let mut servers = Vec::new();
    let mut serial = 0;
    conformance::check_all(&mut |queue_depth| {
        serial += 1;
        let server = Server::nbdkit_memory(&scratch.path, &format!("m{serial}"), "64M");
        let device = open(&server.uri(), queue_depth);
        servers.push(server);
        Box::new(device) as Box<dyn BlockDevice>
    });
}

#[test]
fn qemu_nbd_passes_the_conformance_suite() {
    let Some(scratch) = Scratch::if_tool("qemu-nbd", "conf-qemu") else {
        return;
    };
    let mut servers = Vec::new();
    let mut serial = 0;
    conformance::check_all(&mut |queue_depth| {
        serial += 1;
        let image = scratch.path.join(format!("q{serial}.img"));
        zero_file(&image, 64 << 20);
        let server = Server::qemu_nbd(&scratch.path, &format!("q{serial}"), &image);
        let device = open(&server.uri(), queue_depth);
        servers.push(server);
        Box::new(device) as Box<dyn BlockDevice>
    });
}

#[test]
fn nbdkit_file_passes_the_conformance_suite() {
    let Some(scratch) = Scratch::if_tool("nbdkit", "conf-nbdkit-file") else {
        return;
    };
    let mut servers = Vec::new();
    let mut serial = 0;
    conformance::check_all(&mut |queue_depth| {
        serial += 1;
        let image = scratch.path.join(format!("f{serial}.img"));
        zero_file(&image, 64 << 20);
        let server = Server::nbdkit_file(&scratch.path, &format!("f{serial}"), &image);
        let device = open(&server.uri(), queue_depth);
        servers.push(server);
        Box::new(device) as Box<dyn BlockDevice>
    });
}

/// Multi-conn: four connections to one export, requests dealt over them; a flush on one
/// covers writes answered on the others (the server's `NBD_FLAG_CAN_MULTI_CONN` promise).
#[test]
fn four_connections_to_nbdkit_memory_pass_the_conformance_suite() {
    let Some(scratch) = Scratch::if_tool("nbdkit", "conf-multi") else {
        return;
    };
    let mut servers = Vec::new();
    let mut serial = 0;
    conformance::check_all(&mut |queue_depth| {
        serial += 1;
        let server = Server::nbdkit_memory(&scratch.path, &format!("mc{serial}"), "64M");
        let uri = format!("{}&x-connections=4", server.uri());
        let device = open(&uri, queue_depth);
        servers.push(server);
        Box::new(device) as Box<dyn BlockDevice>
    });
}

#[test]
fn several_connections_are_refused_without_multi_conn() {
    let Some(scratch) = Scratch::if_tool("nbdkit", "no-multi") else {
        return;
    };
    let server = Server::nbdkit(
        &scratch.path,
        "n",
        &[
            "--filter=multi-conn",
            "memory",
            "8M",
            "multi-conn-mode=disable",
        ],
    );
    let uri = format!("{}&x-connections=2", server.uri());
    let config = NbdDeviceConfig::new(NbdUri::parse(&uri).unwrap());
    let error = NbdDevice::open(config)
        .expect_err("no multi-conn")
        .to_string();
    assert!(error.contains("does not offer multi-conn"), "{error}");
    assert!(
        open(&server.uri(), 4).info().block_count > 0,
        "one connection is fine"
    );
}

#[test]
fn the_export_is_described_as_the_server_advertises_it() {
    let Some(scratch) = Scratch::if_tool("nbdkit", "describe") else {
        return;
    };
    let server = Server::nbdkit_memory(&scratch.path, "d", "1M");
    let device = open(&server.uri(), 8);
    assert_eq!(device.info().block_count, 256);
    assert_eq!(device.info().block_size_bytes, 4096);
    assert_eq!(&*device.info().name, server.uri());
    assert!(device.export().structured_replies);
    assert!(device.export().entered_with_go);
}

#[test]
fn nbdkit_with_simple_replies_only_passes_the_conformance_suite() {
    let Some(scratch) = Scratch::if_tool("nbdkit", "conf-nosr") else {
        return;
    };
    let mut servers = Vec::new();
    let mut serial = 0;
    conformance::check_all(&mut |queue_depth| {
        serial += 1;
        let server = Server::nbdkit(
            &scratch.path,
            &format!("s{serial}"),
            &["--no-sr", "memory", "64M"],
        );
        let device = open(&server.uri(), queue_depth);
        assert!(!device.export().structured_replies);
        servers.push(server);
        Box::new(device) as Box<dyn BlockDevice>
    });
}

/// A server whose maximum payload is 64 KiB (and that refuses larger requests): a 1 MiB
/// write and read are cut into 16 NBD requests each and come back whole.
#[test]
fn requests_above_the_maximum_payload_are_cut_into_parts() {
    let Some(scratch) = Scratch::if_tool("nbdkit", "parts") else {
        return;
    };
    let server = Server::nbdkit(
        &scratch.path,
        "p",
        &[
            "--filter=blocksize-policy",
            "memory",
            "8M",
            "blocksize-maximum=65536",
            "blocksize-error-policy=error",
        ],
    );
    let mut device = open(&server.uri(), 4);
    assert_eq!(device.export().maximum_payload_bytes, 65536);
    let pattern: Vec<u8> = (0..1 << 20)
        .map(|index: u32| (index * 7 + index / 4096) as u8)
        .collect();
    let mut completions = Vec::new();
    device
        .submit(Request::write(1, 3, IoBuf::from_slice(&pattern)))
        .expect("write accepted");
    device
        .wait_completions(&mut completions)
        .expect("write completes");
    assert!(completions.pop().unwrap().status.is_ok());
    device
        .submit(Request::read(2, 3, IoBuf::zeroed(pattern.len())))
        .expect("read accepted");
    device
        .wait_completions(&mut completions)
        .expect("read completes");
    let completion = completions.pop().unwrap();
    assert!(completion.status.is_ok(), "{:?}", completion.status);
    assert!(completion.buffer.unwrap()[..] == pattern[..]);
}
