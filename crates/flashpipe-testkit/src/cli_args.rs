//! Command lines for the tests that run a binary: written as one string of words rather
//! than one array element per line, with the arguments that must not be split (paths,
//! values with spaces) passed apart and named by `{}` where they stand.

/// A command line written as one string: the words of `template` (split at white space),
/// each word `{}` standing for the next of `values` (paths and other arguments that must
/// not be split). There must be as many values as `{}` words.
pub fn command_line<'a>(template: &'a str, values: &[&'a str]) -> Vec<&'a str> {
    let mut values = values.iter().copied();
    let line = template
        .split_whitespace()
        .map(|word| match word {
            "{}" => values
                .next()
                .unwrap_or_else(|| panic!("too few values for the command line {template}")),
            word => word,
        })
        .collect();
    assert!(
        values.next().is_none(),
        "too many values for the command line {template}"
    );
    line
}

#[cfg(test)]
mod tests {
    use super::command_line;

    #[test]
    fn words_are_split_and_values_stay_whole_where_they_stand() {
        assert_eq!(
            command_line("ls  {}\n --json {}", &["a b.toml", "c"]),
            ["ls", "a b.toml", "--json", "c"]
        );
        assert_eq!(command_line("", &[]), Vec::<&str>::new());
    }

    #[test]
    #[should_panic(expected = "too few values")]
    fn a_missing_value_is_a_bug_in_the_test() {
        command_line("cat {} {}", &["a"]);
    }

    #[test]
    #[should_panic(expected = "too many values")]
    fn a_value_left_over_is_a_bug_in_the_test() {
        command_line("cat {}", &["a", "b"]);
    }
}
