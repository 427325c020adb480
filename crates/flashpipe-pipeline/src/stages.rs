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

/// State every stage thread shares.
pub(crate) struct Shared {
    pub(crate) kernel: Arc<dyn Kernel>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) cancel: Arc<AtomicBool>,
    first_error: Mutex<Option<PipelineError>>,
    credits_sender: Sender<()>,
    credits: Receiver<()>,
    chunks_in_flight: AtomicUsize,
    max_chunks_in_flight: AtomicUsize,
    pub(crate) output: OutputPlan,
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
    pub(crate) fn writer_for(&self, file_index: usize) -> CountedWriter {
        match self {
            OutputPlan::Discard => CountedWriter::discard(),
            OutputPlan::Collect => CountedWriter::collect(),
            OutputPlan::Store { names, queue } => {
                let queue = queue.lock().expect("output queue lock poisoned").clone();
                CountedWriter::store(
                    &names[file_index],
                    queue.expect("writers are made before the output closes"),
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
    ) -> Shared {
        let (credits_sender, credits) = crossbeam_channel::bounded(credit_count);
        for _ in 0..credit_count {
            credits_sender
                .try_send(())
                .expect("a fresh credit queue has room for every credit");
        }
        Shared {
            kernel,
            clock,
            cancel,
            first_error: Mutex::new(None),
            credits_sender,
            credits,
            chunks_in_flight: AtomicUsize::new(0),
            max_chunks_in_flight: AtomicUsize::new(0),
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
    pub(crate) fn try_acquire_credit(&self) -> bool {
        self.credits.try_recv().is_ok() && self.note_acquired()
    }

    /// Waits a short while for a credit.
    pub(crate) fn acquire_credit_briefly(&self) -> bool {
        self.credits.recv_timeout(CANCEL_POLL_INTERVAL).is_ok() && self.note_acquired()
    }

    fn note_acquired(&self) -> bool {
        let now = self.chunks_in_flight.fetch_add(1, Ordering::AcqRel) + 1;
        self.max_chunks_in_flight.fetch_max(now, Ordering::AcqRel);
        true
    }

    /// Gives a chunk's credit back once nothing holds the chunk any more.
    pub(crate) fn release_credit(&self) {
        let before = self.chunks_in_flight.fetch_sub(1, Ordering::AcqRel);
        assert!(before > 0, "a credit released twice");
        self.credits_sender
            .try_send(())
            .expect("credits never exceed their count");
    }

    /// Drops the plan's handle on the write queue (every file's writer is gone by now).
    pub(crate) fn close_output(&self) {
        if let OutputPlan::Store { queue, .. } = &self.output {
            queue.lock().expect("output queue lock poisoned").take();
        }
    }

    pub(crate) fn max_chunks_in_flight(&self) -> usize {
        self.max_chunks_in_flight.load(Ordering::Acquire)
    }

    pub(crate) fn chunks_in_flight(&self) -> usize {
        self.chunks_in_flight.load(Ordering::Acquire)
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
/// buffer until the kernel is done with it.
pub(crate) struct WorkItem {
    pub(crate) entry: Arc<FileEntry>,
    pub(crate) offset_bytes: u64,
    pub(crate) data: Option<ReadData>,
}

impl WorkItem {
    pub(crate) fn bytes(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], ReadData::bytes)
    }
}

/// What flows into the reduce stage.
pub(crate) enum ResultMessage {
    /// A parallel file starts: its reducer and writer.
    ParallelFileStarted {
        entry: Arc<FileEntry>,
        reducer: Box<dyn PartReducer>,
        writer: CountedWriter,
    },
    /// A mapped chunk of a parallel file (holds one credit).
    Part {
        entry: Arc<FileEntry>,
        part: ChunkPart,
    },
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
