//! The stage threads and what they share: credits (the memory bound), the cancel flag and the
//! first error, the per-file work, and the messages between stages.

pub(crate) mod read;
pub(crate) mod reduce;
pub(crate) mod work;
pub(crate) mod write;

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};
use flashpipe_device::Clock;
use flashpipe_engine::ReadData;
use flashpipe_kernels::api::{
    ChunkMapper, ChunkPart, FileInfo, Kernel, PartReducer, SequentialJob,
};

use crate::error::PipelineError;
use crate::output::{CountedWriter, WriteQueue};
use crate::report::FileOutcome;

/// How long a thread waiting for a credit sleeps before looking at the cancel flag again.
pub(crate) const CANCEL_POLL_INTERVAL: Duration = Duration::from_millis(2);

/// The job's chunk credits: one per engine pool buffer the job holds, from the read that
/// fills it being submitted until nothing (chunk, mapped part) depends on it any more.
/// A single read takes one; a batch of small files reserves one per buffer it may take and
/// keeps one per buffer it did take, shared by the files in that buffer.
pub(crate) struct CreditPool {
    sender: Sender<()>,
    receiver: Receiver<()>,
    in_use: AtomicUsize,
    max_in_use: AtomicUsize,
}

/// One credit of the pool, given back when dropped (shared through an `Arc` by everything
/// that lives in the same pool buffer).
pub(crate) struct Credit {
    pool: Arc<CreditPool>,
}

impl Drop for Credit {
    fn drop(&mut self) {
        let before = self.pool.in_use.fetch_sub(1, Ordering::AcqRel);
        assert!(before > 0, "a credit released twice");
        self.pool
            .sender
            .try_send(())
            .expect("credits never exceed their count");
    }
}

/// A credit shared by the chunks and parts that live in one pool buffer.
pub(crate) type SharedCredit = Arc<Credit>;

impl CreditPool {
    fn new(credit_count: usize) -> Arc<CreditPool> {
        let (sender, receiver) = crossbeam_channel::bounded(credit_count);
        for _ in 0..credit_count {
            sender
                .try_send(())
                .expect("a fresh credit queue has room for every credit");
        }
        Arc::new(CreditPool {
            sender,
            receiver,
            in_use: AtomicUsize::new(0),
            max_in_use: AtomicUsize::new(0),
        })
    }

    fn taken(self: &Arc<CreditPool>) -> Credit {
        let now = self.in_use.fetch_add(1, Ordering::AcqRel) + 1;
        self.max_in_use.fetch_max(now, Ordering::AcqRel);
        Credit {
            pool: Arc::clone(self),
        }
    }
}

/// State every stage thread shares.
pub(crate) struct Shared {
    pub(crate) kernel: Arc<dyn Kernel>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) cancel: Arc<AtomicBool>,
    first_error: Mutex<Option<PipelineError>>,
    credits: Arc<CreditPool>,
    pub(crate) output: OutputPlan,
    /// Told each file's outcome as the reduce stage records it.
    pub(crate) on_file_done: crate::run::FileObserver,
}

/// How each file's writer is made.
pub(crate) enum OutputPlan {
    Discard,
    Collect,
    Store {
        names: Vec<String>,
        /// Taken away when the sinks are done, so the write stage sees its queue close.
        queue: Mutex<Option<WriteQueue>>,
    },
}

impl OutputPlan {
    /// The writer of input `file_index`, whose input holds `input_bytes` (a stored result's
    /// first buffer is sized for a stream as long as the input, up to a whole write).
    pub(crate) fn writer_for(&self, file_index: usize, input_bytes: u64) -> CountedWriter {
        match self {
            OutputPlan::Discard => CountedWriter::discard(),
            OutputPlan::Collect => CountedWriter::collect(),
            OutputPlan::Store { names, queue } => {
                let queue = queue.lock().expect("output queue lock poisoned").clone();
                CountedWriter::store(
                    &names[file_index],
                    queue.expect("writers are made before the output closes"),
                    input_bytes,
                )
            }
        }
    }

    pub(crate) fn name_for(&self, file_index: usize) -> Option<String> {
        match self {
            OutputPlan::Store { names, .. } => Some(names[file_index].clone()),
            OutputPlan::Discard | OutputPlan::Collect => None,
        }
    }
}

impl Shared {
    pub(crate) fn new(
        kernel: Arc<dyn Kernel>,
        clock: Arc<dyn Clock>,
        cancel: Arc<AtomicBool>,
        credit_count: usize,
        output: OutputPlan,
        on_file_done: crate::run::FileObserver,
    ) -> Shared {
        Shared {
            on_file_done,
            kernel,
            clock,
            cancel,
            first_error: Mutex::new(None),
            credits: CreditPool::new(credit_count),
            output,
        }
    }

    /// True once any stage failed or the caller cancelled.
    pub(crate) fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Acquire)
    }

    /// Records `error` if it is the first, and stops every stage.
    pub(crate) fn fail(&self, error: PipelineError) {
        let mut first = self.first_error.lock().expect("error lock poisoned");
        if first.is_none() {
            *first = Some(error);
        }
        self.cancel.store(true, Ordering::Release);
    }

    pub(crate) fn take_error(&self) -> Option<PipelineError> {
        self.first_error.lock().expect("error lock poisoned").take()
    }

    /// Takes a credit without waiting.
    pub(crate) fn try_acquire_credit(&self) -> Option<Credit> {
        self.credits
            .receiver
            .try_recv()
            .ok()
            .map(|()| self.credits.taken())
    }

    /// Waits a short while for a credit.
    pub(crate) fn acquire_credit_briefly(&self) -> Option<Credit> {
        self.credits
            .receiver
            .recv_timeout(CANCEL_POLL_INTERVAL)
            .ok()
            .map(|()| self.credits.taken())
    }

    /// Drops the plan's handle on the write queue (every file's writer is gone by now).
    pub(crate) fn close_output(&self) {
        if let OutputPlan::Store { queue, .. } = &self.output {
            queue.lock().expect("output queue lock poisoned").take();
        }
    }

    /// Most credits (pool buffers) the job held at once.
    pub(crate) fn max_chunks_in_flight(&self) -> usize {
        self.credits.max_in_use.load(Ordering::Acquire)
    }

    /// Credits (pool buffers) the job holds now.
    pub(crate) fn chunks_in_flight(&self) -> usize {
        self.credits.in_use.load(Ordering::Acquire)
    }
}

/// Runs kernel code, turning a panic into an error naming the file and offset.
pub(crate) fn guarded<T>(
    file: &str,
    offset_bytes: u64,
    call: impl FnOnce() -> Result<T, flashpipe_kernels::error::KernelError>,
) -> Result<T, PipelineError> {
    match catch_unwind(AssertUnwindSafe(call)) {
        Ok(result) => result.map_err(PipelineError::Kernel),
        Err(panic) => Err(PipelineError::KernelPanicked {
            file: file.to_string(),
            offset_bytes,
            message: panic_message(panic.as_ref()),
        }),
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        return (*text).to_string();
    }
    if let Some(text) = panic.downcast_ref::<String>() {
        return text.clone();
    }
    "(no message)".to_string()
}

/// One input file in flight.
pub(crate) struct FileEntry {
    pub(crate) index: usize,
    pub(crate) info: FileInfo,
    pub(crate) work: FileWork,
}

/// How a file's chunks are processed.
pub(crate) enum FileWork {
    Parallel(Arc<dyn ChunkMapper>),
    Sequential(Mutex<SequentialState>),
}

/// An in-order file: its job, its writer, and chunks that arrived ahead of their turn.
pub(crate) struct SequentialState {
    pub(crate) job: Option<Box<dyn SequentialJob>>,
    pub(crate) writer: Option<CountedWriter>,
    pub(crate) pending: BTreeMap<u64, WorkItem>,
    pub(crate) next_offset_bytes: u64,
    pub(crate) active: bool,
}

/// A chunk read from the store (or the marker of an empty in-order file), held in the engine's
/// buffer until the kernel is done with it, with the credit of that buffer.
pub(crate) struct WorkItem {
    pub(crate) entry: Arc<FileEntry>,
    pub(crate) offset_bytes: u64,
    pub(crate) data: Option<ReadData>,
    pub(crate) credit: SharedCredit,
}

impl WorkItem {
    pub(crate) fn bytes(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], ReadData::bytes)
    }
}

/// A parallel file's start: its reducer and writer, for the reduce stage.
pub(crate) struct FileStart {
    pub(crate) entry: Arc<FileEntry>,
    pub(crate) reducer: Box<dyn PartReducer>,
    pub(crate) writer: CountedWriter,
}

/// A mapped chunk of a parallel file, with the credit of the buffer it was read into.
pub(crate) struct MappedPart {
    pub(crate) entry: Arc<FileEntry>,
    pub(crate) part: ChunkPart,
    pub(crate) credit: SharedCredit,
}

/// What flows into the reduce stage. Starts and parts travel in groups (every file of a
/// batched read in one message), so small files cost one hand-off per group, not per file.
pub(crate) enum ResultMessage {
    /// Parallel files start, each before any of its parts.
    FilesStarted(Vec<FileStart>),
    /// Mapped chunks of parallel files.
    Parts(Vec<MappedPart>),
    /// A file finished (in-order files are finished by the worker that processed the end).
    FileDone(usize, FileOutcome),
}

/// Builds a file's outcome from what its writer produced.
pub(crate) fn outcome_of(
    shared: &Shared,
    entry: &FileEntry,
    summary: flashpipe_kernels::api::Summary,
    output_bytes: u64,
    output: Option<Vec<u8>>,
) -> FileOutcome {
    FileOutcome {
        name: entry.info.name.to_string(),
        size_bytes: entry.info.size_bytes,
        summary,
        output_bytes,
        output,
        output_file: shared.output.name_for(entry.index),
    }
}
