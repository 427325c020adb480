//! A connection's answering thread: takes the engine's completions as they come (in
//! any order) and sends each back under its request id: read data inline on the copying
//! path, or as a window of the shared read pool held under a read handle by reference.
//! For a connection served on the engine thread (`ring_source`) the engine's sink
//! answers with [`answer_one`] itself, and this thread only pushes the frames it handed
//! over because the reply ring had no room (waiting for room, as for every answer here).

use std::sync::Arc;

use crossbeam_channel::{Receiver, RecvTimeoutError, TryRecvError};
use flashpipe_base::{WaitPolicy, Waiter};
use flashpipe_engine::{Completion, EngineError, ReadData, Reply};
use flashpipe_protocol::{
    encode_inline_data, stat_for_version, DataPayload, Frame, RegionResponse, RemoteError,
    Response, SharedWindow, WireReply,
};

use crate::connection::{Connection, InFlight};
use crate::core::inline_reply;
use crate::mapped::Held;

/// Sends every completion back until the reading side has gone and the engine has
/// answered everything it took (every sender of `answers` dropped).
pub(crate) fn send_answers(connection: Arc<Connection>, answers: Receiver<Completion>) {
    let spin = connection.state.config.spin;
    while let Some(next) = next_answer(&connection, &answers, spin) {
        match next {
            Next::Completion((request_id, result)) => answer_one(&connection, request_id, result),
            Next::Deferred(bytes) => connection.send_encoded(&bytes),
        }
    }
    for bytes in connection.deferred_receiver().try_iter() {
        connection.send_encoded(&bytes);
    }
}

/// Sends the answer of one completed request (on this thread, or on the engine
/// thread for a connection served there).
pub(crate) fn answer_one(
    connection: &Connection,
    request_id: u64,
    result: Result<Reply, EngineError>,
) {
    let entry = connection.finish(request_id).unwrap_or_else(|| {
        panic!("the engine answered request {request_id}, which is not in flight")
    });
    let frame = match result {
        Ok(Reply::Data(data)) if entry.into_region => Frame::Response {
            request_id,
            response: Response::Region(RegionResponse::ReadIntoDone {
                length_bytes: data.len() as u64,
            }),
        },
        Ok(Reply::Data(data)) if !entry.holds_handle => {
            connection.send_encoded(&encode_inline_data(request_id, data.bytes()));
            return;
        }
        Ok(reply) => Frame::Response {
            request_id,
            response: response(connection, reply, &entry),
        },
        Err(error) => {
            if entry.holds_handle {
                mapped(connection).cancel_reservation();
            }
            Frame::Error {
                request_id,
                error: error.to_api(),
            }
        }
    };
    connection.send(&frame);
}

/// What the answering thread sends next.
enum Next {
    Completion(Completion),
    /// A frame the engine thread could not push without waiting.
    Deferred(Vec<u8>),
}

/// The next completion or deferred frame: both queues polled for the spin window of
/// wall time, then waited for parked on both; `None` once the completions' queue has
/// no sender left (the deferred frames are drained after).
fn next_answer(
    connection: &Connection,
    answers: &Receiver<Completion>,
    spin: WaitPolicy,
) -> Option<Next> {
    let deferred = connection.deferred_receiver();
    let poll = || match answers.try_recv() {
        Ok(completion) => Some(Some(Next::Completion(completion))),
        Err(TryRecvError::Disconnected) => Some(None),
        Err(TryRecvError::Empty) => deferred
            .try_recv()
            .ok()
            .map(|bytes| Some(Next::Deferred(bytes))),
    };
    let park = || park_for_answer(connection, answers);
    Waiter::new(spin).wait(poll, park).0
}

/// How long the answering thread of a connection without rings parks on its completions
/// alone before it looks whether the connection moved into rings (from then on, frames
/// the engine thread deferred come too).
const PARK_WITHOUT_RINGS_MS: u64 = 10;

/// Parks until the next completion, or, once the connection is on rings, the next
/// completion or deferred frame. Without rings it parks on the completions alone: a wake
/// through a two-queue `select!` costs about twice a plain `recv` here (a served QD1 read
/// on the socket measured 22-34 us against 15 us), and before rings nothing is deferred;
/// it looks again every [`PARK_WITHOUT_RINGS_MS`], so a frame deferred just after the
/// move waits that long at most.
fn park_for_answer(connection: &Connection, answers: &Receiver<Completion>) -> Option<Next> {
    let deferred = connection.deferred_receiver();
    loop {
        if connection.rings().is_some() {
            return crossbeam_channel::select! {
                recv(answers) -> completion => completion.ok().map(Next::Completion),
                recv(deferred) -> bytes => bytes.ok().map(Next::Deferred),
            };
        }
        match answers.recv_timeout(std::time::Duration::from_millis(PARK_WITHOUT_RINGS_MS)) {
            Ok(completion) => return Some(Next::Completion(completion)),
            Err(RecvTimeoutError::Disconnected) => return None,
            Err(RecvTimeoutError::Timeout) => {
                if let Ok(bytes) = deferred.try_recv() {
                    return Some(Next::Deferred(bytes));
                }
            }
        }
    }
}

fn mapped(connection: &Connection) -> &crate::mapped::Mapped {
    connection
        .mapped
        .as_ref()
        .expect("only a mapping connection holds handles and grants")
}

/// The wire answer of an engine reply: the same reply, its payloads mapped (a read's
/// data as windows of the shared read pool when it holds a read handle, else inline; a
/// write's buffer to its length, a granted slot's buffer regranted; a check's report to
/// its summary).
fn response(connection: &Connection, reply: Reply, entry: &InFlight) -> Response {
    Response::Reply(match reply {
        Reply::Written { buffer } if entry.granted_slot.is_some() => {
            let length_bytes = buffer.len() as u64;
            mapped(connection).regrant(buffer);
            WireReply::Written {
                buffer: length_bytes,
            }
        }
        Reply::Data(data) if entry.holds_handle => {
            WireReply::Data(shared_payload(connection, data))
        }
        Reply::Files(files) if entry.holds_handle => {
            WireReply::Files(shared_payloads(connection, files))
        }
        Reply::Stat(stat) => WireReply::Stat(stat_for_version(stat, connection.version)),
        Reply::List(stats) => WireReply::List(
            stats
                .into_iter()
                .map(|stat| stat_for_version(stat, connection.version))
                .collect(),
        ),
        reply => inline_reply(reply),
    })
}

fn inline(data: &ReadData) -> DataPayload {
    DataPayload::Inline(data.bytes().to_vec())
}

/// One read's data as a window of the shared read pool held under the handle reserved
/// at admission (nothing allocated), or inline when it is outside the pool (an empty
/// read; the reservation is given back).
fn shared_payload(connection: &Connection, data: ReadData) -> DataPayload {
    let mapped = mapped(connection);
    let Some((_, slot)) = data.pool_slot() else {
        mapped.cancel_reservation();
        return inline(&data);
    };
    let (window_start, length_bytes) = (data.window_start() as u64, data.len() as u64);
    let handle = mapped.hold(Held::One(data));
    DataPayload::Shared(SharedWindow {
        handle,
        slot,
        window_start,
        length_bytes,
    })
}

/// Windows of the shared read pool for each file read, all held under one handle (the
/// reservation made at admission); data outside the pool (an empty read) goes inline
/// (the inner `Err` of each entry below).
/// Without any pooled data the reservation is given back.
fn shared_payloads(
    connection: &Connection,
    files: Vec<Result<ReadData, EngineError>>,
) -> Vec<Result<DataPayload, RemoteError>> {
    let mapped = mapped(connection);
    let pooled = files
        .iter()
        .any(|file| matches!(file, Ok(data) if data.pool_slot().is_some()));
    if !pooled {
        mapped.cancel_reservation();
        return files
            .into_iter()
            .map(|file| {
                file.map(|data| inline(&data))
                    .map_err(|error| error.to_api())
            })
            .collect();
    }
    let mut windows = Vec::with_capacity(files.len());
    let mut held = Vec::new();
    for file in files {
        windows.push(match file {
            Ok(data) => match data.pool_slot() {
                Some((_, slot)) => {
                    let window = (slot, data.window_start() as u64, data.len() as u64);
                    held.push(data);
                    Ok(Ok(window))
                }
                None => Ok(Err(inline(&data))),
            },
            Err(error) => Err(error.to_api()),
        });
    }
    let handle = mapped.hold(Held::Many(held));
    windows
        .into_iter()
        .map(|window| {
            window.map(|window| match window {
                Ok((slot, window_start, length_bytes)) => DataPayload::Shared(SharedWindow {
                    handle,
                    slot,
                    window_start,
                    length_bytes,
                }),
                Err(inline_payload) => inline_payload,
            })
        })
        .collect()
}
