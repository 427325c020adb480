//! The in-memory file system: name index, inodes with their block maps, the allocator,
//! and the bookkeeping of what the last durable commit holds.
//!
//! Every structure of docs/format.md lives here between commits; `commit.rs` writes it
//! out, `image.rs` reads it back.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Index;
use std::sync::Arc;

use flashpipe_device::Clock;

use crate::allocator::Allocator;
use crate::attributes::{inode_record_header_bytes, FileAttributes};
use crate::flash_pages::{FlashChains, FlashRing};
use crate::io::{BufferRecycler, Geometry};
use crate::layout::SuperBlock;
use crate::layout::{
    fixed_entries_per_block, indirect_block_count, inode_record_bytes, FREE_EXTENT_BYTES,
    MAX_NAME_BYTES, METADATA_HEADER_BYTES, NAME_ENTRY_HEADER_BYTES, SHARED_EXTENT_BYTES,
};
use crate::shared::SharedCounts;

/// One file: its name, size and block map.
#[derive(Debug, Clone)]
pub struct FileNode {
    /// The file's name.
    pub name: Box<str>,
    /// File length.
    pub size_bytes: u64,
    /// Block pointers, `ceil(size / B)` of them; 0 is a hole.
    pub pointers: Vec<u64>,
    /// The CRC32C of each pointer's block, beside `pointers` (same length): `None` for a
    /// hole and for a block inherited from a version-1 image and not rewritten since.
    pub checksums: Vec<Option<u32>>,
    /// Blocks of the indirect chain as the last commit wrote them (empty if none or new).
    pub indirect_chain: Vec<u64>,
    /// True when the block map changed since the last commit (the chain is rewritten).
    pub map_changed: bool,
    /// Device clock at the last change.
    pub modified_clock_ns: u64,
    /// What the user set of its mode, owner and wall-clock time (version 6).
    pub attributes: FileAttributes,
}

impl FileNode {
    /// Bytes of the attribute fields its inode record carries: 0 when nothing is set.
    pub fn attribute_bytes(&self) -> usize {
        inode_record_header_bytes(self.attributes.flags()) - inode_record_header_bytes(0)
    }

    /// Bytes of its inode record.
    pub fn inode_record_bytes(&self) -> usize {
        inode_record_bytes(self.pointers.len() as u64) + self.attribute_bytes()
    }
}

/// Inode number -> file, remembering every inode changed, created or removed since the
/// last commit (every mutable access counts as a change), so that a commit can write a
/// log record of just those files (docs/format.md, "Metadata log"). It offers the
/// read methods of a `BTreeMap` under the same names.
#[derive(Debug, Default)]
pub struct FileTable {
    nodes: BTreeMap<u64, FileNode>,
    touched: BTreeSet<u64>,
}

impl FileTable {
    /// The file with inode `inode_number`.
    pub fn get(&self, inode_number: &u64) -> Option<&FileNode> {
        self.nodes.get(inode_number)
    }

    /// The file with inode `inode_number`, for a change (remembered as touched).
    pub fn get_mut(&mut self, inode_number: &u64) -> Option<&mut FileNode> {
        let node = self.nodes.get_mut(inode_number)?;
        self.touched.insert(*inode_number);
        Some(node)
    }

    /// Is there a file with inode `inode_number`?
    pub fn contains_key(&self, inode_number: &u64) -> bool {
        self.nodes.contains_key(inode_number)
    }

    /// Files.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True when there is no file.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Inode numbers, ascending.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &u64> + '_ {
        self.nodes.keys()
    }

    /// Files by ascending inode number.
    pub fn values(&self) -> impl Iterator<Item = &FileNode> + '_ {
        self.nodes.values()
    }

    /// `(inode number, file)` pairs, ascending.
    pub fn iter(&self) -> std::collections::btree_map::Iter<'_, u64, FileNode> {
        self.nodes.iter()
    }

    /// Adds or replaces a file (remembered as touched).
    pub fn insert(&mut self, inode_number: u64, node: FileNode) -> Option<FileNode> {
        self.touched.insert(inode_number);
        self.nodes.insert(inode_number, node)
    }

    /// Removes a file (remembered as touched).
    pub fn remove(&mut self, inode_number: &u64) -> Option<FileNode> {
        let node = self.nodes.remove(inode_number)?;
        self.touched.insert(*inode_number);
        Some(node)
    }

    /// Every file for a change that the caller accounts for itself (a checkpoint, which
    /// writes every file anyway): nothing is remembered.
    pub fn values_mut_untracked(&mut self) -> impl Iterator<Item = &mut FileNode> + '_ {
        self.nodes.values_mut()
    }

    /// `(inode number, file)` pairs for a change the caller accounts for itself.
    pub fn iter_mut_untracked(
        &mut self,
    ) -> std::collections::btree_map::IterMut<'_, u64, FileNode> {
        self.nodes.iter_mut()
    }

    /// Inodes changed, created or removed since the last commit.
    pub fn touched(&self) -> &BTreeSet<u64> {
        &self.touched
    }

    /// A commit wrote them all: nothing is touched any more.
    pub fn forget_touched(&mut self) {
        self.touched.clear();
    }
}

impl Index<&u64> for FileTable {
    type Output = FileNode;

    fn index(&self, inode_number: &u64) -> &FileNode {
        &self.nodes[inode_number]
    }
}

impl<'a> IntoIterator for &'a FileTable {
    type Item = (&'a u64, &'a FileNode);
    type IntoIter = std::collections::btree_map::Iter<'a, u64, FileNode>;

    fn into_iter(self) -> Self::IntoIter {
        self.nodes.iter()
    }
}

/// Running totals that size the next checkpoint without walking every file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MetadataTotals {
    /// Bytes of all name table entries.
    pub name_table_bytes: u64,
    /// Bytes of all inode records.
    pub inode_table_bytes: u64,
    /// Indirect blocks of all files.
    pub indirect_blocks: u64,
    /// Files with attributes set (their inode records are longer).
    pub attributed_files: u64,
}

impl MetadataTotals {
    /// Adds (or with `sign` false, removes) a file's share.
    pub fn account(
        &mut self,
        geometry: &Geometry,
        name_bytes: usize,
        pointer_count: u64,
        add: bool,
    ) {
        let name = (NAME_ENTRY_HEADER_BYTES + name_bytes) as u64;
        let inode = inode_record_bytes(pointer_count) as u64;
        let indirect = indirect_block_count(geometry.fs_block_size_bytes, pointer_count);
        if add {
            self.name_table_bytes += name;
            self.inode_table_bytes += inode;
            self.indirect_blocks += indirect;
        } else {
            self.name_table_bytes -= name;
            self.inode_table_bytes -= inode;
            self.indirect_blocks -= indirect;
        }
    }
}

/// What the last durable commit holds: its checkpoint and the log that extends it.
#[derive(Debug, Clone, Default)]
pub struct CommittedCheckpoint {
    /// Its commit sequence (0 before mkfs's first commit).
    pub sequence: u64,
    /// The inode number the next created file got after it: inodes below it that are
    /// gone now were removed since (a log record lists them).
    pub next_inode_number: u64,
    /// The checkpoint's table blocks (name table, inode table, free list, in map
    /// order), then its map blocks, then its log region: all released at the next
    /// checkpoint (a log commit keeps them).
    pub blocks: Vec<u64>,
    /// Its super block, once there is one (its log fields say how much of the region
    /// the log fills).
    pub super_block: Option<SuperBlock>,
    /// The checkpoint's log region, in order (empty before version 3).
    pub log_region: Vec<u64>,
}

/// Version 9 of the flash-aware layout: a whole log record past the log's end that the
/// mount's forward read refused because a chain page it wrote did not read back whole
/// (`image/scan_chains.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedRecord {
    /// The record's commit sequence.
    pub commit_sequence: u64,
    /// The chain pages examined for it (the one that failed last): kept unprogrammed
    /// until the next checkpoint is durable (`flash_layout::prepare_mount`).
    pub pages: Vec<u64>,
}

/// Erase blocks' worth of free pages the flash-aware layout keeps out of reach of writes,
/// for its collection (a victim's live pages and a commit always fit).
pub const FLASH_COLLECTION_RESERVE_ERASE_BLOCKS: u64 = 3;
/// Erase blocks' worth of free pages above the writes' reserve below which the
/// flash-aware layout's collection runs (`commit/collect.rs`).
pub const COLLECT_HEADROOM_ERASE_BLOCKS: u64 = 2;

/// The whole mounted file system except the device.
pub struct State {
    /// FS geometry.
    pub geometry: Geometry,
    /// The device's clock (timestamps only; never the wall clock).
    pub clock: Arc<dyn Clock>,
    /// Name -> inode number: the hash-indexed name table.
    pub names: HashMap<Box<str>, u64>,
    /// Inode number -> file, with the inodes touched since the last commit.
    pub files: FileTable,
    /// Free blocks, pending frees, fresh allocations.
    pub allocator: Allocator,
    /// The last durable commit.
    pub committed: CommittedCheckpoint,
    /// Inode number the next created file gets.
    pub next_inode_number: u64,
    /// Sizes of the metadata, for the space reserve.
    pub totals: MetadataTotals,
    /// True when something changed since the last commit.
    pub changed_since_commit: bool,
    /// True when the next commit must write a full checkpoint, not a log record (fsck
    /// repair).
    pub force_checkpoint: bool,
    /// True when every commit writes a full checkpoint (`CommitPolicy::CheckpointEveryCommit`).
    pub checkpoint_every_commit: bool,
    /// Set when a flush failed half-way; every later operation refuses.
    pub unusable_reason: Option<String>,
    /// Spare write buffers.
    pub buffers: BufferRecycler,
    /// The store identity every commit writes into the super block (format version 4):
    /// from mkfs, the mounted image, or [`crate::Filesystem::set_store_identity`].
    pub store_identity: Option<[u8; 16]>,
    /// Reference counts of data blocks shared by several pointers (format version 5).
    pub shared: SharedCounts,
    /// The commit ring of the flash-aware layout (format version 7); `None` in the
    /// ordinary layout.
    pub flash: Option<FlashRing>,
    /// The flash-aware layout's indirect chains as the flash holds them.
    pub flash_chains: FlashChains,
    /// Version 9: the whole record past the log's end that the mount refused because a
    /// chain page it wrote did not read back whole (`image/scan_chains.rs`).
    pub mount_refused_record: Option<RefusedRecord>,
}

impl State {
    /// An empty file system whose free blocks are `free_extents`.
    pub fn empty(geometry: Geometry, clock: Arc<dyn Clock>, free_extents: &[(u64, u64)]) -> State {
        State {
            geometry,
            clock,
            names: HashMap::new(),
            files: FileTable::default(),
            allocator: Allocator::from_free_extents(free_extents),
            committed: CommittedCheckpoint::default(),
            next_inode_number: 1,
            totals: MetadataTotals::default(),
            changed_since_commit: true,
            force_checkpoint: false,
            checkpoint_every_commit: false,
            unusable_reason: None,
            buffers: BufferRecycler::default(),
            store_identity: None,
            shared: SharedCounts::default(),
            flash: None,
            flash_chains: FlashChains::default(),
            mount_refused_record: None,
        }
    }

    /// One pointer to data block `block` goes away: the block is freed (copy-on-write
    /// rules of the allocator) when it was the last one, else its count drops.
    pub fn release_data_block(&mut self, block: u64) {
        if self.shared.drop_reference(block) {
            self.allocator.release(block);
        }
    }

    /// True when data block `block` may be overwritten in place: allocated since the last
    /// commit and referenced by one pointer only.
    pub fn writable_in_place(&self, block: u64) -> bool {
        self.flash.is_none() && self.allocator.is_fresh(block) && !self.shared.is_shared(block)
    }

    /// Blocks of the shared table a checkpoint writes when `shared_blocks` blocks are
    /// shared (each could be an extent of its own).
    pub fn shared_table_blocks(&self, shared_blocks: u64) -> u64 {
        let per_block =
            fixed_entries_per_block(self.geometry.fs_block_size_bytes, SHARED_EXTENT_BYTES) as u64;
        shared_blocks.div_ceil(per_block)
    }

    /// Adds a file (from mkfs, create or an image), keeping the index and totals right.
    pub fn insert_file(&mut self, inode_number: u64, node: FileNode) {
        assert_eq!(
            node.pointers.len(),
            node.checksums.len(),
            "inode {inode_number}: one checksum slot per pointer"
        );
        self.totals.account(
            &self.geometry,
            node.name.len(),
            node.pointers.len() as u64,
            true,
        );
        if !node.attributes.is_none() {
            self.totals.inode_table_bytes += node.attribute_bytes() as u64;
            self.totals.attributed_files += 1;
        }
        let previous_name = self.names.insert(node.name.clone(), inode_number);
        assert!(
            previous_name.is_none(),
            "name {:?} indexed twice",
            node.name
        );
        let previous_file = self.files.insert(inode_number, node);
        assert!(
            previous_file.is_none(),
            "inode {inode_number} inserted twice"
        );
    }

    /// Removes a file from the index and totals and returns it (its blocks are the
    /// caller's to release).
    pub fn remove_file(&mut self, inode_number: u64) -> FileNode {
        let node = self
            .files
            .remove(&inode_number)
            .expect("removing a live file");
        self.totals.account(
            &self.geometry,
            node.name.len(),
            node.pointers.len() as u64,
            false,
        );
        if !node.attributes.is_none() {
            self.totals.inode_table_bytes -= node.attribute_bytes() as u64;
            self.totals.attributed_files -= 1;
        }
        let removed = self.names.remove(&node.name);
        assert_eq!(removed, Some(inode_number));
        node
    }

    /// Changes a file's pointer count (holes appended or pointers dropped; the dropped
    /// pointers must already be released), keeping totals right.
    pub fn resize_pointers(&mut self, inode_number: u64, pointer_count: u64) {
        let node = self.files.get_mut(&inode_number).expect("live file");
        let name_bytes = node.name.len();
        let old_count = node.pointers.len() as u64;
        node.pointers.resize(pointer_count as usize, 0);
        node.checksums.resize(pointer_count as usize, None);
        node.map_changed = true;
        self.totals
            .account(&self.geometry, name_bytes, old_count, false);
        self.totals
            .account(&self.geometry, name_bytes, pointer_count, true);
    }

    /// Blocks the next commit may need with `totals`: every indirect chain, the name and
    /// inode tables rounded up generously, the largest free list this file system can
    /// have (every other block free), and the map.
    pub fn checkpoint_reserve_blocks(&self, totals: &MetadataTotals) -> u64 {
        let block_size = self.geometry.fs_block_size_bytes;
        let payload_bytes = (block_size as usize - METADATA_HEADER_BYTES) as u64;
        let largest_name_entry = (NAME_ENTRY_HEADER_BYTES + MAX_NAME_BYTES) as u64;
        let attribute_bytes = match totals.attributed_files {
            0 => 0,
            _ => inode_record_header_bytes(u32::MAX) - inode_record_header_bytes(0),
        };
        let largest_inode_record = (inode_record_bytes(u64::MAX) + attribute_bytes) as u64;
        let name_blocks = totals
            .name_table_bytes
            .div_ceil(payload_bytes - largest_name_entry)
            + 1;
        let inode_blocks = totals
            .inode_table_bytes
            .div_ceil(payload_bytes - largest_inode_record)
            + 1;
        let tables = name_blocks
            + inode_blocks
            + self.largest_free_list_blocks()
            + self.shared_table_blocks(self.shared.shared_block_count())
            + 1;
        let map_blocks = tables.div_ceil(fixed_entries_per_block(block_size, 8) as u64) + 1;
        tables + map_blocks + totals.indirect_blocks
    }

    /// Free list blocks when every other block is free (the most extents possible).
    pub fn largest_free_list_blocks(&self) -> u64 {
        let extents_per_block =
            fixed_entries_per_block(self.geometry.fs_block_size_bytes, FREE_EXTENT_BYTES) as u64;
        self.geometry
            .fs_block_count
            .div_ceil(2)
            .div_ceil(extents_per_block)
            + 1
    }

    /// Checks that `new_blocks` more blocks can be taken now while two checkpoints' worth
    /// stay free: one for the next commit, one for the commit after it (written while the
    /// next one is still live); in the flash-aware layout also the collection's reserve
    /// ([`FLASH_COLLECTION_RESERVE_ERASE_BLOCKS`] erase blocks), so that the commit's
    /// collection always has room to move a victim's live pages. Returns `(needed,
    /// free)` when they cannot.
    pub fn check_space(
        &self,
        new_blocks: u64,
        totals_after: &MetadataTotals,
    ) -> Result<(), (u64, u64)> {
        let collection_reserve = self.flash.as_ref().map_or(0, |ring| {
            FLASH_COLLECTION_RESERVE_ERASE_BLOCKS * ring.pages_per_erase_block
        });
        let needed =
            new_blocks + 2 * self.checkpoint_reserve_blocks(totals_after) + collection_reserve;
        let free = self.allocator.free_block_count();
        if needed > free {
            return Err((needed, free));
        }
        Ok(())
    }

    /// The current time on the device's clock.
    pub fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }
}

impl State {
    /// A name for orphan `inode_number` that no file has: `lost+found.<inode>`, with a
    /// suffix when that is taken.
    pub fn orphan_name(&self, inode_number: u64) -> Box<str> {
        let base = format!("lost+found.{inode_number}");
        let mut candidate = base.clone();
        let mut suffix = 1;
        while self.names.contains_key(candidate.as_str()) {
            candidate = format!("{base}.{suffix}");
            suffix += 1;
        }
        candidate.into()
    }
}
