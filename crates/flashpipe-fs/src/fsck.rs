//! fsck: every inconsistency of an on-disk image as a list of findings, and the repair
//! of what can be fixed safely (docs/format.md, "Consistency rules").
//!
//! The checks themselves live in `image.rs`, shared with mount (mount refuses an image
//! with any finding). The loader keeps going past a damaged metadata block, so damage
//! stays local: a damaged name table block costs names (the files are kept as
//! `lost+found.<inode>`), a damaged inode table block costs the files it describes, a
//! damaged indirect block truncates its file to the blocks mapped before it, a damaged
//! free list is rebuilt. Repair rebuilds the in-memory state from what loaded, recomputes
//! the free list from the blocks in use, names orphans, drops dangling names, truncates
//! broken chains, commits it like a flush, then rewrites both super block slots; it
//! reports every file it drops, truncates or renames ([`LostFile`]).
//!
//! A damaged super block slot beside a valid one may have held the newest commit: only
//! repair falls back to the valid slot, and [`SlotFallback`] says what that loses (the
//! files that differ between the two commits, when the damaged slot's commit can still
//! be read). With both slots damaged repair refuses: it never invents an empty file
//! system.

use std::collections::BTreeMap;

use flashpipe_device::BlockDevice;

use crate::commit::{commit, write_super_block};
use crate::error::FsckError;
use crate::filesystem::Filesystem;
use crate::fs_core::FsCore;
use crate::image::{load_image, load_image_of, LoadFailure, LoadedImage};
use crate::io::flush_device;
use crate::layout::{FLASH_AWARE_FORMAT_VERSION, NEWEST_READABLE_FORMAT_VERSION};

use crate::findings::DamagedSlot;
pub use crate::findings::{Finding, Structure};

mod data_check;
mod report;

use data_check::check_data_blocks;
pub use report::{FsckReport, LostFile, LostFileOutcome, SlotFallback};

/// Checks the file system on `device` (not mounted elsewhere) and, with `repair`, fixes
/// what it safely can. Never panics on a damaged image. Without `repair` it only reads.
pub fn fsck(device: &mut dyn BlockDevice, repair: bool) -> Result<FsckReport, FsckError> {
    let image = match load_image(device) {
        Ok(image) => image,
        Err(LoadFailure::NoValidSuperBlock { findings, salvaged }) => {
            return salvage_from_damaged_slots(device, repair, findings, salvaged)
        }
        Err(failure) => return report_load_failure(failure),
    };
    let slot_fallback = match &image.damaged_slot {
        Some(damage) => Some(Box::new(describe_fallback(device, damage, &image)?)),
        None => None,
    };
    let mut findings = image.all_findings();
    if let (Some(fallback), Some(first)) = (&slot_fallback, findings.first_mut()) {
        first.problem = format!("{}; {}", first.problem, fallback.summary());
    }
    let mut report = FsckReport {
        findings,
        commit_sequence: Some(image.super_block.commit_sequence),
        file_count: image.files.len() as u64,
        slot_fallback,
        lost_files: planned_losses(&image),
        store_identity: image.super_block.store_identity,
        ..FsckReport::default()
    };
    if !repair || report.findings.is_empty() {
        return Ok(report);
    }
    if let Some(reason) = repair_blocker(&image) {
        report.repair_refused = Some(reason);
        return Ok(report);
    }
    repair_image(device, image, &mut report)?;
    Ok(report)
}

fn report_load_failure(failure: LoadFailure) -> Result<FsckReport, FsckError> {
    match failure {
        LoadFailure::Device(error) => Err(FsckError::Device(error)),
        LoadFailure::NewerVersion { found } => Err(FsckError::NewerVersion {
            found,
            supported: NEWEST_READABLE_FORMAT_VERSION,
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
        LoadFailure::NoValidSuperBlock { findings, .. } => Ok(FsckReport {
            findings,
            repair_refused: Some(no_commit_found(&[])),
            ..FsckReport::default()
        }),
    }
}

fn no_commit_found(reasons: &[String]) -> String {
    let why = if reasons.is_empty() {
        String::new()
    } else {
        format!(" ({})", reasons.join("; "))
    };
    format!(
        "neither super block slot is valid, so no commit can be found to repair or fall \
         back to{why}; repair does not invent an empty file system: nothing was written"
    )
}

/// Neither slot is valid: a damaged slot whose salvaged super block (reserved bytes
/// cleared, checksum recomputed) describes a commit that loads without a single finding
/// is trusted, newest first; repair rebuilds both slots from it. Otherwise repair
/// refuses and nothing is written.
fn salvage_from_damaged_slots(
    device: &mut dyn BlockDevice,
    repair: bool,
    findings: Vec<Finding>,
    mut salvaged: Vec<(u64, crate::layout::SuperBlock)>,
) -> Result<FsckReport, FsckError> {
    let mut report = FsckReport {
        findings,
        ..FsckReport::default()
    };
    salvaged.sort_by_key(|(_, super_block)| std::cmp::Reverse(super_block.commit_sequence));
    let mut reasons = Vec::new();
    for (slot, super_block) in salvaged {
        let sequence = super_block.commit_sequence;
        let image = match load_image_of(device, super_block) {
            Ok(image) => image,
            Err(LoadFailure::Device(error)) => return Err(FsckError::Device(error)),
            Err(_) => {
                reasons.push(format!(
                    "slot {slot}'s commit {sequence} does not fit the device"
                ));
                continue;
            }
        };
        if let Some(first) = image.findings.first() {
            reasons.push(format!(
                "slot {slot}'s commit {sequence} does not load cleanly: {first}"
            ));
            continue;
        }
        let line = format!(
            "slot {slot}'s damaged super block, with its reserved bytes cleared and its \
             checksum recomputed, describes commit {sequence}, which loads without a finding{}",
            if reasons.is_empty() {
                String::new()
            } else {
                format!(" ({})", reasons.join("; "))
            }
        );
        for finding in &mut report.findings {
            finding.repairable = true;
        }
        report.commit_sequence = Some(sequence);
        report.file_count = image.files.len() as u64;
        if !repair {
            report.findings.push(Finding::new(
                Structure::SuperBlock,
                Some(slot),
                format!("{line}: `flashpipe fsck --repair` rebuilds both slots from it"),
                true,
            ));
            return Ok(report);
        }
        repair_image(device, image, &mut report)?;
        report
            .repaired
            .insert(0, format!("fixed: {line}; both slots rewritten from it"));
        return Ok(report);
    }
    report.repair_refused = Some(no_commit_found(&reasons));
    Ok(report)
}

/// What a fallback from `damage` to the slot in use loses: the damaged slot's commit is
/// loaded from its salvaged super block (read only) and compared file by file.
fn describe_fallback(
    device: &mut dyn BlockDevice,
    damage: &DamagedSlot,
    fallback: &LoadedImage,
) -> Result<SlotFallback, FsckError> {
    let mut description = SlotFallback {
        damage: damage.clone(),
        drops_a_commit: damage.may_hold_newer_commit(),
        lost_changes: None,
        unknown_reason: None,
    };
    if !description.drops_a_commit {
        description.lost_changes = Some(Vec::new());
        return Ok(description);
    }
    let Some(salvaged) = damage.salvaged.clone() else {
        description.unknown_reason =
            Some("the damaged slot's fields do not describe a commit".to_string());
        return Ok(description);
    };
    let sequence = salvaged.commit_sequence;
    match load_image_of(device, salvaged) {
        Ok(dropped) if dropped.findings.is_empty() && dropped.files_complete => {
            description.lost_changes = Some(commit_differences(&dropped, fallback));
        }
        Ok(dropped) => {
            let first = dropped
                .findings
                .first()
                .map_or("its metadata is incomplete".to_string(), Finding::to_string);
            description.unknown_reason =
                Some(format!("commit {sequence} does not load cleanly: {first}"));
        }
        Err(LoadFailure::Device(error)) => return Err(FsckError::Device(error)),
        Err(_) => {
            description.unknown_reason = Some(format!(
                "commit {sequence} does not fit this device; it cannot be read"
            ));
        }
    }
    Ok(description)
}

/// One line per file that differs between `dropped` (the newer commit) and `fallback`,
/// and per fallback file whose blocks the dropped commit had freed (later writes may
/// have reused them).
fn commit_differences(dropped: &LoadedImage, fallback: &LoadedImage) -> Vec<String> {
    let by_name = |image: &LoadedImage| -> BTreeMap<String, u64> {
        image
            .files
            .iter()
            .filter_map(|(&inode, file)| file.name.as_ref().map(|name| (name.to_string(), inode)))
            .collect()
    };
    let dropped_names = by_name(dropped);
    let fallback_names = by_name(fallback);
    let fallback_sequence = fallback.super_block.commit_sequence;
    let dropped_sequence = dropped.super_block.commit_sequence;
    let mut lines = Vec::new();
    for (name, inode) in &dropped_names {
        let newer = &dropped.files[inode];
        match fallback_names.get(name) {
            None => lines.push(format!(
                "{name:?} ({} bytes) is new in commit {dropped_sequence}: lost",
                newer.size_bytes
            )),
            Some(old_inode) => {
                let older = &fallback.files[old_inode];
                if old_inode != inode
                    || older.size_bytes != newer.size_bytes
                    || older.pointers != newer.pointers
                {
                    lines.push(format!(
                        "{name:?} changed in commit {dropped_sequence}: back to its commit \
                         {fallback_sequence} content ({} bytes instead of {})",
                        older.size_bytes, newer.size_bytes
                    ));
                }
            }
        }
    }
    for (name, inode) in &fallback_names {
        if !dropped_names.contains_key(name) {
            lines.push(format!(
                "{name:?} was deleted or renamed in commit {dropped_sequence}: it comes back"
            ));
        }
        let file = &fallback.files[inode];
        let reusable = file
            .pointers
            .iter()
            .chain(&file.indirect_chain)
            .any(|&block| block != 0 && !dropped.used_blocks.get(block));
        if reusable {
            lines.push(format!(
                "{name:?}: commit {dropped_sequence} freed some of its blocks and later writes \
                 may have reused them: check its content"
            ));
        }
    }
    lines
}

/// Every file the repair of `image` drops, truncates or renames, and why.
fn planned_losses(image: &LoadedImage) -> Vec<LostFile> {
    let block_list = |blocks: &[u64]| {
        blocks
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut losses: Vec<LostFile> = image
        .dangling_names
        .iter()
        .map(|dangling| LostFile {
            inode_number: dangling.inode_number,
            name: Some(dangling.name.to_string()),
            outcome: LostFileOutcome::Dropped,
            reason: if image.lost_inode_table_blocks.is_empty() {
                "its inode has no record".to_string()
            } else {
                format!(
                    "its inode record was lost with damaged inode table block(s) {}",
                    block_list(&image.lost_inode_table_blocks)
                )
            },
        })
        .collect();
    if let Some(damage) = &image.log_damage {
        let reason = format!(
            "log record of commit {} (block {}) is damaged: {}",
            damage.commit_sequence, damage.block, damage.problem
        );
        losses.extend(
            damage
                .lost_files
                .iter()
                .map(|(inode_number, name)| LostFile {
                    inode_number: *inode_number,
                    name: Some(name.clone()),
                    outcome: LostFileOutcome::RolledBack {
                        to_commit: damage.commit_sequence - 1,
                    },
                    reason: reason.clone(),
                }),
        );
    }
    for (&inode_number, file) in &image.files {
        if let Some(damage) = image.damaged_chains.get(&inode_number) {
            losses.push(LostFile {
                inode_number,
                name: file.name.as_ref().map(|name| name.to_string()),
                outcome: LostFileOutcome::Truncated {
                    from_size_bytes: damage.recorded_size_bytes,
                    to_size_bytes: file.size_bytes,
                },
                reason: format!(
                    "indirect block {} (chain position {}) is damaged: {}",
                    damage.block, damage.position, damage.problem
                ),
            });
        }
        if file.name.is_none() {
            losses.push(LostFile {
                inode_number,
                name: None,
                outcome: LostFileOutcome::Renamed {
                    to: format!("lost+found.{inode_number}"),
                },
                reason: if image.lost_name_table_blocks.is_empty() {
                    "no name points at it".to_string()
                } else {
                    format!(
                        "its name was lost with damaged name table block(s) {}",
                        block_list(&image.lost_name_table_blocks)
                    )
                },
            });
        }
    }
    losses
}

fn repair_blocker(image: &LoadedImage) -> Option<String> {
    if image.super_block.format_version >= FLASH_AWARE_FORMAT_VERSION {
        return Some(
            "the flash-aware layout has no repair yet (its pages cannot be rewritten in \
             place); copy the files out with `flashpipe get` and make a new store; nothing \
             was written"
                .to_string(),
        );
    }
    if image.checkpoint_map_lost {
        return Some(
            "the checkpoint map is damaged, so the name and inode tables cannot be found; \
             nothing was written"
                .to_string(),
        );
    }
    let unrepairable: Vec<Finding> = image
        .all_findings()
        .into_iter()
        .filter(|finding| !finding.repairable)
        .collect();
    unrepairable.first().map(|first| {
        format!(
            "{} finding(s) cannot be repaired safely (first: {first}); nothing was written",
            unrepairable.len()
        )
    })
}

/// Commits the state the image describes (free list rebuilt, orphans named, broken
/// chains rewritten for the truncated files) and rewrites both super block slots.
fn repair_image(
    device: &mut dyn BlockDevice,
    image: LoadedImage,
    report: &mut FsckReport,
) -> Result<(), FsckError> {
    let mut repaired: Vec<String> = report
        .findings
        .iter()
        .skip(usize::from(report.slot_fallback.is_some()))
        .map(|finding| format!("fixed: {finding}"))
        .collect();
    let truncated: Vec<u64> = image.damaged_chains.keys().copied().collect();
    let mut state = image.into_state(device.clock(), true);
    for inode_number in truncated {
        let node = state
            .files
            .get_mut(&inode_number)
            .expect("a truncated file is kept");
        node.map_changed = true;
    }
    for lost in &mut report.lost_files {
        if let LostFileOutcome::Renamed { to } = &mut lost.outcome {
            *to = state.files[&lost.inode_number].name.to_string();
        }
    }
    state.changed_since_commit = true;
    state.force_checkpoint = true;
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
    if let Some(fallback) = &report.slot_fallback {
        repaired.insert(0, fallback_repair_line(fallback));
        repaired.extend(
            fallback
                .lost_changes
                .iter()
                .flatten()
                .map(|line| format!("lost with the dropped commit: {line}")),
        );
    }
    repaired.extend(report.lost_files.iter().map(|lost| format!("{lost}")));
    repaired.push(format!(
        "wrote commit {} ({} file(s))",
        state.committed.sequence,
        state.files.len()
    ));
    report.repaired = repaired;
    Ok(())
}

/// The repair's line for a fallback: what was dropped, or why nothing was.
fn fallback_repair_line(fallback: &SlotFallback) -> String {
    let damage = &fallback.damage;
    let rewrote = format!(
        "fixed: super block slot {} ({}) rewritten",
        damage.slot, damage.problem
    );
    if !fallback.drops_a_commit {
        return format!("{rewrote}; nothing lost");
    }
    let dropped = damage
        .claimed_sequence
        .map_or("the commit it held".to_string(), |sequence| {
            format!("commit {sequence}")
        });
    let differences = match (&fallback.lost_changes, &fallback.unknown_reason) {
        (Some(changes), _) => format!("{} file(s) differ, listed below", changes.len()),
        (None, reason) => format!(
            "which files differ cannot be told: {}",
            reason
                .as_deref()
                .unwrap_or("the dropped commit cannot be read")
        ),
    };
    format!(
        "{rewrote}: fell back to commit {} and dropped {dropped} ({differences})",
        damage.fallback_sequence
    )
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

/// fsck of a mounted file system: the checks of its durable image.
impl FsCore {
    /// Checks the durable image (the last flush) on `device` with fsck, without
    /// repairing. Nothing may be in flight on `device`.
    pub fn check(&self, device: &mut dyn BlockDevice) -> Result<FsckReport, FsckError> {
        fsck(device, false)
    }

    /// [`FsCore::check`] with options (`verify_data`: read and verify every data block
    /// too; `repair` is ignored here, a mounted file system is not repaired).
    pub fn check_with_options(
        &self,
        device: &mut dyn BlockDevice,
        options: FsckOptions,
    ) -> Result<FsckReport, FsckError> {
        let options = FsckOptions {
            repair: false,
            ..options
        };
        fsck_with_options(device, options)
    }
}

/// fsck of a mounted file system on its own device.
impl Filesystem {
    /// [`FsCore::check`].
    pub fn check(&mut self) -> Result<FsckReport, FsckError> {
        self.core.check(&mut *self.device)
    }

    /// [`FsCore::check_with_options`].
    pub fn check_with_options(&mut self, options: FsckOptions) -> Result<FsckReport, FsckError> {
        self.core.check_with_options(&mut *self.device, options)
    }
}
