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
//!
//! A module per concern: `put`, `fetch` (`get`, `cat`), `listing` (`ls`, `stat`, `df`),
//! `change` (`rm`, `mv`, `cp`), `names` (what names, prefixes and patterns stand for),
//! `transfer` (files moved in and out, with progress), and `mkfs`, `fsck_cmd`, `info_cmd`.
//! The commands that reach the store through a session are written once over
//! `session::StoreTransport`, for the engine in this process and for a server alike.

mod change;
mod fetch;
mod fsck_cmd;
mod info_cmd;
mod listing;
mod mkfs;
mod names;
mod permissions;
mod put;
pub(crate) mod put_stdin;
mod transfer;

pub use change::{run_cp, run_mv, run_rm};
pub use fetch::{run_cat, run_get};
pub use fsck_cmd::{run_fsck, FsckArgs};
pub use info_cmd::{run_info, InfoArgs};
pub use listing::{run_df, run_ls, run_stat};
pub use mkfs::{run_mkfs, MkfsArgs};
pub use names::{local_components, resolve_input_names};
pub use put::run_put;

use std::path::{Path, PathBuf};

use flashpipe_store::create::{create_store_with_options, CreateOptions};
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
use crate::session::{LiveServer, SessionRequest, StoreSession};
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
