//! Mode, owner and modification time through the mount: `setattr` checks what chmod,
//! chown and utimens ask, sends `SetAttributes` to the store and only then updates the
//! tree; `getattr` shows what the store keeps (the mount's defaults where nothing is set).
//!
//! A file carries its own attributes; a directory's are carried by its marker
//! (`a:b:.flashpipe-dir`), made when the directory has none yet. The root has no marker:
//! changing its attributes is refused (`EPERM`). Refused, changing nothing: setuid, setgid
//! and sticky bits (`EPERM`), a file type other than the node's own, the id `4294967295`
//! (`(uid_t)-1`, no one), a time before 1970 or past what a signed 64-bit count of ns holds
//! (2262-04-11) (`EINVAL`). A store served read-only refuses with `EROFS`.
//!
//! A write or a truncate forgets a stored modification time (the file shows its last
//! change again, as a file system moves a file's time at every write). A create or mkdir
//! whose mode (less the umask) is not the default stores it (`open(.., 0600)`,
//! `mkdir -m 700`); the usual `0666`/`0777` less umask `022` is the default and costs
//! nothing.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use flashpipe_api::{AttributeChange, Command, FileOwner};
use fuser::{FileAttr, FileType, TimeOrNow};

use super::MountFs;
use crate::state::{Errno, State};
use crate::tree::{NodeKind, Stored, ROOT_INODE};
use crate::MountTransport;

/// Permission bits the mount stores: read, write and execute for owner, group and others.
const PERMISSION_BITS: u32 = 0o777;

/// Setuid, setgid and sticky: refused (the mount is `nosuid`; nothing would honour them).
const SPECIAL_BITS: u32 = 0o7000;

/// The id no one has (`(uid_t)-1`: chown's "leave as it is"), refused as an owner.
const NO_ONE: u32 = u32::MAX;

/// One `setattr`'s attribute changes, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Change {
    mode: AttributeChange<u32>,
    owner: AttributeChange<FileOwner>,
    modified_wall_ns: AttributeChange<i64>,
}

impl Change {
    fn is_empty(&self) -> bool {
        self.mode == AttributeChange::Keep
            && self.owner == AttributeChange::Keep
            && self.modified_wall_ns == AttributeChange::Keep
    }

    fn apply(&self, current: Stored) -> Stored {
        Stored {
            mode: self.mode.apply(current.mode),
            owner: self.owner.apply(current.owner),
            modified_wall_ns: self.modified_wall_ns.apply(current.modified_wall_ns),
        }
    }
}

/// What a `setattr` asks besides a size, as the kernel sends it.
pub(super) struct Asked {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub modified: Option<TimeOrNow>,
}

/// The permission bits of a chmod of a node of `kind` (the kernel sends the file's type
/// with them): `EINVAL` for another type, `EPERM` for setuid, setgid or sticky.
pub(super) fn permission_bits(mode: u32, kind: FileType) -> Result<u32, Errno> {
    let own_type = match kind {
        FileType::Directory => libc::S_IFDIR,
        _ => libc::S_IFREG,
    };
    let type_bits = mode & libc::S_IFMT;
    if type_bits != 0 && type_bits != own_type {
        return Err(libc::EINVAL);
    }
    let mode = mode & !libc::S_IFMT;
    if mode & !PERMISSION_BITS & !SPECIAL_BITS != 0 {
        return Err(libc::EINVAL);
    }
    if mode & SPECIAL_BITS != 0 {
        return Err(libc::EPERM);
    }
    Ok(mode)
}

/// A utimens time in ns since the epoch (`UTIME_NOW` is `now`): `EINVAL` before 1970 or
/// past `i64::MAX` ns.
pub(super) fn wall_ns(time: TimeOrNow, now: SystemTime) -> Result<i64, Errno> {
    let at = match time {
        TimeOrNow::SpecificTime(time) => time,
        TimeOrNow::Now => now,
    };
    let since = at.duration_since(UNIX_EPOCH).map_err(|_| libc::EINVAL)?;
    i64::try_from(since.as_nanos()).map_err(|_| libc::EINVAL)
}

/// A stored time as a `SystemTime` (one before the epoch, which another client may have
/// stored, counts back from it).
pub(super) fn system_time_of(wall_ns: i64) -> SystemTime {
    let magnitude = Duration::from_nanos(wall_ns.unsigned_abs());
    if wall_ns >= 0 {
        UNIX_EPOCH + magnitude
    } else {
        UNIX_EPOCH - magnitude
    }
}

/// The checked change of `asked` for a node shown as `current`. A chown of one id keeps
/// the other as shown; utimens `Now` with a truncate forgets the time (the truncate is
/// the change the file shows).
pub(super) fn checked_change(
    asked: &Asked,
    current: &FileAttr,
    truncate: bool,
    now: SystemTime,
) -> Result<Change, Errno> {
    let mode = match asked.mode {
        Some(mode) => AttributeChange::Set(permission_bits(mode, current.kind)?),
        None => AttributeChange::Keep,
    };
    if asked.uid == Some(NO_ONE) || asked.gid == Some(NO_ONE) {
        return Err(libc::EINVAL);
    }
    let owner = match (asked.uid, asked.gid) {
        (None, None) => AttributeChange::Keep,
        (uid, gid) => AttributeChange::Set(FileOwner {
            uid: uid.unwrap_or(current.uid),
            gid: gid.unwrap_or(current.gid),
        }),
    };
    let modified_wall_ns = match asked.modified {
        Some(TimeOrNow::Now) if truncate => AttributeChange::Clear,
        Some(time) => AttributeChange::Set(wall_ns(time, now)?),
        None if truncate => AttributeChange::Clear,
        None => AttributeChange::Keep,
    };
    Ok(Change {
        mode,
        owner,
        modified_wall_ns,
    })
}

impl<T: MountTransport> MountFs<T> {
    /// The store name carrying `inode`'s attributes: the file's own, a directory's marker
    /// (made when missing); `EPERM` for the root.
    fn attribute_holder(state: &mut State<T>, inode: u64) -> Result<String, Errno> {
        if inode == ROOT_INODE {
            return Err(libc::EPERM);
        }
        match state.tree.node(inode).map(|node| &node.kind) {
            Some(NodeKind::File { .. }) => Ok(state.tree.store_name(inode, None)),
            Some(NodeKind::Directory { marker, .. }) => {
                let name = state.tree.marker_name(inode);
                if !marker {
                    state.call_done(Command::Create { name: name.clone() })?;
                    state.tree.set_marker(inode, true);
                }
                Ok(name)
            }
            None => Err(libc::ENOENT),
        }
    }

    /// Sends `change` of `inode`'s attributes to the store, then records it in the tree;
    /// true when something was sent. Committed with the next commit.
    fn send_change(state: &mut State<T>, inode: u64, change: Change) -> Result<bool, Errno> {
        let current = state.tree.node(inode).ok_or(libc::ENOENT)?.stored;
        let after = change.apply(current);
        if change.is_empty() || after == current {
            return Ok(false);
        }
        let name = Self::attribute_holder(state, inode)?;
        state.call_done(Command::SetAttributes {
            name,
            mode: change.mode,
            owner: change.owner,
            modified_wall_ns: change.modified_wall_ns,
        })?;
        state.tree.set_stored(inode, after);
        Ok(true)
    }

    /// [`Self::send_change`], then committed as a close's change is (no close follows).
    fn store_change(state: &mut State<T>, inode: u64, change: Change) -> Result<(), Errno> {
        if Self::send_change(state, inode, change)? {
            state.change_point()?;
        }
        Ok(())
    }

    /// After a create or mkdir of `inode` asked with `mode` (less the umask): the mode
    /// stored when it is not the default (committed with what made the node).
    pub(super) fn keep_creation_mode(
        &self,
        state: &mut State<T>,
        inode: u64,
        mode: u32,
    ) -> Result<(), Errno> {
        let directory = state.tree.is_directory(inode);
        let mode = mode & PERMISSION_BITS;
        if mode == u32::from(self.default_mode(directory)) {
            return Ok(());
        }
        let change = Change {
            mode: AttributeChange::Set(mode),
            owner: AttributeChange::Keep,
            modified_wall_ns: AttributeChange::Keep,
        };
        Self::send_change(state, inode, change).map(|_| ())
    }

    /// Before a write to file `inode`: a stored modification time is forgotten, so that
    /// the file shows its last change (committed with the write).
    pub(super) fn forget_wall_time(state: &mut State<T>, inode: u64) -> Result<(), Errno> {
        let stored = state.tree.node(inode).map(|node| node.stored);
        if stored.is_some_and(|stored| stored.modified_wall_ns.is_some()) {
            let change = Change {
                mode: AttributeChange::Keep,
                owner: AttributeChange::Keep,
                modified_wall_ns: AttributeChange::Clear,
            };
            Self::send_change(state, inode, change)?;
        }
        Ok(())
    }

    /// A `setattr`: every attribute checked first (a refusal changes nothing), then the
    /// truncate, then the attributes stored.
    pub(super) fn do_setattr(
        &self,
        state: &mut State<T>,
        inode: u64,
        asked: &Asked,
        size: Option<u64>,
    ) -> Result<FileAttr, Errno> {
        let current = self.attributes(state, inode).ok_or(libc::ENOENT)?;
        let change = checked_change(asked, &current, size.is_some(), SystemTime::now())?;
        if !change.is_empty() && inode == ROOT_INODE {
            return Err(libc::EPERM);
        }
        if let Some(size) = size {
            let name = Self::file_name(state, inode)?;
            state.call_done(Command::Truncate {
                name,
                size_bytes: size,
            })?;
            let now = state.change_time_ns();
            Self::set_size(state, inode, size, Some(now));
        }
        Self::store_change(state, inode, change)?;
        self.attributes(state, inode).ok_or(libc::ENOENT)
    }
}

#[cfg(test)]
mod store_tests;

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(kind: FileType) -> FileAttr {
        FileAttr {
            ino: fuser::INodeNo(2),
            size: 0,
            blocks: 0,
            atime: UNIX_EPOCH,
            mtime: UNIX_EPOCH,
            ctime: UNIX_EPOCH,
            crtime: UNIX_EPOCH,
            kind,
            perm: 0o644,
            nlink: 1,
            uid: 5,
            gid: 6,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    fn asked() -> Asked {
        Asked {
            mode: None,
            uid: None,
            gid: None,
            modified: None,
        }
    }

    #[test]
    fn modes_keep_permission_bits_and_refuse_the_rest() {
        let file = FileType::RegularFile;
        let directory = FileType::Directory;
        assert_eq!(permission_bits(0o600, file), Ok(0o600));
        assert_eq!(permission_bits(libc::S_IFREG | 0o640, file), Ok(0o640));
        assert_eq!(permission_bits(libc::S_IFDIR | 0o700, directory), Ok(0o700));
        assert_eq!(permission_bits(0o000, file), Ok(0));
        assert_eq!(
            permission_bits(libc::S_IFDIR | 0o700, file),
            Err(libc::EINVAL)
        );
        assert_eq!(
            permission_bits(libc::S_IFLNK | 0o777, file),
            Err(libc::EINVAL)
        );
        assert_eq!(permission_bits(0o4755, file), Err(libc::EPERM));
        assert_eq!(permission_bits(0o2755, file), Err(libc::EPERM));
        assert_eq!(permission_bits(0o1777, directory), Err(libc::EPERM));
    }

    #[test]
    fn times_before_1970_or_past_2262_are_refused() {
        let now = UNIX_EPOCH + Duration::from_secs(5);
        let at = |seconds| TimeOrNow::SpecificTime(UNIX_EPOCH + Duration::from_secs(seconds));
        assert_eq!(
            wall_ns(at(1_700_000_000), now),
            Ok(1_700_000_000_000_000_000)
        );
        assert_eq!(wall_ns(TimeOrNow::Now, now), Ok(5_000_000_000));
        assert_eq!(wall_ns(at(0), now), Ok(0));
        let before = TimeOrNow::SpecificTime(UNIX_EPOCH - Duration::from_secs(1));
        assert_eq!(wall_ns(before, now), Err(libc::EINVAL));
        assert_eq!(wall_ns(at(9_223_372_037), now), Err(libc::EINVAL));
        assert_eq!(
            wall_ns(at(9_223_372_036), now),
            Ok(9_223_372_036_000_000_000)
        );
        assert_eq!(
            system_time_of(-1_000_000_000),
            UNIX_EPOCH - Duration::from_secs(1)
        );
        assert_eq!(
            system_time_of(2_000_000_000),
            UNIX_EPOCH + Duration::from_secs(2)
        );
    }

    #[test]
    fn a_chown_of_one_id_keeps_the_other_and_no_one_is_refused() {
        let current = shown(FileType::RegularFile);
        let now = UNIX_EPOCH;
        let change = |asked: Asked| checked_change(&asked, &current, false, now);
        let uid_only = change(Asked {
            uid: Some(1000),
            ..asked()
        });
        assert_eq!(
            uid_only.map(|change| change.owner),
            Ok(AttributeChange::Set(FileOwner { uid: 1000, gid: 6 }))
        );
        let no_one = change(Asked {
            gid: Some(u32::MAX),
            ..asked()
        });
        assert_eq!(no_one, Err(libc::EINVAL));
        assert_eq!(change(asked()).map(|change| change.is_empty()), Ok(true));
    }

    #[test]
    fn a_truncate_forgets_the_stored_time_unless_one_is_given() {
        let current = shown(FileType::RegularFile);
        let now = UNIX_EPOCH + Duration::from_secs(9);
        let truncate = |modified| {
            let asked = Asked {
                modified,
                ..asked()
            };
            checked_change(&asked, &current, true, now).map(|change| change.modified_wall_ns)
        };
        assert_eq!(truncate(None), Ok(AttributeChange::Clear));
        assert_eq!(truncate(Some(TimeOrNow::Now)), Ok(AttributeChange::Clear));
        let given = TimeOrNow::SpecificTime(UNIX_EPOCH + Duration::from_secs(3));
        assert_eq!(
            truncate(Some(given)),
            Ok(AttributeChange::Set(3_000_000_000))
        );
    }

    #[test]
    fn a_refused_mode_refuses_the_whole_change() {
        let current = shown(FileType::RegularFile);
        let asked = Asked {
            mode: Some(0o4700),
            uid: Some(1),
            ..asked()
        };
        assert_eq!(
            checked_change(&asked, &current, false, UNIX_EPOCH),
            Err(libc::EPERM)
        );
    }
}
