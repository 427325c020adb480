//! `flashpipe run STORE blastn queries=FILE DB` through the real binary: tabular hits written
//! back into the store, clear failures for a bad query file and a database that is not FASTA,
//! and, where NCBI blastn and BioMarKs are installed, recall against blastn on 5 queries x
//! 2,000 sequences for both tasks.

mod common;

use std::path::Path;

use common::{check_fails, fresh_folder, mkfs, succeed, text};
use flashpipe_bench::kernels::blast::{biomarks_path, compare_outputs, draw};
use flashpipe_testkit::tools::{blastn_tabular, make_blast_db};

fn store_with(folder: &Path, files: &[(&str, &[u8])]) -> String {
    let store = folder.join("store.toml");
    mkfs(&store, "dev.img", &["--size", "64MiB"]);
    for (name, data) in files {
        let path = folder.join(name);
        std::fs::write(&path, data).expect("input");
        succeed(&["put", text(&store), text(&path)]);
    }
    text(&store).to_string()
}

#[test]
fn blastn_writes_tabular_hits_into_the_store_and_refuses_bad_input() {
    let folder = fresh_folder("blast-cli");
    let mut random = flashpipe_base::random::SplitMix64::new(28);
    let query: Vec<u8> = (0..240).map(|_| b"ACGT"[random.index_below(4)]).collect();
    let mut database = b">hit some description\nNNNN".to_vec();
    database.extend_from_slice(&query[20..220]);
    database.extend_from_slice(b"NNNN\n>other\nACGTTGCA\n");
    let store = store_with(
        &folder,
        &[("db.fa", &database), ("notes.txt", b"plain text\n")],
    );
    let queries = folder.join("q.fa");
    let mut query_text = b">q1\n".to_vec();
    query_text.extend_from_slice(&query);
    query_text.push(b'\n');
    std::fs::write(&queries, &query_text).expect("queries");
    let option = format!("queries={}", text(&queries));
    succeed(&[
        "run",
        &store,
        "blastn",
        &option,
        "evalue=1e-5",
        "db.fa",
        "--output",
        "hits.tsv",
    ]);
    let hits = succeed(&["cat", &store, "hits.tsv"]);
    let columns: Vec<&str> = hits.trim_end().split('\t').collect();
    assert_eq!(hits.lines().count(), 1, "{hits}");
    assert_eq!(
        &columns[..10],
        ["q1", "hit", "100.000", "200", "0", "0", "21", "220", "5", "204"]
    );
    check_fails(
        &["run", &store, "blastn", &option, "notes.txt"],
        "notes.txt",
    );
    check_fails(
        &["run", &store, "blastn", &option, "notes.txt"],
        "must start with '>'",
    );
    let missing = format!("queries={}", text(&folder.join("absent.fa")));
    check_fails(&["run", &store, "blastn", &missing, "db.fa"], "cannot read");
    std::fs::write(&queries, b"\x00\x01binary").expect("queries");
    check_fails(&["run", &store, "blastn", &option, "db.fa"], "queries");
    check_fails(
        &["run", &store, "blastn", "task=nope", &missing, "db.fa"],
        "must be one of",
    );
}

#[test]
fn blastn_through_the_binary_finds_what_ncbi_blastn_finds() {
    let test = "blastn_through_the_binary_finds_what_ncbi_blastn_finds";
    if !flashpipe_testkit::tools::programs_or_skip(test, &["blastn", "makeblastdb"]) {
        return;
    }
    let Some(biomarks) = biomarks_path() else {
        flashpipe_testkit::tools::skip(
            test,
            "BioMarKs50k.fsa.gz is missing (Debian vsearch-examples; scripts/install-test-packages)",
        );
        return;
    };
    let folder = fresh_folder("blast-recall");
    let (queries, database, _) = draw(&biomarks, 5, true).expect("draw");
    let store = store_with(&folder, &[("db.fa", &database)]);
    let query_path = folder.join("queries.fa");
    std::fs::write(&query_path, &queries).expect("queries");
    make_blast_db(folder.path());
    let option = format!("queries={}", text(&query_path));
    for task in ["megablast", "blastn"] {
        let reference = blastn_tabular(folder.path(), task, 100_000);
        let output = format!("{task}.tsv");
        let task_option = format!("task={task}");
        succeed(&[
            "run",
            &store,
            "blastn",
            &option,
            &task_option,
            "evalue=1e-5",
            "db.fa",
            "--output",
            &output,
        ]);
        let ours = succeed(&["cat", &store, &output]);
        let comparison = compare_outputs(&reference, &ours);
        eprintln!(
            "{task}: blastn {} pairs, ours {}, recall {:.4}, precision {:.4}",
            comparison.reference_pairs,
            comparison.kernel_pairs,
            comparison.recall(),
            comparison.precision()
        );
        assert!(comparison.reference_pairs > 1000, "{task}: {comparison:?}");
        assert!(comparison.recall() >= 0.95, "{task}: {comparison:?}");
        assert!(comparison.precision() >= 0.95, "{task}: {comparison:?}");
    }
}
