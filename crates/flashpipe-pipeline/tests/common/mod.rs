//! Shared test fixtures: a RAM store with files, a device that fails reads on demand, and a
//! test kernel that can be slow (in real time, or charged in virtual time), fail or panic at a
//! chosen offset, or cancel its own job after a chosen number of chunks.

#![allow(dead_code)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flashpipe_device::{
    Clock, DeviceErrorKind, Operation, RamDisk, RealClock, Request, VirtualClock,
};
use flashpipe_engine::{Engine, EngineConfig};
use flashpipe_kernels::api::{
    Chunk, ChunkMapper, ChunkPart, FileInfo, FileJob, Kernel, OutputKind, OutputSink, PartReducer,
    Schedule, SequentialJob, Summary,
};
use flashpipe_kernels::error::{KernelError, KernelErrorKind};
use flashpipe_pipeline::{run_pipeline, PipelineConfig, PipelineError, PipelineResult};
use flashpipe_testkit::formatted::format_fs;
use flashpipe_testkit::hooked::{io_failed, Hooked, Hooks};

/// A running RAM store.
pub struct TestStore {
    pub engine: Engine,
    pub engine_config: EngineConfig,
    pub fail_reads: Arc<AtomicBool>,
}

/// The engine of these tests: the default one (overlapped writes, pool on the heap) with
/// small queues and pool.
pub fn test_engine() -> EngineConfig {
    EngineConfig {
        command_queue_capacity: 64,
        read_buffer_count: 16,
        max_read_bytes: 64 * 1024,
        reads_in_flight_limit: 16,
        ..EngineConfig::default()
    }
}

/// [`store_with`] for files whose names are owned strings.
pub fn store_of(files: &[(String, Vec<u8>)]) -> TestStore {
    let borrowed: Vec<(&str, Vec<u8>)> = files
        .iter()
        .map(|(name, data)| (name.as_str(), data.clone()))
        .collect();
    store_with(&borrowed)
}

/// The names of `files`, in order.
pub fn names_of(files: &[(String, Vec<u8>)]) -> Vec<&str> {
    files.iter().map(|(name, _)| name.as_str()).collect()
}

/// Formats a 64 MiB RAM store, writes `files`, and starts its engine.
pub fn store_with(files: &[(&str, Vec<u8>)]) -> TestStore {
    store_on_clock(files, RealClock::shared())
}

/// [`store_with`] on `clock`: the engine, and so the pipeline, tell time by it.
pub fn store_on_clock(files: &[(&str, Vec<u8>)], clock: Arc<dyn Clock>) -> TestStore {
    let fail_reads = Arc::new(AtomicBool::new(false));
    let ram = RamDisk::with_clock("ram", 4096, 16384, 32, clock).expect("ram disk");
    let device = Hooked::new(
        ram,
        FailingReads {
            fail_reads: Arc::clone(&fail_reads),
        },
    );
    let mut filesystem = format_fs(Box::new(device), 4096);
    for (name, data) in files {
        let file = filesystem.create(name).expect("create");
        filesystem.write(file, 0, data).expect("write");
    }
    filesystem.flush().expect("flush");
    TestStore {
        engine: Engine::start(filesystem, test_engine()),
        engine_config: test_engine(),
        fail_reads,
    }
}

impl TestStore {
    /// Runs `kernel` over `files` with `config`.
    pub fn run(
        &self,
        kernel: Arc<dyn Kernel>,
        files: &[&str],
        config: &PipelineConfig,
    ) -> Result<PipelineResult, PipelineError> {
        self.run_cancellable(kernel, files, config, Arc::new(AtomicBool::new(false)))
    }

    pub fn run_cancellable(
        &self,
        kernel: Arc<dyn Kernel>,
        files: &[&str],
        config: &PipelineConfig,
        cancel: Arc<AtomicBool>,
    ) -> Result<PipelineResult, PipelineError> {
        let files: Vec<String> = files.iter().map(|name| name.to_string()).collect();
        run_pipeline(flashpipe_pipeline::run::PipelineJob {
            engine: &self.engine,
            engine_config: &self.engine_config,
            kernel,
            files: &files,
            config,
            cancel,
        })
    }

    /// Reads a whole file back out of the store.
    pub fn contents(&self, name: &str) -> Vec<u8> {
        let mut client = self.engine.client(8);
        client.read_to_vec(name, 64 * 1024, 8).expect("read back")
    }
}

/// Small pipeline settings: 4 KiB chunks, few credits.
pub fn small_config(output: flashpipe_pipeline::OutputTarget) -> PipelineConfig {
    PipelineConfig {
        reader_count: 1,
        reads_in_flight_per_reader: 4,
        chunk_bytes: 4096,
        worker_count: 3,
        chunk_credit_count: 8,
        output_queue_capacity: 2,
        output_chunk_bytes: 8192,
        writes_in_flight: 2,
        output,
    }
}

/// `count` files of `length_bytes` each, named `{prefix}-0000` on, each with its own
/// [`pattern`].
pub fn patterned_files(prefix: &str, count: usize, length_bytes: usize) -> Vec<(String, Vec<u8>)> {
    (0..count)
        .map(|index| {
            let name = format!("{prefix}-{index:04}");
            (name, pattern(length_bytes, index as u8))
        })
        .collect()
}

/// Deterministic bytes.
pub fn pattern(length_bytes: usize, seed: u8) -> Vec<u8> {
    (0..length_bytes)
        .map(|index| {
            (index as u32)
                .wrapping_mul(2_654_435_761)
                .rotate_left(seed as u32) as u8
        })
        .collect()
}

/// Fails reads of data while `fail_reads` is set.
struct FailingReads {
    fail_reads: Arc<AtomicBool>,
}

impl Hooks for FailingReads {
    fn before_submit(&mut self, request: &Request) -> Result<(), DeviceErrorKind> {
        let failing = self.fail_reads.load(Ordering::Acquire);
        match request.operation {
            Operation::Read { .. } if failing => Err(io_failed("injected read failure")),
            _ => Ok(()),
        }
    }
}

/// A test kernel: sums bytes with positions, checks that parts arrive in order, and does
/// at each chunk what its [`Probe`] says.
pub struct ProbeKernel {
    pub schedule: Schedule,
    pub probe: Probe,
}

/// What the probe kernel does at each chunk: counts it, and can be slow, refuse or panic at
/// a chosen offset, charge a virtual clock or raise a cancellation flag.
#[derive(Clone, Default)]
pub struct Probe {
    pub delay: Duration,
    /// The offset of the chunk the probe refuses or panics at, and which of the two.
    pub fault_at: Option<(u64, ProbeFault)>,
    pub chunks_seen: Arc<AtomicU64>,
    /// Each chunk's cost charged to a virtual clock instead of spent in real time.
    pub virtual_cost: Option<VirtualCost>,
    /// Sets the flag once this many chunks have been seen (cancellation without a timer).
    pub cancel_after_chunks: Option<(u64, Arc<AtomicBool>)>,
}

/// How the probe fails at its fault offset.
#[derive(Clone, Copy)]
pub enum ProbeFault {
    /// A kernel error (wrong format).
    Refuse,
    /// A panic.
    Panic,
}

/// A kernel cost in virtual time: every chunk moves `clock` forward by `cost_per_chunk_ns`.
#[derive(Clone)]
pub struct VirtualCost {
    pub clock: VirtualClock,
    pub cost_per_chunk_ns: u64,
    /// Serialises the read-then-advance so concurrent workers never move time backwards.
    pub advancing: Arc<Mutex<()>>,
}

impl VirtualCost {
    pub fn new(clock: VirtualClock, cost_per_chunk_ns: u64) -> VirtualCost {
        VirtualCost {
            clock,
            cost_per_chunk_ns,
            advancing: Arc::new(Mutex::new(())),
        }
    }

    fn charge(&self) {
        let _advancing = self.advancing.lock().expect("cost lock");
        self.clock
            .advance_to(self.clock.now_ns() + self.cost_per_chunk_ns);
    }
}

impl ProbeKernel {
    pub fn new(schedule: Schedule) -> ProbeKernel {
        ProbeKernel {
            schedule,
            probe: Probe::default(),
        }
    }
}

/// The probe's digest: a position-weighted sum that any reordering changes.
pub fn probe_digest(data: &[u8]) -> u64 {
    data.iter().enumerate().fold(0u64, |sum, (index, byte)| {
        sum.wrapping_add((index as u64 + 1).wrapping_mul(u64::from(*byte) + 1))
    })
}

impl Probe {
    fn visit(&self, chunk: &Chunk<'_>) -> Result<u64, KernelError> {
        let seen = self.chunks_seen.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some((after_chunks, cancel)) = &self.cancel_after_chunks {
            if seen >= *after_chunks {
                cancel.store(true, Ordering::Release);
            }
        }
        if let Some(cost) = &self.virtual_cost {
            cost.charge();
        }
        if !self.delay.is_zero() {
            std::thread::sleep(self.delay);
        }
        let range = chunk.offset_bytes..chunk.end_offset_bytes().max(chunk.offset_bytes + 1);
        match self.fault_at {
            Some((offset, ProbeFault::Refuse)) if range.contains(&offset) => {
                return Err(
                    chunk.error_at(offset, KernelErrorKind::WrongFormat("probe refuses".into()))
                );
            }
            Some((offset, ProbeFault::Panic)) if range.contains(&offset) => panic!("probe panics"),
            _ => {}
        }
        Ok(chunk
            .data
            .iter()
            .enumerate()
            .fold(0u64, |sum, (index, byte)| {
                let position = chunk.offset_bytes + index as u64 + 1;
                sum.wrapping_add(position.wrapping_mul(u64::from(*byte) + 1))
            }))
    }
}

impl ChunkMapper for Probe {
    fn map_chunk(&self, chunk: &Chunk<'_>) -> Result<ChunkPart, KernelError> {
        let sum = self.visit(chunk)?;
        Ok(ChunkPart::new(chunk, (sum, chunk.data.to_vec())))
    }
}

struct ProbeReducer {
    file: FileInfo,
    next_offset_bytes: u64,
    sum: u64,
}

impl PartReducer for ProbeReducer {
    fn reduce_part(
        &mut self,
        part: ChunkPart,
        sink: &mut dyn OutputSink,
    ) -> Result<(), KernelError> {
        assert_eq!(
            part.offset_bytes, self.next_offset_bytes,
            "parts out of order"
        );
        self.next_offset_bytes += part.length_bytes as u64;
        let (sum, bytes): (u64, Vec<u8>) = part.into_partial(&self.file)?;
        self.sum = self.sum.wrapping_add(sum);
        sink.write_output(&bytes)
    }
    fn finish(self: Box<Self>, _sink: &mut dyn OutputSink) -> Result<Summary, KernelError> {
        assert_eq!(self.next_offset_bytes, self.file.size_bytes);
        Ok(digest_summary(self.sum))
    }
}

struct ProbeSequential {
    mapper: Probe,
    file: FileInfo,
    next_offset_bytes: u64,
    sum: u64,
}

impl SequentialJob for ProbeSequential {
    fn process_chunk(
        &mut self,
        chunk: &Chunk<'_>,
        sink: &mut dyn OutputSink,
    ) -> Result<(), KernelError> {
        chunk.advance_in_order(&mut self.next_offset_bytes);
        self.sum = self.sum.wrapping_add(self.mapper.visit(chunk)?);
        sink.write_output(chunk.data)
    }
    fn finish(self: Box<Self>, _sink: &mut dyn OutputSink) -> Result<Summary, KernelError> {
        assert_eq!(self.next_offset_bytes, self.file.size_bytes);
        Ok(digest_summary(self.sum))
    }
}

fn digest_summary(sum: u64) -> Summary {
    Summary::Digest {
        algorithm: "probe".into(),
        hex: format!("{sum:016x}"),
    }
}

impl Kernel for ProbeKernel {
    fn name(&self) -> &'static str {
        "probe"
    }
    fn schedule(&self) -> Schedule {
        self.schedule
    }
    fn output_kind(&self) -> OutputKind {
        OutputKind::TransformedStream
    }
    fn start_file(&self, file: &FileInfo) -> Result<FileJob, KernelError> {
        let mapper = self.probe.clone();
        Ok(match self.schedule {
            Schedule::ChunksInParallel => FileJob::Parallel {
                mapper: Arc::new(mapper),
                reducer: Box::new(ProbeReducer {
                    file: file.clone(),
                    next_offset_bytes: 0,
                    sum: 0,
                }),
            },
            Schedule::ChunksInOrder => FileJob::Sequential(Box::new(ProbeSequential {
                mapper,
                file: file.clone(),
                next_offset_bytes: 0,
                sum: 0,
            })),
        })
    }
}

/// The digest summary the probe gives for `data`.
pub fn expected_probe_summary(data: &[u8]) -> Summary {
    digest_summary(probe_digest(data))
}

/// `kernel`'s summary of the file `name` holding `data`, run in memory in 4 KiB chunks: what
/// the pipeline must report for that file.
pub fn in_memory_summary(kernel: &dyn Kernel, name: &str, data: &[u8]) -> Summary {
    flashpipe_kernels::driver::run_on_bytes(
        kernel,
        name,
        data,
        flashpipe_kernels::driver::DrivePlan::single(4096),
        &mut flashpipe_kernels::api::CountingSink::default(),
    )
    .expect("reference")
}
