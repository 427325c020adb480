//! What fsck reports: the findings, and with repair each file it drops, truncates or
//! renames ([`LostFile`]) and what a fallback to the other super block slot loses
//! ([`SlotFallback`]); each with its human form.

use std::fmt;

use crate::findings::{DamagedSlot, Finding};

/// Most file names listed in a one-line summary of what a fallback loses.
const MAX_NAMES_IN_SUMMARY: usize = 10;

/// What repair does (or did) to one file it cannot keep whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LostFileOutcome {
    /// The file is gone (its inode record could not be read); only its name was left.
    Dropped,
    /// The file keeps its first `to_size_bytes` bytes.
    Truncated {
        /// Size recorded before the damage.
        from_size_bytes: u64,
        /// Size kept.
        to_size_bytes: u64,
    },
    /// The file is whole but its name was lost; it is kept under a new name.
    Renamed {
        /// The new name (`lost+found.<inode>`).
        to: String,
    },
    /// A damaged log record: the file goes back to what commit `to_commit` held (it
    /// disappears if that commit did not have it).
    RolledBack {
        /// The commit the file system goes back to.
        to_commit: u64,
    },
}

/// One file repair drops, truncates or renames, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostFile {
    /// Its inode number.
    pub inode_number: u64,
    /// Its name, when the name table still names it.
    pub name: Option<String>,
    /// What happens to it.
    pub outcome: LostFileOutcome,
    /// Why (the damaged block).
    pub reason: String,
}

impl fmt::Display for LostFile {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let who = match &self.name {
            Some(name) => format!("{name:?} (inode {})", self.inode_number),
            None => format!("inode {}", self.inode_number),
        };
        match &self.outcome {
            LostFileOutcome::Dropped => write!(formatter, "dropped {who}")?,
            LostFileOutcome::Truncated {
                from_size_bytes,
                to_size_bytes,
            } => write!(
                formatter,
                "truncated {who} from {from_size_bytes} to {to_size_bytes} bytes"
            )?,
            LostFileOutcome::Renamed { to } => write!(formatter, "kept {who} as {to:?}")?,
            LostFileOutcome::RolledBack { to_commit } => write!(
                formatter,
                "rolled {who} back to commit {to_commit} (gone if that commit did not hold it)"
            )?,
        }
        write!(formatter, ": {}", self.reason)
    }
}

/// A damaged super block slot and what falling back to the valid slot loses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotFallback {
    /// The damaged slot and the commit a fallback uses.
    pub damage: DamagedSlot,
    /// True when the damaged slot may hold a newer commit, which a fallback drops.
    pub drops_a_commit: bool,
    /// What differs between the dropped commit and the fallback's, one line per file,
    /// when the dropped commit could still be read; `None` when it cannot be told.
    pub lost_changes: Option<Vec<String>>,
    /// Why the differences cannot be told, when they cannot.
    pub unknown_reason: Option<String>,
}

impl SlotFallback {
    /// One line: the commit a fallback drops and a summary of what it loses.
    pub fn summary(&self) -> String {
        let damage = &self.damage;
        if !self.drops_a_commit {
            return format!(
                "rewriting slot {} from commit {} loses nothing",
                damage.slot, damage.fallback_sequence
            );
        }
        let dropped = damage
            .claimed_sequence
            .map_or("the commit it held".to_string(), |sequence| {
                format!("commit {sequence}")
            });
        let head = format!(
            "falling back to commit {} drops {dropped}",
            damage.fallback_sequence
        );
        match (&self.lost_changes, &self.unknown_reason) {
            (Some(changes), _) if changes.is_empty() => {
                format!("{head}; no file differs between the two commits")
            }
            (Some(changes), _) => {
                let shown: Vec<&str> = changes
                    .iter()
                    .take(MAX_NAMES_IN_SUMMARY)
                    .map(String::as_str)
                    .collect();
                let more = changes.len().saturating_sub(MAX_NAMES_IN_SUMMARY);
                let tail = if more > 0 {
                    format!("; and {more} more")
                } else {
                    String::new()
                };
                format!(
                    "{head}; {} file(s) differ: {}{tail}",
                    changes.len(),
                    shown.join("; ")
                )
            }
            (None, reason) => format!(
                "{head}; which files differ cannot be told: {}",
                reason
                    .as_deref()
                    .unwrap_or("the dropped commit cannot be read")
            ),
        }
    }
}

/// What fsck found and, with repair, what it fixed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FsckReport {
    /// Every inconsistency found, before any repair.
    pub findings: Vec<Finding>,
    /// What the repair fixed (empty without repair or when nothing could be fixed).
    pub repaired: Vec<String>,
    /// Why the repair did not run, when it was asked for and refused.
    pub repair_refused: Option<String>,
    /// Commit sequence of the super block used, when one was valid.
    pub commit_sequence: Option<u64>,
    /// Files in the image (as loaded).
    pub file_count: u64,
    /// A damaged super block slot and what falling back loses (repair falls back).
    pub slot_fallback: Option<Box<SlotFallback>>,
    /// Every file repair drops, truncates or renames (with repair: did).
    pub lost_files: Vec<LostFile>,
    /// The store identity of the super block used (format version 4), when it has one.
    pub store_identity: Option<[u8; 16]>,
}

impl FsckReport {
    /// True when nothing is wrong.
    pub fn is_clean(&self) -> bool {
        self.findings.is_empty()
    }
}

/// Human form: a summary line, then one line per finding and per repair.
impl fmt::Display for FsckReport {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.commit_sequence {
            Some(sequence) => write!(formatter, "commit {sequence}, {} files: ", self.file_count)?,
            None => write!(formatter, "no usable commit: ")?,
        }
        if self.is_clean() {
            return writeln!(formatter, "clean");
        }
        writeln!(formatter, "{} finding(s)", self.findings.len())?;
        for finding in &self.findings {
            writeln!(formatter, "  {finding}")?;
        }
        for repair in &self.repaired {
            writeln!(formatter, "  {repair}")?;
        }
        if self.repaired.is_empty() {
            if let Some(fallback) = &self.slot_fallback {
                writeln!(
                    formatter,
                    "  repair would fall back: {}",
                    fallback.summary()
                )?;
            }
            for lost in &self.lost_files {
                writeln!(formatter, "  repair would have: {lost}")?;
            }
        }
        if let Some(reason) = &self.repair_refused {
            writeln!(formatter, "  repair refused: {reason}")?;
        }
        Ok(())
    }
}
