//! The gapped dynamic programme as it was before its cell loop was rewritten (two rows swapped,
//! each trimmed by copying), kept for the tests only: the rewritten one must give the same
//! score, end and columns on every input.

use super::*;

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

/// The old programme, with the costs of the new one.
#[derive(Clone, Copy)]
pub struct Reference<'a>(pub Gapped<'a>);

/// The gapped X-drop extension as the old programme computed it.
impl Extend for Reference<'_> {
    fn one_side<const TRACE: bool>(
        &self,
        sides: Sides<impl Fn(usize) -> u8, impl Fn(usize) -> u8>,
    ) -> OneSide {
        let (matrix, gaps, x_drop) = (self.0.matrix, self.0.gaps, self.0.x_drop);
        let (query_length, subject_length, query_at, subject_at) = sides.into_parts();
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
        OneSide::ending_at(best_cell, best_score, ops)
    }
}
