//! The campaign's workload: commands drawn at random against a model of the files
//! (create, write at offsets, truncate, delete, rename over, read, read whole files,
//! flush), each with what its reply must be. The engine serves commands in arrival order,
//! so a model updated in submission order predicts every reply.

use std::collections::{BTreeMap, BTreeSet};

use flashpipe_device::{IoBuf, SplitMix64};
use flashpipe_engine::Command;

/// The files: name to contents.
pub type Model = BTreeMap<String, Vec<u8>>;

/// The names the workload uses (few, so that operations collide).
pub const NAMES: [&str; 6] = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "a-much-longer-name-for-a-file.bin",
    "z",
];

/// Bytes per file-system block.
pub const BLOCK_BYTES: u64 = 4096;

/// What a submitted command's reply must be, by the model at its submission.
pub enum Expected {
    /// A reply with nothing in it.
    Done,
    /// A write's reply.
    Written,
    /// A read's bytes.
    Data(Vec<u8>),
    /// Whole files of a `ReadFiles`, in order.
    Files(Vec<Vec<u8>>),
    /// A flush: the model it commits.
    Flushed(Model),
}

/// One submitted command, in submission order.
pub struct Submitted {
    /// The client that sent it.
    pub client: usize,
    /// Its ticket at that client.
    pub ticket: u64,
    /// What it was, for failure messages.
    pub what: String,
    /// What its reply must be.
    pub expected: Expected,
    /// The files it changes (none for reads and flushes).
    pub changes: Vec<String>,
}

fn bytes_for(rng: &mut SplitMix64, length: usize) -> Vec<u8> {
    let fill = rng.next_u64();
    (0..length)
        .map(|index| (fill >> (index % 8 * 8)) as u8 ^ index as u8)
        .collect()
}

/// Draws one command valid against `model`, applies it to the model, and says what its
/// reply must be.
pub fn draw_command(rng: &mut SplitMix64, model: &mut Model) -> (Command, String, Expected) {
    let name = NAMES[rng.below(NAMES.len() as u64) as usize].to_string();
    let Some(content) = model.get_mut(&name) else {
        model.insert(name.clone(), Vec::new());
        return (
            Command::Create { name: name.clone() },
            format!("create {name}"),
            Expected::Done,
        );
    };
    match rng.below(100) {
        0..=44 => {
            let offset = rng.below(8 * BLOCK_BYTES) as usize;
            let length = 1 + rng.below(3 * BLOCK_BYTES) as usize;
            let bytes = bytes_for(rng, length);
            if content.len() < offset + length {
                content.resize(offset + length, 0);
            }
            content[offset..offset + length].copy_from_slice(&bytes);
            (
                Command::Write {
                    name: name.clone(),
                    offset_bytes: offset as u64,
                    data: IoBuf::from_slice(&bytes),
                },
                format!("write {name} {offset}+{length}"),
                Expected::Written,
            )
        }
        45..=54 => {
            let size = rng.below(10 * BLOCK_BYTES);
            content.resize(size as usize, 0);
            (
                Command::Truncate {
                    name: name.clone(),
                    size_bytes: size,
                },
                format!("truncate {name} to {size}"),
                Expected::Done,
            )
        }
        55..=59 => {
            model.remove(&name);
            (
                Command::Delete { name: name.clone() },
                format!("delete {name}"),
                Expected::Done,
            )
        }
        60..=64 => {
            let to = NAMES[rng.below(NAMES.len() as u64) as usize].to_string();
            let moved = model.remove(&name).expect("the file exists");
            model.insert(to.clone(), moved);
            (
                Command::Rename {
                    from: name.clone(),
                    to: to.clone(),
                    replace: true,
                },
                format!("rename {name} over {to}"),
                Expected::Done,
            )
        }
        65..=69 => {
            let names: Vec<String> = model.keys().take(3).cloned().collect();
            let files = names.iter().map(|name| model[name].clone()).collect();
            (
                Command::ReadFiles {
                    names: names.clone(),
                },
                format!("read files {}", names.join(", ")),
                Expected::Files(files),
            )
        }
        70..=89 => {
            let offset = rng.below(content.len() as u64 + 1);
            let length = rng.below(content.len() as u64 - offset + 1);
            let expected = content[offset as usize..(offset + length) as usize].to_vec();
            (
                Command::Read {
                    name: name.clone(),
                    offset_bytes: offset,
                    length_bytes: length,
                },
                format!("read {name} {offset}+{length}"),
                Expected::Data(expected),
            )
        }
        _ => (
            Command::Flush,
            "flush".to_string(),
            Expected::Flushed(model.clone()),
        ),
    }
}

/// The files `command` changes: what a failed command leaves uncertain.
pub fn changed_names(command: &Command) -> Vec<String> {
    match command {
        Command::Create { name }
        | Command::Write { name, .. }
        | Command::Truncate { name, .. }
        | Command::Delete { name } => vec![name.clone()],
        Command::Rename { from, to, .. } => vec![from.clone(), to.clone()],
        _ => Vec::new(),
    }
}

/// Whether `found` and `expected` agree on every file not named in `uncertain` (its
/// presence and its contents).
pub fn agrees_outside(found: &Model, expected: &Model, uncertain: &BTreeSet<String>) -> bool {
    let certain = |model: &Model| -> Vec<(String, Vec<u8>)> {
        model
            .iter()
            .filter(|(name, _)| !uncertain.contains(*name))
            .map(|(name, bytes)| (name.clone(), bytes.clone()))
            .collect()
    };
    certain(found) == certain(expected)
}

/// Names and sizes, for failure messages.
pub fn describe(model: &Model) -> String {
    let files: Vec<String> = model
        .iter()
        .map(|(name, bytes)| format!("{name} ({} bytes)", bytes.len()))
        .collect();
    if files.is_empty() {
        "no files".to_string()
    } else {
        files.join(", ")
    }
}

/// A digest of a model (FNV-1a over names and contents), for fingerprints.
pub fn digest(model: &Model) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325_u64;
    for (name, bytes) in model {
        for &byte in name.as_bytes().iter().chain(bytes) {
            hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
        hash = (hash ^ 0xff).wrapping_mul(0x0100_0000_01b3);
    }
    hash
}
