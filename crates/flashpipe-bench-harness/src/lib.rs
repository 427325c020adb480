//! flashpipe-bench-harness: what every benchmark measures and reports with, defined once.
//!
//! - [`table`]: the one text-table formatter every report prints with;
//! - [`option_range`]: the one wording of an option value refused for lying outside its
//!   range;
//! - [`output`]: how a report reaches standard output, pretty JSON under `--json` or its
//!   text;
//! - [`progress`]: the phase spinner on standard error every long experiment shows;
//! - [`plot`]: the PNG charts the experiments and reproductions draw (with the embedded
//!   DejaVu Sans font in `assets/`); [`kind`]: the failure kinds its errors (and the
//!   experiments' errors) carry;
//! - [`pattern`]: the one workload-pattern type every benchmark names its workloads with;
//! - [`verdict`]: the one target type ([`verdict::Bound`], [`verdict::Verdict`]): a
//!   measured figure against a required one reads "met" or "NOT MET", spelled here alone;
//! - [`fio`]: the one fio driver (it finds fio, never installs it: a missing fio is an
//!   error naming `scripts/install-test-packages`) and the one parser of fio's JSON
//!   report (a missing field is an error, never a silent 0; which latency the p99 comes
//!   from is the caller's explicit choice).
//!
//! Layer rule: it depends on no flashpipe crate but the leaf `flashpipe-base` (the
//! seeded generator of [`pattern`]'s data), so the experiments in
//! `flashpipe-bench` (and only they, with the CLI through them) stand on it and no model
//! or engine crate pulls measurement code in.

pub mod column_table;
pub mod fio;
pub mod kind;
pub mod option_range;
pub mod output;
pub mod pattern;
pub mod plot;
pub mod progress;
pub mod table;
pub mod verdict;
