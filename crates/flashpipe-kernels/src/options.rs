//! Kernel options: `key=value` strings checked against each kernel's declared [`OptionSpec`]s.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::error::OptionsError;

/// Longest value of one option (a pattern, a path, a key in hex): 4 KiB.
pub const MAX_OPTION_VALUE_BYTES: usize = 4096;
/// Largest record of the record kernels (`record` of sort and index): 1 MiB.
pub const MAX_RECORD_BYTES: u64 = 1 << 20;
/// Most records per index block (`block_records` of index).
pub const MAX_BLOCK_RECORDS: u64 = 1 << 20;
/// Largest index block (`record` x `block_records`), which the index kernel allocates: 1 GiB.
pub const MAX_INDEX_BLOCK_BYTES: u64 = 1 << 30;
/// Largest run buffer of the external sort (`memory`): 64 GiB.
pub const MAX_SORT_MEMORY_BYTES: u64 = 1 << 36;
/// Longest grep pattern (`pattern`), like any option value: 4 KiB.
pub const MAX_PATTERN_BYTES: usize = MAX_OPTION_VALUE_BYTES;
/// Largest compiled regular expression of grep: 16 MiB (the `regex` crate's size limit).
pub const MAX_COMPILED_PATTERN_BYTES: usize = 1 << 24;
/// Highest `max_line_bytes` of grep: 1 GiB.
pub const MAX_LINE_BYTES_LIMIT: u64 = 1 << 30;
/// Highest `max_matches` of grep.
pub const MAX_MATCHES_LIMIT: u64 = 1 << 24;
/// Most dimensions of a kNN vector (`dimensions`).
pub const MAX_DIMENSIONS: u64 = 65536;
/// Most neighbours per kNN query (`k`).
pub const MAX_NEIGHBOURS: u64 = 1024;
/// Largest kNN query file (`queries`), read whole: 64 MiB.
pub const MAX_QUERY_FILE_BYTES: u64 = 1 << 26;
/// Most kept neighbours over all kNN queries (queries x `k`), which size its result lists.
pub const MAX_QUERY_NEIGHBOURS: u64 = 1 << 22;

/// One option a kernel takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct OptionSpec {
    /// The key.
    pub key: &'static str,
    /// The default value; `None` makes the option required.
    pub default: Option<&'static str>,
    /// What the value is, for listings and errors.
    pub help: &'static str,
}

impl OptionSpec {
    /// An option the caller must give.
    pub const fn required(key: &'static str, help: &'static str) -> Self {
        Self {
            key,
            default: None,
            help,
        }
    }

    /// An option that takes `default` when not given.
    pub const fn optional(key: &'static str, default: &'static str, help: &'static str) -> Self {
        Self {
            key,
            default: Some(default),
            help,
        }
    }
}

/// Parsed options of one kernel, with defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelOptions {
    kernel: String,
    values: BTreeMap<&'static str, String>,
    store_files: crate::store_files::StoreFiles,
}

impl KernelOptions {
    /// Parses `key=value` arguments for `kernel` against `specs`: unknown, repeated and missing
    /// keys are errors; absent optional keys take their defaults.
    pub fn parse(
        kernel: &str,
        specs: &[OptionSpec],
        arguments: &[String],
    ) -> Result<Self, OptionsError> {
        let mut values = BTreeMap::new();
        for argument in arguments {
            let (key, value) =
                argument
                    .split_once('=')
                    .ok_or_else(|| OptionsError::NotKeyValue {
                        argument: argument.clone(),
                    })?;
            if value.len() > MAX_OPTION_VALUE_BYTES {
                return Err(bad_value(
                    key,
                    &value.chars().take(64).collect::<String>(),
                    &format!(
                        "{} bytes: above the limit of {MAX_OPTION_VALUE_BYTES} bytes per value",
                        value.len()
                    ),
                ));
            }
            let spec = specs.iter().find(|spec| spec.key == key).ok_or_else(|| {
                OptionsError::UnknownOption {
                    kernel: kernel.to_string(),
                    key: key.to_string(),
                    known: known_keys(specs),
                }
            })?;
            if values.insert(spec.key, value.to_string()).is_some() {
                return Err(OptionsError::Duplicate {
                    key: key.to_string(),
                });
            }
        }
        for spec in specs {
            if values.contains_key(spec.key) {
                continue;
            }
            match spec.default {
                Some(default) => {
                    values.insert(spec.key, default.to_string());
                }
                None => {
                    return Err(OptionsError::Missing {
                        kernel: kernel.to_string(),
                        key: spec.key.to_string(),
                        help: spec.help.to_string(),
                    })
                }
            }
        }
        Ok(Self {
            kernel: kernel.to_string(),
            values,
            store_files: crate::store_files::StoreFiles::new(),
        })
    }

    /// These options with the contents of the store files they name.
    pub fn with_store_files(mut self, store_files: crate::store_files::StoreFiles) -> Self {
        self.store_files = store_files;
        self
    }

    /// The contents of the store file option `key` names, when the run layer read it
    /// (`flashpipe run` and the server do; an in-memory run has no store).
    pub fn store_file(&self, key: &str) -> Option<&[u8]> {
        self.store_files.get(key)
    }

    /// The kernel these options belong to.
    pub fn kernel(&self) -> &str {
        &self.kernel
    }

    /// The raw value of a declared key (every declared key has a value after parsing).
    pub fn text(&self, key: &str) -> Result<&str, OptionsError> {
        self.values
            .get(key)
            .map(String::as_str)
            .ok_or_else(|| OptionsError::Missing {
                kernel: self.kernel.clone(),
                key: key.to_string(),
                help: "undeclared option (kernel bug)".to_string(),
            })
    }

    /// A non-negative integer within `minimum..=maximum`, read with the project's one size
    /// grammar ([`flashpipe_units::parse_size_bytes`]): `4096`, `64K`, `64KiB`, `1.5MiB`,
    /// `1MB` (decimal units are powers of ten, `K`/`KiB` powers of two).
    pub fn integer(&self, key: &str, minimum: u64, maximum: u64) -> Result<u64, OptionsError> {
        let value = self.text(key)?;
        let parsed = flashpipe_units::parse_size_bytes(value).map_err(|error| {
            bad_value(
                key,
                value,
                &format!(
                    "not a non-negative integer ({}; e.g. 4096, 64K, 1MiB)",
                    error.reason
                ),
            )
        })?;
        if parsed < minimum || parsed > maximum {
            return Err(bad_value(
                key,
                value,
                &format!("must be between {minimum} and {maximum}"),
            ));
        }
        Ok(parsed)
    }

    /// One of `choices`.
    pub fn choice(
        &self,
        key: &str,
        choices: &[&'static str],
    ) -> Result<&'static str, OptionsError> {
        let value = self.text(key)?;
        choices
            .iter()
            .copied()
            .find(|choice| *choice == value)
            .ok_or_else(|| {
                bad_value(
                    key,
                    value,
                    &format!("must be one of {}", choices.join(", ")),
                )
            })
    }

    /// `true`/`false` (also `yes`/`no`, `1`/`0`).
    pub fn boolean(&self, key: &str) -> Result<bool, OptionsError> {
        let value = self.text(key)?;
        match value {
            "true" | "yes" | "1" => Ok(true),
            "false" | "no" | "0" => Ok(false),
            _ => Err(bad_value(key, value, "must be true or false")),
        }
    }

    /// Exactly `length_bytes` bytes written as hexadecimal.
    pub fn hex_bytes(&self, key: &str, length_bytes: usize) -> Result<Vec<u8>, OptionsError> {
        let value = self.text(key)?;
        let bytes = decode_hex(value).ok_or_else(|| bad_value(key, value, "not hexadecimal"))?;
        if bytes.len() != length_bytes {
            return Err(bad_value(
                key,
                value,
                &format!(
                    "must be {length_bytes} bytes ({} hex digits), got {}",
                    length_bytes * 2,
                    bytes.len()
                ),
            ));
        }
        Ok(bytes)
    }
}

/// The whole query file at `path` (option `queries` of kNN and blastn): a regular file of
/// at most [`MAX_QUERY_FILE_BYTES`], or a [`bad_query_file`] saying why not.
pub(crate) fn read_query_file(path: &str) -> Result<Vec<u8>, OptionsError> {
    let metadata = std::fs::metadata(path)
        .map_err(|error| bad_query_file(format!("cannot read {path}: {error}")))?;
    if !metadata.is_file() || metadata.len() > MAX_QUERY_FILE_BYTES {
        return Err(bad_query_file(format!(
            "{path} must be a regular file of at most {MAX_QUERY_FILE_BYTES} bytes (64 MiB)"
        )));
    }
    std::fs::read(path).map_err(|error| bad_query_file(format!("cannot read {path}: {error}")))
}

/// The query file (option `queries`) refused, for `reason`.
pub(crate) fn bad_query_file(reason: String) -> OptionsError {
    OptionsError::BadFile {
        key: "queries".into(),
        reason,
    }
}

fn known_keys(specs: &[OptionSpec]) -> String {
    if specs.is_empty() {
        return "(none)".to_string();
    }
    specs
        .iter()
        .map(|spec| spec.key)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Option `key=value` refused, for `reason`.
pub(crate) fn bad_value(key: &str, value: &str, reason: &str) -> OptionsError {
    OptionsError::BadValue {
        key: key.to_string(),
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

/// Decodes hexadecimal (even length, either case).
pub fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|index| u8::from_str_radix(text.get(index..index + 2)?, 16).ok())
        .collect()
}

/// Encodes bytes as lowercase hexadecimal.
pub fn encode_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
