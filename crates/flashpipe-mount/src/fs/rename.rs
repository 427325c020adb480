//! Renames: a file's (one store rename, replacing the target) and a directory's (every store
//! name under it renamed, undone on a failure); the POSIX checks first (an empty target
//! directory replaced, a directory never moved into itself, `RENAME_NOREPLACE` honoured).

use std::ffi::OsStr;

use flashpipe_api::Command;
use fuser::RenameFlags;

use super::{refusal_errno, MountFs};
use crate::state::{Errno, State};
use crate::tree::checked_component;
use crate::MountTransport;

impl<T: MountTransport> MountFs<T> {
    pub(super) fn do_rename(
        state: &mut State<T>,
        from: (u64, &OsStr),
        to: (u64, &OsStr),
        flags: RenameFlags,
    ) -> Result<(), Errno> {
        if flags.contains(RenameFlags::RENAME_EXCHANGE)
            || flags.contains(RenameFlags::RENAME_WHITEOUT)
        {
            return Err(libc::EINVAL);
        }
        let name = from.1.to_str().ok_or(libc::ENOENT)?;
        let source = state.tree.child(from.0, name).ok_or(libc::ENOENT)?;
        let source_is_directory = state.tree.is_directory(source);
        let new_name = checked_component(&state.tree, to.0, to.1, source_is_directory)
            .map_err(refusal_errno)?;
        if source_is_directory && state.tree.is_within(to.0, source) {
            return Err(libc::EINVAL);
        }
        if let Some(target) = state.tree.child(to.0, &new_name) {
            if target == source {
                return Ok(());
            }
            if flags.contains(RenameFlags::RENAME_NOREPLACE) {
                return Err(libc::EEXIST);
            }
            match (source_is_directory, state.tree.is_directory(target)) {
                (false, true) => return Err(libc::EISDIR),
                (true, false) => return Err(libc::ENOTDIR),
                (true, true) => {
                    if state.tree.has_children(target) {
                        return Err(libc::ENOTEMPTY);
                    }
                    if state.tree.has_marker(target) {
                        let marker = state.tree.marker_name(target);
                        state.call_done(Command::Delete { name: marker })?;
                    }
                    state.tree.remove(target);
                }
                (false, false) => {}
            }
        }
        if source_is_directory {
            Self::rename_directory(state, source, to.0, &new_name)?;
        } else {
            // replace only a file the mount shows: a store name it hides (a file named as a
            // directory was) is never overwritten unseen
            let replace = state.tree.child(to.0, &new_name).is_some();
            state.call_done(Command::Rename {
                from: state.tree.store_name(source, None),
                to: state.tree.store_name(to.0, Some(&new_name)),
                replace,
            })?;
            if let Some(target) = state.tree.child(to.0, &new_name) {
                state.tree.remove(target);
            }
        }
        state.tree.rename(source, to.0, &new_name);
        Self::keep_directory(state, from.0)
    }

    /// Renames every store name under directory `source` to its place under `parent` as
    /// `new_name`; on a failure the names renamed so far are renamed back.
    fn rename_directory(
        state: &mut State<T>,
        source: u64,
        parent: u64,
        new_name: &str,
    ) -> Result<(), Errno> {
        let old_prefix = state.tree.store_name(source, None);
        let new_prefix = state.tree.store_name(parent, Some(new_name));
        let names = state.tree.store_names_under(source);
        let mut done: Vec<(String, String)> = Vec::new();
        for old in names {
            let rest = old
                .strip_prefix(&old_prefix)
                .expect("names under a directory start with its prefix");
            let new = format!("{new_prefix}{rest}");
            if new.len() > crate::tree::MAX_NAME_BYTES {
                Self::undo_renames(state, &done);
                return Err(libc::ENAMETOOLONG);
            }
            if let Err(error) = state.call_done(Command::Rename {
                from: old.clone(),
                to: new.clone(),
                replace: false,
            }) {
                Self::undo_renames(state, &done);
                return Err(error);
            }
            done.push((old, new));
        }
        Ok(())
    }

    fn undo_renames(state: &mut State<T>, done: &[(String, String)]) {
        for (old, new) in done.iter().rev() {
            if let Err(error) = state.call_done(Command::Rename {
                from: new.clone(),
                to: old.clone(),
                replace: false,
            }) {
                crate::say(&format!(
                    "undoing a directory rename: {new} could not go back to {old} (errno {error})"
                ));
            }
        }
    }
}
