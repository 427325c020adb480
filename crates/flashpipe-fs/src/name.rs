//! File name rules: UTF-8 (guaranteed by `&str`), 1 to 255 bytes, no '/' and no NUL.

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
}
