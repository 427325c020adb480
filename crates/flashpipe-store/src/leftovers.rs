//! Temporaries a killed process left in a store, removed when the store next opens
//! read-write.
//!
//! Commands write under temporary names and rename when done: `put` as
//! `.flashpipe-put-PID-INDEX`, `cp --force` as `.flashpipe-cp-PID`, `flashpipe run` in
//! process as `.flashpipe-run-PID-INDEX`, a kernel run through a server as
//! `.flashpipe-serve-run-PID-RUN-INDEX` (every field decimal digits). A process killed
//! between the write and the rename leaves its temporary behind. Whoever opens the store
//! read-write next holds it alone (the store lock), so no live command can own such a
//! name then: [`remove_leftover_temporaries`] deletes every file whose name matches one
//! of these patterns exactly, commits, and names each one. A file that merely starts
//! with `.flashpipe` is a user's and is kept.

use flashpipe_fs::Filesystem;

/// Each temporary pattern: its prefix and how many `-`-separated decimal fields follow.
const TEMPORARY_PATTERNS: [(&str, usize); 4] = [
    (".flashpipe-put-", 2),
    (".flashpipe-cp-", 1),
    (".flashpipe-run-", 2),
    (".flashpipe-serve-run-", 3),
];

/// What every temporary pattern starts with: the one prefix looked up at each open.
const TEMPORARY_PREFIX: &str = ".flashpipe-";

/// Longest decimal field of a temporary name (a u64 has at most 20 digits).
const MAX_FIELD_DIGITS: usize = 20;

/// True when `name` is exactly one of the temporary patterns.
pub fn is_leftover_temporary(name: &str) -> bool {
    TEMPORARY_PATTERNS.iter().any(|(prefix, field_count)| {
        name.strip_prefix(prefix).is_some_and(|fields| {
            let fields: Vec<&str> = fields.split('-').collect();
            fields.len() == *field_count
                && fields.iter().all(|field| {
                    !field.is_empty()
                        && field.len() <= MAX_FIELD_DIGITS
                        && field.bytes().all(|byte| byte.is_ascii_digit())
                })
        })
    })
}

/// Deletes every leftover temporary of a read-write mounted `filesystem` and commits;
/// returns one note per file removed (or that could not be removed), for the interface
/// to show.
pub fn remove_leftover_temporaries(filesystem: &mut Filesystem) -> Vec<String> {
    assert!(
        !filesystem.is_read_only(),
        "leftover temporaries are removed only under a read-write mount"
    );
    let leftovers: Vec<(String, u64)> = filesystem
        .names_with_prefix(TEMPORARY_PREFIX)
        .into_iter()
        .filter(|name| is_leftover_temporary(name))
        .filter_map(|name| {
            let size_bytes = filesystem.stat_name(&name).ok()?.size_bytes;
            Some((name, size_bytes))
        })
        .collect();
    let mut notes = Vec::new();
    let mut removed = Vec::new();
    for (name, size_bytes) in leftovers {
        match filesystem.delete(&name) {
            Ok(()) => removed.push((name, size_bytes)),
            Err(error) => notes.push(format!(
                "cannot remove the leftover temporary {name}: {error}; remove it with `flashpipe rm`"
            )),
        }
    }
    if removed.is_empty() {
        return notes;
    }
    if let Err(error) = filesystem.flush() {
        notes.push(format!(
            "removing {} leftover temporaries was not committed: {error}; they are removed again at the next read-write open",
            removed.len()
        ));
        return notes;
    }
    for (name, size_bytes) in removed {
        notes.push(format!(
            "removed {name} ({size_bytes} bytes), a temporary left by a command that was killed before it finished"
        ));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::{is_leftover_temporary, TEMPORARY_PATTERNS, TEMPORARY_PREFIX};

    #[test]
    fn every_pattern_starts_with_the_prefix_looked_up() {
        for (prefix, _) in TEMPORARY_PATTERNS {
            assert!(prefix.starts_with(TEMPORARY_PREFIX), "{prefix}");
        }
    }

    #[test]
    fn only_exact_temporary_names_match() {
        for name in [
            ".flashpipe-put-123-0",
            ".flashpipe-cp-9",
            ".flashpipe-run-4-17",
            ".flashpipe-serve-run-77-3-0",
        ] {
            assert!(is_leftover_temporary(name), "{name} is a temporary");
        }
        for name in [
            ".flashpipe-put-123",
            ".flashpipe-put-123-0-1",
            ".flashpipe-put-12a-0",
            ".flashpipe-put--0",
            ".flashpipe-notes",
            ".flashpipe-put-1-0.txt",
            ".flashpipe-serve-run-1-2",
            "flashpipe-put-1-0",
            ".flashpipe-cp-123456789012345678901",
        ] {
            assert!(!is_leftover_temporary(name), "{name} is a user's file");
        }
    }
}
