//! The blastn kernel: planted alignments on both strands (coordinates, counts, scores), the
//! same output under every chunking, hostile inputs and options refused clearly, and recall
//! against NCBI blastn on a subset of BioMarKs where blastn and the data are installed.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{run_all_ways, run_once};
use flashpipe_base::random::SplitMix64;
use flashpipe_kernels::driver::DrivePlan;
use flashpipe_kernels::registry::build_kernel;
use flashpipe_testkit::tools::{blastn_tabular, make_blast_db};

fn random_bases(random: &mut SplitMix64, length: usize) -> Vec<u8> {
    (0..length)
        .map(|_| b"ACGT"[(random.next_u64() % 4) as usize])
        .collect()
}

fn reverse_complement(letters: &[u8]) -> Vec<u8> {
    letters
        .iter()
        .rev()
        .map(|&letter| match letter {
            b'A' => b'T',
            b'C' => b'G',
            b'G' => b'C',
            b'T' => b'A',
            other => other,
        })
        .collect()
}

fn fasta(records: &[(&str, &[u8])]) -> Vec<u8> {
    let mut text = Vec::new();
    for (name, letters) in records {
        text.extend_from_slice(format!(">{name} description\n").as_bytes());
        for line in letters.chunks(60) {
            text.extend_from_slice(line);
            text.push(b'\n');
        }
    }
    text
}

fn temp_folder(name: &str) -> PathBuf {
    let folder =
        std::env::temp_dir().join(format!("flashpipe-blast-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&folder);
    std::fs::create_dir_all(&folder).expect("temp folder");
    folder
}

fn write_queries(folder: &Path, text: &[u8]) -> String {
    let path = folder.join("queries.fa");
    std::fs::write(&path, text).expect("queries");
    format!("queries={}", path.display())
}

/// The error building a kernel gives (it must give one).
fn build_error(list: &[&str]) -> String {
    match build_kernel("blastn", &arguments(list)) {
        Ok(_) => panic!("options {list:?} were accepted"),
        Err(error) => error.to_string(),
    }
}

fn arguments(list: &[&str]) -> Vec<String> {
    list.iter().map(|text| text.to_string()).collect()
}

/// Output lines split into columns.
fn table(output: &[u8]) -> Vec<Vec<String>> {
    String::from_utf8(output.to_vec())
        .expect("UTF-8")
        .lines()
        .map(|line| line.split('\t').map(str::to_string).collect())
        .collect()
}

#[test]
fn planted_alignments_are_found_on_both_strands_with_exact_columns() {
    let folder = temp_folder("planted");
    let mut random = SplitMix64::new(28);
    let query = random_bases(&mut random, 300);
    // Subject 1: the query's letters 51..=250 with two substitutions and a 3-letter deletion.
    let mut planted = query[50..250].to_vec();
    planted[40] = if planted[40] == b'A' { b'C' } else { b'A' };
    planted[150] = if planted[150] == b'G' { b'T' } else { b'G' };
    planted.drain(100..103);
    // Flanks of N (a mismatch against every base) keep the alignments' ends where planted.
    let subject_one = [vec![b'N'; 120], planted, vec![b'n'; 80]].concat();
    // Subject 2: an exact copy of letters 1..=150, reverse complemented.
    let subject_two = [
        vec![b'N'; 30],
        reverse_complement(&query[..150]),
        vec![b'N'; 30],
    ]
    .concat();
    let noise = random_bases(&mut random, 500);
    let database = fasta(&[
        ("one", &subject_one),
        ("noise", &noise),
        ("two", &subject_two),
    ]);
    let queries = write_queries(&folder, &fasta(&[("q", &query)]));
    for task in ["megablast", "blastn"] {
        let kernel = build_kernel(
            "blastn",
            &arguments(&[&queries, &format!("task={task}"), "evalue=1e-5"]),
        )
        .expect("kernel");
        let (output, _) = run_all_ways(kernel.as_ref(), &database).expect("search");
        let rows = table(&output);
        assert_eq!(rows.len(), 2, "{task}: {rows:?}");
        let one = rows.iter().find(|row| row[1] == "one").expect("one");
        // 197 query letters against 197 subject letters plus a gap of 3: 200 columns.
        assert_eq!(
            &one[3..10],
            ["200", "2", "1", "51", "250", "121", "317"],
            "{task}"
        );
        assert_eq!(one[2], "97.500", "{task}");
        let two = rows.iter().find(|row| row[1] == "two").expect("two");
        assert_eq!(
            &two[2..10],
            ["100.000", "150", "0", "0", "1", "150", "180", "31"],
            "{task}"
        );
        assert!(
            two[10].contains("e-") || two[10] == "0.0",
            "{task}: {two:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&folder);
}

#[test]
fn hostile_databases_and_options_are_refused_clearly() {
    let folder = temp_folder("hostile");
    let queries = write_queries(&folder, b">q\nACGTACGTACGTACGTACGTACGTACGTACGT\n");
    let kernel = build_kernel("blastn", &arguments(&[&queries])).expect("kernel");
    let long_line = [b">a\n".as_slice(), &vec![b'A'; 5000]].concat();
    let cases: &[(&[u8], &str)] = &[
        (b"", "empty input"),
        (b"hello world\n", "must start with '>'"),
        (b"\x7fELF\x02\x01\x01\x00\x00\x00", "must start with '>'"),
        (b">a\nACGT\x00\x01\x02\n", "byte 0x00"),
        (b">a\nACGT\n>b\n", "no sequence"),
    ];
    for (data, expected) in cases {
        let error = run_once(kernel.as_ref(), data, DrivePlan::single(3)).expect_err("refused");
        let message = error.to_string();
        assert!(
            message.contains(expected) && message.contains("input.bin"),
            "{message}"
        );
    }
    let small =
        build_kernel("blastn", &arguments(&[&queries, "max_sequence=1000"])).expect("kernel");
    let error = run_once(small.as_ref(), &long_line, DrivePlan::single(64)).expect_err("too long");
    assert!(error.to_string().contains("raise max_sequence"), "{error}");
    let one_hit = build_kernel("blastn", &arguments(&[&queries, "max_hits=1"])).expect("kernel");
    let database = fasta(&[
        ("a", b"ACGTACGTACGTACGTACGTACGTACGTACGT"),
        ("b", b"ACGTACGTACGTACGTACGTACGTACGTACGT"),
    ]);
    let error = run_once(one_hit.as_ref(), &database, DrivePlan::single(16)).expect_err("cap");
    assert!(error.to_string().contains("raise max_hits"), "{error}");
    let bad_options: &[(&[&str], &str)] = &[
        (&["task=tblastx"], "must be one of"),
        (&["penalty=3"], "between -5 and -1"),
        (&["reward=x"], "not an integer"),
        (&["evalue=-1"], "positive number"),
        (&["evalue=nan"], "positive number"),
        (&["gapopen=7", "gapextend=7"], "no Karlin-Altschul values"),
        (&["gapopen=5", "gapextend=0"], "must be positive"),
        (&["word=2"], "between 4 and 64"),
        (&["max_hits=0"], "between"),
    ];
    for (options, expected) in bad_options {
        let mut list = vec![queries.as_str()];
        list.extend_from_slice(options);
        let error = build_error(&list);
        assert!(error.contains(expected), "{options:?}: {error}");
    }
    for (content, expected) in [
        (b"not fasta".as_slice(), "must start with '>'"),
        (b"".as_slice(), "empty input"),
        (b">q\nAC!GT\n".as_slice(), "not a nucleotide letter"),
    ] {
        let queries = write_queries(&folder, content);
        let error = build_error(&[&queries]);
        assert!(error.contains(expected), "{error}");
    }
    let missing = format!("queries={}", folder.join("absent.fa").display());
    let error = build_error(&[&missing]);
    assert!(error.contains("cannot read"), "{error}");
    let directory = format!("queries={}", folder.display());
    let error = build_error(&[&directory]);
    assert!(error.contains("regular file"), "{error}");
    let _ = std::fs::remove_dir_all(&folder);
}

/// Where BioMarKs lives once `vsearch-examples` is installed, or where
/// scripts/install-test-packages extracts it when the image leaves /usr/share/doc out.
fn biomarks() -> Option<PathBuf> {
    let file = "usr/share/doc/vsearch-examples/BioMarKs50k.fsa.gz";
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|value| !value.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")));
    std::iter::once(Path::new("/").join(file))
        .chain(cache.map(|cache| cache.join("flashpipe/vsearch-examples").join(file)))
        .find(|path| path.is_file())
}

fn tools_required() -> bool {
    std::env::var("FLASHPIPE_REQUIRE_TOOLS").is_ok_and(|value| value == "1")
}

/// (query, subject) pairs of `-outfmt 6` output.
fn pairs(output: &str) -> BTreeSet<(String, String)> {
    output
        .lines()
        .filter_map(|line| {
            let mut columns = line.split('\t');
            Some((columns.next()?.to_string(), columns.next()?.to_string()))
        })
        .collect()
}

#[test]
fn recall_against_ncbi_blastn_on_biomarks() {
    let have_blastn = Command::new("blastn").arg("-version").output().is_ok();
    let biomarks = biomarks().filter(|_| have_blastn);
    let Some(biomarks) = biomarks else {
        let missing = "blastn (Debian ncbi-blast+) or BioMarKs (Debian vsearch-examples)";
        assert!(
            !tools_required(),
            "{missing} missing (FLASHPIPE_REQUIRE_TOOLS=1)"
        );
        eprintln!("SKIPPED recall test: {missing} not installed (scripts/install-test-packages)");
        return;
    };
    let folder = temp_folder("recall");
    let gz = Command::new("gzip")
        .arg("-dc")
        .arg(&biomarks)
        .output()
        .expect("gzip");
    let text = String::from_utf8(gz.stdout).expect("FASTA text");
    let records: Vec<&str> = text
        .split('>')
        .filter(|record| !record.is_empty())
        .collect();
    let query_count: usize = std::env::var("BLAST_TEST_QUERIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let subject_count: usize = std::env::var("BLAST_TEST_SUBJECTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let mut random = SplitMix64::new(28);
    let mut chosen = BTreeSet::new();
    while chosen.len() < query_count {
        chosen.insert((random.next_u64() % records.len() as u64) as usize);
    }
    let mut queries = String::new();
    let mut database = String::new();
    let mut subjects = 0;
    for (index, record) in records.iter().enumerate() {
        if chosen.contains(&index) {
            queries.push('>');
            queries.push_str(record);
        } else if subjects < subject_count {
            database.push('>');
            database.push_str(record);
            subjects += 1;
        }
    }
    std::fs::write(folder.join("queries.fa"), &queries).expect("queries");
    std::fs::write(folder.join("db.fa"), &database).expect("db");
    make_blast_db(&folder);
    for task in ["megablast", "blastn"] {
        let reference = blastn_tabular(&folder, task, 1_000_000);
        let queries_option = format!("queries={}", folder.join("queries.fa").display());
        let kernel = build_kernel(
            "blastn",
            &arguments(&[&queries_option, &format!("task={task}"), "evalue=1e-5"]),
        )
        .expect("kernel");
        let (output, _) = run_once(
            kernel.as_ref(),
            database.as_bytes(),
            DrivePlan::single(1 << 16),
        )
        .expect("search");
        let ours = String::from_utf8(output).expect("text");
        let expected = pairs(&reference);
        let found = pairs(&ours);
        let common = expected.intersection(&found).count();
        let recall = common as f64 / expected.len().max(1) as f64;
        let precision = common as f64 / found.len().max(1) as f64;
        let evalues = |text: &str| -> BTreeMap<(String, String), f64> {
            let mut best = BTreeMap::new();
            for line in text.lines() {
                let columns: Vec<&str> = line.split('\t').collect();
                let value: f64 = columns[10].parse().expect("evalue");
                let entry = best
                    .entry((columns[0].to_string(), columns[1].to_string()))
                    .or_insert(f64::MAX);
                if value < *entry {
                    *entry = value;
                }
            }
            best
        };
        let (theirs, mine) = (evalues(&reference), evalues(&ours));
        let mut ratios: Vec<f64> = theirs
            .iter()
            .filter_map(|(pair, value)| {
                let other = mine.get(pair)?;
                (*value > 0.0 && *other > 0.0).then(|| other / value)
            })
            .collect();
        ratios.sort_by(f64::total_cmp);
        let median = ratios.get(ratios.len() / 2).copied().unwrap_or(f64::NAN);
        eprintln!(
            "{task}: blastn {} pairs, ours {}, common {common}, recall {recall:.4}, precision {precision:.4}, median E-value ratio {median:.3} over {}",
            expected.len(),
            found.len(),
            ratios.len()
        );
        if std::env::var("BLAST_TEST_KEEP").is_ok() {
            std::fs::write(folder.join(format!("{task}.ours.tsv")), &ours).expect("keep");
            std::fs::write(folder.join(format!("{task}.blastn.tsv")), &reference).expect("keep");
        }
        assert!(recall >= 0.95, "{task}: recall {recall}");
        assert!(precision >= 0.95, "{task}: precision {precision}");
    }
    if std::env::var("BLAST_TEST_KEEP").is_err() {
        let _ = std::fs::remove_dir_all(&folder);
    }
}

/// Recall on files prepared by hand (the full BioMarKs draw takes blastn tens of minutes):
/// `BLAST_QUERIES`, `BLAST_DATABASE` (FASTA), `BLAST_REFERENCE` (blastn's `-outfmt 6`),
/// `BLAST_TASK`; run with `cargo test --release -p flashpipe-kernels --test blast -- --ignored`.
#[test]
#[ignore = "needs BLAST_QUERIES, BLAST_DATABASE, BLAST_REFERENCE and BLAST_TASK"]
fn recall_on_prepared_files() {
    let variable = |name: &str| std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"));
    let (queries, database, reference, task) = (
        variable("BLAST_QUERIES"),
        variable("BLAST_DATABASE"),
        variable("BLAST_REFERENCE"),
        variable("BLAST_TASK"),
    );
    let kernel = build_kernel(
        "blastn",
        &arguments(&[
            &format!("queries={queries}"),
            &format!("task={task}"),
            "evalue=1e-5",
        ]),
    )
    .expect("kernel");
    let database = std::fs::read(&database).expect("database");
    let started = std::time::Instant::now();
    let (output, _) =
        run_once(kernel.as_ref(), &database, DrivePlan::single(1 << 20)).expect("search");
    let seconds = started.elapsed().as_secs_f64();
    let ours = String::from_utf8(output).expect("text");
    let reference = std::fs::read_to_string(&reference).expect("reference");
    let (expected, found) = (pairs(&reference), pairs(&ours));
    let common = expected.intersection(&found).count();
    eprintln!(
        "{task}: blastn {} pairs, ours {}, common {common}, recall {:.4}, precision {:.4}, {seconds:.1} s wall",
        expected.len(),
        found.len(),
        common as f64 / expected.len().max(1) as f64,
        common as f64 / found.len().max(1) as f64,
    );
    if let Ok(path) = std::env::var("BLAST_OUTPUT") {
        std::fs::write(path, &ours).expect("output");
    }
}
