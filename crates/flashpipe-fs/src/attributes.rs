//! A file's attributes of format version 6 (docs/format.md, "Inode table"): the
//! permission bits, owner and wall-clock modification time a file system needs stored
//! with each file, as the inode record's `attribute_flags` word (offset 36, reserved zero
//! before version 6) and, only when that word is not zero, 24 bytes of attribute fields
//! at offsets 40..64, before the direct pointer entries. A record with nothing set is
//! byte for byte a version-5 record, so every version-5 record reads as "nothing set".
//!
//! Pure encoding, decoding and validation over byte slices, no I/O.

use crate::layout::{read_u32, read_u64};

/// The first format version whose inode records carry attributes.
pub const FIRST_ATTRIBUTED_FORMAT_VERSION: u32 = 6;
/// Offset, in an inode record, of the `attribute_flags` word (reserved zero before
/// version 6).
pub const ATTRIBUTE_FLAGS_OFFSET: usize = 36;
/// Offset, in a version-6 inode record whose flags are not zero, of the attribute fields.
pub const ATTRIBUTE_FIELDS_OFFSET: usize = 40;
/// Bytes of the attribute fields (mode, uid, gid, reserved, wall time).
pub const ATTRIBUTE_FIELDS_BYTES: usize = 24;
/// `attribute_flags` bit: `mode` holds permission bits set by the user.
pub const ATTRIBUTE_MODE_SET: u32 = 1;
/// `attribute_flags` bit: `uid` and `gid` hold an owner set by the user.
pub const ATTRIBUTE_OWNER_SET: u32 = 1 << 1;
/// `attribute_flags` bit: `modified_wall_ns` holds a time set by the user.
pub const ATTRIBUTE_WALL_TIME_SET: u32 = 1 << 2;
/// Every defined `attribute_flags` bit; any other bit set is damage.
pub const ATTRIBUTE_FLAGS_DEFINED: u32 =
    ATTRIBUTE_MODE_SET | ATTRIBUTE_OWNER_SET | ATTRIBUTE_WALL_TIME_SET;
/// The permission bits a mode may hold (rwx for user, group and other, setuid, setgid,
/// sticky); the file type is not stored (every file is a regular file).
pub const MODE_PERMISSION_BITS: u32 = 0o7777;

pub use flashpipe_api::FileOwner;

/// What a user set of a file's attributes; `None` is never set (a mount shows its
/// defaults). A new file starts with [`FileAttributes::NONE`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct FileAttributes {
    /// Permission bits (`0o7777` at most; `Some(0)` is a real mode that grants nothing).
    pub mode: Option<u32>,
    /// Owner ids.
    pub owner: Option<FileOwner>,
    /// Wall-clock modification time set by the user (`utimens`), ns since the Unix epoch
    /// (negative before it). Unrelated to the device clock of `modified_clock_ns`.
    pub modified_wall_ns: Option<i64>,
}

/// Why stored or requested attributes are refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttributeProblem {
    /// The mode has bits outside the permission bits.
    #[error("mode {0:#o} has bits outside the permission bits 0o7777")]
    ModeBits(u32),
    /// `attribute_flags` has undefined bits set.
    #[error("attribute flags {0:#x} have undefined bits (defined: {ATTRIBUTE_FLAGS_DEFINED:#x})")]
    UndefinedFlags(u32),
    /// A field whose flag is clear (or the reserved word) is not zero.
    #[error("attribute field {0} is not zero although it is not set")]
    StrayField(&'static str),
    /// A record of a version before 6 has a non-zero word at offset 36.
    #[error("reserved field at offset 36 is not zero")]
    ReservedNotZero,
}

impl FileAttributes {
    /// Nothing set: what a new file and every file of a version-1..5 image has.
    pub const NONE: FileAttributes = FileAttributes {
        mode: None,
        owner: None,
        modified_wall_ns: None,
    };

    /// Whether nothing is set.
    pub fn is_none(&self) -> bool {
        *self == FileAttributes::NONE
    }

    /// Checks what a caller asks to store: the mode's bits.
    pub fn check(&self) -> Result<(), AttributeProblem> {
        match self.mode {
            Some(mode) if mode & !MODE_PERMISSION_BITS != 0 => {
                Err(AttributeProblem::ModeBits(mode))
            }
            _ => Ok(()),
        }
    }

    /// The `attribute_flags` word of these attributes.
    pub fn flags(&self) -> u32 {
        let mut flags = 0;
        if self.mode.is_some() {
            flags |= ATTRIBUTE_MODE_SET;
        }
        if self.owner.is_some() {
            flags |= ATTRIBUTE_OWNER_SET;
        }
        if self.modified_wall_ns.is_some() {
            flags |= ATTRIBUTE_WALL_TIME_SET;
        }
        flags
    }

    /// Appends the attribute fields (24 bytes: mode, uid, gid, reserved zero, wall time;
    /// fields not set are zero) to an inode record being written, right after its flags
    /// word; nothing when nothing is set (the record keeps the version-5 layout).
    pub fn append_fields(&self, record: &mut Vec<u8>) {
        assert!(
            self.check().is_ok(),
            "attributes are checked before they are stored"
        );
        if self.is_none() {
            return;
        }
        let owner = self.owner.unwrap_or(FileOwner { uid: 0, gid: 0 });
        record.extend_from_slice(&self.mode.unwrap_or(0).to_le_bytes());
        record.extend_from_slice(&owner.uid.to_le_bytes());
        record.extend_from_slice(&owner.gid.to_le_bytes());
        record.extend_from_slice(&0u32.to_le_bytes());
        record.extend_from_slice(&self.modified_wall_ns.unwrap_or(0).to_le_bytes());
    }

    /// Reads and checks the attributes of an inode `record` of format `version`: at
    /// least its first [`inode_record_header_bytes`] bytes for the flags at offset 36.
    pub fn decode(record: &[u8], version: u32) -> Result<FileAttributes, AttributeProblem> {
        let flags = read_u32(record, ATTRIBUTE_FLAGS_OFFSET);
        if flags == 0 {
            return Ok(FileAttributes::NONE);
        }
        if version < FIRST_ATTRIBUTED_FORMAT_VERSION {
            return Err(AttributeProblem::ReservedNotZero);
        }
        if flags & !ATTRIBUTE_FLAGS_DEFINED != 0 {
            return Err(AttributeProblem::UndefinedFlags(flags));
        }
        assert!(
            record.len() >= ATTRIBUTE_FIELDS_OFFSET + ATTRIBUTE_FIELDS_BYTES,
            "the caller passes the whole header its flags call for"
        );
        let fields = ATTRIBUTE_FIELDS_OFFSET;
        let mode = read_u32(record, fields);
        let uid = read_u32(record, fields + 4);
        let gid = read_u32(record, fields + 8);
        let wall = read_u64(record, fields + 16);
        if read_u32(record, fields + 12) != 0 {
            return Err(AttributeProblem::StrayField("reserved"));
        }
        if flags & ATTRIBUTE_MODE_SET == 0 && mode != 0 {
            return Err(AttributeProblem::StrayField("mode"));
        }
        if flags & ATTRIBUTE_OWNER_SET == 0 && (uid != 0 || gid != 0) {
            return Err(AttributeProblem::StrayField("owner"));
        }
        if flags & ATTRIBUTE_WALL_TIME_SET == 0 && wall != 0 {
            return Err(AttributeProblem::StrayField("modified wall time"));
        }
        let attributes = FileAttributes {
            mode: (flags & ATTRIBUTE_MODE_SET != 0).then_some(mode),
            owner: (flags & ATTRIBUTE_OWNER_SET != 0).then_some(FileOwner { uid, gid }),
            modified_wall_ns: (flags & ATTRIBUTE_WALL_TIME_SET != 0).then_some(wall as i64),
        };
        attributes.check()?;
        Ok(attributes)
    }
}

/// Bytes of an inode record's header, before its direct pointer entries, for the
/// `attribute_flags` word at its offset 36: 40 when it is zero (the version-5 layout),
/// 64 when attribute fields follow.
pub fn inode_record_header_bytes(flags: u32) -> usize {
    if flags == 0 {
        ATTRIBUTE_FIELDS_OFFSET
    } else {
        ATTRIBUTE_FIELDS_OFFSET + ATTRIBUTE_FIELDS_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_set() -> FileAttributes {
        FileAttributes {
            mode: Some(0o4755),
            owner: Some(FileOwner {
                uid: 0x0102_0304,
                gid: 65534,
            }),
            modified_wall_ns: Some(-1_500_000_000),
        }
    }

    /// A version-6 record header: the 36 bytes before the flags (zero here), the flags
    /// word, the fields.
    fn header_of(attributes: &FileAttributes) -> Vec<u8> {
        let mut record = vec![0u8; 36];
        record.extend_from_slice(&attributes.flags().to_le_bytes());
        attributes.append_fields(&mut record);
        record
    }

    #[test]
    fn the_version_6_fields_have_the_documented_bytes() {
        let record = header_of(&all_set());
        let mut expected = [0u8; 64];
        expected[36..40].copy_from_slice(&[7, 0, 0, 0]); // flags: mode, owner, wall time
        expected[40..44].copy_from_slice(&[0xED, 0x09, 0, 0]); // mode 0o4755
        expected[44..48].copy_from_slice(&[4, 3, 2, 1]); // uid
        expected[48..52].copy_from_slice(&[0xFE, 0xFF, 0, 0]); // gid 65534
        expected[56..64].copy_from_slice(&(-1_500_000_000i64).to_le_bytes());
        assert_eq!(record, expected);
        assert_eq!(FileAttributes::decode(&record, 6), Ok(all_set()));
        assert_eq!(inode_record_header_bytes(7), 64);
    }

    #[test]
    fn nothing_set_keeps_the_version_5_layout() {
        let record = header_of(&FileAttributes::NONE);
        assert_eq!(record, [0u8; 40]);
        assert_eq!(inode_record_header_bytes(0), 40);
        for version in 1..=6 {
            assert_eq!(
                FileAttributes::decode(&record, version),
                Ok(FileAttributes::NONE)
            );
        }
        let mut stray = [0u8; 64];
        stray[36] = 1;
        assert_eq!(
            FileAttributes::decode(&stray, 5),
            Err(AttributeProblem::ReservedNotZero)
        );
    }

    #[test]
    fn a_mode_of_zero_is_a_real_mode() {
        let locked = FileAttributes {
            mode: Some(0),
            ..FileAttributes::NONE
        };
        let record = header_of(&locked);
        assert_eq!(record.len(), 64);
        assert_eq!(FileAttributes::decode(&record, 6), Ok(locked));
        assert!(!locked.is_none());
    }

    #[test]
    fn hostile_fields_are_refused() {
        let record = header_of(&all_set());
        let mut bad_mode = record.clone();
        bad_mode[40..44].copy_from_slice(&0o10755u32.to_le_bytes());
        assert_eq!(
            FileAttributes::decode(&bad_mode, 6),
            Err(AttributeProblem::ModeBits(0o10755))
        );
        let mut bad_flags = record.clone();
        bad_flags[36] = 0x0F;
        assert_eq!(
            FileAttributes::decode(&bad_flags, 6),
            Err(AttributeProblem::UndefinedFlags(0x0F))
        );
        let mut stray_owner = header_of(&FileAttributes {
            mode: Some(0o644),
            ..FileAttributes::NONE
        });
        stray_owner[44] = 1;
        assert_eq!(
            FileAttributes::decode(&stray_owner, 6),
            Err(AttributeProblem::StrayField("owner"))
        );
        let mut stray_reserved = record;
        stray_reserved[52] = 1;
        assert_eq!(
            FileAttributes::decode(&stray_reserved, 6),
            Err(AttributeProblem::StrayField("reserved"))
        );
        let asked = FileAttributes {
            mode: Some(0o170644),
            ..FileAttributes::NONE
        };
        assert_eq!(asked.check(), Err(AttributeProblem::ModeBits(0o170644)));
    }
}
