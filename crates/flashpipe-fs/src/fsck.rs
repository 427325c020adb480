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
use crate::data::verify_data_block;
use crate::error::FsckError;
use crate::image::{load_image, LoadFailure, LoadedImage};
use crate::io::{flush_device, read_fs_blocks};
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
    /// A file's data block whose content does not match its checksum (`fsck --data`).
    DataBlock,
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

/// What fsck does beyond checking the metadata.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FsckOptions {
    /// Fix what can be fixed safely (as [`fsck`]'s `repair`).
    pub repair: bool,
    /// Read every data block of every file and verify it against the checksum its block
    /// pointer carries (`fsck --data`); each damaged block is a [`Structure::DataBlock`]
    /// finding naming the file and the offset. Data damage is reported, never repaired
    /// (the block's true content is unknown), and does not keep `repair` from fixing the
    /// metadata.
    pub verify_data: bool,
}

/// [`fsck`] with options: with `verify_data`, the data pass runs on the image as found
/// (before any repair), when its file metadata loads completely; it loads the metadata
/// once more for itself, leaving [`fsck`]'s metadata checks and repair as they are.
pub fn fsck_with_options(
    device: &mut dyn BlockDevice,
    options: FsckOptions,
) -> Result<FsckReport, FsckError> {
    if !options.verify_data {
        return fsck(device, options.repair);
    }
    let data_findings = match load_image(device) {
        Ok(image) if image.files_complete => check_data_blocks(device, &image)?,
        Ok(_) | Err(_) => Vec::new(),
    };
    let mut report = fsck(device, options.repair)?;
    report.findings.extend(data_findings);
    Ok(report)
}

/// Most data blocks read in one batch, and most bytes.
const DATA_READ_BATCH_BLOCKS: usize = 1024;
const DATA_READ_BATCH_BYTES: u64 = 64 << 20;
/// Most damaged data blocks listed one by one (then one summary finding).
const MAX_DATA_FINDINGS: usize = 1000;

/// One data block to verify: its file's index in the name list, its offset in the file,
/// its FS block and the checksum its pointer carries.
struct DataBlockToVerify {
    file_index: usize,
    offset_bytes: u64,
    fs_block: u64,
    checksum: u32,
}

/// Damaged data blocks found so far: the first [`MAX_DATA_FINDINGS`] as findings.
#[derive(Default)]
struct DataDamage {
    findings: Vec<Finding>,
    damaged_blocks: usize,
}

/// Reads every checksummed data block of the image, in batches with the device queue full
/// (streamed: memory stays bounded by one batch), and returns a finding per damaged block.
fn check_data_blocks(
    device: &mut dyn BlockDevice,
    image: &LoadedImage,
) -> Result<Vec<Finding>, FsckError> {
    let block_bytes = image.geometry.block_bytes();
    let batch_blocks =
        DATA_READ_BATCH_BLOCKS.min((DATA_READ_BATCH_BYTES / block_bytes).max(1) as usize);
    let file_names: Vec<String> = image
        .files
        .iter()
        .map(|(inode_number, file)| match &file.name {
            Some(name) => name.to_string(),
            None => format!("(orphan inode {inode_number})"),
        })
        .collect();
    let mut damage = DataDamage::default();
    let mut batch = Vec::with_capacity(batch_blocks);
    for (file_index, file) in image.files.values().enumerate() {
        let checked_blocks = file.pointers.iter().zip(&file.checksums).enumerate();
        for (index, (&fs_block, &checksum)) in checked_blocks {
            let Some(checksum) = checksum else {
                continue;
            };
            batch.push(DataBlockToVerify {
                file_index,
                offset_bytes: index as u64 * block_bytes,
                fs_block,
                checksum,
            });
            if batch.len() == batch_blocks {
                verify_data_batch(device, image, &file_names, &batch, &mut damage)?;
                batch.clear();
            }
        }
    }
    verify_data_batch(device, image, &file_names, &batch, &mut damage)?;
    let DataDamage {
        mut findings,
        damaged_blocks,
    } = damage;
    if damaged_blocks > MAX_DATA_FINDINGS {
        findings.push(Finding::new(
            Structure::DataBlock,
            None,
            format!(
                "{} more damaged data block(s) not listed",
                damaged_blocks - MAX_DATA_FINDINGS
            ),
            false,
        ));
    }
    Ok(findings)
}

/// Reads one batch of data blocks and records each one whose checksum does not match.
fn verify_data_batch(
    device: &mut dyn BlockDevice,
    image: &LoadedImage,
    file_names: &[String],
    batch: &[DataBlockToVerify],
    damage: &mut DataDamage,
) -> Result<(), FsckError> {
    let addresses: Vec<u64> = batch.iter().map(|block| block.fs_block).collect();
    let buffers = read_fs_blocks(device, &image.geometry, &addresses)?;
    for (block, buffer) in batch.iter().zip(&buffers) {
        let verified = verify_data_block(
            &file_names[block.file_index],
            block.offset_bytes,
            block.fs_block,
            Some(block.checksum),
            buffer,
        );
        if let Err(error) = verified {
            damage.damaged_blocks += 1;
            if damage.damaged_blocks <= MAX_DATA_FINDINGS {
                damage.findings.push(Finding::new(
                    Structure::DataBlock,
                    Some(block.fs_block),
                    error.to_string(),
                    false,
                ));
            }
        }
    }
    Ok(())
}
