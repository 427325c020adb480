//! The flash-aware layout's part of the format (format version 7, docs/format.md,
//! "Flash-aware layout"): its super block fields after version 6's, the commit-ring
//! record kinds, and their checks.

use super::{SuperBlock, SuperBlockProblem, FIRST_ALLOCATABLE_BLOCK, FLASH_AWARE_FORMAT_VERSION};

/// Most pages in one erase block the flash-aware layout accepts.
pub const MAX_PAGES_PER_ERASE_BLOCK: u64 = 1 << 16;
/// Erase blocks the flash-aware layout reserves at the start: the anchor (erase block
/// 0, whose page 0 holds mkfs's commit and is never erased) and the two erase blocks of
/// the commit ring.
pub const FLASH_RESERVED_ERASE_BLOCKS: u64 = 3;
/// Offset of the flash-aware layout's `pages_per_erase_block` (version 7).
pub const PAGES_PER_ERASE_BLOCK_OFFSET: usize = 176;
/// Offset of the flash-aware layout's `ring_sequence` (version 7).
pub const RING_SEQUENCE_OFFSET: usize = 184;
/// Offset of the flash-aware layout's `record_kind` (version 7).
pub const RECORD_KIND_OFFSET: usize = 192;
/// Offset of the flash-aware layout's lifetime counters (version 7): pages handed out,
/// erase blocks erased, pages moved by collection, each a u64.
pub const FLASH_TOTALS_OFFSET: usize = 196;
/// Offset of the super block's reserved bytes in version 7 (after the counters).
pub const RESERVED_OFFSET_WITH_FLASH: usize = 220;

/// What a record of the flash-aware layout's commit ring says (docs/format.md,
/// "Flash-aware layout").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RingRecordKind {
    /// A commit: pages may have been programmed after it.
    #[default]
    Commit,
    /// A read-write mount began: pages may have been programmed after it.
    Opened,
    /// A clean unmount: nothing was programmed after it.
    Clean,
}

impl RingRecordKind {
    /// The record kind's on-disk value.
    pub fn code(self) -> u32 {
        match self {
            RingRecordKind::Commit => 0,
            RingRecordKind::Opened => 1,
            RingRecordKind::Clean => 2,
        }
    }

    pub(crate) fn from_code(code: u32) -> Option<RingRecordKind> {
        match code {
            0 => Some(RingRecordKind::Commit),
            1 => Some(RingRecordKind::Opened),
            2 => Some(RingRecordKind::Clean),
            _ => None,
        }
    }
}

impl SuperBlock {
    /// Version 7: the erase block size in `2..=MAX_PAGES_PER_ERASE_BLOCK`, dividing the
    /// block count, with room for the reserved erase blocks and two more.
    pub(crate) fn check_flash_fields(&self) -> Result<(), SuperBlockProblem> {
        if self.format_version < FLASH_AWARE_FORMAT_VERSION {
            return Ok(());
        }
        if self.format_version == FLASH_AWARE_FORMAT_VERSION && self.log_region_block_count != 0 {
            return Err(SuperBlockProblem::BadField(format!(
                "a version-{FLASH_AWARE_FORMAT_VERSION} commit-ring record with a log region of {} blocks (that version has none)",
                self.log_region_block_count
            )));
        }
        let pages = self.pages_per_erase_block;
        let fits = (2..=MAX_PAGES_PER_ERASE_BLOCK).contains(&pages)
            && self.fs_block_count % pages == 0
            && self.fs_block_count / pages >= FLASH_RESERVED_ERASE_BLOCKS + 2;
        if fits {
            Ok(())
        } else {
            Err(SuperBlockProblem::BadField(format!(
                "{pages} pages per erase block for {} blocks",
                self.fs_block_count
            )))
        }
    }

    /// FS blocks no allocation hands out: the two super block slots, or in the
    /// flash-aware layout the anchor and the commit ring's erase blocks.
    pub fn reserved_block_count(&self) -> u64 {
        if self.format_version >= FLASH_AWARE_FORMAT_VERSION {
            FLASH_RESERVED_ERASE_BLOCKS * self.pages_per_erase_block
        } else {
            FIRST_ALLOCATABLE_BLOCK
        }
    }
}
