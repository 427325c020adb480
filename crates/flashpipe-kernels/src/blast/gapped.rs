//! The gapped X-drop dynamic programme with affine gap costs and its traceback (BLAST's
//! `ALIGN_EX`): from an origin, over the cells whose score stays within `x_drop` of the best
//! seen, row by row (a query letter a row, a subject letter a column), each row's live window
//! kept. One array of cells per subject column is updated in place; a row's window is computed
//! in three passes (what comes from the row above, the gap along the row, the cells' scores and
//! trace flags) so that the compiler vectorises the first and the last. One byte of trace flags
//! per cell gives the columns of the best cell's alignment.

use std::hint::select_unpredictable;

use crate::blast::alphabet::CODE_COUNT;
use crate::blast::extend::{Extend, GapCosts, Gapped, OneSide, Op, Sides};

/// Score of a cell out of the X-drop window: far below any floor, far from overflowing.
const DEAD: i32 = i32::MIN / 4;
const FROM_DIAGONAL: u8 = 0;
const FROM_SUBJECT_GAP: u8 = 1;
const FROM_QUERY_GAP: u8 = 2;
// The row loop computes the source as 0, 1 or 1 + 1.
const _: () = assert!(FROM_DIAGONAL == 0 && FROM_QUERY_GAP == FROM_SUBJECT_GAP + 1);
const E_EXTENDS: u8 = 4;
const F_EXTENDS: u8 = 8;

/// The scores the programme keeps per subject column, updated in place row after row (BLAST's
/// `score_array`): a row reads the row above (the cell above and the one up-left) from it before
/// overwriting it. Indexed by column (0 is the origin's column); it grows with the columns the
/// extension reaches, never with the subject's length.
struct Columns<F> {
    /// Best score of the cell.
    best: Vec<i32>,
    /// Best score of the cell ending in a gap in the subject (a query letter against a gap).
    vertical: Vec<i32>,
    /// The subject letter paired in each column (column `c` pairs letter `c - 1`; 0 at 0).
    letters: Vec<u8>,
    subject_length: usize,
    subject_at: F,
}

impl<F: Fn(usize) -> u8> Columns<F> {
    fn new(subject_length: usize, subject_at: F) -> Self {
        let mut columns = Columns {
            best: Vec::new(),
            vertical: Vec::new(),
            letters: Vec::new(),
            subject_length,
            subject_at,
        };
        columns.reach(0);
        columns
    }

    /// Makes column `column` (at most one past the subject) addressable, new cells DEAD.
    #[inline]
    fn reach(&mut self, column: usize) {
        if column >= self.best.len() {
            self.grow(column);
        }
    }

    /// [`Self::reach`] when the column is new: at least doubles the columns, at most to one
    /// past the subject.
    #[cold]
    fn grow(&mut self, column: usize) {
        let limit = self.subject_length + 2;
        let target = (column + 1).max(2 * self.best.len()).max(64).min(limit);
        for next in self.best.len()..target {
            self.best.push(DEAD);
            self.vertical.push(DEAD);
            let letter = if (1..=self.subject_length).contains(&next) {
                (self.subject_at)(next - 1)
            } else {
                0
            };
            self.letters.push(letter);
        }
    }
}

/// Trace flags, one byte a cell, row after row: a buffer grown in large zeroed steps and the
/// part of it used, so that a row takes its slice without a call to the allocator or `memset`.
#[derive(Default)]
struct Flags {
    bytes: Vec<u8>,
    used: usize,
}

impl Flags {
    /// The next `count` bytes, now counted as used.
    #[inline]
    fn take(&mut self, count: usize) -> &mut [u8] {
        let end = self.used + count;
        if end > self.bytes.len() {
            let length = end.max(2 * self.bytes.len()).max(4096);
            self.bytes.resize(length, 0);
        }
        let start = std::mem::replace(&mut self.used, end);
        &mut self.bytes[start..end]
    }

    /// Appends one byte.
    #[inline]
    fn push(&mut self, flag: u8) {
        self.take(1)[0] = flag;
    }
}

/// The state carried along a row past the row above's window (and out of `sweep_window`): the
/// up-left cell, the gap in the query ending at the cell just computed, and that cell's best
/// without the gap, less a gap's opening (`open + extend`).
///
/// The gap in the query at a cell is the larger of the left cell's best less an opening and the
/// left cell's gap less an extension; the left cell's best is the larger of its gap and the rest
/// (`other`), and since `open >= 0` its gap less an opening never beats its gap less an
/// extension: the gap is `max(other - open - extend, gap - extend)`, and the chain carried from
/// cell to cell is that one subtraction and one maximum. Neither is cut to DEAD below the
/// floor: what they give the next cell stays below the floor too, so it never makes a cell
/// live, and the trace flags it changes are of cells no traceback goes through (a traceback
/// only follows live scores).
#[derive(Clone, Copy)]
struct Carry {
    up_left: i32,
    horizontal: i32,
    other_open: i32,
}

/// The costs one cell needs, in registers.
#[derive(Clone, Copy)]
struct CellCosts {
    open_extend: i32,
    extend: i32,
    floor: i32,
}

/// One cell from the cell above (`up_best`, `up_vertical`) and the carried state and pair
/// score; returns the cell's (best, vertical) to keep, DEAD below the floor, and its trace
/// flags. Selects rather than branches: which of the three wins is data-dependent. The kept
/// vertical score of a live cell may lie a gap's cost under DEAD (its cell above was dead):
/// no sum of such scores comes near overflowing.
#[inline(always)]
fn cell(
    costs: CellCosts,
    carry: &mut Carry,
    up_best: i32,
    up_vertical: i32,
    pair: i32,
) -> (i32, i32, u8) {
    // a DEAD cell plus a letter's score stays far below any floor: it never lives
    let diagonal = carry.up_left + pair;
    carry.up_left = up_best;
    let vertical_open = up_best - costs.open_extend;
    let vertical_extend = up_vertical - costs.extend;
    let vertical = larger(vertical_open, vertical_extend);
    let horizontal_extend = carry.horizontal - costs.extend;
    let horizontal = larger(carry.other_open, horizontal_extend);
    let flags = (u8::from(vertical_extend >= vertical_open) * F_EXTENDS)
        | (u8::from(horizontal_extend >= carry.other_open) * E_EXTENDS);
    let other = larger(diagonal, vertical);
    let score = larger(other, horizontal);
    let not_diagonal = u8::from(diagonal < score);
    let source = not_diagonal + (not_diagonal & u8::from(horizontal < score));
    carry.horizontal = horizontal;
    carry.other_open = other - costs.open_extend;
    let alive = score >= costs.floor;
    let score_kept = select_unpredictable(alive, score, DEAD);
    let vertical_kept = select_unpredictable(alive, vertical, DEAD);
    (score_kept, vertical_kept, source | flags)
}

/// The larger of two scores, without a branch (which one wins is data-dependent).
#[inline(always)]
fn larger(first: i32, second: i32) -> i32 {
    select_unpredictable(first >= second, first, second)
}

/// Gapped X-drop extension from the origin over `query_length` x `subject_length` letters read
/// through `query_at` and `subject_at` (so that the left side reads the prefixes reversed),
/// with its traceback (`TRACE`) or its score and end only (BLAST's preliminary pass).
///
/// Row by row, the live window of columns `first..=last` (cells within `x_drop` of the best
/// seen before the row) is swept over the columns it can reach from the row above
/// (`first..=last + 1`, in three passes over zipped slices: `sweep_window`), then on to the
/// right one cell at a time while the gap in the query keeps cells alive (`cell`); the window
/// is then narrowed to its live ends.
///
/// Gap costs must not be negative (the options allow 0..=100): the carried gap relies on it.
impl Extend for Gapped<'_> {
    fn one_side<const TRACE: bool>(
        &self,
        sides: Sides<impl Fn(usize) -> u8, impl Fn(usize) -> u8>,
    ) -> OneSide {
        let (matrix, gaps, x_drop) = (self.matrix, self.gaps, self.x_drop);
        let (query_length, subject_length, query_at, subject_at) = sides.into_parts();
        assert!(
            gaps.open >= 0 && gaps.extend >= 0,
            "gap costs must not be negative"
        );
        let mut trace = Flags::default();
        let mut trace_rows: Vec<(usize, usize)> = Vec::new();
        let mut scratch = Flags::default();
        let mut row_scratch = RowScratch::default();
        let mut columns = Columns::new(subject_length, subject_at);
        let mut best_score = 0;
        let mut best_cell = (0usize, 0usize);
        let mut first = 0;
        let mut last = first_row(&mut columns, gaps, x_drop);
        if TRACE {
            trace_rows.push((0, 0));
            trace.push(FROM_DIAGONAL);
            for column in 1..=last {
                trace.push(FROM_SUBJECT_GAP | if column > 1 { E_EXTENDS } else { 0 });
            }
        }
        for row in 1..=query_length {
            let costs = CellCosts {
                open_extend: gaps.open + gaps.extend,
                extend: gaps.extend,
                floor: best_score - x_drop,
            };
            let mut pairs = [DEAD; 16];
            pairs[..CODE_COUNT].copy_from_slice(matrix.row(query_at(row - 1)));
            let row_start = trace.used;
            let flags = if TRACE { &mut trace } else { &mut scratch };
            if !TRACE {
                flags.used = 0;
            }
            let (end, row_best) = sweep_row(
                &mut columns,
                costs,
                &pairs,
                first,
                last,
                flags,
                &mut row_scratch,
            );
            if row_best > best_score {
                best_score = row_best;
                let at = columns.best[first..=end]
                    .iter()
                    .position(|&score| score == row_best)
                    .expect("the row's best is one of its cells");
                best_cell = (row, first + at);
            }
            let row_first = first;
            let Some(live) = live_window(&columns.best, first, end) else {
                break;
            };
            (first, last) = live;
            if TRACE {
                trace_rows.push((row_first, row_start));
            }
        }
        let ops = if TRACE {
            traceback(&trace.bytes[..trace.used], &trace_rows, best_cell)
        } else {
            Vec::new()
        };
        OneSide::ending_at(best_cell, best_score, ops)
    }
}

/// Row 0: the origin, then a gap in the query while it stays within `x_drop`; returns its last
/// column.
fn first_row<F: Fn(usize) -> u8>(columns: &mut Columns<F>, gaps: GapCosts, x_drop: i32) -> usize {
    columns.best[0] = 0;
    columns.vertical[0] = DEAD;
    let mut last = 0;
    while last < columns.subject_length {
        let score = -(gaps.open + gaps.extend * (last as i32 + 1));
        if score < -x_drop {
            break;
        }
        last += 1;
        columns.reach(last);
        columns.best[last] = score;
        columns.vertical[last] = DEAD;
    }
    last
}

/// Sweeps one row whose row above lives in `first..=last`, appending each cell's trace flags to
/// `flags`; returns the last column computed and the row's best score.
#[inline(never)]
fn sweep_row<F: Fn(usize) -> u8>(
    columns: &mut Columns<F>,
    costs: CellCosts,
    pairs: &[i32; 16],
    first: usize,
    last: usize,
    flags: &mut Flags,
    scratch: &mut RowScratch,
) -> (usize, i32) {
    // The cell after the window reads as dead from the row above, whatever an older row left.
    columns.reach(last + 1);
    columns.best[last + 1] = DEAD;
    columns.vertical[last + 1] = DEAD;
    let end = (last + 1).min(columns.subject_length);
    let mut carry = sweep_window(columns, scratch, costs, pairs, first, end, flags);
    // Past the row above's window only the gap in the query keeps a cell alive.
    let mut column = end;
    let reaches_past = end == last + 1 && columns.best[end] > DEAD;
    while reaches_past && column < columns.subject_length {
        column += 1;
        columns.reach(column);
        let pair = pairs[usize::from(columns.letters[column] & 15)];
        let (best, vertical, flag) = cell(costs, &mut carry, DEAD, DEAD, pair);
        columns.best[column] = best;
        columns.vertical[column] = vertical;
        flags.push(flag);
        if best == DEAD {
            break;
        }
    }
    let row_best = columns.best[first..=column]
        .iter()
        .copied()
        .max()
        .unwrap_or(DEAD);
    (column, row_best)
}

/// A row's intermediate scores, reused from row to row: per cell its diagonal score and its
/// best without a gap in the query (`other`), and the gap in the query; the last two shifted by
/// one, after a dead cell standing for the one left of the row.
#[derive(Default)]
struct RowScratch {
    diagonal: Vec<i32>,
    other: Vec<i32>,
    horizontal: Vec<i32>,
    /// Each cell's trace flags, before they are narrowed to bytes.
    codes: Vec<i32>,
}

impl RowScratch {
    /// Room for `count` cells.
    fn fit(&mut self, count: usize) {
        if self.diagonal.len() < count + 1 {
            let length = (count + 1).max(2 * self.diagonal.len()).max(64);
            self.diagonal.resize(length, DEAD);
            self.other.resize(length, DEAD);
            self.horizontal.resize(length, DEAD);
            self.codes.resize(length, 0);
        }
    }
}

/// The cells `first..=end` of a row in three passes: what comes from the row above and the
/// diagonal (no chain from cell to cell: the compiler vectorises it), the gap in the query
/// (the one chain: a subtraction and a maximum per cell), then the cells' scores, cut and
/// flags (vectorised again). Returns the carried state after `end`.
fn sweep_window<F: Fn(usize) -> u8>(
    columns: &mut Columns<F>,
    scratch: &mut RowScratch,
    costs: CellCosts,
    pairs: &[i32; 16],
    first: usize,
    end: usize,
    flags: &mut Flags,
) -> Carry {
    let count = end + 1 - first;
    scratch.fit(count);
    let pair_of = |letter: u8| pairs[usize::from(letter & 15)];
    let letters = &columns.letters[first..=end];
    let diagonal = &mut scratch.diagonal[..count];
    diagonal[0] = DEAD + pair_of(letters[0]);
    for ((cell, &up_left), &letter) in diagonal[1..]
        .iter_mut()
        .zip(&columns.best[first..end])
        .zip(&letters[1..])
    {
        *cell = up_left + pair_of(letter);
    }
    scratch.other[0] = DEAD;
    let above = columns.best[first..=end]
        .iter()
        .zip(&columns.vertical[first..=end])
        .zip(&scratch.diagonal[..count])
        .zip(&mut scratch.other[1..=count]);
    for (((&up_best, &up_vertical), &diagonal), other) in above {
        let vertical = (up_best - costs.open_extend).max(up_vertical - costs.extend);
        *other = diagonal.max(vertical);
    }
    scratch.horizontal[0] = DEAD;
    let horizontal = gap_chain(
        &scratch.other[..count],
        &mut scratch.horizontal[1..=count],
        costs,
    );
    finish_cells(
        &mut columns.best[first..=end],
        &mut columns.vertical[first..=end],
        &scratch.diagonal[..count],
        &scratch.other[..=count],
        &scratch.horizontal[..=count],
        &mut scratch.codes[..count],
        costs,
    );
    for (flag, &code) in flags.take(count).iter_mut().zip(&scratch.codes[..count]) {
        *flag = code as u8;
    }
    Carry {
        up_left: DEAD,
        horizontal,
        other_open: scratch.other[count] - costs.open_extend,
    }
}

/// The third pass over a row's window: each cell's best, vertical score and trace flags (in
/// 32-bit lanes, narrowed to bytes after) from the row above (`best`, `vertical`, overwritten),
/// its diagonal score, and its best without a gap in the query (`other`) and gap in the query
/// (`horizontal`), the last two shifted by one after the cell left of the window. Its own
/// function so that the slices are known not to overlap: the compiler vectorises it.
#[inline(never)]
fn finish_cells(
    best: &mut [i32],
    vertical: &mut [i32],
    diagonal: &[i32],
    other: &[i32],
    horizontal: &[i32],
    codes: &mut [i32],
    costs: CellCosts,
) {
    let cells = best
        .iter_mut()
        .zip(vertical)
        .zip(diagonal)
        .zip(other.iter().zip(&other[1..]))
        .zip(horizontal.iter().zip(&horizontal[1..]))
        .zip(codes);
    for (((((best, vertical), &diagonal), (&other_left, &other)), (&left, &horizontal)), code) in
        cells
    {
        let vertical_open = *best - costs.open_extend;
        let vertical_extend = *vertical - costs.extend;
        let kept_vertical = vertical_open.max(vertical_extend);
        let horizontal_extend = left - costs.extend;
        let gap_flags = (i32::from(vertical_extend >= vertical_open) * i32::from(F_EXTENDS))
            | (i32::from(horizontal_extend >= other_left - costs.open_extend)
                * i32::from(E_EXTENDS));
        let score = other.max(horizontal);
        let not_diagonal = i32::from(diagonal < score);
        let source = not_diagonal + (not_diagonal & i32::from(horizontal < score));
        let alive = score >= costs.floor;
        *best = if alive { score } else { DEAD };
        *vertical = if alive { kept_vertical } else { DEAD };
        *code = source | gap_flags;
    }
}

/// The gap in the query along a row: `horizontal[k] = max(other_left[k] - open - extend,
/// horizontal[k - 1] - extend)` from a dead start; returns the last. Two cells a step, the
/// second from the gap two cells back (`max(o1, o0 - extend, h - 2 extend)`, the same value),
/// so that the chain from step to step is one subtraction and one maximum per two cells.
fn gap_chain(other_left: &[i32], horizontal: &mut [i32], costs: CellCosts) -> i32 {
    let mut gap = DEAD;
    let twice = 2 * costs.extend;
    let mut pairs = other_left
        .chunks_exact(2)
        .zip(horizontal.chunks_exact_mut(2));
    for (other, cells) in &mut pairs {
        let (open0, open1) = (other[0] - costs.open_extend, other[1] - costs.open_extend);
        let off_chain = larger(open1, open0 - costs.extend);
        cells[0] = larger(open0, gap - costs.extend);
        gap = larger(off_chain, gap - twice);
        cells[1] = gap;
    }
    if other_left.len() % 2 == 1 {
        let last = other_left.len() - 1;
        gap = larger(other_left[last] - costs.open_extend, gap - costs.extend);
        horizontal[last] = gap;
    }
    gap
}

/// The first and last live columns of `best[first..=end]`, or `None` if none lives.
fn live_window(best: &[i32], first: usize, end: usize) -> Option<(usize, usize)> {
    let row = &best[first..=end];
    let first_alive = row.iter().position(|&score| score > DEAD)?;
    let last_alive = row.iter().rposition(|&score| score > DEAD)?;
    Some((first + first_alive, first + last_alive))
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

#[cfg(test)]
#[path = "gapped_reference.rs"]
mod reference;

#[cfg(test)]
#[path = "gapped_tests.rs"]
mod tests;
