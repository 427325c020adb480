//! flashpipe-units: the project's one size grammar, parsing `64KiB`, `2GiB`, `1.5GB`,
//! `4096` ([`parse_size_bytes`]) and printing sizes back ([`HumanBytes`]).
//!
//! Every size anywhere in flashpipe goes through it: store files and `--devices` lists
//! (`flashpipe-store`, which re-exports this crate as `flashpipe_store::units`), every
//! size flag of the CLI and the benchmarks, and the integer options of the kernels
//! (`flashpipe-kernels`' `KernelOptions::integer`), so `64K` means one thing everywhere.
//!
//! Rule: a leaf. It depends on no flashpipe crate and does no I/O, so the kernels, which
//! depend on no other flashpipe crate, may use it without giving up being pure compute.
//! It is a crate of its own rather than a module of `flashpipe-device` because the kernels
//! must not see the device layer, and rather than a grammar passed into the kernels as a
//! function because a size in a kernel option would then mean whatever the caller chose.

use std::fmt;

/// A size that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid size {text:?}: {reason} (examples: 4096, 64KiB, 2GiB, 1.5GB)")]
pub struct SizeParseError {
    /// The text given.
    pub text: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

const UNITS: [(&str, f64); 17] = [
    ("", 1.0),
    ("B", 1.0),
    ("K", 1024.0),
    ("KIB", 1024.0),
    ("KB", 1e3),
    ("M", 1048576.0),
    ("MIB", 1048576.0),
    ("MB", 1e6),
    ("G", 1073741824.0),
    ("GIB", 1073741824.0),
    ("GB", 1e9),
    ("T", 1099511627776.0),
    ("TIB", 1099511627776.0),
    ("TB", 1e12),
    ("P", 1125899906842624.0),
    ("PIB", 1125899906842624.0),
    ("PB", 1e15),
];

/// Parses a size in bytes: a number (integer or decimal) and an optional unit
/// (`B`, `K`/`KiB`, `KB`, `M`/`MiB`, `MB`, `G`/`GiB`, `GB`, `T`/`TiB`, `TB`), case-insensitive.
/// The result must be a whole number of bytes.
pub fn parse_size_bytes(text: &str) -> Result<u64, SizeParseError> {
    let error = |reason| SizeParseError {
        text: text.to_string(),
        reason,
    };
    let trimmed = text.trim();
    let split = trimmed
        .find(|character: char| !(character.is_ascii_digit() || character == '.'))
        .unwrap_or(trimmed.len());
    let (number_text, unit_text) = trimmed.split_at(split);
    if number_text.is_empty() {
        return Err(error("no number"));
    }
    let number: f64 = number_text.parse().map_err(|_| error("not a number"))?;
    let unit = unit_text.trim().to_ascii_uppercase();
    let multiplier = UNITS
        .iter()
        .find(|(name, _)| *name == unit)
        .map(|(_, multiplier)| *multiplier)
        .ok_or_else(|| error("unknown unit"))?;
    if !number_text.contains('.') {
        return exact_size_bytes(number_text, multiplier).ok_or_else(|| error("too large"));
    }
    let bytes = number * multiplier;
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(error("too large"));
    }
    if bytes.fract() != 0.0 {
        return Err(error("not a whole number of bytes"));
    }
    Ok(bytes as u64)
}

/// [`parse_size_bytes`] into another integer type (a `usize` length, a `u32` block size),
/// refusing a size that does not fit it ("too large"). Usable as a clap `value_parser`:
/// `value_parser = flashpipe_units::parse_size_as::<usize>`.
pub fn parse_size_as<T: TryFrom<u64>>(text: &str) -> Result<T, SizeParseError> {
    let size_bytes = parse_size_bytes(text)?;
    T::try_from(size_bytes).map_err(|_| SizeParseError {
        text: text.to_string(),
        reason: "too large",
    })
}

/// An integer count of units, exactly (decimals go through `f64`, integers must not lose
/// digits above 2^53): `None` when it does not fit in 64 bits.
fn exact_size_bytes(digits: &str, multiplier: f64) -> Option<u64> {
    let count: u64 = digits.parse().ok()?;
    assert!(
        multiplier.fract() == 0.0 && multiplier >= 1.0,
        "units are whole numbers of bytes"
    );
    count.checked_mul(multiplier as u64)
}

/// A byte count printed with a binary unit: `16 KiB`, `1.50 GiB`, `512 B`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HumanBytes(pub u64);

impl fmt::Display for HumanBytes {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
        let mut value = self.0 as f64;
        let mut unit = 0;
        while value >= 1024.0 && unit + 1 < NAMES.len() {
            value /= 1024.0;
            unit += 1;
        }
        if value.fract() == 0.0 {
            write!(formatter, "{} {}", value as u64, NAMES[unit])
        } else {
            write!(formatter, "{value:.2} {}", NAMES[unit])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expected: Result<u64, &str>) {
        let actual = parse_size_bytes(text).map_err(|error| error.reason);
        assert_eq!(actual, expected, "parsing {text:?}");
    }

    #[test]
    fn sizes_parse() {
        check("4096", Ok(4096));
        check("64KiB", Ok(65536));
        check("64k", Ok(65536));
        check("2GiB", Ok(2 << 30));
        check(" 1.5 GB ", Ok(1_500_000_000));
        check("1.5KiB", Ok(1536));
        check("16 MiB", Ok(16 << 20));
        check("", Err("no number"));
        check("GiB", Err("no number"));
        check("1.2.3", Err("not a number"));
        check("12 parsecs", Err("unknown unit"));
        check("0.3", Err("not a whole number of bytes"));
        check("99999999PiB", Err("too large"));
    }

    #[test]
    fn sizes_convert_to_narrower_integers_or_are_refused() {
        assert_eq!(parse_size_as::<usize>("64KiB"), Ok(65536));
        assert_eq!(
            parse_size_as::<u32>("4GiB").unwrap_err().reason,
            "too large"
        );
        assert_eq!(parse_size_as::<u32>("4KiB"), Ok(4096));
    }

    #[test]
    fn sizes_print() {
        assert_eq!(HumanBytes(512).to_string(), "512 B");
        assert_eq!(HumanBytes(16384).to_string(), "16 KiB");
        assert_eq!(HumanBytes(3 << 29).to_string(), "1.50 GiB");
    }
}
