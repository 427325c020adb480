//! The flash-aware layout (docs/format.md, "Flash-aware layout"; docs/design/29-flash-aware.md):
//! the file system on raw flash pages with no FTL below it. FS block = flash page; the
//! device (`flashpipe_ftl::raw_pages::RawPageDevice`) is identity-mapped, refuses a program
//! of a page that is not erased or out of order, and erases whole erase blocks on a trim.
//!
//! What changes against the ordinary layout, all decided here:
//! - no super block slot is overwritten: erase block 0's page 0 is the *anchor* (mkfs's
//!   commit, never erased: it names the geometry), and every commit's super block goes to
//!   the next page of the *commit ring*, erase blocks 1 and 2 (`FlashRing`); page 0 of a
//!   ring erase block is always preceded by an erase of that block;
//! - pages are handed out in order within erase blocks and a released page is dead until
//!   its whole erase block is erased ([`crate::flash_pages`]); every commit is a
//!   checkpoint (the log region would be programmed out of order) with no log region;
//! - a fresh page is never overwritten in place;
//! - mount scans the ring for the newest valid super block ([`newest_in_ring`]) and, read-
//!   write, tells erased free erase blocks from programmed ones by reading their first page
//!   ([`prepare_mount`]): programmed ones are erased before use.

use flashpipe_device::{run_one, BlockDevice, DeviceError, IoBuf, Operation};

use crate::allocator::Allocator;
use crate::flash_pages::{FlashRing, RING_ERASE_BLOCKS, RING_FIRST_ERASE_BLOCK};
use crate::io::Geometry;
use crate::layout::{
    SuperBlock, FLASH_AWARE_FORMAT_VERSION, FLASH_RESERVED_ERASE_BLOCKS, SUPER_BLOCK_SIZE_BYTES,
};
use crate::state::State;

/// `super_block` as this state's layout writes it: version 7 with the erase block size
/// in the flash-aware layout, unchanged otherwise.
pub fn flash_super_block(state: &State, mut super_block: SuperBlock) -> SuperBlock {
    if let Some(ring) = &state.flash {
        super_block.format_version = FLASH_AWARE_FORMAT_VERSION;
        super_block.pages_per_erase_block = ring.pages_per_erase_block;
    }
    super_block
}

/// The trim that erases FS erase block `erase_block` (whole device blocks).
pub fn erase_operation(
    geometry: &Geometry,
    pages_per_erase_block: u64,
    erase_block: u64,
) -> Operation {
    Operation::Trim {
        first_block: geometry.device_block(erase_block * pages_per_erase_block),
        block_count: pages_per_erase_block * geometry.device_blocks_per_fs_block,
    }
}

/// Turns a formatted-or-loaded state into the flash-aware layout's: the ring, the
/// allocator (free pages are taken as erased), every commit a checkpoint.
pub fn enter_flash_layout(state: &mut State, ring: FlashRing, free_erased: &[(u64, u64)]) {
    state.allocator = Allocator::for_flash(ring.pages_per_erase_block, free_erased, &[], &[]);
    state.flash = Some(ring);
    state.checkpoint_every_commit = true;
}

/// What one page read found.
enum PageContent {
    Erased,
    Programmed(Vec<u8>),
    Unreadable,
}

fn read_page(
    device: &mut dyn BlockDevice,
    geometry: &Geometry,
    page: u64,
) -> Result<PageContent, DeviceError> {
    let buffer = IoBuf::zeroed(geometry.fs_block_size_bytes as usize);
    let outcome = run_one(
        device,
        Operation::Read {
            first_block: geometry.device_block(page),
            buffer,
        },
    );
    match outcome {
        Ok(completion) => {
            let data = completion.buffer.expect("a read hands its buffer back");
            if data.iter().all(|&byte| byte == 0xFF) {
                Ok(PageContent::Erased)
            } else {
                Ok(PageContent::Programmed(data.to_vec()))
            }
        }
        Err(error)
            if matches!(
                error.kind,
                flashpipe_device::DeviceErrorKind::Uncorrectable { .. }
            ) =>
        {
            Ok(PageContent::Unreadable)
        }
        Err(error) => Err(error),
    }
}

/// The ring as read at mount: the newest valid super block in it (if any) and the page
/// after the last programmed page of the erase block holding it.
pub struct RingScan {
    /// The newest valid version-7 super block in the ring.
    pub newest: Option<SuperBlock>,
    /// Where the next commit goes.
    pub ring: FlashRing,
}

/// Reads both ring erase blocks page by page (torn pages read unreadable and are passed
/// over, as are pages whose super block is not valid).
pub fn newest_in_ring(
    device: &mut dyn BlockDevice,
    geometry: &Geometry,
    pages_per_erase_block: u64,
) -> Result<RingScan, DeviceError> {
    let mut newest: Option<(SuperBlock, u64)> = None;
    let mut last_programmed = [None; RING_ERASE_BLOCKS as usize];
    for ring_index in 0..RING_ERASE_BLOCKS {
        let first = (RING_FIRST_ERASE_BLOCK + ring_index) * pages_per_erase_block;
        for page in first..first + pages_per_erase_block {
            let content = read_page(device, geometry, page)?;
            if matches!(content, PageContent::Erased) {
                continue;
            }
            last_programmed[ring_index as usize] = Some(page);
            let PageContent::Programmed(bytes) = content else {
                continue;
            };
            let Ok(super_block) = SuperBlock::decode(&bytes[..SUPER_BLOCK_SIZE_BYTES]) else {
                continue;
            };
            let valid = super_block.format_version == FLASH_AWARE_FORMAT_VERSION
                && super_block.pages_per_erase_block == pages_per_erase_block;
            let newer = newest
                .as_ref()
                .is_none_or(|(best, _)| super_block.commit_sequence > best.commit_sequence);
            if valid && newer {
                newest = Some((super_block, ring_index));
            }
        }
    }
    let mut ring = FlashRing::at_start(pages_per_erase_block);
    if let Some((_, ring_index)) = &newest {
        let last = last_programmed[*ring_index as usize].expect("it holds the newest page");
        ring.next_page = last;
        ring.advance();
    }
    Ok(RingScan {
        newest: newest.map(|(super_block, _)| super_block),
        ring,
    })
}

/// The flash-aware super block in use: the anchor (`anchor`, read from FS block 0) or a
/// newer one from the ring.
pub fn choose_flash_super_block(
    device: &mut dyn BlockDevice,
    anchor: SuperBlock,
) -> Result<SuperBlock, DeviceError> {
    let geometry = Geometry::new(
        anchor.fs_block_size_bytes,
        anchor.fs_block_count,
        device.info().block_size_bytes,
    );
    let scan = newest_in_ring(device, &geometry, anchor.pages_per_erase_block)?;
    Ok(match scan.newest {
        Some(newest) if newest.commit_sequence >= anchor.commit_sequence => newest,
        _ => anchor,
    })
}

/// A read-write mount of the flash-aware layout: the ring's next page, and the allocator
/// from the checkpoint's free list: erase blocks all free whose first page reads erased
/// are free; all free but programmed (or unreadable: an interrupted erase) are erased
/// now (retired when that fails); the free pages of partly used erase blocks are dead.
pub fn prepare_mount(state: &mut State, device: &mut dyn BlockDevice) -> Result<(), DeviceError> {
    let Some(super_block) = state.committed.super_block.clone() else {
        return Ok(());
    };
    if super_block.format_version != FLASH_AWARE_FORMAT_VERSION {
        return Ok(());
    }
    let pages = super_block.pages_per_erase_block;
    let geometry = state.geometry;
    let scan = newest_in_ring(device, &geometry, pages)?;
    let mut free_pages_in = std::collections::BTreeMap::<u64, Vec<u64>>::new();
    for (first, count) in state.allocator.extents_after_commit() {
        for page in first..first + count {
            free_pages_in.entry(page / pages).or_default().push(page);
        }
    }
    let mut free_erased = Vec::new();
    let mut dead = Vec::new();
    let mut retired = Vec::new();
    for (erase_block, free_pages) in free_pages_in {
        if erase_block < FLASH_RESERVED_ERASE_BLOCKS {
            continue;
        }
        if (free_pages.len() as u64) < pages {
            dead.extend(free_pages);
            continue;
        }
        let first = erase_block * pages;
        let erased = matches!(read_page(device, &geometry, first)?, PageContent::Erased);
        if erased || run_one(device, erase_operation(&geometry, pages, erase_block)).is_ok() {
            free_erased.push((first, pages));
        } else {
            retired.push(erase_block);
        }
    }
    state.allocator = Allocator::for_flash(pages, &free_erased, &dead, &retired);
    state.flash = Some(scan.ring);
    state.checkpoint_every_commit = true;
    Ok(())
}

/// A read-only mount of the flash-aware layout: nothing is allocated, but the state must
/// know its layout (never reached by a write).
pub fn note_read_only_layout(state: &mut State) {
    if let Some(super_block) = &state.committed.super_block {
        if super_block.format_version == FLASH_AWARE_FORMAT_VERSION {
            state.flash = Some(FlashRing::at_start(super_block.pages_per_erase_block));
        }
    }
}
