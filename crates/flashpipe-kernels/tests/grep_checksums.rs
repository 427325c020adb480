//! grep against a line-by-line reference over the whole input (matches across chunk boundaries,
//! line numbers, CRLF, no trailing newline), and CRC32C / SHA-256 against published vectors.

mod common;

use common::run_all_ways;
use flashpipe_kernels::api::Summary;
use flashpipe_kernels::error::KernelErrorKind;
use flashpipe_kernels::registry::build_kernel;

/// The reference: split into lines, test each with `regex` (or `contains` for literals).
fn reference_grep(text: &[u8], pattern: &str, literal: bool) -> Vec<u64> {
    let regex = regex::bytes::Regex::new(&format!("(?m){pattern}")).expect("pattern");
    let mut lines: Vec<&[u8]> = text.split(|&byte| byte == b'\n').collect();
    if text.ends_with(b"\n") || text.is_empty() {
        lines.pop();
    }
    lines
        .iter()
        .enumerate()
        .filter(|(_, line)| {
            if literal {
                line.windows(pattern.len())
                    .any(|window| window == pattern.as_bytes())
            } else {
                regex.is_match(line)
            }
        })
        .map(|(index, _)| index as u64 + 1)
        .collect()
}

fn grep_line_numbers(text: &[u8], arguments: &[&str]) -> Vec<u64> {
    let arguments: Vec<String> = arguments
        .iter()
        .map(|argument| argument.to_string())
        .collect();
    let kernel = build_kernel("grep", &arguments).expect("options");
    let (_, summary) = run_all_ways(kernel.as_ref(), text).expect("grep runs");
    let Summary::Matches {
        matching_line_count,
        matches,
    } = summary
    else {
        panic!("grep returns matches");
    };
    assert_eq!(matching_line_count as usize, matches.len());
    matches.iter().map(|found| found.line_number).collect()
}

fn sample_text() -> Vec<u8> {
    let mut text = Vec::new();
    for line in 0..300 {
        let content = match line % 7 {
            0 => format!("needle in line {line}"),
            1 => String::new(),
            2 => format!("haystack {} end", "x".repeat(line % 50)),
            3 => "The needle\r".to_string(),
            4 => format!("{}needle", "y".repeat(line)),
            _ => format!("plain line number {line}"),
        };
        text.extend_from_slice(content.as_bytes());
        text.push(b'\n');
    }
    text.extend_from_slice(b"last line without newline: needle");
    text
}

#[test]
fn grep_matches_the_line_reference_for_literals_and_patterns() {
    let text = sample_text();
    let cases: &[(&str, bool)] = &[
        ("needle", true),
        ("needle", false),
        ("^needle", false),
        ("needle$", false),
        ("^$", false),
        (r"line \d+3$", false),
        (r"x{10,}", false),
        (r"end\s+The", false),
        (r"\n", false),
        ("nothing matches this", true),
    ];
    for &(pattern, literal) in cases {
        let literal_option = format!("literal={literal}");
        let pattern_option = format!("pattern={pattern}");
        let found = grep_line_numbers(&text, &[&pattern_option, &literal_option]);
        assert_eq!(
            found,
            reference_grep(&text, pattern, literal),
            "pattern {pattern:?}"
        );
    }
}

#[test]
fn grep_handles_empty_one_byte_and_missing_final_newline() {
    for (text, expected) in [
        (&b""[..], vec![]),
        (b"a", vec![1]),
        (b"\n", vec![]),
        (b"b\na", vec![2]),
        (b"a\n\na\n", vec![1, 3]),
    ] {
        assert_eq!(
            grep_line_numbers(text, &["pattern=a", "literal=true"]),
            expected,
            "{text:?}"
        );
    }
}

#[test]
fn grep_refuses_bad_options_and_overlong_lines() {
    for arguments in [
        vec!["pattern=("],
        vec!["pattern="],
        vec!["literal=true"],
        vec!["pattern=a", "literal=maybe"],
        vec!["pattern=a", "literal=true", "ignore_case=true"],
        vec!["pattern=a", "max_line_bytes=0"],
        vec!["pattern=a", "max_line_bytes=lots"],
    ] {
        let arguments: Vec<String> = arguments.into_iter().map(String::from).collect();
        assert!(
            build_kernel("grep", &arguments).is_err(),
            "{arguments:?} is refused"
        );
    }
    let kernel =
        build_kernel("grep", &["pattern=a".into(), "max_line_bytes=10".into()]).expect("options");
    let error = run_all_ways(kernel.as_ref(), &b"short\nthis line is far too long\n"[..])
        .expect_err("too long");
    assert!(
        matches!(error.kind, KernelErrorKind::LineTooLong { limit_bytes: 10 }),
        "{error}"
    );
}

fn digest(kernel_name: &str, data: &[u8]) -> String {
    let kernel = build_kernel(kernel_name, &[]).expect("no options");
    match run_all_ways(kernel.as_ref(), data).expect("runs").1 {
        Summary::Digest { hex, .. } => hex,
        other => panic!("unexpected summary {other:?}"),
    }
}

#[test]
fn crc32c_matches_rfc3720_vectors_and_one_shot() {
    assert_eq!(digest("crc32c", &[]), "00000000");
    assert_eq!(digest("crc32c", &[0u8; 32]), "8a9136aa");
    assert_eq!(digest("crc32c", &[0xffu8; 32]), "62a8ab43");
    let ascending: Vec<u8> = (0..32).collect();
    assert_eq!(digest("crc32c", &ascending), "46dd794e");
    assert_eq!(digest("crc32c", b"123456789"), "e3069283");
    let long: Vec<u8> = (0..100_000u32)
        .map(|index| (index * 7 % 256) as u8)
        .collect();
    assert_eq!(
        digest("crc32c", &long),
        format!("{:08x}", crc32c::crc32c(&long))
    );
}

#[test]
fn sha256_matches_fips_180_examples() {
    assert_eq!(
        digest("sha256", b""),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    assert_eq!(
        digest("sha256", b"abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert_eq!(
        digest(
            "sha256",
            b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
        ),
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
    );
    assert!(build_kernel("sha256", &["bits=256".into()]).is_err());
}
