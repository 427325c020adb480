//! Fuzzes the NBD client's sans-IO core on a hostile server's replies (#15, item 6;
//! crates/flashpipe-nbd-client/src/core, docs/nbd-client.md): the first eight bytes
//! pick a request in flight (command, structured replies or not, offset, length, part
//! size), the rest is what the server sends. Reply headers, simple replies, structured
//! chunks (data, holes, errors, unknown types) go through the functions the real reader
//! uses; whatever comes, the request finishes or the connection counts as lost with a
//! reason naming the device, never a panic, and a finished read holds exactly its bytes.
#![no_main]

use flashpipe_nbd::client::reply_fuzzing::{feed_replies, FuzzedCommand, FuzzedRequest};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let Some((config, stream)) = input.split_first_chunk::<8>() else {
        return;
    };
    let request = fuzzed_request(config);
    let outcome = feed_replies(request, stream);
    match &outcome.connection_lost {
        Some(reason) => assert!(reason.starts_with("nbd://fuzzed/export"), "{reason}"),
        None => assert!(outcome.finished, "neither finished nor lost: {outcome:?}"),
    }
    assert!(outcome.replies_taken <= stream.len() / 16 + 1);
    if outcome.finished && request.command == FuzzedCommand::Read {
        assert_eq!(outcome.read_data.len() as u64, request.length_bytes);
    }
});

fn fuzzed_request(config: &[u8; 8]) -> FuzzedRequest {
    let command = match config[0] % 4 {
        0 => FuzzedCommand::Read,
        1 => FuzzedCommand::Write,
        2 => FuzzedCommand::Flush,
        _ => FuzzedCommand::Trim,
    };
    FuzzedRequest {
        command,
        structured_replies: config[1] & 1 == 1,
        offset_bytes: u64::from(u16::from_le_bytes([config[2], config[3]])) * 512,
        length_bytes: u64::from(u16::from_le_bytes([config[4], config[5]])) % 8192 + 1,
        part_bytes: u64::from(u16::from_le_bytes([config[6], config[7]])) % 4096 + 1,
    }
}
