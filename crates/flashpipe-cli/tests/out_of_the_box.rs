//! What a fresh clone does with no `../shared` folder, through the binary: the demo runs its
//! near-data part (language ID with the shipped profile, Sobel on a generated image), the
//! `langid` kernel labels text with no `profiles=` option, `train-langid` without a corpus says
//! how to get one and writes nothing, and retraining from a folder of `CODE.txt` files is one
//! command. The shared folder is hidden by pointing `FLASHPIPE_SHARED_DATA` at an empty folder.
//! One test compares the shipped profile with one retrained from the UDHR corpus, and uses
//! extra data from ../shared when present.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{command_line, fresh_folder};
use flashpipe_kernels::shared_data::{optional_shared_folder, SHARED_DATA_VARIABLE};

/// Runs the binary in `folder` with the shared data folder hidden (an empty folder).
fn without_shared(folder: &Path, arguments: &[&str]) -> Output {
    let empty = folder.join("no-shared-data");
    std::fs::create_dir_all(&empty).expect("empty shared folder");
    Command::new(env!("CARGO_BIN_EXE_flashpipe"))
        .args(arguments)
        .current_dir(folder)
        .env(SHARED_DATA_VARIABLE, &empty)
        .output()
        .expect("the flashpipe binary runs")
}

/// [`without_shared`] for a command that must succeed (its standard error printed if not).
fn succeed_without_shared(folder: &Path, arguments: &[&str]) -> Output {
    let output = without_shared(folder, arguments);
    assert!(output.status.success(), "{}", stderr(&output));
    output
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The language of each file's first label in `kernels run langid --json` output.
fn first_labels(output: &Output) -> Vec<(String, String)> {
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    report
        .as_array()
        .expect("one entry per file")
        .iter()
        .map(|entry| {
            (
                entry["file"].as_str().unwrap_or_default().to_string(),
                entry["summary"]["labels"][0]["language"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect()
}

#[test]
fn the_demo_runs_language_id_and_sobel_without_shared_data() {
    let folder = fresh_folder("demo-no-shared");
    let output = succeed_without_shared(&folder, &["demo", "--large-file-size", "4MiB"]);
    let text = stdout(&output);
    assert!(text.contains("shipped profile"), "{text}");
    let langid = text
        .lines()
        .find(|line| line.starts_with("langid"))
        .unwrap_or_else(|| panic!("no langid row: {text}"));
    assert!(langid.split_whitespace().nth(1) == Some("24"), "{langid}");
    let labelled = text
        .lines()
        .find(|line| line.contains("held-out pieces labelled correctly"))
        .unwrap_or_else(|| panic!("no accuracy line: {text}"));
    let counts: Vec<u64> = labelled
        .split_whitespace()
        .filter_map(|word| word.parse().ok())
        .collect();
    let [correct, total, ..] = counts[..] else {
        panic!("no counts in {labelled}");
    };
    assert!(correct * 10 >= total * 9, "{labelled}");
    assert!(text.lines().any(|line| line.starts_with("sobel")), "{text}");
    assert!(text.contains("generated:rings.png"), "{text}");
    let last = text.lines().last().unwrap_or_default();
    assert!(last.starts_with("next: `flashpipe ls "), "{last}");
    let listed = succeed_without_shared(&folder, &["ls", "demo-store/demo.toml", "generated:*"]);
    assert!(
        stdout(&listed).contains("generated:rings.png.edges.png"),
        "{}",
        stdout(&listed)
    );
}

#[test]
fn langid_uses_the_shipped_profile_without_options() {
    let folder = fresh_folder("langid-builtin");
    let texts = [
        ("en.txt", "All human beings are born free and equal in dignity and rights. They are endowed with reason and conscience.", "eng"),
        ("fr.txt", "Tous les êtres humains naissent libres et égaux en dignité et en droits. Ils sont doués de raison et de conscience.", "fra"),
        ("de.txt", "Alle Menschen sind frei und gleich an Würde und Rechten geboren. Sie sind mit Vernunft und Gewissen begabt.", "deu"),
    ];
    let mut arguments = vec!["kernels", "run", "langid", "--json"];
    for (name, text, _) in texts {
        std::fs::write(folder.join(name), text).expect("write a text");
        arguments.push(name);
    }
    let output = succeed_without_shared(&folder, &arguments);
    let expected: Vec<(String, String)> = texts
        .iter()
        .map(|(name, _, language)| (name.to_string(), language.to_string()))
        .collect();
    assert_eq!(first_labels(&output), expected, "{}", stdout(&output));
}

#[test]
fn train_langid_without_a_corpus_says_how_to_get_one_and_writes_nothing() {
    let folder = fresh_folder("train-no-corpus");
    let output = without_shared(&folder, &["kernels", "train-langid", "--out", "p.bin"]);
    assert!(!output.status.success());
    let message = stderr(&output);
    assert!(message.contains("--corpus DIR"), "{message}");
    assert!(message.contains("scripts/fetch-udhr"), "{message}");
    assert!(!message.contains("panicked"), "{message}");
    assert!(!folder.join("p.bin").exists());
    let output = without_shared(
        &folder,
        &command_line("kernels train-langid --corpus missing --out p.bin", &[]),
    );
    assert!(!output.status.success());
    assert!(stderr(&output).contains("missing"), "{}", stderr(&output));
    assert!(!folder.join("p.bin").exists());
}

#[test]
fn retraining_from_a_folder_of_text_files_is_one_command() {
    let folder = fresh_folder("train-text-corpus");
    let corpus = folder.join("corpus");
    std::fs::create_dir_all(&corpus).expect("corpus folder");
    let english = "the cat sat on the mat and the dog ran in the park\nwhere is the house of the king\nthe weather is nice today and the sun is shining\nwe walk to the shop with our friends";
    let spanish = "el gato se sienta en la alfombra y el perro corre en el parque\ndonde esta la casa del rey\nhoy hace buen tiempo y el sol brilla\ncaminamos a la tienda con nuestros amigos";
    std::fs::write(corpus.join("eng.txt"), english).expect("write");
    std::fs::write(corpus.join("spa.txt"), spanish).expect("write");
    std::fs::write(corpus.join("notes.md"), "ignored").expect("write");
    let train = command_line(
        "kernels train-langid --corpus corpus --out p.bin --json",
        &[],
    );
    let output = succeed_without_shared(&folder, &train);
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(report["languages"], 2, "{report}");
    std::fs::write(folder.join("q.txt"), "el perro y el gato en la casa").expect("write");
    let run = command_line(
        "kernels run langid profiles=p.bin piece=0 q.txt --json",
        &[],
    );
    let output = succeed_without_shared(&folder, &run);
    assert_eq!(
        first_labels(&output),
        [("q.txt".to_string(), "spa".to_string())],
        "{}",
        stdout(&output)
    );
}

#[test]
#[ignore = "data test: needs ../shared/data/udhr (scripts/test-data runs it)"]
fn the_shipped_profile_is_what_training_on_the_udhr_corpus_gives() {
    let Some(udhr) = optional_shared_folder(env!("CARGO_MANIFEST_DIR"), "udhr") else {
        return;
    };
    let folder = fresh_folder("builtin-retrained");
    let output = Command::new(env!("CARGO_BIN_EXE_flashpipe"))
        .args(["kernels", "train-langid", "--corpus"])
        .arg(&udhr)
        .args(["--out", "p.bin"])
        .current_dir(&folder)
        .output()
        .expect("the flashpipe binary runs");
    assert!(output.status.success(), "{}", stderr(&output));
    let retrained = std::fs::read(folder.join("p.bin")).expect("the profile");
    let shipped = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../flashpipe-kernels/profiles/udhr.langid"),
    )
    .expect("the shipped profile");
    assert!(
        retrained == shipped,
        "the shipped profile differs from a retrained one"
    );
}
