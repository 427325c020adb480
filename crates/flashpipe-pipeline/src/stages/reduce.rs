//! The reduce stage: puts the mapped parts of each parallel file back in offset order, reduces
//! them (stitching boundaries, emitting the stream in file order), finishes each file, and
//! collects every file's outcome.

use std::collections::BTreeMap;
use std::sync::Arc;

use crossbeam_channel::Receiver;
use flashpipe_kernels::api::{ChunkPart, PartReducer};

use super::{
    guarded, outcome_of, FileEntry, FileStart, MappedPart, ResultMessage, Shared, SharedCredit,
};
use crate::error::PipelineError;
use crate::output::CountedWriter;
use crate::report::{FileOutcome, StageCounters};

struct ParallelFile {
    entry: Arc<FileEntry>,
    reducer: Box<dyn PartReducer>,
    writer: CountedWriter,
    /// Parts ahead of their turn, each with the credit of the buffer it was read into.
    pending: BTreeMap<u64, (ChunkPart, SharedCredit)>,
    next_offset_bytes: u64,
}

struct Reducer<'a> {
    shared: &'a Shared,
    /// Parallel files started and not finished, by input index.
    files: Vec<Option<ParallelFile>>,
    outcomes: Vec<Option<FileOutcome>>,
    counters: StageCounters,
}

/// Runs until every worker and reader has closed the result queue.
pub(crate) fn run_reducer(
    shared: &Shared,
    results: Receiver<ResultMessage>,
    file_count: usize,
) -> (Vec<Option<FileOutcome>>, StageCounters) {
    let mut reducer = Reducer {
        shared,
        files: (0..file_count).map(|_| None).collect(),
        outcomes: (0..file_count).map(|_| None).collect(),
        counters: StageCounters::default(),
    };
    for message in results.iter() {
        reducer.handle(message);
    }
    reducer.files.iter_mut().for_each(|file| *file = None);
    (reducer.outcomes, reducer.counters)
}

impl Reducer<'_> {
    fn handle(&mut self, message: ResultMessage) {
        if self.shared.cancelled() {
            return;
        }
        match message {
            ResultMessage::FilesStarted(starts) => {
                for start in starts {
                    self.start(start);
                }
            }
            ResultMessage::Parts(parts) => {
                for MappedPart {
                    entry,
                    part,
                    credit,
                } in parts
                {
                    if self.shared.cancelled() {
                        return;
                    }
                    self.reduce(entry.index, part, credit);
                }
            }
            ResultMessage::FileDone(index, outcome) => self.record(index, outcome),
        }
    }

    fn start(&mut self, start: FileStart) {
        let FileStart {
            entry,
            reducer,
            writer,
        } = start;
        let index = entry.index;
        let file = ParallelFile {
            entry,
            reducer,
            writer,
            pending: BTreeMap::new(),
            next_offset_bytes: 0,
        };
        if file.entry.info.size_bytes == 0 {
            self.finish(file);
        } else {
            assert!(self.files[index].is_none(), "a file started twice");
            self.files[index] = Some(file);
        }
    }

    fn record(&mut self, index: usize, outcome: FileOutcome) {
        assert!(self.outcomes[index].is_none(), "a file finished twice");
        (self.shared.on_file_done)(index, &outcome);
        self.outcomes[index] = Some(outcome);
    }

    fn reduce(&mut self, index: usize, part: ChunkPart, credit: SharedCredit) {
        let file = self.files[index]
            .as_mut()
            .expect("a file's start reaches the reducer before its parts");
        file.pending.insert(part.offset_bytes, (part, credit));
        let started_ns = self.shared.clock.now_ns();
        let blocked_before_ns = file.writer.blocked_ns();
        let mut failure = None;
        while let Some((part, credit)) = file.pending.remove(&file.next_offset_bytes) {
            let offset_bytes = part.offset_bytes;
            let length_bytes = part.length_bytes as u64;
            let reduced = guarded(&file.entry.info.name, offset_bytes, || {
                file.reducer.reduce_part(part, &mut file.writer)
            });
            drop(credit);
            self.counters.items += 1;
            self.counters.bytes += length_bytes;
            file.next_offset_bytes += length_bytes;
            if let Err(error) = reduced {
                failure = Some(error);
                break;
            }
        }
        let blocked_ns = file.writer.blocked_ns() - blocked_before_ns;
        let elapsed_ns = self.shared.clock.now_ns().saturating_sub(started_ns);
        self.counters.busy_ns += elapsed_ns.saturating_sub(blocked_ns);
        self.counters.blocked_ns += blocked_ns;
        if let Some(error) = failure {
            return self.shared.fail(error);
        }
        if file.next_offset_bytes == file.entry.info.size_bytes {
            let file = self.files[index].take().expect("the file being reduced");
            assert!(file.pending.is_empty(), "parts past the end of a file");
            self.finish(file);
        }
    }

    fn finish(&mut self, file: ParallelFile) {
        let ParallelFile {
            entry,
            reducer,
            mut writer,
            ..
        } = file;
        let name = &entry.info.name;
        let size_bytes = entry.info.size_bytes;
        let started_ns = self.shared.clock.now_ns();
        let summary = guarded(name, size_bytes, || reducer.finish(&mut writer));
        let output_bytes = writer.written_bytes;
        let finished: Result<_, PipelineError> = summary.and_then(|summary| {
            guarded(name, size_bytes, || writer.finish()).map(|(output, _)| (summary, output))
        });
        self.counters.busy_ns += self.shared.clock.now_ns().saturating_sub(started_ns);
        match finished {
            Ok((summary, output)) => {
                let outcome = outcome_of(self.shared, &entry, summary, output_bytes, output);
                self.record(entry.index, outcome);
            }
            Err(error) => self.shared.fail(error),
        }
    }
}
