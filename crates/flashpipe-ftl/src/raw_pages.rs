//! `RawPageDevice`: raw flash presented to a file system that manages flash itself (the
//! flash-aware layout, docs/design/29-flash-aware.md), identity-mapped, with no page map,
//! no collection and no log below it.
//!
//! Device block `n` is page `n % P` of erase block `n / P` (`P` pages per erase block).
//! Erase block `e` lives on unit `e % U` (a unit is one chip: devices x buses x chips, in
//! that order), as that unit's `(e / U)`-th good block, so consecutive erase blocks rotate
//! over chips. Factory bad blocks are skipped by that table, fixed at open from the
//! backend's marks: it never changes, so a mount computes the same mapping.
//!
//! The flash rules stay the caller's: a program of a page that is not erased, or not the
//! next page of its erase block, is refused by the flash model and comes back as
//! [`DeviceErrorKind::Unsupported`] naming [`PROGRAM_REFUSED`] (nothing programmed, never
//! silently reordered or padded). A trim erases whole erase blocks; a trim of part of one
//! is refused at submit with [`PARTIAL_ERASE_REFUSED`]. An erased page reads as `0xFF`.
//! A flush completes once every request accepted before it has, then makes the backend's
//! storage durable. Copies by reference are refused.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use flashpipe_device::{
    BlockDevice, Clock, Completion, DeviceError, DeviceErrorKind, DeviceInfo, IoBuf, Operation,
    Rejected, Request,
};
use flashpipe_flash::{AckStatus, FlashAddress, FlashCommand, FlashRequest, SubmitError};

use crate::backend::FlashBackend;

/// The operation named by a refused program (a page not erased, or out of page order).
pub const PROGRAM_REFUSED: &str =
    "program of a flash page that is not erased or not the next page of its erase block";
/// The operation named by a refused trim of part of an erase block.
pub const PARTIAL_ERASE_REFUSED: &str =
    "trim of part of an erase block (this device erases whole erase blocks only)";
/// The operation named by a refused copy by reference.
const COPY_REFUSED: &str = "copy-by-reference (raw flash pages cannot be remapped)";
/// Requests in flight at once.
pub const RAW_PAGE_QUEUE_DEPTH: u32 = 256;

/// What the device did, for the layout comparison (issue 29).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RawPageCounters {
    /// Pages read.
    pub pages_read: u64,
    /// Pages programmed.
    pub pages_programmed: u64,
    /// Erase blocks erased.
    pub erases: u64,
    /// Programs the flash refused (not erased, out of order).
    pub refused_programs: u64,
}

/// One request being served.
struct OpenRequest {
    tag: u64,
    operation: Operation,
    commands_left: u64,
    error: Option<DeviceError>,
}

/// Raw flash as a block device of pages, identity-mapped (see the module doc).
pub struct RawPageDevice {
    backend: Box<dyn FlashBackend>,
    info: DeviceInfo,
    pages_per_block: u32,
    page_bytes: usize,
    units: Vec<(u32, u32, u32)>,
    good_blocks: Vec<Vec<u32>>,
    open: BTreeMap<u64, OpenRequest>,
    flash_tags: HashMap<u64, (u64, u64)>,
    backlog: VecDeque<FlashRequest>,
    ready: Vec<Completion>,
    next_request: u64,
    next_flash_tag: u64,
    counters: RawPageCounters,
}

impl RawPageDevice {
    /// Raw pages of `backend`, named `name` in errors. Refused when the backend keeps no
    /// data, or its pages are not a power of two of at least 4 KiB (the file system's block).
    pub fn new(backend: Box<dyn FlashBackend>, name: &str) -> Result<RawPageDevice, DeviceError> {
        let name: Arc<str> = Arc::from(name);
        let config = backend.config().clone();
        let page_bytes = config.geometry.page_data_bytes;
        let open_error = |detail: String| DeviceError::new(&name, DeviceErrorKind::Open { detail });
        if !backend.keeps_data() {
            return Err(open_error(
                "the flash array keeps no page data (timing only); a file system needs it"
                    .to_string(),
            ));
        }
        if page_bytes < 4096 || !page_bytes.is_power_of_two() {
            return Err(open_error(format!(
                "flash pages of {page_bytes} bytes: the flash-aware layout needs pages of a \
                 power of two of at least 4096 bytes"
            )));
        }
        let geometry = &config.geometry;
        let mut units = Vec::new();
        for device in 0..geometry.devices {
            for bus in 0..geometry.channels {
                for chip in 0..geometry.ways {
                    units.push((device, bus, chip));
                }
            }
        }
        let good_blocks: Vec<Vec<u32>> = units
            .iter()
            .map(|&(device, bus, chip)| {
                (0..config.blocks_per_way())
                    .filter(|&block| {
                        let address = FlashAddress {
                            device,
                            bus,
                            chip,
                            block,
                            page: 0,
                        };
                        !backend.factory_bad_without_data(address)
                    })
                    .collect()
            })
            .collect();
        let fewest_good = good_blocks.iter().map(Vec::len).min().unwrap_or(0) as u64;
        let erase_blocks = fewest_good * units.len() as u64;
        if erase_blocks == 0 {
            return Err(open_error(
                "the flash array has no good erase block".to_string(),
            ));
        }
        let info = DeviceInfo {
            name,
            block_size_bytes: page_bytes,
            block_count: erase_blocks * u64::from(geometry.pages_per_block),
            queue_depth: RAW_PAGE_QUEUE_DEPTH,
        };
        Ok(RawPageDevice {
            backend,
            info,
            pages_per_block: geometry.pages_per_block,
            page_bytes: page_bytes as usize,
            units,
            good_blocks,
            open: BTreeMap::new(),
            flash_tags: HashMap::new(),
            backlog: VecDeque::new(),
            ready: Vec::new(),
            next_request: 0,
            next_flash_tag: 0,
            counters: RawPageCounters::default(),
        })
    }

    /// Pages in one erase block.
    pub fn pages_per_erase_block(&self) -> u32 {
        self.pages_per_block
    }

    /// Erase blocks the device exposes.
    pub fn erase_block_count(&self) -> u64 {
        self.info.block_count / u64::from(self.pages_per_block)
    }

    /// What the device did since it was opened.
    pub fn counters(&self) -> RawPageCounters {
        self.counters
    }

    /// The backend, for a test's power cut or a store's close.
    pub fn backend_mut(&mut self) -> &mut dyn FlashBackend {
        self.backend.as_mut()
    }

    /// The backend back (requests in flight are dropped).
    pub fn into_backend(self) -> Box<dyn FlashBackend> {
        self.backend
    }

    /// The flash address of page `page` of device block (page) `block`'s erase block.
    fn address(&self, block: u64) -> FlashAddress {
        let erase_block = block / u64::from(self.pages_per_block);
        let unit_count = self.units.len() as u64;
        let (device, bus, chip) = self.units[(erase_block % unit_count) as usize];
        let physical = self.good_blocks[(erase_block % unit_count) as usize]
            [(erase_block / unit_count) as usize];
        FlashAddress {
            device,
            bus,
            chip,
            block: physical,
            page: (block % u64::from(self.pages_per_block)) as u32,
        }
    }

    fn refuse(&self, request: Request, operation: &'static str) -> Rejected {
        Rejected {
            request,
            error: DeviceError::new(&self.info.name, DeviceErrorKind::Unsupported { operation }),
        }
    }

    /// The raw commands of `operation`, each with the device block it is for.
    fn commands(&self, operation: &Operation) -> Vec<(u64, FlashCommand)> {
        let per_block = u64::from(self.pages_per_block);
        match operation {
            Operation::Read {
                first_block,
                buffer,
            } => (0..(buffer.len() / self.page_bytes) as u64)
                .map(|index| {
                    let block = first_block + index;
                    let address = self.address(block);
                    (block, FlashCommand::ReadPage { address })
                })
                .collect(),
            Operation::Write {
                first_block,
                buffer,
            } => buffer
                .chunks(self.page_bytes)
                .enumerate()
                .map(|(index, data)| {
                    let block = first_block + index as u64;
                    let command = FlashCommand::WritePage {
                        address: self.address(block),
                        data: data.to_vec(),
                        spare: Vec::new(),
                    };
                    (block, command)
                })
                .collect(),
            Operation::Trim {
                first_block,
                block_count,
            } => (0..block_count / per_block)
                .map(|index| {
                    let block = first_block + index * per_block;
                    let address = self.address(block);
                    (block, FlashCommand::EraseBlock { address })
                })
                .collect(),
            Operation::Flush | Operation::CopyByReference { .. } => Vec::new(),
        }
    }

    /// Sends a command now, or after the ones already waiting (programs keep their order).
    fn send(&mut self, request: FlashRequest) {
        if self.backlog.is_empty() {
            match self.backend.submit(request) {
                Ok(()) => {}
                Err(SubmitError::QueueFull { request, .. })
                | Err(SubmitError::UnknownHost { request, .. }) => self.backlog.push_back(*request),
            }
        } else {
            self.backlog.push_back(request);
        }
    }

    fn push_backlog(&mut self) {
        while let Some(request) = self.backlog.pop_front() {
            if let Err(
                SubmitError::QueueFull { request, .. } | SubmitError::UnknownHost { request, .. },
            ) = self.backend.submit(request)
            {
                self.backlog.push_front(*request);
                return;
            }
        }
    }

    /// Applies one ack to its request.
    fn apply_ack(&mut self, ack: flashpipe_flash::Ack) {
        let Some((request_id, block)) = self.flash_tags.remove(&ack.tag) else {
            return;
        };
        let page_bytes = self.page_bytes;
        let name = self.info.name.clone();
        let open = self
            .open
            .get_mut(&request_id)
            .expect("an ack's request is open");
        open.commands_left -= 1;
        let is_program = matches!(open.operation, Operation::Write { .. });
        let kind = match &ack.status {
            AckStatus::Ok { .. } => None,
            AckStatus::Uncorrectable => Some(DeviceErrorKind::Uncorrectable { block }),
            AckStatus::BadBlock => Some(DeviceErrorKind::BadBlock { block }),
            AckStatus::RuleViolation(_) if is_program => Some(DeviceErrorKind::Unsupported {
                operation: PROGRAM_REFUSED,
            }),
            AckStatus::RuleViolation(violation) => Some(DeviceErrorKind::IoFailed {
                detail: format!("block {block}: the flash refused the command: {violation}"),
            }),
        };
        match (&mut open.operation, &ack.data) {
            (
                Operation::Read {
                    first_block,
                    buffer,
                },
                Some(data),
            ) if kind.is_none() => {
                let start = (block - *first_block) as usize * page_bytes;
                buffer[start..start + page_bytes].copy_from_slice(&data[..page_bytes]);
                self.counters.pages_read += 1;
            }
            (Operation::Write { .. }, _) if kind.is_none() => self.counters.pages_programmed += 1,
            (Operation::Trim { .. }, _) if kind.is_none() => self.counters.erases += 1,
            (Operation::Write { .. }, _) if matches!(ack.status, AckStatus::RuleViolation(_)) => {
                self.counters.refused_programs += 1
            }
            _ => {}
        }
        if let Some(kind) = kind {
            if open.error.is_none() {
                open.error = Some(DeviceError::new(&name, kind));
            }
        }
        if let Some(data) = ack.data {
            self.backend.recycle_page_buffer(data);
        }
    }

    /// Moves every request whose commands are all done (and every flush with nothing
    /// older left) to the ready list.
    fn finish_requests(&mut self) {
        let mut finished = Vec::new();
        let mut older_pending = false;
        for (&id, open) in &self.open {
            let is_flush = matches!(open.operation, Operation::Flush);
            let done = open.commands_left == 0 && (!is_flush || !older_pending);
            if done {
                finished.push(id);
            } else if !is_flush {
                older_pending = true;
            }
        }
        for id in finished {
            let open = self.open.remove(&id).expect("listed above");
            let mut error = open.error;
            if matches!(open.operation, Operation::Flush) && error.is_none() {
                if let Err(failure) = self.backend.sync_storage() {
                    error = Some(DeviceError::new(
                        &self.info.name,
                        DeviceErrorKind::IoFailed {
                            detail: failure.to_string(),
                        },
                    ));
                }
            }
            self.ready.push(Completion {
                tag: open.tag,
                status: error.map_or(Ok(()), Err),
                buffer: buffer_of(open.operation),
            });
        }
    }

    fn pump(&mut self, wait: bool) {
        let mut acks = Vec::new();
        self.push_backlog();
        if wait && self.ready.is_empty() {
            self.backend.wait_acks(&mut acks);
        } else {
            self.backend.poll_acks(&mut acks);
        }
        for ack in acks {
            self.apply_ack(ack);
        }
        self.push_backlog();
        self.finish_requests();
    }
}

fn buffer_of(operation: Operation) -> Option<IoBuf> {
    match operation {
        Operation::Read { buffer, .. } | Operation::Write { buffer, .. } => Some(buffer),
        _ => None,
    }
}

impl BlockDevice for RawPageDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn clock(&self) -> Arc<dyn Clock> {
        self.backend.clock()
    }

    fn submit(&mut self, request: Request) -> Result<(), Rejected> {
        if let Err(error) = self.info.validate(&request.operation) {
            return Err(Rejected { request, error });
        }
        if self.in_flight() >= self.info.queue_depth as usize {
            let queue_depth = self.info.queue_depth;
            return Err(Rejected {
                request,
                error: DeviceError::new(
                    &self.info.name,
                    DeviceErrorKind::QueueFull { queue_depth },
                ),
            });
        }
        let per_block = u64::from(self.pages_per_block);
        match &request.operation {
            Operation::CopyByReference { .. } => return Err(self.refuse(request, COPY_REFUSED)),
            Operation::Trim {
                first_block,
                block_count,
            } if first_block % per_block != 0 || block_count % per_block != 0 => {
                return Err(self.refuse(request, PARTIAL_ERASE_REFUSED));
            }
            _ => {}
        }
        let id = self.next_request;
        self.next_request += 1;
        let commands = self.commands(&request.operation);
        self.open.insert(
            id,
            OpenRequest {
                tag: request.tag,
                operation: request.operation,
                commands_left: commands.len() as u64,
                error: None,
            },
        );
        for (block, command) in commands {
            let tag = self.next_flash_tag;
            self.next_flash_tag += 1;
            self.flash_tags.insert(tag, (id, block));
            self.send(FlashRequest {
                tag,
                host: 0,
                command,
            });
        }
        Ok(())
    }

    fn poll_completions(&mut self, completions: &mut Vec<Completion>) -> usize {
        self.pump(false);
        let count = self.ready.len();
        completions.append(&mut self.ready);
        count
    }

    fn wait_completions(
        &mut self,
        completions: &mut Vec<Completion>,
    ) -> Result<usize, DeviceError> {
        if self.in_flight() == 0 {
            return Err(DeviceError::new(
                &self.info.name,
                DeviceErrorKind::NothingInFlight,
            ));
        }
        while self.ready.is_empty() {
            self.pump(true);
        }
        let count = self.ready.len();
        completions.append(&mut self.ready);
        Ok(count)
    }

    fn in_flight(&self) -> usize {
        self.open.len() + self.ready.len()
    }
}
