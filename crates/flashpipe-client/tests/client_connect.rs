//! The client's own rules: where a store's server listens, connecting where nothing
//! listens, a server speaking no common version refused at the handshake, a server older
//! than the frame rings (#14) served on the socket.

mod common;

use std::io::Write;
use std::os::unix::net::UnixListener;
use std::path::Path;

use flashpipe_client::{server_socket_path, Client, ConnectError, ConnectOptions, ErrorCode};
use flashpipe_protocol::{
    encode_frame, read_frame, Frame, RemoteError, SharedRegion, Welcome, MAX_BODY_BYTES,
    PROTOCOL_VERSION,
};
use flashpipe_shm::{send_with_fds, SharedMemory};
use flashpipe_testkit::scratch::ScratchFolder;

use common::played_limits;

#[test]
fn the_socket_lies_beside_the_store_file() {
    for (store, socket) in [
        ("/data/stores/big.toml", "/data/stores/big.toml.sock"),
        ("s.toml", "s.toml.sock"),
    ] {
        assert_eq!(
            server_socket_path(Path::new(store)),
            Path::new(socket),
            "{store}"
        );
    }
}

#[test]
fn connecting_where_nothing_listens_names_the_socket() {
    let folder = ScratchFolder::new("client-no-server");
    let socket = folder.path().join("absent.sock");
    let error = Client::connect(&socket, ConnectOptions::default())
        .err()
        .expect("refused");
    assert!(matches!(error, ConnectError::Connect { .. }));
    assert!(error.to_string().contains("absent.sock"), "{error}");
}

#[test]
fn a_server_that_refuses_the_hello_is_reported_with_its_reason() {
    let folder = ScratchFolder::new("client-refused");
    let socket = folder.path().join("refusing.sock");
    let listener = UnixListener::bind(&socket).expect("bind");
    let serving = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().expect("accept");
        let error = RemoteError::limit(ErrorCode::UnsupportedVersion, "version 9 only", 9);
        stream
            .write_all(&encode_frame(&Frame::Error {
                request_id: 0,
                error,
            }))
            .expect("answer");
    });
    let error = Client::connect(&socket, ConnectOptions::default())
        .err()
        .expect("refused");
    match error {
        ConnectError::Refused(remote) => {
            assert_eq!(remote.code, ErrorCode::UnsupportedVersion);
            assert_eq!(remote.limit, Some(9));
        }
        other => panic!("{other}"),
    }
    serving.join().expect("server thread");
}

#[test]
fn a_client_and_its_views_move_between_threads() {
    fn assert_send<T: Send>() {}
    assert_send::<Client>();
    assert_send::<flashpipe_client::ReadView>();
    assert_send::<flashpipe_client::WriteBuffer>();
}

/// Plays a server from before the rings: welcomes a mapping client with a read region,
/// and closes the connection with `MalformedFrame` at any frame kind it does not know
/// (open-rings); returns the kinds of the first frame after each welcome.
fn serve_as_a_server_without_rings(listener: UnixListener, connections: usize) -> Vec<String> {
    let read_pool = SharedMemory::create("old-server-read-pool", 4096).expect("memfd");
    let limits = played_limits();
    let mut first_kinds = Vec::new();
    for _ in 0..connections {
        let (stream, _) = listener.accept().expect("accept");
        let mut reading = std::io::BufReader::new(stream.try_clone().expect("clone"));
        let hello = read_frame(&mut reading, MAX_BODY_BYTES).expect("hello");
        assert!(matches!(hello, Some(Frame::Hello(_))), "{hello:?}");
        let welcome = Frame::Welcome(Welcome {
            version: PROTOCOL_VERSION,
            server_pid: std::process::id(),
            store_path: "old server".to_string(),
            store_identity: None,
            limits,
            read_region: Some(SharedRegion {
                slot_count: 1,
                slot_size_bytes: 4096,
            }),
            write_region: None,
            store_clock: Some(flashpipe_protocol::ClockKind::Real),
            read_only: false,
        });
        send_with_fds(&stream, &encode_frame(&welcome), &[read_pool.as_fd()]).expect("welcome");
        let Ok(Some(frame)) = read_frame(&mut reading, MAX_BODY_BYTES) else {
            first_kinds.push("end".to_string());
            continue;
        };
        first_kinds.push(frame.kind().name().to_string());
        if frame.kind().name() == "open-rings" {
            let error = RemoteError::new(ErrorCode::MalformedFrame, "unknown frame kind 0x0130");
            let mut writing = &stream;
            let _ = writing.write_all(&encode_frame(&Frame::Error {
                request_id: 0,
                error,
            }));
        }
    }
    first_kinds
}

#[test]
fn a_server_older_than_the_rings_is_served_on_the_socket() {
    let folder = ScratchFolder::new("client-old-server");
    let socket = folder.path().join("old.sock");
    let listener = UnixListener::bind(&socket).expect("bind");
    let serving = std::thread::spawn(move || serve_as_a_server_without_rings(listener, 2));
    let client = Client::connect(&socket, ConnectOptions::default()).expect("connected");
    assert!(client.is_mapped() && !client.uses_rings());
    drop(client);
    let kinds = serving.join().expect("server thread");
    assert_eq!(kinds, ["open-rings", "end"]);
}
