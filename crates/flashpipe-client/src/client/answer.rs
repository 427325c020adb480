//! A request's answer as the client hands it out ([`Response`]): a command's reply over
//! the client's payloads ([`Remote`]: read data as [`ReadView`]s), or the answer to a
//! request about the connection; and the mapping of a decoded answer frame into one
//! (a read window checked against the mapped read pool before it becomes a view).

use std::collections::HashMap;
use std::sync::Arc;

use flashpipe_api::Reply;
use flashpipe_protocol::{
    CancelOutcome, DataPayload, KernelFileOutcome, KernelRunSummary, RegionResponse, WireReply,
    WriteGrant,
};

use super::setup::window_offset;
use super::Client;
use crate::error::ClientError;
use crate::transport::Remote;
use crate::view::{ReadHold, ReadView, ViewBytes};

/// A request's answer: a command's reply, with read data as [`ReadView`]s, or the
/// answer to a request about the connection.
#[derive(Debug)]
pub enum Response {
    /// A command's reply.
    Reply(Reply<Remote>),
    /// A write slot granted.
    Granted(WriteGrant),
    /// What a cancel did.
    Cancel(CancelOutcome),
    /// One input's outcome of a kernel run (more answers follow under the same id).
    KernelFile(KernelFileOutcome),
    /// A kernel run's totals: its last answer.
    KernelSummary(KernelRunSummary),
    /// An answer about destination regions (protocol version 6).
    Region(RegionResponse),
}

impl From<Reply<Remote>> for Response {
    fn from(reply: Reply<Remote>) -> Response {
        Response::Reply(reply)
    }
}

impl Response {
    /// The answer's name, for messages ("data", "granted", ...).
    pub fn name(&self) -> &'static str {
        match self {
            Response::Reply(reply) => reply.name(),
            Response::Granted(_) => "granted",
            Response::Cancel(_) => "cancel-reply",
            Response::KernelFile(_) => "kernel-file",
            Response::KernelSummary(_) => "kernel-summary",
            Response::Region(RegionResponse::Registered { .. }) => "region-registered",
            Response::Region(RegionResponse::ReadIntoDone { .. }) => "read-into-done",
        }
    }
}

impl Client {
    /// The client's answer of a decoded answer frame.
    pub(super) fn response(
        &mut self,
        response: flashpipe_protocol::Response,
    ) -> Result<Response, ClientError> {
        use flashpipe_protocol::Response as Wire;
        Ok(match response {
            Wire::Reply(reply) => Response::Reply(self.reply(reply)?),
            Wire::Granted(grant) => Response::Granted(grant),
            Wire::Cancel(outcome) => Response::Cancel(outcome),
            Wire::KernelFile(outcome) => Response::KernelFile(outcome),
            Wire::KernelSummary(summary) => Response::KernelSummary(summary),
            Wire::Region(region) => Response::Region(region),
            Wire::RingsOpened(_) => {
                return Err(ClientError::Protocol(
                    "a rings-opened answer after the connection was set up".to_string(),
                ))
            }
        })
    }

    /// A command's reply with its read data as views (the windows of one read handle
    /// share one hold).
    fn reply(&mut self, reply: WireReply) -> Result<Reply<Remote>, ClientError> {
        Ok(match reply {
            Reply::Done => Reply::Done,
            Reply::Written { buffer } => Reply::Written { buffer },
            Reply::Data(payload) => Reply::Data(self.view(payload, None)?),
            Reply::Files(files) => {
                let mut holds = HashMap::new();
                Reply::Files(
                    files
                        .into_iter()
                        .map(|file| match file {
                            Ok(payload) => self.view(payload, Some(&mut holds)).map(Ok),
                            Err(error) => Ok(Err(error)),
                        })
                        .collect::<Result<_, _>>()?,
                )
            }
            Reply::Stat(stat) => Reply::Stat(stat),
            Reply::List(stats) => Reply::List(stats),
            Reply::Stats(stats) => Reply::Stats(stats),
            Reply::Check(summary) => Reply::Check(summary),
            Reply::Copied(report) => Reply::Copied(report),
        })
    }

    /// The view of one payload; the windows of a batch share their handle's hold through
    /// `holds`, a single read's (`None`) has its own.
    fn view(
        &mut self,
        payload: DataPayload,
        holds: Option<&mut HashMap<u64, Arc<ReadHold>>>,
    ) -> Result<ReadView, ClientError> {
        let window = match payload {
            DataPayload::Inline(bytes) => return Ok(ReadView::owned(bytes)),
            DataPayload::Shared(window) => window,
        };
        let Some(shared) = &self.shared else {
            return Err(ClientError::Protocol(
                "data by reference on a connection that maps no memory".to_string(),
            ));
        };
        let offset_bytes = window_offset(&shared.read_region, &window).ok_or_else(|| {
            ClientError::Protocol(format!(
                "read window of {} bytes at byte {} of slot {} (handle {}) lies outside the \
                 read pool's slots",
                window.length_bytes, window.window_start, window.slot, window.handle
            ))
        })?;
        let new_hold = || {
            Arc::new(ReadHold {
                mapping: Arc::clone(&shared.read_mapping),
                handle: window.handle,
                releases: Arc::clone(&shared.releases),
            })
        };
        let hold = match holds {
            Some(holds) => Arc::clone(holds.entry(window.handle).or_insert_with(new_hold)),
            None => new_hold(),
        };
        Ok(ReadView {
            bytes: ViewBytes::Shared {
                hold,
                offset_bytes,
                length_bytes: window.length_bytes as usize,
            },
        })
    }
}
