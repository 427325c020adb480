//! Garbage collection: victims chosen by the policy (greedy or cost-benefit) while free
//! blocks are below the start threshold, rescues of blocks that failed a program, the
//! relocation of each live page (read, program elsewhere, remap; or, where the flash
//! offers copy-back and the collection stream's open block of the page's die is in the
//! page's plane, one copy-back inside the die), and the erase that returns a victim to
//! the free set.
//!
//! Invariants:
//! - a victim's page is released only after its copy is acknowledged; a page that stopped
//!   being live meanwhile (overwritten, trimmed) is not copied, or its copy is dropped;
//! - a copy-back in flight counts as a read of its source block and a program of its
//!   destination block, so neither is erased before its ack; a failed copy-back retires
//!   the destination block and the page is moved by read and program instead;
//! - a block is erased only with no live page, no read and no program in flight
//!   (`finish_victims`); a retired block is never erased;
//! - a page the ECC cannot correct is read [`GC_READ_ATTEMPTS`] times, then moved with
//!   the poisoned flag, so later host reads fail instead of returning garbage;
//! - `pending_relocations` (pages read and waiting for a free page of the collection
//!   stream) holds at most one entry per physical page: a victim's page is read once,
//!   and a stale entry is dropped at the next `drive` before its block can be erased,
//!   reused and collected again. Its bound, the device's page count, is asserted on push;
//! - every migration and erase pays the pacing debt a host page was charged
//!   ([`crate::pacing`]).

use std::collections::VecDeque;

use flashpipe_flash::{Ack, AckStatus};

use super::submission::RawJob;
use super::{BlockUse, Ftl, Stream, VictimPolicy, NONE};
use crate::layout::{PageKind, SpareRecord};

/// Reads of a page that fail the ECC are retried this often by garbage collection.
const GC_READ_ATTEMPTS: u32 = 3;

/// A live page on its way from a victim to a fresh page.
#[derive(Debug, Clone)]
pub(crate) struct Relocation {
    pub(crate) identity: u32,
    pub(crate) from_page: u32,
    pub(crate) data: Vec<u8>,
    pub(crate) poisoned: bool,
}

/// The state collection owns.
pub(crate) struct Collector {
    /// Blocks being collected (policy victims, rescues, wear-leveling moves, recycled
    /// metadata blocks).
    pub(crate) victims: Vec<u32>,
    /// Pages read and waiting for a page of the collection stream.
    pub(crate) pending_relocations: VecDeque<Relocation>,
    /// Most entries `pending_relocations` can hold: the device's physical pages.
    pub(crate) pending_relocations_bound: usize,
    /// Blocks that failed a program while holding data, waiting for their programs in
    /// flight to drain before their live pages are rescued.
    pub(crate) rescue_pending: Vec<u32>,
    /// Since when victims have been open (for `gc_busy_ns`).
    pub(crate) busy_since_ns: Option<u64>,
}

impl Collector {
    pub(crate) fn new(physical_pages: u32) -> Collector {
        Collector {
            victims: Vec::new(),
            pending_relocations: VecDeque::new(),
            pending_relocations_bound: physical_pages as usize,
            rescue_pending: Vec::new(),
            busy_since_ns: None,
        }
    }

    pub(crate) fn push_pending_relocation(&mut self, relocation: Relocation) {
        assert!(
            self.pending_relocations.len() < self.pending_relocations_bound,
            "relocation of page {} queued with {} pending: past the bound of one per physical \
             page ({})",
            relocation.from_page,
            self.pending_relocations.len(),
            self.pending_relocations_bound
        );
        self.pending_relocations.push_back(relocation);
    }
}

impl Ftl {
    pub(crate) fn drive_collection(&mut self) {
        self.start_rescues();
        self.check_static_wear_leveling();
        self.start_policy_victims();
        self.retry_pending_relocations();
        self.finish_victims();
        let copies_pending = !self.collector.pending_relocations.is_empty()
            || self
                .collector
                .victims
                .iter()
                .any(|&block| self.blocks[block as usize].valid_pages > 0);
        self.settle_collection_debt(copies_pending);
        let now_ns = self.backend.now_ns();
        match (
            self.collector.victims.is_empty(),
            self.collector.busy_since_ns,
        ) {
            (false, None) => self.collector.busy_since_ns = Some(now_ns),
            (true, Some(since)) => {
                self.stats.gc_busy_ns += now_ns - since;
                self.collector.busy_since_ns = None;
            }
            _ => {}
        }
    }

    /// Starts victims chosen by the policy while free blocks are below the start
    /// threshold; also called between the pages of a host write, so that pacing knows
    /// the rate it must charge as soon as free space runs low.
    pub(crate) fn start_policy_victims(&mut self) {
        while self.allocator.free_block_count < self.allocator.gc_target_free_blocks
            && (self.collector.victims.len() as u32) < self.options.gc_parallel_victims
        {
            let Some(victim) = self.select_victim() else {
                break;
            };
            self.blocks[victim as usize].usage = BlockUse::Victim;
            self.collector.victims.push(victim);
            self.stats.gc_victims += 1;
            self.pace_victim(victim);
            self.start_victim(victim);
        }
    }

    /// The policy's victim among blocks whose copies fit the pacing quota, or among all
    /// candidates when none does.
    pub(crate) fn select_victim(&self) -> Option<u32> {
        self.select_victim_among(true)
            .or_else(|| self.select_victim_among(false))
    }

    pub(crate) fn select_victim_among(&self, within_quota_only: bool) -> Option<u32> {
        let pages = self.shape.pages_per_block;
        let now_ns = self.backend.now_ns();
        let candidates = self.blocks.iter().enumerate().filter(|(_, block)| {
            block.usage == BlockUse::Sealed
                && block.programs_in_flight == 0
                && block.valid_pages < pages
                && (!within_quota_only || self.victim_within_quota(block.valid_pages))
        });
        match self.options.victim_policy {
            VictimPolicy::Greedy => candidates
                .min_by_key(|(index, block)| (block.valid_pages, *index))
                .map(|(index, _)| index as u32),
            VictimPolicy::CostBenefit => candidates
                .map(|(index, block)| {
                    let utilization = f64::from(block.valid_pages) / f64::from(pages);
                    let age = (now_ns - block.last_program_ns) as f64 + 1.0;
                    let score = if block.valid_pages == 0 {
                        f64::INFINITY
                    } else {
                        age * (1.0 - utilization) / (2.0 * utilization)
                    };
                    (index, score)
                })
                .max_by(|left, right| left.1.total_cmp(&right.1))
                .map(|(index, _)| index as u32),
        }
    }

    /// Starts moving the live pages off retired blocks once their programs have drained.
    pub(crate) fn start_rescues(&mut self) {
        let mut index = 0;
        while index < self.collector.rescue_pending.len() {
            let block = self.collector.rescue_pending[index];
            if self.blocks[block as usize].programs_in_flight == 0 {
                self.collector.rescue_pending.swap_remove(index);
                self.collector.victims.push(block);
                self.start_victim(block);
            } else {
                index += 1;
            }
        }
    }

    pub(crate) fn start_victim(&mut self, block: u32) {
        for page in 0..self.shape.pages_per_block {
            let physical_page = self.shape.physical_page(block, page);
            let identity = self.mapping.page_identity[physical_page as usize];
            if identity != NONE {
                if self.try_copy_back(physical_page, identity) {
                    continue;
                }
                self.submit_read(
                    physical_page,
                    RawJob::GcRead {
                        physical_page,
                        identity,
                        attempt: 1,
                    },
                );
            }
        }
    }

    /// Moves the live page `from_page` by copy-back when the flash offers it, the backend
    /// keeps no data (the spare record's checksum covers the page data, which a copy-back
    /// never brings to the controller) and the collection stream's next page in the
    /// page's die is in its plane; false when the page must be read and programmed.
    pub(crate) fn try_copy_back(&mut self, from_page: u32, identity: u32) -> bool {
        let config = self.backend.config();
        if !config.timing.copy_back || self.backend.keeps_data() {
            return false;
        }
        let single_plane = config.geometry.planes == 1;
        let blocks_per_plane = config.geometry.blocks_per_plane;
        let from_block = self.shape.block_of(from_page);
        let die = self.shape.die_of(from_block);
        let same_plane = |shape: &crate::layout::Shape, block: u32| {
            let (from, to) = (shape.address(from_block, 0), shape.address(block, 0));
            from.block / blocks_per_plane == to.block / blocks_per_plane
        };
        let open_block = self.allocator.open_block(Stream::Collection, die);
        let placeable = match open_block {
            Some(block) => same_plane(&self.shape, block),
            None => single_plane,
        };
        if !placeable {
            return false;
        }
        let Some(physical_page) = self.allocate_in(Stream::Collection, die) else {
            return false;
        };
        let to_block = self.shape.block_of(physical_page);
        assert!(
            self.shape.die_of(to_block) == die && same_plane(&self.shape, to_block),
            "a copy-back stays in its die and plane"
        );
        let entry = self.mapping.identities[identity as usize];
        let record = SpareRecord {
            kind: PageKind::Data,
            poisoned: entry.poisoned,
            field_a: entry.logical_origin,
            field_b: entry.version,
            program_sequence: 0,
            erase_count: 0,
        };
        self.stats.gc_pages_copied += 1;
        self.stats.gc_copy_backs += 1;
        let relocation = Relocation {
            identity,
            from_page,
            data: Vec::new(),
            poisoned: entry.poisoned,
        };
        let job = RawJob::GcCopyBack {
            relocation,
            physical_page,
        };
        self.submit_copy_back(from_page, physical_page, record, job);
        true
    }

    /// A copy-back's ack: done, it is a relocation's program acknowledged; failed, the
    /// destination block is retired and the page, if still live, is read and programmed.
    pub(crate) fn gc_copy_back_done(
        &mut self,
        ack: Ack,
        relocation: Relocation,
        physical_page: u32,
    ) {
        self.read_finished(relocation.from_page);
        if ack.status.is_ok() {
            self.gc_program_done(ack, relocation, physical_page);
            return;
        }
        self.program_finished(physical_page);
        self.retire_block(self.shape.block_of(physical_page));
        self.stats.programs_reissued += 1;
        self.stats.gc_pages_copied -= 1;
        self.stats.gc_copy_backs -= 1;
        let Relocation {
            identity,
            from_page,
            ..
        } = relocation;
        if self.mapping.page_identity[from_page as usize] != identity {
            self.pay_migration();
            return;
        }
        self.submit_read(
            from_page,
            RawJob::GcRead {
                physical_page: from_page,
                identity,
                attempt: 1,
            },
        );
    }

    pub(crate) fn relocate(&mut self, relocation: Relocation) {
        let live = self.mapping.page_identity[relocation.from_page as usize] == relocation.identity;
        if !live {
            self.backend.recycle_page_buffer(relocation.data);
            self.pay_migration();
            return;
        }
        let Some(physical_page) = self.allocate_page(Stream::Collection) else {
            self.collector.push_pending_relocation(relocation);
            return;
        };
        let entry = self.mapping.identities[relocation.identity as usize];
        let record = SpareRecord {
            kind: PageKind::Data,
            poisoned: relocation.poisoned,
            field_a: entry.logical_origin,
            field_b: entry.version,
            program_sequence: 0,
            erase_count: 0,
        };
        self.stats.gc_pages_copied += 1;
        // The relocation keeps its copy until the ack (a failed program is done again
        // elsewhere); the program takes a pooled buffer with room for the raw page.
        let mut data = Vec::new();
        if !relocation.data.is_empty() {
            data = self.backend.take_page_buffer();
            data.extend_from_slice(&relocation.data);
        }
        let job = RawJob::GcProgram {
            relocation,
            physical_page,
        };
        self.submit_program(physical_page, record, data, job);
    }

    pub(crate) fn retry_pending_relocations(&mut self) {
        let pending = self.collector.pending_relocations.len();
        for _ in 0..pending {
            let Some(relocation) = self.collector.pending_relocations.pop_front() else {
                return;
            };
            self.relocate(relocation);
        }
    }

    pub(crate) fn finish_victims(&mut self) {
        let mut index = 0;
        while index < self.collector.victims.len() {
            let block = self.collector.victims[index];
            let info = self.blocks[block as usize];
            if info.valid_pages == 0 && info.reads_in_flight == 0 && info.programs_in_flight == 0 {
                self.collector.victims.swap_remove(index);
                self.victim_left(block);
                if info.bad != 0 {
                    self.blocks[block as usize].usage = BlockUse::Retired;
                } else {
                    self.submit_erase(block);
                }
            } else {
                index += 1;
            }
        }
    }

    pub(crate) fn gc_read_done(
        &mut self,
        ack: Ack,
        physical_page: u32,
        identity: u32,
        attempt: u32,
    ) {
        self.read_finished(physical_page);
        if self.mapping.page_identity[physical_page as usize] != identity {
            if let Some(data) = ack.data {
                self.backend.recycle_page_buffer(data);
            }
            self.pay_migration();
            return;
        }
        let poisoned = self.mapping.identities[identity as usize].poisoned;
        let (data, poisoned) = match ack.status {
            AckStatus::Ok { .. } => (ack.data.unwrap_or_default(), poisoned),
            _ if attempt < GC_READ_ATTEMPTS => {
                self.submit_read(
                    physical_page,
                    RawJob::GcRead {
                        physical_page,
                        identity,
                        attempt: attempt + 1,
                    },
                );
                return;
            }
            _ => {
                self.stats.uncorrectable_reads += 1;
                (ack.data.unwrap_or_else(|| self.empty_page()), true)
            }
        };
        let data = if self.backend.keeps_data() && data.is_empty() {
            self.empty_page()
        } else {
            data
        };
        self.relocate(Relocation {
            identity,
            from_page: physical_page,
            data,
            poisoned,
        });
    }

    pub(crate) fn gc_program_done(&mut self, ack: Ack, relocation: Relocation, physical_page: u32) {
        self.program_finished(physical_page);
        if !ack.status.is_ok() {
            self.retire_block(self.shape.block_of(physical_page));
            self.stats.programs_reissued += 1;
            self.stats.gc_pages_copied -= 1;
            self.relocate(relocation);
            return;
        }
        self.pay_migration();
        let Relocation {
            identity,
            from_page,
            poisoned,
            data,
        } = relocation;
        self.backend.recycle_page_buffer(data);
        if self.mapping.page_identity[from_page as usize] != identity {
            return;
        }
        self.mapping.page_identity[from_page as usize] = NONE;
        let from_block = self.shape.block_of(from_page);
        self.blocks[from_block as usize].valid_pages -= 1;
        let entry = &mut self.mapping.identities[identity as usize];
        entry.physical_page = physical_page;
        entry.poisoned = poisoned;
        self.claim_page(physical_page, identity);
    }

    pub(crate) fn erase_done(&mut self, ack: Ack, block: u32) {
        self.forgive_collection_debt();
        self.stats.erases += 1;
        self.wear.erases_since_check += 1;
        self.blocks[block as usize].erase_count += 1;
        if ack.status.is_ok() {
            self.add_free_block(block);
            if self.options.check_after_collection {
                if let Err(problem) = self.check_invariants() {
                    panic!("after collecting block {block}: {problem}");
                }
            }
        } else {
            let info = &mut self.blocks[block as usize];
            info.bad = 2;
            info.usage = BlockUse::Retired;
            self.stats.grown_bad_blocks += 1;
        }
    }
}
