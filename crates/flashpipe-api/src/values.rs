//! The value types commands carry and answer with, shared by the file system (which
//! makes them), the engine, the wire protocol and both clients: a file's handle and facts,
//! the file system's space and counts, how a copy may move data and what it did, and what
//! a check found.

/// A file's handle: its inode number. It stays valid across renames and until the file
/// is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileId(pub u64);

/// What `stat` and `list` say about a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStat {
    /// The file's handle (inode number).
    pub file_id: FileId,
    /// Its name.
    pub name: String,
    /// Its length.
    pub size_bytes: u64,
    /// FS blocks holding its data (holes excluded).
    pub allocated_blocks: u64,
    /// Bytes of the file (at most its size) in blocks that other pointers reference too
    /// (shared by a copy by sharing, with another file or within this one): stored once
    /// for all of them, as `du` counts a reflinked file against its apparent size.
    pub shared_bytes: u64,
    /// Device clock at its last change (virtual time on simulated devices).
    pub modified_clock_ns: u64,
    /// Permission bits a user set (`0o7777` at most), `None` when never set (a mount
    /// shows its default).
    pub mode: Option<u32>,
    /// Owner ids a user set, `None` when never set.
    pub owner: Option<FileOwner>,
    /// Wall-clock modification time a user set (ns since the Unix epoch, negative before
    /// it), `None` when never set. Unrelated to `modified_clock_ns`.
    pub modified_wall_ns: Option<i64>,
}

/// A file's owner as numeric ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileOwner {
    /// The owning user id.
    pub uid: u32,
    /// The owning group id.
    pub gid: u32,
}

/// What a [`crate::Command::SetAttributes`] does to one attribute of a file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum AttributeChange<T> {
    /// Leave it as it is.
    #[default]
    Keep,
    /// Store this value.
    Set(T),
    /// Forget it: the file shows the default again, as if never set.
    Clear,
}

impl<T: Copy> AttributeChange<T> {
    /// The attribute after this change, given its value now.
    pub fn apply(self, current: Option<T>) -> Option<T> {
        match self {
            AttributeChange::Keep => current,
            AttributeChange::Set(value) => Some(value),
            AttributeChange::Clear => None,
        }
    }
}

/// What `df` says about the file system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsStats {
    /// FS block size.
    pub fs_block_size_bytes: u32,
    /// FS blocks in all.
    pub fs_block_count: u64,
    /// Blocks in use (data, indirect, checkpoint, super blocks); a shared block counts
    /// once however many pointers reference it.
    pub used_blocks: u64,
    /// Data blocks referenced by more than one pointer (each counted once in
    /// `used_blocks`).
    pub shared_blocks: u64,
    /// Blocks that sharing saves: for each shared block, its references beyond the first
    /// (what the copies would take if each had its own).
    pub saved_blocks: u64,
    /// Blocks free now.
    pub free_blocks: u64,
    /// Blocks freed since the last flush, free again once it completes.
    pub pending_free_blocks: u64,
    /// Free blocks kept back so that the next flush can write its checkpoint.
    pub reserved_blocks: u64,
    /// Files.
    pub file_count: u64,
    /// Sequence number of the last completed commit.
    pub commit_sequence: u64,
    /// True when something changed since the last flush.
    pub unflushed_changes: bool,
}

/// How a copy may move data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyMethod {
    /// Whole blocks shared with the source (the destination points at the source's
    /// blocks, whose reference counts rise; no device support needed); partial blocks at
    /// unaligned ends, or everything when the offsets differ modulo the block size, by
    /// bytes.
    Share,
    /// Whole blocks by reference, or fail with a not-by-reference error (no silent
    /// byte copy). Partial blocks at unaligned ends are still copied by bytes.
    ReferenceOrFail,
    /// Whole blocks by reference when possible, else everything by bytes.
    ReferenceOrBytes,
    /// Read and write every byte.
    Bytes,
}

/// What a copy did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CopyReport {
    /// FS blocks whose data the destination now refers to without a byte copy: shared
    /// with the source ([`CopyMethod::Share`]) or remapped by the device (holes
    /// included: they stay holes).
    pub blocks_by_reference: u64,
    /// Bytes read and written.
    pub bytes_by_bytes: u64,
}

/// What fsck found, as sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckSummary {
    /// True when nothing is wrong.
    pub clean: bool,
    /// Commit sequence of the super block used, when one was valid.
    pub commit_sequence: Option<u64>,
    /// Files in the image.
    pub file_count: u64,
    /// Each finding, in words.
    pub findings: Vec<String>,
    /// The whole report as fsck prints it.
    pub report_text: String,
}

/// `identity` in the usual hyphenated UUID form, `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
pub fn store_identity_text(identity: &[u8; 16]) -> String {
    let mut text = String::with_capacity(36);
    for (index, byte) in identity.iter().enumerate() {
        if matches!(index, 4 | 6 | 8 | 10) {
            text.push('-');
        }
        text.push_str(&format!("{byte:02x}"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_keeps_sets_or_clears() {
        assert_eq!(AttributeChange::Keep.apply(Some(3)), Some(3));
        assert_eq!(AttributeChange::Set(4).apply(Some(3)), Some(4));
        assert_eq!(AttributeChange::Set(4).apply(None), Some(4));
        assert_eq!(AttributeChange::<u32>::Clear.apply(Some(3)), None);
    }

    #[test]
    fn identities_are_written_as_uuids() {
        let mut identity = [0u8; 16];
        for (index, byte) in identity.iter_mut().enumerate() {
            *byte = index as u8 * 17;
        }
        assert_eq!(
            store_identity_text(&identity),
            "00112233-4455-6677-8899-aabbccddeeff"
        );
    }
}
