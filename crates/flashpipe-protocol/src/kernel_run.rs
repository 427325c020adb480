//! The frames of a kernel run through a server (issue #14): the run-kernel request
//! (kind 0x0120), then its answers under the request's id: one kernel-file frame per
//! input file (kind 0x0220) and one kernel-summary frame (kind 0x0221) that ends the
//! request, or an error frame instead of the summary (a failed or cancelled run). Byte
//! layouts are in docs/protocol.md ("Kernel runs"); every length and count is checked
//! against the limits below before anything is allocated.

use crate::error::{DecodeError, RemoteError};
use crate::wire::{Reader, Writer};
use crate::MAX_NAME_BYTES;

/// Longest kernel name in bytes.
pub const MAX_KERNEL_NAME_BYTES: usize = 64;

/// Most kernel options one run may carry.
pub const MAX_KERNEL_OPTION_COUNT: usize = 64;

/// Longest kernel option (`key=value`) in bytes.
pub const MAX_KERNEL_OPTION_BYTES: usize = 4096;

/// Most input files one run may name (the body limit bounds them too).
pub const MAX_RUN_INPUT_COUNT: usize = 1 << 16;

/// Longest result (a file's kernel summary as JSON) in bytes.
pub const MAX_KERNEL_RESULT_BYTES: usize = 1 << 20;

/// Most stage rows one summary may carry.
pub const MAX_KERNEL_STAGE_COUNT: usize = 16;

/// Longest stage name in bytes.
pub const MAX_STAGE_NAME_BYTES: usize = 64;

/// A float as its IEEE 754 bits, so frames holding figures stay comparable (`Eq`) and a
/// figure crosses the wire bit for bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireFloat(pub u64);

impl WireFloat {
    /// The bits of `value`.
    pub fn from_f64(value: f64) -> WireFloat {
        WireFloat(value.to_bits())
    }

    /// The value.
    pub fn to_f64(self) -> f64 {
        f64::from_bits(self.0)
    }
}

/// Run a kernel over files of the store, next to the data (what `flashpipe run` asks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunKernelRequest {
    /// The kernel's registry name (`sha256`, `grep`, ...).
    pub kernel: String,
    /// The kernel's options, each `key=value` as `kernels run` spells them.
    pub options: Vec<String>,
    /// Input files in the store, in order (patterns already expanded by the client).
    pub inputs: Vec<String>,
    /// `--output`: the output file (one input) or prefix `NAME-<input>` (several).
    pub output: Option<String>,
    /// `--force`: replace output files that exist (in the commit that ends the run).
    pub replace_outputs: bool,
    /// Reader threads; 0 for the server's default (1).
    pub reader_count: u32,
    /// Kernel worker threads; 0 for the server's default (one per core).
    pub worker_count: u32,
}

/// One input file's outcome, streamed while the run goes on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelFileOutcome {
    /// The file's position in the request's inputs.
    pub index: u32,
    /// The input file.
    pub name: String,
    /// Its size.
    pub size_bytes: u64,
    /// What the kernel made of it, or why it failed.
    pub result: Result<KernelFileResult, RemoteError>,
}

/// What the kernel made of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelFileResult {
    /// The kernel's summary of the file as JSON (docs/kernels.md's summary kinds).
    pub summary_json: Vec<u8>,
    /// Bytes of transformed stream produced.
    pub output_bytes: u64,
    /// The store file the stream went to (committed), when the kernel transforms.
    pub output_file: Option<String>,
}

/// One pipeline stage's figures, as the CLI prints them in its stage table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelStageFigures {
    /// `read`, `kernel`, `reduce`, `write`.
    pub stage: String,
    /// Threads in the stage.
    pub thread_count: u32,
    /// Chunks or buffers handled.
    pub item_count: u64,
    /// Bytes handled.
    pub bytes: u64,
    /// Time spent working (summed over threads).
    pub busy_seconds: WireFloat,
    /// Time blocked on the next stage (summed over threads).
    pub blocked_downstream_seconds: WireFloat,
    /// What the stage could sustain alone.
    pub capacity_bytes_per_second: WireFloat,
}

/// The run's totals and stage table; the last frame of a successful run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelRunSummary {
    /// The kernel's registry name.
    pub kernel: String,
    /// Input files.
    pub file_count: u64,
    /// Input bytes.
    pub input_bytes: u64,
    /// Output bytes (transformed streams).
    pub output_bytes: u64,
    /// Start to last write, by the store device's clock.
    pub elapsed_seconds: WireFloat,
    /// `input_bytes / elapsed_seconds`.
    pub input_bytes_per_second: WireFloat,
    /// The stage that set the pace.
    pub slowest_stage: String,
    /// Each stage.
    pub stages: Vec<KernelStageFigures>,
    /// Most credits (engine pool buffers) held at once.
    pub max_chunks_in_flight: u64,
    /// The credit limit.
    pub chunk_credit_count: u64,
    /// True when the store's clock is simulated device time (emulated flash).
    pub device_time_is_virtual: bool,
}

pub(crate) fn encode_run_kernel(request: &RunKernelRequest, writer: &mut Writer) {
    writer.string(&request.kernel);
    writer.count(request.options.len());
    request
        .options
        .iter()
        .for_each(|option| writer.string(option));
    writer.count(request.inputs.len());
    request.inputs.iter().for_each(|input| writer.string(input));
    match &request.output {
        None => writer.u8(0),
        Some(output) => {
            writer.u8(1);
            writer.string(output);
        }
    }
    writer.bool(request.replace_outputs);
    writer.u32(request.reader_count);
    writer.u32(request.worker_count);
}

pub(crate) fn decode_run_kernel(reader: &mut Reader<'_>) -> Result<RunKernelRequest, DecodeError> {
    let kernel = reader.string("run_kernel.kernel", MAX_KERNEL_NAME_BYTES)?;
    let option_count = reader.count("run_kernel.option_count", MAX_KERNEL_OPTION_COUNT, 4)?;
    let options = (0..option_count)
        .map(|_| reader.string("run_kernel.option", MAX_KERNEL_OPTION_BYTES))
        .collect::<Result<_, _>>()?;
    let input_count = reader.count("run_kernel.input_count", MAX_RUN_INPUT_COUNT, 4)?;
    let inputs = (0..input_count)
        .map(|_| reader.string("run_kernel.input", MAX_NAME_BYTES))
        .collect::<Result<_, _>>()?;
    let output = match reader.u8("run_kernel.output_tag")? {
        0 => None,
        1 => Some(reader.string("run_kernel.output", MAX_NAME_BYTES)?),
        value => {
            return Err(DecodeError::BadValue {
                field: "run_kernel.output_tag",
                value: u64::from(value),
            })
        }
    };
    Ok(RunKernelRequest {
        kernel,
        options,
        inputs,
        output,
        replace_outputs: reader.bool("run_kernel.replace_outputs")?,
        reader_count: reader.u32("run_kernel.reader_count")?,
        worker_count: reader.u32("run_kernel.worker_count")?,
    })
}

pub(crate) fn encode_kernel_file(
    outcome: &KernelFileOutcome,
    writer: &mut Writer,
    encode_error: impl Fn(&RemoteError, &mut Writer),
) {
    writer.u32(outcome.index);
    writer.string(&outcome.name);
    writer.u64(outcome.size_bytes);
    match &outcome.result {
        Ok(result) => {
            writer.u8(0);
            writer.bytes(&result.summary_json);
            writer.u64(result.output_bytes);
            match &result.output_file {
                None => writer.u8(0),
                Some(name) => {
                    writer.u8(1);
                    writer.string(name);
                }
            }
        }
        Err(error) => {
            writer.u8(1);
            encode_error(error, writer);
        }
    }
}

pub(crate) fn decode_kernel_file(
    reader: &mut Reader<'_>,
    decode_error: impl Fn(&mut Reader<'_>) -> Result<RemoteError, DecodeError>,
) -> Result<KernelFileOutcome, DecodeError> {
    let index = reader.u32("kernel_file.index")?;
    let name = reader.string("kernel_file.name", MAX_NAME_BYTES)?;
    let size_bytes = reader.u64("kernel_file.size")?;
    let result = match reader.u8("kernel_file.tag")? {
        0 => Ok(decode_file_result(reader)?),
        1 => Err(decode_error(reader)?),
        value => {
            return Err(DecodeError::BadValue {
                field: "kernel_file.tag",
                value: u64::from(value),
            })
        }
    };
    Ok(KernelFileOutcome {
        index,
        name,
        size_bytes,
        result,
    })
}

fn decode_file_result(reader: &mut Reader<'_>) -> Result<KernelFileResult, DecodeError> {
    let summary_json = reader
        .bytes("kernel_file.summary_json", MAX_KERNEL_RESULT_BYTES)?
        .to_vec();
    let output_bytes = reader.u64("kernel_file.output_bytes")?;
    let output_file = match reader.u8("kernel_file.output_file_tag")? {
        0 => None,
        1 => Some(reader.string("kernel_file.output_file", MAX_NAME_BYTES)?),
        value => {
            return Err(DecodeError::BadValue {
                field: "kernel_file.output_file_tag",
                value: u64::from(value),
            })
        }
    };
    Ok(KernelFileResult {
        summary_json,
        output_bytes,
        output_file,
    })
}

pub(crate) fn encode_kernel_summary(summary: &KernelRunSummary, writer: &mut Writer) {
    writer.string(&summary.kernel);
    writer.u64(summary.file_count);
    writer.u64(summary.input_bytes);
    writer.u64(summary.output_bytes);
    writer.u64(summary.elapsed_seconds.0);
    writer.u64(summary.input_bytes_per_second.0);
    writer.string(&summary.slowest_stage);
    writer.count(summary.stages.len());
    for stage in &summary.stages {
        writer.string(&stage.stage);
        writer.u32(stage.thread_count);
        writer.u64(stage.item_count);
        writer.u64(stage.bytes);
        writer.u64(stage.busy_seconds.0);
        writer.u64(stage.blocked_downstream_seconds.0);
        writer.u64(stage.capacity_bytes_per_second.0);
    }
    writer.u64(summary.max_chunks_in_flight);
    writer.u64(summary.chunk_credit_count);
    writer.bool(summary.device_time_is_virtual);
}

pub(crate) fn decode_kernel_summary(
    reader: &mut Reader<'_>,
) -> Result<KernelRunSummary, DecodeError> {
    let kernel = reader.string("kernel_summary.kernel", MAX_KERNEL_NAME_BYTES)?;
    let file_count = reader.u64("kernel_summary.file_count")?;
    let input_bytes = reader.u64("kernel_summary.input_bytes")?;
    let output_bytes = reader.u64("kernel_summary.output_bytes")?;
    let elapsed_seconds = WireFloat(reader.u64("kernel_summary.elapsed_seconds")?);
    let input_bytes_per_second = WireFloat(reader.u64("kernel_summary.input_bytes_per_second")?);
    let slowest_stage = reader.string("kernel_summary.slowest_stage", MAX_STAGE_NAME_BYTES)?;
    let stage_count = reader.count("kernel_summary.stage_count", MAX_KERNEL_STAGE_COUNT, 48)?;
    let stages = (0..stage_count)
        .map(|_| decode_stage(reader))
        .collect::<Result<_, _>>()?;
    Ok(KernelRunSummary {
        kernel,
        file_count,
        input_bytes,
        output_bytes,
        elapsed_seconds,
        input_bytes_per_second,
        slowest_stage,
        stages,
        max_chunks_in_flight: reader.u64("kernel_summary.max_chunks_in_flight")?,
        chunk_credit_count: reader.u64("kernel_summary.chunk_credit_count")?,
        device_time_is_virtual: reader.bool("kernel_summary.device_time_is_virtual")?,
    })
}

fn decode_stage(reader: &mut Reader<'_>) -> Result<KernelStageFigures, DecodeError> {
    Ok(KernelStageFigures {
        stage: reader.string("kernel_summary.stage", MAX_STAGE_NAME_BYTES)?,
        thread_count: reader.u32("kernel_summary.thread_count")?,
        item_count: reader.u64("kernel_summary.item_count")?,
        bytes: reader.u64("kernel_summary.bytes")?,
        busy_seconds: WireFloat(reader.u64("kernel_summary.busy_seconds")?),
        blocked_downstream_seconds: WireFloat(
            reader.u64("kernel_summary.blocked_downstream_seconds")?,
        ),
        capacity_bytes_per_second: WireFloat(
            reader.u64("kernel_summary.capacity_bytes_per_second")?,
        ),
    })
}
