//! Extensions of a seed: ungapped X-drop (BLAST's `s_BlastNaExtend` idea: extend left and right
//! while the running score stays within `x_drop` of the best) and gapped X-drop with affine gap
//! costs and a traceback (BLAST's `ALIGN_EX`: a dynamic programme over the cells whose score
//! stays within `x_drop` of the best seen, row by row, each row's live window kept).
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

const DEAD: i32 = i32::MIN / 4;
const FROM_DIAGONAL: u8 = 0;
const FROM_SUBJECT_GAP: u8 = 1;
const FROM_QUERY_GAP: u8 = 2;
// The row loop computes the source as 0, 1 or 1 + 1.
const _: () = assert!(FROM_DIAGONAL == 0 && FROM_QUERY_GAP == FROM_SUBJECT_GAP + 1);
const E_EXTENDS: u8 = 4;
const F_EXTENDS: u8 = 8;

/// Cells of one row: its first column and the columns' (best, vertical gap) scores. Two rows
/// are kept and swapped, so the extension allocates nothing per row.
#[derive(Default)]
struct Row {
    first_column: usize,
    best: Vec<i32>,
    vertical: Vec<i32>,
}

impl Row {
    /// Empties the row, keeping the one DEAD cell in front of its window (the column before
    /// `first_column`), so the row below reads its up-left cell without a bounds test.
    fn clear(&mut self, first_column: usize) {
        self.first_column = first_column;
        self.best.clear();
        self.vertical.clear();
        self.best.push(DEAD);
        self.vertical.push(DEAD);
    }

    /// Cells of the window (the front pad not counted).
    fn count(&self) -> usize {
        self.best.len() - 1
    }

    /// Two DEAD cells after the window, read as the cells above its last columns.
    fn pad_end(&mut self) {
        self.best.extend_from_slice(&[DEAD, DEAD]);
        self.vertical.extend_from_slice(&[DEAD, DEAD]);
    }

    /// Keeps only the cells from the first live one to the last (and the front pad); false
    /// if none lives.
    fn trim(&mut self) -> bool {
        let Some(first_alive) = self.best[1..].iter().position(|&score| score > DEAD) else {
            return false;
        };
        let last_alive = self.best[1..]
            .iter()
            .rposition(|&score| score > DEAD)
            .expect("a live cell");
        let (first, last) = (first_alive + 1, last_alive + 1);
        self.best.truncate(last + 1);
        self.vertical.truncate(last + 1);
        if first > 1 {
            self.best.copy_within(first.., 1);
            self.vertical.copy_within(first.., 1);
            let kept = 1 + last + 1 - first;
            self.best.truncate(kept);
            self.vertical.truncate(kept);
            self.first_column += first - 1;
        }
        true
    }
}

/// Gapped X-drop extension from the origin over `query_length` x `subject_length` letters read
/// through `query_at` and `subject_at` (so that the left side reads the prefixes reversed),
/// with its traceback (`TRACE`) or its score and end only (BLAST's preliminary pass).
pub fn extend_gapped<const TRACE: bool>(
    matrix: &ScoreMatrix,
    gaps: GapCosts,
    x_drop: i32,
    query_length: usize,
    subject_length: usize,
    query_at: impl Fn(usize) -> u8,
    subject_at: impl Fn(usize) -> u8,
) -> OneSide {
    let open_extend = gaps.open + gaps.extend;
    let mut trace: Vec<u8> = Vec::new();
    let mut trace_rows: Vec<(usize, usize)> = Vec::new();
    let mut best_score = 0;
    let mut best_cell = (0usize, 0usize);
    // Row 0: the origin, then a gap in the query.
    let mut previous = Row::default();
    previous.clear(0);
    previous.best.push(0);
    previous.vertical.push(DEAD);
    if TRACE {
        trace_rows.push((0, trace.len()));
        trace.push(FROM_DIAGONAL);
    }
    let mut column = 1;
    while column <= subject_length {
        let score = -(gaps.open + gaps.extend * column as i32);
        if score < -x_drop {
            break;
        }
        previous.best.push(score);
        previous.vertical.push(DEAD);
        if TRACE {
            trace.push(FROM_SUBJECT_GAP | if column > 1 { E_EXTENDS } else { 0 });
        }
        column += 1;
    }
    let mut current = Row::default();
    // the subject's letters in reading order at 1.. (column `c` pairs with letter `c`), so
    // the row loop reads a slice; index 0 is never paired with a live cell
    let subject_letters: Vec<u8> = std::iter::once(0)
        .chain((0..subject_length).map(&subject_at))
        .collect();
    for row in 1..=query_length {
        let scores = matrix.row(query_at(row - 1));
        let previous_first = previous.first_column;
        let previous_count = previous.count();
        let previous_last = previous_first + previous_count - 1;
        previous.pad_end();
        current.clear(previous_first);
        let row_start = trace.len();
        let mut horizontal = DEAD;
        let mut left_best = DEAD;
        let mut column = previous.first_column;
        let floor = best_score - x_drop;
        while column <= subject_length {
            // Column `column` of the previous row is at `offset + 1` there (after the front
            // pad), its up-left cell at `offset`; past the window both read the end pads.
            let offset = (column - previous_first).min(previous_count + 1);
            let up_best = previous.best[offset + 1];
            let up_vertical = previous.vertical[offset + 1];
            // a DEAD cell plus a letter's score stays far below any floor: it never lives
            let diagonal = previous.best[offset] + scores[subject_letters[column] as usize];
            // Selects rather than branches: which of the three wins is data-dependent.
            let vertical_open = up_best - open_extend;
            let vertical_extend = up_vertical - gaps.extend;
            let vertical = vertical_open.max(vertical_extend);
            let horizontal_open = left_best - open_extend;
            let horizontal_extend = horizontal - gaps.extend;
            horizontal = horizontal_open.max(horizontal_extend);
            let flags = (u8::from(vertical_extend >= vertical_open) * F_EXTENDS)
                | (u8::from(horizontal_extend >= horizontal_open) * E_EXTENDS);
            let score = diagonal.max(horizontal).max(vertical);
            let source =
                u8::from(diagonal < score) * (FROM_SUBJECT_GAP + u8::from(horizontal < score));
            let alive = score >= floor;
            let score = if alive { score } else { DEAD };
            let vertical_kept = if alive { vertical.max(DEAD) } else { DEAD };
            horizontal = if alive { horizontal } else { DEAD };
            if score > best_score {
                best_score = score;
                best_cell = (row, column);
            }
            current.best.push(score);
            current.vertical.push(vertical_kept);
            if TRACE {
                trace.push(source | flags);
            }
            left_best = score;
            column += 1;
            if column > previous_last + 1 && score == DEAD && horizontal < floor {
                break;
            }
        }
        let row_first_column = current.first_column;
        if !current.trim() {
            break;
        }
        if TRACE {
            trace_rows.push((row_first_column, row_start));
        }
        std::mem::swap(&mut previous, &mut current);
    }
    let ops = if TRACE {
        traceback(&trace, &trace_rows, best_cell)
    } else {
        Vec::new()
    };
    OneSide {
        score: best_score,
        query_length: best_cell.0,
        subject_length: best_cell.1,
        ops,
    }
}

/// Follows the trace flags back from `end` to the origin; returns the columns origin first.
fn traceback(trace: &[u8], rows: &[(usize, usize)], end: (usize, usize)) -> Vec<Op> {
    #[derive(Clone, Copy, PartialEq)]
    enum State {
        Best,
        SubjectGap,
        QueryGap,
    }
    let flags_at = |row: usize, column: usize| {
        let (first_column, start) = rows[row];
        trace[start + column - first_column]
    };
    let (mut row, mut column) = end;
    let mut state = State::Best;
    let mut ops = Vec::with_capacity(row.max(column) + 8);
    while row > 0 || column > 0 {
        let flags = flags_at(row, column);
        match state {
            State::Best => match flags & 3 {
                FROM_DIAGONAL => {
                    ops.push(Op::Pair);
                    row -= 1;
                    column -= 1;
                }
                FROM_SUBJECT_GAP => state = State::SubjectGap,
                _ => state = State::QueryGap,
            },
            State::SubjectGap => {
                ops.push(Op::SubjectOnly);
                column -= 1;
                if flags & E_EXTENDS == 0 {
                    state = State::Best;
                }
            }
            State::QueryGap => {
                ops.push(Op::QueryOnly);
                row -= 1;
                if flags & F_EXTENDS == 0 {
                    state = State::Best;
                }
            }
        }
    }
    ops.reverse();
    ops
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

/// Extends left and right from the pair (`query_point`, `subject_point`), which belongs to the
/// right side.
pub fn align_through(
    matrix: &ScoreMatrix,
    gaps: GapCosts,
    x_drop: i32,
    query: &[u8],
    subject: &[u8],
    query_point: usize,
    subject_point: usize,
) -> GappedAlignment {
    let (left, right) = both_sides::<true>(
        matrix,
        gaps,
        x_drop,
        query,
        subject,
        query_point,
        subject_point,
    );
    let score = left.score + right.score;
    GappedAlignment::joined(left, right, query_point, subject_point, score)
}

/// The score of the gapped extension through (`query_point`, `subject_point`) without a
/// traceback (BLAST's preliminary gapped pass, with its smaller X-drop).
pub fn score_through(
    matrix: &ScoreMatrix,
    gaps: GapCosts,
    x_drop: i32,
    query: &[u8],
    subject: &[u8],
    query_point: usize,
    subject_point: usize,
) -> i32 {
    let (left, right) = both_sides::<false>(
        matrix,
        gaps,
        x_drop,
        query,
        subject,
        query_point,
        subject_point,
    );
    left.score + right.score
}

/// The extensions left of (`query_point`, `subject_point`), reading the prefixes reversed,
/// and right of it, from it.
fn both_sides<const TRACE: bool>(
    matrix: &ScoreMatrix,
    gaps: GapCosts,
    x_drop: i32,
    query: &[u8],
    subject: &[u8],
    query_point: usize,
    subject_point: usize,
) -> (OneSide, OneSide) {
    assert!(query_point < query.len() && subject_point < subject.len());
    let right = extend_gapped::<TRACE>(
        matrix,
        gaps,
        x_drop,
        query.len() - query_point,
        subject.len() - subject_point,
        |index| query[query_point + index],
        |index| subject[subject_point + index],
    );
    let left = extend_gapped::<TRACE>(
        matrix,
        gaps,
        x_drop,
        query_point,
        subject_point,
        |index| query[query_point - 1 - index],
        |index| subject[subject_point - 1 - index],
    );
    (left, right)
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
