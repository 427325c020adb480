//! Language identification beyond the UDHR, through the binary: `train-langid` on a mixed corpus
//! (word lists beside running text) writes a version-2 profile that `eval-langid --held-out` and
//! the `langid` kernel use; hostile word lists and held-out folders are refused with the file and
//! line, non-zero, nothing written; and `bench kernels --quick --langid-held-out` prints the
//! anchors section where the anchor tools are installed.

mod common;

use std::path::{Path, PathBuf};

use common::{check_fails_naming, flashpipe_in_env, fresh_folder, succeed, succeed_json, text};

/// A small mixed corpus: word lists for English, French and German, and a running-text folder
/// with one more language (Occitan, known only from text).
fn mixed_corpus(folder: &Path) -> PathBuf {
    let corpus = folder.join("corpus");
    let lists = corpus.join("wordfreq");
    let running = corpus.join("udhr");
    std::fs::create_dir_all(&lists).expect("folder");
    std::fs::create_dir_all(&running).expect("folder");
    let files = [
        (
            "eng.freq.tsv",
            "the\t600\nand\t300\nof\t280\nfile\t50\nto\t250\nis\t120\noption\t20\nwith\t90\n",
        ),
        (
            "fra.freq.tsv",
            "le\t600\nla\t500\net\t300\nde\t580\nles\t400\nfichier\t40\nest\t200\navec\t90\n",
        ),
        (
            "deu.freq.tsv",
            "der\t600\ndie\t580\nund\t400\nist\t200\ndatei\t40\nmit\t150\nnicht\t120\n",
        ),
    ];
    for (name, content) in files {
        std::fs::write(lists.join(name), content).expect("write");
    }
    std::fs::write(
        running.join("oci.txt"),
        "Totes las personas naisson liuras e egalas en dignitat e en dreches.\nSon dotadas de rason e de consciéncia e lor cal agir entre elas amb un esperit de fraternitat.\n",
    )
    .expect("write");
    corpus
}

fn held_out(folder: &Path) -> PathBuf {
    let pieces = folder.join("held-out");
    std::fs::create_dir_all(&pieces).expect("folder");
    std::fs::write(
        pieces.join("pieces-256.tsv"),
        "eng\tt:1\tthe file is with the option and the rest of the file\n\
         fra\tt:2\tle fichier est avec les options de la commande et le reste\n\
         deu\tt:3\tdie datei ist mit der option und nicht mit der anderen\n",
    )
    .expect("write");
    pieces
}

/// `flashpipe kernels train-langid --corpus CORPUS --out PROFILE EXTRA...`.
fn train_arguments<'a>(corpus: &'a Path, profile: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let command = ["kernels", "train-langid", "--corpus", text(corpus)];
    [&command[..], &["--out", text(profile)], extra].concat()
}

/// `flashpipe kernels eval-langid --profiles PROFILES --held-out PIECES EXTRA...`.
fn eval_arguments<'a>(profiles: &'a str, pieces: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let command = ["kernels", "eval-langid", "--profiles", profiles];
    [&command[..], &["--held-out", text(pieces)], extra].concat()
}

#[test]
fn a_mixed_corpus_trains_a_version_2_profile_that_eval_and_the_kernel_use() {
    let folder = fresh_folder("langid-mixed");
    let corpus = mixed_corpus(&folder);
    let profile = folder.join("mixed.langid");
    let report = succeed_json(&train_arguments(&corpus, &profile, &["--json"]));
    assert_eq!(report["languages"], 4, "{report}");
    assert_eq!(report["word_lists"], 3, "{report}");
    let bytes = std::fs::read(&profile).expect("the profile");
    assert_eq!(&bytes[..8], b"FPLANGID");
    assert_eq!(bytes[8], 2, "a version-2 profile");
    let pieces = held_out(&folder);
    let table = succeed(&eval_arguments(text(&profile), &pieces, &[]));
    assert!(table.contains("| 256 B | 3 | 3 | 100.00% |"), "{table}");
    let builtin = succeed_json(&eval_arguments("builtin", &pieces, &["--json"]));
    assert_eq!(builtin["languages"], 445, "{builtin}");
    assert_eq!(builtin["sizes"][0]["total"]["pieces"], 3, "{builtin}");
    let sample = folder.join("q.txt");
    std::fs::write(
        &sample,
        "le fichier est avec les options de la commande et le reste",
    )
    .expect("write");
    let labels = succeed(&[
        "kernels",
        "run",
        "langid",
        &format!("profiles={}", text(&profile)),
        "piece=0",
        text(&sample),
    ]);
    assert!(labels.contains("fra"), "{labels}");
}

#[test]
fn hostile_word_lists_and_held_out_folders_are_refused_with_file_and_line() {
    let folder = fresh_folder("langid-hostile");
    let corpus = mixed_corpus(&folder);
    let profile = folder.join("never.langid");
    let list = corpus.join("wordfreq").join("deu.freq.tsv");
    let long_line = format!("{}\t1\n", "x".repeat(5000));
    let cases: [(&[u8], &str); 4] = [
        (b"der\t600\ndie\n", "line 2: expected word<TAB>count"),
        (b"der\t600\n\xc3\x28\t5\n", "line 2: not UTF-8"),
        (
            b"der\tmany\n",
            "line 1: the count is not a positive integer",
        ),
        (long_line.as_bytes(), "line 1: line longer than 1024 bytes"),
    ];
    for (content, expected) in cases {
        std::fs::write(&list, content).expect("write");
        check_fails_naming(
            &train_arguments(&corpus, &profile, &[]),
            &["deu.freq.tsv", expected],
        );
        assert!(!profile.exists(), "nothing written for {expected}");
    }
    std::fs::write(&list, "der\t600\n").expect("write");
    check_fails_naming(
        &train_arguments(&corpus, &profile, &["--rare-prior", "3"]),
        &["--rare-prior 3"],
    );
    assert!(!profile.exists());
    let missing = folder.join("no-such-folder");
    check_fails_naming(
        &eval_arguments("builtin", &missing, &[]),
        &["no-such-folder"],
    );
    let pieces = folder.join("bad-pieces");
    std::fs::create_dir_all(&pieces).expect("folder");
    check_fails_naming(
        &eval_arguments("builtin", &pieces, &[]),
        &["no pieces-SIZE.tsv files", "scripts/fetch-langid-eval"],
    );
    std::fs::write(pieces.join("pieces-512.tsv"), b"fra\tonly two fields\n").expect("write");
    check_fails_naming(
        &eval_arguments("builtin", &pieces, &[]),
        &[
            "pieces-512.tsv line 1",
            "expected label<TAB>source<TAB>text",
        ],
    );
}

/// The anchors' interpreter: `$FLASHPIPE_LANGID_PYTHON`, else the repository's `.venv-langid`
/// (scripts/langid-anchors-venv makes it).
fn anchor_python() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("FLASHPIPE_LANGID_PYTHON") {
        return Some(PathBuf::from(path));
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv-langid/bin/python");
    venv.is_file().then_some(venv)
}

#[test]
fn bench_kernels_quick_prints_the_language_id_anchors_where_installed() {
    let Some(python) = anchor_python() else {
        let why = "no .venv-langid and no FLASHPIPE_LANGID_PYTHON (scripts/langid-anchors-venv makes the environment)";
        assert!(
            std::env::var("FLASHPIPE_REQUIRE_TOOLS").as_deref() != Ok("1"),
            "{why}; the language ID anchors are required (FLASHPIPE_REQUIRE_TOOLS=1)"
        );
        eprintln!("note: {why}: the bench anchors test does not run");
        return;
    };
    let folder = fresh_folder("langid-bench");
    let pieces = held_out(&folder);
    std::fs::rename(
        pieces.join("pieces-256.tsv"),
        pieces.join("pieces-2048.tsv"),
    )
    .expect("rename");
    let output = flashpipe_in_env(
        &[
            "bench",
            "kernels",
            "--quick",
            "--dir",
            text(&folder.join("bench")),
            "--langid-held-out",
            text(&pieces),
        ],
        &[("FLASHPIPE_LANGID_PYTHON", text(&python))],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("Language identification on held-out text"),
        "{stdout}"
    );
    assert!(stdout.contains("langid.py"), "{stdout}");
    assert!(
        stdout.contains("target: accuracy >= langid.py at 2048 B: MET")
            || stdout.contains("target: accuracy >= langid.py at 2048 B: NOT MET"),
        "{stdout}"
    );
}
