//! The rewritten gapped dynamic programme against the one it replaced (`gapped_reference.rs`)
//! on seeded random sequences: the same score, end and columns for related, unrelated and
//! empty sequences, under blastn's and other scoring systems and X-drops, with and without
//! the traceback.

use super::reference::Reference;
use super::*;
use crate::blast::alphabet::ScoreMatrix;
use crate::blast::extend::{from_starts, score_of, Anchor, Extend, Gapped};
use crate::blast::test_random::Random;

impl Random {
    /// Bases, with an ambiguity code now and then.
    fn letters(&mut self, count: usize) -> Vec<u8> {
        (0..count)
            .map(|_| match self.below(50) {
                0 => 4 + self.below(11) as u8,
                _ => self.below(4) as u8,
            })
            .collect()
    }

    /// `source` with `edits` random substitutions, insertions and deletions.
    fn mutate(&mut self, source: &[u8], edits: usize) -> Vec<u8> {
        let mut result = source.to_vec();
        for _ in 0..edits {
            if result.is_empty() {
                break;
            }
            let at = self.below(result.len());
            match self.below(3) {
                0 => result[at] = (result[at] + 1 + self.below(3) as u8) % 4,
                1 => result.insert(at, self.below(4) as u8),
                _ => {
                    result.remove(at);
                }
            }
        }
        result
    }
}

/// (reward, penalty, gap open, gap extend, X-drop): blastn's defaults with its two X-drops
/// first, then other systems.
const SYSTEMS: [(i32, i32, i32, i32, i32); 6] = [
    (2, -3, 5, 2, 111),
    (2, -3, 5, 2, 33),
    (1, -2, 5, 2, 60),
    (1, -1, 2, 1, 20),
    (4, -5, 12, 8, 200),
    (1, -3, 0, 2, 0),
];

fn both<const TRACE: bool>(
    system: (i32, i32, i32, i32, i32),
    query: &[u8],
    subject: &[u8],
) -> (OneSide, OneSide) {
    let (reward, penalty, open, extend, x_drop) = system;
    let matrix = ScoreMatrix::new(reward, penalty);
    let gapped = Gapped {
        matrix: &matrix,
        gaps: GapCosts { open, extend },
        x_drop,
    };
    let new = gapped.one_side::<TRACE>(from_starts(query, subject));
    let old = Reference(gapped).one_side::<TRACE>(from_starts(query, subject));
    (new, old)
}

fn check(system: (i32, i32, i32, i32, i32), query: &[u8], subject: &[u8], case: &str) {
    let (new, old) = both::<true>(system, query, subject);
    assert_eq!(new, old, "{case}, system {system:?}");
    let (new, old) = both::<false>(system, query, subject);
    assert_eq!(new, old, "{case}, score only, system {system:?}");
}

#[test]
fn rewritten_programme_matches_the_old_one_on_related_sequences() {
    let mut random = Random(0x5eed_0018);
    for round in 0..300 {
        let length = 1 + random.below(400);
        let query = random.letters(length);
        let edits = random.below(length / 4 + 2);
        let mut subject = random.mutate(&query, edits);
        if round % 3 == 0 {
            let tail_length = random.below(200);
            let tail = random.letters(tail_length);
            subject.extend_from_slice(&tail);
        }
        for system in SYSTEMS {
            check(system, &query, &subject, &format!("round {round}"));
        }
    }
}

#[test]
fn rewritten_programme_matches_the_old_one_on_unrelated_and_edge_sequences() {
    let mut random = Random(0xdead_beef);
    let mut cases: Vec<(Vec<u8>, Vec<u8>)> = vec![
        (Vec::new(), Vec::new()),
        (Vec::new(), random.letters(30)),
        (random.letters(30), Vec::new()),
        (vec![0; 200], vec![0; 200]),
        (vec![0; 200], vec![1; 200]),
        (vec![14; 50], vec![14; 50]),
    ];
    for _ in 0..200 {
        let (query_length, subject_length) = (random.below(300), random.below(300));
        cases.push((random.letters(query_length), random.letters(subject_length)));
    }
    // an X-drop no cell falls under: every row spans the whole subject
    let unbounded = (2, -3, 5, 2, 1_000_000);
    for (index, (query, subject)) in cases.iter().enumerate() {
        for system in SYSTEMS {
            check(system, query, subject, &format!("case {index}"));
        }
        check(
            unbounded,
            query,
            subject,
            &format!("case {index}, no X-drop"),
        );
    }
}

#[test]
#[should_panic(expected = "gap costs must not be negative")]
fn negative_gap_costs_are_refused() {
    let matrix = ScoreMatrix::new(2, -3);
    let gaps = GapCosts {
        open: -1,
        extend: 2,
    };
    let gapped = Gapped {
        matrix: &matrix,
        gaps,
        x_drop: 10,
    };
    gapped.one_side::<true>(from_starts(&[0; 4], &[0; 4]));
}

#[test]
fn long_gaps_past_the_window_match_the_old_programme() {
    // a block inserted in the subject: the query's gap runs past the row above's window
    let mut random = Random(0x1234_5678);
    for round in 0..100 {
        let query_length = 100 + random.below(300);
        let query = random.letters(query_length);
        let at = random.below(query.len());
        let insert_length = 1 + random.below(60);
        let insert = random.letters(insert_length);
        let mut subject = query[..at].to_vec();
        subject.extend_from_slice(&insert);
        subject.extend_from_slice(&query[at..]);
        for system in SYSTEMS {
            check(system, &query, &subject, &format!("insert round {round}"));
            check(system, &subject, &query, &format!("delete round {round}"));
        }
    }
}

#[test]
fn traceback_rescores_to_the_reported_score() {
    let mut random = Random(42);
    let matrix = ScoreMatrix::new(2, -3);
    let gaps = GapCosts { open: 5, extend: 2 };
    for _ in 0..100 {
        let query_length = 50 + random.below(500);
        let query = random.letters(query_length);
        let edits = random.below(40);
        let subject = random.mutate(&query, edits);
        let point = (random.below(query.len()), random.below(subject.len()));
        let anchor = Anchor {
            query: &query,
            subject: &subject,
            query_point: point.0,
            subject_point: point.1,
        };
        let gapped = Gapped {
            matrix: &matrix,
            gaps,
            x_drop: 111,
        };
        let alignment = gapped.align_through(anchor);
        assert_eq!(
            score_of(&alignment, &matrix, gaps, &query, &subject),
            alignment.score
        );
        let quick = gapped.score_through(anchor);
        assert_eq!(quick, alignment.score);
    }
}
