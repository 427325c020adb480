//! The language-profile file: a trained [`LanguageModel`] as a small versioned binary file with a
//! CRC32C trailer. All integers are little-endian. Layout (docs/kernels.md has the same table):
//!
//! | offset | size | field |
//! | --- | --- | --- |
//! | 0 | 8 | magic `FPLANGID` |
//! | 8 | 4 | format version, u32: 1 or 2 |
//! | 12 | 1 | max n-gram order (1..=4) |
//! | 13 | 1 | flags (version 2; zero in version 1): bit 0 = only listed n-grams count |
//! | 14 | 2 | zero |
//! | 16 | 4 | language count L (1..=65535) |
//! | 20 | 4 | feature count F |
//! | 24 | 4 | posting count P |
//! | 28 | 4 | features per language (training setting) |
//! | 32 | 4 | smoothing alpha, f32 |
//! | 36 | .. | L languages: code length u8 (1..=255), code (UTF-8), floor log-probability f32, and in version 2 a log prior f32 |
//! | .. | .. | F features: n-gram length u8 (1..=order), n-gram bytes, posting count u32 |
//! | .. | 6P | P postings in feature order: language index u16, weight f32 |
//! | end-4 | 4 | CRC32C of every byte before it |

use super::model::{ngram_key, LanguageModel, Posting, TrainingSettings, MAX_SUPPORTED_ORDER};

/// The file's first eight bytes.
pub const PROFILE_MAGIC: [u8; 8] = *b"FPLANGID";
/// The newest version this build reads and writes (it also reads and writes version 1:
/// a model without priors that counts every n-gram is written as version 1).
pub const PROFILE_VERSION: u32 = 2;
/// Flag bit of version 2: only n-grams the profile lists count towards `N`.
const FLAG_KNOWN_NGRAMS_ONLY: u8 = 1;
/// Flag bit of version 2: the embedded-English rule applies to pieces.
const FLAG_EMBEDDED_ENGLISH: u8 = 2;
const HEADER_BYTES: usize = 36;

/// A profile file that cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// Reading or writing the file failed.
    #[error("cannot access profile file {path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// Not a profile file at all.
    #[error("not a flashpipe language-profile file (bad magic)")]
    BadMagic,
    /// A version this build does not read.
    #[error("profile format version {found} is not supported (this build reads versions 1 to {PROFILE_VERSION})")]
    UnsupportedVersion {
        /// The version in the file.
        found: u32,
    },
    /// The checksum does not match: the file is damaged.
    #[error("profile file is corrupt: CRC32C {stored:08x} stored, {computed:08x} computed")]
    ChecksumMismatch {
        /// Trailer value.
        stored: u32,
        /// Value over the content.
        computed: u32,
    },
    /// The content is inconsistent (truncated, bad counts or lengths).
    #[error("profile file is malformed at byte {offset_bytes}: {reason}")]
    Malformed {
        /// Where the reader stopped.
        offset_bytes: usize,
        /// What was wrong.
        reason: String,
    },
}

/// Serialises a model.
pub fn encode_profile(model: &LanguageModel) -> Vec<u8> {
    let mut bytes = Vec::new();
    bytes.extend_from_slice(&PROFILE_MAGIC);
    let version_2 = model.known_ngrams_only
        || model.embedded_english_rule
        || model.log_priors.iter().any(|&prior| prior != 0.0);
    let mut flags = 0;
    if model.known_ngrams_only {
        flags |= FLAG_KNOWN_NGRAMS_ONLY;
    }
    if model.embedded_english_rule {
        flags |= FLAG_EMBEDDED_ENGLISH;
    }
    bytes.extend_from_slice(&(if version_2 { 2u32 } else { 1 }).to_le_bytes());
    bytes.extend_from_slice(&[model.settings.max_order as u8, flags, 0, 0]);
    bytes.extend_from_slice(&(model.languages.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&(model.feature_count() as u32).to_le_bytes());
    bytes.extend_from_slice(&(model.posting_count() as u32).to_le_bytes());
    bytes.extend_from_slice(&(model.settings.features_per_language as u32).to_le_bytes());
    bytes.extend_from_slice(&model.settings.smoothing_alpha.to_le_bytes());
    assert_eq!(bytes.len(), HEADER_BYTES);
    assert_eq!(model.log_priors.len(), model.languages.len());
    for ((code, floor), prior) in model
        .languages
        .iter()
        .zip(&model.floor_log_probabilities)
        .zip(&model.log_priors)
    {
        assert!(
            (1..=255).contains(&code.len()),
            "language codes are 1 to 255 bytes"
        );
        bytes.push(code.len() as u8);
        bytes.extend_from_slice(code.as_bytes());
        bytes.extend_from_slice(&floor.to_le_bytes());
        if version_2 {
            bytes.extend_from_slice(&prior.to_le_bytes());
        }
    }
    for key in &model.feature_order {
        let ngram = super::model::ngram_bytes(*key);
        bytes.push(ngram.len() as u8);
        bytes.extend_from_slice(&ngram);
        bytes.extend_from_slice(&model.features[key].1.to_le_bytes());
    }
    for key in &model.feature_order {
        let (start, length) = model.features[key];
        for posting in &model.postings[start as usize..(start + length) as usize] {
            bytes.extend_from_slice(&posting.language_index.to_le_bytes());
            bytes.extend_from_slice(&posting.weight.to_le_bytes());
        }
    }
    let checksum = crc32c::crc32c(&bytes);
    bytes.extend_from_slice(&checksum.to_le_bytes());
    bytes
}

/// A bounds-checked little-endian reader.
struct ProfileReader<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> ProfileReader<'a> {
    fn malformed(&self, reason: impl Into<String>) -> ProfileError {
        ProfileError::Malformed {
            offset_bytes: self.position,
            reason: reason.into(),
        }
    }

    fn take(&mut self, length: usize) -> Result<&'a [u8], ProfileError> {
        let end = self
            .position
            .checked_add(length)
            .filter(|&end| end <= self.bytes.len());
        let end = end.ok_or_else(|| self.malformed("truncated"))?;
        let taken = &self.bytes[self.position..end];
        self.position = end;
        Ok(taken)
    }

    fn u8(&mut self) -> Result<u8, ProfileError> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, ProfileError> {
        Ok(u16::from_le_bytes(
            self.take(2)?.try_into().expect("two bytes"),
        ))
    }

    fn u32(&mut self) -> Result<u32, ProfileError> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("four bytes"),
        ))
    }

    fn f32(&mut self) -> Result<f32, ProfileError> {
        let value = f32::from_le_bytes(self.take(4)?.try_into().expect("four bytes"));
        if !value.is_finite() {
            return Err(self.malformed("non-finite number"));
        }
        Ok(value)
    }
}

/// Checks magic, version and checksum; returns the content without the trailer.
fn verify_envelope(bytes: &[u8]) -> Result<&[u8], ProfileError> {
    if bytes.len() < PROFILE_MAGIC.len() || bytes[..PROFILE_MAGIC.len()] != PROFILE_MAGIC {
        return Err(ProfileError::BadMagic);
    }
    if bytes.len() < HEADER_BYTES + 4 {
        return Err(ProfileError::Malformed {
            offset_bytes: bytes.len(),
            reason: "shorter than the header".into(),
        });
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().expect("four bytes"));
    if !(1..=PROFILE_VERSION).contains(&version) {
        return Err(ProfileError::UnsupportedVersion { found: version });
    }
    let (content, trailer) = bytes.split_at(bytes.len() - 4);
    let stored = u32::from_le_bytes(trailer.try_into().expect("four bytes"));
    let computed = crc32c::crc32c(content);
    if stored != computed {
        return Err(ProfileError::ChecksumMismatch { stored, computed });
    }
    Ok(content)
}

/// Parses a profile file.
pub fn decode_profile(bytes: &[u8]) -> Result<LanguageModel, ProfileError> {
    let content = verify_envelope(bytes)?;
    let mut reader = ProfileReader {
        bytes: content,
        position: 12,
    };
    let version = u32::from_le_bytes(content[8..12].try_into().expect("four bytes"));
    let max_order = usize::from(reader.u8()?);
    if !(1..=MAX_SUPPORTED_ORDER).contains(&max_order) {
        return Err(reader.malformed(format!("n-gram order {max_order} is not 1 to 4")));
    }
    let flags = reader.u8()?;
    let allowed_flags = if version >= 2 {
        FLAG_KNOWN_NGRAMS_ONLY | FLAG_EMBEDDED_ENGLISH
    } else {
        0
    };
    if flags & !allowed_flags != 0 {
        return Err(reader.malformed(format!("unknown flags {flags:#04x}")));
    }
    reader.take(2)?;
    let language_count = reader.u32()? as usize;
    let feature_count = reader.u32()? as usize;
    let posting_count = reader.u32()? as usize;
    let features_per_language = reader.u32()? as usize;
    let smoothing_alpha = reader.f32()?;
    if language_count == 0 || language_count > usize::from(u16::MAX) {
        return Err(reader.malformed(format!("language count {language_count} is not 1 to 65535")));
    }
    let mut model = LanguageModel {
        settings: TrainingSettings {
            max_order,
            features_per_language,
            smoothing_alpha,
        },
        languages: Vec::with_capacity(language_count),
        floor_log_probabilities: Vec::with_capacity(language_count),
        log_priors: Vec::with_capacity(language_count),
        known_ngrams_only: flags & FLAG_KNOWN_NGRAMS_ONLY != 0,
        embedded_english_rule: flags & FLAG_EMBEDDED_ENGLISH != 0,
        features: Default::default(),
        feature_order: Vec::new(),
        postings: Vec::new(),
        scoring: std::sync::OnceLock::new(),
    };
    read_languages(&mut reader, &mut model, language_count, version >= 2)?;
    let feature_lengths = read_feature_keys(&mut reader, max_order, feature_count)?;
    read_postings(&mut reader, &mut model, &feature_lengths, posting_count)?;
    if reader.position != content.len() {
        return Err(reader.malformed("trailing bytes after the postings"));
    }
    Ok(model)
}

fn read_languages(
    reader: &mut ProfileReader<'_>,
    model: &mut LanguageModel,
    count: usize,
    with_priors: bool,
) -> Result<(), ProfileError> {
    for _ in 0..count {
        let length = usize::from(reader.u8()?);
        if length == 0 {
            return Err(reader.malformed("empty language code"));
        }
        let code = std::str::from_utf8(reader.take(length)?)
            .map_err(|_| reader.malformed("language code is not UTF-8"))?;
        model.languages.push(code.to_string());
        model.floor_log_probabilities.push(reader.f32()?);
        let prior = if with_priors { reader.f32()? } else { 0.0 };
        if prior > 0.0 {
            return Err(reader.malformed("a positive log prior"));
        }
        model.log_priors.push(prior);
    }
    Ok(())
}

fn read_feature_keys(
    reader: &mut ProfileReader<'_>,
    max_order: usize,
    count: usize,
) -> Result<Vec<(u64, usize)>, ProfileError> {
    let mut keys = Vec::with_capacity(count.min(1 << 24));
    for _ in 0..count {
        let length = usize::from(reader.u8()?);
        if !(1..=max_order).contains(&length) {
            return Err(reader.malformed(format!("n-gram length {length} is not 1 to {max_order}")));
        }
        let key = ngram_key(reader.take(length)?);
        keys.push((key, reader.u32()? as usize));
    }
    Ok(keys)
}

fn read_postings(
    reader: &mut ProfileReader<'_>,
    model: &mut LanguageModel,
    feature_lengths: &[(u64, usize)],
    posting_count: usize,
) -> Result<(), ProfileError> {
    let total: usize = feature_lengths.iter().map(|(_, length)| length).sum();
    if total != posting_count {
        return Err(reader.malformed(format!(
            "features list {total} postings, header says {posting_count}"
        )));
    }
    let mut postings = Vec::new();
    for &(key, length) in feature_lengths {
        postings.clear();
        for _ in 0..length {
            let language_index = reader.u16()?;
            if usize::from(language_index) >= model.languages.len() {
                return Err(
                    reader.malformed(format!("language index {language_index} out of range"))
                );
            }
            postings.push(Posting {
                language_index,
                weight: reader.f32()?,
            });
        }
        if !model.push_feature(key, &postings) {
            return Err(reader.malformed("the same n-gram twice"));
        }
    }
    Ok(())
}

/// Writes a model to `path`.
pub fn save_profile(model: &LanguageModel, path: &std::path::Path) -> Result<(), ProfileError> {
    std::fs::write(path, encode_profile(model)).map_err(|source| ProfileError::Io {
        path: path.display().to_string(),
        source,
    })
}

/// Reads a model from `path`.
pub fn load_profile(path: &std::path::Path) -> Result<LanguageModel, ProfileError> {
    let bytes = std::fs::read(path).map_err(|source| ProfileError::Io {
        path: path.display().to_string(),
        source,
    })?;
    decode_profile(&bytes)
}
