//! Language identification on a 30-language UDHR subset with a held-out split (trained on the
//! first 70% of each translation's paragraphs, tested on the rest), the profile file round trip
//! and its corruption checks, and the kernel over chunked input; version-2 profiles, the mixed
//! corpus (word lists) with hostile input, the held-out pieces, and the shipped profile.

mod common;

use std::sync::Arc;

use common::{run_all_ways, shared_data};
use flashpipe_kernels::api::Kernel;
use flashpipe_kernels::api::Summary;
use flashpipe_kernels::langid::builtin::BUILTIN_PROFILE_BYTES;
use flashpipe_kernels::langid::held_out::{load_piece_sets, predict, tally};
use flashpipe_kernels::langid::mixed::{train_mixed, LanguageSource, MixedSettings};
use flashpipe_kernels::langid::model::{train, LanguageModel, TrainingSettings};
use flashpipe_kernels::langid::profile_file::{decode_profile, encode_profile, ProfileError};
use flashpipe_kernels::langid::udhr::{
    evaluate, load_udhr, training_samples, CorpusSelection, UdhrDocument,
};
use flashpipe_kernels::langid::word_lists::{load_mixed, MAX_WORD_LINE_BYTES, WORD_LIST_FOLDER};
use flashpipe_kernels::langid::LangIdKernel;

fn subset() -> Option<(Vec<UdhrDocument>, LanguageModel)> {
    let folder = shared_data("udhr")?;
    let selection = CorpusSelection {
        max_languages: Some(30),
        ..CorpusSelection::default()
    };
    let documents = load_udhr(&folder, selection).expect("corpus loads");
    let model = train(&training_samples(&documents), TrainingSettings::default());
    Some((documents, model))
}

#[test]
#[ignore = "data test: needs ../shared/data/udhr (scripts/test-data runs it)"]
fn held_out_accuracy_on_thirty_languages_is_high_for_2k_pieces() {
    let Some((documents, model)) = subset() else {
        return;
    };
    assert_eq!(model.languages.len(), 30);
    for document in &documents {
        assert!(!document.test_text.is_empty() && !document.train_text.is_empty());
        let test = String::from_utf8_lossy(&document.test_text);
        let first_test_paragraph = test.lines().next().expect("a test paragraph");
        assert!(
            !String::from_utf8_lossy(&document.train_text).contains(first_test_paragraph),
            "{}: test text must not be in the training text",
            document.file
        );
    }
    let rows = evaluate(&model, &documents, &[256, 2048], 2);
    let accuracy_2k = rows
        .iter()
        .find(|row| row.piece_size_bytes == Some(2048))
        .expect("2 KiB row")
        .accuracy;
    let accuracy_whole = rows
        .iter()
        .find(|row| row.piece_size_bytes.is_none())
        .expect("whole row")
        .accuracy;
    eprintln!("30-language held-out accuracy: {rows:?}");
    assert!(accuracy_2k >= 0.9, "2 KiB accuracy {accuracy_2k}");
    assert!(
        accuracy_whole >= 0.9,
        "whole-document accuracy {accuracy_whole}"
    );
}

#[test]
fn profile_file_round_trips_and_refuses_damage() {
    let samples = vec![
        (
            "eng".to_string(),
            b"the quick brown fox jumps over the lazy dog and the cat".to_vec(),
        ),
        (
            "deu".to_string(),
            b"der schnelle braune fuchs springt uber den faulen hund".to_vec(),
        ),
        (
            "fra".to_string(),
            "le renard brun rapide saute par-dessus le chien paresseux"
                .as_bytes()
                .to_vec(),
        ),
    ];
    let model = train(&samples, TrainingSettings::default());
    let bytes = encode_profile(&model);
    let decoded = decode_profile(&bytes).expect("round trip");
    assert_eq!(decoded.languages, model.languages);
    assert_eq!(
        encode_profile(&decoded),
        bytes,
        "re-encoding is byte-identical"
    );
    assert_eq!(
        decoded.classify(b"the dog and the fox"),
        model.classify(b"the dog and the fox")
    );
    assert!(matches!(decode_profile(b""), Err(ProfileError::BadMagic)));
    assert!(matches!(
        decode_profile(b"PNG\x89 not a profile at all......................"),
        Err(ProfileError::BadMagic)
    ));
    let mut flipped = bytes.clone();
    flipped[bytes.len() / 2] ^= 1;
    assert!(matches!(
        decode_profile(&flipped),
        Err(ProfileError::ChecksumMismatch { .. })
    ));
    let mut future = bytes.clone();
    future[8] = 3;
    assert!(matches!(
        decode_profile(&future),
        Err(ProfileError::UnsupportedVersion { found: 3 })
    ));
    assert_eq!(
        bytes[8], 1,
        "a model without priors or flags is written as version 1"
    );
    assert!(
        decode_profile(&bytes[..bytes.len() - 1]).is_err(),
        "truncated"
    );
    assert!(decode_profile(&bytes[..40]).is_err(), "header only");
}

#[test]
#[ignore = "data test: needs ../shared/data/udhr (scripts/test-data runs it)"]
fn kernel_labels_pieces_and_whole_files_the_same_under_any_chunking() {
    let Some((documents, model)) = subset() else {
        return;
    };
    let model = Arc::new(model);
    let document = &documents[0];
    let text = &document.test_text;
    let pieces = Arc::new(LangIdKernel::new(Arc::clone(&model), 256));
    let (_, summary) = run_all_ways(&pieces as &dyn Kernel, text).expect("labels pieces");
    let Summary::Labels { labels } = summary else {
        panic!("labels expected");
    };
    assert_eq!(labels.len(), text.len().div_ceil(256));
    let whole = Arc::new(LangIdKernel::new(Arc::clone(&model), 0));
    let (_, summary) = run_all_ways(&whole as &dyn Kernel, text).expect("labels the file");
    let Summary::Labels { labels } = summary else {
        panic!("labels expected");
    };
    assert_eq!(labels.len(), 1);
    assert_eq!(labels[0].language, document.language);
    assert_eq!(
        model
            .classify(text)
            .map(|(index, _)| model.languages[index].clone()),
        Some(labels[0].language.clone()),
        "streamed scoring equals one-shot scoring"
    );
    for small in [&b""[..], b"a"] {
        let (_, summary) = run_all_ways(&pieces as &dyn Kernel, small).expect("tiny input");
        assert!(matches!(summary, Summary::Labels { labels } if labels.len() == small.len()));
    }
}

#[test]
fn kernel_options_name_a_missing_or_corrupt_profile_file_and_default_to_the_shipped_one() {
    let missing = flashpipe_kernels::registry::build_kernel(
        "langid",
        &["profiles=/nonexistent/profiles.bin".into()],
    );
    assert!(missing
        .err()
        .expect("refused")
        .to_string()
        .contains("/nonexistent/profiles.bin"));
    let directory = tempfile::tempdir().expect("temp dir");
    let path = directory.path().join("broken.bin");
    std::fs::write(
        &path,
        b"FPLANGID but then garbage follows here and there ....",
    )
    .expect("write");
    let corrupt = flashpipe_kernels::registry::build_kernel(
        "langid",
        &[format!("profiles={}", path.display())],
    );
    assert!(corrupt.is_err());
    assert!(
        flashpipe_kernels::registry::build_kernel("langid", &[]).is_ok(),
        "without profiles= the shipped profile is used"
    );
}

#[test]
fn html_paragraph_extraction_strips_tags_and_decodes_entities() {
    use flashpipe_kernels::langid::html::{decode_entities, paragraph_texts};
    let cases: &[(&str, &[&str])] = &[
        ("<p>plain</p>", &["plain"]),
        (
            "<p class=\"x\">with <b>bold</b>\n  and   spaces</p>",
            &["with bold and spaces"],
        ),
        ("<pre>not a paragraph</pre><param x><p>yes</p>", &["yes"]),
        (
            "<p>a &amp; b &lt;c&gt; &quot;d&quot; &#x26; &#233; &nbsp;e</p>",
            &["a & b <c> \"d\" & é e"],
        ),
        ("<p></p><p>  </p><p>second</p>", &["second"]),
        ("<p>unterminated", &["unterminated"]),
        ("no paragraphs at all", &[]),
    ];
    for (html, expected) in cases {
        assert_eq!(paragraph_texts(html), *expected, "{html}");
    }
    for (text, expected) in [
        (
            "&unknown; & &#xZZ; &#1114112;",
            "&unknown; & &#xZZ; &#1114112;",
        ),
        ("&apos;x&apos;", "'x'"),
    ] {
        assert_eq!(decode_entities(text), expected);
    }
}

#[test]
fn corpus_folders_without_an_index_are_labelled_by_attribute_or_file_name() {
    use flashpipe_kernels::langid::udhr::{load_udhr, CorpusSelection};
    let directory = tempfile::tempdir().expect("temp dir");
    let package = directory.path().join("package");
    let declarations = package.join("declaration");
    std::fs::create_dir_all(&declarations).expect("folders");
    let html = |attributes: &str| {
        format!("<!doctype html>\n<html {attributes}><body><p>one paragraph here</p><p>and a second one</p><p>third</p></body></html>")
    };
    std::fs::write(
        declarations.join("001.html"),
        html("data-code=\"001\" data-iso6393=\"eng\" lang=\"en\""),
    )
    .expect("write");
    std::fs::write(declarations.join("002.html"), html("lang=\"fr\"")).expect("write");
    std::fs::write(declarations.join("003.html"), html("data-iso6393=\"und\"")).expect("write");
    std::fs::write(
        declarations.join("004.html"),
        html("data-iso6393=\"bad code!\""),
    )
    .expect("write");
    std::fs::write(declarations.join("005.html"), html("")).expect("write");
    for folder in [&package, &declarations] {
        let documents = load_udhr(folder, CorpusSelection::default()).expect("a corpus");
        let labels: Vec<(&str, &str)> = documents
            .iter()
            .map(|document| (document.file.as_str(), document.language.as_str()))
            .collect();
        assert_eq!(labels, [("001.html", "eng"), ("002.html", "fr")]);
        assert!(!documents[0].test_text.is_empty());
    }
    let texts = directory.path().join("texts");
    std::fs::create_dir_all(&texts).expect("folder");
    std::fs::write(texts.join("deu.1.txt"), "erste Zeile\n\nzweite Zeile\n").expect("write");
    std::fs::write(texts.join("one-line.txt"), "only one paragraph").expect("write");
    let documents = load_udhr(&texts, CorpusSelection::default()).expect("a corpus");
    assert_eq!(documents.len(), 1);
    assert_eq!(documents[0].language, "deu");
    let empty = directory.path().join("empty");
    std::fs::create_dir_all(&empty).expect("folder");
    let error = load_udhr(&empty, CorpusSelection::default()).expect_err("nothing usable");
    assert!(error.to_string().contains("CODE.txt"), "{error}");
    let missing = load_udhr(
        &directory.path().join("missing"),
        CorpusSelection::default(),
    )
    .expect_err("no folder");
    assert!(missing.to_string().contains("missing"), "{missing}");
}

/// A profile's bytes with `edit` applied and the CRC32C trailer recomputed.
fn resealed(bytes: &[u8], edit: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut content = bytes[..bytes.len() - 4].to_vec();
    edit(&mut content);
    let checksum = crc32c::crc32c(&content);
    content.extend_from_slice(&checksum.to_le_bytes());
    content
}

fn mixed_sources() -> Vec<LanguageSource> {
    let words = |list: &[(&str, u64)]| {
        list.iter()
            .map(|&(word, count)| (word.to_string(), count))
            .collect::<Vec<_>>()
    };
    vec![
        LanguageSource {
            language: "eng".into(),
            texts: Vec::new(),
            words: words(&[("the", 60), ("and", 30), ("file", 10), ("option", 5)]),
        },
        LanguageSource {
            language: "fra".into(),
            texts: Vec::new(),
            words: words(&[("le", 60), ("et", 30), ("fichier", 10), ("les", 20)]),
        },
        LanguageSource {
            language: "oci".into(),
            texts: vec![b"lo fichier e los autres".to_vec()],
            words: Vec::new(),
        },
    ]
}

#[test]
fn version_2_profiles_round_trip_and_refuse_bad_flags_and_priors() {
    let model = train_mixed(&mixed_sources(), MixedSettings::default());
    let bytes = encode_profile(&model);
    assert_eq!(bytes[8], 2, "priors and flags make a version-2 file");
    assert_eq!(bytes[13], 0b11, "known n-grams only, embedded-English rule");
    let decoded = decode_profile(&bytes).expect("round trip");
    assert_eq!(decoded.log_priors, model.log_priors);
    assert!(decoded.known_ngrams_only && decoded.embedded_english_rule);
    assert_eq!(
        encode_profile(&decoded),
        bytes,
        "re-encoding is byte-identical"
    );
    let unknown_flag = resealed(&bytes, |content| content[13] |= 0x80);
    let error = decode_profile(&unknown_flag).unwrap_err().to_string();
    assert!(error.contains("unknown flags"), "{error}");
    let version_1_with_flags = resealed(&bytes, |content| content[8] = 1);
    assert!(decode_profile(&version_1_with_flags).is_err());
    // The first language's prior follows its code and floor: 36 + 1 + 3 + 4.
    let positive_prior = resealed(&bytes, |content| {
        content[44..48].copy_from_slice(&1.5f32.to_le_bytes())
    });
    let error = decode_profile(&positive_prior).unwrap_err().to_string();
    assert!(error.contains("positive log prior"), "{error}");
    for cut in [37, 45, bytes.len() / 2] {
        assert!(decode_profile(&resealed(&bytes[..cut + 4], |_| ())).is_err());
    }
}

#[test]
fn a_rare_language_loses_to_a_common_one_on_little_evidence() {
    let model = train_mixed(&mixed_sources(), MixedSettings::default());
    let language = |text: &[u8]| {
        let (index, _) = model.classify(text).expect("a label");
        model.languages[index].clone()
    };
    // "fichier" is known to French (a word list) and Occitan (one short text).
    assert_eq!(language(b"fichier"), "fra");
    let flat = train_mixed(
        &mixed_sources(),
        MixedSettings {
            rare_log_prior: 0.0,
            ..MixedSettings::default()
        },
    );
    assert!(flat.log_priors.iter().all(|&prior| prior == 0.0));
    assert!(model.log_priors[model.languages.iter().position(|l| l == "oci").unwrap()] < 0.0);
}

#[test]
fn word_lists_refuse_hostile_files_with_file_and_line() {
    let folder = std::env::temp_dir().join(format!("langid-words-{}", std::process::id()));
    let lists = folder.join(WORD_LIST_FOLDER);
    std::fs::create_dir_all(&lists).expect("folder");
    let selection = CorpusSelection::default();
    assert!(
        load_mixed(&folder, selection).is_err(),
        "no word list at all"
    );
    std::fs::write(lists.join("fra.freq.tsv"), "le\t60\nfichier\t10\n\n").expect("write");
    std::fs::write(lists.join("notes.txt"), "ignored").expect("write");
    let corpus = load_mixed(&folder, selection).expect("a good list");
    assert_eq!(corpus.word_lists.len(), 1);
    assert_eq!(corpus.word_lists[0].words[1], ("fichier".to_string(), 10));
    assert!(
        corpus.documents.is_empty(),
        "no udhr folder: word lists only"
    );
    let huge_line = format!("{}\t1\n", "a".repeat(MAX_WORD_LINE_BYTES + 10));
    let cases: [(&[u8], &str); 6] = [
        (b"le\t60\nfichier\n", "line 2: expected word<TAB>count"),
        (b"le\t60\n\xff\xfe\t3\n", "line 2: not UTF-8"),
        (b"le\t0\n", "line 1: the count is not a positive integer"),
        (b"le\t-5\n", "line 1: the count is not a positive integer"),
        (b"two words\t5\n", "line 1: a word is 1 to 255 bytes"),
        (huge_line.as_bytes(), "line 1: line longer than"),
    ];
    for (content, expected) in cases {
        std::fs::write(lists.join("deu.freq.tsv"), content).expect("write");
        let error = load_mixed(&folder, selection).unwrap_err().to_string();
        assert!(
            error.contains("deu.freq.tsv") && error.contains(expected),
            "{error}"
        );
    }
    std::fs::remove_dir_all(&folder).expect("clean up");
}

#[test]
fn held_out_pieces_are_read_by_size_and_scored_per_language() {
    let folder = std::env::temp_dir().join(format!("langid-pieces-{}", std::process::id()));
    std::fs::create_dir_all(&folder).expect("folder");
    assert!(load_piece_sets(&folder).is_err(), "no pieces files");
    std::fs::write(
        folder.join("pieces-2048.tsv"),
        "eng\ta\tthe file and the option\nfra\tb\tle fichier et les\n",
    )
    .expect("write");
    std::fs::write(folder.join("pieces-256.tsv"), "fra\tc\tle fichier\n").expect("write");
    std::fs::write(folder.join("pieces-x.tsv"), "not read").expect("write");
    let sets = load_piece_sets(&folder).expect("pieces");
    assert_eq!(
        sets.iter().map(|set| set.size_bytes).collect::<Vec<_>>(),
        vec![256, 2048]
    );
    let model = train_mixed(&mixed_sources(), MixedSettings::default());
    let accuracy = tally(&sets[1], &predict(&model, &sets[1]));
    assert_eq!(accuracy.total.pieces, 2);
    assert_eq!(accuracy.total.correct, 2, "{accuracy:?}");
    std::fs::write(folder.join("pieces-512.tsv"), "fra only two\tfields\n").expect("write");
    let error = load_piece_sets(&folder).unwrap_err().to_string();
    assert!(error.contains("pieces-512.tsv line 1"), "{error}");
    std::fs::remove_dir_all(&folder).expect("clean up");
}

/// The mixed corpus folder: `$FLASHPIPE_LANGID_CORPUS`, else `langid-corpus` in the shared data
/// folder. No test command fetches it (scripts/fetch-langid-corpus DIR does), so the check that
/// needs it is ignored by default and fails when run without it.
fn fetched_corpus() -> std::path::PathBuf {
    let folder = std::env::var_os("FLASHPIPE_LANGID_CORPUS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            flashpipe_kernels::shared_data::shared_data_directory().join("langid-corpus")
        });
    assert!(
        folder.join(WORD_LIST_FOLDER).is_dir(),
        "{} is absent: run scripts/fetch-langid-corpus DIR, then set FLASHPIPE_LANGID_CORPUS=DIR",
        folder.display()
    );
    folder
}

#[test]
#[ignore = "needs the fetched corpus: scripts/fetch-langid-corpus DIR, FLASHPIPE_LANGID_CORPUS=DIR, --ignored"]
fn the_shipped_profile_is_what_training_on_the_fetched_corpus_gives() {
    let folder = fetched_corpus();
    let corpus = load_mixed(&folder, CorpusSelection::default()).expect("the corpus loads");
    let model = train_mixed(&corpus.training_sources(false), MixedSettings::default());
    assert!(
        encode_profile(&model) == BUILTIN_PROFILE_BYTES,
        "the shipped profile differs from one trained on {}",
        folder.display()
    );
}
