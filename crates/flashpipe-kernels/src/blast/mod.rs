//! `blastn`: nucleotide search in the manner of NCBI BLAST+'s blastn, streaming the database.
//!
//! The kernel's input files are the database (FASTA, read chunk by chunk, in order); the queries
//! are a FASTA file given by `queries=` (a host path, read once when the kernel is built). Each
//! database sequence is searched against both strands of every query as it arrives ([`search`]:
//! a lookup table of query words, exact seeds of `word` letters, ungapped then gapped X-drop
//! extension with traceback, [`extend`] and [`gapped`]); the alignments are kept, and at the
//! end of the file, when the database's size is known, they get E-values and bit scores
//! ([`stats`]: NCBI's Karlin-Altschul tables and length adjustment) and are written as BLAST's
//! tabular output (`-outfmt 6`, [`tabular`]), query by query, best subject first, as the
//! file's transformed stream.
//!
//! Each input file is searched as a database of its own (its letters and sequences set the
//! E-values) unless `dbsize=` fixes the letters. Low-complexity filtering (DUST) is not done:
//! compare with `blastn -dust no`.

pub mod alphabet;
pub mod extend;
pub mod fasta;
pub mod gapped;
pub mod greedy;
pub mod search;
pub mod stats;
pub mod tabular;
#[cfg(test)]
mod test_random;

use std::sync::Arc;

use crate::api::{Chunk, FileInfo, FileJob, Kernel, OutputSink, SequentialJob, Summary};
use crate::error::{KernelError, KernelErrorKind, OptionsError};
use crate::options::{bad_query_file, bad_value, read_query_file, KernelOptions, OptionSpec};

use alphabet::ScoreMatrix;
use extend::GapCosts;
use fasta::{FastaReader, FastaRecord, FeedError};
use greedy::LinearScores;
use search::{Hsp, QueryIndex, SearchParams, Searcher, MAX_LOOKUP_LETTERS};
use stats::{gapped_params, ungapped_lambda, KarlinParams};
use tabular::{write_line, TabularLine};

/// Options of blastn.
pub const BLASTN_OPTIONS: &[OptionSpec] = &[
    OptionSpec::required(
        "queries",
        "file of query sequences (FASTA of nucleotides, at most 64 MiB)",
    ),
    OptionSpec::optional(
        "task",
        "megablast",
        "megablast (word 28, reward 1, penalty -2, linear gaps) or blastn (word 11, 2/-3, gaps 5/2)",
    ),
    OptionSpec::optional("word", "task", "word size: exact match that seeds an alignment (4..=64)"),
    OptionSpec::optional("reward", "task", "score of a match (1..=5)"),
    OptionSpec::optional("penalty", "task", "score of a mismatch, negative (-1..=-5)"),
    OptionSpec::optional(
        "gapopen",
        "task",
        "cost to open a gap (0 with gapextend=0: linear gaps of reward/2 - penalty per letter)",
    ),
    OptionSpec::optional("gapextend", "task", "cost of each letter of a gap"),
    OptionSpec::optional("evalue", "10", "report alignments with E-value at most this"),
    OptionSpec::optional(
        "dbsize",
        "0",
        "database letters for E-values (0: the input file's letters)",
    ),
    OptionSpec::optional(
        "max_hits",
        "10000000",
        "most alignments kept for the end of a file (each about 48 bytes)",
    ),
    OptionSpec::optional(
        "max_sequence",
        "256MiB",
        "longest sequence, in letters, of the database or the queries",
    ),
];

/// Highest `max_sequence`: 2 GiB letters (subject positions are 32-bit).
pub const MAX_SEQUENCE_LETTERS_LIMIT: u64 = 1 << 31;
/// Highest `max_hits`.
pub const MAX_HITS_LIMIT: u64 = 1 << 28;
/// Most letters over all queries (both strands are indexed: 2 x this in memory).
pub const MAX_QUERY_LETTERS: usize = 1 << 26;

/// X-drop of the ungapped extension, in bits (BLAST_UNGAPPED_X_DROPOFF_NUCL).
pub const UNGAPPED_X_DROP_BITS: f64 = 20.0;
/// X-drop of the gapped extension with traceback, in bits (BLAST_GAP_X_DROPOFF_FINAL_NUCL).
pub const GAPPED_X_DROP_BITS: f64 = 100.0;
/// X-drop of the preliminary gapped pass, in bits: blastn's (BLAST_GAP_X_DROPOFF_NUCL).
pub const PRELIMINARY_X_DROP_BITS_BLASTN: f64 = 30.0;
/// X-drop of the preliminary gapped pass, in bits: megablast's (BLAST_GAP_X_DROPOFF_GREEDY).
pub const PRELIMINARY_X_DROP_BITS_MEGABLAST: f64 = 25.0;
/// Ungapped score, in bits, that starts a gapped extension (BLAST_GAP_TRIGGER_NUCL).
pub const GAP_TRIGGER_BITS: f64 = 27.0;
/// Hits whose E-value on the part of the database read so far exceeds this multiple of
/// `evalue` are dropped before the end (the final E-value will not come back under it).
pub const EARLY_DROP_FACTOR: f64 = 1000.0;

/// The configured kernel.
#[derive(Debug)]
pub struct BlastKernel {
    index: QueryIndex,
    matrix: ScoreMatrix,
    params: SearchParams,
    karlin: KarlinParams,
    evalue: f64,
    db_letters: Option<u64>,
    max_hits: usize,
    max_sequence_letters: usize,
}

/// The scoring system after task defaults and options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scoring {
    /// Word size.
    pub word: usize,
    /// Match score.
    pub reward: i32,
    /// Mismatch score (negative).
    pub penalty: i32,
    /// Gap open cost (0 with `gap_extend` 0: linear).
    pub gap_open: i32,
    /// Gap extension cost.
    pub gap_extend: i32,
}

impl Scoring {
    /// A task's defaults.
    pub fn of_task(task: &str) -> Self {
        match task {
            "blastn" => Self {
                word: 11,
                reward: 2,
                penalty: -3,
                gap_open: 5,
                gap_extend: 2,
            },
            _ => Self {
                word: 28,
                reward: 1,
                penalty: -2,
                gap_open: 0,
                gap_extend: 0,
            },
        }
    }

    /// The raw matrix, gap costs and Karlin values (linear gaps of half-integer cost double
    /// every raw score).
    pub fn build(
        &self,
    ) -> Result<(ScoreMatrix, GapCosts, KarlinParams), stats::UnsupportedScoring> {
        let linear = self.gap_open == 0 && self.gap_extend == 0;
        let scale = if linear && self.reward % 2 != 0 { 2 } else { 1 };
        let karlin = gapped_params(
            self.reward,
            self.penalty,
            self.gap_open,
            self.gap_extend,
            scale,
        )?;
        let matrix = ScoreMatrix::new(self.reward, self.penalty).scaled(scale);
        let gaps = if linear {
            GapCosts {
                open: 0,
                extend: (self.reward * scale) / 2 - self.penalty * scale,
            }
        } else {
            GapCosts {
                open: self.gap_open,
                extend: self.gap_extend,
            }
        };
        Ok((matrix, gaps, karlin))
    }
}

/// A small signed integer option, or the task's default when the value is `task`.
fn signed_option(
    options: &KernelOptions,
    key: &str,
    default: i32,
    range: std::ops::RangeInclusive<i32>,
) -> Result<i32, OptionsError> {
    let value = options.text(key)?;
    if value == "task" {
        return Ok(default);
    }
    let parsed: i32 = value
        .parse()
        .map_err(|_| bad_value(key, value, "not an integer"))?;
    if !range.contains(&parsed) {
        return Err(bad_value(
            key,
            value,
            &format!("must be between {} and {}", range.start(), range.end()),
        ));
    }
    Ok(parsed)
}

impl BlastKernel {
    /// Builds from options (reads the query file).
    pub fn from_options(options: &KernelOptions) -> Result<Arc<dyn Kernel>, OptionsError> {
        let task = options.choice("task", &["megablast", "blastn"])?;
        let defaults = Scoring::of_task(task);
        let scoring = Scoring {
            word: signed_option(options, "word", defaults.word as i32, 4..=64)? as usize,
            reward: signed_option(options, "reward", defaults.reward, 1..=5)?,
            penalty: signed_option(options, "penalty", defaults.penalty, -5..=-1)?,
            gap_open: signed_option(options, "gapopen", defaults.gap_open, 0..=100)?,
            gap_extend: signed_option(options, "gapextend", defaults.gap_extend, 0..=100)?,
        };
        if (scoring.gap_open == 0) != (scoring.gap_extend == 0) && scoring.gap_extend == 0 {
            return Err(bad_value(
                "gapextend",
                "0",
                "must be positive unless gapopen is 0 too (linear gaps)",
            ));
        }
        let evalue_text = options.text("evalue")?;
        let evalue: f64 = evalue_text
            .parse()
            .ok()
            .filter(|value: &f64| value.is_finite() && *value > 0.0)
            .ok_or_else(|| bad_value("evalue", evalue_text, "not a positive number (e.g. 1e-5)"))?;
        let db_letters = options.integer("dbsize", 0, u64::MAX)?;
        let max_hits = options.integer("max_hits", 1, MAX_HITS_LIMIT)? as usize;
        let max_sequence_letters =
            options.integer("max_sequence", 1, MAX_SEQUENCE_LETTERS_LIMIT)? as usize;
        let path = options.text("queries")?;
        let queries = read_queries(path, max_sequence_letters)?;
        Self::new(
            queries,
            scoring,
            evalue,
            db_letters,
            max_hits,
            max_sequence_letters,
        )
        .map(|kernel| Arc::new(Arc::new(kernel)) as Arc<dyn Kernel>)
    }

    /// A kernel searching `queries` (identifier, coded letters) with `scoring`.
    pub fn new(
        queries: Vec<(String, Vec<u8>)>,
        scoring: Scoring,
        evalue: f64,
        db_letters: u64,
        max_hits: usize,
        max_sequence_letters: usize,
    ) -> Result<Self, OptionsError> {
        let (matrix, gaps, karlin) = scoring.build().map_err(|error| {
            bad_value(
                "gapopen",
                &format!("{}", scoring.gap_open),
                &error.to_string(),
            )
        })?;
        let scale = karlin.score_scale;
        let lambda = ungapped_lambda(scoring.reward, scoring.penalty) / f64::from(scale);
        let ungapped_bits = |bits: f64| (bits * std::f64::consts::LN_2 / lambda).ceil() as i32;
        let gap_trigger =
            ((GAP_TRIGGER_BITS * std::f64::consts::LN_2 + karlin.k.ln()) / lambda).ceil() as i32;
        let linear = scoring.gap_open == 0 && scoring.gap_extend == 0;
        let preliminary_bits = if linear {
            PRELIMINARY_X_DROP_BITS_MEGABLAST
        } else {
            PRELIMINARY_X_DROP_BITS_BLASTN
        };
        let params = SearchParams {
            word_letters: scoring.word,
            ungapped_x_drop: ungapped_bits(UNGAPPED_X_DROP_BITS),
            preliminary_x_drop: karlin.bits_to_raw(preliminary_bits),
            gapped_x_drop: karlin.bits_to_raw(GAPPED_X_DROP_BITS),
            gap_trigger: gap_trigger.max(1),
            gaps,
            greedy: if linear {
                LinearScores::of(&matrix, gaps)
            } else {
                None
            },
        };
        let index = QueryIndex::new(queries, scoring.word.min(MAX_LOOKUP_LETTERS));
        Ok(Self {
            index,
            matrix,
            params,
            karlin,
            evalue,
            db_letters: (db_letters > 0).then_some(db_letters),
            max_hits,
            max_sequence_letters,
        })
    }
}

/// Reads and codes the query file.
fn read_queries(
    path: &str,
    max_sequence_letters: usize,
) -> Result<Vec<(String, Vec<u8>)>, OptionsError> {
    let bytes = read_query_file(path)?;
    let mut queries = Vec::new();
    let mut letters = 0usize;
    fasta::read_all(&bytes, max_sequence_letters, &mut |record: &FastaRecord<
        '_,
    >| {
        letters += record.codes.len();
        queries.push((record.name.to_string(), record.codes.to_vec()));
    })
    .map_err(|error| {
        bad_query_file(format!(
            "{path} at byte {}: {}",
            error.offset_bytes, error.reason
        ))
    })?;
    if letters > MAX_QUERY_LETTERS {
        return Err(bad_query_file(format!(
            "{path} holds {letters} query letters, above the limit of {MAX_QUERY_LETTERS}"
        )));
    }
    Ok(queries)
}

impl Kernel for Arc<BlastKernel> {
    fn name(&self) -> &'static str {
        "blastn"
    }

    fn start_file(&self, file: &FileInfo) -> Result<FileJob, KernelError> {
        Ok(FileJob::Sequential(Box::new(BlastJob {
            kernel: Arc::clone(self),
            file: file.clone(),
            reader: FastaReader::new(self.max_sequence_letters),
            searcher: Searcher::new(&self.index),
            hits: Vec::new(),
            subjects: Vec::new(),
            next_offset_bytes: 0,
            early_scores: Vec::new(),
            early_letters: 0,
        })))
    }
}

/// One kept alignment and the subject it is in.
#[derive(Debug, Clone, Copy)]
struct KeptHit {
    hsp: Hsp,
    subject: u32,
}

/// The search of one database file.
struct BlastJob {
    kernel: Arc<BlastKernel>,
    file: FileInfo,
    reader: FastaReader,
    searcher: Searcher,
    hits: Vec<KeptHit>,
    subjects: Vec<Box<str>>,
    next_offset_bytes: u64,
    /// Per query, the lowest score kept (from the database read so far).
    early_scores: Vec<i32>,
    /// Letters read when `early_scores` was computed.
    early_letters: u64,
}

/// Why a subject could not be searched.
enum SubjectError {
    TooManyHits,
}

impl BlastJob {
    fn search_subject(&mut self, record: &FastaRecord<'_>) -> Result<(), SubjectError> {
        let kernel = &*self.kernel;
        let letters = record.letters_read;
        if self.early_scores.is_empty() || letters >= 2 * self.early_letters.max(1) {
            let sequences = record.records_read.max(1);
            let db_letters = kernel.db_letters.unwrap_or(letters).max(1);
            self.early_scores = kernel
                .index
                .lengths
                .iter()
                .map(|&length| {
                    let space =
                        kernel
                            .karlin
                            .search_space(u64::from(length), db_letters, sequences);
                    kernel
                        .karlin
                        .cutoff_score(kernel.evalue * EARLY_DROP_FACTOR, space)
                })
                .collect();
            self.early_letters = letters.max(1);
        }
        let hsps = self.searcher.search(
            &kernel.index,
            &kernel.matrix,
            &kernel.params,
            &self.early_scores,
            record.codes,
        );
        let contexts = kernel.index.contexts();
        let subject = self.subjects.len() as u32;
        let mut kept_any = false;
        for hsp in hsps {
            let query = contexts[hsp.context as usize].query as usize;
            if hsp.score < self.early_scores[query] {
                continue;
            }
            if self.hits.len() >= kernel.max_hits {
                return Err(SubjectError::TooManyHits);
            }
            self.hits.push(KeptHit { hsp, subject });
            kept_any = true;
        }
        if kept_any {
            self.subjects.push(record.name.into());
        }
        Ok(())
    }

    fn too_many_hits(&self, offset_bytes: u64) -> KernelError {
        self.file.error_at(
            offset_bytes,
            KernelErrorKind::WrongLength(format!(
                "more than {} alignments to keep until the end of the database \
                 (raise max_hits, or lower evalue)",
                self.kernel.max_hits
            )),
        )
    }

    fn feed_error(&self, error: FeedError<SubjectError>, offset_bytes: u64) -> KernelError {
        match error {
            FeedError::Format(error) => self.file.error_at(
                error.offset_bytes,
                KernelErrorKind::WrongFormat(error.reason),
            ),
            FeedError::Record(SubjectError::TooManyHits) => self.too_many_hits(offset_bytes),
        }
    }

    /// Writes every kept hit with E-value at most `evalue`, query by query.
    fn write_hits(&mut self, sink: &mut dyn OutputSink) -> Result<u64, KernelError> {
        let kernel = &*self.kernel;
        let sequences = self.reader.record_count().max(1);
        let db_letters = kernel
            .db_letters
            .unwrap_or(self.reader.letter_count())
            .max(1);
        let spaces: Vec<f64> = kernel
            .index
            .lengths
            .iter()
            .map(|&length| {
                kernel
                    .karlin
                    .search_space(u64::from(length), db_letters, sequences)
            })
            .collect();
        let contexts = kernel.index.contexts();
        let query_of = |hit: &KeptHit| contexts[hit.hsp.context as usize].query;
        self.hits.retain(|hit| {
            let query = query_of(hit) as usize;
            kernel.karlin.evalue(hit.hsp.score, spaces[query]) <= kernel.evalue
        });
        // Best score per (query, subject), to order subjects best first.
        let mut best: std::collections::HashMap<(u32, u32), i32> = std::collections::HashMap::new();
        for hit in &self.hits {
            let entry = best.entry((query_of(hit), hit.subject)).or_insert(i32::MIN);
            *entry = (*entry).max(hit.hsp.score);
        }
        self.hits.sort_by(|a, b| {
            let (query_a, query_b) = (query_of(a), query_of(b));
            let best_a = best[&(query_a, a.subject)];
            let best_b = best[&(query_b, b.subject)];
            (query_a, -best_a, a.subject, -a.hsp.score, a.hsp.query_start).cmp(&(
                query_b,
                -best_b,
                b.subject,
                -b.hsp.score,
                b.hsp.query_start,
            ))
        });
        let mut written = 0u64;
        let mut text = String::new();
        for hit in &self.hits {
            let context = contexts[hit.hsp.context as usize];
            let query_index = context.query as usize;
            let hsp = &hit.hsp;
            let query_length = u64::from(kernel.index.lengths[query_index]);
            let (query_start, query_end, subject_start, subject_end) = if context.minus {
                (
                    query_length - u64::from(hsp.query_start + hsp.query_length) + 1,
                    query_length - u64::from(hsp.query_start),
                    u64::from(hsp.subject_start + hsp.subject_length),
                    u64::from(hsp.subject_start) + 1,
                )
            } else {
                (
                    u64::from(hsp.query_start) + 1,
                    u64::from(hsp.query_start + hsp.query_length),
                    u64::from(hsp.subject_start) + 1,
                    u64::from(hsp.subject_start + hsp.subject_length),
                )
            };
            write_line(
                &mut text,
                &TabularLine {
                    query: &kernel.index.names[query_index],
                    subject: &self.subjects[hit.subject as usize],
                    identities: hsp.identities,
                    length: hsp.length,
                    mismatches: hsp.mismatches,
                    gap_opens: hsp.gap_opens,
                    query_start,
                    query_end,
                    subject_start,
                    subject_end,
                    evalue: kernel.karlin.evalue(hsp.score, spaces[query_index]),
                    bit_score: kernel.karlin.bit_score(hsp.score),
                },
            );
            if text.len() >= 1 << 16 {
                sink.write_output(text.as_bytes())?;
                written += text.len() as u64;
                text.clear();
            }
        }
        sink.write_output(text.as_bytes())?;
        written += text.len() as u64;
        Ok(written)
    }
}

impl SequentialJob for BlastJob {
    fn process_chunk(
        &mut self,
        chunk: &Chunk<'_>,
        _sink: &mut dyn OutputSink,
    ) -> Result<(), KernelError> {
        chunk.advance_in_order(&mut self.next_offset_bytes);
        let mut reader = std::mem::replace(&mut self.reader, FastaReader::new(1));
        let result = reader.feed(chunk.offset_bytes, chunk.data, &mut |record| {
            self.search_subject(record)
        });
        self.reader = reader;
        result.map_err(|error| self.feed_error(error, chunk.offset_bytes))
    }

    fn finish(mut self: Box<Self>, sink: &mut dyn OutputSink) -> Result<Summary, KernelError> {
        let mut reader = std::mem::replace(&mut self.reader, FastaReader::new(1));
        let result = reader.finish(&mut |record| self.search_subject(record));
        self.reader = reader;
        let end = self.next_offset_bytes;
        result.map_err(|error| self.feed_error(error, end))?;
        let output_bytes = self.write_hits(sink)?;
        Ok(Summary::Stream { output_bytes })
    }
}
