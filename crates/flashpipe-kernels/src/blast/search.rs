//! The queries (both strands), their lookup table, and the search of one subject sequence:
//! words of the subject looked up, exact matches grown to the word size, ungapped X-drop
//! extension, then gapped X-drop extension with traceback for those scoring above the trigger
//! (one-hit seeding, as blastn and megablast do with word sizes of 11 and more).
//!
//! Every strand of every query is a "context", stored back to back in one coded buffer with a
//! sentinel between them (a code that matches nothing), as BLAST concatenates its contexts. The
//! lookup table indexes words of `min(word, 11)` bases (4^11 heads, a presence bit per word) and
//! each hit is verified to lie in an exact match of `word` letters. A diagonal table remembers,
//! per diagonal, how far the subject has been extended, so a seed inside an extension already
//! made is skipped (BLAST's `diag_table`).

use crate::blast::alphabet::{is_base, reverse_complement, ScoreMatrix};
use crate::blast::extend::{count_columns, extend_ungapped, Anchor, Extend, GapCosts, Gapped};
use crate::blast::greedy::{Greedy, LinearScores};

/// Code placed between contexts: scores as a mismatch against everything and is no base.
const SENTINEL: u8 = 14;

/// Longest lookup word (4^11 heads of 4 bytes: 16 MiB).
pub const MAX_LOOKUP_LETTERS: usize = 11;

/// One strand of one query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Context {
    /// Index of the query.
    pub query: u32,
    /// The reverse complement strand.
    pub minus: bool,
    /// Offset of its first letter in the context buffer.
    pub start: u32,
    /// Its length.
    pub length: u32,
}

/// The parameters of a search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchParams {
    /// Exact match a seed needs.
    pub word_letters: usize,
    /// Ungapped X-drop (raw).
    pub ungapped_x_drop: i32,
    /// X-drop of the preliminary gapped pass, score only (raw).
    pub preliminary_x_drop: i32,
    /// X-drop of the final gapped pass with traceback (raw).
    pub gapped_x_drop: i32,
    /// Ungapped score that triggers a gapped extension (raw).
    pub gap_trigger: i32,
    /// Gap costs (raw).
    pub gaps: GapCosts,
    /// Megablast's greedy aligner for the gapped passes (linear costs), or `None` for the
    /// dynamic programme (the blastn task, affine costs).
    pub greedy: Option<LinearScores>,
}

/// The queries and their lookup table.
#[derive(Debug)]
pub struct QueryIndex {
    /// Query identifiers, in file order.
    pub names: Vec<String>,
    /// Query lengths.
    pub lengths: Vec<u32>,
    contexts: Vec<Context>,
    buffer: Vec<u8>,
    context_of_position: Vec<u32>,
    lookup_letters: usize,
    heads: Vec<u32>,
    positions: Vec<u32>,
    present: Vec<u64>,
}

impl QueryIndex {
    /// Indexes `queries` (identifier, coded letters) with words of `lookup_letters` bases.
    pub fn new(queries: Vec<(String, Vec<u8>)>, lookup_letters: usize) -> Self {
        assert!((1..=MAX_LOOKUP_LETTERS).contains(&lookup_letters));
        let mut names = Vec::with_capacity(queries.len());
        let mut lengths = Vec::with_capacity(queries.len());
        let mut contexts = Vec::with_capacity(2 * queries.len());
        let mut buffer = vec![SENTINEL];
        for (index, (name, codes)) in queries.into_iter().enumerate() {
            names.push(name);
            lengths.push(codes.len() as u32);
            let minus = reverse_complement(&codes);
            for (strand, letters) in [(false, codes), (true, minus)] {
                contexts.push(Context {
                    query: index as u32,
                    minus: strand,
                    start: buffer.len() as u32,
                    length: letters.len() as u32,
                });
                buffer.extend_from_slice(&letters);
                buffer.push(SENTINEL);
            }
        }
        let mut context_of_position = vec![u32::MAX; buffer.len()];
        for (index, context) in contexts.iter().enumerate() {
            let range = context.start as usize..(context.start + context.length) as usize;
            context_of_position[range].fill(index as u32);
        }
        let word_count = 1usize << (2 * lookup_letters);
        let mut counts = vec![0u32; word_count + 1];
        let words: Vec<(u32, u32)> = words_of(&buffer, lookup_letters).collect();
        for &(word, _) in &words {
            counts[word as usize + 1] += 1;
        }
        for index in 1..counts.len() {
            counts[index] += counts[index - 1];
        }
        let heads = counts;
        let mut fill = heads.clone();
        let mut positions = vec![0u32; words.len()];
        let mut present = vec![0u64; word_count.div_ceil(64)];
        for &(word, position) in &words {
            positions[fill[word as usize] as usize] = position;
            fill[word as usize] += 1;
            present[word as usize / 64] |= 1 << (word % 64);
        }
        Self {
            names,
            lengths,
            contexts,
            buffer,
            context_of_position,
            lookup_letters,
            heads,
            positions,
            present,
        }
    }

    /// The contexts (two per query: plus, minus).
    pub fn contexts(&self) -> &[Context] {
        &self.contexts
    }

    /// The letters of a context.
    pub fn context_letters(&self, context: &Context) -> &[u8] {
        &self.buffer[context.start as usize..(context.start + context.length) as usize]
    }
}

/// Every word of `letters` bases in `buffer` (no ambiguity code, no sentinel), with the offset
/// of its first letter.
fn words_of(buffer: &[u8], letters: usize) -> impl Iterator<Item = (u32, u32)> + '_ {
    let mask = (1u64 << (2 * letters)) - 1;
    let mut word = 0u64;
    let mut valid = 0usize;
    buffer.iter().enumerate().filter_map(move |(index, &code)| {
        if is_base(code) {
            word = ((word << 2) | u64::from(code)) & mask;
            valid += 1;
        } else {
            valid = 0;
        }
        (valid >= letters).then(|| (word as u32, (index + 1 - letters) as u32))
    })
}

/// One gapped alignment found in a subject, in the coordinates of its context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hsp {
    /// The context (query strand).
    pub context: u32,
    /// Raw score.
    pub score: i32,
    /// First letter in the context (0-based).
    pub query_start: u32,
    /// Letters of the context covered.
    pub query_length: u32,
    /// First subject letter (0-based).
    pub subject_start: u32,
    /// Subject letters covered.
    pub subject_length: u32,
    /// Columns.
    pub length: u32,
    /// Identical columns.
    pub identities: u32,
    /// Mismatched columns.
    pub mismatches: u32,
    /// Gap openings.
    pub gap_opens: u32,
}

impl Hsp {
    fn contains(&self, other: &Hsp) -> bool {
        self.context == other.context
            && self.query_start <= other.query_start
            && other.query_start + other.query_length <= self.query_start + self.query_length
            && self.subject_start <= other.subject_start
            && other.subject_start + other.subject_length
                <= self.subject_start + self.subject_length
    }
}

/// A searcher: the per-diagonal memory, reused from subject to subject.
#[derive(Debug)]
pub struct Searcher {
    diagonal_keys: Vec<u64>,
    diagonal_ends: Vec<u32>,
    diagonal_mask: usize,
    subject_base: u64,
}

impl Searcher {
    /// A searcher over `index`.
    pub fn new(index: &QueryIndex) -> Self {
        let size = (2 * index.buffer.len()).next_power_of_two().max(1024);
        Self {
            diagonal_keys: vec![u64::MAX; size],
            diagonal_ends: vec![0; size],
            diagonal_mask: size - 1,
            subject_base: 0,
        }
    }

    /// Searches one subject; returns its alignments, best first, none inside a better one.
    /// A seed whose preliminary gapped score is below `cutoffs[query]` gets no traceback.
    pub fn search(
        &mut self,
        index: &QueryIndex,
        matrix: &ScoreMatrix,
        params: &SearchParams,
        cutoffs: &[i32],
        subject: &[u8],
    ) -> Vec<Hsp> {
        let lookup_letters = index.lookup_letters;
        let word_letters = params.word_letters;
        let buffer_length = index.buffer.len() as u64;
        let base = self.subject_base + buffer_length;
        self.subject_base = base + subject.len() as u64 + 1;
        let mut hsps: Vec<Hsp> = Vec::new();
        for (word, subject_position) in words_of(subject, lookup_letters) {
            if index.present[word as usize / 64] & (1 << (word % 64)) == 0 {
                continue;
            }
            let subject_position = subject_position as usize;
            let hits = index.heads[word as usize] as usize..index.heads[word as usize + 1] as usize;
            for &query_position in &index.positions[hits] {
                let query_position = query_position as usize;
                let diagonal = base + subject_position as u64 - query_position as u64;
                let slot = diagonal as usize & self.diagonal_mask;
                if self.diagonal_keys[slot] == diagonal
                    && (subject_position as u32) < self.diagonal_ends[slot]
                {
                    continue;
                }
                let buffer = &index.buffer;
                let mut left = 0;
                if word_letters > lookup_letters {
                    while left < subject_position
                        && left < query_position
                        && buffer[query_position - 1 - left] == subject[subject_position - 1 - left]
                        && is_base(subject[subject_position - 1 - left])
                    {
                        left += 1;
                    }
                }
                let mut right = lookup_letters;
                if word_letters > lookup_letters {
                    while subject_position + right < subject.len()
                        && query_position + right < buffer.len()
                        && buffer[query_position + right] == subject[subject_position + right]
                        && is_base(subject[subject_position + right])
                    {
                        right += 1;
                    }
                }
                self.diagonal_keys[slot] = diagonal;
                if left + right < word_letters {
                    self.diagonal_ends[slot] = (subject_position + right) as u32;
                    continue;
                }
                let context_index = index.context_of_position[query_position] as usize;
                let context = index.contexts[context_index];
                let letters = index.context_letters(&context);
                let query_start = query_position - left - context.start as usize;
                let ungapped = extend_ungapped(
                    matrix,
                    letters,
                    subject,
                    query_start,
                    subject_position - left,
                    left + right,
                    params.ungapped_x_drop,
                );
                self.diagonal_ends[slot] = (ungapped.subject_start + ungapped.length) as u32;
                if ungapped.score < params.gap_trigger {
                    continue;
                }
                let middle = ungapped.length / 2;
                let (query_point, subject_point) = (
                    ungapped.query_start + middle,
                    ungapped.subject_start + middle,
                );
                let covered = hsps.iter().any(|hsp| {
                    hsp.context == context_index as u32
                        && (hsp.query_start as usize..(hsp.query_start + hsp.query_length) as usize)
                            .contains(&query_point)
                        && (hsp.subject_start as usize
                            ..(hsp.subject_start + hsp.subject_length) as usize)
                            .contains(&subject_point)
                });
                if covered {
                    continue;
                }
                let anchor = Anchor {
                    query: letters,
                    subject,
                    query_point,
                    subject_point,
                };
                let gapped = |x_drop| Gapped {
                    matrix,
                    gaps: params.gaps,
                    x_drop,
                };
                // The gapped extension through a point of the ungapped segment scores at
                // least about as much, so a segment above the cutoff needs no preliminary pass.
                let cutoff = cutoffs[context.query as usize];
                if ungapped.score < cutoff {
                    let x_drop = params.preliminary_x_drop;
                    let preliminary = match params.greedy {
                        Some(scores) => Greedy { scores, x_drop }.score_through(anchor),
                        None => gapped(x_drop).score_through(anchor),
                    };
                    if preliminary < cutoff {
                        continue;
                    }
                }
                let x_drop = params.gapped_x_drop;
                let alignment = match params.greedy {
                    Some(scores) => Greedy { scores, x_drop }.align_through(matrix, anchor),
                    None => gapped(x_drop).align_through(anchor),
                };
                let counts = count_columns(&alignment, letters, subject);
                let subject_end = alignment.subject_start + alignment.subject_length;
                if (subject_end as u32) > self.diagonal_ends[slot] {
                    self.diagonal_ends[slot] = subject_end as u32;
                }
                hsps.push(Hsp {
                    context: context_index as u32,
                    score: alignment.score,
                    query_start: alignment.query_start as u32,
                    query_length: alignment.query_length as u32,
                    subject_start: alignment.subject_start as u32,
                    subject_length: alignment.subject_length as u32,
                    length: counts.length,
                    identities: counts.identities,
                    mismatches: counts.mismatches,
                    gap_opens: counts.gap_opens,
                });
            }
        }
        cull_contained(&mut hsps);
        hsps
    }
}

/// Sorts best first and drops every alignment lying inside a better one of the same context.
fn cull_contained(hsps: &mut Vec<Hsp>) {
    hsps.sort_by(|a, b| {
        (b.score, a.context, a.query_start, a.subject_start).cmp(&(
            a.score,
            b.context,
            b.query_start,
            b.subject_start,
        ))
    });
    let mut kept: Vec<Hsp> = Vec::with_capacity(hsps.len());
    for hsp in hsps.drain(..) {
        if !kept.iter().any(|better| better.contains(&hsp)) {
            kept.push(hsp);
        }
    }
    *hsps = kept;
}
