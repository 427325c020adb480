//! The client side of `flashpipe bench serve`: what one client process (the hidden
//! `flashpipe bench serve-client`) or client thread does. Each role is prepared first
//! (connected, mapped, file opened), then waits for the go, then measures, so every
//! client of a point starts together and no setup is timed.

use std::fs::File;
use std::io::{BufRead, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Instant;

use flashpipe_shm::receive_with_fds;
use flashpipe_shm::ring::attach_received_ring;
use flashpipe_shm::{FrameRing, PushOutcome, RingWait};
use serde::{Deserialize, Serialize};

use super::{LARGE_READ_BYTES, ROUNDS};
use crate::pattern::DataPattern;
use crate::BenchResult;

/// What a client does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClientRole {
    /// Receive two frame rings over the socket and answer every request frame with a
    /// reply frame of the same size until the requests close (the transport's floor).
    RingEcho,
    /// Connect to the socket and write back every frame of `FRAME_BYTES` it reads until
    /// the socket closes (the socket transport's floor).
    SocketEcho,
    /// `pread` 1 MiB at a time from a tmpfs file, `--operations` per round.
    TmpfsRead,
    /// Read `--read-bytes` at a time, one at a time, at seeded random offsets through a
    /// `flashpipe-client` (by reference, or `--copying`), `--operations` per round.
    ServerQd1,
    /// Read 1 MiB at a time, `--depth` in flight, sequentially over the file through a
    /// `flashpipe-client`: `--operations` per round, or for `--seconds`.
    ServerStream,
    /// Read `--read-bytes` at a time at seeded random aligned offsets, `--depth` in flight,
    /// through a `flashpipe-client` for `--seconds`.
    ServerRandom,
}

/// Options of the hidden `flashpipe bench serve-client` (run by `bench serve` itself).
#[derive(Debug, Clone, clap::Args)]
pub struct BenchServeClientArgs {
    /// What to do.
    #[arg(long, value_enum)]
    pub role: ClientRole,
    /// The socket to connect to (the server's, or the ring hand-over socket).
    #[arg(long)]
    pub socket: Option<PathBuf>,
    /// The file to read (a store file name, or a tmpfs path).
    #[arg(long)]
    pub file: Option<String>,
    /// Bytes of that file.
    #[arg(long, default_value_t = 0)]
    pub file_bytes: u64,
    /// Reads (or round trips) per round of a fixed-count measurement.
    #[arg(long, default_value_t = 0)]
    pub operations: u64,
    /// Reads in flight.
    #[arg(long, default_value_t = 1)]
    pub depth: u32,
    /// Seconds of a timed measurement (0: fixed count).
    #[arg(long, default_value_t = 0.0)]
    pub seconds: f64,
    /// Bytes of each read or frame.
    #[arg(long, default_value_t = 0)]
    pub read_bytes: u64,
    /// Data by reference (mapped) or through the socket (copying).
    #[arg(long)]
    pub copying: bool,
    /// A mapping client's frames stay on the socket (not through rings).
    #[arg(long)]
    pub socket_frames: bool,
    /// How long a ring client polls its reply ring before parking, microseconds.
    #[arg(long, default_value_t = flashpipe_shm::DEFAULT_SERVE_RING_SPIN_US)]
    pub spin_us: u32,
    /// Seed of the read offsets.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

impl BenchServeClientArgs {
    /// A role with every other field at its default.
    pub fn new(role: ClientRole) -> BenchServeClientArgs {
        BenchServeClientArgs {
            role,
            socket: None,
            file: None,
            file_bytes: 0,
            operations: 0,
            depth: 1,
            seconds: 0.0,
            read_bytes: 0,
            copying: false,
            socket_frames: false,
            spin_us: flashpipe_shm::DEFAULT_SERVE_RING_SPIN_US,
            seed: 0,
        }
    }

    /// The command line that runs this role in a child process (after `bench serve-client`).
    pub fn to_command_line(&self) -> Vec<String> {
        let role = clap::ValueEnum::to_possible_value(&self.role)
            .expect("every role has a name")
            .get_name()
            .to_string();
        let mut line = vec!["--role".to_string(), role];
        if let Some(socket) = &self.socket {
            line.extend(["--socket".to_string(), socket.display().to_string()]);
        }
        if let Some(file) = &self.file {
            line.extend(["--file".to_string(), file.clone()]);
        }
        for (flag, value) in [
            ("--file-bytes", self.file_bytes.to_string()),
            ("--operations", self.operations.to_string()),
            ("--depth", self.depth.to_string()),
            ("--seconds", self.seconds.to_string()),
            ("--read-bytes", self.read_bytes.to_string()),
            ("--seed", self.seed.to_string()),
            ("--spin-us", self.spin_us.to_string()),
        ] {
            line.extend([flag.to_string(), value]);
        }
        if self.copying {
            line.push("--copying".to_string());
        }
        if self.socket_frames {
            line.push("--socket-frames".to_string());
        }
        line
    }
}

/// What one client measured.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ClientResult {
    /// Operations in the measured span (the fastest round, or the timed span).
    pub operations: u64,
    /// Bytes read in it.
    pub bytes: u64,
    /// Its length in seconds.
    pub seconds: f64,
    /// For server roles: whether the data came by reference (the client mapped the
    /// server's read pool).
    pub by_reference: Option<bool>,
    /// For server roles: whether the frames went through shared-memory rings.
    #[serde(default)]
    pub through_rings: Option<bool>,
}

impl ClientResult {
    /// The result of a role that is not a server's: `operations` moving `bytes` in
    /// `seconds`, nothing by reference or through rings.
    pub fn local(operations: u64, bytes: u64, seconds: f64) -> ClientResult {
        ClientResult {
            operations,
            bytes,
            seconds,
            by_reference: None,
            through_rings: None,
        }
    }

    /// Mean microseconds per operation.
    pub fn us_per_operation(&self) -> f64 {
        self.seconds * 1e6 / self.operations.max(1) as f64
    }

    /// Bytes per second.
    pub fn bytes_per_second(&self) -> f64 {
        self.bytes as f64 / self.seconds.max(1e-12)
    }
}

/// A prepared client: call it at the go to measure.
pub type PreparedClient = Box<dyn FnOnce() -> Result<ClientResult, String> + Send>;

/// Connects, maps or opens what `arguments` names; the returned closure measures.
pub fn prepare_client(arguments: &BenchServeClientArgs) -> Result<PreparedClient, String> {
    check_arguments(arguments)?;
    match arguments.role {
        ClientRole::RingEcho => prepare_ring_echo(arguments),
        ClientRole::SocketEcho => prepare_socket_echo(arguments),
        ClientRole::TmpfsRead => prepare_tmpfs_read(arguments),
        ClientRole::ServerQd1 | ClientRole::ServerStream | ClientRole::ServerRandom => {
            super::client_roles::prepare_server_client(arguments)
        }
    }
}

/// The hidden subcommand: prepare, say `ready` on standard output, wait for a line on
/// standard input, measure, print the result as one JSON line.
pub fn run_client_role(arguments: BenchServeClientArgs) -> BenchResult {
    let prepared = prepare_client(&arguments)?;
    let mut output = std::io::stdout().lock();
    writeln!(output, "ready")?;
    output.flush()?;
    let mut go = String::new();
    if std::io::stdin().lock().read_line(&mut go)? == 0 {
        // The bench ended (or failed) before the go: nothing to measure.
        return Ok(());
    }
    let result = prepared()?;
    writeln!(output, "{}", serde_json::to_string(&result)?)?;
    output.flush()?;
    Ok(())
}

/// Refuses values a role cannot run with (the subcommand is hidden, but a person may
/// still type it).
fn check_arguments(arguments: &BenchServeClientArgs) -> Result<(), String> {
    let echoes = matches!(
        arguments.role,
        ClientRole::RingEcho | ClientRole::SocketEcho
    );
    let reads_file = !echoes;
    let read_bytes = match arguments.role {
        ClientRole::ServerQd1 => arguments.read_bytes,
        _ => LARGE_READ_BYTES,
    };
    if reads_file && (read_bytes == 0 || arguments.file_bytes < read_bytes) {
        return Err(format!(
            "bench serve-client: --file-bytes {} must hold at least one read of {read_bytes} bytes",
            arguments.file_bytes
        ));
    }
    let fixed_count = !echoes && arguments.seconds <= 0.0;
    if fixed_count && arguments.operations == 0 {
        return Err(
            "bench serve-client: --operations must be at least 1 (or give --seconds)".into(),
        );
    }
    if !(0.0..=3600.0).contains(&arguments.seconds) {
        return Err(format!(
            "bench serve-client: --seconds {} is not 0 to 3600",
            arguments.seconds
        ));
    }
    Ok(())
}

pub(super) fn required<'a, T>(value: &'a Option<T>, flag: &str) -> Result<&'a T, String> {
    value
        .as_ref()
        .ok_or_else(|| format!("bench serve-client needs {flag}"))
}

fn prepare_ring_echo(arguments: &BenchServeClientArgs) -> Result<PreparedClient, String> {
    let socket = required(&arguments.socket, "--socket")?;
    let stream = UnixStream::connect(socket)
        .map_err(|error| format!("connecting to {}: {error}", socket.display()))?;
    let mut message = [0u8; 16];
    let (length, fds) = receive_with_fds(&stream, &mut message, 2)
        .map_err(|error| format!("receiving the rings: {error}"))?;
    let region_size_bytes = std::str::from_utf8(&message[..length])
        .ok()
        .and_then(|text| text.parse::<usize>().ok())
        .ok_or("the ring hand-over names no region size")?;
    let [requests_fd, replies_fd]: [OwnedFd; 2] = fds
        .try_into()
        .map_err(|_| "the ring hand-over carries two descriptors".to_string())?;
    let requests =
        attach_received_ring(requests_fd, region_size_bytes).map_err(|e| e.to_string())?;
    let replies = attach_received_ring(replies_fd, region_size_bytes).map_err(|e| e.to_string())?;
    Ok(Box::new(move || echo_until_closed(requests, replies)))
}

fn echo_until_closed(
    mut requests: FrameRing,
    mut replies: FrameRing,
) -> Result<ClientResult, String> {
    let started = Instant::now();
    let mut record = Vec::new();
    let mut operations = 0;
    while requests
        .pop_into(RingWait::DEFAULT, &mut record)
        .map_err(|error| error.to_string())?
    {
        while replies
            .try_push(&record)
            .map_err(|error| error.to_string())?
            == PushOutcome::Full
        {
            std::hint::spin_loop();
        }
        operations += 1;
    }
    Ok(ClientResult::local(
        operations,
        0,
        started.elapsed().as_secs_f64(),
    ))
}

fn prepare_socket_echo(arguments: &BenchServeClientArgs) -> Result<PreparedClient, String> {
    let socket = required(&arguments.socket, "--socket")?;
    let stream = UnixStream::connect(socket)
        .map_err(|error| format!("connecting to {}: {error}", socket.display()))?;
    Ok(Box::new(move || echo_socket_until_closed(stream)))
}

fn echo_socket_until_closed(mut stream: UnixStream) -> Result<ClientResult, String> {
    use std::io::Read;
    let started = Instant::now();
    let mut frame = [0u8; super::ring_floor::FRAME_BYTES];
    let mut operations = 0;
    loop {
        match stream.read_exact(&mut frame) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(error) => return Err(format!("reading a frame to echo: {error}")),
        }
        stream
            .write_all(&frame)
            .map_err(|error| format!("echoing a frame: {error}"))?;
        operations += 1;
    }
    Ok(ClientResult::local(
        operations,
        0,
        started.elapsed().as_secs_f64(),
    ))
}

fn prepare_tmpfs_read(arguments: &BenchServeClientArgs) -> Result<PreparedClient, String> {
    let path = PathBuf::from(required(&arguments.file, "--file")?);
    let file = File::open(&path).map_err(|error| format!("opening {}: {error}", path.display()))?;
    let arguments = arguments.clone();
    Ok(Box::new(move || tmpfs_rounds(&file, &path, &arguments)))
}

/// [`ROUNDS`] rounds of `operations` 1 MiB `pread`s, sequential and wrapping; the fastest.
fn tmpfs_rounds(
    file: &File,
    path: &Path,
    arguments: &BenchServeClientArgs,
) -> Result<ClientResult, String> {
    let pattern = DataPattern::new();
    let reads_in_file = (arguments.file_bytes / LARGE_READ_BYTES).max(1);
    let mut buffer = vec![0u8; LARGE_READ_BYTES as usize];
    let mut fastest: Option<ClientResult> = None;
    let mut read_index = 0u64;
    for _ in 0..ROUNDS {
        let started = Instant::now();
        for _ in 0..arguments.operations {
            let offset = (read_index % reads_in_file) * LARGE_READ_BYTES;
            file.read_exact_at(&mut buffer, offset)
                .map_err(|error| format!("reading {} at {offset}: {error}", path.display()))?;
            pattern
                .check(offset, &buffer)
                .map_err(|error| error.to_string())?;
            read_index += 1;
        }
        let round = ClientResult::local(
            arguments.operations,
            arguments.operations * LARGE_READ_BYTES,
            started.elapsed().as_secs_f64(),
        );
        if fastest
            .as_ref()
            .is_none_or(|best| round.seconds < best.seconds)
        {
            fastest = Some(round);
        }
    }
    Ok(fastest.unwrap_or_default())
}
