//! mkfs in the flash-aware layout (docs/format.md, "Flash-aware layout"): the geometry
//! checked, every erase block erased, the empty state put in the layout before mkfs's
//! commit (`crate::flash_layout`).

use flashpipe_device::{run_one, BlockDevice, Operation};

use super::{FormatOptions, FsCore};
use crate::error::{FlushError, FormatError};
use crate::flash_layout;
use crate::flash_pages::FlashRing;
use crate::layout::{
    FlashTotals, RingRecordKind, FLASH_AWARE_FORMAT_VERSION, FLASH_RESERVED_ERASE_BLOCKS,
    MAX_PAGES_PER_ERASE_BLOCK,
};

impl FsCore {
    /// Formats `device` in the flash-aware layout (docs/format.md, "Flash-aware layout"):
    /// FS block = device block = one flash page, `pages_per_erase_block` pages per erase
    /// block, a trim of whole erase blocks erases them. Every erase block is erased first.
    pub fn format_flash_aware(
        device: &mut dyn BlockDevice,
        options: &FormatOptions,
        pages_per_erase_block: u64,
    ) -> Result<FsCore, FormatError> {
        let info = device.info().clone();
        let geometry_error = |detail: String| Err(FormatError::FlashGeometry { detail });
        if options.fs_block_size_bytes != info.block_size_bytes {
            return geometry_error(format!(
                "the FS block must be one flash page ({} bytes), not {} bytes: give that block size",
                info.block_size_bytes, options.fs_block_size_bytes
            ));
        }
        let erase_blocks = info.block_count / pages_per_erase_block.max(1);
        if !(2..=MAX_PAGES_PER_ERASE_BLOCK).contains(&pages_per_erase_block)
            || info.block_count % pages_per_erase_block != 0
            || erase_blocks < FLASH_RESERVED_ERASE_BLOCKS + 2
        {
            return geometry_error(format!(
                "{} pages cannot be split into at least {} erase blocks of {pages_per_erase_block} pages (2 to {MAX_PAGES_PER_ERASE_BLOCK}); use a larger flash device",
                info.block_count,
                FLASH_RESERVED_ERASE_BLOCKS + 2
            ));
        }
        run_one(
            device,
            Operation::Trim {
                first_block: 0,
                block_count: info.block_count,
            },
        )?;
        let mut core = FsCore::format_with(device, options, |state| {
            let reserved = FLASH_RESERVED_ERASE_BLOCKS * pages_per_erase_block;
            let free = [(reserved, state.geometry.fs_block_count - reserved)];
            flash_layout::enter_flash_layout(
                state,
                FlashRing::at_start(pages_per_erase_block),
                &free,
            );
            if let Some(flash_pages) = state.allocator.flash_pages_mut() {
                flash_pages.count_erases(erase_blocks);
            }
        })?;
        core.state.changed_since_commit = false;
        Ok(core)
    }

    /// After the last flush of a clean unmount: in the flash-aware layout a `Clean`
    /// record in the commit ring says nothing was programmed after it, so the next mount
    /// trusts erased-looking free blocks. Nothing in any other layout, on a read-only
    /// mount, or after a failure.
    pub fn close_clean(&mut self, device: &mut dyn BlockDevice) -> Result<(), FlushError> {
        if self.is_read_only()
            || self.state.unusable_reason.is_some()
            || self.state.changed_since_commit
        {
            return Ok(());
        }
        flash_layout::write_ring_record(&mut self.state, device, RingRecordKind::Clean)?;
        Ok(())
    }

    /// The flash-aware layout's counters over the store's life as the last commit
    /// recorded them, and that record's `ring_sequence` (read-only mounts too); `None` in
    /// the ordinary layout.
    pub fn flash_totals(&self) -> Option<(FlashTotals, u64)> {
        let super_block = self.state.committed.super_block.as_ref()?;
        (super_block.format_version >= FLASH_AWARE_FORMAT_VERSION)
            .then_some((super_block.flash_totals, super_block.ring_sequence))
    }

    /// Version 9: the commit sequence of the whole log record this mount's forward read
    /// refused because a chain page it wrote did not read back whole (a power cut
    /// between its pages; the log ends before it); `None` when the log ended otherwise.
    pub fn refused_log_record(&self) -> Option<u64> {
        self.state
            .mount_refused_record
            .as_ref()
            .map(|refused| refused.commit_sequence)
    }

    /// Where the flash-aware layout's pages stand; `None` in the ordinary layout or on a
    /// read-only mount.
    pub fn flash_space(&self) -> Option<FlashSpace> {
        let pages = self.state.allocator.flash_pages()?;
        Some(FlashSpace {
            pages_per_erase_block: pages.pages_per_erase_block(),
            free_pages: self.state.allocator.free_block_count(),
            dead_pages: pages.dead_page_count(),
            erasable_erase_blocks: pages.erasable_count() as u64,
            retired_erase_blocks: pages.retired_erase_block_count(),
            moved_pages: pages.moved_pages(),
            erased_blocks: pages.erased_blocks(),
            totals: pages.totals(),
        })
    }
}

/// The flash-aware layout's pages (`FsCore::flash_space`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlashSpace {
    /// Pages per erase block.
    pub pages_per_erase_block: u64,
    /// Erased pages that may be programmed now.
    pub free_pages: u64,
    /// Pages no commit references that wait for their erase block's erase.
    pub dead_pages: u64,
    /// Erase blocks wholly dead, erased at the end of the next commit.
    pub erasable_erase_blocks: u64,
    /// Erase blocks retired after a failed erase.
    pub retired_erase_blocks: u64,
    /// Live pages moved by the file system's garbage collection since mount.
    pub moved_pages: u64,
    /// Erase blocks the file system erased since mount (at the end of commits and at
    /// mount after an unclean end).
    pub erased_blocks: u64,
    /// The counters over the store's life (as the next commit will record them).
    pub totals: FlashTotals,
}
