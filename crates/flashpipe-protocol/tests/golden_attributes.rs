//! Protocol version 5's file attributes, byte by byte (docs/protocol.md, "File
//! attributes"): golden bytes of a set-attributes request and of both attribute replies,
//! a stat with nothing set still sent as the version-4 stat-reply, a stat shown to an
//! older peer without attributes, and hostile bodies refused without a panic.

mod common;

use common::{bytes_of, round_trip};
use flashpipe_api::{AttributeChange, Command, FileId, FileOwner, FileStat, Reply};
use flashpipe_protocol::{decode_frame, stat_for_version, Frame, Request, Response};

const SET_ATTRIBUTES: &str = "465053560300120109000000000000001a00000000000000010000006121a001000000000000000000000000000000000000";
const STAT_ATTRIBUTES: &str = "4650535603000c020900000000000000420000000000000007000000000000000100000061881300000000000002000000000000000010000000000000630000000000000007ed010000e803000064000000ffffffffffffffff";
const LIST_ATTRIBUTES: &str = "4650535603000d02090000000000000088000000000000000200000007000000000000000100000061881300000000000002000000000000000010000000000000630000000000000007ed010000e803000064000000ffffffffffffffff070000000000000001000000618813000000000000020000000000000000100000000000006300000000000000000000000000000000000000000000000000000000";
/// The version-4 stat-reply of `plain()` (tests/golden_frames.rs).
const STAT_PLAIN: &str = "465053560300050209000000000000002d00000000000000070000000000000001000000618813000000000000020000000000000000100000000000006300000000000000";

fn plain() -> FileStat {
    FileStat {
        file_id: FileId(7),
        name: "a".to_string(),
        size_bytes: 5000,
        allocated_blocks: 2,
        shared_bytes: 4096,
        modified_clock_ns: 99,
        mode: None,
        owner: None,
        modified_wall_ns: None,
    }
}

fn attributed() -> FileStat {
    FileStat {
        mode: Some(0o755),
        owner: Some(FileOwner {
            uid: 1000,
            gid: 100,
        }),
        modified_wall_ns: Some(-1),
        ..plain()
    }
}

fn response(reply: Reply<flashpipe_protocol::Wire>) -> Frame {
    Frame::Response {
        request_id: 9,
        response: Response::Reply(reply),
    }
}

#[test]
fn set_attributes_request_bytes() {
    let frame = Frame::Request {
        request_id: 9,
        request: Request::Command(Command::SetAttributes {
            name: "a".to_string(),
            mode: AttributeChange::Set(0o640),
            owner: AttributeChange::Keep,
            modified_wall_ns: AttributeChange::Clear,
        }),
    };
    round_trip(&frame, SET_ATTRIBUTES);
}

#[test]
fn attribute_reply_bytes() {
    round_trip(&response(Reply::Stat(attributed())), STAT_ATTRIBUTES);
    round_trip(
        &response(Reply::List(vec![attributed(), plain()])),
        LIST_ATTRIBUTES,
    );
}

#[test]
fn a_stat_with_nothing_set_is_the_version_4_reply() {
    round_trip(&response(Reply::Stat(plain())), STAT_PLAIN);
    assert_eq!(stat_for_version(attributed(), 4), plain());
    assert_eq!(stat_for_version(attributed(), 5), attributed());
}

#[test]
fn hostile_attribute_bytes_are_refused() {
    let mut bad_changes = bytes_of(SET_ATTRIBUTES);
    bad_changes[29] = 0x03;
    let mut stray_field = bytes_of(SET_ATTRIBUTES);
    stray_field[34] = 1;
    let mut undefined_flag = bytes_of(STAT_ATTRIBUTES);
    undefined_flag[24 + 45] = 0x08;
    let mut stray_stat = bytes_of(STAT_ATTRIBUTES);
    stray_stat[24 + 45] = 0x06;
    let mut short = bytes_of(STAT_ATTRIBUTES);
    short.truncate(short.len() - 1);
    short[16] -= 1;
    for bytes in [bad_changes, stray_field, undefined_flag, stray_stat, short] {
        assert!(decode_frame(&bytes).is_err());
    }
}
