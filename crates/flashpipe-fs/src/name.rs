//! File name rules: UTF-8 (guaranteed by `&str`), 1 to 255 bytes, no '/' and no NUL;
//! and for a name given to a new file (create, the target of a rename or copy), not `.`
//! nor `..`, which every tool that maps store names onto paths reads as folders. Opening,
//! loading and replaying check only the first rules, so a store written before the second
//! (holding a file named `.` or `..`) still mounts, and the file can be renamed.

use crate::error::NamespaceError;
use crate::layout::MAX_NAME_BYTES;

/// Why `name` is not a valid file name, or `None` when it is.
pub fn name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("a name needs at least one byte")
    } else if name.len() > MAX_NAME_BYTES {
        Some("a name has at most 255 bytes")
    } else if name.contains('/') {
        Some("a name may not contain '/'")
    } else if name.contains('\0') {
        Some("a name may not contain NUL")
    } else {
        None
    }
}

/// Why `name` may not be given to a new file: [`name_problem`]'s rules, and not `.` nor
/// `..`; `None` when it may.
pub fn new_name_problem(name: &str) -> Option<&'static str> {
    name_problem(name).or_else(|| {
        (name == "." || name == "..")
            .then_some("a name may not be `.` or `..` (they name folders to every tool)")
    })
}

/// Checks a name for a new file, returning [`NamespaceError::BadName`] when it breaks a
/// rule of [`new_name_problem`].
pub fn check_new_name(name: &str) -> Result<(), NamespaceError> {
    match new_name_problem(name) {
        Some(reason) => Err(NamespaceError::BadName {
            name: name.to_string(),
            reason,
        }),
        None => Ok(()),
    }
}

/// Checks `name`, returning [`NamespaceError::BadName`] when it breaks a rule.
pub fn check_name(name: &str) -> Result<(), NamespaceError> {
    match name_problem(name) {
        Some(reason) => Err(NamespaceError::BadName {
            name: name.to_string(),
            reason,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_rules() {
        let long_ok = "é".repeat(127);
        let too_long = "x".repeat(256);
        let cases: [(&str, bool); 7] = [
            ("a", true),
            ("data.bin", true),
            (&long_ok, true),
            ("", false),
            (&too_long, false),
            ("a/b", false),
            ("a\0b", false),
        ];
        for (name, valid) in cases {
            assert_eq!(name_problem(name).is_none(), valid, "{name:?}");
        }
    }

    #[test]
    fn new_names_may_not_be_dot_or_dot_dot() {
        for name in [".", ".."] {
            assert!(name_problem(name).is_none(), "{name:?} still opens");
            assert!(new_name_problem(name).is_some(), "{name:?}");
            assert!(check_new_name(name).is_err(), "{name:?}");
        }
        for name in ["...", ".a", "a.", ".flashpipe-put-1"] {
            assert!(new_name_problem(name).is_none(), "{name:?}");
        }
    }
}
