//! The store the kernel benchmark runs on: device files in the benchmark's folder,
//! formatted with a store file beside them, and its engine started and kept running (and
//! locked) for the whole run.

use std::path::Path;
use std::sync::Arc;

use flashpipe_device::Clock;
use flashpipe_engine::{Engine, EngineConfig};
use flashpipe_fs::{Filesystem, FormatOptions};
use flashpipe_kernels::api::Kernel;
use flashpipe_pipeline::run::PipelineJob;
use flashpipe_pipeline::{run_pipeline, PipelineConfig, PipelineError, PipelineResult};
use flashpipe_store::store::{open_store_device, DeviceCreation};
use flashpipe_store::store_config::{parse_device_list, StoreConfig, STORE_FILE_VERSION};
use flashpipe_store::store_lock::StoreLock;

use crate::error::{BenchError, BenchErrorKind};
use crate::BenchResult;

/// A freshly formatted store with its engine running.
pub struct KernelStore {
    /// The running engine.
    pub engine: Engine,
    /// How the engine was started.
    pub engine_config: EngineConfig,
    /// The store device's clock.
    pub clock: Arc<dyn Clock>,
    /// Declared last: released after the engine and its devices are closed.
    _lock: StoreLock,
}

impl KernelStore {
    /// Creates the store of file devices named `device_files` (relative to `store_file`),
    /// each `size_bytes`, with 64 KiB stripe units and `fs_block_size_bytes` blocks;
    /// writes `store_file` and starts the engine. Refuses a store file that exists.
    pub fn create(
        store_file: &Path,
        device_files: &[&str],
        size_bytes: u64,
        fs_block_size_bytes: u32,
    ) -> BenchResult<KernelStore> {
        if store_file.exists() {
            return Err(BenchError::new(
                BenchErrorKind::Io(std::io::ErrorKind::AlreadyExists),
                format!(
                    "store file {} exists already; remove it first to make a new store",
                    store_file.display()
                ),
            )
            .into());
        }
        let config = StoreConfig {
            store_file_version: STORE_FILE_VERSION,
            identity: None,
            block_size_bytes: fs_block_size_bytes,
            stripe_unit_bytes: 64 << 10,
            queue_depth: 32,
            devices: parse_device_list(&device_files.join(","), Some(size_bytes))?,
        };
        config.validate(store_file)?;
        let opened = open_store_device(&config, store_file, DeviceCreation::CreateMissing)?;
        for note in &opened.notes {
            crate::progress::note(&format!("note: {note}"));
        }
        let options = FormatOptions {
            fs_block_size_bytes: config.block_size_bytes,
            store_identity: None,
        };
        let filesystem = Filesystem::format(opened.device, &options)?;
        config.save_new(store_file)?;
        let engine_config = EngineConfig {
            write_path: crate::fs::write_path_from_environment(),
            handoff: crate::fs::handoff_from_environment(),
            ..EngineConfig::default()
        };
        Ok(KernelStore {
            clock: filesystem.clock(),
            engine: Engine::start(filesystem, engine_config),
            engine_config,
            _lock: opened.lock,
        })
    }

    /// Runs `kernel` over `files` with `config`.
    pub fn run(
        &self,
        kernel: Arc<dyn Kernel>,
        files: &[String],
        config: &PipelineConfig,
    ) -> Result<PipelineResult, PipelineError> {
        run_pipeline(PipelineJob::uncancelled(
            &self.engine,
            &self.engine_config,
            kernel,
            files,
            config,
        ))
    }

    /// Flushes, unmounts and closes the store.
    pub fn close(self) -> BenchResult {
        drop(self.engine.shutdown()?.unmount()?);
        Ok(())
    }
}
