//! The pre-FTL block device: a [`BlockDevice`] over a [`FlashArray`] by fixed striping.
//!
//! Until the FTL (issue #5) lands, logical block `L` (one flash page of data) lives at a
//! fixed place: channel `L % C`, way `(L / C) % W`, then page `(L / (C W)) % P` of the
//! way's `(L / (C W P))`-th good block (factory bad blocks are skipped; the capacity is
//! set by the way with the fewest good blocks). Flash cannot overwrite in place, so a
//! write to a page at or past the block's next page programs it (filling any gap with
//! zero pages), and a write to an already-programmed page rewrites the whole block:
//! read every programmed page, erase, program them back with the new data
//! (read-modify-write). Unwritten and trimmed blocks read as zeros. This is slow for
//! random writes, by design: it is what an array without an FTL costs.
//!
//! Work on one flash block runs one job at a time, in submission order; jobs on
//! different blocks run concurrently through the array's scheduler.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use flashpipe_device::{
    wait_in_steps, BlockDevice, Clock, Completion, DeviceError, DeviceErrorKind, DeviceInfo, IoBuf,
    Operation, Rejected, Request,
};

use crate::array::FlashArray;
use crate::interface::{Ack, AckStatus, FlashAddress, FlashCommand, FlashRequest};

/// One logical page's part of a request.
enum PageWork {
    Read { request: u64, offset: usize },
    Write { request: u64, data: Vec<u8> },
    Trim { request: u64 },
}

/// A pending job on one flash block.
struct BlockJob {
    page: u32,
    work: PageWork,
    /// The device block the job is for, named by its errors.
    logical_block: u64,
}

/// Where a job on one block stands.
enum JobPhase {
    /// Waiting for one raw command.
    Single,
    /// Read-modify-write: reading the programmed pages back.
    Gathering {
        pages: Vec<Option<Vec<u8>>>,
        outstanding: u32,
    },
    /// Read-modify-write: erasing.
    Erasing { pages: Vec<Option<Vec<u8>>> },
    /// Programming pages in order; `outstanding` acks still due.
    Programming { outstanding: u32 },
}

struct ActiveJob {
    job: BlockJob,
    phase: JobPhase,
}

/// A client request being served.
struct OpenRequest {
    tag: u64,
    buffer: Option<IoBuf>,
    pages_left: u32,
    error: Option<DeviceError>,
}

#[derive(Default)]
struct BlockQueue {
    pending: VecDeque<BlockJob>,
    active: Option<ActiveJob>,
    next_page: u32,
}

/// A block device over a flash array with fixed striping (the pre-FTL mode).
pub struct StripedFlashDevice {
    array: FlashArray,
    info: DeviceInfo,
    good_blocks: Vec<Vec<u32>>,
    blocks: HashMap<(u32, u32, u32), BlockQueue>,
    requests: HashMap<u64, OpenRequest>,
    next_request_id: u64,
    raw_tag_owner: HashMap<u64, (u32, u32, u32, u32)>,
    next_raw_tag: u64,
    raw_backlog: VecDeque<FlashRequest>,
    ready: Vec<Completion>,
    acks: Vec<Ack>,
}

type BlockKey = (u32, u32, u32);

impl StripedFlashDevice {
    /// A block device over `array` (one device of it: device 0), with `queue_depth` tags.
    pub fn new(
        array: FlashArray,
        name: &str,
        queue_depth: u32,
    ) -> Result<StripedFlashDevice, DeviceError> {
        let name: Arc<str> = Arc::from(name);
        flashpipe_device::request::check_queue_depth(&name, queue_depth)?;
        let config = array.config().clone();
        let geometry = &config.geometry;
        let mut good_blocks = Vec::new();
        for way in 0..geometry.channels * geometry.ways {
            let address = |block| FlashAddress {
                device: 0,
                bus: way % geometry.channels,
                chip: way / geometry.channels,
                block,
                page: 0,
            };
            good_blocks.push(
                (0..config.blocks_per_way())
                    .filter(|&block| {
                        !array.is_factory_bad(address(block))
                            && !array
                                .block_state(address(block))
                                .is_some_and(|state| state.grown_bad)
                    })
                    .collect::<Vec<u32>>(),
            );
        }
        let usable_blocks = good_blocks.iter().map(Vec::len).min().unwrap_or(0) as u64;
        let block_count = usable_blocks
            * u64::from(geometry.pages_per_block)
            * u64::from(geometry.channels * geometry.ways);
        if block_count == 0 || !array.keeps_data() {
            return Err(DeviceError::new(
                &name,
                DeviceErrorKind::Open {
                    detail: "the flash array needs good blocks and stored data".to_string(),
                },
            ));
        }
        let mut device = StripedFlashDevice {
            info: DeviceInfo {
                name,
                block_size_bytes: geometry.page_data_bytes,
                block_count,
                queue_depth,
            },
            good_blocks,
            blocks: HashMap::new(),
            requests: HashMap::new(),
            next_request_id: 0,
            raw_tag_owner: HashMap::new(),
            next_raw_tag: 0,
            raw_backlog: VecDeque::new(),
            ready: Vec::new(),
            acks: Vec::new(),
            array,
        };
        device.load_write_pointers();
        Ok(device)
    }

    fn load_write_pointers(&mut self) {
        let geometry = self.array.config().geometry.clone();
        for way in 0..geometry.channels * geometry.ways {
            for &block in &self.good_blocks[way as usize] {
                let key = (way % geometry.channels, way / geometry.channels, block);
                let state = self
                    .array
                    .block_state(self.address(key, 0))
                    .unwrap_or_default();
                if state.next_page > 0 {
                    self.blocks.entry(key).or_default().next_page = state.next_page;
                }
            }
        }
    }

    /// The array underneath.
    pub fn array(&self) -> &FlashArray {
        &self.array
    }

    /// Hands the array back (call [`FlashArray::sync`] on it to persist).
    pub fn into_array(self) -> FlashArray {
        self.array
    }

    fn address(&self, key: BlockKey, page: u32) -> FlashAddress {
        FlashAddress {
            device: 0,
            bus: key.0,
            chip: key.1,
            block: key.2,
            page,
        }
    }

    /// The flash block and page of logical block `logical_block`.
    pub fn locate(&self, logical_block: u64) -> (BlockKey, u32) {
        let geometry = &self.array.config().geometry;
        let channels = u64::from(geometry.channels);
        let ways = u64::from(geometry.ways);
        let pages = u64::from(geometry.pages_per_block);
        let channel = (logical_block % channels) as u32;
        let way = ((logical_block / channels) % ways) as u32;
        let in_way = logical_block / (channels * ways);
        let page = (in_way % pages) as u32;
        let block_ordinal = (in_way / pages) as usize;
        let way_index = (way * geometry.channels + channel) as usize;
        let block = self.good_blocks[way_index][block_ordinal];
        ((channel, way, block), page)
    }

    fn open_request(&mut self, request: Request) -> Result<(), Rejected> {
        if let Err(error) = self.info.validate(&request.operation) {
            return Err(Rejected { request, error });
        }
        let request_id = self.next_request_id;
        self.next_request_id += 1;
        let tag = request.tag;
        let block_bytes = self.info.block_size_bytes as usize;
        let mut jobs: Vec<(u64, PageWork)> = Vec::new();
        let buffer = match request.operation {
            Operation::Read {
                first_block,
                buffer,
            } => {
                for index in 0..buffer.len() / block_bytes {
                    let work = PageWork::Read {
                        request: request_id,
                        offset: index * block_bytes,
                    };
                    jobs.push((first_block + index as u64, work));
                }
                Some(buffer)
            }
            Operation::Write {
                first_block,
                buffer,
            } => {
                for (index, chunk) in buffer.chunks(block_bytes).enumerate() {
                    let work = PageWork::Write {
                        request: request_id,
                        data: chunk.to_vec(),
                    };
                    jobs.push((first_block + index as u64, work));
                }
                Some(buffer)
            }
            Operation::Trim {
                first_block,
                block_count,
            } => {
                for index in 0..block_count {
                    jobs.push((
                        first_block + index,
                        PageWork::Trim {
                            request: request_id,
                        },
                    ));
                }
                None
            }
            Operation::Flush => None,
            Operation::CopyByReference { .. } => {
                panic!("StripedFlashDevice::submit refuses copy by reference")
            }
        };
        let page_count = jobs.len() as u32;
        self.requests.insert(
            request_id,
            OpenRequest {
                tag,
                buffer,
                pages_left: page_count,
                error: None,
            },
        );
        for (logical_block, work) in jobs {
            self.queue_job(logical_block, work);
        }
        if page_count == 0 {
            if let Err(error) = self.array.sync() {
                let name = Arc::clone(&self.info.name);
                let open = self.requests.get_mut(&request_id).expect("just opened");
                open.error = Some(DeviceError::new(
                    &name,
                    DeviceErrorKind::IoFailed {
                        detail: error.to_string(),
                    },
                ));
            }
            self.finish_request(request_id);
        }
        Ok(())
    }

    fn queue_job(&mut self, logical_block: u64, work: PageWork) {
        let (key, page) = self.locate(logical_block);
        self.blocks
            .entry(key)
            .or_default()
            .pending
            .push_back(BlockJob {
                page,
                work,
                logical_block,
            });
        self.start_next_job(key);
    }

    fn start_next_job(&mut self, key: BlockKey) {
        let queue = self.blocks.get_mut(&key).expect("queued block");
        if queue.active.is_some() {
            return;
        }
        let Some(job) = queue.pending.pop_front() else {
            return;
        };
        let next_page = queue.next_page;
        let phase = match &job.work {
            PageWork::Read { .. } if job.page < next_page => {
                self.send(
                    key,
                    job.page,
                    FlashCommand::ReadPage {
                        address: self.address(key, job.page),
                    },
                );
                JobPhase::Single
            }
            PageWork::Read { .. } => {
                self.finish_page_read_zeros(&job);
                return self.start_next_job(key);
            }
            PageWork::Write { data, .. } if job.page >= next_page => {
                let mut outstanding = 0;
                for filler in next_page..job.page {
                    outstanding += self.program(key, filler, vec![0; data.len()]);
                }
                outstanding += self.program(key, job.page, data.clone());
                self.blocks.get_mut(&key).expect("queued block").next_page = job.page + 1;
                JobPhase::Programming { outstanding }
            }
            PageWork::Trim { .. } if job.page >= next_page => {
                self.finish_page(&job, None);
                return self.start_next_job(key);
            }
            PageWork::Write { .. } | PageWork::Trim { .. } => {
                for page in 0..next_page {
                    self.send(
                        key,
                        page,
                        FlashCommand::ReadPage {
                            address: self.address(key, page),
                        },
                    );
                }
                JobPhase::Gathering {
                    pages: vec![None; next_page as usize],
                    outstanding: next_page,
                }
            }
        };
        self.blocks.get_mut(&key).expect("queued block").active = Some(ActiveJob { job, phase });
    }

    fn program(&mut self, key: BlockKey, page: u32, data: Vec<u8>) -> u32 {
        let address = self.address(key, page);
        self.send(
            key,
            page,
            FlashCommand::WritePage {
                address,
                data,
                spare: Vec::new(),
            },
        );
        1
    }

    fn send(&mut self, key: BlockKey, page: u32, command: FlashCommand) {
        let tag = self.next_raw_tag;
        self.next_raw_tag += 1;
        self.raw_tag_owner.insert(tag, (key.0, key.1, key.2, page));
        self.raw_backlog.push_back(FlashRequest {
            tag,
            host: 0,
            command,
        });
        self.push_backlog();
    }

    fn push_backlog(&mut self) {
        while let Some(request) = self.raw_backlog.pop_front() {
            if let Err(error) = self.array.submit(request) {
                match error {
                    crate::interface::SubmitError::QueueFull { request, .. }
                    | crate::interface::SubmitError::UnknownHost { request, .. } => {
                        self.raw_backlog.push_front(*request);
                    }
                }
                return;
            }
        }
    }

    fn finish_page_read_zeros(&mut self, job: &BlockJob) {
        if let PageWork::Read { request, offset } = job.work {
            let block_bytes = self.info.block_size_bytes as usize;
            if let Some(buffer) = self
                .requests
                .get_mut(&request)
                .and_then(|open| open.buffer.as_mut())
            {
                buffer[offset..offset + block_bytes].fill(0);
            }
        }
        self.finish_page(job, None);
    }

    fn finish_page(&mut self, job: &BlockJob, error: Option<DeviceErrorKind>) {
        let request_id = match job.work {
            PageWork::Read { request, .. }
            | PageWork::Write { request, .. }
            | PageWork::Trim { request } => request,
        };
        let name = Arc::clone(&self.info.name);
        let open = self.requests.get_mut(&request_id).expect("open request");
        if let Some(kind) = error {
            open.error.get_or_insert(DeviceError::new(&name, kind));
        }
        open.pages_left -= 1;
        if open.pages_left == 0 {
            self.finish_request(request_id);
        }
    }

    fn finish_request(&mut self, request_id: u64) {
        let open = self.requests.remove(&request_id).expect("open request");
        self.ready.push(Completion {
            tag: open.tag,
            status: open.error.map_or(Ok(()), Err),
            buffer: open.buffer,
        });
    }

    fn handle_ack(&mut self, ack: Ack) {
        let (channel, way, block, page) =
            self.raw_tag_owner.remove(&ack.tag).expect("a tag we sent");
        let key = (channel, way, block);
        let mut active = self
            .blocks
            .get_mut(&key)
            .and_then(|queue| queue.active.take())
            .expect("an ack for an active job");
        let error = ack_error_kind(&ack.status, &active.job, key, page);
        let done = match &mut active.phase {
            JobPhase::Single => {
                if let (PageWork::Read { request, offset }, Some(data)) =
                    (&active.job.work, &ack.data)
                {
                    if let Some(buffer) = self
                        .requests
                        .get_mut(request)
                        .and_then(|open| open.buffer.as_mut())
                    {
                        buffer[*offset..*offset + data.len()].copy_from_slice(data);
                    }
                }
                Some(error)
            }
            JobPhase::Programming { outstanding } => {
                *outstanding -= 1;
                if error.is_some() {
                    Some(error)
                } else {
                    (*outstanding == 0).then_some(None)
                }
            }
            JobPhase::Gathering { pages, outstanding } => {
                pages[page as usize] = ack.data.clone();
                *outstanding -= 1;
                if error.is_some() {
                    Some(error)
                } else {
                    if *outstanding == 0 {
                        let pages = std::mem::take(pages);
                        active.phase = JobPhase::Erasing { pages };
                        self.send(
                            key,
                            0,
                            FlashCommand::EraseBlock {
                                address: self.address(key, 0),
                            },
                        );
                    }
                    None
                }
            }
            JobPhase::Erasing { pages } => {
                if error.is_some() {
                    Some(error)
                } else {
                    let pages = std::mem::take(pages);
                    active.phase = self.reprogram(key, &active.job, pages);
                    None
                }
            }
        };
        match done {
            Some(error) => {
                self.finish_page(&active.job, error);
                self.start_next_job(key);
            }
            None => {
                self.blocks.get_mut(&key).expect("queued block").active = Some(active);
            }
        }
    }

    fn reprogram(
        &mut self,
        key: BlockKey,
        job: &BlockJob,
        mut pages: Vec<Option<Vec<u8>>>,
    ) -> JobPhase {
        let block_bytes = self.info.block_size_bytes as usize;
        let last = pages.len().max(job.page as usize + 1);
        pages.resize(last, None);
        pages[job.page as usize] = match &job.work {
            PageWork::Write { data, .. } => Some(data.clone()),
            _ => Some(vec![0; block_bytes]),
        };
        let mut outstanding = 0;
        for (page, data) in pages.into_iter().enumerate() {
            let data = data.unwrap_or_else(|| vec![0; block_bytes]);
            outstanding += self.program(key, page as u32, data);
        }
        self.blocks.get_mut(&key).expect("queued block").next_page = last as u32;
        JobPhase::Programming { outstanding }
    }

    /// Takes the flash array's acks (blocking for at least one when `wait`), handles
    /// them and pushes the backlog; returns how many acks it took.
    fn pump_acks(&mut self, wait: bool) -> usize {
        let mut acks = std::mem::take(&mut self.acks);
        acks.clear();
        let moved = if wait {
            self.array.wait_acks(&mut acks)
        } else {
            self.array.poll_acks(&mut acks)
        };
        for ack in acks.drain(..) {
            self.handle_ack(ack);
        }
        self.acks = acks;
        self.push_backlog();
        moved
    }
}

/// The error an ack of `page` of flash block `key` means for `job`: an uncorrectable read
/// of the job's own page loses the job's block, a failed program or erase means the
/// flash block went bad; anything else (an uncorrectable page read to rewrite its block,
/// a rule the adapter broke) is described.
fn ack_error_kind(
    status: &AckStatus,
    job: &BlockJob,
    key: BlockKey,
    page: u32,
) -> Option<DeviceErrorKind> {
    let own_read = page == job.page && matches!(job.work, PageWork::Read { .. });
    match status {
        AckStatus::Ok { .. } => None,
        AckStatus::Uncorrectable if own_read => Some(DeviceErrorKind::Uncorrectable {
            block: job.logical_block,
        }),
        AckStatus::BadBlock => Some(DeviceErrorKind::BadBlock {
            block: job.logical_block,
        }),
        AckStatus::Uncorrectable | AckStatus::RuleViolation(_) => Some(DeviceErrorKind::IoFailed {
            detail: format!(
                "block {}: flash {key:?} page {page}: {status:?}",
                job.logical_block
            ),
        }),
    }
}

impl BlockDevice for StripedFlashDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn clock(&self) -> Arc<dyn Clock> {
        self.array.shared_clock()
    }

    fn submit(&mut self, request: Request) -> Result<(), Rejected> {
        if self.requests.len() + self.ready.len() >= self.info.queue_depth as usize {
            return Err(self.info.queue_full(request));
        }
        let request = self.info.refuse_copy_by_reference(request)?;
        self.open_request(request)
    }

    fn poll_completions(&mut self, completions: &mut Vec<Completion>) -> usize {
        self.pump_acks(false);
        let count = self.ready.len();
        completions.append(&mut self.ready);
        count
    }

    fn wait_completions(
        &mut self,
        completions: &mut Vec<Completion>,
    ) -> Result<usize, DeviceError> {
        wait_in_steps(self, completions, |adapter| {
            let moved = adapter.pump_acks(true);
            assert!(
                moved > 0 || !adapter.ready.is_empty(),
                "requests are open but the flash array has nothing in flight"
            );
            Ok(())
        })
    }

    fn in_flight(&self) -> usize {
        self.requests.len() + self.ready.len()
    }
}
