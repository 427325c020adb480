//! The client roles of `flashpipe bench serve` that use the server: QD1 reads, streamed
//! 1 MiB reads and random small reads at depth through a `flashpipe-client`, by
//! reference or copying.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use flashpipe_client::{Client, ClientTransport, ConnectOptions, Reply, Request, Response};
use flashpipe_device::SplitMix64;

use super::local::{small_read_offset, FILE_NAME};
use super::roles::{required, BenchServeClientArgs, ClientResult, ClientRole, PreparedClient};
use super::{LARGE_READ_BYTES, ROUNDS};
use crate::pattern::DataPattern;

/// Connects to the server `arguments` names; the closure measures its role.
pub(super) fn prepare_server_client(
    arguments: &BenchServeClientArgs,
) -> Result<PreparedClient, String> {
    let socket = required(&arguments.socket, "--socket")?;
    let options = ConnectOptions {
        map_memory: !arguments.copying,
        client_name: format!(
            "bench serve {:?} (pid {})",
            arguments.role,
            std::process::id()
        ),
        transport: if arguments.socket_frames {
            ClientTransport::Socket
        } else {
            ClientTransport::RingsWhenMapped
        },
        ring_spin_us: arguments.spin_us,
        expect: None,
    };
    let client = Client::connect(socket, options)
        .map_err(|error| format!("connecting to {}: {error}", socket.display()))?;
    let arguments = arguments.clone();
    Ok(Box::new(move || {
        let mut client = client;
        let mut result = match arguments.role {
            ClientRole::ServerQd1 => qd1_rounds(&mut client, &arguments),
            ClientRole::ServerStream if arguments.seconds > 0.0 => {
                let span = Duration::from_secs_f64(arguments.seconds);
                let reads = ReadShape::Sequential;
                reads_in_flight(&mut client, &arguments, StreamLength::For(span), reads)
            }
            ClientRole::ServerStream => stream_rounds(&mut client, &arguments),
            ClientRole::ServerRandom => {
                let span = Duration::from_secs_f64(arguments.seconds);
                let mut generator = SplitMix64::new(arguments.seed);
                let reads = ReadShape::Random {
                    generator: &mut generator,
                    read_bytes: arguments.read_bytes,
                };
                reads_in_flight(&mut client, &arguments, StreamLength::For(span), reads)
            }
            ClientRole::RingEcho | ClientRole::SocketEcho | ClientRole::TmpfsRead => {
                unreachable!("only server roles are prepared here")
            }
        }?;
        result.by_reference = Some(client.is_mapped());
        result.through_rings = Some(client.uses_rings());
        Ok(result)
    }))
}

fn read_request(offset_bytes: u64, length_bytes: u64) -> Request {
    Request::Read {
        name: FILE_NAME.to_string(),
        offset_bytes,
        length_bytes,
    }
}

fn check_response(
    response: Response,
    offset_bytes: u64,
    pattern: &DataPattern,
) -> Result<(), String> {
    match response {
        Response::Reply(Reply::Data(view)) => pattern
            .check(offset_bytes, &view)
            .map_err(|error| error.to_string()),
        _ => Err("the server answered a read with no data".to_string()),
    }
}

/// [`ROUNDS`] rounds of `operations` QD1 reads; the fastest.
fn qd1_rounds(
    client: &mut Client,
    arguments: &BenchServeClientArgs,
) -> Result<ClientResult, String> {
    let pattern = DataPattern::new();
    let mut generator = SplitMix64::new(arguments.seed);
    let mut fastest = ClientResult {
        seconds: f64::MAX,
        ..ClientResult::default()
    };
    for _ in 0..ROUNDS {
        let started = Instant::now();
        for _ in 0..arguments.operations {
            let offset = small_read_offset(&mut generator, arguments.file_bytes);
            let response = client
                .call(read_request(offset, arguments.read_bytes))
                .map_err(|error| error.to_string())?;
            check_response(response, offset, &pattern)?;
        }
        let seconds = started.elapsed().as_secs_f64();
        if seconds < fastest.seconds {
            fastest = ClientResult::local(
                arguments.operations,
                arguments.operations * arguments.read_bytes,
                seconds,
            );
        }
    }
    Ok(fastest)
}

/// How long a stream of reads runs.
#[derive(Clone, Copy)]
enum StreamLength {
    Reads(u64),
    For(Duration),
}

/// [`ROUNDS`] rounds of `operations` streamed reads; the fastest.
fn stream_rounds(
    client: &mut Client,
    arguments: &BenchServeClientArgs,
) -> Result<ClientResult, String> {
    let mut fastest = ClientResult {
        seconds: f64::MAX,
        ..ClientResult::default()
    };
    for _ in 0..ROUNDS {
        let length = StreamLength::Reads(arguments.operations);
        let round = reads_in_flight(client, arguments, length, ReadShape::Sequential)?;
        if round.seconds < fastest.seconds {
            fastest = round;
        }
    }
    Ok(fastest)
}

/// Where a stream's reads fall and how large they are.
enum ReadShape<'a> {
    /// 1 MiB reads one after the other over the file, from its start again at its end.
    Sequential,
    /// `read_bytes` at seeded random offsets aligned to 4 KiB.
    Random {
        generator: &'a mut SplitMix64,
        read_bytes: u64,
    },
}

impl ReadShape<'_> {
    /// The offset and length of read number `index`.
    fn read(&mut self, index: u64, file_bytes: u64) -> (u64, u64) {
        match self {
            ReadShape::Sequential => {
                let reads_in_file = (file_bytes / LARGE_READ_BYTES).max(1);
                ((index % reads_in_file) * LARGE_READ_BYTES, LARGE_READ_BYTES)
            }
            ReadShape::Random {
                generator,
                read_bytes,
            } => (small_read_offset(generator, file_bytes), *read_bytes),
        }
    }
}

/// Reads shaped by `shape`, `depth` in flight, each checked.
fn reads_in_flight(
    client: &mut Client,
    arguments: &BenchServeClientArgs,
    length: StreamLength,
    mut shape: ReadShape<'_>,
) -> Result<ClientResult, String> {
    let pattern = DataPattern::new();
    let depth = u64::from(arguments.depth.max(1));
    let started = Instant::now();
    let keep_submitting = |submitted: u64| match length {
        StreamLength::Reads(count) => submitted < count,
        StreamLength::For(span) => started.elapsed() < span,
    };
    let mut offsets = HashMap::new();
    let (mut submitted, mut completed, mut bytes) = (0u64, 0u64, 0u64);
    loop {
        while submitted - completed < depth && keep_submitting(submitted) {
            let (offset, length_bytes) = shape.read(submitted, arguments.file_bytes);
            bytes += length_bytes;
            let id = client
                .submit(read_request(offset, length_bytes))
                .map_err(|error| error.to_string())?;
            offsets.insert(id, offset);
            submitted += 1;
        }
        if completed == submitted {
            break;
        }
        let (id, answer) = client.wait().map_err(|error| error.to_string())?;
        let offset = offsets
            .remove(&id)
            .ok_or("the server answered a request not in flight")?;
        check_response(answer.map_err(|error| error.to_string())?, offset, &pattern)?;
        completed += 1;
    }
    Ok(ClientResult::local(
        completed,
        bytes,
        started.elapsed().as_secs_f64(),
    ))
}
