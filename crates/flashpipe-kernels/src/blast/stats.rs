//! Karlin-Altschul statistics as BLAST computes them for nucleotide searches.
//!
//! Gapped searches take lambda, K, H, alpha and beta from NCBI's tables of precomputed values per
//! reward/penalty and gap costs (`blastn_values_1_2`, `blastn_values_2_3`, ... in
//! blast_stat.c, NCBI C++ Toolkit, public domain); the row with gap costs 0/0 is the one for
//! linear gaps (megablast's default). Tables for 2/-3 and 2/-5 "can only be applied to even
//! scores": odd scores are rounded down before the E-value, as BLAST does (the bit score uses
//! the score as it is, which is what blastn prints). The effective lengths follow
//! `BLAST_ComputeLengthAdjustment` (blast_stat.c): the length adjustment `ell` is the fixed
//! point of `ell = alpha / lambda * (ln K + ln((m - ell) * (n - N * ell))) + beta`, found by
//! the same bisection; then `E = K * (m - ell) * (n - N * ell) * exp(-lambda * S)` and the bit
//! score is `(lambda * S - ln K) / ln 2`.

/// One row of NCBI's table: gap costs and the values that go with them.
#[derive(Debug, Clone, Copy, PartialEq)]
struct TableRow {
    gap_open: i32,
    gap_extend: i32,
    lambda: f64,
    k: f64,
    h: f64,
    alpha: f64,
    beta: f64,
}

const fn row(values: [f64; 7]) -> TableRow {
    TableRow {
        gap_open: values[0] as i32,
        gap_extend: values[1] as i32,
        lambda: values[2],
        k: values[3],
        h: values[4],
        alpha: values[5],
        beta: values[6],
    }
}

/// One table: the reward, the penalty, whether scores are rounded down to even, its rows.
struct Table {
    reward: i32,
    penalty: i32,
    even_scores_only: bool,
    rows: &'static [TableRow],
}

/// NCBI's tables (blast_stat.c), first seven columns of each row: gap open, gap extend,
/// lambda, K, H, alpha, beta.
const TABLES: &[Table] = &[
    Table {
        reward: 1,
        penalty: -2,
        even_scores_only: false,
        rows: &[
            row([0.0, 0.0, 1.28, 0.46, 0.85, 1.5, -2.0]),
            row([2.0, 2.0, 1.33, 0.62, 1.1, 1.2, 0.0]),
            row([1.0, 2.0, 1.30, 0.52, 0.93, 1.4, -2.0]),
            row([0.0, 2.0, 1.19, 0.34, 0.66, 1.8, -3.0]),
            row([3.0, 1.0, 1.32, 0.57, 1.0, 1.3, -1.0]),
            row([2.0, 1.0, 1.29, 0.49, 0.92, 1.4, -1.0]),
            row([1.0, 1.0, 1.14, 0.26, 0.52, 2.2, -5.0]),
        ],
    },
    Table {
        reward: 2,
        penalty: -3,
        even_scores_only: true,
        rows: &[
            row([0.0, 0.0, 0.55, 0.21, 0.46, 1.2, -5.0]),
            row([4.0, 4.0, 0.63, 0.42, 0.84, 0.75, -2.0]),
            row([2.0, 4.0, 0.615, 0.37, 0.72, 0.85, -3.0]),
            row([0.0, 4.0, 0.55, 0.21, 0.46, 1.2, -5.0]),
            row([3.0, 3.0, 0.615, 0.37, 0.68, 0.9, -3.0]),
            row([6.0, 2.0, 0.63, 0.42, 0.84, 0.75, -2.0]),
            row([5.0, 2.0, 0.625, 0.41, 0.78, 0.8, -2.0]),
            row([4.0, 2.0, 0.61, 0.35, 0.68, 0.9, -3.0]),
            row([2.0, 2.0, 0.515, 0.14, 0.33, 1.55, -9.0]),
        ],
    },
    Table {
        reward: 1,
        penalty: -3,
        even_scores_only: false,
        rows: &[
            row([0.0, 0.0, 1.374, 0.711, 1.31, 1.05, 0.0]),
            row([2.0, 2.0, 1.37, 0.70, 1.2, 1.1, 0.0]),
            row([1.0, 2.0, 1.35, 0.64, 1.1, 1.2, -1.0]),
            row([0.0, 2.0, 1.25, 0.42, 0.83, 1.5, -2.0]),
            row([2.0, 1.0, 1.34, 0.60, 1.1, 1.2, -1.0]),
            row([1.0, 1.0, 1.21, 0.34, 0.71, 1.7, -2.0]),
        ],
    },
    Table {
        reward: 2,
        penalty: -5,
        even_scores_only: true,
        rows: &[
            row([0.0, 0.0, 0.675, 0.65, 1.1, 0.6, -1.0]),
            row([2.0, 4.0, 0.67, 0.59, 1.1, 0.6, -1.0]),
            row([0.0, 4.0, 0.62, 0.39, 0.78, 0.8, -2.0]),
            row([4.0, 2.0, 0.67, 0.61, 1.0, 0.65, -2.0]),
            row([2.0, 2.0, 0.56, 0.32, 0.59, 0.95, -4.0]),
        ],
    },
    Table {
        reward: 1,
        penalty: -1,
        even_scores_only: false,
        rows: &[
            row([3.0, 2.0, 1.09, 0.31, 0.55, 2.0, -2.0]),
            row([2.0, 2.0, 1.07, 0.27, 0.49, 2.2, -3.0]),
            row([1.0, 2.0, 1.02, 0.21, 0.36, 2.8, -6.0]),
            row([0.0, 2.0, 0.80, 0.064, 0.17, 4.8, -16.0]),
            row([4.0, 1.0, 1.08, 0.28, 0.54, 2.0, -2.0]),
            row([3.0, 1.0, 1.06, 0.25, 0.46, 2.3, -4.0]),
            row([2.0, 1.0, 0.99, 0.17, 0.30, 3.3, -10.0]),
        ],
    },
];

/// The statistical parameters of one scoring system.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KarlinParams {
    /// Lambda, per unit of raw score as the kernel computes it (scaled scores included).
    pub lambda: f64,
    /// K.
    pub k: f64,
    /// Relative entropy H.
    pub h: f64,
    /// Alpha (for the length adjustment).
    pub alpha: f64,
    /// Beta (for the length adjustment).
    pub beta: f64,
    /// Whether odd scores are rounded down before the E-value (2/-3, 2/-5).
    pub even_scores_only: bool,
    /// Scale of the raw scores (2 for linear gaps of half-integer cost, else 1): the score the
    /// E-value and the even rounding see is the raw score divided by it.
    pub score_scale: i32,
}

/// A scoring system without a table row.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no Karlin-Altschul values for reward {reward}, penalty {penalty}, gap costs {gap_open}/{gap_extend}; supported: {supported}")]
pub struct UnsupportedScoring {
    /// The reward asked for.
    pub reward: i32,
    /// The penalty asked for.
    pub penalty: i32,
    /// The gap open cost asked for.
    pub gap_open: i32,
    /// The gap extension cost asked for.
    pub gap_extend: i32,
    /// The combinations there are values for.
    pub supported: String,
}

/// Looks up the gapped parameters of reward/penalty and gap costs (`0/0`: linear gaps).
pub fn gapped_params(
    reward: i32,
    penalty: i32,
    gap_open: i32,
    gap_extend: i32,
    score_scale: i32,
) -> Result<KarlinParams, UnsupportedScoring> {
    let table = TABLES
        .iter()
        .find(|table| table.reward == reward && table.penalty == penalty);
    let found = table.and_then(|table| {
        table
            .rows
            .iter()
            .find(|row| row.gap_open == gap_open && row.gap_extend == gap_extend)
            .map(|row| (table, row))
    });
    let Some((table, row)) = found else {
        return Err(UnsupportedScoring {
            reward,
            penalty,
            gap_open,
            gap_extend,
            supported: supported_combinations(),
        });
    };
    Ok(KarlinParams {
        lambda: row.lambda / f64::from(score_scale),
        k: row.k,
        h: row.h,
        alpha: row.alpha,
        beta: row.beta,
        even_scores_only: table.even_scores_only,
        score_scale,
    })
}

/// Every supported reward/penalty with its gap costs, for error messages and docs.
pub fn supported_combinations() -> String {
    TABLES
        .iter()
        .map(|table| {
            let gaps: Vec<String> = table
                .rows
                .iter()
                .map(|row| format!("{}/{}", row.gap_open, row.gap_extend))
                .collect();
            format!(
                "reward {} penalty {} with gaps {}",
                table.reward,
                table.penalty,
                gaps.join(" ")
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The ungapped lambda of a reward/penalty with equal base frequencies: the positive root of
/// `1/4 exp(lambda * reward) + 3/4 exp(lambda * penalty) = 1` (BLAST's `Blast_KarlinLambdaNR`
/// over the same score distribution).
pub fn ungapped_lambda(reward: i32, penalty: i32) -> f64 {
    let (reward, penalty) = (f64::from(reward), f64::from(penalty));
    let value =
        |lambda: f64| 0.25 * (lambda * reward).exp() + 0.75 * (lambda * penalty).exp() - 1.0;
    let (mut low, mut high) = (1e-6, 10.0);
    for _ in 0..200 {
        let middle = (low + high) / 2.0;
        if value(middle) > 0.0 {
            high = middle;
        } else {
            low = middle;
        }
    }
    (low + high) / 2.0
}

impl KarlinParams {
    /// BLAST's length adjustment for a query of `query_length` letters against a database of
    /// `db_letters` letters in `db_sequences` sequences.
    pub fn length_adjustment(&self, query_length: u64, db_letters: u64, db_sequences: u64) -> u64 {
        let lambda = self.lambda * f64::from(self.score_scale);
        let alpha_over_lambda = self.alpha / lambda;
        let log_k = self.k.ln();
        let m = query_length as f64;
        let n = db_letters as f64;
        let count = db_sequences as f64;
        let a = count;
        let minus_b = m * count + n;
        let c = n * m - m.max(n) / self.k;
        if c < 0.0 {
            return 0;
        }
        let mut ell_max = 2.0 * c / (minus_b + (minus_b * minus_b - 4.0 * a * c).sqrt());
        let mut ell_min: f64 = 0.0;
        let mut ell_next: f64 = 0.0;
        let mut converged = false;
        for iteration in 1..=20 {
            let ell = ell_next;
            let space = (m - ell) * (n - count * ell);
            let ell_bar = alpha_over_lambda * (log_k + space.ln()) + self.beta;
            if ell_bar >= ell {
                ell_min = ell;
                if ell_bar - ell_min <= 1.0 {
                    converged = true;
                    break;
                }
                if ell_min == ell_max {
                    break;
                }
            } else {
                ell_max = ell;
            }
            ell_next = if ell_min <= ell_bar && ell_bar <= ell_max {
                ell_bar
            } else if iteration == 1 {
                ell_max
            } else {
                (ell_min + ell_max) / 2.0
            };
        }
        let mut adjustment = ell_min.max(0.0) as u64;
        if converged {
            let ceiling = ell_min.ceil();
            if ceiling <= ell_max {
                let space = (m - ceiling) * (n - count * ceiling);
                if alpha_over_lambda * (log_k + space.ln()) + self.beta >= ceiling {
                    adjustment = ceiling as u64;
                }
            }
        }
        adjustment
    }

    /// The effective search space of one query strand (BLAST's `eff_searchsp`).
    pub fn search_space(&self, query_length: u64, db_letters: u64, db_sequences: u64) -> f64 {
        let adjustment = self.length_adjustment(query_length, db_letters, db_sequences);
        let query = query_length.saturating_sub(adjustment).max(1) as f64;
        let database = db_letters
            .saturating_sub(db_sequences.saturating_mul(adjustment))
            .max(1) as f64;
        query * database
    }

    /// The score in table units (raw score divided by the scale, rounded down to even where
    /// the table asks).
    fn table_score(&self, raw_score: i32) -> f64 {
        let mut score = f64::from(raw_score) / f64::from(self.score_scale);
        if self.even_scores_only {
            let whole = score.floor() as i64;
            score = (whole - whole.rem_euclid(2)) as f64;
        }
        score
    }

    /// The E-value of a raw score in a search space.
    pub fn evalue(&self, raw_score: i32, search_space: f64) -> f64 {
        let lambda = self.lambda * f64::from(self.score_scale);
        search_space * self.k * (-lambda * self.table_score(raw_score)).exp()
    }

    /// The bit score of a raw score.
    pub fn bit_score(&self, raw_score: i32) -> f64 {
        (self.lambda * f64::from(raw_score) - self.k.ln()) / std::f64::consts::LN_2
    }

    /// The lowest raw score whose E-value is at most `evalue` in `search_space`.
    pub fn cutoff_score(&self, evalue: f64, search_space: f64) -> i32 {
        let lambda = self.lambda * f64::from(self.score_scale);
        let table = ((self.k * search_space / evalue).ln() / lambda).ceil();
        let raw = table * f64::from(self.score_scale);
        raw.clamp(1.0, f64::from(i32::MAX / 4)) as i32
    }

    /// A drop-off of `bits` bits in raw score units (BLAST's X-drop values are given in bits).
    pub fn bits_to_raw(&self, bits: f64) -> i32 {
        (bits * std::f64::consts::LN_2 / self.lambda).ceil() as i32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_rows_are_ncbis() {
        let megablast = gapped_params(1, -2, 0, 0, 2).expect("linear 1/-2");
        assert_eq!(megablast.lambda * 2.0, 1.28);
        assert_eq!(
            (megablast.k, megablast.alpha, megablast.beta),
            (0.46, 1.5, -2.0)
        );
        let blastn = gapped_params(2, -3, 5, 2, 1).expect("2/-3 5/2");
        assert_eq!((blastn.lambda, blastn.k, blastn.h), (0.625, 0.41, 0.78));
        assert!(blastn.even_scores_only);
        let error = gapped_params(2, -3, 7, 7, 1).expect_err("no such row");
        assert!(error.to_string().contains("5/2"), "{error}");
        let lambda = ungapped_lambda(1, -2);
        assert!((lambda - 1.33).abs() < 0.01, "{lambda}");
    }

    /// Hits blastn 2.12 reported (`-outfmt 6 -dust no`) for a 383-letter query of BioMarKs
    /// against 2,000 of its sequences (763,680 letters).
    #[test]
    fn evalues_and_bit_scores_match_blastn() {
        let (query, letters, sequences) = (383, 763_680, 2_000);
        let megablast = gapped_params(1, -2, 0, 0, 2).expect("row");
        let space = megablast.search_space(query, letters, sequences);
        // 55 identities, 1 mismatch: score 53, scaled by 2.
        let evalue = megablast.evalue(106, space);
        assert!((evalue / 4.19e-22 - 1.0).abs() < 0.01, "{evalue}");
        assert_eq!(format!("{:.1}", megablast.bit_score(106)), "99.0");
        // 382 identities and a one-letter gap: 382 - 2.5 = 379.5, 701 bits.
        assert_eq!(megablast.bit_score(759) as i64, 701);
        let blastn = gapped_params(2, -3, 5, 2, 1).expect("row");
        let space = blastn.search_space(query, letters, sequences);
        // 54 identities, 5 mismatches: 93, rounded down to 92 for the E-value.
        let evalue = blastn.evalue(93, space);
        assert!((evalue / 1.14e-17 - 1.0).abs() < 0.01, "{evalue}");
        assert_eq!(format!("{:.1}", blastn.bit_score(93)), "85.1");
        assert!(blastn.cutoff_score(evalue * 1.001, space) <= 93);
    }
}
