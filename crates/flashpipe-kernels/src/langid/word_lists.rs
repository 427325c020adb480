//! Word-frequency lists and the mixed corpus layout (docs/kernels.md, "Corpus folders").
//!
//! A mixed corpus folder (what `scripts/fetch-langid-corpus DIR` writes) holds `wordfreq/`, with
//! one `CODE.freq.tsv` file per language (`word<TAB>count` lines, counts positive integers in
//! any unit, a word 1 to 255 bytes of UTF-8 without spaces), and optionally `udhr/`, a corpus
//! folder of any layout [`super::udhr::load_udhr`] reads. Every file is checked whole before
//! anything trains: a line that is too long, not UTF-8 or not `word<TAB>count` is refused with
//! its file and line number.

use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};

use super::mixed::LanguageSource;
use super::udhr::{load_udhr, CorpusError, CorpusSelection, UdhrDocument};

/// Longest line of a word list, in bytes.
pub const MAX_WORD_LINE_BYTES: usize = 1024;
/// Most words of one list.
pub const MAX_WORDS_PER_LIST: usize = 10_000_000;

/// The word-list sub-folder of a mixed corpus.
pub const WORD_LIST_FOLDER: &str = "wordfreq";
/// The running-text sub-folder of a mixed corpus.
pub const TEXT_FOLDER: &str = "udhr";

/// Whether `directory` is a mixed corpus folder (it has a `wordfreq` sub-folder).
pub fn is_mixed_corpus(directory: &Path) -> bool {
    directory.join(WORD_LIST_FOLDER).is_dir()
}

/// A mixed corpus: split running-text documents and word lists.
#[derive(Debug, Clone, Default)]
pub struct MixedCorpus {
    /// Running text (held-out part kept for evaluation).
    pub documents: Vec<UdhrDocument>,
    /// One source per word-list file.
    pub word_lists: Vec<LanguageSource>,
}

impl MixedCorpus {
    /// Training sources: each document's training part and every word list.
    pub fn training_sources(&self, include_held_out: bool) -> Vec<LanguageSource> {
        let mut sources: Vec<LanguageSource> = self
            .documents
            .iter()
            .map(|document| {
                let mut text = document.train_text.clone();
                if include_held_out {
                    text.push(b'\n');
                    text.extend_from_slice(&document.test_text);
                }
                LanguageSource {
                    language: document.language.clone(),
                    texts: vec![text],
                    words: Vec::new(),
                }
            })
            .collect();
        sources.extend(self.word_lists.iter().cloned());
        sources
    }
}

/// Loads a mixed corpus folder.
pub fn load_mixed(
    directory: &Path,
    selection: CorpusSelection,
) -> Result<MixedCorpus, CorpusError> {
    let lists_directory = directory.join(WORD_LIST_FOLDER);
    let mut names: Vec<String> = std::fs::read_dir(&lists_directory)
        .map_err(|source| CorpusError::Io {
            path: lists_directory.clone(),
            source,
        })?
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_file()))
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|name| name.ends_with(".freq.tsv"))
        .collect();
    names.sort();
    let mut word_lists = Vec::new();
    for name in names {
        let language = name.split('.').next().unwrap_or_default();
        if !super::udhr::valid_label(language) {
            continue;
        }
        let words = read_word_list(&lists_directory.join(&name))?;
        if !words.is_empty() {
            word_lists.push(LanguageSource {
                language: language.to_string(),
                texts: Vec::new(),
                words,
            });
        }
    }
    let text_directory = directory.join(TEXT_FOLDER);
    let documents = if text_directory.is_dir() {
        load_udhr(&text_directory, selection)?
    } else {
        Vec::new()
    };
    if word_lists.is_empty() {
        return Err(CorpusError::Empty(lists_directory));
    }
    Ok(MixedCorpus {
        documents,
        word_lists,
    })
}

/// Reads one `word<TAB>count` file.
pub fn read_word_list(path: &Path) -> Result<Vec<(String, u64)>, CorpusError> {
    let bad = |line_number: usize, reason: &str| CorpusError::BadIndex {
        path: PathBuf::from(path),
        line_number,
        reason: reason.to_string(),
    };
    let io_error = |source| CorpusError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io_error)?;
    let mut reader = std::io::BufReader::new(file);
    let mut words = Vec::new();
    let mut line = Vec::new();
    for line_number in 1.. {
        line.clear();
        let read = (&mut reader)
            .take(MAX_WORD_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(io_error)?;
        if read == 0 {
            break;
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        } else if line.len() > MAX_WORD_LINE_BYTES {
            return Err(bad(
                line_number,
                &format!("line longer than {MAX_WORD_LINE_BYTES} bytes"),
            ));
        }
        if line.is_empty() {
            continue;
        }
        let text = std::str::from_utf8(&line).map_err(|_| bad(line_number, "not UTF-8"))?;
        let Some((word, count)) = text.split_once('\t') else {
            return Err(bad(line_number, "expected word<TAB>count"));
        };
        if word.is_empty() || word.len() > 255 || word.contains([' ', '\t', '\r']) {
            return Err(bad(
                line_number,
                "a word is 1 to 255 bytes without spaces or tabs",
            ));
        }
        let count: u64 = count
            .trim_end_matches('\r')
            .parse()
            .ok()
            .filter(|&count| count > 0)
            .ok_or_else(|| bad(line_number, "the count is not a positive integer"))?;
        if words.len() == MAX_WORDS_PER_LIST {
            return Err(bad(
                line_number,
                &format!("more than {MAX_WORDS_PER_LIST} words"),
            ));
        }
        words.push((word.to_string(), count));
    }
    Ok(words)
}
