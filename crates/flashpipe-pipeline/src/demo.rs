//! The near-data part of `flashpipe demo` (issue #6 item 7): language identification and Sobel
//! run next to the data on a mounted store, each beside the read-everything-then-compute shape,
//! printed as a small comparison table.

use std::io::Write;
use std::sync::Arc;

use flashpipe_engine::{Engine, EngineConfig};
use flashpipe_kernels::api::Kernel;
use serde::Serialize;

use crate::compare::read_then_compute;
use crate::config::{OutputTarget, PipelineConfig};
use crate::error::PipelineError;
use crate::run::{run_pipeline, PipelineJob};

/// What the demo runs on.
pub struct NearDataDemo<'a> {
    /// The store's running engine.
    pub engine: &'a Engine,
    /// Its configuration.
    pub engine_config: &'a EngineConfig,
    /// A configured language identifier (`langid profiles=... piece=2048`).
    pub langid: Arc<dyn Kernel>,
    /// Text files in the store.
    pub text_files: Vec<String>,
    /// A configured Sobel kernel.
    pub sobel: Arc<dyn Kernel>,
    /// Grayscale PNG files in the store; edge images are written back as `<name>.edges.png`.
    pub image_files: Vec<String>,
}

/// One kernel's line of the comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DemoRow {
    /// Kernel name.
    pub kernel: String,
    /// Input files.
    pub file_count: usize,
    /// Input bytes.
    pub input_bytes: u64,
    /// Near-data pipeline, input bytes per second.
    pub near_data_bytes_per_second: f64,
    /// Read whole files, then compute.
    pub read_then_compute_bytes_per_second: f64,
    /// The pipeline stage that set the pace.
    pub slowest_stage: &'static str,
    /// Files the pipeline wrote back into the store.
    pub output_files: Vec<String>,
    /// A short description of the results (languages found, edge images written).
    pub results: String,
}

/// Runs both kernels near the data, prints the comparison to `out`, and returns the rows.
pub fn run_near_data_demo(
    demo: &NearDataDemo<'_>,
    out: &mut dyn Write,
) -> Result<Vec<DemoRow>, PipelineError> {
    let edge_names: Vec<String> = demo
        .image_files
        .iter()
        .map(|name| format!("{name}.edges.png"))
        .collect();
    let rows = vec![
        demo_row(demo, &demo.langid, &demo.text_files, OutputTarget::Discard)?,
        demo_row(
            demo,
            &demo.sobel,
            &demo.image_files,
            OutputTarget::StoreFiles(edge_names),
        )?,
    ];
    print_rows(&rows, out);
    Ok(rows)
}

fn demo_row(
    demo: &NearDataDemo<'_>,
    kernel: &Arc<dyn Kernel>,
    files: &[String],
    output: OutputTarget,
) -> Result<DemoRow, PipelineError> {
    let config = PipelineConfig::for_engine(demo.engine_config, output);
    let result = run_pipeline(PipelineJob::uncancelled(
        demo.engine,
        demo.engine_config,
        Arc::clone(kernel),
        files,
        &config,
    ))?;
    let baseline = read_then_compute(
        demo.engine,
        &demo.engine.clock(),
        kernel.as_ref(),
        files,
        config.chunk_bytes as usize,
        config.worker_count,
    )?;
    Ok(DemoRow {
        kernel: kernel.name().to_string(),
        file_count: files.len(),
        input_bytes: result.report.input_bytes,
        near_data_bytes_per_second: result.report.input_bytes_per_second,
        read_then_compute_bytes_per_second: baseline.input_bytes_per_second,
        slowest_stage: result.report.slowest_stage,
        output_files: result
            .files
            .iter()
            .filter_map(|file| file.output_file.clone())
            .collect(),
        results: describe_results(&result.files),
    })
}

/// Prefix of files whose true language is known: `heldout:<language>:<name>`.
pub const HELD_OUT_PREFIX: &str = "heldout:";

fn describe_results(files: &[crate::report::FileOutcome]) -> String {
    use flashpipe_kernels::api::Summary;
    let mut languages = std::collections::BTreeMap::<String, usize>::new();
    let (mut written, mut known, mut correct) = (0u64, 0usize, 0usize);
    for file in files {
        let expected = file
            .name
            .strip_prefix(HELD_OUT_PREFIX)
            .and_then(|rest| rest.split(':').next());
        match &file.summary {
            Summary::Labels { labels } => {
                for label in labels {
                    *languages.entry(label.language.clone()).or_default() += 1;
                    if let Some(expected) = expected {
                        known += 1;
                        correct += usize::from(label.language == expected);
                    }
                }
            }
            _ => written += file.output_bytes,
        }
    }
    if languages.is_empty() {
        return format!("{written} bytes of results written back");
    }
    if known > 0 {
        return format!(
            "held-out pieces labelled correctly: {correct} of {known} ({:.1}%)",
            100.0 * correct as f64 / known as f64
        );
    }
    let mut counted: Vec<_> = languages.into_iter().collect();
    counted.sort_by_key(|entry| std::cmp::Reverse(entry.1));
    let top: Vec<String> = counted
        .iter()
        .take(5)
        .map(|(language, count)| format!("{language} x{count}"))
        .collect();
    format!("pieces labelled: {}", top.join(", "))
}

fn print_rows(rows: &[DemoRow], out: &mut dyn Write) {
    let _ = writeln!(
        out,
        "{:<10} {:>6} {:>12} {:>16} {:>20} {:>8}  slowest",
        "kernel", "files", "input MiB", "near-data MiB/s", "read-then-compute", "ratio"
    );
    for row in rows {
        let ratio = if row.read_then_compute_bytes_per_second > 0.0 {
            row.near_data_bytes_per_second / row.read_then_compute_bytes_per_second
        } else {
            0.0
        };
        let _ = writeln!(
            out,
            "{:<10} {:>6} {:>12.1} {:>16.1} {:>20.1} {:>7.2}x  {}",
            row.kernel,
            row.file_count,
            row.input_bytes as f64 / 1048576.0,
            row.near_data_bytes_per_second / 1048576.0,
            row.read_then_compute_bytes_per_second / 1048576.0,
            ratio,
            row.slowest_stage
        );
        let _ = writeln!(out, "           {}", row.results);
    }
}
