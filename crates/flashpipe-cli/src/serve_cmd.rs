//! `flashpipe serve STORE`: one process owns a store and serves it to many clients.
//!
//! It runs in the foreground: opens the store read-write (`RunningStore`, which takes the
//! store's exclusive lock, so no other process opens it meanwhile), hands it to the server
//! library (`flashpipe_server::Server`), which listens on a Unix socket (by default
//! `flashpipe_client::server_socket_path(STORE)`, beside the store file, where every CLI
//! command looks for it), and logs through `tracing` to standard error. Standard output
//! carries two lines only: the readiness line when clients are accepted, and a summary
//! line when the server has stopped. For a store in the flash-aware layout, what the
//! server did to its flash goes to standard error at the stop, as `flashpipe nbd serve`
//! reports its flash exports (`flash_counters`: a JSON line under `--json`, else a log line). With `$NOTIFY_SOCKET` set (a systemd
//! `Type=notify` unit) it also sends `READY=1` and, on stop, `STOPPING=1`.
//!
//! SIGINT or SIGTERM stops it: no new connections, commands in flight finished, the
//! file system flushed and unmounted cleanly, the socket removed, exit status 0. A second
//! signal exits at once (status 130), leaving the store at its last commit. Signals and
//! logs are `flashpipe_net`'s, shared with `flashpipe nbd serve`.
//! docs/serve.md is the user's guide.

mod notify;
pub(crate) mod readiness;

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use flashpipe_base::wait::{WaitPolicy, SPIN_US_VARIABLE};
use flashpipe_engine::{EngineConfig, Handoff, PoolMemory};
use flashpipe_nbd::server::{NbdServer, ServerConfig as NbdServerConfig};
use flashpipe_net::{logging, signals};
use flashpipe_server::{group_by_name, AccessRule, ServeReport, Server, ServerConfig};
use flashpipe_store::flash_activity::FlashActivityHandle;
use flashpipe_store::store_lock::LockWait;
use flashpipe_store::units::parse_size_bytes;
use flashpipe_store::{RunningStore, StoreAccess};

use crate::error_kind::{ErrorKind, Failure};
use crate::store_cmd::CliResult;
pub use flashpipe_net::LogFormat;
use readiness::{json_line, ExportAddress, Ready, Stopped};

/// `flashpipe serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// The store file written by `flashpipe mkfs`. Optional with --export: a process that
    /// only exports disks over NBD is a disk node (HWFS 3.3.2).
    #[arg(required_unless_present = "nbd_exports")]
    pub store: Option<PathBuf>,
    /// Also export a block device over NBD, NAME=DEVICE: `ram:512MiB`, a file or block
    /// device path, `flash:PRESET[:PATH]`, or `store:STORE.toml[,rw]` (another store's
    /// device stack); repeat for several (`flashpipe nbd serve` has the tuning options).
    #[arg(long = "export", value_name = "NAME=DEVICE")]
    pub nbd_exports: Vec<String>,
    /// TCP address of the NBD server (127.0.0.1:10809 unless only --nbd-socket is given).
    #[arg(long = "nbd", value_name = "ADDRESS", requires = "nbd_exports")]
    pub nbd_address: Option<SocketAddr>,
    /// Unix socket of the NBD server.
    #[arg(long, value_name = "PATH", requires = "nbd_exports")]
    pub nbd_socket: Option<PathBuf>,
    /// Let the NBD server listen beyond loopback without TLS (anyone reaching it may read
    /// and write the exports).
    #[arg(long, requires = "nbd_exports")]
    pub insecure: bool,
    /// Export device paths read-only under a shared lock (beside a store's readers, never
    /// a writer); without it a path export is writable and locked exclusively.
    #[arg(long, requires = "nbd_exports")]
    pub shared: bool,
    /// TLS of the NBD server (`NBD_OPT_STARTTLS`), as `flashpipe nbd serve` has it.
    #[command(flatten)]
    pub nbd_tls: crate::nbd_cmd::NbdTlsArgs,
    /// The Unix socket to listen on. Default: beside the store file (`flashpipe serve`
    /// prints it), where every CLI command looks; a socket elsewhere is for programs that
    /// are given its path.
    #[arg(long)]
    pub socket: Option<PathBuf>,
    /// Let the members of GROUP use the store through the server besides its owner and
    /// root (the socket is then 0660 and owned by GROUP; 0600 otherwise).
    #[arg(long, value_name = "GROUP")]
    pub allow_group: Option<String>,
    /// Most clients connected at once; one more is refused with an error naming this limit.
    #[arg(long)]
    pub max_clients: Option<usize>,
    /// Most connections one local user may hold at once (default: half of --max-clients,
    /// at least 1), so one user cannot take every place; one more is refused with an error
    /// naming this limit.
    #[arg(long)]
    pub max_clients_per_uid: Option<usize>,
    /// Milliseconds a new connection may take to send its hello (default 5000); one that
    /// has not is closed. At either client limit, the oldest connection without a hello is
    /// closed first to make room.
    #[arg(long)]
    pub handshake_timeout_ms: Option<u64>,
    /// Folder where kernel runs through this server spill (a sort's runs). Default: a
    /// private folder (mode 0700) the server makes in the system temporary folder and
    /// removes when it stops. Clients cannot name a folder of their own.
    #[arg(long, value_name = "DIR")]
    pub spill_dir: Option<PathBuf>,
    /// Folder of files kernel runs through this server may read (`queries=NAME` of knn,
    /// `profiles=NAME` of langid), named relative to it; without it a client naming such
    /// a file is refused. Absolute names and `..` are refused.
    #[arg(long, value_name = "DIR")]
    pub kernel_data: Option<PathBuf>,
    /// Most commands one client may have in flight; one more is refused with an error
    /// naming this limit.
    #[arg(long)]
    pub max_in_flight_per_client: Option<usize>,
    /// Most bytes of writes and reads in flight over all clients (e.g. 256MiB).
    #[arg(long)]
    pub max_bytes_in_flight: Option<String>,
    /// Most bytes of writes and reads one client may have in flight (e.g. 64MiB).
    #[arg(long)]
    pub max_bytes_in_flight_per_client: Option<String>,
    /// Most kernel runs (`flashpipe run`) at once over all clients; one more is refused with
    /// an error naming this limit. Each run takes this share of the engine's read buffers.
    #[arg(long)]
    pub max_kernel_runs: Option<usize>,
    /// Most read handles (reads by reference not yet released) over all clients; a read
    /// past it is refused with an error naming this limit.
    #[arg(long)]
    pub max_read_handles: Option<usize>,
    /// Most destination regions one client may hold registered at once (Python's large
    /// reads go straight into such a region; default 8); one more is refused with an error
    /// naming this limit, and the client falls back to a copy.
    #[arg(long)]
    pub max_regions_per_client: Option<usize>,
    /// Most bytes of destination regions one client may hold registered at once, all its
    /// regions together (e.g. 1GiB; default 4GiB). The memory is the client's; the server
    /// maps it, so this bounds the server's address space per client.
    #[arg(long, value_name = "SIZE")]
    pub max_region_bytes_per_client: Option<String>,
    /// Microseconds every waiting thread of the server polls before it sleeps, 0 to 10000:
    /// the engine's hand-off, each client's answering thread, and the reading thread of a
    /// ring client's request ring [default: FLASHPIPE_SPIN_US, else each one's own: the
    /// engine 200, the others 0 (sleep at once)]. Spinning pays only where cores are
    /// spare: see docs/benchmarks.md.
    #[arg(long)]
    pub spin_us: Option<WaitPolicy>,
    /// Milliseconds an answer to a client may wait for the client to read it before the
    /// server closes that client (one that stops reading cannot hold up the others or a
    /// stop).
    #[arg(long)]
    pub send_timeout_ms: Option<u64>,
    /// How logs on standard error are written.
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Print the readiness and stop lines on standard output as JSON objects, one line
    /// each (pid, store, socket, NBD exports and their URIs; the stop counters).
    #[arg(long)]
    pub json: bool,
    /// More log detail: -v logs at debug level, -vv at trace level (info by default).
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Wait for a command using the store to finish instead of failing.
    #[arg(long)]
    pub wait: bool,
    /// Serve the store read-only: it is opened under the shared lock its readers take
    /// (beside other readers, never a writer), nothing is ever written, and every command
    /// that would change it is refused as read-only (a mount of it answers `EROFS`).
    #[arg(long, requires = "store")]
    pub read_only: bool,
    /// Where the engine's read buffers live: `shared` (a memfd mapped into clients, which
    /// get read data by reference) or `heap` (every client gets its data copied through
    /// the socket), to compare the two.
    #[arg(long, value_enum, default_value = "shared")]
    pub read_pool: ReadPoolArg,
}

/// `--read-pool`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReadPoolArg {
    /// Shared memory: data by reference to clients that map it.
    Shared,
    /// The heap: data copied through the socket to every client.
    Heap,
}

impl ServeArgs {
    /// The store served; `run` serves a store only when one is given.
    fn store(&self) -> &Path {
        self.store
            .as_deref()
            .expect("a store is served only when its path is given")
    }
}

impl ReadPoolArg {
    fn pool_memory(self) -> PoolMemory {
        match self {
            ReadPoolArg::Shared => PoolMemory::Shared,
            ReadPoolArg::Heap => PoolMemory::Heap,
        }
    }
}

/// The start both server commands (`serve`, `nbd serve`) share, before they open
/// anything: SIGPIPE ignored, the logging installed, then the SIGINT and SIGTERM
/// handlers (a signal while the stores open is kept for the stop).
pub(crate) fn start_server_process(
    log_format: LogFormat,
    verbose: u8,
) -> Result<signals::StopSignals, Box<dyn std::error::Error>> {
    signals::ignore_closed_pipes();
    logging::install_logging(log_format, verbose)?;
    let stop_signals = signals::StopSignals::install().map_err(|error| {
        Failure::new(
            ErrorKind::Internal,
            format!("cannot install the SIGINT and SIGTERM handlers: {error}"),
        )
    })?;
    Ok(stop_signals)
}

/// Runs `flashpipe serve` until SIGINT or SIGTERM.
pub fn run(arguments: ServeArgs) -> CliResult {
    // Checked before anything is opened: a bad FLASHPIPE_SPIN_US changes nothing.
    spin_setting(arguments.spin_us)?;
    let stop_signals = start_server_process(arguments.log_format, arguments.verbose)?;
    let nbd = start_nbd_exports(&arguments)?;
    if arguments.store.is_none() {
        return serve_disk_node_until_stopped(stop_signals, nbd, &arguments);
    }
    let config = server_config(&arguments)?;
    let store = open_store_to_serve(&arguments)?;
    let flash_activity = store.flash_activity();
    let server = Server::start(store, config)?;
    let stop_handle = server.stop_handle();
    let signal_thread = stop_signals.serve(move |signal| {
        tracing::info!(
            signal = signals::signal_name(signal),
            "stopping: no new connections; finishing commands in flight, then flush and unmount"
        );
        send_notification("STOPPING=1");
        stop_handle.stop();
    });
    announce_readiness(&server, nbd.as_ref(), &arguments)?;
    let report = server.run_until_stopped();
    signal_thread.close();
    let report = report?;
    stop_nbd_exports(nbd);
    if let Some(activity) = flash_activity {
        print_flash_activity(&activity, &arguments);
    }
    print_summary(&report, &arguments)?;
    Ok(())
}

/// Starts the NBD server of `--export`, if any, and prints one line per export.
fn start_nbd_exports(
    arguments: &ServeArgs,
) -> Result<Option<NbdServer>, Box<dyn std::error::Error>> {
    if arguments.nbd_exports.is_empty() {
        if arguments.nbd_tls.is_given() {
            return Err(Failure::new(
                ErrorKind::Usage,
                "the --tls options configure the NBD server of --export, and no --export was given",
            )
            .into());
        }
        return Ok(None);
    }
    if let Some(store) = &arguments.store {
        crate::nbd_cmd::refuse_store_exports_of(&arguments.nbd_exports, store)?;
        crate::nbd_cmd::refuse_device_exports_of(&arguments.nbd_exports, store)?;
    }
    let tls = arguments.nbd_tls.settings()?;
    let exports = crate::nbd_cmd::open_exports(
        &arguments.nbd_exports,
        crate::nbd_cmd::ExportAccess {
            shared: arguments.shared,
            ..crate::nbd_cmd::ExportAccess::default()
        },
    )?;
    let names: Vec<String> = exports.iter().map(|export| export.name.clone()).collect();
    let config = NbdServerConfig {
        tcp_address: crate::nbd_cmd::tcp_address_to_listen_on(
            arguments.nbd_address,
            arguments.nbd_socket.as_deref(),
        ),
        unix_socket_path: arguments.nbd_socket.clone(),
        allow_non_loopback: arguments.insecure,
        tls,
        log_connections: true,
        spin: spin_policy(arguments.spin_us, WaitPolicy::PARK)?,
        ..NbdServerConfig::default()
    };
    let server = NbdServer::start(config, exports)?;
    if !arguments.json {
        for name in &names {
            println!(
                "flashpipe serve: nbd export {name} at {}",
                server.uris(name).join(" ")
            );
        }
    }
    Ok(Some(server))
}

/// The readiness object of this process: its NBD server's addresses and exports, if any.
fn ready_object(nbd: Option<&NbdServer>, arguments: &ServeArgs) -> Ready {
    let mut ready = Ready::new("serve");
    if let Some(server) = nbd {
        ready.nbd_address = server.tcp_address().map(|address| address.to_string());
        ready.nbd_socket = server
            .unix_socket_path()
            .map(|path| path.display().to_string());
        ready.exports = crate::nbd_cmd::export_names(&arguments.nbd_exports)
            .into_iter()
            .map(|name| ExportAddress {
                uris: server.uris(&name),
                name,
            })
            .collect();
    }
    ready
}

/// Stops the NBD server (requests in flight answered, devices flushed and closed).
fn stop_nbd_exports(nbd: Option<NbdServer>) {
    if let Some(server) = nbd {
        drop(server.shutdown());
        tracing::info!("nbd exports stopped");
    }
}

/// A process with no store to serve: its NBD exports until SIGINT or SIGTERM.
fn serve_disk_node_until_stopped(
    stop_signals: signals::StopSignals,
    nbd: Option<NbdServer>,
    arguments: &ServeArgs,
) -> CliResult {
    let (stop_sender, stop_receiver) = std::sync::mpsc::channel();
    let signal_thread = stop_signals.serve(move |signal| {
        tracing::info!(
            signal = signals::signal_name(signal),
            "stopping the NBD exports"
        );
        let _ = stop_sender.send(());
    });
    {
        let mut out = std::io::stdout().lock();
        if arguments.json {
            writeln!(out, "{}", json_line(&ready_object(nbd.as_ref(), arguments)))?;
        } else {
            writeln!(
                out,
                "flashpipe serve: ready: disk node, NBD exports only (pid {})",
                std::process::id()
            )?;
        }
        out.flush()?;
    }
    send_notification("READY=1");
    let _ = stop_receiver.recv();
    send_notification("STOPPING=1");
    stop_nbd_exports(nbd);
    signal_thread.close();
    if arguments.json {
        say_on_stdout(r#"{"event":"stopped","store":null}"#);
    } else {
        say_on_stdout("flashpipe serve: stopped: NBD exports closed");
    }
    Ok(())
}

/// Opens the store read-write (its exclusive lock held until the server closes it), the
/// engine's read pool where `--read-pool` says; logs the opening's notes.
fn open_store_to_serve(arguments: &ServeArgs) -> Result<RunningStore, Box<dyn std::error::Error>> {
    let wait = if arguments.wait {
        LockWait::Wait
    } else {
        LockWait::Fail
    };
    let mut engine_config = EngineConfig {
        read_pool_memory: arguments.read_pool.pool_memory(),
        ..EngineConfig::default()
    };
    if let Some(spin) = spin_setting(arguments.spin_us)? {
        engine_config.handoff = Handoff::from_policy(spin);
    }
    let access = StoreAccess::read_only_if(arguments.read_only);
    let store = RunningStore::open_with(arguments.store(), access, wait, engine_config)?;
    for note in &store.notes {
        tracing::info!(store = %arguments.store().display(), "{note}");
    }
    if let Some(refusal) = store.engine.shared_read_pool_refusal() {
        tracing::warn!(
            %refusal,
            "the read pool is on the heap: clients get their data copied through the socket"
        );
    }
    Ok(store)
}

/// Who may use the store through the server: the store file's owner, root, and the
/// group of `--allow-group`.
fn access_rule(arguments: &ServeArgs) -> Result<AccessRule, Box<dyn std::error::Error>> {
    use std::os::unix::fs::MetadataExt;
    let store = arguments.store();
    let owner_uid = std::fs::metadata(store)
        .map_err(|error| {
            Failure::context(
                &error,
                format!("cannot read the store file {}: {error}", store.display()),
            )
        })?
        .uid();
    let group = match &arguments.allow_group {
        Some(name) => Some(
            group_by_name(name)
                .map_err(|reason| Failure::invalid_input(format!("--allow-group: {reason}")))?,
        ),
        None => None,
    };
    Ok(AccessRule { owner_uid, group })
}

/// The spin window `--spin-us` gives, else the one [`SPIN_US_VARIABLE`] gives; `None`
/// when neither is set (each waiting thread keeps its own default). A bad value in the
/// environment is refused as a bad flag is.
pub(crate) fn spin_setting(given: Option<WaitPolicy>) -> Result<Option<WaitPolicy>, Failure> {
    if given.is_some() {
        return Ok(given);
    }
    match WaitPolicy::from_environment() {
        None => Ok(None),
        Some(Ok(spin)) => Ok(Some(spin)),
        Some(Err(error)) => Err(Failure::invalid_input(format!(
            "{SPIN_US_VARIABLE}: {error}"
        ))),
    }
}

/// [`spin_setting`], or `role_default` when neither the flag nor the environment names one.
pub(crate) fn spin_policy(
    given: Option<WaitPolicy>,
    role_default: WaitPolicy,
) -> Result<WaitPolicy, Failure> {
    Ok(spin_setting(given)?.unwrap_or(role_default))
}

/// The server's configuration from the command line, the library's defaults elsewhere.
fn server_config(arguments: &ServeArgs) -> Result<ServerConfig, Box<dyn std::error::Error>> {
    let mut config = ServerConfig {
        socket_path: arguments
            .socket
            .clone()
            .unwrap_or_else(|| flashpipe_client::server_socket_path(arguments.store())),
        store_description: arguments.store().display().to_string(),
        access: access_rule(arguments)?,
        ..ServerConfig::default()
    };
    if let Some(max_clients) = arguments.max_clients {
        if max_clients == 0 {
            return Err(Failure::invalid_input("--max-clients must be at least 1").into());
        }
        config.max_clients = max_clients;
    }
    if let Some(per_uid) = arguments.max_clients_per_uid {
        if per_uid == 0 {
            return Err(Failure::invalid_input("--max-clients-per-uid must be at least 1").into());
        }
        config.max_clients_per_uid = Some(per_uid);
    }
    if let Some(timeout_ms) = arguments.handshake_timeout_ms {
        if timeout_ms == 0 {
            return Err(Failure::invalid_input("--handshake-timeout-ms must be at least 1").into());
        }
        config.handshake_timeout_ms = timeout_ms;
    }
    config.spill_dir = arguments.spill_dir.clone();
    config.kernel_data_dir = arguments.kernel_data.clone();
    if let Some(max_in_flight) = arguments.max_in_flight_per_client {
        if max_in_flight == 0 {
            return Err(
                Failure::invalid_input("--max-in-flight-per-client must be at least 1").into(),
            );
        }
        config.max_in_flight_per_client = max_in_flight;
    }
    for (option, value, field) in [
        (
            "--max-kernel-runs",
            arguments.max_kernel_runs,
            &mut config.max_kernel_runs,
        ),
        (
            "--max-read-handles",
            arguments.max_read_handles,
            &mut config.max_read_handles,
        ),
        (
            "--max-regions-per-client",
            arguments.max_regions_per_client,
            &mut config.max_regions_per_client,
        ),
    ] {
        if let Some(value) = value {
            if value == 0 {
                return Err(Failure::invalid_input(format!("{option} must be at least 1")).into());
            }
            *field = value;
        }
    }
    if let Some(spin) = spin_setting(arguments.spin_us)? {
        config.spin = spin;
    }
    if let Some(timeout_ms) = arguments.send_timeout_ms {
        if timeout_ms == 0 {
            return Err(Failure::invalid_input("--send-timeout-ms must be at least 1").into());
        }
        config.send_timeout_ms = timeout_ms;
    }
    if let Some(text) = &arguments.max_bytes_in_flight {
        config.max_bytes_in_flight = positive_size("--max-bytes-in-flight", text)?;
    }
    if let Some(text) = &arguments.max_bytes_in_flight_per_client {
        config.max_bytes_in_flight_per_client =
            positive_size("--max-bytes-in-flight-per-client", text)?;
    }
    if let Some(text) = &arguments.max_region_bytes_per_client {
        config.max_region_bytes_per_client = positive_size("--max-region-bytes-per-client", text)?;
    }
    Ok(config)
}

/// A size option's value (`64MiB`), refused when it does not parse or is 0.
fn positive_size(option: &str, text: &str) -> Result<u64, Box<dyn std::error::Error>> {
    let bytes = parse_size_bytes(text)
        .map_err(|error| Failure::invalid_input(format!("{option} \"{text}\": {error}")))?;
    if bytes == 0 {
        return Err(Failure::invalid_input(format!("{option} must be at least 1 byte")).into());
    }
    Ok(bytes)
}

/// Prints the readiness line (standard output, flushed: a supervising script waits for
/// it) and tells a service manager.
fn announce_readiness(
    server: &Server,
    nbd: Option<&NbdServer>,
    arguments: &ServeArgs,
) -> CliResult {
    let pid = std::process::id();
    tracing::info!(
        socket = %server.socket_path().display(),
        store = %arguments.store().display(),
        pid,
        "accepting clients"
    );
    let mut out = std::io::stdout().lock();
    if arguments.json {
        let mut ready = ready_object(nbd, arguments);
        ready.store = Some(arguments.store().display().to_string());
        ready.socket = Some(server.socket_path().display().to_string());
        ready.read_only = arguments.read_only.then_some(true);
        writeln!(out, "{}", json_line(&ready))?;
    } else {
        writeln!(
            out,
            "flashpipe serve: ready: store {}{} on socket {} (pid {pid})",
            arguments.store().display(),
            if arguments.read_only {
                " (read-only)"
            } else {
                ""
            },
            server.socket_path().display()
        )?;
    }
    out.flush()?;
    send_notification("READY=1");
    Ok(())
}

/// Sends a notification to `$NOTIFY_SOCKET` when set; a failure is logged, not fatal.
fn send_notification(message: &str) {
    match notify::notify(message) {
        Ok(true) => tracing::debug!(message, "notified the service manager"),
        Ok(false) => {}
        Err(error) => tracing::warn!("{error}"),
    }
}

/// After a clean stop of a store in the flash-aware layout, before the summary: what the
/// server did to its flash, on standard error (`flash_counters`).
fn print_flash_activity(activity: &FlashActivityHandle, arguments: &ServeArgs) {
    let activity = flashpipe_store::flash_activity::snapshot(activity);
    let (object, text) = crate::nbd_cmd::flash_counters::flash_aware_counters(
        &arguments.store().display().to_string(),
        &activity,
    );
    match arguments.json {
        true => crate::nbd_cmd::flash_counters::write_json_line(&object),
        false => tracing::info!("{text}"),
    }
}

/// The one summary line on standard output after a clean stop.
fn print_summary(report: &ServeReport, arguments: &ServeArgs) -> CliResult {
    let counters = &report.counters;
    tracing::info!(
        clients_total = counters.clients_total,
        clients_refused = counters.clients_refused,
        frames_received = counters.frames_received,
        frames_sent = counters.frames_sent,
        bytes_sent = counters.bytes_sent,
        requests_refused = counters.requests_refused,
        malformed_frames = counters.malformed_frames,
        "stopped; store flushed and unmounted"
    );
    if arguments.json {
        say_on_stdout(&json_line(&Stopped {
            event: "stopped",
            store: arguments.store().display().to_string(),
            clients_total: counters.clients_total,
            clients_refused: counters.clients_refused,
            frames_received: counters.frames_received,
            frames_sent: counters.frames_sent,
            bytes_sent: counters.bytes_sent,
            requests_refused: counters.requests_refused,
            malformed_frames: counters.malformed_frames,
        }));
        return Ok(());
    }
    say_on_stdout(&format!(
        "flashpipe serve: stopped: store {} {}; {} client(s) served, {} refused at the client limit, {} frames in, {} frames out ({} bytes), {} request(s) refused, {} connection(s) ended by malformed frames",
        arguments.store().display(),
        if arguments.read_only {
            "unmounted cleanly (read-only: nothing written)"
        } else {
            "flushed and unmounted cleanly"
        },
        counters.clients_total,
        counters.clients_refused,
        counters.frames_received,
        counters.frames_sent,
        counters.bytes_sent,
        counters.requests_refused,
        counters.malformed_frames
    ));
    Ok(())
}

/// Writes one line on standard output, flushed. A stdout closed by whoever started the
/// server (its readiness line read, the pipe dropped) is no failure of a server stopping
/// cleanly: the line is then only logged.
fn say_on_stdout(line: &str) {
    let mut out = std::io::stdout().lock();
    if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
        tracing::info!("{line}");
    }
}
