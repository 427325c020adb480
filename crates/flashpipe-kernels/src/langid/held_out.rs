//! Held-out evaluation text (docs/kernels.md, "Held-out text"): the pieces
//! `scripts/fetch-langid-eval DIR` lays out as `DIR/pieces-SIZE.tsv`, one piece a line,
//! `label<TAB>source<TAB>text`, and accuracy over them per piece size and per language.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::model::LanguageModel;

/// Largest pieces file read, in bytes.
pub const MAX_PIECES_FILE_BYTES: u64 = 256 << 20;

/// The held-out pieces could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HeldOutError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A line is not `label<TAB>source<TAB>text`.
    #[error("{path} line {line_number}: {reason}")]
    BadLine {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line_number: usize,
        /// What is wrong.
        reason: String,
    },
    /// No pieces file.
    #[error("no pieces-SIZE.tsv files in {0}: scripts/fetch-langid-eval DIR lays them out")]
    Empty(PathBuf),
    /// A file is over the size limit.
    #[error("{path} is larger than {MAX_PIECES_FILE_BYTES} bytes")]
    TooLarge {
        /// The file.
        path: PathBuf,
    },
}

/// One held-out piece.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldOutPiece {
    /// The true label (ISO 639-3).
    pub label: String,
    /// Where it came from (package and file).
    pub source: String,
    /// The text.
    pub text: String,
}

/// All pieces of one size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PieceSet {
    /// The nominal piece size (the file name's).
    pub size_bytes: usize,
    /// The pieces, in file order.
    pub pieces: Vec<HeldOutPiece>,
}

/// Reads every `pieces-SIZE.tsv` of `directory`, smallest size first.
pub fn load_piece_sets(directory: &Path) -> Result<Vec<PieceSet>, HeldOutError> {
    let io_error = |path: &Path| {
        let path = path.to_path_buf();
        move |source| HeldOutError::Io { path, source }
    };
    let mut sets = Vec::new();
    for entry in std::fs::read_dir(directory).map_err(io_error(directory))? {
        let entry = entry.map_err(io_error(directory))?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        let Some(size) = name
            .strip_prefix("pieces-")
            .and_then(|rest| rest.strip_suffix(".tsv"))
            .and_then(|size| size.parse::<usize>().ok())
            .filter(|&size| size > 0)
        else {
            continue;
        };
        let path = entry.path();
        let metadata = std::fs::metadata(&path).map_err(io_error(&path))?;
        if !metadata.is_file() {
            continue;
        }
        if metadata.len() > MAX_PIECES_FILE_BYTES {
            return Err(HeldOutError::TooLarge { path });
        }
        let bytes = std::fs::read(&path).map_err(io_error(&path))?;
        sets.push(PieceSet {
            size_bytes: size,
            pieces: parse_pieces(&path, &bytes)?,
        });
    }
    if sets.is_empty() {
        return Err(HeldOutError::Empty(directory.to_path_buf()));
    }
    sets.sort_by_key(|set| set.size_bytes);
    Ok(sets)
}

/// Parses the lines of one pieces file.
pub fn parse_pieces(path: &Path, bytes: &[u8]) -> Result<Vec<HeldOutPiece>, HeldOutError> {
    let mut pieces = Vec::new();
    for (index, line) in bytes.split(|&byte| byte == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        let bad = |reason: &str| HeldOutError::BadLine {
            path: path.to_path_buf(),
            line_number: index + 1,
            reason: reason.to_string(),
        };
        let line = std::str::from_utf8(line).map_err(|_| bad("not UTF-8"))?;
        let mut fields = line.splitn(3, '\t');
        let (Some(label), Some(source), Some(text)) = (fields.next(), fields.next(), fields.next())
        else {
            return Err(bad("expected label<TAB>source<TAB>text"));
        };
        if label.is_empty() || label.len() > 64 || text.is_empty() {
            return Err(bad("empty text, or a label empty or over 64 bytes"));
        }
        pieces.push(HeldOutPiece {
            label: label.to_string(),
            source: source.to_string(),
            text: text.to_string(),
        });
    }
    Ok(pieces)
}

/// Correct and total pieces of one language (or of all).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    /// Pieces.
    pub pieces: u64,
    /// Pieces labelled right.
    pub correct: u64,
}

impl Tally {
    /// `correct / pieces` (0 without pieces).
    pub fn accuracy(&self) -> f64 {
        if self.pieces == 0 {
            0.0
        } else {
            self.correct as f64 / self.pieces as f64
        }
    }
}

/// Accuracy over one piece set.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PieceSetAccuracy {
    /// Nominal piece size.
    pub size_bytes: usize,
    /// All pieces.
    pub total: Tally,
    /// Per true label.
    pub per_language: BTreeMap<String, Tally>,
    /// (true label, predicted label) -> count, for the wrong ones.
    pub confusions: BTreeMap<String, u64>,
}

/// The label a prediction counts as for a true label (macrolanguages and their members:
/// docs/kernels.md, "Held-out text", says which codes are one).
pub fn same_language(truth: &str, predicted: &str) -> bool {
    const EQUIVALENT: &[(&str, &str)] = &[
        ("nob", "nor"),
        ("zsm", "zlm"),
        ("zsm", "msa"),
        ("zlm", "msa"),
        ("pes", "fas"),
        ("cmn", "zho"),
        ("arb", "ara"),
        ("lvs", "lav"),
        ("ekk", "est"),
    ];
    truth == predicted
        || EQUIVALENT
            .iter()
            .any(|&(a, b)| (truth == a && predicted == b) || (truth == b && predicted == a))
}

/// Tallies predictions (one per piece, in order; `None` = no label).
pub fn tally(set: &PieceSet, predictions: &[Option<String>]) -> PieceSetAccuracy {
    assert_eq!(
        set.pieces.len(),
        predictions.len(),
        "one prediction a piece"
    );
    let mut accuracy = PieceSetAccuracy {
        size_bytes: set.size_bytes,
        total: Tally::default(),
        per_language: BTreeMap::new(),
        confusions: BTreeMap::new(),
    };
    for (piece, predicted) in set.pieces.iter().zip(predictions) {
        let right = predicted
            .as_deref()
            .is_some_and(|predicted| same_language(&piece.label, predicted));
        let entry = accuracy
            .per_language
            .entry(piece.label.clone())
            .or_default();
        entry.pieces += 1;
        accuracy.total.pieces += 1;
        if right {
            entry.correct += 1;
            accuracy.total.correct += 1;
        } else {
            let key = format!(
                "{}->{}",
                piece.label,
                predicted.as_deref().unwrap_or("none")
            );
            *accuracy.confusions.entry(key).or_default() += 1;
        }
    }
    accuracy
}

/// flashpipe's predictions for a piece set.
pub fn predict(model: &LanguageModel, set: &PieceSet) -> Vec<Option<String>> {
    let mut scratch = model.new_scores();
    set.pieces
        .iter()
        .map(|piece| {
            model
                .classify_with(&mut scratch, piece.text.as_bytes())
                .map(|(index, _)| model.languages[index].clone())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_lines_are_refused_with_their_number() {
        let path = Path::new("pieces-2048.tsv");
        let good = parse_pieces(path, b"fra\tx\tbonjour\n\ndeu\ty\thallo\tmit tab\n").unwrap();
        assert_eq!(good.len(), 2);
        assert_eq!(good[1].text, "hallo\tmit tab");
        for (bytes, reason) in [
            (&b"fra\tx\n"[..], "expected label"),
            (b"fra\tx\t\xff\xfe\n", "not UTF-8"),
            (b"\tx\ttext\n", "label empty"),
        ] {
            let error = parse_pieces(path, bytes).unwrap_err().to_string();
            assert!(
                error.contains("line 1") && error.contains(reason),
                "{error}"
            );
        }
    }

    #[test]
    fn macrolanguages_count_as_their_members() {
        assert!(same_language("nob", "nor") && same_language("nor", "nob"));
        assert!(!same_language("nob", "nno") && !same_language("fra", "oci"));
        let set = PieceSet {
            size_bytes: 4,
            pieces: vec![
                HeldOutPiece {
                    label: "nob".into(),
                    source: "a".into(),
                    text: "hei".into(),
                },
                HeldOutPiece {
                    label: "fra".into(),
                    source: "b".into(),
                    text: "oui".into(),
                },
            ],
        };
        let accuracy = tally(&set, &[Some("nor".into()), Some("oci".into())]);
        assert_eq!(
            accuracy.total,
            Tally {
                pieces: 2,
                correct: 1
            }
        );
        assert_eq!(accuracy.confusions["fra->oci"], 1);
    }
}
