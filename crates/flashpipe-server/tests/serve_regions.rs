//! Reads into a client's own memory (protocol version 6): the same bytes as a read,
//! many in flight; every hostile register and read-into refused with a clear error and
//! nothing written outside the range asked; the per-client limits; a closed connection
//! unmaps its regions; an older client and a connection on rings are refused cleanly.

mod common;

use std::io::Write;
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;

use common::{connect_with, pattern, raw_hello, remote_code, start_server, wait_until};
use flashpipe_client::{
    Client, ClientError, ClientTransport, DestinationRegion, ErrorCode, Response, TransportExt,
};
use flashpipe_protocol::{
    encode_frame, read_frame, Frame, ReadInto, RegionRequest, RegionResponse, Request,
    MAX_BODY_BYTES,
};
use flashpipe_shm::{send_with_fds, SharedMemory};

const MIB: u64 = 1 << 20;

fn socket_client(socket: &std::path::Path) -> Client {
    connect_with(socket, true, ClientTransport::Socket)
}

/// A region of `size_bytes` filled with `fill`, registered.
fn region(client: &mut Client, name: &str, size_bytes: usize, fill: u8) -> DestinationRegion {
    let memory = SharedMemory::create(name, size_bytes).expect("memfd");
    // SAFETY: the test's own mapping of `size_bytes`, valid while `memory` lives; no read
    // is in flight into it yet.
    unsafe { std::ptr::write_bytes(memory.as_mut_ptr(), fill, size_bytes) };
    client
        .register_region(Arc::new(memory))
        .expect("region registered")
}

fn region_bytes(region: &DestinationRegion) -> &[u8] {
    let memory = region.memory();
    // SAFETY: the test's own mapping, valid while `region` lives; every read into it was
    // answered before the test looks.
    unsafe { std::slice::from_raw_parts(memory.as_mut_ptr(), memory.size_bytes()) }
}

fn put(client: &mut Client, name: &str, contents: &[u8]) {
    client.create(name).expect("create");
    for (index, chunk) in contents.chunks(MIB as usize).enumerate() {
        client
            .write(name, index as u64 * MIB, chunk)
            .expect("write");
    }
}

#[test]
fn a_file_read_into_a_region_is_the_files_bytes_with_reads_in_flight() {
    let test = start_server("serve-region-bytes", |_| {});
    let mut client = socket_client(&test.socket);
    assert!(client.supports_regions());
    let size = 5 * MIB as usize + 123;
    let contents = pattern(size, 26);
    put(&mut client, "big", &contents);
    let target = region(&mut client, "fp-test-region-bytes", 6 * MIB as usize, 0xAA);
    assert_eq!(target.block_bytes(), 4096);
    let mut in_flight = Vec::new();
    for chunk in 0..6u64 {
        let length = (size as u64 - chunk * MIB).min(MIB);
        let id = client
            .submit_read_into(&target, "big", chunk * MIB, length, chunk * MIB)
            .expect("read-into sent");
        in_flight.push((id, length));
    }
    for (id, length) in in_flight {
        match client.wait_for(id).expect("answered") {
            Response::Region(RegionResponse::ReadIntoDone { length_bytes }) => {
                assert_eq!(length_bytes, length)
            }
            other => panic!("a {} answer", other.name()),
        }
    }
    assert_eq!(&region_bytes(&target)[..size], &contents[..]);
    let tail_end = size.next_multiple_of(4096);
    assert!(
        region_bytes(&target)[tail_end..].iter().all(|&b| b == 0xAA),
        "nothing past the last block was written"
    );
    assert_eq!(
        test.read_pool.free_count(),
        test.read_pool.buffer_count() as usize
    );
    client.unregister_region(&target).expect("unregistered");
    let error = client
        .read_into(&target, "big", 0, 4096, 0)
        .expect_err("an unregistered region");
    assert_eq!(remote_code(&error), ErrorCode::BadBuffer);
    assert!(error.to_string().contains("not registered"), "{error}");
}

#[test]
fn hostile_read_intos_are_refused_and_write_nothing() {
    let test = start_server("serve-region-hostile", |_| {});
    let mut client = socket_client(&test.socket);
    put(&mut client, "f", &pattern(3 * MIB as usize, 7));
    let target = region(
        &mut client,
        "fp-test-region-hostile",
        2 * MIB as usize,
        0x55,
    );
    let raw = |client: &mut Client, offset, length, region, at| {
        let request = Request::Region(RegionRequest::ReadInto(ReadInto {
            name: "f".into(),
            offset_bytes: offset,
            length_bytes: length,
            region,
            region_offset_bytes: at,
        }));
        client.call(request).expect_err("refused")
    };
    let id = target.id();
    let cases = [
        (
            "past the region's end",
            0,
            MIB,
            id,
            2 * MIB - 4096,
            ErrorCode::BadBuffer,
        ),
        (
            "overflowing the offset",
            0,
            4096,
            id,
            u64::MAX - 4095,
            ErrorCode::BadBuffer,
        ),
        (
            "a short tail's whole block",
            0,
            10,
            id,
            2 * MIB,
            ErrorCode::BadBuffer,
        ),
        (
            "an unknown region",
            0,
            4096,
            id + 99,
            0,
            ErrorCode::BadBuffer,
        ),
        (
            "a file offset off a block",
            100,
            4096,
            id,
            0,
            ErrorCode::BadBuffer,
        ),
        (
            "a region offset off 4096",
            0,
            4096,
            id,
            100,
            ErrorCode::BadBuffer,
        ),
        (
            "more than a read",
            0,
            2 * MIB,
            id,
            0,
            ErrorCode::ReadTooLarge,
        ),
        (
            "past the file's end",
            3 * MIB,
            4096,
            id,
            0,
            ErrorCode::ReadPastEnd,
        ),
    ];
    for (what, offset, length, region, at, code) in cases {
        let error = raw(&mut client, offset, length, region, at);
        assert_eq!(remote_code(&error), code, "{what}: {error}");
    }
    assert!(
        region_bytes(&target).iter().all(|&b| b == 0x55),
        "no refused read-into wrote into the region"
    );
    assert_eq!(
        client
            .read_into(&target, "f", 0, 4096, 0)
            .expect("still served"),
        4096
    );
}

#[test]
fn the_per_client_limits_refuse_a_region_too_many_and_keep_nothing() {
    let test = start_server("serve-region-limits", |config| {
        config.max_regions_per_client = 2;
        config.max_region_bytes_per_client = 3 * MIB;
    });
    let mut client = socket_client(&test.socket);
    let first = region(&mut client, "fp-test-region-limit-1", MIB as usize, 0);
    let _second = region(&mut client, "fp-test-region-limit-2", MIB as usize, 0);
    let third = SharedMemory::create("fp-test-region-limit-3", 4096).expect("memfd");
    let error = client
        .register_region(Arc::new(third))
        .expect_err("a third region");
    assert_eq!(remote_code(&error), ErrorCode::BadBuffer);
    assert_eq!(error.limit(), Some(2), "{error}");
    client.unregister_region(&first).expect("unregistered");
    let large = SharedMemory::create("fp-test-region-limit-4", 3 * MIB as usize).expect("memfd");
    let error = client
        .register_region(Arc::new(large))
        .expect_err("past the byte limit");
    assert_eq!(error.limit(), Some(3 * MIB), "{error}");
    let fits = SharedMemory::create("fp-test-region-limit-5", 2 * MIB as usize).expect("memfd");
    client
        .register_region(Arc::new(fits))
        .expect("within both limits");
}

/// A raw connection speaking `version`, past its welcome.
fn raw_connection(socket: &std::path::Path, version: u16) -> UnixStream {
    let mut raw = raw_hello(socket, 3..=version, false, "hostile regions");
    match read_frame(&mut raw, MAX_BODY_BYTES).expect("frame") {
        Some(Frame::Welcome(welcome)) => assert_eq!(welcome.version, version),
        other => panic!("no welcome: {other:?}"),
    }
    raw
}

fn register_frame(length_bytes: u64) -> Vec<u8> {
    encode_frame(&Frame::Request {
        request_id: 1,
        request: Request::Region(RegionRequest::Register { length_bytes }),
    })
}

/// The error a raw connection's request 1 was answered with.
fn refusal(raw: &mut UnixStream) -> flashpipe_protocol::RemoteError {
    match read_frame(raw, MAX_BODY_BYTES).expect("frame") {
        Some(Frame::Error {
            request_id: 1,
            error,
        }) => error,
        other => panic!("not a refusal: {other:?}"),
    }
}

/// A memfd of `size` bytes with `seals` added (none: it may shrink under a mapping).
fn memfd(size: i64, seals: i32) -> OwnedFd {
    // SAFETY: a fresh descriptor from memfd_create, owned at once; ftruncate and fcntl
    // act on it alone.
    unsafe {
        let fd = libc::memfd_create(c"fp-test-hostile".as_ptr(), libc::MFD_ALLOW_SEALING);
        assert!(fd >= 0, "memfd_create");
        let fd = OwnedFd::from_raw_fd(fd);
        assert_eq!(
            libc::ftruncate(std::os::fd::AsRawFd::as_raw_fd(&fd), size),
            0
        );
        if seals != 0 {
            let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
            assert_eq!(libc::fcntl(raw, libc::F_ADD_SEALS, seals), 0);
        }
        fd
    }
}

#[test]
fn hostile_registers_are_refused_clearly_and_the_connection_goes_on() {
    let test = start_server("serve-region-hostile-register", |_| {});
    let mut raw = raw_connection(&test.socket, 6);
    raw.write_all(&register_frame(4096)).expect("register");
    let error = refusal(&mut raw);
    assert_eq!(error.code, ErrorCode::BadBuffer);
    assert!(
        error.message.contains("without a descriptor"),
        "{}",
        error.message
    );
    let shrinkable = memfd(8192, 0);
    send_with_fds(&raw, &register_frame(8192), &[shrinkable.as_fd()]).expect("send");
    let error = refusal(&mut raw);
    assert_eq!(error.code, ErrorCode::BadBuffer);
    assert!(error.message.contains("seal"), "{}", error.message);
    let small = memfd(
        4096,
        libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL,
    );
    send_with_fds(&raw, &register_frame(8192), &[small.as_fd()]).expect("send");
    let error = refusal(&mut raw);
    assert_eq!(error.code, ErrorCode::BadBuffer);
    for length in [0, u64::MAX] {
        let sealed = memfd(
            8192,
            libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL,
        );
        send_with_fds(&raw, &register_frame(length), &[sealed.as_fd()]).expect("send");
        assert_eq!(
            refusal(&mut raw).code,
            ErrorCode::BadBuffer,
            "length {length}"
        );
    }
    let (pipe_read, _pipe_write) = std::io::pipe().expect("pipe");
    send_with_fds(&raw, &register_frame(4096), &[pipe_read.as_fd()]).expect("send");
    assert_eq!(refusal(&mut raw).code, ErrorCode::BadBuffer);
    let sealed = memfd(
        8192,
        libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL,
    );
    send_with_fds(&raw, &register_frame(8192), &[sealed.as_fd()]).expect("send");
    match read_frame(&mut raw, MAX_BODY_BYTES).expect("frame") {
        Some(Frame::Response {
            response: flashpipe_protocol::Response::Region(RegionResponse::Registered { .. }),
            ..
        }) => {}
        other => panic!("a sealed memfd is registered, not {other:?}"),
    }
}

#[test]
fn a_version_five_client_is_refused_region_requests_and_goes_on() {
    let test = start_server("serve-region-version-5", |_| {});
    let mut raw = raw_connection(&test.socket, 5);
    let sealed = memfd(
        8192,
        libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL,
    );
    send_with_fds(&raw, &register_frame(8192), &[sealed.as_fd()]).expect("send");
    let error = refusal(&mut raw);
    assert_eq!(error.code, ErrorCode::UnsupportedVersion);
    assert_eq!(error.limit, Some(6));
}

#[test]
fn a_connection_on_rings_refuses_to_register_before_sending() {
    let test = start_server("serve-region-rings", |_| {});
    let mut client = connect_with(&test.socket, true, ClientTransport::RingsWhenMapped);
    assert!(client.uses_rings() && !client.supports_regions());
    let memory = SharedMemory::create("fp-test-region-rings", 4096).expect("memfd");
    let error = client
        .register_region(Arc::new(memory))
        .expect_err("refused");
    assert!(matches!(error, ClientError::Protocol(_)), "{error}");
    assert!(client.list().is_ok(), "the connection goes on");
}

/// Mappings of the memfd named `name` in this process (the client's and, while the
/// in-process server holds it, the server's).
fn mappings_of(name: &str) -> usize {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("maps");
    maps.lines()
        .filter(|line| line.contains(&format!("/memfd:{name} ")))
        .count()
}

#[test]
fn a_closed_connection_unmaps_its_regions() {
    let test = start_server("serve-region-killed", |_| {});
    let name = "fp-test-region-killed";
    let mut client = socket_client(&test.socket);
    let target = region(&mut client, name, MIB as usize, 0);
    assert_eq!(
        mappings_of(name),
        2,
        "the client's mapping and the server's"
    );
    drop(client);
    drop(target);
    wait_until(|| mappings_of(name) == 0);
}
