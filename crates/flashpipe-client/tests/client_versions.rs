//! The client's side of version negotiation: it offers versions 3 to the newest (5) in headers of
//! version 3, takes a version-3 welcome (no store clock: the caller falls back to the
//! store file) and a version-4 one (the store clock told), and refuses a welcome of a
//! version it does not speak, naming it.

mod common;

use std::os::unix::net::UnixListener;

use flashpipe_client::{Client, ClockKind, ConnectError, ConnectOptions};
use flashpipe_protocol::{
    encode_frame, read_frame, Frame, Hello, Welcome, MAX_BODY_BYTES, MIN_PROTOCOL_VERSION,
    PROTOCOL_VERSION,
};
use flashpipe_testkit::scratch::ScratchFolder;

use common::played_limits;

/// Plays a server answering one hello with a copying welcome of `version` telling
/// `store_clock`; returns the hello it got.
fn serve_one_welcome(
    listener: UnixListener,
    version: u16,
    store_clock: Option<ClockKind>,
) -> Hello {
    let (stream, _) = listener.accept().expect("accept");
    let mut reading = std::io::BufReader::new(stream.try_clone().expect("clone"));
    let Ok(Some(Frame::Hello(hello))) = read_frame(&mut reading, MAX_BODY_BYTES) else {
        panic!("the client's first frame is not a hello");
    };
    let welcome = Frame::Welcome(Welcome {
        version,
        server_pid: std::process::id(),
        store_path: "played".to_string(),
        store_identity: None,
        limits: played_limits(),
        read_region: None,
        write_region: None,
        store_clock,
    });
    let mut writing = &stream;
    std::io::Write::write_all(&mut writing, &encode_frame(&welcome)).expect("welcome");
    hello
}

fn connect_to_played_server(
    name: &str,
    version: u16,
    store_clock: Option<ClockKind>,
) -> (Result<Client, ConnectError>, Hello) {
    let folder = ScratchFolder::new(name);
    let socket = folder.path().join("played.sock");
    let listener = UnixListener::bind(&socket).expect("bind");
    let serving = std::thread::spawn(move || serve_one_welcome(listener, version, store_clock));
    let client = Client::connect(&socket, ConnectOptions::default());
    let hello = serving.join().expect("server thread");
    (client, hello)
}

#[test]
fn the_client_offers_every_version_from_three_to_the_newest() {
    let (client, hello) = connect_to_played_server("client-offer", 4, None);
    client.expect("connected");
    assert_eq!(
        (hello.min_version, hello.max_version),
        (MIN_PROTOCOL_VERSION, PROTOCOL_VERSION)
    );
    assert_eq!((MIN_PROTOCOL_VERSION, PROTOCOL_VERSION), (3, 6));
}

#[test]
fn a_version_three_server_tells_no_store_clock() {
    let (client, _) = connect_to_played_server("client-v3-server", 3, None);
    let client = client.expect("a version-3 server is spoken to");
    assert_eq!(client.server_info().version, 3);
    assert_eq!(client.server_info().store_clock, None);
}

#[test]
fn a_version_four_server_tells_its_store_clock() {
    for clock in [ClockKind::Real, ClockKind::Virtual] {
        let (client, _) = connect_to_played_server("client-v4-server", 4, Some(clock));
        let client = client.expect("connected");
        assert_eq!(client.server_info().version, 4);
        assert_eq!(client.server_info().store_clock, Some(clock));
    }
}

#[test]
fn a_welcome_of_a_version_the_client_does_not_speak_is_refused_by_name() {
    let (client, _) = connect_to_played_server("client-v9-server", 9, Some(ClockKind::Real));
    match client {
        Err(ConnectError::Handshake(detail)) => {
            assert!(detail.contains("protocol version 9"), "{detail}");
        }
        Err(other) => panic!("refused for another reason: {other}"),
        Ok(_) => panic!("a welcome of version 9 was taken"),
    }
}
