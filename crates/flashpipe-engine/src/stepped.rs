//! The engine without its thread, for the deterministic simulation: the caller's thread
//! drives it with [`SteppedEngine::step`], so an engine, its clients and simulated
//! devices (`flashpipe_device::sim`) all run on one thread and a run is a function of
//! its seed.
//!
//! The state and the command handling are the threaded [`crate::Engine`]'s own
//! (`crate::engine::EngineThread`); only the loop differs. One step serves at most one
//! queued message (a batched write gathers the writes queued right behind it, as in the
//! threaded engine) and reaps the device completions that have arrived, reads' and
//! writes' alike; when no message can be served but reads or writes are in flight it
//! waits for a completion, which on a simulated device moves virtual time forward
//! instead of sleeping. Flushes are grouped as in the
//! threaded engine ([`crate::group_commit`]): those set aside are committed by the first
//! step that finds nothing queued, so [`SteppedEngine::run_until_idle`] answers them all.
//! Clients must not block on a queue the
//! same thread has to empty: submit with [`crate::EngineClient::try_submit`] and reap
//! with [`crate::EngineClient::try_next_completion`] (or reap with
//! `next_completion` only what [`SteppedEngine::run_until_idle`] has answered).

use crossbeam_channel::{bounded, Sender};
use flashpipe_fs::Filesystem;

use crate::client::EngineClient;
use crate::command::EngineError;
use crate::engine::{read_buffer_pool, EngineConfig, EngineThread, Message};
use crate::handoff::Handoff;
use crate::inbound::InboundSource;
use crate::inputs::{Bell, Inputs};

/// What one [`SteppedEngine::step`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepOutcome {
    /// It served a message or waited for a device completion; more may follow.
    Progressed,
    /// Nothing queued and nothing in flight: every submitted command has been answered.
    Idle,
}

/// An engine driven by its caller's thread.
pub struct SteppedEngine {
    messages: Sender<Message>,
    inputs: Inputs,
    config: EngineConfig,
    block_bytes: u64,
    core: EngineThread,
}

impl SteppedEngine {
    /// An engine over `filesystem` that runs only when stepped.
    pub fn new(filesystem: Filesystem, config: EngineConfig) -> SteppedEngine {
        assert!(config.command_queue_capacity > 0 && config.reads_in_flight_limit > 0);
        let (messages, inbox) = bounded(config.command_queue_capacity);
        let block_bytes = u64::from(filesystem.stats().fs_block_size_bytes);
        let pool = read_buffer_pool(&filesystem, &config).pool;
        SteppedEngine {
            messages,
            inputs: Inputs::stepped(inbox),
            config,
            block_bytes,
            core: EngineThread::new(filesystem, pool, block_bytes, config),
        }
    }

    /// A new client with at most `outstanding_limit` commands outstanding. Its waits
    /// never spin ([`Handoff::Park`], whatever the configuration says): nothing answers
    /// it but this engine's steps on the same thread, and the simulation reads no wall
    /// clock.
    pub fn client(&self, outstanding_limit: usize) -> EngineClient {
        let config = EngineConfig {
            handoff: Handoff::Park,
            ..self.config
        };
        EngineClient::new(
            self.messages.clone(),
            Bell::default(),
            outstanding_limit,
            config,
            self.block_bytes,
        )
    }

    /// Polls `source` in every step from now on ([`crate::inbound`]); it is dropped when
    /// it closes or overruns its budget.
    pub fn add_source(&mut self, source: Box<dyn InboundSource>) {
        self.inputs.add_source(source);
    }

    /// Inbound sources polled now.
    pub fn source_count(&self) -> usize {
        self.inputs.source_count()
    }

    /// File-system commits made for groups of flushes so far.
    pub fn group_commits(&self) -> u64 {
        self.core.group_commits()
    }

    /// Serves at most one queued message and reaps the completions that have arrived;
    /// waits for one device completion only when reads or writes are in flight and nothing
    /// else can be served. An error is the engine's end, as it would stop the engine thread
    /// (a crashed device, for example): drop the engine then.
    pub fn step(&mut self) -> Result<StepOutcome, EngineError> {
        let message = if let Some(message) = self.core.held_back.take() {
            Some(message)
        } else if self.core.must_wait_for_device() {
            None
        } else {
            self.inputs.try_next().ok()
        };
        match message {
            Some(Message::Command(envelope)) => self.core.serve(envelope, &mut self.inputs)?,
            Some(Message::AddSource(source)) => self.inputs.add_source(source),
            Some(Message::RegisterReadPool { done }) => self.core.register_read_pool(&done)?,
            Some(Message::Shutdown { .. }) => {
                unreachable!("only a threaded engine is sent a shutdown message")
            }
            None if self.core.has_pending_flushes() => self.core.commit_pending_flushes()?,
            None if self.core.device_is_idle() => return Ok(StepOutcome::Idle),
            None => self.core.pump_device(true)?,
        }
        self.core.pump_device(false)?;
        Ok(StepOutcome::Progressed)
    }

    /// Steps until every submitted command has been answered; the number of steps.
    pub fn run_until_idle(&mut self) -> Result<u64, EngineError> {
        let mut steps = 0;
        while self.step()? == StepOutcome::Progressed {
            steps += 1;
        }
        Ok(steps)
    }

    /// Device requests in flight now (for tests that check how many reads overlap).
    pub fn device_requests_in_flight(&mut self) -> usize {
        self.core.device.in_flight()
    }

    /// Serves what is queued, flushes and returns the file system.
    pub fn shutdown(mut self) -> Result<Filesystem, EngineError> {
        self.run_until_idle()?;
        self.core.fs.flush(&mut *self.core.device)?;
        Ok(self.core.into_filesystem())
    }

    /// Serves what is queued and returns the file system without flushing.
    pub fn shutdown_without_commit(mut self) -> Result<Filesystem, EngineError> {
        self.run_until_idle()?;
        Ok(self.core.into_filesystem())
    }
}
