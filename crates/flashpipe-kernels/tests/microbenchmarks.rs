//! The SISC microbenchmarks as kernels: kNN against brute force, external sort (spilling, with
//! little memory) against a stable in-memory sort, sparse-index binary search against a scan.

mod common;

use std::sync::Arc;

use common::run_all_ways;
use flashpipe_kernels::api::{FileInfo, Kernel, Summary};
use flashpipe_kernels::binary_search::{IndexLayout, SearchIndexKernel, SparseIndexBuilder};
use flashpipe_kernels::error::KernelErrorKind;
use flashpipe_kernels::external_sort::{ExternalSortKernel, SortSettings};
use flashpipe_kernels::knn::{encode_vectors, KnnKernel};
use flashpipe_kernels::registry::build_kernel;

/// Deterministic pseudo-random numbers for test data: 31 bits of the one seeded generator.
struct TestRandom(flashpipe_base::SplitMix64);

impl TestRandom {
    fn next(&mut self) -> u64 {
        self.0.next_u64() >> 33
    }
}

#[test]
fn knn_matches_brute_force_for_a_batch_of_queries() {
    let dimensions = 5;
    let mut random = TestRandom(flashpipe_base::SplitMix64::new(7));
    let data: Vec<f32> = (0..dimensions * 300)
        .map(|_| (random.next() % 1000) as f32 / 10.0)
        .collect();
    let queries: Vec<f32> = (0..dimensions * 4)
        .map(|_| (random.next() % 1000) as f32 / 10.0)
        .collect();
    let k = 7;
    let kernel = Arc::new(KnnKernel::new(dimensions, k, queries.clone()));
    let (_, summary) =
        run_all_ways(&kernel as &dyn Kernel, &encode_vectors(&data)).expect("knn runs");
    let Summary::Neighbours { queries: answers } = summary else {
        panic!("neighbours expected");
    };
    for (query_index, query) in queries.chunks(dimensions).enumerate() {
        let mut all: Vec<(f32, u64)> = data
            .chunks(dimensions)
            .enumerate()
            .map(|(index, record)| {
                (
                    record
                        .iter()
                        .zip(query)
                        .map(|(a, b)| (a - b) * (a - b))
                        .sum(),
                    index as u64,
                )
            })
            .collect();
        all.sort_by(|left, right| left.partial_cmp(right).expect("finite"));
        let expected: Vec<u64> = all.iter().take(k).map(|(_, index)| *index).collect();
        let found: Vec<u64> = answers[query_index]
            .neighbours
            .iter()
            .map(|neighbour| neighbour.record_index)
            .collect();
        assert_eq!(found, expected, "query {query_index}");
    }
}

#[test]
fn knn_refuses_wrong_lengths_and_bad_query_files() {
    let kernel = Arc::new(KnnKernel::new(4, 3, vec![0.0; 4]));
    let error = run_all_ways(&kernel as &dyn Kernel, &[0u8; 17])
        .expect_err("17 bytes is not 16-byte vectors");
    assert!(
        matches!(error.kind, KernelErrorKind::WrongLength(_)),
        "{error}"
    );
    assert_eq!(error.offset_bytes, 16);
    let (_, summary) = run_all_ways(&kernel as &dyn Kernel, &[]).expect("empty data file is fine");
    assert!(matches!(summary, Summary::Neighbours { queries } if queries[0].neighbours.is_empty()));
    let directory = tempfile::tempdir().expect("temp dir");
    let queries = directory.path().join("queries.f32");
    std::fs::write(&queries, [0u8; 10]).expect("write");
    let arguments = vec![
        format!("queries={}", queries.display()),
        "dimensions=4".into(),
    ];
    let error = build_kernel("knn", &arguments)
        .err()
        .expect("10-byte query file refused");
    assert!(
        error.to_string().contains("not a positive multiple of 16"),
        "{error}"
    );
    assert!(build_kernel("knn", &["queries=x".into(), "dimensions=0".into()]).is_err());
}

fn stable_sorted(data: &[u8], record: usize, key: usize) -> Vec<u8> {
    let mut records: Vec<&[u8]> = data.chunks(record).collect();
    records.sort_by(|left, right| left[..key].cmp(&right[..key]));
    records.concat()
}

#[test]
fn external_sort_spills_and_matches_a_stable_in_memory_sort() {
    let mut random = TestRandom(flashpipe_base::SplitMix64::new(3));
    for (record, key, record_count, memory_bytes) in [
        (16, 4, 5000, 4096),
        (8, 8, 3000, 1 << 20),
        (3, 1, 777, 100),
        (16, 2, 1, 80),
    ] {
        let data: Vec<u8> = (0..record * record_count)
            .map(|_| (random.next() % 7) as u8)
            .collect();
        let settings = SortSettings {
            record_size_bytes: record,
            key_size_bytes: key,
            memory_bytes,
        };
        let kernel = ExternalSortKernel::new(settings, None);
        let (output, summary) = run_all_ways(&kernel, &data).expect("sorts");
        assert_eq!(
            output,
            stable_sorted(&data, record, key),
            "record {record} key {key}"
        );
        let Summary::Sorted {
            record_count: counted,
            spilled_run_count,
        } = summary
        else {
            panic!("sort summary expected");
        };
        assert_eq!(counted, record_count as u64);
        let expected_runs = if record_count <= settings.records_per_run() {
            0
        } else {
            record_count.div_ceil(settings.records_per_run())
        };
        assert_eq!(
            spilled_run_count, expected_runs as u64,
            "input larger than memory spills"
        );
    }
}

#[test]
fn external_sort_refuses_partial_records_and_bad_options() {
    let kernel = build_kernel("sort", &["record=8".into()]).expect("options");
    let error =
        run_all_ways(kernel.as_ref(), &[1u8; 12]).expect_err("12 bytes is not 8-byte records");
    assert_eq!(error.offset_bytes, 8);
    let (output, _) = run_all_ways(kernel.as_ref(), &[]).expect("empty input sorts");
    assert!(output.is_empty());
    for arguments in [
        vec!["record=0"],
        vec!["record=8", "key=9"],
        vec!["record=8", "memory=10"],
        vec!["record=8", "temp_dir=/nonexistent"],
    ] {
        let arguments: Vec<String> = arguments.into_iter().map(String::from).collect();
        assert!(build_kernel("sort", &arguments).is_err(), "{arguments:?}");
    }
}

#[test]
fn sparse_index_search_finds_first_occurrences_with_one_probe() {
    let mut random = TestRandom(flashpipe_base::SplitMix64::new(11));
    let record = 12;
    let key = 4;
    let mut keys: Vec<u32> = (0..2000).map(|_| (random.next() % 1500) as u32).collect();
    keys.sort();
    let data: Vec<u8> = keys
        .iter()
        .enumerate()
        .flat_map(|(index, value)| {
            let mut bytes = value.to_be_bytes().to_vec();
            bytes.extend_from_slice(&(index as u64).to_le_bytes());
            bytes
        })
        .collect();
    for block_records in [1, 7, 64, 5000] {
        let layout = IndexLayout {
            record_size_bytes: record,
            key_size_bytes: key,
            block_records,
        };
        let kernel = SearchIndexKernel::new(layout);
        run_all_ways(&kernel, &data).expect("index builds");
        let index = kernel.last_index().expect("index kept");
        assert_eq!(index.record_count(), 2000);
        for query in 0..1600u32 {
            let found = index
                .lookup(&query.to_be_bytes(), data.as_slice())
                .expect("lookup");
            let expected = keys
                .iter()
                .position(|&value| value == query)
                .map(|position| position as u64);
            assert_eq!(
                found.record_index, expected,
                "key {query} with blocks of {block_records}"
            );
            assert!(found.probe_read_count <= 1);
        }
    }
}

#[test]
fn sparse_index_over_empty_and_one_record_files() {
    let layout = IndexLayout {
        record_size_bytes: 4,
        key_size_bytes: 4,
        block_records: 8,
    };
    let kernel = SearchIndexKernel::new(layout);
    run_all_ways(&kernel, &[]).expect("empty file indexes");
    let empty = kernel.last_index().expect("index kept");
    assert_eq!(
        empty.lookup(&[0; 4], &[][..]).expect("lookup").record_index,
        None
    );
    run_all_ways(&kernel, &[1, 2, 3, 4]).expect("one record indexes");
    let one = kernel.last_index().expect("index kept");
    let record: &[u8] = &[1, 2, 3, 4];
    assert_eq!(
        one.lookup(&[1, 2, 3, 4], record)
            .expect("lookup")
            .record_index,
        Some(0)
    );
    assert_eq!(
        one.lookup(&[1, 2, 3, 5], record)
            .expect("lookup")
            .record_index,
        None
    );
    assert_eq!(
        one.lookup(&[0, 2, 3, 5], record)
            .expect("lookup")
            .record_index,
        None
    );
}

#[test]
fn sparse_index_refuses_unsorted_and_partial_files() {
    let layout = IndexLayout {
        record_size_bytes: 2,
        key_size_bytes: 2,
        block_records: 2,
    };
    let mut builder = SparseIndexBuilder::new(FileInfo::new("unsorted.bin", 6), layout);
    let error = builder
        .add_bytes(&[0, 1, 0, 3, 0, 2])
        .expect_err("unsorted");
    assert_eq!(error.offset_bytes, 4);
    let mut builder = SparseIndexBuilder::new(FileInfo::new("partial.bin", 3), layout);
    builder.add_bytes(&[0, 1, 0]).expect("bytes accepted");
    assert!(matches!(
        builder.finish().expect_err("partial").kind,
        KernelErrorKind::WrongLength(_)
    ));
}
