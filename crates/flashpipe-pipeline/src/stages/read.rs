//! The read stage: a reader thread with its own engine client keeps many reads in flight over
//! its share of the files, taking one credit per chunk, and hands each chunk (still in the
//! engine's buffer) to the kernel workers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crossbeam_channel::Sender;
use flashpipe_engine::{Command, EngineClient, EngineError, Reply, Ticket};
use flashpipe_kernels::api::{FileInfo, FileJob};

use super::{guarded, FileEntry, FileWork, ResultMessage, SequentialState, Shared, WorkItem};
use crate::error::PipelineError;
use crate::report::StageCounters;

/// One reader thread's inputs.
pub(crate) struct ReaderPlan {
    /// (input index, file name, size) of each file, in the order to read them.
    pub(crate) files: Vec<(usize, String, u64)>,
    pub(crate) reads_in_flight: usize,
    pub(crate) chunk_bytes: u64,
}

struct Reader<'a> {
    shared: &'a Shared,
    client: EngineClient,
    work: Sender<WorkItem>,
    results: Sender<ResultMessage>,
    reads: HashMap<Ticket, (Arc<FileEntry>, u64, u64)>,
    counters: StageCounters,
    reads_in_flight: usize,
}

/// Runs one reader to the end of its files (or until cancelled) and returns its counters.
pub(crate) fn run_reader(
    shared: &Shared,
    client: EngineClient,
    plan: ReaderPlan,
    work: Sender<WorkItem>,
    results: Sender<ResultMessage>,
) -> StageCounters {
    let mut reader = Reader {
        shared,
        client,
        work,
        results,
        reads: HashMap::new(),
        counters: StageCounters::default(),
        reads_in_flight: plan.reads_in_flight,
    };
    for (index, name, size_bytes) in &plan.files {
        if shared.cancelled() {
            break;
        }
        if reader
            .read_file(*index, name, *size_bytes, plan.chunk_bytes)
            .is_err()
        {
            break;
        }
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
        if size_bytes == 0 {
            return self.send_empty_marker(entry);
        }
        let mut offset_bytes = 0u64;
        while offset_bytes < size_bytes {
            self.acquire_credit()?;
            while self.client.outstanding() >= self.reads_in_flight {
                if !self.reap_one() {
                    return Err(Stop);
                }
            }
            let length_bytes = chunk_bytes.min(size_bytes - offset_bytes);
            self.submit_read(&entry, offset_bytes, length_bytes)?;
            offset_bytes += length_bytes;
        }
        Ok(())
    }

    fn stop(&self, error: PipelineError) -> Stop {
        self.shared.fail(error);
        Stop
    }

    /// Makes the file's entry; a parallel file's reducer and writer go to the reduce stage.
    fn register(
        &mut self,
        index: usize,
        info: FileInfo,
        job: FileJob,
    ) -> Result<Arc<FileEntry>, Stop> {
        let writer = self.shared.output.writer_for(index);
        match job {
            FileJob::Parallel { mapper, reducer } => {
                let entry = Arc::new(FileEntry {
                    index,
                    info,
                    work: FileWork::Parallel(mapper),
                });
                let message = ResultMessage::ParallelFileStarted {
                    entry: Arc::clone(&entry),
                    reducer,
                    writer,
                };
                self.send_blocking_result(message)?;
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
        self.acquire_credit()?;
        self.dispatch(WorkItem {
            entry,
            offset_bytes: 0,
            data: None,
        });
        Ok(())
    }

    /// Takes a credit, delivering completed reads while none is free (they free credits).
    fn acquire_credit(&mut self) -> Result<(), Stop> {
        loop {
            if self.shared.cancelled() {
                return Err(Stop);
            }
            if self.shared.try_acquire_credit() {
                return Ok(());
            }
            if self.client.outstanding() > 0 {
                if !self.reap_one() {
                    return Err(Stop);
                }
                continue;
            }
            let started_ns = self.shared.clock.now_ns();
            let acquired = self.shared.acquire_credit_briefly();
            self.counters.blocked_ns += self.shared.clock.now_ns().saturating_sub(started_ns);
            if acquired {
                return Ok(());
            }
        }
    }

    fn submit_read(
        &mut self,
        entry: &Arc<FileEntry>,
        offset_bytes: u64,
        length_bytes: u64,
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
                self.reads
                    .insert(ticket, (Arc::clone(entry), offset_bytes, length_bytes));
                Ok(())
            }
            Err(source) => {
                self.shared.release_credit();
                Err(self.stop(read_error(entry, offset_bytes, source)))
            }
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

    /// Passes one read's data on (or drops it when the job is cancelled).
    fn deliver(&mut self, ticket: Ticket, result: Result<Reply, EngineError>) {
        let (entry, offset_bytes, length_bytes) = self
            .reads
            .remove(&ticket)
            .expect("every completion answers a read this reader submitted");
        match result {
            Ok(Reply::Data(data)) => {
                assert_eq!(
                    data.len() as u64,
                    length_bytes,
                    "the engine returned a read of another length"
                );
                self.counters.items += 1;
                self.counters.bytes += length_bytes;
                if self.shared.cancelled() {
                    self.shared.release_credit();
                    return;
                }
                self.dispatch(WorkItem {
                    entry,
                    offset_bytes,
                    data: Some(data),
                });
            }
            Ok(other) => unreachable!("a read completed with {other:?}"),
            Err(source) => {
                self.shared.release_credit();
                self.shared.fail(read_error(&entry, offset_bytes, source));
            }
        }
    }

    fn dispatch(&mut self, item: WorkItem) {
        let started_ns = self.shared.clock.now_ns();
        let sent = self.work.send(item);
        self.counters.blocked_ns += self.shared.clock.now_ns().saturating_sub(started_ns);
        if sent.is_err() {
            self.shared.release_credit();
        }
    }
}

fn read_error(entry: &FileEntry, offset_bytes: u64, source: EngineError) -> PipelineError {
    PipelineError::Read {
        file: entry.info.name.to_string(),
        offset_bytes,
        source,
    }
}
