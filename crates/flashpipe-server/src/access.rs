//! Who may use a served store, and the socket they reach it through.
//!
//! Each client's user is taken from the kernel (`SO_PEERCRED`, fixed at `connect`, so a
//! client cannot claim another uid) before it sends a byte, and checked against the
//! store's [`AccessRule`]: root, the store file's owner, and, with `serve --allow-group`,
//! the members of one group (the peer's primary gid from `SO_PEERCRED`, or the group
//! among the supplementary groups `getgrouplist` lists for the uid's name). A refused
//! client gets an `AccessDenied` error frame and is closed. The socket is bound inside a
//! private folder (0700) beside its path, given its mode (0600, or 0660 and the group)
//! and only then renamed into place, so no moment exists where it is wider, whatever the
//! umask.

use std::ffi::{CStr, CString};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

pub use flashpipe_protocol::{peer_credentials, PeerCredentials};

/// Who may connect: root, the owner, and the members of one group when set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessRule {
    /// The store file's owner.
    pub owner_uid: u32,
    /// The group `serve --allow-group` names, when given.
    pub group: Option<AllowedGroup>,
}

/// A group allowed beside the owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedGroup {
    /// Its name, for messages.
    pub name: String,
    /// Its gid.
    pub gid: u32,
}

impl Default for AccessRule {
    /// The current process's effective user alone (and root).
    fn default() -> AccessRule {
        AccessRule {
            // SAFETY: geteuid takes no argument and cannot fail.
            owner_uid: unsafe { libc::geteuid() },
            group: None,
        }
    }
}

impl AccessRule {
    /// `Ok` when the rule lets `peer` in; otherwise the reason, for the error frame.
    pub fn check(&self, peer: &PeerCredentials) -> Result<(), String> {
        if peer.uid == 0 || peer.uid == self.owner_uid {
            return Ok(());
        }
        match &self.group {
            Some(group) if peer.gid == group.gid || user_groups(peer.uid).contains(&group.gid) => {
                Ok(())
            }
            Some(group) => Err(format!(
                "uid {} may not use this store: it is open to its owner (uid {}), root and the group {}; ask the owner to add the user to that group",
                peer.uid, self.owner_uid, group.name
            )),
            None => Err(format!(
                "uid {} may not use this store: it is open to its owner (uid {}) and root alone; the owner may widen it with `flashpipe serve --allow-group GROUP`",
                peer.uid, self.owner_uid
            )),
        }
    }
}

/// The gid of the group named `name`, or an error saying no such group exists.
pub fn group_by_name(name: &str) -> Result<AllowedGroup, String> {
    let c_name = CString::new(name).map_err(|_| format!("group name {name} holds a NUL byte"))?;
    let mut buffer = vec![0u8; 16384];
    // SAFETY: zeroed `group` is a valid out-parameter (plain pointers and integers).
    let mut group: libc::group = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::group = std::ptr::null_mut();
    // SAFETY: every pointer refers to live memory of the stated size for the call.
    let result = unsafe {
        libc::getgrnam_r(
            c_name.as_ptr(),
            &mut group,
            buffer.as_mut_ptr().cast(),
            buffer.len(),
            &mut found,
        )
    };
    if result != 0 || found.is_null() {
        return Err(format!(
            "no group is named {name} on this machine (see /etc/group)"
        ));
    }
    Ok(AllowedGroup {
        name: name.to_string(),
        gid: group.gr_gid,
    })
}

/// The groups the user `uid` is a member of (its primary group and the supplementary
/// ones), from its name; empty when the uid has no name.
fn user_groups(uid: u32) -> Vec<u32> {
    let mut buffer = vec![0u8; 16384];
    // SAFETY: zeroed `passwd` is a valid out-parameter (plain pointers and integers).
    let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer refers to live memory of the stated size for the call.
    let result = unsafe {
        libc::getpwuid_r(
            uid,
            &mut entry,
            buffer.as_mut_ptr().cast(),
            buffer.len(),
            &mut found,
        )
    };
    if result != 0 || found.is_null() {
        return Vec::new();
    }
    // SAFETY: pw_name points into `buffer`, NUL-terminated by getpwuid_r.
    let name: &CStr = unsafe { CStr::from_ptr(entry.pw_name) };
    let mut count: libc::c_int = 64;
    loop {
        let mut groups = vec![0 as libc::gid_t; count as usize];
        let asked = count;
        // SAFETY: `groups` holds `count` gids; getgrouplist writes at most that many
        // and sets `count` to the number it has.
        let result = unsafe {
            libc::getgrouplist(name.as_ptr(), entry.pw_gid, groups.as_mut_ptr(), &mut count)
        };
        if result >= 0 {
            groups.truncate(count.max(0) as usize);
            return groups;
        }
        if count <= asked {
            count = asked.saturating_mul(2);
        }
        if count > 65536 {
            return Vec::new();
        }
    }
}

/// Binds `path` with mode 0600 (0660 with the group `group`, which then owns it): bound
/// in a private folder beside the path, given its mode and group, then renamed into
/// place. The caller has removed a stale socket already.
pub fn bind_private(
    path: &Path,
    group: Option<&AllowedGroup>,
) -> Result<UnixListener, std::io::Error> {
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let folder = parent.join(format!(
        ".fpbind-{}-{}",
        std::process::id(),
        unique_suffix()
    ));
    // Made 0700 from its first instant (the umask only takes bits away), so no other user
    // can put a name in it before the socket is bound.
    std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
        .create(&folder)?;
    let bound = (|| {
        let inner = folder.join("s");
        let listener = UnixListener::bind(&inner)?;
        let mode = if group.is_some() { 0o660 } else { 0o600 };
        if let Some(group) = group {
            std::os::unix::fs::chown(&inner, None, Some(group.gid))?;
        }
        std::fs::set_permissions(&inner, std::fs::Permissions::from_mode(mode))?;
        std::fs::rename(&inner, path)?;
        Ok(listener)
    })();
    let _ = std::fs::remove_file(folder.join("s"));
    let _ = std::fs::remove_dir(&folder);
    bound
}

/// A number that differs between calls in one process.
fn unique_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
