//! Frames through shared-memory rings (#14): round trips of every kind of frame, frames
//! larger than the ring (in pieces), the socket transport beside it, a client killed
//! with SIGKILL while the server is parked on its ring (its buffers reclaimed), and a
//! hostile client corrupting its ring's indices (only its connection ends).

mod common;

use std::io::{BufRead, BufReader, Read};
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileExt;
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};

use common::{connect, connect_with, open_rings_by_hand, pattern, start_server, wait_until};

use flashpipe_client::{ClientTransport, Reply, Response, TransportExt};
use flashpipe_protocol::{Request, WireCommand, WritePayload};
use flashpipe_protocol::{ENGINE_DOORBELL_VERSION, PROTOCOL_VERSION};
use flashpipe_shm::{attach_received_ring, RING_HEADER_BYTES};

/// Where the SIGKILL test's child finds the server (set only in the child).
const CHILD_SOCKET_VARIABLE: &str = "FLASHPIPE_RING_CHILD_SOCKET";
/// The line the child prints once it holds a read view over its rings.
const CHILD_READY_LINE: &str = "ring-child-ready";

#[test]
fn a_mapping_client_round_trips_every_kind_of_frame_through_rings() {
    let test = start_server("serve-rings-round-trips", |config| {
        config.ring_capacity_bytes = 4096;
    });
    let mut client = connect_with(&test.socket, true, ClientTransport::RingsWhenMapped);
    assert!(client.is_mapped() && client.uses_rings());
    let contents = pattern(300_000, 14);
    client.create("big").expect("create");
    client.write("big", 0, &contents).expect("write by grant");
    let inline = pattern(100_000, 15);
    client
        .call(Request::Command(WireCommand::Write {
            name: "big".to_string(),
            offset_bytes: 0,
            data: WritePayload::Inline(inline.clone()),
        }))
        .expect("an inline write far larger than the 4 KiB ring");
    let view = client.read("big", 0, 200_000).expect("read by reference");
    assert!(view.is_shared());
    assert_eq!(&view[..100_000], &inline[..]);
    assert_eq!(&view[100_000..], &contents[100_000..200_000]);
    drop(view);
    for index in 0..200 {
        client
            .create(&format!("file-with-a-long-name-{index:04}"))
            .expect("create");
    }
    let listed = client
        .list()
        .expect("a list answer far larger than the ring");
    assert_eq!(listed.len(), 201);
    let names: Vec<String> = (0..20)
        .map(|index| format!("file-with-a-long-name-{index:04}"))
        .collect();
    let files = client.read_files(names.clone()).expect("read files");
    assert!(files.iter().all(Result::is_ok));
    assert_eq!(client.stat("big").expect("stat").size_bytes, 300_000);
    client.flush().expect("flush");
    assert!(client.check().expect("check").clean);
    let pipelined: Vec<_> = (0..12)
        .map(|index| {
            client
                .submit(Request::Command(WireCommand::Read {
                    name: "big".to_string(),
                    offset_bytes: index * 4096,
                    length_bytes: 4096,
                }))
                .expect("submit")
        })
        .collect();
    for _ in &pipelined {
        let (request_id, answer) = client.wait().expect("an answer");
        let offset = (request_id - pipelined[0]) as usize * 4096;
        let Ok(Response::Reply(Reply::Data(view))) = answer else {
            panic!("request {request_id} answered {answer:?}")
        };
        let expected = if offset < 100_000 {
            &inline[offset..(offset + 4096).min(100_000)]
        } else {
            &contents[offset..offset + 4096]
        };
        assert_eq!(&view[..expected.len()], expected);
    }
    let missing = client.stat("missing").expect_err("no such file");
    assert!(missing.remote().is_some(), "a typed error, not {missing}");
    drop(client);
    wait_until(|| test.server.counters().clients_now == 0);
    assert_eq!(
        test.read_pool.free_count(),
        test.read_pool.buffer_count() as usize
    );
}

#[test]
fn the_socket_transport_and_the_copying_path_stay_beside_rings() {
    let test = start_server("serve-rings-beside-socket", |_| {});
    let mut on_rings = connect_with(&test.socket, true, ClientTransport::RingsWhenMapped);
    let mut on_socket = connect_with(&test.socket, true, ClientTransport::Socket);
    let mut copying = connect(&test.socket, false);
    assert!(on_rings.uses_rings());
    assert!(on_socket.is_mapped() && !on_socket.uses_rings());
    assert!(!copying.is_mapped() && !copying.uses_rings());
    let contents = pattern(50_000, 16);
    on_socket.create("shared").expect("create");
    on_socket.write("shared", 0, &contents).expect("write");
    for client in [&mut on_rings, &mut on_socket, &mut copying] {
        let view = client.read("shared", 0, 50_000).expect("read");
        assert_eq!(&*view, &contents[..]);
    }
}

#[test]
fn a_client_killed_while_the_server_is_parked_on_its_ring_leaves_nothing_held() {
    let test = start_server("serve-rings-sigkill", |config| {
        config.spin = flashpipe_base::WaitPolicy::PARK
    });
    let full = test.read_pool.buffer_count() as usize;
    let mut writer = connect(&test.socket, true);
    writer.create("held").expect("create");
    writer
        .write("held", 0, &pattern(64 << 10, 17))
        .expect("write");
    let mut child = Command::new(std::env::current_exe().expect("the test binary"))
        .args([
            "--exact",
            "ring_child_holding_a_view_until_killed",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_SOCKET_VARIABLE, &test.socket)
        .stdout(Stdio::piped())
        .spawn()
        .expect("child client started");
    let mut lines = BufReader::new(child.stdout.take().expect("child stdout")).lines();
    let ready = lines.any(|line| line.is_ok_and(|line| line.contains(CHILD_READY_LINE)));
    assert!(ready, "the child client never held its view");
    assert_eq!(test.server.counters().clients_now, 2);
    assert!(
        test.read_pool.free_count() < full,
        "the child holds a buffer"
    );
    child.kill().expect("SIGKILL");
    child.wait().expect("child reaped");
    wait_until(|| test.server.counters().clients_now == 1);
    wait_until(|| test.read_pool.free_count() == full);
    let view = writer.read("held", 0, 4096).expect("the server goes on");
    assert_eq!(&*view, &pattern(64 << 10, 17)[..4096]);
}

/// The child of the SIGKILL test (does nothing unless that test started it): reads by
/// reference over rings, keeps the view, says so, and waits to be killed.
#[test]
fn ring_child_holding_a_view_until_killed() {
    let Ok(socket) = std::env::var(CHILD_SOCKET_VARIABLE) else {
        return;
    };
    let mut client = connect_with(
        std::path::Path::new(&socket),
        true,
        ClientTransport::RingsWhenMapped,
    );
    assert!(client.uses_rings());
    let view = client.read("held", 0, 64 << 10).expect("read by reference");
    assert!(view.is_shared());
    println!("{CHILD_READY_LINE}");
    loop {
        std::thread::park();
    }
}

/// The versions a hostile client speaks: 5 (its request ring read by the connection's
/// reading thread) and the newest (read by the engine thread).
const HOSTILE_VERSIONS: [u16; 2] = [5, PROTOCOL_VERSION];

#[test]
fn a_client_corrupting_its_ring_indices_ends_only_its_own_connection() {
    for version in HOSTILE_VERSIONS {
        corrupting_ring_indices_ends_only_that_connection(version);
    }
}

fn corrupting_ring_indices_ends_only_that_connection(version: u16) {
    let test = start_server("serve-rings-hostile", |_| {});
    let mut honest = connect(&test.socket, true);
    honest.create("kept").expect("create");
    let (socket, request_ring_fd, request_ring_bytes) = hostile_rings(&test.socket, version);
    let ring_file = std::fs::File::from(request_ring_fd.try_clone().expect("dup"));
    let impossible_head = u64::MAX / 2;
    ring_file
        .write_at(&impossible_head.to_le_bytes(), 64)
        .expect("head overwritten");
    let ring = attach_received_ring(request_ring_fd, request_ring_bytes).expect("attached");
    ring.close();
    wait_until(|| test.server.counters().malformed_frames == 1);
    wait_until(|| test.server.counters().clients_now == 1);
    let mut rest = Vec::new();
    let mut reading = &socket;
    let _ = reading.read_to_end(&mut rest);
    honest.stat("kept").expect("the other client goes on");
    let mut later = connect(&test.socket, true);
    later.stat("kept").expect("new clients go on");
}

#[test]
fn a_full_reply_ring_holds_answers_back_and_loses_none() {
    let test = start_server("serve-rings-full", |config| {
        config.ring_capacity_bytes = 4096;
    });
    let mut client = connect_with(&test.socket, true, ClientTransport::RingsWhenMapped);
    client.create("named-with-some-length").expect("create");
    let submitted: Vec<_> = (0..60)
        .map(|_| {
            client
                .submit(Request::Command(WireCommand::Stat {
                    name: "named-with-some-length".to_string(),
                }))
                .expect("submit")
        })
        .collect();
    let mut answered = Vec::new();
    for _ in &submitted {
        let (request_id, answer) = client.wait().expect("an answer");
        assert!(
            matches!(answer, Ok(Response::Reply(Reply::Stat(_)))),
            "{answer:?}"
        );
        answered.push(request_id);
    }
    answered.sort_unstable();
    assert_eq!(answered, submitted, "every answer came once");
}

#[test]
fn a_byte_on_the_socket_after_opening_rings_ends_that_connection() {
    for version in HOSTILE_VERSIONS {
        a_byte_on_the_socket_ends_that_connection(version);
    }
}

fn a_byte_on_the_socket_ends_that_connection(version: u16) {
    let test = start_server("serve-rings-socket-byte", |_| {});
    let mut honest = connect(&test.socket, true);
    let (socket, _request_ring, _) = hostile_rings(&test.socket, version);
    let mut writing = &socket;
    std::io::Write::write_all(&mut writing, b"x").expect("a stray byte");
    wait_until(|| test.server.counters().malformed_frames == 1);
    wait_until(|| test.server.counters().clients_now == 1);
    honest.list().expect("the other client goes on");
}

/// Shakes hands by hand speaking `version` and opens rings: the socket, the request
/// ring's memfd and the bytes its region spans.
fn hostile_rings(path: &std::path::Path, version: u16) -> (UnixStream, OwnedFd, usize) {
    let (socket, rings, mut fds) = open_rings_by_hand(path, version, "hostile");
    let expected_fds = if rings.engine_doorbell { 3 } else { 2 };
    assert_eq!(rings.engine_doorbell, version >= ENGINE_DOORBELL_VERSION);
    assert_eq!(fds.len(), expected_fds);
    let request_fd = fds.remove(0);
    let bytes = RING_HEADER_BYTES + rings.request_ring_capacity_bytes as usize;
    (socket, request_fd, bytes)
}
