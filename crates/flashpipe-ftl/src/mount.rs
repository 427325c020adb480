//! Format and mount (recovery).
//!
//! Format reads page 0 of every block for the factory bad mark, erases the good blocks
//! (keeping the erase counts found in old spare areas) and writes an empty checkpoint.
//!
//! Mount rebuilds the map from flash alone: it reads page 0 of every block, then every
//! page of each block whose page 0 is not erased; takes the newest checkpoint whose parts
//! are all readable and intact; replays, in sequence order, the data pages and log
//! records newer than it; resolves each live version to its newest readable copy; erases
//! every block that holds nothing live; and writes a fresh checkpoint. See docs/ftl.md.

use std::collections::{BTreeMap, HashMap, VecDeque};

use flashpipe_flash::{Ack, AckStatus, FlashCommand, FlashRequest, SubmitError};

use crate::backend::FlashBackend;
use crate::ftl::{BlockUse, Ftl, FtlOptions, Identity, NONE};
use crate::layout::{
    is_factory_bad_mark, CheckpointImage, LogRecord, PageKind, Shape, SpareRecord,
    COMPACT_SPARE_RECORD_BYTES,
};
use crate::FtlError;

/// What a mount found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MountReport {
    /// Sequence of the checkpoint recovery started from.
    pub checkpoint_sequence: u64,
    /// Pages read while scanning.
    pub pages_scanned: u64,
    /// Blocks whose pages were scanned past page 0.
    pub blocks_scanned: u64,
    /// Data writes and log records replayed on top of the checkpoint.
    pub operations_replayed: u64,
    /// Pages that failed the ECC or the spare CRC (torn or damaged).
    pub unreadable_pages: u64,
    /// Logical pages mapped after recovery.
    pub mapped_pages: u64,
    /// Blocks erased because they held nothing live.
    pub blocks_erased: u64,
    /// Virtual time the mount took.
    pub duration_ns: u64,
}

/// A raw command of a mount and its index in the list (its ack's tag).
struct IndexedCommand {
    index: usize,
    command: FlashCommand,
}

/// One page of one block.
#[derive(Debug, Clone, Copy)]
struct BlockPage {
    block: u32,
    page: u32,
}

/// Runs raw commands with nothing else in flight, handing each ack to `on_ack` with the
/// command's index.
fn run_raw(
    backend: &mut dyn FlashBackend,
    commands: Vec<FlashCommand>,
    mut on_ack: impl FnMut(usize, Ack),
) {
    let mut pending: VecDeque<IndexedCommand> = commands
        .into_iter()
        .enumerate()
        .map(|(index, command)| IndexedCommand { index, command })
        .collect();
    let mut in_flight = 0usize;
    let mut acks = Vec::new();
    loop {
        while let Some(IndexedCommand { index, command }) = pending.pop_front() {
            let request = FlashRequest {
                tag: index as u64,
                host: 0,
                command,
            };
            match backend.submit(request) {
                Ok(()) => in_flight += 1,
                Err(SubmitError::QueueFull { request, .. }) => {
                    pending.push_front(IndexedCommand {
                        index,
                        command: request.command,
                    });
                    break;
                }
                Err(error) => panic!("raw submission refused: {error}"),
            }
        }
        if in_flight == 0 {
            return;
        }
        acks.clear();
        backend.wait_acks(&mut acks);
        for ack in acks.drain(..) {
            in_flight -= 1;
            on_ack(ack.tag as usize, ack);
        }
    }
}

/// What page 0 of a block says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FirstPage {
    FactoryBad,
    Erased,
    Written,
}

fn read_commands(shape: &Shape, pages: &[BlockPage]) -> Vec<FlashCommand> {
    pages
        .iter()
        .map(|page| FlashCommand::ReadPage {
            address: shape.address(page.block, page.page),
        })
        .collect()
}

/// Discards the acks of requests a previous owner left in flight (a dropped FTL): their
/// results have nobody to go to.
fn drain_stale_acks(backend: &mut dyn FlashBackend) {
    let mut stale = Vec::new();
    while backend.wait_acks(&mut stale) > 0 {
        stale.clear();
    }
}

fn check_backend(backend: &dyn FlashBackend) -> Result<(), FtlError> {
    if backend.host_spare_bytes() < COMPACT_SPARE_RECORD_BYTES {
        return Err(FtlError::Unsupported {
            detail: format!(
                "{} host spare bytes per page; the FTL needs at least {COMPACT_SPARE_RECORD_BYTES}",
                backend.host_spare_bytes()
            ),
        });
    }
    Ok(())
}

fn check_options(options: &FtlOptions) -> Result<(), FtlError> {
    if !(0.0..0.95).contains(&options.over_provisioning) {
        return Err(FtlError::InvalidOption {
            detail: format!(
                "over-provisioning {} is not within 0..0.95",
                options.over_provisioning
            ),
        });
    }
    if options.queue_depth == 0 || options.gc_parallel_victims == 0 {
        return Err(FtlError::InvalidOption {
            detail: "queue depth and parallel victims must be at least 1".to_string(),
        });
    }
    Ok(())
}

/// Page 0 of every block: its class and, when written, its erase count.
fn survey_first_pages(backend: &mut dyn FlashBackend, shape: &Shape) -> (Vec<FirstPage>, Vec<u32>) {
    let pages: Vec<BlockPage> = (0..shape.block_count)
        .map(|block| BlockPage { block, page: 0 })
        .collect();
    let mut classes = vec![FirstPage::Erased; shape.block_count as usize];
    let mut erase_counts = vec![0u32; shape.block_count as usize];
    let keeps_data = backend.keeps_data();
    if !keeps_data {
        for block in 0..shape.block_count {
            if backend.factory_bad_without_data(shape.address(block, 0)) {
                classes[block as usize] = FirstPage::FactoryBad;
            }
        }
        return (classes, erase_counts);
    }
    run_raw(backend, read_commands(shape, &pages), |index, ack| {
        let spare = ack.spare.unwrap_or_default();
        let data = ack.data.unwrap_or_default();
        classes[index] = match ack.status {
            AckStatus::Ok { .. } if is_factory_bad_mark(&spare) => FirstPage::FactoryBad,
            AckStatus::Ok { .. } if spare.iter().all(|&byte| byte == 0xFF) => FirstPage::Erased,
            _ => FirstPage::Written,
        };
        if let Some(record) = SpareRecord::decode(&spare, &data) {
            erase_counts[index] = record.erase_count;
        }
    });
    (classes, erase_counts)
}

/// Erases `blocks`; returns those whose erase failed.
fn erase_blocks(backend: &mut dyn FlashBackend, shape: &Shape, blocks: &[u32]) -> Vec<u32> {
    let commands = blocks
        .iter()
        .map(|&block| FlashCommand::EraseBlock {
            address: shape.address(block, 0),
        })
        .collect();
    let mut failed = Vec::new();
    run_raw(backend, commands, |index, ack| {
        if !ack.status.is_ok() {
            failed.push(blocks[index]);
        }
    });
    failed
}

/// Logical pages an FTL formatted on an array of `config` with every block good exports
/// at `over_provisioning`: what is left of the blocks once the FTL's reserves (a write
/// point per die for the host and for collection, two checkpoints, the log) are set
/// aside, less the over-provisioning. Factory bad blocks, found at format, lower it.
pub fn exported_logical_pages(
    config: &flashpipe_flash::FlashConfig,
    over_provisioning: f64,
) -> u64 {
    let shape = Shape::new(config);
    logical_page_count(&shape, shape.block_count, over_provisioning)
}

/// Logical pages exported for `good_blocks` good blocks at `over_provisioning`.
fn logical_page_count(shape: &Shape, good_blocks: u32, over_provisioning: f64) -> u64 {
    let mut logical = u64::from(good_blocks) * u64::from(shape.pages_per_block);
    for _ in 0..3 {
        let reserve = Ftl::reserve_for(shape, logical);
        let usable =
            u64::from(good_blocks.saturating_sub(reserve)) * u64::from(shape.pages_per_block);
        logical = (usable as f64 * (1.0 - over_provisioning)).floor() as u64;
    }
    logical
}

impl Ftl {
    /// Formats the array under `backend` and returns the empty FTL on it.
    pub fn format(backend: Box<dyn FlashBackend>, options: FtlOptions) -> Result<Ftl, FtlError> {
        let mut backend = backend;
        drain_stale_acks(&mut *backend);
        check_backend(&*backend)?;
        check_options(&options)?;
        let shape = Shape::new(backend.config());
        let (classes, erase_counts) = survey_first_pages(&mut *backend, &shape);
        let good: Vec<u32> = (0..shape.block_count)
            .filter(|&block| classes[block as usize] != FirstPage::FactoryBad)
            .collect();
        let failed = erase_blocks(&mut *backend, &shape, &good);
        let good_count = (good.len() - failed.len()) as u32;
        let logical = logical_page_count(&shape, good_count, options.over_provisioning);
        if logical == 0 {
            return Err(FtlError::TooSmall {
                good_blocks: good_count,
            });
        }
        let mut ftl = Ftl::empty(backend, options, logical);
        for block in 0..shape.block_count {
            let info = &mut ftl.blocks[block as usize];
            info.erase_count = erase_counts[block as usize];
            if classes[block as usize] == FirstPage::FactoryBad {
                info.bad = 1;
                continue;
            }
            info.erase_count += 1;
            if failed.contains(&block) {
                info.bad = 2;
                continue;
            }
            ftl.add_free_block(block);
        }
        ftl.size_collection_pacing();
        ftl.checkpoint_now();
        Ok(ftl)
    }

    /// Mounts the FTL kept on the array under `backend`, recovering from a crash if need
    /// be.
    pub fn mount(
        backend: Box<dyn FlashBackend>,
        options: FtlOptions,
    ) -> Result<(Ftl, MountReport), FtlError> {
        Ftl::mount_with(backend, options, false)
    }

    /// Mounts the FTL without writing anything to the array: the map is rebuilt from the
    /// newest checkpoint and the log in memory only; blocks a read-write mount would
    /// erase are left alone, no checkpoint is written (at mount or at unmount), and host
    /// writes, trims and copies are refused.
    pub fn mount_read_only(
        backend: Box<dyn FlashBackend>,
        options: FtlOptions,
    ) -> Result<(Ftl, MountReport), FtlError> {
        Ftl::mount_with(backend, options, true)
    }

    fn mount_with(
        backend: Box<dyn FlashBackend>,
        options: FtlOptions,
        read_only: bool,
    ) -> Result<(Ftl, MountReport), FtlError> {
        let mut backend = backend;
        drain_stale_acks(&mut *backend);
        check_backend(&*backend)?;
        check_options(&options)?;
        if !backend.keeps_data() {
            return Err(FtlError::Unsupported {
                detail: "mounting needs an array that keeps page contents".to_string(),
            });
        }
        let started_ns = backend.now_ns();
        let shape = Shape::new(backend.config());
        let mut report = MountReport::default();
        let scan = Scan::run(&mut *backend, &shape, &mut report);
        let image = scan.latest_checkpoint().ok_or(FtlError::NotFormatted)?;
        if image.pages_per_block != shape.pages_per_block
            || image.erase_counts.len() != shape.block_count as usize
        {
            return Err(FtlError::NotFormatted);
        }
        report.checkpoint_sequence = image.sequence;
        let versions = scan.replay(&image, &mut report)?;
        let mut ftl = Ftl::empty(backend, options, versions.len() as u64);
        ftl.read_only = read_only;
        ftl.rebuild(&scan, &image, &versions, &mut report)?;
        ftl.next_sequence = scan.max_sequence.max(image.sequence) + 1;
        ftl.checkpoint.sequence = image.sequence;
        ftl.size_collection_pacing();
        if !read_only {
            ftl.checkpoint_now();
        }
        report.duration_ns = ftl.backend.now_ns() - started_ns;
        Ok((ftl, report))
    }

    fn rebuild(
        &mut self,
        scan: &Scan,
        image: &CheckpointImage,
        versions: &[u64],
        report: &mut MountReport,
    ) -> Result<(), FtlError> {
        let mut slots: HashMap<u64, u32> = HashMap::new();
        for (logical, &version) in versions.iter().enumerate() {
            if version == 0 {
                continue;
            }
            let slot = match slots.get(&version) {
                Some(&slot) => slot,
                None => {
                    let copy = scan.data_pages.get(&version).ok_or(FtlError::MapLost {
                        logical: logical as u64,
                        version,
                    })?;
                    let slot = self.mapping.new_identity(Identity {
                        version,
                        physical_page: copy.physical_page,
                        references: 0,
                        logical_origin: copy.logical,
                        poisoned: copy.poisoned,
                    });
                    self.claim_page(copy.physical_page, slot);
                    slots.insert(version, slot);
                    slot
                }
            };
            self.set_mapping(logical as u64, slot);
            report.mapped_pages += 1;
        }
        let mut to_erase = Vec::new();
        for block in 0..self.shape.block_count {
            let info = &mut self.blocks[block as usize];
            info.erase_count =
                image.erase_counts[block as usize].max(scan.erase_counts[block as usize]);
            info.bad =
                image.bad_states[block as usize].max(u8::from(scan.factory_bad[block as usize]));
            if info.bad != 0 {
                info.usage = BlockUse::Retired;
            } else if info.valid_pages > 0 {
                info.usage = BlockUse::Sealed;
            } else if scan.checkpoint_blocks_of(image.sequence).contains(&block) {
                info.usage = BlockUse::Checkpoint;
                self.checkpoint.blocks.push(block);
            } else if scan.log_blocks.contains(&block) {
                info.usage = BlockUse::Log;
                self.log.blocks.push(block);
            } else {
                to_erase.push(block);
            }
        }
        if self.read_only {
            report.blocks_erased = 0;
            return Ok(());
        }
        let failed = erase_blocks(&mut *self.backend, &self.shape, &to_erase);
        report.blocks_erased = to_erase.len() as u64;
        for block in to_erase {
            self.blocks[block as usize].erase_count += 1;
            if failed.contains(&block) {
                self.blocks[block as usize].bad = 2;
            } else {
                self.add_free_block(block);
            }
        }
        debug_assert!(
            self.mapping
                .map
                .iter()
                .filter(|&&slot| slot != NONE)
                .count() as u64
                == report.mapped_pages
        );
        Ok(())
    }
}

/// The newest readable copy of one version of a logical page.
#[derive(Debug, Clone, Copy)]
struct DataCopy {
    physical_page: u32,
    logical: u64,
    program_sequence: u64,
    poisoned: bool,
}

/// One part of a checkpoint image.
struct CheckpointPart {
    block: u32,
    total: u32,
    program_sequence: u64,
    data: Vec<u8>,
}

/// One change of the map found on flash, replayed in sequence order.
#[derive(Debug, Clone, Copy)]
enum ReplayEvent {
    /// A data page: the logical page takes the version (= the event's sequence).
    Write { logical: u64 },
    /// A trim or copy record.
    Record(LogRecord),
}

/// Everything the spare areas say.
struct Scan {
    data_pages: HashMap<u64, DataCopy>,
    log_records: BTreeMap<u64, LogRecord>,
    log_blocks: Vec<u32>,
    checkpoints: BTreeMap<u64, HashMap<u32, CheckpointPart>>,
    erase_counts: Vec<u32>,
    factory_bad: Vec<bool>,
    max_sequence: u64,
}

impl Scan {
    fn run(backend: &mut dyn FlashBackend, shape: &Shape, report: &mut MountReport) -> Scan {
        let (classes, erase_counts) = survey_first_pages(backend, shape);
        report.pages_scanned += u64::from(shape.block_count);
        let mut scan = Scan {
            data_pages: HashMap::new(),
            log_records: BTreeMap::new(),
            log_blocks: Vec::new(),
            checkpoints: BTreeMap::new(),
            erase_counts,
            factory_bad: classes
                .iter()
                .map(|&class| class == FirstPage::FactoryBad)
                .collect(),
            max_sequence: 0,
        };
        let pages: Vec<BlockPage> = (0..shape.block_count)
            .filter(|&block| classes[block as usize] == FirstPage::Written)
            .flat_map(|block| (0..shape.pages_per_block).map(move |page| BlockPage { block, page }))
            .collect();
        report.blocks_scanned = pages.len() as u64 / u64::from(shape.pages_per_block);
        report.pages_scanned += pages.len() as u64;
        run_raw(backend, read_commands(shape, &pages), |index, ack| {
            let BlockPage { block, page } = pages[index];
            if !ack.status.is_ok() {
                report.unreadable_pages += 1;
                return;
            }
            let spare = ack.spare.unwrap_or_default();
            let data = ack.data.unwrap_or_default();
            if spare.iter().all(|&byte| byte == 0xFF) {
                return;
            }
            match SpareRecord::decode(&spare, &data) {
                Some(record) => scan.add(shape, block, page, record, data),
                None => report.unreadable_pages += 1,
            }
        });
        scan
    }

    fn add(&mut self, shape: &Shape, block: u32, page: u32, record: SpareRecord, data: Vec<u8>) {
        let erase_count = &mut self.erase_counts[block as usize];
        *erase_count = (*erase_count).max(record.erase_count);
        self.max_sequence = self.max_sequence.max(record.program_sequence);
        match record.kind {
            PageKind::Data => {
                self.max_sequence = self.max_sequence.max(record.field_b);
                let copy = DataCopy {
                    physical_page: shape.physical_page(block, page),
                    logical: record.field_a,
                    program_sequence: record.program_sequence,
                    poisoned: record.poisoned,
                };
                let entry = self.data_pages.entry(record.field_b).or_insert(copy);
                if copy.program_sequence > entry.program_sequence {
                    *entry = copy;
                }
            }
            PageKind::Log => {
                if let Some(records) = LogRecord::decode_page(&data, record.field_a) {
                    for log_record in records {
                        self.max_sequence = self.max_sequence.max(log_record.sequence());
                        self.log_records.insert(log_record.sequence(), log_record);
                    }
                }
                if !self.log_blocks.contains(&block) {
                    self.log_blocks.push(block);
                }
            }
            PageKind::Checkpoint => {
                self.max_sequence = self.max_sequence.max(record.field_b);
                let part = (record.field_a & 0xFFFF_FFFF) as u32;
                let total = (record.field_a >> 32) as u32;
                let parts = self.checkpoints.entry(record.field_b).or_default();
                let replace = parts
                    .get(&part)
                    .is_none_or(|existing| existing.program_sequence < record.program_sequence);
                if replace {
                    parts.insert(
                        part,
                        CheckpointPart {
                            block,
                            total,
                            program_sequence: record.program_sequence,
                            data,
                        },
                    );
                }
            }
        }
    }

    /// The newest checkpoint with every part present and an intact image.
    fn latest_checkpoint(&self) -> Option<CheckpointImage> {
        for parts in self.checkpoints.values().rev() {
            let Some(total) = parts.values().next().map(|part| part.total) else {
                continue;
            };
            if (0..total).any(|index| !parts.contains_key(&index)) {
                continue;
            }
            let mut bytes = Vec::new();
            for index in 0..total {
                bytes.extend_from_slice(&parts[&index].data);
            }
            if let Some(image) = CheckpointImage::decode(&bytes) {
                return Some(image);
            }
        }
        None
    }

    fn checkpoint_blocks_of(&self, sequence: u64) -> Vec<u32> {
        self.checkpoints
            .get(&sequence)
            .map(|parts| parts.values().map(|part| part.block).collect())
            .unwrap_or_default()
    }

    /// The version of every logical page after replaying, in sequence order, the writes
    /// and records newer than the checkpoint.
    fn replay(
        &self,
        image: &CheckpointImage,
        report: &mut MountReport,
    ) -> Result<Vec<u64>, FtlError> {
        let mut versions = image.versions.clone();
        let logical_count = versions.len() as u64;
        let mut events: BTreeMap<u64, ReplayEvent> = BTreeMap::new();
        for (&version, copy) in &self.data_pages {
            if version > image.sequence {
                events.insert(
                    version,
                    ReplayEvent::Write {
                        logical: copy.logical,
                    },
                );
            }
        }
        for (&sequence, &record) in self.log_records.range(image.sequence + 1..) {
            events.insert(sequence, ReplayEvent::Record(record));
        }
        let out_of_range = |first: u64, count: u64| {
            first
                .checked_add(count)
                .is_none_or(|end| end > logical_count)
        };
        for (sequence, event) in events {
            report.operations_replayed += 1;
            match event {
                ReplayEvent::Write { logical } => {
                    if out_of_range(logical, 1) {
                        return Err(FtlError::CorruptRecord { sequence });
                    }
                    versions[logical as usize] = sequence;
                }
                ReplayEvent::Record(LogRecord::Trim { first, count, .. }) => {
                    if out_of_range(first, count) {
                        return Err(FtlError::CorruptRecord { sequence });
                    }
                    versions[first as usize..(first + count) as usize].fill(0);
                }
                ReplayEvent::Record(LogRecord::Copy {
                    source,
                    destination,
                    count,
                    ..
                }) => {
                    if out_of_range(source, count) || out_of_range(destination, count) {
                        return Err(FtlError::CorruptRecord { sequence });
                    }
                    versions.copy_within(
                        source as usize..(source + count) as usize,
                        destination as usize,
                    );
                }
            }
        }
        Ok(versions)
    }
}
