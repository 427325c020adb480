//! `setattr` against a store in memory that records every command: a refused change sends
//! nothing and leaves the tree as it was; a store that is read-only answers `EROFS` and the
//! mount shows the old values; a directory without a marker gets one first; the root is
//! refused; a create with a mode other than the default stores it, a default one sends
//! nothing more.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::UNIX_EPOCH;

use flashpipe_api::{ApiError, Command, ErrorCode, FileId, FileOwner, FileStat, FsStats, Reply};
use fuser::TimeOrNow;

use super::Asked;
use crate::fs::MountFs;
use crate::instant_store::{Answers, Instant};
use crate::state::State;
use crate::tree::{Stored, ROOT_INODE};
use crate::MountOptions;

use flashpipe_api::VecPayloads as Memory;

/// Names with what a user set of their attributes; the kinds of the commands changing
/// them, in order.
#[derive(Default)]
struct Recorded {
    files: BTreeMap<String, Stored>,
    changes: Vec<&'static str>,
}

/// A store of empty files answering at once; `read_only` refuses every change.
struct MemoryStore {
    recorded: Arc<Mutex<Recorded>>,
    read_only: bool,
}

fn stat_of(name: &str, stored: Stored) -> FileStat {
    FileStat {
        file_id: FileId(1),
        name: name.to_string(),
        size_bytes: 0,
        allocated_blocks: 0,
        shared_bytes: 0,
        modified_clock_ns: 0,
        mode: stored.mode,
        owner: stored.owner,
        modified_wall_ns: stored.modified_wall_ns,
    }
}

fn stats() -> FsStats {
    FsStats {
        fs_block_size_bytes: 4096,
        fs_block_count: 100,
        used_blocks: 0,
        shared_blocks: 0,
        saved_blocks: 0,
        free_blocks: 100,
        pending_free_blocks: 0,
        reserved_blocks: 0,
        file_count: 0,
        commit_sequence: 1,
        unflushed_changes: false,
    }
}

impl Answers for MemoryStore {
    fn answer(&mut self, command: Command<Memory>) -> Result<Reply<Memory>, ApiError> {
        let mut recorded = self.recorded.lock().expect("not poisoned");
        let read_only = || Err(ApiError::new(ErrorCode::ReadOnly, "the store is read-only"));
        match command {
            Command::List => Ok(Reply::List(
                recorded
                    .files
                    .iter()
                    .map(|(name, stored)| stat_of(name, *stored))
                    .collect(),
            )),
            Command::Stats => Ok(Reply::Stats(stats())),
            Command::Flush => Ok(Reply::Done),
            Command::Create { .. } | Command::SetAttributes { .. } if self.read_only => read_only(),
            Command::Create { name } => {
                recorded.files.insert(name, Stored::default());
                recorded.changes.push("create");
                Ok(Reply::Done)
            }
            Command::SetAttributes {
                name,
                mode,
                owner,
                modified_wall_ns,
            } => {
                let stored = recorded.files.get_mut(&name).expect("a known file");
                stored.mode = mode.apply(stored.mode);
                stored.owner = owner.apply(stored.owner);
                stored.modified_wall_ns = modified_wall_ns.apply(stored.modified_wall_ns);
                recorded.changes.push("set-attributes");
                Ok(Reply::Done)
            }
            _ => Err(ApiError::new(ErrorCode::Internal, "not in this test")),
        }
    }
}

/// A mount over a store holding `names`; the recorder of the store's changes.
fn mounted(
    names: &[&str],
    read_only: bool,
) -> (MountFs<Instant<MemoryStore>>, Arc<Mutex<Recorded>>) {
    let recorded = Arc::new(Mutex::new(Recorded::default()));
    for name in names {
        let mut files = recorded.lock().expect("not poisoned");
        files.files.insert(name.to_string(), Stored::default());
    }
    let store = Instant::new(MemoryStore {
        recorded: Arc::clone(&recorded),
        read_only,
    });
    let state = State::load(store, false, 1 << 24).unwrap_or_else(|(_, why)| panic!("{why}"));
    let options = MountOptions {
        mount_point: "/nonexistent".into(),
        source_name: "memory".into(),
        allow_other: false,
        others_may_write: false,
        shared_store: false,
        wall_clock_times: false,
        max_bytes_in_flight: 1 << 24,
        commit_delay_ms: 0,
        read_only: false,
        direct_reads: false,
    };
    (
        MountFs::new(Arc::new(Mutex::new(state)), &options),
        recorded,
    )
}

fn chmod(mode: u32) -> Asked {
    Asked {
        mode: Some(mode),
        uid: None,
        gid: None,
        modified: None,
    }
}

fn inode_of(fs: &MountFs<Instant<MemoryStore>>, path: &[&str]) -> u64 {
    let state = fs.lock();
    path.iter().fold(ROOT_INODE, |inode, component| {
        state.tree.child(inode, component).expect("in the tree")
    })
}

fn stored(fs: &MountFs<Instant<MemoryStore>>, inode: u64) -> Stored {
    fs.lock().tree.node(inode).expect("a node").stored
}

#[test]
fn a_change_is_sent_then_shown_and_a_refused_one_sends_nothing() {
    let (fs, recorded) = mounted(&["f"], false);
    let f = inode_of(&fs, &["f"]);
    let owner = Asked {
        uid: Some(1000),
        gid: Some(1000),
        modified: Some(TimeOrNow::SpecificTime(
            UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000),
        )),
        ..chmod(0o600)
    };
    let shown = fs
        .do_setattr(&mut fs.lock(), f, &owner, None)
        .expect("stored");
    assert_eq!((shown.perm, shown.uid, shown.gid), (0o600, 1000, 1000));
    let in_store = recorded.lock().expect("not poisoned").files["f"];
    assert_eq!(in_store, stored(&fs, f));
    assert_eq!(
        in_store.owner,
        Some(FileOwner {
            uid: 1000,
            gid: 1000
        })
    );
    assert_eq!(in_store.modified_wall_ns, Some(1_700_000_000_000_000_000));
    let sent = recorded.lock().expect("not poisoned").changes.len();
    for hostile in [chmod(0o4755), chmod(0o1777), chmod(libc::S_IFDIR | 0o700)] {
        assert!(fs.do_setattr(&mut fs.lock(), f, &hostile, None).is_err());
    }
    let before_1970 = Asked {
        modified: Some(TimeOrNow::SpecificTime(
            UNIX_EPOCH - std::time::Duration::from_secs(1),
        )),
        mode: None,
        ..chmod(0)
    };
    assert_eq!(
        fs.do_setattr(&mut fs.lock(), f, &before_1970, None).err(),
        Some(libc::EINVAL)
    );
    assert_eq!(recorded.lock().expect("not poisoned").changes.len(), sent);
    assert_eq!(stored(&fs, f), in_store, "nothing changed");
}

#[test]
fn a_read_only_store_answers_erofs_and_nothing_changes() {
    let (fs, recorded) = mounted(&["f", "d:g"], true);
    let f = inode_of(&fs, &["f"]);
    let d = inode_of(&fs, &["d"]);
    for inode in [f, d] {
        assert_eq!(
            fs.do_setattr(&mut fs.lock(), inode, &chmod(0o600), None)
                .err(),
            Some(libc::EROFS)
        );
        assert_eq!(stored(&fs, inode), Stored::default());
    }
    assert!(!fs.lock().tree.has_marker(d), "no marker was recorded");
    assert!(recorded.lock().expect("not poisoned").changes.is_empty());
}

#[test]
fn a_directory_keeps_its_attributes_on_a_marker_and_the_root_is_refused() {
    let (fs, recorded) = mounted(&["d:g"], false);
    let d = inode_of(&fs, &["d"]);
    fs.do_setattr(&mut fs.lock(), d, &chmod(0o700), None)
        .expect("stored");
    let recorded_now = recorded.lock().expect("not poisoned");
    assert_eq!(recorded_now.changes, ["create", "set-attributes"]);
    assert_eq!(recorded_now.files["d:.flashpipe-dir"].mode, Some(0o700));
    drop(recorded_now);
    assert!(fs.lock().tree.has_marker(d));
    assert_eq!(
        fs.do_setattr(&mut fs.lock(), ROOT_INODE, &chmod(0o700), None)
            .err(),
        Some(libc::EPERM)
    );
    assert_eq!(recorded.lock().expect("not poisoned").changes.len(), 2);
}

#[test]
fn a_create_mode_is_stored_only_when_it_is_not_the_default() {
    let (fs, recorded) = mounted(&["plain", "secret"], false);
    let plain = inode_of(&fs, &["plain"]);
    let secret = inode_of(&fs, &["secret"]);
    fs.keep_creation_mode(&mut fs.lock(), plain, 0o644)
        .expect("nothing to send");
    assert!(recorded.lock().expect("not poisoned").changes.is_empty());
    fs.keep_creation_mode(&mut fs.lock(), secret, 0o600)
        .expect("stored");
    assert_eq!(stored(&fs, secret).mode, Some(0o600));
    assert_eq!(
        recorded.lock().expect("not poisoned").changes,
        ["set-attributes"]
    );
}
