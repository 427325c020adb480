//! One command set over both transports: the same generic code (written against
//! `flashpipe_api::Transport` alone) runs over the in-process engine client and over the
//! served client (copying path and by reference), and the file streams written once move
//! a file through a server in several commands at once.

mod common;

use common::{connect, pattern, ram_store, start_server};
use flashpipe_api::{
    read_stream, write_stream, CodedError, CopyMethod, ErrorCode, StreamPayloads, Transport,
    TransportExt,
};

/// Creates, fills, copies, renames and lists files over any transport; the names left.
fn work_over<T>(transport: &mut T, contents: &[u8]) -> Vec<String>
where
    T: Transport,
    T::P: StreamPayloads,
{
    let written = write_stream(transport, "a", &mut &contents[..], 65536, 4, &mut |_| {})
        .unwrap_or_else(|_| panic!("write stream"));
    assert_eq!(written, contents.len() as u64);
    assert_eq!(
        transport
            .stat("a")
            .unwrap_or_else(|_| panic!("stat"))
            .size_bytes,
        contents.len() as u64
    );
    let mut read_back = Vec::new();
    let delivered = read_stream(
        transport,
        "a",
        &mut |chunk| {
            read_back.extend_from_slice(chunk);
            Ok(())
        },
        50_000,
        3,
        &mut |_| {},
    )
    .unwrap_or_else(|_| panic!("read stream"));
    assert_eq!(delivered, contents.len() as u64);
    assert!(read_back == contents, "the file reads back as written");
    transport
        .copy("a", "b", CopyMethod::ReferenceOrBytes)
        .unwrap_or_else(|_| panic!("copy"));
    match transport.rename("a", "b") {
        Err(error) => assert_eq!(error.code(), ErrorCode::Exists),
        Ok(()) => panic!("a rename onto an existing file without replace succeeded"),
    }
    transport
        .rename_replacing("a", "b")
        .unwrap_or_else(|_| panic!("rename replacing"));
    match transport.stat("a") {
        Err(error) => assert_eq!(error.code(), ErrorCode::NotFound),
        Ok(_) => panic!("the renamed file is still there"),
    }
    transport.flush().unwrap_or_else(|_| panic!("flush"));
    transport
        .list()
        .unwrap_or_else(|_| panic!("list"))
        .into_iter()
        .map(|stat| stat.name)
        .collect()
}

#[test]
fn the_same_code_runs_in_process_and_through_a_server() {
    let contents = pattern(1_000_000, 11);
    let store = ram_store();
    let mut engine_client = store.engine.client(8);
    assert_eq!(work_over(&mut engine_client, &contents), ["b"]);
    for map_memory in [false, true] {
        let test = start_server(&format!("serve-transport-{map_memory}"), |_| {});
        let mut client = connect(&test.socket, map_memory);
        assert_eq!(work_over(&mut client, &contents), ["b"]);
    }
}

#[test]
fn a_served_stream_of_a_missing_file_fails_with_its_code() {
    let test = start_server("serve-transport-missing", |_| {});
    let mut client = connect(&test.socket, true);
    let result = read_stream(&mut client, "absent", &mut |_| Ok(()), 4096, 2, &mut |_| {});
    match result {
        Err(flashpipe_api::StreamError::Transport(error)) => {
            assert_eq!(error.code(), ErrorCode::NotFound)
        }
        _ => panic!("reading a missing file must fail with not-found"),
    }
    assert_eq!(client.in_flight(), 0, "nothing left in flight");
}
