//! A connection's answering thread: takes the engine's completions as they come (in
//! any order) and sends each back under its request id.

use std::sync::Arc;

use crossbeam_channel::Receiver;
use flashpipe_engine::{Completion, EngineError, ReadData, Reply};
use flashpipe_fs::FsckReport;
use flashpipe_protocol::{CheckSummary, DataPayload, Frame, Response};

use crate::connection::Connection;
use crate::engine_errors::remote_error;

/// Sends every completion back until the reading side has gone and the engine has
/// answered everything it took (every sender of `answers` dropped).
pub(crate) fn send_answers(connection: Arc<Connection>, answers: Receiver<Completion>) {
    while let Ok((request_id, result)) = answers.recv() {
        let entry = connection.finish(request_id);
        assert!(
            entry.is_some(),
            "the engine answered request {request_id}, which is not in flight"
        );
        let frame = match result {
            Ok(reply) => Frame::Response {
                request_id,
                response: response(&connection, reply),
            },
            Err(error) => Frame::Error {
                request_id,
                error: remote_error(&error),
            },
        };
        connection.send(&frame);
    }
}

/// The wire answer of an engine reply.
fn response(connection: &Connection, reply: Reply) -> Response {
    match reply {
        Reply::Done => Response::Done,
        Reply::Written { buffer } => Response::Written {
            length_bytes: buffer.len() as u64,
        },
        Reply::Data(data) => Response::Data(payload(connection, data)),
        Reply::Files(files) => Response::Files(
            files
                .into_iter()
                .map(|file| file_payload(connection, file))
                .collect(),
        ),
        Reply::Stat(stat) => Response::Stat(stat),
        Reply::List(stats) => Response::List(stats),
        Reply::Stats(stats) => Response::Stats(stats),
        Reply::Check(report) => Response::Check(check_summary(&report)),
        Reply::Copied(report) => Response::Copied(report),
    }
}

fn file_payload(
    connection: &Connection,
    file: Result<ReadData, EngineError>,
) -> Result<DataPayload, flashpipe_protocol::RemoteError> {
    file.map(|data| payload(connection, data))
        .map_err(|error| remote_error(&error))
}

/// Read data as sent: inline on the copying path.
fn payload(_connection: &Connection, data: ReadData) -> DataPayload {
    DataPayload::Inline(data.bytes().to_vec())
}

fn check_summary(report: &FsckReport) -> CheckSummary {
    CheckSummary {
        clean: report.is_clean(),
        commit_sequence: report.commit_sequence,
        file_count: report.file_count,
        findings: report.findings.iter().map(ToString::to_string).collect(),
        report_text: report.to_string(),
    }
}
