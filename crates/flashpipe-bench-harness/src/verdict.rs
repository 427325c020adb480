//! The one target verdict of every benchmark report: a measured figure (or ratio) held
//! against a required one, on the side a [`Bound`] says, reads [`Verdict::Met`],
//! [`Verdict::NotMet`] or, when it could not be measured, [`Verdict::NotMeasured`]. The
//! words a report prints ("met", "NOT MET", "n/a") are spelled here and nowhere else.

use std::fmt;

use serde::Serialize;

/// Which side of the required figure passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    /// The measured figure must be at least the required one (throughput, efficiency).
    AtLeast,
    /// The measured figure must be at most the required one (time, latency).
    AtMost,
}

impl Bound {
    /// True when `measured` is on the passing side of `required` (equal passes).
    pub fn passes(self, measured: f64, required: f64) -> bool {
        match self {
            Bound::AtLeast => measured >= required,
            Bound::AtMost => measured <= required,
        }
    }

    /// `>=` or `<=`, as a requirement prints.
    pub fn symbol(self) -> &'static str {
        match self {
            Bound::AtLeast => ">=",
            Bound::AtMost => "<=",
        }
    }

    /// `at-least` or `at-most`: the spelling of JSON reports that name bounds in kebab case.
    pub fn kebab_name(self) -> &'static str {
        match self {
            Bound::AtLeast => "at-least",
            Bound::AtMost => "at-most",
        }
    }
}

/// Serializes a [`Bound`] as `at-least` / `at-most` (`#[serde(serialize_with = ...)]`),
/// for the reports whose JSON has always spelled it so.
pub fn serialize_bound_kebab<S: serde::Serializer>(
    bound: &Bound,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(bound.kebab_name())
}

/// A target's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The measured figure is on the passing side of the required one.
    Met,
    /// It is not.
    NotMet,
    /// Nothing was measured (a side missing, a tool absent).
    NotMeasured,
}

impl Verdict {
    /// `Met` when `met`, `NotMet` otherwise.
    pub fn of(met: bool) -> Verdict {
        if met {
            Verdict::Met
        } else {
            Verdict::NotMet
        }
    }

    /// As [`Verdict::of`]; `NotMeasured` for `None`.
    pub fn of_optional(met: Option<bool>) -> Verdict {
        met.map_or(Verdict::NotMeasured, Verdict::of)
    }

    /// `measured` (when there is one) held against `required` on `bound`'s side.
    pub fn judge(measured: Option<f64>, bound: Bound, required: f64) -> Verdict {
        Verdict::of_optional(measured.map(|value| bound.passes(value, required)))
    }

    /// True, false, or `None` when not measured.
    pub fn met(self) -> Option<bool> {
        match self {
            Verdict::Met => Some(true),
            Verdict::NotMet => Some(false),
            Verdict::NotMeasured => None,
        }
    }

    /// "met", "NOT MET" or "n/a": the words every report prints.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Met => "met",
            Verdict::NotMet => "NOT MET",
            Verdict::NotMeasured => "n/a",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.label())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_pass_on_their_side_and_at_equality() {
        assert!(Bound::AtLeast.passes(2.0, 2.0));
        assert!(Bound::AtLeast.passes(2.1, 2.0));
        assert!(!Bound::AtLeast.passes(1.9, 2.0));
        assert!(Bound::AtMost.passes(2.0, 2.0));
        assert!(Bound::AtMost.passes(1.9, 2.0));
        assert!(!Bound::AtMost.passes(2.1, 2.0));
        assert_eq!(Bound::AtLeast.symbol(), ">=");
        assert_eq!(Bound::AtMost.kebab_name(), "at-most");
    }

    #[test]
    fn verdicts_read_the_same_words_everywhere() {
        assert_eq!(Verdict::judge(Some(0.5), Bound::AtMost, 0.6).label(), "met");
        assert_eq!(
            Verdict::judge(Some(0.7), Bound::AtMost, 0.6).label(),
            "NOT MET"
        );
        assert_eq!(Verdict::judge(None, Bound::AtLeast, 1.0).label(), "n/a");
        assert_eq!(Verdict::of(true).to_string(), "met");
        assert_eq!(Verdict::of_optional(Some(false)), Verdict::NotMet);
        assert_eq!(Verdict::NotMeasured.met(), None);
        assert_eq!(Verdict::Met.met(), Some(true));
    }

    #[test]
    fn a_bound_serializes_snake_or_kebab() {
        assert_eq!(
            serde_json::to_string(&Bound::AtLeast).unwrap(),
            "\"at_least\""
        );
        let mut kebab = serde_json::Serializer::new(Vec::new());
        serialize_bound_kebab(&Bound::AtLeast, &mut kebab).unwrap();
        assert_eq!(kebab.into_inner(), b"\"at-least\"");
    }
}
