//! The store commands: `mkfs`, `put`, `get`, `cat`, `ls`, `stat`, `rm`, `mv`, `df`, `fsck`,
//! `info`.
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

mod fsck_cmd;
mod info_cmd;
mod mkfs;
mod permissions;
pub(crate) mod put_stdin;
mod transfer;

pub use crate::session::file_exists;
pub use fsck_cmd::{run_fsck, FsckArgs};
pub use info_cmd::{run_info, InfoArgs};
pub use mkfs::{run_mkfs, MkfsArgs};

use std::path::{Path, PathBuf};

use flashpipe_device::Clock;
use flashpipe_fs::FileStat;
use flashpipe_store::create::{create_store_with_options, CreateOptions};
use flashpipe_store::glob;
use flashpipe_store::put_plan::plan_put_with_special;
use flashpipe_store::store::{open_store_device_waiting, DeviceCreation, OpenedStoreDevice};
use flashpipe_store::store_config::{
    check_block_size, check_stripe_unit, parse_device_list, DeviceSpec, StoreConfig,
    STORE_FILE_VERSION,
};
use flashpipe_store::store_lock::LockWait;
use flashpipe_store::units::{parse_size_bytes, HumanBytes};
use flashpipe_store::RunningStore;
pub use flashpipe_store::StoreAccess;

use crate::error_kind::{ErrorKind, Failure};
use crate::session::{
    rename_file, with_transport, LiveServer, SessionError, SessionRequest, SessionResult,
    StoreSession, StoreTransport,
};
use flashpipe_api::TransportExt;
use serde_json::json;

/// Errors of the CLI commands: shown to the user as one line.
pub type CliResult = Result<(), Box<dyn std::error::Error>>;

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
    /// Say on standard error how the command reaches the store: through a server
    /// (`flashpipe serve`, named with its pid and socket) or opened in this process.
    #[arg(short, long)]
    pub verbose: bool,
}

impl StoreArgs {
    fn lock_wait(&self) -> LockWait {
        if self.wait {
            LockWait::Wait
        } else {
            LockWait::Fail
        }
    }

    fn session_request(&self, access: StoreAccess) -> SessionRequest<'_> {
        SessionRequest {
            store_file: &self.store,
            access,
            wait: self.lock_wait(),
            verbose: self.verbose,
        }
    }
}

/// `flashpipe put`.
#[derive(Debug, clap::Args)]
pub struct PutArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Files or folders to store. A folder keeps its own name as the prefix of its files'
    /// names, with `:` between folder names (`photos/sub/x.txt` -> `photos:sub:x.txt`).
    /// `-` alone reads standard input to its end into the file named by --as
    /// (`tar c dir | flashpipe put s.toml - --as dir.tar`; `-` where a path goes, as tar
    /// and cat read it, and the name from --as, as for any one file put): streamed in bounded memory,
    /// committed at end of file, nothing kept if the command is killed or the input
    /// fails (a command before the pipe that fails part-way is not seen: what it wrote
    /// is stored; `set -o pipefail` makes the shell report it); a local file named `-`
    /// is `./-`.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Name in the store: the file's name for one file (needed for `-`, standard
    /// input), the prefix replacing a folder's name (`NAME:sub:x.txt`) for folders.
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
    /// The file in the store; or a pattern (`*`, `?`, `[...]`, matched against whole
    /// names); or with -r a prefix (`photos` fetches every `photos:...`).
    pub name: String,
    /// Where to write: a file path, an existing folder (the file keeps the last
    /// `:`-component of its name: `get s.toml a:b.txt out/` writes `out/b.txt`), or `-`
    /// for standard output. With -r a folder (created if missing) where `a:b:c` becomes
    /// `DEST/a/b/c`; with a pattern an existing folder. A regular file there is replaced
    /// whole (by rename); a special file (a device, a FIFO) is written into as `cp` does.
    pub destination: PathBuf,
    /// Fetch every file under the prefix NAME (or matching the pattern), recreating
    /// folders from the `:`-components of the names.
    #[arg(short, long)]
    pub recursive: bool,
    /// Refuse a destination that is a special file (a device, a FIFO, a socket) instead
    /// of writing into it as `cp` does. Regular files are always replaced whole, by
    /// rename.
    #[arg(long)]
    pub no_special: bool,
}

/// Commands taking a store and names: `cat`, `stat`.
#[derive(Debug, clap::Args)]
pub struct NamesArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// File names in the store, or patterns (`*`, `?`, `[...]`, matched against whole
    /// names; `:` is an ordinary character). A pattern matching nothing is an error.
    pub names: Vec<String>,
}

/// `flashpipe rm`.
#[derive(Debug, clap::Args)]
pub struct RmArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// File names in the store, or patterns (`*`, `?`, `[...]`, matched against whole
    /// names); with -r also prefixes (`photos` removes every `photos:...`).
    pub names: Vec<String>,
    /// Remove every file under each prefix given, all in one commit.
    #[arg(short, long)]
    pub recursive: bool,
}

/// `flashpipe ls`.
#[derive(Debug, clap::Args)]
#[command(disable_help_flag = true)]
pub struct LsArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Names, prefixes (`photos` lists every `photos:...`) or patterns (`*`, `?`,
    /// `[...]`, matched against whole names). None: every file.
    pub names: Vec<String>,
    /// One name a line, nothing else.
    #[arg(short = '1')]
    pub one_per_line: bool,
    /// Long listing: size, blocks, file id, modification time (store clock), name.
    #[arg(short = 'l')]
    pub long: bool,
    /// Sizes in human units (KiB, MiB, ...).
    #[arg(short = 'h', long = "human-readable")]
    pub human: bool,
    /// Print help.
    #[arg(long, action = clap::ArgAction::Help)]
    pub help: Option<bool>,
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
    /// Share whole blocks with the source (reference counts; every store kind): no data
    /// moves, the shared blocks are stored and counted once.
    Reference,
    /// The same as `reference` (sharing needs nothing from the device, so it never falls
    /// back to bytes for a whole file).
    Auto,
    /// Ask the device to remap whole blocks (an FTL on emulated flash: the flash copy
    /// experiment's way); fail where the device cannot.
    Remap,
    /// Read and write every byte.
    Bytes,
}

impl CopyMethodArg {
    fn method(self) -> flashpipe_fs::CopyMethod {
        match self {
            CopyMethodArg::Reference | CopyMethodArg::Auto => flashpipe_fs::CopyMethod::Share,
            CopyMethodArg::Remap => flashpipe_fs::CopyMethod::ReferenceOrFail,
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
    /// `reference` (or `auto`): share the source's blocks, no data moves, on every store;
    /// `remap`: the device remaps blocks (a store on emulated flash; fails elsewhere);
    /// `bytes`: copy bytes.
    #[arg(long = "by", value_enum, default_value = "auto")]
    pub by: CopyMethodArg,
}

fn print_note(note: &str) {
    eprintln!("note: {note}");
}

fn print_notes(notes: &[String]) {
    for note in notes {
        print_note(note);
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
    /// Loads the store file, locks it, opens and mounts the store for `access` and starts
    /// the engine, waiting for another user with [`LockWait::Wait`]; the notes of opening
    /// the devices go to standard error.
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

/// Opens a session on the store of `arguments` for `access` (through its server when
/// one holds it), honouring `--wait` and `-v`.
fn open_session(
    arguments: &StoreArgs,
    access: StoreAccess,
) -> Result<StoreSession, Box<dyn std::error::Error>> {
    StoreSession::open(&arguments.session_request(access))
}

/// Runs `put`: every file in one transaction (see `transfer`).
pub fn run_put(arguments: PutArgs) -> CliResult {
    let started = std::time::Instant::now();
    let from_standard_input = put_stdin::names_standard_input(&arguments.paths);
    let (sources, mut standard_input) = if from_standard_input {
        let source = put_stdin::plan_standard_input(&arguments.paths, arguments.name.as_deref())?;
        put_stdin::note_when_typed();
        let input = put_stdin::read_ahead(std::io::stdin().lock())?;
        (vec![source], Some(input))
    } else {
        let sources = plan_put_with_special(
            &arguments.paths,
            arguments.name.as_deref(),
            arguments.special,
        )?;
        (sources, None)
    };
    let mut session = open_session(&arguments.store, StoreAccess::ReadWrite)?;
    let clock = session.clock();
    let input = match &mut standard_input {
        Some(reader) => transfer::PutInput::Stream {
            reader,
            label: "standard input",
        },
        None => transfer::PutInput::Files,
    };
    let result = with_transport!(session, |store| transfer::put_files_atomically(
        store,
        &*clock,
        &sources,
        input,
        arguments.force,
    ));
    let mut report = session.finish(result)?;
    report.wall_seconds = started.elapsed().as_secs_f64();
    transfer::print_transfer_report("stored", &report, arguments.store.json);
    Ok(())
}

/// Runs `get`: one file, the files matching a pattern, or with -r every file under a
/// prefix (see [`GetArgs`] for where each lands).
pub fn run_get(arguments: GetArgs) -> CliResult {
    let started = std::time::Instant::now();
    let mut session = open_session(&arguments.store, StoreAccess::ReadOnly)?;
    let clock = session.clock();
    let to_stdout = arguments.destination == Path::new("-");
    let result = with_transport!(session, |store| get(store, &*clock, &arguments));
    let mut report = session.finish(result)?;
    report.wall_seconds = started.elapsed().as_secs_f64();
    if !to_stdout {
        transfer::print_transfer_report("fetched", &report, arguments.store.json);
    }
    Ok(())
}

/// Fetches what `get` names, to its files or standard output.
fn get<T: StoreTransport>(
    store: &mut T,
    clock: &dyn Clock,
    arguments: &GetArgs,
) -> Result<transfer::TransferReport, Box<dyn std::error::Error>> {
    let targets = plan_get(store, arguments)?;
    if arguments.destination == Path::new("-") {
        let mut total = transfer::TransferReport::default();
        for target in &targets {
            let report = transfer::cat_file(store, clock, &target.name)?;
            total.total_bytes += report.total_bytes;
        }
        return Ok(total);
    }
    let special = if arguments.no_special {
        transfer::SpecialDestination::Refuse
    } else {
        transfer::SpecialDestination::WriteInto
    };
    transfer::get_files(store, clock, &targets, special)
}

/// A destination written with a trailing `/` names a folder: refuses it, saying so, when it
/// is not an existing one (instead of the operating system's "Not a directory").
fn refuse_missing_folder(destination: &Path) -> Result<(), Box<dyn std::error::Error>> {
    use std::os::unix::ffi::OsStrExt;
    if !destination.as_os_str().as_bytes().ends_with(b"/") || destination.is_dir() {
        return Ok(());
    }
    let bytes = destination.as_os_str().as_bytes();
    let without_slash = Path::new(std::ffi::OsStr::from_bytes(
        &bytes[..bytes.len() - bytes.iter().rev().take_while(|&&byte| byte == b'/').count()],
    ));
    let what = if without_slash.exists() {
        "exists but is not a folder"
    } else {
        "does not exist"
    };
    Err(Failure::not_found(format!(
        "{}: the trailing / names a folder, and it {what}; create it first (mkdir -p), or drop the / to name a file",
        destination.display()
    ))
    .into())
}

/// The local file of every store file `get` fetches, every local name checked first.
fn plan_get<T: StoreTransport>(
    client: &mut T,
    arguments: &GetArgs,
) -> Result<Vec<transfer::GetTarget>, Box<dyn std::error::Error>> {
    let folders = if arguments.recursive {
        FolderRule::Expand
    } else {
        FolderRule::Refuse
    };
    let names = resolve_names(client, std::slice::from_ref(&arguments.name), folders)?;
    let destination = &arguments.destination;
    let several = arguments.recursive || glob::is_pattern(&arguments.name);
    if several && destination != Path::new("-") && !arguments.recursive && !destination.is_dir() {
        return Err(Failure::invalid_input(format!(
            "{}: a pattern fetches into an existing folder; this is not one",
            destination.display()
        ))
        .into());
    }
    refuse_missing_folder(destination)?;
    let mut targets = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for name in names {
        let path = if arguments.recursive {
            local_components(&name)?
                .iter()
                .fold(destination.clone(), |path, part| path.join(part))
        } else if several || destination.is_dir() {
            let components = local_components(&name)?;
            destination.join(components.last().expect("a name has a component"))
        } else {
            destination.clone()
        };
        if destination != Path::new("-") && !seen.insert(path.clone()) {
            return Err(Failure::invalid_input(format!(
                "two files would both be written to {}; use -r to keep their folders",
                path.display()
            ))
            .into());
        }
        let size_bytes = client.stat(&name).session()?.size_bytes;
        targets.push(transfer::GetTarget {
            name,
            size_bytes,
            path,
        });
    }
    Ok(targets)
}

/// The local path components of a store name (its `:`-separated parts), each checked to
/// be a plain file or folder name: never empty, `.`, `..`, nor holding `/` or NUL.
pub(crate) fn local_components(name: &str) -> Result<Vec<&str>, Box<dyn std::error::Error>> {
    let components: Vec<&str> = name.split(':').collect();
    for component in &components {
        if component.is_empty()
            || *component == "."
            || *component == ".."
            || component.contains(['/', '\0'])
        {
            return Err(Failure::invalid_input(format!(
                "store name {name:?} cannot be a local path: component {component:?} is empty, `.`, `..` or holds `/`; rename it with `flashpipe mv` or fetch it with `get NAME FILE`"
            ))
            .into());
        }
    }
    Ok(components)
}

/// Runs `cat`: every named file (or pattern's matches) to standard output, in order.
pub fn run_cat(arguments: NamesArgs) -> CliResult {
    if arguments.store.json {
        return Err(Failure::new(ErrorKind::Usage, "cat writes the files' raw bytes; --json does not apply (use `stat --json` for facts about them)").into());
    }
    if arguments.names.is_empty() {
        return Err(Failure::new(ErrorKind::Usage, "cat needs at least one file name").into());
    }
    let mut session = open_session(&arguments.store, StoreAccess::ReadOnly)?;
    let clock = session.clock();
    let result = with_transport!(session, |store| {
        resolve_names(store, &arguments.names, FolderRule::Refuse).and_then(|names| {
            names
                .iter()
                .try_for_each(|name| transfer::cat_file(store, &*clock, name).map(|_| ()))
        })
    });
    session.finish(result)
}

/// The store files that `run`'s input names and patterns stand for (a prefix is not
/// expanded: a kernel's inputs are named or matched).
pub fn resolve_input_names<T: StoreTransport>(
    client: &mut T,
    arguments: &[String],
) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    resolve_names(client, arguments, FolderRule::Refuse)
}

/// Whether a name that is no file but a prefix of files (`photos` for `photos:a.jpg`)
/// stands for those files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FolderRule {
    /// It does (`ls`, `rm -r`, `get -r`).
    Expand,
    /// It does not: the command says so and names -r.
    Refuse,
}

/// The store files `arguments` name, in order, each once: a pattern stands for the files
/// it matches (none is an error naming it, unless a file has the pattern's very name: then
/// that file), a name of a file for that file, and a prefix for the files under it when
/// `folders` allows.
fn resolve_names<T: StoreTransport>(
    client: &mut T,
    arguments: &[String],
    folders: FolderRule,
) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let mut all_names: Option<Vec<String>> = None;
    let mut resolved = Vec::new();
    for argument in arguments {
        if !glob::is_pattern(argument) && file_exists(client, argument)? {
            resolved.push(argument.clone());
            continue;
        }
        let names = match &all_names {
            Some(names) => names,
            None => all_names.insert(
                list_files(client, &[])?
                    .into_iter()
                    .map(|file| file.name)
                    .collect(),
            ),
        };
        if glob::is_pattern(argument) {
            let matching: Vec<String> = names
                .iter()
                .filter(|name| glob::matches(argument, name))
                .cloned()
                .collect();
            if matching.is_empty() {
                if file_exists(client, argument)? {
                    resolved.push(argument.clone());
                    continue;
                }
                return Err(Failure::no_match(format!(
                    "pattern {argument:?} matches no file in the store"
                ))
                .into());
            }
            resolved.extend(matching);
            continue;
        }
        let prefix = format!("{}:", argument.trim_end_matches(':'));
        let under: Vec<String> = names
            .iter()
            .filter(|name| name.starts_with(&prefix))
            .cloned()
            .collect();
        if under.is_empty() {
            client.stat(argument).session()?;
            return Err(
                Failure::not_found(format!("{argument:?}: no such file in the store")).into(),
            );
        }
        if folders == FolderRule::Refuse {
            return Err(Failure::invalid_input(format!(
                "{argument:?} is no file but the prefix of {} file(s); give -r for all of them",
                under.len()
            ))
            .into());
        }
        resolved.extend(under);
    }
    let mut seen = std::collections::HashSet::new();
    resolved.retain(|name| seen.insert(name.clone()));
    Ok(resolved)
}

/// Runs `ls`: every file, or those the names, prefixes and patterns given stand for.
/// The listing goes to standard output, the summary line to standard error.
pub fn run_ls(arguments: LsArgs) -> CliResult {
    let mut session = open_session(&arguments.store, StoreAccess::ReadOnly)?;
    let clock_is_virtual = session.clock_is_virtual();
    let files = with_transport!(session, |store| {
        if arguments.names.is_empty() {
            list_files(store, &[])
        } else {
            resolve_names(store, &arguments.names, FolderRule::Expand)
                .and_then(|names| list_files(store, &names))
        }
    });
    let files = session.finish(files)?;
    if arguments.store.json {
        let rows: Vec<_> = files.iter().map(file_json).collect();
        println!("{}", serde_json::Value::Array(rows));
        return Ok(());
    }
    let size = |bytes: u64| {
        if arguments.human {
            HumanBytes(bytes).to_string()
        } else {
            bytes.to_string()
        }
    };
    for file in &files {
        if arguments.one_per_line {
            println!("{}", file.name);
        } else if arguments.long {
            println!(
                "{:>14} {:>8} {:>14} {:>8} {:>23}  {}",
                size(file.size_bytes),
                file.allocated_blocks,
                size(file.shared_bytes),
                file.file_id.0,
                modified_time_text(file.modified_clock_ns, clock_is_virtual),
                file.name
            );
        } else {
            println!("{:>14}  {}", size(file.size_bytes), file.name);
        }
    }
    let total_bytes: u64 = files.iter().map(|file| file.size_bytes).sum();
    eprintln!("{} file(s), {}", files.len(), HumanBytes(total_bytes));
    Ok(())
}

/// A file's modification time for `ls -l`: UTC date and time on a real clock (its
/// nanoseconds count from the Unix epoch), seconds of simulated device time on a virtual one.
fn modified_time_text(clock_ns: u64, clock_is_virtual: bool) -> String {
    if clock_is_virtual {
        return format!("{:.6} s (device)", clock_ns as f64 / 1e9);
    }
    let seconds = clock_ns / 1_000_000_000;
    let (year, month, day) = civil_date_of_days(seconds / 86_400);
    let second_of_day = seconds % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        second_of_day / 3600,
        second_of_day % 3600 / 60,
        second_of_day % 60
    )
}

/// The proleptic Gregorian (year, month, day) of `days` since 1970-01-01 (Howard
/// Hinnant's `civil_from_days`, for non-negative day counts).
fn civil_date_of_days(days: u64) -> (u64, u64, u64) {
    let shifted = days + 719_468;
    let era = shifted / 146_097;
    let day_of_era = shifted % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

fn list_files<T: StoreTransport>(
    client: &mut T,
    names: &[String],
) -> Result<Vec<FileStat>, Box<dyn std::error::Error>> {
    if names.is_empty() {
        return Ok(client.list().session()?);
    }
    names
        .iter()
        .map(|name| client.stat(name).session().map_err(Into::into))
        .collect()
}

fn file_json(file: &FileStat) -> serde_json::Value {
    json!({"name": file.name, "size_bytes": file.size_bytes, "file_id": file.file_id.0,
           "allocated_blocks": file.allocated_blocks, "shared_bytes": file.shared_bytes,
           "modified_clock_ns": file.modified_clock_ns})
}

/// Runs `stat`.
pub fn run_stat(arguments: NamesArgs) -> CliResult {
    if arguments.names.is_empty() {
        return Err(Failure::new(ErrorKind::Usage, "stat needs at least one file name").into());
    }
    let mut session = open_session(&arguments.store, StoreAccess::ReadOnly)?;
    let files = with_transport!(session, |store| {
        resolve_names(store, &arguments.names, FolderRule::Refuse)
            .and_then(|names| list_files(store, &names))
    });
    let files = session.finish(files)?;
    if arguments.store.json {
        println!(
            "{}",
            serde_json::Value::Array(files.iter().map(file_json).collect())
        );
        return Ok(());
    }
    for file in files {
        println!(
            "{}: {} bytes ({}), file id {}, {} blocks allocated, {} bytes in shared blocks ({})",
            file.name,
            file.size_bytes,
            HumanBytes(file.size_bytes),
            file.file_id.0,
            file.allocated_blocks,
            file.shared_bytes,
            HumanBytes(file.shared_bytes)
        );
    }
    Ok(())
}

/// Runs `rm`: resolves every name, pattern and (with -r) prefix first (each stands for
/// at least one file, none is named twice), then deletes them all in one commit; a bad
/// name deletes nothing.
pub fn run_rm(arguments: RmArgs) -> CliResult {
    if arguments.names.is_empty() {
        return Err(Failure::new(ErrorKind::Usage, "rm needs at least one file name").into());
    }
    refuse_repeated_names(&arguments.names)?;
    let folders = if arguments.recursive {
        FolderRule::Expand
    } else {
        FolderRule::Refuse
    };
    let mut session = open_session(&arguments.store, StoreAccess::ReadWrite)?;
    let result = with_transport!(session, |store| {
        resolve_names(store, &arguments.names, folders)
            .map_err(|error| Failure::context(&*error, format!("{error}; nothing removed")).into())
            .and_then(|names| remove_all(store, &names).map(|()| names))
    });
    let removed = session.finish(result)?;
    if arguments.store.json {
        println!("{}", json!({"removed": removed}));
    } else {
        eprintln!("removed {} file(s)", removed.len());
    }
    Ok(())
}

/// `rm x y x` is refused whole: with every command atomic, deleting x and y and then
/// failing on the second x (Unix `rm`'s way) would be a partial command.
fn refuse_repeated_names(names: &[String]) -> CliResult {
    let mut seen = std::collections::HashSet::new();
    match names.iter().find(|name| !seen.insert(name.as_str())) {
        Some(name) => Err(Failure::invalid_input(format!(
            "{name:?} is named more than once; nothing removed"
        ))
        .into()),
        None => Ok(()),
    }
}

fn remove_all<T: StoreTransport>(client: &mut T, names: &[String]) -> CliResult {
    for name in names {
        client
            .stat(name)
            .session()
            .map_err(|error| Failure::context(&error, format!("{error}; nothing removed")))?;
    }
    for name in names {
        client.delete(name).session()?;
    }
    client.flush().session()?;
    Ok(())
}

/// Runs `mv` (replacing the target only with `--force`, in the same commit).
pub fn run_mv(arguments: MvArgs) -> CliResult {
    let mut session = open_session(&arguments.store, StoreAccess::ReadWrite)?;
    let result = with_transport!(session, |store| {
        rename_file(store, &arguments.from, &arguments.to, arguments.force)
            .and_then(|()| store.flush().session())
            .map_err(|error| refuse_hint(error, arguments.force))
    });
    session.finish(result)?;
    if arguments.store.json {
        println!("{}", json!({"from": arguments.from, "to": arguments.to}));
    } else {
        eprintln!("renamed {} to {}", arguments.from, arguments.to);
    }
    Ok(())
}

/// A store error, with the `--force` hint when the target exists.
fn refuse_hint(error: SessionError, forced: bool) -> Box<dyn std::error::Error> {
    if error.is_exists() && !forced {
        return Failure::new(
            ErrorKind::Exists,
            format!("{error}; give --force to replace it"),
        )
        .into();
    }
    error.into()
}

/// Runs `cp`: copies one file inside the store, sharing its blocks (or as `--by` says).
/// With `--force` an existing target is replaced: the copy is made under a temporary
/// name and renamed over it in the same commit.
pub fn run_cp(arguments: CpArgs) -> CliResult {
    let mut session = open_session(&arguments.store, StoreAccess::ReadWrite)?;
    let clock = session.clock();
    let started_ns = clock.now_ns();
    let result = with_transport!(session, |store| copy_file(store, &arguments));
    let elapsed_ns = clock.now_ns().saturating_sub(started_ns);
    let report = session.finish(result)?;
    if arguments.store.json {
        println!(
            "{}",
            json!({"from": arguments.from, "to": arguments.to,
                   "blocks_by_reference": report.blocks_by_reference,
                   "bytes_by_bytes": report.bytes_by_bytes,
                   "elapsed_ns": elapsed_ns})
        );
    } else {
        let clock_name = if clock.is_virtual() {
            "simulated device time"
        } else {
            "wall time"
        };
        eprintln!(
            "copied {} to {}: {} blocks by reference ({}), {} by bytes, {:.3} ms of {clock_name}",
            arguments.from,
            arguments.to,
            report.blocks_by_reference,
            if arguments.by == CopyMethodArg::Remap {
                "remapped by the device"
            } else {
                "shared with the source"
            },
            HumanBytes(report.bytes_by_bytes),
            elapsed_ns as f64 / 1e6
        );
    }
    Ok(())
}

fn copy_file<T: StoreTransport>(
    client: &mut T,
    arguments: &CpArgs,
) -> Result<flashpipe_fs::CopyReport, Box<dyn std::error::Error>> {
    let target = if arguments.force {
        format!(".flashpipe-cp-{}", std::process::id())
    } else {
        arguments.to.clone()
    };
    let report = client
        .copy(&arguments.from, &target, arguments.by.method())
        .session()
        .map_err(|error| refuse_hint(error, arguments.force))?;
    if arguments.force {
        if let Err(error) = rename_file(client, &target, &arguments.to, true) {
            let _ = client.delete(&target);
            return Err(error.into());
        }
    }
    client.flush().session()?;
    Ok(report)
}

/// Runs `df`.
pub fn run_df(arguments: StoreArgs) -> CliResult {
    let mut session = open_session(&arguments, StoreAccess::ReadOnly)?;
    let stats = with_transport!(session, |store| store.stats().session().map_err(Into::into));
    let stats = session.finish(stats)?;
    let block_bytes = u64::from(stats.fs_block_size_bytes);
    if arguments.json {
        println!(
            "{}",
            json!({"block_size_bytes": block_bytes, "total_bytes": stats.fs_block_count * block_bytes,
                   "used_bytes": stats.used_blocks * block_bytes, "free_bytes": stats.free_blocks * block_bytes,
                   "shared_blocks": stats.shared_blocks, "shared_bytes": stats.shared_blocks * block_bytes,
                   "saved_bytes": stats.saved_blocks * block_bytes,
                   "reserved_bytes": stats.reserved_blocks * block_bytes, "file_count": stats.file_count,
                   "commit_sequence": stats.commit_sequence})
        );
    } else {
        println!(
            "{} total, {} used ({} in shared blocks, counted once; \
             sharing saves {}), {} free ({} kept for the next commit), {} file(s), commit {}",
            HumanBytes(stats.fs_block_count * block_bytes),
            HumanBytes(stats.used_blocks * block_bytes),
            HumanBytes(stats.shared_blocks * block_bytes),
            HumanBytes(stats.saved_blocks * block_bytes),
            HumanBytes(stats.free_blocks * block_bytes),
            HumanBytes(stats.reserved_blocks * block_bytes),
            stats.file_count,
            stats.commit_sequence
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_of_known_days() {
        assert_eq!(civil_date_of_days(0), (1970, 1, 1));
        assert_eq!(civil_date_of_days(59), (1970, 3, 1));
        assert_eq!(civil_date_of_days(11_016), (2000, 2, 29));
        assert_eq!(civil_date_of_days(20_780), (2026, 11, 23));
    }

    #[test]
    fn modified_times_say_their_clock() {
        let noon_ns = (20_780 * 86_400 + 12 * 3600 + 34 * 60 + 56) * 1_000_000_000;
        assert_eq!(modified_time_text(noon_ns, false), "2026-11-23 12:34:56");
        assert_eq!(
            modified_time_text(1_500_000_000, true),
            "1.500000 s (device)"
        );
    }

    #[test]
    fn store_names_become_safe_local_components() {
        assert_eq!(local_components("a:b:c").unwrap(), ["a", "b", "c"]);
        for unsafe_name in ["a::b", "a:..:b", ":a", "a:.", "a/b:c", "..", "a:"] {
            assert!(local_components(unsafe_name).is_err(), "{unsafe_name}");
        }
    }
}
