//! The rewritten gapped dynamic programme against the one it replaced (`gapped_reference.rs`)
//! on seeded random sequences: the same score, end and columns for related, unrelated and
//! empty sequences, under blastn's and other scoring systems and X-drops, with and without
//! the traceback.

use super::reference::extend_gapped_reference;
use super::*;
use crate::blast::extend::{align_through, score_of, score_through};

/// A seeded xorshift generator.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound as u64) as usize
    }

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
    let gaps = GapCosts { open, extend };
    let new = extend_gapped::<TRACE>(
        &matrix,
        gaps,
        x_drop,
        query.len(),
        subject.len(),
        |index| query[index],
        |index| subject[index],
    );
    let old = extend_gapped_reference::<TRACE>(
        &matrix,
        gaps,
        x_drop,
        query.len(),
        subject.len(),
        |index| query[index],
        |index| subject[index],
    );
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
    extend_gapped::<true>(&matrix, gaps, 10, 4, 4, |_| 0, |_| 0);
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
        let alignment = align_through(&matrix, gaps, 111, &query, &subject, point.0, point.1);
        assert_eq!(
            score_of(&alignment, &matrix, gaps, &query, &subject),
            alignment.score
        );
        let quick = score_through(&matrix, gaps, 111, &query, &subject, point.0, point.1);
        assert_eq!(quick, alignment.score);
    }
}
