//! A small HTML text extractor for the UDHR corpus: the text of every `<p>` element, with inner
//! tags removed and the common character references decoded. Written by hand because a full HTML
//! parser is far more than these regular, generated files need.

/// The text of each `<p>` element of `html`, trimmed, empty paragraphs left out.
pub fn paragraph_texts(html: &str) -> Vec<String> {
    let mut paragraphs = Vec::new();
    let mut rest = html;
    while let Some(open) = find_paragraph_open(rest) {
        let after_open = &rest[open..];
        let Some(tag_end) = after_open.find('>') else {
            break;
        };
        let body_and_rest = &after_open[tag_end + 1..];
        let body_end = body_and_rest.find("</p>").unwrap_or(body_and_rest.len());
        let text = decode_entities(&strip_tags(&body_and_rest[..body_end]));
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if !text.is_empty() {
            paragraphs.push(text);
        }
        rest = &body_and_rest[body_end..];
    }
    paragraphs
}

/// Position of the next `<p>` or `<p ...>` tag (not `<pre>` or `<param>`).
fn find_paragraph_open(html: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(found) = html[from..].find("<p") {
        let position = from + found;
        match html.as_bytes().get(position + 2) {
            Some(b'>') | Some(b' ') | Some(b'\t') | Some(b'\n') => return Some(position),
            _ => from = position + 2,
        }
    }
    None
}

/// Removes `<...>` tags, keeping the text between them.
pub fn strip_tags(html: &str) -> String {
    let mut text = String::with_capacity(html.len());
    let mut inside_tag = false;
    for character in html.chars() {
        match (inside_tag, character) {
            (false, '<') => inside_tag = true,
            (true, '>') => inside_tag = false,
            (false, _) => text.push(character),
            (true, _) => {}
        }
    }
    text
}

/// Decodes `&amp; &lt; &gt; &quot; &apos; &nbsp;` and numeric references; anything else is kept.
pub fn decode_entities(text: &str) -> String {
    let mut decoded = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(ampersand) = rest.find('&') {
        decoded.push_str(&rest[..ampersand]);
        let candidate = &rest[ampersand..];
        match candidate
            .find(';')
            .filter(|&end| end <= 10)
            .and_then(|end| Some((decode_reference(&candidate[1..end])?, end)))
        {
            Some((character, end)) => {
                decoded.push(character);
                rest = &candidate[end + 1..];
            }
            None => {
                decoded.push('&');
                rest = &candidate[1..];
            }
        }
    }
    decoded.push_str(rest);
    decoded
}

fn decode_reference(name: &str) -> Option<char> {
    match name {
        "amp" => Some('&'),
        "lt" => Some('<'),
        "gt" => Some('>'),
        "quot" => Some('"'),
        "apos" => Some('\''),
        "nbsp" => Some('\u{a0}'),
        _ => {
            let number = name.strip_prefix('#')?;
            let code = match number.strip_prefix(['x', 'X']) {
                Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                None => number.parse().ok()?,
            };
            char::from_u32(code)
        }
    }
}
