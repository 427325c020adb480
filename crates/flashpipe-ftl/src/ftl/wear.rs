//! Wear leveling. Dynamic: allocation takes the least-worn free block of a die
//! ([`super::allocation`]). Static (this module): every [`WEAR_CHECK_ERASE_INTERVAL`]
//! erases, if the spread between the most-worn good block and the least-worn sealed or
//! metadata block exceeds `static_wear_leveling_spread`, that cold block is collected (its
//! data moves to a worn block through the collection stream, and the block goes back to
//! the free set, where it is picked first); a cold checkpoint or log block is moved by
//! asking for the next checkpoint early.
//!
//! Invariants: a wear-leveling move never takes the collection past
//! `gc_parallel_victims`, never starts at or below the host reserve of free blocks, and
//! never picks a block with a program in flight.

use super::{BlockUse, Ftl};

/// Erases between two checks of the erase-count spread.
const WEAR_CHECK_ERASE_INTERVAL: u32 = 8;

/// The state static wear leveling owns.
#[derive(Default)]
pub(crate) struct WearLeveler {
    /// Erases since the last check of the spread.
    pub(crate) erases_since_check: u32,
}

impl Ftl {
    pub(crate) fn check_static_wear_leveling(&mut self) {
        let Some(spread) = self.options.static_wear_leveling_spread else {
            return;
        };
        if self.wear.erases_since_check < WEAR_CHECK_ERASE_INTERVAL
            || self.collector.victims.len() as u32 >= self.options.gc_parallel_victims
        {
            return;
        }
        self.wear.erases_since_check = 0;
        let good = self
            .blocks
            .iter()
            .filter(|block| block.usage != BlockUse::Retired);
        let max_erases = good.map(|block| block.erase_count).max().unwrap_or(0);
        let coldest = self
            .blocks
            .iter()
            .enumerate()
            .filter(|(_, block)| {
                block.programs_in_flight == 0
                    && matches!(
                        block.usage,
                        BlockUse::Sealed | BlockUse::Checkpoint | BlockUse::Log
                    )
            })
            .min_by_key(|(_, block)| block.erase_count);
        let Some((coldest, block)) = coldest else {
            return;
        };
        if max_erases - block.erase_count <= spread
            || self.allocator.free_block_count <= self.allocator.reserve_blocks
        {
            return;
        }
        if block.usage != BlockUse::Sealed {
            // Metadata blocks move when the next checkpoint supersedes them.
            if self.checkpoint.write.is_none() {
                self.checkpoint.wanted = true;
            }
            return;
        }
        let coldest = coldest as u32;
        self.blocks[coldest as usize].usage = BlockUse::Victim;
        self.collector.victims.push(coldest);
        self.stats.static_wear_leveling_moves += 1;
        self.start_victim(coldest);
    }
}
