//! `flashpipe nbd serve`: exports block devices over the Network Block Device protocol
//! (flashpipe-nbd's server) in the foreground until SIGINT or SIGTERM.
//!
//! Export specs are `NAME=DEVICE`: `ram:SIZE` (a RAM disk), a file or block device path
//! (`file:PATH` or a path), `flash:PRESET[:PATH]` (an emulated flash device of the
//! flash model under the host FTL, the store crate's `--devices` grammar; without a
//! path its pages live in memory), or `store:STORE.toml[,rw]` (a store's whole device
//! stack under the store's locks: `store_export`). Device paths and flash images are
//! locked as a store locks its devices (`path_export`): a device a store holds is
//! refused. One readiness line per export goes to standard
//! output once every listener is bound (`nbd: serving EXPORT at URI ...`); errors go to
//! standard error with a non-zero exit.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use flashpipe_base::WaitPolicy;
use flashpipe_device::paced::DEFAULT_LAG_WARNING_NS;
use flashpipe_device::{BlockDevice, PacedDevice};
use flashpipe_ftl::sectors::SectorDevice;
use flashpipe_nbd::server::tls::{load_rustls_config, TlsMode, TlsSettings};
use flashpipe_nbd::server::{
    parse_export_spec, Export, ExportDeviceSpec, InitialAllocation, NbdServer, ReaderWindow,
    ServerConfig, ServerLimits,
};
use flashpipe_net::signals;
use flashpipe_net::LogFormat;
use flashpipe_store::flash_store::{open_flash_device, FlashDeviceSpec};
use flashpipe_store::store::DeviceCreation;

use crate::error_kind::{ErrorKind, Failure};
use crate::store_cmd::CliResult;

pub(crate) mod flash_counters;
mod path_export;
mod store_export;

use flash_counters::FlashCounters;
use flashpipe_store::store_lock::LockWait;
use path_export::{flash_image_paths, lock_export_paths, open_path_export};
pub use path_export::{refuse_device_exports_of, PathExportError};
pub use store_export::refuse_store_exports_of;
use store_export::{open_store_export, LockedStoreDevice, STORE_EXPORT_KIND};

/// Host requests in flight on an emulated flash export.
const FLASH_EXPORT_QUEUE_DEPTH: u32 = 128;

/// `flashpipe nbd ...`.
#[derive(Debug, Subcommand)]
pub enum NbdCommand {
    /// Serve exports over NBD (TCP and/or a Unix socket) until SIGINT or SIGTERM.
    Serve(ServeArgs),
}

/// `flashpipe nbd serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// An export, NAME=DEVICE: `ram:512MiB`, a file or block device path,
    /// `flash:PRESET[:PATH]`, or `store:STORE.toml[,rw]` (a store's device stack,
    /// read-only unless `,rw`, the store locked meanwhile). Repeat for several; the first
    /// is the default export.
    #[arg(long = "export", value_name = "NAME=DEVICE", required = true)]
    pub exports: Vec<String>,
    /// TCP address to listen on (the NBD port 10809 by default; omitted when only
    /// --socket is given).
    #[arg(long, value_name = "ADDRESS")]
    pub listen: Option<SocketAddr>,
    /// Unix socket path to listen on.
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Allow a TCP address beyond loopback without TLS required (anyone reaching it may
    /// read and write the exports).
    #[arg(long)]
    pub insecure: bool,
    /// TLS (`NBD_OPT_STARTTLS`).
    #[command(flatten)]
    pub tls: NbdTlsArgs,
    /// Most connections open at once.
    #[arg(long, default_value_t = ServerLimits::default().max_connections)]
    pub max_connections: usize,
    /// Most requests in flight per connection.
    #[arg(long, default_value_t = ServerLimits::default().max_requests_per_connection)]
    pub max_requests_per_connection: usize,
    /// Serve every export read-only (device paths under a shared lock).
    #[arg(long)]
    pub read_only: bool,
    /// Export device paths read-only under a shared lock, the lock a store's readers take:
    /// a path a store's readers hold can be exported beside them (never while a writer
    /// holds it). Without it a path export is writable and locked exclusively.
    #[arg(long)]
    pub shared: bool,
    /// The hand-off spin: microseconds the device workers and reply writers poll their
    /// queues before parking, 0 to 10000 [default: FLASHPIPE_SPIN_US, else 0: park at
    /// once]. Requests a reader cannot serve itself pass without a wake, at the price of a
    /// busy core for the window.
    #[arg(long)]
    pub spin_us: Option<WaitPolicy>,
    /// The reader window: microseconds a connection's reader polls its socket for the next
    /// request before it blocks, 0 to 10000, or `auto` [default: auto: 200 on a machine of
    /// 2 cores or more, else 0]. Saves a wake per request at queue depth 1; readers spin
    /// only while the connections are at most half the cores, at most that many at once
    /// over every server on the machine. 0 turns it off.
    #[arg(long, value_name = "US|auto")]
    pub reader_window_us: Option<ReaderWindow>,
    /// Pace every `flash:` export against the wall clock (real-time emulation): each
    /// completion is released at its modeled instant, so clients see the preset's latency
    /// and bandwidth.
    #[arg(long)]
    pub realtime: bool,
    /// Print readiness on standard output as one JSON object (pid, addresses, each
    /// export's URIs) and the stop on standard error as JSON lines, instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The NBD server's TLS options, shared by `flashpipe nbd serve` and
/// `flashpipe serve --export`.
#[derive(Debug, Clone, Default, Args)]
pub struct NbdTlsArgs {
    /// The NBD server's TLS certificate chain (PEM); enables NBD_OPT_STARTTLS.
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    pub tls_certificate: Option<PathBuf>,
    /// The private key of --tls-certificate (PEM).
    #[arg(long, value_name = "PEM", requires = "tls_certificate")]
    pub tls_key: Option<PathBuf>,
    /// Admit only TLS clients with a certificate signed by this certificate authority
    /// (PEM).
    #[arg(long, value_name = "PEM", requires = "tls_certificate")]
    pub tls_client_ca: Option<PathBuf>,
    /// Whether clients must upgrade to TLS before any other option (`required`, the
    /// default with a certificate) or may (`optional`).
    #[arg(long = "tls", value_name = "MODE", requires = "tls_certificate")]
    pub tls_mode: Option<TlsModeArgument>,
}

impl NbdTlsArgs {
    /// Whether any TLS option was given.
    pub fn is_given(&self) -> bool {
        self.tls_certificate.is_some()
            || self.tls_key.is_some()
            || self.tls_client_ca.is_some()
            || self.tls_mode.is_some()
    }

    /// The server's TLS settings: `None` without a certificate; an error naming the file
    /// that cannot be read.
    pub fn settings(&self) -> Result<Option<TlsSettings>, Box<dyn std::error::Error>> {
        let (Some(certificate), Some(key)) = (&self.tls_certificate, &self.tls_key) else {
            return Ok(None);
        };
        let rustls_config = load_rustls_config(certificate, key, self.tls_client_ca.as_deref())?;
        let mode = match self.tls_mode {
            Some(TlsModeArgument::Optional) => TlsMode::Optional,
            Some(TlsModeArgument::Required) | None => TlsMode::Required,
        };
        Ok(Some(TlsSettings {
            rustls_config,
            mode,
        }))
    }
}

/// `--tls required|optional`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum TlsModeArgument {
    /// Every option but STARTTLS and ABORT before TLS is refused (FORCEDTLS).
    Required,
    /// Clients may upgrade; plaintext clients are served too.
    Optional,
}

/// Runs an `nbd` command.
pub fn run(command: NbdCommand) -> CliResult {
    match command {
        NbdCommand::Serve(arguments) => serve(arguments),
    }
}

fn serve(arguments: ServeArgs) -> CliResult {
    if arguments.max_connections == 0 || arguments.max_requests_per_connection == 0 {
        return Err(Failure::invalid_input(
            "--max-connections and --max-requests-per-connection must be at least 1",
        )
        .into());
    }
    // Checked before anything is opened: a bad FLASHPIPE_SPIN_US changes nothing.
    let spin = crate::serve_cmd::spin_policy(arguments.spin_us, WaitPolicy::PARK)?;
    let tcp_address = tcp_address_to_listen_on(arguments.listen, arguments.socket.as_deref());
    if arguments.realtime
        && !arguments.exports.iter().any(|spec| {
            spec.split_once('=')
                .is_some_and(|(_, device)| device.starts_with("flash:"))
        })
    {
        return Err(Failure::invalid_input(
            "--realtime paces emulated flash exports (NAME=flash:PRESET[:PATH]); none was given",
        )
        .into());
    }
    let log_format = match arguments.json {
        true => LogFormat::Json,
        false => LogFormat::Text,
    };
    let stop_signals = crate::serve_cmd::start_server_process(log_format, 0)?;
    let (exports, flash_counters) = open_counted_exports(
        &arguments.exports,
        ExportAccess {
            read_only: arguments.read_only,
            shared: arguments.shared,
            realtime: arguments.realtime,
        },
    )?;
    let tls = arguments.tls.settings()?;
    let names: Vec<String> = exports.iter().map(|export| export.name.clone()).collect();
    let config = ServerConfig {
        tcp_address,
        unix_socket_path: arguments.socket.clone(),
        allow_non_loopback: arguments.insecure,
        tls,
        limits: ServerLimits {
            max_connections: arguments.max_connections,
            max_requests_per_connection: arguments.max_requests_per_connection,
            ..ServerLimits::default()
        },
        log_connections: true,
        spin,
        reader_window: arguments.reader_window_us.unwrap_or_default(),
    };
    let server = NbdServer::start(config, exports)?;
    if arguments.json {
        let mut ready = crate::serve_cmd::readiness::Ready::new("nbd serve");
        ready.nbd_address = server.tcp_address().map(|address| address.to_string());
        ready.nbd_socket = server
            .unix_socket_path()
            .map(|path| path.display().to_string());
        ready.exports = names
            .iter()
            .map(|name| crate::serve_cmd::readiness::ExportAddress {
                name: name.clone(),
                uris: server.uris(name),
            })
            .collect();
        println!("{}", crate::serve_cmd::readiness::json_line(&ready));
    } else {
        for name in &names {
            println!("nbd: serving {name} at {}", server.uris(name).join(" "));
        }
        println!("nbd: ready (SIGINT or SIGTERM stops)");
    }
    let (stop_sender, stop_receiver) = std::sync::mpsc::channel();
    let signal_thread = stop_signals.serve(move |signal| {
        let _ = stop_sender.send(signal);
    });
    let signal = stop_receiver.recv().map_err(|_| {
        Failure::new(
            ErrorKind::Internal,
            "the signal thread ended before a stop signal came",
        )
    })?;
    stop_line(
        arguments.json,
        serde_json::json!({"event": "stopping", "signal": signals::signal_name(signal)}),
        &format!(
            "nbd: {}: answering requests in flight, flushing, stopping",
            signals::signal_name(signal)
        ),
    );
    let devices = server.shutdown();
    // Dropping a flash export closes its FTL, which refreshes its counters a last time.
    drop(devices);
    for counters in &flash_counters {
        counters.report(arguments.json);
    }
    stop_line(
        arguments.json,
        serde_json::json!({"event": "stopped"}),
        "nbd: stopped",
    );
    signal_thread.close();
    Ok(())
}

/// One stop line: with `--json`, `object` as a JSON log line of its own (the shape the
/// readiness object has: `event` and its fields at the top), else an `info` log event.
fn stop_line(json: bool, object: serde_json::Value, text: &str) {
    if json {
        let mut standard_error = std::io::stderr().lock();
        let _ = writeln!(standard_error, "{object}");
    } else {
        tracing::info!("{text}");
    }
}

/// The export names of `NAME=DEVICE` specs, in order.
pub fn export_names(specs: &[String]) -> Vec<String> {
    specs
        .iter()
        .filter_map(|spec| spec.split_once('=').map(|(name, _)| name.to_string()))
        .collect()
}

/// The TCP address an NBD server listens on: `listen`, or none when only a Unix `socket`
/// is given, or loopback on the NBD port when neither is.
pub fn tcp_address_to_listen_on(
    listen: Option<SocketAddr>,
    socket: Option<&Path>,
) -> Option<SocketAddr> {
    match (listen, socket) {
        (Some(address), _) => Some(address),
        (None, Some(_)) => None,
        (None, None) => Some(SocketAddr::from((
            [127, 0, 0, 1],
            flashpipe_nbd::wire::NBD_DEFAULT_PORT,
        ))),
    }
}

/// How `open_exports` opens its exports.
#[derive(Debug, Clone, Copy, Default)]
pub struct ExportAccess {
    /// Every export read-only (device paths locked shared).
    pub read_only: bool,
    /// Device paths read-only, locked shared (other kinds as they are).
    pub shared: bool,
    /// Flash exports paced in real time.
    pub realtime: bool,
}

/// Opens every export of `specs` (`NAME=DEVICE`) as `access` asks, device paths under
/// their locks.
pub fn open_exports(
    specs: &[String],
    access: ExportAccess,
) -> Result<Vec<Export>, Box<dyn std::error::Error>> {
    Ok(open_counted_exports(specs, access)?.0)
}

/// [`open_exports`], with a handle on the FTL counters of each flash export.
fn open_counted_exports(
    specs: &[String],
    access: ExportAccess,
) -> Result<(Vec<Export>, Vec<FlashCounters>), Box<dyn std::error::Error>> {
    let mut exports = Vec::with_capacity(specs.len());
    let mut counters = Vec::new();
    for spec in specs {
        let mut export = open_export(spec, access, &mut counters)?;
        export.read_only |= access.read_only;
        exports.push(export);
    }
    Ok((exports, counters))
}

fn open_export(
    spec: &str,
    access: ExportAccess,
    counters: &mut Vec<FlashCounters>,
) -> Result<Export, Box<dyn std::error::Error>> {
    let (name, device_spec) = parse_export_spec(spec)?;
    match &device_spec {
        ExportDeviceSpec::Other { kind, rest } if kind == "flash" => {
            let (export, flash_counters) = open_flash_export(&name, rest, access.realtime)?;
            counters.push(flash_counters);
            Ok(export)
        }
        ExportDeviceSpec::Other { kind, rest } if kind == STORE_EXPORT_KIND => {
            open_store_export(&name, rest)
        }
        ExportDeviceSpec::Other { kind, .. } => Err(Failure::invalid_input(format!(
            "export `{spec}`: unknown device kind `{kind}` (ram:SIZE, a path, file:PATH, flash:PRESET[:PATH] or store:STORE.toml[,rw])"
        ))
        .into()),
        ExportDeviceSpec::File { path } => open_path_export(
            &name,
            &device_spec,
            path,
            access.read_only || access.shared,
        ),
        ExportDeviceSpec::Ram { .. } => Ok(Export::open(&name, &device_spec)?),
    }
}

fn open_flash_export(
    name: &str,
    entry: &str,
    realtime: bool,
) -> Result<(Export, FlashCounters), Box<dyn std::error::Error>> {
    let spec = FlashDeviceSpec::parse_entry(entry).map_err(|reason| {
        Failure::invalid_input(format!("export `{name}=flash:{entry}`: {reason}"))
    })?;
    let fresh = spec.path.as_ref().is_none_or(|path| !path.exists());
    let image_paths = spec
        .path
        .as_deref()
        .map(flash_image_paths)
        .unwrap_or_default();
    let mut lock = lock_export_paths(name, &image_paths, true)?;
    let store_file = Path::new("nbd-export");
    let device = open_flash_device(
        &spec,
        store_file,
        &format!("flash export {name}"),
        FLASH_EXPORT_QUEUE_DEPTH,
        // Creation formats the FTL: only for an image not made yet; an existing one is
        // mounted (recovering from a crash if need be) and keeps its data.
        if fresh {
            DeviceCreation::CreateMissing
        } else {
            DeviceCreation::MustExist
        },
    )?;
    // A fresh image exists now: lock what the first call found missing.
    lock.lock_all(&image_paths, LockWait::Fail)?;
    let stats = device.stats_handle();
    // 512-byte requests, merged into pages by the FTL's read-merge-write.
    let device = SectorDevice::new(device)?;
    let (device, pacing): (Box<dyn BlockDevice>, &str) = if realtime {
        let paced = PacedDevice::new(device, DEFAULT_LAG_WARNING_NS);
        (Box::new(paced), ", paced in real time")
    } else {
        (Box::new(device), "")
    };
    let device = Box::new(LockedStoreDevice::new(device, lock));
    let export = Export {
        name: name.to_string(),
        description: format!(
            "flashpipe emulated flash ({}) under the host FTL{pacing}",
            spec.describe()
        ),
        device,
        read_only: false,
        trim_reads_zeroes: true,
        initial_allocation: if fresh {
            InitialAllocation::AllHoles
        } else {
            InitialAllocation::AllData
        },
    };
    let counters = FlashCounters {
        export: name.to_string(),
        stats,
    };
    Ok((export, counters))
}
