//! Training on a mixed corpus (docs/kernels.md, "Corpus folders"): running text (the UDHR
//! translations) and word-frequency lists (wordfreq) for one profile, with priors.
//!
//! Differences from [`super::model::train`] (version-1 profiles):
//! - n-gram counts are real numbers: a word list adds the n-grams of ` word ` (spaces marking
//!   the word's boundaries) weighted by the word's share of `word_tokens` running words, so a
//!   list stands for that much text;
//! - the model scores only the n-grams it lists (`known_ngrams_only`): an n-gram no language
//!   keeps (a name, a number, an English technical word's rare 4-gram) is ignored instead of
//!   costing every language its floor, as langid.py ignores n-grams outside its feature set;
//!   each language's total is over the listed n-grams only;
//! - an n-gram a language with a word list does not keep gets the probability of
//!   `floor_fraction` times the count of the least frequent n-gram it keeps (not of a count of
//!   0): such a language keeps only its most frequent n-grams, and the others are not unseen
//!   (a language known from running text alone keeps nearly all it saw, and its unkept n-grams
//!   get the smoothed count of 0 as in version 1);
//! - each language has a log prior: 0 for languages with a word list (text seen in real use),
//!   `rare_log_prior` (negative) for the others, so that a language known only from one short
//!   translation needs clearer evidence to win.

use rustc_hash::FxHashMap;

use super::model::{LanguageModel, Posting, TrainingSettings, MAX_SUPPORTED_ORDER};

/// How a mixed model is trained.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MixedSettings {
    /// Orders, n-grams kept per language, smoothing.
    pub base: TrainingSettings,
    /// Running words a word list stands for.
    pub word_tokens: f64,
    /// An unkept n-gram's count, as a fraction of the least kept one's.
    pub floor_fraction: f64,
    /// Log prior of a language without a word list (0 or negative).
    pub rare_log_prior: f32,
    /// Whether the model applies the embedded-English rule ([`LanguageModel::embedded_english_rule`]).
    pub embedded_english_rule: bool,
}

impl Default for MixedSettings {
    fn default() -> Self {
        Self {
            base: TrainingSettings::default(),
            word_tokens: 1_000_000.0,
            floor_fraction: 0.01,
            rare_log_prior: -8.0,
            embedded_english_rule: true,
        }
    }
}

/// Everything one language trains on.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LanguageSource {
    /// The label.
    pub language: String,
    /// Running texts.
    pub texts: Vec<Vec<u8>>,
    /// (word, frequency in any unit) pairs.
    pub words: Vec<(String, u64)>,
}

/// N-grams of one language with their (real-valued) counts, most frequent first.
fn weighted_counts(source: &LanguageSource, settings: &MixedSettings) -> Vec<(u64, f64)> {
    let max_order = settings.base.max_order;
    let mut counts: FxHashMap<u64, f64> = FxHashMap::default();
    let mut add = |text: &[u8], weight: f64| {
        for start in 0..text.len() {
            let mut key = 0u64;
            for order in 1..=max_order {
                let Some(&byte) = text.get(start + order - 1) else {
                    break;
                };
                key = (key << 8) | u64::from(byte.to_ascii_lowercase());
                *counts
                    .entry(key | ((order as u64) << (8 * order)))
                    .or_insert(0.0) += weight;
            }
        }
    };
    for text in &source.texts {
        add(text, 1.0);
    }
    let word_total: f64 = source.words.iter().map(|(_, count)| *count as f64).sum();
    if word_total > 0.0 {
        let mut padded = Vec::new();
        for (word, count) in &source.words {
            padded.clear();
            padded.push(b' ');
            padded.extend_from_slice(word.as_bytes());
            padded.push(b' ');
            add(&padded, *count as f64 / word_total * settings.word_tokens);
        }
    }
    let mut entries: Vec<(u64, f64)> = counts.into_iter().collect();
    entries.sort_unstable_by(|left, right| right.1.total_cmp(&left.1).then(left.0.cmp(&right.0)));
    entries
}

/// How many of a language's most frequent n-grams are remembered for its total over the
/// vocabulary (the rest are too rare to matter).
const REMEMBERED_PER_LANGUAGE: usize = 50_000;

/// Trains a version-2 model (see the module documentation). Sources sharing a label are merged.
pub fn train_mixed(sources: &[LanguageSource], settings: MixedSettings) -> LanguageModel {
    assert!(
        (1..=MAX_SUPPORTED_ORDER).contains(&settings.base.max_order),
        "n-gram order 1 to 4"
    );
    assert!(
        settings.rare_log_prior <= 0.0 && settings.floor_fraction > 0.0,
        "a non-positive prior and a positive floor fraction"
    );
    let mut merged: std::collections::BTreeMap<&str, LanguageSource> = Default::default();
    for source in sources {
        let entry = merged.entry(&source.language).or_default();
        entry.language.clone_from(&source.language);
        entry.texts.extend(source.texts.iter().cloned());
        entry.words.extend(source.words.iter().cloned());
    }
    assert!(
        merged.len() <= usize::from(u16::MAX),
        "at most 65535 languages"
    );
    let keep = settings.base.features_per_language;
    let mut remembered: Vec<Vec<(u64, f64)>> = Vec::with_capacity(merged.len());
    let mut vocabulary: std::collections::BTreeMap<u64, Vec<Posting>> = Default::default();
    for source in merged.values() {
        let mut counts = weighted_counts(source, &settings);
        counts.truncate(REMEMBERED_PER_LANGUAGE.max(keep));
        for &(key, _) in counts.iter().take(keep) {
            vocabulary.entry(key).or_default();
        }
        remembered.push(counts);
    }
    let alpha = f64::from(settings.base.smoothing_alpha);
    let vocabulary_size = vocabulary.len() as f64;
    let mut floors = Vec::with_capacity(merged.len());
    for (language_index, (counts, source)) in remembered.iter().zip(merged.values()).enumerate() {
        let total: f64 = counts
            .iter()
            .filter(|(key, _)| vocabulary.contains_key(key))
            .map(|(_, count)| count)
            .sum();
        let kept = &counts[..counts.len().min(keep)];
        let least_kept = kept.last().map_or(0.0, |&(_, count)| count);
        let floor_count = if source.words.is_empty() {
            alpha
        } else {
            least_kept * settings.floor_fraction + alpha
        };
        floors.push((floor_count / (total + alpha * vocabulary_size)).ln() as f32);
        for &(key, count) in kept {
            vocabulary
                .get_mut(&key)
                .expect("kept n-grams are in the vocabulary")
                .push(Posting {
                    language_index: language_index as u16,
                    weight: ((count + alpha) / floor_count).ln().max(0.0) as f32,
                });
        }
    }
    let log_priors = merged
        .values()
        .map(|source| {
            if source.words.is_empty() {
                settings.rare_log_prior
            } else {
                0.0
            }
        })
        .collect();
    let mut model = LanguageModel {
        settings: settings.base,
        languages: merged.keys().map(|language| language.to_string()).collect(),
        floor_log_probabilities: floors,
        log_priors,
        known_ngrams_only: true,
        embedded_english_rule: settings.embedded_english_rule,
        features: FxHashMap::default(),
        feature_order: Vec::new(),
        postings: Vec::new(),
        scoring: std::sync::OnceLock::new(),
    };
    for (key, postings) in vocabulary {
        model.push_feature(key, &postings);
    }
    model
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_source(language: &str, text: &str) -> LanguageSource {
        LanguageSource {
            language: language.into(),
            texts: vec![text.as_bytes().to_vec()],
            words: Vec::new(),
        }
    }

    #[test]
    fn words_stand_for_text_and_unknown_ngrams_are_ignored() {
        let sources = vec![
            LanguageSource {
                language: "aaa".into(),
                texts: Vec::new(),
                words: vec![("alpha".into(), 5), ("beta".into(), 3)],
            },
            LanguageSource {
                language: "bbb".into(),
                texts: Vec::new(),
                words: vec![("gamma".into(), 5), ("delta".into(), 3)],
            },
        ];
        let model = train_mixed(&sources, MixedSettings::default());
        assert!(model.known_ngrams_only);
        let (index, _) = model.classify(b"alpha beta alpha").expect("a label");
        assert_eq!(model.languages[index], "aaa");
        // "zzzz qqqq" has no n-gram either language keeps but the spaces.
        let (index, _) = model
            .classify(b"gamma zzzzzzzz qqqqqqqq xxxxxxx")
            .expect("a label");
        assert_eq!(model.languages[index], "bbb");
    }

    #[test]
    fn a_rare_language_loses_to_a_common_one_on_ambiguous_text() {
        // Both languages know "banana" equally; only the prior separates them.
        let common = LanguageSource {
            language: "com".into(),
            texts: Vec::new(),
            words: vec![("banana".into(), 1)],
        };
        let rare = text_source("rar", " banana banana banana banana ");
        let settings = MixedSettings {
            word_tokens: 4.0,
            ..MixedSettings::default()
        };
        let model = train_mixed(&[common.clone(), rare.clone()], settings);
        assert!(model.log_priors[1] < 0.0 && model.log_priors[0] == 0.0);
        let (index, _) = model.classify(b"banana").expect("a label");
        assert_eq!(model.languages[index], "com");
        let flat = train_mixed(
            &[common, rare],
            MixedSettings {
                rare_log_prior: 0.0,
                ..settings
            },
        );
        assert_eq!(flat.log_priors, vec![0.0, 0.0]);
    }

    #[test]
    fn training_is_deterministic_and_merges_labels() {
        let sources = vec![
            text_source("xx", "one two three"),
            text_source("yy", "uno dos tres"),
            text_source("xx", "four five six"),
        ];
        let first = train_mixed(&sources, MixedSettings::default());
        let second = train_mixed(&sources, MixedSettings::default());
        assert_eq!(first.languages, vec!["xx".to_string(), "yy".to_string()]);
        assert_eq!(
            super::super::profile_file::encode_profile(&first),
            super::super::profile_file::encode_profile(&second)
        );
    }
}
