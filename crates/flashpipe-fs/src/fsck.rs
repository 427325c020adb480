//! fsck: every inconsistency of an on-disk image as a list of findings, and the repair
//! of what can be fixed safely (docs/format.md, "Consistency rules").
//!
//! The checks themselves live in `image.rs`, shared with mount (mount refuses an image
//! with any finding). Repair rebuilds the in-memory state from what loaded, recomputes
//! the free list from the blocks in use, names orphans, drops dangling names, and commits
//! it like a flush, then rewrites both super block slots.

use std::fmt;

use flashpipe_device::BlockDevice;

use crate::commit::{commit, write_super_block};
use crate::error::FsckError;
use crate::image::{load_image, LoadFailure, LoadedImage};
use crate::io::flush_device;
use crate::layout::FORMAT_VERSION;
use crate::state::State;

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
        if let Some(reason) = &self.repair_refused {
            writeln!(formatter, "  repair refused: {reason}")?;
        }
        Ok(())
    }
}

/// Checks the file system on `device` (not mounted elsewhere) and, with `repair`, fixes
/// what it safely can. Never panics on a damaged image.
pub fn fsck(device: &mut dyn BlockDevice, repair: bool) -> Result<FsckReport, FsckError> {
    let image = match load_image(device) {
        Ok(image) => image,
        Err(failure) => return report_load_failure(failure),
    };
    let mut report = FsckReport {
        findings: image.all_findings(),
        commit_sequence: Some(image.super_block.commit_sequence),
        file_count: image.files.len() as u64,
        ..FsckReport::default()
    };
    if !repair || report.findings.is_empty() {
        return Ok(report);
    }
    if let Some(reason) = repair_blocker(&image) {
        report.repair_refused = Some(reason);
        return Ok(report);
    }
    report.repaired = repair_image(device, image)?;
    Ok(report)
}

fn report_load_failure(failure: LoadFailure) -> Result<FsckReport, FsckError> {
    match failure {
        LoadFailure::Device(error) => Err(FsckError::Device(error)),
        LoadFailure::NewerVersion { found } => Err(FsckError::NewerVersion {
            found,
            supported: FORMAT_VERSION,
        }),
        LoadFailure::WrongDeviceSize {
            expected_size_bytes,
            device_size_bytes,
            ..
        } => Err(FsckError::WrongDeviceSize {
            expected_size_bytes,
            device_size_bytes,
        }),
        LoadFailure::NotFormatted => Ok(FsckReport {
            findings: vec![Finding::new(
                Structure::SuperBlock,
                None,
                "no FLASHPFS super block in block 0 or 1: not formatted".to_string(),
                false,
            )],
            ..FsckReport::default()
        }),
        LoadFailure::NoValidSuperBlock(findings) => Ok(FsckReport {
            findings,
            repair_refused: Some("no valid super block".to_string()),
            ..FsckReport::default()
        }),
    }
}

fn repair_blocker(image: &LoadedImage) -> Option<String> {
    if !image.files_complete {
        return Some("file metadata could not be read completely".to_string());
    }
    let unrepairable = image
        .all_findings()
        .into_iter()
        .filter(|finding| !finding.repairable)
        .count();
    (unrepairable > 0).then(|| format!("{unrepairable} finding(s) cannot be repaired safely"))
}

fn repair_image(
    device: &mut dyn BlockDevice,
    image: LoadedImage,
) -> Result<Vec<String>, FsckError> {
    let repaired: Vec<String> = image
        .all_findings()
        .iter()
        .map(|finding| format!("fixed: {finding}"))
        .collect();
    let mut state = State::from_image(image, device.clock(), true);
    state.changed_since_commit = true;
    commit(&mut state, device)?;
    let super_block = state
        .committed
        .super_block
        .clone()
        .expect("a completed commit records its super block");
    let other_slot = (state.committed.sequence + 1) % 2;
    write_super_block(device, &state.geometry, other_slot, &super_block)
        .map_err(FsckError::Device)?;
    flush_device(device).map_err(FsckError::Device)?;
    Ok(repaired)
}
