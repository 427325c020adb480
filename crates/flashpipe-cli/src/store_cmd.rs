//! The store commands: `mkfs`, `put`, `get`, `cat`, `ls`, `stat`, `rm`, `mv`, `df`, `fsck`.
//!
//! Each opens the store named by its TOML file, mounts the file system, starts the
//! engine (the filesystem core thread) and talks to it as a client; transfers keep
//! several commands in flight. Every check on user input happens before anything is
//! changed, so a bad argument leaves the store as it was.
//!
//! One owner per store: opening takes the store's lock (exclusive for commands that may
//! change it, shared for `ls`, `stat`, `cat`, `get`, `df` and `fsck` without `--repair`,
//! which also open the devices read-only and mount read-only); a second opener fails
//! naming the holder, or waits with `--wait`. Every changing command is one transaction:
//! it commits with one flush at its end when it succeeded, and a command that fails closes
//! the store without committing, so the store keeps its last commit.

mod probe;
mod transfer;

pub use transfer::{file_exists, plan_put, rename_command};

use std::path::{Path, PathBuf};
use std::sync::Arc;

use flashpipe_engine::{Command as EngineCommand, EngineClient, Reply};
use flashpipe_fs::{FileStat, Filesystem, FormatOptions, FsStats};
use flashpipe_store::running::has_ram_device;
use flashpipe_store::store::{
    device_files, open_store_device_waiting, DeviceCreation, OpenedStoreDevice,
};
use flashpipe_store::store_config::{
    check_block_size, check_distinct_devices, check_stripe_unit, parse_device_list, DeviceSpec,
    StoreConfig, STORE_FILE_VERSION,
};
use flashpipe_store::store_lock::{LockWait, StoreLock};
use flashpipe_store::units::{parse_size_bytes, HumanBytes};
use flashpipe_store::RunningStore;
pub use flashpipe_store::StoreAccess;
use serde_json::json;

/// Errors of the CLI commands: shown to the user as one line.
pub type CliResult = Result<(), Box<dyn std::error::Error>>;

/// `flashpipe mkfs`.
#[derive(Debug, clap::Args)]
pub struct MkfsArgs {
    /// Devices, comma-separated: file paths (relative to the store file's folder), `ram:SIZE`,
    /// and `flash:PRESET:IMAGE` (emulated NAND flash of a preset, minflash or tlc, under the
    /// host FTL, kept in the sparse file IMAGE).
    #[arg(long, required = true)]
    pub devices: String,
    /// Flash devices: share of the usable pages the FTL holds back (0.1 = 10%).
    #[arg(long)]
    pub flash_over_provisioning: Option<f64>,
    /// Flash devices: erase blocks per plane (the preset's geometry otherwise, cut to 8 GiB raw).
    #[arg(long)]
    pub flash_blocks_per_plane: Option<u32>,
    /// Size of each file device (e.g. 2GiB).
    #[arg(long)]
    pub size: Option<String>,
    /// File-system block size: 4KiB, 8KiB, 16KiB or a larger power of two.
    #[arg(long, default_value = "16KiB")]
    pub block_size: String,
    /// Bytes placed on one device before the next.
    #[arg(long, default_value = "64KiB")]
    pub stripe_unit: String,
    /// Requests in flight per device.
    #[arg(long, default_value_t = 32)]
    pub queue_depth: u32,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Format devices that hold a flashpipe store or flash image already (their contents
    /// are lost); without it such a device is refused.
    #[arg(long)]
    pub force: bool,
    /// Wait for a command using one of the devices to finish instead of failing.
    #[arg(long)]
    pub wait: bool,
    /// The store file to write (must not exist).
    pub store: PathBuf,
}

/// Arguments shared by the commands that name a store.
#[derive(Debug, clap::Args)]
pub struct StoreArgs {
    /// The store file written by `flashpipe mkfs`.
    pub store: PathBuf,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Wait for another command using the store to finish instead of failing (one
    /// command changes a store at a time; read-only ones run together).
    #[arg(long)]
    pub wait: bool,
}

impl StoreArgs {
    fn lock_wait(&self) -> LockWait {
        if self.wait {
            LockWait::Wait
        } else {
            LockWait::Fail
        }
    }
}

/// `flashpipe put`.
#[derive(Debug, clap::Args)]
pub struct PutArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Files or folders to store. A folder's files are named by their path inside it,
    /// with `:` between folder names (`sub:file.txt`).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Name in the store: the file's name for one file, a prefix (`NAME:`) for folders.
    #[arg(long = "as")]
    pub name: Option<String>,
    /// Replace files that exist in the store already; the old file stays whole until the
    /// new one is committed (without it an existing name is refused and nothing changes).
    #[arg(long)]
    pub force: bool,
    /// Also store special files (FIFOs, devices, sockets) given as paths, reading what
    /// they yield; without it they are refused (reading one may block or never end).
    #[arg(long)]
    pub special: bool,
}

/// `flashpipe get`.
#[derive(Debug, clap::Args)]
pub struct GetArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// The file in the store.
    pub name: String,
    /// Where to write it: a file path, an existing folder, or `-` for standard output.
    pub destination: PathBuf,
}

/// Commands taking a store and names: `cat`, `stat`, `rm`, `ls`.
#[derive(Debug, clap::Args)]
pub struct NamesArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// File names in the store.
    pub names: Vec<String>,
}

/// `flashpipe mv`.
#[derive(Debug, clap::Args)]
pub struct MvArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Current name.
    pub from: String,
    /// New name (must not exist, unless --force).
    pub to: String,
    /// Replace `to` if it exists, in the same commit as the rename.
    #[arg(long)]
    pub force: bool,
}

/// How `flashpipe cp` may move data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CopyMethodArg {
    /// Remap whole blocks (stores on emulated flash); fail where that is impossible.
    Reference,
    /// Remap whole blocks where possible, else copy the bytes.
    Auto,
    /// Read and write every byte.
    Bytes,
}

impl CopyMethodArg {
    fn method(self) -> flashpipe_fs::CopyMethod {
        match self {
            CopyMethodArg::Reference => flashpipe_fs::CopyMethod::ReferenceOrFail,
            CopyMethodArg::Auto => flashpipe_fs::CopyMethod::ReferenceOrBytes,
            CopyMethodArg::Bytes => flashpipe_fs::CopyMethod::Bytes,
        }
    }
}

/// `flashpipe cp`.
#[derive(Debug, clap::Args)]
pub struct CpArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// The file to copy.
    pub from: String,
    /// The new file (must not exist, unless --force).
    pub to: String,
    /// Replace `to` if it exists: the copy is made under a temporary name and renamed
    /// over `to` in the same commit.
    #[arg(long)]
    pub force: bool,
    /// `reference`: remap blocks, no data moves (needs a store on emulated flash; fails
    /// elsewhere); `auto`: by reference when possible, else bytes; `bytes`: copy bytes.
    #[arg(long = "by", value_enum, default_value = "auto")]
    pub by: CopyMethodArg,
}

/// `flashpipe fsck`.
#[derive(Debug, clap::Args)]
pub struct FsckArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Fix what can be fixed safely (leaked blocks, counts, stale super block, orphans).
    #[arg(long)]
    pub repair: bool,
    /// Also read every data block and verify its checksum; each damaged block is a
    /// finding naming the file and the offset (never repaired).
    #[arg(long)]
    pub data: bool,
}

/// Runs `mkfs`: validates everything, creates the devices, formats, writes the store file.
pub fn run_mkfs(arguments: MkfsArgs) -> CliResult {
    let config = mkfs_config(&arguments)?;
    let wait = if arguments.wait {
        LockWait::Wait
    } else {
        LockWait::Fail
    };
    let stats = create_store_with(&config, &arguments.store, arguments.force, wait)?;
    let capacity_bytes = stats.fs_block_count * u64::from(stats.fs_block_size_bytes);
    if arguments.json {
        println!(
            "{}",
            json!({"store": arguments.store, "devices": config.devices.len(),
                   "capacity_bytes": capacity_bytes, "block_size_bytes": config.block_size_bytes,
                   "stripe_unit_bytes": config.stripe_unit_bytes})
        );
    } else {
        println!(
            "formatted {}: {} over {} device(s), {} blocks, {} stripe unit",
            arguments.store.display(),
            HumanBytes(capacity_bytes),
            config.devices.len(),
            HumanBytes(u64::from(config.block_size_bytes)),
            HumanBytes(config.stripe_unit_bytes)
        );
    }
    if has_ram_device(&config) {
        eprintln!("note: RAM devices keep their contents only inside one process; commands on this store from the shell will refuse it");
    }
    Ok(())
}

/// Creates a store: checks the config, creates and formats its devices, then writes
/// the store file (last, so a failure leaves no store file behind). Devices that hold a
/// flashpipe store or flash image already are refused.
pub fn create_store(
    config: &StoreConfig,
    store: &Path,
) -> Result<FsStats, Box<dyn std::error::Error>> {
    create_store_with(config, store, false, LockWait::Fail)
}

/// [`create_store`], formatting devices that hold a store with `force` and waiting for
/// their owner with [`LockWait::Wait`]. Refuses a device named twice; on failure removes
/// every device file and image it created (never one that was there before), so the same
/// mkfs can be retried.
pub fn create_store_with(
    config: &StoreConfig,
    store: &Path,
    force: bool,
    wait: LockWait,
) -> Result<FsStats, Box<dyn std::error::Error>> {
    if store.exists() {
        return Err(format!(
            "store file {} exists already; remove it first to make a new store",
            store.display()
        )
        .into());
    }
    config.validate(store)?;
    check_distinct_devices(config, store)?;
    let lock = flashpipe_store::store::lock_store(
        config,
        store,
        DeviceCreation::CreateMissing.lock_mode(),
        wait,
    )?;
    if !force {
        probe::refuse_devices_holding_stores(config, store)?;
    }
    let existing: Vec<PathBuf> = device_files(config, store)
        .into_iter()
        .filter(|path| path.exists())
        .collect();
    let result = format_store(config, store, lock);
    if result.is_err() {
        remove_created_files(config, store, &existing);
    }
    result
}

fn format_store(
    config: &StoreConfig,
    store: &Path,
    lock: StoreLock,
) -> Result<FsStats, Box<dyn std::error::Error>> {
    let OpenedStoreDevice {
        device,
        notes,
        lock,
    } = flashpipe_store::store::open_store_device_locked(
        config,
        store,
        DeviceCreation::CreateMissing,
        lock,
    )?;
    print_notes(&notes);
    let options = FormatOptions {
        fs_block_size_bytes: config.block_size_bytes,
    };
    let filesystem = Filesystem::format(device, &options)?;
    let stats = filesystem.stats();
    drop(filesystem.unmount()?);
    config.save_new(store)?;
    drop(lock);
    Ok(stats)
}

/// Removes the device files and flash images of `config` that a failed mkfs created:
/// those not in `existing` (best effort: the mkfs's own error is the one to report).
fn remove_created_files(config: &StoreConfig, store: &Path, existing: &[PathBuf]) {
    for path in device_files(config, store) {
        if !existing.contains(&path) && path.is_file() {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// Creates a store of file devices named `device_files` (relative to the store file),
/// each `size_bytes`, with the default geometry (16 KiB blocks, 64 KiB stripe unit).
pub fn format_file_store(store: &Path, device_files: &[&str], size_bytes: u64) -> CliResult {
    let config = StoreConfig {
        store_file_version: STORE_FILE_VERSION,
        block_size_bytes: 16 << 10,
        stripe_unit_bytes: 64 << 10,
        queue_depth: 32,
        devices: parse_device_list(&device_files.join(","), Some(size_bytes))?,
    };
    create_store(&config, store)?;
    Ok(())
}

fn mkfs_config(arguments: &MkfsArgs) -> Result<StoreConfig, Box<dyn std::error::Error>> {
    let size_bytes = arguments
        .size
        .as_deref()
        .map(parse_size_bytes)
        .transpose()?;
    let block_size_bytes = u32::try_from(parse_size_bytes(&arguments.block_size)?)
        .map_err(|_| format!("block size {} is too large", arguments.block_size))?;
    check_block_size(block_size_bytes)?;
    let stripe_unit_bytes = parse_size_bytes(&arguments.stripe_unit)?;
    check_stripe_unit(stripe_unit_bytes)?;
    let mut devices = parse_device_list(&arguments.devices, size_bytes)?;
    apply_flash_options(arguments, &mut devices)?;
    Ok(StoreConfig {
        store_file_version: STORE_FILE_VERSION,
        block_size_bytes,
        stripe_unit_bytes,
        queue_depth: arguments.queue_depth,
        devices,
    })
}

/// Applies `--flash-*` to every flash device; refuses them when there is none, so a
/// mistyped device list does not silently ignore them. Their ranges are checked with the
/// rest of the store file (`StoreConfig::validate`).
fn apply_flash_options(arguments: &MkfsArgs, devices: &mut [DeviceSpec]) -> CliResult {
    let given =
        arguments.flash_over_provisioning.is_some() || arguments.flash_blocks_per_plane.is_some();
    let mut flash_count = 0;
    for device in devices.iter_mut() {
        let DeviceSpec::Flash(spec) = device else {
            continue;
        };
        flash_count += 1;
        if let Some(over_provisioning) = arguments.flash_over_provisioning {
            spec.over_provisioning = over_provisioning;
        }
        if let Some(blocks_per_plane) = arguments.flash_blocks_per_plane {
            spec.blocks_per_plane = Some(blocks_per_plane);
        }
    }
    if given && flash_count == 0 {
        return Err("--flash-over-provisioning and --flash-blocks-per-plane apply to flash devices (flash:PRESET:IMAGE); this store has none".into());
    }
    Ok(())
}

fn print_notes(notes: &[String]) {
    for note in notes {
        eprintln!("note: {note}");
    }
}

/// A store opened for commands: the store crate's [`RunningStore`] (engine, its
/// configuration, the device clock, the lock), with the CLI's printing of its notes and
/// its ending of a command ([`OpenStore::finish`]). Its fields and `client` are the
/// running store's, through `Deref`.
pub struct OpenStore {
    running: RunningStore,
}

impl std::ops::Deref for OpenStore {
    type Target = RunningStore;

    fn deref(&self) -> &RunningStore {
        &self.running
    }
}

impl OpenStore {
    /// Loads the store file, locks it, opens and mounts the store for changes and starts
    /// the engine; fails at once when another process uses the store.
    pub fn open(store: &Path) -> Result<OpenStore, Box<dyn std::error::Error>> {
        OpenStore::open_with(store, StoreAccess::ReadWrite, LockWait::Fail)
    }

    /// [`OpenStore::open`] for `access`, waiting for another user with
    /// [`LockWait::Wait`]; the notes of opening the devices go to standard error.
    pub fn open_with(
        store: &Path,
        access: StoreAccess,
        wait: LockWait,
    ) -> Result<OpenStore, Box<dyn std::error::Error>> {
        let running = RunningStore::open(store, access, wait)?;
        print_notes(&running.notes);
        Ok(OpenStore { running })
    }

    /// Closes the store: commits and unmounts when opened for changes; a read-only store
    /// is closed without writing anything.
    pub fn close(self) -> CliResult {
        self.running.close()?;
        Ok(())
    }

    /// Closes the store without committing: every change since the last commit is
    /// dropped, so a command that failed half-way leaves the store at its last commit.
    pub fn close_without_commit(self) -> CliResult {
        self.running.close_without_commit()?;
        Ok(())
    }

    /// Ends a command: commits and closes when `result` is a success, closes without
    /// committing when it is a failure (and returns that failure).
    pub fn finish<T>(
        self,
        result: Result<T, Box<dyn std::error::Error>>,
    ) -> Result<T, Box<dyn std::error::Error>> {
        match result {
            Ok(value) => {
                self.close()?;
                Ok(value)
            }
            Err(error) => {
                if let Err(close_error) = self.close_without_commit() {
                    eprintln!("note: closing the store after the failure: {close_error}");
                }
                Err(error)
            }
        }
    }
}

/// Opens the store of `arguments` with `access`, honouring `--wait`.
fn open_store(
    arguments: &StoreArgs,
    access: StoreAccess,
) -> Result<OpenStore, Box<dyn std::error::Error>> {
    OpenStore::open_with(&arguments.store, access, arguments.lock_wait())
}

/// Runs `put`: every file in one transaction (see `transfer`).
pub fn run_put(arguments: PutArgs) -> CliResult {
    let sources = transfer::plan_put_with_special(
        &arguments.paths,
        arguments.name.as_deref(),
        arguments.special,
    )?;
    let store = open_store(&arguments.store, StoreAccess::ReadWrite)?;
    let mut client = store.client(16);
    let result =
        transfer::put_files_atomically(&mut client, &*store.clock, &sources, arguments.force);
    drop(client);
    let report = store.finish(result)?;
    transfer::print_transfer_report("stored", &report, arguments.store.json);
    Ok(())
}

/// Runs `get`.
pub fn run_get(arguments: GetArgs) -> CliResult {
    let store = open_store(&arguments.store, StoreAccess::ReadOnly)?;
    let mut client = store.client(16);
    let result = transfer::get_file(
        &mut client,
        &*store.clock,
        &arguments.name,
        &arguments.destination,
    );
    drop(client);
    let report = store.finish(result)?;
    if arguments.destination != Path::new("-") {
        transfer::print_transfer_report("fetched", &report, arguments.store.json);
    }
    Ok(())
}

/// Runs `cat`: every named file to standard output, in order.
pub fn run_cat(arguments: NamesArgs) -> CliResult {
    if arguments.names.is_empty() {
        return Err("cat needs at least one file name".into());
    }
    let store = open_store(&arguments.store, StoreAccess::ReadOnly)?;
    let mut client = store.client(16);
    let result = arguments.names.iter().try_for_each(|name| {
        transfer::get_file(&mut client, &*store.clock, name, Path::new("-")).map(|_| ())
    });
    drop(client);
    store.finish(result)
}

/// Runs `ls`: every file, or the named ones.
pub fn run_ls(arguments: NamesArgs) -> CliResult {
    let store = open_store(&arguments.store, StoreAccess::ReadOnly)?;
    let mut client = store.client(4);
    let files = list_files(&mut client, &arguments.names);
    drop(client);
    let files = store.finish(files)?;
    if arguments.store.json {
        let rows: Vec<_> = files.iter().map(file_json).collect();
        println!("{}", serde_json::Value::Array(rows));
    } else {
        for file in &files {
            println!("{:>14}  {}", file.size_bytes, file.name);
        }
        let total_bytes: u64 = files.iter().map(|file| file.size_bytes).sum();
        println!("{} file(s), {}", files.len(), HumanBytes(total_bytes));
    }
    Ok(())
}

fn list_files(
    client: &mut EngineClient,
    names: &[String],
) -> Result<Vec<FileStat>, Box<dyn std::error::Error>> {
    if names.is_empty() {
        return match client.call(EngineCommand::List)? {
            Reply::List(files) => Ok(files),
            other => Err(format!("unexpected engine reply {other:?}").into()),
        };
    }
    names.iter().map(|name| stat_file(client, name)).collect()
}

fn stat_file(
    client: &mut EngineClient,
    name: &str,
) -> Result<FileStat, Box<dyn std::error::Error>> {
    match client.call(EngineCommand::Stat {
        name: name.to_string(),
    })? {
        Reply::Stat(stat) => Ok(stat),
        other => Err(format!("unexpected engine reply {other:?}").into()),
    }
}

fn file_json(file: &FileStat) -> serde_json::Value {
    json!({"name": file.name, "size_bytes": file.size_bytes, "file_id": file.file_id.0,
           "allocated_blocks": file.allocated_blocks, "modified_clock_ns": file.modified_clock_ns})
}

/// Runs `stat`.
pub fn run_stat(arguments: NamesArgs) -> CliResult {
    if arguments.names.is_empty() {
        return Err("stat needs at least one file name".into());
    }
    let store = open_store(&arguments.store, StoreAccess::ReadOnly)?;
    let mut client = store.client(4);
    let files = list_files(&mut client, &arguments.names);
    drop(client);
    let files = store.finish(files)?;
    if arguments.store.json {
        println!(
            "{}",
            serde_json::Value::Array(files.iter().map(file_json).collect())
        );
        return Ok(());
    }
    for file in files {
        println!(
            "{}: {} bytes ({}), file id {}, {} blocks allocated",
            file.name,
            file.size_bytes,
            HumanBytes(file.size_bytes),
            file.file_id.0,
            file.allocated_blocks
        );
    }
    Ok(())
}

/// Runs `rm`: checks every name first (each exists, none is named twice), then deletes
/// them all in one commit; a bad name deletes nothing.
pub fn run_rm(arguments: NamesArgs) -> CliResult {
    if arguments.names.is_empty() {
        return Err("rm needs at least one file name".into());
    }
    refuse_repeated_names(&arguments.names)?;
    let store = open_store(&arguments.store, StoreAccess::ReadWrite)?;
    let mut client = store.client(4);
    let result = remove_all(&mut client, &arguments.names);
    drop(client);
    store.finish(result)?;
    if arguments.store.json {
        println!("{}", json!({"removed": arguments.names}));
    } else {
        println!("removed {} file(s)", arguments.names.len());
    }
    Ok(())
}

/// `rm x y x` is refused whole: with every command atomic, deleting x and y and then
/// failing on the second x (Unix `rm`'s way) would be a partial command.
fn refuse_repeated_names(names: &[String]) -> CliResult {
    let mut seen = std::collections::HashSet::new();
    match names.iter().find(|name| !seen.insert(name.as_str())) {
        Some(name) => Err(format!("{name:?} is named more than once; nothing removed").into()),
        None => Ok(()),
    }
}

fn remove_all(client: &mut EngineClient, names: &[String]) -> CliResult {
    for name in names {
        stat_file(client, name).map_err(|error| format!("{error}; nothing removed"))?;
    }
    for name in names {
        client.call(EngineCommand::Delete { name: name.clone() })?;
    }
    client.call(EngineCommand::Flush)?;
    Ok(())
}

/// Runs `mv` (replacing the target only with `--force`, in the same commit).
pub fn run_mv(arguments: MvArgs) -> CliResult {
    let store = open_store(&arguments.store, StoreAccess::ReadWrite)?;
    let mut client = store.client(4);
    let result = client
        .call(transfer::rename_command(
            &arguments.from,
            &arguments.to,
            arguments.force,
        ))
        .and_then(|_| client.call(EngineCommand::Flush))
        .map_err(|error| refuse_hint(error, arguments.force));
    drop(client);
    store.finish(result)?;
    if arguments.store.json {
        println!("{}", json!({"from": arguments.from, "to": arguments.to}));
    } else {
        println!("renamed {} to {}", arguments.from, arguments.to);
    }
    Ok(())
}

/// An engine error, with the `--force` hint when the target exists.
fn refuse_hint(error: flashpipe_engine::EngineError, forced: bool) -> Box<dyn std::error::Error> {
    use flashpipe_engine::EngineError;
    use flashpipe_fs::{CopyError, NamespaceError};
    let exists = matches!(
        error,
        EngineError::Namespace(NamespaceError::Exists { .. })
            | EngineError::Copy(CopyError::Namespace(NamespaceError::Exists { .. }))
    );
    if exists && !forced {
        return format!("{error}; give --force to replace it").into();
    }
    error.into()
}

/// Runs `cp`: copies one file inside the store, by reference where the device remaps.
/// With `--force` an existing target is replaced: the copy is made under a temporary
/// name and renamed over it in the same commit.
pub fn run_cp(arguments: CpArgs) -> CliResult {
    let store = open_store(&arguments.store, StoreAccess::ReadWrite)?;
    let clock = Arc::clone(&store.clock);
    let mut client = store.client(4);
    let started_ns = clock.now_ns();
    let result = copy_file(&mut client, &arguments);
    let elapsed_ns = clock.now_ns().saturating_sub(started_ns);
    drop(client);
    let report = store.finish(result)?;
    if arguments.store.json {
        println!(
            "{}",
            json!({"from": arguments.from, "to": arguments.to,
                   "blocks_by_reference": report.blocks_by_reference,
                   "bytes_by_bytes": report.bytes_by_bytes,
                   "elapsed_ns": elapsed_ns})
        );
    } else {
        println!(
            "copied {} to {}: {} blocks by reference, {} by bytes, {:.3} ms (store clock)",
            arguments.from,
            arguments.to,
            report.blocks_by_reference,
            HumanBytes(report.bytes_by_bytes),
            elapsed_ns as f64 / 1e6
        );
    }
    Ok(())
}

fn copy_file(
    client: &mut EngineClient,
    arguments: &CpArgs,
) -> Result<flashpipe_fs::CopyReport, Box<dyn std::error::Error>> {
    let target = if arguments.force {
        format!(".flashpipe-cp-{}", std::process::id())
    } else {
        arguments.to.clone()
    };
    let reply = client
        .call(EngineCommand::Copy {
            from: arguments.from.clone(),
            to: target.clone(),
            method: arguments.by.method(),
        })
        .map_err(|error| refuse_hint(error, arguments.force))?;
    let Reply::Copied(report) = reply else {
        return Err("unexpected engine reply to cp".into());
    };
    if arguments.force {
        client.call(transfer::rename_command(&target, &arguments.to, true))?;
    }
    client.call(EngineCommand::Flush)?;
    Ok(report)
}

/// Runs `df`.
pub fn run_df(arguments: StoreArgs) -> CliResult {
    let store = open_store(&arguments, StoreAccess::ReadOnly)?;
    let mut client = store.client(1);
    let reply = client.call(EngineCommand::Stats).map_err(Into::into);
    drop(client);
    let Reply::Stats(stats) = store.finish(reply)? else {
        return Err("unexpected engine reply to df".into());
    };
    let block_bytes = u64::from(stats.fs_block_size_bytes);
    if arguments.json {
        println!(
            "{}",
            json!({"block_size_bytes": block_bytes, "total_bytes": stats.fs_block_count * block_bytes,
                   "used_bytes": stats.used_blocks * block_bytes, "free_bytes": stats.free_blocks * block_bytes,
                   "reserved_bytes": stats.reserved_blocks * block_bytes, "file_count": stats.file_count,
                   "commit_sequence": stats.commit_sequence})
        );
    } else {
        println!(
            "{} total, {} used, {} free ({} kept for the next commit), {} file(s), commit {}",
            HumanBytes(stats.fs_block_count * block_bytes),
            HumanBytes(stats.used_blocks * block_bytes),
            HumanBytes(stats.free_blocks * block_bytes),
            HumanBytes(stats.reserved_blocks * block_bytes),
            stats.file_count,
            stats.commit_sequence
        );
    }
    Ok(())
}

/// Runs `fsck` on the unmounted store; exits non-zero when the store is not clean
/// (after repair, when anything unrepairable remains).
pub fn run_fsck(arguments: FsckArgs) -> CliResult {
    let store_path = &arguments.store.store;
    let config = StoreConfig::load(store_path)?;
    let creation = if arguments.repair {
        DeviceCreation::MustExist
    } else {
        DeviceCreation::ReadOnly
    };
    let OpenedStoreDevice {
        mut device,
        notes,
        lock,
    } = open_store_device_waiting(&config, store_path, creation, arguments.store.lock_wait())?;
    print_notes(&notes);
    let options = flashpipe_fs::FsckOptions {
        repair: arguments.repair,
        verify_data: arguments.data,
    };
    let report = flashpipe_fs::fsck_with_options(&mut *device, options);
    drop(device);
    drop(lock);
    let report = report?;
    let unrepaired =
        report.findings.len() > report.repaired.len() || report.repair_refused.is_some();
    let clean = report.is_clean() || (arguments.repair && !unrepaired);
    if arguments.store.json {
        let findings: Vec<_> = report
            .findings
            .iter()
            .map(|finding| {
                json!({"structure": finding.structure.to_string(), "block": finding.block,
                                   "problem": finding.problem, "repairable": finding.repairable})
            })
            .collect();
        println!(
            "{}",
            json!({"clean": report.is_clean(), "findings": findings, "repaired": report.repaired,
                   "repair_refused": report.repair_refused, "file_count": report.file_count,
                   "commit_sequence": report.commit_sequence})
        );
    } else {
        print_fsck_report(&report);
    }
    if clean {
        Ok(())
    } else {
        Err(format!(
            "{} finding(s) in {}",
            report.findings.len(),
            store_path.display()
        )
        .into())
    }
}

fn print_fsck_report(report: &flashpipe_fs::FsckReport) {
    for finding in &report.findings {
        println!("finding: {finding}");
    }
    for repair in &report.repaired {
        println!("repaired: {repair}");
    }
    if let Some(reason) = &report.repair_refused {
        println!("repair refused: {reason}");
    }
    if report.is_clean() {
        println!(
            "clean: {} file(s), commit {}",
            report.file_count,
            report.commit_sequence.unwrap_or(0)
        );
    }
}
