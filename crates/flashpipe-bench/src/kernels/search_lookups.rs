//! Lookups with the search index (SISC 2.1's binary search over a sorted file with an in-memory
//! index): once the pipeline has built the sparse index, each lookup searches it in memory and
//! makes one probe read of one block, here through the engine (near the data) and through an
//! ordinary file; `look` (util-linux, binary search of the whole file, one process per key)
//! answers the same keys beside them. Every answer is checked against `partition_point` over the
//! records in memory, and `look`'s found / not found against the index's.

use std::cell::RefCell;
use std::path::Path;
use std::process::{Command as Process, Stdio};
use std::sync::Arc;
use std::time::Instant;

use flashpipe_engine::{Command, EngineClient, Reply};
use flashpipe_kernels::binary_search::{ProbeRead, SearchIndexKernel, SparseIndex};
use flashpipe_kernels::throughput::synthetic_bytes;
use serde::Serialize;

use super::cases::{SEARCH_KEY_BYTES, SEARCH_RECORD_BYTES};
use crate::error::{internal, BenchError, BenchErrorKind};
use crate::kernels::store::KernelStore;

use crate::BenchResult;

/// Lookups answered with the index (half present keys, half absent).
const INDEX_LOOKUP_COUNT: usize = 4096;
/// Of those, the ones `look` answers too (it starts one process per key).
const LOOK_LOOKUP_COUNT: usize = 200;

/// The keys to look up and the answers expected.
pub struct SearchLookupPlan {
    /// The kernel whose last built index answers.
    pub kernel: Arc<SearchIndexKernel>,
    /// The sorted file's name in the store.
    pub file_name: String,
    /// Keys, each `SEARCH_KEY_BYTES` long.
    pub keys: Vec<Vec<u8>>,
    /// First record with each key (the reference), if any.
    pub expected: Vec<Option<u64>>,
}

impl SearchLookupPlan {
    /// Keys alternating between records of `data` and random letters (almost always absent).
    pub fn new(kernel: Arc<SearchIndexKernel>, file_name: String, data: &[u8]) -> Self {
        let records: Vec<&[u8]> = data.chunks_exact(SEARCH_RECORD_BYTES).collect();
        let noise = synthetic_bytes(INDEX_LOOKUP_COUNT * 16, 29);
        let keys: Vec<Vec<u8>> = (0..INDEX_LOOKUP_COUNT)
            .map(|index| {
                let random = &noise[index * 16..index * 16 + 16];
                if index % 2 == 0 && !records.is_empty() {
                    let pick = u64::from_le_bytes(random[..8].try_into().expect("eight bytes"));
                    records[(pick % records.len() as u64) as usize][..SEARCH_KEY_BYTES].to_vec()
                } else {
                    random[..SEARCH_KEY_BYTES]
                        .iter()
                        .map(|byte| b'a' + byte % 26)
                        .collect()
                }
            })
            .collect();
        let expected = keys
            .iter()
            .map(|key| {
                let first = records.partition_point(|record| &record[..key.len()] < key.as_slice());
                (first < records.len() && &records[first][..key.len()] == key.as_slice())
                    .then_some(first as u64)
            })
            .collect();
        Self {
            kernel,
            file_name,
            keys,
            expected,
        }
    }
}

/// What the lookups measured.
#[derive(Debug, Clone, Serialize)]
pub struct SearchLookupReport {
    /// Records in the sorted file.
    pub record_count: u64,
    /// Index entries held in memory.
    pub index_entry_count: u64,
    /// Bytes of keys the index holds.
    pub index_key_bytes: u64,
    /// Lookups answered with the index.
    pub lookup_count: usize,
    /// Of those, keys present in the file.
    pub found_count: usize,
    /// Probe reads per lookup (0 or 1 each).
    pub probe_reads_per_lookup: f64,
    /// Index in memory, probe reads through the engine (the store's device files, O_DIRECT).
    pub near_data_lookups_per_second: f64,
    /// Index in memory, probe reads with `pread` of the ordinary file (page cache).
    pub ordinary_file_lookups_per_second: f64,
    /// Keys `look` answered.
    pub look_lookup_count: usize,
    /// `look`, one process per key, binary search of the whole file (page cache).
    pub look_lookups_per_second: Option<f64>,
    /// Why `look` is missing or failed.
    pub look_note: Option<String>,
}

/// Probe reads through the engine: one `Command::Read` per probe.
struct EngineProbe {
    client: RefCell<EngineClient>,
    file_name: String,
}

impl ProbeRead for EngineProbe {
    fn read_exact_at(&self, offset_bytes: u64, buffer: &mut [u8]) -> std::io::Result<()> {
        let reply = self
            .client
            .borrow_mut()
            .call(Command::Read {
                name: self.file_name.clone(),
                offset_bytes,
                length_bytes: buffer.len() as u64,
            })
            .map_err(std::io::Error::other)?;
        match reply {
            Reply::Data(data) if data.len() == buffer.len() => {
                buffer.copy_from_slice(data.bytes());
                Ok(())
            }
            Reply::Data(data) => Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("read {} of {} bytes", data.len(), buffer.len()),
            )),
            _ => Err(std::io::Error::other(
                "the engine answered a read with no data",
            )),
        }
    }
}

/// Answers every key with `index` reading through `probe`; checks each answer; seconds taken.
fn timed_lookups<R: ProbeRead + ?Sized>(
    plan: &SearchLookupPlan,
    index: &SparseIndex,
    probe: &R,
) -> BenchResult<(f64, u64)> {
    let started = Instant::now();
    let mut probe_reads = 0u64;
    for (key, expected) in plan.keys.iter().zip(&plan.expected) {
        let result = index.lookup(key, probe)?;
        if result.record_index != *expected {
            return Err(internal(format!(
                "lookup of \"{}\" gave record {}, the reference {}",
                String::from_utf8_lossy(key),
                record_text(result.record_index),
                record_text(*expected)
            ))
            .into());
        }
        probe_reads += u64::from(result.probe_read_count);
    }
    Ok((started.elapsed().as_secs_f64(), probe_reads))
}

/// A lookup's record for an error: its index, or "none".
fn record_text(record: Option<u64>) -> String {
    record.map_or_else(|| "none".to_string(), |index| index.to_string())
}

/// `look KEY FILE` for the first keys; checks found / not found against the reference.
fn look_seconds(plan: &SearchLookupPlan, path: &Path, count: usize) -> BenchResult<f64> {
    let started = Instant::now();
    for (key, expected) in plan.keys.iter().zip(&plan.expected).take(count) {
        let status = Process::new("look")
            .arg(String::from_utf8_lossy(key).as_ref())
            .arg(path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()?;
        let found = match status.code() {
            Some(0) => true,
            Some(1) => false,
            _ => {
                return Err(BenchError::new(
                    BenchErrorKind::Io(std::io::ErrorKind::Other),
                    format!("look exited with {status}"),
                )
                .into())
            }
        };
        if found != expected.is_some() {
            return Err(internal(format!(
                "look says \"{}\" is {}found; the reference disagrees",
                String::from_utf8_lossy(key),
                if found { "" } else { "not " }
            ))
            .into());
        }
    }
    Ok(started.elapsed().as_secs_f64())
}

/// Runs the lookups after the index pass; `ordinary_path` is the sorted file outside the store.
pub fn run_lookups(
    plan: &SearchLookupPlan,
    store: &KernelStore,
    ordinary_path: &Path,
    quick: bool,
) -> BenchResult<SearchLookupReport> {
    let index = plan
        .kernel
        .last_index()
        .ok_or_else(|| internal("the search-index pass kept no index"))?;
    let engine_probe = EngineProbe {
        client: RefCell::new(store.engine.client(4)),
        file_name: plan.file_name.clone(),
    };
    let (near_seconds, probe_reads) = timed_lookups(plan, &index, &engine_probe)?;
    let file = std::fs::File::open(ordinary_path)?;
    let (ordinary_seconds, _) = timed_lookups(plan, &index, &file)?;
    let look_count = if quick { 10 } else { LOOK_LOOKUP_COUNT }.min(plan.keys.len());
    let (look_rate, look_note) = match look_seconds(plan, ordinary_path, look_count) {
        Ok(seconds) => (Some(look_count as f64 / seconds.max(1e-9)), None),
        Err(error) => (None, Some(format!("look failed: {error}"))),
    };
    let lookup_count = plan.keys.len();
    Ok(SearchLookupReport {
        record_count: index.record_count(),
        index_entry_count: index.entry_count() as u64,
        index_key_bytes: (index.entry_count() * SEARCH_KEY_BYTES) as u64,
        lookup_count,
        found_count: plan.expected.iter().filter(|found| found.is_some()).count(),
        probe_reads_per_lookup: probe_reads as f64 / lookup_count.max(1) as f64,
        near_data_lookups_per_second: lookup_count as f64 / near_seconds.max(1e-9),
        ordinary_file_lookups_per_second: lookup_count as f64 / ordinary_seconds.max(1e-9),
        look_lookup_count: look_count,
        look_lookups_per_second: look_rate,
        look_note,
    })
}

/// Prints the lookup comparison.
pub fn print_lookups(label: &str, report: &SearchLookupReport) {
    println!(
        "\n{label} lookups: {} records, index of {} entries ({} B of keys) in memory; {} lookups \
         ({} present), {:.2} probe reads each",
        report.record_count,
        report.index_entry_count,
        report.index_key_bytes,
        report.lookup_count,
        report.found_count,
        report.probe_reads_per_lookup
    );
    println!(
        "  index + probe read through the engine (near data): {:.0} lookups/s",
        report.near_data_lookups_per_second
    );
    println!(
        "  index + pread of the ordinary file (page cache):   {:.0} lookups/s",
        report.ordinary_file_lookups_per_second
    );
    match (report.look_lookups_per_second, &report.look_note) {
        (Some(rate), _) => println!(
            "  look (binary search of the whole file, one process per key, {} keys): {rate:.0} lookups/s",
            report.look_lookup_count
        ),
        (None, Some(note)) => println!("  look: {note}"),
        (None, None) => {}
    }
}
