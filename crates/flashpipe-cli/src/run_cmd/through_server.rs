//! `flashpipe run` while `flashpipe serve` holds the store (issue #14): the input names and
//! patterns are expanded through the server, the kernel runs next to the server's engine
//! (`Client::run_kernel`), and the answers are turned back into the pipeline's result, so
//! standard output and `--json` print exactly what the run in this process prints (digests
//! as `HASH  NAME` lines that `sha256sum --check` reads). The stage table's clock is the
//! server's store clock, as in process.

use flashpipe_bench::progress::Progress;
use flashpipe_client::{KernelFileOutcome, KernelRunSummary, RunKernelRequest};
use flashpipe_kernels::api::Summary;
use flashpipe_pipeline::{FileOutcome, PipelineReport, PipelineResult, StageReport};

use super::RunArgs;
use crate::error_kind::{ErrorKind, Failure};
use crate::session::LiveServer;
use crate::store_cmd::{resolve_input_names, CliResult};

/// Runs the kernel through `server` and prints as the run in process does.
pub(super) fn run_through_server(
    server: LiveServer,
    arguments: &RunArgs,
    options: Vec<String>,
    patterns: &[String],
    started: std::time::Instant,
) -> CliResult {
    if arguments.verbose {
        eprintln!("flashpipe: {}", server.describe());
    }
    let mut client = server.client;
    let inputs = resolve_input_names(&mut client, patterns)?;
    let request = RunKernelRequest {
        kernel: arguments.kernel.clone(),
        options,
        inputs,
        output: arguments.output.clone(),
        replace_outputs: arguments.force,
        reader_count: arguments.readers as u32,
        worker_count: arguments.workers.unwrap_or(0) as u32,
    };
    let progress = Progress::spinner(format!(
        "running the kernel over {} file(s) through the server",
        request.inputs.len()
    ));
    let answers = client.run_kernel(request).and_then(|run| run.collect_all());
    progress.finish();
    let (files, summary) = answers?;
    let device_time_is_simulated = summary.device_time_is_virtual;
    let result = pipeline_result(files, &summary)?;
    if arguments.json {
        println!("{}", serde_json::to_string_pretty(&result)?);
    } else {
        super::print_result(
            &result,
            arguments.names,
            device_time_is_simulated,
            started.elapsed().as_secs_f64(),
        )?;
    }
    Ok(super::no_match_status(&result)?)
}

/// The pipeline's result as the server's answers describe it.
fn pipeline_result(
    mut files: Vec<KernelFileOutcome>,
    summary: &KernelRunSummary,
) -> Result<PipelineResult, Box<dyn std::error::Error>> {
    files.sort_by_key(|file| file.index);
    let files = files
        .into_iter()
        .map(file_outcome)
        .collect::<Result<Vec<_>, _>>()?;
    let stages: Vec<StageReport> = summary
        .stages
        .iter()
        .map(|stage| StageReport {
            stage: stage_name(&stage.stage),
            thread_count: stage.thread_count as usize,
            item_count: stage.item_count,
            bytes: stage.bytes,
            busy_seconds: stage.busy_seconds.to_f64(),
            blocked_downstream_seconds: stage.blocked_downstream_seconds.to_f64(),
            capacity_bytes_per_second: stage.capacity_bytes_per_second.to_f64(),
        })
        .collect();
    let report = PipelineReport {
        kernel: summary.kernel.clone(),
        file_count: summary.file_count as usize,
        input_bytes: summary.input_bytes,
        output_bytes: summary.output_bytes,
        elapsed_seconds: summary.elapsed_seconds.to_f64(),
        input_bytes_per_second: summary.input_bytes_per_second.to_f64(),
        stages,
        slowest_stage: stage_name(&summary.slowest_stage),
        max_chunks_in_flight: summary.max_chunks_in_flight as usize,
        chunk_credit_count: summary.chunk_credit_count as usize,
    };
    Ok(PipelineResult { files, report })
}

fn file_outcome(file: KernelFileOutcome) -> Result<FileOutcome, Box<dyn std::error::Error>> {
    let result = file
        .result
        .map_err(|error| Failure::context(&error, format!("{}: {error}", file.name)))?;
    let summary: Summary = serde_json::from_slice(&result.summary_json).map_err(|error| {
        Failure::new(
            ErrorKind::Internal,
            format!(
                "{}: the server's summary of the file is not one this flashpipe reads: {error}",
                file.name
            ),
        )
    })?;
    Ok(FileOutcome {
        name: file.name,
        size_bytes: file.size_bytes,
        summary,
        output_bytes: result.output_bytes,
        output: None,
        output_file: result.output_file,
    })
}

/// The pipeline's name of a stage (`none` when no stage handled bytes; `other` for a
/// name this flashpipe does not know).
fn stage_name(name: &str) -> &'static str {
    match name {
        "read" => "read",
        "kernel" => "kernel",
        "reduce" => "reduce",
        "write" => "write",
        "none" => "none",
        _ => "other",
    }
}
