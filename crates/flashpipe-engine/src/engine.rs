//! The filesystem core: one dedicated thread owns the file system and its devices
//! (HWFS ch. 1, 3.3.1); clients reach it only through bounded command queues. The thread
//! drives the file system's core ([`FsCore`]) and owns the device beside it: the core
//! plans, the thread keeps the requests in flight and hands the completions back.
//!
//! The thread serves many commands at once: reads are planned from the in-memory block
//! map and their device requests issued together, so many reads from many clients keep
//! the device queues full, each landing straight in an engine-owned pool buffer that
//! the client receives without a copy. Writes too stay in flight many at a time
//! (`crate::writes`): each is answered when its own device requests complete, and the
//! writes that arrive meanwhile are planned and issued at once, so batches overlap; whole
//! blocks go to the device straight from the client's buffer. Reads and writes are in
//! flight together, and one completion loop (`EngineThread::pump_device`) routes each
//! device completion to the reads or the writes by its tag: a write waits only for the
//! reads in flight of its own file (and for writes in flight that touch its blocks), a
//! read only for the writes in flight of its own file, so a kernel reading its input and
//! writing its results keeps both streams on the device at once. Every other command
//! (truncate, create, delete, rename, copy, stat, list, flush, check) waits until nothing
//! is in flight, and all are taken in arrival order, so every client sees its own
//! commands take effect in order (a read after a write of the same file sees the write).
//! A batch of whole small files ([`Command::ReadFiles`]) is one command: its files are
//! planned together and physically adjacent files share one device request.
//!
//! The loop (`EngineThread::run`) serves whatever is queued without waiting; when the
//! inbox runs dry it first commits the flushes set aside ([`crate::group_commit`]), then
//! waits for the reads and writes in flight, and only with nothing left to do waits for
//! a message as the configured [`Handoff`] says (spin, then park: [`crate::handoff`]).

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crossbeam_channel::{bounded, Sender, TryRecvError};
use flashpipe_device::{BlockDevice, BufferPool, Clock, Completion, IoBuf};
use flashpipe_fs::{FileAttributes, FileId, Filesystem, FsCore, WriteCopy};
use flashpipe_shm::SharedMemoryError;

use crate::client::EngineClient;
use crate::command::{Command, EngineError, ReadData, Reply};
use crate::group_commit::{FlushGrouping, PendingFlushes};
use crate::handoff::{Handoff, WaitCounts, MAX_SPIN_US};
use crate::inbound::{InboundSource, ReplyTo, Submission};
use crate::inputs::{make_doorbell, Bell, Inputs};
use crate::reads::{ReadSink, ReadTarget, ReadsInFlight};
use crate::writes::{is_write_tag, WriteSink, WritesInFlight};

mod config;

pub(crate) use config::{read_buffer_pool, ReadPool};
pub use config::{EngineConfig, PoolMemory, WritePath, READ_POOL_MEMORY_NAME};

/// A command on its way to the engine, with where to answer.
pub(crate) type Envelope = Submission;

pub(crate) enum Message {
    Command(Envelope),
    /// Poll this source from now on ([`crate::inbound`]).
    AddSource(Box<dyn InboundSource>),
    /// Stop; `commit` says whether to flush what changed first.
    Shutdown {
        commit: bool,
    },
    /// Register the read pool once the device is idle ([`Engine::register_read_pool`]).
    RegisterReadPool {
        done: Sender<Result<(), EngineError>>,
    },
}

/// A running engine. Dropping it without [`Engine::shutdown`] stops the thread after
/// the commands already queued and flushes.
pub struct Engine {
    messages: Sender<Message>,
    bell: Bell,
    config: EngineConfig,
    clock: Arc<dyn Clock>,
    counters: Arc<Mutex<EngineCounters>>,
    read_pool: BufferPool,
    block_bytes: u64,
    shared_read_pool_refusal: Option<SharedMemoryError>,
    thread: Option<JoinHandle<Result<Filesystem, EngineError>>>,
}

impl Engine {
    /// Starts the engine thread, which takes ownership of `filesystem`.
    pub fn start(filesystem: Filesystem, config: EngineConfig) -> Engine {
        assert!(config.command_queue_capacity > 0 && config.reads_in_flight_limit > 0);
        assert!(config.handoff.spin_us() <= MAX_SPIN_US);
        let clock = filesystem.clock();
        let (messages, inbox) = bounded(config.command_queue_capacity);
        let (doorbell, bell) = match make_doorbell() {
            Some((doorbell, bell)) => (Some(doorbell), bell),
            None => (None, Bell::default()),
        };
        let inputs = Inputs::threaded(inbox, doorbell);
        let block_bytes = filesystem.stats().fs_block_size_bytes as usize;
        let ReadPool {
            pool,
            shared_memory_refusal,
        } = read_buffer_pool(&filesystem, &config);
        let read_pool = pool.clone();
        let counters = Arc::new(Mutex::new(EngineCounters::default()));
        let thread_counters = Arc::clone(&counters);
        let thread = std::thread::Builder::new()
            .name("flashpipe-engine".to_string())
            .spawn(move || {
                EngineThread::new(filesystem, pool, block_bytes as u64, config).run(
                    inputs,
                    config.handoff,
                    &thread_counters,
                )
            })
            .expect("the operating system can start the engine thread");
        Engine {
            messages,
            bell,
            config,
            clock,
            counters,
            read_pool,
            block_bytes: block_bytes as u64,
            shared_read_pool_refusal: shared_memory_refusal,
            thread: Some(thread),
        }
    }

    /// The engine's read-buffer pool (a handle to the same buffers): a server passes
    /// its `shared_memory()` descriptor to client processes when the engine was started
    /// with [`PoolMemory::Shared`].
    pub fn read_pool(&self) -> BufferPool {
        self.read_pool.clone()
    }

    /// Why the read pool is on the heap although [`PoolMemory::Shared`] was asked
    /// (the memfd could not be created or mapped); `None` when it is where it was asked.
    pub fn shared_read_pool_refusal(&self) -> Option<&SharedMemoryError> {
        self.shared_read_pool_refusal.as_ref()
    }

    /// The clock of the device the engine's file system runs on (real, or virtual in
    /// simulation): everything measured around the engine (pipeline stages, transfers)
    /// uses it, never the operating system's clock.
    pub fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.clock)
    }

    /// How the engine was started (its queue and buffer bounds).
    pub fn config(&self) -> EngineConfig {
        self.config
    }

    /// A sender of commands answered on queues of the caller's choosing
    /// ([`crate::submitter`]).
    pub fn command_sender(&self) -> crate::submitter::CommandSender {
        crate::submitter::CommandSender::new(
            self.messages.clone(),
            self.bell.clone(),
            self.config,
            self.block_bytes,
        )
    }

    /// A new client with at most `outstanding_limit` commands outstanding.
    pub fn client(&self, outstanding_limit: usize) -> EngineClient {
        EngineClient::new(
            self.messages.clone(),
            self.bell.own_handle(),
            outstanding_limit,
            self.config,
            self.block_bytes,
        )
    }

    /// How the engine thread's waits for commands ended, and the group commits it made,
    /// so far (brought up to date each time the thread takes a message from its inbox).
    pub fn counters(&self) -> EngineCounters {
        *self
            .counters
            .lock()
            .expect("the engine thread never panics holding its counters")
    }

    /// Finishes queued commands, flushes, stops the thread and returns the file system.
    pub fn shutdown(mut self) -> Result<Filesystem, EngineError> {
        self.stop(true)
    }

    /// Finishes queued commands and stops the thread without flushing: every change
    /// since the last flush is dropped with the returned file system unless the caller
    /// flushes it, so a command that failed half-way commits nothing (and a read-only
    /// one writes nothing).
    pub fn shutdown_without_commit(mut self) -> Result<Filesystem, EngineError> {
        self.stop(false)
    }

    /// Registers the read pool with the device ([`BlockDevice::register_buffer_pool`]:
    /// io_uring fixed buffers on a file device), once the commands queued before it are
    /// served and nothing is in flight; waits for the outcome. Reads then skip pinning
    /// their pages per request, but the whole pool is pinned (made resident) now: worth it
    /// for an engine that serves many reads, not a one-shot command (figures in
    /// docs/design/27-fio-reads.md). An error leaves reads on plain buffers, which work.
    pub fn register_read_pool(&self) -> Result<(), EngineError> {
        let (done, outcome) = bounded(1);
        self.messages
            .send(Message::RegisterReadPool { done })
            .map_err(|_| EngineError::Stopped)?;
        self.bell.ring();
        outcome.recv().map_err(|_| EngineError::Stopped)?
    }

    fn stop(&mut self, commit: bool) -> Result<Filesystem, EngineError> {
        let _ = self.messages.send(Message::Shutdown { commit });
        self.bell.ring();
        let thread = self.thread.take().ok_or(EngineError::Stopped)?;
        thread
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.stop(true);
        }
    }
}

fn write_length(envelope: &Envelope) -> usize {
    match &envelope.command {
        Command::Write { data, .. } => data.len(),
        _ => 0,
    }
}

/// What a threaded engine counted (see [`Engine::counters`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EngineCounters {
    /// How the engine's waits on its inbox ended.
    pub inbox_waits: WaitCounts,
    /// File-system commits made for groups of flushes.
    pub group_commits: u64,
}

/// Answers one command where its submitter said ([`ReplyTo::answer`]): a queue cannot
/// be full (each client bounds its outstanding commands by its capacity), and clients
/// that went away are ignored.
pub(crate) fn answer(reply_to: &ReplyTo, ticket: u64, result: Result<Reply, EngineError>) {
    reply_to.answer(ticket, result);
}

pub(crate) struct ReadReply {
    ticket: u64,
    reply_to: ReplyTo,
}

impl ReadSink for ReadReply {
    fn deliver(self, result: Result<ReadData, EngineError>) {
        answer(&self.reply_to, self.ticket, result.map(Reply::Data));
    }

    fn deliver_files(self, result: Result<Vec<Result<ReadData, EngineError>>, EngineError>) {
        answer(&self.reply_to, self.ticket, result.map(Reply::Files));
    }
}

/// Where a finished write's answer goes.
pub(crate) struct WriteReply {
    ticket: u64,
    reply_to: ReplyTo,
}

impl WriteSink for WriteReply {
    fn deliver(self, result: Result<IoBuf, EngineError>) {
        let result = result.map(|buffer| Reply::Written { buffer });
        answer(&self.reply_to, self.ticket, result);
    }
}

/// Most writes gathered into one batch (or in flight at once), and most bytes.
const WRITE_BATCH_LIMIT: usize = 64;
const WRITE_BATCH_LIMIT_BYTES: usize = 64 << 20;

/// The engine's state and command handling: run on its own thread by [`Engine`], or
/// stepped by the caller's thread by [`crate::stepped::SteppedEngine`].
pub(crate) struct EngineThread {
    pub(crate) fs: FsCore,
    /// The file system's device: only this thread issues requests on it.
    pub(crate) device: Box<dyn BlockDevice>,
    pool: BufferPool,
    pub(crate) reads: ReadsInFlight<ReadReply>,
    writes: WritesInFlight<WriteReply>,
    write_path: WritePath,
    max_read_bytes: u64,
    /// A message taken from the queue while gathering a write batch, served next.
    pub(crate) held_back: Option<Message>,
    /// Device completions reaped and not yet routed (kept to reuse its allocation).
    completions: Vec<Completion>,
    /// Which flushes share one commit, and those waiting for it.
    pub(crate) flush_grouping: FlushGrouping,
    pub(crate) pending_flushes: PendingFlushes,
}

/// What the threaded engine's loop does next.
enum NextStep {
    Serve(Message),
    CommitPendingFlushes,
    WaitForDevice,
    Stop,
}

impl EngineThread {
    pub(crate) fn new(
        filesystem: Filesystem,
        pool: BufferPool,
        block_bytes: u64,
        config: EngineConfig,
    ) -> EngineThread {
        let (fs, device) = filesystem.into_parts();
        EngineThread {
            fs,
            device,
            pool,
            reads: ReadsInFlight::new(config.reads_in_flight_limit, block_bytes),
            writes: WritesInFlight::new(WRITE_BATCH_LIMIT, WRITE_BATCH_LIMIT_BYTES, block_bytes),
            write_path: config.write_path,
            max_read_bytes: config.max_read_bytes as u64,
            held_back: None,
            completions: Vec::new(),
            flush_grouping: config.flush_grouping,
            pending_flushes: PendingFlushes::default(),
        }
    }

    /// The file system put back together, once nothing is in flight.
    pub(crate) fn into_filesystem(self) -> Filesystem {
        Filesystem::from_parts(self.fs, self.device)
    }

    fn run(
        mut self,
        mut inputs: Inputs,
        handoff: Handoff,
        counters: &Mutex<EngineCounters>,
    ) -> Result<Filesystem, EngineError> {
        let mut commit = true;
        let mut inbox_waits = WaitCounts::default();
        loop {
            match self.next_step(&mut inputs, handoff, &mut inbox_waits) {
                NextStep::Serve(Message::Command(envelope)) => self.serve(envelope, &mut inputs)?,
                NextStep::Serve(Message::AddSource(source)) => inputs.add_source(source),
                NextStep::Serve(Message::RegisterReadPool { done }) => {
                    self.register_read_pool(&done)?;
                }
                NextStep::Serve(Message::Shutdown { commit: wanted }) => {
                    commit = wanted;
                    break;
                }
                NextStep::CommitPendingFlushes => self.commit_pending_flushes()?,
                NextStep::WaitForDevice => self.pump_device(true)?,
                NextStep::Stop => break,
            }
            self.pump_device(false)?;
            self.publish_counters(counters, inbox_waits);
        }
        self.drain_device()?;
        if self.has_pending_flushes() {
            self.commit_pending_flushes()?;
        } else if commit {
            self.fs.flush(&mut *self.device)?;
        }
        self.publish_counters(counters, inbox_waits);
        Ok(self.into_filesystem())
    }

    /// The next message to serve, or what to do when none can be served now: commit the
    /// flushes set aside once the inbox runs dry, wait for the device when no more reads
    /// fit or nothing is queued while reads or writes are in flight, and wait for a
    /// message (as `handoff` says) only when nothing else is left to do.
    fn next_step(
        &mut self,
        inputs: &mut Inputs,
        handoff: Handoff,
        inbox_waits: &mut WaitCounts,
    ) -> NextStep {
        if let Some(message) = self.held_back.take() {
            return NextStep::Serve(message);
        }
        if self.must_wait_for_device() {
            return NextStep::WaitForDevice;
        }
        match inputs.try_next() {
            Ok(message) => NextStep::Serve(message),
            Err(_) if self.has_pending_flushes() => NextStep::CommitPendingFlushes,
            Err(_) if !self.device_is_idle() => NextStep::WaitForDevice,
            Err(TryRecvError::Disconnected) => NextStep::Stop,
            Err(TryRecvError::Empty) => match inputs.wait(handoff, inbox_waits) {
                Some(message) => NextStep::Serve(message),
                None => NextStep::Stop,
            },
        }
    }

    fn publish_counters(&self, counters: &Mutex<EngineCounters>, inbox_waits: WaitCounts) {
        let mut shared = counters
            .lock()
            .expect("nothing panics holding the engine's counters");
        shared.inbox_waits = inbox_waits;
        shared.group_commits = self.group_commits();
    }

    /// True when no read and no write is in flight.
    pub(crate) fn device_is_idle(&self) -> bool {
        self.reads.is_idle() && self.writes.is_idle()
    }

    /// True when no more reads fit and the next message must wait for one to finish.
    pub(crate) fn must_wait_for_device(&self) -> bool {
        !self.reads.is_idle() && !self.reads.has_room()
    }

    /// Submits the waiting requests of the reads and the writes in flight, then reaps the
    /// device's completions (blocking for at least one when `block` is true and something
    /// is in flight) and routes each to the reads or the writes by its tag.
    pub(crate) fn pump_device(&mut self, block: bool) -> Result<(), EngineError> {
        self.reads.submit_waiting(&mut *self.device);
        self.writes.submit_waiting(&mut self.fs, &mut *self.device);
        let mut completions = std::mem::take(&mut self.completions);
        let device = &mut *self.device;
        let waited = if block && device.in_flight() > 0 {
            device.wait_completions(&mut completions).map(|_| ())
        } else {
            device.poll_completions(&mut completions);
            Ok(())
        };
        for completion in completions.drain(..) {
            if is_write_tag(completion.tag) {
                self.writes.complete(&mut self.fs, completion);
            } else {
                self.reads.complete(completion);
            }
        }
        self.completions = completions;
        waited.map_err(Into::into)
    }

    /// Registers the read pool with the device once every request in flight is back, and
    /// sends the outcome to `done` (a caller that stopped waiting is not an error).
    pub(crate) fn register_read_pool(
        &mut self,
        done: &Sender<Result<(), EngineError>>,
    ) -> Result<(), EngineError> {
        self.drain_device()?;
        let outcome = self
            .device
            .register_buffer_pool(&self.pool)
            .map_err(EngineError::from);
        let _ = done.send(outcome);
        Ok(())
    }

    /// Runs every read and write in flight to its end.
    pub(crate) fn drain_device(&mut self) -> Result<(), EngineError> {
        while !self.device_is_idle() {
            self.pump_device(true)?;
        }
        Ok(())
    }

    /// Pumps the device until no read in flight reads `file` (no read at all on
    /// [`WritePath::OverlappedAfterReads`]).
    fn wait_for_reads_of(&mut self, file: FileId) -> Result<(), EngineError> {
        let alternate = self.write_path == WritePath::OverlappedAfterReads;
        while self.reads.reads_file(file) || (alternate && !self.reads.is_idle()) {
            self.pump_device(true)?;
        }
        Ok(())
    }

    /// Pumps the device until no write in flight writes `file` (no write at all on
    /// [`WritePath::OverlappedAfterReads`]).
    fn wait_for_writes_of(&mut self, file: FileId) -> Result<(), EngineError> {
        let alternate = self.write_path == WritePath::OverlappedAfterReads;
        while self.writes.writes_file(file) || (alternate && !self.writes.is_idle()) {
            self.pump_device(true)?;
        }
        Ok(())
    }

    /// Pumps the device until another read can start.
    fn wait_for_read_room(&mut self) -> Result<(), EngineError> {
        while !self.reads.has_room() {
            self.pump_device(true)?;
        }
        Ok(())
    }

    pub(crate) fn handle(
        &mut self,
        envelope: Envelope,
        inputs: &mut Inputs,
    ) -> Result<(), EngineError> {
        if matches!(envelope.command, Command::Write { .. }) {
            let copy = match self.write_path {
                WritePath::Overlapped | WritePath::OverlappedAfterReads => WriteCopy::ZeroCopy,
                WritePath::OverlappedCopying => WriteCopy::Copy,
                WritePath::Batched => {
                    self.drain_device()?;
                    let batch = self.gather_writes(envelope, inputs);
                    self.write_batch(batch);
                    return Ok(());
                }
            };
            return self.start_write(envelope, copy);
        }
        let Envelope {
            ticket,
            command,
            reply_to,
            destination,
            ..
        } = envelope;
        if let Command::Read {
            name,
            offset_bytes,
            length_bytes,
        } = command
        {
            let names_back = match &reply_to {
                ReplyTo::Sink(sink) => Some(Arc::clone(sink)),
                ReplyTo::Queue(_) => None,
            };
            let sink = ReadReply { ticket, reply_to };
            let started = self.start_read(sink, &name, offset_bytes, length_bytes, destination);
            if let Some(sink) = names_back {
                sink.take_back_name(name);
            }
            return started;
        }
        if let Command::ReadFiles { names } = command {
            return self.start_read_files(ticket, reply_to, &names);
        }
        self.drain_device()?;
        let result = self.execute(command);
        answer(&reply_to, ticket, result);
        Ok(())
    }

    /// Starts a read into a pool buffer, or into `destination` when one came.
    fn start_read(
        &mut self,
        sink: ReadReply,
        name: &str,
        offset_bytes: u64,
        length_bytes: u64,
        destination: Option<IoBuf>,
    ) -> Result<(), EngineError> {
        if length_bytes > self.max_read_bytes {
            let error = EngineError::ReadTooLarge {
                length_bytes,
                max_read_bytes: self.max_read_bytes,
            };
            sink.deliver(Err(error));
            return Ok(());
        }
        let file = match self.fs.open(name) {
            Ok(file) => file,
            Err(error) => {
                sink.deliver(Err(error.into()));
                return Ok(());
            }
        };
        self.wait_for_writes_of(file)?;
        self.wait_for_read_room()?;
        let target = match destination {
            Some(destination) => ReadTarget::Destination(destination),
            None => ReadTarget::Pool(&self.pool),
        };
        let started = self.reads.start(
            &self.fs,
            target,
            file,
            name,
            offset_bytes,
            length_bytes,
            sink,
        );
        if let Err((sink, error)) = started {
            sink.deliver(Err(error));
        }
        Ok(())
    }

    fn start_read_files(
        &mut self,
        ticket: u64,
        reply_to: ReplyTo,
        names: &[String],
    ) -> Result<(), EngineError> {
        if !self.writes.is_idle() {
            let files: Vec<FileId> = names
                .iter()
                .filter_map(|name| self.fs.open(name).ok())
                .collect();
            for file in files {
                self.wait_for_writes_of(file)?;
            }
        }
        self.wait_for_read_room()?;
        let sink = ReadReply { ticket, reply_to };
        let started =
            self.reads
                .start_batch(&self.fs, &self.pool, names, self.max_read_bytes, sink);
        if let Err((sink, error)) = started {
            sink.deliver_files(Err(error));
        }
        Ok(())
    }

    /// Plans one write and takes it in flight beside the reads and writes already there:
    /// first it waits for the reads in flight of its file, for the writes in flight that
    /// touch one of its blocks, and, when it must read old blocks first, for everything in
    /// flight; then for room among the writes. A write that cannot be planned is answered
    /// at once.
    fn start_write(&mut self, envelope: Envelope, copy: WriteCopy) -> Result<(), EngineError> {
        let Envelope {
            ticket,
            command,
            reply_to,
            write_checksums,
            ..
        } = envelope;
        let Command::Write {
            name,
            offset_bytes,
            data,
        } = command
        else {
            unreachable!("only writes are started as writes");
        };
        let sink = WriteReply { ticket, reply_to };
        let file = match self.fs.open(&name) {
            Ok(file) => file,
            Err(error) => {
                sink.deliver(Err(error.into()));
                return Ok(());
            }
        };
        let length_bytes = data.len() as u64;
        self.wait_for_reads_of(file)?;
        while self.writes.overlaps(file, offset_bytes, length_bytes) {
            self.pump_device(true)?;
        }
        if self
            .fs
            .write_needs_old_blocks(file, offset_bytes, length_bytes)
        {
            self.drain_device()?;
        }
        while !self.writes.has_room() {
            self.pump_device(true)?;
        }
        let planned = self.fs.plan_checksummed_write(
            &mut *self.device,
            file,
            offset_bytes,
            data,
            write_checksums,
            copy,
        );
        match planned {
            Ok(planned) => self.writes.start(&mut self.fs, file, planned, sink),
            Err(error) => sink.deliver(Err(error.into())),
        }
        Ok(())
    }

    /// Takes the writes queued right behind `first` (up to the batch limits); the first
    /// other message is held back and served next, so arrival order is kept.
    fn gather_writes(&mut self, first: Envelope, inputs: &mut Inputs) -> Vec<Envelope> {
        let mut batch_bytes = write_length(&first);
        let mut batch = vec![first];
        while batch.len() < WRITE_BATCH_LIMIT && batch_bytes < WRITE_BATCH_LIMIT_BYTES {
            match inputs.try_next() {
                Ok(Message::Command(envelope))
                    if matches!(envelope.command, Command::Write { .. }) =>
                {
                    batch_bytes += write_length(&envelope);
                    batch.push(envelope);
                }
                Ok(other) => {
                    self.held_back = Some(other);
                    break;
                }
                Err(_) => break,
            }
        }
        batch
    }

    /// Carries out a batch of writes with all their device requests in flight together.
    fn write_batch(&mut self, batch: Vec<Envelope>) {
        let mut resolved = Vec::with_capacity(batch.len());
        for envelope in batch {
            let Command::Write {
                name,
                offset_bytes,
                data,
            } = envelope.command
            else {
                unreachable!("a write batch holds writes only");
            };
            let file = self.fs.open(&name);
            resolved.push((envelope.ticket, envelope.reply_to, file, offset_bytes, data));
        }
        let writes: Vec<_> = resolved
            .iter()
            .filter_map(|(_, _, file, offset_bytes, data)| {
                file.as_ref()
                    .ok()
                    .map(|&file| (file, *offset_bytes, &data[..]))
            })
            .collect();
        let mut results = self.fs.write_batch(&mut *self.device, &writes).into_iter();
        for (ticket, reply_to, file, _, data) in resolved {
            let result = match file {
                Err(error) => Err(error.into()),
                Ok(_) => results
                    .next()
                    .expect("one result per resolved write")
                    .map(|()| Reply::Written { buffer: data })
                    .map_err(Into::into),
            };
            answer(&reply_to, ticket, result);
        }
    }

    fn execute(&mut self, command: Command) -> Result<Reply, EngineError> {
        let (filesystem, device) = (&mut self.fs, &mut *self.device);
        match command {
            Command::Create { name } => filesystem
                .create(&name)
                .map(|_| Reply::Done)
                .map_err(Into::into),
            Command::Truncate { name, size_bytes } => {
                let file = filesystem.open(&name)?;
                filesystem.truncate(device, file, size_bytes)?;
                Ok(Reply::Done)
            }
            Command::Delete { name } => filesystem
                .delete(&name)
                .map(|()| Reply::Done)
                .map_err(Into::into),
            Command::Rename {
                from,
                to,
                replace: false,
            } => filesystem
                .rename(&from, &to)
                .map(|()| Reply::Done)
                .map_err(Into::into),
            Command::Rename {
                from,
                to,
                replace: true,
            } => filesystem
                .rename_replacing(&from, &to)
                .map(|()| Reply::Done)
                .map_err(Into::into),
            Command::Copy { from, to, method } => filesystem
                .copy_file(device, &from, &to, method)
                .map(Reply::Copied)
                .map_err(Into::into),
            Command::SetAttributes {
                name,
                mode,
                owner,
                modified_wall_ns,
            } => {
                let current = filesystem.attributes_by_name(&name)?;
                let changed = FileAttributes {
                    mode: mode.apply(current.mode),
                    owner: owner.apply(current.owner),
                    modified_wall_ns: modified_wall_ns.apply(current.modified_wall_ns),
                };
                filesystem.set_attributes(&name, changed)?;
                Ok(Reply::Done)
            }
            Command::Stat { name } => Ok(Reply::Stat(filesystem.stat_name(&name)?)),
            Command::List => Ok(Reply::List(filesystem.list())),
            Command::Stats => Ok(Reply::Stats(filesystem.stats())),
            Command::Flush => filesystem
                .flush(device)
                .map(|()| Reply::Done)
                .map_err(Into::into),
            Command::Check => Ok(Reply::Check(filesystem.check(device)?)),
            Command::Read { .. } | Command::ReadFiles { .. } | Command::Write { .. } => {
                unreachable!("reads and writes take their own paths")
            }
        }
    }
}
