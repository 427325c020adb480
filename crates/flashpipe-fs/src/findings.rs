//! What a check finds: the findings of the image loader and fsck ([`Finding`] about a
//! [`Structure`]), a damaged super block slot ([`DamagedSlot`]) and a damaged metadata log
//! record ([`LogDamage`]).
//!
//! Plain data with the sentences that describe it: a leaf of the module graph, so that the
//! errors, the loader and fsck all name these types without naming one another.

use std::fmt;

use crate::layout::SuperBlock;

/// The structure a finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Structure {
    /// A super block slot (blocks 0 and 1).
    SuperBlock,
    /// The checkpoint map chain.
    CheckpointMap,
    /// The name table (blocks or entries).
    NameTable,
    /// The inode table (blocks or records).
    InodeTable,
    /// A file's indirect chain.
    IndirectBlock,
    /// The free list.
    FreeList,
    /// Block ownership across all structures (doubly used, leaked, used and free).
    BlockAccounting,
    /// A file's data block whose content does not match its checksum (`fsck --data`).
    DataBlock,
    /// The metadata log (version 3): a record that cannot be replayed.
    Log,
    /// The shared table (version 5): reference counts of shared data blocks.
    SharedTable,
}

impl fmt::Display for Structure {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Structure::SuperBlock => "super block",
            Structure::CheckpointMap => "checkpoint map",
            Structure::NameTable => "name table",
            Structure::InodeTable => "inode table",
            Structure::IndirectBlock => "indirect block",
            Structure::FreeList => "free list",
            Structure::BlockAccounting => "block accounting",
            Structure::DataBlock => "data block",
            Structure::Log => "metadata log",
            Structure::SharedTable => "shared table",
        };
        formatter.write_str(name)
    }
}

/// One inconsistency.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What it is about.
    pub structure: Structure,
    /// The FS block concerned, when there is one.
    pub block: Option<u64>,
    /// What is wrong.
    pub problem: String,
    /// True when `fsck --repair` fixes it.
    pub repairable: bool,
}

impl Finding {
    /// A finding about `structure` at `block`.
    pub fn new(
        structure: Structure,
        block: Option<u64>,
        problem: String,
        repairable: bool,
    ) -> Finding {
        Finding {
            structure,
            block,
            problem,
            repairable,
        }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}", self.structure)?;
        if let Some(block) = self.block {
            write!(formatter, " (block {block})")?;
        }
        write!(formatter, ": {}", self.problem)?;
        if self.repairable {
            write!(formatter, " [repairable]")?;
        }
        Ok(())
    }
}

/// A super block slot that is not valid (or disagrees with the other) while the other
/// slot is valid: the mount refuses it, fsck reports it, and only `fsck --repair`
/// falls back to the valid slot's commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DamagedSlot {
    /// The damaged slot (0 or 1).
    pub slot: u64,
    /// What is wrong with it.
    pub problem: String,
    /// The commit sequence its bytes claim (offset 32), when it carries the magic; not
    /// to be trusted, since the slot is damaged.
    pub claimed_sequence: Option<u64>,
    /// The valid slot (the one a fallback uses).
    pub fallback_slot: u64,
    /// The commit the valid slot holds.
    pub fallback_sequence: u64,
    /// The damaged slot decoded with its checksum recomputed and its reserved bytes
    /// cleared, when its fields are sane then: the commit it probably held.
    pub salvaged: Option<SuperBlock>,
}

impl DamagedSlot {
    /// True unless the slot provably held an older commit than the fallback: its claimed
    /// sequence is unknown or larger. (A claimed sequence that is smaller is believed
    /// only as far as the damage allows; the mount refuses either way.)
    pub fn may_hold_newer_commit(&self) -> bool {
        self.claimed_sequence
            .is_none_or(|claimed| claimed > self.fallback_sequence)
    }

    /// One sentence: the damage, what the slot claims, and the commit a fallback uses.
    pub fn describe(&self) -> String {
        let claim = match self.claimed_sequence {
            None => "it may have held a newer commit".to_string(),
            Some(claimed) if claimed > self.fallback_sequence => {
                format!("it claims commit {claimed}, newer than the commit in use")
            }
            Some(claimed) => format!(
                "it claims commit {claimed}, not newer than commit {}",
                self.fallback_sequence
            ),
        };
        format!(
            "super block slot {} is damaged ({}); {claim}; slot {} holds commit {}",
            self.slot, self.problem, self.fallback_slot, self.fallback_sequence
        )
    }
}

/// The first log record that could not be replayed, and what is lost with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogDamage {
    /// The commit of the damaged record: the image is the commit before it.
    pub commit_sequence: u64,
    /// The newest commit the super block names (the last lost one).
    pub newest_sequence: u64,
    /// The damaged log block.
    pub block: u64,
    /// What is wrong.
    pub problem: String,
    /// Files created, changed or renamed by the lost records, as far as their blocks can
    /// still be read: `(inode number, name)`.
    pub lost_files: Vec<(u64, String)>,
    /// Inodes the lost records removed (those files come back).
    pub restored_inodes: Vec<u64>,
}

impl LogDamage {
    /// One sentence: what the loss is.
    pub fn describe(&self) -> String {
        let names: Vec<String> = self
            .lost_files
            .iter()
            .map(|(inode, name)| format!("{name:?} (inode {inode})"))
            .collect();
        let changed = if names.is_empty() {
            "no file named in a readable block".to_string()
        } else {
            names.join(", ")
        };
        let restored = if self.restored_inodes.is_empty() {
            String::new()
        } else {
            let inodes: Vec<String> = self.restored_inodes.iter().map(u64::to_string).collect();
            format!("; inodes they removed come back: {}", inodes.join(", "))
        };
        format!(
            "commits {}..={} are lost (the image is commit {}): files they created or changed: \
             {changed}{restored}; `flashpipe fsck --repair` keeps commit {}",
            self.commit_sequence,
            self.newest_sequence,
            self.commit_sequence - 1,
            self.commit_sequence - 1
        )
    }
}
