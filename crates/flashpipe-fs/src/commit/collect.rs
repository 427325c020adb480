//! Garbage collection of the flash-aware layout (docs/design/29-flash-aware.md), run at
//! the start of a commit when free erased pages fall below the writes' reserve
//! (`FLASH_COLLECTION_RESERVE_ERASE_BLOCKS`) plus [`COLLECT_HEADROOM_ERASE_BLOCKS`] erase
//! blocks plus three times what the commit takes: the file system is the one collector,
//! and it knows which pages are live.
//!
//! Victims are the erase blocks with the most dead pages among those with no free page
//! left (greedy, as the FTL's default policy), at most [`MAX_VICTIMS`] a commit, taken
//! while their moves fit in the free pages and until their dead pages cover the
//! shortfall. Each live page must be accounted for: a data page is moved (read,
//! programmed to a new page, every pointer naming it repointed and a shared block's count
//! moved with it, its checksum unchanged); an indirect block has its file's map marked
//! changed, so the commit rewrites the chain elsewhere; a block of the last checkpoint is
//! released by the commit's new checkpoint anyway. A victim holding anything else (a
//! page no structure names) is passed over. After the
//! commit the victim's pages are all dead and it is erased at the commit's end.

use std::collections::{HashMap, HashSet};

use flashpipe_device::{Completion, IoBuf, Operation};

use crate::state::{State, COLLECT_HEADROOM_ERASE_BLOCKS, FLASH_COLLECTION_RESERVE_ERASE_BLOCKS};
/// Most victims one commit collects.
pub const MAX_VICTIMS: usize = 4;

/// One data page to move: where it is, and every (file, pointer index) naming it.
#[derive(Debug, Clone)]
pub(super) struct Move {
    from: u64,
    named_by: Vec<(u64, usize)>,
}

/// What collecting one victim takes: data pages to move, files whose indirect chain
/// lives in the victim.
#[derive(Debug, Default)]
pub(super) struct Collection {
    moves: Vec<Move>,
    chain_files: Vec<u64>,
}

/// Who names each page of the candidate erase blocks.
enum Owner {
    Data(Vec<(u64, usize)>),
    Chain(u64),
}

/// The collection to run now, if space is short and some victim can be collected
/// within the free pages (`commit_pages`: what the commit itself will take).
pub(super) fn choose(state: &State, commit_pages: u64) -> Option<Collection> {
    let flash = state.allocator.flash_pages()?;
    let pages = flash.pages_per_erase_block();
    let free = state.allocator.free_block_count();
    let target = (FLASH_COLLECTION_RESERVE_ERASE_BLOCKS + COLLECT_HEADROOM_ERASE_BLOCKS) * pages
        + 3 * commit_pages;
    if free >= target {
        return None;
    }
    let mut candidates: Vec<(u64, u64)> = flash
        .dead_counts()
        .filter(|&(erase_block, dead)| {
            dead < pages && !state.allocator.has_free_in(erase_block * pages, pages)
        })
        .collect();
    candidates.sort_unstable_by_key(|&(erase_block, dead)| (std::cmp::Reverse(dead), erase_block));
    candidates.truncate(4 * MAX_VICTIMS);
    let wanted: HashSet<u64> = candidates
        .iter()
        .map(|&(erase_block, _)| erase_block)
        .collect();
    let owners = owners_in(state, &wanted, pages);
    let checkpoint: HashSet<u64> = state.committed.blocks.iter().copied().collect();
    let mut chosen = Collection::default();
    let mut victims = 0;
    let mut reclaimed = 0;
    for (erase_block, dead) in candidates {
        if victims == MAX_VICTIMS || free + reclaimed >= target {
            break;
        }
        let Some(collection) = collect_block(state, erase_block, &owners, &checkpoint) else {
            continue;
        };
        let moves = (chosen.moves.len() + collection.moves.len()) as u64;
        if moves + commit_pages + pages > free {
            continue;
        }
        chosen.moves.extend(collection.moves);
        chosen.chain_files.extend(collection.chain_files);
        victims += 1;
        reclaimed += dead;
    }
    (victims > 0).then_some(chosen)
}

/// Owners of the pages of `wanted` erase blocks: every pointer naming a data page, or
/// the file whose indirect chain holds the page.
fn owners_in(state: &State, wanted: &HashSet<u64>, pages: u64) -> HashMap<u64, Owner> {
    let mut owners = HashMap::new();
    for (&inode_number, node) in state.files.iter() {
        for (index, &block) in node.pointers.iter().enumerate() {
            if block == 0 || !wanted.contains(&(block / pages)) {
                continue;
            }
            let owner = owners
                .entry(block)
                .or_insert_with(|| Owner::Data(Vec::new()));
            if let Owner::Data(named_by) = owner {
                named_by.push((inode_number, index));
            }
        }
        for &block in &node.indirect_chain {
            if wanted.contains(&(block / pages)) {
                owners.insert(block, Owner::Chain(inode_number));
            }
        }
    }
    owners
}

fn collect_block(
    state: &State,
    erase_block: u64,
    owners: &HashMap<u64, Owner>,
    checkpoint: &HashSet<u64>,
) -> Option<Collection> {
    let flash = state.allocator.flash_pages()?;
    let pages = flash.pages_per_erase_block();
    let mut collection = Collection::default();
    for page in erase_block * pages..(erase_block + 1) * pages {
        if flash.is_dead(page) || checkpoint.contains(&page) {
            continue;
        }
        match owners.get(&page) {
            Some(Owner::Data(named_by))
                if named_by.len() as u64 == u64::from(state.shared.count(page)) =>
            {
                collection.moves.push(Move {
                    from: page,
                    named_by: named_by.clone(),
                })
            }
            Some(Owner::Chain(inode_number)) => collection.chain_files.push(*inode_number),
            _ => return None,
        }
    }
    Some(collection)
}

impl Collection {
    /// The reads of the pages to move (none: nothing to read).
    pub(super) fn reads(&self, state: &State) -> Vec<Operation> {
        let geometry = &state.geometry;
        self.moves
            .iter()
            .map(|data| Operation::Read {
                first_block: geometry.device_block(data.from),
                buffer: IoBuf::zeroed(geometry.fs_block_size_bytes as usize),
            })
            .collect()
    }

    /// New pages for the moved data, in ascending order, and their writes; the
    /// collection remembers where each went.
    pub(super) fn place(
        &mut self,
        state: &mut State,
        completions: Vec<Completion>,
    ) -> (Vec<u64>, Vec<(u64, IoBuf)>) {
        let count = self.moves.len() as u64;
        let targets: Vec<u64> = state
            .allocator
            .allocate(count)
            .expect("the victim was chosen within the free pages")
            .into_iter()
            .flat_map(|(first, length)| first..first + length)
            .collect();
        let writes = targets
            .iter()
            .zip(completions)
            .map(|(&target, completion)| {
                let buffer = completion.buffer.expect("a read hands its buffer back");
                (target, buffer)
            })
            .collect();
        (targets, writes)
    }

    /// The moved pages are programmed: pointers name the new pages (checksums
    /// unchanged), the old pages are released, the files and chains rewritten by the
    /// commit.
    pub(super) fn repoint(self, state: &mut State, targets: &[u64]) {
        for (data, &target) in self.moves.iter().zip(targets) {
            for &(inode_number, index) in &data.named_by {
                let node = state
                    .files
                    .get_mut(&inode_number)
                    .expect("a moved page's file exists");
                node.pointers[index] = target;
                node.map_changed = true;
            }
            state.shared.relocate(data.from, target);
            state.allocator.release(data.from);
        }
        for inode_number in self.chain_files {
            if let Some(node) = state.files.get_mut(&inode_number) {
                node.map_changed = true;
            }
        }
        state.allocator.count_moves(targets.len() as u64);
        state.changed_since_commit = true;
    }

    /// True when no data page moves (only chains are rewritten).
    pub(super) fn moves_nothing(&self) -> bool {
        self.moves.is_empty()
    }
}
