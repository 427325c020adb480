//! The read stage: a reader thread with its own engine client keeps many reads in flight over
//! its share of the files, taking one credit per chunk, and hands each chunk (still in the
//! engine's buffer) to the kernel workers.
//!
//! Small whole files (at most one chunk) are gathered into batches and read with one
//! [`Command::ReadFiles`] per batch: one engine message, one planning pass and one reply for
//! up to hundreds of files, with adjacent files coming in one device request and packed into
//! a few pool buffers. Credits count pool buffers, not files: a batch of `n` files reserves
//! `min(n, READ_FILES_MAX_BUFFERS)` credits (the most buffers the engine gives it), and when
//! it comes back keeps one per buffer it took (shared by the files in that buffer, given
//! back when the last of them is reduced) and returns the rest at once. A file the engine
//! left out because the batch had its buffers ([`EngineError::BatchBuffersFull`]) goes into
//! a later batch. A batch is sent as soon as it is full, when it would exceed the byte
//! limit, when no credit is free and nothing else is in flight (while reads are in flight,
//! their completions free credits, so the batch keeps growing instead of going out small),
//! or when the files run out; several batches are in flight at once, up to the reader's
//! reads in flight.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crossbeam_channel::Sender;
use flashpipe_engine::command::READ_FILES_MAX_BUFFERS;
use flashpipe_engine::{Command, EngineClient, EngineError, ReadData, Reply, Ticket};
use flashpipe_kernels::api::{FileInfo, FileJob};

use super::{
    guarded, Credit, FileEntry, FileStart, FileWork, ResultMessage, SequentialState, Shared,
    SharedCredit, WorkItem,
};
use crate::error::PipelineError;
use crate::report::StageCounters;

/// One reader thread's inputs.
pub(crate) struct ReaderPlan {
    /// (input index, file name, size) of each file, in the order to read them.
    pub(crate) files: Vec<(usize, String, u64)>,
    pub(crate) reads_in_flight: usize,
    pub(crate) chunk_bytes: u64,
    /// Most small files per batched read; below 2 every file takes single reads.
    pub(crate) batch_files_limit: usize,
}

/// A command in flight: one chunk of a file (with its credit), or a batch of small whole
/// files (with the credits reserved for its buffers).
enum InFlight {
    Chunk(Arc<FileEntry>, u64, u64, Credit),
    Files(Vec<(Arc<FileEntry>, u64)>, Vec<Credit>),
}

/// Small files waiting to be read together, and the credits reserved for them: one per
/// file up to the most buffers a batch takes.
#[derive(Default)]
struct PendingBatch {
    files: Vec<(Arc<FileEntry>, u64)>,
    bytes: u64,
    credits: Vec<Credit>,
}

impl PendingBatch {
    /// Credits the batch needs with one more file.
    fn credits_needed_with_one_more(&self) -> usize {
        (self.files.len() + 1).min(READ_FILES_MAX_BUFFERS)
    }
}

struct Reader<'a> {
    shared: &'a Shared,
    client: EngineClient,
    work: Sender<Vec<WorkItem>>,
    results: Sender<ResultMessage>,
    reads: HashMap<Ticket, InFlight>,
    counters: StageCounters,
    reads_in_flight: usize,
    pending: PendingBatch,
    /// Parallel files registered whose starts have not gone to the reduce stage yet (each
    /// goes before the first read of its file is sent).
    pending_starts: Vec<FileStart>,
    /// Files of batches that the engine left out (the batch had its buffers), to be sent
    /// again.
    left_out: Vec<(Arc<FileEntry>, u64)>,
    batch_files_limit: usize,
    batch_bytes_limit: u64,
}

/// Runs one reader to the end of its files (or until cancelled) and returns its counters.
pub(crate) fn run_reader(
    shared: &Shared,
    client: EngineClient,
    plan: ReaderPlan,
    work: Sender<Vec<WorkItem>>,
    results: Sender<ResultMessage>,
) -> StageCounters {
    let batch_files_limit = plan.batch_files_limit.min(client.max_read_files_count());
    let batch_bytes_limit = client.max_read_files_bytes();
    let mut reader = Reader {
        shared,
        client,
        work,
        results,
        reads: HashMap::new(),
        counters: StageCounters::default(),
        reads_in_flight: plan.reads_in_flight,
        pending: PendingBatch::default(),
        pending_starts: Vec::new(),
        left_out: Vec::new(),
        batch_files_limit,
        batch_bytes_limit,
    };
    let mut stopped = false;
    for (index, name, size_bytes) in &plan.files {
        if shared.cancelled()
            || reader.send_left_out().is_err()
            || reader
                .read_file(*index, name, *size_bytes, plan.chunk_bytes)
                .is_err()
        {
            stopped = true;
            break;
        }
    }
    if stopped || reader.finish_batches().is_err() {
        reader.abandon_batch();
    }
    while reader.client.outstanding() > 0 && reader.reap_one() {}
    reader.counters
}

/// Marks that the reader must stop (the reason is already recorded in `Shared`).
struct Stop;

impl Reader<'_> {
    fn read_file(
        &mut self,
        index: usize,
        name: &str,
        size_bytes: u64,
        chunk_bytes: u64,
    ) -> Result<(), Stop> {
        let info = FileInfo::new(name, size_bytes);
        let job = guarded(name, 0, || self.shared.kernel.start_file(&info))
            .map_err(|error| self.stop(error))?;
        let entry = self.register(index, info, job)?;
        if size_bytes > 0 && self.batch_files_limit >= 2 && size_bytes <= chunk_bytes {
            return self.add_to_batch(entry, size_bytes);
        }
        self.send_starts()?;
        if size_bytes == 0 {
            return self.send_empty_marker(entry);
        }
        let mut offset_bytes = 0u64;
        while offset_bytes < size_bytes {
            let credit = self.acquire_credit()?;
            while self.client.outstanding() >= self.reads_in_flight {
                if !self.reap_one() {
                    return Err(Stop);
                }
            }
            let length_bytes = chunk_bytes.min(size_bytes - offset_bytes);
            self.submit_read(&entry, offset_bytes, length_bytes, credit)?;
            offset_bytes += length_bytes;
        }
        Ok(())
    }

    /// Adds a small whole file to the pending batch (reserving a credit while the batch
    /// needs more), sending the batch first when the file would not fit and afterwards
    /// when it is full.
    fn add_to_batch(&mut self, entry: Arc<FileEntry>, size_bytes: u64) -> Result<(), Stop> {
        if self.pending.bytes + size_bytes > self.batch_bytes_limit {
            self.submit_batch()?;
        }
        while self.pending.credits.len() < self.pending.credits_needed_with_one_more() {
            let credit = self.acquire_credit()?;
            self.pending.credits.push(credit);
        }
        self.pending.files.push((entry, size_bytes));
        self.pending.bytes += size_bytes;
        if self.pending.files.len() >= self.batch_files_limit {
            self.submit_batch()?;
        }
        Ok(())
    }

    /// Puts the files the engine left out of earlier batches into the pending batch.
    fn send_left_out(&mut self) -> Result<(), Stop> {
        while let Some((entry, size_bytes)) = self.left_out.pop() {
            self.add_to_batch(entry, size_bytes)?;
        }
        Ok(())
    }

    /// Sends the last batch, and again the files the engine leaves out, until every batch
    /// is back.
    fn finish_batches(&mut self) -> Result<(), Stop> {
        loop {
            self.send_left_out()?;
            self.submit_batch()?;
            if self.left_out.is_empty() && self.client.outstanding() == 0 {
                return Ok(());
            }
            if !self.reap_one() {
                return Err(Stop);
            }
        }
    }

    /// Sends the pending batch as one [`Command::ReadFiles`] (nothing when it is empty).
    fn submit_batch(&mut self) -> Result<(), Stop> {
        if self.pending.files.is_empty() {
            return Ok(());
        }
        while self.client.outstanding() >= self.reads_in_flight {
            if !self.reap_one() {
                return Err(Stop);
            }
        }
        self.send_starts()?;
        let batch = std::mem::take(&mut self.pending);
        assert!(
            batch.credits.len() >= batch.files.len().min(READ_FILES_MAX_BUFFERS),
            "a batch holds a credit for every buffer it may take"
        );
        let names = batch
            .files
            .iter()
            .map(|(entry, _)| entry.info.name.to_string())
            .collect();
        let started_ns = self.shared.clock.now_ns();
        let submitted = self.client.submit(Command::ReadFiles { names });
        self.counters.busy_ns += self.shared.clock.now_ns().saturating_sub(started_ns);
        match submitted {
            Ok(ticket) => {
                self.reads
                    .insert(ticket, InFlight::Files(batch.files, batch.credits));
                Ok(())
            }
            Err(source) => Err(self.stop(read_error(&batch.files[0].0, 0, source))),
        }
    }

    /// Gives back the credits of a batch that will not be sent (the job is stopping).
    fn abandon_batch(&mut self) {
        self.pending = PendingBatch::default();
        self.left_out.clear();
    }

    fn stop(&self, error: PipelineError) -> Stop {
        self.shared.fail(error);
        Stop
    }

    /// Makes the file's entry; a parallel file's reducer and writer wait in the pending
    /// starts, which go to the reduce stage before any read of the file is sent.
    fn register(
        &mut self,
        index: usize,
        info: FileInfo,
        job: FileJob,
    ) -> Result<Arc<FileEntry>, Stop> {
        let writer = self.shared.output.writer_for(index, info.size_bytes);
        match job {
            FileJob::Parallel { mapper, reducer } => {
                let entry = Arc::new(FileEntry {
                    index,
                    info,
                    work: FileWork::Parallel(mapper),
                });
                self.pending_starts.push(FileStart {
                    entry: Arc::clone(&entry),
                    reducer,
                    writer,
                });
                Ok(entry)
            }
            FileJob::Sequential(job) => Ok(Arc::new(FileEntry {
                index,
                info,
                work: FileWork::Sequential(Mutex::new(SequentialState {
                    job: Some(job),
                    writer: Some(writer),
                    pending: Default::default(),
                    next_offset_bytes: 0,
                    active: false,
                })),
            })),
        }
    }

    /// Sends the pending starts of parallel files to the reduce stage in one message.
    fn send_starts(&mut self) -> Result<(), Stop> {
        if self.pending_starts.is_empty() {
            return Ok(());
        }
        let starts = std::mem::take(&mut self.pending_starts);
        self.send_blocking_result(ResultMessage::FilesStarted(starts))
    }

    fn send_blocking_result(&mut self, message: ResultMessage) -> Result<(), Stop> {
        let started_ns = self.shared.clock.now_ns();
        let sent = self.results.send(message);
        self.counters.blocked_ns += self.shared.clock.now_ns().saturating_sub(started_ns);
        sent.map_err(|_| Stop)
    }

    /// An empty in-order file still needs its job finished: a worker does it on this marker.
    fn send_empty_marker(&mut self, entry: Arc<FileEntry>) -> Result<(), Stop> {
        if matches!(entry.work, FileWork::Parallel(_)) {
            return Ok(());
        }
        let credit = self.acquire_credit()?;
        self.dispatch(WorkItem {
            entry,
            offset_bytes: 0,
            data: None,
            credit: Arc::new(credit),
        });
        Ok(())
    }

    /// Takes a credit, delivering completed reads while none is free (they free credits).
    fn acquire_credit(&mut self) -> Result<Credit, Stop> {
        loop {
            if self.shared.cancelled() {
                return Err(Stop);
            }
            if let Some(credit) = self.shared.try_acquire_credit() {
                return Ok(credit);
            }
            if self.client.outstanding() > 0 {
                if !self.reap_one() {
                    return Err(Stop);
                }
                continue;
            }
            if !self.pending.files.is_empty() {
                self.submit_batch()?;
                continue;
            }
            let started_ns = self.shared.clock.now_ns();
            let acquired = self.shared.acquire_credit_briefly();
            self.counters.blocked_ns += self.shared.clock.now_ns().saturating_sub(started_ns);
            if let Some(credit) = acquired {
                return Ok(credit);
            }
        }
    }

    fn submit_read(
        &mut self,
        entry: &Arc<FileEntry>,
        offset_bytes: u64,
        length_bytes: u64,
        credit: Credit,
    ) -> Result<(), Stop> {
        let started_ns = self.shared.clock.now_ns();
        let submitted = self.client.submit(Command::Read {
            name: entry.info.name.to_string(),
            offset_bytes,
            length_bytes,
        });
        self.counters.busy_ns += self.shared.clock.now_ns().saturating_sub(started_ns);
        match submitted {
            Ok(ticket) => {
                self.reads.insert(
                    ticket,
                    InFlight::Chunk(Arc::clone(entry), offset_bytes, length_bytes, credit),
                );
                Ok(())
            }
            Err(source) => Err(self.stop(read_error(entry, offset_bytes, source))),
        }
    }

    /// Waits for one read and passes it on (or drops it when the job is cancelled); false when
    /// the engine has gone away.
    fn reap_one(&mut self) -> bool {
        let started_ns = self.shared.clock.now_ns();
        let completion = self.client.next_completion();
        self.counters.busy_ns += self.shared.clock.now_ns().saturating_sub(started_ns);
        match completion {
            Ok((ticket, result)) => {
                self.deliver(ticket, result);
                true
            }
            Err(error) => {
                self.shared.fail(PipelineError::Config(format!(
                    "engine client lost its reads: {error}"
                )));
                self.reads.clear();
                false
            }
        }
    }

    /// Passes one command's data on (or drops it when the job is cancelled).
    fn deliver(&mut self, ticket: Ticket, result: Result<Reply, EngineError>) {
        let in_flight = self
            .reads
            .remove(&ticket)
            .expect("every completion answers a read this reader submitted");
        match (in_flight, result) {
            (InFlight::Chunk(entry, offset_bytes, length_bytes, credit), Ok(Reply::Data(data))) => {
                assert_eq!(
                    data.len() as u64,
                    length_bytes,
                    "the engine returned a read of another length"
                );
                if let Some(item) = self.work_item(entry, offset_bytes, data, Arc::new(credit)) {
                    self.dispatch(item);
                }
            }
            (InFlight::Files(files, credits), Ok(Reply::Files(results))) => {
                self.deliver_batch(files, credits, results);
            }
            (InFlight::Chunk(entry, offset_bytes, ..), Err(source)) => {
                self.shared.fail(read_error(&entry, offset_bytes, source));
            }
            (InFlight::Files(files, _), Err(source)) => {
                self.shared.fail(read_error(&files[0].0, 0, source));
            }
            (_, Ok(other)) => unreachable!("a read completed with {other:?}"),
        }
    }

    /// Hands a batch's files to the workers: the files in one pool buffer share one of the
    /// batch's credits, the credits of buffers the engine did not take go back at once, and
    /// files the engine left out wait for a later batch.
    fn deliver_batch(
        &mut self,
        files: Vec<(Arc<FileEntry>, u64)>,
        mut credits: Vec<Credit>,
        results: Vec<Result<ReadData, EngineError>>,
    ) {
        assert_eq!(files.len(), results.len(), "one result per file of a batch");
        let mut credit_by_buffer: Vec<(Option<(u64, u32)>, SharedCredit)> = Vec::new();
        let mut items = Vec::with_capacity(files.len());
        for ((entry, size_bytes), result) in files.into_iter().zip(results) {
            let data = match result {
                Ok(data) => data,
                Err(EngineError::BatchBuffersFull { .. }) => {
                    self.left_out.push((entry, size_bytes));
                    continue;
                }
                Err(source) => {
                    self.shared.fail(read_error(&entry, 0, source));
                    continue;
                }
            };
            if data.len() as u64 != size_bytes {
                self.shared.fail(PipelineError::Config(format!(
                    "{} changed size during the job: {size_bytes} bytes, then {} bytes",
                    entry.info.name,
                    data.len()
                )));
                continue;
            }
            let slot = data.pool_slot();
            let credit = match credit_by_buffer.iter().find(|(held, _)| *held == slot) {
                Some((_, credit)) => Arc::clone(credit),
                None => {
                    let credit = Arc::new(
                        credits
                            .pop()
                            .expect("a batch takes no more buffers than it holds credits for"),
                    );
                    credit_by_buffer.push((slot, Arc::clone(&credit)));
                    credit
                }
            };
            items.extend(self.work_item(entry, 0, data, credit));
        }
        drop(credits);
        drop(credit_by_buffer);
        self.dispatch_all(items);
    }

    /// Counts a chunk read and makes it work for the kernel (with the credit of its
    /// buffer), or drops it when the job is cancelled.
    fn work_item(
        &mut self,
        entry: Arc<FileEntry>,
        offset_bytes: u64,
        data: ReadData,
        credit: SharedCredit,
    ) -> Option<WorkItem> {
        self.counters.items += 1;
        self.counters.bytes += data.len() as u64;
        if self.shared.cancelled() {
            return None;
        }
        Some(WorkItem {
            entry,
            offset_bytes,
            data: Some(data),
            credit,
        })
    }

    fn dispatch(&mut self, item: WorkItem) {
        self.dispatch_all(vec![item]);
    }

    /// Hands a group of chunks to the workers in one message (each holds its credit).
    fn dispatch_all(&mut self, items: Vec<WorkItem>) {
        if items.is_empty() {
            return;
        }
        let started_ns = self.shared.clock.now_ns();
        let _ = self.work.send(items);
        self.counters.blocked_ns += self.shared.clock.now_ns().saturating_sub(started_ns);
    }
}

fn read_error(entry: &FileEntry, offset_bytes: u64, source: EngineError) -> PipelineError {
    PipelineError::Read {
        file: entry.info.name.to_string(),
        offset_bytes,
        source,
    }
}
