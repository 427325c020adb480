//! Mapping: logical page -> identity slot -> (version, physical page, references).
//!
//! An identity is one written version of one logical page's data. Garbage collection
//! moves it (its physical page changes, its version does not); copies by reference make
//! several logical pages point at it (its reference count grows).
//!
//! Invariants (checked by `check_invariants`):
//! - an identity's `references` is the number of logical pages mapped to it;
//! - a live identity (references > 0) lives on exactly one physical page, and
//!   `page_identity` of that page points back at it;
//! - a block's `valid_pages` is the number of live identities on it;
//! - a slot is in `free_identities` exactly when it has no references and no page;
//! - the map changes only when the operation that changes it is durable.

use super::{Ftl, NONE};

/// One version of one logical page's data and where it lives.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Identity {
    pub(crate) version: u64,
    pub(crate) physical_page: u32,
    pub(crate) references: u32,
    pub(crate) logical_origin: u64,
    pub(crate) poisoned: bool,
}

/// The state mapping owns.
pub(crate) struct Mapping {
    /// Logical page -> identity slot (NONE: unmapped).
    pub(crate) map: Vec<u32>,
    pub(crate) identities: Vec<Identity>,
    /// Slots of `identities` free for reuse.
    pub(crate) free_identities: Vec<u32>,
    /// Physical page -> the live identity on it (NONE: none).
    pub(crate) page_identity: Vec<u32>,
}

impl Mapping {
    pub(crate) fn new(logical_pages: u64, physical_pages: u32) -> Mapping {
        Mapping {
            map: vec![NONE; logical_pages as usize],
            identities: Vec::new(),
            free_identities: Vec::new(),
            page_identity: vec![NONE; physical_pages as usize],
        }
    }

    /// The version `logical` holds (0: unmapped), as checkpoints record it.
    pub(crate) fn version_of(&self, logical: usize) -> u64 {
        match self.map[logical] {
            NONE => 0,
            slot => self.identities[slot as usize].version,
        }
    }

    /// Stores a new identity in a free slot (or a new one) and returns the slot; it has
    /// no references until a logical page is mapped to it.
    pub(crate) fn new_identity(&mut self, identity: Identity) -> u32 {
        match self.free_identities.pop() {
            Some(slot) => {
                self.identities[slot as usize] = identity;
                slot
            }
            None => {
                self.identities.push(identity);
                (self.identities.len() - 1) as u32
            }
        }
    }
}

impl Ftl {
    /// Points `logical` at `slot` (NONE unmaps), releasing the previous identity.
    pub(crate) fn set_mapping(&mut self, logical: u64, slot: u32) {
        let previous = std::mem::replace(&mut self.mapping.map[logical as usize], slot);
        if slot != NONE {
            self.mapping.identities[slot as usize].references += 1;
        }
        if previous != NONE {
            self.release_identity(previous);
        }
    }

    pub(crate) fn release_identity(&mut self, slot: u32) {
        let identity = &mut self.mapping.identities[slot as usize];
        assert!(identity.references > 0, "identity {slot} released twice");
        identity.references -= 1;
        if identity.references > 0 {
            return;
        }
        let page = identity.physical_page;
        assert_eq!(self.mapping.page_identity[page as usize], slot);
        self.mapping.page_identity[page as usize] = NONE;
        let block = self.shape.block_of(page);
        self.blocks[block as usize].valid_pages -= 1;
        self.mapping.free_identities.push(slot);
    }

    pub(crate) fn claim_page(&mut self, physical_page: u32, slot: u32) {
        assert_eq!(
            self.mapping.page_identity[physical_page as usize], NONE,
            "physical page {physical_page} holds two live identities"
        );
        self.mapping.page_identity[physical_page as usize] = slot;
        let block = self.shape.block_of(physical_page);
        self.blocks[block as usize].valid_pages += 1;
        assert!(self.blocks[block as usize].valid_pages <= self.shape.pages_per_block);
    }
}
