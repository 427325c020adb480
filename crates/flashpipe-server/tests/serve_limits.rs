//! Limits reached with their typed errors, malformed frames ending only their own
//! connection, a client dropped mid-frame leaving nothing held, and graceful stop.

mod common;

use std::io::{Read, Write};

use common::{connect, pattern, raw_hello, remote_code, start_server, wait_until};
use flashpipe_api::Command;
use flashpipe_client::{
    Client, ConnectError, ConnectOptions, ErrorCode, Reply, Response, TransportExt,
};
use flashpipe_protocol::{
    encode_frame, encode_header, read_frame, Frame, FrameKind, MAX_BODY_BYTES, PROTOCOL_VERSION,
};
use flashpipe_protocol::{Request, WritePayload};
use flashpipe_server::{ServeError, Server, ServerConfig};

#[test]
fn a_client_past_the_client_limit_is_refused_with_the_limit() {
    let test = start_server("serve-client-limit", |config| config.max_clients = 1);
    let mut first = connect(&test.socket, false);
    let refused = Client::connect(
        &test.socket,
        ConnectOptions {
            map_memory: false,
            client_name: "second".into(),
            ..ConnectOptions::default()
        },
    )
    .err()
    .expect("second client refused");
    match refused {
        ConnectError::Refused(error) => {
            assert_eq!(error.code, ErrorCode::TooManyClients);
            assert_eq!(error.limit, Some(1));
        }
        other => panic!("refused with {other}"),
    }
    first
        .create("still-works")
        .expect("the first client keeps working");
    drop(first);
    wait_until(|| test.server.counters().clients_now == 0);
    let mut third = connect(&test.socket, false);
    third.stat("still-works").expect("a client fits again");
    assert_eq!(test.server.counters().clients_refused, 1);
}

#[test]
fn byte_and_write_limits_refuse_with_their_limit() {
    let test = start_server("serve-byte-limits", |config| {
        config.max_write_bytes = 8192;
        config.max_bytes_in_flight_per_client = 16384;
        config.max_bytes_in_flight = 32768;
    });
    let mut client = connect(&test.socket, false);
    assert_eq!(client.server_info().limits.max_write_bytes, 8192);
    client.create("f").expect("create");
    client
        .write("f", 0, &pattern(100_000, 1))
        .expect("a long write goes in chunks");
    check_inline_write_refused(&mut client, 8193, ErrorCode::WriteTooLarge, 8192);
    let client_bytes = client
        .read("f", 0, 20_000)
        .expect_err("read over the client's bytes");
    assert_eq!(remote_code(&client_bytes), ErrorCode::ClientBytesInFlight);
    assert_eq!(client_bytes.limit(), Some(16384));
    assert_eq!(
        &*client.read("f", 0, 16384).expect("a read within the limit"),
        &pattern(100_000, 1)[..16384]
    );
    drop(client);

    let test = start_server("serve-server-bytes", |config| {
        config.max_bytes_in_flight_per_client = 1 << 20;
        config.max_bytes_in_flight = 4096;
    });
    let mut client = connect(&test.socket, false);
    client.create("f").expect("create");
    check_inline_write_refused(&mut client, 5000, ErrorCode::ServerBytesInFlight, 4096);
    assert!(test.server.counters().requests_refused >= 1);
}

/// Checks that an inline write of `length` bytes to `f` is refused with `code`, naming
/// `limit`.
fn check_inline_write_refused(client: &mut Client, length: usize, code: ErrorCode, limit: u64) {
    let refused = client
        .call(Request::Command(Command::Write {
            name: "f".into(),
            offset_bytes: 0,
            data: WritePayload::Inline(vec![1; length]),
        }))
        .expect_err("an inline write over a limit");
    assert_eq!(remote_code(&refused), code);
    assert_eq!(refused.limit(), Some(limit));
}

#[test]
fn requests_past_the_in_flight_limit_are_refused_with_the_limit() {
    let test = start_server("serve-in-flight-limit", |config| {
        config.max_in_flight_per_client = 2
    });
    let mut client = connect(&test.socket, false);
    client.create("f").expect("create");
    client.write("f", 0, &pattern(65536, 3)).expect("write");
    let ids: Vec<_> = (0..32)
        .map(|_| {
            client
                .submit(Request::Command(Command::Read {
                    name: "f".into(),
                    offset_bytes: 0,
                    length_bytes: 65536,
                }))
                .expect("submit")
        })
        .collect();
    let mut refused = 0;
    for _ in &ids {
        let (_, answer) = client.wait().expect("answer");
        match answer {
            Ok(Response::Reply(Reply::Data(view))) => assert_eq!(&*view, &pattern(65536, 3)[..]),
            Ok(other) => panic!("unexpected {other:?}"),
            Err(error) => {
                assert_eq!(error.code, ErrorCode::TooManyInFlight);
                assert_eq!(error.limit, Some(2));
                refused += 1;
            }
        }
    }
    println!("{refused} of 32 pipelined reads refused at the in-flight limit of 2");
    assert!(refused < 32, "the first request always fits");
}

#[test]
fn a_malformed_frame_ends_only_its_connection() {
    let test = start_server("serve-malformed", |_| {});
    let mut good = connect(&test.socket, false);
    good.create("before").expect("create");
    let cases: Vec<Vec<u8>> = vec![
        b"GARBAGE-GARBAGE-GARBAGE-GARBAGE".to_vec(),
        encode_header(FrameKind::Create, 1, MAX_BODY_BYTES + 1).to_vec(),
        {
            let mut frame = encode_header(FrameKind::Create, 1, 4).to_vec();
            frame.extend_from_slice(&[200, 0, 0, 0]);
            frame
        },
        encode_frame(&Frame::Welcome(flashpipe_protocol::Welcome {
            version: 2,
            server_pid: 1,
            store_path: String::new(),
            store_identity: None,
            limits: good.server_info().limits,
            read_region: None,
            write_region: None,
            store_clock: None,
            read_only: false,
        })),
    ];
    for (index, bytes) in cases.iter().enumerate() {
        let mut raw = raw_hello(
            &test.socket,
            PROTOCOL_VERSION..=PROTOCOL_VERSION,
            false,
            "raw",
        );
        assert!(matches!(
            read_frame(&mut raw, MAX_BODY_BYTES),
            Ok(Some(Frame::Welcome(_)))
        ));
        raw.write_all(bytes).expect("malformed bytes");
        match read_frame(&mut raw, MAX_BODY_BYTES) {
            Ok(Some(Frame::Error {
                request_id: 0,
                error,
            })) => {
                assert_eq!(
                    error.code,
                    ErrorCode::MalformedFrame,
                    "case {index}: {}",
                    error.message
                );
                println!("case {index}: {}", error.message);
            }
            other => panic!("case {index}: expected a closing error, got {other:?}"),
        }
        let mut rest = Vec::new();
        raw.read_to_end(&mut rest)
            .expect("the server closed the connection");
        good.stat("before").expect("the other client keeps working");
    }
    good.create("after").expect("create after");
    assert_eq!(test.server.counters().malformed_frames, 3);
}

#[test]
fn a_client_gone_mid_frame_leaves_nothing_held() {
    let test = start_server("serve-dropped-client", |_| {});
    let mut good = connect(&test.socket, false);
    good.create("f").expect("create");
    for _ in 0..5 {
        let mut raw = raw_hello(
            &test.socket,
            PROTOCOL_VERSION..=PROTOCOL_VERSION,
            false,
            "dying",
        );
        let write = encode_frame(&Frame::Request {
            request_id: 1,
            request: Request::Command(Command::Write {
                name: "f".into(),
                offset_bytes: 0,
                data: WritePayload::Inline(vec![9; 500_000]),
            }),
        });
        raw.write_all(&write[..write.len() / 2])
            .expect("half a write");
        drop(raw);
    }
    wait_until(|| test.server.counters().clients_now == 1);
    assert_eq!(test.server.counters().bytes_in_flight, 0);
    assert_eq!(
        good.stat("f").expect("stat").size_bytes,
        0,
        "no half write landed"
    );
}

#[test]
fn a_second_server_on_a_live_socket_is_refused_and_a_stale_one_replaced() {
    let test = start_server("serve-socket-rules", |_| {});
    let refused = Server::start(
        common::ram_store(),
        ServerConfig {
            socket_path: test.socket.clone(),
            ..ServerConfig::default()
        },
    )
    .err()
    .expect("live socket refused");
    assert!(
        matches!(refused, ServeError::AlreadyServing { .. }),
        "{refused}"
    );
    let folder = flashpipe_testkit::scratch::ScratchFolder::new("serve-stale-socket");
    let stale = folder.path().join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).expect("bind"));
    assert!(stale.exists());
    let server = Server::start(
        common::ram_store(),
        ServerConfig {
            socket_path: stale.clone(),
            ..ServerConfig::default()
        },
    )
    .expect("stale socket replaced");
    let mut client = connect(&stale, false);
    client.create("x").expect("works");
    drop(client);
    server.stop_handle().stop();
    let report = server.run_until_stopped().expect("stopped");
    assert_eq!(report.counters.clients_total, 1);
    assert!(!stale.exists(), "the socket is removed at stop");
}

#[test]
fn stop_finishes_in_flight_requests_and_refuses_new_ones() {
    let test = start_server("serve-stop", |_| {});
    let mut client = connect(&test.socket, false);
    client.create("f").expect("create");
    let ids: Vec<_> = (0..8u64)
        .map(|index| {
            client
                .submit(Request::Command(Command::Write {
                    name: "f".into(),
                    offset_bytes: index * 4096,
                    data: WritePayload::Inline(pattern(4096, index)),
                }))
                .expect("submit")
        })
        .collect();
    let stopper = test.server.stop_handle();
    let server = test.server;
    let serving = std::thread::spawn(move || server.run_until_stopped());
    stopper.stop();
    for _ in &ids {
        let (_, answer) = client.wait().expect("every write in flight is answered");
        match answer {
            Ok(Response::Reply(Reply::Written { buffer: 4096 })) => {}
            Err(error) if error.code == ErrorCode::ShuttingDown => {}
            other => panic!("a write is answered or refused as the server stops, not {other:?}"),
        }
    }
    let report = serving.join().expect("server thread").expect("clean stop");
    assert!(report.counters.frames_received >= 10);
    assert!(!test.socket.exists());
    let after = client.stat("f");
    assert!(after.is_err(), "the connection is closed after stop");
}

#[test]
fn stop_ends_the_server_even_when_its_socket_path_is_gone() {
    let test = start_server("serve-socket-gone", |_| {});
    let mut client = connect(&test.socket, false);
    client.create("f").expect("create");
    std::fs::remove_file(&test.socket).expect("socket removed by someone else");
    test.server.stop_handle().stop();
    test.server.run_until_stopped().expect("stopped");
}

#[test]
fn a_client_that_never_reads_its_answers_does_not_hold_up_a_stop() {
    let test = start_server("serve-stuck-client", |config| config.send_timeout_ms = 100);
    let mut writer = connect(&test.socket, false);
    writer.create("f").expect("create");
    writer.write("f", 0, &pattern(1 << 20, 6)).expect("write");
    let mut raw = raw_hello(
        &test.socket,
        PROTOCOL_VERSION..=PROTOCOL_VERSION,
        false,
        "stuck",
    );
    for request_id in 1..=32u64 {
        let read = Frame::Request {
            request_id,
            request: Request::Command(Command::Read {
                name: "f".into(),
                offset_bytes: 0,
                length_bytes: 1 << 20,
            }),
        };
        if raw.write_all(&encode_frame(&read)).is_err() {
            break;
        }
    }
    writer
        .stat("f")
        .expect("other clients are served meanwhile");
    test.server.stop_handle().stop();
    test.server
        .run_until_stopped()
        .expect("stopped although one client never read");
    drop(raw);
}
