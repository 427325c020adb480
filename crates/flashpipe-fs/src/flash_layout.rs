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
//!   its whole erase block is erased ([`crate::flash_pages`]); a checkpoint's log region
//!   is whole erase blocks of its own, filled in order ([`crate::flash_log`]);
//! - a fresh page is never overwritten in place;
//! - a log commit writes no ring record (version 9): the ring's newest record names a
//!   checkpoint and the records known then, and the loader reads the region forward;
//! - mount scans the ring for the newest valid super block ([`newest_in_ring`]) and, read-
//!   write, tells erased free erase blocks from programmed ones by reading their first page
//!   ([`prepare_mount`]): programmed ones are erased before use.

use flashpipe_device::{run_one, BlockDevice, DeviceError, IoBuf, Operation};

use crate::allocator::Allocator;
use crate::flash_pages::{
    open_erase_block_count, FlashRing, RING_ERASE_BLOCKS, RING_FIRST_ERASE_BLOCK,
};
use crate::io::Geometry;
use crate::layout::{
    RingRecordKind, SuperBlock, FLASH_AWARE_FORMAT_VERSION, FLASH_RESERVED_ERASE_BLOCKS,
    FLASH_SCAN_FORMAT_VERSION, SUPER_BLOCK_SIZE_BYTES,
};
use crate::state::State;

/// `super_block` as this state's layout writes it: in the flash-aware layout a `commit`
/// record of version 9 with the erase block size, ring sequence and counters; unchanged
/// otherwise.
pub fn flash_super_block(state: &State, mut super_block: SuperBlock) -> SuperBlock {
    if let Some(ring) = &state.flash {
        super_block.format_version = FLASH_SCAN_FORMAT_VERSION;
        super_block.pages_per_erase_block = ring.pages_per_erase_block;
        super_block.ring_sequence = ring.next_sequence;
        super_block.record_kind = RingRecordKind::Commit;
        if let Some(pages) = state.allocator.flash_pages() {
            super_block.flash_totals = pages.totals();
        }
    }
    super_block
}

/// The super block a log commit makes current: the layout's fields as
/// [`flash_super_block`] sets them, except that in the flash-aware
/// layout `ring_sequence` stays the newest record the ring holds (a log commit writes
/// none), so that the ring records counted by `flashpipe info` are the ones written.
pub fn log_record_super_block(state: &State, super_block: SuperBlock) -> SuperBlock {
    let mut super_block = flash_super_block(state, super_block);
    if let Some(ring) = &state.flash {
        super_block.ring_sequence = ring.next_sequence - 1;
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

/// Turns a formatted-or-loaded state into the flash-aware layout's: the ring and the
/// allocator (free pages are taken as erased).
pub fn enter_flash_layout(state: &mut State, ring: FlashRing, free_erased: &[(u64, u64)]) {
    let open = open_erase_block_count(state.geometry.fs_block_count / ring.pages_per_erase_block);
    state.allocator = Allocator::for_flash(ring.pages_per_erase_block, open, free_erased, &[], &[]);
    state.flash = Some(ring);
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

/// The ring as read at mount: the newest valid record in it (if any), the ring erase
/// block holding it and the last programmed page of that erase block.
pub struct RingScan {
    /// The newest valid version-7 record in the ring (the largest `ring_sequence`).
    pub newest: Option<SuperBlock>,
    newest_ring_index: u64,
    last_programmed: Option<u64>,
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
            let Ok(record) = SuperBlock::decode(&bytes[..SUPER_BLOCK_SIZE_BYTES]) else {
                continue;
            };
            let valid = record.format_version >= FLASH_AWARE_FORMAT_VERSION
                && record.pages_per_erase_block == pages_per_erase_block;
            let newer = newest
                .as_ref()
                .is_none_or(|(best, _)| record.ring_sequence > best.ring_sequence);
            if valid && newer {
                newest = Some((record, ring_index));
            }
        }
    }
    let newest_ring_index = newest.as_ref().map_or(0, |(_, index)| *index);
    Ok(RingScan {
        last_programmed: last_programmed[newest_ring_index as usize],
        newest: newest.map(|(record, _)| record),
        newest_ring_index,
    })
}

impl RingScan {
    /// True when the newest record closes a clean unmount: nothing was programmed since.
    pub fn clean(&self) -> bool {
        self.newest
            .as_ref()
            .is_some_and(|record| record.record_kind == RingRecordKind::Clean)
    }

    /// Where the next record goes. After a clean unmount, the page after the newest
    /// record's erase block's last programmed page; otherwise a program may have been
    /// lost in flight (its page reads erased but cannot be programmed), so the next
    /// record starts the other ring erase block, erased first.
    pub fn next_ring(&self, pages_per_erase_block: u64, anchor: &SuperBlock) -> FlashRing {
        let mut ring = FlashRing::at_start(pages_per_erase_block);
        let Some(newest) = &self.newest else {
            ring.next_sequence = anchor.ring_sequence + 1;
            return ring;
        };
        ring.next_sequence = newest.ring_sequence + 1;
        if self.clean() {
            ring.next_page = self.last_programmed.expect("it holds the newest record");
            ring.advance();
            ring.next_sequence = newest.ring_sequence + 1;
        } else {
            let other = 1 - self.newest_ring_index;
            ring.next_page = (RING_FIRST_ERASE_BLOCK + other) * pages_per_erase_block;
        }
        ring
    }
}

/// The flash-aware super block in use: the anchor (`anchor`, read from FS block 0) or a
/// newer record from the ring.
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
        Some(newest) if newest.ring_sequence >= anchor.ring_sequence => newest,
        _ => anchor,
    })
}

/// Programs a ring record of `kind` for the last commit at the ring's next page (its
/// erase block erased first when the page is its first), then flushes.
pub fn write_ring_record(
    state: &mut State,
    device: &mut dyn BlockDevice,
    kind: RingRecordKind,
) -> Result<(), DeviceError> {
    let (Some(ring), Some(committed)) = (state.flash.as_mut(), &state.committed.super_block) else {
        return Ok(());
    };
    let geometry = state.geometry;
    if let Some(erase_block) = ring.erase_before_next() {
        run_one(
            device,
            erase_operation(&geometry, ring.pages_per_erase_block, erase_block),
        )?;
    }
    let mut record = committed.clone();
    record.ring_sequence = ring.next_sequence;
    record.record_kind = kind;
    let mut buffer = IoBuf::zeroed(geometry.fs_block_size_bytes as usize);
    buffer[..SUPER_BLOCK_SIZE_BYTES].copy_from_slice(&record.encode());
    run_one(
        device,
        Operation::Write {
            first_block: geometry.device_block(ring.next_page),
            buffer,
        },
    )?;
    ring.advance();
    run_one(device, Operation::Flush)?;
    Ok(())
}

/// A read-write mount of the flash-aware layout: the ring's next page, the allocator
/// from the checkpoint's free list, then an `Opened` record before anything else is
/// programmed. After a clean unmount an erase block all free whose first page reads
/// erased is free, and one whose first page is programmed or unreadable (an interrupted
/// erase) is erased now; after anything else every erase block all free is erased now
/// (a program lost in flight leaves a page that reads erased and cannot be programmed).
/// An erase that fails retires its block. The free pages of partly used erase blocks are
/// dead, as are those of erase blocks holding a refused record's chain pages
/// ([`held_erase_blocks`]; the region is then abandoned even after a clean end).
pub fn prepare_mount(state: &mut State, device: &mut dyn BlockDevice) -> Result<(), DeviceError> {
    let Some(super_block) = state.committed.super_block.clone() else {
        return Ok(());
    };
    if super_block.format_version < FLASH_AWARE_FORMAT_VERSION {
        return Ok(());
    }
    let pages = super_block.pages_per_erase_block;
    let geometry = state.geometry;
    let scan = newest_in_ring(device, &geometry, pages)?;
    let clean = scan.clean();
    let mut free_pages_in = std::collections::BTreeMap::<u64, Vec<u64>>::new();
    for (first, count) in state.allocator.extents_after_commit() {
        for page in first..first + count {
            free_pages_in.entry(page / pages).or_default().push(page);
        }
    }
    let held = held_erase_blocks(state, pages);
    let mut free_erased = Vec::new();
    let mut dead = Vec::new();
    let mut retired = Vec::new();
    let mut erases = 0;
    for (erase_block, free_pages) in free_pages_in {
        if erase_block < FLASH_RESERVED_ERASE_BLOCKS {
            continue;
        }
        if (free_pages.len() as u64) < pages || held.contains(&erase_block) {
            dead.extend(free_pages);
            continue;
        }
        let first = erase_block * pages;
        let erased = clean && matches!(read_page(device, &geometry, first)?, PageContent::Erased);
        if erased {
            free_erased.push((first, pages));
            continue;
        }
        erases += 1;
        match run_one(device, erase_operation(&geometry, pages, erase_block)) {
            Ok(_) => free_erased.push((first, pages)),
            Err(_) => retired.push(erase_block),
        }
    }
    let open = open_erase_block_count(geometry.fs_block_count / pages);
    state.allocator = Allocator::for_flash(pages, open, &free_erased, &dead, &retired);
    if let Some(flash_pages) = state.allocator.flash_pages_mut() {
        flash_pages.set_totals(super_block.flash_totals);
        flash_pages.count_erases(erases);
    }
    state.flash = Some(scan.next_ring(pages, &super_block));
    if !clean || state.mount_refused_record.is_some() {
        crate::flash_log::abandon_region_after_unclean_end(state, &super_block);
    }
    write_ring_record(state, device, RingRecordKind::Opened)
}

/// The erase blocks holding the chain pages examined for a record the forward read
/// refused (`image/scan_chains.rs`): their free pages are dead, not erased, so that
/// nothing programs those pages before the next checkpoint (which abandons the region)
/// is durable and erases them. Erased and reused sooner, a page of the next commit,
/// which carries the refused record's commit sequence, could pass for the refused
/// record's chain page at a later mount.
fn held_erase_blocks(state: &State, pages_per_erase_block: u64) -> Vec<u64> {
    state
        .mount_refused_record
        .iter()
        .flat_map(|refused| refused.pages.iter())
        .map(|&page| page / pages_per_erase_block)
        .collect()
}

/// A read-only mount of the flash-aware layout: nothing is allocated, but the state must
/// know its layout (never reached by a write).
pub fn note_read_only_layout(state: &mut State) {
    if let Some(super_block) = &state.committed.super_block {
        if super_block.format_version >= FLASH_AWARE_FORMAT_VERSION {
            state.flash = Some(FlashRing::at_start(super_block.pages_per_erase_block));
        }
    }
}
