//! n-gram language identification (the SISC application): a byte n-gram naive-Bayes model
//! ([`model`]), its profile file ([`profile_file`]), the UDHR training corpus with a held-out
//! split ([`udhr`], [`html`]), and the kernel.
//!
//! The kernel labels fixed-size pieces of a file (`piece=2048` by default, like SISC's 2 KB files:
//! pieces at multiples of the piece size, mapped in parallel) or, with `piece=0`, the whole file
//! (scores are additive, so the file streams through one in-order job that carries the last
//! three bytes across chunk boundaries).
//!
//! A profile trained on word-frequency lists and the UDHR corpus ([`mixed`], [`word_lists`])
//! ships inside the crate ([`builtin`]); the kernel uses it unless `profiles=FILE` names another.
//! [`held_out`] reads and scores the held-out pieces of `scripts/fetch-langid-eval`.

pub mod builtin;
pub mod held_out;
pub mod html;
pub mod mixed;
pub mod model;
pub mod profile_file;
pub mod udhr;
pub mod word_lists;

use std::sync::Arc;

use crate::api::{
    Chunk, FileInfo, FileJob, Kernel, OutputSink, PieceLabel, Schedule, SequentialJob, Summary,
};
use crate::error::{KernelError, OptionsError};
use crate::options::{KernelOptions, OptionSpec};
use crate::records::{start_record_job, RecordKernel};
use model::{LanguageModel, LanguageScores};

/// Options of the language identifier.
pub const LANGID_OPTIONS: &[OptionSpec] = &[
    OptionSpec::optional(
        "profiles",
        builtin::BUILTIN_PROFILE_NAME,
        "profile file made by `flashpipe kernels train-langid`; `builtin` (the default) is the profile of 445 languages shipped in the binary (word frequencies of 41 languages and the UDHR)",
    ),
    OptionSpec::optional("piece", "2048", "bytes per labelled piece; 0 labels each whole file"),
];

/// The language-identification kernel.
pub struct LangIdKernel {
    model: Arc<LanguageModel>,
    piece_size_bytes: usize,
}

impl LangIdKernel {
    /// A kernel over `model` labelling pieces of `piece_size_bytes` (0: whole files).
    pub fn new(model: Arc<LanguageModel>, piece_size_bytes: usize) -> Self {
        Self {
            model,
            piece_size_bytes,
        }
    }

    /// Builds from options (loads the profile file).
    pub fn from_options(options: &KernelOptions) -> Result<Arc<dyn Kernel>, OptionsError> {
        let path = options.text("profiles")?;
        let bad_file = |error: profile_file::ProfileError| OptionsError::BadFile {
            key: "profiles".into(),
            reason: error.to_string(),
        };
        let model = if path == builtin::BUILTIN_PROFILE_NAME {
            builtin::builtin_model().map_err(bad_file)?
        } else {
            Arc::new(profile_file::load_profile(std::path::Path::new(path)).map_err(bad_file)?)
        };
        let piece_size_bytes = options.integer("piece", 0, 1 << 30)? as usize;
        Ok(Arc::new(Arc::new(Self::new(model, piece_size_bytes))))
    }

    fn label_with(
        &self,
        scratch: &mut LanguageScores,
        offset_bytes: u64,
        piece: &[u8],
    ) -> Option<PieceLabel> {
        let (language_index, margin) = self.model.classify_with(scratch, piece)?;
        Some(PieceLabel {
            offset_bytes,
            length_bytes: piece.len() as u64,
            language: self.model.languages[language_index].clone(),
            margin,
        })
    }
}

impl RecordKernel for LangIdKernel {
    type Partial = Vec<PieceLabel>;
    type Accumulator = Vec<PieceLabel>;

    fn record_size_bytes(&self) -> usize {
        self.piece_size_bytes
    }

    fn map_records(
        &self,
        _file: &FileInfo,
        offset_bytes: u64,
        records: &[u8],
    ) -> Result<Vec<PieceLabel>, KernelError> {
        let mut scratch = self.model.new_scores();
        Ok(records
            .chunks_exact(self.piece_size_bytes)
            .enumerate()
            .filter_map(|(index, piece)| {
                let offset = offset_bytes + (index * self.piece_size_bytes) as u64;
                self.label_with(&mut scratch, offset, piece)
            })
            .collect())
    }

    fn new_accumulator(&self, _file: &FileInfo) -> Vec<PieceLabel> {
        Vec::new()
    }

    fn fold(
        &self,
        accumulator: &mut Vec<PieceLabel>,
        partial: Vec<PieceLabel>,
        _sink: &mut dyn OutputSink,
    ) -> Result<(), KernelError> {
        accumulator.extend(partial);
        Ok(())
    }

    fn finish(
        &self,
        mut accumulator: Vec<PieceLabel>,
        _file: &FileInfo,
        offset_bytes: u64,
        short_record: &[u8],
        _sink: &mut dyn OutputSink,
    ) -> Result<Summary, KernelError> {
        accumulator.extend(self.label_with(
            &mut self.model.new_scores(),
            offset_bytes,
            short_record,
        ));
        Ok(Summary::Labels {
            labels: accumulator,
        })
    }
}

struct WholeFileJob {
    model: Arc<LanguageModel>,
    scores: LanguageScores,
    length_bytes: u64,
}

impl SequentialJob for WholeFileJob {
    fn process_chunk(
        &mut self,
        chunk: &Chunk<'_>,
        _sink: &mut dyn OutputSink,
    ) -> Result<(), KernelError> {
        self.model.add_stream_bytes(&mut self.scores, chunk.data);
        self.length_bytes += chunk.data.len() as u64;
        Ok(())
    }

    fn finish(self: Box<Self>, _sink: &mut dyn OutputSink) -> Result<Summary, KernelError> {
        let labels = self
            .scores
            .best(&self.model)
            .map(|(index, margin)| PieceLabel {
                offset_bytes: 0,
                length_bytes: self.length_bytes,
                language: self.model.languages[index].clone(),
                margin,
            })
            .into_iter()
            .collect();
        Ok(Summary::Labels { labels })
    }
}

impl Kernel for Arc<LangIdKernel> {
    fn name(&self) -> &'static str {
        "langid"
    }

    fn schedule(&self) -> Schedule {
        if self.piece_size_bytes == 0 {
            Schedule::ChunksInOrder
        } else {
            Schedule::ChunksInParallel
        }
    }

    fn start_file(&self, file: &FileInfo) -> Result<FileJob, KernelError> {
        if self.piece_size_bytes == 0 {
            return Ok(FileJob::Sequential(Box::new(WholeFileJob {
                model: Arc::clone(&self.model),
                scores: self.model.new_scores(),
                length_bytes: 0,
            })));
        }
        Ok(start_record_job(self, file))
    }
}
