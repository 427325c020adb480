//! The kernel stage: worker threads run the kernel on chunks still in the engine's buffers.
//! Parallel files: map any chunk, then pass the part to the reduce stage. In-order files: the
//! first worker to find the file idle processes every chunk that is next in line. Work comes
//! in groups: one chunk, or every file of a batched read (one hand-off for the group), and
//! the group's mapped parts go to the reduce stage in one message.

use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender};
use flashpipe_kernels::api::{Chunk, ChunkMapper};

use super::{
    guarded, outcome_of, FileEntry, FileWork, MappedPart, ResultMessage, Shared, WorkItem,
};
use crate::report::StageCounters;

struct Worker<'a> {
    shared: &'a Shared,
    results: Sender<ResultMessage>,
    counters: StageCounters,
}

/// Runs one worker until the read stage closes the work queue.
pub(crate) fn run_worker(
    shared: &Shared,
    work: Receiver<Vec<WorkItem>>,
    results: Sender<ResultMessage>,
) -> StageCounters {
    let mut worker = Worker {
        shared,
        results,
        counters: StageCounters::default(),
    };
    for items in work.iter() {
        let mut parts = Vec::new();
        for item in items {
            if shared.cancelled() {
                drop(item);
                continue;
            }
            let entry = Arc::clone(&item.entry);
            match &entry.work {
                FileWork::Parallel(mapper) => parts.extend(worker.map(mapper.as_ref(), item)),
                FileWork::Sequential(_) => worker.process_in_order(&entry, item),
            }
        }
        if !parts.is_empty() {
            worker.send(ResultMessage::Parts(parts));
        }
    }
    worker.counters
}

impl Worker<'_> {
    /// Maps one chunk; its part (with the chunk's credit) for the reduce stage, or nothing
    /// when the kernel failed (the job then fails).
    fn map(&mut self, mapper: &dyn ChunkMapper, item: WorkItem) -> Option<MappedPart> {
        let entry = Arc::clone(&item.entry);
        let chunk = Chunk {
            file: &entry.info.name,
            offset_bytes: item.offset_bytes,
            data: item.bytes(),
        };
        let started_ns = self.shared.clock.now_ns();
        let mapped = guarded(&entry.info.name, item.offset_bytes, || {
            mapper.map_chunk(&chunk)
        });
        self.count(started_ns, chunk.data.len());
        let WorkItem { data, credit, .. } = item;
        drop(data);
        match mapped {
            Ok(part) => Some(MappedPart {
                entry,
                part,
                credit,
            }),
            Err(error) => {
                drop(credit);
                self.shared.fail(error);
                None
            }
        }
    }

    fn count(&mut self, started_ns: u64, length_bytes: usize) {
        self.counters.busy_ns += self.shared.clock.now_ns().saturating_sub(started_ns);
        self.counters.items += 1;
        self.counters.bytes += length_bytes as u64;
    }

    /// Sends a message to the reduce stage (a message it no longer takes is dropped with
    /// the credit it holds).
    fn send(&mut self, message: ResultMessage) {
        let started_ns = self.shared.clock.now_ns();
        let _ = self.results.send(message);
        self.counters.blocked_ns += self.shared.clock.now_ns().saturating_sub(started_ns);
    }

    /// Queues the chunk; if no other worker is on this file, processes every chunk that is next.
    fn process_in_order(&mut self, entry: &Arc<FileEntry>, item: WorkItem) {
        let FileWork::Sequential(state_lock) = &entry.work else {
            unreachable!("only in-order files come here");
        };
        let mut state = state_lock.lock().expect("file state lock poisoned");
        state.pending.insert(item.offset_bytes, item);
        if state.active {
            return;
        }
        state.active = true;
        let mut job = state
            .job
            .take()
            .expect("an idle in-order file holds its job");
        let mut writer = state
            .writer
            .take()
            .expect("an idle in-order file holds its writer");
        loop {
            let next_offset_bytes = state.next_offset_bytes;
            let Some(next) = state.pending.remove(&next_offset_bytes) else {
                state.job = Some(job);
                state.writer = Some(writer);
                state.active = false;
                return;
            };
            drop(state);
            let length_bytes = next.bytes().len() as u64;
            let processed = self.process_one(&mut *job, &mut writer, next);
            if let Err(error) = processed {
                self.shared.fail(error);
                self.release_pending(entry);
                return;
            }
            state = state_lock.lock().expect("file state lock poisoned");
            state.next_offset_bytes += length_bytes;
            if state.next_offset_bytes == entry.info.size_bytes {
                assert!(state.pending.is_empty(), "chunks past the end of a file");
                drop(state);
                self.finish_in_order(entry, job, writer);
                return;
            }
        }
    }

    fn process_one(
        &mut self,
        job: &mut dyn flashpipe_kernels::api::SequentialJob,
        writer: &mut crate::output::CountedWriter,
        item: WorkItem,
    ) -> Result<(), crate::error::PipelineError> {
        let started_ns = self.shared.clock.now_ns();
        let blocked_before_ns = writer.blocked_ns();
        let chunk = Chunk {
            file: &item.entry.info.name,
            offset_bytes: item.offset_bytes,
            data: item.bytes(),
        };
        let result = if chunk.data.is_empty() {
            Ok(())
        } else {
            guarded(chunk.file, chunk.offset_bytes, || {
                job.process_chunk(&chunk, writer)
            })
        };
        let blocked_ns = writer.blocked_ns() - blocked_before_ns;
        self.count(started_ns, chunk.data.len());
        self.counters.busy_ns = self.counters.busy_ns.saturating_sub(blocked_ns);
        self.counters.blocked_ns += blocked_ns;
        drop(item);
        result
    }

    fn finish_in_order(
        &mut self,
        entry: &Arc<FileEntry>,
        job: Box<dyn flashpipe_kernels::api::SequentialJob>,
        mut writer: crate::output::CountedWriter,
    ) {
        let name = &entry.info.name;
        let started_ns = self.shared.clock.now_ns();
        let summary = guarded(name, entry.info.size_bytes, || job.finish(&mut writer));
        let output_bytes = writer.written_bytes;
        let finished = summary.and_then(|summary| {
            guarded(name, entry.info.size_bytes, || writer.finish())
                .map(|(output, _)| (summary, output))
        });
        self.counters.busy_ns += self.shared.clock.now_ns().saturating_sub(started_ns);
        match finished {
            Ok((summary, output)) => {
                let outcome = outcome_of(self.shared, entry, summary, output_bytes, output);
                self.send(ResultMessage::FileDone(entry.index, outcome));
            }
            Err(error) => self.shared.fail(error),
        }
    }

    /// After a failure, drops the chunks that will never be processed (and so their credits).
    fn release_pending(&mut self, entry: &FileEntry) {
        let FileWork::Sequential(state_lock) = &entry.work else {
            return;
        };
        let mut state = state_lock.lock().expect("file state lock poisoned");
        let pending = std::mem::take(&mut state.pending);
        state.active = true;
        drop(state);
        drop(pending);
    }
}
