//! The device worker of one export: the one thread that owns the export's
//! [`BlockDevice`]. Every connection to the export hands it jobs over one channel; it
//! turns each into tagged device requests (keeping the device's queue full, a backlog
//! when it is), reaps completions as they come and sends each job's reply to its
//! connection's writer, so replies leave out of order, by cookie.
//!
//! Because all connections share this one device, a device flush covers every write
//! completed on any connection (the device contract: a completed flush makes every write
//! completed before it was submitted durable), which is what `NBD_FLAG_CAN_MULTI_CONN`
//! promises. FUA is a write followed by a device flush before the reply.
//!
//! The allocation map is updated here, on completion, before the reply is sent: a block
//! status query after a reply sees its effect.
//!
//! The worker's state sits behind a lock ([`WorkerCell`]) so that a connection's
//! reader may serve a job on its own thread ([`try_inline`]): for a device that
//! completes at submission (a RAM disk) the request is submitted, completed and its
//! reply handed back to the reader with no thread hand-off at all. A reader that finds
//! the lock taken by another submitting thread waits for it (a submission is short);
//! one that finds the worker thread waiting on the device hands the job over the
//! channel instead, so requests keep reaching a device that completes later. What does
//! not complete at once stays with the worker, which the reader wakes with a
//! [`JobKind::Reap`] job; the worker thread is then the one waiting on the device. The
//! device is still one device whichever thread submits, so the multi-conn flush rule
//! holds unchanged.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use flashpipe_base::{WaitPolicy, Waiter};
use flashpipe_device::{
    BlockDevice, Completion, DeviceError, DeviceErrorKind, IoBuf, Request, Tag,
};

use super::buffers::BufferRecycler;
use super::extents::ExtentMap;
use crate::wire::{NBD_EINVAL, NBD_EIO, NBD_ENOSPC, NBD_EPERM};

/// Bytes of zeroes written per device request by a `WRITE_ZEROES` that writes.
pub const ZERO_WRITE_CHUNK_BYTES: usize = 1024 * 1024;
/// Zero-write requests in flight per `WRITE_ZEROES` job.
pub const ZERO_WRITES_IN_FLIGHT: usize = 4;

/// What a job's reply carries.
#[derive(Debug)]
pub enum ReplyBody {
    /// Success, no data.
    Done,
    /// A read's data.
    Data {
        /// Byte offset of the data in the export.
        offset_bytes: u64,
        /// The data.
        buffer: IoBuf,
    },
    /// A failure: an `NBD_E*` value and a message for a human.
    Error {
        /// The NBD error value.
        error: u32,
        /// Why.
        message: String,
    },
    /// `base:allocation` extents for one context.
    BlockStatus {
        /// The context id chosen at `NBD_OPT_SET_META_CONTEXT`.
        context_id: u32,
        /// The extents, in order.
        extents: Vec<crate::wire::BlockStatusExtent>,
    },
}

/// A reply on its way to a connection's writer.
#[derive(Debug)]
pub struct OutgoingReply {
    /// The request's cookie.
    pub cookie: u64,
    /// What to send.
    pub body: ReplyBody,
}

/// What a job asks of the device, in blocks.
#[derive(Debug)]
pub enum JobKind {
    /// Read `block_count` blocks.
    Read {
        /// First block.
        first_block: u64,
        /// Blocks.
        block_count: u64,
    },
    /// Write the buffer.
    Write {
        /// First block.
        first_block: u64,
        /// The data, a whole number of blocks.
        buffer: IoBuf,
    },
    /// Flush the device.
    Flush,
    /// Trim blocks (the map records a hole).
    Trim {
        /// First block.
        first_block: u64,
        /// Blocks.
        block_count: u64,
    },
    /// Write zero blocks (the map records data).
    WriteZeroes {
        /// First block.
        first_block: u64,
        /// Blocks.
        block_count: u64,
    },
    /// No request: a reader left requests in flight on the device (served on its own
    /// thread) and asks the worker thread to reap them. No reply is sent.
    Reap,
}

/// One NBD request handed to the worker.
#[derive(Debug)]
pub struct Job {
    /// Where the reply goes.
    pub reply_to: Sender<OutgoingReply>,
    /// The request's cookie.
    pub cookie: u64,
    /// What to do.
    pub kind: JobKind,
    /// Flush before replying (FUA on a write, trim or write-zeroes).
    pub force_unit_access: bool,
}

/// A job between its first device request and its reply.
struct ActiveJob {
    reply_to: Sender<OutgoingReply>,
    cookie: u64,
    force_unit_access: bool,
    /// Device requests of this job in flight or in the backlog.
    requests_outstanding: usize,
    /// Blocks of a zero-writing job not yet submitted, from `next_block`.
    next_block: u64,
    end_block: u64,
    /// The range to record in the map when the job succeeds (and whether as a hole).
    map_update: Option<(u64, u64, bool)>,
    /// The read's byte offset.
    read_offset_bytes: u64,
    read_buffer: Option<IoBuf>,
    flushing: bool,
    failure: Option<DeviceError>,
}

/// The worker's state shared by the worker thread and the readers of every connection
/// to the export.
pub struct WorkerCell {
    /// The state; `None` once the worker thread has ended and handed the device back.
    state: Mutex<Option<DeviceWorker>>,
    /// Set while the worker thread holds the lock waiting for the device to complete
    /// something (readers then hand their jobs over rather than wait).
    waiting_on_device: AtomicBool,
}

impl WorkerCell {
    /// A cell holding `worker`.
    pub fn new(worker: DeviceWorker) -> WorkerCell {
        WorkerCell {
            state: Mutex::new(Some(worker)),
            waiting_on_device: AtomicBool::new(false),
        }
    }
}

/// A worker cell as the threads share it.
pub type SharedWorker = Arc<WorkerCell>;

/// What became of a job offered to [`try_inline`].
#[derive(Debug)]
pub enum InlineOutcome {
    /// It completed on the caller's thread: here is its reply.
    Replied(OutgoingReply),
    /// It was started, but the device has not completed it yet: the worker thread will
    /// send its reply (the caller must send it a [`JobKind::Reap`] job when
    /// `reap_needed`).
    Started {
        /// Requests are left in flight that no thread is waiting for.
        reap_needed: bool,
    },
    /// The worker thread is waiting on the device (or has ended): send the job on the
    /// channel.
    Busy(Job),
}

/// The worker's state: the device, its jobs and their requests.
pub struct DeviceWorker {
    device: Box<dyn BlockDevice>,
    extents: Arc<Mutex<ExtentMap>>,
    buffers: Arc<BufferRecycler>,
    /// How long to poll for a job before parking.
    spin: WaitPolicy,
    jobs: HashMap<u64, ActiveJob>,
    /// Device tag -> job id.
    tag_jobs: HashMap<Tag, u64>,
    backlog: VecDeque<Request>,
    next_tag: Tag,
    next_job_id: u64,
    completions: Vec<Completion>,
    /// The job a reader is serving on its own thread: its reply is kept in
    /// `inline_reply` for the reader instead of being sent.
    inline_job_id: Option<u64>,
    inline_reply: Option<OutgoingReply>,
}

impl DeviceWorker {
    /// A worker owning `device`, recording allocation in `extents`, taking read buffers
    /// from (and giving write payloads back to) `buffers`.
    pub fn new(
        device: Box<dyn BlockDevice>,
        extents: Arc<Mutex<ExtentMap>>,
        buffers: Arc<BufferRecycler>,
        spin: WaitPolicy,
    ) -> DeviceWorker {
        DeviceWorker {
            device,
            extents,
            buffers,
            spin,
            jobs: HashMap::new(),
            tag_jobs: HashMap::new(),
            backlog: VecDeque::new(),
            next_tag: 0,
            next_job_id: 0,
            completions: Vec::new(),
            inline_job_id: None,
            inline_reply: None,
        }
    }

    /// Serves jobs until every sender is gone and nothing is in flight, then flushes the
    /// device once more and hands it back (`None` if it was already taken).
    pub fn run(shared: SharedWorker, jobs: Receiver<Job>) -> Option<Box<dyn BlockDevice>> {
        let waiter = Waiter::new(lock_worker(&shared).as_ref()?.spin);
        let mut senders_gone = false;
        loop {
            let idle = lock_worker(&shared)
                .as_ref()
                .is_none_or(|worker| worker.jobs.is_empty());
            let mut first_job = None;
            if idle {
                if senders_gone {
                    break;
                }
                match waiter.receive(&jobs).0 {
                    Ok(job) => first_job = Some(job),
                    Err(_) => senders_gone = true,
                }
            }
            let mut guard = lock_worker(&shared);
            let worker = guard.as_mut()?;
            if let Some(job) = first_job {
                worker.start(job);
            }
            while !senders_gone {
                match jobs.try_recv() {
                    Ok(job) => {
                        worker.start(job);
                    }
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => senders_gone = true,
                }
            }
            worker.submit_backlog();
            let may_wait = jobs.is_empty() || senders_gone;
            shared.waiting_on_device.store(may_wait, Ordering::SeqCst);
            worker.reap(may_wait);
            shared.waiting_on_device.store(false, Ordering::SeqCst);
        }
        let mut worker = lock_worker(&shared).take()?;
        worker.final_flush();
        Some(worker.device)
    }

    fn final_flush(&mut self) {
        let tag = self.take_tag();
        if self.device.submit(Request::flush(tag)).is_ok() {
            let mut completions = Vec::new();
            while self.device.in_flight() > 0 {
                if self.device.wait_completions(&mut completions).is_err() {
                    break;
                }
            }
        }
    }

    fn take_tag(&mut self) -> Tag {
        let tag = self.next_tag;
        self.next_tag = self.next_tag.wrapping_add(1);
        tag
    }

    /// Takes `job` on: its device requests join the backlog; returns the job's id
    /// (`None` for a [`JobKind::Reap`], which has no requests).
    fn start(&mut self, job: Job) -> Option<u64> {
        if matches!(job.kind, JobKind::Reap) {
            return None;
        }
        let job_id = self.next_job_id;
        self.next_job_id += 1;
        let mut active = ActiveJob {
            reply_to: job.reply_to,
            cookie: job.cookie,
            force_unit_access: job.force_unit_access,
            requests_outstanding: 0,
            next_block: 0,
            end_block: 0,
            map_update: None,
            read_offset_bytes: 0,
            read_buffer: None,
            flushing: false,
            failure: None,
        };
        let block_size_bytes = u64::from(self.device.info().block_size_bytes);
        let requests: Vec<Request> = match job.kind {
            JobKind::Read {
                first_block,
                block_count,
            } => {
                active.read_offset_bytes = first_block * block_size_bytes;
                let buffer = self.buffers.take((block_count * block_size_bytes) as usize);
                vec![Request::read(self.take_tag(), first_block, buffer)]
            }
            JobKind::Write {
                first_block,
                buffer,
            } => {
                let end_block = first_block + buffer.len() as u64 / block_size_bytes;
                active.map_update = Some((first_block, end_block, false));
                vec![Request::write(self.take_tag(), first_block, buffer)]
            }
            JobKind::Flush => vec![Request::flush(self.take_tag())],
            JobKind::Trim {
                first_block,
                block_count,
            } => {
                active.map_update = Some((first_block, first_block + block_count, true));
                vec![Request::trim(self.take_tag(), first_block, block_count)]
            }
            JobKind::WriteZeroes {
                first_block,
                block_count,
            } => {
                active.next_block = first_block;
                active.end_block = first_block + block_count;
                active.map_update = Some((first_block, first_block + block_count, false));
                let chunk_blocks = (ZERO_WRITE_CHUNK_BYTES as u64 / block_size_bytes).max(1);
                let mut requests = Vec::new();
                while requests.len() < ZERO_WRITES_IN_FLIGHT && active.next_block < active.end_block
                {
                    let blocks = chunk_blocks.min(active.end_block - active.next_block);
                    let buffer = IoBuf::zeroed((blocks * block_size_bytes) as usize);
                    requests.push(Request::write(self.take_tag(), active.next_block, buffer));
                    active.next_block += blocks;
                }
                requests
            }
            JobKind::Reap => Vec::new(),
        };
        self.enqueue(job_id, &mut active, requests);
        self.jobs.insert(job_id, active);
        Some(job_id)
    }

    /// Submits and reaps without waiting until `job_id` has its reply or the device
    /// stops completing; returns the reply if it came.
    fn serve_inline(&mut self, job_id: u64) -> Option<OutgoingReply> {
        self.inline_job_id = Some(job_id);
        loop {
            self.submit_backlog();
            let reaped = self.reap_without_waiting();
            if self.inline_reply.is_some() || reaped == 0 {
                break;
            }
        }
        self.inline_job_id = None;
        self.inline_reply.take()
    }

    fn enqueue(&mut self, job_id: u64, active: &mut ActiveJob, requests: Vec<Request>) {
        for request in requests {
            self.tag_jobs.insert(request.tag, job_id);
            active.requests_outstanding += 1;
            self.backlog.push_back(request);
        }
    }

    fn submit_backlog(&mut self) {
        while let Some(request) = self.backlog.pop_front() {
            match self.device.submit(request) {
                Ok(()) => {}
                Err(rejected)
                    if matches!(rejected.error.kind, DeviceErrorKind::QueueFull { .. }) =>
                {
                    self.backlog.push_front(rejected.request);
                    return;
                }
                Err(rejected) => {
                    let tag = rejected.request.tag;
                    self.finish_request(tag, Err(rejected.error), rejected.request.into_buffer());
                }
            }
        }
    }

    /// Reaps what the device has completed, without waiting; returns how many.
    fn reap_without_waiting(&mut self) -> usize {
        let mut completions = std::mem::take(&mut self.completions);
        let reaped = if self.device.in_flight() > 0 {
            self.device.poll_completions(&mut completions)
        } else {
            0
        };
        for completion in completions.drain(..) {
            self.finish_request(completion.tag, completion.status, completion.buffer);
        }
        self.completions = completions;
        reaped
    }

    /// Reaps completions: waits for one when `may_wait` and requests are in flight.
    fn reap(&mut self, may_wait: bool) {
        let mut completions = std::mem::take(&mut self.completions);
        if self.device.in_flight() > 0 {
            let reaped = self.device.poll_completions(&mut completions);
            if reaped == 0 && may_wait {
                if let Err(error) = self.device.wait_completions(&mut completions) {
                    self.fail_everything(error);
                }
            }
        }
        for completion in completions.drain(..) {
            self.finish_request(completion.tag, completion.status, completion.buffer);
        }
        self.completions = completions;
    }

    /// The device cannot complete what it holds: every job fails with `error`.
    fn fail_everything(&mut self, error: DeviceError) {
        let job_ids: Vec<u64> = self.jobs.keys().copied().collect();
        for job_id in job_ids {
            if let Some(job) = self.jobs.remove(&job_id) {
                self.reply(job_id, &job, error_body(&error));
            }
        }
        self.tag_jobs.clear();
        self.backlog.clear();
    }

    fn finish_request(&mut self, tag: Tag, status: Result<(), DeviceError>, buffer: Option<IoBuf>) {
        let Some(job_id) = self.tag_jobs.remove(&tag) else {
            return;
        };
        let Some(mut job) = self.jobs.remove(&job_id) else {
            return;
        };
        assert!(
            job.requests_outstanding > 0,
            "a job's request completed twice"
        );
        job.requests_outstanding -= 1;
        match status {
            Err(error) => {
                job.failure.get_or_insert(error);
                if let Some(buffer) = buffer {
                    self.buffers.give_back(buffer);
                }
            }
            Ok(()) => self.continue_job(job_id, &mut job, buffer),
        }
        if job.requests_outstanding > 0 {
            self.jobs.insert(job_id, job);
            return;
        }
        self.complete_job(job_id, job);
    }

    /// After one of its requests succeeded: keeps a read's data, or sends the next
    /// chunk of zeroes in the returned buffer.
    fn continue_job(&mut self, job_id: u64, job: &mut ActiveJob, buffer: Option<IoBuf>) {
        if job.flushing {
            return;
        }
        if job.next_block < job.end_block && job.failure.is_none() {
            if let Some(mut buffer) = buffer {
                let block_size_bytes = u64::from(self.device.info().block_size_bytes);
                let capacity_blocks = buffer.capacity() as u64 / block_size_bytes;
                let blocks = capacity_blocks.min(job.end_block - job.next_block);
                buffer.set_len((blocks * block_size_bytes) as usize);
                buffer.as_mut_slice().fill(0);
                let request = Request::write(self.take_tag(), job.next_block, buffer);
                job.next_block += blocks;
                self.enqueue(job_id, job, vec![request]);
            }
            return;
        }
        match buffer {
            Some(buffer) if job.read_buffer.is_none() && job.map_update.is_none() => {
                job.read_buffer = Some(buffer);
            }
            Some(buffer) => self.buffers.give_back(buffer),
            None => {}
        }
    }

    /// Every request of the job is done: update the map, flush for FUA, reply.
    fn complete_job(&mut self, job_id: u64, mut job: ActiveJob) {
        if let Some(error) = job.failure.take() {
            self.reply(job_id, &job, error_body(&error));
            return;
        }
        if !job.flushing {
            if let Some((start, end, is_hole)) = job.map_update.take() {
                let mut extents = self
                    .extents
                    .lock()
                    .unwrap_or_else(|poison| poison.into_inner());
                if is_hole {
                    extents.mark_hole(start, end);
                } else {
                    extents.mark_data(start, end);
                }
            }
            if job.force_unit_access {
                job.flushing = true;
                let request = Request::flush(self.take_tag());
                self.enqueue(job_id, &mut job, vec![request]);
                self.jobs.insert(job_id, job);
                return;
            }
        }
        let body = match job.read_buffer.take() {
            Some(buffer) => ReplyBody::Data {
                offset_bytes: job.read_offset_bytes,
                buffer,
            },
            None => ReplyBody::Done,
        };
        self.reply(job_id, &job, body);
    }

    /// Sends a job's reply to its connection's writer, or keeps it for the reader
    /// serving that job on its own thread.
    fn reply(&mut self, job_id: u64, job: &ActiveJob, body: ReplyBody) {
        let reply = OutgoingReply {
            cookie: job.cookie,
            body,
        };
        if self.inline_job_id == Some(job_id) {
            self.inline_reply = Some(reply);
            return;
        }
        // A connection that is gone no longer wants its replies.
        let _ = job.reply_to.send(reply);
    }
}

fn lock_worker(shared: &WorkerCell) -> std::sync::MutexGuard<'_, Option<DeviceWorker>> {
    shared
        .state
        .lock()
        .unwrap_or_else(|poison| poison.into_inner())
}

/// Serves `job` on the caller's thread (see the module's documentation): waits for
/// a lock taken by a submitting thread, never for the device.
pub fn try_inline(shared: &WorkerCell, job: Job) -> InlineOutcome {
    let mut guard = match shared.state.try_lock() {
        Ok(guard) => guard,
        Err(std::sync::TryLockError::Poisoned(poison)) => poison.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => {
            if shared.waiting_on_device.load(Ordering::SeqCst) {
                return InlineOutcome::Busy(job);
            }
            lock_worker(shared)
        }
    };
    let Some(worker) = guard.as_mut() else {
        return InlineOutcome::Busy(job);
    };
    let Some(job_id) = worker.start(job) else {
        return InlineOutcome::Started { reap_needed: false };
    };
    match worker.serve_inline(job_id) {
        Some(reply) => InlineOutcome::Replied(reply),
        None => InlineOutcome::Started {
            reap_needed: !worker.jobs.is_empty(),
        },
    }
}

/// Asks the worker thread to reap requests left in flight (a [`JobKind::Reap`] job on
/// its channel).
pub fn send_reap(jobs: &Sender<Job>, reply_to: &Sender<OutgoingReply>) {
    let reap = Job {
        reply_to: reply_to.clone(),
        cookie: 0,
        kind: JobKind::Reap,
        force_unit_access: false,
    };
    // A worker that has stopped has nothing left to reap for us.
    let _ = jobs.send(reap);
}

/// The NBD error for a device error, with the device's message.
pub fn error_body(error: &DeviceError) -> ReplyBody {
    let code = match error.kind {
        DeviceErrorKind::OutOfSpace { .. } => NBD_ENOSPC,
        DeviceErrorKind::ReadOnly { .. } => NBD_EPERM,
        DeviceErrorKind::OutOfRange { .. } | DeviceErrorKind::Misaligned { .. } => NBD_EINVAL,
        _ => NBD_EIO,
    };
    ReplyBody::Error {
        error: code,
        message: error.to_string(),
    }
}
