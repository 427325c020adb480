//! Shell-style patterns over store names: `*` (any run of characters), `?` (one
//! character) and `[...]` (one character of a set: `[abc]`, ranges `[a-z]`, negated
//! `[!abc]` or `[^abc]`). A pattern is matched against the whole store name, and `:` is
//! an ordinary character: `lid:*` matches every file under `lid:` at any depth.
//!
//! A small matcher of our own (no crate): store names are flat strings, not paths, so
//! path-aware crates' rules about `/` would only get in the way.

/// Whether `text` holds a pattern character (`*`, `?` or `[`).
pub fn is_pattern(text: &str) -> bool {
    text.contains(['*', '?', '['])
}

/// Whether the whole of `name` matches `pattern`.
pub fn matches(pattern: &str, name: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let name: Vec<char> = name.chars().collect();
    matches_from(&pattern, &name)
}

fn matches_from(pattern: &[char], name: &[char]) -> bool {
    let (mut pattern_index, mut name_index) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while name_index < name.len() {
        match pattern.get(pattern_index) {
            Some('*') => {
                star = Some((pattern_index, name_index));
                pattern_index += 1;
                continue;
            }
            Some('?') => {
                pattern_index += 1;
                name_index += 1;
                continue;
            }
            Some('[') => {
                if let Some((matched, width)) =
                    class_matches(&pattern[pattern_index..], name[name_index])
                {
                    if matched {
                        pattern_index += width;
                        name_index += 1;
                        continue;
                    }
                } else if name[name_index] == '[' {
                    pattern_index += 1;
                    name_index += 1;
                    continue;
                }
            }
            Some(&literal) if literal == name[name_index] => {
                pattern_index += 1;
                name_index += 1;
                continue;
            }
            _ => {}
        }
        match star {
            Some((star_pattern, star_name)) => {
                pattern_index = star_pattern + 1;
                name_index = star_name + 1;
                star = Some((star_pattern, star_name + 1));
            }
            None => return false,
        }
    }
    pattern[pattern_index..]
        .iter()
        .all(|&character| character == '*')
}

/// Matches `character` against the class opening `pattern` (which starts with `[`):
/// `Some((matched, width in pattern characters))`, or `None` when the class is not
/// closed (then `[` is an ordinary character).
fn class_matches(pattern: &[char], character: char) -> Option<(bool, usize)> {
    let mut index = 1;
    let negated = matches!(pattern.get(index), Some('!' | '^'));
    if negated {
        index += 1;
    }
    let mut matched = false;
    let mut first = true;
    loop {
        let current = *pattern.get(index)?;
        if current == ']' && !first {
            return Some((matched != negated, index + 1));
        }
        first = false;
        if pattern.get(index + 1) == Some(&'-')
            && pattern.get(index + 2).is_some_and(|&end| end != ']')
        {
            let end = pattern[index + 2];
            matched |= (current..=end).contains(&character);
            index += 3;
        } else {
            matched |= current == character;
            index += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stars_questions_and_classes_match_whole_names() {
        assert!(matches("lid:*", "lid:a:b.txt"));
        assert!(!matches("lid:*", "xlid:a"));
        assert!(matches("*.txt", "a:b.txt"));
        assert!(!matches("*.txt", "a.txt.gz"));
        assert!(matches("a?c", "abc"));
        assert!(!matches("a?c", "ac"));
        assert!(matches("[ab]x", "bx"));
        assert!(!matches("[!ab]x", "bx"));
        assert!(matches("[a-c]*", "c9"));
        assert!(matches("[]]", "]"));
        assert!(matches("a[b", "a[b"));
        assert!(matches("*", ""));
        assert!(matches("**a*", "xxa"));
    }
}
