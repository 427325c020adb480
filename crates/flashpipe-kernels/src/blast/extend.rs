//! Extensions of a seed: ungapped X-drop (BLAST's `s_BlastNaExtend` idea: extend left and right
//! while the running score stays within `x_drop` of the best) and gapped X-drop with affine gap
//! costs and a traceback (BLAST's `ALIGN_EX`, the dynamic programme of [`crate::blast::gapped`]),
//! run both ways from a point.
//!
//! A gap of `k` letters costs `open + k * extend`. Sequences are blastna codes; the score of a
//! pair comes from a [`ScoreMatrix`]. The gapped extension runs from one point in both
//! directions (left on the reversed prefixes), and its edit script gives the tabular columns.

use crate::blast::alphabet::ScoreMatrix;

/// Gap costs in raw score units: a gap of `k` letters costs `open + k * extend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GapCosts {
    /// Cost of opening a gap.
    pub open: i32,
    /// Cost of each letter of a gap.
    pub extend: i32,
}

/// One column of an alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// A query letter against a subject letter.
    Pair,
    /// A query letter against a gap.
    QueryOnly,
    /// A subject letter against a gap.
    SubjectOnly,
}

/// An ungapped segment: `length` letters from `query_start` and `subject_start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ungapped {
    /// Its score.
    pub score: i32,
    /// First query letter.
    pub query_start: usize,
    /// First subject letter.
    pub subject_start: usize,
    /// Letters on each side.
    pub length: usize,
}

/// Extends the exact match of `length` letters at `query_start`/`subject_start` without gaps,
/// stopping each way where the score falls `x_drop` below the best.
pub fn extend_ungapped(
    matrix: &ScoreMatrix,
    query: &[u8],
    subject: &[u8],
    query_start: usize,
    subject_start: usize,
    length: usize,
    x_drop: i32,
) -> Ungapped {
    assert!(query_start + length <= query.len() && subject_start + length <= subject.len());
    let mut score: i32 = (0..length)
        .map(|offset| matrix.score(query[query_start + offset], subject[subject_start + offset]))
        .sum();
    let mut best_right = 0;
    let mut right_length = 0;
    let mut running = 0;
    let mut offset = 0;
    while query_start + length + offset < query.len()
        && subject_start + length + offset < subject.len()
    {
        running += matrix.score(
            query[query_start + length + offset],
            subject[subject_start + length + offset],
        );
        offset += 1;
        if running > best_right {
            best_right = running;
            right_length = offset;
        } else if running < best_right - x_drop {
            break;
        }
    }
    let mut best_left = 0;
    let mut left_length = 0;
    running = 0;
    offset = 0;
    while offset < query_start && offset < subject_start {
        running += matrix.score(
            query[query_start - offset - 1],
            subject[subject_start - offset - 1],
        );
        offset += 1;
        if running > best_left {
            best_left = running;
            left_length = offset;
        } else if running < best_left - x_drop {
            break;
        }
    }
    score += best_left + best_right;
    Ungapped {
        score,
        query_start: query_start - left_length,
        subject_start: subject_start - left_length,
        length: left_length + length + right_length,
    }
}

/// One side of a gapped extension: its score, the letters it consumed, its edit script from
/// the starting point outwards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OneSide {
    /// Best score reached.
    pub score: i32,
    /// Query letters consumed.
    pub query_length: usize,
    /// Subject letters consumed.
    pub subject_length: usize,
    /// Columns, from the starting point outwards.
    pub ops: Vec<Op>,
}

impl OneSide {
    /// The side ending at the cell `end` (query letters, subject letters) with `score`.
    pub fn ending_at(end: (usize, usize), score: i32, ops: Vec<Op>) -> OneSide {
        OneSide {
            score,
            query_length: end.0,
            subject_length: end.1,
            ops,
        }
    }
}

/// A gapped alignment through a starting pair: where it starts and its columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GappedAlignment {
    /// Its score.
    pub score: i32,
    /// First query letter.
    pub query_start: usize,
    /// First subject letter.
    pub subject_start: usize,
    /// Query letters covered.
    pub query_length: usize,
    /// Subject letters covered.
    pub subject_length: usize,
    /// Its columns, left to right.
    pub ops: Vec<Op>,
}

impl GappedAlignment {
    /// The alignment of `left` (its columns from the pair outwards) and `right` joined at the
    /// pair (`query_point`, `subject_point`), scored `score`.
    pub fn joined(
        left: OneSide,
        right: OneSide,
        query_point: usize,
        subject_point: usize,
        score: i32,
    ) -> GappedAlignment {
        let mut ops = left.ops;
        ops.reverse();
        ops.extend_from_slice(&right.ops);
        GappedAlignment {
            score,
            query_start: query_point - left.query_length,
            subject_start: subject_point - left.subject_length,
            query_length: left.query_length + right.query_length,
            subject_length: left.subject_length + right.subject_length,
            ops,
        }
    }
}

/// Where a gapped extension runs from: the pair (`query_point`, `subject_point`) of `query`
/// and `subject`, which belongs to the right side.
#[derive(Debug, Clone, Copy)]
pub struct Anchor<'a> {
    /// The query's letters (blastna codes).
    pub query: &'a [u8],
    /// The subject's letters.
    pub subject: &'a [u8],
    /// The anchor's query position.
    pub query_point: usize,
    /// The anchor's subject position.
    pub subject_point: usize,
}

/// What one side of an extension reads: `query_length` x `subject_length` letters from the
/// origin, through `query_at` and `subject_at` (so that the left side reads the prefixes
/// reversed).
pub struct Sides<Q, S> {
    /// Query letters there are.
    pub query_length: usize,
    /// Subject letters there are.
    pub subject_length: usize,
    /// The query letter at an index from the origin.
    pub query_at: Q,
    /// The subject letter at an index from the origin.
    pub subject_at: S,
}

impl<Q, S> Sides<Q, S> {
    /// The lengths and the readers: query length, subject length, query reader, subject
    /// reader.
    pub fn into_parts(self) -> (usize, usize, Q, S) {
        (
            self.query_length,
            self.subject_length,
            self.query_at,
            self.subject_at,
        )
    }
}

/// `query` against `subject`, both read from their first letters.
pub fn from_starts<'a>(
    query: &'a [u8],
    subject: &'a [u8],
) -> Sides<impl Fn(usize) -> u8 + 'a, impl Fn(usize) -> u8 + 'a> {
    Sides {
        query_length: query.len(),
        subject_length: subject.len(),
        query_at: |index| query[index],
        subject_at: |index| subject[index],
    }
}

/// An X-drop extension from an origin: the gapped dynamic programme ([`Gapped`]), the greedy
/// aligner ([`crate::blast::greedy::Greedy`]) and, in tests, the programme's old form.
pub trait Extend {
    /// The extension over `sides`, with its traceback (`TRACE`) or its score and end only
    /// (BLAST's preliminary pass).
    fn one_side<const TRACE: bool>(
        &self,
        sides: Sides<impl Fn(usize) -> u8, impl Fn(usize) -> u8>,
    ) -> OneSide;

    /// The extensions left of the anchor, reading the prefixes reversed, and right of it,
    /// from it.
    fn both_sides<const TRACE: bool>(&self, anchor: Anchor<'_>) -> (OneSide, OneSide) {
        let Anchor {
            query,
            subject,
            query_point,
            subject_point,
        } = anchor;
        assert!(query_point < query.len() && subject_point < subject.len());
        let right = self.one_side::<TRACE>(Sides {
            query_length: query.len() - query_point,
            subject_length: subject.len() - subject_point,
            query_at: |index| query[query_point + index],
            subject_at: |index| subject[subject_point + index],
        });
        let left = self.one_side::<TRACE>(Sides {
            query_length: query_point,
            subject_length: subject_point,
            query_at: |index| query[query_point - 1 - index],
            subject_at: |index| subject[subject_point - 1 - index],
        });
        (left, right)
    }

    /// The score of the extension through the anchor without a traceback (BLAST's
    /// preliminary gapped pass, with its smaller X-drop).
    fn score_through(&self, anchor: Anchor<'_>) -> i32 {
        let (left, right) = self.both_sides::<false>(anchor);
        left.score + right.score
    }
}

/// The gapped dynamic programme's costs and X-drop, as an [`Extend`] (the programme is in
/// [`crate::blast::gapped`]).
#[derive(Debug, Clone, Copy)]
pub struct Gapped<'a> {
    /// Pair scores.
    pub matrix: &'a ScoreMatrix,
    /// Gap costs (not negative).
    pub gaps: GapCosts,
    /// How far below the best score a cell may fall (raw).
    pub x_drop: i32,
}

impl Gapped<'_> {
    /// Extends left and right from the anchor, with the traceback.
    pub fn align_through(&self, anchor: Anchor<'_>) -> GappedAlignment {
        let (left, right) = self.both_sides::<true>(anchor);
        let score = left.score + right.score;
        GappedAlignment::joined(left, right, anchor.query_point, anchor.subject_point, score)
    }
}

/// The tabular columns of an alignment: length, identities, mismatches, gap openings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlignmentCounts {
    /// Columns.
    pub length: u32,
    /// Columns with the same code on both sides.
    pub identities: u32,
    /// Paired columns with different codes.
    pub mismatches: u32,
    /// Runs of gap columns.
    pub gap_opens: u32,
}

/// Counts the columns of `alignment` over `query` and `subject`.
pub fn count_columns(alignment: &GappedAlignment, query: &[u8], subject: &[u8]) -> AlignmentCounts {
    let mut counts = AlignmentCounts {
        length: alignment.ops.len() as u32,
        identities: 0,
        mismatches: 0,
        gap_opens: 0,
    };
    let (mut query_index, mut subject_index) = (alignment.query_start, alignment.subject_start);
    let mut previous = Op::Pair;
    for &op in &alignment.ops {
        match op {
            Op::Pair => {
                if query[query_index] == subject[subject_index] {
                    counts.identities += 1;
                } else {
                    counts.mismatches += 1;
                }
                query_index += 1;
                subject_index += 1;
            }
            Op::QueryOnly => query_index += 1,
            Op::SubjectOnly => subject_index += 1,
        }
        if op != Op::Pair && op != previous {
            counts.gap_opens += 1;
        }
        previous = op;
    }
    debug_assert_eq!(query_index, alignment.query_start + alignment.query_length);
    debug_assert_eq!(
        subject_index,
        alignment.subject_start + alignment.subject_length
    );
    counts
}

/// The score of an alignment recomputed from its columns (for tests and checks).
pub fn score_of(
    alignment: &GappedAlignment,
    matrix: &ScoreMatrix,
    gaps: GapCosts,
    query: &[u8],
    subject: &[u8],
) -> i32 {
    let (mut query_index, mut subject_index) = (alignment.query_start, alignment.subject_start);
    let mut score = 0;
    let mut previous = Op::Pair;
    for &op in &alignment.ops {
        match op {
            Op::Pair => {
                score += matrix.score(query[query_index], subject[subject_index]);
                query_index += 1;
                subject_index += 1;
            }
            Op::QueryOnly => query_index += 1,
            Op::SubjectOnly => subject_index += 1,
        }
        if op != Op::Pair {
            score -= gaps.extend + if op != previous { gaps.open } else { 0 };
        }
        previous = op;
    }
    score
}
