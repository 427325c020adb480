//! How a report reaches standard output: as pretty-printed JSON under `--json`, else as
//! its text. A closed pipe (`| head`) ends the output quietly rather than with a panic.

use std::io::Write as _;

use serde::Serialize;

/// Prints `report` as pretty-printed JSON when `json` is set; otherwise `text` prints its
/// text form.
pub fn print_json_or_text<R: Serialize + ?Sized>(
    json: bool,
    report: &R,
    text: impl FnOnce(&R),
) -> Result<(), serde_json::Error> {
    match json {
        true => print_json(report),
        false => {
            text(report);
            Ok(())
        }
    }
}

/// Prints `report` as pretty-printed JSON and a newline.
pub fn print_json<R: Serialize + ?Sized>(report: &R) -> Result<(), serde_json::Error> {
    let mut text = serde_json::to_string_pretty(report)?;
    text.push('\n');
    let _ = std::io::stdout().write_all(text.as_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_form_prints_only_without_json() {
        for (json, text_expected) in [(false, true), (true, false)] {
            let mut text_printed = false;
            print_json_or_text(json, &[1, 2], |_| text_printed = true).unwrap();
            assert_eq!(text_printed, text_expected, "json {json}");
        }
    }
}
