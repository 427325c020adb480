//! Collection pacing: the hard bound on how long a host page write waits for garbage
//! collection (issue #5, Build 2).
//!
//! Collection runs in the background whenever free blocks fall below the start
//! threshold. While it does, every host page issued charges the collection `q`
//! migrations of debt, `q = ceil(v / (P - v))` for the fullest victim in progress (`v`
//! valid pages of `P`: collecting it frees `P - v` pages for `v` copies, so this rate keeps
//! up). A host page is issued only when the debt is paid, so it waits for at most the
//! previous page's charge, never more than `K` migrations (`K` =
//! [`crate::FtlOptions::gc_migrations_per_host_page_max`], or sized from the geometry:
//! victims are only chosen among blocks whose rate is at most `K`, and a greedy victim
//! always is), or for one erase when the victims have no copies left. Debt is forgiven
//! when a victim's erase completes, when free blocks are back at the threshold, or when
//! no collection work is left that could pay it. The bound in virtual time follows from
//! the array's timing: `K x (one migration at the slowest program time) + one erase`
//! (docs/ftl.md, "Bound on host waits").

use std::collections::HashMap;

use flashpipe_flash::FlashConfig;

use crate::ftl::Ftl;

/// With pacing, collection starts this many blocks above the pacing threshold (it
/// starts a die count above the reserve without pacing).
const COLLECTION_LEAD_BLOCKS: u32 = 2;

/// Pacing state of one FTL.
#[derive(Debug, Clone, Default)]
pub(crate) struct CollectionPacing {
    /// K: the most migrations one host page may be held for (0: pacing off, no bound).
    pub(crate) migrations_per_host_page_max: u32,
    /// The bound on one host page's wait in virtual time (0 when pacing is off).
    pub(crate) wait_bound_ns: u64,
    /// Host pages are charged while free blocks are below this: the host floor (the
    /// reserve) plus a headroom for the victims in progress and the write points.
    pub(crate) threshold_blocks: u32,
    /// Migrations the collection owes the host pages already issued.
    debt_migrations: u32,
    /// Migrations per host page each policy victim in progress needs.
    victim_rates: HashMap<u32, u32>,
}

/// One migration at its slowest: command, array read, transfer out, decode, command,
/// transfer in, encode, the slowest program.
pub(crate) fn migration_ns_worst(config: &FlashConfig) -> u64 {
    let timing = &config.timing;
    2 * timing.command_address_ns
        + timing.array_read_ns
        + 2 * timing.page_transfer_ns
        + timing.ecc_decode_ns
        + timing.ecc_encode_ns
        + timing.program_ns_max
}

/// Migrations per host page that keep up with a victim holding `valid` of `pages`.
pub(crate) fn rate_for(valid: u32, pages: u32) -> u32 {
    if valid == 0 {
        return 0;
    }
    valid.div_ceil(pages.saturating_sub(valid).max(1))
}

impl Ftl {
    /// Sizes K and the wait bound once the block table is known (format and mount).
    pub(crate) fn size_collection_pacing(&mut self) {
        let pages = self.shape.pages_per_block;
        let quota_wanted = self.options.gc_migrations_per_host_page_max != Some(0);
        if quota_wanted {
            // Pacing keeps the host off the floor, so collection can start just above
            // the pacing threshold: blocks it would keep free are space for data.
            self.allocator.gc_target_free_blocks = (self.allocator.reserve_blocks
                + self.options.gc_pacing_headroom_blocks
                + COLLECTION_LEAD_BLOCKS)
                .min(self.allocator.gc_target_free_blocks);
        }
        self.pacing.threshold_blocks = (self.allocator.reserve_blocks
            + self.options.gc_pacing_headroom_blocks)
            .min(self.allocator.gc_target_free_blocks);
        let quota = match self.options.gc_migrations_per_host_page_max {
            Some(quota) => quota,
            None => self.migrations_per_host_page_for_geometry(),
        };
        let config = self.backend.config();
        let wait_bound_ns = if quota == 0 {
            0
        } else {
            u64::from(quota) * migration_ns_worst(config)
                + config.timing.erase_ns
                + u64::from(self.host_programs_in_flight_max())
                    * (config.timing.page_transfer_ns + config.timing.program_ns_max)
        };
        let threshold_blocks = self.pacing.threshold_blocks;
        self.pacing = CollectionPacing {
            migrations_per_host_page_max: quota.min(pages),
            wait_bound_ns,
            threshold_blocks,
            ..CollectionPacing::default()
        };
    }

    /// K from the worst greedy victim: while collecting, at least `S` sealed data blocks
    /// hold the logical pages, so the emptiest holds at most `L / S` of its pages; one
    /// extra migration covers the rounding of the per-die write points.
    fn migrations_per_host_page_for_geometry(&self) -> u32 {
        let pages = self.shape.pages_per_block;
        let good_blocks = self.blocks.iter().filter(|block| block.bad == 0).count() as u64;
        let held_back = u64::from(self.pacing.threshold_blocks)
            + 2 * u64::from(self.shape.die_count)
            + u64::from(self.allocator.metadata_reserve_blocks)
            + u64::from(self.options.gc_parallel_victims);
        let sealed_blocks = good_blocks.saturating_sub(held_back).max(1);
        let logical = self.mapping.map.len() as u64;
        let valid_max = logical
            .div_ceil(sealed_blocks)
            .min(u64::from(pages.saturating_sub(1))) as u32;
        (rate_for(valid_max, pages) + 1).clamp(1, pages)
    }

    /// Host page programs the FTL lets into the array at once (two per die: enough to
    /// keep every die busy): the most host work a migration can find queued ahead of it.
    pub(crate) fn host_programs_in_flight_max(&self) -> u32 {
        2 * self.shape.die_count
    }

    /// Whether the host has as many programs in the array as it may.
    pub(crate) fn host_programs_at_cap(&self) -> bool {
        self.host_programs_in_flight >= self.host_programs_in_flight_max()
    }

    /// K (0: pacing off).
    pub fn gc_migrations_per_host_page_max(&self) -> u32 {
        self.pacing.migrations_per_host_page_max
    }

    /// The bound on how long one host page write waits for collection, in virtual
    /// nanoseconds (None when pacing is off).
    pub fn host_write_wait_bound_ns(&self) -> Option<u64> {
        (self.pacing.migrations_per_host_page_max > 0).then_some(self.pacing.wait_bound_ns)
    }

    /// Whether a victim holding `valid` pages can be collected within the quota.
    pub(crate) fn victim_within_quota(&self, valid: u32) -> bool {
        let quota = self.pacing.migrations_per_host_page_max;
        quota == 0 || rate_for(valid, self.shape.pages_per_block) <= quota
    }

    /// Records the rate a policy victim needs (capped at K).
    pub(crate) fn pace_victim(&mut self, block: u32) {
        let quota = self.pacing.migrations_per_host_page_max;
        if quota == 0 {
            return;
        }
        let needed = rate_for(
            self.blocks[block as usize].valid_pages,
            self.shape.pages_per_block,
        );
        if needed > quota {
            self.stats.gc_pacing_rate_capped += 1;
        }
        self.pacing.victim_rates.insert(block, needed.min(quota));
    }

    /// A victim left the collection (erased or retired).
    pub(crate) fn victim_left(&mut self, block: u32) {
        self.pacing.victim_rates.remove(&block);
    }

    /// Whether the next host page must wait for migrations owed.
    pub(crate) fn host_page_held(&self) -> bool {
        self.pacing.debt_migrations > 0
    }

    /// Charges one issued host page while the collection is behind.
    pub(crate) fn charge_host_page(&mut self) {
        if self.allocator.free_block_count >= self.pacing.threshold_blocks {
            return;
        }
        let rate = self
            .pacing
            .victim_rates
            .values()
            .copied()
            .max()
            .unwrap_or(0);
        self.pacing.debt_migrations += rate;
        debug_assert!(
            self.pacing.debt_migrations <= self.pacing.migrations_per_host_page_max,
            "a host page is issued only with no debt"
        );
    }

    /// One live page of a victim stopped needing a copy (copied, or overwritten).
    pub(crate) fn pay_migration(&mut self) {
        self.pacing.debt_migrations = self.pacing.debt_migrations.saturating_sub(1);
    }

    /// Forgives the debt: an erase returned a block, free space is back at the
    /// threshold, or nothing is left that could pay.
    pub(crate) fn forgive_collection_debt(&mut self) {
        self.pacing.debt_migrations = 0;
    }

    /// Forgives the debt when the collection is no longer behind or has no copies left.
    pub(crate) fn settle_collection_debt(&mut self, copies_pending: bool) {
        if self.allocator.free_block_count >= self.pacing.threshold_blocks || !copies_pending {
            self.forgive_collection_debt();
        }
    }

    /// Records one host page's wait and checks it against the bound.
    pub(crate) fn record_host_page_wait(&mut self, waited_ns: u64) {
        self.stats.host_write_wait_ns_max = self.stats.host_write_wait_ns_max.max(waited_ns);
        self.stats.host_write_wait_ns_total += waited_ns;
        let bound_ns = self.pacing.wait_bound_ns;
        if self.pacing.migrations_per_host_page_max == 0 || waited_ns <= bound_ns {
            return;
        }
        self.stats.host_write_wait_bound_exceeded += 1;
        assert!(
            !self.options.check_host_write_wait_bound,
            "a host page waited {waited_ns} ns for collection, past the bound of {bound_ns} ns: {}",
            self.describe_state()
        );
    }
}
