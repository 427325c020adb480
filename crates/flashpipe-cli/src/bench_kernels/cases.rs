//! The kernels the comparison runs, with their inputs and the well-known tool beside each.

use std::sync::Arc;

use flashpipe_kernels::api::Kernel;
use flashpipe_kernels::registry::build_kernel;
use flashpipe_kernels::throughput::{synthetic_bytes, synthetic_png, synthetic_text};

type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

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

const DES_KEY: &str = "133457799bbcdff1";
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
        BenchCase {
            label: "des-ecb".into(),
            kernel: kernel("des-ecb", &[&format!("key={DES_KEY}")])?,
            files: one("des.in", random.clone()),
            tool: tool(
                "openssl enc -des-ecb",
                &[
                    "openssl",
                    "enc",
                    "-des-ecb",
                    "-K",
                    DES_KEY,
                    "-provider",
                    "legacy",
                    "-provider",
                    "default",
                    "-in",
                    "{input}",
                    "-out",
                    "/dev/null",
                ],
            ),
            no_tool_reason: "",
        },
        BenchCase {
            label: "aes128-ctr".into(),
            kernel: kernel(
                "aes128-ctr",
                &[&format!("key={AES_KEY}"), &format!("iv={AES_IV}")],
            )?,
            files: one("aes.in", random.clone()),
            tool: tool(
                "openssl enc -aes-128-ctr",
                &[
                    "openssl",
                    "enc",
                    "-aes-128-ctr",
                    "-K",
                    AES_KEY,
                    "-iv",
                    AES_IV,
                    "-in",
                    "{input}",
                    "-out",
                    "/dev/null",
                ],
            ),
            no_tool_reason: "",
        },
        BenchCase {
            label: "sha256".into(),
            kernel: kernel("sha256", &[])?,
            files: one("sha.in", random.clone()),
            tool: tool("sha256sum", &["sha256sum", "{input}"]),
            no_tool_reason: "",
        },
        BenchCase {
            label: "crc32c".into(),
            kernel: kernel("crc32c", &[])?,
            files: one("crc.in", random),
            tool: None,
            no_tool_reason: "no standard CRC32C command-line tool",
        },
        BenchCase {
            label: "grep (regex)".into(),
            kernel: kernel("grep", &[r"pattern=needle[0-9]+"])?,
            files: one("grep.in", synthetic_text(size_bytes)),
            tool: tool("GNU grep -cE", &["grep", "-cE", "needle[0-9]+", "{input}"]),
            no_tool_reason: "",
        },
        BenchCase {
            label: "sort (100 B records)".into(),
            kernel: kernel(
                "sort",
                &[
                    "record=100",
                    "key=99",
                    &format!("memory={}", (size_bytes / 4).max(4096)),
                ],
            )?,
            files: one("sort.in", text_records(size_bytes)),
            tool: tool(
                "GNU sort (LC_ALL=C)",
                &["env", "LC_ALL=C", "sort", "{input}", "-o", "/dev/null"],
            ),
            no_tool_reason: "",
        },
    ];
    let image = synthetic_png(1024, 1024)?;
    let image_count = (size_bytes / image.len()).clamp(2, 64);
    cases.push(BenchCase {
        label: "sobel".into(),
        kernel: kernel("sobel", &[])?,
        files: (0..image_count)
            .map(|index| (format!("image-{index}.png"), image.clone()))
            .collect(),
        tool: None,
        no_tool_reason: "no standard Sobel command-line tool installed",
    });
    if let Some((langid, text)) = langid {
        cases.push(BenchCase {
            label: "langid (2 KiB pieces)".into(),
            kernel: langid,
            files: one("langid.in", text),
            tool: tool(
                "python langid.py (2 KiB pieces)",
                &[
                    "python3",
                    "-c",
                    "import sys,langid\nd=open(sys.argv[1],'rb').read()\n\
                     [langid.classify(d[i:i+2048].decode('utf-8','ignore')) for i in range(0,len(d),2048)]",
                    "{input}",
                ],
            ),
            no_tool_reason: "",
        });
    }
    Ok(cases)
}
