//! The kernels the comparison runs, with their inputs and the well-known tool beside each.

use std::sync::Arc;

use flashpipe_kernels::api::Kernel;
use flashpipe_kernels::binary_search::{IndexLayout, SearchIndexKernel};
use flashpipe_kernels::knn::{encode_vectors, KnnKernel};
use flashpipe_kernels::registry::build_kernel;
use flashpipe_kernels::throughput::{synthetic_bytes, synthetic_png, synthetic_text};

use super::search_lookups::SearchLookupPlan;

use crate::BenchResult;

/// A command of a well-known tool; `{input}` stands for each input file's path.
pub struct ToolCommand {
    /// What it is, for the table.
    pub label: String,
    /// Program and arguments.
    pub argv: Vec<String>,
}

/// One row of the comparison.
pub struct BenchCase {
    /// Label for the table.
    pub label: String,
    /// The configured kernel.
    pub kernel: Arc<dyn Kernel>,
    /// Input files (name, contents).
    pub files: Vec<(String, Vec<u8>)>,
    /// The tool beside it, if one exists.
    pub tool: Option<ToolCommand>,
    /// Why there is no tool.
    pub no_tool_reason: &'static str,
    /// For the search index: the lookups answered with the index once it is built.
    pub lookups: Option<SearchLookupPlan>,
}

impl BenchCase {
    /// A case with `tool` beside it and no lookups.
    fn new(
        label: impl Into<String>,
        kernel: Arc<dyn Kernel>,
        files: Vec<(String, Vec<u8>)>,
        tool: Option<ToolCommand>,
    ) -> BenchCase {
        BenchCase {
            label: label.into(),
            kernel,
            files,
            tool,
            no_tool_reason: "",
            lookups: None,
        }
    }

    /// A case no standard tool stands beside, and why.
    fn without_tool(
        label: impl Into<String>,
        kernel: Arc<dyn Kernel>,
        files: Vec<(String, Vec<u8>)>,
        no_tool_reason: &'static str,
    ) -> BenchCase {
        BenchCase {
            no_tool_reason,
            ..BenchCase::new(label, kernel, files, None)
        }
    }
}

fn kernel(name: &str, arguments: &[&str]) -> BenchResult<Arc<dyn Kernel>> {
    let arguments: Vec<String> = arguments.iter().map(|text| text.to_string()).collect();
    Ok(build_kernel(name, &arguments)?)
}

fn tool(label: &str, argv: &[&str]) -> Option<ToolCommand> {
    Some(ToolCommand {
        label: label.to_string(),
        argv: argv.iter().map(|text| text.to_string()).collect(),
    })
}

/// `openssl enc CIPHER` over the case's input, output thrown away: with `-iv` when the
/// cipher takes one, and with the legacy provider loaded for the DES ciphers OpenSSL 3
/// keeps there.
fn openssl_enc(cipher: &str, key: &str, iv: Option<&str>, legacy: bool) -> Option<ToolCommand> {
    let mut argv = vec!["openssl", "enc", cipher, "-K", key];
    if let Some(iv) = iv {
        argv.extend(["-iv", iv]);
    }
    if legacy {
        argv.extend(["-provider", "legacy", "-provider", "default"]);
    }
    argv.extend(["-in", "{input}", "-out", "/dev/null"]);
    tool(&format!("openssl enc {cipher}"), &argv)
}

const DES_KEY: &str = "133457799bbcdff1";
const DES_IV: &str = "0001020304050607";
const AES_KEY: &str = "2b7e151628aed2a6abf7158809cf4f3c";
const AES_IV: &str = "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff";

/// Printable 100-byte records, newline-terminated, so GNU sort and the kernel sort the same.
fn text_records(size_bytes: usize) -> Vec<u8> {
    let noise = synthetic_bytes(size_bytes, 11);
    let mut records = Vec::with_capacity(size_bytes);
    for chunk in noise.chunks_exact(100) {
        records.extend(chunk[..99].iter().map(|byte| b'a' + byte % 26));
        records.push(b'\n');
    }
    records
}

/// Every case, inputs of about `size_bytes` each.
pub fn bench_cases(
    size_bytes: usize,
    langid: Option<(Arc<dyn Kernel>, Vec<u8>)>,
) -> BenchResult<Vec<BenchCase>> {
    let random = synthetic_bytes(size_bytes, 1);
    let one = |name: &str, data: Vec<u8>| vec![(name.to_string(), data)];
    let mut cases = vec![
        BenchCase::new(
            "des-ecb",
            kernel("des-ecb", &[&format!("key={DES_KEY}")])?,
            one("des.in", random.clone()),
            openssl_enc("-des-ecb", DES_KEY, None, true),
        ),
        BenchCase::new(
            "aes128-ctr",
            kernel(
                "aes128-ctr",
                &[&format!("key={AES_KEY}"), &format!("iv={AES_IV}")],
            )?,
            one("aes.in", random.clone()),
            openssl_enc("-aes-128-ctr", AES_KEY, Some(AES_IV), false),
        ),
        BenchCase::new(
            "sha256",
            kernel("sha256", &[])?,
            one("sha.in", random.clone()),
            tool("sha256sum", &["sha256sum", "{input}"]),
        ),
        BenchCase::without_tool(
            "crc32c",
            kernel("crc32c", &[])?,
            one("crc.in", random),
            "no standard CRC32C command-line tool",
        ),
        BenchCase::new(
            "grep (regex)",
            kernel("grep", &[r"pattern=needle[0-9]+"])?,
            one("grep.in", synthetic_text(size_bytes)),
            tool("GNU grep -cE", &["grep", "-cE", "needle[0-9]+", "{input}"]),
        ),
        BenchCase::new(
            "sort (100 B records)",
            kernel(
                "sort",
                &[
                    "record=100",
                    "key=99",
                    &format!("memory={}", (size_bytes / 4).max(4096)),
                ],
            )?,
            one("sort.in", text_records(size_bytes)),
            tool(
                "GNU sort (LC_ALL=C)",
                &["env", "LC_ALL=C", "sort", "{input}", "-o", "/dev/null"],
            ),
        ),
    ];
    let image = synthetic_png(1024, 1024)?;
    let image_count = (size_bytes / image.len()).clamp(2, 64);
    cases.push(BenchCase::without_tool(
        "sobel",
        kernel("sobel", &[])?,
        (0..image_count)
            .map(|index| (format!("image-{index}.png"), image.clone()))
            .collect(),
        "no standard Sobel command-line tool installed",
    ));
    if let Some((langid, text)) = langid {
        // The same interpreter as the anchors section (the venv that has langid.py).
        let python = super::langid_anchors::anchor_python();
        let python = python.to_string_lossy();
        cases.push(BenchCase::new(
            "langid (2 KiB pieces)",
            langid,
            one("langid.in", text),
            tool(
                "python langid.py (2 KiB pieces)",
                &[
                    &python,
                    "-c",
                    "import sys,langid\nd=open(sys.argv[1],'rb').read()\n\
                     [langid.classify(d[i:i+2048].decode('utf-8','ignore')) for i in range(0,len(d),2048)]",
                    "{input}",
                ],
            ),
        ));
    }
    cases.push(des_cbc_case(&synthetic_bytes(size_bytes, 1))?);
    cases.push(literal_grep_case(size_bytes)?);
    cases.push(knn_case(size_bytes));
    cases.push(search_index_case(size_bytes));
    Ok(cases)
}

/// Files a CBC input is split into: CBC is sequential inside a file, so the cores share the work
/// only across files (as SISC's and RAD's many-file jobs do).
const DES_CBC_FILE_COUNT: usize = 4;

/// DES-CBC over `DES_CBC_FILE_COUNT` files of whole 8-byte blocks; `openssl enc -des-cbc` beside it.
fn des_cbc_case(random: &[u8]) -> BenchResult<BenchCase> {
    let per_file_bytes = (random.len() / DES_CBC_FILE_COUNT / 8).max(1) * 8;
    let files = random
        .chunks(per_file_bytes)
        .take(DES_CBC_FILE_COUNT)
        .enumerate()
        .map(|(index, piece)| (format!("des-cbc-{index}.in"), piece.to_vec()))
        .collect();
    Ok(BenchCase::new(
        format!("des-cbc ({DES_CBC_FILE_COUNT} files)"),
        kernel(
            "des-cbc",
            &[&format!("key={DES_KEY}"), &format!("iv={DES_IV}")],
        )?,
        files,
        openssl_enc("-des-cbc", DES_KEY, Some(DES_IV), true),
    ))
}

/// A fixed-string search (the kernel's `literal=true`, `memchr::memmem`) against `grep -cF`.
fn literal_grep_case(size_bytes: usize) -> BenchResult<BenchCase> {
    Ok(BenchCase::new(
        "grep (literal)",
        kernel("grep", &["pattern=needle", "literal=true"])?,
        vec![("grep-literal.in".to_string(), synthetic_text(size_bytes))],
        tool("GNU grep -cF", &["grep", "-cF", "needle", "{input}"]),
    ))
}

/// Values per kNN vector.
const KNN_DIMENSIONS: usize = 32;
/// Queries answered per pass over the vectors (SISC 2.1's batch).
const KNN_QUERY_COUNT: usize = 16;
/// Neighbours per query.
const KNN_NEIGHBOUR_COUNT: usize = 10;

/// kNN of a batch of queries over random f32 vectors, in one pass.
fn knn_case(size_bytes: usize) -> BenchCase {
    let record_bytes = KNN_DIMENSIONS * 4;
    let value_count = (size_bytes / record_bytes).max(1) * KNN_DIMENSIONS;
    let noise = synthetic_bytes(value_count, 17);
    let values: Vec<f32> = noise.iter().map(|&byte| f32::from(byte) / 8.0).collect();
    let queries: Vec<f32> = (0..KNN_DIMENSIONS * KNN_QUERY_COUNT)
        .map(|index| ((index * 37) % 251) as f32 / 8.0)
        .collect();
    let knn: Arc<dyn Kernel> = Arc::new(Arc::new(KnnKernel::new(
        KNN_DIMENSIONS,
        KNN_NEIGHBOUR_COUNT,
        queries,
    )));
    BenchCase::without_tool(
        format!("knn (D={KNN_DIMENSIONS}, {KNN_QUERY_COUNT} queries, k={KNN_NEIGHBOUR_COUNT})"),
        knn,
        vec![("knn.f32".to_string(), encode_vectors(&values))],
        "no standard command-line tool does brute-force k-nearest-neighbour search over a raw \
         f32 vector file (FAISS, scikit-learn and Annoy are libraries, and none is installed)",
    )
}

/// Bytes per record of the sorted file: 15 lowercase letters and a newline, so `look` and
/// `sort -c` read the same file as text lines.
pub const SEARCH_RECORD_BYTES: usize = 16;
/// Key prefix of each record.
pub const SEARCH_KEY_BYTES: usize = 8;
/// Records per index entry (one probe read per lookup reads one block of them).
const SEARCH_BLOCK_RECORDS: usize = 64;

/// Sorted fixed-size text records.
fn sorted_text_records(size_bytes: usize) -> Vec<u8> {
    let noise = synthetic_bytes(size_bytes, 13);
    let mut records: Vec<[u8; SEARCH_RECORD_BYTES]> = noise
        .chunks_exact(SEARCH_RECORD_BYTES)
        .map(|chunk| {
            let mut record = [b'\n'; SEARCH_RECORD_BYTES];
            for (letter, byte) in record.iter_mut().zip(&chunk[..SEARCH_RECORD_BYTES - 1]) {
                *letter = b'a' + byte % 26;
            }
            record
        })
        .collect();
    records.sort_unstable();
    records.concat()
}

/// The sparse-index pass over a sorted file (it also checks the order, like `sort -c`), then
/// lookups with the index against `look`.
fn search_index_case(size_bytes: usize) -> BenchCase {
    let data = sorted_text_records(size_bytes);
    let index_kernel = Arc::new(SearchIndexKernel::new(IndexLayout {
        record_size_bytes: SEARCH_RECORD_BYTES,
        key_size_bytes: SEARCH_KEY_BYTES,
        block_records: SEARCH_BLOCK_RECORDS,
    }));
    let file_name = "search.sorted".to_string();
    let plan = SearchLookupPlan::new(Arc::clone(&index_kernel), file_name.clone(), &data);
    BenchCase {
        lookups: Some(plan),
        ..BenchCase::new(
            format!("search-index ({SEARCH_RECORD_BYTES} B records)"),
            index_kernel,
            vec![(file_name, data)],
            tool(
                "GNU sort -c (LC_ALL=C)",
                &["env", "LC_ALL=C", "sort", "-c", "{input}"],
            ),
        )
    }
}
