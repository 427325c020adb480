//! BLAST's tabular output (`-outfmt 6`): twelve tab-separated columns, qseqid sseqid pident
//! length mismatch gapopen qstart qend sstart send evalue bitscore, numbers written as blastn
//! 2.12 writes them (`CAlignFormatUtil::GetScoreString`): percent identity with three decimals,
//! E-values below 1e-180 as `0.0`, others with three significant digits (`1.14e-17`, `0.012`),
//! bit scores above 99.9 as whole numbers (truncated), smaller ones with one decimal.

use std::fmt::Write;

/// One line's values, coordinates 1-based as printed (minus strand: `sstart > send`).
#[derive(Debug, Clone, PartialEq)]
pub struct TabularLine<'a> {
    /// Query identifier.
    pub query: &'a str,
    /// Subject identifier.
    pub subject: &'a str,
    /// Identical columns.
    pub identities: u32,
    /// Columns.
    pub length: u32,
    /// Mismatched pairs.
    pub mismatches: u32,
    /// Gap openings.
    pub gap_opens: u32,
    /// First query letter.
    pub query_start: u64,
    /// Last query letter.
    pub query_end: u64,
    /// Subject letter aligned with `query_start`.
    pub subject_start: u64,
    /// Subject letter aligned with `query_end`.
    pub subject_end: u64,
    /// Expect value.
    pub evalue: f64,
    /// Bit score.
    pub bit_score: f64,
}

/// Appends one line (with its newline) to `out`.
pub fn write_line(out: &mut String, line: &TabularLine<'_>) {
    let identity = 100.0 * f64::from(line.identities) / f64::from(line.length.max(1));
    let _ = writeln!(
        out,
        "{}\t{}\t{:.3}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
        line.query,
        line.subject,
        identity,
        line.length,
        line.mismatches,
        line.gap_opens,
        line.query_start,
        line.query_end,
        line.subject_start,
        line.subject_end,
        format_evalue(line.evalue),
        format_bit_score(line.bit_score)
    );
}

/// An E-value as blastn prints it in tabular output.
pub fn format_evalue(evalue: f64) -> String {
    if evalue < 1.0e-180 {
        "0.0".to_string()
    } else if evalue < 0.0009 {
        c_exponent(evalue, 2)
    } else if evalue < 0.1 {
        format!("{evalue:.3}")
    } else if evalue < 1.0 {
        format!("{evalue:.2}")
    } else if evalue < 10.0 {
        format!("{evalue:.1}")
    } else {
        format!("{evalue:.0}")
    }
}

/// A bit score as blastn prints it in tabular output.
pub fn format_bit_score(bit_score: f64) -> String {
    if bit_score > 9999.0 {
        c_exponent(bit_score, 3)
    } else if bit_score > 99.9 {
        format!("{}", bit_score as i64)
    } else {
        format!("{bit_score:.1}")
    }
}

/// C's `%.{digits}e`: at least two exponent digits with a sign (`1.14e-17`, `4.20e-05`).
fn c_exponent(value: f64, digits: usize) -> String {
    let text = format!("{value:.digits$e}");
    let (mantissa, exponent) = text.split_once('e').expect("exponent form");
    let (sign, magnitude) = match exponent.strip_prefix('-') {
        Some(magnitude) => ('-', magnitude),
        None => ('+', exponent),
    };
    format!("{mantissa}e{sign}{magnitude:0>2}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_printed_as_blastn_prints_them() {
        assert_eq!(format_evalue(1.14e-17), "1.14e-17");
        assert_eq!(format_evalue(4.2e-5), "4.20e-05");
        assert_eq!(format_evalue(1.21e-176), "1.21e-176");
        assert_eq!(format_evalue(1e-181), "0.0");
        assert_eq!(format_evalue(0.0123), "0.012");
        assert_eq!(format_evalue(0.5), "0.50");
        assert_eq!(format_evalue(2.26), "2.3");
        assert_eq!(format_evalue(12.0), "12");
        assert_eq!(format_bit_score(683.9), "683");
        assert_eq!(format_bit_score(85.14), "85.1");
        assert_eq!(format_bit_score(12345.0), "1.234e+04");
        let mut out = String::new();
        write_line(
            &mut out,
            &TabularLine {
                query: "q",
                subject: "s",
                identities: 54,
                length: 59,
                mismatches: 5,
                gap_opens: 0,
                query_start: 1,
                query_end: 59,
                subject_start: 59,
                subject_end: 1,
                evalue: 1.14e-17,
                bit_score: 85.14,
            },
        );
        assert_eq!(
            out,
            "q\ts\t91.525\t59\t5\t0\t1\t59\t59\t1\t1.14e-17\t85.1\n"
        );
    }
}
