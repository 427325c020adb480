//! k-nearest neighbours over f32 vectors (SISC microbenchmark 2.1): the data file is a sequence
//! of records of `dimensions` little-endian f32 values; a batch of queries is answered in one pass
//! (more queries per pass move the kernel from I/O-bound to compute-bound, as in SISC Fig. 3).
//! Records are independent, so chunks map in parallel; each part keeps its own k best per query
//! and the reducer merges them. Distances are squared Euclidean; ties go to the lower record index.

use std::sync::Arc;

use crate::api::{FileInfo, FileJob, Kernel, Neighbour, OutputSink, QueryNeighbours, Summary};
use crate::error::{KernelError, KernelErrorKind, OptionsError};
use crate::options::{
    bad_query_file, read_query_file, KernelOptions, OptionSpec, MAX_DIMENSIONS, MAX_NEIGHBOURS,
    MAX_QUERY_NEIGHBOURS,
};
use crate::records::{start_record_job, RecordKernel};

/// Options of kNN.
pub const KNN_OPTIONS: &[OptionSpec] = &[
    OptionSpec::required(
        "queries",
        "file of query vectors (little-endian f32 records of `dimensions` values)",
    ),
    OptionSpec::required("dimensions", "values per vector (1..=65536)"),
    OptionSpec::optional("k", "10", "neighbours per query (1..=1024)"),
];

/// Decodes little-endian f32 records; `None` if the length is not a whole number of records.
pub fn decode_vectors(bytes: &[u8], dimensions: usize) -> Option<Vec<f32>> {
    if dimensions == 0 || bytes.len() % (dimensions * 4) != 0 {
        return None;
    }
    Some(
        bytes
            .chunks_exact(4)
            .map(|value| f32::from_le_bytes(value.try_into().expect("four bytes")))
            .collect(),
    )
}

/// Encodes f32 values little-endian.
pub fn encode_vectors(values: &[f32]) -> Vec<u8> {
    values
        .iter()
        .flat_map(|value| value.to_le_bytes())
        .collect()
}

/// The kNN kernel with its query batch.
pub struct KnnKernel {
    dimensions: usize,
    neighbour_count: usize,
    queries: Vec<f32>,
}

impl KnnKernel {
    /// A kernel answering `queries` (a whole number of `dimensions`-vectors) with `k` neighbours.
    pub fn new(dimensions: usize, neighbour_count: usize, queries: Vec<f32>) -> Self {
        assert!(
            dimensions > 0 && neighbour_count > 0,
            "dimensions and k are positive"
        );
        assert_eq!(queries.len() % dimensions, 0, "queries are whole vectors");
        Self {
            dimensions,
            neighbour_count,
            queries,
        }
    }

    /// Builds from options (reads the query file).
    pub fn from_options(options: &KernelOptions) -> Result<Arc<dyn Kernel>, OptionsError> {
        let dimensions = options.integer("dimensions", 1, MAX_DIMENSIONS)? as usize;
        let neighbour_count = options.integer("k", 1, MAX_NEIGHBOURS)? as usize;
        let path = options.text("queries")?;
        let bytes = read_query_file(path)?;
        let queries = decode_vectors(&bytes, dimensions)
            .filter(|values| !values.is_empty())
            .ok_or_else(|| {
                bad_query_file(format!(
                    "{path} has {} bytes, not a positive multiple of {} ({dimensions} f32 values)",
                    bytes.len(),
                    dimensions * 4
                ))
            })?;
        let query_count = (queries.len() / dimensions) as u64;
        if query_count * neighbour_count as u64 > MAX_QUERY_NEIGHBOURS {
            return Err(bad_query_file(format!(
                "{path} holds {query_count} queries; queries x k = {} is above the limit of {MAX_QUERY_NEIGHBOURS}",
                query_count * neighbour_count as u64
            )));
        }
        Ok(Arc::new(Arc::new(Self::new(
            dimensions,
            neighbour_count,
            queries,
        ))))
    }

    fn query_count(&self) -> usize {
        self.queries.len() / self.dimensions
    }
}

/// Inserts a candidate into a best-first list of at most `limit` neighbours.
fn offer(best: &mut Vec<Neighbour>, candidate: Neighbour, limit: usize) {
    let worse_than = |existing: &Neighbour| {
        (existing.distance_squared, existing.record_index)
            > (candidate.distance_squared, candidate.record_index)
    };
    if best.len() == limit && !best.last().is_some_and(worse_than) {
        return;
    }
    let position = best.iter().position(worse_than).unwrap_or(best.len());
    best.insert(position, candidate);
    best.truncate(limit);
}

fn squared_distance(left: &[f32], right: &[f32]) -> f32 {
    left.iter().zip(right).map(|(a, b)| (a - b) * (a - b)).sum()
}

impl RecordKernel for KnnKernel {
    type Partial = Vec<Vec<Neighbour>>;
    type Accumulator = Vec<Vec<Neighbour>>;

    fn record_size_bytes(&self) -> usize {
        self.dimensions * 4
    }

    fn map_records(
        &self,
        _file: &FileInfo,
        offset_bytes: u64,
        records: &[u8],
    ) -> Result<Self::Partial, KernelError> {
        let first_record = offset_bytes / self.record_size_bytes() as u64;
        let values = decode_vectors(records, self.dimensions).expect("whole records");
        let mut best = vec![Vec::with_capacity(self.neighbour_count + 1); self.query_count()];
        for (index, record) in values.chunks_exact(self.dimensions).enumerate() {
            for (query, best_for_query) in self
                .queries
                .chunks_exact(self.dimensions)
                .zip(best.iter_mut())
            {
                let candidate = Neighbour {
                    record_index: first_record + index as u64,
                    distance_squared: squared_distance(query, record),
                };
                offer(best_for_query, candidate, self.neighbour_count);
            }
        }
        Ok(best)
    }

    fn new_accumulator(&self, _file: &FileInfo) -> Self::Accumulator {
        vec![Vec::new(); self.query_count()]
    }

    fn fold(
        &self,
        accumulator: &mut Self::Accumulator,
        partial: Self::Partial,
        _sink: &mut dyn OutputSink,
    ) -> Result<(), KernelError> {
        for (best, candidates) in accumulator.iter_mut().zip(partial) {
            for candidate in candidates {
                offer(best, candidate, self.neighbour_count);
            }
        }
        Ok(())
    }

    fn finish(
        &self,
        accumulator: Self::Accumulator,
        file: &FileInfo,
        offset_bytes: u64,
        short_record: &[u8],
        _sink: &mut dyn OutputSink,
    ) -> Result<Summary, KernelError> {
        if !short_record.is_empty() {
            return Err(file.error_at(
                offset_bytes,
                wrong_length(file.size_bytes, self.record_size_bytes()),
            ));
        }
        let queries = accumulator
            .into_iter()
            .enumerate()
            .map(|(query_index, neighbours)| QueryNeighbours {
                query_index,
                neighbours,
            })
            .collect();
        Ok(Summary::Neighbours { queries })
    }
}

fn wrong_length(size_bytes: u64, record_bytes: usize) -> KernelErrorKind {
    KernelErrorKind::WrongLength(format!(
        "{size_bytes} bytes is not a whole number of {record_bytes}-byte vectors"
    ))
}

impl Kernel for Arc<KnnKernel> {
    fn name(&self) -> &'static str {
        "knn"
    }

    fn start_file(&self, file: &FileInfo) -> Result<FileJob, KernelError> {
        let record_bytes = self.record_size_bytes() as u64;
        let remainder = file.size_bytes % record_bytes;
        if remainder != 0 {
            return Err(file.error_at(
                file.size_bytes - remainder,
                wrong_length(file.size_bytes, record_bytes as usize),
            ));
        }
        Ok(start_record_job(self, file))
    }
}
