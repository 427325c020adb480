//! The campaign's served client: its commands go the way a served client's do, as
//! encoded request frames, through the store server's request rules
//! ([`StoreServerCore`]: admission, byte credits, the in-flight table, the write
//! payload mapped to an engine buffer) to the stepped engine, and its answers come back
//! as encoded answer frames. The link between client and core is perfect (every frame
//! arrives, in order): the core has no rule for a lost frame, the socket below it does
//! (a connection that fails ends). So every campaign runs the real server request code
//! under its faults.
//!
//! What the campaign checks, whichever way a command went, is an [`Answer`].

use std::collections::HashMap;
use std::convert::Infallible;

use flashpipe_device::IoBuf;
use flashpipe_engine::{Command, EngineClient, EngineError, Local, Reply};
use flashpipe_protocol::{
    decode_frame, encode_frame, DataPayload, ErrorCode, Frame, RemoteError, Request, RequestId,
    Response, Wire, WireReply, WritePayload,
};
use flashpipe_server::{inline_reply, CoreHost, CoreLimits, Refused, StoreServerCore};

/// What a command got back, as the campaign checks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    /// Done (create, truncate, delete, rename, flush).
    Done,
    /// A write completed.
    Written,
    /// Read data.
    Data(Vec<u8>),
    /// Each file's data, or its error's text.
    Files(Vec<Result<Vec<u8>, String>>),
    /// Any other answer, by name.
    Other(&'static str),
}

/// A command's answer, or its error's text.
pub(crate) type Outcome = Result<Answer, String>;

impl Answer {
    /// The answer of an engine completion (an in-process client's).
    pub(crate) fn of_engine(result: Result<Reply, EngineError>) -> Outcome {
        Ok(match result.map_err(|error| error.to_string())? {
            Reply::Done => Answer::Done,
            Reply::Written { .. } => Answer::Written,
            Reply::Data(data) => Answer::Data(data.bytes().to_vec()),
            Reply::Files(files) => Answer::Files(
                files
                    .into_iter()
                    .map(|file| {
                        file.map(|data| data.bytes().to_vec())
                            .map_err(|error| error.to_string())
                    })
                    .collect(),
            ),
            other => Answer::Other(other.name()),
        })
    }

    /// The answer of a decoded answer frame (a served client's).
    fn of_frame(frame: Frame) -> Outcome {
        match frame {
            Frame::Response {
                response: Response::Reply(reply),
                ..
            } => Ok(match reply {
                WireReply::Done => Answer::Done,
                WireReply::Written { .. } => Answer::Written,
                WireReply::Data(data) => Answer::Data(inline_bytes(data)?),
                WireReply::Files(files) => Answer::Files(
                    files
                        .into_iter()
                        .map(|file| match file {
                            Ok(data) => inline_bytes(data),
                            Err(error) => Err(error.to_string()),
                        })
                        .collect(),
                ),
                other => Answer::Other(other.name()),
            }),
            Frame::Error { error, .. } => Err(error.to_string()),
            other => Err(format!(
                "a {} frame where an answer was expected",
                other.kind().name()
            )),
        }
    }
}

/// The bytes of inline data (a copying connection gets no other).
fn inline_bytes(data: DataPayload) -> Result<Vec<u8>, String> {
    match data {
        DataPayload::Inline(bytes) => Ok(bytes),
        DataPayload::Shared(_) => Err("data by reference on a copying connection".to_string()),
    }
}

/// The served client's connection as its core sees it: copying (no shared memory), the
/// server-wide byte budget its own limit.
struct CopyingHost;

impl CoreHost for CopyingHost {
    type Engine = Local;

    fn reserve_read_handle(&self) -> Result<bool, RemoteError> {
        Ok(false)
    }

    fn cancel_read_handle(&self) {
        unreachable!("a copying connection reserves no read handle")
    }

    fn forfeit_grant(&self, _slot: u32) {}

    fn take_server_bytes(&self, _bytes: u64) -> Result<(), RemoteError> {
        Ok(())
    }

    fn give_back_server_bytes(&self, _bytes: u64) {}

    fn engine_write(
        &self,
        data: WritePayload,
        _max_write_bytes: u64,
    ) -> Result<IoBuf, RemoteError> {
        match data {
            WritePayload::Inline(bytes) => Ok(IoBuf::from_slice(&bytes)),
            WritePayload::Granted { .. } => Err(RemoteError::new(
                ErrorCode::NotMapped,
                "this connection does not map memory: send data inline with write frames",
            )),
        }
    }
}

/// One served client of the stepped engine (module doc).
pub(crate) struct ServedClient {
    engine: EngineClient,
    core: StoreServerCore,
    next_request_id: RequestId,
    /// The request of each engine ticket.
    requests: HashMap<u64, RequestId>,
    /// Answers not yet taken (refusals, answered at once).
    answered: Vec<(RequestId, Outcome)>,
}

impl ServedClient {
    /// A served client over `engine` (a client of the stepped engine), under `limits`.
    pub(crate) fn new(engine: EngineClient, limits: CoreLimits) -> ServedClient {
        ServedClient {
            engine,
            core: StoreServerCore::new(limits),
            next_request_id: 1,
            requests: HashMap::new(),
            answered: Vec::new(),
        }
    }

    /// Sends `command` as a request frame through the core to the engine; its request
    /// id (its answer, or the core's refusal, comes from [`ServedClient::take_answers`]),
    /// or why it could not be submitted (the engine's queue refused it, or the core
    /// would end the connection).
    pub(crate) fn submit(&mut self, command: Command) -> Result<RequestId, String> {
        let request_id = self.next_request_id;
        self.next_request_id += 1;
        let command = command
            .map_write::<Wire, Infallible>(|data| {
                Ok(WritePayload::Inline(data.as_slice().to_vec()))
            })
            .unwrap_or_else(|never| match never {});
        let bytes = encode_frame(&Frame::Request {
            request_id,
            request: Request::Command(command),
        });
        let command = match decode_frame(&bytes).map_err(|error| error.to_string())? {
            Frame::Request {
                request: Request::Command(command),
                ..
            } => command,
            other => {
                return Err(format!(
                    "a command frame decoded as {}",
                    other.kind().name()
                ))
            }
        };
        match self.core.admit_command(&CopyingHost, request_id, command) {
            Ok(command) => match self.engine.try_submit(command) {
                Ok(ticket) => {
                    self.requests.insert(ticket, request_id);
                }
                Err(error) => {
                    self.core.abandon(&CopyingHost, request_id);
                    return Err(error.to_string());
                }
            },
            Err(Refused::Request(error)) => {
                self.answered.push((request_id, Err(error.to_string())))
            }
            Err(Refused::Connection(error)) => return Err(error.to_string()),
        }
        Ok(request_id)
    }

    /// Every answer that has arrived: the engine's completions answered through the
    /// core as encoded frames, decoded on the client's side.
    pub(crate) fn take_answers(&mut self) -> Vec<(RequestId, Outcome)> {
        while let Some((ticket, result)) = self.engine.try_next_completion() {
            let request_id = self
                .requests
                .remove(&ticket)
                .expect("the engine answers only tickets this client submitted");
            let frame = self
                .core
                .answer(
                    &CopyingHost,
                    request_id,
                    result,
                    |error| error.to_api(),
                    |reply, _| inline_reply(reply),
                )
                .expect("every ticket's request is in flight");
            let outcome = decode_frame(&encode_frame(&frame))
                .map_err(|error| error.to_string())
                .and_then(Answer::of_frame);
            self.answered.push((request_id, outcome));
        }
        std::mem::take(&mut self.answered)
    }
}
