//! Every command of the command set (`flashpipe_api::CommandKind`) has its frame kind
//! on the wire, under the same number and name, and one entry in the codec table
//! (`COMMAND_CODECS`); a command of each kind round-trips and names its command kind. A
//! command added to the set without a frame or a codec entry fails here.

use flashpipe_api::{Command, CommandKind, CopyMethod};
use flashpipe_protocol::{
    decode_frame, encode_frame, Frame, FrameKind, Request, WireCommand, WritePayload,
    COMMAND_CODECS,
};

/// A command of `kind` (the match is exhaustive: a new kind needs a command here).
fn command_of(kind: CommandKind) -> WireCommand {
    let name = || "file".to_string();
    match kind {
        CommandKind::Create => Command::Create { name: name() },
        CommandKind::Write => Command::Write {
            name: name(),
            offset_bytes: 4096,
            data: WritePayload::Inline(vec![1, 2, 3]),
        },
        CommandKind::Read => Command::Read {
            name: name(),
            offset_bytes: 0,
            length_bytes: 10,
        },
        CommandKind::ReadFiles => Command::ReadFiles {
            names: vec![name(), "other".into()],
        },
        CommandKind::Truncate => Command::Truncate {
            name: name(),
            size_bytes: 5,
        },
        CommandKind::Delete => Command::Delete { name: name() },
        CommandKind::Rename => Command::Rename {
            from: name(),
            to: "to".into(),
            replace: false,
        },
        CommandKind::RenameReplacing => Command::Rename {
            from: name(),
            to: "to".into(),
            replace: true,
        },
        CommandKind::Copy => Command::Copy {
            from: name(),
            to: "to".into(),
            method: CopyMethod::Share,
        },
        CommandKind::Stat => Command::Stat { name: name() },
        CommandKind::List => Command::List,
        CommandKind::Stats => Command::Stats,
        CommandKind::Flush => Command::Flush,
        CommandKind::Check => Command::Check,
        CommandKind::SetAttributes => Command::SetAttributes {
            name: name(),
            mode: flashpipe_api::AttributeChange::Set(0o600),
            owner: flashpipe_api::AttributeChange::Clear,
            modified_wall_ns: flashpipe_api::AttributeChange::Set(-3),
        },
    }
}

#[test]
fn every_command_kind_round_trips_under_its_own_frame_kind() {
    for kind in CommandKind::ALL {
        let frame_kind = FrameKind::from_wire(kind.wire_number())
            .unwrap_or_else(|| panic!("no frame kind numbered like command {}", kind.name()));
        assert_eq!(frame_kind.name(), kind.name());
        assert_eq!(FrameKind::of_command(kind), frame_kind);
        let command = command_of(kind);
        assert_eq!(command.kind(), kind);
        let request = Request::Command(command);
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
fn the_codec_table_has_one_entry_per_command_kind_in_order() {
    assert_eq!(
        COMMAND_CODECS.len(),
        CommandKind::ALL.len(),
        "one codec per command kind"
    );
    for (entry, kind) in COMMAND_CODECS.iter().zip(CommandKind::ALL) {
        assert_eq!(
            entry.kind.name(),
            kind.name(),
            "COMMAND_CODECS is in CommandKind::ALL order"
        );
    }
}

#[test]
fn a_write_by_grant_is_a_write_and_the_other_requests_are_no_commands() {
    let granted = Request::Command(Command::Write {
        name: "f".into(),
        offset_bytes: 0,
        data: WritePayload::Granted {
            slot: 1,
            length_bytes: 4096,
        },
    });
    assert_eq!(granted.command_kind(), Some(CommandKind::Write));
    assert_eq!(granted.kind(), FrameKind::WriteGranted);
    let frame = Frame::Request {
        request_id: 2,
        request: granted,
    };
    assert_eq!(decode_frame(&encode_frame(&frame)), Ok(frame));
    for request in [
        Request::Cancel { target: 1 },
        Request::GrantWrite,
        Request::OpenRings,
        Request::Region(flashpipe_protocol::RegionRequest::Unregister { region: 1 }),
    ] {
        assert_eq!(request.command_kind(), None, "{}", request.kind().name());
    }
}
