//! The one wording of an option value refused for lying outside its range,
//! `--NAME VALUE: must be within RANGE`, the range written from its bounds (`1..=64`,
//! `0..0.95`, `(0, 1]`), so every command says it alike.

use std::fmt::Display;
use std::ops::{Bound, RangeBounds};

/// An option's value outside the range the option takes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{option} {value}: must be within {range}")]
pub struct OutOfRange {
    /// The option, as typed (`--queue-depth`).
    pub option: String,
    /// The value refused.
    pub value: String,
    /// The range it must lie in, as the user reads it.
    pub range: String,
}

impl From<OutOfRange> for String {
    fn from(error: OutOfRange) -> String {
        error.to_string()
    }
}

/// `Ok` when `range` holds `value`; else the refusal naming `option`. A value that does
/// not compare (NaN) lies in no range.
pub fn check_within<T: PartialOrd + Display>(
    option: &str,
    value: T,
    range: impl RangeBounds<T>,
) -> Result<(), OutOfRange> {
    if range.contains(&value) {
        return Ok(());
    }
    Err(OutOfRange {
        option: option.to_string(),
        value: value.to_string(),
        range: range_text(&range),
    })
}

/// `a..=b`, `a..b`, `(a, b]`, `(a, b)`, `a..`, `..=b` as the bounds say.
fn range_text<T: Display>(range: &impl RangeBounds<T>) -> String {
    match (range.start_bound(), range.end_bound()) {
        (Bound::Included(low), Bound::Included(high)) => format!("{low}..={high}"),
        (Bound::Included(low), Bound::Excluded(high)) => format!("{low}..{high}"),
        (Bound::Excluded(low), Bound::Included(high)) => format!("({low}, {high}]"),
        (Bound::Excluded(low), Bound::Excluded(high)) => format!("({low}, {high})"),
        (Bound::Included(low), Bound::Unbounded) => format!("{low}.."),
        (Bound::Excluded(low), Bound::Unbounded) => format!("above {low}"),
        (Bound::Unbounded, Bound::Included(high)) => format!("..={high}"),
        (Bound::Unbounded, Bound::Excluded(high)) => format!("..{high}"),
        (Bound::Unbounded, Bound::Unbounded) => "any value".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_inside_passes_and_one_outside_names_option_value_and_range() {
        assert_eq!(check_within("--qd", 8, 1..=64), Ok(()));
        let cases: [(Result<(), OutOfRange>, &str); 5] = [
            (
                check_within("--qd", 65, 1..=64),
                "--qd 65: must be within 1..=64",
            ),
            (
                check_within("--over-provisioning", 0.95, 0.0..0.95),
                "--over-provisioning 0.95: must be within 0..0.95",
            ),
            (
                check_within("--fill", 0.0, (Bound::Excluded(0.0), Bound::Included(1.0))),
                "--fill 0: must be within (0, 1]",
            ),
            (
                check_within(
                    "--fill",
                    f64::NAN,
                    (Bound::Excluded(0.0), Bound::Included(1.0)),
                ),
                "--fill NaN: must be within (0, 1]",
            ),
            (
                check_within("--count", 0u64, 1..),
                "--count 0: must be within 1..",
            ),
        ];
        for (result, expected) in cases {
            assert_eq!(
                result.map_err(String::from),
                Err(expected.to_string()),
                "{expected}"
            );
        }
    }
}
