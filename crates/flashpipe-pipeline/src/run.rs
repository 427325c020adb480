//! Running a job: checks the settings, prepares the output files, starts the stage threads,
//! joins them and assembles the report.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use flashpipe_engine::command::READ_FILES_MAX_COUNT;
use flashpipe_engine::{Command, Engine, EngineConfig, EngineError, Reply};
use flashpipe_kernels::api::Kernel;

use crate::config::{OutputTarget, PipelineConfig};
use crate::error::PipelineError;
use crate::output::{keep_output_buffers, WriteQueue};
use crate::report::{FileOutcome, PipelineReport, PipelineResult, StageCounters, StageReport};
use crate::stages::read::{run_reader, ReaderPlan};
use crate::stages::reduce::run_reducer;
use crate::stages::work::run_worker;
use crate::stages::write::run_writer;
use crate::stages::{OutputPlan, Shared};

/// What a job runs on.
pub struct PipelineJob<'a> {
    /// The running engine of the store.
    pub engine: &'a Engine,
    /// The configuration it was started with (bounds the credits and the read size).
    pub engine_config: &'a EngineConfig,
    /// The kernel, configured.
    pub kernel: Arc<dyn Kernel>,
    /// Input files in the store.
    pub files: &'a [String],
    /// How to run.
    pub config: &'a PipelineConfig,
    /// Set by the caller to cancel the job (it then fails with [`PipelineError::Cancelled`]).
    pub cancel: Arc<AtomicBool>,
}

impl<'a> PipelineJob<'a> {
    /// A job of `kernel` over `files` that no one cancels.
    pub fn uncancelled(
        engine: &'a Engine,
        engine_config: &'a EngineConfig,
        kernel: Arc<dyn Kernel>,
        files: &'a [String],
        config: &'a PipelineConfig,
    ) -> PipelineJob<'a> {
        PipelineJob {
            engine,
            engine_config,
            kernel,
            files,
            config,
            cancel: Arc::new(AtomicBool::new(false)),
        }
    }
}

/// Told each input's outcome (its index in the job's files) as soon as the file is done,
/// from the reduce stage's thread (a slow observer slows the job); a job that fails later
/// still fails.
pub type FileObserver = Arc<dyn Fn(usize, &FileOutcome) + Send + Sync>;

/// Runs `kernel` over `files` in the store served by `engine`; see [`PipelineJob`].
pub fn run_pipeline(job: PipelineJob<'_>) -> Result<PipelineResult, PipelineError> {
    run_pipeline_observed(job, Arc::new(|_, _| {}))
}

/// As [`run_pipeline`], telling `on_file_done` each file's outcome as it completes (a
/// server streams them to its client, issue #14).
pub fn run_pipeline_observed(
    job: PipelineJob<'_>,
    on_file_done: FileObserver,
) -> Result<PipelineResult, PipelineError> {
    job.config.check(job.engine_config, job.files.len())?;
    let mut control = job.engine.client(4);
    let sizes = input_sizes(&mut control, job.files)?;
    if let OutputTarget::StoreFiles(names) = &job.config.output {
        prepare_output_files(&mut control, names, job.files)?;
    }
    let clock = job.engine.clock();
    let started_ns = clock.now_ns();
    let (spare_sender, spare_receiver) =
        crossbeam_channel::bounded(job.config.output_queue_capacity + job.config.writes_in_flight);
    let (write_sender, write_receiver) =
        crossbeam_channel::bounded(job.config.output_queue_capacity);
    let output = match &job.config.output {
        OutputTarget::Discard => {
            drop(write_sender);
            OutputPlan::Discard
        }
        OutputTarget::ReturnToCaller => {
            drop(write_sender);
            OutputPlan::Collect
        }
        OutputTarget::StoreFiles(names) => OutputPlan::Store {
            names: names.clone(),
            queue: std::sync::Mutex::new(Some(WriteQueue {
                requests: write_sender,
                spare_buffers: spare_receiver,
                chunk_bytes: job.config.output_chunk_bytes,
                clock: Arc::clone(&clock),
            })),
        },
    };
    let shared = Shared::new(
        Arc::clone(&job.kernel),
        Arc::clone(&clock),
        Arc::clone(&job.cancel),
        job.config.chunk_credit_count,
        output,
        on_file_done,
    );
    let spare_buffers_left = spare_receiver_clone(&shared);
    let counters = run_stages(&job, &shared, &sizes, write_receiver, spare_sender);
    if let Some(spare_buffers) = spare_buffers_left {
        keep_output_buffers(spare_buffers.try_iter());
    }
    let elapsed_ns = clock.now_ns().saturating_sub(started_ns);
    if let Some(error) = shared.take_error() {
        return Err(error);
    }
    if job.cancel.load(Ordering::Acquire) {
        return Err(PipelineError::Cancelled);
    }
    assert_eq!(
        shared.chunks_in_flight(),
        0,
        "credits leaked by a finished job"
    );
    let files: Vec<FileOutcome> = counters
        .outcomes
        .into_iter()
        .map(|outcome| outcome.expect("every file of a successful job has an outcome"))
        .collect();
    let report = build_report(&job, &shared, &files, &counters.stages, elapsed_ns);
    Ok(PipelineResult { files, report })
}

/// Every input's size, from one listing (one command, however many files: a per-file stat
/// would wait for the engine's reads in flight each time); a name missing from the listing
/// gets its own stat, whose error names it. Nothing runs unless every input exists.
fn input_sizes(
    control: &mut flashpipe_engine::EngineClient,
    files: &[String],
) -> Result<Vec<u64>, PipelineError> {
    let listing = match control.call(Command::List) {
        Ok(Reply::List(stats)) => stats,
        Ok(other) => unreachable!("list answered {other:?}"),
        Err(source) => {
            return Err(PipelineError::Open {
                file: "(listing)".to_string(),
                source,
            })
        }
    };
    let by_name: std::collections::HashMap<&str, u64> = listing
        .iter()
        .map(|stat| (stat.name.as_str(), stat.size_bytes))
        .collect();
    files
        .iter()
        .map(|name| match by_name.get(name.as_str()) {
            Some(size_bytes) => Ok(*size_bytes),
            None => stat_size(control, name),
        })
        .collect()
}

fn stat_size(
    control: &mut flashpipe_engine::EngineClient,
    name: &str,
) -> Result<u64, PipelineError> {
    match control.call(Command::Stat {
        name: name.to_string(),
    }) {
        Ok(Reply::Stat(stat)) => Ok(stat.size_bytes),
        Ok(other) => unreachable!("stat answered {other:?}"),
        Err(source) => Err(PipelineError::Open {
            file: name.to_string(),
            source,
        }),
    }
}

/// Creates (or empties) each output file; an output may not be one of the inputs.
fn prepare_output_files(
    control: &mut flashpipe_engine::EngineClient,
    names: &[String],
    inputs: &[String],
) -> Result<(), PipelineError> {
    for name in names {
        if inputs.contains(name) {
            return Err(PipelineError::Config(format!(
                "output file {name} is also an input; choose another output name"
            )));
        }
        let created = control.call(Command::Create { name: name.clone() });
        let result = match created {
            Err(EngineError::Namespace(flashpipe_fs::NamespaceError::Exists { .. })) => control
                .call(Command::Truncate {
                    name: name.clone(),
                    size_bytes: 0,
                }),
            other => other,
        };
        match result {
            Ok(Reply::Done) => {}
            Ok(other) => unreachable!("create or truncate answered {other:?}"),
            Err(source) => {
                return Err(PipelineError::Output {
                    file: name.clone(),
                    source,
                })
            }
        }
    }
    Ok(())
}

/// The write stage's recycled-buffer queue, to keep what is left in it once the job ends.
fn spare_receiver_clone(
    shared: &Shared,
) -> Option<crossbeam_channel::Receiver<flashpipe_device::IoBuf>> {
    match &shared.output {
        OutputPlan::Store { queue, .. } => queue
            .lock()
            .expect("output queue lock poisoned")
            .as_ref()
            .map(|queue| queue.spare_buffers.clone()),
        OutputPlan::Discard | OutputPlan::Collect => None,
    }
}

struct StageResults {
    outcomes: Vec<Option<FileOutcome>>,
    stages: Vec<StageReport>,
}

fn run_stages(
    job: &PipelineJob<'_>,
    shared: &Shared,
    sizes: &[u64],
    write_receiver: crossbeam_channel::Receiver<crate::output::WriteRequest>,
    spare_sender: crossbeam_channel::Sender<flashpipe_device::IoBuf>,
) -> StageResults {
    let config = job.config;
    let (work_sender, work_receiver) = crossbeam_channel::bounded(config.chunk_credit_count);
    let (result_sender, result_receiver) =
        crossbeam_channel::bounded(config.chunk_credit_count.max(16));
    let reader_plans = deal_files(job.files, sizes, config);
    std::thread::scope(|scope| {
        let writer_client = job.engine.client(config.writes_in_flight);
        let writer = scope.spawn(move || {
            run_writer(
                shared,
                writer_client,
                write_receiver,
                spare_sender,
                config.writes_in_flight,
            )
        });
        let readers: Vec<_> = reader_plans
            .into_iter()
            .map(|plan| {
                let client = job.engine.client(plan.reads_in_flight + 1);
                let (work, results) = (work_sender.clone(), result_sender.clone());
                scope.spawn(move || run_reader(shared, client, plan, work, results))
            })
            .collect();
        let workers: Vec<_> = (0..config.worker_count)
            .map(|_| {
                let (work, results) = (work_receiver.clone(), result_sender.clone());
                scope.spawn(move || run_worker(shared, work, results))
            })
            .collect();
        drop((work_sender, work_receiver, result_sender));
        let file_count = job.files.len();
        let reducer = scope.spawn(move || run_reducer(shared, result_receiver, file_count));
        let read = join_all(readers);
        let kernel = join_all(workers);
        let (outcomes, reduce) = reducer.join().expect("the reduce stage does not panic");
        shared.close_output();
        let write = writer.join().expect("the write stage does not panic");
        StageResults {
            outcomes,
            stages: vec![
                StageReport::new("read", config.reader_count, &read),
                StageReport::new("kernel", config.worker_count, &kernel),
                StageReport::new("reduce", 1, &reduce),
                StageReport::new("write", 1, &write),
            ],
        }
    })
}

fn join_all(handles: Vec<std::thread::ScopedJoinHandle<'_, StageCounters>>) -> StageCounters {
    let mut total = StageCounters::default();
    for handle in handles {
        total.merge(&handle.join().expect("pipeline stage threads do not panic"));
    }
    total
}

/// Deals the files to the readers in runs of consecutive files, the runs round-robin: files
/// written one after another lie next to each other on the device, so a reader's batch of
/// consecutive small files comes in a few device requests.
fn deal_files(files: &[String], sizes: &[u64], config: &PipelineConfig) -> Vec<ReaderPlan> {
    let reader_count = config.reader_count.min(files.len()).max(1);
    let batch_files_limit = batch_files_limit(config.chunk_credit_count, reader_count);
    let run_length = files
        .len()
        .div_ceil(reader_count)
        .clamp(1, READ_FILES_MAX_COUNT);
    let mut plans: Vec<ReaderPlan> = (0..reader_count)
        .map(|_| ReaderPlan {
            files: Vec::new(),
            reads_in_flight: config.reads_in_flight_per_reader,
            chunk_bytes: config.chunk_bytes,
            batch_files_limit,
        })
        .collect();
    for (index, name) in files.iter().enumerate() {
        plans[(index / run_length) % reader_count]
            .files
            .push((index, name.clone(), sizes[index]));
    }
    plans
}

/// Small files per batched read: as many as one command may name, now that a batch holds a
/// credit per pool buffer rather than per file; single reads when the credits are too few
/// for each reader to have a batch in flight while it gathers the next (fewer than two
/// each).
fn batch_files_limit(chunk_credit_count: usize, reader_count: usize) -> usize {
    if chunk_credit_count < 2 * reader_count.max(1) {
        1
    } else {
        READ_FILES_MAX_COUNT
    }
}

fn build_report(
    job: &PipelineJob<'_>,
    shared: &Shared,
    files: &[FileOutcome],
    stages: &[StageReport],
    elapsed_ns: u64,
) -> PipelineReport {
    let input_bytes: u64 = files.iter().map(|file| file.size_bytes).sum();
    let output_bytes: u64 = files.iter().map(|file| file.output_bytes).sum();
    let elapsed_seconds = elapsed_ns as f64 / 1e9;
    let max_chunks_in_flight = shared.max_chunks_in_flight();
    assert!(max_chunks_in_flight <= job.config.chunk_credit_count);
    PipelineReport {
        kernel: job.kernel.name().to_string(),
        file_count: files.len(),
        input_bytes,
        output_bytes,
        elapsed_seconds,
        input_bytes_per_second: if elapsed_seconds > 0.0 {
            input_bytes as f64 / elapsed_seconds
        } else {
            0.0
        },
        slowest_stage: PipelineReport::slowest_of(stages),
        stages: stages.to_vec(),
        max_chunks_in_flight,
        chunk_credit_count: job.config.chunk_credit_count,
    }
}
