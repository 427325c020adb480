//! `flashpipe put STORE - --as NAME`: one file stored from standard input.
//!
//! The form follows the put syntax that exists (paths, `--as` naming a single file), as
//! `tar -f -` and `cp /dev/stdin` read a stream where a path would be: `-` is the path,
//! and `--as` gives the name the stream does not have. The bytes go through the same
//! transaction as a put of files (`transfer::put_files_atomically`): written under a
//! temporary name a chunk at a time (memory bounded by the commands in flight, whatever
//! the stream's length), renamed to NAME and committed at end of file. A command killed
//! before that commits nothing in this process; through a server its temporary is
//! removed at the store's next read-write open (`flashpipe_store::leftovers`).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use flashpipe_store::put_plan::PutSource;

/// The path that stands for standard input.
pub const STANDARD_INPUT_PATH: &str = "-";

/// Why a put from standard input is refused before anything is read or changed.
#[derive(Debug, thiserror::Error)]
pub enum PutStdinError {
    /// `-` without `--as`.
    #[error("standard input has no name to store it under: give one with --as NAME (flashpipe put STORE - --as NAME)")]
    NoName,
    /// `-` beside other paths.
    #[error("`-` (standard input) is stored alone: give it as the only path, with --as NAME; for a local file named `-`, write ./-")]
    NotAlone,
    /// Standard input ended before its first byte.
    #[error("standard input is empty (closed, /dev/null, or a command before the pipe that wrote nothing): nothing stored; to store an empty file, put an empty local file (touch empty && flashpipe put STORE empty --as NAME)")]
    Empty,
    /// Standard input cannot be read.
    #[error("cannot read standard input: {0}; nothing stored")]
    Unreadable(std::io::Error),
    /// The name given is not valid in a store.
    #[error("name {name:?} is not valid in a store: {reason}")]
    BadName {
        /// The name given with `--as`.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// Whether the paths of a put name standard input (`-`) at all.
pub fn names_standard_input(paths: &[PathBuf]) -> bool {
    paths
        .iter()
        .any(|path| path == Path::new(STANDARD_INPUT_PATH))
}

/// The one source of a put from standard input, checked: `-` alone, a valid name. Its
/// size is unknown until the end of the stream (0 here).
pub fn plan_standard_input(
    paths: &[PathBuf],
    name: Option<&str>,
) -> Result<PutSource, PutStdinError> {
    if paths.len() != 1 {
        return Err(PutStdinError::NotAlone);
    }
    let name = name.ok_or(PutStdinError::NoName)?;
    if let Some(reason) = flashpipe_fs::new_name_problem(name) {
        return Err(PutStdinError::BadName {
            name: name.to_string(),
            reason: reason.to_string(),
        });
    }
    Ok(PutSource {
        path: PathBuf::from(STANDARD_INPUT_PATH),
        name: name.to_string(),
        size_bytes: 0,
    })
}

/// Bytes read ahead from standard input before the store is opened (and kept, to be
/// stored first): one transfer chunk.
pub const READ_AHEAD_BYTES: usize = crate::session::TRANSFER_CHUNK_BYTES;

/// Standard input, its first bytes read ahead: refuses, before the store is opened, an
/// input that is empty (a closed standard input reads as /dev/null) or cannot be read
/// at all (a folder).
pub fn read_ahead(
    input: std::io::StdinLock<'static>,
) -> Result<std::io::BufReader<std::io::StdinLock<'static>>, PutStdinError> {
    use std::io::BufRead;
    let mut reader = std::io::BufReader::with_capacity(READ_AHEAD_BYTES, input);
    loop {
        match reader.fill_buf() {
            Ok([]) => return Err(PutStdinError::Empty),
            Ok(_) => return Ok(reader),
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return Err(PutStdinError::Unreadable(error)),
        }
    }
}

/// Tells a person typing at a terminal how the input ends (nothing when it is a pipe or
/// a file).
pub fn note_when_typed() {
    if std::io::stdin().is_terminal() {
        eprintln!("flashpipe: reading standard input until end of file (Ctrl-D)");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_input_needs_a_valid_name_and_no_other_path() {
        let dash = vec![PathBuf::from("-")];
        assert!(matches!(
            plan_standard_input(&dash, None),
            Err(PutStdinError::NoName)
        ));
        let mixed = vec![PathBuf::from("-"), PathBuf::from("a.txt")];
        assert!(names_standard_input(&mixed));
        assert!(matches!(
            plan_standard_input(&mixed, Some("x")),
            Err(PutStdinError::NotAlone)
        ));
        assert!(matches!(
            plan_standard_input(&dash, Some("")),
            Err(PutStdinError::BadName { .. })
        ));
        let source = plan_standard_input(&dash, Some("logs:today.txt")).unwrap();
        assert_eq!(source.name, "logs:today.txt");
        assert!(!names_standard_input(&[PathBuf::from("./-")]));
    }
}
