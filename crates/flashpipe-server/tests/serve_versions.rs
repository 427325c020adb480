//! Version negotiation against a running server: a version-3 client (hello 3..=3) gets a
//! welcome of version 3 with no store clock and is served as before; a client offering
//! 3..=4 gets version 4 and the store's clock kind; a client speaking neither is refused
//! with `UnsupportedVersion` naming both ranges; the library client speaks the newest
//! version and sets and sees file attributes, which a version-4 client neither sees nor may set.

mod common;

use std::io::Write;
use std::os::unix::net::UnixStream;

use common::{connect, raw_hello, start_server};
use flashpipe_api::{AttributeChange, Command, FileOwner, Reply};
use flashpipe_client::TransportExt;
use flashpipe_protocol::{
    encode_frame, read_frame, ErrorCode, Frame, Request, Response, Welcome, MAX_BODY_BYTES,
    PROTOCOL_VERSION,
};

/// Says hello with `min..=max` on a raw connection; returns the connection and the
/// server's first frame.
fn hello(socket: &std::path::Path, min_version: u16, max_version: u16) -> (UnixStream, Frame) {
    let mut raw = raw_hello(socket, min_version..=max_version, false, "versions");
    let first = read_frame(&mut raw, MAX_BODY_BYTES)
        .expect("a frame")
        .expect("the server answers");
    (raw, first)
}

fn welcome(frame: Frame) -> Welcome {
    match frame {
        Frame::Welcome(welcome) => welcome,
        other => panic!("a {} frame instead of a welcome", other.kind().name()),
    }
}

#[test]
fn a_version_three_client_is_welcomed_at_three_without_a_clock_and_served() {
    let test = start_server("serve-version-3", |_| {});
    let (mut raw, first) = hello(&test.socket, 3, 3);
    let welcome = welcome(first);
    assert_eq!(welcome.version, 3);
    assert_eq!(welcome.store_clock, None);
    let create = Frame::Request {
        request_id: 1,
        request: Request::Command(Command::Create { name: "v3".into() }),
    };
    raw.write_all(&encode_frame(&create)).expect("create");
    match read_frame(&mut raw, MAX_BODY_BYTES) {
        Ok(Some(Frame::Response {
            request_id: 1,
            response: Response::Reply(Reply::Done),
        })) => {}
        other => panic!("a version-3 client's create answered {other:?}"),
    }
    let mut client = connect(&test.socket, false);
    client
        .stat("v3")
        .expect("the file the version-3 client made");
}

#[test]
fn a_client_offering_four_is_told_the_store_clock() {
    let test = start_server("serve-version-4", |_| {});
    let (_raw, first) = hello(&test.socket, 3, 4);
    let welcome = welcome(first);
    assert_eq!(welcome.version, 4);
    assert!(welcome.store_clock.is_some());
    let client = connect(&test.socket, true);
    assert_eq!(client.server_info().version, PROTOCOL_VERSION);
    assert_eq!(client.server_info().store_clock, welcome.store_clock);
    assert!(!client.server_info().read_only, "a read-write store");
}

#[test]
fn a_client_speaking_no_common_version_is_refused_naming_both_ranges() {
    let test = start_server("serve-version-none", |_| {});
    for (min_version, max_version) in [(PROTOCOL_VERSION + 1, 9), (1, 2)] {
        let (_raw, first) = hello(&test.socket, min_version, max_version);
        match first {
            Frame::Error {
                request_id: 0,
                error,
            } => {
                assert_eq!(error.code, ErrorCode::UnsupportedVersion);
                assert_eq!(error.limit, Some(u64::from(PROTOCOL_VERSION)));
                assert!(
                    error
                        .message
                        .contains(&format!("{min_version}..={max_version}"))
                        && error.message.contains(&format!("3..={PROTOCOL_VERSION}")),
                    "{}",
                    error.message
                );
            }
            other => panic!("a {} frame instead of a refusal", other.kind().name()),
        }
    }
}

/// One request on a raw connection; its answer.
fn ask(raw: &mut UnixStream, request_id: u64, command: Command<flashpipe_protocol::Wire>) -> Frame {
    let frame = Frame::Request {
        request_id,
        request: Request::Command(command),
    };
    raw.write_all(&encode_frame(&frame)).expect("request");
    read_frame(raw, MAX_BODY_BYTES)
        .expect("a frame")
        .expect("the server answers")
}

#[test]
fn attributes_are_version_five_only() {
    let test = start_server("serve-version-attributes", |_| {});
    let mut client = connect(&test.socket, false);
    client.create("f").expect("create");
    let owner = FileOwner { uid: 7, gid: 8 };
    client
        .set_attributes(
            "f",
            AttributeChange::Set(0o600),
            AttributeChange::Set(owner),
            AttributeChange::Set(1_700_000_000_000_000_000),
        )
        .expect("set attributes");
    let stat = client.stat("f").expect("stat");
    assert_eq!(stat.mode, Some(0o600));
    assert_eq!(stat.owner, Some(owner));
    assert_eq!(stat.modified_wall_ns, Some(1_700_000_000_000_000_000));
    let refused = client.set_attributes(
        "f",
        AttributeChange::Set(0o100600),
        AttributeChange::Keep,
        AttributeChange::Keep,
    );
    let error = refused.expect_err("a file type in the mode");
    assert_eq!(
        error.remote().map(|error| error.code),
        Some(ErrorCode::BadAttributes)
    );
    assert_eq!(client.stat("f").expect("stat").mode, Some(0o600));

    let (mut raw, first) = hello(&test.socket, 3, 4);
    assert_eq!(welcome(first).version, 4);
    match ask(&mut raw, 1, Command::Stat { name: "f".into() }) {
        Frame::Response {
            response: Response::Reply(Reply::Stat(old)),
            ..
        } => assert_eq!(
            (old.mode, old.owner, old.modified_wall_ns),
            (None, None, None)
        ),
        other => panic!("a {} frame instead of a stat", other.kind().name()),
    }
    let set = Command::SetAttributes {
        name: "f".into(),
        mode: AttributeChange::Set(0o644),
        owner: AttributeChange::Keep,
        modified_wall_ns: AttributeChange::Keep,
    };
    match ask(&mut raw, 2, set) {
        Frame::Error {
            request_id: 2,
            error,
        } => {
            assert_eq!(error.code, ErrorCode::UnsupportedVersion);
            assert!(error.message.contains("version 5"), "{}", error.message);
        }
        other => panic!("a {} frame instead of a refusal", other.kind().name()),
    }
    assert_eq!(client.stat("f").expect("stat").mode, Some(0o600));
}
