//! The greedy aligner against the dynamic programme of `extend.rs` on random sequences: the
//! same score where greedy is exact (linear costs, an X-drop that cuts nothing optimal), a
//! traceback that rescores to that score, and the X-drop stopping in unrelated sequence.

use super::*;
use crate::blast::extend::{from_starts, score_of, Gapped, GappedAlignment};
use crate::blast::test_random::Random;

/// megablast's raw system: 1/-2 doubled, linear gaps of 5 a letter.
fn megablast() -> (ScoreMatrix, GapCosts, LinearScores) {
    let matrix = ScoreMatrix::new(1, -2).scaled(2);
    let gaps = GapCosts { open: 0, extend: 5 };
    let scores = LinearScores::of(&matrix, gaps).expect("megablast's costs fit");
    (matrix, gaps, scores)
}

/// `count` bases (no ambiguity codes).
fn bases(random: &mut Random, count: usize) -> Vec<u8> {
    (0..count).map(|_| (random.next() % 4) as u8).collect()
}

/// `source` with `edits` random substitutions, and insertions and deletions too with `gaps`.
fn mutated(random: &mut Random, source: &[u8], edits: usize, gaps: bool) -> Vec<u8> {
    let mut result = source.to_vec();
    for _ in 0..edits {
        let at = (random.next() as usize) % result.len();
        match if gaps { random.next() % 3 } else { 0 } {
            0 => result[at] = (result[at] + 1 + (random.next() % 3) as u8) % 4,
            1 => result.insert(at, (random.next() % 4) as u8),
            _ => {
                result.remove(at);
            }
        }
    }
    result
}

fn both(query: &[u8], subject: &[u8], x_drop: i32) -> (OneSide, OneSide) {
    let (matrix, gaps, scores) = megablast();
    let greedy = Greedy { scores, x_drop }.one_side::<true>(from_starts(query, subject));
    let gapped = Gapped {
        matrix: &matrix,
        gaps,
        x_drop,
    };
    (greedy, gapped.one_side::<true>(from_starts(query, subject)))
}

fn rescored(side: &OneSide, query: &[u8], subject: &[u8]) -> i32 {
    let (matrix, gaps, _) = megablast();
    let alignment = GappedAlignment {
        score: side.score,
        query_start: 0,
        subject_start: 0,
        query_length: side.query_length,
        subject_length: side.subject_length,
        ops: side.ops.clone(),
    };
    score_of(&alignment, &matrix, gaps, query, subject)
}

fn check_same(edits: usize, gaps: bool, seed: u64) {
    let mut random = Random(seed);
    for _ in 0..40 {
        let query = bases(&mut random, 300);
        let subject = mutated(&mut random, &query, edits, gaps);
        let (greedy, dynamic) = both(&query, &subject, 10_000);
        assert_eq!(greedy.score, dynamic.score, "edits {edits} gaps {gaps}");
        assert_eq!(rescored(&greedy, &query, &subject), greedy.score);
        let columns = |op| greedy.ops.iter().filter(|&&each| each != op).count();
        assert_eq!(columns(Op::SubjectOnly), greedy.query_length);
        assert_eq!(columns(Op::QueryOnly), greedy.subject_length);
    }
}

#[test]
fn no_gaps_scores_as_the_dynamic_programme() {
    check_same(0, false, 1);
    check_same(12, false, 2);
}

#[test]
fn one_gap_scores_as_the_dynamic_programme() {
    check_same(1, true, 3);
}

#[test]
fn many_gaps_score_as_the_dynamic_programme() {
    check_same(15, true, 4);
    check_same(40, true, 5);
}

#[test]
fn x_drop_stops_in_unrelated_sequence() {
    let mut random = Random(6);
    let shared = bases(&mut random, 200);
    let mut query = shared.clone();
    query.extend(bases(&mut random, 2_000));
    let mut subject = shared.clone();
    subject.extend(bases(&mut random, 2_000));
    let (greedy, dynamic) = both(&query, &subject, 60);
    assert_eq!(greedy.score, 400, "200 matches at 2 each");
    assert_eq!(greedy.query_length, 200);
    assert_eq!(greedy.subject_length, 200);
    assert_eq!(dynamic.score, greedy.score);
}

#[test]
fn ambiguity_codes_count_as_differences() {
    let (_, _, scores) = megablast();
    let n = crate::blast::alphabet::CODE_N;
    let query = [0, 1, n, 2, 3, 0, 1, 2, 3, 0];
    let greedy = Greedy {
        scores,
        x_drop: 100,
    };
    let side = greedy.one_side::<true>(from_starts(&query, &query));
    assert_eq!(side.score, 9 * 2 - 4, "the N pair scores as a mismatch");
    assert_eq!(side.ops, vec![Op::Pair; 10]);
}

#[test]
fn empty_and_score_only_runs() {
    let (_, _, scores) = megablast();
    let greedy = Greedy {
        scores,
        x_drop: 100,
    };
    let side = greedy.one_side::<true>(from_starts(&[], &[0; 5]));
    assert_eq!(
        (side.score, side.query_length, side.subject_length),
        (0, 0, 0)
    );
    assert!(side.ops.is_empty());
    let query = [0u8, 1, 2, 3];
    let quick = greedy.one_side::<false>(from_starts(&query, &query));
    assert_eq!((quick.score, quick.query_length), (8, 4));
    assert!(quick.ops.is_empty());
}

#[test]
fn affine_or_odd_costs_do_not_fit() {
    let matrix = ScoreMatrix::new(2, -3);
    assert!(LinearScores::of(&matrix, GapCosts { open: 5, extend: 2 }).is_none());
    assert!(LinearScores::of(&matrix, GapCosts { open: 0, extend: 3 }).is_none());
    assert!(LinearScores::of(&matrix, GapCosts { open: 0, extend: 4 }).is_some());
    let odd = ScoreMatrix::new(1, -2);
    assert!(LinearScores::of(&odd, GapCosts { open: 0, extend: 2 }).is_none());
}
