//! The language model: multinomial naive Bayes over byte n-grams (orders 1..=max_order), in the
//! style of langid.py (Lui & Baldwin, "langid.py: An Off-the-shelf Language Identification Tool",
//! ACL 2012), which also scores byte 1-4-grams with naive Bayes.
//!
//! Each language keeps its `features_per_language` most frequent n-grams. With additive smoothing
//! `alpha` over a vocabulary of `V` n-grams (the union of kept n-grams), the log-probability of an
//! n-gram `g` in language `L` is `ln((count(g, L) + alpha) / (total(L) + alpha * V))`. It is split
//! as `floor(L) = ln(alpha / (total(L) + alpha * V))` (what any n-gram gets) plus, for kept
//! n-grams, `weight(g, L) = ln((count(g, L) + alpha) / alpha)`. A text with `N` n-grams scores
//! `N * floor(L) + sum of weights of its kept n-grams`; the best score wins. ASCII letters are
//! lowercased; all other bytes (UTF-8 of any script) are taken as they are.

use rustc_hash::FxHashMap;

/// Longest n-gram the format and the scorer handle.
pub const MAX_SUPPORTED_ORDER: usize = 4;

/// How a model is trained.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrainingSettings {
    /// N-gram orders 1..=max_order (1 to 4).
    pub max_order: usize,
    /// N-grams kept per language.
    pub features_per_language: usize,
    /// Additive smoothing.
    pub smoothing_alpha: f32,
}

impl Default for TrainingSettings {
    fn default() -> Self {
        Self {
            max_order: 4,
            features_per_language: 1000,
            smoothing_alpha: 0.5,
        }
    }
}

/// One kept n-gram of one language.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Posting {
    /// Index into the model's languages.
    pub language_index: u16,
    /// `ln((count + alpha) / alpha)`.
    pub weight: f32,
}

/// A trained model.
#[derive(Debug, Clone)]
pub struct LanguageModel {
    /// How it was trained.
    pub settings: TrainingSettings,
    /// Language codes, in index order.
    pub languages: Vec<String>,
    /// `floor(L)` per language.
    pub floor_log_probabilities: Vec<f32>,
    /// Log prior per language, added to its score once per text (all zero in version-1 profiles).
    pub log_priors: Vec<f32>,
    /// Whether only n-grams the profile lists count towards `N` (version-2 profiles); otherwise
    /// every n-gram of the text does (version 1).
    pub known_ngrams_only: bool,
    /// The embedded-English rule (version-2 flag): a piece that `eng` wins is cut into
    /// quarters, and when at least [`EMBEDDED_QUARTERS_NEEDED`] quarters go to one language with a
    /// log prior of 0 other than English, that language is the label (technical text in any
    /// language embeds English words, while English text rarely embeds whole passages of another).
    pub embedded_english_rule: bool,
    /// N-gram key -> range in `postings`.
    pub(crate) features: FxHashMap<u64, (u32, u32)>,
    /// N-gram keys in file order (for writing the profile file deterministically).
    pub(crate) feature_order: Vec<u64>,
    /// All postings, grouped by feature.
    pub(crate) postings: Vec<Posting>,
    /// The scoring index, derived from the above on first use.
    pub(crate) scoring: std::sync::OnceLock<ScoringIndex>,
}

/// Packs an n-gram of 1 to 4 bytes (ASCII-lowercased) with its length into a key.
#[inline]
pub fn ngram_key(ngram: &[u8]) -> u64 {
    debug_assert!(!ngram.is_empty() && ngram.len() <= MAX_SUPPORTED_ORDER);
    let mut key = ngram.len() as u64;
    for &byte in ngram {
        key = (key << 8) | u64::from(byte.to_ascii_lowercase());
    }
    key
}

/// The bytes of a key (inverse of [`ngram_key`] up to case).
pub fn ngram_bytes(mut key: u64) -> Vec<u8> {
    let mut bytes = Vec::new();
    while key > 0xff {
        bytes.push((key & 0xff) as u8);
        key >>= 8;
    }
    assert_eq!(
        key as usize,
        bytes.len(),
        "an n-gram key ends with its length"
    );
    bytes.reverse();
    bytes
}

/// Calls `visit` with the key of every n-gram of orders 1..=max_order lying wholly in `text`
/// whose start is in `starts` (positions), and returns how many there were.
#[inline]
fn for_each_ngram(
    text: &[u8],
    starts: std::ops::Range<usize>,
    max_order: usize,
    mut visit: impl FnMut(u64),
) -> u64 {
    let mut count = 0;
    for start in starts {
        let mut key = 0u64;
        for order in 1..=max_order {
            let Some(&byte) = text.get(start + order - 1) else {
                break;
            };
            key = (key << 8) | u64::from(byte.to_ascii_lowercase());
            visit(key | ((order as u64) << (8 * order)));
            count += 1;
        }
    }
    count
}

/// Counts the n-grams of one training text per language.
pub fn count_ngrams(text: &[u8], max_order: usize, counts: &mut FxHashMap<u64, u32>) -> u64 {
    for_each_ngram(text, 0..text.len(), max_order, |key| {
        *counts.entry(key).or_insert(0) += 1
    })
}

/// Trains a model from (language, text) samples; several samples may share a language.
pub fn train(samples: &[(String, Vec<u8>)], settings: TrainingSettings) -> LanguageModel {
    assert!(
        (1..=MAX_SUPPORTED_ORDER).contains(&settings.max_order),
        "n-gram order 1 to 4"
    );
    let mut languages: Vec<String> = samples
        .iter()
        .map(|(language, _)| language.clone())
        .collect();
    languages.sort();
    languages.dedup();
    assert!(
        languages.len() <= usize::from(u16::MAX),
        "at most 65535 languages"
    );
    let mut counts_per_language: Vec<FxHashMap<u64, u32>> =
        vec![FxHashMap::default(); languages.len()];
    let mut totals = vec![0u64; languages.len()];
    for (language, text) in samples {
        let index = languages.binary_search(language).expect("language listed");
        totals[index] += count_ngrams(text, settings.max_order, &mut counts_per_language[index]);
    }
    let kept_per_language: Vec<Vec<(u64, u32)>> = counts_per_language
        .into_iter()
        .map(|counts| most_frequent(counts, settings.features_per_language))
        .collect();
    build_model(languages, &totals, &kept_per_language, settings)
}

/// The `limit` most frequent n-grams (ties broken by key, so training is deterministic).
fn most_frequent(counts: FxHashMap<u64, u32>, limit: usize) -> Vec<(u64, u32)> {
    let mut entries: Vec<(u64, u32)> = counts.into_iter().collect();
    entries.sort_unstable_by(|left, right| right.1.cmp(&left.1).then(left.0.cmp(&right.0)));
    entries.truncate(limit);
    entries
}

fn build_model(
    languages: Vec<String>,
    totals: &[u64],
    kept_per_language: &[Vec<(u64, u32)>],
    settings: TrainingSettings,
) -> LanguageModel {
    let alpha = f64::from(settings.smoothing_alpha);
    let mut postings_by_feature: std::collections::BTreeMap<u64, Vec<Posting>> = Default::default();
    for (language_index, kept) in kept_per_language.iter().enumerate() {
        for &(key, count) in kept {
            postings_by_feature.entry(key).or_default().push(Posting {
                language_index: language_index as u16,
                weight: ((f64::from(count) + alpha) / alpha).ln() as f32,
            });
        }
    }
    let vocabulary_size = postings_by_feature.len() as f64;
    let floor_log_probabilities = totals
        .iter()
        .map(|&total| (alpha / (total as f64 + alpha * vocabulary_size)).ln() as f32)
        .collect();
    let language_count = languages.len();
    let mut model = LanguageModel {
        settings,
        languages,
        floor_log_probabilities,
        log_priors: vec![0.0; language_count],
        known_ngrams_only: false,
        embedded_english_rule: false,
        features: FxHashMap::default(),
        feature_order: Vec::new(),
        postings: Vec::new(),
        scoring: std::sync::OnceLock::new(),
    };
    for (key, postings) in postings_by_feature {
        model.push_feature(key, &postings);
    }
    model
}

impl LanguageModel {
    /// Appends a feature and its postings (used by training and by the profile reader).
    pub(crate) fn push_feature(&mut self, key: u64, postings: &[Posting]) -> bool {
        assert!(
            self.scoring.get().is_none(),
            "features are added before scoring"
        );
        let start = self.postings.len() as u32;
        if self
            .features
            .insert(key, (start, postings.len() as u32))
            .is_some()
        {
            return false;
        }
        self.feature_order.push(key);
        self.postings.extend_from_slice(postings);
        true
    }

    /// Number of kept (feature, language) pairs.
    pub fn posting_count(&self) -> usize {
        self.postings.len()
    }

    /// Number of distinct n-grams.
    pub fn feature_count(&self) -> usize {
        self.feature_order.len()
    }

    fn scoring(&self) -> &ScoringIndex {
        self.scoring.get_or_init(|| ScoringIndex::build(self))
    }

    /// A fresh, empty score accumulator (reusable through [`LanguageScores::reset`]).
    pub fn new_scores(&self) -> LanguageScores {
        LanguageScores {
            counts: vec![0; self.feature_count()],
            touched: Vec::new(),
            ngram_count: 0,
            known_count: 0,
            carry: Vec::with_capacity(MAX_SUPPORTED_ORDER),
        }
    }

    /// Classifies one piece of text on its own: (language index, margin per n-gram), or `None`
    /// for a text without any n-gram (empty).
    pub fn classify(&self, text: &[u8]) -> Option<(usize, f32)> {
        self.classify_with(&mut self.new_scores(), text)
    }

    /// [`Self::classify`] reusing `scratch` (reset first), which avoids clearing a fresh
    /// feature-count table for every piece.
    pub fn classify_with(&self, scratch: &mut LanguageScores, text: &[u8]) -> Option<(usize, f32)> {
        scratch.reset();
        self.add_isolated(scratch, text);
        let best = scratch.best(self)?;
        if !self.embedded_english_rule
            || text.len() < 4 * EMBEDDED_QUARTER_MINIMUM_BYTES
            || self.languages[best.0] != EMBEDDING_LANGUAGE
        {
            return Some(best);
        }
        Some(self.embedded_language(scratch, text).unwrap_or(best))
    }

    /// The embedded-English rule's answer for a text English wins, if another language holds
    /// enough of its quarters.
    fn embedded_language(&self, scratch: &mut LanguageScores, text: &[u8]) -> Option<(usize, f32)> {
        let mut quarters: Vec<(usize, f32)> = Vec::with_capacity(4);
        for quarter in text.chunks(text.len().div_ceil(4)) {
            scratch.reset();
            self.add_isolated(scratch, quarter);
            if let Some((index, margin)) = scratch.best(self) {
                if self.languages[index] != EMBEDDING_LANGUAGE && self.log_priors[index] == 0.0 {
                    quarters.push((index, margin));
                }
            }
        }
        quarters
            .iter()
            .map(|&(index, _)| {
                let same = quarters.iter().filter(|other| other.0 == index);
                let count = same.clone().count();
                let margin = same.map(|other| other.1).fold(0.0f32, f32::max);
                (count, index, margin)
            })
            .filter(|&(count, _, _)| count >= EMBEDDED_QUARTERS_NEEDED)
            .max_by(|left, right| left.0.cmp(&right.0).then(right.1.cmp(&left.1)))
            .map(|(_, index, margin)| (index, margin))
    }

    fn add_isolated(&self, scores: &mut LanguageScores, text: &[u8]) {
        let scoring = self.scoring();
        let LanguageScores {
            counts,
            touched,
            known_count,
            ..
        } = scores;
        scores.ngram_count += for_each_ngram(text, 0..text.len(), self.settings.max_order, |key| {
            *known_count += u64::from(scoring.count(key, counts, touched));
        });
    }

    /// Adds the next bytes of a stream, including the n-grams that span from the previous bytes.
    pub fn add_stream_bytes(&self, scores: &mut LanguageScores, bytes: &[u8]) {
        let max_order = self.settings.max_order;
        let scoring = self.scoring();
        if !scores.carry.is_empty() {
            let carried = scores.carry.len();
            let mut joined = scores.carry.clone();
            joined.extend_from_slice(&bytes[..bytes.len().min(max_order - 1)]);
            for start in 0..carried {
                let mut key = 0u64;
                for order in 1..=max_order {
                    let Some(&byte) = joined.get(start + order - 1) else {
                        break;
                    };
                    key = (key << 8) | u64::from(byte.to_ascii_lowercase());
                    if start + order <= carried {
                        continue;
                    }
                    scores.ngram_count += 1;
                    let full_key = key | ((order as u64) << (8 * order));
                    scores.known_count +=
                        u64::from(scoring.count(full_key, &mut scores.counts, &mut scores.touched));
                }
            }
        }
        self.add_isolated(scores, bytes);
        let keep = max_order - 1;
        scores
            .carry
            .extend_from_slice(&bytes[bytes.len().saturating_sub(keep)..]);
        let excess = scores.carry.len().saturating_sub(keep);
        scores.carry.drain(..excess);
    }
}

/// The language the embedded-English rule is about.
pub const EMBEDDING_LANGUAGE: &str = "eng";
/// Quarters of a piece that must go to one other language for the embedded-English rule.
pub const EMBEDDED_QUARTERS_NEEDED: usize = 1;
/// Shortest quarter the embedded-English rule looks at (shorter pieces keep their label).
pub const EMBEDDED_QUARTER_MINIMUM_BYTES: usize = 64;

/// Keys below this are 1- and 2-grams and are looked up in a direct table, not hashed.
const SHORT_KEY_LIMIT: u64 = 3 << 16;
/// No feature.
const NO_FEATURE: u32 = u32::MAX;

/// How a model is scored fast: n-gram key -> feature number (a direct table for 1- and
/// 2-grams, a hash map for longer ones); the features present in many languages as dense rows
/// of weights (one vectorisable add per distinct n-gram of the text), the rest as sparse postings.
#[derive(Debug, Clone)]
pub(crate) struct ScoringIndex {
    short_ids: Vec<u32>,
    long_ids: FxHashMap<u64, u32>,
    dense_row_of_feature: Vec<u32>,
    dense_rows: Vec<f32>,
    posting_ranges: Vec<(u32, u32)>,
    language_count: usize,
}

impl ScoringIndex {
    fn build(model: &LanguageModel) -> Self {
        let language_count = model.languages.len();
        let dense_threshold = (language_count / 2).max(2) as u32;
        let mut index = ScoringIndex {
            short_ids: vec![NO_FEATURE; SHORT_KEY_LIMIT as usize],
            long_ids: FxHashMap::default(),
            dense_row_of_feature: Vec::with_capacity(model.feature_count()),
            dense_rows: Vec::new(),
            posting_ranges: Vec::with_capacity(model.feature_count()),
            language_count,
        };
        for (feature, key) in model.feature_order.iter().enumerate() {
            let feature = feature as u32;
            if *key < SHORT_KEY_LIMIT {
                index.short_ids[*key as usize] = feature;
            } else {
                index.long_ids.insert(*key, feature);
            }
            let (start, length) = model.features[key];
            index.posting_ranges.push((start, length));
            if length >= dense_threshold {
                let row = index.dense_rows.len() / language_count;
                index
                    .dense_rows
                    .resize(index.dense_rows.len() + language_count, 0.0);
                let row_weights = &mut index.dense_rows[row * language_count..];
                for posting in &model.postings[start as usize..(start + length) as usize] {
                    row_weights[usize::from(posting.language_index)] = posting.weight;
                }
                index.dense_row_of_feature.push(row as u32);
            } else {
                index.dense_row_of_feature.push(NO_FEATURE);
            }
        }
        index
    }

    #[inline]
    fn feature_of(&self, key: u64) -> u32 {
        if key < SHORT_KEY_LIMIT {
            self.short_ids[key as usize]
        } else {
            self.long_ids.get(&key).copied().unwrap_or(NO_FEATURE)
        }
    }

    /// Counts one n-gram; whether the model knows it.
    #[inline]
    fn count(&self, key: u64, counts: &mut [u32], touched: &mut Vec<u32>) -> bool {
        let feature = self.feature_of(key);
        if feature == NO_FEATURE {
            return false;
        }
        let count = &mut counts[feature as usize];
        if *count == 0 {
            touched.push(feature);
        }
        *count += 1;
        true
    }

    /// Sum of weights times counts per language over the touched features.
    fn weight_sums(&self, model: &LanguageModel, counts: &[u32], touched: &[u32]) -> Vec<f32> {
        let mut sums = vec![0.0f32; self.language_count];
        for &feature in touched {
            let count = counts[feature as usize] as f32;
            let row = self.dense_row_of_feature[feature as usize];
            if row != NO_FEATURE {
                let weights =
                    &self.dense_rows[row as usize * self.language_count..][..self.language_count];
                for (sum, weight) in sums.iter_mut().zip(weights) {
                    *sum += count * weight;
                }
            } else {
                let (start, length) = self.posting_ranges[feature as usize];
                for posting in &model.postings[start as usize..(start + length) as usize] {
                    sums[usize::from(posting.language_index)] += count * posting.weight;
                }
            }
        }
        sums
    }
}

/// Running n-gram counts of a text (a histogram over the model's features).
#[derive(Debug, Clone)]
pub struct LanguageScores {
    counts: Vec<u32>,
    touched: Vec<u32>,
    ngram_count: u64,
    known_count: u64,
    carry: Vec<u8>,
}

impl LanguageScores {
    /// Empties the accumulator (clearing only the counts that were set).
    pub fn reset(&mut self) {
        for &feature in &self.touched {
            self.counts[feature as usize] = 0;
        }
        self.touched.clear();
        self.ngram_count = 0;
        self.known_count = 0;
        self.carry.clear();
    }

    /// The best language and its margin over the runner-up per n-gram; `None` without n-grams.
    pub fn best(&self, model: &LanguageModel) -> Option<(usize, f32)> {
        if self.ngram_count == 0 {
            return None;
        }
        let weight_sums = model
            .scoring()
            .weight_sums(model, &self.counts, &self.touched);
        let count = if model.known_ngrams_only {
            self.known_count
        } else {
            self.ngram_count
        } as f32;
        let mut best = (usize::MAX, f32::NEG_INFINITY);
        let mut runner_up = f32::NEG_INFINITY;
        for (index, ((&weight_sum, &floor), &prior)) in weight_sums
            .iter()
            .zip(&model.floor_log_probabilities)
            .zip(&model.log_priors)
            .enumerate()
        {
            let score = prior + weight_sum + count * floor;
            if score > best.1 {
                runner_up = best.1;
                best = (index, score);
            } else if score > runner_up {
                runner_up = score;
            }
        }
        let margin = if runner_up.is_finite() && count > 0.0 {
            (best.1 - runner_up) / count
        } else {
            0.0
        };
        Some((best.0, margin))
    }
}
