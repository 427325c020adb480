//! Nucleotide letters as BLAST codes them ("blastna": A C G T, then the IUPAC ambiguity codes
//! R Y M K W S B D H V N), their complements, and the substitution matrix BLAST builds from a
//! reward and a penalty (`BlastScoreBlkNuclMatrixCreate` in NCBI's blast_stat.c): two bases score
//! the reward when equal and the penalty otherwise; a pair involving an ambiguity code that can
//! stand for the other letter scores `round(((d - 1) * penalty + reward) / d)` where `d` is the
//! number of bases the code stands for, and the penalty when it cannot.

/// Number of blastna codes (A C G T R Y M K W S B D H V N).
pub const CODE_COUNT: usize = 15;

/// Code of `N` (any base).
pub const CODE_N: u8 = 14;

/// Letters of the blastna codes, in code order.
pub const LETTERS: &[u8; CODE_COUNT] = b"ACGTRYMKWSBDHVN";

/// Bases each code stands for (bit 0 A, 1 C, 2 G, 3 T: NCBI's ncbi4na).
const BASE_MASKS: [u8; CODE_COUNT] = [1, 2, 4, 8, 5, 10, 3, 12, 9, 6, 14, 13, 11, 7, 15];

/// Not a nucleotide letter (in [`code_of_letter`]'s table).
pub const NOT_A_LETTER: u8 = 0xff;

/// Code of each byte (upper or lower case, `U` as `T`, `X` as `N`); [`NOT_A_LETTER`] otherwise.
pub static CODE_OF_BYTE: [u8; 256] = code_table();

const fn code_table() -> [u8; 256] {
    let mut table = [NOT_A_LETTER; 256];
    let mut code = 0;
    while code < CODE_COUNT {
        let letter = LETTERS[code];
        table[letter as usize] = code as u8;
        table[letter.to_ascii_lowercase() as usize] = code as u8;
        code += 1;
    }
    table[b'U' as usize] = 3;
    table[b'u' as usize] = 3;
    table[b'X' as usize] = CODE_N;
    table[b'x' as usize] = CODE_N;
    table
}

/// The code of one byte, if it is a nucleotide letter.
pub fn code_of_letter(byte: u8) -> Option<u8> {
    let code = CODE_OF_BYTE[byte as usize];
    (code != NOT_A_LETTER).then_some(code)
}

/// Whether a code is one of the four bases (seeds are made of these only).
pub fn is_base(code: u8) -> bool {
    code < 4
}

/// The complement of a code (A<->T, C<->G, R<->Y, M<->K, B<->V, D<->H; W, S, N stay).
pub fn complement(code: u8) -> u8 {
    const COMPLEMENTS: [u8; CODE_COUNT] = [3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 13, 12, 11, 10, 14];
    COMPLEMENTS[code as usize]
}

/// The reverse complement of a coded sequence.
pub fn reverse_complement(codes: &[u8]) -> Vec<u8> {
    codes.iter().rev().map(|&code| complement(code)).collect()
}

/// A substitution matrix over blastna codes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScoreMatrix {
    scores: [[i32; CODE_COUNT]; CODE_COUNT],
}

impl ScoreMatrix {
    /// The matrix BLAST builds for `reward` (> 0) and `penalty` (< 0).
    pub fn new(reward: i32, penalty: i32) -> Self {
        assert!(
            reward > 0 && penalty < 0,
            "reward positive, penalty negative"
        );
        let degeneracy = |code: usize| BASE_MASKS[code].count_ones() as i32;
        let mut scores = [[0; CODE_COUNT]; CODE_COUNT];
        for first in 0..CODE_COUNT {
            for second in first..CODE_COUNT {
                let score = if BASE_MASKS[first] & BASE_MASKS[second] != 0 {
                    let count = degeneracy(second);
                    nearest_integer(f64::from((count - 1) * penalty + reward) / f64::from(count))
                } else {
                    penalty
                };
                scores[first][second] = score;
                scores[second][first] = score;
            }
        }
        Self { scores }
    }

    /// The score of aligning two codes.
    #[inline]
    pub fn score(&self, first: u8, second: u8) -> i32 {
        self.scores[first as usize][second as usize]
    }

    /// The scores of one code against every code.
    #[inline]
    pub fn row(&self, code: u8) -> &[i32; CODE_COUNT] {
        &self.scores[code as usize]
    }

    /// The same matrix with every score multiplied by `factor` (linear gaps of half-integer cost).
    pub fn scaled(&self, factor: i32) -> Self {
        let mut scores = self.scores;
        for row in &mut scores {
            for score in row.iter_mut() {
                *score *= factor;
            }
        }
        Self { scores }
    }
}

/// BLAST's `BLAST_Nint`: rounds half away from zero.
fn nearest_integer(value: f64) -> i32 {
    if value >= 0.0 {
        (value + 0.5) as i32
    } else {
        (value - 0.5) as i32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn letters_complements_and_ambiguity_scores_follow_blast() {
        assert_eq!(code_of_letter(b'a'), Some(0));
        assert_eq!(code_of_letter(b'U'), Some(3));
        assert_eq!(code_of_letter(b'n'), Some(CODE_N));
        assert_eq!(code_of_letter(b'*'), None);
        for code in 0..CODE_COUNT as u8 {
            assert_eq!(complement(complement(code)), code);
            let mask = BASE_MASKS[code as usize];
            let complemented = BASE_MASKS[complement(code) as usize];
            let swapped = (mask & 1) << 3 | (mask & 2) << 1 | (mask & 4) >> 1 | (mask & 8) >> 3;
            assert_eq!(
                complemented, swapped,
                "complement of {}",
                LETTERS[code as usize]
            );
        }
        let blastn = ScoreMatrix::new(2, -3);
        assert_eq!(blastn.score(0, 0), 2);
        assert_eq!(blastn.score(0, 1), -3);
        assert_eq!(blastn.score(0, CODE_N), -2, "(3 * -3 + 2) / 4 = -1.75");
        assert_eq!(blastn.score(CODE_N, CODE_N), -2);
        assert_eq!(blastn.score(0, 4), -1, "A against R: (-3 + 2) / 2 = -0.5");
        assert_eq!(blastn.score(1, 4), -3, "C cannot be R");
        let megablast = ScoreMatrix::new(1, -2);
        assert_eq!(megablast.score(2, CODE_N), -1, "(3 * -2 + 1) / 4 = -1.25");
        assert_eq!(megablast.scaled(2).score(0, 0), 2);
        assert_eq!(
            reverse_complement(&[0, 0, 1, 2, CODE_N]),
            vec![CODE_N, 1, 2, 3, 3]
        );
    }
}
