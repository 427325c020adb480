//! The checks: `check_invariants` (the map against the block table: docs/ftl.md,
//! invariants 1 to 4), run after every collected block when `check_after_collection` is
//! set and by tests after mounts; `describe_state`, the one-line account errors carry.

use std::collections::{BTreeSet, HashMap};

use super::{BlockUse, Ftl, NONE};

impl Ftl {
    /// A one-line account of the allocator and collector, for errors and debugging.
    pub fn describe_state(&self) -> String {
        let mut usage: HashMap<String, u32> = HashMap::new();
        for block in &self.blocks {
            *usage.entry(format!("{:?}", block.usage)).or_insert(0) += 1;
        }
        let sealed_valid: Vec<u32> = self
            .blocks
            .iter()
            .filter(|block| block.usage == BlockUse::Sealed)
            .map(|block| block.valid_pages)
            .collect();
        format!(
            "free {} (reserve {}, target {}), usage {:?}, victims {:?}, pending relocations {}, \
             rescues {:?}, checkpoint wanted {} writing {}, mutations {}, log pending {}, \
             waiting ops {} (head {:?}), busy pages {}, jobs {}, backlog {}, sealed valid {:?}, \
             free by die {:?}, open {:?}",
            self.allocator.free_block_count,
            self.allocator.reserve_blocks,
            self.allocator.gc_target_free_blocks,
            usage,
            self.collector
                .victims
                .iter()
                .map(|&block| (block, self.blocks[block as usize].valid_pages))
                .collect::<Vec<_>>(),
            self.collector.pending_relocations.len(),
            self.collector.rescue_pending,
            self.checkpoint.wanted,
            self.checkpoint.write.is_some(),
            self.host.mutations_active,
            self.log.pending.len(),
            self.host.waiting.len(),
            self.host
                .waiting
                .front()
                .and_then(|id| self.host.ops.get(id))
                .map(|op| (
                    op.kind,
                    op.first,
                    op.count,
                    op.source,
                    op.pages_issued,
                    op.pages_left
                )),
            self.host.busy_logical.len(),
            self.raw.jobs.len(),
            self.raw.backlog.len(),
            sealed_valid,
            self.allocator
                .free_by_die
                .iter()
                .map(BTreeSet::len)
                .collect::<Vec<_>>(),
            self.allocator.open_blocks
        )
    }

    /// Checks the map against the block table (tests call it after collections).
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut references = vec![0u32; self.mapping.identities.len()];
        for &slot in &self.mapping.map {
            if slot != NONE {
                references[slot as usize] += 1;
            }
        }
        let mut valid = vec![0u32; self.blocks.len()];
        let mut free = vec![false; self.mapping.identities.len()];
        for &slot in &self.mapping.free_identities {
            free[slot as usize] = true;
        }
        for (slot, identity) in self.mapping.identities.iter().enumerate() {
            if free[slot] {
                continue;
            }
            if identity.references != references[slot] {
                return Err(format!(
                    "identity {slot}: {} references recorded, {} in the map",
                    identity.references, references[slot]
                ));
            }
            if identity.references > 0 {
                if self.mapping.page_identity[identity.physical_page as usize] != slot as u32 {
                    return Err(format!(
                        "identity {slot} (version {}) is not on its page {}",
                        identity.version, identity.physical_page
                    ));
                }
                valid[self.shape.block_of(identity.physical_page) as usize] += 1;
            }
        }
        for (block, info) in self.blocks.iter().enumerate() {
            if info.valid_pages != valid[block] {
                return Err(format!(
                    "block {block}: {} valid pages recorded, {} live",
                    info.valid_pages, valid[block]
                ));
            }
            if info.usage == BlockUse::Free && info.valid_pages != 0 {
                return Err(format!("free block {block} holds live pages"));
            }
        }
        let live_pages = self
            .mapping
            .page_identity
            .iter()
            .filter(|&&slot| slot != NONE)
            .count();
        let live_identities = references.iter().filter(|&&count| count > 0).count();
        if live_pages != live_identities {
            return Err(format!(
                "{live_pages} live pages but {live_identities} live identities (lost or duplicated)"
            ));
        }
        Ok(())
    }
}
