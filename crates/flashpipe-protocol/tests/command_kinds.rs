//! Every command of the command set (`flashpipe_api::CommandKind`) has its frame kind
//! on the wire, under the same number and name, and a request of each kind round-trips
//! and names its command kind. A command added to the set without a frame fails here.

use flashpipe_api::{CommandKind, CopyMethod};
use flashpipe_protocol::{decode_frame, encode_frame, Frame, FrameKind, Request};

/// A request of `kind` (the match is exhaustive: a new kind needs a request here).
fn request_of(kind: CommandKind) -> Request {
    let name = || "file".to_string();
    match kind {
        CommandKind::Create => Request::Create { name: name() },
        CommandKind::Write => Request::Write {
            name: name(),
            offset_bytes: 4096,
            data: vec![1, 2, 3],
        },
        CommandKind::Read => Request::Read {
            name: name(),
            offset_bytes: 0,
            length_bytes: 10,
        },
        CommandKind::ReadFiles => Request::ReadFiles {
            names: vec![name(), "other".into()],
        },
        CommandKind::Truncate => Request::Truncate {
            name: name(),
            size_bytes: 5,
        },
        CommandKind::Delete => Request::Delete { name: name() },
        CommandKind::Rename => Request::Rename {
            from: name(),
            to: "to".into(),
        },
        CommandKind::RenameReplacing => Request::RenameReplacing {
            from: name(),
            to: "to".into(),
        },
        CommandKind::Copy => Request::Copy {
            from: name(),
            to: "to".into(),
            method: CopyMethod::Share,
        },
        CommandKind::Stat => Request::Stat { name: name() },
        CommandKind::List => Request::List,
        CommandKind::Stats => Request::Stats,
        CommandKind::Flush => Request::Flush,
        CommandKind::Check => Request::Check,
    }
}

#[test]
fn every_command_kind_round_trips_under_its_own_frame_kind() {
    for kind in CommandKind::ALL {
        let frame_kind = FrameKind::from_wire(kind.wire_number())
            .unwrap_or_else(|| panic!("no frame kind numbered like command {}", kind.name()));
        assert_eq!(frame_kind.name(), kind.name());
        let request = request_of(kind);
        assert_eq!(request.kind(), frame_kind);
        assert_eq!(request.command_kind(), Some(kind));
        let frame = Frame::Request {
            request_id: 3,
            request,
        };
        assert_eq!(decode_frame(&encode_frame(&frame)), Ok(frame));
    }
}

#[test]
fn a_write_by_grant_is_a_write_and_the_other_requests_are_no_commands() {
    let granted = Request::WriteGranted {
        name: "f".into(),
        offset_bytes: 0,
        slot: 1,
        length_bytes: 4096,
    };
    assert_eq!(granted.command_kind(), Some(CommandKind::Write));
    for request in [
        Request::Cancel { target: 1 },
        Request::GrantWrite,
        Request::OpenRings,
    ] {
        assert_eq!(request.command_kind(), None, "{}", request.kind().name());
    }
}
