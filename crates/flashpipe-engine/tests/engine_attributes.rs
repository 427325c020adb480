//! `SetAttributes` through the engine: each attribute kept, set or cleared, shown by
//! stat, committed by a flush; a mode with a file type and a missing file refused with
//! their codes, changing nothing.

use flashpipe_api::{AttributeChange, CodedError, ErrorCode, FileOwner, FileStat};
use flashpipe_device::RamDisk;
use flashpipe_engine::{Command, Engine, EngineClient, EngineConfig};
use flashpipe_testkit::formatted::format_fs;

fn set(
    client: &mut EngineClient,
    name: &str,
    mode: AttributeChange<u32>,
    owner: AttributeChange<FileOwner>,
    modified_wall_ns: AttributeChange<i64>,
) -> Result<(), ErrorCode> {
    client
        .call(Command::SetAttributes {
            name: name.to_string(),
            mode,
            owner,
            modified_wall_ns,
        })
        .map(|_| ())
        .map_err(|error| error.code())
}

fn stat(client: &mut EngineClient, name: &str) -> FileStat {
    match client.call(Command::Stat {
        name: name.to_string(),
    }) {
        Ok(flashpipe_engine::Reply::Stat(stat)) => stat,
        _ => panic!("stat of {name} failed"),
    }
}

#[test]
fn attributes_are_kept_set_cleared_and_refused() {
    let disk = RamDisk::new("ram0", 4096, 4096, 32).unwrap();
    let engine = Engine::start(format_fs(Box::new(disk), 4096), EngineConfig::default());
    let mut client = engine.client(8);
    client
        .call(Command::Create {
            name: "a".to_string(),
        })
        .unwrap();
    let fresh = stat(&mut client, "a");
    assert_eq!(
        (fresh.mode, fresh.owner, fresh.modified_wall_ns),
        (None, None, None)
    );
    let owner = FileOwner {
        uid: 1000,
        gid: 100,
    };
    set(
        &mut client,
        "a",
        AttributeChange::Set(0o640),
        AttributeChange::Set(owner),
        AttributeChange::Set(-5),
    )
    .unwrap();
    set(
        &mut client,
        "a",
        AttributeChange::Set(0),
        AttributeChange::Keep,
        AttributeChange::Clear,
    )
    .unwrap();
    let changed = stat(&mut client, "a");
    assert_eq!(
        (changed.mode, changed.owner, changed.modified_wall_ns),
        (Some(0), Some(owner), None)
    );
    for (name, mode, owner, refusal) in [
        (
            "a",
            0o100644,
            AttributeChange::Clear,
            ErrorCode::BadAttributes,
        ),
        ("b", 0o644, AttributeChange::Keep, ErrorCode::NotFound),
    ] {
        let refused = set(
            &mut client,
            name,
            AttributeChange::Set(mode),
            owner,
            AttributeChange::Keep,
        );
        assert_eq!(refused, Err(refusal), "{name}");
    }
    assert_eq!(stat(&mut client, "a"), changed);
    client.call(Command::Flush).unwrap();
    drop(client);
    let filesystem = engine.shutdown().unwrap();
    let stored = filesystem.attributes_by_name("a").unwrap();
    assert_eq!((stored.mode, stored.owner), (Some(0), Some(owner)));
}
