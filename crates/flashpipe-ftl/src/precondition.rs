//! Preconditioning: fill a freshly formatted FTL to a chosen share of its logical capacity
//! and bring it to a garbage-collection steady state before an experiment (issue #16).
//!
//! Two methods, selectable with [`PreconditionMethod`]:
//! - [`PreconditionMethod::Slow`]: a sequential fill of the first `fill_share` of the
//!   logical pages, then `overwrite_passes` x that many uniform random single-page
//!   overwrites among them, all through the FTL's [`BlockDevice`] interface in virtual
//!   time: every program, read, collection and erase is simulated.
//! - [`PreconditionMethod::Direct`]: the same workload run through an in-memory model of
//!   the FTL's data path (one write point per die for host pages and one for collection,
//!   pages rotating over the dies, least-worn free block first, greedy victims, collection
//!   below the FTL's own free-block target), whose end state (the map, each block's live
//!   pages and erase count, the free sets) is then installed in the FTL. No program is
//!   simulated on the array: its block table is told, block by block, how many pages are
//!   programmed and how many erases were added
//!   ([`flashpipe_flash::FlashArray::mark_block_programmed`]), so later reads go through
//!   the error model with the right wear; no page contents or spare areas exist. Direct
//!   therefore needs an array that keeps no page contents
//!   ([`flashpipe_flash::StorageMode::TimingOnly`]), and the state it builds is not on
//!   flash: a remount does not recover it. The model
//!   ignores metadata (log and checkpoint) pages and the victim policy (it is greedy);
//!   the check against Slow is `tests/precondition.rs`.
//!
//! Invariants: preconditioning starts only on an FTL with no mapped page and nothing in
//! flight; after Direct the map agrees with the block table (`check_invariants`).

use std::collections::BTreeSet;
use std::time::Instant;

use flashpipe_device::{run_batch, DeviceError, IoBuf, Operation, SplitMix64};

use crate::ftl::{BlockUse, Ftl, Identity, NONE};

/// How preconditioning builds its state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreconditionMethod {
    /// Every write simulated through the FTL's block-device interface.
    Slow,
    /// An in-memory model of the data path, its end state installed in the FTL.
    Direct,
}

/// What to build.
#[derive(Debug, Clone, PartialEq)]
pub struct PreconditionOptions {
    /// Share of the logical pages filled (0 < share <= 1).
    pub fill_share: f64,
    /// Random overwrites after the fill, in multiples of the filled pages.
    pub overwrite_passes: f64,
    /// Method.
    pub method: PreconditionMethod,
    /// Seed of the random overwrites.
    pub seed: u64,
}

impl Default for PreconditionOptions {
    fn default() -> Self {
        PreconditionOptions {
            fill_share: 0.9,
            overwrite_passes: 2.0,
            method: PreconditionMethod::Direct,
            seed: 1,
        }
    }
}

/// Live pages per data block (sealed blocks), summarized.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ValidPageSummary {
    /// Data blocks counted.
    pub data_blocks: u32,
    /// Pages per block.
    pub pages_per_block: u32,
    /// Mean live pages per data block.
    pub valid_pages_mean: f64,
    /// 10th, 50th and 90th percentiles of live pages per data block.
    pub valid_pages_p10: u32,
    /// Median.
    pub valid_pages_p50: u32,
    /// 90th percentile.
    pub valid_pages_p90: u32,
    /// Free blocks.
    pub free_blocks: u32,
}

/// What preconditioning did.
#[derive(Debug, Clone, PartialEq)]
pub struct PreconditionReport {
    /// The method used.
    pub method: PreconditionMethod,
    /// Logical pages filled.
    pub filled_pages: u64,
    /// Host pages written (fill plus overwrites).
    pub host_pages_written: u64,
    /// Pages garbage collection copied.
    pub gc_pages_copied: u64,
    /// Victim blocks collected.
    pub gc_runs: u64,
    /// (host + copied) / host over the whole preconditioning.
    pub write_amplification: f64,
    /// Live pages per data block at the end.
    pub valid_pages: ValidPageSummary,
    /// Whether the array's block table records the programs and erases (always for
    /// Slow; for Direct, false where the backend cannot be told, e.g. [`crate::PowerCutFlash`]:
    /// its pages then read as erased, skipping the bit-error model).
    pub array_block_table_agrees: bool,
    /// Wall-clock time preconditioning took.
    pub wall_time_ms: f64,
}

/// Why preconditioning could not run.
#[derive(Debug, thiserror::Error)]
pub enum PreconditionError {
    /// An option is out of range.
    #[error("invalid precondition option {field}: {detail}")]
    InvalidOption {
        /// The option.
        field: &'static str,
        /// What is wrong and the limit.
        detail: String,
    },
    /// The FTL already holds data or has requests in flight.
    #[error("FTL {device} is not freshly formatted and idle: {detail}")]
    NotFresh {
        /// The FTL's name.
        device: String,
        /// What was found.
        detail: String,
    },
    /// Direct construction needs an array without page contents.
    #[error(
        "FTL {device}: direct preconditioning needs a timing-only array (its pages would \
         otherwise read back as erased); use the slow method"
    )]
    ArrayKeepsData {
        /// The FTL's name.
        device: String,
    },
    /// The direct model ran out of free blocks (fill share too high for the spare space).
    #[error("direct preconditioning ran out of free blocks after {host_pages} host pages")]
    OutOfSpace {
        /// Host pages modeled before.
        host_pages: u64,
    },
    /// The device failed a write of the slow method.
    #[error(transparent)]
    Device(#[from] DeviceError),
}

/// Fills `ftl` and brings it to a steady state (see the module doc).
pub fn precondition(
    ftl: &mut Ftl,
    options: &PreconditionOptions,
) -> Result<PreconditionReport, PreconditionError> {
    check_options(options)?;
    check_fresh(ftl)?;
    let started = Instant::now();
    let filled_pages = ((ftl.info().block_count as f64 * options.fill_share) as u64).max(1);
    let overwrites = (filled_pages as f64 * options.overwrite_passes) as u64;
    let (host_pages_written, gc_pages_copied, gc_runs, array_block_table_agrees) =
        match options.method {
            PreconditionMethod::Slow => run_slow(ftl, filled_pages, overwrites, options.seed)?,
            PreconditionMethod::Direct => run_direct(ftl, filled_pages, overwrites, options.seed)?,
        };
    let write_amplification = if host_pages_written == 0 {
        1.0
    } else {
        (host_pages_written + gc_pages_copied) as f64 / host_pages_written as f64
    };
    Ok(PreconditionReport {
        method: options.method,
        filled_pages,
        host_pages_written,
        gc_pages_copied,
        gc_runs,
        write_amplification,
        valid_pages: valid_page_summary(ftl),
        array_block_table_agrees,
        wall_time_ms: started.elapsed().as_secs_f64() * 1e3,
    })
}

fn check_options(options: &PreconditionOptions) -> Result<(), PreconditionError> {
    if !(options.fill_share > 0.0 && options.fill_share <= 1.0) {
        return Err(PreconditionError::InvalidOption {
            field: "fill_share",
            detail: format!("{} is outside (0, 1]", options.fill_share),
        });
    }
    if !(options.overwrite_passes >= 0.0 && options.overwrite_passes <= 1000.0) {
        return Err(PreconditionError::InvalidOption {
            field: "overwrite_passes",
            detail: format!("{} is outside [0, 1000]", options.overwrite_passes),
        });
    }
    Ok(())
}

fn check_fresh(ftl: &Ftl) -> Result<(), PreconditionError> {
    let device = ftl.info().name.to_string();
    if ftl.is_read_only() {
        return Err(PreconditionError::NotFresh {
            device,
            detail: "mounted read-only".to_string(),
        });
    }
    if ftl.host_in_flight() > 0 {
        return Err(PreconditionError::NotFresh {
            device,
            detail: format!("{} host requests in flight", ftl.host_in_flight()),
        });
    }
    if let Some(logical) = ftl.mapping.map.iter().position(|&slot| slot != NONE) {
        return Err(PreconditionError::NotFresh {
            device,
            detail: format!("logical block {logical} already holds data"),
        });
    }
    Ok(())
}

/// Live pages per sealed data block of `ftl`, summarized.
pub fn valid_page_summary(ftl: &Ftl) -> ValidPageSummary {
    let mut valid: Vec<u32> = ftl
        .blocks
        .iter()
        .filter(|block| matches!(block.usage, BlockUse::Sealed | BlockUse::Open(_)))
        .map(|block| block.valid_pages)
        .collect();
    valid.sort_unstable();
    let quantile = |share: f64| -> u32 {
        if valid.is_empty() {
            return 0;
        }
        valid[((valid.len() - 1) as f64 * share).round() as usize]
    };
    ValidPageSummary {
        data_blocks: valid.len() as u32,
        pages_per_block: ftl.shape.pages_per_block,
        valid_pages_mean: if valid.is_empty() {
            0.0
        } else {
            valid.iter().map(|&count| f64::from(count)).sum::<f64>() / valid.len() as f64
        },
        valid_pages_p10: quantile(0.1),
        valid_pages_p50: quantile(0.5),
        valid_pages_p90: quantile(0.9),
        free_blocks: ftl.allocator.free_block_count,
    }
}

/// Host pages per write request of the sequential fill.
const FILL_CHUNK_PAGES: u64 = 16;
/// Single-page overwrites submitted together.
const OVERWRITE_BATCH_PAGES: u64 = 32;

/// Writes one zeroed page at each of `count` distinct logical pages that `draw` picks (a
/// page picked twice is picked again), all submitted together: a batch of random page
/// overwrites. `draw` must be able to reach `count` distinct pages.
pub fn write_distinct_pages(
    ftl: &mut Ftl,
    count: u64,
    mut draw: impl FnMut() -> u64,
) -> Result<(), DeviceError> {
    assert!(
        count <= ftl.info().block_count,
        "a batch of distinct pages fits in the device"
    );
    let page_bytes = ftl.info().block_size_bytes as usize;
    let mut pages: Vec<u64> = Vec::with_capacity(count as usize);
    while (pages.len() as u64) < count {
        let page = draw();
        if !pages.contains(&page) {
            pages.push(page);
        }
    }
    let zeroed_page = |first_block| Operation::Write {
        first_block,
        buffer: IoBuf::zeroed(page_bytes),
    };
    run_batch(ftl, pages.into_iter().map(zeroed_page).collect())?;
    Ok(())
}

fn run_slow(
    ftl: &mut Ftl,
    filled_pages: u64,
    overwrites: u64,
    seed: u64,
) -> Result<(u64, u64, u64, bool), PreconditionError> {
    let before = ftl.stats();
    let page_bytes = ftl.info().block_size_bytes as usize;
    for first in (0..filled_pages).step_by(FILL_CHUNK_PAGES as usize) {
        let count = FILL_CHUNK_PAGES.min(filled_pages - first);
        let operation = Operation::Write {
            first_block: first,
            buffer: IoBuf::zeroed(count as usize * page_bytes),
        };
        run_batch(ftl, vec![operation])?;
    }
    let mut generator = SplitMix64::new(seed);
    let mut written = 0;
    while written < overwrites {
        let batch = OVERWRITE_BATCH_PAGES.min(overwrites - written);
        write_distinct_pages(ftl, batch.min(filled_pages), || {
            generator.below(filled_pages)
        })?;
        written += batch;
    }
    ftl.run_until_quiet();
    let gained = ftl.stats().since(&before);
    Ok((
        gained.host_pages_written,
        gained.gc_pages_copied,
        gained.gc_victims,
        true,
    ))
}

/// Where a data stream of the model appends: one block per die and its next page.
#[derive(Clone, Copy)]
struct ModelWritePoint {
    block: u32,
    next_page: u32,
}

/// The in-memory model of the FTL's data path used by the direct method.
struct DirectModel {
    pages_per_block: u32,
    die_count: u32,
    die_of_block: Vec<u32>,
    /// Logical page -> physical page (NONE: unmapped).
    map: Vec<u32>,
    /// Physical page -> logical page (NONE: no live data).
    page_logical: Vec<u32>,
    valid: Vec<u32>,
    /// Pages programmed since the block's last erase.
    programmed_pages: Vec<u32>,
    erase_counts: Vec<u32>,
    /// True for blocks the model may use (free at the start).
    usable: Vec<bool>,
    free_by_die: Vec<BTreeSet<(u32, u32)>>,
    free_count: u32,
    gc_target_free_blocks: u32,
    /// Sealed blocks by live pages (greedy victims), with each block's index in its bucket.
    sealed_by_valid: Vec<Vec<u32>>,
    bucket_position: Vec<u32>,
    host_points: Vec<Option<ModelWritePoint>>,
    collection_points: Vec<Option<ModelWritePoint>>,
    host_cursor: u32,
    collection_cursor: u32,
    host_pages: u64,
    copied_pages: u64,
    victims: u64,
}

impl DirectModel {
    fn from_ftl(ftl: &Ftl) -> DirectModel {
        let shape = &ftl.shape;
        let block_count = shape.block_count as usize;
        let die_count = shape.die_count;
        let mut free_by_die = vec![BTreeSet::new(); die_count as usize];
        let mut usable = vec![false; block_count];
        let mut free_count = 0;
        for (block, info) in ftl.blocks.iter().enumerate() {
            if info.usage == BlockUse::Free {
                usable[block] = true;
                free_by_die[shape.die_of(block as u32) as usize]
                    .insert((info.erase_count, block as u32));
                free_count += 1;
            }
        }
        DirectModel {
            pages_per_block: shape.pages_per_block,
            die_count,
            die_of_block: (0..shape.block_count)
                .map(|block| shape.die_of(block))
                .collect(),
            map: vec![NONE; ftl.info().block_count as usize],
            page_logical: vec![NONE; shape.page_count() as usize],
            valid: vec![0; block_count],
            programmed_pages: vec![0; block_count],
            erase_counts: ftl.blocks.iter().map(|info| info.erase_count).collect(),
            usable,
            free_by_die,
            free_count,
            gc_target_free_blocks: ftl.allocator.gc_target_free_blocks,
            sealed_by_valid: vec![Vec::new(); shape.pages_per_block as usize + 1],
            bucket_position: vec![NONE; block_count],
            host_points: vec![None; die_count as usize],
            collection_points: vec![None; die_count as usize],
            host_cursor: 0,
            collection_cursor: 0,
            host_pages: 0,
            copied_pages: 0,
            victims: 0,
        }
    }

    fn take_free_block(&mut self, die: u32) -> Option<u32> {
        let (_, block) = self.free_by_die[die as usize].pop_first()?;
        self.free_count -= 1;
        Some(block)
    }

    /// The next page of a stream, rotating over the dies; None when no die has room.
    fn allocate(&mut self, collection: bool) -> Option<u32> {
        for _ in 0..self.die_count {
            let cursor = if collection {
                &mut self.collection_cursor
            } else {
                &mut self.host_cursor
            };
            let die = *cursor;
            *cursor = (*cursor + 1) % self.die_count;
            let point = if collection {
                self.collection_points[die as usize]
            } else {
                self.host_points[die as usize]
            };
            let point = match point {
                Some(point) => point,
                None => match self.take_free_block(die) {
                    Some(block) => ModelWritePoint {
                        block,
                        next_page: 0,
                    },
                    None => continue,
                },
            };
            let page = point.block * self.pages_per_block + point.next_page;
            self.programmed_pages[point.block as usize] = point.next_page + 1;
            let next = if point.next_page + 1 == self.pages_per_block {
                self.seal(point.block);
                None
            } else {
                Some(ModelWritePoint {
                    block: point.block,
                    next_page: point.next_page + 1,
                })
            };
            if collection {
                self.collection_points[die as usize] = next;
            } else {
                self.host_points[die as usize] = next;
            }
            return Some(page);
        }
        None
    }

    fn seal(&mut self, block: u32) {
        let bucket = &mut self.sealed_by_valid[self.valid[block as usize] as usize];
        self.bucket_position[block as usize] = bucket.len() as u32;
        bucket.push(block);
    }

    fn unseal(&mut self, block: u32) {
        let position = self.bucket_position[block as usize];
        if position == NONE {
            return;
        }
        let bucket = &mut self.sealed_by_valid[self.valid[block as usize] as usize];
        let last = *bucket.last().expect("a sealed block is in its bucket");
        bucket.swap_remove(position as usize);
        if last != block {
            self.bucket_position[last as usize] = position;
        }
        self.bucket_position[block as usize] = NONE;
    }

    /// Changes a block's live count, keeping a sealed block in the right bucket.
    fn adjust_valid(&mut self, block: u32, increase: bool) {
        let sealed = self.bucket_position[block as usize] != NONE;
        if sealed {
            self.unseal(block);
        }
        if increase {
            self.valid[block as usize] += 1;
        } else {
            self.valid[block as usize] -= 1;
        }
        if sealed {
            self.seal(block);
        }
    }

    fn place(&mut self, logical: u32, page: u32) {
        let previous = std::mem::replace(&mut self.map[logical as usize], page);
        if previous != NONE {
            self.page_logical[previous as usize] = NONE;
            self.adjust_valid(previous / self.pages_per_block, false);
        }
        self.page_logical[page as usize] = logical;
        self.adjust_valid(page / self.pages_per_block, true);
    }

    fn write_host_page(&mut self, logical: u32) -> Result<(), PreconditionError> {
        while self.free_count < self.gc_target_free_blocks {
            if !self.collect_one_victim() {
                break;
            }
        }
        let page = self.allocate(false).ok_or(PreconditionError::OutOfSpace {
            host_pages: self.host_pages,
        })?;
        self.place(logical, page);
        self.host_pages += 1;
        Ok(())
    }

    /// Collects the sealed block with the fewest live pages; false when none would gain.
    fn collect_one_victim(&mut self) -> bool {
        let Some(live) =
            (0..self.pages_per_block as usize).find(|&live| !self.sealed_by_valid[live].is_empty())
        else {
            return false;
        };
        let victim = *self.sealed_by_valid[live].last().expect("non-empty bucket");
        self.unseal(victim);
        let first_page = victim * self.pages_per_block;
        for page in first_page..first_page + self.pages_per_block {
            let logical = self.page_logical[page as usize];
            if logical == NONE {
                continue;
            }
            let Some(destination) = self.allocate(true) else {
                return false;
            };
            self.place(logical, destination);
            self.copied_pages += 1;
        }
        assert_eq!(
            self.valid[victim as usize], 0,
            "a collected block holds no live page"
        );
        self.erase_counts[victim as usize] += 1;
        self.programmed_pages[victim as usize] = 0;
        let die = self.die_of_block[victim as usize];
        self.free_by_die[die as usize].insert((self.erase_counts[victim as usize], victim));
        self.free_count += 1;
        self.victims += 1;
        true
    }
}

fn run_direct(
    ftl: &mut Ftl,
    filled_pages: u64,
    overwrites: u64,
    seed: u64,
) -> Result<(u64, u64, u64, bool), PreconditionError> {
    if ftl.backend.keeps_data() {
        return Err(PreconditionError::ArrayKeepsData {
            device: ftl.info().name.to_string(),
        });
    }
    ftl.run_until_quiet();
    let mut model = DirectModel::from_ftl(ftl);
    for logical in 0..filled_pages {
        model.write_host_page(logical as u32)?;
    }
    let mut generator = SplitMix64::new(seed);
    for _ in 0..overwrites {
        model.write_host_page(generator.below(filled_pages) as u32)?;
    }
    let array_marked = install(ftl, &model);
    ftl.stats.host_pages_written += model.host_pages;
    ftl.stats.gc_pages_copied += model.copied_pages;
    ftl.stats.gc_victims += model.victims;
    ftl.stats.erases += model.victims;
    Ok((
        model.host_pages,
        model.copied_pages,
        model.victims,
        array_marked,
    ))
}

/// Installs the model's end state in the FTL: erase counts, the free sets, every block
/// that holds data sealed, and one identity per mapped logical page.
fn install(ftl: &mut Ftl, model: &DirectModel) -> bool {
    for set in &mut ftl.allocator.free_by_die {
        set.clear();
    }
    ftl.allocator.free_block_count = 0;
    let now_ns = ftl.backend.now_ns();
    let mut array_marked = true;
    let free: BTreeSet<u32> = model
        .free_by_die
        .iter()
        .flat_map(|set| set.iter().map(|&(_, block)| block))
        .collect();
    for block in 0..model.usable.len() as u32 {
        if !model.usable[block as usize] {
            continue;
        }
        let added_erases =
            model.erase_counts[block as usize] - ftl.blocks[block as usize].erase_count;
        let programmed_pages = model.programmed_pages[block as usize];
        if programmed_pages > 0 || added_erases > 0 {
            let address = ftl.shape.address(block, 0);
            array_marked &=
                ftl.backend
                    .mark_block_programmed(address, programmed_pages, added_erases);
        }
        let info = &mut ftl.blocks[block as usize];
        info.erase_count = model.erase_counts[block as usize];
        if free.contains(&block) {
            ftl.add_free_block(block);
        } else {
            info.usage = BlockUse::Sealed;
            info.last_program_ns = now_ns;
        }
    }
    for (logical, &page) in model.map.iter().enumerate() {
        if page == NONE {
            continue;
        }
        let version = ftl.next_sequence;
        ftl.next_sequence += 1;
        let slot = ftl.mapping.new_identity(Identity {
            version,
            physical_page: page,
            references: 0,
            logical_origin: logical as u64,
            poisoned: false,
        });
        ftl.set_mapping(logical as u64, slot);
        ftl.claim_page(page, slot);
    }
    array_marked
}
