//! Files and block devices as [`BlockDevice`]s: io_uring with `O_DIRECT`, with a
//! thread-pool fallback where the kernel refuses.
//!
//! [`FileDevice::open`] opens a regular file (creating it when asked: preallocated, or
//! sparse with [`FileDeviceConfig::preallocate`] off) or a block device, checks the block size against what direct I/O needs there
//! (`BLKSSZGET` for block devices, `statx` for files) and starts an engine:
//! - [`FileEngine::IoUring`]: one ring per device, the file registered as a fixed file,
//!   [`BufferPool`]s registered as fixed buffers on request; `submit` only queues, so a
//!   batch of submissions costs one `io_uring_enter` at the next poll or wait;
//! - [`FileEngine::ThreadPool`]: worker threads with `pread`/`pwrite`, same contract;
//! - [`FileEngine::Auto`]: io_uring, falling back to the thread pool (said once per
//!   process on standard error) when io_uring setup or `O_DIRECT` is refused.
//!
//! Flush is `fsync`; trim punches a hole in a file (reads return zeros) or issues
//! `BLKDISCARD` on a block device (reads return what the device says: zeros on most).
//!
//! With [`FileDeviceConfig::read_only`] the file is opened `O_RDONLY`: writes, trims and
//! copies by reference are refused at submit with [`DeviceErrorKind::ReadOnly`], and a
//! flush completes at once (nothing was written, so nothing needs to become durable).

mod job;
mod open;
mod reflink;
mod threads;
mod uring;

#[cfg(test)]
mod tests;

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use io_uring::IoUring;

use crate::buffer::BufferPool;
use crate::clock::{Clock, RealClock};
use crate::error::{DeviceError, DeviceErrorKind, Rejected};
use crate::request::{check_queue_depth, BlockDevice, Completion, DeviceInfo, Operation, Request};

use job::Job;
pub use open::{allocate_existing, SMALLEST_SECTOR_BYTES};
use open::{Geometry, OpenFlags};
use threads::ThreadPoolEngine;
pub use uring::UringCounters;
use uring::UringEngine;

/// The block size used when none is asked for.
pub const DEFAULT_BLOCK_SIZE_BYTES: u32 = 4096;

/// Which engine carries out the requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FileEngine {
    /// io_uring, or the thread pool where io_uring or `O_DIRECT` is refused.
    #[default]
    Auto,
    /// io_uring only; opening fails where it is refused.
    IoUring,
    /// Worker threads with `pread`/`pwrite`.
    ThreadPool,
}

impl FileEngine {
    /// The engine's name as the command line spells it.
    pub fn name(self) -> &'static str {
        match self {
            FileEngine::Auto => "auto",
            FileEngine::IoUring => "io-uring",
            FileEngine::ThreadPool => "thread-pool",
        }
    }
}

/// How to open a [`FileDevice`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileDeviceConfig {
    /// A regular file or a block device.
    pub path: PathBuf,
    /// The device's block size: a power of two, at least what direct I/O needs there.
    pub block_size_bytes: u32,
    /// Most requests in flight: 1..=[`crate::MAX_QUEUE_DEPTH`].
    pub queue_depth: u32,
    /// Create the file with this size when it does not exist (preallocated or sparse, as
    /// [`FileDeviceConfig::preallocate`] says); an existing file must already have this
    /// size.
    pub create_size_bytes: Option<u64>,
    /// How a file made with `create_size_bytes` gets its size: `true` allocates every
    /// block at once (`fallocate`: a full file system fails now, and writes never find
    /// it full later); `false` makes a sparse file (`ftruncate`: blocks are allocated as
    /// they are first written, as `qemu-img create` does, so a full file system fails a
    /// later write with ENOSPC instead). Holes read back as zeros either way.
    pub preallocate: bool,
    /// Which engine to use.
    pub engine: FileEngine,
    /// Bypass the page cache (`O_DIRECT`); false gives buffered I/O for comparisons.
    pub direct_io: bool,
    /// Open `O_RDONLY` and refuse every request that would change the device (the
    /// read-only commands). Incompatible with `create_size_bytes`.
    pub read_only: bool,
}

impl FileDeviceConfig {
    /// Defaults for `path`: 4096-byte blocks, queue depth 32, no creation (preallocated
    /// when asked for), automatic engine, direct I/O.
    pub fn new(path: impl Into<PathBuf>) -> FileDeviceConfig {
        FileDeviceConfig {
            path: path.into(),
            block_size_bytes: DEFAULT_BLOCK_SIZE_BYTES,
            queue_depth: 32,
            create_size_bytes: None,
            preallocate: true,
            engine: FileEngine::Auto,
            direct_io: true,
            read_only: false,
        }
    }
}

enum Engine {
    IoUring(Box<UringEngine>),
    ThreadPool(ThreadPoolEngine),
}

/// A file or block device driven by io_uring or a thread pool.
pub struct FileDevice {
    engine: Engine,
    info: DeviceInfo,
    is_block_device: bool,
    direct_io_in_use: bool,
    fallback_reason: Option<String>,
    /// The file, when its file system clones ranges (copy by reference, `reflink.rs`).
    reflink_file: Option<Arc<File>>,
    /// Completions of copies by reference (and of flushes on a read-only device), done at
    /// submit, handed back at the next poll.
    ready: Vec<Completion>,
    /// Opened `O_RDONLY`: every request that would change the device is refused.
    read_only: bool,
}

/// The operating-system calls [`FileDevice::open`] depends on, replaceable in tests to
/// play a kernel that refuses io_uring or `O_DIRECT`.
#[derive(Clone, Copy)]
struct SystemCalls {
    setup_ring: fn(u32) -> io::Result<IoUring>,
    open_file: fn(&Path, OpenFlags) -> io::Result<File>,
}

const REAL_SYSTEM_CALLS: SystemCalls = SystemCalls {
    setup_ring: uring::setup_ring,
    open_file: open::open_read_write,
};

static ANNOUNCED_IO_URING_REFUSAL: AtomicBool = AtomicBool::new(false);
static ANNOUNCED_DIRECT_IO_REFUSAL: AtomicBool = AtomicBool::new(false);

fn announce_once(announced: &AtomicBool, line: &str) {
    if !announced.swap(true, Ordering::Relaxed) {
        eprintln!("flashpipe: {line}");
    }
}

impl FileDevice {
    /// Opens the file or block device described by `config`.
    pub fn open(config: FileDeviceConfig) -> Result<FileDevice, DeviceError> {
        FileDevice::open_with(config, REAL_SYSTEM_CALLS)
    }

    fn open_with(
        config: FileDeviceConfig,
        system_calls: SystemCalls,
    ) -> Result<FileDevice, DeviceError> {
        let name: Arc<str> = Arc::from(config.path.display().to_string());
        let open_error = |detail: String| DeviceError::new(&name, DeviceErrorKind::Open { detail });
        check_queue_depth(&name, config.queue_depth)?;
        check_block_size(&name, config.block_size_bytes)?;
        let opened = open_file(&config, system_calls).map_err(&open_error)?;
        let created = opened.created;
        let device = FileDevice::start(&config, &name, opened, system_calls).map_err(&open_error);
        if device.is_err() && created {
            // Bad input changes nothing: take back the file this call created.
            let _ = std::fs::remove_file(&config.path);
        }
        device
    }

    fn start(
        config: &FileDeviceConfig,
        name: &Arc<str>,
        opened: OpenedFile,
        system_calls: SystemCalls,
    ) -> Result<FileDevice, String> {
        let geometry = open::geometry(&opened.file)
            .map_err(|error| format!("cannot read its geometry: {error}"))?;
        let block_count = check_geometry(config, &geometry, opened.direct_io_in_use)?;
        let file = Arc::new(opened.file);
        let reflink_file = (!config.read_only && reflink::file_system_clones_ranges(&file))
            .then(|| Arc::clone(&file));
        let mut fallback_reason = opened.fallback_reason;
        let engine = start_engine(config, file, name, system_calls, &mut fallback_reason)?;
        Ok(FileDevice {
            engine,
            info: DeviceInfo {
                name: Arc::clone(name),
                block_size_bytes: config.block_size_bytes,
                block_count,
                queue_depth: config.queue_depth,
            },
            is_block_device: geometry.is_block_device,
            direct_io_in_use: opened.direct_io_in_use,
            fallback_reason,
            reflink_file,
            ready: Vec::new(),
            read_only: config.read_only,
        })
    }

    /// True when the device was opened read-only.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// On a read-only device: refuses a request that would change it, and completes a
    /// flush at once (nothing was ever written). `Ok(None)` when the request is done,
    /// `Ok(Some(request))` when it is a read to carry out.
    fn read_only_gate(&mut self, request: Request) -> Result<Option<Request>, Rejected> {
        let operation = match request.operation {
            Operation::Read { .. } => return Ok(Some(request)),
            Operation::Flush => {
                self.ready.push(Completion {
                    tag: request.tag,
                    status: Ok(()),
                    buffer: None,
                });
                return Ok(None);
            }
            Operation::Write { .. } => "write",
            Operation::Trim { .. } => "trim",
            Operation::CopyByReference { .. } => "copy-by-reference",
        };
        let error = DeviceError::new(&self.info.name, DeviceErrorKind::ReadOnly { operation });
        Err(Rejected { request, error })
    }

    /// Carries out a copy by reference with `FICLONERANGE` (see `reflink.rs`); the
    /// completion waits in `ready`. The kernel cannot clone overlapping ranges, so those
    /// go as memmove does: in pieces of the distance between the ranges, from the far end
    /// when the destination is above the source.
    fn clone_blocks(&mut self, request: Request) -> Result<(), Rejected> {
        let Operation::CopyByReference {
            source_first_block,
            destination_first_block,
            block_count,
        } = request.operation
        else {
            unreachable!("clone_blocks takes copies by reference only");
        };
        let Some(file) = self.reflink_file.as_ref() else {
            return Err(self
                .info
                .refuse_copy_by_reference(request)
                .expect_err("a copy"));
        };
        let block_bytes = u64::from(self.info.block_size_bytes);
        let pieces =
            reflink::memmove_pieces(source_first_block, destination_first_block, block_count);
        let cloned = pieces
            .into_iter()
            .try_for_each(|(source, destination, count)| {
                reflink::clone_range(
                    file,
                    source * block_bytes,
                    destination * block_bytes,
                    count * block_bytes,
                )
            });
        let status = cloned.map_err(|error| self.clone_error(&error));
        self.ready.push(Completion {
            tag: request.tag,
            status,
            buffer: None,
        });
        Ok(())
    }

    fn clone_error(&self, error: &io::Error) -> DeviceError {
        let kind = match error.raw_os_error() {
            Some(libc::EOPNOTSUPP | libc::EXDEV | libc::EINVAL) => DeviceErrorKind::Unsupported {
                operation: "copy-by-reference (this file system refused FICLONERANGE)",
            },
            _ => DeviceErrorKind::IoFailed {
                detail: format!("FICLONERANGE: {error}"),
            },
        };
        DeviceError::new(&self.info.name, kind)
    }

    /// The engine carrying out requests: [`FileEngine::IoUring`] or
    /// [`FileEngine::ThreadPool`], never `Auto`.
    pub fn engine_in_use(&self) -> FileEngine {
        match self.engine {
            Engine::IoUring(_) => FileEngine::IoUring,
            Engine::ThreadPool(_) => FileEngine::ThreadPool,
        }
    }

    /// Why `Auto` fell back to the thread pool or to buffered I/O, if it did.
    pub fn fallback_reason(&self) -> Option<&str> {
        self.fallback_reason.as_deref()
    }

    /// True when requests bypass the page cache.
    pub fn direct_io_in_use(&self) -> bool {
        self.direct_io_in_use
    }

    /// True for a block device, false for a regular file.
    pub fn is_block_device(&self) -> bool {
        self.is_block_device
    }

    /// Lets requests whose buffers come from `pool` use the kernel's fixed buffers
    /// (io_uring only; the thread pool accepts and ignores it). Needs an idle device.
    pub fn register_buffer_pool(&mut self, pool: &BufferPool) -> Result<(), DeviceError> {
        if self.in_flight() > 0 {
            return Err(self.open_error(
                "buffer pools can only be registered with nothing in flight".to_string(),
            ));
        }
        match &mut self.engine {
            Engine::IoUring(engine) => engine
                .register_buffer_pool(pool)
                .map_err(|error| format!("cannot register a buffer pool: {error}")),
            Engine::ThreadPool(_) => Ok(()),
        }
        .map_err(|detail| self.open_error(detail))
    }

    /// io_uring counters (system calls, fixed-buffer use); `None` on the thread pool.
    pub fn uring_counters(&self) -> Option<UringCounters> {
        match &self.engine {
            Engine::IoUring(engine) => Some(engine.counters()),
            Engine::ThreadPool(_) => None,
        }
    }

    /// One request moves less than 4 GiB (the kernel's length field is 32 bits).
    fn transfer_too_large(&self, request: &Request) -> Option<DeviceError> {
        let (Operation::Read { buffer, .. } | Operation::Write { buffer, .. }) = &request.operation
        else {
            return None;
        };
        let too_large = u32::try_from(buffer.len()).is_err();
        too_large.then(|| {
            DeviceError::new(
                &self.info.name,
                DeviceErrorKind::Misaligned {
                    detail: format!("a buffer of {} bytes exceeds 4 GiB", buffer.len()),
                },
            )
        })
    }

    fn open_error(&self, detail: String) -> DeviceError {
        DeviceError::new(&self.info.name, DeviceErrorKind::Open { detail })
    }
}

fn check_block_size(name: &Arc<str>, block_size_bytes: u32) -> Result<(), DeviceError> {
    if block_size_bytes < SMALLEST_SECTOR_BYTES || !block_size_bytes.is_power_of_two() {
        return Err(DeviceError::new(
            name,
            DeviceErrorKind::Open {
                detail: format!(
                    "block size {block_size_bytes} is not a power of two of at least {SMALLEST_SECTOR_BYTES} bytes"
                ),
            },
        ));
    }
    Ok(())
}

struct OpenedFile {
    file: File,
    created: bool,
    direct_io_in_use: bool,
    fallback_reason: Option<String>,
}

/// Opens (and creates, when asked) the file; under `Auto`, falls back to buffered I/O
/// when the file system refuses `O_DIRECT`.
fn open_file(config: &FileDeviceConfig, system_calls: SystemCalls) -> Result<OpenedFile, String> {
    let create = config.create_size_bytes.is_some();
    if create && config.read_only {
        return Err("a device opened read-only cannot be created".to_string());
    }
    if let Some(size_bytes) = config.create_size_bytes {
        check_create_size(size_bytes, config.block_size_bytes)?;
    }
    let existed = config.path.try_exists().unwrap_or(true);
    let flags = OpenFlags {
        direct_io: config.direct_io,
        create,
        read_only: config.read_only,
    };
    let (file, direct_io_in_use, fallback_reason) =
        match (system_calls.open_file)(&config.path, flags) {
            Ok(file) => (file, config.direct_io, None),
            Err(error)
                if config.direct_io
                    && error.raw_os_error() == Some(libc::EINVAL)
                    && config.engine == FileEngine::Auto =>
            {
                let reason =
                    format!("O_DIRECT refused ({error}); using buffered I/O on worker threads");
                let buffered = OpenFlags {
                    direct_io: false,
                    create,
                    read_only: config.read_only,
                };
                let file = (system_calls.open_file)(&config.path, buffered)
                    .map_err(|error| format!("{error}"))?;
                (file, false, Some(reason))
            }
            Err(error) if error.raw_os_error() == Some(libc::EINVAL) && config.direct_io => {
                return Err(format!(
                "the file system refuses O_DIRECT ({error}); use the auto engine or buffered I/O"
            ))
            }
            Err(error) => return Err(error.to_string()),
        };
    let created = create && !existed;
    if let Some(size_bytes) = config.create_size_bytes {
        if let Err(detail) = size_new_file(&file, existed, size_bytes, config.preallocate) {
            if created {
                let _ = std::fs::remove_file(&config.path);
            }
            return Err(detail);
        }
    }
    Ok(OpenedFile {
        file,
        created,
        direct_io_in_use,
        fallback_reason,
    })
}

fn check_create_size(size_bytes: u64, block_size_bytes: u32) -> Result<(), String> {
    if size_bytes == 0 || size_bytes % u64::from(block_size_bytes) != 0 {
        return Err(format!(
            "size to create {size_bytes} is not a positive multiple of the {block_size_bytes}-byte block"
        ));
    }
    Ok(())
}

fn size_new_file(
    file: &File,
    existed: bool,
    size_bytes: u64,
    preallocate: bool,
) -> Result<(), String> {
    let metadata = file.metadata().map_err(|error| error.to_string())?;
    if !metadata.is_file() {
        return Err("is not a regular file, so it cannot be created with a size".to_string());
    }
    if !existed && metadata.len() == 0 {
        if !preallocate {
            return file
                .set_len(size_bytes)
                .map_err(|error| format!("cannot size it to {size_bytes} bytes: {error}"));
        }
        return open::allocate(file, size_bytes).map_err(|error| {
            format!("cannot allocate {size_bytes} bytes: {error}; leave out preallocation to make a sparse file that takes space as it is written")
        });
    }
    if metadata.len() != size_bytes {
        return Err(format!(
            "exists with {} bytes, not the {size_bytes} bytes asked for",
            metadata.len()
        ));
    }
    Ok(())
}

/// Checks the block size against the device and the size against the block size;
/// returns the number of blocks.
fn check_geometry(
    config: &FileDeviceConfig,
    geometry: &Geometry,
    direct_io_in_use: bool,
) -> Result<u64, String> {
    let block_size_bytes = u64::from(config.block_size_bytes);
    if direct_io_in_use && config.block_size_bytes < geometry.minimum_block_size_bytes {
        return Err(format!(
            "block size {} is below the {} bytes direct I/O needs here",
            config.block_size_bytes, geometry.minimum_block_size_bytes
        ));
    }
    if geometry.size_bytes == 0 || geometry.size_bytes % block_size_bytes != 0 {
        return Err(format!(
            "size {} bytes is not a positive multiple of the {block_size_bytes}-byte block",
            geometry.size_bytes
        ));
    }
    Ok(geometry.size_bytes / block_size_bytes)
}

fn start_engine(
    config: &FileDeviceConfig,
    file: Arc<File>,
    name: &Arc<str>,
    system_calls: SystemCalls,
    fallback_reason: &mut Option<String>,
) -> Result<Engine, String> {
    let start_thread_pool = |file: Arc<File>| {
        ThreadPoolEngine::start(file, Arc::clone(name), config.queue_depth)
            .map(Engine::ThreadPool)
            .map_err(|error| format!("cannot start worker threads: {error}"))
    };
    match config.engine {
        FileEngine::ThreadPool => start_thread_pool(file),
        FileEngine::IoUring => start_uring(config, file, name, system_calls)
            .map_err(|error| format!("io_uring refused: {error}")),
        FileEngine::Auto if fallback_reason.is_some() => {
            announce_once(
                &ANNOUNCED_DIRECT_IO_REFUSAL,
                fallback_reason.as_deref().unwrap_or_default(),
            );
            start_thread_pool(file)
        }
        FileEngine::Auto => match start_uring(config, Arc::clone(&file), name, system_calls) {
            Ok(engine) => Ok(engine),
            Err(error) => {
                let reason = format!("io_uring refused ({error}); using worker threads");
                announce_once(&ANNOUNCED_IO_URING_REFUSAL, &reason);
                *fallback_reason = Some(reason);
                start_thread_pool(file)
            }
        },
    }
}

fn start_uring(
    config: &FileDeviceConfig,
    file: Arc<File>,
    name: &Arc<str>,
    system_calls: SystemCalls,
) -> io::Result<Engine> {
    let ring = (system_calls.setup_ring)(config.queue_depth)?;
    UringEngine::new(ring, file, Arc::clone(name), config.queue_depth)
        .map(|engine| Engine::IoUring(Box::new(engine)))
}

impl BlockDevice for FileDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn clock(&self) -> Arc<dyn Clock> {
        RealClock::shared()
    }

    fn submit(&mut self, request: Request) -> Result<(), Rejected> {
        let request = self.info.admit(self.in_flight(), request)?;
        if let Some(error) = self.transfer_too_large(&request) {
            return Err(Rejected { request, error });
        }
        let request = if self.read_only {
            match self.read_only_gate(request)? {
                Some(read) => read,
                None => return Ok(()),
            }
        } else {
            request
        };
        if matches!(request.operation, Operation::CopyByReference { .. }) {
            return self.clone_blocks(request);
        }
        let job = Job::from_operation(
            request.tag,
            request.operation,
            self.info.block_size_bytes,
            self.is_block_device,
        );
        match &mut self.engine {
            Engine::IoUring(engine) => engine.submit(job),
            Engine::ThreadPool(engine) => engine.submit(job),
        }
        Ok(())
    }

    fn poll_completions(&mut self, completions: &mut Vec<Completion>) -> usize {
        let cloned = self.ready.len();
        completions.append(&mut self.ready);
        cloned
            + match &mut self.engine {
                Engine::IoUring(engine) => engine.poll(completions),
                Engine::ThreadPool(engine) => engine.poll(completions),
            }
    }

    fn wait_completions(
        &mut self,
        completions: &mut Vec<Completion>,
    ) -> Result<usize, DeviceError> {
        if self.in_flight() == 0 {
            return Err(self.info.nothing_in_flight());
        }
        if !self.ready.is_empty() {
            return Ok(self.poll_completions(completions));
        }
        match &mut self.engine {
            Engine::IoUring(engine) => engine.wait(completions).map_err(|error| {
                DeviceError::new(
                    &self.info.name,
                    DeviceErrorKind::IoFailed {
                        detail: format!("io_uring_enter: {error}"),
                    },
                )
            }),
            Engine::ThreadPool(engine) => Ok(engine.wait(completions)),
        }
    }

    fn in_flight(&self) -> usize {
        self.ready.len()
            + match &self.engine {
                Engine::IoUring(engine) => engine.in_flight(),
                Engine::ThreadPool(engine) => engine.in_flight(),
            }
    }

    fn copies_by_reference(&self) -> bool {
        self.reflink_file.is_some()
    }

    fn register_buffer_pool(&mut self, pool: &BufferPool) -> Result<(), DeviceError> {
        FileDevice::register_buffer_pool(self, pool)
    }
}
