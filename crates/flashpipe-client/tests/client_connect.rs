//! The client's own rules: where a store's server listens, connecting where nothing
//! listens, a server speaking no common version refused at the handshake.

use std::io::Write;
use std::os::unix::net::UnixListener;
use std::path::Path;

use flashpipe_client::{server_socket_path, Client, ConnectError, ConnectOptions, ErrorCode};
use flashpipe_protocol::{encode_frame, Frame, RemoteError};
use flashpipe_testkit::scratch::ScratchFolder;

#[test]
fn the_socket_lies_beside_the_store_file() {
    assert_eq!(
        server_socket_path(Path::new("/data/stores/big.toml")),
        Path::new("/data/stores/big.toml.sock")
    );
    assert_eq!(
        server_socket_path(Path::new("s.toml")),
        Path::new("s.toml.sock")
    );
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
