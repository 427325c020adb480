//! Megablast's greedy gapped extension: the X-drop greedy algorithm of Zhang, Schwartz, Wagner
//! and Miller, "A greedy algorithm for aligning DNA sequences", J. Comput. Biol. 7 (2000)
//! 203-214, as NCBI BLAST+ runs it for `-task megablast` (`BLAST_GreedyAlign` in
//! src/algo/blast/core/greedy_align.c of the NCBI C++ toolkit, read for its semantics; this is
//! our own code).
//!
//! With linear gap costs where a gap letter costs `reward / 2 - penalty`, an alignment covering
//! `i` query and `j` subject letters with `d` differences (mismatches plus gap letters) scores
//! `(i + j) * reward / 2 - d * (reward - penalty)`, so the best alignment is the one reaching
//! furthest with the fewest differences. For each distance `d` and diagonal `k = j - i` the
//! algorithm keeps the furthest row reachable (one difference from the distance `d - 1` rows,
//! then a slide along matching letters), and drops a cell whose score falls `x_drop` below the
//! best score reached `lag` distances earlier (the paper's `T[d - d']`). For these costs its
//! result is the optimal X-drop alignment of the dynamic programme in [`crate::blast::extend`].
//!
//! Letters match when their codes are equal and unambiguous (A, C, G, T); an ambiguity code
//! counts as a difference, as in NCBI's greedy aligner, and the caller rescores the columns
//! with the matrix.

use crate::blast::alphabet::ScoreMatrix;
use crate::blast::extend::{
    score_of, Anchor, Extend, GapCosts, GappedAlignment, OneSide, Op, Sides,
};

/// The pair scores the greedy aligner needs: a match and a mismatch (raw).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinearScores {
    /// Score of a match (even, so that half of it is a whole gap cost).
    pub reward: i32,
    /// Score of a mismatch (negative).
    pub penalty: i32,
}

impl LinearScores {
    /// The scores when the greedy aligner is exact for `matrix` and `gaps`: linear gaps
    /// (`open` 0) of `reward / 2 - penalty` a letter; `None` otherwise.
    pub fn of(matrix: &ScoreMatrix, gaps: GapCosts) -> Option<Self> {
        let reward = matrix.score(0, 0);
        let penalty = matrix.score(0, 1);
        let fits = gaps.open == 0
            && reward > 0
            && penalty < 0
            && reward % 2 == 0
            && 2 * gaps.extend == reward - 2 * penalty;
        fits.then_some(Self { reward, penalty })
    }

    /// The linear gap costs these scores imply.
    pub fn gaps(&self) -> GapCosts {
        GapCosts {
            open: 0,
            extend: self.reward / 2 - self.penalty,
        }
    }

    /// Twice the score of `letters` letters (both sides) with `distance` differences.
    fn doubled(&self, letters: usize, distance: usize) -> i64 {
        letters as i64 * i64::from(self.reward)
            - 2 * distance as i64 * i64::from(self.reward - self.penalty)
    }
}

const DEAD: u32 = u32::MAX;
const FROM_MISMATCH: u8 = 0;
const FROM_QUERY_GAP: u8 = 1;
const FROM_SUBJECT_GAP: u8 = 2;

/// The cells of one distance: the furthest row of each live diagonal from `lower` on, and the
/// difference that led there.
#[derive(Default, Clone)]
struct Level {
    lower: i64,
    rows: Vec<u32>,
    sources: Vec<u8>,
}

impl Level {
    fn row(&self, diagonal: i64) -> Option<u32> {
        let index = usize::try_from(diagonal - self.lower).ok()?;
        self.rows.get(index).copied().filter(|&row| row != DEAD)
    }

    /// Drops the dead cells at both ends; false if none lives.
    fn trim(&mut self) -> bool {
        let Some(first) = self.rows.iter().position(|&row| row != DEAD) else {
            return false;
        };
        let last = self
            .rows
            .iter()
            .rposition(|&row| row != DEAD)
            .expect("a live cell");
        self.rows.truncate(last + 1);
        self.sources.truncate(last + 1);
        self.rows.drain(..first);
        self.sources.drain(..first);
        self.lower += first as i64;
        true
    }
}

/// The best cell: distance, diagonal, row and doubled score.
#[derive(Clone, Copy)]
struct Best {
    distance: usize,
    diagonal: i64,
    row: usize,
    doubled: i64,
}

/// The greedy aligner's scores and X-drop, as an [`Extend`].
#[derive(Debug, Clone, Copy)]
pub struct Greedy {
    /// The match and mismatch scores.
    pub scores: LinearScores,
    /// How far below the best score a cell may fall (raw).
    pub x_drop: i32,
}

/// Greedy X-drop extension from the origin, with its traceback (`TRACE`) or its score and end
/// only.
impl Extend for Greedy {
    fn one_side<const TRACE: bool>(
        &self,
        sides: Sides<impl Fn(usize) -> u8, impl Fn(usize) -> u8>,
    ) -> OneSide {
        let (scores, x_drop) = (self.scores, self.x_drop);
        let (query_length, subject_length, query_at, subject_at) = sides.into_parts();
        let matches = |row: usize, column: usize| {
            let letter = query_at(row);
            letter < 4 && letter == subject_at(column)
        };
        let slide = |mut row: usize, diagonal: i64| {
            let mut column = (row as i64 + diagonal) as usize;
            while row < query_length && column < subject_length && matches(row, column) {
                row += 1;
                column += 1;
            }
            row
        };
        let doubled_x_drop = 2 * i64::from(x_drop);
        let unit = 2 * i64::from(scores.reward - scores.penalty);
        let lag = ((doubled_x_drop + i64::from(scores.reward)) / unit) as usize + 1;
        let start = slide(0, 0);
        let mut best = Best {
            distance: 0,
            diagonal: 0,
            row: start,
            doubled: scores.doubled(2 * start, 0),
        };
        let mut best_by_distance = vec![best.doubled];
        let mut previous = Level {
            lower: 0,
            rows: vec![start as u32],
            sources: vec![FROM_MISMATCH],
        };
        let mut history: Vec<Level> = Vec::new();
        for distance in 1.. {
            let reference = if distance >= lag {
                best_by_distance[distance - lag]
            } else {
                0
            };
            let floor = reference - doubled_x_drop;
            let lower = previous.lower - 1;
            let upper = previous.lower + previous.rows.len() as i64;
            let mut level = Level {
                lower,
                rows: Vec::with_capacity(previous.rows.len() + 2),
                sources: Vec::with_capacity(previous.rows.len() + 2),
            };
            let mut level_best = i64::MIN;
            for diagonal in lower..=upper {
                let bounds = (query_length as i64, subject_length as i64);
                let (row, source) = next_start(&previous, diagonal, bounds);
                let end = if row >= 0 {
                    let end = slide(row as usize, diagonal);
                    let letters = end + (end as i64 + diagonal) as usize;
                    let doubled = scores.doubled(letters, distance);
                    (doubled >= floor).then_some((end, doubled))
                } else {
                    None
                };
                match end {
                    Some((end, doubled)) => {
                        if doubled > best.doubled {
                            best = Best {
                                distance,
                                diagonal,
                                row: end,
                                doubled,
                            };
                        }
                        level_best = level_best.max(doubled);
                        level.rows.push(end as u32);
                    }
                    None => level.rows.push(DEAD),
                }
                level.sources.push(source);
            }
            if !level.trim() {
                break;
            }
            best_by_distance.push(best_by_distance[distance - 1].max(level_best));
            let finished = std::mem::replace(&mut previous, level);
            if TRACE {
                history.push(finished);
            }
        }
        if TRACE {
            history.push(previous);
        }
        let ops = if TRACE {
            traceback(&history, best)
        } else {
            Vec::new()
        };
        let column = (best.row as i64 + best.diagonal) as usize;
        OneSide {
            score: (best.doubled / 2) as i32,
            query_length: best.row,
            subject_length: column,
            ops,
        }
    }
}

/// The furthest row on `diagonal` one difference past `previous`, before sliding, and the
/// difference (row -1 when no neighbour lives inside the `bounds` (query, subject letters), so
/// the cell dies).
fn next_start(previous: &Level, diagonal: i64, bounds: (i64, i64)) -> (i64, u8) {
    let mut row = -1i64;
    let mut source = FROM_MISMATCH;
    let candidates = [
        (diagonal, 1, FROM_MISMATCH),
        (diagonal + 1, 1, FROM_QUERY_GAP),
        (diagonal - 1, 0, FROM_SUBJECT_GAP),
    ];
    for (from, step, from_source) in candidates {
        if let Some(end) = previous.row(from) {
            let candidate = i64::from(end) + step;
            let inside = candidate <= bounds.0 && candidate + diagonal <= bounds.1;
            if inside && candidate > row {
                row = candidate;
                source = from_source;
            }
        }
    }
    (row, source)
}

/// Follows the sources back from `best` to the origin; returns the columns origin first.
fn traceback(history: &[Level], best: Best) -> Vec<Op> {
    let mut ops = Vec::new();
    let (mut distance, mut diagonal, mut row) = (best.distance, best.diagonal, best.row);
    while distance > 0 {
        let level = &history[distance];
        let source = level.sources[(diagonal - level.lower) as usize];
        let previous = &history[distance - 1];
        let (from, step, op) = match source {
            FROM_MISMATCH => (diagonal, 1, Op::Pair),
            FROM_QUERY_GAP => (diagonal + 1, 1, Op::QueryOnly),
            _ => (diagonal - 1, 0, Op::SubjectOnly),
        };
        let from_row = previous.row(from).expect("a traced cell's source lives") as usize;
        let slid = row - (from_row + step);
        ops.extend(std::iter::repeat_n(Op::Pair, slid));
        ops.push(op);
        row = from_row;
        diagonal = from;
        distance -= 1;
    }
    ops.extend(std::iter::repeat_n(Op::Pair, row));
    ops.reverse();
    ops
}

impl Greedy {
    /// Greedy extension left and right from the anchor, with its columns; its score is the
    /// columns' rescored with `matrix` (ambiguity codes score as the matrix says).
    pub fn align_through(&self, matrix: &ScoreMatrix, anchor: Anchor<'_>) -> GappedAlignment {
        let (left, right) = self.both_sides::<true>(anchor);
        let (query_point, subject_point) = (anchor.query_point, anchor.subject_point);
        let mut alignment = GappedAlignment::joined(left, right, query_point, subject_point, 0);
        alignment.score = score_of(
            &alignment,
            matrix,
            self.scores.gaps(),
            anchor.query,
            anchor.subject,
        );
        alignment
    }
}

#[cfg(test)]
#[path = "greedy_tests.rs"]
mod tests;
