//! The BLAST section of `flashpipe bench kernels`: the `blastn` kernel beside NCBI BLAST+
//! (Debian `ncbi-blast+`, 2.12) on BioMarKs (Debian `vsearch-examples`: 50,000 18S sequences).
//!
//! Queries are drawn from BioMarKs with SplitMix64 seeded with [`QUERY_SEED`] (100 by default,
//! 5 with `--quick`); the database is every other sequence (the first 2,000 of them with
//! `--quick`). blastn runs as `-task megablast` and as `-task blastn`, each with `-outfmt 6
//! -evalue 1e-5 -dust no -num_threads 1 -max_target_seqs` above the database's sequence count
//! (so that no query is truncated: checked), over a database made by `makeblastdb` (timed
//! apart). The kernel runs the same tasks at the same E-value: near the data (the database in
//! the store, one pipeline worker) and in memory (one thread, the file already read). Reported
//! per task: (query, subject) pairs at E <= 1e-5, recall and precision against blastn, the
//! median ratio of the best E-value per common pair (ours / blastn's), and the throughputs
//! over the database's bytes. Targets: recall >= 0.95 and near-data throughput >= 1x blastn's
//! on one core.
//!
//! This is a benchmark: it reads the wall clock for blastn and the in-memory run; the pipeline
//! is timed by the store device's clock.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Instant;

use flashpipe_base::random::SplitMix64;
use flashpipe_kernels::driver::{run_on_bytes, DrivePlan};
use flashpipe_kernels::registry::build_kernel;
use flashpipe_pipeline::{OutputTarget, PipelineConfig};
use serde::Serialize;

use crate::error::{invalid_input, not_found};
use crate::kernels::store::KernelStore;
use crate::BenchResult;

/// Seed of the query draw.
pub const QUERY_SEED: u64 = 28;
/// Where Debian's `vsearch-examples` installs BioMarKs.
pub const BIOMARKS_INSTALLED: &str = "/usr/share/doc/vsearch-examples/BioMarKs50k.fsa.gz";
/// Where scripts/install-test-packages extracts the package (`apt-get download` and
/// `dpkg-deb -x`) when the image leaves /usr/share/doc out: under the user's cache folder.
pub const BIOMARKS_CACHED: &str =
    "flashpipe/vsearch-examples/usr/share/doc/vsearch-examples/BioMarKs50k.fsa.gz";
/// The E-value threshold of the comparison.
pub const EVALUE: &str = "1e-5";
/// Database sequences with `--quick`.
const QUICK_SUBJECTS: usize = 2000;

/// One task's comparison.
#[derive(Debug, Clone, Serialize)]
pub struct BlastTaskRow {
    /// `megablast` or `blastn`.
    pub task: String,
    /// Pairs blastn reports.
    pub blastn_pair_count: usize,
    /// Pairs the kernel reports.
    pub kernel_pair_count: usize,
    /// Pairs both report.
    pub common_pair_count: usize,
    /// common / blastn's.
    pub recall: f64,
    /// common / ours.
    pub precision: f64,
    /// Median of (our best E-value / blastn's) over common pairs with non-zero E-values.
    pub median_evalue_ratio: Option<f64>,
    /// Kernel near the data (store, one worker), database bytes per second.
    pub kernel_near_data_bytes_per_second: f64,
    /// Kernel in memory, one thread.
    pub kernel_in_memory_bytes_per_second: f64,
    /// blastn, one thread, database bytes per second.
    pub blastn_bytes_per_second: f64,
    /// Recall >= 0.95.
    pub recall_target_met: bool,
    /// Near-data throughput >= blastn's.
    pub throughput_target_met: bool,
}

/// The section's report.
#[derive(Debug, Clone, Serialize)]
pub struct BlastReport {
    /// Queries drawn.
    pub query_count: usize,
    /// The draw's seed.
    pub query_seed: u64,
    /// Database sequences.
    pub subject_count: usize,
    /// Database bytes (FASTA).
    pub database_bytes: u64,
    /// makeblastdb's time.
    pub makeblastdb_seconds: f64,
    /// One row per task.
    pub tasks: Vec<BlastTaskRow>,
    /// What was compared, and how.
    pub notes: Vec<String>,
}

/// Runs the section, or says why it could not (a missing tool fails under
/// FLASHPIPE_REQUIRE_TOOLS=1).
pub fn run_section(
    store: &KernelStore,
    dir: &Path,
    query_count: usize,
    quick: bool,
    notes: &mut Vec<String>,
) -> BenchResult<Option<BlastReport>> {
    if query_count == 0 {
        return Ok(None);
    }
    let missing = missing_tools();
    if let Some(missing) = missing {
        let message = format!(
            "BLAST section left out: {missing} (install Debian ncbi-blast+ and vsearch-examples: \
             scripts/install-test-packages)"
        );
        if std::env::var("FLASHPIPE_REQUIRE_TOOLS").is_ok_and(|value| value == "1") {
            return Err(not_found(format!("{message}; FLASHPIPE_REQUIRE_TOOLS=1")).into());
        }
        notes.push(message);
        return Ok(None);
    }
    let folder = dir.join("blast");
    std::fs::create_dir_all(&folder)?;
    let (queries, database, subject_count) =
        draw(&biomarks_path().expect("checked"), query_count, quick)?;
    let query_path = folder.join("queries.fa");
    let database_path = folder.join("database.fa");
    std::fs::write(&query_path, &queries)?;
    std::fs::write(&database_path, &database)?;
    let started = Instant::now();
    let made = Command::new("makeblastdb")
        .args(["-in", "database.fa", "-dbtype", "nucl", "-out", "database"])
        .current_dir(&folder)
        .output()?;
    let makeblastdb_seconds = started.elapsed().as_secs_f64();
    succeeded("makeblastdb", &made)?;
    let mut client = store.engine.client(16);
    super::put_files(
        &mut client,
        &[("blast.db.fa".to_string(), database.clone())],
    )?;
    client.call(flashpipe_engine::Command::Flush)?;
    let mut tasks = Vec::new();
    for task in ["megablast", "blastn"] {
        tasks.push(compare_task(
            store,
            &folder,
            &query_path,
            &database,
            subject_count,
            task,
        )?);
    }
    let _ = std::fs::remove_dir_all(&folder);
    Ok(Some(BlastReport {
        query_count,
        query_seed: QUERY_SEED,
        subject_count,
        database_bytes: database.len() as u64,
        makeblastdb_seconds,
        tasks,
        notes: vec![
            format!(
                "blastn 2.12 -task megablast / -task blastn -outfmt 6 -evalue {EVALUE} -dust no \
                 -num_threads 1 -max_target_seqs {} (more than the database's sequences: no \
                 query's hits are cut)",
                subject_count + 1
            ),
            "the kernel does no DUST filtering: blastn runs with -dust no".to_string(),
            "throughputs are database FASTA bytes per second; makeblastdb is timed apart"
                .to_string(),
        ],
    }))
}

/// An error naming `what` and its standard error when `output` says the tool failed.
fn succeeded(what: &str, output: &Output) -> BenchResult<()> {
    if output.status.success() {
        return Ok(());
    }
    Err(invalid_input(format!(
        "{what} failed: {}",
        String::from_utf8_lossy(&output.stderr).trim()
    ))
    .into())
}

fn missing_tools() -> Option<String> {
    let mut missing = Vec::new();
    for tool in ["blastn", "makeblastdb"] {
        if Command::new(tool).arg("-version").output().is_err() {
            missing.push(format!("{tool} (Debian ncbi-blast+)"));
        }
    }
    if biomarks_path().is_none() {
        missing.push(format!(
            "BioMarKs50k.fsa.gz (Debian vsearch-examples) at {BIOMARKS_INSTALLED} or \
             $XDG_CACHE_HOME/{BIOMARKS_CACHED}"
        ));
    }
    (!missing.is_empty()).then(|| missing.join(", "))
}

/// The user's cache folder: `$XDG_CACHE_HOME`, else `$HOME/.cache`.
fn cache_folder() -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .filter(|value| !value.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
}

/// BioMarKs where the package installed it, or where the install script extracted it.
pub fn biomarks_path() -> Option<PathBuf> {
    let cached = cache_folder().map(|folder| folder.join(BIOMARKS_CACHED));
    std::iter::once(PathBuf::from(BIOMARKS_INSTALLED))
        .chain(cached)
        .find(|path| path.is_file())
}

/// Draws `query_count` queries (seeded) and the database; returns both FASTA texts and the
/// database's sequence count.
pub fn draw(
    biomarks: &Path,
    query_count: usize,
    quick: bool,
) -> BenchResult<(Vec<u8>, Vec<u8>, usize)> {
    let unpacked = Command::new("gzip").arg("-dc").arg(biomarks).output()?;
    if !unpacked.status.success() {
        return Err(invalid_input(format!("gzip -dc {} failed", biomarks.display())).into());
    }
    let text = unpacked.stdout;
    let mut starts: Vec<usize> = text
        .iter()
        .enumerate()
        .filter(|&(index, &byte)| byte == b'>' && (index == 0 || text[index - 1] == b'\n'))
        .map(|(index, _)| index)
        .collect();
    if starts.len() <= query_count {
        return Err(invalid_input(format!(
            "{} holds {} sequences, not more than {query_count}",
            biomarks.display(),
            starts.len()
        ))
        .into());
    }
    starts.push(text.len());
    let record_count = starts.len() - 1;
    let mut random = SplitMix64::new(QUERY_SEED);
    let mut chosen = BTreeSet::new();
    while chosen.len() < query_count {
        chosen.insert(random.index_below(record_count));
    }
    let (mut queries, mut database) = (Vec::new(), Vec::new());
    let mut subject_count = 0;
    for index in 0..record_count {
        let record = &text[starts[index]..starts[index + 1]];
        if chosen.contains(&index) {
            queries.extend_from_slice(record);
        } else if !quick || subject_count < QUICK_SUBJECTS {
            database.extend_from_slice(record);
            subject_count += 1;
        }
    }
    Ok((queries, database, subject_count))
}

fn compare_task(
    store: &KernelStore,
    folder: &Path,
    query_path: &Path,
    database: &[u8],
    subject_count: usize,
    task: &str,
) -> BenchResult<BlastTaskRow> {
    let max_targets = (subject_count + 1).to_string();
    let started = Instant::now();
    let reference = Command::new("blastn")
        .args(["-task", task, "-query"])
        .arg(query_path)
        .args([
            "-db", "database", "-outfmt", "6", "-evalue", EVALUE, "-dust", "no",
        ])
        .args(["-num_threads", "1", "-max_target_seqs", &max_targets])
        .current_dir(folder)
        .output()?;
    let blastn_seconds = started.elapsed().as_secs_f64();
    succeeded(&format!("blastn -task {task}"), &reference)?;
    let reference = String::from_utf8_lossy(&reference.stdout).into_owned();
    let arguments = vec![
        format!("queries={}", query_path.display()),
        format!("task={task}"),
        format!("evalue={EVALUE}"),
    ];
    let kernel = build_kernel("blastn", &arguments)?;
    let mut output = Vec::new();
    let started = Instant::now();
    run_on_bytes(
        kernel.as_ref(),
        "database.fa",
        database,
        DrivePlan::single(1 << 20),
        &mut output,
    )?;
    let in_memory_seconds = started.elapsed().as_secs_f64();
    let config = PipelineConfig {
        worker_count: 1,
        ..PipelineConfig::for_engine(
            &store.engine_config,
            OutputTarget::StoreFiles(vec![format!("blast.{task}.tsv")]),
        )
    };
    let near = store.run(Arc::clone(&kernel), &["blast.db.fa".to_string()], &config)?;
    let ours = String::from_utf8_lossy(&output).into_owned();
    let comparison = compare_outputs(&reference, &ours);
    let rate = |seconds: f64| database.len() as f64 / seconds.max(1e-9);
    let near_rate = near.report.input_bytes_per_second;
    let blastn_rate = rate(blastn_seconds);
    Ok(BlastTaskRow {
        task: task.to_string(),
        blastn_pair_count: comparison.reference_pairs,
        kernel_pair_count: comparison.kernel_pairs,
        common_pair_count: comparison.common_pairs,
        recall: comparison.recall(),
        precision: comparison.precision(),
        median_evalue_ratio: comparison.median_evalue_ratio,
        kernel_near_data_bytes_per_second: near_rate,
        kernel_in_memory_bytes_per_second: rate(in_memory_seconds),
        blastn_bytes_per_second: blastn_rate,
        recall_target_met: comparison.recall() >= 0.95,
        throughput_target_met: near_rate >= blastn_rate,
    })
}

/// Two tabular outputs compared by (query, subject) pair.
#[derive(Debug, Clone, PartialEq)]
pub struct PairComparison {
    /// Pairs in the reference.
    pub reference_pairs: usize,
    /// Pairs in the kernel's output.
    pub kernel_pairs: usize,
    /// Pairs in both.
    pub common_pairs: usize,
    /// Median ratio of best E-values (kernel / reference) over common pairs, both non-zero.
    pub median_evalue_ratio: Option<f64>,
}

impl PairComparison {
    /// common / reference.
    pub fn recall(&self) -> f64 {
        self.common_pairs as f64 / self.reference_pairs.max(1) as f64
    }

    /// common / kernel.
    pub fn precision(&self) -> f64 {
        self.common_pairs as f64 / self.kernel_pairs.max(1) as f64
    }
}

/// Best E-value per (query, subject) of `-outfmt 6` text.
fn best_evalues(text: &str) -> BTreeMap<(&str, &str), f64> {
    let mut best = BTreeMap::new();
    for line in text.lines() {
        let columns: Vec<&str> = line.split('\t').collect();
        if columns.len() < 12 {
            continue;
        }
        let value: f64 = columns[10].parse().unwrap_or(f64::MAX);
        let entry = best.entry((columns[0], columns[1])).or_insert(f64::MAX);
        *entry = entry.min(value);
    }
    best
}

/// Compares the kernel's output with the reference's.
pub fn compare_outputs(reference: &str, kernel: &str) -> PairComparison {
    let theirs = best_evalues(reference);
    let ours = best_evalues(kernel);
    let common_pairs = theirs
        .keys()
        .filter(|pair| ours.contains_key(*pair))
        .count();
    let mut ratios: Vec<f64> = theirs
        .iter()
        .filter_map(|(pair, value)| {
            let other = ours.get(pair)?;
            (*value > 0.0 && *other > 0.0).then(|| other / value)
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    PairComparison {
        reference_pairs: theirs.len(),
        kernel_pairs: ours.len(),
        common_pairs,
        median_evalue_ratio: ratios.get(ratios.len() / 2).copied(),
    }
}

/// Prints the section's table.
pub fn print_section(report: &BlastReport) {
    println!();
    println!(
        "BLAST-like search: {} queries (seed {}) against {} BioMarKs sequences ({:.1} MiB), E <= {EVALUE}; makeblastdb {:.2} s (apart)",
        report.query_count,
        report.query_seed,
        report.subject_count,
        report.database_bytes as f64 / super::MIB,
        report.makeblastdb_seconds
    );
    println!(
        "{:<10} {:>9} {:>9} {:>7} {:>9} {:>8} {:>12} {:>12} {:>12} {:>7} {:>7}",
        "task",
        "blastn",
        "ours",
        "recall",
        "precision",
        "E ratio",
        "near MiB/s",
        "memory MiB/s",
        "blastn MiB/s",
        "recall",
        "speed"
    );
    for row in &report.tasks {
        println!(
            "{:<10} {:>9} {:>9} {:>7.4} {:>9.4} {:>8} {:>12.2} {:>12.2} {:>12.2} {:>7} {:>7}",
            row.task,
            row.blastn_pair_count,
            row.kernel_pair_count,
            row.recall,
            row.precision,
            row.median_evalue_ratio
                .map_or("-".to_string(), |ratio| format!("{ratio:.3}")),
            row.kernel_near_data_bytes_per_second / super::MIB,
            row.kernel_in_memory_bytes_per_second / super::MIB,
            row.blastn_bytes_per_second / super::MIB,
            if row.recall_target_met {
                "MET"
            } else {
                "NOT MET"
            },
            if row.throughput_target_met {
                "MET"
            } else {
                "NOT MET"
            },
        );
    }
    println!("targets: recall >= 0.95 of blastn's pairs; near-data (one worker) >= 1x blastn on one core");
    for note in &report.notes {
        println!("  {note}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_compared_by_best_evalue() {
        let reference = "q\ta\t99\t10\t0\t0\t1\t10\t1\t10\t1e-10\t50\n\
                         q\ta\t99\t10\t0\t0\t1\t10\t1\t10\t1e-5\t20\n\
                         q\tb\t99\t10\t0\t0\t1\t10\t1\t10\t1e-8\t40\n";
        let kernel =
            "q\ta\t99\t10\t0\t0\t1\t10\t1\t10\t2e-10\t50\nq\tc\t1\t1\t1\t1\t1\t1\t1\t1\t1e-6\t9\n";
        let comparison = compare_outputs(reference, kernel);
        assert_eq!(comparison.reference_pairs, 2);
        assert_eq!(comparison.kernel_pairs, 2);
        assert_eq!(comparison.common_pairs, 1);
        assert_eq!(comparison.recall(), 0.5);
        let ratio = comparison.median_evalue_ratio.expect("one ratio");
        assert!((ratio - 2.0).abs() < 1e-9, "{ratio}");
    }
}
