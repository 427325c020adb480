//! The server against hostile and unusual clients, byte by byte: protocol fuzzing
//! (arbitrary bytes after the handshake, arbitrary option sequences: no panic, the
//! connection ends, a second connection on the same server still works), limits
//! (connections, requests in flight, payloads, options), malformed requests ending
//! their connection only, errors that leave the connection usable, the old
//! `NBD_OPT_EXPORT_NAME` path, simple replies, multi-conn flush visibility and shutdown.
//! Proptest cases: `PROPTEST_CASES` (default 48 here, to keep the suite short).

mod common;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Once;
use std::time::Duration;

use common::{pattern_bytes, request_header_bytes, wait_until, RawClient, TestServer};
use flashpipe_nbd::server::{NbdServer, ServerConfig, ServerLimits, ServerStartError};
use flashpipe_nbd::wire::*;
use proptest::prelude::*;

const MIB: u64 = 1024 * 1024;
/// How long a test waits for the server to close a connection before calling it hung.
const CLOSE_WAIT: Duration = Duration::from_secs(30);

static PANICS: AtomicUsize = AtomicUsize::new(0);
static HOOK: Once = Once::new();

/// Counts panics on every thread (the server's included), keeping the default report.
fn count_panics() {
    HOOK.call_once(|| {
        let default_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::SeqCst);
            default_hook(info);
        }));
    });
}

/// Reads until the server closes the connection; false if it stays open.
fn closes(stream: &mut TcpStream) -> bool {
    stream.set_read_timeout(Some(CLOSE_WAIT)).unwrap();
    let mut sink = [0u8; 65536];
    loop {
        match stream.read(&mut sink) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

/// A fresh connection writes, flushes and reads back through the server.
/// Writes `bytes` and closes the writing half: the connection must end, the server go on
/// serving others, and nothing panic.
fn send_and_close(
    server: &TestServer,
    stream: &mut TcpStream,
    bytes: &[u8],
) -> Result<(), TestCaseError> {
    // The server may close before it has read everything; a refused write is fine.
    let _ = stream.write_all(bytes);
    let _ = stream.shutdown(Shutdown::Write);
    prop_assert!(closes(stream), "the connection ends");
    server_still_works(server);
    prop_assert_eq!(PANICS.load(Ordering::SeqCst), 0);
    Ok(())
}

fn server_still_works(server: &TestServer) {
    let mut client = RawClient::connect(server.connect_tcp(), "disk", true);
    let data = pattern_bytes(3, 4096);
    assert_eq!(client.request(CMD_WRITE, 0, 8192, 4096, &data).0, 0);
    assert_eq!(client.request(CMD_FLUSH, 0, 0, 0, &[]).0, 0);
    let (error, read) = client.request(CMD_READ, 0, 8192, 4096, &[]);
    assert_eq!(error, 0);
    assert!(read == data);
}

fn handshake_to_transmission(server: &TestServer) -> TcpStream {
    let client = RawClient::connect(server.connect_tcp(), "disk", true);
    client.stream
}

fn proptest_config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(48);
    ProptestConfig::with_cases(cases)
}

/// A request header with any fields, sometimes with the right magic.
fn arbitrary_bytes_after_handshake() -> impl Strategy<Value = Vec<u8>> {
    let header = (
        any::<u16>(),
        0u16..10,
        any::<u64>(),
        0u64..(2 * MIB),
        any::<u32>(),
    )
        .prop_map(|(flags, command, cookie, offset_bytes, length_bytes)| {
            request_header_bytes(
                flags,
                command,
                cookie,
                offset_bytes,
                length_bytes % (64 * 1024),
            )
        });
    let noise = proptest::collection::vec(any::<u8>(), 0..200);
    proptest::collection::vec(prop_oneof![header, noise], 0..12).prop_map(|parts| parts.concat())
}

fn arbitrary_options() -> impl Strategy<Value = Vec<(u32, Vec<u8>)>> {
    let option = prop_oneof![0u32..14, any::<u32>()];
    let data = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..64),
        ("[a-z:]{0,20}", 0u16..4).prop_map(|(name, count)| {
            let mut data = Vec::new();
            InfoRequest {
                export_name: name,
                info_types: (0..count).collect(),
            }
            .encode(&mut data);
            data
        }),
        proptest::collection::vec("[a-z]{0,6}:?[a-z]{0,12}", 0..4).prop_map(|queries| {
            let mut data = Vec::new();
            MetaContextRequest {
                export_name: "disk".to_string(),
                queries,
            }
            .encode(&mut data);
            data
        }),
    ];
    proptest::collection::vec((option, data), 0..16)
}

proptest! {
    #![proptest_config(proptest_config())]

    #[test]
    fn arbitrary_bytes_after_the_handshake_end_only_that_connection(bytes in arbitrary_bytes_after_handshake()) {
        count_panics();
        let server = TestServer::ram(&[("disk", 2 * MIB)]);
        let mut stream = handshake_to_transmission(&server);
        send_and_close(&server, &mut stream, &bytes)?;
    }

    #[test]
    fn arbitrary_option_sequences_end_only_that_connection(options in arbitrary_options()) {
        count_panics();
        let server = TestServer::ram(&[("disk", 2 * MIB)]);
        let mut stream = server.connect_tcp();
        let mut greeting = [0u8; SERVER_GREETING_BYTES];
        stream.read_exact(&mut greeting).unwrap();
        let mut bytes = (CLIENT_FLAG_FIXED_NEWSTYLE | CLIENT_FLAG_NO_ZEROES).to_be_bytes().to_vec();
        for (option, data) in &options {
            encode_option(&mut bytes, *option, data);
        }
        send_and_close(&server, &mut stream, &bytes)?;
    }
}

#[test]
fn a_malformed_request_ends_its_connection_and_no_other() {
    let server = TestServer::ram(&[("disk", 2 * MIB)]);
    let mut bystander = RawClient::connect(server.connect_tcp(), "disk", false);
    let mut victim = handshake_to_transmission(&server);
    victim.write_all(&[0xde; REQUEST_HEADER_BYTES]).unwrap();
    assert!(closes(&mut victim));
    let data = pattern_bytes(9, 512);
    assert_eq!(bystander.request(CMD_WRITE, 0, 0, 512, &data).0, 0);
    assert!(bystander.request(CMD_READ, 0, 0, 512, &[]).1 == data);
}

#[test]
fn a_write_payload_over_32_mib_ends_the_connection() {
    let server = TestServer::ram(&[("disk", 64 * MIB)]);
    let mut client = RawClient::connect(server.connect_tcp(), "disk", true);
    client.send(CMD_WRITE, 0, 1, 0, MAX_PAYLOAD_BYTES + 512, &[]);
    assert!(closes(&mut client.stream));
    server_still_works(&server);
}

#[test]
fn bad_requests_get_errors_and_the_connection_goes_on() {
    let server = TestServer::ram(&[("disk", 2 * MIB)]);
    for structured in [false, true] {
        let mut client = RawClient::connect(server.connect_tcp(), "disk", structured);
        assert_eq!(
            client.request(CMD_READ, 0, 2 * MIB, 512, &[]).0,
            NBD_EINVAL,
            "past the end"
        );
        assert_eq!(
            client
                .request(CMD_WRITE, 0, 2 * MIB - 512, 1024, &[0; 1024])
                .0,
            NBD_ENOSPC
        );
        assert_eq!(
            client.request(CMD_READ, 0, 100, 512, &[]).0,
            NBD_EINVAL,
            "misaligned"
        );
        assert_eq!(
            client.request(CMD_READ, CMD_FLAG_REQ_ONE, 0, 512, &[]).0,
            NBD_EINVAL,
            "bad flag"
        );
        assert_eq!(
            client.request(42, 0, 0, 0, &[]).0,
            NBD_EINVAL,
            "unknown command"
        );
        assert_eq!(client.request(CMD_FLUSH, 0, 512, 0, &[]).0, NBD_EINVAL);
        let expected_status = if structured { 0 } else { NBD_EINVAL };
        assert_eq!(
            client.request(CMD_BLOCK_STATUS, 0, 0, 4096, &[]).0,
            expected_status
        );
        assert_eq!(
            client.request(CMD_READ, 0, 0, 0, &[]).0,
            0,
            "a read of length 0"
        );
        let data = pattern_bytes(5, 4096);
        assert_eq!(
            client.request(CMD_WRITE, CMD_FLAG_FUA, 4096, 4096, &data).0,
            0
        );
        assert!(client.request(CMD_READ, 0, 4096, 4096, &[]).1 == data);
    }
}

#[test]
fn fast_zero_is_refused_when_zeroes_would_be_written() {
    let server = TestServer::ram(&[("disk", 2 * MIB)]);
    let mut client = RawClient::connect(server.connect_tcp(), "disk", true);
    let data = pattern_bytes(6, 8192);
    assert_eq!(client.request(CMD_WRITE, 0, 0, 8192, &data).0, 0);
    let fast_no_hole = CMD_FLAG_FAST_ZERO | CMD_FLAG_NO_HOLE;
    assert_eq!(
        client
            .request(CMD_WRITE_ZEROES, fast_no_hole, 0, 4096, &[])
            .0,
        NBD_ENOTSUP
    );
    assert!(
        client.request(CMD_READ, 0, 0, 8192, &[]).1 == data,
        "untouched"
    );
    assert_eq!(
        client
            .request(CMD_WRITE_ZEROES, CMD_FLAG_FAST_ZERO, 0, 4096, &[])
            .0,
        0
    );
    assert_eq!(
        client
            .request(CMD_WRITE_ZEROES, CMD_FLAG_NO_HOLE, 4096, 4096, &[])
            .0,
        0
    );
    assert!(client.request(CMD_READ, 0, 0, 8192, &[]).1 == vec![0u8; 8192]);
}

#[test]
fn many_requests_in_flight_beyond_the_per_connection_limit_are_all_answered() {
    let limits = ServerLimits {
        max_requests_per_connection: 2,
        ..ServerLimits::default()
    };
    let server = TestServer::with_limits(&[("disk", 4 * MIB)], limits);
    let mut client = RawClient::connect(server.connect_tcp(), "disk", true);
    let mut lengths = HashMap::new();
    for cookie in 0..32u64 {
        let data = pattern_bytes(cookie, 4096);
        client.send(CMD_WRITE, 0, 1000 + cookie, cookie * 4096, 4096, &data);
        client.send(CMD_READ, 0, 2000 + cookie, cookie * 4096, 4096, &[]);
        lengths.insert(2000 + cookie, 4096);
    }
    let mut answered = HashMap::new();
    for _ in 0..64 {
        let (cookie, error, data) = client.receive(&lengths);
        assert_eq!(error, 0);
        assert!(
            answered.insert(cookie, data).is_none(),
            "cookie {cookie} answered twice"
        );
    }
    for cookie in 0..32u64 {
        assert!(answered[&(2000 + cookie)] == pattern_bytes(cookie, 4096));
    }
}

#[test]
fn connections_beyond_the_limit_are_closed_at_accept() {
    let limits = ServerLimits {
        max_connections: 2,
        ..ServerLimits::default()
    };
    let server = TestServer::with_limits(&[("disk", MIB)], limits);
    let first = RawClient::connect(server.connect_tcp(), "disk", false);
    let _second = RawClient::connect(server.connect_tcp(), "disk", false);
    let mut third = server.connect_tcp();
    assert!(closes(&mut third), "the third connection is closed");
    drop(first);
    assert!(
        wait_until(Duration::from_secs(5), || server
            .server()
            .open_connections()
            < 2),
        "the closed connection is counted out"
    );
    RawClient::connect(server.connect_tcp(), "disk", false);
}

#[test]
fn options_unknown_unsupported_and_invalid_are_answered_and_haggling_goes_on() {
    let server = TestServer::ram(&[("disk", MIB), ("other", MIB)]);
    let mut client = RawClient {
        stream: server.connect_tcp(),
        structured: false,
        size_bytes: 0,
        transmission_flags: 0,
    };
    let mut greeting = [0u8; SERVER_GREETING_BYTES];
    client.stream.read_exact(&mut greeting).unwrap();
    client
        .stream
        .write_all(&CLIENT_FLAG_FIXED_NEWSTYLE.to_be_bytes())
        .unwrap();
    for option in [
        OPT_STARTTLS,
        OPT_EXTENDED_HEADERS,
        OPT_PEEK_EXPORT,
        99,
        0xdead_beef,
    ] {
        assert_eq!(
            client.option(option, &[]).last().unwrap().0.reply_type,
            REP_ERR_UNSUP
        );
    }
    assert_eq!(
        client.option(OPT_LIST, &[1]).last().unwrap().0.reply_type,
        REP_ERR_INVALID
    );
    assert_eq!(
        client.option(OPT_GO, &[0, 0]).last().unwrap().0.reply_type,
        REP_ERR_INVALID
    );
    let mut data = Vec::new();
    MetaContextRequest {
        export_name: "disk".to_string(),
        queries: vec![META_CONTEXT_BASE_ALLOCATION.to_string()],
    }
    .encode(&mut data);
    let replies = client.option(OPT_SET_META_CONTEXT, &data);
    assert_eq!(
        replies.last().unwrap().0.reply_type,
        REP_ERR_INVALID,
        "needs structured replies"
    );
    let replies = client.option(OPT_LIST_META_CONTEXT, &data);
    assert_eq!(replies[0].0.reply_type, REP_META_CONTEXT);
    assert_eq!(
        decode_meta_context_reply(&replies[0].1).unwrap().1,
        META_CONTEXT_BASE_ALLOCATION
    );
    let mut unknown = Vec::new();
    InfoRequest {
        export_name: "nope".to_string(),
        info_types: vec![],
    }
    .encode(&mut unknown);
    assert_eq!(
        client
            .option(OPT_INFO, &unknown)
            .last()
            .unwrap()
            .0
            .reply_type,
        REP_ERR_UNKNOWN
    );
    let replies = client.option(OPT_LIST, &[]);
    let names: Vec<String> = replies
        .iter()
        .filter(|(header, _)| header.reply_type == REP_SERVER)
        .map(|(_, data)| decode_server_entry(data).unwrap().0)
        .collect();
    assert_eq!(names, ["disk", "other"]);
    assert_eq!(
        client.option(OPT_ABORT, &[]).last().unwrap().0.reply_type,
        REP_ACK
    );
    assert!(closes(&mut client.stream));
}

#[test]
fn export_name_option_serves_old_clients_with_and_without_zero_padding() {
    let server = TestServer::ram(&[("disk", MIB)]);
    for no_zeroes in [false, true] {
        let mut stream = server.connect_tcp();
        let mut greeting = [0u8; SERVER_GREETING_BYTES];
        stream.read_exact(&mut greeting).unwrap();
        let flags = if no_zeroes {
            CLIENT_FLAG_FIXED_NEWSTYLE | CLIENT_FLAG_NO_ZEROES
        } else {
            CLIENT_FLAG_FIXED_NEWSTYLE
        };
        let mut bytes = flags.to_be_bytes().to_vec();
        encode_option(&mut bytes, OPT_EXPORT_NAME, b"");
        stream.write_all(&bytes).unwrap();
        let mut answer = vec![0u8; if no_zeroes { 10 } else { 134 }];
        stream.read_exact(&mut answer).unwrap();
        assert_eq!(u64::from_be_bytes(answer[..8].try_into().unwrap()), MIB);
        let mut client = RawClient {
            stream,
            structured: false,
            size_bytes: MIB,
            transmission_flags: 0,
        };
        assert_eq!(client.request(CMD_WRITE, 0, 0, 512, &[7; 512]).0, 0);
        assert_eq!(client.request(CMD_READ, 0, 0, 512, &[]).1, vec![7; 512]);
    }
    let mut stream = server.connect_tcp();
    let mut greeting = [0u8; SERVER_GREETING_BYTES];
    stream.read_exact(&mut greeting).unwrap();
    let mut bytes = CLIENT_FLAG_FIXED_NEWSTYLE.to_be_bytes().to_vec();
    encode_option(&mut bytes, OPT_EXPORT_NAME, b"missing");
    stream.write_all(&bytes).unwrap();
    assert!(
        closes(&mut stream),
        "an unknown export name ends the session"
    );
}

#[test]
fn a_flush_on_one_connection_covers_writes_completed_on_another() {
    let server = TestServer::ram(&[("disk", MIB)]);
    let mut writer = RawClient::connect(server.connect_tcp(), "disk", true);
    let mut flusher = RawClient::connect(server.connect_tcp(), "disk", false);
    assert_ne!(
        writer.transmission_flags & TRANSMISSION_FLAG_CAN_MULTI_CONN,
        0
    );
    let data = pattern_bytes(12, 65536);
    assert_eq!(writer.request(CMD_WRITE, 0, 65536, 65536, &data).0, 0);
    assert_eq!(flusher.request(CMD_FLUSH, 0, 0, 0, &[]).0, 0);
    assert!(flusher.request(CMD_READ, 0, 65536, 65536, &[]).1 == data);
}

#[test]
fn shutdown_ends_open_connections_and_hands_the_devices_back() {
    let server = TestServer::ram(&[("disk", MIB)]);
    let mut client = RawClient::connect(server.connect_tcp(), "disk", true);
    let mut idle = server.connect_tcp();
    let mut greeting = [0u8; SERVER_GREETING_BYTES];
    idle.read_exact(&mut greeting).unwrap();
    assert_eq!(client.request(CMD_WRITE, 0, 0, 4096, &[1; 4096]).0, 0);
    let mut server = server;
    let running = server.server.take().unwrap();
    let devices = running.shutdown();
    assert_eq!(devices.len(), 1);
    assert_eq!(devices[0].0, "disk");
    assert!(closes(&mut client.stream));
    assert!(closes(&mut idle));
}

#[test]
fn listening_beyond_loopback_needs_insecure() {
    let exports = vec![flashpipe_nbd::server::Export::open(
        "disk",
        &flashpipe_nbd::server::ExportDeviceSpec::Ram { size_bytes: MIB },
    )
    .unwrap()];
    let config = ServerConfig {
        tcp_address: Some("0.0.0.0:0".parse().unwrap()),
        ..ServerConfig::default()
    };
    let error = NbdServer::start(config, exports).unwrap_err();
    assert!(
        matches!(error, ServerStartError::NotLoopback { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("--insecure"));
}

#[test]
fn a_silent_client_is_dropped_after_the_handshake_time_limit() {
    let limits = ServerLimits {
        handshake_timeout_seconds: 1,
        max_connections: 1,
        ..ServerLimits::default()
    };
    let server = TestServer::with_limits(&[("disk", MIB)], limits);
    let mut silent = server.connect_tcp();
    let mut greeting = [0u8; SERVER_GREETING_BYTES];
    silent.read_exact(&mut greeting).unwrap();
    assert!(closes(&mut silent), "the silent client is dropped");
    assert!(
        wait_until(Duration::from_secs(5), || server
            .server()
            .open_connections()
            == 0),
        "its slot is free again"
    );
    RawClient::connect(server.connect_tcp(), "disk", false);
}

#[test]
fn a_client_that_stops_reading_replies_is_dropped_after_the_reply_time_limit() {
    let limits = ServerLimits {
        reply_timeout_seconds: 1,
        ..ServerLimits::default()
    };
    let server = TestServer::with_limits(&[("disk", 8 * MIB)], limits);
    let mut client = RawClient::connect(server.connect_tcp(), "disk", true);
    client.stream.set_write_timeout(Some(CLOSE_WAIT)).unwrap();
    for cookie in 0..96u64 {
        let mut bytes = Vec::new();
        RequestHeader {
            flags: 0,
            command: CMD_READ,
            cookie,
            offset_bytes: 0,
            length_bytes: MIB as u32,
        }
        .encode(&mut bytes);
        if client.stream.write_all(&bytes).is_err() {
            break;
        }
    }
    let dropped = wait_until(Duration::from_secs(30), || {
        server.server().open_connections() == 0
    });
    assert!(dropped, "the connection that never reads is dropped");
    server_still_works(&server);
}

#[test]
fn a_device_of_queue_depth_one_serves_many_requests_in_flight_through_the_backlog() {
    let device = flashpipe_device::RamDisk::new("ram qd1", 512, 8192, 1).unwrap();
    let export = flashpipe_nbd::server::Export {
        name: "disk".to_string(),
        description: String::new(),
        device: Box::new(device),
        read_only: false,
        trim_reads_zeroes: true,
        initial_allocation: flashpipe_nbd::server::InitialAllocation::AllHoles,
    };
    let server = TestServer::with_exports(vec![export], ServerLimits::default());
    let mut clients: Vec<_> = (0..3)
        .map(|_| RawClient::connect(server.connect_tcp(), "disk", true))
        .collect();
    for (index, client) in clients.iter_mut().enumerate() {
        client.send_pipelined_writes(index as u64);
    }
    for client in &mut clients {
        for _ in 0..17 {
            assert_eq!(client.receive(&HashMap::new()).1, 0);
        }
    }
    let client = &mut clients[0];
    for offset in (0..48u64).map(|block| block * 8192) {
        assert!(client.request(CMD_READ, 0, offset, 8192, &[]).1 == pattern_bytes(offset, 8192));
    }
    assert!(client.request(CMD_READ, 0, 3 * MIB, MIB as u32, &[]).1 == vec![0u8; MIB as usize]);
}
